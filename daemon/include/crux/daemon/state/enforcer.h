// Enforcer: sends what the control loop decided. Assignment pushes go to the connection that
// speaks for each job (acks are tracked by the JobTracker); switch agents that said SwitchHello
// are kept in a registry (for `cruxctl switches`) and get their desired SwitchQosState.
//
// Desired switch state: decided by core::ControlLoop (it computes every switch's state with
// core::ComputeDesiredQos in each run and the switches whose state changed); Commit() installs
// it and pushes to the changed switches, stamped with the epoch of their change (a switch's
// `desired_epoch`). A new or returning agent (first hello since cruxd started, after being
// silent for kAgentStaleMs, from a new peer, reporting an older applied epoch than before, i.e.
// the agent restarted, or an applied state id other than the daemon's) gets its full state; so
// does an agent whose periodic hello reports an applied epoch older than its switch's
// desired_epoch without a failure pending (a lost push). An agent that reported a failed apply
// retries on its own; its error is kept as `last_error` until an apply succeeds.
//
// Capabilities: an agent whose declared capabilities cannot hold the QoS configuration (fewer
// queues than the highest queue the config uses + 1, no strict priority while job levels are
// strict, no DWRR while a class needs it) is refused at hello with ERROR_CODE_UNSUPPORTED naming
// what is missing (capabilities with queues = 0 are taken as unknown and accepted).
//
// Enforcement verification (issue #29): each agent's latest check of what its switch applied
// (SwitchHello.enforcement, refreshed with every hello; SwitchApplied.enforcement when the verdict
// changed) is kept per switch, shown by `cruxctl switches` (ENFORCED) and counted on /metrics as
// crux_switch_enforcement{state="match"|"mismatch"|"unknown"} (a disconnected agent counts as
// unknown). Pushes carry the plan levels' TCs (SwitchQosState.job_tcs, from qos.level_tcs), which
// the agent's queue check needs to tell job traffic from best effort.
//
// Until the first plan after start (`qos_ready()`), there is no desired state to push (a
// restarted cruxd must not push a state that ignores its restored jobs); hellos are recorded and
// the first Commit() pushes to every known agent.
//
// Thread-safety: loop thread only. The topology must outlive the enforcer.
#ifndef CRUX_DAEMON_STATE_ENFORCER_H_
#define CRUX_DAEMON_STATE_ENFORCER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/control/enforcement.h"
#include "crux/core/control/qos.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/topology.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/state/job_tracker.h"
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
  // High availability: as the agent's last hello said (SwitchHello.highest_term, ...).
  uint64_t highest_term = 0;
  uint64_t stale_term_refused = 0;
  // Enforcement verification: the agent's latest check (UNKNOWN until it sends one).
  core::EnforcementCheck enforcement;
};

// Whether a switch with `caps` can hold `qos` (see the file comment); the refusal names the
// missing capability. Pure.
Refusal CheckSwitchCapabilities(const v1::SwitchCapabilities& caps, const core::QosConfig& qos,
                                const std::string& switch_name);

class Enforcer {
 public:
  // `topo`: the nominal topology (names for the wire); must outlive this. `wall_ns`: the wall
  // clock stamped on pushes (Assignment.sent_unix_ns; injected so tests control it).
  Enforcer(Metrics* metrics, const core::Topology* topo, std::function<int64_t()> wall_ns);

  void SetSender(Sender s) { sender_ = std::move(s); }
  // Optional: sends an encoded frame (RouterServer::SendEncoded). With it, Push() of an
  // assignment whose serialized form is given skips the conversion and serialization.
  using EncodedSender = std::function<core::Status(const std::string& peer, std::string frame)>;
  void SetEncodedSender(EncodedSender s) { encoded_sender_ = std::move(s); }
  void SetWallClock(std::function<int64_t()> wall_ns) { wall_ns_ = std::move(wall_ns); }
  // The daemon's state id, stamped on every push (Assignment and SwitchQosState).
  void SetStateId(uint64_t id) { state_id_ = id; }
  uint64_t state_id() const { return state_id_; }
  // High availability: the leader's term, stamped on every push (0 = no `ha:`).
  void SetTerm(uint64_t term) { term_ = term; }
  uint64_t term() const { return term_; }
  // For the capability check at hello. REQUIRES: valid (core::ValidateQosConfig).
  void SetQosConfig(const core::QosConfig& qos) { qos_config_ = qos; }

