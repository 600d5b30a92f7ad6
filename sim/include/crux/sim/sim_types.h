// crux::sim's value types: the simulated jobs and link events that go in, the options, and the
// results that come out (SimResult and its parts). The engine's parts (sim/src) and the workload
// loaders work in these; simulator.h adds only Simulate().
//
// Thread-safety: value types.
#ifndef CRUX_SIM_SIM_TYPES_H_
#define CRUX_SIM_SIM_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/control/control_loop.h"
#include "crux/core/model/control_types.h"
#include "crux/core/model/job.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/faults.h"

namespace crux::sim {

using core::Duration;

// The longest simulated time: horizons, arrivals, durations and link-event times are at most
// 10^9 s (about 31.7 years), so that every sum of two times stays exact in int64 nanoseconds
// (2 x 10^18 < 2^63 ~ 9.2 x 10^18). ValidateSimInput enforces it.
inline constexpr double kMaxSimSeconds = 1e9;
inline constexpr Duration kMaxSimTime = Duration::Nanos(1'000'000'000'000'000'000);
// Most samples a run may produce (horizon / sample_interval, rounded up).
inline constexpr int64_t kMaxSamples = 1'000'000;

// One job of the workload. spec.id must be unique; spec.hosts is the placement.
struct SimJob {
  core::JobSpec spec;
  Duration arrival;                   // >= 0.
  std::optional<Duration> duration;   // Runs this long after arrival (> 0).
  std::optional<int64_t> iterations;  // Or this many iterations (>= 1).
  std::string model;                  // Model profile name, informational ("" if none).
  // The job's multi-phase iteration (core/traffic_model.h; hybrid profiles), or null. When set
  // (and SimOptions::single_overlap is off) the engine runs its phases (docs/simulator.md,
  // section 2): segments on the job's GPUs, each op's instances released by its pacing, their
  // rail flows on the plan's path of their NIC pair. `spec` is then its single-overlap summary
  // (core::SingleOverlapJobSpec): what the planner sees (W_j, flows per NIC pair, t_j), and what
  // runs with single_overlap. layout.hosts() must equal spec.hosts.size().
  std::shared_ptr<const core::IterationModel> iteration;
};

// A scheduled link capacity change (failure: capacity 0; degradation: lower capacity;
// recovery: the original capacity). Applies to the directed link and its reverse.
struct LinkEvent {
  Duration at;
  core::LinkId link;
  core::Bandwidth capacity;
};

struct Progress {
  Duration simulated;   // Simulated time reached.
  Duration horizon;     // End of the run.
  uint64_t events = 0;  // Events processed so far.
  double wall_s = 0;    // Wall time so far.
};

// The reporting rule of the client library's profiler (crux::client::ProfilerOptions, marked
// mode; docs/client.md) that simulated jobs run with. Defaults: the client's.
struct ClientProfilerOptions {
  uint32_t window = 10;                   // Samples the profile is the median of, >= 3.
  uint32_t converge_min_iterations = 3;   // Earliest first report, >= 2.
  uint32_t converge_max_iterations = 10;  // First report at this count at the latest, >= 1.
  double stable_spread = 0.10;            // Early convergence: every sample within this.
  double change_threshold = 0.20;         // Re-report when period/compute/bytes move by more...
  uint32_t change_persistence = 3;        // ... in this many consecutive candidates, >= 1.

