#include "network/fabric.h"

namespace crux::sim::internal {

Fabric::Fabric(const core::Topology& topo, bool isolate) : isolate_(isolate) {
  const size_t nl = topo.num_links();
  link_resources_.assign(nl, {});
  link_cap_.assign(nl, 0);
  for (size_t i = 0; i < nl; ++i) {
    const core::LinkId l(static_cast<uint32_t>(i));
    const core::Link& link = topo.link(l);
    link_cap_[i] = link.up ? link.capacity.ToBitsPerSec() : 0.0;
    if (!isolate_) {
      link_resources_[i].push_back(net_.AddResource(link_cap_[i]));
      resource_link_.push_back(l);
    }
  }
}

ResourceId Fabric::ResourceFor(uint32_t job, core::LinkId l) {
  if (!isolate_) return link_resources_[l.value()][0];
  const uint64_t key = (static_cast<uint64_t>(job) << 32) | l.value();
  auto it = isolated_.find(key);
  if (it != isolated_.end()) return it->second;
  const ResourceId r = net_.AddResource(link_cap_[l.value()]);
  isolated_.emplace(key, r);
  link_resources_[l.value()].push_back(r);
  resource_link_.push_back(l);
  return r;
}

void Fabric::SetCapacity(core::LinkId l, double bps) {
  link_cap_[l.value()] = bps;
  for (ResourceId r : link_resources_[l.value()]) net_.SetCapacity(r, bps);
}

bool Fabric::LimitsAFlow(core::LinkId l) const {
  for (ResourceId r : link_resources_[l.value()]) {
    if (net_.LimitsAFlow(r)) return true;
  }
  return false;
}

bool Fabric::Stalled(std::span<const ResourceId> path) const {
  for (ResourceId r : path) {
    if (link_cap_[resource_link_[r].value()] <= 0) return true;
  }
  return false;
}

}  // namespace crux::sim::internal
