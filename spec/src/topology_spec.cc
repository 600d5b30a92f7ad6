#include "crux/spec/topology_spec.h"

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/topology/builders.h"
#include "crux/spec/lingjun_csv.h"
#include "crux/textio/file.h"
#include "crux/textio/yaml.h"

#ifndef CRUX_DATA_DIR
#define CRUX_DATA_DIR ""
#endif

namespace crux::spec {
namespace {

using core::Result;
using core::Status;
using textio::ChildPath;
using textio::ElementPath;
using textio::ErrorAt;
using textio::OptionalBool;
using textio::OptionalReal;
using textio::OptionalString;

// An optional int key of at least `min`.
Status OptionalInt(const textio::YamlNode& map, const std::string& path, std::string_view key,
                   int min, int* out) {
  return textio::OptionalInteger(map, path, key, textio::IntRange::AtLeast(min), out);
}

constexpr const char* kPath = "topology";

// The shipped Lingjun CSV, relative to configs/ (and to configs/topologies/).
constexpr const char* kLingjunCsvInTopologies = "lingjun/topo.csv";

Status ReadHostParams(const textio::YamlNode& n, core::HostParams* h) {
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "nics_per_host", 1, &h->nics_per_host));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "gpus_per_host", 1, &h->gpus_per_host));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "nic_gbps", textio::RealRange::Positive(), &h->nic_gbps));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "pcie_gbps", textio::RealRange::Positive(), &h->pcie_gbps));
  CRUX_RETURN_IF_ERROR(OptionalReal(n, kPath, "link_latency_us", textio::RealRange::NonNegative(),
                                    &h->link_latency_us));
  return Status::Ok();
}

// Wraps a builder result. Builder errors name fields "<kind>.<field>"; they are renamed to the
// YAML path "topology.<field>" (other messages get the "topology" context).
Result<core::Topology> FromBuilder(std::string_view kind, Result<core::Topology> built) {
  if (built.ok()) return built;
  const core::Status& s = built.status();
  const std::string prefix = std::string(kind) + ".";
  if (s.message().rfind(prefix, 0) == 0) {
    return core::Status(s.code(), ChildPath(kPath, s.message().substr(prefix.size())));
  }
  return s.WithContext(kPath);
}

Result<core::Topology> ParseClos2(const textio::YamlNode& n) {
  CRUX_RETURN_IF_ERROR(textio::CheckMap(
      n, kPath,
      {"kind", "tors", "aggs", "hosts_per_tor", "uplink_gbps", "uplinks_per_agg", "rail_optimized",
       "nics_per_host", "gpus_per_host", "nic_gbps", "pcie_gbps", "link_latency_us"}));
  core::Clos2Params p;
  CRUX_RETURN_IF_ERROR(ReadHostParams(n, &p.host));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "tors", 1, &p.tors));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "aggs", 1, &p.aggs));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "hosts_per_tor", 1, &p.hosts_per_tor));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "uplink_gbps", textio::RealRange::Positive(), &p.uplink_gbps));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "uplinks_per_agg", 1, &p.uplinks_per_agg));
  CRUX_RETURN_IF_ERROR(OptionalBool(n, kPath, "rail_optimized", &p.rail_optimized));
  if (p.rail_optimized && p.tors % p.host.nics_per_host != 0) {
    const textio::YamlNode& at = n.Has("tors") ? n.Get("tors") : n;
    return ErrorAt(at, ChildPath(kPath, "tors"),
                   "must be a multiple of nics_per_host (" + std::to_string(p.host.nics_per_host) +
                       ") when rail_optimized (got " + std::to_string(p.tors) + ")");
  }
  return FromBuilder("clos2", core::BuildClos2(p));
}

