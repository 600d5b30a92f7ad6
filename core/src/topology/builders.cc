// Topology builders (see builders.h). Every builder validates its whole parameter struct first,
// then checks the size of the result, then lays out nodes (hosts, each followed by its NICs, then
// switches tier by tier) and links (per NIC: the PCIe link, then its network links; then the
// fabric tier by tier). The layout is a pure function of the parameters.
#include "crux/core/topology/builders.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace crux::core {
namespace {

// Limits that keep every count inside NodeId / LinkId and memory within reason.
constexpr int64_t kMaxNodes = 4'000'000;
constexpr int64_t kMaxCables = 8'000'000;  // Full-duplex links; twice as many directed links.
constexpr double kMaxGbps = 1e9;           // 1e18 bit/s, well inside Bandwidth's int64.
constexpr double kMaxLatencyUs = 1e9;      // 1,000 s.

// Saturating arithmetic on non-negative counts.
constexpr int64_t kSaturated = int64_t{1} << 62;
int64_t Mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a >= kSaturated / b ? kSaturated : a * b;
}
int64_t Add(int64_t a, int64_t b) { return a >= kSaturated - b ? kSaturated : a + b; }

std::string FormatDouble(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string FormatCount(int64_t v) {
  return v >= kSaturated ? "more than " + std::to_string(kSaturated - 1) : std::to_string(v);
}

std::string Field(std::string_view prefix, std::string_view name) {
  std::string s(prefix);
  s += '.';
  s += name;
  return s;
}

Status CheckAtLeast(const std::string& field, int64_t value, int64_t min) {
  if (value >= min) return Status::Ok();
  return InvalidArgumentError(field + ": must be >= " + std::to_string(min) + " (got " +
                              std::to_string(value) + ")");
}

Status CheckGbps(const std::string& field, double gbps) {
  if (!std::isfinite(gbps)) {
    return InvalidArgumentError(field + ": must be a finite number of Gbps (got " +
                                FormatDouble(gbps) + ")");
  }
  if (gbps <= 0) {
    return InvalidArgumentError(field + ": must be > 0 (got " + FormatDouble(gbps) + ")");
  }
  if (gbps > kMaxGbps) {
    return InvalidArgumentError(field + ": must be <= " + FormatDouble(kMaxGbps) + " Gbps (got " +
                                FormatDouble(gbps) + ")");
  }
  if (!Bandwidth::Gbps(gbps).IsPositive()) {
    return InvalidArgumentError(field + ": must be at least 1 bit/s (got " + FormatDouble(gbps) +
                                " Gbps)");
  }
  return Status::Ok();
}

Status CheckLatencyUs(const std::string& field, double us) {
  if (!std::isfinite(us)) {
    return InvalidArgumentError(field + ": must be a finite number of microseconds (got " +
                                FormatDouble(us) + ")");
  }
  if (us < 0) {
    return InvalidArgumentError(field + ": must be >= 0 (got " + FormatDouble(us) + ")");
  }
  if (us > kMaxLatencyUs) {
    return InvalidArgumentError(field + ": must be <= " + FormatDouble(kMaxLatencyUs) +
                                " us (got " + FormatDouble(us) + ")");
  }
  return Status::Ok();
}

Duration LatencyFromUs(double us) { return Duration::Seconds(us * 1e-6); }

// `check_nics` is false for fattree, which forces one NIC per host.
Status CheckHost(std::string_view prefix, const HostParams& h, bool check_nics = true) {
  const std::string p = Field(prefix, "host");
  if (check_nics) CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(p, "nics_per_host"), h.nics_per_host, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(p, "gpus_per_host"), h.gpus_per_host, 1));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(p, "nic_gbps"), h.nic_gbps));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(p, "pcie_gbps"), h.pcie_gbps));
  CRUX_RETURN_IF_ERROR(CheckLatencyUs(Field(p, "link_latency_us"), h.link_latency_us));
  return Status::Ok();
}

Status CheckSize(std::string_view kind, int64_t nodes, int64_t cables) {
  if (nodes <= kMaxNodes && cables <= kMaxCables) return Status::Ok();
  return InvalidArgumentError(std::string(kind) + ": topology too large (" + FormatCount(nodes) +
                              " nodes, " + FormatCount(cables) + " links; at most " +
                              std::to_string(kMaxNodes) + " nodes and " +
                              std::to_string(kMaxCables) + " links)");
}

