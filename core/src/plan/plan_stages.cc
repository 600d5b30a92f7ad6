#include "crux/core/plan/plan_stages.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_set>
#include <utility>

#include "crux/core/base/random.h"

namespace crux::core {

int UsableLevels(const PlannerOptions& options) {
  return options.levels - options.reserved_high_levels - options.reserved_low_levels;
}

Plan EmptyPlan(const PlannerOptions& options) {
  Plan plan;
  plan.levels = options.levels;
  plan.first_job_level = options.reserved_high_levels;
  plan.usable_levels = UsableLevels(options);
  return plan;
}

StageTimings StageMarks::Timings() const {
  StageTimings timing;
  timing.traffic = traffic - start;
  timing.profile = profile - traffic;
  timing.priority = priority - profile;
  timing.path_selection = paths - priority;
  timing.compression = compression - paths;
  timing.ports = end - compression;
  timing.total = end - start;
  return timing;
}

// ---- Stage 0: traffic ----

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

bool SamePlanningSpec(const JobSpec& a, const JobSpec& b) {
  if (a.id != b.id || a.hosts != b.hosts || a.gpus_per_host != b.gpus_per_host ||
      a.compute_time != b.compute_time || a.flops_per_iteration != b.flops_per_iteration ||
      a.overlap_start != b.overlap_start || a.compression_ratio != b.compression_ratio ||
      a.pattern != b.pattern || a.pattern_bytes != b.pattern_bytes ||
      a.flows.size() != b.flows.size()) {
    return false;
  }
  for (size_t f = 0; f < a.flows.size(); ++f) {
    const FlowDemand& x = a.flows[f];
    const FlowDemand& y = b.flows[f];
    if (x.src != y.src || x.dst != y.dst || x.bytes != y.bytes) return false;
  }
  return true;
}

// ---- Stage 1: standalone profile ----

Status ProfileJob(const Topology& topo, PathFinder& finder, const JobSpec& spec,
                  const PlannerOptions& options, JobRouting& routing, JobPlan& jp,
                  PriorityInput& in, LinkLoad& load, std::vector<size_t>& scratch) {
  jp.id = spec.id;
  jp.gpus = spec.gpus();
  jp.work = WorkPerIteration(spec, options.gpu_peak_flops);
  // With iterations_per_sec = 1 the committed "rate" is bits per iteration: M_{j,e} * 8.
  routing.iterations_per_sec = 1.0;
  Status s = SelectJobPaths(finder, routing, load, scratch);
  if (!s.ok()) {
    load.Reset();
    return s.WithContext("job '" + spec.id + "'");
  }
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
  for (const FlowDemand& f : routing.flows) bytes_per_iter += f.bytes.ToDouble();
  const double c = spec.compute_time.ToSeconds();
  const double period = std::max(c, spec.overlap_start * c + t_sec);
  jp.comm_time = Duration::Seconds(t_sec);
  jp.period = Duration::Seconds(period);
  jp.bytes_per_sec = bytes_per_iter / period;
  jp.intensity = t_sec > 0 ? jp.work.value() / t_sec : 0.0;
  routing.iterations_per_sec = 1.0 / period;

  in.intensity = jp.intensity;
  in.timing = PairJob{spec.compute_time, jp.comm_time, spec.overlap_start};
  in.bytes_per_sec = jp.bytes_per_sec;
  in.bytes_per_iteration = bytes_per_iter;
  in.gpus = jp.gpus;
  in.has_traffic = t_sec > 0;
  return Status::Ok();
}

Status ProfileJobs(const Topology& topo, PathFinder& finder, const std::vector<JobSpec>& specs,
                   const PlannerOptions& options, std::vector<JobRouting>& routing,
                   std::vector<JobPlan>& jobs, std::vector<PriorityInput>& prio_in) {
  const size_t n = specs.size();
  jobs.resize(n);
  prio_in.resize(n);
  LinkLoad load(topo);
  std::vector<size_t> scratch;
  for (size_t j = 0; j < n; ++j) {
    CRUX_RETURN_IF_ERROR(ProfileJob(topo, finder, specs[j], options, routing[j], jobs[j],
                                    prio_in[j], load, scratch));
  }
  return Status::Ok();
}

// ---- Stage 3: path selection ----

std::vector<size_t> PathSelectionOrder(const std::vector<JobPlan>& jobs,
                                       const std::vector<int>& rank, PathOrder path_order) {
  const size_t n = jobs.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (path_order == PathOrder::kPriority) {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
  } else {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const JobPlan& x = jobs[a];
      const JobPlan& y = jobs[b];
      if (x.intensity != y.intensity) return x.intensity > y.intensity;
      return x.gpus > y.gpus;
    });
  }
  return order;
}

