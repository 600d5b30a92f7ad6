#include "crux/core/topology/path_finder.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <utility>

#include "crux/core/base/random.h"

namespace crux::core {
namespace {

uint64_t PairKey(NodeId a, NodeId b) {
  return (static_cast<uint64_t>(a.value()) << 32) | static_cast<uint64_t>(b.value());
}

}  // namespace

const PathSet::Segment& PathSet::SegmentOf(size_t i) const {
  // Segments are few (one per access/egress route pair); a linear scan beats a binary search.
  for (size_t s = segments_.size(); s-- > 0;) {
    if (segments_[s].first_index <= i) return segments_[s];
  }
  return segments_.front();
}

std::vector<LinkId> PathSet::Path(size_t i) const {
  std::vector<LinkId> out;
  out.reserve(static_cast<size_t>(hops_));
  ForEachLink(i, [&out](LinkId l) { out.push_back(l); });
  return out;
}

std::optional<size_t> PathSet::IndexOf(std::span<const LinkId> path) const {
  if (path.size() != static_cast<size_t>(hops_)) return std::nullopt;
  for (const Segment& s : segments_) {
    const size_t mid = s.mid != nullptr ? static_cast<size_t>(s.mid->hops) : 0;
    if (s.head.size() + mid + s.tail.size() != path.size()) continue;
    if (!std::equal(s.head.begin(), s.head.end(), path.begin())) continue;
    if (!std::equal(s.tail.begin(), s.tail.end(), path.end() - static_cast<long>(s.tail.size()))) {
      continue;
    }
    if (mid == 0) return s.first_index;
    const LinkId* want = path.data() + s.head.size();
    for (size_t k = 0; k < s.count; ++k) {
      const LinkId* p = s.mid->links.data() + k * mid;
      if (std::equal(p, p + mid, want)) return s.first_index + k;
    }
  }
  return std::nullopt;
}

PathFinder::PathFinder(const Topology& topo) : topo_(topo) {
  name_hash_.reserve(topo.num_nodes());
  for (const Node& n : topo.nodes()) name_hash_.push_back(StableHash(n.name.data(), n.name.size()));
  switch_index_.assign(topo.num_nodes(), -1);
  for (size_t i = 0; i < topo.num_nodes(); ++i) {
    if (!IsNetworkSwitch(topo.nodes()[i].kind)) continue;
    switch_index_[i] = static_cast<int>(switch_node_.size());
    switch_node_.push_back(NodeId(static_cast<uint32_t>(i)));
  }
  switch_out_.resize(switch_node_.size());
  switch_in_.resize(switch_node_.size());
  for (size_t i = 0; i < topo.num_links(); ++i) {
    const Link& l = topo.links()[i];
    const int a = switch_index_[l.src.value()];
    const int b = switch_index_[l.dst.value()];
    if (a < 0 || b < 0 || !l.up) continue;
    const LinkId id(static_cast<uint32_t>(i));
    switch_out_[static_cast<size_t>(a)].push_back(Adj{id, b});
    switch_in_[static_cast<size_t>(b)].push_back(Adj{id, a});
  }
}

const std::vector<int16_t>& PathFinder::DistancesFrom(NodeId sw) {
  auto it = dist_cache_.find(sw.value());
  if (it != dist_cache_.end()) return it->second;
  // BFS over network switches only (hosts and NICs never carry transit traffic).
  std::vector<int16_t> dist(switch_node_.size(), -1);
  std::vector<int> queue;
  queue.reserve(switch_node_.size());
  const int s = SwitchIndex(sw);
  dist[static_cast<size_t>(s)] = 0;
  queue.push_back(s);
  for (size_t head = 0; head < queue.size(); ++head) {
    const int v = queue[head];
    for (const Adj& a : switch_out_[static_cast<size_t>(v)]) {
      if (dist[static_cast<size_t>(a.other)] >= 0) continue;
      dist[static_cast<size_t>(a.other)] = static_cast<int16_t>(dist[static_cast<size_t>(v)] + 1);
      queue.push_back(a.other);
    }
  }
  return dist_cache_.emplace(sw.value(), std::move(dist)).first->second;
}

const SwitchPaths& PathFinder::SwitchPathsBetween(NodeId a, NodeId b) {
  const uint64_t key = PairKey(a, b);
  auto it = switch_paths_.find(key);
  if (it != switch_paths_.end()) return *it->second;

  auto sp = std::make_unique<SwitchPaths>();
  const std::vector<int16_t>& dist = DistancesFrom(a);
  const int hops = dist[static_cast<size_t>(SwitchIndex(b))];
  sp->hops = hops < 0 ? 0 : hops;
  if (hops == 0) {
    sp->count = 1;
  } else if (hops > 0) {
    // Walk backwards from b along incoming links whose source is one hop closer to a. Each
    // complete walk is one shortest path (collected reversed, then flipped).
    std::vector<std::vector<LinkId>> paths;
    std::vector<LinkId> rev;
    auto walk = [&](auto&& self, int v) -> void {
      const int d = dist[static_cast<size_t>(v)];
      if (d == 0) {
        paths.emplace_back(rev.rbegin(), rev.rend());
        return;
      }
      for (const Adj& in : switch_in_[static_cast<size_t>(v)]) {
        if (dist[static_cast<size_t>(in.other)] != d - 1) continue;
        rev.push_back(in.link);
        self(self, in.other);
        rev.pop_back();
      }
    };
    walk(walk, SwitchIndex(b));
    std::sort(paths.begin(), paths.end());
    sp->count = paths.size();
    for (size_t i = 1; i < paths.size() && sp->uniform_capacity; ++i) {
      for (int h = 0; h < hops; ++h) {
        if (topo_.link(paths[i][h]).capacity != topo_.link(paths[0][h]).capacity) {
          sp->uniform_capacity = false;
          break;
        }
      }
    }
    sp->links.reserve(paths.size() * static_cast<size_t>(hops));
    for (const auto& p : paths) sp->links.insert(sp->links.end(), p.begin(), p.end());
    sp->link_src.reserve(sp->links.size());
    for (LinkId l : sp->links) sp->link_src.push_back(topo_.link(l).src);
  }
  return *switch_paths_.emplace(key, std::move(sp)).first->second;
}

std::vector<PathFinder::AccessRoute> PathFinder::AccessRoutes(NodeId endpoint, bool egress) const {
  // Ingress (egress == false): links from the endpoint towards its first switch.
  // Egress: links from the last switch into the endpoint, in travel order.
  std::vector<AccessRoute> routes;
  auto usable = [&](LinkId out_link) {
    // out_link leaves the endpoint side; for egress the traffic flows on its reverse.
    const Link& l = topo_.link(out_link);
    return egress ? topo_.link(l.reverse).up : l.up;
  };
  auto add_via = [&](NodeId from, std::vector<LinkId> prefix) {
    for (LinkId l : topo_.OutLinks(from)) {
      const Link& link = topo_.link(l);
      if (!IsNetworkSwitch(topo_.node(link.dst).kind) || !usable(l)) continue;
      AccessRoute r;
      r.sw = link.dst;
      r.links = prefix;
      r.links.push_back(l);
      routes.push_back(std::move(r));
    }
  };
  add_via(endpoint, {});
  if (topo_.node(endpoint).kind == NodeKind::kHost) {
    for (LinkId l : topo_.OutLinks(endpoint)) {
      const Link& link = topo_.link(l);
      if (topo_.node(link.dst).kind != NodeKind::kNic || !usable(l)) continue;
      add_via(link.dst, {l});
    }
  }
  if (egress) {
    for (AccessRoute& r : routes) {
      std::reverse(r.links.begin(), r.links.end());
      for (LinkId& l : r.links) l = topo_.link(l).reverse;
    }
  }
  return routes;
}

Result<PathSet> PathFinder::IntraHostPaths(NodeId src, NodeId dst) const {
  // BFS restricted to the nodes of one host, then enumerate every shortest path.
  const NodeId host = topo_.node(src).host;
  std::vector<int> dist(topo_.num_nodes(), -1);
  std::deque<NodeId> queue{src};
  dist[src.value()] = 0;
  while (!queue.empty()) {
    NodeId v = queue.front();
    queue.pop_front();
    for (LinkId l : topo_.OutLinks(v)) {
      const Link& link = topo_.link(l);
      if (!link.up || topo_.node(link.dst).host != host || dist[link.dst.value()] >= 0) continue;
      dist[link.dst.value()] = dist[v.value()] + 1;
      queue.push_back(link.dst);
    }
  }
  if (dist[dst.value()] < 0) {
    return NotFoundError("no path inside host '" + topo_.node(host).name + "' from '" +
                         topo_.node(src).name + "' to '" + topo_.node(dst).name + "'");
  }
  // Enumerate forwards: from v follow links to nodes one hop further that can still reach dst
  // in the remaining hops (dst's distance bounds it; the host graph is tiny).
  std::vector<std::vector<LinkId>> paths;
  std::vector<LinkId> cur;
  const int target = dist[dst.value()];
  auto rec = [&](auto&& self, NodeId v) -> void {
    if (v == dst) {
      paths.push_back(cur);
      return;
    }
    if (static_cast<int>(cur.size()) >= target) return;
    for (LinkId l : topo_.OutLinks(v)) {
      const Link& link = topo_.link(l);
      if (!link.up || topo_.node(link.dst).host != host) continue;
      if (dist[link.dst.value()] != dist[v.value()] + 1) continue;
      cur.push_back(l);
      self(self, link.dst);
      cur.pop_back();
    }
  };
  rec(rec, src);
  PathSet set;
  set.hops_ = target;
  for (auto& p : paths) {
    PathSet::Segment s;
    s.head = std::move(p);
    s.first_index = set.size_;
    s.count = 1;
    set.size_ += 1;
    set.segments_.push_back(std::move(s));
  }
  return set;
}

Result<PathSet> PathFinder::Compute(NodeId src, NodeId dst) {
  const Node& s = topo_.node(src);
  const Node& d = topo_.node(dst);
  if (s.host == d.host) return IntraHostPaths(src, dst);

  constexpr int kInf = std::numeric_limits<int>::max();
  int best = kInf;
  // A direct cable between the two endpoints (explicit topologies) is a one-hop path.
  std::vector<LinkId> direct;
  for (LinkId l : topo_.OutLinks(src)) {
    const Link& link = topo_.link(l);
    if (link.dst == dst && link.up) direct.push_back(l);
  }
  if (!direct.empty()) best = 1;

  const std::vector<AccessRoute> ingress = AccessRoutes(src, /*egress=*/false);
  const std::vector<AccessRoute> egress = AccessRoutes(dst, /*egress=*/true);
  for (const AccessRoute& a : ingress) {
    const std::vector<int16_t>& dist = DistancesFrom(a.sw);
    for (const AccessRoute& e : egress) {
      const int mid = dist[static_cast<size_t>(SwitchIndex(e.sw))];
      if (mid < 0) continue;
      best = std::min(best, static_cast<int>(a.links.size() + e.links.size()) + mid);
    }
  }
  if (best == kInf) {
    return NotFoundError("no path from '" + s.name + "' to '" + d.name + "'");
  }

  PathSet set;
  set.hops_ = best;
  if (best == 1) {
    for (LinkId l : direct) {
      PathSet::Segment seg;
      seg.head = {l};
      seg.first_index = set.size_;
      seg.count = 1;
      set.size_ += 1;
      set.segments_.push_back(std::move(seg));
    }
  }
  for (const AccessRoute& a : ingress) {
    const std::vector<int16_t>& dist = DistancesFrom(a.sw);
    for (const AccessRoute& e : egress) {
      const int mid = dist[static_cast<size_t>(SwitchIndex(e.sw))];
      if (mid < 0 || static_cast<int>(a.links.size() + e.links.size()) + mid != best) continue;
      const SwitchPaths& sp = SwitchPathsBetween(a.sw, e.sw);
      if (sp.count == 0) continue;
      PathSet::Segment seg;
      seg.head = a.links;
      seg.mid = &sp;
      seg.tail = e.links;
      seg.first_index = set.size_;
      seg.count = sp.count;
      set.size_ += sp.count;
      set.segments_.push_back(std::move(seg));
    }
  }
  return set;
}

Result<const PathSet*> PathFinder::Paths(NodeId src, NodeId dst) {
  if (!src.valid() || !dst.valid() || src.value() >= topo_.num_nodes() ||
      dst.value() >= topo_.num_nodes()) {
    return InvalidArgumentError("path endpoint is not a node of this topology");
  }
  if (src == dst) {
    return InvalidArgumentError("path from '" + topo_.node(src).name + "' to itself");
  }
  if (IsNetworkSwitch(topo_.node(src).kind) || IsNetworkSwitch(topo_.node(dst).kind)) {
    return InvalidArgumentError("path endpoints must be hosts or NICs, not switches ('" +
                                topo_.node(src).name + "' -> '" + topo_.node(dst).name + "')");
  }
  const uint64_t key = PairKey(src, dst);
  auto it = path_cache_.find(key);
  if (it != path_cache_.end()) return static_cast<const PathSet*>(it->second.get());
  CRUX_ASSIGN_OR_RETURN(PathSet set, Compute(src, dst));
  auto owned = std::make_unique<PathSet>(std::move(set));
  const PathSet* ptr = owned.get();
  path_cache_.emplace(key, std::move(owned));
  return ptr;
}

}  // namespace crux::core