// Adds host0 .. host<n-1>, each immediately followed by its NICs host<K>/nic<I>. Returns the NIC
// ids, NIC i of host h at index h * nics + i.
Result<std::vector<NodeId>> AddHosts(Topology& topo, int64_t hosts, int nics, int gpus = 0) {
  std::vector<NodeId> out;
  out.reserve(static_cast<size_t>(hosts * nics));
  for (int64_t h = 0; h < hosts; ++h) {
    const std::string host_name = "host" + std::to_string(h);
    CRUX_ASSIGN_OR_RETURN(const NodeId host, topo.AddNode(host_name, NodeKind::kHost));
    topo.SetHostGpus(host, gpus);
    for (int i = 0; i < nics; ++i) {
      CRUX_ASSIGN_OR_RETURN(const NodeId nic, topo.AddNode(host_name + "/nic" + std::to_string(i),
                                                           NodeKind::kNic, host));
      out.push_back(nic);
    }
  }
  return out;
}

// Adds <prefix>0 .. <prefix><n-1>.
Result<std::vector<NodeId>> AddSwitches(Topology& topo, std::string_view prefix, int64_t n,
                                        NodeKind kind) {
  std::vector<NodeId> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    CRUX_ASSIGN_OR_RETURN(const NodeId id,
                          topo.AddNode(std::string(prefix) + std::to_string(i), kind));
    out.push_back(id);
  }
  return out;
}

// Adds `cables` parallel full-duplex links a <-> b.
Status AddCables(Topology& topo, NodeId a, NodeId b, Bandwidth bw, Duration latency,
                 int64_t cables = 1) {
  for (int64_t c = 0; c < cables; ++c) {
    Result<LinkId> l = topo.AddLink(a, b, bw, latency);
    if (!l.ok()) return l.status();
  }
  return Status::Ok();
}

Status AddPcie(Topology& topo, NodeId nic, Bandwidth pcie) {
  return AddCables(topo, topo.node(nic).host, nic, pcie, Duration::Zero());
}

// ---------------------------------------------------------------------------------------------
// lingjun: from host rows (parsed at the edge, crux/spec/lingjun_csv.h) to ToRs, PSWs and DSWs.

constexpr std::string_view kLingjunColumns[] = {"ip", "DSW", "PSW", "ASW"};

// The line a row is reported at (LingjunHostRow::line).
int RowLine(const LingjunHostRow& row, size_t index) {
  return row.line > 0 ? row.line : static_cast<int>(index) + 2;
}

std::string CellRef(int line, int column) {
  return "lingjun csv line " + std::to_string(line) + ", column " + std::to_string(column + 1) +
         " (" + std::string(kLingjunColumns[column]) + ")";
}

enum LingjunRole { kDswRole = 1, kPswRole = 2, kAswRole = 3 };  // = column index.

struct SwitchInfo {
  int role = 0;
  int index = 0;  // Within its role, in order of first appearance.
  int line = 0;   // First appearance.
};

struct LingjunTor {
  std::string name;
  int line = 0;
  int column = 0;
  std::vector<int> psws;  // Sorted PSW indices.
};

struct LingjunPlan {
  std::vector<int> host_tor;  // Per host row.
  std::vector<LingjunTor> tors;
  std::vector<std::pair<std::string, int>> psws;  // Name, first line.
  std::vector<std::pair<std::string, int>> dsws;
};