Result<core::Topology> ParseClos3(const textio::YamlNode& n) {
  CRUX_RETURN_IF_ERROR(
      textio::CheckMap(n, kPath,
                       {"kind", "pods", "tors_per_pod", "aggs_per_pod", "cores", "hosts_per_tor",
                        "tor_agg_gbps", "agg_core_gbps", "nics_per_host", "gpus_per_host",
                        "nic_gbps", "pcie_gbps", "link_latency_us", "dual_tor"}));
  core::Clos3Params p;
  CRUX_RETURN_IF_ERROR(ReadHostParams(n, &p.host));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "pods", 1, &p.pods));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "tors_per_pod", 1, &p.tors_per_pod));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "aggs_per_pod", 1, &p.aggs_per_pod));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "cores", 1, &p.cores));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "hosts_per_tor", 1, &p.hosts_per_tor));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "tor_agg_gbps", textio::RealRange::Positive(), &p.tor_agg_gbps));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "agg_core_gbps", textio::RealRange::Positive(), &p.agg_core_gbps));
  CRUX_RETURN_IF_ERROR(OptionalBool(n, kPath, "dual_tor", &p.dual_tor));
  if (p.cores % p.aggs_per_pod != 0) {
    const textio::YamlNode& at = n.Has("cores") ? n.Get("cores") : n;
    return ErrorAt(at, ChildPath(kPath, "cores"),
                   "must be a multiple of aggs_per_pod (" + std::to_string(p.aggs_per_pod) +
                       ") (got " + std::to_string(p.cores) + ")");
  }
  return FromBuilder("clos3", core::BuildClos3(p));
}

Result<core::Topology> ParseFatTree(const textio::YamlNode& n) {
  CRUX_RETURN_IF_ERROR(textio::CheckMap(n, kPath,
                                        {"kind", "k", "link_gbps", "nics_per_host", "gpus_per_host",
                                         "nic_gbps", "pcie_gbps", "link_latency_us"}));
  core::FatTreeParams p;
  CRUX_RETURN_IF_ERROR(ReadHostParams(n, &p.host));
  if (p.host.nics_per_host != 1) {
    return ErrorAt(
        n.Get("nics_per_host"), ChildPath(kPath, "nics_per_host"),
        "fattree hosts have exactly one NIC (got " + std::to_string(p.host.nics_per_host) + ")");
  }
  if (n.Has("nic_gbps")) {
    return ErrorAt(n.Get("nic_gbps"), ChildPath(kPath, "nic_gbps"),
                   "not used by fattree: every network link runs at link_gbps");
  }
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "k", 2, &p.k));
  if (p.k % 2 != 0) {
    return ErrorAt(n.Get("k"), ChildPath(kPath, "k"),
                   "must be even (got " + std::to_string(p.k) + ")");
  }
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "link_gbps", textio::RealRange::Positive(), &p.link_gbps));
  return FromBuilder("fattree", core::BuildFatTree(p));
}

Result<core::Topology> ParseHpn(const textio::YamlNode& n) {
  CRUX_RETURN_IF_ERROR(
      textio::CheckMap(n, kPath,
                       {"kind", "segments", "hosts_per_segment", "rails", "planes",
                        "aggs_per_plane", "nic_port_gbps", "tor_agg_gbps", "pcie_gbps",
                        "link_latency_us", "pods", "cores_per_plane", "agg_core_gbps"}));
  core::HpnParams p;
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "segments", 1, &p.segments));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "hosts_per_segment", 1, &p.hosts_per_segment));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "rails", 1, &p.rails));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "planes", 1, &p.planes));
  if (p.planes > core::kMaxHpnPlanes) {
    return ErrorAt(n.Get("planes"), ChildPath(kPath, "planes"),
                   "must be in [1, " + std::to_string(core::kMaxHpnPlanes) + "] (got " +
                       std::to_string(p.planes) + ")");
  }
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "aggs_per_plane", 1, &p.aggs_per_plane));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "nic_port_gbps", textio::RealRange::Positive(), &p.nic_port_gbps));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "tor_agg_gbps", textio::RealRange::Positive(), &p.tor_agg_gbps));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "pcie_gbps", textio::RealRange::Positive(), &p.pcie_gbps));
  CRUX_RETURN_IF_ERROR(OptionalReal(n, kPath, "link_latency_us", textio::RealRange::NonNegative(),
                                    &p.link_latency_us));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "pods", 1, &p.pods));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "cores_per_plane", 0, &p.cores_per_plane));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "agg_core_gbps", textio::RealRange::Positive(), &p.agg_core_gbps));
  return FromBuilder("hpn", core::BuildHpn(p));
}