  // Sends `a` to `peer`, stamping the state id and the send time. False when there is no peer or
  // the transport refused it.
  bool Push(const std::string& peer, const core::AppliedAssignment& a);
  // The same, with `serialized` = protocol::AssignmentToProto(a, topo).SerializeAsString() made
  // earlier (the worker's store row): sent as is, stamped (protocol::EncodeAssignmentPush), when
  // an encoded sender is set; otherwise (or when empty) like Push(peer, a).
  bool Push(const std::string& peer, const core::AppliedAssignment& a,
            const std::string& serialized);

  // Sends `batch` (REQUIRES: 1..protocol::kMaxBatchAssignments assignments of distinct jobs) to
  // `peer` in one AssignmentBatch, each stamped as Push() stamps it. A batch the transport
  // refuses as too large (kOutOfRange) goes out as one Push() per assignment instead. Returns
  // how many assignments were sent; pushes() counts assignments, batch_frames() the batches.
  size_t PushBatch(const std::string& peer,
                   const std::vector<const core::AppliedAssignment*>& batch);

  // Records a hello. Returns the push to send after the reply (the switch's full state), if one
  // is due (see the file comment). *returning: a new or returning agent. A refusal (capabilities)
  // records nothing.
  Refusal OnHello(const v1::SwitchHello& h, const std::string& peer, int64_t unix_ms,
                  bool* returning, std::optional<v1::Envelope>* push);
  Refusal OnApplied(const v1::SwitchApplied& a, const std::string& peer, int64_t unix_ms);

  // Installs the switch states the loop committed and pushes to the connected agents of
  // `changed` (each stamped with its epoch in `qos`).
  void Commit(std::shared_ptr<const core::AppliedQos> qos, const std::vector<std::string>& changed);

  bool qos_ready() const { return qos_ != nullptr; }
  std::shared_ptr<const core::AppliedQos> desired() const { return qos_; }
  // Epoch at which `name`'s desired state last changed (0: never computed).
  uint64_t desired_epoch(const std::string& name) const;

  // `shared_jobs`: DscpPool::SharedJobs() (jobs sharing a colour), reported on every row.
  std::vector<v1::SwitchInfo> Switches(uint32_t shared_jobs, int64_t now_ms) const;
  size_t switch_count() const { return switches_.size(); }
  uint64_t pushes() const { return pushes_; }
  uint64_t push_failures() const { return push_failures_; }
  uint64_t switch_pushes() const { return switch_pushes_; }
  uint64_t batch_frames() const { return batch_frames_; }

 private:
  v1::Envelope StateEnvelope(const std::string& name) const;
  // `a` on the wire as a push carries it: the state id, the term and the send time.
  v1::Assignment Stamped(const core::AppliedAssignment& a, uint64_t sent_unix_ns) const;
  // Counts a push by the transport's verdict (logs a failure); returns whether it was sent.
  bool Counted(const core::Status& sent, const core::AppliedAssignment& a);
  void PushState(SwitchEntry& e);
  // Keeps `check` as e's latest enforcement check (logs a changed verdict) and recounts the
  // crux_switch_enforcement gauges when its status changed or a second has passed.
  void RecordEnforcement(SwitchEntry& e, core::EnforcementCheck check, int64_t unix_ms);
  void CountEnforcement(int64_t now_ms) const;

  Metrics* metrics_;
  const core::Topology* topo_;
  std::function<int64_t()> wall_ns_;
  core::QosConfig qos_config_;
  Sender sender_;
  EncodedSender encoded_sender_;
  uint64_t state_id_ = 0;
  uint64_t term_ = 0;
  std::map<std::string, SwitchEntry> switches_;
  std::shared_ptr<const core::AppliedQos> qos_;
  uint64_t pushes_ = 0;
  uint64_t push_failures_ = 0;
  uint64_t switch_pushes_ = 0;
  uint64_t batch_frames_ = 0;
  mutable int64_t last_enforcement_count_ms_ = 0;  // When CountEnforcement last ran.
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STATE_ENFORCER_H_