Result<LingjunPlan> PlanLingjun(const LingjunLayout& layout, LingjunTorGrouping grouping) {
  if (layout.hosts.empty()) {
    return InvalidArgumentError("lingjun csv: no host rows after the header");
  }
  LingjunPlan out;
  std::unordered_map<std::string_view, int> ip_line;
  std::unordered_map<std::string_view, SwitchInfo> switches;
  std::unordered_map<int64_t, int> pair_tor;  // (psw, asw) -> tor, for kPswAsw.
  std::vector<int> asw_tor;                   // ASW label index -> tor, for kAswLabel.
  int role_count[4] = {0, 0, 0, 0};

  for (size_t r = 0; r < layout.hosts.size(); ++r) {
    const LingjunHostRow& row = layout.hosts[r];
    const int line = RowLine(row, r);
    const std::string_view fields[4] = {row.ip, row.dsw, row.psw, row.asw};
    for (int c = 0; c < 4; ++c) {
      if (fields[c].empty()) return InvalidArgumentError(CellRef(line, c) + ": empty field");
    }
    if (auto [it, inserted] = ip_line.emplace(fields[0], line); !inserted) {
      return InvalidArgumentError(CellRef(line, 0) + ": duplicate host ip " + QuoteName(fields[0]) +
                                  " (first on line " + std::to_string(it->second) + ")");
    }
    int index[4] = {0, 0, 0, 0};
    for (int role : {kDswRole, kPswRole, kAswRole}) {
      if (!IsValidName(fields[role])) {
        return InvalidArgumentError(CellRef(line, role) + ": invalid switch name " +
                                    QuoteName(fields[role]) +
                                    " (allowed: " + std::string(kNameRule) + ")");
      }
      auto [it, inserted] = switches.emplace(fields[role], SwitchInfo{role, role_count[role], 0});
      if (inserted) {
        it->second.line = line;
        ++role_count[role];
        if (role == kDswRole) out.dsws.emplace_back(std::string(fields[role]), line);
        if (role == kPswRole) out.psws.emplace_back(std::string(fields[role]), line);
      } else if (it->second.role != role) {
        return InvalidArgumentError(CellRef(line, role) + ": switch '" + std::string(fields[role]) +
                                    "' already appears in column " +
                                    std::string(kLingjunColumns[it->second.role]) + " (line " +
                                    std::to_string(it->second.line) + ")");
      }
      index[role] = it->second.index;
    }
    const int psw = index[kPswRole];
    const int asw = index[kAswRole];
    int tor = 0;
    if (grouping == LingjunTorGrouping::kAswLabel) {
      if (asw == static_cast<int>(asw_tor.size())) {
        asw_tor.push_back(static_cast<int>(out.tors.size()));
        out.tors.push_back(LingjunTor{row.asw, line, kAswRole, {}});
      }
      tor = asw_tor[static_cast<size_t>(asw)];
    } else {
      const int64_t key = int64_t{psw} * (int64_t{1} << 32) + asw;
      auto [it, inserted] = pair_tor.emplace(key, static_cast<int>(out.tors.size()));
      if (inserted) out.tors.push_back(LingjunTor{row.psw + "/" + row.asw, line, kAswRole, {}});
      tor = it->second;
    }
    std::vector<int>& psws = out.tors[static_cast<size_t>(tor)].psws;
    if (std::find(psws.begin(), psws.end(), psw) == psws.end()) psws.push_back(psw);
    out.host_tor.push_back(tor);
  }
  for (LingjunTor& t : out.tors) std::sort(t.psws.begin(), t.psws.end());
  return out;
}

