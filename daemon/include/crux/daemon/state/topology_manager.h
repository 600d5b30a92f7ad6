// TopologyManager: the cluster graph cruxd plans on, plus link health. Links can be set UP,
// DOWN (never part of a path) or DEGRADED (up with a reduced capacity) by the admin (cruxctl
// set-link) now, by telemetry later. Every change bumps version(); the control host rebuilds
// its Planner when the version moved and re-plans.
//
// Link names: "a->b" is one direction, "a-b" (or "a<->b") both directions.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_STATE_TOPOLOGY_MANAGER_H_
#define CRUX_DAEMON_STATE_TOPOLOGY_MANAGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/link_name.h"
#include "crux/core/topology/topology.h"
#include "crux/daemon/store/store.h"

namespace crux::daemon {

class TopologyManager {
 public:
  TopologyManager(core::Topology topology, std::string source);

  const core::Topology& current() const { return current_; }  // With health applied.
  const core::Topology& nominal() const { return *nominal_; }
  // The nominal graph never changes after construction: the returned pointer may be read from
  // any thread (e.g. to serialize names on the store thread) for as long as it is held.
  std::shared_ptr<const core::Topology> shared_nominal() const { return nominal_; }
  const std::string& source() const { return source_; }
  uint64_t version() const { return version_; }

  // Resolves "a->b" / "a-b". kNotFound names the missing node or link.
  core::Result<std::vector<core::LinkId>> Resolve(const std::string& name) const;

  // Sets the health of the named link(s). DEGRADED needs 0 < capacity_bps <= nominal.
  // Returns the changed directed links (empty when nothing changed).
  core::Result<std::vector<core::LinkId>> Set(const std::string& name, core::LinkHealth health,
                                              double capacity_bps);

  // Sets the health in force of one directed link (the fault service's decisions, admin pins
  // included). DEGRADED: capacity_bps is clamped to [1, nominal]. Returns whether anything
  // changed (then version() moved).
  bool SetEffective(core::LinkId id, core::LinkHealth health, double capacity_bps);

  core::LinkHealth health(core::LinkId id) const;
  size_t links_not_up() const { return overrides_.size(); }
  // Current overrides, for persistence (one row per directed link).
  std::vector<LinkOverride> Overrides(int64_t now_ms) const;
  // Restart: re-applies a stored override (unknown links are an error naming the link).
  core::Status Restore(const LinkOverride& o);

  // "tor0->agg1" (no spaces: the wire form).
  std::string Name(core::LinkId id) const;

 private:
  struct State {
    core::LinkHealth health = core::LinkHealth::kUp;
    double capacity_bps = 0;
  };
  void Apply(core::LinkId id, const State& s);

  std::shared_ptr<const core::Topology> nominal_;  // Immutable.
  core::Topology current_;
  std::string source_;
  std::map<core::LinkId, State> overrides_;
  uint64_t version_ = 1;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STATE_TOPOLOGY_MANAGER_H_
