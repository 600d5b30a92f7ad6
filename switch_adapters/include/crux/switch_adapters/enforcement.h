// EnforcementVerifier: the one interface through which the switch agent checks that a switch
// enforces the desired state it was given (issue #29, docs/switch-adapters.md "Enforcement
// verification"). A backend that can verify exports a verifier factory in its registry descriptor
// (registry.h, Backend::create_verifier); today the sonic backend does (sonic_verifier.h: ASIC_DB
// QoS maps and COUNTERS_DB queue counters). The file and log backends cannot: the agent then
// reports the check UNKNOWN with the reason.
//
// This header also holds the backend-neutral halves of a check, pure and unit-tested:
//   * FirstMapDifference: the maps a port's ASIC holds against the desired state;
//   * QueueTrafficJudge: per-queue packet counters of the ports against the queues the plan
//     expects traffic in (see its comment for the rules and the thresholds).
//
// Contract of every verifier:
//   * Verify makes ONE attempt (no retries, no sleeps) and returns the check: kMatch, kMismatch
//     with the first difference, or kUnknown when part of what it needs is not there yet (e.g.
//     orchagent has not created a port's counters). Errors are Status values: kUnavailable (the
//     device is unreachable or timed out), kFailedPrecondition (device data it cannot interpret,
//     naming the key and field); the agent reports both as UNKNOWN with the message.
//   * It keeps what it needs between calls (the previous queue counters) and never loses it on
//     an error: a failed read leaves the baseline as it was.
//
// Thread-safety: a verifier is NOT thread-safe (one owner thread: the agent's device thread).
#ifndef CRUX_SWITCH_ADAPTERS_ENFORCEMENT_H_
#define CRUX_SWITCH_ADAPTERS_ENFORCEMENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/control/enforcement.h"
#include "crux/core/control/qos.h"

namespace crux::switch_adapters {

// What a check compares against.
struct EnforcementPlan {
  core::SwitchQosState state;  // The desired state (as pushed by cruxd).
  // The TCs of the plan levels (SwitchQosState.job_tcs on the wire): a DSCP mapping to one of
  // them is the colour of a job crossing this switch. Empty: not told (an older cruxd); the
  // queue-0 rule is then skipped.
  std::set<int> job_tcs;
  uint64_t epoch = 0;

  friend bool operator==(const EnforcementPlan&, const EnforcementPlan&) = default;
};

// The QoS maps a device holds for one port, as its ASIC has them.
struct AppliedPortMaps {
  std::string port;
  // nullopt: no map of that kind is bound to the port.
  std::optional<std::map<int, int>> dscp_to_tc;
  std::optional<std::map<int, int>> tc_to_queue;
  // The device object that holds each map ("ASIC_DB oid:0x14000000000615"), for messages.
  std::string dscp_to_tc_object;
  std::string tc_to_queue_object;

  friend bool operator==(const AppliedPortMaps&, const AppliedPortMaps&) = default;
};

// The first difference between the desired maps of `desired` and what `applied` holds, or ""
// when both maps match exactly. DSCP_TO_TC first, then TC_TO_QUEUE, keys in ascending order:
//   "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x1400000000061f): dscp 10 -> tc 0, the plan says tc 5"
//   "Ethernet0 DSCP_TO_TC (...): dscp 10 missing, the plan says tc 5"
//   "Ethernet0 DSCP_TO_TC (...): dscp 9 -> tc 1 is not in the plan"
//   "Ethernet0: no TC_TO_QUEUE map is bound in the ASIC; the plan maps 7 traffic classes"
std::string FirstMapDifference(const core::SwitchQosState& desired, const AppliedPortMaps& applied);

// The queue a traffic class goes to under `state` (tc_to_queue; the TC itself when absent).
int QueueOfTc(const core::SwitchQosState& state, int tc);
// Queues the plan sends traffic to: the queues of the TCs some DSCP maps to.
std::set<int> PlannedQueues(const core::SwitchQosState& state);
// Queues of the job colours crossing the switch: the queues of the TCs in `plan.job_tcs` that
// some DSCP maps to, without queue 0.
std::set<int> JobQueues(const EnforcementPlan& plan);

// Thresholds of the traffic rules (crux-switch-agent --verify-* options).
struct QueueCheckOptions {
  // A queue at or below this rate is silent. A queue the plan leaves unused (not queue 0)
  // carrying more is a mismatch. 100 pkt/s is far above the control traffic a switch's CPU
  // sends (LLDP, LACP) and far below any job's traffic.
  double silent_max_pps = 100;
  // Queue 0 at or above this rate, with every job queue of the switch silent, counts as job
  // traffic landing in queue 0 (see QueueTrafficJudge).
  double queue0_min_pps = 10000;
  // ... for this many judged intervals in a row (an idle phase of the jobs is not a mismatch).
  int queue0_intervals = 3;
  // Counters are judged over at least this interval (SONiC's QUEUE flex-counter group writes
  // COUNTERS_DB every 10 s; a shorter window sees zeros and double counts).
  core::Duration min_interval = core::Duration::Millis(10000);

