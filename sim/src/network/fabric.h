// The simulated network (docs/simulator.md, sections 1 and 4): a FluidNetwork with one resource
// per directed link, or, when the policy isolates jobs (`ideal`), one per (job, link) created on
// first use; the capacity in force of every link (0 = down).
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_NETWORK_FABRIC_H_
#define CRUX_SIM_SRC_NETWORK_FABRIC_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "crux/core/topology/topology.h"
#include "crux/sim/fluid_network.h"

namespace crux::sim::internal {

using ResourceId = FluidNetwork::ResourceId;

class Fabric {
 public:
  // The links of `topo` at their capacities (down links at 0). `isolate`: private copies per job.
  Fabric(const core::Topology& topo, bool isolate);

  FluidNetwork& net() { return net_; }
  const FluidNetwork& net() const { return net_; }

  // The resource job `job` uses for link `l`.
  ResourceId ResourceFor(uint32_t job, core::LinkId l);
  core::LinkId LinkOf(ResourceId r) const { return resource_link_[r]; }
  // Capacity in force, bits per second (0 = down).
  double capacity_bps(core::LinkId l) const { return link_cap_[l.value()]; }
  // Sets link `l` (one direction) and every resource of it to `bps` at the current instant.
  void SetCapacity(core::LinkId l, double bps);
  // A flow is bottlenecked at (some resource of) link `l`, as of the last recomputation.
  bool LimitsAFlow(core::LinkId l) const;
  // Some resource of `path` is on a link that is down.
  bool Stalled(std::span<const ResourceId> path) const;

 private:
  bool isolate_;
  FluidNetwork net_;
  std::vector<std::vector<ResourceId>> link_resources_;  // Per link: its resource(s).
  std::vector<core::LinkId> resource_link_;
  std::unordered_map<uint64_t, ResourceId> isolated_;  // (job << 32 | link) -> resource.
  std::vector<double> link_cap_;
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_NETWORK_FABRIC_H_
