// The job model (docs/simulator.md, section 2): the state of every simulated job and its
// iteration machines.
//   single-overlap (classic jobs, and every job with SimOptions::single_overlap): an iteration
//     computes for compute_time; its communication phase starts round(overlap_start x compute)
//     after the iteration start (plus a pending CASSINI shift) with every flow of the plan in
//     force; the iteration ends when compute and every flow are done (delivered h x alpha after
//     the last byte left) and the next one starts right then.
//   phases (jobs with a core::IterationModel, SimJob::iteration): the iteration's segments run
//     in order; each op's instances are released by its pacing once its issue segment ended
//     (and its after_op completed); each instance's rail flows go on the plan's path of their
//     NIC pair at the job's level (SimOptions::spray: split evenly over every plan flow of the
//     pair, one per equal-cost path); a segment starts when the previous one ended and every op
//     that names it in needed_before completed. The iteration ends with its last segment.
// A job ends after its duration (a cluster event), its iteration count, or at the horizon.
//
// The plan in force (plan_flows / plan_resources / level) is written by the plan host
// (plan_applier.h); the fast-forward detector (fast_forward.h) reads the timeline and writes the
// steady rates. What happens around an iteration end, a start and a departure is the listener's.
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_JOBS_JOB_MODEL_H_
#define CRUX_SIM_SRC_JOBS_JOB_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/core/model/control_types.h"
#include "crux/core/model/job.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/fluid_network.h"
#include "crux/sim/sim_types.h"
#include "engine/event_queue.h"
#include "engine/sim_clock.h"
#include "jobs/client_profiler.h"
#include "metrics/metrics.h"
#include "network/fabric.h"

