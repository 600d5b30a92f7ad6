// Topology specs: YAML -> core::Topology.
//
// Format (every parameter optional with the default of the matching struct in
// crux/core/builders.h; keys are the struct fields, snake_case; speeds in Gbps, latencies in
// microseconds):
//
//   topology:
//     kind: clos2            # explicit | clos2 | clos3 | fattree | hpn | lingjun (required)
//     tors: 4                # ... the kind's parameters ...
//
//   host keys (clos2, clos3, fattree, lingjun): nics_per_host, gpus_per_host, nic_gbps,
//     pcie_gbps, link_latency_us
//   clos2:   tors, aggs, hosts_per_tor, uplink_gbps, uplinks_per_agg, rail_optimized
//   clos3:   pods, tors_per_pod, aggs_per_pod, cores, hosts_per_tor, tor_agg_gbps,
//            agg_core_gbps, dual_tor
//   fattree: k, link_gbps (nics_per_host, if given, must be 1)
//   hpn:     segments, hosts_per_segment, rails, planes, aggs_per_plane, nic_port_gbps,
//            tor_agg_gbps, pcie_gbps, link_latency_us, pods, cores_per_plane, agg_core_gbps
//            (segments per pod; cores_per_plane 0 = no core tier)
//   lingjun: path (CSV, relative to the YAML file's directory; default: the shipped
//            configs/topologies/lingjun/topo.csv, looked up next to the YAML file first and then
//            in the source tree's configs/), grouping (asw | psw_asw), tor_psw_gbps,
//            psw_dsw_gbps, tor_psw_links
//   explicit: nodes: [{name, type: host|switch}]
//             links: [{a, b, gbps, latency_us?, cables?}]   (latency_us default 1; cables:
//             parallel full-duplex cables, default 1, gbps is per cable)
//
// Names: every node name (explicit `name`, Lingjun DSW/PSW/ASW labels) must obey the name rule
// of crux/core/ids.h (core::IsValidName: 1-128 chars of [A-Za-z0-9._:/-], the wire protocol's
// rule); generated names (host3, host3/nic1, tor0, ...) always do.
//
// Strictness: unknown or duplicate keys, wrong types, quoted numbers, NaN / infinities,
// zero or negative speeds and counts are errors. Explicit topologies must also be well formed:
// at least one link; no invalid or duplicate node name ("topology.nodes[2].name: duplicate
// node 'a'"); no link to an unknown node or from a node to itself; no second link between the
// same two nodes, in either direction ("topology.links[4]: duplicate link s0 <-> s1 (also
// topology.links[1]; ...)": parallel cables are one link with `cables`); no node without a
// link ("topology.nodes[3]: host 'h9' has no link ..."). Every error message starts with the YAML
// key path and ends with the position when yaml-cpp knows it, e.g.
//   "topology.links[3].gbps: must be > 0 (got -1) (line 14, column 30)"
//   "topology.tors: unknown key (allowed: kind, segments, ...) (line 3, column 3)"
// Errors from the core builders are returned with the context "topology".
// No exception escapes; yaml-cpp's are converted to kInvalidArgument.
//
// Thread-safety: pure functions (the file loader reads the file system).
#ifndef CRUX_SPEC_TOPOLOGY_SPEC_H_
#define CRUX_SPEC_TOPOLOGY_SPEC_H_

#include <string>
#include <string_view>

#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"

namespace crux::spec {

// Parses a topology document. `base_dir` resolves relative file references (lingjun `path`);
// pass the directory of the YAML file, or "" for the current directory.
core::Result<core::Topology> ParseTopology(std::string_view yaml, const std::string& base_dir);

// Reads and parses `path`; errors carry the file name as context ("<path>: topology.k: ...").
core::Result<core::Topology> LoadTopologyFile(const std::string& path);

}  // namespace crux::spec

#endif  // CRUX_SPEC_TOPOLOGY_SPEC_H_
