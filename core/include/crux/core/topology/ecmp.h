// ECMP models: how a flow's RoCEv2 UDP source port picks its path, and how Crux finds a port
// that pins a flow to a chosen path.
//
// RoCEv2 packets have UDP destination port 4791; the only free entropy in the 5-tuple is the
// 16-bit UDP source port. By default Crux searches the range 0xC000-0xFFFF: the ports that plain
// verbs can reach through the GRH flow label (sport = ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) |
// 0xC000); NICs with mlx5dv_modify_qp_udp_sport can use any port, configurable via the range.
//
// Two models are provided behind one interface (SourcePortResolver):
//   * HashEcmpModel (default): every node with several equal-cost next hops picks
//     next_hops[Choose(H(tuple, node), n)], next hops sorted by link id, where H is a documented
//     64-bit mix (see ecmp.cc). Real ASICs use vendor CRC variants with per-switch seeds, so the
//     ports this model finds are only right on a fabric that really hashes this way (e.g. the
//     simulator) - use the table model for real switches.
//   * ProbedPortTable: ports learned by probing (send probes with varied source ports, record
//     the path each took, e.g. with INT or traceroute) and loaded as (src, dst, path) -> port.
//
// When no port in the range reaches the chosen path, FindPort returns nullopt: the planner then
// leaves the flow unpinned (udp_sport absent, "pinned": false in the plan) and counts it; the
// flow keeps whatever path its default port hashes to. With the hash model this is practically
// impossible (16,384 ports for at most a few hundred paths); with a probed table it happens for
// paths that were never observed.
//
// Thread-safety: implementations are immutable after construction; FindPort/Route are const and
// safe to call concurrently, except that they take a PathFinder (not thread-safe) by reference.
#ifndef CRUX_CORE_TOPOLOGY_ECMP_H_
#define CRUX_CORE_TOPOLOGY_ECMP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

inline constexpr uint16_t kRoceV2DstPort = 4791;

struct PortRange {
  uint16_t min = 0xC000;
  uint16_t max = 0xFFFF;  // Inclusive. REQUIRES: min <= max.

  friend bool operator==(const PortRange&, const PortRange&) = default;
};

class SourcePortResolver {
 public:
  virtual ~SourcePortResolver() = default;
  // A source port in `range` that makes the flow src -> dst follow `path` (path index `index`
  // of paths.Paths(src, dst)), or nullopt if none does.
  virtual std::optional<uint16_t> FindPort(PathFinder& paths, NodeId src, NodeId dst,
                                           size_t path_index, PortRange range) const = 0;
};

class HashEcmpModel final : public SourcePortResolver {
 public:
  // `seed` perturbs every switch's hash (as a fabric-wide hash seed would).
  explicit HashEcmpModel(uint64_t seed = 0) : seed_(seed) {}

  // The path index (into paths.Paths(src, dst)) that the flow with source port `sport` takes.
  Result<size_t> Route(PathFinder& paths, NodeId src, NodeId dst, uint16_t sport) const;

  std::optional<uint16_t> FindPort(PathFinder& paths, NodeId src, NodeId dst, size_t path_index,
                                   PortRange range) const override;

  // The hash a node computes for a flow, and how a hash picks one of n next hops
  // (the high 32 bits times n, shifted down: Lemire's division-free range reduction).
  // Exposed for tests and documentation.
  uint64_t Hash(const PathFinder& paths, NodeId node, NodeId src, NodeId dst, uint16_t sport) const;
  static uint32_t Choose(uint64_t hash, uint32_t num_choices);

 private:
  uint64_t seed_;
};

class ProbedPortTable final : public SourcePortResolver {
 public:
  // Records that a probe from src to dst with source port `sport` took the path whose node
  // names are `path_nodes` (source first). Later entries for the same path keep the lowest port.
  void Add(const std::string& src, const std::string& dst, std::vector<std::string> path_nodes,
           uint16_t sport);
  size_t size() const { return table_.size(); }

  std::optional<uint16_t> FindPort(PathFinder& paths, NodeId src, NodeId dst, size_t path_index,
                                   PortRange range) const override;

 private:
  // (src, dst, node names) -> ports that reach it, ascending.
  std::map<std::tuple<std::string, std::string, std::vector<std::string>>, std::vector<uint16_t>>
      table_;
};

// Node names of a path, source first: [src, hop1, ..., dst].
std::vector<std::string> PathNodeNames(const Topology& topo, NodeId src,
                                       const std::vector<LinkId>& path);

}  // namespace crux::core

#endif  // CRUX_CORE_TOPOLOGY_ECMP_H_