namespace crux::sim::internal {

using core::Duration;

// The level of traffic no assignment covers yet (control loop: a job between its arrival and
// its first committed assignment). It crosses the switches in the best-effort default class,
// below every job level (core::QosConfig::default_tc), so it is below any level a plan uses.
inline constexpr int kBestEffortLevel = 1'000'000;

enum class FlowStatus : uint8_t { kInNetwork, kDelivering, kDone };

// One flow of a job's current communication phase (single-overlap: flow f of the plan; phases:
// a slot, reused once its flow is done, holding one rail flow of one op instance).
struct FlowRun {
  FluidNetwork::FlowId id = 0;
  FlowStatus status = FlowStatus::kDone;
  Duration deliver_at;     // kDelivering: when its last byte arrives.
  double bytes = 0;        // Planned; once out of the network, the bytes it carried.
  double size = 0;         // Planned bytes.
  uint32_t epoch = 0;      // The plan epoch it was started in (JobModel::epoch()).
  uint32_t plan_flow = 0;  // The plan flow whose path it takes (plan_flows / plan_resources).
  uint32_t instance = 0;   // Phases: slot of its instance (PhaseRun::instances).
  uint64_t key = 0;        // Phases: (op, instance number, rail flow), for snapshots.
  // Per-flow telemetry (SimOptions::faults.flow_reports): what the job's heartbeats report.
  bool report = false;   // Reported in its pin's sample (JobState::report_flow).
  double reported = 0;   // Bytes already counted in a heartbeat window.
  Duration reported_at;  // End of the part already counted.
  Duration progress_at;  // Last heartbeat at which it had made progress (or its start).
};

// A job's per-flow report window for one pin (NIC pair and UDP source port): what
// core::FlowSample carries, accumulated over the flows on that pin in the window.
struct FlowWindow {
  core::NodeId src;
  core::NodeId dst;
  uint16_t sport = 0;
  double bytes = 0;
  Duration time;  // Time its flows spent in the network in the window (summed over flows).
  uint64_t errors = 0;
  std::vector<core::LinkId> path;  // The pin's path when the window began.
};

// One sample of a heartbeat, with the path it was measured on.
struct ReportedFlow {
  core::FlowSample sample;
  std::vector<core::LinkId> path;
};

// The constant part of a phase-level job: its iteration model and what follows from it.
struct PhaseModel {
  struct PacedWindow {
    int op = 0;
    Duration offset;  // Window compute before the segment.
  };
  const core::IterationModel* model = nullptr;
  std::vector<std::vector<uint64_t>> pairs;   // Per op, per rail flow: src NIC << 32 | dst NIC.
  std::vector<Duration> window;               // Per op: compute of its window.
  std::vector<int> waiting;                   // Per segment (and the end): ops it waits for.
  std::vector<std::vector<int>> issue_after;  // [segment + 1]: ops issued after it.
  std::vector<std::vector<PacedWindow>> paced_in;  // Per segment: paced ops whose window has it.
  std::vector<std::vector<int>> dependents;        // Per op: ops chained after it (after_op).
  int last_busy = -1;                              // Last busy segment (ComputeEnd for profilers).
};

// The state of a phase-level job's current iteration.
struct PhaseRun {
  struct Op {
    int released = 0;
    int completed = 0;
    int deferred = 0;  // Paced releases due while it was not ready (after_op).
    bool issued = false;
    bool done = false;
  };
  struct Instance {
    uint32_t op = 0;
    int outstanding = 0;
  };
  int running = -1;  // The segment running (-1: none).
  int last_ended = -1;
  bool ended = false;  // Every segment ended: the iteration is over.
  bool held = false;   // A pending time shift delays the first segment (until comm_start).
  Duration seg_start;
  Duration seg_end;
  std::vector<int> waiting;
  std::vector<Op> ops;
  std::vector<Instance> instances;  // Slots; free ones are in free_instances.
  std::vector<uint32_t> free_instances;
  std::vector<uint32_t> free_flows;  // Slots of JobState::flows that are done.
  // Plan flows per NIC pair (src << 32 | dst), rebuilt when the plan changed.
  std::unordered_map<uint64_t, std::vector<uint32_t>> pair_flows;
  uint64_t pair_version = ~uint64_t{0};
};

enum class JobStatus : uint8_t { kWaiting, kRunning, kDone };

struct JobState {
  const SimJob* job = nullptr;
  JobStatus status = JobStatus::kWaiting;
  int gpus = 0;
  Duration arrival;
  Duration compute;
  Duration overlap;  // round(overlap_start x compute).
  std::optional<Duration> finish;
  std::optional<int64_t> iteration_limit;
  // Totals.
  int64_t iterations = 0;
  Duration iteration_time_sum;
  Duration compute_busy;
  // The current iteration.
  uint32_t gen = 0;  // Its events carry it; a newer iteration (or a departure) makes them stale.
  Duration iter_start;
  Duration compute_end;
  bool computing = false;
  Duration comm_start;
  bool comm_started = false;
  bool comm_done = false;
  int outstanding = 0;
  std::vector<FlowRun> flows;
  // Phases (null: single-overlap). compute is then the busy time per iteration.
  std::shared_ptr<const PhaseModel> phases;
  PhaseRun phase_run;
  // The plan in force (applies to communication phases that start after it was made; phases:
  // to instances released after it was made).
  bool planned = false;
  uint64_t plan_version = 0;  // Bumped by the plan host whenever plan_flows change.
  int level = 0;
  std::vector<core::FlowPlan> plan_flows;
  std::vector<std::vector<ResourceId>> plan_resources;
  Duration period;  // Standalone iteration time of the plan.
  Duration applied_shift;
  Duration pending_shift;  // Delays the next communication phase once.
  std::optional<Duration> standalone;
  // Fast-forward: cumulative traffic, and the steady rates of its group (per ns of simulated
  // time).
  double bytes_sent = 0;
  std::vector<double> class_bits;
  int group = -1;
  double rate_iterations = 0;
  double rate_iteration_ns = 0;  // Mean iteration time over the group's period.
  double rate_busy = 0;
  double rate_bytes = 0;
  std::vector<double> rate_class_bits;
  double iteration_credit = 0;  // Fractional iterations credited by sleeps.
  // Its iterations per period of its group when the group is exactly periodic (0: not known to
  // be, or only approximately steady): its profiler's last samples repeat with this cycle.
  int64_t cycle_iterations = 0;
  Duration slept;       // How far fast-forward moved its timeline, in all.
  bool asleep = false;  // Its group sleeps: its timeline is ahead of the clock.
  // Iterations completed since its group or plan last changed (the control loop's
  // fast-forward gate: its profiler's window holds only samples of the current regime).
  int64_t epoch_iterations = 0;
  // Fingerprint of its plan (level, paths, bytes, time shift) when the groups were last built:
  // a group whose jobs and plans are all unchanged keeps its steady state across re-plans.
  uint64_t plan_fingerprint = 0;
  // Result bookkeeping: when first scheduled, and every change of level or phase in force.
  std::optional<Duration> scheduled_at;
  std::vector<LevelChange> level_log;
  // ---- Control loop only ----
  // The job's own flows (its true traffic, on the wire) with their default (ECMP hash) paths;
  // plan_flows[f] carries own_flows[f] on the path in force: the assignment's pin for its NIC
  // pair, else the default path.
  std::vector<core::FlowPlan> own_flows;
  std::vector<bool> pinned;  // plan_flows[f] follows a pinned path.
  // plan_flows[f] is reported: it is on a pin with a source port, or on its pair's first pin.
  std::vector<bool> report_flow;
  std::vector<uint16_t> plan_sport;  // The pin's UDP source port (0: none).
  // Per pin (NIC pair, source port): the heartbeat window (telemetry).
  std::map<std::pair<uint64_t, uint16_t>, FlowWindow> window;
  std::vector<uint32_t> peer_of;      // Flow -> the client's PeerId of its NIC pair.
  std::vector<uint32_t> own_peer_of;  // SimOptions::spray: peer_of before spraying.
  bool assigned = false;              // An assignment is in force.
  uint64_t assignment_hash = 0;       // PlanApplier::FlowsHash of it (re-issues for probes only).
  bool assignment_probes = false;     // It carries probes.
  core::JobPhase phase = core::JobPhase::kRegistered;  // Of the assignment in force.
  // The client library's profiler, fed by the job model with the iteration's events.
  std::optional<ClientProfiler> profiler;
  uint32_t reports = 0;
};

enum class JobEventKind : uint8_t { kComputeDone, kCommStart, kDeliver, kSegmentEnd, kRelease };

struct JobEvent {
  uint32_t job = 0;
  uint32_t gen = 0;   // The job's iteration generation when scheduled; stale otherwise.
  uint32_t flow = 0;  // kDeliver: the flow; kRelease: the op.
  JobEventKind kind = JobEventKind::kComputeDone;
};

// What the hosts around the job model do at its milestones.
class JobListener {
 public:
  virtual ~JobListener() = default;
  // An iteration of `j` ended (before the next one starts).
  virtual void OnIterationEnd(uint32_t j) = 0;
  // `j` started an iteration.
  virtual void OnIterationStart(uint32_t j) = 0;
  // `j` left before the horizon (duration or iteration count reached).
  virtual void OnDeparture(uint32_t j) = 0;
  // The last flow started under an earlier plan epoch was delivered.
  virtual void OnOldFlowsDone() {}
};

class JobModel {
 public:
  // `jobs`, `clock`, `fabric`, `metrics`, `result` and `listener` outlive the model.
  // `topo` maps the rail flows of phase-level jobs onto NICs.
  JobModel(const core::Topology& topo, const std::vector<SimJob>& jobs, const SimOptions& options,
           const engine::SimClock& clock, Fabric& fabric, Metrics& metrics, SimResult& result,
           JobListener& listener);

