// IncrementalPlanner: the planner's incremental path (PlannerOptions::incremental,
// docs/algorithms.md §8). Planner owns one when the option is on and hands every Run to it;
// callers use Planner, not this class.
//
// It keeps per-job state across runs (spec, traffic, standalone profile, k_j, chosen paths,
// ports, DAG component and level) and recomputes only what the jobs added, removed or changed
// since the previous successful run touch. Every stage produces what a full re-plan would:
//   0-1. MatchPrevious, Profile: jobs are matched with the previous plan by id; a job whose spec
//        is unchanged keeps its traffic and standalone profile (both depend on the job alone);
//        the others are expanded and profiled. Errors can only come from these (and leave the
//        state untouched).
//   2.   Prioritise: the reference is selected over all jobs; if it is the previous one, only
//        new jobs get a k_j (k_j depends on j and the reference only), else every job does.
//        Ranks are recomputed globally (a sort).
//   3.   ReplayPaths: the greedy path selection is replayed in the new order. A job's choice is
//        a function of the load on the links it reads (State::Job::access, ::groups) at its
//        turn. Links whose load at that point can differ from the previous run's are marked
//        dirty: the links of new jobs (after their turn), of removed ones (after their old turn)
//        and the old and new links of flows that moved. A kept job none of whose links is dirty
//        sees bit for bit the loads it saw before (same additions in the same order: kept jobs
//        keep their relative order, checked), so its choice is reused and its load re-committed;
//        any other job is searched again. Equal to a full greedy pass by induction over the
//        order.
//   4.   RecompressChanged: the DAG is rebuilt (cheap next to compression); a component whose
//        members are exactly one previous component's, none of them new or moved and in the
//        same relative rank order, has the same sub-DAG (same edges and weights, same node
//        order); if it also has the same position among the components (numbered by smallest
//        node; the position seeds its random orders), CompressPriorities gives it the same
//        levels: they are reused. The other components are compressed together as one sub-DAG,
//        each with its position in the whole DAG (CompressionOptions::component_index): the
//        levels a full re-plan gets.
//   5.   EmitFlows: jobs whose paths did not change keep their FlowPlans (paths and ports).
//   Commit: the new job list becomes the state for the next run.
// With PlannerOptions::stable, stages 3-4 keep the paths and levels of unchanged jobs instead
// (planner.h describes the mode): new jobs are routed at their turn and given levels by
// insertion (LevelInserter, incremental_planner.cc).
//
// Thread-safety: not thread-safe. Not copyable. The Topology, options, Clock, PathFinder and
// SourcePortCache given to the constructor must outlive it (Planner owns them all).
#ifndef CRUX_CORE_PLAN_INCREMENTAL_PLANNER_H_
#define CRUX_CORE_PLAN_INCREMENTAL_PLANNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/model/job.h"
#include "crux/core/plan/plan_stages.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

class IncrementalPlanner {
 public:
  // `finder` and `ports` are the owning Planner's: their caches are shared with its other runs.
  IncrementalPlanner(const Topology& topo, const PlannerOptions& options, const Clock& clock,
                     PathFinder& finder, SourcePortCache& ports);
  IncrementalPlanner(const IncrementalPlanner&) = delete;
  IncrementalPlanner& operator=(const IncrementalPlanner&) = delete;
  ~IncrementalPlanner();

  // Planner::Run with PlannerOptions::incremental: the plan a fresh Planner returns for `specs`
  // (only `timing` differs). On success, `stats` says what was recomputed; on error it is left
  // alone, and so is the state, except after an error past profiling (which valid input never
  // gives): then the state is dropped and the next run is a first plan. Consumes the seeds.
  // REQUIRES: the options pass ValidatePlannerOptions.
  Result<Plan> Run(const std::vector<JobSpec>& specs, ReplanStats& stats);

  // Drops the state and any pending seeds: the next run recomputes everything.
  void Reset();
  // Keeps `seeds` for the next run, which uses them only if it is a stable first plan
  // (Planner::Seed).
  void Seed(std::vector<PlanSeed> seeds);
  // True when a previous run left its plan: the next run is not a first plan.
  bool HasPlan() const;

 private:
  struct State;     // What is kept across runs; incremental_planner.cc.
  struct RunState;  // What one run's stages share; incremental_planner.cc.

  // Stage by stage; each REQUIRES the ones before it. Only the first two fail on valid input.
  void TakeSeeds(RunState& run);
  Status MatchPrevious(RunState& run);
  Status Profile(RunState& run);
  void AssembleJobs(RunState& run);
  void KeepSeededPaths(RunState& run);
  void Prioritise(RunState& run);
  Status ReplayPaths(RunState& run);
  std::vector<size_t> ChooseReplay(RunState& run);
  std::vector<uint8_t> KeptLoadsRead(const RunState& run) const;
  Status SearchPaths(RunState& run, size_t j, std::vector<size_t>& old_choice);
  Status RecompressChanged(RunState& run);
  void BuildDag(RunState& run);
  void FindChangedComponents(RunState& run);
  void InsertStableLevels(RunState& run);
  Status CompressChanged(RunState& run);
  void EmitFlows(RunState& run);
  void Commit(RunState& run);

  const Topology& topo_;
  const PlannerOptions& options_;
  const Clock& clock_;
  PathFinder& finder_;
  SourcePortCache& ports_;
  std::unique_ptr<State> state_;  // Null until the first run, and after Reset or an error.
  std::vector<PlanSeed> seeds_;   // Seed(), for the next run.
};

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_INCREMENTAL_PLANNER_H_
