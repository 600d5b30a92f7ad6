// cruxd's configuration, described once: kFields below lists every key (YAML path, member,
// unit, bounds, live or restart-only), and that one table drives parsing (through crux::textio,
// the strict YAML reader), validation, the effective-config output (YAML::Emitter, through
// textio::YamlWriter), the reload diff (RestartOnlyChanges) and what a reload keeps
// (KeepRestartOnly). Adding a key is adding a row (and documenting it in configs/cruxd.yaml).
#include "crux/daemon/config/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/text.h"
#include "crux/textio/file.h"
#include "crux/textio/number.h"
#include "crux/textio/yaml.h"
#include "crux/textio/yaml_writer.h"

namespace crux::daemon {
namespace {

using core::InvalidArgumentError;
using core::Result;
using core::Status;
using textio::IntRange;
using textio::RealRange;
using textio::YamlNode;

// ---- Field descriptors ----

// A member of a record (DaemonConfig or one qos.reserved class): a captureless function
// returning a reference to it. Const access goes through the same function on a const_cast
// object; the accessors only name a member and never modify anything.
template <typename Record, typename T>
using Ref = T& (*)(Record&);

template <typename Record, typename T>
const T& Read(Ref<Record, T> ref, const Record& r) {
  return ref(const_cast<Record&>(r));
}

// A format check for string values: what is wrong ("must be host:port (got 'x')"), "" if
// nothing.
using StringCheck = std::string (*)(const std::string& value);

template <typename Record>
struct Field {
  using Member =
      std::variant<Ref<Record, std::string>, Ref<Record, bool>, Ref<Record, int>,
                   Ref<Record, int64_t>, Ref<Record, uint32_t>, Ref<Record, uint64_t>,
                   Ref<Record, double>, Ref<Record, std::vector<int>>,
                   Ref<Record, core::SchedulerType>, Ref<Record, std::vector<core::ReservedClass>>>;

  std::string_view path;  // Dotted YAML path from the record's root.
  Member member;
  std::string_view unit = "";   // For the effective config's comments and ConfigKeys().
  bool live = true;             // Applied by a reload (SIGHUP); false: needs a restart.
  IntRange ints = {};           // Integers and integer-list items.
  RealRange reals = {};         // Reals.
  bool non_empty = false;       // Strings.
  StringCheck check = nullptr;  // Strings.
  bool required = false;        // Only for qos.reserved entries.
  // The value in force, when it differs from the member as written (defaults and paths
  // applied): what the effective config shows and what RestartOnlyChanges compares.
  std::string (*effective)(const Record&) = nullptr;
  // A deprecated spelling of another key (same member; that key's row is the one emitted and
  // compared). Giving both is an error.
  std::string_view alias_of = "";
};

// Builders, so the table reads as one row per key.
#define CRUX_MEMBER(Record, expr) +[](Record& r) -> decltype(auto) { return (r.expr); }
#define CFG(expr) CRUX_MEMBER(DaemonConfig, expr)
#define RSV(expr) CRUX_MEMBER(core::ReservedClass, expr)

constexpr bool kRestart = false;  // Field::live for restart-only keys (live is the default).

std::string CheckEndpoint(const std::string& ep) {
  const bool tcp = ep.rfind("tcp://", 0) == 0 && ep.size() > 6;
  const bool ipc = ep.rfind("ipc://", 0) == 0 && ep.size() > 6;
  const bool inproc = ep.rfind("inproc://", 0) == 0 && ep.size() > 9;
  if (tcp || inproc || ipc) return "";
  return "must be a tcp://, ipc:// or inproc:// endpoint (got " + core::QuoteName(ep) + ")";
}

std::string CheckAdminEndpoint(const std::string& ep) {
  if (ep.empty()) return "";  // The default, ipc://<state_dir>/admin.sock.
  const bool ipc = ep.rfind("ipc://", 0) == 0 && ep.size() > 6;
  const bool inproc = ep.rfind("inproc://", 0) == 0 && ep.size() > 9;
  if (ipc || inproc) return "";
  return "must be an ipc:// (or inproc://) endpoint: the admin endpoint is guarded by file "
         "permissions, not CURVE (got " +
         core::QuoteName(ep) + ")";
}

std::string CheckListen(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
    return "must be host:port (got " + core::QuoteName(addr) + ")";
  }
  const std::string port = addr.substr(colon + 1);
  int64_t p = 0;
  if (textio::ParseInteger(port, &p) != textio::NumberStatus::kOk || p < 0 || p > 65535) {
    return "port must be in [0, 65535] (got " + core::QuoteName(port) + ")";
  }
  return "";
}

std::string CheckFlowExpectation(const std::string& v) {
  if (v == "plan_share" || v == "own_best") return "";
  return "must be plan_share or own_best (got " + core::QuoteName(v) + ")";
}

std::string CheckOptionalEndpoint(const std::string& ep) {
  return ep.empty() ? "" : CheckEndpoint(ep);
}

std::string CheckEtcdEndpoints(const std::string& list) {
  if (list.empty()) return "";
  for (const std::string& e : SplitEndpointList(list)) {
    const bool http = (e.rfind("http://", 0) == 0 && e.size() > 7) ||
                      (e.rfind("https://", 0) == 0 && e.size() > 8);
    if (!http) {
      return "each endpoint must be an http:// or https:// URL of an etcd member (got " +
             core::QuoteName(e) + ")";
    }
  }
  return "";
}

std::string CheckElectionName(const std::string& name) {
  for (char ch : name) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_' || ch == '.';
    if (!ok) return "must be letters, digits, '-', '_' or '.' (got " + core::QuoteName(name) + ")";
  }
  return "";
}

constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};

std::string CheckLogLevel(const std::string& level) {
  for (std::string_view l : kLogLevels) {
    if (level == l) return "";
  }
  return "must be one of trace, debug, info, warn, error, critical, off (got " +
         core::QuoteName(level) + ")";
}

// The rules across the etcd keys of `ha` (see ValidateConfig in config.h).
Status ValidateEtcdSecurity(const HaConfig& h) {
  const EtcdTlsConfig& t = h.etcd_tls;
  if (t.cert_file.empty() != t.key_file.empty()) {
    return InvalidArgumentError(t.cert_file.empty()
                                    ? "ha.etcd_tls.cert_file: required with ha.etcd_tls.key_file"
                                    : "ha.etcd_tls.key_file: required with ha.etcd_tls.cert_file");
  }
  const EtcdAuthConfig& a = h.etcd_auth;
  if (a.user.empty() != a.password_file.empty()) {
    return InvalidArgumentError(
        a.user.empty() ? "ha.etcd_auth.user: required with ha.etcd_auth.password_file"
                       : "ha.etcd_auth.password_file: required with ha.etcd_auth.user");
  }
  const std::vector<std::string> endpoints = SplitEndpointList(h.etcd_endpoints);
  if (endpoints.empty()) return Status::Ok();  // HA off: nothing here is used.
  size_t https = 0;
  for (const std::string& e : endpoints) https += e.rfind("https://", 0) == 0 ? 1 : 0;
  if (https != 0 && https != endpoints.size()) {
    return InvalidArgumentError(
        "ha.etcd_endpoints: must be all http:// or all https:// (got a mix)");
  }
  if (https != 0 && t.ca_file.empty()) {
    return InvalidArgumentError(
        "ha.etcd_tls.ca_file: required with https:// etcd endpoints (the CA that signed the "
        "members' certificates; the system's CAs are not trusted)");
  }
  if (https == 0 && t.any()) {
    return InvalidArgumentError(
        "ha.etcd_tls: given, but ha.etcd_endpoints are http:// (the certificates would not be "
        "used): use https:// endpoints");
  }
  if (https == 0 && !a.user.empty()) {
    return InvalidArgumentError(
        "ha.etcd_auth: needs https:// etcd endpoints (the password would cross the network in "
        "clear)");
  }
  return Status::Ok();
}

std::string EffectiveTopology(const DaemonConfig& c) { return TopologyPath(c); }
std::string EffectiveAdminEndpoint(const DaemonConfig& c) { return AdminEndpoint(c); }

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Every key of a qos.reserved entry.
const std::vector<Field<core::ReservedClass>>& ReservedFields() {
  static const std::vector<Field<core::ReservedClass>> kFields = {
      {.path = "name", .member = RSV(name), .non_empty = true, .required = true},
      {.path = "dscps", .member = RSV(dscps), .ints = IntRange::Closed(0, 63), .required = true},
      {.path = "tc", .member = RSV(tc), .ints = IntRange::Closed(0, 7), .required = true},
      {.path = "scheduler", .member = RSV(scheduler), .required = true},
      {.path = "weight", .member = RSV(weight), .ints = IntRange::Closed(0, 100)},
      {.path = "lossless", .member = RSV(lossless)},
  };
  return kFields;
}

