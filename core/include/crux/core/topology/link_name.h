// Link names as operators write them: "a->b" is one direction, "a-b" or "a<->b" both. Node
// names may contain '-', so "a-b" is split at the first point where both halves are nodes of the
// topology. The one parser of link names (cruxctl set-link through the daemon, crux-loadgen
// --fault).
#ifndef CRUX_CORE_TOPOLOGY_LINK_NAME_H_
#define CRUX_CORE_TOPOLOGY_LINK_NAME_H_

#include <string>
#include <string_view>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// Link health as the control plane sees it (admin overrides, fault decisions).
enum class LinkHealth { kUp, kDegraded, kDown };
std::string_view LinkHealthName(LinkHealth h);  // "up", "degraded", "down".

struct LinkName {
  std::string from;  // Node names as written.
  std::string to;
  LinkId link;        // from -> to.
  bool both = false;  // "a-b" / "a<->b": link and its reverse.

  friend bool operator==(const LinkName&, const LinkName&) = default;
};

// Errors (kNotFound) name the link and what is missing: no such form, an unknown node, or two
// nodes that are not adjacent. Pure; `topo` is only read.
Result<LinkName> ParseLinkName(const Topology& topo, std::string_view name);

}  // namespace crux::core

#endif  // CRUX_CORE_TOPOLOGY_LINK_NAME_H_