// Adds a switch named in the CSV; a clash with another node name is the file's fault.
Result<NodeId> AddCsvSwitch(Topology& topo, const std::string& name, NodeKind kind,
                            const std::string& where) {
  Result<NodeId> id = topo.AddNode(name, kind);
  if (!id.ok()) {
    return InvalidArgumentError(where + ": switch name '" + name +
                                "' clashes with another node: " + id.status().message());
  }
  return id;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

Result<Topology> BuildExplicit(const ExplicitParams& p) {
  if (p.nodes.empty()) return InvalidArgumentError("explicit.nodes: must not be empty");
  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const std::string field = "explicit.nodes[" + std::to_string(i) + "].name";
    const std::string& name = p.nodes[i].name;
    if (name.empty()) return InvalidArgumentError(field + ": must not be empty");
    if (!IsValidName(name)) {
      return InvalidArgumentError(field + ": invalid node name " + QuoteName(name) +
                                  " (allowed: " + std::string(kNameRule) + ")");
    }
    if (auto [it, inserted] = index.emplace(name, i); !inserted) {
      return InvalidArgumentError(field + ": duplicate node name '" + name + "' (also nodes[" +
                                  std::to_string(it->second) + "])");
    }
  }
  if (p.links.empty()) {
    return InvalidArgumentError(
        "explicit.links: must not be empty (every node needs at least one link)");
  }
  std::vector<bool> linked(p.nodes.size(), false);
  // Unordered node pair -> first link joining it.
  std::unordered_map<uint64_t, size_t> pair_link;
  for (size_t i = 0; i < p.links.size(); ++i) {
    const ExplicitLink& l = p.links[i];
    const std::string field = "explicit.links[" + std::to_string(i) + "]";
    auto a = index.find(l.a);
    if (a == index.end()) {
      return InvalidArgumentError(field + ".a: unknown node " + QuoteName(l.a));
    }
    auto b = index.find(l.b);
    if (b == index.end()) {
      return InvalidArgumentError(field + ".b: unknown node " + QuoteName(l.b));
    }
    if (l.a == l.b) {
      return InvalidArgumentError(field + ": a and b are the same node '" + l.a + "'");
    }
    CRUX_RETURN_IF_ERROR(CheckGbps(field + ".gbps", l.gbps));
    CRUX_RETURN_IF_ERROR(CheckLatencyUs(field + ".latency_us", l.latency_us));
    CRUX_RETURN_IF_ERROR(CheckAtLeast(field + ".cables", l.cables, 1));
    const uint64_t lo = std::min(a->second, b->second);
    const uint64_t hi = std::max(a->second, b->second);
    if (auto [it, inserted] = pair_link.emplace((lo << 32) | hi, i); !inserted) {
      return InvalidArgumentError(field + ": duplicate link " + l.a + " <-> " + l.b +
                                  " (also links[" + std::to_string(it->second) +
                                  "]; give parallel cables as one link with cables: N)");
    }
    linked[a->second] = true;
    linked[b->second] = true;
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (!linked[i]) {
      return InvalidArgumentError("explicit.nodes[" + std::to_string(i) + "]: " +
                                  (p.nodes[i].is_host ? "host '" : "switch '") + p.nodes[i].name +
                                  "' has no link (every node needs at least one)");
    }
  }
  int64_t cables = 0;
  for (const ExplicitLink& l : p.links) cables = Add(cables, l.cables);
  CRUX_RETURN_IF_ERROR(CheckSize("explicit", static_cast<int64_t>(p.nodes.size()), cables));

  Topology topo;
  std::vector<NodeId> ids;
  ids.reserve(p.nodes.size());
  for (const ExplicitNode& n : p.nodes) {
    CRUX_ASSIGN_OR_RETURN(const NodeId id,
                          topo.AddNode(n.name, n.is_host ? NodeKind::kHost : NodeKind::kSwitch));
    ids.push_back(id);
  }
  for (const ExplicitLink& l : p.links) {
    CRUX_RETURN_IF_ERROR(AddCables(topo, ids[index.at(l.a)], ids[index.at(l.b)],
                                   Bandwidth::Gbps(l.gbps), LatencyFromUs(l.latency_us), l.cables));
  }
  return topo;
}

Result<Topology> BuildClos2(const Clos2Params& p) {
  constexpr std::string_view kKind = "clos2";
  CRUX_RETURN_IF_ERROR(CheckHost(kKind, p.host));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "tors"), p.tors, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "aggs"), p.aggs, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "hosts_per_tor"), p.hosts_per_tor, 1));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "uplink_gbps"), p.uplink_gbps));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "uplinks_per_agg"), p.uplinks_per_agg, 1));
  const int nics = p.host.nics_per_host;
  if (p.rail_optimized && p.tors % nics != 0) {
    return InvalidArgumentError("clos2.tors: must be a multiple of host.nics_per_host (" +
                                std::to_string(nics) + ") when rail_optimized (got " +
                                std::to_string(p.tors) + ")");
  }
  const int64_t groups = p.rail_optimized ? p.tors / nics : p.tors;
  const int64_t hosts = Mul(groups, p.hosts_per_tor);
  const int64_t nic_count = Mul(hosts, nics);
  CRUX_RETURN_IF_ERROR(
      CheckSize(kKind, Add(Add(hosts, nic_count), Add(p.tors, p.aggs)),
                Add(Mul(nic_count, 2), Mul(Mul(p.tors, p.aggs), p.uplinks_per_agg))));

  const Bandwidth pcie = Bandwidth::Gbps(p.host.pcie_gbps);
  const Bandwidth nic_bw = Bandwidth::Gbps(p.host.nic_gbps);
  const Bandwidth up_bw = Bandwidth::Gbps(p.uplink_gbps);
  const Duration lat = LatencyFromUs(p.host.link_latency_us);
  Topology topo;
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> nic_ids,
                        AddHosts(topo, hosts, nics, p.host.gpus_per_host));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> tors,
                        AddSwitches(topo, "tor", p.tors, NodeKind::kTor));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> aggs,
                        AddSwitches(topo, "agg", p.aggs, NodeKind::kAgg));
  for (int64_t h = 0; h < hosts; ++h) {
    const int64_t group = h / p.hosts_per_tor;
    for (int i = 0; i < nics; ++i) {
      const NodeId nic = nic_ids[static_cast<size_t>(h * nics + i)];
      const int64_t tor = p.rail_optimized ? group * nics + i : group;
      CRUX_RETURN_IF_ERROR(AddPcie(topo, nic, pcie));
      CRUX_RETURN_IF_ERROR(AddCables(topo, nic, tors[static_cast<size_t>(tor)], nic_bw, lat));
    }
  }
  for (const NodeId tor : tors) {
    for (const NodeId agg : aggs) {
      CRUX_RETURN_IF_ERROR(AddCables(topo, tor, agg, up_bw, lat, p.uplinks_per_agg));
    }
  }
  return topo;
}