  std::vector<JobState>& jobs() { return js_; }
  const std::vector<JobState>& jobs() const { return js_; }
  JobState& job(uint32_t j) { return js_[j]; }
  engine::EventQueue<JobEvent>& events() { return events_; }
  // `j` arrived: it is running from now on. REQUIRES: `j` is waiting.
  void SetRunning(uint32_t j);
  // The running jobs, ascending: what the per-event loops walk (a two-week trace holds thousands
  // of jobs, of which tens run at once).
  const std::vector<uint32_t>& running() const { return running_; }

  // A new iteration of `j` at the current instant.
  void StartIteration(uint32_t j);
  // A popped job event. Returns false if it was stale (nothing happened).
  bool Handle(const JobEvent& e);
  // A flow of the fabric finished (FluidNetwork::PopFinished).
  void OnFlowFinished(uint64_t tag, double transmitted);
  // `j` leaves now (its duration ended, or the horizon): compute and flows are cut short.
  void Depart(uint32_t j, bool at_horizon);

  // Per-flow telemetry on (SimOptions::faults.flow_reports).
  void set_telemetry(bool on) { telemetry_ = on; }
  // The heartbeat of `j` now: its window's samples (flows in the network contribute what they
  // moved since the last heartbeat; one with no progress for `stall_timeout` reports an error),
  // then a new window.
  std::vector<ReportedFlow> TakeFlowSamples(uint32_t j, Duration stall_timeout);