// The CSV path for a lingjun topology: the `path` key (relative to base_dir), else the shipped
// file next to the YAML, else the one in the source tree.
Result<std::string> LingjunCsvPath(const textio::YamlNode& n, const std::string& base_dir) {
  const std::string key_path = ChildPath(kPath, "path");
  const textio::YamlNode& path_node = n.Get("path");
  if (path_node.IsDefined()) {
    CRUX_ASSIGN_OR_RETURN(std::string rel, textio::AsString(path_node, key_path));
    if (rel.empty()) return ErrorAt(path_node, key_path, "must not be empty");
    std::string resolved = textio::ResolvePath(base_dir, rel);
    if (!textio::IsRegularFile(resolved)) {
      return ErrorAt(path_node, key_path, "no such file '" + resolved + "'",
                     core::StatusCode::kNotFound);
    }
    return resolved;
  }
  std::vector<std::string> candidates = {
      textio::ResolvePath(base_dir, kLingjunCsvInTopologies),
      textio::ResolvePath(base_dir, std::string("topologies/") + kLingjunCsvInTopologies)};
  if (std::string(CRUX_DATA_DIR).size() > 0) {
    candidates.push_back(
        textio::ResolvePath(CRUX_DATA_DIR, std::string("topologies/") + kLingjunCsvInTopologies));
  }
  std::string tried;
  for (const std::string& c : candidates) {
    if (textio::IsRegularFile(c)) return c;
    if (!tried.empty()) tried += ", ";
    tried += c;
  }
  return ErrorAt(n, key_path,
                 "no path given and the default Lingjun CSV was not found (tried " + tried + ")",
                 core::StatusCode::kNotFound);
}

Result<core::Topology> ParseLingjun(const textio::YamlNode& n, const std::string& base_dir) {
  CRUX_RETURN_IF_ERROR(textio::CheckMap(
      n, kPath,
      {"kind", "path", "grouping", "tor_psw_gbps", "psw_dsw_gbps", "tor_psw_links", "nics_per_host",
       "gpus_per_host", "nic_gbps", "pcie_gbps", "link_latency_us"}));
  core::LingjunParams p;
  CRUX_RETURN_IF_ERROR(ReadHostParams(n, &p.host));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "tor_psw_gbps", textio::RealRange::Positive(), &p.tor_psw_gbps));
  CRUX_RETURN_IF_ERROR(
      OptionalReal(n, kPath, "psw_dsw_gbps", textio::RealRange::Positive(), &p.psw_dsw_gbps));
  CRUX_RETURN_IF_ERROR(OptionalInt(n, kPath, "tor_psw_links", 1, &p.tor_psw_links));
  std::string grouping = "asw";
  CRUX_RETURN_IF_ERROR(OptionalString(n, kPath, "grouping", &grouping));
  if (grouping == "asw") {
    p.grouping = core::LingjunTorGrouping::kAswLabel;
  } else if (grouping == "psw_asw") {
    p.grouping = core::LingjunTorGrouping::kPswAsw;
  } else {
    return ErrorAt(n.Get("grouping"), ChildPath(kPath, "grouping"),
                   "must be 'asw' or 'psw_asw' (got '" + grouping + "')");
  }
  CRUX_ASSIGN_OR_RETURN(std::string csv_path, LingjunCsvPath(n, base_dir));
  Result<std::string> csv = textio::ReadTextFile(csv_path);
  if (!csv.ok()) return csv.status().WithContext(ChildPath(kPath, "path"));
  Result<core::Topology> built = BuildLingjunFromCsv(*csv, p);
  if (!built.ok() && built.status().message().rfind("lingjun.", 0) == 0) {
    return FromBuilder("lingjun", std::move(built));
  }
  if (!built.ok()) return built.status().WithContext(kPath + std::string(": ") + csv_path);
  return built;
}