Result<Topology> BuildClos3(const Clos3Params& p) {
  constexpr std::string_view kKind = "clos3";
  CRUX_RETURN_IF_ERROR(CheckHost(kKind, p.host));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "pods"), p.pods, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "tors_per_pod"), p.tors_per_pod, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "aggs_per_pod"), p.aggs_per_pod, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "cores"), p.cores, 1));
  if (p.cores % p.aggs_per_pod != 0) {
    return InvalidArgumentError("clos3.cores: must be a multiple of aggs_per_pod (" +
                                std::to_string(p.aggs_per_pod) + ") (got " +
                                std::to_string(p.cores) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "hosts_per_tor"), p.hosts_per_tor, 1));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "tor_agg_gbps"), p.tor_agg_gbps));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "agg_core_gbps"), p.agg_core_gbps));
  const int nics = p.host.nics_per_host;
  if (p.dual_tor && p.tors_per_pod % 2 != 0) {
    return InvalidArgumentError("clos3.tors_per_pod: must be even when dual_tor (got " +
                                std::to_string(p.tors_per_pod) + ")");
  }
  if (p.dual_tor && nics < 2) {
    return InvalidArgumentError("clos3.nics_per_host: must be >= 2 when dual_tor (got " +
                                std::to_string(nics) + ")");
  }
  const int64_t num_tors = Mul(p.pods, p.tors_per_pod);
  const int64_t num_aggs = Mul(p.pods, p.aggs_per_pod);
  const int64_t cores_per_plane = p.cores / p.aggs_per_pod;
  const int64_t tor_groups = p.dual_tor ? num_tors / 2 : num_tors;
  const int64_t hosts = Mul(tor_groups, p.hosts_per_tor);
  const int64_t nic_count = Mul(hosts, nics);
  CRUX_RETURN_IF_ERROR(CheckSize(
      kKind, Add(Add(hosts, nic_count), Add(Add(num_tors, num_aggs), p.cores)),
      Add(Add(Mul(nic_count, 2), Mul(num_tors, p.aggs_per_pod)), Mul(num_aggs, cores_per_plane))));

  const Bandwidth pcie = Bandwidth::Gbps(p.host.pcie_gbps);
  const Bandwidth nic_bw = Bandwidth::Gbps(p.host.nic_gbps);
  const Bandwidth tor_agg_bw = Bandwidth::Gbps(p.tor_agg_gbps);
  const Bandwidth agg_core_bw = Bandwidth::Gbps(p.agg_core_gbps);
  const Duration lat = LatencyFromUs(p.host.link_latency_us);
  Topology topo;
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> nic_ids,
                        AddHosts(topo, hosts, nics, p.host.gpus_per_host));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> tors,
                        AddSwitches(topo, "tor", num_tors, NodeKind::kTor));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> aggs,
                        AddSwitches(topo, "agg", num_aggs, NodeKind::kAgg));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> cores,
                        AddSwitches(topo, "core", p.cores, NodeKind::kCore));
  for (int64_t h = 0; h < hosts; ++h) {
    const int64_t group = h / p.hosts_per_tor;
    for (int i = 0; i < nics; ++i) {
      const NodeId nic = nic_ids[static_cast<size_t>(h * nics + i)];
      const int64_t tor_index = p.dual_tor ? 2 * group + (i % 2) : group;
      CRUX_RETURN_IF_ERROR(AddPcie(topo, nic, pcie));
      CRUX_RETURN_IF_ERROR(AddCables(topo, nic, tors[static_cast<size_t>(tor_index)], nic_bw, lat));
    }
  }
  for (int64_t pod = 0; pod < p.pods; ++pod) {
    for (int64_t t = 0; t < p.tors_per_pod; ++t) {
      for (int64_t a = 0; a < p.aggs_per_pod; ++a) {
        CRUX_RETURN_IF_ERROR(AddCables(topo, tors[static_cast<size_t>(pod * p.tors_per_pod + t)],
                                       aggs[static_cast<size_t>(pod * p.aggs_per_pod + a)],
                                       tor_agg_bw, lat));
      }
    }
  }
  for (int64_t pod = 0; pod < p.pods; ++pod) {
    for (int64_t a = 0; a < p.aggs_per_pod; ++a) {
      for (int64_t c = a * cores_per_plane; c < (a + 1) * cores_per_plane; ++c) {
        CRUX_RETURN_IF_ERROR(AddCables(topo, aggs[static_cast<size_t>(pod * p.aggs_per_pod + a)],
                                       cores[static_cast<size_t>(c)], agg_core_bw, lat));
      }
    }
  }
  return topo;
}