  friend bool operator==(const ClientProfilerOptions&, const ClientProfilerOptions&) = default;
};

// How plans reach the jobs (docs/simulator.md, section 3).
struct ControlOptions {
  // false (default): core::ControlLoop, unchanged, on a clock that reads simulated time. A job
  //   registers at its arrival (core::JobDemand: placement, pattern and collective size S, W_j
  //   if known), reports profiles through the client library's own Profiler fed with its
  //   iteration events (`profiler`), and runs under the
  //   assignment the loop last committed for it (level, pinned paths; before its first one on
  //   ECMP paths below every job level). Plans run when the loop says (`loop`: debounce,
  //   minimum interval, hysteresis, newcomer top level), in zero simulated time.
  // true: the oracle. Every running job is planned from its true JobSpec (its converged profile)
  //   at every arrival, departure and link event, at that instant; a failed re-plan keeps every
  //   job's previous plan. No registration, no profiling phase, no debounce.
  bool oracle = false;
  // Stable re-planning, cruxd's default (configs/cruxd.yaml planner.stable: true): between
  // re-optimisations (loop.reoptimize_interval) an event re-plans only the jobs it touches, the
  // others keep their paths and levels. Applies to the control loop only (the oracle plans every
  // job from scratch at every event) and to the policy made by name (Simulate(topo, "crux", ...)
  // sets core::PolicyOptions::stable; only `crux` has a stable mode). false: every re-plan is the
  // best plan, and loop.reoptimize_interval is not used.
  bool stable = true;
  core::ControlLoopOptions loop = CruxdLoopDefaults();  // cruxd's defaults (configs/cruxd.yaml).
  ClientProfilerOptions profiler;  // The client library's defaults (docs/client.md).

  // core::ControlLoopOptions with cruxd's shipped values where they differ from core's
  // (reoptimize_interval_ms: 600000, reoptimize_min_gain: 0.01).
  static core::ControlLoopOptions CruxdLoopDefaults() {
    core::ControlLoopOptions o;
    o.reoptimize_interval = Duration::Seconds(600);
    o.reoptimize_min_gain = 0.01;
    return o;
  }
};

struct SimOptions {
  core::PolicyOptions policy;  // Levels (K), seed, peak FLOP/s, ...
  ControlOptions control;
  // End of the simulation. Jobs without duration/iterations run until then. In (0, kMaxSimTime].
  // Memory and time do not grow with it where nothing happens (no job running): idle stretches
  // are skipped, and the sampling bins are allocated only up to the last activity.
  Duration horizon = Duration::Seconds(3600);
  Duration per_hop_latency = Duration::Micros(1);  // alpha, >= 0.
  // Steady-state fast-forward: a group of interacting jobs in a periodic state under an
  // unchanged plan (its state at an iteration start repeats) sleeps whole periods instead of
  // simulating every flow, credited its iterations, compute and bytes per second, until the
  // horizon or until an event that may change a plan wakes it (docs/simulator.md section 6).
  // Exact for exactly periodic groups. Off = full simulation.
  bool fast_forward = true;
  // Groups of interacting jobs whose state never repeats exactly (quasi-periodic contention) are
  // still fast-forwarded when their per-job rates over the two halves of the last k anchor
  // iterations (k = 64 or 32) agree: compute time per second within this relative
  // tolerance, iterations and bytes per second within it plus one iteration per half.
  // 0 = exact periodicity only. In [0, 1).
  double fast_forward_tolerance = 0.01;
  // Jobs with a multi-phase iteration (SimJob::iteration) run their single-overlap summary
  // (SimJob::spec: one compute block, one communication block from overlap_start) instead of
  // their phases: the model the engine had before, kept to compare the two.
  bool single_overlap = false;
  // Packet-spraying fabric (multi-plane NICs spraying each queue pair over every plane and path:
  // OpenAI's MRC, Ultra Ethernet; docs/simulator.md, "Sprayed fabrics"). A flow's path cannot be
  // pinned: every transfer between two NICs becomes one fluid sub-flow per equal-cost path of
  // the pair (core::PathFinder on the fabric in force: every plane, every ECMP path), each
  // carrying 1/P of its bytes (the remainder on the first ones, so they sum to the transfer),
  // and it is done when its last sub-flow is. A policy's path choices (and an assignment's pins)
  // are ignored; its levels apply to every sub-flow. Model limits: per-path max-min sharing is
  // ideal adaptive spraying (a real NIC's spray weights react to congestion with some lag, and
  // reordering costs are not modelled); the fluid flows grow P-fold (see `spray_max_paths`).
  bool spray = false;
  // With `spray`: at most this many sub-flows per transfer (0 = every path). With a cap P' < P
  // the sub-flows take paths evenly spaced over the pair's path list, shifted within the stride
  // by a hash of the NIC pair (every plane's share kept when P' is a multiple of the planes, as
  // path lists are grouped by access route; different pairs take different paths in a plane).
  int spray_max_paths = 0;
  // Time-series sampling period (> 0; at most kMaxSamples samples over the horizon).
  Duration sample_interval = Duration::Seconds(60);
  // Called now and then (at most ~once per wall second) when set.
  std::function<void(const Progress&)> progress;
  // GPUs per host of the topology (the Topology does not record them), for
  // cluster_utilization: the cluster has hosts x gpus_per_host GPUs. >= 1.
  int gpus_per_host = 8;
  // Hidden faults and the per-flow / switch signals about them (crux/sim/faults.h,
  // docs/fault-simulation.md). Control loop only. Default: none, and nothing of it runs.
  FaultSimOptions faults;
};

// A change of the level (or phase) in force for a job.
struct LevelChange {
  Duration at;
  core::JobPhase phase = core::JobPhase::kScheduled;
  int level = 0;

