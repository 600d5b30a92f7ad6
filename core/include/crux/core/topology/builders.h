// Deterministic topology builders. Each takes a typed parameter struct (YAML is parsed outside
// core/) and returns a validated Topology or an error naming the offending parameter.
//
// Naming (all generated kinds): hosts "host0".."hostN-1" in layout order; NIC i of host K is
// "hostK/nicI"; switches "tor<i>", "agg<i>", "core<i>" (clos2/clos3/fattree/hpn) and
// "<PSW>", "<ASW>" / "<PSW>/<ASW>", "<DSW>" as named in the file (lingjun).
// Every NIC has a PCIe link to its host (capacity `pcie_gbps`), so traffic between two NICs of
// the same host runs NIC -> host -> NIC.
//
// Pure functions; thread-safe.
#ifndef CRUX_CORE_TOPOLOGY_BUILDERS_H_
#define CRUX_CORE_TOPOLOGY_BUILDERS_H_

#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// Parameters common to the generated kinds.
struct HostParams {
  int nics_per_host = 1;         // >= 1.
  int gpus_per_host = 8;         // >= 1; informational (jobs state their own GPU counts).
  double nic_gbps = 200;         // Per NIC port, > 0.
  double pcie_gbps = 512;        // NIC <-> host, > 0 (PCIe Gen5 x16 is ~512 Gbps raw).
  double link_latency_us = 1.0;  // Every network hop, >= 0.
};

// ---- explicit: nodes and links listed by the user ----
struct ExplicitNode {
  std::string name;
  bool is_host = false;  // "host" or "switch".
};
struct ExplicitLink {
  std::string a;
  std::string b;
  double gbps = 0;        // > 0, per cable.
  double latency_us = 1;  // >= 0.
  int cables = 1;         // Parallel full-duplex cables a <-> b, >= 1.
};
struct ExplicitParams {
  std::vector<ExplicitNode> nodes;
  std::vector<ExplicitLink> links;
};
// In an explicit topology a host's links are its NICs: hosts keep their names and connect
// directly to switches (no NIC nodes are created), so flows name hosts as endpoints.
// Host-to-host links are allowed (a direct cable); switch-to-switch links form the fabric.
// Errors (fields "explicit.nodes[i]...", "explicit.links[i]..."): no nodes, an empty, invalid
// (ids.h IsValidName) or duplicate name, no links, a link naming an unknown node or joining a
// node to itself, bad gbps / latency_us / cables, two links joining the same pair of nodes (in
// either direction: parallel cables are one link with `cables` > 1), a node without any link.
Result<Topology> BuildExplicit(const ExplicitParams& p);

// ---- clos2: hosts -> ToRs -> Aggs, every ToR connected to every Agg ----
struct Clos2Params {
  HostParams host;
  int tors = 2;              // >= 1.
  int aggs = 2;              // >= 1.
  int hosts_per_tor = 4;     // >= 1. With rail_optimized, hosts per rail group.
  double uplink_gbps = 400;  // ToR <-> Agg, > 0.
  int uplinks_per_agg = 1;   // Parallel ToR <-> Agg cables, >= 1.
  // false: all NICs of a host go to the host's ToR (tor = host / hosts_per_tor).
  // true:  NIC i of a host in group g goes to ToR g * nics_per_host + i; `tors` must then be a
  //        multiple of nics_per_host (e.g. Crux's testbed: 4 NICs per host, one ToR per rail).
  bool rail_optimized = false;
};
Result<Topology> BuildClos2(const Clos2Params& p);

// ---- clos3: pods of (ToRs x Aggs full mesh); Agg a of each pod connects to core plane a ----
struct Clos3Params {
  HostParams host;
  int pods = 2;               // >= 1.
  int tors_per_pod = 2;       // >= 1.
  int aggs_per_pod = 2;       // >= 1.
  int cores = 4;              // >= 1, a multiple of aggs_per_pod: plane a = cores
                              // [a*c/aggs, (a+1)*c/aggs).
  int hosts_per_tor = 4;      // >= 1. With dual_tor: hosts per ToR pair.
  double tor_agg_gbps = 400;  // > 0.
  double agg_core_gbps = 400;
  // false: every NIC of a host goes to the host's ToR (tor = host / hosts_per_tor).
  // true:  dual-ToR ("double-sided") access: the ToRs of a pod form pairs (2q, 2q + 1), each
  //        pair serves hosts_per_tor hosts, and NIC i of a host goes to ToR 2q + (i % 2) of its
  //        pair, so every host reaches two ToRs. tors_per_pod must be even and nics_per_host
  //        >= 2. Hosts: pods * tors_per_pod / 2 * hosts_per_tor.
  bool dual_tor = false;
};
Result<Topology> BuildClos3(const Clos3Params& p);

// ---- fattree(k): the classic k-ary fat tree (k even): k pods, k/2 edge + k/2 agg switches
// per pod, (k/2)^2 cores, k/2 hosts per edge switch, k^3/4 hosts; one NIC per host. ----
struct FatTreeParams {
  HostParams host;  // nics_per_host is forced to 1.
  int k = 4;        // Even, >= 2.
  double link_gbps = 100;
};
Result<Topology> BuildFatTree(const FatTreeParams& p);

