#include "crux/core/faults/fault_probes.h"

#include <algorithm>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

namespace crux::core {
namespace {

// One candidate probe: a path of one of a job's NIC pairs.
struct Candidate {
  size_t gain = 0;  // Targets it covered when last evaluated (an upper bound of its gain now).
  size_t job = 0;   // Index into the job list (sorted by id).
  size_t pair = 0;  // Index into the job's pairs.
  size_t path = 0;  // Index into the pair's PathSet.
};

// Max-heap order: most gain first, then the lowest (job, pair, path).
struct Worse {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.gain != b.gain) return a.gain < b.gain;
    return std::tie(a.job, a.pair, a.path) > std::tie(b.job, b.pair, b.path);
  }
};

}  // namespace

Status ValidateProbeOptions(const ProbeOptions& o) {
  if (o.max_per_job < 0) return InvalidArgumentError("faults.probes.max_per_job: must be >= 0");
  if (o.max_total < 0) return InvalidArgumentError("faults.probes.max_total: must be >= 0");
  if (o.coverage < 1) return InvalidArgumentError("faults.probes.coverage: must be >= 1");
  if (o.max_pairs_per_job < 1) {
    return InvalidArgumentError("faults.probes.max_pairs_per_job: must be >= 1");
  }
  if (o.max_paths_per_pair < 1) {
    return InvalidArgumentError("faults.probes.max_paths_per_pair: must be >= 1");
  }
  if (o.ports.min > o.ports.max) {
    return InvalidArgumentError("faults.probes.ports: min must be <= max");
  }
  if (o.interval <= Duration::Zero()) {
    return InvalidArgumentError("faults.probes.interval: must be > 0");
  }
  if (o.size.count() <= 0) return InvalidArgumentError("faults.probes.size: must be > 0");
  return Status::Ok();
}

double ProbeRateBoundBps(const ProbeOptions& o) {
  return static_cast<double>(o.max_total) * o.size.ToBits() / o.interval.ToSeconds();
}

std::vector<LinkId> WatchedLinks(const Topology& topo) {
  std::vector<LinkId> out;
  for (uint32_t i = 0; i < topo.num_links(); ++i) {
    const LinkId id(i);
    const Link& l = topo.link(id);
    if (!l.up) continue;
    const NodeKind a = topo.node(l.src).kind;
    const NodeKind b = topo.node(l.dst).kind;
    const bool sa = IsNetworkSwitch(a);
    const bool sb = IsNetworkSwitch(b);
    if ((sa && sb) || (sa && b == NodeKind::kNic) || (sb && a == NodeKind::kNic)) {
      out.push_back(id);
    }
  }
  return out;  // Ascending by construction.
}

ProbeDesign DesignProbes(const Topology& topo, const std::vector<const Assignment*>& assignments,
                         PathFinder& paths, const SourcePortResolver& resolver,
                         const ProbeOptions& options) {
  ProbeDesign out;
  const std::vector<LinkId> watched = WatchedLinks(topo);

  // 1. What the flows cover.
  std::vector<char> covered(topo.num_links(), 0);
  for (const Assignment* a : assignments) {
    if (a == nullptr) continue;
    for (const FlowPin& f : a->flows) {
      for (LinkId l : f.path) {
        if (l.valid() && l.value() < topo.num_links()) covered[l.value()] = 1;
      }
    }
  }
  // 2. Targets, each wanted `coverage` times.
  std::vector<int> target(topo.num_links(), 0);  // Probes still wanted over the link.
  std::vector<int> probed(topo.num_links(), 0);
  size_t targets = 0;  // Links still wanted.
  for (LinkId l : watched) {
    if (covered[l.value()]) {
      out.covered_by_flows.push_back(l);
    } else {
      target[l.value()] = std::max(1, options.coverage);
      ++targets;
    }
  }

  // 3. Candidates: the jobs' first distinct flow NIC pairs and their equal-cost paths.
  struct JobPairs {
    const std::string* id;
    std::vector<std::pair<NodeId, NodeId>> pairs;
    std::vector<const PathSet*> sets;
    int designed = 0;
  };
  std::vector<JobPairs> jobs;
  if (targets > 0 && options.max_per_job > 0 && options.max_total > 0) {
    for (const Assignment* a : assignments) {
      if (a == nullptr) continue;
      JobPairs j{&a->job_id, {}, {}, 0};
      std::set<std::pair<uint32_t, uint32_t>> seen;
      for (const FlowPin& f : a->flows) {
        if (j.pairs.size() >= static_cast<size_t>(options.max_pairs_per_job)) break;
        if (!seen.insert({f.src_nic.value(), f.dst_nic.value()}).second) continue;
        Result<const PathSet*> set = paths.Paths(f.src_nic, f.dst_nic);
        if (!set.ok() || (*set)->empty()) continue;
        j.pairs.emplace_back(f.src_nic, f.dst_nic);
        j.sets.push_back(*set);
      }
      if (!j.pairs.empty()) jobs.push_back(std::move(j));
    }
  }
  auto gain_of = [&](const Candidate& c) {
    size_t g = 0;
    jobs[c.job].sets[c.pair]->ForEachLink(c.path, [&](LinkId l) {
      if (l.value() < target.size() && target[l.value()] > 0) ++g;
    });
    return g;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, Worse> heap;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t p = 0; p < jobs[j].pairs.size(); ++p) {
      const size_t n =
          std::min(jobs[j].sets[p]->size(), static_cast<size_t>(options.max_paths_per_pair));
      for (size_t k = 0; k < n; ++k) {
        Candidate c{0, j, p, k};
        c.gain = gain_of(c);
        if (c.gain > 0) heap.push(c);
      }
    }
  }
  std::set<std::tuple<size_t, size_t, size_t>> taken;
  while (!heap.empty() && targets > 0 && out.total < static_cast<size_t>(options.max_total)) {
    Candidate c = heap.top();
    heap.pop();
    JobPairs& job = jobs[c.job];
    if (job.designed >= options.max_per_job) continue;
    const size_t now = gain_of(c);
    if (now == 0) continue;
    if (now < c.gain) {  // Lazy greedy: gains only shrink; re-queue with the current one.
      c.gain = now;
      heap.push(c);
      continue;
    }
    if (!taken.insert({c.job, c.pair, c.path}).second) continue;
    const auto [src, dst] = job.pairs[c.pair];
    const std::optional<uint16_t> port = resolver.FindPort(paths, src, dst, c.path, options.ports);
    if (!port) continue;  // No source port reaches that path: another candidate will do.
    FlowPin pin;
    pin.src_nic = src;
    pin.dst_nic = dst;
    pin.udp_sport = *port;
    pin.path = job.sets[c.pair]->Path(c.path);
    for (LinkId l : pin.path) {
      if (l.value() >= target.size()) continue;
      if (target[l.value()] > 0 && --target[l.value()] == 0) --targets;
      ++probed[l.value()];
    }
    out.probes[*job.id].push_back(std::move(pin));
    ++job.designed;
    ++out.total;
  }
  for (LinkId l : watched) {
    if (covered[l.value()]) continue;
    if (probed[l.value()] > 0) out.covered_by_probes.push_back(l);
    if (probed[l.value()] == 0) out.uncovered.push_back(l);
    if (probed[l.value()] < std::max(1, options.coverage)) out.under_covered.push_back(l);
  }
  return out;
}

}  // namespace crux::core