  friend bool operator==(const LevelChange&, const LevelChange&) = default;
};

struct JobResult {
  std::string id;
  std::string model;
  int gpus = 0;
  Duration arrival;
  std::optional<Duration> finish;  // Absent: still running at the horizon.
  int64_t iterations = 0;          // Completed iterations.
  Duration jct;                    // finish - arrival (or horizon - arrival if unfinished).
  Duration mean_iteration;         // Mean iteration time over completed iterations.
  Duration standalone_iteration;   // The policy-independent standalone period (Planner).
  Duration compute_busy;           // Time its GPUs spent computing.
  // Its FLOP rate while computing: W_j / compute time per iteration (core::WorkPerIteration over
  // JobSpec::compute_time), FLOP/s. Weighs the job in SimResult::work_utilization.
  double flops_per_compute_s = 0;
  int level = 0;  // Last level in force (-1: it never had an assignment).
  // When the job was first scheduled: the first plan in force for it carried its converged
  // profile (control loop: phase kScheduled). Oracle: its arrival. Absent: never (it left or the
  // run ended first).
  std::optional<Duration> scheduled;
  // Time in the profiling phase: scheduled - arrival, or (finish or horizon) - arrival when it
  // never got scheduled. 0 under the oracle.
  Duration profiling;
  uint32_t profile_reports = 0;  // Profiles its simulated profiler sent (control loop only).
  // Every change of its level or phase in force, in time order (control loop: from the applied
  // assignments; oracle: from the plans). Before the first entry it had no assignment.
  std::vector<LevelChange> levels;
  // Shadow accounting (ControlOptions::loop.impact, docs/impact.md): over the time the job ran
  // scheduled (phase kScheduled) under plans that carried a prediction, the time-weighted
  // prediction of its iteration under the plan and under ECMP, and the mean of the iterations
  // it completed in that time (the simulated truth). Absent: no such time, or no iteration
  // completed in it.
  std::optional<Duration> predicted_iteration;
  std::optional<Duration> predicted_ecmp_iteration;
  std::optional<Duration> observed_iteration;
  Duration predicted_for;  // How long it ran under a prediction (the weights above).
};

struct Sample {
  Duration t;
  double gpu_utilization = 0;      // Of the GPUs of running jobs, busy fraction in the interval.
  double cluster_utilization = 0;  // Of all GPUs in the topology.
  int running_jobs = 0;
};

struct SimResult {
  std::string policy;
  // Sum over jobs of gpus * compute_busy / sum over jobs of gpus * lifetime (lifetime = from
  // arrival to finish, or to the horizon). In [0, 1].
  double gpu_utilization = 0;
  // What Crux maximises: work (FLOPs) done, as a share of the work the jobs would do if their
  // GPUs computed for their whole lifetime: sum over jobs of flops_per_compute_s * compute_busy
  // / sum of flops_per_compute_s * lifetime. gpu_utilization weighs each job's busy share by
  // its GPUs, this by its FLOP rate; they agree when every job gets the same FLOP/s per GPU
  // (e.g. no job gives flops_per_iteration). In [0, 1].
  double work_utilization = 0;
  // Sum over jobs of gpus * compute_busy / (GPUs in the topology * horizon).
  double cluster_utilization = 0;
  std::vector<JobResult> jobs;  // In input order.
  // Mean utilisation of the links of each class ("host-nic", "nic-tor", "tor-agg", "agg-core",
  // ...; named by the NodeKinds at both ends, lower tier first) over the run.
  std::map<std::string, double> link_class_utilization;
  std::vector<Sample> samples;
  uint64_t events = 0;   // Flow and job events processed.
  uint64_t replans = 0;  // Policy invocations.
  // Control loop, stable mode: re-optimisations weighed against the plan in force
  // (loop.reoptimize_min_gain > 0), and of them those whose fresh plan was adopted.
  uint64_t reoptimizations = 0;
  uint64_t reoptimizations_adopted = 0;
  double wall_s = 0;
  // Bytes accounting (conservation): every byte sent is delivered by the end unless its flow
  // was cut short by the horizon or a departure (then counted in bytes_in_flight).
  double bytes_sent = 0;
  double bytes_delivered = 0;
  double bytes_in_flight = 0;
  // Extensions (beyond the #3 contract).
  uint64_t peak_active_flows = 0;         // Most flows in the network at once.
  uint64_t flow_events = 0;               // Of `events`: flow finishes and deliveries.
  uint64_t replan_failures = 0;           // Re-plans that failed (the previous plan was kept).
  bool oracle = false;                    // ControlOptions::oracle of the run.
  uint64_t phase_jobs = 0;                // Jobs run phase by phase that arrived in the run.
  uint64_t profile_reports = 0;           // Control loop: profiles reported by the jobs.
  uint64_t epochs = 0;                    // Control loop: plans that changed an assignment.
  uint64_t excluded = 0;                  // Control loop: jobs left out of a run (summed).
  uint64_t fast_forward_jumps = 0;        // Steady groups put to sleep (fast-forward).
  uint64_t fast_forward_approximate = 0;  // Groups accepted as steady by rate agreement.
  uint64_t fast_forward_carried = 0;      // Steady groups a re-plan left unchanged (kept).
  uint64_t early_wakes = 0;      // Sleeping groups woken before their wake time (an event).
  uint64_t late_wakes = 0;       // Of those, woken only after a regroup (should stay 0).
  uint64_t catch_up_events = 0;  // Of `events`, those simulated catching a woken group up.
  Duration fast_forwarded;  // Simulated time during which every running group slept (no events).
  Duration group_slept;     // The sleeps' lengths summed over groups (group-time not simulated).
  Duration simulated;       // Time the run reached (the horizon).
  // Fault injection (SimOptions::faults): what happened to each fault, and every link-health
  // change the control loop decided (and the simulator applied to the planner's topology).
  std::vector<FaultRecord> fault_records;
  std::vector<LinkDecisionRecord> link_decisions;
  // Shadow accounting: the time average over the run of PlanImpact::gpus_recovered (GPUs' worth
  // of iteration time the plans in force save against ECMP, as predicted), and the GPU-weighted
  // mean of the running jobs' GPUs over the same time (what it is a share of). 0 without it.
  double predicted_gpus_recovered = 0;
  uint64_t impact_plans = 0;       // Plans that carried a prediction.
  uint64_t flow_reports = 0;       // Heartbeat rounds with flow samples.
  uint64_t probe_samples = 0;      // Probe results the host agents reported (probes on).
  uint64_t fault_evaluations = 0;  // EvaluateFaults calls.
  // Evaluations x jobs whose flow samples the fault manager left out as contradicting every
  // other source (core::FaultManager::disbelieved_reports): in a simulation no job lies, so
  // every one is a false flag.
  uint64_t disbelieved_reports = 0;
};

// Makes the policy for a topology. Called once at the start and again after every link event
// (policies cache paths; the topology passed then has the event applied). The topology and the
// clock outlive the policy. `clock` reads simulated time: pass it to the policy (e.g. to
// core::MakePolicy) so that nothing in a simulation reads the wall clock.
using PolicyFactory = std::function<core::Result<std::unique_ptr<core::SchedulingPolicy>>(
    const core::Topology& topo, const core::Clock& clock)>;

}  // namespace crux::sim

#endif  // CRUX_SIM_SIM_TYPES_H_