Result<core::Topology> ParseExplicit(const textio::YamlNode& n) {
  CRUX_RETURN_IF_ERROR(textio::CheckMap(n, kPath, {"kind", "nodes", "links"}));
  core::ExplicitParams p;
  const std::string nodes_path = ChildPath(kPath, "nodes");
  const textio::YamlNode& nodes = n.Get("nodes");
  if (!nodes.IsDefined()) return textio::MissingKey(n, kPath, "nodes");
  CRUX_RETURN_IF_ERROR(textio::CheckSequence(nodes, nodes_path));
  std::map<std::string, std::string> node_paths;  // Name -> path of its definition.
  for (size_t i = 0; i < nodes.size(); ++i) {
    const textio::YamlNode& node = nodes.item(i);
    const std::string path = ElementPath(nodes_path, i);
    CRUX_RETURN_IF_ERROR(textio::CheckMap(node, path, {"name", "type"}));
    if (!node.Has("name")) return textio::MissingKey(node, path, "name");
    if (!node.Has("type")) return textio::MissingKey(node, path, "type");
    core::ExplicitNode en;
    CRUX_ASSIGN_OR_RETURN(en.name, textio::AsString(node.Get("name"), ChildPath(path, "name")));
    if (en.name.empty())
      return ErrorAt(node.Get("name"), ChildPath(path, "name"), "must not be empty");
    if (!core::IsValidName(en.name)) {
      return ErrorAt(node.Get("name"), ChildPath(path, "name"),
                     "invalid node name " + core::QuoteName(en.name) +
                         " (allowed: " + std::string(core::kNameRule) + ")");
    }
    CRUX_ASSIGN_OR_RETURN(std::string type,
                          textio::AsString(node.Get("type"), ChildPath(path, "type")));
    if (type == "host") {
      en.is_host = true;
    } else if (type == "switch") {
      en.is_host = false;
    } else {
      return ErrorAt(node.Get("type"), ChildPath(path, "type"),
                     "must be 'host' or 'switch' (got '" + type + "')");
    }
    auto [it, inserted] = node_paths.emplace(en.name, path);
    if (!inserted) {
      return ErrorAt(node.Get("name"), ChildPath(path, "name"),
                     "duplicate node '" + en.name + "' (first defined at " + it->second + ")",
                     core::StatusCode::kAlreadyExists);
    }
    p.nodes.push_back(std::move(en));
  }
  const std::string links_path = ChildPath(kPath, "links");
  const textio::YamlNode& links = n.Get("links");
  if (!links.IsDefined()) return textio::MissingKey(n, kPath, "links");
  CRUX_RETURN_IF_ERROR(textio::CheckSequence(links, links_path));
  if (links.size() == 0) {
    return ErrorAt(links, links_path, "must list at least one link (every node needs one)");
  }
  std::set<std::string> linked;                                 // Nodes that have a link.
  std::map<std::pair<std::string, std::string>, size_t> pairs;  // {a, b} sorted -> first link.
  for (size_t i = 0; i < links.size(); ++i) {
    const textio::YamlNode& link = links.item(i);
    const std::string path = ElementPath(links_path, i);
    CRUX_RETURN_IF_ERROR(textio::CheckMap(link, path, {"a", "b", "gbps", "latency_us", "cables"}));
    core::ExplicitLink el;
    for (const char* end : {"a", "b"}) {
      if (!link.Has(end)) return textio::MissingKey(link, path, end);
      CRUX_ASSIGN_OR_RETURN(std::string name,
                            textio::AsString(link.Get(end), ChildPath(path, end)));
      if (node_paths.count(name) == 0) {
        return ErrorAt(link.Get(end), ChildPath(path, end), "unknown node " + core::QuoteName(name),
                       core::StatusCode::kNotFound);
      }
      (end[0] == 'a' ? el.a : el.b) = std::move(name);
    }
    if (el.a == el.b) {
      return ErrorAt(link.Get("b"), ChildPath(path, "b"),
                     "a link must join two different nodes (both are '" + el.a + "')");
    }
    if (!link.Has("gbps")) return textio::MissingKey(link, path, "gbps");
    CRUX_RETURN_IF_ERROR(OptionalReal(link, path, "gbps", textio::RealRange::Positive(), &el.gbps));
    CRUX_RETURN_IF_ERROR(
        OptionalReal(link, path, "latency_us", textio::RealRange::NonNegative(), &el.latency_us));
    CRUX_RETURN_IF_ERROR(OptionalInt(link, path, "cables", 1, &el.cables));
    auto [it, inserted] = pairs.emplace(std::minmax(el.a, el.b), i);
    if (!inserted) {
      return ErrorAt(link, path,
                     "duplicate link " + el.a + " <-> " + el.b + " (also " +
                         ElementPath(links_path, it->second) +
                         "; give parallel cables as one link with cables: N)",
                     core::StatusCode::kAlreadyExists);
    }
    linked.insert(el.a);
    linked.insert(el.b);
    p.links.push_back(std::move(el));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const core::ExplicitNode& en = p.nodes[i];
    if (linked.count(en.name) == 0) {
      return ErrorAt(nodes.item(i), ElementPath(nodes_path, i),
                     std::string(en.is_host ? "host '" : "switch '") + en.name +
                         "' has no link (every node needs at least one; list it in " + links_path +
                         " or remove it)");
    }
  }
  return FromBuilder("explicit", core::BuildExplicit(p));
}

