// Enforcer: sends what the plan decided. Assignment pushes go to the peer that speaks for each
// job (acks are tracked by the JobTracker); switch agents that said SwitchHello are kept in a
// registry (for `cruxctl switches`) and get their desired SwitchQosState.
//
// Desired switch state: core::ComputeDesiredQos over the daemon's QoS config (`qos:` in
// cruxd.yaml) and the applied plan (core::QosJobsFromPlan: each job's DSCP colour from the
// DscpPool, its applied level, the switches its flows cross). UpdateDesired() recomputes every
// switch's state, and only the switches core::ChangedSwitches names get a push (stamped with the
// epoch of that change: a switch's `desired_epoch` is the epoch at which its state last
// changed). A new or returning agent (first hello since cruxd started, after being silent for
// kAgentStaleMs, from a new peer, or reporting an older applied epoch than before, i.e. the agent
// restarted) gets its full state; so does an agent whose periodic hello reports an applied epoch
// older than its switch's desired_epoch without a failure pending (a lost push), or an applied
// state id other than the daemon's (its state came from before a state reset). An agent that
// reported a failed apply retries on its own; its error is kept as `last_error` until an apply
// succeeds.
//
// Until the first plan after start (`qos_ready()`), there is no desired state to push (a
// restarted cruxd must not push a state that ignores its restored jobs); hellos are recorded and
// the first UpdateDesired() pushes to every known agent.
//
// Thread-safety: loop thread only. The topology must outlive the enforcer.
#ifndef CRUX_DAEMON_ENFORCER_H_
#define CRUX_DAEMON_ENFORCER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/qos.h"
#include "crux/core/status.h"
#include "crux/core/topology.h"
#include "crux/daemon/job_tracker.h"
#include "crux/daemon/metrics.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

using Sender = std::function<core::Status(const std::string& peer, const v1::Envelope& msg)>;

// An agent not heard from for this long shows as disconnected, and its next hello counts as a
// return (full state push, "connected" log line).
inline constexpr int64_t kAgentStaleMs = 15000;

struct SwitchEntry {
  std::string name;
  std::string peer;
  v1::SwitchCapabilities capabilities;
  uint64_t applied_epoch = 0;  // Last epoch the agent reported applied (hello or SwitchApplied).
  std::string last_error;      // Of the last failed SwitchApplied; "" after a success.
  int64_t last_seen_ms = 0;
  bool connected = true;
  // Reconciliation reports (SwitchApplied.reconcile / drifted_fields).
  uint64_t drift_repairs = 0;
  int64_t last_drift_ms = 0;
  uint32_t last_drifted_fields = 0;
};

class Enforcer {
 public:
  // `topo`: the nominal topology (its network switches are the switches); must outlive this.
  // `qos` must be valid (core::ValidateQosConfig).
  Enforcer(Metrics* metrics, const core::Topology* topo, core::QosConfig qos);

  void SetSender(Sender s) { sender_ = std::move(s); }
  // The daemon's state id, stamped on every push (Assignment and SwitchQosState).
  void SetStateId(uint64_t id) { state_id_ = id; }
  // Live reload; takes effect at the next UpdateDesired(). REQUIRES: valid, same dscp_pool.
  void SetQosConfig(const core::QosConfig& qos) { qos_ = qos; }
  const core::QosConfig& qos_config() const { return qos_; }

  // Queues `a` for `peer`, stamping the state id and a.sent_unix_ns (wall clock, just before the
  // send).
  // False when there is no peer or the transport refused it.
  bool Push(const std::string& peer, v1::Assignment a);

  // Records a hello. Returns the push to send after the reply (the switch's full state), if one
  // is due (see the file comment). *returning: a new or returning agent.
  std::optional<v1::Envelope> OnHello(const v1::SwitchHello& h, const std::string& peer,
                                      int64_t unix_ms, bool* returning);
  Refusal OnApplied(const v1::SwitchApplied& a, const std::string& peer, int64_t unix_ms);

  // Recomputes the desired state of every switch for `jobs` (levels and colours as applied) and
  // pushes to the connected agents of the switches whose state changed, stamped `epoch`.
  // `push`: false computes only (dry run). Errors (bad config or job) keep the previous state.
  // Returns the names of the changed switches.
  core::Result<std::vector<std::string>> UpdateDesired(uint64_t epoch,
                                                       const std::vector<core::QosJob>& jobs,
                                                       bool push = true);

  // The same in two steps, so that a caller can look at the changes before committing them
  // without computing the desired state twice (ComputeDesiredQos is O(jobs x switches)).
  struct PendingState {
    std::map<std::string, core::SwitchQosState> next;
    std::vector<std::string> changed;
  };
  core::Result<PendingState> ComputeDesired(const std::vector<core::QosJob>& jobs) const;
  // Installs `p` as the desired state at `epoch` and pushes to the changed switches.
  std::vector<std::string> Commit(uint64_t epoch, PendingState p);

  bool qos_ready() const { return ready_; }
  const std::map<std::string, core::SwitchQosState>& desired() const { return desired_; }
  // Epoch at which `name`'s desired state last changed (0: never computed).
  uint64_t desired_epoch(const std::string& name) const;

  // `shared_jobs`: DscpPool::SharedJobs() (jobs sharing a colour), reported on every row.
  std::vector<v1::SwitchInfo> Switches(uint32_t shared_jobs, int64_t now_ms) const;
  size_t switch_count() const { return switches_.size(); }
  uint64_t pushes() const { return pushes_; }
  uint64_t push_failures() const { return push_failures_; }
  uint64_t switch_pushes() const { return switch_pushes_; }

 private:
  v1::Envelope StateEnvelope(const std::string& name) const;
  void PushState(SwitchEntry& e);

  Metrics* metrics_;
  const core::Topology* topo_;
  core::QosConfig qos_;
  Sender sender_;
  uint64_t state_id_ = 0;
  std::map<std::string, SwitchEntry> switches_;
  std::map<std::string, core::SwitchQosState> desired_;
  std::map<std::string, uint64_t> desired_epoch_;
  bool ready_ = false;
  uint64_t pushes_ = 0;
  uint64_t push_failures_ = 0;
  uint64_t switch_pushes_ = 0;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_ENFORCER_H_