// ---- hpn: Alibaba HPN (SIGCOMM'24), one or more segments of one pod ----
// Per host: `rails` dual-port NICs (one per GPU); port p of NIC r goes to ToR (segment, r, p)
// (dual-ToR, dual-plane, rail-optimised). Every plane-p ToR connects to every plane-p Agg
// (aggs_per_plane per plane); planes never meet inside the pod. Defaults give one pod:
// 15 segments x 128 hosts = 1,920 hosts = 15,360 GPUs, 240 ToRs, 120 Aggs; a cross-segment NIC
// pair has 2 x 60 = 120 equal-cost paths, a same-segment same-rail pair 2.
// ToRs are named tor<i> with i = (segment * rails + rail) * planes + plane; Aggs agg<j> with
// j = plane * aggs_per_plane + a.
// Several pods under a core tier (pods > 1 or cores_per_plane > 0; HPN §4.3: dual-plane in the
// core too, aggregation to core 15:1): `segments` is then per pod, segment numbers run over all
// pods (segment = pod * segments + s, in the ToR names above), Agg j = (pod * planes + plane) *
// aggs_per_plane + a, and every plane-p Agg of every pod connects to every plane-p core
// core<k>, k = plane * cores_per_plane + c, at agg_core_gbps. With the defaults (1 pod, no
// core) the topology is exactly the single pod above.
// More than two planes model a multi-plane NIC (e.g. MRC: an 800G NIC as 8 x 100G ports, one
// port per plane, each plane its own leaf/spine network).
inline constexpr int kMaxHpnPlanes = 8;
struct HpnParams {
  int segments = 15;            // >= 1.
  int hosts_per_segment = 128;  // >= 1 (active hosts; HPN's 8 backup hosts are not modelled).
  int rails = 8;                // NICs (and GPUs) per host, >= 1.
  int planes = 2;               // In [1, kMaxHpnPlanes] (HPN: 2).
  int aggs_per_plane = 60;      // >= 1.
  double nic_port_gbps = 200;   // Per NIC port.
  double tor_agg_gbps = 400;
  double pcie_gbps = 512;
  double link_latency_us = 1.0;
  int pods = 1;             // >= 1; more than one needs cores_per_plane >= 1.
  int cores_per_plane = 0;  // >= 0; 0 = no core tier.
  double agg_core_gbps = 400;
};
Result<Topology> BuildHpn(const HpnParams& p);

// ---- lingjun: the Alibaba Lingjun 2023 topo.csv (columns ip,DSW,PSW,ASW; 847 hosts) ----
// Hosts are named host0.. in file order (the hashed IPs are kept only for reference). Two
// readings of the ASW column are supported (the dataset does not say which is physical):
//   kAswLabel (default): an ASW label is one ToR "<ASW>"; it uplinks to every PSW that any of
//     its hosts lists (48 ToRs, 1-3 uplinks each), so cross-ToR traffic has ECMP choices.
//   kPswAsw: each (PSW, ASW) pair is a ToR "<PSW>/<ASW>" with a single uplink (119 ToRs).
// Every PSW connects to every DSW.
enum class LingjunTorGrouping { kAswLabel, kPswAsw };
struct LingjunParams {
  HostParams host;
  double tor_psw_gbps = 400;
  double psw_dsw_gbps = 400;
  int tor_psw_links = 1;  // Parallel ToR <-> PSW cables, >= 1.
  LingjunTorGrouping grouping = LingjunTorGrouping::kAswLabel;
};
// One host row of topo.csv. Core does no I/O and no parsing: the edge reads the file
// (crux::spec::ParseLingjunCsv, crux/spec/lingjun_csv.h) and hands the rows over.
struct LingjunHostRow {
  std::string ip;   // The host's (hashed) IP: non-empty, unique; kept for reference only.
  std::string dsw;  // Switch labels: valid names (ids.h IsValidName), one role each (a label
  std::string psw;  // may not be both a PSW and an ASW).
  std::string asw;
  // The CSV line the row came from, for error messages; 0 = not from a file (then row i is
  // reported as line i + 2, as if the header were line 1).
  int line = 0;

  friend bool operator==(const LingjunHostRow&, const LingjunHostRow&) = default;
};
struct LingjunLayout {
  std::vector<LingjunHostRow> hosts;  // In file order; host<i> is hosts[i]. At least one.

  friend bool operator==(const LingjunLayout&, const LingjunLayout&) = default;
};
// Errors name the row's line and the column as in the file, e.g.
// "lingjun csv line 3, column 4 (ASW): invalid switch name 'S 2' (allowed: ...)"; a switch
// label that clashes with a generated name (host0, host0/nic0) is an error too.
Result<Topology> BuildLingjun(const LingjunLayout& layout, const LingjunParams& p);

}  // namespace crux::core

#endif  // CRUX_CORE_TOPOLOGY_BUILDERS_H_