Result<core::Topology> ParseTopologyImpl(std::string_view yaml, const std::string& base_dir) {
  CRUX_ASSIGN_OR_RETURN(const textio::YamlNode root, textio::ParseYaml(yaml));
  if (root.IsNull()) {
    return core::InvalidArgumentError(std::string(kPath) +
                                      ": missing required key (empty document)");
  }
  CRUX_RETURN_IF_ERROR(textio::CheckMap(root, "", {"topology"}));
  const textio::YamlNode& n = root.Get("topology");
  if (!n.IsDefined()) return textio::MissingKey(root, "", "topology");
  if (!n.IsMap()) return ErrorAt(n, kPath, "must be a map (got " + textio::Describe(n) + ")");
  const textio::YamlNode& kind_node = n.Get("kind");
  if (!kind_node.IsDefined()) return textio::MissingKey(n, kPath, "kind");
  CRUX_ASSIGN_OR_RETURN(std::string kind, textio::AsString(kind_node, ChildPath(kPath, "kind")));
  if (kind == "clos2") return ParseClos2(n);
  if (kind == "clos3") return ParseClos3(n);
  if (kind == "fattree") return ParseFatTree(n);
  if (kind == "hpn") return ParseHpn(n);
  if (kind == "lingjun") return ParseLingjun(n, base_dir);
  if (kind == "explicit") return ParseExplicit(n);
  return ErrorAt(
      kind_node, ChildPath(kPath, "kind"),
      "unknown kind '" + kind + "' (expected explicit, clos2, clos3, fattree, hpn or lingjun)");
}

}  // namespace

Result<core::Topology> ParseTopology(std::string_view yaml, const std::string& base_dir) {
  try {
    return ParseTopologyImpl(yaml, base_dir);
  } catch (const std::exception& e) {
    return core::InternalError(std::string(kPath) + ": unexpected error: " + e.what());
  }
}

Result<core::Topology> LoadTopologyFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(std::string text, textio::ReadTextFile(path));
  Result<core::Topology> topo = ParseTopology(text, textio::DirectoryOf(path));
  if (!topo.ok()) return topo.status().WithContext(path);
  return topo;
}

}  // namespace crux::spec