Result<Topology> BuildFatTree(const FatTreeParams& p) {
  constexpr std::string_view kKind = "fattree";
  CRUX_RETURN_IF_ERROR(CheckHost(kKind, p.host, /*check_nics=*/false));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "k"), p.k, 2));
  if (p.k % 2 != 0) {
    return InvalidArgumentError("fattree.k: must be even (got " + std::to_string(p.k) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "link_gbps"), p.link_gbps));
  const int64_t k = p.k;
  const int64_t half = k / 2;
  const int64_t per_tier = Mul(k, half);  // Edge (and agg) switches over all pods.
  const int64_t num_cores = Mul(half, half);
  const int64_t hosts = Mul(per_tier, half);
  CRUX_RETURN_IF_ERROR(CheckSize(kKind, Add(Mul(hosts, 2), Add(Mul(per_tier, 2), num_cores)),
                                 Add(Mul(hosts, 2), Mul(Mul(per_tier, half), 2))));

  const Bandwidth pcie = Bandwidth::Gbps(p.host.pcie_gbps);
  const Bandwidth bw = Bandwidth::Gbps(p.link_gbps);
  const Duration lat = LatencyFromUs(p.host.link_latency_us);
  Topology topo;
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> nic_ids,
                        AddHosts(topo, hosts, 1, p.host.gpus_per_host));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> edges,
                        AddSwitches(topo, "tor", per_tier, NodeKind::kTor));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> aggs,
                        AddSwitches(topo, "agg", per_tier, NodeKind::kAgg));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> cores,
                        AddSwitches(topo, "core", num_cores, NodeKind::kCore));
  for (int64_t h = 0; h < hosts; ++h) {
    const NodeId nic = nic_ids[static_cast<size_t>(h)];
    CRUX_RETURN_IF_ERROR(AddPcie(topo, nic, pcie));
    CRUX_RETURN_IF_ERROR(AddCables(topo, nic, edges[static_cast<size_t>(h / half)], bw, lat));
  }
  for (int64_t pod = 0; pod < k; ++pod) {
    for (int64_t e = 0; e < half; ++e) {
      for (int64_t a = 0; a < half; ++a) {
        CRUX_RETURN_IF_ERROR(AddCables(topo, edges[static_cast<size_t>(pod * half + e)],
                                       aggs[static_cast<size_t>(pod * half + a)], bw, lat));
      }
    }
  }
  for (int64_t pod = 0; pod < k; ++pod) {
    for (int64_t a = 0; a < half; ++a) {
      for (int64_t c = a * half; c < (a + 1) * half; ++c) {
        CRUX_RETURN_IF_ERROR(AddCables(topo, aggs[static_cast<size_t>(pod * half + a)],
                                       cores[static_cast<size_t>(c)], bw, lat));
      }
    }
  }
  return topo;
}

