// FaultService: cruxd's host for automatic link health (docs/faults.md). The rules are core's
// (core::FaultManager, driven through core::ControlLoop); this module only routes:
//
//   gateway (SwitchTelemetry, Heartbeat.flows) -> ControlLoop::Observe* -> Kick()
//   timer at ControlLoop::faults_due() (at once after a link-state change or an admin pin, at
//     most every faults.evaluate_interval_ms for flow and counter data)
//     -> ControlLoop::EvaluateFaults() -> each decision: TopologyManager::SetEffective (a new
//     topology version: the control host's next run uses a fresh policy seeded with the plan in
//     force, and the loop drops the seeds of the jobs crossing the link, so only they move),
//     an audit row (job_id "link:<a->b>", the reason), a log line, a metric -> ControlHost::Kick()
//   cruxctl set-link -> SetAdmin (pin up / down / degraded, persisted in link_state) or
//     HandBack (set-link ... auto: the pin is deleted and the automatic state applies).
//
// Automatic states are not persisted: after a restart the switch agents report their ports again
// (each telemetry report carries every watched port) and the jobs their flows, so the state is
// rebuilt from fresh signals; admin pins are restored from the store (RestoreAdmin).
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_CONTROL_FAULT_SERVICE_H_
#define CRUX_DAEMON_CONTROL_FAULT_SERVICE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/faults/fault_manager.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/link_name.h"

namespace crux::daemon {

struct DaemonContext;
struct LinkOverride;

class FaultService {
 public:
  explicit FaultService(DaemonContext* ctx);
  ~FaultService();
  FaultService(const FaultService&) = delete;
  FaultService& operator=(const FaultService&) = delete;

  // After signals or options changed: arms the timer for the loop's faults_due().
  void Kick();
  // Runs the evaluation now if due (tests call it after advancing a ManualEventLoop).
  void EvaluateNow();

  // cruxctl set-link LINK HEALTH: pins the named link(s) ("a->b", "a-b"); persisted. Returns the
  // directed links whose health in force changed (already applied). Errors: kNotFound (no such
  // link), kInvalidArgument (DEGRADED capacity out of range), naming the field.
  core::Result<std::vector<core::LinkId>> SetAdmin(const std::string& name, core::LinkHealth health,
                                                   double capacity_bps);
  // cruxctl set-link LINK auto: hands the link(s) back to automatic control; the persisted pin
  // is deleted. Returns the links whose health in force changed.
  core::Result<std::vector<core::LinkId>> HandBack(const std::string& name);
  // Start-up: a stored pin (already applied to the topology by TopologyManager::Restore).
  void RestoreAdmin(const LinkOverride& o);

  uint64_t automatic_changes() const { return automatic_changes_; }

 private:
  void Fire(uint64_t generation);
  // Applies decisions to the topology, audits and logs them; kicks the planner. Returns the
  // changed links.
  std::vector<core::LinkId> Apply(const std::vector<core::LinkDecision>& decisions);

  DaemonContext* ctx_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // Timers check it.
  bool armed_ = false;
  core::Duration armed_for_;
  uint64_t generation_ = 0;
  uint64_t automatic_changes_ = 0;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_FAULT_SERVICE_H_
