// Planner: the Crux pipeline as one call. Cluster state (topology + jobs) in, plan out.
//
// Stages (each timed through the injected Clock):
//   0. traffic:   ExpandTraffic for every job (NIC-to-NIC flows per iteration).
//   1. profile:   standalone routing of each job alone (its own least-congested paths in an
//                 empty network, digest Q4), M_{j,e} per link, t_j = max_e M_{j,e} / B_e,
//                 period_j = max(c_j, o_j * c_j + t_j), I_j = W_j / t_j.
//   2. priority:  reference job, k_j, P_j = k_j * I_j, strict total order (priority.h).
//   3. paths:     jobs in decreasing I_j (or P_j, `path_order`), each flow on the least
//                 congested equal-cost path given the load committed so far (path_selection.h).
//   4. compress:  contention DAG over shared directed links, Algorithm 1 onto the usable
//                 levels (compression.h); levels shifted below `reserved_high_levels`.
//   5. ports:     a UDP source port per inter-host flow that pins it to its path (ecmp.h).
// The result is deterministic for a given input and seed.
//
// Where the code is: planner.cc runs the stages above for a full plan; with
// PlannerOptions::incremental, Run hands over to an IncrementalPlanner (incremental_planner.h),
// which runs the same stages on what changed; the stages both share are in plan_stages.h.
//
// Thread-safety: a Planner is not thread-safe (it caches paths). The Topology, Clock and
// resolver must outlive it; rebuild the Planner when the topology changes.
#ifndef CRUX_CORE_PLAN_PLANNER_H_
#define CRUX_CORE_PLAN_PLANNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/job.h"
#include "crux/core/plan/compression.h"
#include "crux/core/plan/path_selection.h"
#include "crux/core/plan/priority.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

enum class PathOrder { kIntensity, kPriority };

