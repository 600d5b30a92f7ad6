#include "crux/core/faults/fault_probes.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
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
  if (!(o.suspect_ratio > 0 && o.suspect_ratio <= 1)) {
    return InvalidArgumentError("faults.probes.suspect_ratio: must be in (0, 1]");
  }
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

namespace {

// The greedy multi-cover of one target set (DesignProbes, step 3), over candidate pairs.
class ProbeCover {
 public:
  ProbeCover(const Topology& topo, PathFinder& paths, const SourcePortResolver& resolver,
             const ProbeOptions& options, ProbeDesign& out)
      : topo_(topo),
        paths_(paths),
        resolver_(resolver),
        options_(options),
        out_(out),
        target_(topo.num_links(), 0),
        probed_(topo.num_links(), 0) {}

  // Wants `coverage` probes over each of `links` (ids < num_links).
  void Want(const std::vector<LinkId>& links) {
    std::fill(target_.begin(), target_.end(), 0);
    targets_ = 0;
    for (LinkId l : links) {
      if (target_[l.value()] == 0) ++targets_;
      target_[l.value()] = std::max(1, options_.coverage);
    }
  }
  size_t targets() const { return targets_; }
  // Suspects (step 2): per wanted link in the order given, `coverage` probes that cross it (one
  // at a time), the most sensitive to it first, then crossing as few other wanted links as
  // possible (ties: job, pair, path order) - a probe that crosses one link of an ambiguous set
  // and not the others is what tells them apart. Several: the localisation places a link from
  // min_flows rows (2), and one probe alone waits for a job's flow over the link, which an
  // intermittent job sends only in its communication phases (stop 52: NIC-link gray faults
  // found after 7-19 s). A capacity probe measures the narrowest link of its path, so it sees
  // the wanted link's loss only below the other links' capacity: sensitivity = min(1, narrowest
  // other link / wanted link), nominal. Each job may take `per_job` probes.
  void CoverSuspects(const std::vector<LinkId>& links, int per_job) {
    std::vector<char> wanted(target_.size(), 0);
    for (LinkId l : links) wanted[l.value()] = 1;
    const int coverage = std::max(1, options_.coverage);
    // Round by round: every suspect's first probe before any suspect's second, so the budgets
    // go to the strongest suspicions first as with one probe each. The second and later ones
    // only where the suspect is its path's narrowest link (CoverSuspect).
    std::vector<char> exhausted(target_.size(), 0);  // No candidate left for it.
    for (int round = 0; round < coverage; ++round) {
      for (LinkId want : links) {
        if (out_.total >= static_cast<size_t>(options_.max_total)) return;
        if (exhausted[want.value()]) continue;
        if (!CoverSuspect(want, wanted, per_job, /*narrowest_only=*/round > 0)) {
          exhausted[want.value()] = 1;
        }
      }
    }
  }

