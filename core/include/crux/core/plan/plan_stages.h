// The stages that both ways of planning run: the full re-plan (Planner::RunFull, planner.cc)
// and incremental re-planning (IncrementalPlanner, incremental_planner.h). They sit here, below
// both, so that neither planner file depends on the other.
//
// Internal to core/plan/: callers outside it use planner.h. The public stage helpers declared
// there (ExpandJobs, ProfileJobs, RoutedLinks, MakeFlowPlans) are defined in plan_stages.cc too.
//
// Thread-safety: the functions are as thread-safe as their arguments (PathFinder and LinkLoad
// are not); SourcePortCache is not thread-safe.
#ifndef CRUX_CORE_PLAN_PLAN_STAGES_H_
#define CRUX_CORE_PLAN_PLAN_STAGES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/job.h"
#include "crux/core/plan/compression.h"
#include "crux/core/plan/path_selection.h"
#include "crux/core/plan/planner.h"
#include "crux/core/plan/priority.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// The levels left to jobs: K minus the reserved high and low levels (>= 1 for valid options).
int UsableLevels(const PlannerOptions& options);

// A plan with only its level band set (levels, first_job_level, usable_levels).
Plan EmptyPlan(const PlannerOptions& options);

// The clock read at the start of a run and at the end of each stage.
struct StageMarks {
  Duration start;
  Duration traffic;
  Duration profile;
  Duration priority;
  Duration paths;
  Duration compression;
  Duration end;

  // Each stage's time: the difference between its mark and the previous one.
  StageTimings Timings() const;
};

// Stage 1 for one job (ProfileJobs runs it for each job in turn): routes the job alone and
// fills jp.{id, gpus, work, comm_time, bottleneck, period, bytes_per_sec, intensity} and `in`.
// Afterwards routing.paths/choice hold the standalone paths and routing.iterations_per_sec =
// 1 / period. `load` is the scratch network: all zero on entry, and all zero again on return
// (on error too). `scratch` is a reusable buffer. Errors name the job.
// REQUIRES: routing.flows = ExpandTraffic(topo, spec); `finder` and `load` built on `topo`.
Status ProfileJob(const Topology& topo, PathFinder& finder, const JobSpec& spec,
                  const PlannerOptions& options, JobRouting& routing, JobPlan& jp,
                  PriorityInput& in, LinkLoad& load, std::vector<size_t>& scratch);

// Stage 3's job order, as indices into `jobs`: with PathOrder::kIntensity, decreasing I_j, ties
// to more GPUs, then to input order (reads only jobs[j].intensity and .gpus); with
// PathOrder::kPriority, increasing rank[j].
std::vector<size_t> PathSelectionOrder(const std::vector<JobPlan>& jobs,
                                       const std::vector<int>& rank, PathOrder path_order);

// Stage 4's options for the jobs' `usable_levels`, from the planner's options.
CompressionOptions MakeCompressionOptions(const PlannerOptions& options, int usable_levels);

// Weakly connected components of the DAG's nodes with at least one edge, numbered by their
// smallest node (as CompressPriorities numbers them). Sets comp_of[v] to v's component, -1 for
// nodes without edges (resized to dag.num_nodes). Returns the members of each component,
// ascending.
std::vector<std::vector<int>> DagComponents(const ContentionDag& dag, std::vector<int>& comp_of);

// True when two specs plan alike: a job whose spec is unchanged in this sense keeps its traffic
// and its standalone profile. fixed_rank is ignored: only the `fixed` policy reads it.
bool SamePlanningSpec(const JobSpec& a, const JobSpec& b);

// Stage 5: the FlowPlans of a routed job with a UDP source port for each inter-host flow that
// pins it to its chosen path (ecmp.h). Ports already resolved are remembered by (src, dst, path
// index), so that a flow whose path did not change between two plans keeps its port without a
// new search (and without QP churn). "No port reaches this path" is remembered too: resolvers
// are immutable (ecmp.h), so a new resolver needs a new cache (a new Planner). Bounded: cleared
// past kMaxCachedPorts entries.
//
// Non-copyable. `topo` and `finder` (and `resolver` when not null) must outlive it.
class SourcePortCache {
 public:
  // `resolver` may be null: a HashEcmpModel(seed 0) is used. `resolve` false (PlannerOptions::
  // resolve_ports): no ports are searched and every flow stays unpinned without being counted.
  SourcePortCache(const Topology& topo, PathFinder& finder, const SourcePortResolver* resolver,
                  PortRange range, bool resolve);
  SourcePortCache(const SourcePortCache&) = delete;
  SourcePortCache& operator=(const SourcePortCache&) = delete;
  ~SourcePortCache();

  // MakeFlowPlans(routing), with a port for each inter-host flow when resolving. Adds the
  // inter-host flows no port pins to `unpinned`. REQUIRES: routing.paths/choice filled.
  std::vector<FlowPlan> FlowPlans(const JobRouting& routing, int& unpinned);

 private:
  struct Key {
    uint32_t src;
    uint32_t dst;
    uint64_t path_index;
    friend bool operator==(const Key& a, const Key& b) {
      return a.src == b.src && a.dst == b.dst && a.path_index == b.path_index;
    }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  static constexpr size_t kMaxCachedPorts = 1 << 20;

  const Topology& topo_;
  PathFinder& finder_;
  std::unique_ptr<SourcePortResolver> owned_resolver_;  // The default, when none was given.
  const SourcePortResolver* resolver_;
  PortRange range_;
  bool resolve_;
  std::unordered_map<Key, std::optional<uint16_t>, KeyHash> ports_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_PLAN_STAGES_H_