std::vector<LinkId> RoutedLinks(const JobRouting& routing) {
  std::vector<LinkId> links;
  for (size_t f = 0; f < routing.flows.size(); ++f) {
    routing.paths[f]->ForEachLink(routing.choice[f], [&](LinkId l) { links.push_back(l); });
  }
  return links;
}

// ---- Stage 4: contention DAG and compression ----

CompressionOptions MakeCompressionOptions(const PlannerOptions& options, int usable_levels) {
  CompressionOptions copt;
  copt.levels = usable_levels;
  copt.topo_orders = options.topo_orders;
  copt.seed = options.seed;
  copt.max_exact_nodes = options.max_exact_component;
  return copt;
}

std::vector<std::vector<int>> DagComponents(const ContentionDag& dag, std::vector<int>& comp_of) {
  const size_t n = static_cast<size_t>(dag.num_nodes);
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  const auto find = [&parent](int v) {
    while (parent[static_cast<size_t>(v)] != v) {
      parent[static_cast<size_t>(v)] = parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
      v = parent[static_cast<size_t>(v)];
    }
    return v;
  };
  std::vector<uint8_t> has_edge(n, 0);
  for (const DagEdge& e : dag.edges) {
    has_edge[static_cast<size_t>(e.from)] = 1;
    has_edge[static_cast<size_t>(e.to)] = 1;
    const int a = find(e.from);
    const int b = find(e.to);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
  comp_of.assign(n, -1);
  std::vector<std::vector<int>> comps;
  std::vector<int> comp_of_root(n, -1);
  for (size_t v = 0; v < n; ++v) {
    if (!has_edge[v]) continue;
    const size_t root = static_cast<size_t>(find(static_cast<int>(v)));
    if (comp_of_root[root] < 0) {
      comp_of_root[root] = static_cast<int>(comps.size());
      comps.emplace_back();
    }
    comp_of[v] = comp_of_root[root];
    comps[static_cast<size_t>(comp_of[v])].push_back(static_cast<int>(v));
  }
  return comps;
}

// ---- Stage 5: flows, paths and source ports ----

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

SourcePortCache::SourcePortCache(const Topology& topo, PathFinder& finder,
                                 const SourcePortResolver* resolver, PortRange range, bool resolve)
    : topo_(topo), finder_(finder), resolver_(resolver), range_(range), resolve_(resolve) {
  if (resolver_ == nullptr) {
    owned_resolver_ = std::make_unique<HashEcmpModel>(0);
    resolver_ = owned_resolver_.get();
  }
}

SourcePortCache::~SourcePortCache() = default;

size_t SourcePortCache::KeyHash::operator()(const Key& k) const {
  return static_cast<size_t>(
      Mix64((static_cast<uint64_t>(k.src) << 32 | k.dst) ^ Mix64(k.path_index + 1)));
}

std::vector<FlowPlan> SourcePortCache::FlowPlans(const JobRouting& routing, int& unpinned) {
  std::vector<FlowPlan> flows = MakeFlowPlans(routing);
  if (!resolve_) return flows;
  for (FlowPlan& fp : flows) {
    // A flow inside one host never reaches a switch (path_finder.h): no port to pin.
    if (topo_.node(fp.src).host == topo_.node(fp.dst).host) continue;
    const Key key{fp.src.value(), fp.dst.value(), fp.path_index};
    auto it = ports_.find(key);
    if (it == ports_.end()) {
      if (ports_.size() >= kMaxCachedPorts) ports_.clear();
      it = ports_.emplace(key, resolver_->FindPort(finder_, fp.src, fp.dst, fp.path_index, range_))
               .first;
    }
    fp.udp_sport = it->second;
    if (!fp.udp_sport.has_value()) ++unpinned;
  }
  return flows;
}

}  // namespace crux::core
