#include "crux/core/topology/link_name.h"

namespace crux::core {

Result<LinkName> ParseLinkName(const Topology& topo, std::string_view name) {
  const std::string quoted = "link '" + std::string(name) + "'";
  LinkName out;
  if (size_t p = name.find("<->"); p != std::string_view::npos) {
    out.from = std::string(name.substr(0, p));
    out.to = std::string(name.substr(p + 3));
    out.both = true;
  } else if (size_t q = name.find("->"); q != std::string_view::npos) {
    out.from = std::string(name.substr(0, q));
    out.to = std::string(name.substr(q + 2));
  } else {
    for (size_t i = name.find('-'); i != std::string_view::npos; i = name.find('-', i + 1)) {
      if (topo.FindNode(name.substr(0, i)).ok() && topo.FindNode(name.substr(i + 1)).ok()) {
        out.from = std::string(name.substr(0, i));
        out.to = std::string(name.substr(i + 1));
        out.both = true;
        break;
      }
    }
    if (out.from.empty()) {
      return NotFoundError(quoted + ": expected 'a->b' or 'a-b' with two topology nodes");
    }
  }
  Result<NodeId> x = topo.FindNode(out.from);
  if (!x.ok()) return NotFoundError(quoted + ": no node '" + out.from + "'");
  Result<NodeId> y = topo.FindNode(out.to);
  if (!y.ok()) return NotFoundError(quoted + ": no node '" + out.to + "'");
  Result<LinkId> l = topo.FindLink(*x, *y);
  if (!l.ok()) {
    return NotFoundError(quoted + ": " + out.from + " and " + out.to + " are not adjacent");
  }
  out.link = *l;
  return out;
}

std::string_view LinkHealthName(LinkHealth h) {
  switch (h) {
    case LinkHealth::kUp:
      return "up";
    case LinkHealth::kDegraded:
      return "degraded";
    case LinkHealth::kDown:
      return "down";
  }
  return "unknown";
}

}  // namespace crux::core
