#include "crux/core/plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "crux/core/base/random.h"
#include "crux/core/plan/path_selection.h"

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

namespace {

// Stage 1 for one job (ProfileJobs). `load` is all zero on entry and on return.
Status ProfileOne(const Topology& topo, PathFinder& finder, const JobSpec& spec,
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

// Stage 3's job order: decreasing I_j, ties more GPUs, then input order (kIntensity), or rank.
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

}  // namespace

Status ProfileJobs(const Topology& topo, PathFinder& finder, const std::vector<JobSpec>& specs,
                   const PlannerOptions& options, std::vector<JobRouting>& routing,
                   std::vector<JobPlan>& jobs, std::vector<PriorityInput>& prio_in) {
  const size_t n = specs.size();
  jobs.resize(n);
  prio_in.resize(n);
  LinkLoad load(topo);
  std::vector<size_t> scratch;
  for (size_t j = 0; j < n; ++j) {
    CRUX_RETURN_IF_ERROR(ProfileOne(topo, finder, specs[j], options, routing[j], jobs[j],
                                    prio_in[j], load, scratch));
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

namespace {

// Equal for planning. fixed_rank is ignored: only the `fixed` policy reads it.
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

// Weakly connected components of the DAG's nodes with at least one edge, numbered by their
// smallest node (as CompressPriorities numbers them). comp_of[v] = -1 for nodes without edges.
// Returns the members of each component, ascending.
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

// Stable mode's stage 4 (PlannerOptions::stable): gives each job that is not `kept` (in rank
// order, highest first) a level in [lo, hi], lo = the lowest level of its higher-priority DAG
// neighbours placed so far, hi = the highest of its lower-priority ones, maximising the weight of
// its edges cut (endpoints on different levels); ties go to the highest level (smallest block),
// as compression aligns blocks to the top. Jobs without edges get block 0. A job with lo > hi
// (a higher-priority neighbour sits below a lower-priority one: legal while they do not share a
// link, but no level between them is left) is repaired with as few moves as possible: either it
// takes `lo` and the lower-priority jobs above it are pushed down to it (transitively along the
// DAG), or it takes `hi` and the higher-priority ones below it are pushed up; the option moving
// fewer placed jobs wins (both keep every edge monotone; levels stay in [0, levels)). Components
// marked 1 in comp_state (compressed exactly later) are skipped; components with inserted jobs
// are 2. `block` holds the kept jobs' blocks on entry and every job's on return.
void InsertLevels(const ContentionDag& dag, const std::vector<int>& rank,
                  const std::vector<uint8_t>& kept, const std::vector<int>& comp_of, int levels,
                  std::vector<int>& block, std::vector<uint8_t>& comp_state, ReplanStats& stats) {
  const size_t n = kept.size();
  std::vector<int> slot(n, -1);  // Index of a new job in `adj`.
  std::vector<int> fresh;
  for (size_t v = 0; v < n; ++v) {
    if (kept[v]) continue;
    slot[v] = static_cast<int>(fresh.size());
    fresh.push_back(static_cast<int>(v));
  }
  if (fresh.empty()) return;
  struct Adjacent {
    std::vector<std::pair<int, double>> up;    // Higher-priority neighbours (edge into v).
    std::vector<std::pair<int, double>> down;  // Lower-priority neighbours (edge out of v).
  };
  std::vector<Adjacent> adj(fresh.size());
  for (const DagEdge& e : dag.edges) {
    if (const int s = slot[static_cast<size_t>(e.to)]; s >= 0) {
      adj[static_cast<size_t>(s)].up.emplace_back(e.from, e.weight);
    }
    if (const int s = slot[static_cast<size_t>(e.from)]; s >= 0) {
      adj[static_cast<size_t>(s)].down.emplace_back(e.to, e.weight);
    }
  }
  std::sort(fresh.begin(), fresh.end(), [&rank](int a, int b) {
    return rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
  });
  std::vector<uint8_t> placed(kept.begin(), kept.end());
  // Whole-DAG adjacency for repairs, built at the first one.
  std::vector<size_t> out_start, in_start;
  std::vector<int> out_to, in_from;
  const auto build_adjacency = [&] {
    out_start.assign(n + 1, 0);
    in_start.assign(n + 1, 0);
    for (const DagEdge& e : dag.edges) {
      ++out_start[static_cast<size_t>(e.from) + 1];
      ++in_start[static_cast<size_t>(e.to) + 1];
    }
    for (size_t v = 0; v < n; ++v) {
      out_start[v + 1] += out_start[v];
      in_start[v + 1] += in_start[v];
    }
    out_to.resize(dag.edges.size());
    in_from.resize(dag.edges.size());
    std::vector<size_t> o(out_start.begin(), out_start.end() - 1);
    std::vector<size_t> i(in_start.begin(), in_start.end() - 1);
    for (const DagEdge& e : dag.edges) {
      out_to[o[static_cast<size_t>(e.from)]++] = e.to;
      in_from[i[static_cast<size_t>(e.to)]++] = e.from;
    }
  };
  // Moves placed jobs reachable from `v` (down: along out-edges, their blocks raised to at least
  // `b`; up: along in-edges, lowered to at most `b`) so that v can take block b. Returns the
  // moved jobs with their old blocks (undo in reverse order).
  std::vector<std::pair<int, int>> moves;
  std::vector<std::pair<int, int>> queue;
  const auto push = [&](int v, int b, bool down) {
    moves.clear();
    queue.clear();
    queue.emplace_back(v, b);
    while (!queue.empty()) {
      const auto [x, bx] = queue.back();
      queue.pop_back();
      const size_t xi = static_cast<size_t>(x);
      const auto& start = down ? out_start : in_start;
      const auto& next = down ? out_to : in_from;
      for (size_t k = start[xi]; k < start[xi + 1]; ++k) {
        const int y = next[k];
        const size_t yi = static_cast<size_t>(y);
        if (!placed[yi] || y == v) continue;
        const bool violates = down ? block[yi] < bx : block[yi] > bx;
        if (!violates) continue;
        moves.emplace_back(y, block[yi]);
        block[yi] = bx;
        queue.emplace_back(y, bx);
      }
    }
  };
  const auto undo = [&] {
    for (auto it = moves.rbegin(); it != moves.rend(); ++it) {
      block[static_cast<size_t>(it->first)] = it->second;
    }
  };
  std::vector<double> above(static_cast<size_t>(levels), 0);  // Weight from up-neighbours at b.
  std::vector<double> below(static_cast<size_t>(levels), 0);  // Weight to down-neighbours at b.
  for (int v : fresh) {
    const size_t vi = static_cast<size_t>(v);
    const int c = comp_of[vi];
    if (c < 0) {  // No edges: the top level, as compression places isolated jobs.
      block[vi] = 0;
      placed[vi] = 1;
      ++stats.levels_inserted;
      continue;
    }
    if (comp_state[static_cast<size_t>(c)] == 1) continue;  // Compressed exactly anyway.
    const Adjacent& a = adj[static_cast<size_t>(slot[vi])];
    int lo = 0;
    int hi = levels - 1;
    std::fill(above.begin(), above.end(), 0.0);
    std::fill(below.begin(), below.end(), 0.0);
    for (const auto& [u, w] : a.up) {
      if (!placed[static_cast<size_t>(u)]) continue;
      const int b = block[static_cast<size_t>(u)];
      lo = std::max(lo, b);
      above[static_cast<size_t>(b)] += w;
    }
    for (const auto& [d, w] : a.down) {
      if (!placed[static_cast<size_t>(d)]) continue;
      const int b = block[static_cast<size_t>(d)];
      hi = std::min(hi, b);
      below[static_cast<size_t>(b)] += w;
    }
    if (lo > hi) {
      if (out_start.empty()) build_adjacency();
      push(v, lo, /*down=*/true);
      const size_t down_moves = moves.size();
      undo();
      push(v, hi, /*down=*/false);
      if (moves.size() > down_moves) {
        undo();
        push(v, lo, /*down=*/true);
        block[vi] = lo;
      } else {
        block[vi] = hi;
      }
      stats.levels_moved += static_cast<int>(moves.size());
      placed[vi] = 1;
      ++stats.insertions_repaired;
      ++stats.levels_inserted;
      continue;
    }
    // cut(b) = weight of up-neighbours on levels < b + weight of down-neighbours on levels > b.
    double up_before = 0;  // Sum of above[0..b).
    double down_after = 0;
    for (int b = lo + 1; b < levels; ++b) down_after += below[static_cast<size_t>(b)];
    for (int b = 0; b < lo; ++b) up_before += above[static_cast<size_t>(b)];
    int best = lo;
    double best_cut = -1;
    for (int b = lo; b <= hi; ++b) {
      const double cut = up_before + down_after;
      if (cut > best_cut) {
        best_cut = cut;
        best = b;
      }
      up_before += above[static_cast<size_t>(b)];
      if (b + 1 < levels) down_after -= below[static_cast<size_t>(b + 1)];
    }
    block[vi] = best;
    placed[vi] = 1;
    ++stats.levels_inserted;
  }
}

// Per link, the positions of the jobs whose routed links use it (each job once per link).
std::vector<std::vector<int>> LinkMembers(const std::vector<std::vector<LinkId>>& links,
                                          size_t num_links) {
  std::vector<std::vector<int>> members(num_links);
  for (size_t j = 0; j < links.size(); ++j) {
    for (LinkId l : links[j]) {
      std::vector<int>& m = members[l.value()];
      if (m.empty() || m.back() != static_cast<int>(j)) m.push_back(static_cast<int>(j));
    }
  }
  return members;
}

// Stable runs' stage 4 input (PlannerOptions::stable): the contention DAG of the new job list,
// patched from the previous one instead of rebuilt (BuildContentionDag visits every pair of jobs
// on every shared link: ~0.5 s for the 1.7M edges of 10,000 jobs on an HPN pod). Kept jobs keep
// their links and their relative rank in a stable run, so the edges between them carry over,
// renumbered (new_of_old is monotone: kept jobs keep their relative input order); the edges of
// the other jobs are found through the per-link member lists. Equal to BuildContentionDag on the
// new list (tests/core/stable_planner_test.cc checks it). `members` (the previous positions,
// LinkMembers of the previous list) is updated to the new ones.
ContentionDag PatchContentionDag(const ContentionDag& old_dag, const std::vector<int>& new_of_old,
                                 const std::vector<uint8_t>& kept,
                                 const std::vector<std::vector<LinkId>>& links,
                                 const std::vector<int>& rank,
                                 const std::vector<Intensity>& intensity,
                                 std::vector<std::vector<int>>& members) {
  const size_t n = kept.size();
  for (std::vector<int>& m : members) {  // Renumber; drop jobs that are gone.
    size_t w = 0;
    for (int old : m) {
      const int now = new_of_old[static_cast<size_t>(old)];
      if (now >= 0) m[w++] = now;
    }
    m.resize(w);
  }
  std::vector<uint8_t> touched(members.size(), 0);
  for (size_t j = 0; j < n; ++j) {
    if (kept[j]) continue;
    for (LinkId l : links[j]) {
      std::vector<int>& m = members[l.value()];
      if (!m.empty() && m.back() == static_cast<int>(j)) continue;
      m.push_back(static_cast<int>(j));
      touched[l.value()] = 1;
    }
  }
  for (size_t l = 0; l < members.size(); ++l) {
    if (touched[l]) std::sort(members[l].begin(), members[l].end());
  }
  ContentionDag dag;
  dag.num_nodes = static_cast<int>(n);
  std::vector<DagEdge> carried;
  carried.reserve(old_dag.edges.size());
  for (const DagEdge& e : old_dag.edges) {
    const int a = new_of_old[static_cast<size_t>(e.from)];
    const int b = new_of_old[static_cast<size_t>(e.to)];
    if (a >= 0 && b >= 0) carried.push_back(DagEdge{a, b, e.weight});
  }
  std::vector<DagEdge> added;
  std::vector<int> stamp(n, -1);
  std::vector<int> link_seen(members.size(), -1);
  for (size_t v = 0; v < n; ++v) {
    if (kept[v]) continue;
    const int iv = static_cast<int>(v);
    for (LinkId l : links[v]) {
      if (link_seen[l.value()] == iv) continue;  // links[v] repeats a link once per flow hop.
      link_seen[l.value()] = iv;
      for (int u : members[l.value()]) {
        const size_t ui = static_cast<size_t>(u);
        // A pair of two new jobs is found from the first of them.
        if (u == iv || stamp[ui] == iv || (!kept[ui] && u < iv)) continue;
        stamp[ui] = iv;
        if (rank[ui] < rank[v]) {
          added.push_back(DagEdge{u, iv, intensity[ui]});
        } else {
          added.push_back(DagEdge{iv, u, intensity[v]});
        }
      }
    }
  }
  const auto by_ends = [](const DagEdge& x, const DagEdge& y) {
    return x.from != y.from ? x.from < y.from : x.to < y.to;
  };
  std::sort(added.begin(), added.end(), by_ends);
  dag.edges.resize(carried.size() + added.size());
  std::merge(carried.begin(), carried.end(), added.begin(), added.end(), dag.edges.begin(),
             by_ends);
  return dag;
}

}  // namespace

// State kept across incremental runs (PlannerOptions::incremental, docs/algorithms.md §8).
struct Planner::IncrementalState {
  explicit IncrementalState(const Topology& topo)
      : load(topo), link_groups(topo.num_links()), link_stamp(topo.num_links(), 0) {}

  struct Job {
    JobSpec spec;
    JobRouting routing;              // Flows, path sets, and the last plan's joint choice.
    std::vector<size_t> flow_order;  // FlowRoutingOrder(routing).
    // Every link path selection reads for this job, as head/tail links and switch-path groups
    // (one group per SwitchPaths), each sorted and unique: the job's choice depends only on
    // the load of these links when its turn comes.
    std::vector<uint32_t> access;
    std::vector<int> groups;
    PriorityInput prio;
    JobPlan plan;        // The last plan's entry (k, rank, level, flows with ports, ...).
    int unpinned = 0;    // Unpinned flows of plan.flows.
    int path_pos = -1;   // Position in the last stage-3 order.
    int rank = 0;        // Last rank.
    int component = -1;  // Last DAG component (index into component_size), -1 without edges.
    int block = 0;       // Last level - first_job_level.
  };

  // ---- The previous plan ----
  bool valid = false;  // False: no previous plan (everything is new).
  // Stable mode only: the previous plan's whole contention DAG and LinkMembers of `links`.
  ContentionDag dag;
  std::vector<std::vector<int>> link_members;
  std::vector<Job> jobs;                       // In the previous input order.
  std::vector<std::vector<LinkId>> links;      // RoutedLinks of each job (the DAG's input).
  std::unordered_map<std::string, int> index;  // Job id -> position in `jobs`.
  int reference = -1;                          // Position of the reference job.
  std::vector<size_t> component_size;          // Per previous DAG component.

  // ---- Stage-3 dirty tracking (topology-level, kept across runs) ----
  // A link is dirty when its load at some job's turn may differ from the previous run's at that
  // job's turn; a group is dirty when one of its links is. Stamps equal to `epoch` mean dirty in
  // the current run, so nothing is cleared between runs.
  LinkLoad load;
  std::unordered_map<const SwitchPaths*, int> group_id;
  std::vector<std::vector<int>> link_groups;  // Per link, the groups containing it.
  std::vector<uint32_t> group_stamp;
  std::vector<uint32_t> link_stamp;
  uint32_t epoch = 0;

  int GroupOf(const SwitchPaths* sp) {
    const auto [it, inserted] = group_id.emplace(sp, static_cast<int>(group_stamp.size()));
    if (inserted) {
      group_stamp.push_back(0);
      for (LinkId l : sp->links) {
        std::vector<int>& groups = link_groups[l.value()];
        if (groups.empty() || groups.back() != it->second) groups.push_back(it->second);
      }
    }
    return it->second;
  }

  // Fills job.access and job.groups from its path sets.
  void Describe(Job& job) {
    job.access.clear();
    job.groups.clear();
    for (const PathSet* ps : job.routing.paths) {
      for (const PathSet::Segment& seg : ps->segments()) {
        for (LinkId l : seg.head) job.access.push_back(l.value());
        for (LinkId l : seg.tail) job.access.push_back(l.value());
        if (seg.mid != nullptr && seg.mid->hops > 0) job.groups.push_back(GroupOf(seg.mid));
      }
    }
    std::sort(job.access.begin(), job.access.end());
    job.access.erase(std::unique(job.access.begin(), job.access.end()), job.access.end());
    std::sort(job.groups.begin(), job.groups.end());
    job.groups.erase(std::unique(job.groups.begin(), job.groups.end()), job.groups.end());
  }

  void NewEpoch() {
    if (++epoch == 0) {  // Wrapped: clear every stamp once.
      std::fill(link_stamp.begin(), link_stamp.end(), 0);
      std::fill(group_stamp.begin(), group_stamp.end(), 0);
      epoch = 1;
    }
  }
  void MarkDirty(LinkId l) {
    if (link_stamp[l.value()] == epoch) return;
    link_stamp[l.value()] = epoch;
    for (int g : link_groups[l.value()]) group_stamp[static_cast<size_t>(g)] = epoch;
  }
  void MarkPathDirty(const PathSet& ps, size_t path) {
    ps.ForEachLink(path, [this](LinkId l) { MarkDirty(l); });
  }
  bool Dirty(const Job& job) const {
    for (uint32_t l : job.access) {
      if (link_stamp[l] == epoch) return true;
    }
    for (int g : job.groups) {
      if (group_stamp[static_cast<size_t>(g)] == epoch) return true;
    }
    return false;
  }
};

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

void Planner::ResetIncrementalState() {
  state_.reset();
  seeds_.clear();
}

void Planner::Seed(std::vector<PlanSeed> seeds) {
  if (WantsSeed()) seeds_ = std::move(seeds);
}

bool Planner::WantsSeed() const {
  return options_.incremental && options_.stable && (state_ == nullptr || !state_->valid);
}

CompressionOptions Planner::MakeCompressionOptions(int usable_levels) const {
  CompressionOptions copt;
  copt.levels = usable_levels;
  copt.topo_orders = options_.topo_orders;
  copt.seed = options_.seed;
  copt.max_exact_nodes = options_.max_exact_component;
  return copt;
}

std::vector<FlowPlan> Planner::MakeFlowPlansWithPorts(const JobRouting& routing, int& unpinned) {
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
    const bool inter_host = topo_.node(d.src).host != topo_.node(d.dst).host;
    if (options_.resolve_ports && inter_host) {
      const PortKey key{d.src.value(), d.dst.value(), fp.path_index};
      auto it = port_cache_.find(key);
      if (it == port_cache_.end()) {
        if (port_cache_.size() >= kMaxCachedPorts) port_cache_.clear();
        it = port_cache_
                 .emplace(key,
                          resolver_->FindPort(finder_, d.src, d.dst, fp.path_index, options_.ports))
                 .first;
      }
      fp.udp_sport = it->second;
      if (!fp.udp_sport.has_value()) ++unpinned;
    }
    flows.push_back(std::move(fp));
  }
  return flows;
}

Result<Plan> Planner::Run(const std::vector<JobSpec>& specs) {
  CRUX_RETURN_IF_ERROR(ValidatePlannerOptions(options_));
  if (options_.incremental) return RunIncremental(specs);
  state_.reset();
  return RunFull(specs);
}

Result<Plan> Planner::RunFull(const std::vector<JobSpec>& specs) {
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
    jp.pair_gain = prio.correction[j].gain_job;
    jp.pair_loss = prio.correction[j].loss_reference;
    jp.priority = prio.priority[j];
    jp.rank = prio.rank[j];
    jp.reference = static_cast<int>(j) == prio.reference;
  }
  const Duration t_priority = clock_->Now();

  // ---- 3. path selection, jobs in decreasing I_j (or rank) ----
  const std::vector<size_t> order = PathSelectionOrder(plan.jobs, prio.rank, options_.path_order);
  for (size_t j = 0; j < n; ++j)
    routing[j].iterations_per_sec = 1.0 / plan.jobs[j].period.ToSeconds();
  CRUX_RETURN_IF_ERROR(SelectPaths(finder_, order, routing, load));
  const Duration t_paths = clock_->Now();

  // ---- 4. contention DAG + compression ----
  std::vector<std::vector<LinkId>> job_links(n);
  std::vector<Intensity> intensity(n);
  for (size_t j = 0; j < n; ++j) {
    intensity[j] = plan.jobs[j].intensity;
    job_links[j] = RoutedLinks(routing[j]);
  }
  plan.dag = BuildContentionDag(job_links, prio.rank, intensity, topo_.num_links());
  CRUX_ASSIGN_OR_RETURN(Compression comp,
                        CompressPriorities(plan.dag, MakeCompressionOptions(plan.usable_levels)));
  plan.cut_weight = comp.cut_weight;
  for (const DagEdge& e : plan.dag.edges) plan.total_edge_weight += e.weight;
  for (size_t j = 0; j < n; ++j) {
    plan.jobs[j].level = plan.first_job_level + (n > 0 ? comp.level[j] : 0);
  }
  ReplanStats stats;
  {
    std::vector<int> comp_of;
    const std::vector<std::vector<int>> comps = DagComponents(plan.dag, comp_of);
    stats.components = static_cast<int>(comps.size());
    stats.components_compressed = stats.components;
    for (const std::vector<int>& c : comps) stats.jobs_compressed += static_cast<int>(c.size());
  }
  LimitOutEdges(plan.dag, prio.rank, options_.dag_edges_per_job);
  const Duration t_compress = clock_->Now();

  // ---- 5. flows, paths and source ports ----
  for (size_t j = 0; j < n; ++j) {
    plan.jobs[j].flows = MakeFlowPlansWithPorts(routing[j], plan.unpinned_flows);
  }
  const Duration t_end = clock_->Now();

  plan.timing.traffic = t_traffic - t_start;
  plan.timing.profile = t_profile - t_traffic;
  plan.timing.priority = t_priority - t_profile;
  plan.timing.path_selection = t_paths - t_priority;
  plan.timing.compression = t_compress - t_paths;
  plan.timing.ports = t_end - t_compress;
  plan.timing.total = t_end - t_start;

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

// Incremental re-planning (docs/algorithms.md §8). Every stage produces what RunFull would:
//   0-1. jobs are matched with the previous plan by id; a job whose spec is unchanged keeps its
//        traffic and standalone profile (both depend on the job alone); the others are expanded
//        and profiled. Errors can only come from these (and leave the state untouched).
//   2.   the reference is selected over all jobs; if it is the previous one, only new jobs get
//        a k_j (k_j depends on j and the reference only), else every job does. Ranks are
//        recomputed globally (a sort).
//   3.   the greedy path selection is replayed in the new order. A job's choice is a function of
//        the load on the links it reads (Job::access, Job::groups) at its turn. Links whose load
//        at that point can differ from the previous run's are marked dirty: the links of new
//        jobs (after their turn), of removed ones (after their old turn) and the old and new
//        links of flows that moved. A kept job none of whose links is dirty sees bit for bit the
//        loads it saw before (same additions in the same order: kept jobs keep their relative
//        order, checked), so its choice is reused and its load re-committed; any other job is
//        searched again. Equal to a full greedy pass by induction over the order.
//   4.   the DAG is rebuilt (cheap next to compression); a component whose members are exactly
//        one previous component's, none of them new or moved and in the same relative rank
//        order, has the same sub-DAG (same edges and weights, same node order); if it also has
//        the same position among the components (numbered by smallest node; the position seeds
//        its random orders), CompressPriorities gives it the same levels: they are reused. The
//        other components are compressed together as one sub-DAG, each with its position in
//        the whole DAG (CompressionOptions::component_index): the levels RunFull gets.
//   5.   jobs whose paths did not change keep their FlowPlans (paths and ports).
Result<Plan> Planner::RunIncremental(const std::vector<JobSpec>& specs) {
  using Job = IncrementalState::Job;
  const Duration t_start = clock_->Now();
  if (state_ == nullptr) state_ = std::make_unique<IncrementalState>(topo_);
  IncrementalState& st = *state_;
  const size_t n = specs.size();
  const size_t old_n = st.valid ? st.jobs.size() : 0;
  ReplanStats stats;
  stats.jobs = static_cast<int>(n);
  if (!st.valid) stats.full_replan = "first plan";
  // A stable first plan may start from the plan in force (Seed).
  std::unordered_map<std::string_view, const PlanSeed*> seed_of;
  const std::vector<PlanSeed> seeds = std::move(seeds_);
  seeds_.clear();
  if (options_.stable && !st.valid) {
    for (const PlanSeed& seed : seeds) seed_of.emplace(seed.id, &seed);
  }

  // ---- 0. match with the previous plan; expand the traffic of new and changed jobs ----
  std::vector<int> prev(n, -1);  // Position in st.jobs of the same, unchanged job.
  std::vector<size_t> fresh;     // The other jobs, ascending.
  std::vector<JobRouting> fresh_routing;
  {
    std::unordered_set<std::string_view> ids;
    ids.reserve(n);
    for (size_t j = 0; j < n; ++j) {
      const JobSpec& spec = specs[j];
      if (!ids.insert(spec.id).second) {
        return AlreadyExistsError("duplicate job id '" + spec.id + "'");
      }
      bool known = false;
      if (st.valid) {
        const auto it = st.index.find(spec.id);
        if (it != st.index.end()) {
          known = true;
          if (SamePlanningSpec(st.jobs[static_cast<size_t>(it->second)].spec, spec)) {
            prev[j] = it->second;
            continue;
          }
        }
      }
      ++(known ? stats.changed : stats.added);
      auto flows = ExpandTraffic(topo_, spec);
      if (!flows.ok()) return flows.status().WithContext("job '" + spec.id + "'");
      fresh.push_back(j);
      fresh_routing.emplace_back().flows = std::move(flows).value();
    }
  }
  const Duration t_traffic = clock_->Now();

  // ---- 1. profile them ----
  std::vector<JobPlan> fresh_plan(fresh.size());
  std::vector<PriorityInput> fresh_prio(fresh.size());
  {
    std::vector<size_t> scratch;
    for (size_t i = 0; i < fresh.size(); ++i) {
      CRUX_RETURN_IF_ERROR(ProfileOne(topo_, finder_, specs[fresh[i]], options_, fresh_routing[i],
                                      fresh_plan[i], fresh_prio[i], st.load, scratch));
    }
  }
  stats.profiled = static_cast<int>(fresh.size());
  const Duration t_profile = clock_->Now();
  // Nothing below fails on valid input; should it anyway, the state is dropped (next Run full).

  // The new job list: kept entries are moved out of st.jobs, whose unclaimed entries (removed
  // jobs and the old versions of changed ones) stay readable until the commit.
  std::vector<uint8_t> claimed(old_n, 0);
  std::vector<uint8_t> kept(n, 0);
  bool order_kept = true;
  {
    int last = -1;
    size_t num_kept = 0;
    for (size_t j = 0; j < n; ++j) {
      if (prev[j] < 0) continue;
      kept[j] = 1;
      claimed[static_cast<size_t>(prev[j])] = 1;
      if (prev[j] < last) order_kept = false;
      last = prev[j];
      ++num_kept;
    }
    stats.removed = static_cast<int>(old_n - num_kept) - stats.changed;
  }
  if (st.valid && !order_kept) stats.full_replan = "input order of kept jobs changed";
  // Stages 3-4 for everyone: no previous plan, or kept jobs in another relative order (ties in
  // every stage are broken by input position).
  const bool redo_all = !stats.full_replan.empty();

  std::vector<Job> next(n);
  std::vector<std::vector<LinkId>> next_links(n);
  for (size_t j = 0, i = 0; j < n; ++j) {
    Job& job = next[j];
    if (kept[j]) {
      job = std::move(st.jobs[static_cast<size_t>(prev[j])]);
      next_links[j] = std::move(st.links[static_cast<size_t>(prev[j])]);
      continue;
    }
    job.spec = specs[j];
    job.routing = std::move(fresh_routing[i]);
    job.prio = fresh_prio[i];
    job.plan = std::move(fresh_plan[i]);
    st.Describe(job);
    ++i;
  }

  // Stable mode: the jobs that keep their paths and their levels (kept jobs in a stable run,
  // seeded jobs in a seeded first plan) and those levels as blocks.
  std::vector<uint8_t> keep_paths(n, 0);
  std::vector<uint8_t> keep_level(n, 0);
  std::vector<int> kept_block(n, 0);
  const int usable_levels =
      options_.levels - options_.reserved_high_levels - options_.reserved_low_levels;
  for (size_t j = 0; !seed_of.empty() && j < n; ++j) {
    const auto it = seed_of.find(next[j].spec.id);
    if (it == seed_of.end()) continue;
    const PlanSeed& seed = *it->second;
    JobRouting& r = next[j].routing;
    if (seed.flows.size() != r.flows.size()) continue;
    std::vector<size_t> choice(r.flows.size());
    bool ok = true;
    for (size_t f = 0; ok && f < r.flows.size(); ++f) {
      const PlanSeed::Flow& sf = seed.flows[f];
      ok = sf.src == r.flows[f].src && sf.dst == r.flows[f].dst;
      std::optional<size_t> index;
      if (ok) index = r.paths[f]->IndexOf(sf.path);
      ok = ok && index.has_value();
      if (ok) choice[f] = *index;
    }
    if (!ok) continue;
    r.choice = std::move(choice);
    FlowRoutingOrder(r, next[j].flow_order);
    keep_paths[j] = 1;
    ++stats.seeded_paths;
    if (seed.level.has_value()) {
      const int b = *seed.level - options_.reserved_high_levels;
      if (b >= 0 && b < usable_levels) {
        keep_level[j] = 1;
        kept_block[j] = b;
        ++stats.seeded_levels;
      }
    }
  }
  const bool seeded_run = stats.seeded_paths > 0;
  if (seeded_run) stats.full_replan = "first plan (seeded)";

  // ---- 2. priority ----
  std::vector<PriorityInput> prio(n);
  for (size_t j = 0; j < n; ++j) prio[j] = next[j].prio;
  const int ref = SelectReference(prio);
  const bool same_ref = st.valid && (ref < 0 ? st.reference < 0
                                             : prev[static_cast<size_t>(ref)] >= 0 &&
                                                   prev[static_cast<size_t>(ref)] == st.reference);
  stats.reference_changed = st.valid && !same_ref;
  std::vector<double> priority(n);
  std::vector<double> k_values(n);
  for (size_t j = 0; j < n; ++j) {
    Job& job = next[j];
    if (!kept[j] || !same_ref) {
      Correction c;
      if (job.prio.has_traffic && static_cast<int>(j) != ref) {
        c = CompareWithReference(job.prio.timing, prio[static_cast<size_t>(ref)].timing,
                                 options_.pair_sim);
        ++stats.corrections;
      }
      job.plan.k = c.k;
      job.plan.pair_gain = c.gain_job;
      job.plan.pair_loss = c.loss_reference;
    }
    k_values[j] = job.plan.k;
    priority[j] = PriorityValue(job.prio, job.plan.k);
  }
  std::vector<int> rank;
  std::vector<int> rank_order;
  RankByPriority(prio, k_values, priority, rank, rank_order);
  for (size_t j = 0; j < n; ++j) {
    JobPlan& jp = next[j].plan;
    jp.priority = priority[j];
    jp.rank = rank[j];
    jp.reference = static_cast<int>(j) == ref;
  }
  const Duration t_priority = clock_->Now();

  // ---- 3. path selection: replay ----
  std::vector<JobPlan> order_keys;  // PathSelectionOrder reads intensity and GPUs only.
  order_keys.resize(n);
  for (size_t j = 0; j < n; ++j) {
    order_keys[j].intensity = next[j].plan.intensity;
    order_keys[j].gpus = next[j].plan.gpus;
  }
  const std::vector<size_t> order = PathSelectionOrder(order_keys, rank, options_.path_order);
  bool search_all = redo_all;
  if (!search_all) {  // Kept jobs must keep their relative order (PathOrder::kPriority may not).
    int last = -1;
    for (size_t j : order) {
      if (!kept[j]) continue;
      if (next[j].path_pos < last) {
        search_all = true;
        break;
      }
      last = next[j].path_pos;
    }
  }
  // Stable mode: kept jobs keep paths and levels, unless the reference changed (every k_j, so
  // the rank order of kept jobs may change) or kept jobs' path order changed: then stages 3-4
  // are redone for everyone, from scratch (the previous choices and levels are not those of a
  // full re-plan, so nothing of them can be reused exactly).
  bool stable_run = seeded_run;
  bool all_dirty = redo_all;
  if (options_.stable && !redo_all) {
    if (same_ref && !search_all) {
      stable_run = true;
      for (size_t j = 0; j < n; ++j) {
        keep_paths[j] = keep_level[j] = kept[j];
        kept_block[j] = next[j].block;
      }
    } else {
      stats.full_replan = same_ref ? "path order of kept jobs changed" : "reference changed";
      search_all = true;
      all_dirty = true;
    }
  }
  // Jobs of the previous plan that are gone (or changed), by their old turn.
  std::vector<std::pair<int, size_t>> gone;
  for (size_t o = 0; o < old_n; ++o) {
    if (!claimed[o]) gone.emplace_back(st.jobs[o].path_pos, o);
  }
  std::sort(gone.begin(), gone.end());
  st.NewEpoch();
  std::vector<uint8_t> moved(n, 0);  // Kept jobs whose chosen paths changed.
  std::vector<size_t> old_choice;
  size_t next_gone = 0;
  // Stable runs search only the jobs that do not keep their paths; the loads of kept jobs after
  // the last of them are read by no one and not committed.
  size_t searched_until = 0;
  if (stable_run) {
    for (size_t p = 0; p < n; ++p) {
      if (!keep_paths[order[p]]) searched_until = p + 1;
    }
  }
  for (size_t p = 0; p < n; ++p) {
    const size_t j = order[p];
    Job& job = next[j];
    job.routing.iterations_per_sec = 1.0 / job.plan.period.ToSeconds();
    if (stable_run && keep_paths[j]) {  // Keeps its paths; later jobs see its load.
      if (p < searched_until) CommitJobPaths(job.routing, job.flow_order, st.load);
      job.path_pos = static_cast<int>(p);
      continue;
    }
    if (!search_all && kept[j]) {
      // Loads of jobs that came before this one in the previous run and are gone now.
      for (; next_gone < gone.size() && gone[next_gone].first < job.path_pos; ++next_gone) {
        for (LinkId l : st.links[gone[next_gone].second]) st.MarkDirty(l);
      }
    }
    if (search_all || !kept[j] || st.Dirty(job)) {
      ++stats.paths_searched;
      if (kept[j]) old_choice = job.routing.choice;
      const Status s = SelectJobPaths(finder_, job.routing, st.load, job.flow_order);
      if (!s.ok()) {
        st.load.Reset();
        state_.reset();
        return s.WithContext("job '" + job.spec.id + "'");
      }
      const std::vector<size_t>& choice = job.routing.choice;
      for (size_t f = 0; f < choice.size(); ++f) {
        if (kept[j] && old_choice[f] == choice[f]) continue;
        if (kept[j]) moved[j] = 1;
        if (search_all) continue;
        if (kept[j]) st.MarkPathDirty(*job.routing.paths[f], old_choice[f]);
        st.MarkPathDirty(*job.routing.paths[f], choice[f]);
      }
      if (moved[j]) ++stats.paths_changed;
    } else {
      CommitJobPaths(job.routing, job.flow_order, st.load);
    }
    job.path_pos = static_cast<int>(p);
  }
  st.load.Reset();
  for (size_t j = 0; j < n; ++j) {
    if (!kept[j] || moved[j]) next_links[j] = RoutedLinks(next[j].routing);
  }
  const Duration t_paths = clock_->Now();

  // ---- 4. contention DAG + compression of the components that changed ----
  Plan plan;
  plan.levels = options_.levels;
  plan.first_job_level = options_.reserved_high_levels;
  plan.usable_levels =
      options_.levels - options_.reserved_high_levels - options_.reserved_low_levels;
  plan.reference_job = ref;
  std::vector<Intensity> intensity(n);
  for (size_t j = 0; j < n; ++j) intensity[j] = next[j].plan.intensity;
  std::vector<std::vector<int>> link_members;  // Stable mode: LinkMembers(next_links).
  // Patching costs what the new jobs' edges cost; past a quarter of the jobs new, rebuilding is
  // as cheap.
  size_t num_fresh = 0;
  for (size_t j = 0; j < n; ++j) num_fresh += kept[j] ? 0 : 1;
  if (stable_run && !seeded_run && num_fresh * 4 <= n) {
    std::vector<int> new_of_old(old_n, -1);
    for (size_t j = 0; j < n; ++j) {
      if (kept[j]) new_of_old[static_cast<size_t>(prev[j])] = static_cast<int>(j);
    }
    link_members = std::move(st.link_members);
    plan.dag =
        PatchContentionDag(st.dag, new_of_old, kept, next_links, rank, intensity, link_members);
  } else {
    plan.dag = BuildContentionDag(next_links, rank, intensity, topo_.num_links());
    if (options_.stable) link_members = LinkMembers(next_links, topo_.num_links());
  }
  std::vector<int> comp_of;
  const std::vector<std::vector<int>> comps = DagComponents(plan.dag, comp_of);
  stats.components = static_cast<int>(comps.size());
  std::vector<uint8_t> dirty(comps.size(), 0);
  std::vector<int> by_rank;
  for (size_t c = 0; c < comps.size(); ++c) {
    const std::vector<int>& members = comps[c];
    if (stable_run) {  // Kept levels stay; the others are inserted below.
      for (int v : members) {
        if (!keep_level[static_cast<size_t>(v)]) dirty[c] = 2;
      }
      continue;
    }
    bool clean = !all_dirty;
    // The same members as one previous component, none new or moved, at the same position
    // among the components (the position seeds the component's random orders).
    const int old_comp = clean ? next[static_cast<size_t>(members[0])].component : -1;
    clean = clean && old_comp == static_cast<int>(c) &&
            st.component_size[static_cast<size_t>(old_comp)] == members.size();
    for (size_t i = 0; clean && i < members.size(); ++i) {
      const size_t v = static_cast<size_t>(members[i]);
      clean = kept[v] && !moved[v] && next[v].component == old_comp;
    }
    if (clean) {  // ... in the same relative rank order.
      by_rank.assign(members.begin(), members.end());
      std::sort(by_rank.begin(), by_rank.end(), [&rank](int a, int b) {
        return rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
      });
      for (size_t i = 1; clean && i < by_rank.size(); ++i) {
        clean = next[static_cast<size_t>(by_rank[i - 1])].rank <
                next[static_cast<size_t>(by_rank[i])].rank;
      }
    }
    dirty[c] = !clean;
  }
  std::vector<int> block(n, 0);
  if (stable_run) {
    // Kept levels stay, even for jobs without edges now (no churn). Between two kept jobs an
    // edge is unchanged in a stable run (same paths, same relative rank), but not always after
    // a seed (the ranks are new): a component where kept levels contradict the DAG is
    // compressed again. The other jobs are inserted.
    for (size_t v = 0; v < n; ++v) {
      if (keep_level[v]) block[v] = kept_block[v];
    }
    for (const DagEdge& e : plan.dag.edges) {
      const size_t a = static_cast<size_t>(e.from);
      const size_t b = static_cast<size_t>(e.to);
      if (keep_level[a] && keep_level[b] && block[a] > block[b]) {
        dirty[static_cast<size_t>(comp_of[a])] = 1;
      }
    }
    InsertLevels(plan.dag, rank, keep_level, comp_of, plan.usable_levels, block, dirty, stats);
  }
  std::vector<int> local(n, -1);
  ContentionDag sub;
  CompressionOptions copt = MakeCompressionOptions(plan.usable_levels);
  for (size_t v = 0; v < n; ++v) {
    const int c = comp_of[v];
    if (c < 0) continue;
    if (dirty[static_cast<size_t>(c)] != 1) {
      if (!stable_run) block[v] = next[v].block;
      continue;
    }
    local[v] = sub.num_nodes++;
    copt.component_index.push_back(c);
  }
  for (size_t c = 0; c < comps.size(); ++c) {
    if (dirty[c] != 1) continue;
    ++stats.components_compressed;
    stats.jobs_compressed += static_cast<int>(comps[c].size());
  }
  if (sub.num_nodes > 0) {
    for (const DagEdge& e : plan.dag.edges) {  // Sorted by (from, to); `local` is monotone.
      const int from = local[static_cast<size_t>(e.from)];
      if (from >= 0) sub.edges.push_back(DagEdge{from, local[static_cast<size_t>(e.to)], e.weight});
    }
    Result<Compression> comp = CompressPriorities(sub, copt);
    if (!comp.ok()) {
      state_.reset();
      return comp.status();
    }
    for (size_t v = 0; v < n; ++v) {
      if (local[v] >= 0) block[v] = comp->level[static_cast<size_t>(local[v])];
    }
  }
  plan.cut_weight = CutWeight(plan.dag, block);  // What CompressPriorities reports for the DAG.
  for (const DagEdge& e : plan.dag.edges) plan.total_edge_weight += e.weight;
  ContentionDag whole_dag;  // Stable mode keeps it for the next run's patch.
  if (options_.stable) whole_dag = plan.dag;
  LimitOutEdges(plan.dag, rank, options_.dag_edges_per_job);
  const Duration t_compress = clock_->Now();

  // ---- 5. flows, paths and source ports ----
  plan.jobs.resize(n);
  for (size_t j = 0; j < n; ++j) {
    Job& job = next[j];
    job.plan.level = plan.first_job_level + block[j];
    if (!kept[j] || moved[j]) {
      job.unpinned = 0;
      job.plan.flows = MakeFlowPlansWithPorts(job.routing, job.unpinned);
    }
    plan.unpinned_flows += job.unpinned;
    plan.jobs[j] = job.plan;
  }
  const Duration t_end = clock_->Now();

  // ---- commit ----
  for (size_t j = 0; j < n; ++j) {
    next[j].rank = rank[j];
    next[j].component = comp_of[j];
    next[j].block = block[j];
  }
  st.jobs = std::move(next);
  st.links = std::move(next_links);
  st.dag = std::move(whole_dag);
  st.link_members = std::move(link_members);
  st.index.clear();
  st.index.reserve(n);
  for (size_t j = 0; j < n; ++j) st.index.emplace(st.jobs[j].spec.id, static_cast<int>(j));
  st.reference = ref;
  st.component_size.resize(comps.size());
  for (size_t c = 0; c < comps.size(); ++c) st.component_size[c] = comps[c].size();
  st.valid = true;
  stats_ = std::move(stats);

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
