// Topology: the cluster graph. Nodes are hosts, their NICs and intra-host switches, and network
// switches (ToR / Agg / Core or generic). Links are directed; every physical link is added as a
// full-duplex pair whose two directions refer to each other through Link::reverse.
//
// Conventions shared by every builder (see builders.h):
//   * hosts are named host0 .. hostN-1 in the order the builder lays them out (except explicit
//     topologies, which keep the names the user gave);
//   * NIC i of a host is a node named "<host>/nic<i>" connected to its host by a PCIe link and to
//     one or more switches by network links (dual-ported NICs have two switch links);
//   * hosts, NICs and intra-host switches are "endpoint-side" nodes: they never carry transit
//     traffic between two other hosts, so equal-cost paths only transit network switches.
//
// Thread-safety: a fully built Topology is immutable except for SetLinkUp(); concurrent const
// access is safe. Mutation needs external synchronisation and invalidates PathFinders built on it.
#ifndef CRUX_CORE_TOPOLOGY_TOPOLOGY_H_
#define CRUX_CORE_TOPOLOGY_TOPOLOGY_H_

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

namespace crux::core {

enum class NodeKind {
  kHost,        // A server; the hub of its intra-host fabric (PCIe root / NVSwitch complex).
  kNic,         // A network interface; owned by a host.
  kNvSwitch,    // Intra-host GPU switch (optional detail; owned by a host).
  kPcieSwitch,  // Intra-host PCIe switch (optional detail; owned by a host).
  kTor,         // Tier-1 network switch.
  kAgg,         // Tier-2 network switch.
  kCore,        // Tier-3 network switch.
  kSwitch,      // A network switch of unspecified tier (explicit topologies).
};

std::string_view NodeKindName(NodeKind kind);

// True for network switches, the only nodes that may carry transit traffic between hosts.
constexpr bool IsNetworkSwitch(NodeKind k) {
  return k == NodeKind::kTor || k == NodeKind::kAgg || k == NodeKind::kCore ||
         k == NodeKind::kSwitch;
}

struct Node {
  std::string name;
  NodeKind kind = NodeKind::kSwitch;
  // For endpoint-side nodes (host, NIC, intra-host switches): the host they belong to (a host
  // owns itself). Invalid for network switches.
  NodeId host;
};

struct Link {
  NodeId src;
  NodeId dst;
  Bandwidth capacity;  // > 0.
  Duration latency;    // Propagation + switching latency of this hop (>= 0).
  LinkId reverse;      // The other direction of the same full-duplex link.
  bool up = true;      // Down links are never part of a path.
};

class Topology {
 public:
  Topology() = default;
  Topology(const Topology&) = default;
  Topology& operator=(const Topology&) = default;
  Topology(Topology&&) = default;
  Topology& operator=(Topology&&) = default;

  // Adds a node. `host` must be given (and be a kHost node) for kNic / kNvSwitch / kPcieSwitch,
  // is ignored for kHost (a host owns itself), and must be invalid for network switches.
  // `name` must obey the name rule of ids.h (IsValidName: 1-128 chars of [A-Za-z0-9._:/-]).
  // Errors: kAlreadyExists for a duplicate name, kInvalidArgument for an empty or invalid name
  // (the message quotes it with QuoteName, ids.h) or a bad owner.
  Result<NodeId> AddNode(std::string name, NodeKind kind, NodeId host = NodeId());

  // Adds a full-duplex link a <-> b. Returns the id of the a -> b direction; the b -> a
  // direction is link(id).reverse. REQUIRES: a != b, capacity > 0, latency >= 0.
  Result<LinkId> AddLink(NodeId a, NodeId b, Bandwidth capacity,
                         Duration latency = Duration::Zero());

  size_t num_nodes() const { return nodes_.size(); }
  size_t num_links() const { return links_.size(); }  // Directed links (twice the cables).
  const Node& node(NodeId id) const { return nodes_[id.value()]; }
  const Link& link(LinkId id) const { return links_[id.value()]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Link>& links() const { return links_; }

  // Outgoing directed links of a node, in insertion order.
  const std::vector<LinkId>& OutLinks(NodeId id) const { return out_[id.value()]; }

  // Name lookup. Returns kNotFound naming the missing node (quoted with QuoteName).
  Result<NodeId> FindNode(std::string_view name) const;
  // Finds the a -> b link; kNotFound if the nodes are not adjacent.
  Result<LinkId> FindLink(NodeId a, NodeId b) const;

  // Hosts in builder order, and the NICs of a host in index order.
  const std::vector<NodeId>& hosts() const { return hosts_; }
  const std::vector<NodeId>& NicsOf(NodeId host) const;
  size_t NumNetworkSwitches() const;

  // GPUs of a host (0 = not known: the topology does not say, and callers skip the check).
  // Builders set it from their host shape (gpus_per_host). REQUIRES: `host` is a kHost node.
  void SetHostGpus(NodeId host, int gpus);
  int host_gpus(NodeId host) const {
    return host.value() < host_gpus_.size() ? host_gpus_[host.value()] : 0;
  }

  // Marks one direction of a link up or down. Callers rebuild PathFinders afterwards.
  void SetLinkUp(LinkId id, bool up) { links_[id.value()].up = up; }
  // Changes the capacity of one direction (degradation). REQUIRES: capacity > 0.
  Status SetLinkCapacity(LinkId id, Bandwidth capacity);

  // "tor3 -> agg1".
  std::string LinkName(LinkId id) const;

 private:
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<LinkId>> out_;
  std::vector<NodeId> hosts_;
  std::vector<std::vector<NodeId>> nics_;  // Indexed by node id; non-empty only for hosts.
  std::vector<int> host_gpus_;             // Indexed by node id (grown on demand); 0 unknown.
  // Transparent hash: FindNode(string_view) looks up without building a std::string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, NodeId, NameHash, std::equal_to<>> by_name_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_TOPOLOGY_TOPOLOGY_H_