// Every cruxd key, in the order of configs/cruxd.yaml.
const std::vector<Field<DaemonConfig>>& ConfigFields() {
  static const std::vector<Field<DaemonConfig>> kFields = {
      {.path = "topology",
       .member = CFG(topology),
       .unit = "path",
       .live = kRestart,
       .non_empty = true,
       .effective = EffectiveTopology},
      {.path = "state_dir",
       .member = CFG(state_dir),
       .unit = "path",
       .live = kRestart,
       .non_empty = true},
      {.path = "database",
       .member = CFG(database),
       .unit = "path",
       .live = kRestart,
       .non_empty = true},
      {.path = "profile_store_interval_ms",
       .member = CFG(profile_store_interval_ms),
       .unit = "ms",
       .live = kRestart,
       .ints = IntRange::Closed(0, 3600000)},
      {.path = "client_endpoint",
       .member = CFG(client_endpoint),
       .live = kRestart,
       .non_empty = true,
       .check = CheckEndpoint},
      {.path = "admin_endpoint",
       .member = CFG(admin_endpoint),
       .live = kRestart,
       .check = CheckAdminEndpoint,
       .effective = EffectiveAdminEndpoint},
      {.path = "curve.enabled", .member = CFG(curve.enabled), .live = kRestart},
      {.path = "curve.server_secret_key_file",
       .member = CFG(curve.server_secret_key_file),
       .unit = "path",
       .live = kRestart},
      {.path = "curve.authorized_keys_dir",
       .member = CFG(curve.authorized_keys_dir),
       .unit = "path",
       .live = kRestart},
      {.path = "insecure", .member = CFG(insecure), .live = kRestart},
      {.path = "metrics_listen",
       .member = CFG(metrics_listen),
       .unit = "host:port",
       .live = kRestart,
       .non_empty = true,
       .check = CheckListen},
      {.path = "planner.levels",
       .member = CFG(planner.levels),
       .unit = "levels",
       .ints = IntRange::Closed(1, 64)},
      {.path = "planner.reserved_high_levels",
       .member = CFG(planner.reserved_high_levels),
       .unit = "levels",
       .ints = IntRange::Closed(0, 63)},
      {.path = "planner.reserved_low_levels",
       .member = CFG(planner.reserved_low_levels),
       .unit = "levels",
       .ints = IntRange::Closed(0, 63)},
      {.path = "planner.topo_orders",
       .member = CFG(planner.topo_orders),
       .ints = IntRange::Closed(1, 1000)},
      {.path = "planner.seed", .member = CFG(planner.seed), .ints = IntRange::AtLeast(0)},
      {.path = "planner.gpu_peak_tflops",
       .member = CFG(planner.gpu_peak_tflops),
       .unit = "TFLOP/s",
       .reals = RealRange::AboveAtMost(0, 1e6)},
      {.path = "planner.stable", .member = CFG(planner.stable)},
      {.path = "planner.spray", .member = CFG(planner.spray)},
      {.path = "debounce_ms",
       .member = CFG(debounce_ms),
       .unit = "ms",
       .ints = IntRange::Closed(0, 60000)},
      {.path = "reoptimize_interval_ms",
       .member = CFG(reoptimize_interval_ms),
       .unit = "ms",
       .ints = IntRange::Closed(0, 86400000)},
      {.path = "reoptimize_min_gain",
       .member = CFG(reoptimize_min_gain),
       .reals = RealRange{0, false, 1, true}},
      {.path = "min_replan_interval_ms",
       .member = CFG(min_replan_interval_ms),
       .unit = "ms",
       .ints = IntRange::Closed(0, 600000)},
      {.path = "lease_ms",
       .member = CFG(lease_ms),
       .unit = "ms",
       .ints = IntRange::Closed(100, 86400000)},
      {.path = "max_lease_ms",
       .member = CFG(max_lease_ms),
       .unit = "ms",
       .live = kRestart,
       .ints = IntRange::Closed(100, 86400000)},
      {.path = "profiling_samples",
       .member = CFG(profiling_samples),
       .unit = "samples",
       .ints = IntRange::Closed(1, 1000000)},
      {.path = "replan_threshold_pct",
       .member = CFG(replan_threshold_pct),
       .unit = "%",
       .reals = RealRange::Closed(0, 1000)},
      {.path = "limits.max_jobs",
       .member = CFG(limits.max_jobs),
       .unit = "jobs, 0 = no limit",
       .ints = IntRange::Closed(0, 100000000)},
      {.path = "limits.max_jobs_per_connection",
       .member = CFG(limits.max_jobs_per_connection),
       .unit = "jobs, 0 = no limit",
       .ints = IntRange::Closed(0, 100000000)},
      {.path = "limits.max_jobs_per_key",
       .member = CFG(limits.max_jobs_per_key),
       .unit = "jobs, 0 = no limit",
       .ints = IntRange::Closed(0, 100000000)},
      {.path = "dry_run", .member = CFG(dry_run)},
      {.path = "log_level", .member = CFG(log_level), .check = CheckLogLevel},
      {.path = "dscp_pool",
       .member = CFG(qos.dscp_pool),
       .live = kRestart,
       .ints = IntRange::Closed(0, 63),
       .alias_of = "qos.dscp_pool"},
      {.path = "qos.dscp_pool",
       .member = CFG(qos.dscp_pool),
       .unit = "DSCPs",
       .live = kRestart,
       .ints = IntRange::Closed(0, 63)},
      {.path = "qos.num_tcs", .member = CFG(qos.num_tcs), .ints = IntRange::Closed(1, 8)},
      {.path = "qos.level_tcs",
       .member = CFG(qos.level_tcs),
       .unit = "TCs",
       .ints = IntRange::Closed(0, 7)},
      {.path = "qos.jobs_strict", .member = CFG(qos.jobs_strict)},
      {.path = "qos.level_weights",
       .member = CFG(qos.level_weights),
       .unit = "DWRR weights",
       .ints = IntRange::Closed(1, 100)},
      {.path = "qos.jobs_lossless", .member = CFG(qos.jobs_lossless)},
      {.path = "qos.reserved", .member = CFG(qos.reserved)},
      {.path = "qos.default_tc",
       .member = CFG(qos.default_tc),
       .unit = "TC",
       .ints = IntRange::Closed(0, 7)},
      {.path = "qos.default_weight",
       .member = CFG(qos.default_weight),
       .unit = "DWRR weight",
       .ints = IntRange::Closed(1, 100)},
      {.path = "qos.pfc", .member = CFG(qos.pfc)},
      {.path = "ha.etcd_endpoints",
       .member = CFG(ha.etcd_endpoints),
       .unit = "comma-separated http:// or https:// URLs, \"\" = HA off",
       .live = kRestart,
       .check = CheckEtcdEndpoints},
      {.path = "ha.etcd_tls.ca_file",
       .member = CFG(ha.etcd_tls.ca_file),
       .unit = "path",
       .live = kRestart},
      {.path = "ha.etcd_tls.cert_file",
       .member = CFG(ha.etcd_tls.cert_file),
       .unit = "path",
       .live = kRestart},
      {.path = "ha.etcd_tls.key_file",
       .member = CFG(ha.etcd_tls.key_file),
       .unit = "path",
       .live = kRestart},
      {.path = "ha.etcd_auth.user", .member = CFG(ha.etcd_auth.user), .live = kRestart},
      {.path = "ha.etcd_auth.password_file",
       .member = CFG(ha.etcd_auth.password_file),
       .unit = "path",
       .live = kRestart},
      {.path = "ha.election",
       .member = CFG(ha.election),
       .live = kRestart,
       .non_empty = true,
       .check = CheckElectionName},
      {.path = "ha.instance", .member = CFG(ha.instance), .live = kRestart},
      {.path = "ha.advertise_endpoint",
       .member = CFG(ha.advertise_endpoint),
       .live = kRestart,
       .check = CheckOptionalEndpoint},
      {.path = "ha.lease_ttl_s",
       .member = CFG(ha.lease_ttl_s),
       .unit = "s",
       .live = kRestart,
       .ints = IntRange::Closed(2, 300)},
      {.path = "faults.automatic", .member = CFG(faults.automatic)},
      {.path = "faults.evidence_window_ms",
       .member = CFG(faults.evidence_window_ms),
       .unit = "ms",
       .ints = IntRange::Closed(100, 3600000)},
      {.path = "faults.evaluate_interval_ms",
       .member = CFG(faults.evaluate_interval_ms),
       .unit = "ms",
       .ints = IntRange::Closed(10, 600000)},
      {.path = "faults.gray_ratio",
       .member = CFG(faults.gray_ratio),
       .unit = "fraction of what a flow is entitled to",
       .reals = RealRange::Closed(0.01, 1)},
      {.path = "faults.min_flows",
       .member = CFG(faults.min_flows),
       .unit = "flows",
       .ints = IntRange::Closed(1, 100000)},
      {.path = "faults.expectation",
       .member = CFG(faults.expectation),
       .check = CheckFlowExpectation},
      {.path = "faults.min_jobs",
       .member = CFG(faults.min_jobs),
       .unit = "jobs",
       .ints = IntRange::Closed(1, 1000)},
      {.path = "faults.counter_errors_per_s",
       .member = CFG(faults.counter_errors_per_s),
       .unit = "errors+discards/s",
       .reals = RealRange::Closed(0.001, 1e12)},
      {.path = "faults.nic_loss_per_s",
       .member = CFG(faults.nic_loss_per_s),
       .unit = "loss events/s",
       .reals = RealRange::Closed(0.001, 1e12)},
      {.path = "faults.counter_capacity_fraction",
       .member = CFG(faults.counter_capacity_fraction),
       .unit = "fraction of nominal",
       .reals = RealRange::Closed(0.01, 1)},
      {.path = "faults.min_dwell_ms",
       .member = CFG(faults.min_dwell_ms),
       .unit = "ms",
       .ints = IntRange::Closed(1, 86400000)},
      {.path = "faults.max_hold_ms",
       .member = CFG(faults.max_hold_ms),
       .unit = "ms",
       .ints = IntRange::Closed(1, 86400000)},
      {.path = "faults.stable_decay_ms",
       .member = CFG(faults.stable_decay_ms),
       .unit = "ms",
       .ints = IntRange::Closed(1, 86400000)},
      {.path = "faults.quarantine_downtime_ms",
       .member = CFG(faults.quarantine_downtime_ms),
       .unit = "ms",
       .ints = IntRange::Closed(1, 86400000)},
      {.path = "faults.probes", .member = CFG(faults.probes)},
      {.path = "faults.probes_per_job",
       .member = CFG(faults.probes_per_job),
       .unit = "probes",
       .ints = IntRange::Closed(0, 64)},
      {.path = "faults.max_probes",
       .member = CFG(faults.max_probes),
       .unit = "probes",
       .ints = IntRange::Closed(0, 100000)},
      {.path = "faults.probe_interval_ms",
       .member = CFG(faults.probe_interval_ms),
       .unit = "ms",
       .ints = IntRange::Closed(100, 3600000)},
      {.path = "faults.probe_bytes",
       .member = CFG(faults.probe_bytes),
       .unit = "bytes",
       .ints = IntRange::Closed(64, 16777216)},
      {.path = "impact.enabled", .member = CFG(impact.enabled)},
      {.path = "impact.top_jobs",
       .member = CFG(impact.top_jobs),
       .unit = "jobs",
       .ints = IntRange::Closed(0, 1000)},
      {.path = "impact.error_threshold",
       .member = CFG(impact.error_threshold),
       .reals = RealRange::AboveAtMost(0, 10)},
      {.path = "impact.interval_ms",
       .member = CFG(impact.interval_ms),
       .unit = "ms",
       .ints = IntRange::Closed(0, 3600000)},
  };
  return kFields;
}

