#include "crux/core/topology/topology.h"

#include <string>
#include <utility>

namespace crux::core {

std::string_view NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kHost:
      return "host";
    case NodeKind::kNic:
      return "nic";
    case NodeKind::kNvSwitch:
      return "nvswitch";
    case NodeKind::kPcieSwitch:
      return "pcie_switch";
    case NodeKind::kTor:
      return "tor";
    case NodeKind::kAgg:
      return "agg";
    case NodeKind::kCore:
      return "core";
    case NodeKind::kSwitch:
      return "switch";
  }
  return "unknown";
}

Result<NodeId> Topology::AddNode(std::string name, NodeKind kind, NodeId host) {
  if (name.empty()) return InvalidArgumentError("node name must not be empty");
  if (!IsValidName(name)) {
    return InvalidArgumentError("invalid node name " + QuoteName(name) +
                                " (allowed: " + std::string(kNameRule) + ")");
  }
  if (by_name_.count(name) != 0) {
    return AlreadyExistsError("duplicate node name '" + name + "'");
  }
  const NodeId id(static_cast<uint32_t>(nodes_.size()));
  if (kind == NodeKind::kHost) {
    host = id;
  } else if (IsNetworkSwitch(kind)) {
    if (host.valid()) {
      return InvalidArgumentError("switch '" + name + "' must not have an owning host");
    }
  } else {
    if (!host.valid() || host.value() >= nodes_.size() ||
        nodes_[host.value()].kind != NodeKind::kHost) {
      return InvalidArgumentError("node '" + name + "' needs an owning host");
    }
  }
  by_name_.emplace(name, id);
  nodes_.push_back(Node{std::move(name), kind, host});
  out_.emplace_back();
  nics_.emplace_back();
  if (kind == NodeKind::kHost) hosts_.push_back(id);
  if (kind == NodeKind::kNic) nics_[host.value()].push_back(id);
  return id;
}

Result<LinkId> Topology::AddLink(NodeId a, NodeId b, Bandwidth capacity, Duration latency) {
  if (!a.valid() || !b.valid() || a.value() >= nodes_.size() || b.value() >= nodes_.size()) {
    return InvalidArgumentError("link endpoint is not a node of this topology");
  }
  if (a == b) return InvalidArgumentError("link from '" + node(a).name + "' to itself");
  if (!capacity.IsPositive()) {
    return InvalidArgumentError("link " + node(a).name + " <-> " + node(b).name +
                                ": capacity must be > 0");
  }
  if (latency < Duration::Zero()) {
    return InvalidArgumentError("link " + node(a).name + " <-> " + node(b).name +
                                ": latency must be >= 0");
  }
  const LinkId ab(static_cast<uint32_t>(links_.size()));
  const LinkId ba(static_cast<uint32_t>(links_.size() + 1));
  links_.push_back(Link{a, b, capacity, latency, ba, true});
  links_.push_back(Link{b, a, capacity, latency, ab, true});
  out_[a.value()].push_back(ab);
  out_[b.value()].push_back(ba);
  return ab;
}

Result<NodeId> Topology::FindNode(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return NotFoundError("unknown node " + QuoteName(name));
  }
  return it->second;
}

Result<LinkId> Topology::FindLink(NodeId a, NodeId b) const {
  if (a.valid() && a.value() < nodes_.size()) {
    for (LinkId l : out_[a.value()]) {
      if (links_[l.value()].dst == b) return l;
    }
  }
  return NotFoundError("no link between the given nodes");
}

const std::vector<NodeId>& Topology::NicsOf(NodeId host) const {
  static const std::vector<NodeId> kEmpty;
  if (!host.valid() || host.value() >= nics_.size()) return kEmpty;
  return nics_[host.value()];
}

size_t Topology::NumNetworkSwitches() const {
  size_t n = 0;
  for (const Node& v : nodes_) n += IsNetworkSwitch(v.kind) ? 1 : 0;
  return n;
}

Status Topology::SetLinkCapacity(LinkId id, Bandwidth capacity) {
  if (!id.valid() || id.value() >= links_.size()) return NotFoundError("no such link");
  if (!capacity.IsPositive()) return InvalidArgumentError("capacity must be > 0");
  links_[id.value()].capacity = capacity;
  return Status::Ok();
}

void Topology::SetHostGpus(NodeId host, int gpus) {
  if (!host.valid() || host.value() >= nodes_.size()) return;
  if (host_gpus_.size() <= host.value()) host_gpus_.resize(host.value() + 1, 0);
  host_gpus_[host.value()] = gpus < 0 ? 0 : gpus;
}

std::string Topology::LinkName(LinkId id) const {
  const Link& l = link(id);
  return node(l.src).name + " -> " + node(l.dst).name;
}

}  // namespace crux::core