struct PlannerOptions {
  int levels = 8;                // K hardware priority levels, 1..64.
  int reserved_high_levels = 0;  // Levels above the jobs (control, profiling newcomers).
  int reserved_low_levels = 0;   // Levels below the jobs (e.g. best-effort storage).
  int topo_orders = 10;          // m in Algorithm 1, >= 1.
  // Contention-DAG components with more jobs than this are compressed with split boundaries
  // restricted to this many evenly spaced positions per order (CompressionOptions::
  // max_exact_nodes; bounds stage 4 to O(m L g^2) time and O(g^2) memory). >= 0, 0 = exact.
  int max_exact_component = 1024;
  uint64_t seed = 1;
  double gpu_peak_flops = 312e12;  // Per GPU, FLOP/s, for jobs without flops_per_iteration
                                   // (default: A100 dense BF16).
  PathOrder path_order = PathOrder::kIntensity;
  PortRange ports;            // RoCEv2 source-port search range.
  bool resolve_ports = true;  // Stage 5 on/off (the simulator does not need ports).
  PairSimOptions pair_sim;
  // Incremental re-planning (docs/algorithms.md §8). true: Run keeps per-job state across
  // calls (spec, traffic, standalone profile, k_j, chosen paths, ports, DAG component and level)
  // and recomputes only what the jobs added, removed or changed since the previous successful
  // Run touch; the plan is the one a fresh Planner returns for the same jobs (same levels, paths,
  // ports, ranks, DAG, cut; only `timing` differs), see Planner::last_replan() for what was
  // recomputed. Exact, not approximate: a component of the contention DAG keeps its levels only
  // if its members, their paths, their relative rank order and its position among the components
  // (which seeds its random orders) are unchanged; the others are compressed with their
  // positions in the whole DAG. The cost is bounded below by what the full plan itself changes:
  // one arrival can move the greedy paths of many later jobs (each re-searched, re-ported), and
  // any change inside a large component recompresses all of it (§8 has the numbers). Costs a
  // copy of every JobPlan and its routing. false (default here; the `crux` policy turns it on,
  // PolicyOptions::incremental): every Run is a full re-plan and keeps no state besides the
  // path and port caches.
  bool incremental = false;
  // What Plan::dag keeps. -1 (default): every contention edge. N >= 0: after compression, at most
  // N out-edges per job, those to the closest-ranked lower jobs (LimitOutEdges, compression.h),
  // with the whole DAG's counts in dag.edges_omitted / out_degree / in_degree. cut_weight and
  // total_edge_weight always cover the whole DAG. The compression still needs every edge while it
  // runs (the peak is unchanged); this bounds what the returned Plan holds (the 10,000-job clique
  // of docs/algorithms.md §5: 690 MB of edges with -1, 5 MB with 32).
  int dag_edges_per_job = -1;
  // Stable re-planning (requires `incremental`; docs/algorithms.md §9). false (default): every
  // incremental Run returns exactly the full re-plan, so one arrival may move the paths and
  // levels of many other jobs (least-congested choices cascade down the intensity order, and a
  // changed component is compressed again). true: after the first plan, a Run keeps what it can
  // of the previous one. Jobs whose spec is unchanged keep their paths, ports and levels; new and
  // changed jobs get their paths by the same greedy search at their turn in the intensity order
  // (seeing the load of the jobs before them) and a level by greedy insertion into the kept
  // levels: the level in the range the DAG allows (no higher-priority neighbour below it, no
  // lower-priority neighbour above it) that maximises the weight of its cut edges; when no such
  // level is left, the fewest placed jobs are pushed up or down to make one. A changed reference
  // job (every k_j changes) or a changed path order of kept jobs re-plans everything, with the
  // full re-plan's result; a seed whose levels contradict the new DAG has those components
  // compressed again. The plan drifts from the full
  // re-plan's as events accumulate (tests/core/policies/stable_planner_test.cc and
  // bench/stable_replan_bench.cc measure the gap): ResetIncrementalState re-optimises (the next
  // Run is a full plan), which cruxd does every ControlLoopOptions::reoptimize_interval.
  bool stable = false;
  // The fabric sprays packets over every plane and path (OpenAI's MRC, Ultra Ethernet; issue #30
  // item 4): a flow's path cannot be pinned, so the planner plans priorities and levels only.
  // Stage 5 is off whatever `resolve_ports` says: no flow gets a UDP source port (FlowPlan::
  // udp_sport absent, so an Assignment's FlowPin::udp_sport is 0 and clients pin nothing). The
  // stages before it are unchanged: the flows' paths are the planner's model of the load (the
  // least-congested choice), used for intensities, the contention DAG and the switches' QoS, not
  // a pin. The simulator's sprayed fabric: sim::SimOptions::spray.
  bool spray = false;

  friend bool operator==(const PlannerOptions&, const PlannerOptions&) = default;
};

// Checks ranges; errors name the option.
Status ValidatePlannerOptions(const PlannerOptions& o);

struct FlowPlan {
  NodeId src;
  NodeId dst;
  Bytes bytes;                        // Per iteration, on the wire.
  std::vector<LinkId> path;           // Chosen path, src to dst.
  size_t path_index = 0;              // Index into the equal-cost set.
  size_t num_paths = 0;               // Size of the equal-cost set.
  std::optional<uint16_t> udp_sport;  // Absent: unpinned (see ecmp.h).
};

struct JobPlan {
  std::string id;
  int gpus = 0;
  Flops work;                // W_j.
  Duration comm_time;        // t_j (standalone bottleneck transmission time).
  LinkId bottleneck;         // The link that defines t_j (invalid without traffic).
  Duration period;           // Standalone iteration time.
  double bytes_per_sec = 0;  // Standalone traffic rate.
  Intensity intensity = 0;   // I_j (FLOP/s).
  double k = 1;              // Correction factor.
  // What the pair comparison with the reference found (core/priority.h Correction; 0 for the
  // reference and for jobs without traffic): seconds of link time per second this job gains by
  // going first, and the reference loses by yielding. k = pair_gain / pair_loss unless a bound
  // or kNoInteraction applies.
  double pair_gain = 0;
  double pair_loss = 0;
  double priority = 0;  // P_j.
  int rank = 0;         // 0 = highest priority.
  int level = 0;        // Hardware level, 0 = highest.
  bool reference = false;
  // Delay of the job's communication phases relative to its natural schedule, in [0, period)
  // (CASSINI's time shift; zero for every other policy).
  Duration time_shift;
  std::vector<FlowPlan> flows;
};