  friend bool operator==(const QueueCheckOptions&, const QueueCheckOptions&) = default;
};
// Errors name the option ("--verify-silent-pps: must be >= 0").
core::Status ValidateQueueCheckOptions(const QueueCheckOptions& o);

// Cumulative packet counters of one port's unicast queues, by queue index.
struct QueueCounterReading {
  std::string port;
  std::map<int, uint64_t> packets;  // Queue index -> packets sent (SAI_QUEUE_STAT_PACKETS).

  friend bool operator==(const QueueCounterReading&, const QueueCounterReading&) = default;
};

// QueueTrafficJudge: the traffic half of a check, pure. Fed one reading per check; judges the
// deltas since its baseline once `min_interval` has passed (until then it repeats its last
// verdict and keeps the baseline), then makes the reading the new baseline. Two rules, in this
// order (the first difference is reported):
//   1. Unused queue carrying traffic: a queue other than 0 that the plan sends no traffic to
//      (not in PlannedQueues) whose rate exceeds `silent_max_pps` on some port. Queue 0 is never
//      flagged: untagged and non-IP traffic (ARP, LLDP) lands there on every switch.
//   2. Job traffic in queue 0: the plan has job colours crossing the switch (JobQueues non-empty;
//      needs job_tcs), every job queue is silent on EVERY watched port (sum of their rates at or
//      below `silent_max_pps`), and some port's queue 0 runs at `queue0_min_pps` or more, for
//      `queue0_intervals` judged intervals in a row. Switch-wide on purpose: a port no job
//      crosses carries best-effort traffic in queue 0 while the job queues are silent, which is
//      normal; only a switch where no job traffic reaches any job queue contradicts the plan.
// Counter plausibility as for port telemetry (port_monitor.h, JudgeCounters): a counter that went
// backwards (a reset, a restarted orchagent, a queue whose OID changed) or grew beyond what the
// fastest port could count in the interval (core/base/line_rate.h) gives no delta for that queue
// in that interval; it is listed in `dropped` and the rule 2 streak is left as it was.
// A plan change (device state or job_tcs) restarts the judge: the traffic of an interval that
// spans the change followed either plan.
class QueueTrafficJudge {
 public:
  struct Verdict {
    std::string difference;            // "": the traffic contradicts nothing.
    uint32_t queues_checked = 0;       // (port, queue) deltas judged; 0: not judged yet.
    std::vector<std::string> dropped;  // Samples dropped by this call ("Ethernet0 queue 3: ...").

    friend bool operator==(const Verdict&, const Verdict&) = default;
  };

  // REQUIRES: ValidateQueueCheckOptions(options).ok().
  explicit QueueTrafficJudge(QueueCheckOptions options = {});

  // `readings` taken at `now` (monotonic).
  Verdict Observe(const EnforcementPlan& plan, const std::vector<QueueCounterReading>& readings,
                  core::Duration now);

 private:
  QueueCheckOptions options_;
  std::optional<EnforcementPlan> plan_;
  std::map<std::string, std::map<int, uint64_t>> baseline_;
  core::Duration baseline_at_;
  bool has_baseline_ = false;
  int queue0_streak_ = 0;
  Verdict last_;
};

class EnforcementVerifier {
 public:
  virtual ~EnforcementVerifier() = default;
  // See the file comment. `now`: monotonic time of the check (rates are measured between the
  // `now`s of two checks). The result's checked_unix_ms and epoch are the caller's to stamp.
  virtual core::Result<core::EnforcementCheck> Verify(const EnforcementPlan& plan,
                                                      core::Duration now) = 0;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_ENFORCEMENT_H_