Result<Topology> BuildHpn(const HpnParams& p) {
  constexpr std::string_view kKind = "hpn";
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "segments"), p.segments, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "hosts_per_segment"), p.hosts_per_segment, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "rails"), p.rails, 1));
  if (p.planes < 1 || p.planes > kMaxHpnPlanes) {
    return InvalidArgumentError("hpn.planes: must be in [1, " + std::to_string(kMaxHpnPlanes) +
                                "] (got " + std::to_string(p.planes) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "aggs_per_plane"), p.aggs_per_plane, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "pods"), p.pods, 1));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "cores_per_plane"), p.cores_per_plane, 0));
  if (p.pods > 1 && p.cores_per_plane < 1) {
    return InvalidArgumentError("hpn.cores_per_plane: must be >= 1 with more than one pod (got " +
                                std::to_string(p.cores_per_plane) + ")");
  }
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "nic_port_gbps"), p.nic_port_gbps));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "tor_agg_gbps"), p.tor_agg_gbps));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "agg_core_gbps"), p.agg_core_gbps));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "pcie_gbps"), p.pcie_gbps));
  CRUX_RETURN_IF_ERROR(CheckLatencyUs(Field(kKind, "link_latency_us"), p.link_latency_us));
  const int64_t segments = Mul(p.pods, p.segments);
  const int64_t hosts = Mul(segments, p.hosts_per_segment);
  const int64_t nic_count = Mul(hosts, p.rails);
  const int64_t num_tors = Mul(Mul(segments, p.rails), p.planes);
  const int64_t aggs_per_pod = Mul(p.planes, p.aggs_per_plane);
  const int64_t num_aggs = Mul(p.pods, aggs_per_pod);
  const int64_t num_cores = Mul(p.planes, p.cores_per_plane);
  CRUX_RETURN_IF_ERROR(
      CheckSize(kKind, Add(Add(hosts, nic_count), Add(Add(num_tors, num_aggs), num_cores)),
                Add(Add(Mul(nic_count, 1 + p.planes), Mul(num_tors, p.aggs_per_plane)),
                    Mul(num_aggs, p.cores_per_plane))));

  const Bandwidth pcie = Bandwidth::Gbps(p.pcie_gbps);
  const Bandwidth port_bw = Bandwidth::Gbps(p.nic_port_gbps);
  const Bandwidth tor_agg_bw = Bandwidth::Gbps(p.tor_agg_gbps);
  const Bandwidth agg_core_bw = Bandwidth::Gbps(p.agg_core_gbps);
  const Duration lat = LatencyFromUs(p.link_latency_us);
  Topology topo;
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> nic_ids, AddHosts(topo, hosts, p.rails, p.rails));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> tors,
                        AddSwitches(topo, "tor", num_tors, NodeKind::kTor));
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> aggs,
                        AddSwitches(topo, "agg", num_aggs, NodeKind::kAgg));
  std::vector<NodeId> cores;
  if (num_cores > 0) {
    CRUX_ASSIGN_OR_RETURN(cores, AddSwitches(topo, "core", num_cores, NodeKind::kCore));
  }
  for (int64_t h = 0; h < hosts; ++h) {
    const int64_t segment = h / p.hosts_per_segment;
    for (int64_t r = 0; r < p.rails; ++r) {
      const NodeId nic = nic_ids[static_cast<size_t>(h * p.rails + r)];
      CRUX_RETURN_IF_ERROR(AddPcie(topo, nic, pcie));
      for (int64_t plane = 0; plane < p.planes; ++plane) {
        const int64_t tor = (segment * p.rails + r) * p.planes + plane;
        CRUX_RETURN_IF_ERROR(AddCables(topo, nic, tors[static_cast<size_t>(tor)], port_bw, lat));
      }
    }
  }
  const int64_t tors_per_pod = Mul(Mul(p.segments, p.rails), p.planes);
  for (int64_t t = 0; t < num_tors; ++t) {
    const int64_t pod = t / tors_per_pod;
    const int64_t plane = t % p.planes;
    for (int64_t a = 0; a < p.aggs_per_plane; ++a) {
      const int64_t agg = (pod * p.planes + plane) * p.aggs_per_plane + a;
      CRUX_RETURN_IF_ERROR(AddCables(topo, tors[static_cast<size_t>(t)],
                                     aggs[static_cast<size_t>(agg)], tor_agg_bw, lat));
    }
  }
  for (int64_t agg = 0; agg < num_aggs && num_cores > 0; ++agg) {
    const int64_t plane = (agg / p.aggs_per_plane) % p.planes;
    for (int64_t c = 0; c < p.cores_per_plane; ++c) {
      CRUX_RETURN_IF_ERROR(AddCables(topo, aggs[static_cast<size_t>(agg)],
                                     cores[static_cast<size_t>(plane * p.cores_per_plane + c)],
                                     agg_core_bw, lat));
    }
  }
  return topo;
}

