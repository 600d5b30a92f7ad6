#include "crux/core/planner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_set>
#include <utility>

#include "crux/core/path_selection.h"
#include "crux/core/random.h"

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

Result<std::vector<JobRouting>> ExpandJobs(const Topology& topo,
                                           const std::vector<JobSpec>& specs) {
  std::unordered_set<std::string> ids;
  std::vector<JobRouting> routing(specs.size());
  for (size_t j = 0; j < specs.size(); ++j) {
    const JobSpec& spec = specs[j];
    if (!ids.insert(spec.id).second) {
      return AlreadyExistsError("duplicate job id '" + spec.id + "'");
    }
    auto flows = ExpandTraffic(topo, spec);
    if (!flows.ok()) return flows.status().WithContext("job '" + spec.id + "'");
    routing[j].flows = std::move(flows).value();
  }
  return routing;
}

Status ProfileJobs(const Topology& topo, PathFinder& finder, const std::vector<JobSpec>& specs,
                   const PlannerOptions& options, std::vector<JobRouting>& routing,
                   std::vector<JobPlan>& jobs, std::vector<PriorityInput>& prio_in) {
  const size_t n = specs.size();
  jobs.resize(n);
  prio_in.resize(n);
  LinkLoad load(topo);
  for (size_t j = 0; j < n; ++j) {
    const JobSpec& spec = specs[j];
    JobPlan& jp = jobs[j];
    jp.id = spec.id;
    jp.gpus = spec.gpus();
    jp.work = WorkPerIteration(spec, options.gpu_peak_flops);
    // With iterations_per_sec = 1 the committed "rate" is bits per iteration: M_{j,e} * 8.
    routing[j].iterations_per_sec = 1.0;
    Status s = SelectPaths(finder, {j}, routing, load);
    if (!s.ok()) return s.WithContext("job '" + spec.id + "'");
    double t_sec = 0;
    for (LinkId l : load.touched()) {
      const double t = load.Get(l) / topo.link(l).capacity.ToBitsPerSec();
      if (t > t_sec || (t == t_sec && jp.bottleneck.valid() && l < jp.bottleneck)) {
        t_sec = t;
        jp.bottleneck = l;
      }
    }
    load.Reset();
    double bytes_per_iter = 0;
    for (const FlowDemand& f : routing[j].flows) bytes_per_iter += f.bytes.ToDouble();
    const double c = spec.compute_time.ToSeconds();
    const double period = std::max(c, spec.overlap_start * c + t_sec);
    jp.comm_time = Duration::Seconds(t_sec);
    jp.period = Duration::Seconds(period);
    jp.bytes_per_sec = bytes_per_iter / period;
    jp.intensity = t_sec > 0 ? jp.work.value() / t_sec : 0.0;
    routing[j].iterations_per_sec = 1.0 / period;

    PriorityInput& in = prio_in[j];
    in.intensity = jp.intensity;
    in.timing = PairJob{spec.compute_time, jp.comm_time, spec.overlap_start};
    in.bytes_per_sec = jp.bytes_per_sec;
    in.bytes_per_iteration = bytes_per_iter;
    in.gpus = jp.gpus;
    in.has_traffic = t_sec > 0;
  }
  return Status::Ok();
}

std::vector<LinkId> RoutedLinks(const JobRouting& routing) {
  std::vector<LinkId> links;
  for (size_t f = 0; f < routing.flows.size(); ++f) {
    routing.paths[f]->ForEachLink(routing.choice[f], [&](LinkId l) { links.push_back(l); });
  }
  return links;
}

std::vector<FlowPlan> MakeFlowPlans(const JobRouting& routing) {
  std::vector<FlowPlan> flows;
  flows.reserve(routing.flows.size());
  for (size_t f = 0; f < routing.flows.size(); ++f) {
    const FlowDemand& d = routing.flows[f];
    FlowPlan fp;
    fp.src = d.src;
    fp.dst = d.dst;
    fp.bytes = d.bytes;
    fp.path_index = routing.choice[f];
    fp.num_paths = routing.paths[f]->size();
    fp.path = routing.paths[f]->Path(fp.path_index);
    flows.push_back(std::move(fp));
  }
  return flows;
}

Planner::Planner(const Topology& topo, PlannerOptions options, const Clock* clock,
                 const SourcePortResolver* resolver)
    : topo_(topo),
      options_(options),
      clock_(clock != nullptr ? clock : &SteadyClock::Instance()),
      resolver_(resolver),
      finder_(topo) {
  if (resolver_ == nullptr) {
    owned_resolver_ = std::make_unique<HashEcmpModel>(0);
    resolver_ = owned_resolver_.get();
  }
}

Planner::~Planner() = default;

size_t Planner::PortKeyHash::operator()(const PortKey& k) const {
  return static_cast<size_t>(
      Mix64((static_cast<uint64_t>(k.src) << 32 | k.dst) ^ Mix64(k.path_index + 1)));
}