  // One more probe over suspect `want` (CoverSuspects); false when no candidate is left. With
  // `narrowest_only`, only over paths whose other links are no narrower (nominal) than `want`:
  // there a probe's capacity over its path's is the link's own fraction, while over a path with
  // a narrower link it understates the fault (a 200 G cable at 30 % under 100 G NICs reads
  // 60 %), and two such rows would pull the link's estimate up against its flows'.
  bool CoverSuspect(LinkId want, const std::vector<char>& wanted, int per_job,
                    bool narrowest_only) {
    std::optional<Candidate> best;
    size_t best_others = 0;
    double best_sensitivity = 0;
    const double want_bps = topo_.link(want).capacity.ToBitsPerSec();
    for (size_t j = 0; j < jobs_.size(); ++j) {
      if (jobs_[j].designed >= per_job) continue;
      for (size_t p = 0; p < jobs_[j].pairs.size(); ++p) {
        const PathSet& set = *jobs_[j].sets[p];
        const size_t n = std::min(set.size(), static_cast<size_t>(options_.max_paths_per_pair));
        for (size_t k = 0; k < n; ++k) {
          bool crosses = false;
          size_t others = 0;
          double narrowest_other = std::numeric_limits<double>::infinity();
          set.ForEachLink(k, [&](LinkId l) {
            if (l == want) {
              crosses = true;
              return;
            }
            if (l.value() < wanted.size() && wanted[l.value()]) ++others;
            narrowest_other = std::min(narrowest_other, topo_.link(l).capacity.ToBitsPerSec());
          });
          if (!crosses || taken_.count({jobs_[j].id, jobs_[j].pairs[p], k})) continue;
          if (narrowest_only && narrowest_other < want_bps) continue;
          const double sensitivity = want_bps > 0 ? std::min(1.0, narrowest_other / want_bps) : 1.0;
          if (!best || sensitivity > best_sensitivity ||
              (sensitivity == best_sensitivity && others < best_others)) {
            best = Candidate{0, j, p, k};
            best_others = others;
            best_sensitivity = sensitivity;
          }
        }
      }
    }
    if (!best) return false;
    Take(*best);  // Without a port for it, the next round tries the next candidate.
    return true;
  }

  // Every job may take max_per_job probes again (the next pass).
  void NewBudget() {
    for (JobPairs& j : jobs_) j.designed = 0;
  }
  int probed(LinkId l) const { return probed_[l.value()]; }

  // Candidate pairs of job `a`: its first max_pairs_per_job distinct flow NIC pairs, and (with
  // `crossing`) every pair one of whose pinned flows crosses a wanted link.
  void AddJob(const Assignment& a, bool crossing) {
    auto [at, added] = job_index_.try_emplace(&a.job_id, jobs_.size());
    if (added) jobs_.push_back(JobPairs{&a.job_id, {}, {}, {}, 0});
    JobPairs* j = &jobs_[at->second];
    std::set<std::pair<uint32_t, uint32_t>> distinct;  // The job's pairs in flow order.
    for (const FlowPin& f : a.flows) {
      const std::pair<uint32_t, uint32_t> key{f.src_nic.value(), f.dst_nic.value()};
      if (!distinct.insert(key).second || j->seen.count(key)) continue;
      const bool early = distinct.size() <= static_cast<size_t>(options_.max_pairs_per_job);
      const bool crosses = crossing && std::any_of(f.path.begin(), f.path.end(), [&](LinkId l) {
                             return l.valid() && l.value() < target_.size() && target_[l.value()];
                           });
      if (!early && !crosses) continue;
      AddPair(*j, f.src_nic, f.dst_nic);
    }
    if (crossing) AddDivergingPairs(a, *j);
  }

  // Takes the candidates crossing the most wanted links until none is wanted or the budgets run
  // out (lazy greedy; ties: job, pair, path order).
  void Cover() {
    if (targets_ == 0 || options_.max_per_job <= 0 || options_.max_total <= 0) return;
    std::priority_queue<Candidate, std::vector<Candidate>, Worse> heap;
    for (size_t j = 0; j < jobs_.size(); ++j) {
      for (size_t p = 0; p < jobs_[j].pairs.size(); ++p) {
        const size_t n =
            std::min(jobs_[j].sets[p]->size(), static_cast<size_t>(options_.max_paths_per_pair));
        for (size_t k = 0; k < n; ++k) {
          Candidate c{0, j, p, k};
          c.gain = Gain(c);
          if (c.gain > 0) heap.push(c);
        }
      }
    }
    while (!heap.empty() && targets_ > 0 && out_.total < static_cast<size_t>(options_.max_total)) {
      Candidate c = heap.top();
      heap.pop();
      JobPairs& job = jobs_[c.job];
      if (job.designed >= options_.max_per_job) continue;
      const size_t now = Gain(c);
      if (now == 0) continue;
      if (now < c.gain) {  // Gains only shrink; re-queue with the current one.
        c.gain = now;
        heap.push(c);
        continue;
      }
      Take(c);
    }
  }

