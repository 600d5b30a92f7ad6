#include "crux/core/plan/planner.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "crux/core/plan/incremental_planner.h"
#include "crux/core/plan/plan_stages.h"

namespace crux::core {

Status ValidatePlannerOptions(const PlannerOptions& o) {
  if (o.levels < 1 || o.levels > 64) {
    return InvalidArgumentError("levels: must be in [1, 64] (got " + std::to_string(o.levels) +
                                ")");
  }
  if (o.reserved_high_levels < 0) {
    return InvalidArgumentError("reserved_high_levels: must be >= 0 (got " +
                                std::to_string(o.reserved_high_levels) + ")");
  }
  if (o.reserved_low_levels < 0) {
    return InvalidArgumentError("reserved_low_levels: must be >= 0 (got " +
                                std::to_string(o.reserved_low_levels) + ")");
  }
  if (o.levels - o.reserved_high_levels - o.reserved_low_levels < 1) {
    return InvalidArgumentError("levels: " + std::to_string(o.levels) + " levels leave no level " +
                                "for jobs after " + std::to_string(o.reserved_high_levels) +
                                " reserved high and " + std::to_string(o.reserved_low_levels) +
                                " reserved low levels");
  }
  if (o.topo_orders < 1) return InvalidArgumentError("topo_orders: must be >= 1");
  if (o.max_exact_component < 0) {
    return InvalidArgumentError("max_exact_component: must be >= 0 (got " +
                                std::to_string(o.max_exact_component) + ")");
  }
  if (o.dag_edges_per_job < -1) {
    return InvalidArgumentError("dag_edges_per_job: must be >= -1 (-1 = every edge; got " +
                                std::to_string(o.dag_edges_per_job) + ")");
  }
  if (o.stable && !o.incremental) {
    return InvalidArgumentError("stable: requires incremental re-planning");
  }
  if (!(std::isfinite(o.gpu_peak_flops) && o.gpu_peak_flops > 0)) {
    return InvalidArgumentError("gpu_peak_flops: must be > 0 and finite");
  }
  if (o.ports.min > o.ports.max) {
    return InvalidArgumentError("ports: min must be <= max");
  }
  if (o.pair_sim.measure_periods < 1 || o.pair_sim.warmup_periods < 0 ||
      o.pair_sim.max_events < 100) {
    return InvalidArgumentError(
        "pair_sim: measure_periods must be >= 1, warmup_periods >= 0, max_events >= 100");
  }
  return Status::Ok();
}

namespace {

// Stage 2 of a full plan: the priorities, k_j and ranks of `prio` into the plan's jobs.
void TakePriorities(const PriorityAssignment& prio, Plan& plan) {
  plan.reference_job = prio.reference;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    JobPlan& jp = plan.jobs[j];
    jp.k = prio.k[j];
    jp.pair_gain = prio.correction[j].gain_job;
    jp.pair_loss = prio.correction[j].loss_reference;
    jp.priority = prio.priority[j];
    jp.rank = prio.rank[j];
    jp.reference = static_cast<int>(j) == prio.reference;
  }
}

// Stage 4 of a full plan: the contention DAG of the routed jobs, compressed whole. Sets plan.dag
// (then bounded by LimitOutEdges), cut_weight, total_edge_weight and every job's level, and
// counts the components (all compressed) in `stats`.
Status CompressAll(const Topology& topo, const PlannerOptions& options,
                   const std::vector<JobRouting>& routing, const std::vector<int>& rank, Plan& plan,
                   ReplanStats& stats) {
  const size_t n = plan.jobs.size();
  std::vector<std::vector<LinkId>> job_links(n);
  std::vector<Intensity> intensity(n);
  for (size_t j = 0; j < n; ++j) {
    intensity[j] = plan.jobs[j].intensity;
    job_links[j] = RoutedLinks(routing[j]);
  }
  plan.dag = BuildContentionDag(job_links, rank, intensity, topo.num_links());
  CRUX_ASSIGN_OR_RETURN(
      Compression comp,
      CompressPriorities(plan.dag, MakeCompressionOptions(options, plan.usable_levels)));
  plan.cut_weight = comp.cut_weight;
  for (const DagEdge& e : plan.dag.edges) plan.total_edge_weight += e.weight;
  for (size_t j = 0; j < n; ++j) {
    plan.jobs[j].level = plan.first_job_level + (n > 0 ? comp.level[j] : 0);
  }
  std::vector<int> comp_of;
  const std::vector<std::vector<int>> comps = DagComponents(plan.dag, comp_of);
  stats.components = static_cast<int>(comps.size());
  stats.components_compressed = stats.components;
  for (const std::vector<int>& c : comps) stats.jobs_compressed += static_cast<int>(c.size());
  LimitOutEdges(plan.dag, rank, options.dag_edges_per_job);
  return Status::Ok();
}

}  // namespace