#undef RSV
#undef CFG
#undef CRUX_MEMBER

// ---- Generic operations on a table ----

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The part of `path` after `prefix.` ("" prefix: the whole path), or nullopt when `path` is not
// under `prefix`.
std::optional<std::string_view> Under(std::string_view path, std::string_view prefix) {
  if (prefix.empty()) return path;
  if (path.size() > prefix.size() && path.substr(0, prefix.size()) == prefix &&
      path[prefix.size()] == '.') {
    return path.substr(prefix.size() + 1);
  }
  return std::nullopt;
}

// The keys a map at `prefix` may hold: the next path component of every field under it, in
// table order.
template <typename Record>
std::vector<std::string_view> KeysUnder(const std::vector<Field<Record>>& fields,
                                        std::string_view prefix) {
  std::vector<std::string_view> keys;
  for (const Field<Record>& f : fields) {
    std::optional<std::string_view> rest = Under(f.path, prefix);
    if (!rest) continue;
    const std::string_view key = rest->substr(0, rest->find('.'));
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  return keys;
}

// Checks the map structure of `node` (at `prefix`) against the table: every map on the way to
// a field holds only the table's keys, once each.
template <typename Record>
Status CheckStructure(const std::vector<Field<Record>>& fields, const YamlNode& node,
                      const std::string& yaml_path, std::string_view prefix) {
  const std::vector<std::string_view> keys = KeysUnder(fields, prefix);
  CRUX_RETURN_IF_ERROR(textio::CheckMap(node, yaml_path, keys));
  for (std::string_view key : keys) {
    const std::string sub =
        prefix.empty() ? std::string(key) : std::string(prefix) + "." + std::string(key);
    bool is_map = false;
    for (const Field<Record>& f : fields) is_map = is_map || Under(f.path, sub).has_value();
    const YamlNode& child = node.Get(key);
    if (is_map && child.IsDefined()) {
      CRUX_RETURN_IF_ERROR(CheckStructure(fields, child, textio::ChildPath(yaml_path, key), sub));
    }
  }
  return Status::Ok();
}

// The node of `path` below `root` (missing when any map on the way is absent).
const YamlNode& Lookup(const YamlNode& root, std::string_view path) {
  const YamlNode* n = &root;
  while (true) {
    const size_t dot = path.find('.');
    n = &n->Get(path.substr(0, dot));
    if (dot == std::string_view::npos || !n->IsDefined()) return *n;
    path.remove_prefix(dot + 1);
  }
}

// What is wrong with a scalar value of field `f` ("" if nothing), without the key.
template <typename Record, typename T>
std::string ScalarProblem(const Field<Record>& f, const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (f.non_empty && v.empty()) return "must not be empty";
    if (f.check != nullptr) return f.check(v);
  } else if constexpr (kIsInteger<T>) {
    const bool fits = std::is_signed_v<T> || static_cast<uint64_t>(v) <= uint64_t{kInt64Max};
    if (!fits || !f.ints.Contains(static_cast<int64_t>(v))) {
      return "must be " + f.ints.Describe() + " (got " + std::to_string(v) + ")";
    }
  } else if constexpr (std::is_same_v<T, double>) {
    if (!std::isfinite(v) || !f.reals.Contains(v)) {
      return "must be " + f.reals.Describe() + " (got " + textio::FormatReal(v) + ")";
    }
  }
  return "";
}