Result<Topology> BuildLingjun(const LingjunLayout& rows, const LingjunParams& p) {
  constexpr std::string_view kKind = "lingjun";
  CRUX_RETURN_IF_ERROR(CheckHost(kKind, p.host));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "tor_psw_gbps"), p.tor_psw_gbps));
  CRUX_RETURN_IF_ERROR(CheckGbps(Field(kKind, "psw_dsw_gbps"), p.psw_dsw_gbps));
  CRUX_RETURN_IF_ERROR(CheckAtLeast(Field(kKind, "tor_psw_links"), p.tor_psw_links, 1));
  if (p.grouping != LingjunTorGrouping::kAswLabel && p.grouping != LingjunTorGrouping::kPswAsw) {
    return InvalidArgumentError("lingjun.grouping: unknown value " +
                                std::to_string(static_cast<int>(p.grouping)));
  }
  CRUX_ASSIGN_OR_RETURN(const LingjunPlan layout, PlanLingjun(rows, p.grouping));
  const int nics = p.host.nics_per_host;
  const auto hosts = static_cast<int64_t>(layout.host_tor.size());
  const int64_t nic_count = Mul(hosts, nics);
  int64_t uplinks = 0;
  for (const LingjunTor& t : layout.tors) uplinks += static_cast<int64_t>(t.psws.size());
  const auto num_psws = static_cast<int64_t>(layout.psws.size());
  const auto num_dsws = static_cast<int64_t>(layout.dsws.size());
  CRUX_RETURN_IF_ERROR(CheckSize(
      kKind,
      Add(Add(hosts, nic_count),
          Add(static_cast<int64_t>(layout.tors.size()), Add(num_psws, num_dsws))),
      Add(Add(Mul(nic_count, 2), Mul(uplinks, p.tor_psw_links)), Mul(num_psws, num_dsws))));

  const Bandwidth pcie = Bandwidth::Gbps(p.host.pcie_gbps);
  const Bandwidth nic_bw = Bandwidth::Gbps(p.host.nic_gbps);
  const Bandwidth tor_psw_bw = Bandwidth::Gbps(p.tor_psw_gbps);
  const Bandwidth psw_dsw_bw = Bandwidth::Gbps(p.psw_dsw_gbps);
  const Duration lat = LatencyFromUs(p.host.link_latency_us);
  Topology topo;
  CRUX_ASSIGN_OR_RETURN(const std::vector<NodeId> nic_ids,
                        AddHosts(topo, hosts, nics, p.host.gpus_per_host));
  std::vector<NodeId> tors;
  for (const LingjunTor& t : layout.tors) {
    CRUX_ASSIGN_OR_RETURN(const NodeId id,
                          AddCsvSwitch(topo, t.name, NodeKind::kTor, CellRef(t.line, t.column)));
    tors.push_back(id);
  }
  std::vector<NodeId> psws;
  for (const auto& [name, line] : layout.psws) {
    CRUX_ASSIGN_OR_RETURN(const NodeId id,
                          AddCsvSwitch(topo, name, NodeKind::kAgg, CellRef(line, kPswRole)));
    psws.push_back(id);
  }
  std::vector<NodeId> dsws;
  for (const auto& [name, line] : layout.dsws) {
    CRUX_ASSIGN_OR_RETURN(const NodeId id,
                          AddCsvSwitch(topo, name, NodeKind::kCore, CellRef(line, kDswRole)));
    dsws.push_back(id);
  }
  for (int64_t h = 0; h < hosts; ++h) {
    const NodeId tor = tors[static_cast<size_t>(layout.host_tor[static_cast<size_t>(h)])];
    for (int i = 0; i < nics; ++i) {
      const NodeId nic = nic_ids[static_cast<size_t>(h * nics + i)];
      CRUX_RETURN_IF_ERROR(AddPcie(topo, nic, pcie));
      CRUX_RETURN_IF_ERROR(AddCables(topo, nic, tor, nic_bw, lat));
    }
  }
  for (size_t t = 0; t < tors.size(); ++t) {
    for (const int psw : layout.tors[t].psws) {
      CRUX_RETURN_IF_ERROR(AddCables(topo, tors[t], psws[static_cast<size_t>(psw)], tor_psw_bw, lat,
                                     p.tor_psw_links));
    }
  }
  for (const NodeId psw : psws) {
    for (const NodeId dsw : dsws) {
      CRUX_RETURN_IF_ERROR(AddCables(topo, psw, dsw, psw_dsw_bw, lat));
    }
  }
  return topo;
}

}  // namespace crux::core
