// PathFinder: equal-cost (minimum-hop) path enumeration between two endpoint-side nodes (NICs
// or hosts), i.e. the set of paths ECMP can hash a flow onto. Results are cached.
//
// Model: a path leaves the source through its own host's nodes (NIC, or host -> NIC), crosses
// network switches only, and enters the destination through the destination host's nodes. Paths
// never transit a third host. Between two nodes of the same host the path stays inside the host.
// All paths of one PathSet have the same hop count. Down links (Link::up == false) are skipped.
//
// Representation: a PathSet is a list of segments (access route, a set of switch-to-switch
// shortest paths, egress route); paths are materialised on demand, so a 120-path HPN pair costs
// a few dozen bytes. Path indices are stable for a given topology: ordered by segment (source
// access route order, then destination egress route order), then by switch path in
// lexicographic LinkId order.
//
// Thread-safety: not thread-safe (Paths() fills caches). One PathFinder per thread or external
// locking. The Topology must outlive the PathFinder and must not change while it is in use.
#ifndef CRUX_CORE_TOPOLOGY_PATH_FINDER_H_
#define CRUX_CORE_TOPOLOGY_PATH_FINDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// All shortest switch-only paths from one switch to another, stored flat: path i is
// links[i * hops, (i + 1) * hops). hops == 0 means source switch == destination switch (one
// empty path).
struct SwitchPaths {
  int hops = 0;
  size_t count = 0;
  std::vector<LinkId> links;
  std::vector<NodeId> link_src;  // link_src[i] = source node of links[i] (cache-friendly scans).
  // True when every path has the same sequence of link capacities (as in any Clos, fat tree or
  // HPN fabric). Lets path selection stop at the first idle path: none after it can be better.
  bool uniform_capacity = true;
};

class PathSet {
 public:
  struct Segment {
    std::vector<LinkId> head;  // Source -> first switch (or the whole path, if `mid` is null).
    const SwitchPaths* mid = nullptr;  // Null for intra-host paths.
    std::vector<LinkId> tail;          // Last switch -> destination.
    size_t first_index = 0;            // Index of this segment's first path in the PathSet.
    size_t count = 0;
  };

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int hops() const { return hops_; }
  const std::vector<Segment>& segments() const { return segments_; }

  // Calls f(LinkId) for every link of path i, source to destination. REQUIRES: i < size().
  template <typename F>
  void ForEachLink(size_t i, F&& f) const {
    const Segment& s = SegmentOf(i);
    for (LinkId l : s.head) f(l);
    if (s.mid != nullptr && s.mid->hops > 0) {
      const size_t k = i - s.first_index;
      const LinkId* p = s.mid->links.data() + k * static_cast<size_t>(s.mid->hops);
      for (int h = 0; h < s.mid->hops; ++h) f(p[h]);
    }
    for (LinkId l : s.tail) f(l);
  }

  // Path i as a vector of directed links. REQUIRES: i < size().
  std::vector<LinkId> Path(size_t i) const;

  // The index of `path` in this set, or nullopt when it is not one of its paths (e.g. a link of
  // it went down, or it belongs to another node pair). O(segments + paths of the matching
  // segment x hops), no allocation.
  std::optional<size_t> IndexOf(std::span<const LinkId> path) const;

 private:
  friend class PathFinder;
  const Segment& SegmentOf(size_t i) const;

  std::vector<Segment> segments_;
  size_t size_ = 0;
  int hops_ = 0;
};

class PathFinder {
 public:
  explicit PathFinder(const Topology& topo);
  PathFinder(const PathFinder&) = delete;
  PathFinder& operator=(const PathFinder&) = delete;

  // The equal-cost paths from `src` to `dst` (endpoint-side nodes: hosts or NICs).
  // Errors: kInvalidArgument if either is a network switch or src == dst, kNotFound if no path
  // exists (e.g. every uplink is down, or the two NICs are on different HPN planes).
  // The returned reference stays valid for the PathFinder's lifetime.
  Result<const PathSet*> Paths(NodeId src, NodeId dst);

  // Number of cached node pairs (for metrics and tests).
  size_t CachedPairs() const { return path_cache_.size(); }

  const Topology& topology() const { return topo_; }

  // StableHash of every node's name, indexed by node id (used by ECMP hash models).
  uint64_t NameHash(NodeId n) const { return name_hash_[n.value()]; }

 private:
  struct AccessRoute {
    NodeId sw;                  // First (or last) network switch.
    std::vector<LinkId> links;  // Endpoint -> sw (or sw -> endpoint for egress).
  };
  // Hop distances from switch `sw` to every network switch (indexed by switch index, -1 when
  // unreachable) over up switch-to-switch links. Cached per source switch.
  const std::vector<int16_t>& DistancesFrom(NodeId sw);
  int SwitchIndex(NodeId n) const { return switch_index_[n.value()]; }
  const SwitchPaths& SwitchPathsBetween(NodeId a, NodeId b);
  std::vector<AccessRoute> AccessRoutes(NodeId endpoint, bool egress) const;
  Result<PathSet> IntraHostPaths(NodeId src, NodeId dst) const;
  Result<PathSet> Compute(NodeId src, NodeId dst);

  const Topology& topo_;
  std::vector<uint64_t> name_hash_;
  // Compact switch graph: switch_index_[node] (-1 for non-switches), and per switch index its
  // up links to other switches (link id, neighbour's switch index) and incoming up links.
  struct Adj {
    LinkId link;
    int other;
  };
  std::vector<int> switch_index_;
  std::vector<NodeId> switch_node_;
  std::vector<std::vector<Adj>> switch_out_;
  std::vector<std::vector<Adj>> switch_in_;
  std::unordered_map<uint32_t, std::vector<int16_t>> dist_cache_;  // Keyed by switch node id.
  std::unordered_map<uint64_t, std::unique_ptr<SwitchPaths>> switch_paths_;
  std::unordered_map<uint64_t, std::unique_ptr<PathSet>> path_cache_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_TOPOLOGY_PATH_FINDER_H_