// A value of field `f` (at `path`) checked against the field's rules, for ValidateConfig.
template <typename Record, typename T>
Status CheckValue(const Field<Record>& f, const std::string& path, const T& v) {
  if constexpr (std::is_same_v<T, std::vector<int>>) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!f.ints.Contains(v[i])) {
        return InvalidArgumentError(textio::ElementPath(path, i) + ": must be " +
                                    f.ints.Describe() + " (got " + std::to_string(v[i]) + ")");
      }
    }
  } else if constexpr (std::is_same_v<T, std::vector<core::ReservedClass>>) {
    for (size_t i = 0; i < v.size(); ++i) {
      for (const Field<core::ReservedClass>& rf : ReservedFields()) {
        const std::string rpath = textio::ChildPath(textio::ElementPath(path, i), rf.path);
        CRUX_RETURN_IF_ERROR(std::visit(
            [&](auto ref) { return CheckValue(rf, rpath, Read(ref, v[i])); }, rf.member));
      }
    }
  } else {
    if (std::string problem = ScalarProblem(f, v); !problem.empty()) {
      return InvalidArgumentError(path + ": " + problem);
    }
  }
  return Status::Ok();
}

template <typename Record>
Status ParseRecord(const std::vector<Field<Record>>& fields, const YamlNode& node,
                   const std::string& yaml_path, Record* out);