  // A fast-forward group falls asleep (d > 0) or wakes early (d < 0): the timelines, pending
  // job events and flow clocks of `jobs` move `d`, and their profilers do not see it
  // (JobState::slept). REQUIRES: no pending change in the fluid network.
  void ShiftJobs(std::span<const uint32_t> jobs, Duration d);

  // Plan epochs: flows in flight that were started under an earlier epoch are "old" (the fast
  // forward waits until none is left). NewEpoch() counts the flows in flight now, but for those
  // of sleeping jobs (a group sleeps on through a regroup only when its plans are unchanged).
  uint32_t epoch() const { return epoch_; }
  void NewEpoch();
  int64_t old_in_flight() const { return old_in_flight_; }

 private:
  void OnComputeDone(uint32_t j);
  void OnCommStart(uint32_t j);
  void OnDeliver(uint32_t j, uint32_t f);
  void MaybeEndIteration(uint32_t j);
  void EndIteration(uint32_t j);
  // Phases.
  void StartPhases(uint32_t j);
  void TryStartSegment(uint32_t j);
  void StartSegment(uint32_t j, int seg);
  void EndSegment(uint32_t j);
  void SegmentEnded(uint32_t j, int seg);
  bool OpReady(const JobState& s, int op) const;
  void IssueOp(uint32_t j, int op);
  void ReleaseDue(uint32_t j, int op);
  void ReleaseInstance(uint32_t j, int op);
  void CompleteInstance(uint32_t j, int op);
  void FlowDone(uint32_t j, uint32_t f);
  const std::vector<uint32_t>* PlanFlowsFor(JobState& s, uint64_t pair);
  void AccountFlowBits(uint32_t j, FluidNetwork::FlowId id, double transmitted);
  FlowWindow& WindowOf(JobState& s, uint32_t f);
  // The time the profiler of a job sees: simulated time minus the time its timeline was moved
  // by fast-forward.
  Duration ProfilerTime(const JobState& s) const { return clock_.Now() - s.slept; }
  void Push(Duration at, uint32_t j, JobEventKind kind, uint32_t flow = 0);

  const engine::SimClock& clock_;
  Fabric& fabric_;
  Metrics& metrics_;
  SimResult& result_;
  JobListener& listener_;
  const Duration horizon_;
  const Duration alpha_;
  std::vector<JobState> js_;
  engine::EventQueue<JobEvent> events_;
  uint32_t epoch_ = 0;
  int64_t old_in_flight_ = 0;
  std::vector<uint32_t> running_;  // Sorted.
  bool telemetry_ = false;
  const bool spray_;  // SimOptions::spray: a rail flow is split over its pair's plan flows.
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_JOBS_JOB_MODEL_H_