struct StageTimings {
  Duration traffic;
  Duration profile;
  Duration priority;
  Duration path_selection;
  Duration compression;
  Duration ports;
  Duration total;
};

struct Plan {
  int levels = 0;             // K.
  int first_job_level = 0;    // reserved_high_levels.
  int usable_levels = 0;      // K - reserved_high - reserved_low.
  std::vector<JobPlan> jobs;  // In input order.
  ContentionDag dag;          // Node i = jobs[i].
  double cut_weight = 0;
  double total_edge_weight = 0;
  int reference_job = -1;
  int unpinned_flows = 0;
  StageTimings timing;
};

// ---- Stage helpers ----
// The building blocks of Planner::Run, exposed so that the baseline policies (policy.h) run the
// very same traffic expansion, profiling and flow bookkeeping as Crux. Defined in plan_stages.cc
// with the planner's other shared stages.

// Stage 0: checks ids (non-empty is ValidateJob's job; duplicates -> kAlreadyExists) and expands
// every job's traffic (routing[j].flows; paths/choice empty; iterations_per_sec = 1). Errors
// name the job.
Result<std::vector<JobRouting>> ExpandJobs(const Topology& topo, const std::vector<JobSpec>& specs);

// Stage 1: routes each job alone (its least-congested paths in an empty network) and fills
// jobs[j].{id, gpus, work, comm_time, bottleneck, period, bytes_per_sec, intensity} and
// prio_in[j]. Afterwards routing[j].paths/choice hold the standalone paths and
// routing[j].iterations_per_sec = 1 / period. `jobs` and `prio_in` are resized to specs.size().
// REQUIRES: routing = ExpandJobs(topo, specs), `finder` built on `topo`.
Status ProfileJobs(const Topology& topo, PathFinder& finder, const std::vector<JobSpec>& specs,
                   const PlannerOptions& options, std::vector<JobRouting>& routing,
                   std::vector<JobPlan>& jobs, std::vector<PriorityInput>& prio_in);

// The directed links a routed job uses (with repetition, one entry per flow and hop).
// REQUIRES: routing.paths/choice filled.
std::vector<LinkId> RoutedLinks(const JobRouting& routing);

// One FlowPlan per routed flow (src, dst, bytes, path, path_index, num_paths; no udp_sport).
// REQUIRES: routing.paths/choice filled.
std::vector<FlowPlan> MakeFlowPlans(const JobRouting& routing);

// What the last successful Planner::Run recomputed and what it reused (PlannerOptions::
// incremental). A non-incremental Run reports every job as profiled, searched and compressed.
struct ReplanStats {
  // Empty when the state of the previous Run was used; otherwise why everything was recomputed:
  // "incremental off", "first plan" (no state, e.g. after an error or ResetIncrementalState),
  // "input order of kept jobs changed" (profiles and k_j are still reused: only the order-
  // dependent stages 3-4 are redone for everyone); with PlannerOptions::stable also "reference
  // changed" and "path order of kept jobs changed" (stages 3-4 redone, the full re-plan's result).
  std::string full_replan;
  int jobs = 0;
  int added = 0;     // Ids not in the previous plan.
  int removed = 0;   // Ids of the previous plan that are gone.
  int changed = 0;   // Same id, different spec (e.g. a profile update): treated as removed + added.
  int profiled = 0;  // Standalone profiles computed (stage 1).
  bool reference_changed = false;  // The reference job changed: every k_j was recomputed.
  int corrections = 0;             // k_j computed (pair simulations, stage 2).
  int paths_searched = 0;          // Jobs whose paths were searched again (stage 3).
  int paths_changed = 0;           // Jobs of the previous plan whose chosen paths changed.
  int components = 0;              // Contention-DAG components (jobs with at least one edge).
  int components_compressed = 0;   // Components compressed again (the others kept their levels).
  int jobs_compressed = 0;         // Jobs in those components.
  // PlannerOptions::stable: new and changed jobs given a level by greedy insertion, insertions
  // that found no free level and moved placed jobs to make one (LevelInserter,
  // incremental_planner.cc), and how many placed jobs those repairs moved (the others kept their
  // levels).
  int levels_inserted = 0;
  int insertions_repaired = 0;
  int levels_moved = 0;
  // A seeded first plan (Planner::Seed): jobs that kept their seeded paths, and their levels.
  int seeded_paths = 0;
  int seeded_levels = 0;
  friend bool operator==(const ReplanStats&, const ReplanStats&) = default;
};