  // Designs candidate `c` if the resolver finds a source port for its path (else nothing: another
  // candidate will do); returns its path (empty when not designed).
  std::vector<LinkId> Take(const Candidate& c) {
    JobPairs& job = jobs_[c.job];
    if (!taken_.insert({job.id, job.pairs[c.pair], c.path}).second) return {};
    const auto [src, dst] = job.pairs[c.pair];
    const std::optional<uint16_t> port =
        resolver_.FindPort(paths_, src, dst, c.path, options_.ports);
    if (!port) return {};
    FlowPin pin;
    pin.src_nic = src;
    pin.dst_nic = dst;
    pin.udp_sport = *port;
    pin.path = job.sets[c.pair]->Path(c.path);
    for (LinkId l : pin.path) {
      if (l.value() >= target_.size()) continue;
      if (target_[l.value()] > 0 && --target_[l.value()] == 0) --targets_;
      ++probed_[l.value()];
    }
    std::vector<LinkId> path = pin.path;
    out_.probes[*job.id].push_back(std::move(pin));
    ++job.designed;
    ++out_.total;
    return path;
  }

 private:
  struct JobPairs {
    const std::string* id;
    std::vector<std::pair<NodeId, NodeId>> pairs;
    std::vector<const PathSet*> sets;
    std::set<std::pair<uint32_t, uint32_t>> seen;
    int designed = 0;
  };

  void AddPair(JobPairs& j, NodeId src, NodeId dst) {
    if (src == dst || !j.seen.insert({src.value(), dst.value()}).second) return;
    Result<const PathSet*> set = paths_.Paths(src, dst);
    if (!set.ok() || (*set)->empty()) return;
    j.pairs.emplace_back(src, dst);
    j.sets.push_back(*set);
  }

  // For each flow of the job that crosses a wanted link: pairs from its source NIC to up to
  // max_pairs_per_job other NICs of the job, and from as many others to its destination NIC, so
  // that probes share the first (or the last) links of the flow's path and leave the rest: what
  // tells apart the links of a path that the flow alone cannot (a NIC's access link from the
  // far end's, a ToR's uplink from the spine's downlink).
  void AddDivergingPairs(const Assignment& a, JobPairs& j) {
    std::set<uint32_t> srcs;
    std::set<uint32_t> dsts;
    for (const FlowPin& f : a.flows) {
      srcs.insert(f.src_nic.value());
      dsts.insert(f.dst_nic.value());
    }
    const int budget = options_.max_pairs_per_job;
    std::vector<const FlowPin*> crossing;
    for (const FlowPin& f : a.flows) {
      const bool crosses = std::any_of(f.path.begin(), f.path.end(), [&](LinkId l) {
        return l.valid() && l.value() < target_.size() && target_[l.value()];
      });
      if (crosses) crossing.push_back(&f);
    }
    // Pairs through one switch only: the crossing flow's source NIC with the job's NICs of
    // other hosts under its first switch, and those with its destination NIC. Two NIC links and
    // nothing narrower (above a ToR the links are often narrower than a NIC's): the probes most
    // sensitive to a gray access link (CoverSuspects).
    std::set<uint32_t> nics = srcs;
    nics.insert(dsts.begin(), dsts.end());
    auto first_switch = [&](NodeId nic) {
      for (LinkId l : topo_.OutLinks(nic)) {
        if (IsNetworkSwitch(topo_.node(topo_.link(l).dst).kind)) return topo_.link(l).dst;
      }
      return NodeId();
    };
    for (const FlowPin* fp : crossing) {
      const NodeId up = first_switch(fp->src_nic);
      const NodeId down = first_switch(fp->dst_nic);
      int n = 0;
      for (auto it = nics.begin(); it != nics.end() && n < budget; ++it) {
        const NodeId other(*it);
        const bool near_src = up.valid() && first_switch(other) == up &&
                              topo_.node(other).host != topo_.node(fp->src_nic).host;
        const bool near_dst = down.valid() && first_switch(other) == down &&
                              topo_.node(other).host != topo_.node(fp->dst_nic).host;
        if (near_src) AddPair(j, fp->src_nic, other);
        if (near_dst) AddPair(j, other, fp->dst_nic);
        n += near_src || near_dst;
      }
    }
    // The crossing flows' ends with each other: two flows through one switch, paired across,
    // each share one of the switch's links with a probe and not the other.
    for (size_t x = 0; x < crossing.size() && x < static_cast<size_t>(budget); ++x) {
      for (size_t y = 0; y < crossing.size() && y < static_cast<size_t>(budget); ++y) {
        if (x != y) AddPair(j, crossing[x]->src_nic, crossing[y]->dst_nic);
      }
    }
    for (const FlowPin* fp : crossing) {
      const FlowPin& f = *fp;
      int n = 0;
      for (auto it = dsts.begin(); it != dsts.end() && n < budget; ++it, ++n) {
        AddPair(j, f.src_nic, NodeId(*it));
      }
      n = 0;
      for (auto it = srcs.begin(); it != srcs.end() && n < budget; ++it, ++n) {
        AddPair(j, NodeId(*it), f.dst_nic);
      }
    }
  }