// Parses `node` (the value of field `f` at `path`) into `*out`.
template <typename Record, typename T>
Status ParseValue(const Field<Record>& f, const YamlNode& node, const std::string& path, T* out) {
  if constexpr (std::is_same_v<T, std::string>) {
    CRUX_ASSIGN_OR_RETURN(std::string v, textio::AsString(node, path));
    if (std::string problem = ScalarProblem(f, v); !problem.empty()) {
      return textio::ErrorAt(node, path, problem);
    }
    *out = std::move(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    CRUX_ASSIGN_OR_RETURN(*out, textio::AsBool(node, path));
  } else if constexpr (kIsInteger<T>) {
    CRUX_ASSIGN_OR_RETURN(int64_t v, textio::AsBoundedInteger(node, path, f.ints));
    *out = static_cast<T>(v);  // The table's bounds fit T.
  } else if constexpr (std::is_same_v<T, double>) {
    CRUX_ASSIGN_OR_RETURN(*out, textio::AsBoundedReal(node, path, f.reals));
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    CRUX_RETURN_IF_ERROR(textio::CheckSequence(node, path));
    std::vector<int> v;
    for (size_t i = 0; i < node.size(); ++i) {
      CRUX_ASSIGN_OR_RETURN(
          int64_t x, textio::AsBoundedInteger(node.item(i), textio::ElementPath(path, i), f.ints));
      v.push_back(static_cast<int>(x));
    }
    *out = std::move(v);
  } else if constexpr (std::is_same_v<T, core::SchedulerType>) {
    CRUX_ASSIGN_OR_RETURN(std::string s, textio::AsString(node, path));
    Result<core::SchedulerType> t = core::ParseSchedulerType(s);
    if (!t.ok()) return textio::ErrorAt(node, path, t.status().message());
    *out = *t;
  } else if constexpr (std::is_same_v<T, std::vector<core::ReservedClass>>) {
    if (!node.IsSequence()) {
      return textio::ErrorAt(node, path,
                             "must be a list of classes (got " + textio::Describe(node) + ")");
    }
    std::vector<core::ReservedClass> v;
    for (size_t i = 0; i < node.size(); ++i) {
      core::ReservedClass rc;
      rc.weight = 0;  // Required for STRICT classes; DWRR ones give theirs.
      CRUX_RETURN_IF_ERROR(
          ParseRecord(ReservedFields(), node.item(i), textio::ElementPath(path, i), &rc));
      v.push_back(std::move(rc));
    }
    *out = std::move(v);
  }
  return Status::Ok();
}

// Parses every field of `fields` present under `node` into `*out` (absent ones keep their
// value). Checks the structure first: unknown and duplicate keys, maps where maps belong.
template <typename Record>
Status ParseRecord(const std::vector<Field<Record>>& fields, const YamlNode& node,
                   const std::string& yaml_path, Record* out) {
  CRUX_RETURN_IF_ERROR(CheckStructure(fields, node, yaml_path, ""));
  for (const Field<Record>& f : fields) {
    const YamlNode& n = Lookup(node, f.path);
    const std::string path = textio::ChildPath(yaml_path, f.path);
    if (!n.IsDefined()) {
      if (f.required) return textio::ErrorAt(node, path, "missing required key");
      continue;
    }
    if (!f.alias_of.empty() && Lookup(node, f.alias_of).IsDefined()) {
      return textio::ErrorAt(n, path,
                             "given twice: use " + std::string(f.alias_of) + " only (top-level " +
                                 std::string(f.path) + " is deprecated)");
    }
    CRUX_RETURN_IF_ERROR(
        std::visit([&](auto ref) { return ParseValue(f, n, path, &ref(*out)); }, f.member));
  }
  return Status::Ok();
}

// The comment after a key in the effective config: "ms; live", "restart".
template <typename Record>
std::string Note(const Field<Record>& f) {
  std::string note(f.unit);
  if (!note.empty()) note += "; ";
  return note + (f.live ? "live" : "restart");
}

template <typename Record, typename T>
void EmitValue(const Field<Record>& f, const Record& r, const T& v, textio::YamlWriter& w) {
  if (f.effective != nullptr) {
    w.String(f.effective(r));
  } else if constexpr (std::is_same_v<T, std::string>) {
    w.String(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    w.Bool(v);
  } else if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, uint32_t>) {
    w.Unsigned(v);
  } else if constexpr (kIsInteger<T>) {
    w.Integer(v);
  } else if constexpr (std::is_same_v<T, double>) {
    w.Real(v);
  } else if constexpr (std::is_same_v<T, std::vector<int>>) {
    w.BeginList(textio::YamlWriter::kFlow);
    for (int x : v) w.Integer(x);
    w.EndList();
  } else if constexpr (std::is_same_v<T, core::SchedulerType>) {
    w.String(core::SchedulerTypeName(v));
  } else if constexpr (std::is_same_v<T, std::vector<core::ReservedClass>>) {
    w.BeginList();
    for (const core::ReservedClass& rc : v) {
      w.BeginMap(textio::YamlWriter::kFlow);
      for (const Field<core::ReservedClass>& rf : ReservedFields()) {
        w.Key(rf.path);
        std::visit([&](auto ref) { EmitValue(rf, rc, Read(ref, rc), w); }, rf.member);
      }
      w.EndMap();
    }
    w.EndList();
  }
}

// The value of field `f` of `r` as text, for comparisons (the effective value when there is
// one).
template <typename Record>
bool SameValue(const Field<Record>& f, const Record& a, const Record& b) {
  if (f.effective != nullptr) return f.effective(a) == f.effective(b);
  return std::visit([&](auto ref) { return Read(ref, a) == Read(ref, b); }, f.member);
}

}  // namespace