// A job's plan in force, for a stable planner's warm start (Planner::Seed): its level and the
// path of each of its flows. Non-owning: the spans must stay valid until the next Run returns.
struct PlanSeed {
  struct Flow {
    NodeId src;
    NodeId dst;
    std::span<const LinkId> path;
  };
  std::string id;
  std::optional<int> level;  // nullopt: none to keep (e.g. a newcomer on a temporary level).
  std::vector<Flow> flows;   // In the order of the job's FlowPlans.
  // The plan in force's reference job (JobPlan::reference): a stable planner keeps it (at most
  // one seed; ignored when the job has no traffic).
  bool reference = false;
};

class IncrementalPlanner;  // incremental_planner.h
class SourcePortCache;     // plan_stages.h

class Planner {
 public:
  // `resolver` may be null: a HashEcmpModel(seed 0) is used.
  Planner(const Topology& topo, PlannerOptions options,
          const Clock* clock = &SteadyClock::Instance(),
          const SourcePortResolver* resolver = nullptr);
  // Not copyable or movable: the parts it owns hold references to its options and path finder.
  Planner(const Planner&) = delete;
  Planner& operator=(const Planner&) = delete;
  ~Planner();

  // Runs the pipeline. Errors: invalid options, an invalid job (message names the job and
  // field), duplicate job ids, a flow without a path. With PlannerOptions::incremental, only what
  // changed since the previous successful Run is recomputed (same result); a failed Run leaves
  // the state of the previous one in place.
  Result<Plan> Run(const std::vector<JobSpec>& jobs);

  const PlannerOptions& options() const { return options_; }
  PathFinder& path_finder() { return finder_; }

  // What the last successful Run recomputed (incremental re-planning; see ReplanStats).
  const ReplanStats& last_replan() const { return stats_; }

  // Drops the incremental state (PlannerOptions::incremental): the next Run recomputes
  // everything. Path and port caches are kept. Drops pending seeds too.
  void ResetIncrementalState();

  // Stable mode's warm start (PlannerOptions::stable), e.g. after a restart or a topology change,
  // when the plan in force came from an earlier Planner: the next Run, if it has no state of its
  // own (first plan), keeps the seeded paths of every job whose spec gives the same flows (source
  // and destination, in order) and whose every seeded path is still one of its equal-cost paths,
  // and the seeded level where the contention DAG allows it (a component where it does not is
  // compressed again); the other jobs get paths and levels as new jobs in a stable run. Without
  // stable mode, or when the planner has state, the seeds are ignored. Consumed by the next Run.
  void Seed(std::vector<PlanSeed> seeds);
  // True when a Seed would be used by the next Run (stable mode, no state).
  bool WantsSeed() const;

 private:
  // The whole pipeline from scratch (PlannerOptions::incremental off); only the path and port
  // caches carry over from earlier runs.
  Result<Plan> RunFull(const std::vector<JobSpec>& jobs);

  const Topology& topo_;
  const PlannerOptions options_;
  const Clock* clock_;
  PathFinder finder_;
  std::unique_ptr<SourcePortCache> ports_;  // Stage 5, with the ports found so far.
  // PlannerOptions::incremental only (null otherwise): runs the pipeline on what changed.
  std::unique_ptr<IncrementalPlanner> incremental_;
  ReplanStats stats_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_PLANNER_H_
