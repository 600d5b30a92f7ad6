#include "crux/core/topology/ecmp.h"

#include <algorithm>
#include <string>
#include <utility>

#include "crux/core/base/random.h"

namespace crux::core {
namespace {

// The per-flow part of the hash: everything in the 5-tuple except the source port.
// Addresses are stand-ins (a stable hash of the endpoint's name) because core/ knows names,
// not IP addresses. Protocol 17 (UDP) and destination port 4791 are constants of RoCEv2.
uint64_t TupleBase(const PathFinder& pf, NodeId src, NodeId dst) {
  return Mix64(pf.NameHash(src)) ^ Mix64(pf.NameHash(dst) * 31 + 7) ^
         (static_cast<uint64_t>(kRoceV2DstPort) << 32) ^ (uint64_t{17} << 56);
}

uint64_t NodeSeed(const PathFinder& pf, NodeId node, uint64_t fabric_seed) {
  return Mix64(pf.NameHash(node) ^ Mix64(fabric_seed));
}

// Maps a hash onto [0, n) by multiplying its high 32 bits (Lemire's range reduction: as uniform
// as `mod n` for n << 2^32, without a division).
uint32_t Pick(uint64_t hash, uint32_t n) {
  return static_cast<uint32_t>(((hash >> 32) * static_cast<uint64_t>(n)) >> 32);
}

// H(tuple, node) = Mix64(tuple_base ^ (sport << 16) ^ node_seed).
uint64_t HashWith(uint64_t tuple_base, uint64_t node_seed, uint16_t sport) {
  return Mix64(tuple_base ^ (static_cast<uint64_t>(sport) << 16) ^ node_seed);
}

// At a decision point of a path: the node deciding, its sorted equal-cost next links, and the
// index of the link the chosen path takes.
struct Decision {
  uint64_t node_seed;
  uint32_t num_choices;
  uint32_t chosen;
};

// Next-hop candidates at every position of path `target` (see ecmp.h). The candidate set at a
// node is the set of links taken at that position by any equal-cost path through that node,
// which for shortest-path sets equals the node's ECMP group towards the destination.
// Returned most selective first (largest group), so that a failing port is rejected early.
std::vector<Decision> DecisionsAlong(const PathFinder& pf, const PathSet& set, size_t target,
                                     uint64_t fabric_seed) {
  const Topology& topo = pf.topology();
  const std::vector<LinkId> path = set.Path(target);
  const size_t hops = path.size();
  std::vector<NodeId> at(hops);  // Node deciding at each position of the target path.
  for (size_t p = 0; p < hops; ++p) at[p] = topo.link(path[p]).src;
  std::vector<std::vector<LinkId>> candidates(hops);
  // Visit every path position by position, segment by segment; the switch part reads the
  // precomputed source nodes so the scan stays in contiguous memory.
  for (const PathSet::Segment& seg : set.segments()) {
    size_t p = 0;
    for (LinkId l : seg.head) {
      if (p < hops && topo.link(l).src == at[p]) candidates[p].push_back(l);
      ++p;
    }
    const size_t mid_start = p;
    const size_t mid_hops = seg.mid == nullptr ? 0 : static_cast<size_t>(seg.mid->hops);
    if (mid_hops > 0) {
      const LinkId* links = seg.mid->links.data();
      const NodeId* srcs = seg.mid->link_src.data();
      for (size_t k = 0; k < seg.count; ++k) {
        for (size_t h = 0; h < mid_hops && mid_start + h < hops; ++h) {
          if (srcs[k * mid_hops + h] == at[mid_start + h]) {
            candidates[mid_start + h].push_back(links[k * mid_hops + h]);
          }
        }
      }
    }
    p = mid_start + mid_hops;
    for (LinkId l : seg.tail) {
      if (p < hops && topo.link(l).src == at[p]) candidates[p].push_back(l);
      ++p;
    }
  }
  std::vector<Decision> out;
  for (size_t p = 0; p < hops; ++p) {
    auto& c = candidates[p];
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    if (c.size() <= 1) continue;
    const auto pos = std::lower_bound(c.begin(), c.end(), path[p]) - c.begin();
    out.push_back(Decision{NodeSeed(pf, at[p], fabric_seed), static_cast<uint32_t>(c.size()),
                           static_cast<uint32_t>(pos)});
  }
  std::stable_sort(out.begin(), out.end(), [](const Decision& a, const Decision& b) {
    return a.num_choices > b.num_choices;
  });
  return out;
}

}  // namespace

uint64_t HashEcmpModel::Hash(const PathFinder& paths, NodeId node, NodeId src, NodeId dst,
                             uint16_t sport) const {
  return HashWith(TupleBase(paths, src, dst), NodeSeed(paths, node, seed_), sport);
}

uint32_t HashEcmpModel::Choose(uint64_t hash, uint32_t num_choices) {
  return Pick(hash, num_choices);
}

Result<size_t> HashEcmpModel::Route(PathFinder& paths, NodeId src, NodeId dst,
                                    uint16_t sport) const {
  const Topology& topo = paths.topology();
  CRUX_ASSIGN_OR_RETURN(const PathSet* set, paths.Paths(src, dst));
  const uint64_t base = TupleBase(paths, src, dst);
  // Candidate paths consistent with the decisions taken so far; narrowed hop by hop.
  std::vector<size_t> alive(set->size());
  for (size_t i = 0; i < alive.size(); ++i) alive[i] = i;
  std::vector<std::vector<LinkId>> materialised(set->size());
  for (size_t i = 0; i < set->size(); ++i) materialised[i] = set->Path(i);
  const size_t hops = static_cast<size_t>(set->hops());
  for (size_t p = 0; p < hops && alive.size() > 1; ++p) {
    std::vector<LinkId> choices;
    for (size_t i : alive) choices.push_back(materialised[i][p]);
    std::sort(choices.begin(), choices.end());
    choices.erase(std::unique(choices.begin(), choices.end()), choices.end());
    if (choices.size() <= 1) continue;
    const NodeId node = topo.link(choices.front()).src;
    const uint64_t h = HashWith(base, NodeSeed(paths, node, seed_), sport);
    const LinkId pick = choices[Pick(h, static_cast<uint32_t>(choices.size()))];
    std::vector<size_t> next;
    for (size_t i : alive) {
      if (materialised[i][p] == pick) next.push_back(i);
    }
    alive = std::move(next);
  }
  return alive.front();
}

std::optional<uint16_t> HashEcmpModel::FindPort(PathFinder& paths, NodeId src, NodeId dst,
                                                size_t path_index, PortRange range) const {
  if (range.min > range.max) return std::nullopt;
  auto set_or = paths.Paths(src, dst);
  if (!set_or.ok() || path_index >= (*set_or)->size()) return std::nullopt;
  const PathSet& set = **set_or;
  const std::vector<Decision> decisions = DecisionsAlong(paths, set, path_index, seed_);
  const uint64_t base = TupleBase(paths, src, dst);
  const uint32_t span = static_cast<uint32_t>(range.max) - range.min + 1;
  // Start the search at a flow-specific offset so that flows of one job spread over the range
  // instead of all landing near range.min.
  const uint32_t start = static_cast<uint32_t>(Mix64(base) % span);
  if (decisions.empty()) return static_cast<uint16_t>(range.min + start);
  const Decision first = decisions.front();
  for (uint32_t k = 0; k < span; ++k) {
    const uint16_t sport = static_cast<uint16_t>(range.min + (start + k) % span);
    if (Pick(HashWith(base, first.node_seed, sport), first.num_choices) != first.chosen) continue;
    bool ok = true;
    for (size_t d = 1; d < decisions.size(); ++d) {
      const Decision& dec = decisions[d];
      if (Pick(HashWith(base, dec.node_seed, sport), dec.num_choices) != dec.chosen) {
        ok = false;
        break;
      }
    }
    if (ok) return sport;
  }
  return std::nullopt;
}

void ProbedPortTable::Add(const std::string& src, const std::string& dst,
                          std::vector<std::string> path_nodes, uint16_t sport) {
  auto& ports = table_[{src, dst, std::move(path_nodes)}];
  auto it = std::lower_bound(ports.begin(), ports.end(), sport);
  if (it == ports.end() || *it != sport) ports.insert(it, sport);
}

std::optional<uint16_t> ProbedPortTable::FindPort(PathFinder& paths, NodeId src, NodeId dst,
                                                  size_t path_index, PortRange range) const {
  const Topology& topo = paths.topology();
  auto set_or = paths.Paths(src, dst);
  if (!set_or.ok() || path_index >= (*set_or)->size()) return std::nullopt;
  auto it = table_.find({topo.node(src).name, topo.node(dst).name,
                         PathNodeNames(topo, src, (*set_or)->Path(path_index))});
  if (it == table_.end()) return std::nullopt;
  for (uint16_t p : it->second) {
    if (p >= range.min && p <= range.max) return p;
  }
  return std::nullopt;
}

std::vector<std::string> PathNodeNames(const Topology& topo, NodeId src,
                                       const std::vector<LinkId>& path) {
  std::vector<std::string> names;
  names.reserve(path.size() + 1);
  names.push_back(topo.node(src).name);
  for (LinkId l : path) names.push_back(topo.node(topo.link(l).dst).name);
  return names;
}

}  // namespace crux::core
