#include "crux/hostd/config.h"

#include <unistd.h>

#include "crux/hostd/host_protocol.h"
#include "crux/textio/file.h"
#include "crux/textio/yaml.h"

namespace crux::hostd {
namespace {

using textio::YamlNode;

std::string ShortHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

core::Result<std::string> Address(const YamlNode& node, const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(std::string text, textio::AsString(node, path));
  auto gid = CanonicalGid(text);
  if (!gid.ok()) return textio::ErrorAt(node, path, gid.status().message());
  return *gid;
}

core::Result<std::string> TopologyName(const YamlNode& node, const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(std::string name, textio::AsString(node, path));
  if (!IsValidJobId(name)) {  // Same character rule as every wire id.
    return textio::ErrorAt(node, path, "must be 1-128 chars of [A-Za-z0-9._:/-]");
  }
  return name;
}

}  // namespace

core::Result<std::map<std::string, std::string>> ParseNicAddresses(std::string_view yaml) {
  CRUX_ASSIGN_OR_RETURN(YamlNode doc, textio::ParseYaml(yaml));
  if (!doc.IsMap()) return textio::ErrorAt(doc, "", "must be a map of address: NIC name");
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const std::string path = textio::ChildPath("", doc.key(i).scalar());
    CRUX_ASSIGN_OR_RETURN(std::string addr, Address(doc.key(i), path));
    CRUX_ASSIGN_OR_RETURN(std::string name, TopologyName(doc.value(i), path));
    if (!out.emplace(addr, name).second) {
      return textio::ErrorAt(doc.key(i), path, "duplicate address");
    }
  }
  return out;
}