  size_t Gain(const Candidate& c) const {
    size_t g = 0;
    jobs_[c.job].sets[c.pair]->ForEachLink(c.path, [&](LinkId l) {
      if (l.value() < target_.size() && target_[l.value()] > 0) ++g;
    });
    return g;
  }

  const Topology& topo_;
  PathFinder& paths_;
  const SourcePortResolver& resolver_;
  const ProbeOptions& options_;
  ProbeDesign& out_;
  std::vector<int> target_;  // Probes still wanted over each link.
  std::vector<int> probed_;  // Probes designed over each link.
  size_t targets_ = 0;       // Links still wanted.
  std::deque<JobPairs> jobs_;
  std::unordered_map<const std::string*, size_t> job_index_;  // Into jobs_, by job id.
  std::set<std::tuple<const std::string*, std::pair<NodeId, NodeId>, size_t>> taken_;
};

}  // namespace

ProbeDesign DesignProbes(const Topology& topo, const std::vector<const Assignment*>& assignments,
                         PathFinder& paths, const SourcePortResolver& resolver,
                         const ProbeOptions& options, const std::vector<LinkId>& suspects) {
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
  std::vector<LinkId> uncovered;
  for (LinkId l : watched) {
    if (covered[l.value()]) {
      out.covered_by_flows.push_back(l);
    } else {
      uncovered.push_back(l);
    }
  }
  ProbeCover cover(topo, paths, resolver, options, out);
  // 2. Suspects first (the fault manager's probe targets that are watched and up).
  std::vector<LinkId> wanted;
  for (LinkId l : suspects) {
    if (l.valid() && std::binary_search(watched.begin(), watched.end(), l)) wanted.push_back(l);
  }
  out.suspects = wanted;
  if (!wanted.empty()) {
    cover.Want(wanted);
    for (const Assignment* a : assignments) {
      if (a != nullptr) cover.AddJob(*a, /*crossing=*/true);
    }
    cover.CoverSuspects(wanted, 2 * options.max_per_job);
    cover.NewBudget();
  }
  // 3. Then the links no flow covers.
  cover.Want(uncovered);
  if (cover.targets() > 0) {
    for (const Assignment* a : assignments) {
      if (a != nullptr) cover.AddJob(*a, /*crossing=*/false);
    }
    cover.Cover();
  }
  for (LinkId l : uncovered) {
    const int n = cover.probed(l);
    if (n > 0) out.covered_by_probes.push_back(l);
    if (n == 0) out.uncovered.push_back(l);
    if (n < std::max(1, options.coverage)) out.under_covered.push_back(l);
  }
  return out;
}

}  // namespace crux::core