Planner::Planner(const Topology& topo, PlannerOptions options, const Clock* clock,
                 const SourcePortResolver* resolver)
    : topo_(topo),
      options_(options),
      clock_(clock != nullptr ? clock : &SteadyClock::Instance()),
      finder_(topo),
      ports_(std::make_unique<SourcePortCache>(topo_, finder_, resolver, options_.ports,
                                               options_.resolve_ports && !options_.spray)) {
  if (options_.incremental) {
    incremental_ = std::make_unique<IncrementalPlanner>(topo_, options_, *clock_, finder_, *ports_);
  }
}

Planner::~Planner() = default;

void Planner::ResetIncrementalState() {
  if (incremental_ != nullptr) incremental_->Reset();
}

void Planner::Seed(std::vector<PlanSeed> seeds) {
  if (WantsSeed()) incremental_->Seed(std::move(seeds));
}

bool Planner::WantsSeed() const {
  return options_.incremental && options_.stable && !incremental_->HasPlan();
}

Result<Plan> Planner::Run(const std::vector<JobSpec>& specs) {
  CRUX_RETURN_IF_ERROR(ValidatePlannerOptions(options_));
  if (options_.incremental) return incremental_->Run(specs, stats_);
  return RunFull(specs);
}

Result<Plan> Planner::RunFull(const std::vector<JobSpec>& specs) {
  StageMarks t;
  t.start = clock_->Now();
  Plan plan = EmptyPlan(options_);
  const size_t n = specs.size();
  plan.jobs.resize(n);

  // ---- 0. traffic ----
  CRUX_ASSIGN_OR_RETURN(std::vector<JobRouting> routing, ExpandJobs(topo_, specs));
  t.traffic = clock_->Now();

  // ---- 1. profile: standalone routing, t_j, period, I_j ----
  std::vector<PriorityInput> prio_in;
  CRUX_RETURN_IF_ERROR(ProfileJobs(topo_, finder_, specs, options_, routing, plan.jobs, prio_in));
  t.profile = clock_->Now();

  // ---- 2. priority ----
  const PriorityAssignment prio = AssignPriorities(prio_in, options_.pair_sim);
  TakePriorities(prio, plan);
  t.priority = clock_->Now();

  // ---- 3. path selection, jobs in decreasing I_j (or rank) ----
  const std::vector<size_t> order = PathSelectionOrder(plan.jobs, prio.rank, options_.path_order);
  for (size_t j = 0; j < n; ++j) {
    routing[j].iterations_per_sec = 1.0 / plan.jobs[j].period.ToSeconds();
  }
  LinkLoad load(topo_);
  CRUX_RETURN_IF_ERROR(SelectPaths(finder_, order, routing, load));
  t.paths = clock_->Now();

  // ---- 4. contention DAG + compression ----
  ReplanStats stats;
  CRUX_RETURN_IF_ERROR(CompressAll(topo_, options_, routing, prio.rank, plan, stats));
  t.compression = clock_->Now();

  // ---- 5. flows, paths and source ports ----
  for (size_t j = 0; j < n; ++j) {
    plan.jobs[j].flows = ports_->FlowPlans(routing[j], plan.unpinned_flows);
  }
  t.end = clock_->Now();
  plan.timing = t.Timings();

  // Everything was computed.
  stats.full_replan = "incremental off";
  stats.jobs = static_cast<int>(n);
  stats.added = static_cast<int>(n);
  stats.profiled = static_cast<int>(n);
  for (size_t j = 0; j < n; ++j) {
    if (prio_in[j].has_traffic && static_cast<int>(j) != prio.reference) ++stats.corrections;
  }
  stats.paths_searched = static_cast<int>(n);
  stats_ = std::move(stats);
  return plan;
}

}  // namespace crux::core