Result<Plan> Planner::Run(const std::vector<JobSpec>& specs) {
  CRUX_RETURN_IF_ERROR(ValidatePlannerOptions(options_));
  const Duration t_start = clock_->Now();
  Plan plan;
  plan.levels = options_.levels;
  plan.first_job_level = options_.reserved_high_levels;
  plan.usable_levels =
      options_.levels - options_.reserved_high_levels - options_.reserved_low_levels;
  const size_t n = specs.size();
  plan.jobs.resize(n);

  // ---- 0. traffic ----
  CRUX_ASSIGN_OR_RETURN(std::vector<JobRouting> routing, ExpandJobs(topo_, specs));
  const Duration t_traffic = clock_->Now();

  // ---- 1. profile: standalone routing, t_j, period, I_j ----
  LinkLoad load(topo_);
  std::vector<PriorityInput> prio_in;
  CRUX_RETURN_IF_ERROR(ProfileJobs(topo_, finder_, specs, options_, routing, plan.jobs, prio_in));
  const Duration t_profile = clock_->Now();

  // ---- 2. priority ----
  const PriorityAssignment prio = AssignPriorities(prio_in, options_.pair_sim);
  plan.reference_job = prio.reference;
  for (size_t j = 0; j < n; ++j) {
    JobPlan& jp = plan.jobs[j];
    jp.k = prio.k[j];
    jp.priority = prio.priority[j];
    jp.rank = prio.rank[j];
    jp.reference = static_cast<int>(j) == prio.reference;
  }
  const Duration t_priority = clock_->Now();

  // ---- 3. path selection, jobs in decreasing I_j (or rank) ----
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (options_.path_order == PathOrder::kPriority) {
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return prio.rank[a] < prio.rank[b]; });
  } else {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const JobPlan& x = plan.jobs[a];
      const JobPlan& y = plan.jobs[b];
      if (x.intensity != y.intensity) return x.intensity > y.intensity;
      return x.gpus > y.gpus;
    });
  }
  for (size_t j = 0; j < n; ++j)
    routing[j].iterations_per_sec = 1.0 / plan.jobs[j].period.ToSeconds();
  CRUX_RETURN_IF_ERROR(SelectPaths(finder_, order, routing, load));
  const Duration t_paths = clock_->Now();

  // ---- 4. contention DAG + compression ----
  std::vector<std::vector<LinkId>> job_links(n);
  std::vector<Intensity> intensity(n);
  for (size_t j = 0; j < n; ++j) {
    intensity[j] = plan.jobs[j].intensity;
    for (size_t f = 0; f < routing[j].flows.size(); ++f) {
      routing[j].paths[f]->ForEachLink(routing[j].choice[f],
                                       [&](LinkId l) { job_links[j].push_back(l); });
    }
  }
  plan.dag = BuildContentionDag(job_links, prio.rank, intensity, topo_.num_links());
  CompressionOptions copt;
  copt.levels = plan.usable_levels;
  copt.topo_orders = options_.topo_orders;
  copt.seed = options_.seed;
  copt.max_exact_nodes = options_.max_exact_component;
  CRUX_ASSIGN_OR_RETURN(Compression comp, CompressPriorities(plan.dag, copt));
  plan.cut_weight = comp.cut_weight;
  for (const DagEdge& e : plan.dag.edges) plan.total_edge_weight += e.weight;
  for (size_t j = 0; j < n; ++j) {
    plan.jobs[j].level = plan.first_job_level + (n > 0 ? comp.level[j] : 0);
  }
  const Duration t_compress = clock_->Now();

  // ---- 5. flows, paths and source ports ----
  for (size_t j = 0; j < n; ++j) {
    JobPlan& jp = plan.jobs[j];
    jp.flows.reserve(routing[j].flows.size());
    for (size_t f = 0; f < routing[j].flows.size(); ++f) {
      const FlowDemand& d = routing[j].flows[f];
      FlowPlan fp;
      fp.src = d.src;
      fp.dst = d.dst;
      fp.bytes = d.bytes;
      fp.path_index = routing[j].choice[f];
      fp.num_paths = routing[j].paths[f]->size();
      fp.path = routing[j].paths[f]->Path(fp.path_index);
      const bool inter_host = topo_.node(d.src).host != topo_.node(d.dst).host;
      if (options_.resolve_ports && inter_host) {
        const PortKey key{d.src.value(), d.dst.value(), fp.path_index};
        auto it = port_cache_.find(key);
        if (it == port_cache_.end()) {
          if (port_cache_.size() >= kMaxCachedPorts) port_cache_.clear();
          it = port_cache_
                   .emplace(key, resolver_->FindPort(finder_, d.src, d.dst, fp.path_index,
                                                     options_.ports))
                   .first;
        }
        fp.udp_sport = it->second;
        if (!fp.udp_sport.has_value()) ++plan.unpinned_flows;
      }
      jp.flows.push_back(std::move(fp));
    }
  }
  const Duration t_end = clock_->Now();

  plan.timing.traffic = t_traffic - t_start;
  plan.timing.profile = t_profile - t_traffic;
  plan.timing.priority = t_priority - t_profile;
  plan.timing.path_selection = t_paths - t_priority;
  plan.timing.compression = t_compress - t_paths;
  plan.timing.ports = t_end - t_compress;
  plan.timing.total = t_end - t_start;
  return plan;
}

}  // namespace crux::core
