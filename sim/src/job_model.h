// The job model (docs/simulator.md, section 2): the state of every simulated job and its
// iteration machine. An iteration computes for compute_time; its communication phase starts
// round(overlap_start x compute) after the iteration start (plus a pending CASSINI shift) with
// every flow of the plan in force; the iteration ends when compute and every flow are done
// (delivered h x alpha after the last byte left) and the next one starts right then. A job ends
// after its duration (a cluster event), its iteration count, or at the horizon.
//
// The plan in force (plan_flows / plan_resources / level) is written by the plan host
// (plan_host.h); the fast-forward detector (fast_forward.h) reads the timeline and writes the
// steady rates. What happens around an iteration end, a start and a departure is the listener's.
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_JOB_MODEL_H_
#define CRUX_SIM_SRC_JOB_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "client_profiler.h"
#include "crux/core/control_types.h"
#include "crux/core/job.h"
#include "crux/core/units.h"
#include "crux/sim/fluid_network.h"
#include "crux/sim/simulator.h"
#include "engine/event_queue.h"
#include "engine/sim_clock.h"
#include "fabric.h"
#include "metrics.h"

namespace crux::sim::internal {

using core::Duration;

// The level of traffic no assignment covers yet (control loop: a job between its arrival and
// its first committed assignment). It crosses the switches in the best-effort default class,
// below every job level (core::QosConfig::default_tc), so it is below any level a plan uses.
inline constexpr int kBestEffortLevel = 1'000'000;

enum class FlowStatus : uint8_t { kInNetwork, kDelivering, kDone };

// One flow of a job's current communication phase.
struct FlowRun {
  FluidNetwork::FlowId id = 0;
  FlowStatus status = FlowStatus::kDone;
  Duration deliver_at;  // kDelivering: when its last byte arrives.
  double bytes = 0;     // Planned; once out of the network, the bytes it carried.
  uint32_t epoch = 0;   // The plan epoch it was started in (JobModel::epoch()).
  // Per-flow telemetry (SimOptions::faults.flow_reports): what the job's heartbeats report.
  bool report = false;   // A sample of its NIC pair's pin (the first pin of the pair).
  double reported = 0;   // Bytes already counted in a heartbeat window.
  Duration reported_at;  // End of the part already counted.
  Duration progress_at;  // Last heartbeat at which it had made progress (or its start).
};

// A job's per-flow report window for one NIC pair (its first pin): what core::FlowSample
// carries, accumulated over the flows of the window.
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
  // The plan in force (applies to communication phases that start after it was made).
  bool planned = false;
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
  double iteration_credit = 0;  // Fractional iterations credited by jumps.
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
  std::vector<bool> pinned;               // plan_flows[f] follows a pinned path.
  std::vector<bool> report_flow;          // plan_flows[f] is on the first pin of its NIC pair.
  std::vector<uint16_t> plan_sport;       // The pin's UDP source port (0: none).
  std::map<uint64_t, FlowWindow> window;  // Per NIC pair: the heartbeat window (telemetry).
  std::vector<uint32_t> peer_of;          // Flow -> the client's PeerId of its NIC pair.
  bool assigned = false;                  // An assignment is in force.
  core::JobPhase phase = core::JobPhase::kRegistered;  // Of the assignment in force.
  // The client library's profiler, fed by the job model with the iteration's events.
  std::optional<ClientProfiler> profiler;
  uint32_t reports = 0;
};

enum class JobEventKind : uint8_t { kComputeDone, kCommStart, kDeliver };

struct JobEvent {
  uint32_t job = 0;
  uint32_t gen = 0;  // The job's iteration generation when scheduled; stale otherwise.
  uint32_t flow = 0;
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
};

class JobModel {
 public:
  // `jobs`, `clock`, `fabric`, `metrics`, `result` and `listener` outlive the model.
  JobModel(const std::vector<SimJob>& jobs, const SimOptions& options,
           const engine::SimClock& clock, Fabric& fabric, Metrics& metrics, SimResult& result,
           JobListener& listener);

  std::vector<JobState>& jobs() { return js_; }
  const std::vector<JobState>& jobs() const { return js_; }
  JobState& job(uint32_t j) { return js_[j]; }
  engine::EventQueue<JobEvent>& events() { return events_; }

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

  // A fast-forward jump: every running job's timeline and every pending job event `d` later.
  void Shift(Duration d);

  // Plan epochs: flows in flight that were started under an earlier epoch are "old" (the fast
  // forward waits until none is left). NewEpoch() counts the flows in flight now.
  uint32_t epoch() const { return epoch_; }
  void NewEpoch();
  int64_t old_in_flight() const { return old_in_flight_; }

 private:
  void OnComputeDone(uint32_t j);
  void OnCommStart(uint32_t j);
  void OnDeliver(uint32_t j, uint32_t f);
  void MaybeEndIteration(uint32_t j);
  void AccountFlowBits(uint32_t j, FluidNetwork::FlowId id, double transmitted);
  FlowWindow& WindowOf(JobState& s, uint32_t f);
  // The time the jobs' profilers see: simulated time minus the time fast-forward jumped.
  Duration ProfilerTime() const { return clock_.Now() - result_.fast_forwarded; }
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
  bool telemetry_ = false;
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_JOB_MODEL_H_
