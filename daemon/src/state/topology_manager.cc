#include "crux/daemon/state/topology_manager.h"

#include <algorithm>
#include <cmath>

#include "crux/core/topology/link_name.h"

namespace crux::daemon {

TopologyManager::TopologyManager(core::Topology topology, std::string source)
    : nominal_(std::make_shared<const core::Topology>(topology)),
      current_(std::move(topology)),
      source_(std::move(source)) {}

std::string TopologyManager::Name(core::LinkId id) const {
  const core::Link& l = nominal_->link(id);
  return nominal_->node(l.src).name + "->" + nominal_->node(l.dst).name;
}

core::Result<std::vector<core::LinkId>> TopologyManager::Resolve(const std::string& name) const {
  CRUX_ASSIGN_OR_RETURN(core::LinkName l, core::ParseLinkName(*nominal_, name));
  std::vector<core::LinkId> out = {l.link};
  if (l.both) out.push_back(nominal_->link(l.link).reverse);
  return out;
}

void TopologyManager::Apply(core::LinkId id, const State& s) {
  const core::Link& nom = nominal_->link(id);
  current_.SetLinkUp(id, s.health != core::LinkHealth::kDown);
  core::Bandwidth cap = nom.capacity;
  if (s.health == core::LinkHealth::kDegraded) {
    cap = core::Bandwidth::BitsPerSec(static_cast<int64_t>(std::llround(s.capacity_bps)));
  }
  (void)current_.SetLinkCapacity(id, cap);
  if (s.health == core::LinkHealth::kUp) {
    overrides_.erase(id);
  } else {
    overrides_[id] = s;
  }
}

core::Result<std::vector<core::LinkId>> TopologyManager::Set(const std::string& name,
                                                             core::LinkHealth health,
                                                             double capacity_bps) {
  CRUX_ASSIGN_OR_RETURN(auto ids, Resolve(name));
  if (health == core::LinkHealth::kDegraded) {
    for (core::LinkId id : ids) {
      const double nominal = nominal_->link(id).capacity.ToBitsPerSec();
      if (!std::isfinite(capacity_bps) || capacity_bps < 1 || capacity_bps > nominal) {
        return core::InvalidArgumentError(
            "set_link_request.capacity_bps: DEGRADED needs 0 < capacity_bps <= nominal (" +
            std::to_string(nominal) + ")");
      }
    }
  }
  std::vector<core::LinkId> changed;
  for (core::LinkId id : ids) {
    State s{health, health == core::LinkHealth::kDegraded ? capacity_bps : 0};
    auto it = overrides_.find(id);
    const bool same = (it == overrides_.end() && health == core::LinkHealth::kUp) ||
                      (it != overrides_.end() && it->second.health == s.health &&
                       it->second.capacity_bps == s.capacity_bps);
    if (same) continue;
    Apply(id, s);
    changed.push_back(id);
  }
  if (!changed.empty()) ++version_;
  return changed;
}

bool TopologyManager::SetEffective(core::LinkId id, core::LinkHealth health, double capacity_bps) {
  if (!id.valid() || id.value() >= nominal_->num_links()) return false;
  const double nominal = nominal_->link(id).capacity.ToBitsPerSec();
  State s{health,
          health == core::LinkHealth::kDegraded
              ? std::clamp(std::isfinite(capacity_bps) ? capacity_bps : nominal, 1.0, nominal)
              : 0};
  auto it = overrides_.find(id);
  const bool same = (it == overrides_.end() && health == core::LinkHealth::kUp) ||
                    (it != overrides_.end() && it->second.health == s.health &&
                     it->second.capacity_bps == s.capacity_bps);
  if (same) return false;
  Apply(id, s);
  ++version_;
  return true;
}

core::LinkHealth TopologyManager::health(core::LinkId id) const {
  auto it = overrides_.find(id);
  return it == overrides_.end() ? core::LinkHealth::kUp : it->second.health;
}

std::vector<LinkOverride> TopologyManager::Overrides(int64_t now_ms) const {
  std::vector<LinkOverride> out;
  for (const auto& [id, s] : overrides_)
    out.push_back({Name(id), StoredHealth(s.health), s.capacity_bps, now_ms});
  return out;
}

core::Status TopologyManager::Restore(const LinkOverride& o) {
  if (o.link.find("->") == std::string::npos) {
    return core::InvalidArgumentError("link_state." + o.link + ": not a directed link name");
  }
  CRUX_ASSIGN_OR_RETURN(auto ids, Resolve(o.link));
  CRUX_ASSIGN_OR_RETURN(const core::LinkHealth health, HealthFromStored(o.health));
  for (core::LinkId id : ids) {
    if (health == core::LinkHealth::kDegraded &&
        !(o.capacity_bps >= 1 && o.capacity_bps <= nominal_->link(id).capacity.ToBitsPerSec())) {
      return core::InvalidArgumentError("link_state." + o.link + ": bad capacity");
    }
    Apply(id, State{health, o.capacity_bps});
  }
  ++version_;
  return core::Status::Ok();
}

}  // namespace crux::daemon
