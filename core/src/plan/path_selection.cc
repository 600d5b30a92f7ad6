#include "crux/core/plan/path_selection.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace crux::core {
namespace {

constexpr double kRelTol = 1e-9;

// a < b beyond the relative tolerance.
bool Less(double a, double b) { return a < b - kRelTol * std::max(std::abs(a), std::abs(b)); }

}  // namespace

size_t LeastCongestedPath(const Topology& topo, const PathSet& paths, double bps,
                          const LinkLoad& load) {
  // Walks the PathSet's segments instead of materialising paths: the head and tail of a segment
  // are shared by all its switch paths, so their utilisation is computed once. Inside a segment
  // whose switch paths have uniform capacities, the first path whose switch links are all idle
  // is the best of the segment (every later one can at most tie, and ties go to the lower index),
  // so the scan stops there. The result is exactly that of comparing every path in index order.
  size_t best = 0;
  double best_max = 0;
  double best_sum = 0;
  bool have_best = false;
  const double* inv = load.inverse_capacity();
  // Adds link l's utilisation after placing the flow to (mx, sum); returns whether l is idle.
  auto add = [&](LinkId l, double& mx, double& sum) {
    const double cur = load.Get(l);
    const double u = inv != nullptr ? (cur + bps) * inv[l.value()]
                                    : (cur + bps) / topo.link(l).capacity.ToBitsPerSec();
    mx = std::max(mx, u);
    sum += u;
    return cur == 0.0;
  };
  auto consider = [&](size_t index, double mx, double sum) {
    if (!have_best || Less(mx, best_max) || (!Less(best_max, mx) && Less(sum, best_sum))) {
      best = index;
      best_max = mx;
      best_sum = sum;
      have_best = true;
    }
  };
  for (const PathSet::Segment& seg : paths.segments()) {
    double base_max = 0;
    double base_sum = 0;
    for (LinkId l : seg.head) add(l, base_max, base_sum);
    for (LinkId l : seg.tail) add(l, base_max, base_sum);
    // No path of this segment can beat the best so far if its shared part is already worse.
    if (have_best && Less(best_max, base_max)) continue;
    const SwitchPaths* mid = seg.mid;
    if (mid == nullptr || mid->hops == 0) {
      consider(seg.first_index, base_max, base_sum);
      continue;
    }
    const size_t hops = static_cast<size_t>(mid->hops);
    const LinkId* links = mid->links.data();
    for (size_t k = 0; k < seg.count; ++k) {
      double mx = base_max;
      double sum = base_sum;
      bool idle = true;
      for (size_t h = 0; h < hops; ++h) idle &= add(links[k * hops + h], mx, sum);
      consider(seg.first_index + k, mx, sum);
      if (idle && mid->uniform_capacity) break;
    }
  }
  return best;
}

void FlowRoutingOrder(const JobRouting& job, std::vector<size_t>& order) {
  order.resize(job.flows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return job.flows[a].bytes > job.flows[b].bytes; });
}

Status SelectJobPaths(PathFinder& finder, JobRouting& job, LinkLoad& load,
                      std::vector<size_t>& flow_order) {
  const Topology& topo = finder.topology();
  const size_t n = job.flows.size();
  // Path sets found by an earlier call for the same flows are reused (the planner routes each
  // job twice: alone for its profile, then together with the others).
  if (job.paths.size() != n) job.paths.assign(n, nullptr);
  job.choice.assign(n, 0);
  FlowRoutingOrder(job, flow_order);
  for (size_t f : flow_order) {
    const FlowDemand& flow = job.flows[f];
    if (job.paths[f] == nullptr) {
      auto set = finder.Paths(flow.src, flow.dst);
      if (!set.ok()) {
        return set.status().WithContext("flow " + topo.node(flow.src).name + " -> " +
                                        topo.node(flow.dst).name);
      }
      job.paths[f] = *set;
    }
    const PathSet& paths = *job.paths[f];
    if (paths.empty()) {
      return NotFoundError("flow " + topo.node(flow.src).name + " -> " + topo.node(flow.dst).name +
                           ": no path");
    }
    const double bps = flow.bytes.ToBits() * job.iterations_per_sec;
    const size_t pick = paths.size() == 1 ? 0 : LeastCongestedPath(topo, paths, bps, load);
    job.choice[f] = pick;
    paths.ForEachLink(pick, [&](LinkId l) { load.Add(l, bps); });
  }
  return Status::Ok();
}

void CommitJobPaths(const JobRouting& job, const std::vector<size_t>& flow_order, LinkLoad& load) {
  for (size_t f : flow_order) {
    const double bps = job.flows[f].bytes.ToBits() * job.iterations_per_sec;
    job.paths[f]->ForEachLink(job.choice[f], [&](LinkId l) { load.Add(l, bps); });
  }
}

Status SelectPaths(PathFinder& finder, const std::vector<size_t>& order,
                   std::vector<JobRouting>& jobs, LinkLoad& load) {
  std::vector<size_t> flow_order;
  for (size_t j : order) CRUX_RETURN_IF_ERROR(SelectJobPaths(finder, jobs[j], load, flow_order));
  return Status::Ok();
}

}  // namespace crux::core