core::Result<HostdConfig> ParseHostdConfig(std::string_view yaml, const std::string& base_dir) {
  CRUX_ASSIGN_OR_RETURN(YamlNode doc, textio::ParseYaml(yaml));
  CRUX_RETURN_IF_ERROR(textio::CheckMap(
      doc, "",
      {"host", "daemon", "insecure", "server_key", "client_key", "socket", "nics", "nic_addresses",
       "register_delay_ms", "end_delay_ms", "lease_ms", "call_timeout_ms",
       "nic_counters_interval_ms", "sysfs_root", "term_file", "probes", "limits"}));
  HostdConfig c;
  c.host = ShortHostname();
  if (doc.Has("host")) {
    CRUX_ASSIGN_OR_RETURN(c.host, TopologyName(doc.Get("host"), "host"));
  }
  if (!doc.Has("daemon")) return textio::MissingKey(doc, "", "daemon");
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "daemon", &c.daemon_endpoint));
  CRUX_RETURN_IF_ERROR(textio::OptionalBool(doc, "", "insecure", &c.insecure));
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "server_key", &c.server_key_file));
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "client_key", &c.client_key_file));
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "socket", &c.socket));
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "nic_addresses", &c.nic_addresses_file));
  CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
      doc, "", "register_delay_ms", textio::IntRange::Closed(0, 600000), &c.register_delay_ms));
  CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
      doc, "", "end_delay_ms", textio::IntRange::Closed(0, 86400000), &c.end_delay_ms));
  CRUX_RETURN_IF_ERROR(textio::OptionalInteger(doc, "", "lease_ms",
                                               textio::IntRange::Closed(0, 86400000), &c.lease_ms));
  CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
      doc, "", "call_timeout_ms", textio::IntRange::Closed(10, 600000), &c.call_timeout_ms));
  CRUX_RETURN_IF_ERROR(textio::OptionalInteger(doc, "", "nic_counters_interval_ms",
                                               textio::IntRange::Closed(0, 3600000),
                                               &c.nic_counters_interval_ms));
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "sysfs_root", &c.sysfs_root));
  if (c.sysfs_root.empty()) return textio::ErrorAt(doc.Get("sysfs_root"), "sysfs_root", "is empty");
  CRUX_RETURN_IF_ERROR(textio::OptionalString(doc, "", "term_file", &c.term_file));
  if (doc.Has("probes")) {
    const YamlNode& p = doc.Get("probes");
    CRUX_RETURN_IF_ERROR(textio::CheckMap(
        p, "probes",
        {"enabled", "port", "interval_ms", "count", "timeout_ms", "train_count", "train_bytes"}));
    CRUX_RETURN_IF_ERROR(textio::OptionalBool(p, "probes", "enabled", &c.probes.enabled));
    CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
        p, "probes", "port", textio::IntRange::Closed(1, 65535), &c.probes.port));
    CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
        p, "probes", "interval_ms", textio::IntRange::Closed(10, 3600000), &c.probes.interval_ms));
    CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
        p, "probes", "count", textio::IntRange::Closed(1, 100), &c.probes.count));
    CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
        p, "probes", "timeout_ms", textio::IntRange::Closed(1, 60000), &c.probes.timeout_ms));
    CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
        p, "probes", "train_count", textio::IntRange::Closed(0, 1024), &c.probes.train_count));
    if (c.probes.train_count == 1) {
      return textio::ErrorAt(p.Get("train_count"), "probes.train_count",
                             "must be 0 (no capacity probes) or 2-1024: a train of one datagram "
                             "has no dispersion");
    }
    CRUX_RETURN_IF_ERROR(textio::OptionalInteger(
        p, "probes", "train_bytes", textio::IntRange::Closed(64, 65000), &c.probes.train_bytes));
    if (c.probes.timeout_ms > c.probes.interval_ms) {
      return textio::ErrorAt(
          p.Has("timeout_ms") ? p.Get("timeout_ms") : p, "probes.timeout_ms",
          "must be <= probes.interval_ms (" + std::to_string(c.probes.interval_ms) + ")");
    }
  }
  if (doc.Has("limits")) {
    const YamlNode& l = doc.Get("limits");
    CRUX_RETURN_IF_ERROR(
        textio::CheckMap(l, "limits", {"jobs_per_uid", "ranks_per_uid", "jobs_non_root"}));
    const auto range = textio::IntRange::Closed(0, 100000);
    CRUX_RETURN_IF_ERROR(
        textio::OptionalInteger(l, "limits", "jobs_per_uid", range, &c.limits.jobs_per_uid));
    CRUX_RETURN_IF_ERROR(
        textio::OptionalInteger(l, "limits", "ranks_per_uid", range, &c.limits.ranks_per_uid));
    CRUX_RETURN_IF_ERROR(
        textio::OptionalInteger(l, "limits", "jobs_non_root", range, &c.limits.jobs_non_root));
  }
  if (c.host.empty()) return textio::ErrorAt(doc, "host", "missing and the hostname is unknown");
  if (c.daemon_endpoint.empty()) return textio::ErrorAt(doc.Get("daemon"), "daemon", "is empty");
  if (!c.insecure && (c.server_key_file.empty() || c.client_key_file.empty())) {
    return textio::ErrorAt(doc, "server_key",
                           "server_key and client_key are required unless insecure: true");
  }
  if (doc.Has("nics")) {
    const YamlNode& nics = doc.Get("nics");
    CRUX_RETURN_IF_ERROR(textio::CheckSequence(nics, "nics"));
    for (size_t i = 0; i < nics.size(); ++i) {
      const std::string path = textio::ElementPath("nics", i);
      const YamlNode& n = nics.item(i);
      CRUX_RETURN_IF_ERROR(textio::CheckMap(n, path, {"name", "device", "address", "port"}));
      NicConfig nic;
      if (!n.Has("name")) return textio::MissingKey(n, path, "name");
      CRUX_ASSIGN_OR_RETURN(nic.name, TopologyName(n.Get("name"), textio::ChildPath(path, "name")));
      if (nic.name.rfind(c.host + "/", 0) != 0) {
        return textio::ErrorAt(n.Get("name"), textio::ChildPath(path, "name"),
                               "must be a NIC of host '" + c.host + "' (" + c.host + "/...)");
      }
      if (!n.Has("device")) return textio::MissingKey(n, path, "device");
      CRUX_RETURN_IF_ERROR(textio::OptionalString(n, path, "device", &nic.device));
      if (nic.device.empty() || nic.device.find('/') != std::string::npos || nic.device == "." ||
          nic.device == "..") {
        return textio::ErrorAt(n.Get("device"), textio::ChildPath(path, "device"),
                               "must be an RDMA device name (e.g. mlx5_0)");
      }
      CRUX_RETURN_IF_ERROR(
          textio::OptionalInteger(n, path, "port", textio::IntRange::Closed(1, 255), &nic.port));
      if (n.Has("address")) {
        CRUX_ASSIGN_OR_RETURN(nic.address,
                              Address(n.Get("address"), textio::ChildPath(path, "address")));
        c.nic_by_address[nic.address] = nic.name;
      }
      c.nics.push_back(std::move(nic));
    }
  }
  if (!c.nic_addresses_file.empty()) {
    const std::string file = textio::ResolvePath(base_dir, c.nic_addresses_file);
    CRUX_ASSIGN_OR_RETURN(std::string text, textio::ReadTextFile(file));
    auto map = ParseNicAddresses(text);
    if (!map.ok()) return map.status().WithContext(file);
    for (const auto& [addr, name] : *map) c.nic_by_address.emplace(addr, name);
  }
  return c;
}

core::Result<HostdConfig> LoadHostdConfig(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(std::string text, textio::ReadTextFile(path));
  auto c = ParseHostdConfig(text, textio::DirectoryOf(path));
  if (!c.ok()) return c.status().WithContext(path);
  return c;
}

}  // namespace crux::hostd