DaemonConfig BuiltinDefaults() {
  DaemonConfig c;
  c.insecure = true;
  return c;
}

constexpr std::string_view kEmbeddedClos2 = R"(topology:
  kind: clos2
  tors: 4
  aggs: 2
  hosts_per_tor: 4
  nics_per_host: 2
  gpus_per_host: 8
  nic_gbps: 200
  pcie_gbps: 512
  link_latency_us: 1
  uplink_gbps: 400
  uplinks_per_agg: 1
  rail_optimized: false
)";

std::string_view EmbeddedTopologyYaml() { return kEmbeddedClos2; }

Status ValidateConfig(const DaemonConfig& c) {
  // Every key's own rule (what ParseConfig checked with positions).
  for (const Field<DaemonConfig>& f : ConfigFields()) {
    if (!f.alias_of.empty()) continue;
    CRUX_RETURN_IF_ERROR(std::visit(
        [&](auto ref) { return CheckValue(f, std::string(f.path), Read(ref, c)); }, f.member));
  }
  // Rules across keys.
  if (c.curve.enabled) {
    if (c.curve.server_secret_key_file.empty()) {
      return InvalidArgumentError(
          "curve.server_secret_key_file: required when curve.enabled is true");
    }
    if (c.curve.authorized_keys_dir.empty()) {
      return InvalidArgumentError("curve.authorized_keys_dir: required when curve.enabled is true");
    }
  } else if (!c.insecure) {
    return InvalidArgumentError(
        "curve.enabled: false needs 'insecure: true' (plain TCP without authentication must be "
        "asked for explicitly)");
  }
  const PlannerConfig& p = c.planner;
  if (p.reserved_high_levels + p.reserved_low_levels >= p.levels) {
    return InvalidArgumentError(
        "planner.reserved_high_levels: reserved_high_levels + reserved_low_levels must be < "
        "levels (got " +
        std::to_string(p.reserved_high_levels) + " + " + std::to_string(p.reserved_low_levels) +
        " with levels " + std::to_string(p.levels) + ")");
  }
  if (c.lease_ms > c.max_lease_ms) {
    return InvalidArgumentError(
        "lease_ms: must be in [100, max_lease_ms=" + std::to_string(c.max_lease_ms) + "] (got " +
        std::to_string(c.lease_ms) + ")");
  }
  CRUX_RETURN_IF_ERROR(core::ValidateQosConfig(c.qos));
  CRUX_RETURN_IF_ERROR(ValidateEtcdSecurity(c.ha));
  if (c.faults.max_hold_ms < c.faults.min_dwell_ms) {
    return InvalidArgumentError("faults.max_hold_ms: must be >= faults.min_dwell_ms (got " +
                                std::to_string(c.faults.max_hold_ms) + " < " +
                                std::to_string(c.faults.min_dwell_ms) + ")");
  }
  return Status::Ok();
}

Result<DaemonConfig> ParseConfig(std::string_view yaml, const std::string& base_dir) {
  DaemonConfig c;
  c.base_dir = base_dir;
  CRUX_ASSIGN_OR_RETURN(const YamlNode root, textio::ParseYaml(yaml));
  if (!root.IsNull()) CRUX_RETURN_IF_ERROR(ParseRecord(ConfigFields(), root, "", &c));
  // Credential files are relative to the config file's directory, like `topology`.
  for (std::string* path : {&c.ha.etcd_tls.ca_file, &c.ha.etcd_tls.cert_file,
                            &c.ha.etcd_tls.key_file, &c.ha.etcd_auth.password_file}) {
    if (!path->empty()) *path = textio::ResolvePath(base_dir, *path);
  }
  CRUX_RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

Result<DaemonConfig> LoadConfigFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(const std::string text, textio::ReadTextFile(path));
  Result<DaemonConfig> c = ParseConfig(text, textio::DirectoryOf(path));
  if (!c.ok()) return c.status().WithContext(path);
  c->source = path;
  return c;
}

