// QoS: what the switches must enforce for a plan. Pure computation, no I/O.
//
// Three pieces, used by the daemon (and by the switch adapters, which consume SwitchQosState):
//
//   * QosConfig: the operator's QoS policy — the DSCP colour pool for jobs, which traffic class
//     (TC) each priority level uses, reserved classes (control/CNP, storage/checkpoint) with their
//     own DSCPs, TCs and schedulers, the best-effort default TC, PFC. ValidateQosConfig() checks
//     it; errors name the key ("qos.reserved[1].weight: ...").
//
//   * DscpPool: per-job DSCP colours. A job gets a colour when it registers and keeps it for its
//     whole life (its QPs were created with that traffic class and are never touched again); a
//     priority change is enforced by re-mapping DSCP -> TC on the switches, never by re-colouring.
//     When every colour is taken, a new job SHARES a colour, chosen by level (see Acquire); jobs
//     sharing a colour cannot be told apart by the switches, so all of them get the TC of the
//     highest-priority member crossing that switch (the others are promoted, never demoted).
//     SharedJobs() reports how many jobs are in that degraded state (shown by `cruxctl switches`).
//
//   * ComputeDesiredQos(): the full desired state of every network switch. Each switch gets the
//     static part (reserved classes, default TC, TC -> queue, schedulers, PFC) and, for the
//     colours of the jobs whose flows cross it, DSCP -> level TC. Switches no job crosses still
//     get the static part. ChangedSwitches() says which switches need a push.
//
// Level -> TC: plan level L (0 = highest) uses level_tcs[L]; levels past the end use the last
// entry (the lowest job class). TC -> queue is the identity for every TC the config uses.
//
// Scheduling: job TCs are STRICT by default (strict priority between levels, as Crux assumes).
// Reserved classes choose STRICT (control/CNP: tiny volume, must never wait) or DWRR with a
// weight. Caveat of the SONiC/SAI model: strict queues are served before every DWRR queue, so a
// DWRR weight is a minimum share of what the strict queues leave. For a hard storage guarantee
// against saturating training traffic, set `jobs_strict = false`: job TCs then become DWRR queues
// with `level_weights`, and storage's share is weight / (sum of all DWRR weights).
//
// Thread-safety: value types and pure functions; DscpPool is thread-compatible (external locking
// for concurrent mutation).
#ifndef CRUX_CORE_CONTROL_QOS_H_
#define CRUX_CORE_CONTROL_QOS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

inline constexpr int kMaxDscp = 63;
inline constexpr int kMaxTrafficClasses = 8;  // TCs / queues per port (SONiC: 0..7).

enum class SchedulerType { kStrict, kDwrr };

// "STRICT" / "DWRR" (SONiC SCHEDULER.type spelling).
std::string_view SchedulerTypeName(SchedulerType t);
// Inverse of SchedulerTypeName (case-sensitive); kInvalidArgument otherwise.
Result<SchedulerType> ParseSchedulerType(std::string_view s);

// A traffic class with its own DSCPs and queue, outside the job levels.
struct ReservedClass {
  std::string name;        // "control", "storage"; [a-z0-9_-]+, unique.
  std::vector<int> dscps;  // Each 0..63, not in the job pool nor in another class.
  int tc = 0;              // 0..num_tcs-1; not a job TC nor another class's TC.
  SchedulerType scheduler = SchedulerType::kDwrr;
  int weight = 0;         // DWRR weight 1..100 (ignored and must be 0 for STRICT).
  bool lossless = false;  // Add `tc` to PFC's lossless set.

  friend bool operator==(const ReservedClass&, const ReservedClass&) = default;
};

struct QosConfig {
  // Job colours: distinct DSCPs 0..63, handed out in this order.
  std::vector<int> dscp_pool = {10, 12, 14, 18, 20, 22, 26, 28, 30, 34, 36, 38};
  int num_tcs = kMaxTrafficClasses;  // TCs (= queues) per port, 1..8.
  // TC of plan level L (index). Distinct, each 0..num_tcs-1. Non-empty.
  std::vector<int> level_tcs = {5, 4, 3, 2};
  bool jobs_strict = true;  // Job TCs STRICT; false: DWRR with level_weights.
  // DWRR weight per level (same length as level_tcs) when !jobs_strict; each 1..100.
  std::vector<int> level_weights;
  bool jobs_lossless = true;  // Job TCs are lossless (PFC), as RoCE needs without ECN-only.
  std::vector<ReservedClass> reserved = {
      {"control", {48}, 6, SchedulerType::kStrict, 0, false},
      {"storage", {8}, 1, SchedulerType::kDwrr, 40, false},
  };
  int default_tc = 0;       // Every DSCP not listed above; not a job or reserved TC.
  int default_weight = 10;  // DWRR weight of the default TC, 1..100.
  bool pfc = true;          // Emit pfc_enable (the lossless TCs); false: leave PFC alone.

  friend bool operator==(const QosConfig&, const QosConfig&) = default;
};

// Checks every field; the message names the key, e.g. "qos.level_tcs[2]: 9 out of range 0..7".
Status ValidateQosConfig(const QosConfig& config);

struct QueueScheduler {
  int queue = 0;
  SchedulerType type = SchedulerType::kStrict;
  int weight = 0;  // DWRR only; 0 for STRICT.
  friend bool operator==(const QueueScheduler&, const QueueScheduler&) = default;
};

