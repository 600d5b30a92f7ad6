// FaultService: cruxd's host for automatic link health (docs/faults.md). The rules are core's
// (core::FaultManager, driven through core::ControlLoop, which ControlHost owns); this module
// applies their decisions and the admin pins:
//
//   gateway (SwitchTelemetry, Heartbeat.flows) -> ControlHost::Observe* (arms its faults timer)
//   faults timer at ControlLoop::faults_due() (at once after a link-state change or an admin pin,
//     at most every faults.evaluate_interval_ms for flow and counter data)
//     -> ControlLoop::EvaluateFaults() -> Apply: each decision -> TopologyManager::SetEffective (a
//     new topology version: the control host's next run uses a fresh policy seeded with the plan
//     in force, and the loop drops the seeds of the jobs crossing the link, so only they move),
//     an audit row (job_id "link:<a->b>", the reason), a log line, a metric
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

#include <cstdint>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/faults/fault_manager.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/link_name.h"
#include "crux/daemon/control/control_host.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/state/topology_manager.h"
#include "crux/daemon/store/store.h"
#include "crux/daemon/store/store_health.h"
#include "crux/daemon/store/store_writer.h"

namespace crux::daemon {

class FaultService {
 public:
  // Every pointer must outlive the service; `metrics` may be null.
  FaultService(ControlHost* control, TopologyManager* topo, EventLoop* loop, Metrics* metrics,
               StoreWriter* writer, StoreHealth* store_health)
      : control_(control),
        topo_(topo),
        loop_(loop),
        metrics_(metrics),
        writer_(writer),
        store_health_(store_health) {}
  FaultService(const FaultService&) = delete;
  FaultService& operator=(const FaultService&) = delete;

  // The fault rules' decisions (ControlHost's faults timer, SetAdmin, HandBack): applies them to
  // the topology, audits and logs them, and updates the fault metrics (also when there are
  // none). Returns the links whose health in force changed.
  std::vector<core::LinkId> Apply(const std::vector<core::LinkDecision>& decisions);

  // cruxctl set-link LINK HEALTH: pins the named link(s) ("a->b", "a-b"); persisted. Returns the
  // directed links whose health in force changed (already applied). Errors: kNotFound (no such
  // link), kInvalidArgument (DEGRADED capacity out of range, naming the field and the range):
  // a DEGRADED capacity must lie in [faults.min_capacity_fraction x nominal, nominal] of every
  // direction named (the floor the automatic estimates use; 1 % by default; see Floored).
  core::Result<std::vector<core::LinkId>> SetAdmin(const std::string& name, core::LinkHealth health,
                                                   double capacity_bps);
  // cruxctl set-link LINK auto: hands the link(s) back to automatic control; the persisted pin
  // is deleted. Returns the links whose health in force changed.
  core::Result<std::vector<core::LinkId>> HandBack(const std::string& name);
  // Start-up: a stored pin (already applied to the topology by TopologyManager::Restore).
  void RestoreAdmin(const LinkOverride& o);
  // Start-up, before both restores: a stored DEGRADED pin below the capacity floor (stored by a
  // cruxd without it, or under a lower faults.min_capacity_fraction) raised to it, with a
  // warning; any other row as it is.
  LinkOverride Floored(LinkOverride o) const;

  uint64_t automatic_changes() const { return automatic_changes_; }

 private:
  // The floor of a DEGRADED capacity, as a fraction of nominal (FaultOptions in force).
  double MinCapacityFraction() const;

  ControlHost* control_;
  TopologyManager* topo_;
  EventLoop* loop_;
  Metrics* metrics_;
  StoreWriter* writer_;
  StoreHealth* store_health_;
  uint64_t automatic_changes_ = 0;
  uint64_t disbelieved_seen_ = 0;  // FaultManager::disbelieved_reports() at the last Apply.
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_FAULT_SERVICE_H_