std::vector<std::string> SplitEndpointList(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string_view item = core::Trim(std::string_view(list).substr(start, end - start));
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

std::string AdminEndpoint(const DaemonConfig& c) {
  if (!c.admin_endpoint.empty()) return c.admin_endpoint;
  return "ipc://" + (std::filesystem::path(c.state_dir) / "admin.sock").string();
}

std::string DatabasePath(const DaemonConfig& c) {
  std::filesystem::path db(c.database);
  if (db.is_absolute()) return db.string();
  return (std::filesystem::path(c.state_dir) / db).string();
}

std::string TopologyPath(const DaemonConfig& c) {
  if (c.topology == kEmbeddedTopology) return c.topology;
  return textio::ResolvePath(c.base_dir, c.topology);
}

std::string EffectiveConfigYaml(const DaemonConfig& c) {
  textio::YamlWriter w;
  w.Comment("source: " + c.source);
  w.Comment("database file: " + DatabasePath(c));
  w.BeginMap();
  std::vector<std::string_view> open;  // The maps open around the current key.
  for (const Field<DaemonConfig>& f : ConfigFields()) {
    if (!f.alias_of.empty()) continue;
    std::vector<std::string_view> parts;
    for (std::string_view rest = f.path;;) {
      const size_t dot = rest.find('.');
      parts.push_back(rest.substr(0, dot));
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) {
      ++common;
    }
    for (; open.size() > common; open.pop_back()) w.EndMap();
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      w.Key(parts[i]).BeginMap();
      open.push_back(parts[i]);
    }
    w.Key(parts.back());
    std::visit([&](auto ref) { EmitValue(f, c, Read(ref, c), w); }, f.member);
    w.Comment(Note(f));
  }
  for (; !open.empty(); open.pop_back()) w.EndMap();
  w.EndMap();
  return w.Finish();
}

std::vector<std::string> RestartOnlyChanges(const DaemonConfig& before, const DaemonConfig& after) {
  std::vector<std::string> out;
  for (const Field<DaemonConfig>& f : ConfigFields()) {
    if (f.live || !f.alias_of.empty()) continue;
    if (!SameValue(f, before, after)) out.emplace_back(f.path);
  }
  return out;
}

void KeepRestartOnly(const DaemonConfig& running, DaemonConfig* next) {
  for (const Field<DaemonConfig>& f : ConfigFields()) {
    if (f.live) continue;
    std::visit([&](auto ref) { ref(*next) = Read(ref, running); }, f.member);
  }
  next->base_dir = running.base_dir;  // `topology` is relative to it.
}

std::vector<ConfigKey> ConfigKeys() {
  std::vector<ConfigKey> out;
  for (const Field<DaemonConfig>& f : ConfigFields()) {
    ConfigKey k;
    k.path = std::string(f.path);
    k.unit = std::string(f.unit);
    k.live = f.live;
    k.deprecated_alias_of = std::string(f.alias_of);
    std::visit(
        [&](auto ref) {
          using T = std::decay_t<decltype(ref(std::declval<DaemonConfig&>()))>;
          if constexpr (std::is_same_v<T, std::string>) {
            k.type = "string";
            if (f.non_empty) k.bounds = "not empty";
          } else if constexpr (std::is_same_v<T, bool>) {
            k.type = "boolean";
          } else if constexpr (kIsInteger<T>) {
            k.type = "integer";
            k.bounds = f.ints.Describe();
          } else if constexpr (std::is_same_v<T, double>) {
            k.type = "number";
            k.bounds = f.reals.Describe();
          } else if constexpr (std::is_same_v<T, std::vector<int>>) {
            k.type = "list of integers";
            k.bounds = "each " + f.ints.Describe();
          } else if constexpr (std::is_same_v<T, std::vector<core::ReservedClass>>) {
            k.type = "list of classes {name, dscps, tc, scheduler, weight, lossless}";
          } else {
            k.type = "STRICT or DWRR";
          }
        },
        f.member);
    out.push_back(std::move(k));
  }
  return out;
}

core::PlannerOptions ToPlannerOptions(const PlannerConfig& p) {
  core::PlannerOptions o;
  o.levels = p.levels;
  o.reserved_high_levels = p.reserved_high_levels;
  o.reserved_low_levels = p.reserved_low_levels;
  o.topo_orders = p.topo_orders;
  o.seed = p.seed;
  o.gpu_peak_flops = p.gpu_peak_tflops * 1e12;
  // The crux policy re-plans incrementally (core::PolicyOptions::incremental, its default); said
  // here too so that the options validate with `stable`.
  o.incremental = true;
  o.stable = p.stable;
  o.spray = p.spray;
  return o;
}

}  // namespace crux::daemon