// The full desired QoS state of one switch (idempotent: apply = make it so). Plain, comparable
// data; the wire form is crux.v1.SwitchQosState.
struct SwitchQosState {
  std::string switch_name;
  std::map<int, int> dscp_to_tc;           // All 64 DSCPs -> TC.
  std::map<int, int> tc_to_queue;          // Every TC the config uses -> queue.
  std::vector<QueueScheduler> schedulers;  // Sorted by queue, one per used queue.
  std::vector<int> pfc_enable;             // Lossless TCs, sorted; empty when !pfc.
  std::vector<std::string> jobs;           // Jobs whose flows cross this switch, sorted
                                           // (informational; backends need not store it).
  friend bool operator==(const SwitchQosState&, const SwitchQosState&) = default;

  // Equality of what a device stores (everything but `jobs`).
  bool SameDeviceState(const SwitchQosState& o) const {
    return switch_name == o.switch_name && dscp_to_tc == o.dscp_to_tc &&
           tc_to_queue == o.tc_to_queue && schedulers == o.schedulers && pfc_enable == o.pfc_enable;
  }
};

// Structural checks on a state received from elsewhere (wire, file): DSCPs 0..63, TCs and
// queues 0..7, one scheduler per queue, DWRR weights 1..100, STRICT weight 0. Names the field.
Status ValidateSwitchQosState(const SwitchQosState& s);

// The TC a plan level maps to under `config` (see file comment). REQUIRES: valid config,
// level >= 0.
int LevelTc(const QosConfig& config, int level);

// Per-job DSCP colours. See the file comment for the sharing rule.
class DscpPool {
 public:
  // Errors: kInvalidArgument naming "qos.dscp_pool[i]" (range, duplicates, empty).
  static Result<DscpPool> Create(const std::vector<int>& dscps);

  // Registers `job_id` at `level` (>= 0) and returns its colour. A free colour is taken in pool
  // order. When none is free, the job shares: among colours whose members' highest-priority
  // level is closest to `level` (ties: fewer members, then pool order), so jobs of the same level
  // share first. Re-acquiring a registered job returns its colour unchanged (idempotent; the
  // level is updated). Errors: kInvalidArgument for an empty id or a negative level.
  Result<int> Acquire(const std::string& job_id, int level);

  // Re-registers a job with the colour it already had (daemon restart: colours come back from
  // the store, so running QPs keep matching). Sharing is allowed. Errors: kInvalidArgument when
  // `dscp` is not in the pool or the level is negative; kAlreadyExists when the job holds another
  // colour (the same colour is a no-op besides the level update).
  Status Restore(const std::string& job_id, int dscp, int level);

  // Updates a job's current level (a priority change). Its colour does not change.
  // Errors: kNotFound for an unknown job, kInvalidArgument for a negative level.
  Status SetLevel(const std::string& job_id, int level);

  // Frees the job's share of its colour (the colour is free again when its last member leaves).
  // Unknown jobs are ignored (release is idempotent).
  void Release(const std::string& job_id);

  std::optional<int> ColourOf(const std::string& job_id) const;
  std::optional<int> LevelOf(const std::string& job_id) const;
  // Jobs holding `dscp`, sorted.
  std::vector<std::string> MembersOf(int dscp) const;

  size_t num_colours() const { return pool_.size(); }
  size_t num_jobs() const { return jobs_.size(); }
  size_t free_colours() const;
  // Jobs whose colour is held by at least one other job (0 while the pool is not exhausted).
  size_t SharedJobs() const;

 private:
  struct JobEntry {
    int dscp = 0;
    int level = 0;
  };
  // Adds/removes `job_id` (with `entry`'s colour and level) to/from the member indexes.
  void AddMember(const std::string& job_id, const JobEntry& entry);
  void ChangeLevel(JobEntry& entry, int level);

  std::vector<int> pool_;
  std::map<std::string, JobEntry> jobs_;
  std::map<int, std::set<std::string>> members_;  // dscp -> jobs.
  // dscp -> levels of its members, so that a shared colour's best level is O(1) to find and an
  // Acquire on an exhausted pool costs O(colours), not O(jobs).
  std::map<int, std::multiset<int>> member_levels_;
};

// The desired QoS state of every switch, and the epoch at which each last changed.
struct AppliedQos {
  std::map<std::string, SwitchQosState> states;
  std::map<std::string, uint64_t> epochs;

  friend bool operator==(const AppliedQos&, const AppliedQos&) = default;
};

// One job as the QoS computation sees it.
struct QosJob {
  std::string id;
  int dscp = 0;                  // Its colour.
  int level = 0;                 // Current plan level.
  std::vector<NodeId> switches;  // Network switches its flows cross (any order, repeats ok).
};

// The desired state of every network switch of `topo`, keyed by switch name. On each switch a
// job colour maps to the TC of the highest-priority job with that colour crossing it; colours
// no crossing job holds map to default_tc. Errors: invalid config (named key), a job with a DSCP
// outside the pool or a negative level (names the job), a switch id not a network switch.
Result<std::map<std::string, SwitchQosState>> ComputeDesiredQos(const QosConfig& config,
                                                                const Topology& topo,
                                                                const std::vector<QosJob>& jobs);

// Names of switches whose device state differs between `before` and `after`, including
// switches present in only one of them. Sorted.
std::vector<std::string> ChangedSwitches(const std::map<std::string, SwitchQosState>& before,
                                         const std::map<std::string, SwitchQosState>& after);

}  // namespace crux::core

#endif  // CRUX_CORE_CONTROL_QOS_H_
