#include "crux/daemon/config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace crux::daemon {
namespace {

using core::InvalidArgumentError;
using core::Result;
using core::Status;

std::string Pos(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return "";
  return " (line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) + ")";
}

Status Err(const YAML::Node& n, const std::string& key, const std::string& what) {
  return InvalidArgumentError(key + ": " + what + Pos(n));
}

std::string Describe(const YAML::Node& n) {
  if (n.IsNull()) return "null";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "'" + n.Scalar() + "'";
}

bool IsPlain(const YAML::Node& n) { return n.IsScalar() && n.Tag() != "!"; }

Status CheckMap(const YAML::Node& n, const std::string& path,
                const std::set<std::string>& allowed) {
  if (!n.IsMap())
    return Err(n, path.empty() ? "document" : path, "must be a map (got " + Describe(n) + ")");
  std::set<std::string> seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return Err(kv.first, path, "keys must be strings");
    const std::string key = kv.first.Scalar();
    const std::string full = path.empty() ? key : path + "." + key;
    if (!seen.insert(key).second) return Err(kv.first, full, "duplicate key");
    if (!allowed.count(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Err(kv.first, full, "unknown key (allowed: " + list + ")");
    }
  }
  return Status::Ok();
}

Result<std::string> AsString(const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) return Err(n, key, "must be a string (got " + Describe(n) + ")");
  return n.Scalar();
}

Result<int64_t> AsInt(const YAML::Node& n, const std::string& key, int64_t min, int64_t max) {
  if (!IsPlain(n)) return Err(n, key, "must be an integer (got " + Describe(n) + ")");
  const std::string& s = n.Scalar();
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) return Err(n, key, "must be an integer (got '" + s + "')");
  if (v < min || v > max) {
    return Err(
        n, key,
        "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "] (got " + s + ")");
  }
  return static_cast<int64_t>(v);
}

Result<double> AsPositive(const YAML::Node& n, const std::string& key) {
  if (!IsPlain(n)) return Err(n, key, "must be a number (got " + Describe(n) + ")");
  const std::string& s = n.Scalar();
  double v = 0;
  size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) return Err(n, key, "must be a number (got '" + s + "')");
  if (!std::isfinite(v) || !(v > 0)) return Err(n, key, "must be > 0 and finite (got " + s + ")");
  return v;
}

// A finite number in [min, max] (the error names the key).
Result<double> AsDouble(const YAML::Node& n, const std::string& key, double min, double max) {
  if (!IsPlain(n)) return Err(n, key, "must be a number (got " + Describe(n) + ")");
  const std::string& s = n.Scalar();
  double v = 0;
  size_t used = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) return Err(n, key, "must be a number (got '" + s + "')");
  if (!std::isfinite(v) || v < min || v > max) {
    std::ostringstream o;
    o << "must be in [" << min << ", " << max << "] (got " << s << ")";
    return Err(n, key, o.str());
  }
  return v;
}

Result<bool> AsBool(const YAML::Node& n, const std::string& key) {
  if (IsPlain(n)) {
    const std::string& s = n.Scalar();
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return Err(n, key, "must be true or false (got " + Describe(n) + ")");
}

template <typename T, typename F>
Status Optional(const YAML::Node& map, const std::string& path, const char* key, T* out, F read) {
  const YAML::Node n = map[key];
  if (!n.IsDefined()) return Status::Ok();
  const std::string full = path.empty() ? key : path + "." + key;
  auto r = read(n, full);
  if (!r.ok()) return r.status();
  *out = static_cast<T>(*r);
  return Status::Ok();
}

auto Str() {
  return [](const YAML::Node& n, const std::string& k) { return AsString(n, k); };
}
auto NonEmptyStr() {
  return [](const YAML::Node& n, const std::string& k) -> Result<std::string> {
    auto r = AsString(n, k);
    if (r.ok() && r->empty()) return Err(n, k, "must not be empty");
    return r;
  };
}
auto Int(int64_t min, int64_t max) {
  return [=](const YAML::Node& n, const std::string& k) { return AsInt(n, k, min, max); };
}
auto Bool() {
  return [](const YAML::Node& n, const std::string& k) { return AsBool(n, k); };
}

Status ReadIntList(const YAML::Node& n, const std::string& key, int64_t min, int64_t max,
                   std::vector<int>* out) {
  if (!n.IsSequence()) return Err(n, key, "must be a list (got " + Describe(n) + ")");
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    auto v = AsInt(n[i], key + "[" + std::to_string(i) + "]", min, max);
    if (!v.ok()) return v.status();
    out->push_back(static_cast<int>(*v));
  }
  return Status::Ok();
}

Result<core::SchedulerType> AsScheduler(const YAML::Node& n, const std::string& key) {
  auto s = AsString(n, key);
  if (!s.ok()) return s.status();
  auto t = core::ParseSchedulerType(*s);
  if (!t.ok()) return Err(n, key, t.status().message());
  return *t;
}

// The `qos:` block. Parse-time checks are per field (type, range); the cross-field rules (unique
// DSCPs and TCs, weights vs scheduler types) are core::ValidateQosConfig's, run by
// ValidateConfig.
Status ParseQos(const YAML::Node& q, core::QosConfig* out) {
  CRUX_RETURN_IF_ERROR(
      CheckMap(q, "qos",
               {"dscp_pool", "num_tcs", "level_tcs", "jobs_strict", "level_weights",
                "jobs_lossless", "reserved", "default_tc", "default_weight", "pfc"}));
  if (const YAML::Node n = q["dscp_pool"]; n.IsDefined()) {
    CRUX_RETURN_IF_ERROR(ReadIntList(n, "qos.dscp_pool", 0, 63, &out->dscp_pool));
  }
  CRUX_RETURN_IF_ERROR(Optional(q, "qos", "num_tcs", &out->num_tcs, Int(1, 8)));
  if (const YAML::Node n = q["level_tcs"]; n.IsDefined()) {
    CRUX_RETURN_IF_ERROR(ReadIntList(n, "qos.level_tcs", 0, 7, &out->level_tcs));
  }
  CRUX_RETURN_IF_ERROR(Optional(q, "qos", "jobs_strict", &out->jobs_strict, Bool()));
  if (const YAML::Node n = q["level_weights"]; n.IsDefined()) {
    CRUX_RETURN_IF_ERROR(ReadIntList(n, "qos.level_weights", 1, 100, &out->level_weights));
  }
  CRUX_RETURN_IF_ERROR(Optional(q, "qos", "jobs_lossless", &out->jobs_lossless, Bool()));
  CRUX_RETURN_IF_ERROR(Optional(q, "qos", "default_tc", &out->default_tc, Int(0, 7)));
  CRUX_RETURN_IF_ERROR(Optional(q, "qos", "default_weight", &out->default_weight, Int(1, 100)));
  CRUX_RETURN_IF_ERROR(Optional(q, "qos", "pfc", &out->pfc, Bool()));
  if (const YAML::Node r = q["reserved"]; r.IsDefined()) {
    if (!r.IsSequence()) {
      return Err(r, "qos.reserved", "must be a list of classes (got " + Describe(r) + ")");
    }
    out->reserved.clear();
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string base = "qos.reserved[" + std::to_string(i) + "]";
      const YAML::Node e = r[i];
      CRUX_RETURN_IF_ERROR(
          CheckMap(e, base, {"name", "dscps", "tc", "scheduler", "weight", "lossless"}));
      for (const char* required : {"name", "dscps", "tc", "scheduler"}) {
        if (!e[required].IsDefined()) return Err(e, base + "." + required, "required");
      }
      core::ReservedClass rc;
      rc.weight = 0;
      CRUX_RETURN_IF_ERROR(Optional(e, base, "name", &rc.name, NonEmptyStr()));
      CRUX_RETURN_IF_ERROR(ReadIntList(e["dscps"], base + ".dscps", 0, 63, &rc.dscps));
      CRUX_RETURN_IF_ERROR(Optional(e, base, "tc", &rc.tc, Int(0, 7)));
      CRUX_RETURN_IF_ERROR(
          Optional(e, base, "scheduler", &rc.scheduler,
                   [](const YAML::Node& n, const std::string& k) { return AsScheduler(n, k); }));
      CRUX_RETURN_IF_ERROR(Optional(e, base, "weight", &rc.weight, Int(0, 100)));
      CRUX_RETURN_IF_ERROR(Optional(e, base, "lossless", &rc.lossless, Bool()));
      out->reserved.push_back(std::move(rc));
    }
  }
  return Status::Ok();
}

Status CheckEndpoint(const std::string& key, const std::string& ep, bool allow_ipc) {
  const bool tcp = ep.rfind("tcp://", 0) == 0 && ep.size() > 6;
  const bool ipc = ep.rfind("ipc://", 0) == 0 && ep.size() > 6;
  const bool inproc = ep.rfind("inproc://", 0) == 0 && ep.size() > 9;
  if (tcp || inproc || (allow_ipc && ipc)) return Status::Ok();
  return InvalidArgumentError(
      key + ": must be a " +
      std::string(allow_ipc ? "tcp://, ipc:// or inproc://" : "tcp:// or inproc://") +
      " endpoint (got '" + ep + "')");
}

Status CheckListen(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
    return InvalidArgumentError("metrics_listen: must be host:port (got '" + addr + "')");
  }
  const std::string port = addr.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) > 65535) {
    return InvalidArgumentError("metrics_listen: port must be in [0, 65535] (got '" + port + "')");
  }
  return Status::Ok();
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
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

}  // namespace

DaemonConfig BuiltinDefaults() {
  DaemonConfig c;
  c.insecure = true;
  return c;
}

std::string_view EmbeddedTopologyYaml() { return kEmbeddedClos2; }

Status ValidateConfig(const DaemonConfig& c) {
  if (c.topology.empty()) return InvalidArgumentError("topology: must not be empty");
  if (c.state_dir.empty()) return InvalidArgumentError("state_dir: must not be empty");
  if (c.database.empty()) return InvalidArgumentError("database: must not be empty");
  CRUX_RETURN_IF_ERROR(CheckEndpoint("client_endpoint", c.client_endpoint, true));
  if (!c.admin_endpoint.empty()) {
    const bool local =
        c.admin_endpoint.rfind("ipc://", 0) == 0 || c.admin_endpoint.rfind("inproc://", 0) == 0;
    if (!local || c.admin_endpoint.size() <= 6) {
      return InvalidArgumentError(
          "admin_endpoint: must be an ipc:// (or inproc://) endpoint: the admin endpoint is "
          "guarded by file permissions, not CURVE (got '" +
          c.admin_endpoint + "')");
    }
  }
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
  CRUX_RETURN_IF_ERROR(CheckListen(c.metrics_listen));
  const PlannerConfig& p = c.planner;
  if (p.levels < 1 || p.levels > 64) {
    return InvalidArgumentError("planner.levels: must be in [1, 64] (got " +
                                std::to_string(p.levels) + ")");
  }
  if (p.reserved_high_levels < 0 || p.reserved_low_levels < 0 ||
      p.reserved_high_levels + p.reserved_low_levels >= p.levels) {
    return InvalidArgumentError(
        "planner.reserved_high_levels: reserved_high_levels + reserved_low_levels must be < "
        "levels (got " +
        std::to_string(p.reserved_high_levels) + " + " + std::to_string(p.reserved_low_levels) +
        " with levels " + std::to_string(p.levels) + ")");
  }
  if (p.topo_orders < 1) return InvalidArgumentError("planner.topo_orders: must be >= 1");
  if (!std::isfinite(p.gpu_peak_tflops) || !(p.gpu_peak_tflops > 0)) {
    return InvalidArgumentError("planner.gpu_peak_tflops: must be > 0 and finite");
  }
  if (c.debounce_ms < 0 || c.debounce_ms > 60000) {
    return InvalidArgumentError("debounce_ms: must be in [0, 60000]");
  }
  if (c.min_replan_interval_ms < 0 || c.min_replan_interval_ms > 600000) {
    return InvalidArgumentError("min_replan_interval_ms: must be in [0, 600000]");
  }
  if (c.lease_ms < 100 || c.lease_ms > c.max_lease_ms) {
    return InvalidArgumentError(
        "lease_ms: must be in [100, max_lease_ms=" + std::to_string(c.max_lease_ms) + "] (got " +
        std::to_string(c.lease_ms) + ")");
  }
  if (c.profiling_samples < 1) return InvalidArgumentError("profiling_samples: must be >= 1");
  if (!std::isfinite(c.replan_threshold_pct) || c.replan_threshold_pct < 0 ||
      c.replan_threshold_pct > 1000) {
    return InvalidArgumentError("replan_threshold_pct: must be in [0, 1000]");
  }
  static const std::set<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
  if (!kLevels.count(c.log_level)) {
    return InvalidArgumentError(
        "log_level: must be one of trace, debug, info, warn, error, critical, off (got '" +
        c.log_level + "')");
  }
  CRUX_RETURN_IF_ERROR(core::ValidateQosConfig(c.qos));
  return Status::Ok();
}

Result<DaemonConfig> ParseConfig(std::string_view yaml, const std::string& base_dir) {
  DaemonConfig c;
  c.base_dir = base_dir;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull() || !root.IsDefined()) {
      CRUX_RETURN_IF_ERROR(ValidateConfig(c));
      return c;
    }
    CRUX_RETURN_IF_ERROR(CheckMap(root, "",
                                  {"topology",
                                   "state_dir",
                                   "database",
                                   "client_endpoint",
                                   "admin_endpoint",
                                   "curve",
                                   "insecure",
                                   "metrics_listen",
                                   "planner",
                                   "debounce_ms",
                                   "min_replan_interval_ms",
                                   "lease_ms",
                                   "max_lease_ms",
                                   "profiling_samples",
                                   "replan_threshold_pct",
                                   "dry_run",
                                   "log_level",
                                   "dscp_pool",
                                   "qos",
                                   "limits"}));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "topology", &c.topology, NonEmptyStr()));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "state_dir", &c.state_dir, NonEmptyStr()));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "database", &c.database, NonEmptyStr()));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "client_endpoint", &c.client_endpoint, NonEmptyStr()));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "admin_endpoint", &c.admin_endpoint, Str()));
    if (const YAML::Node curve = root["curve"]; curve.IsDefined()) {
      CRUX_RETURN_IF_ERROR(
          CheckMap(curve, "curve", {"enabled", "server_secret_key_file", "authorized_keys_dir"}));
      CRUX_RETURN_IF_ERROR(Optional(curve, "curve", "enabled", &c.curve.enabled, Bool()));
      CRUX_RETURN_IF_ERROR(Optional(curve, "curve", "server_secret_key_file",
                                    &c.curve.server_secret_key_file, Str()));
      CRUX_RETURN_IF_ERROR(
          Optional(curve, "curve", "authorized_keys_dir", &c.curve.authorized_keys_dir, Str()));
    }
    CRUX_RETURN_IF_ERROR(Optional(root, "", "insecure", &c.insecure, Bool()));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "metrics_listen", &c.metrics_listen, NonEmptyStr()));
    if (const YAML::Node p = root["planner"]; p.IsDefined()) {
      CRUX_RETURN_IF_ERROR(CheckMap(p, "planner",
                                    {"levels", "reserved_high_levels", "reserved_low_levels",
                                     "topo_orders", "seed", "gpu_peak_tflops"}));
      CRUX_RETURN_IF_ERROR(Optional(p, "planner", "levels", &c.planner.levels, Int(1, 64)));
      CRUX_RETURN_IF_ERROR(Optional(p, "planner", "reserved_high_levels",
                                    &c.planner.reserved_high_levels, Int(0, 63)));
      CRUX_RETURN_IF_ERROR(Optional(p, "planner", "reserved_low_levels",
                                    &c.planner.reserved_low_levels, Int(0, 63)));
      CRUX_RETURN_IF_ERROR(
          Optional(p, "planner", "topo_orders", &c.planner.topo_orders, Int(1, 1000)));
      CRUX_RETURN_IF_ERROR(Optional(p, "planner", "seed", &c.planner.seed,
                                    Int(0, std::numeric_limits<int64_t>::max())));
      CRUX_RETURN_IF_ERROR(
          Optional(p, "planner", "gpu_peak_tflops", &c.planner.gpu_peak_tflops,
                   [](const YAML::Node& n, const std::string& k) { return AsPositive(n, k); }));
    }
    CRUX_RETURN_IF_ERROR(Optional(root, "", "debounce_ms", &c.debounce_ms, Int(0, 60000)));
    CRUX_RETURN_IF_ERROR(
        Optional(root, "", "min_replan_interval_ms", &c.min_replan_interval_ms, Int(0, 600000)));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "max_lease_ms", &c.max_lease_ms, Int(100, 86400000)));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "lease_ms", &c.lease_ms, Int(100, 86400000)));
    CRUX_RETURN_IF_ERROR(
        Optional(root, "", "profiling_samples", &c.profiling_samples, Int(1, 1000000)));
    CRUX_RETURN_IF_ERROR(Optional(
        root, "", "replan_threshold_pct", &c.replan_threshold_pct,
        [](const YAML::Node& n, const std::string& k) { return AsDouble(n, k, 0, 1000); }));
    if (const YAML::Node l = root["limits"]; l.IsDefined()) {
      CRUX_RETURN_IF_ERROR(
          CheckMap(l, "limits", {"max_jobs", "max_jobs_per_connection", "max_jobs_per_key"}));
      for (auto [key, field] :
           {std::pair{"max_jobs", &c.limits.max_jobs},
            std::pair{"max_jobs_per_connection", &c.limits.max_jobs_per_connection},
            std::pair{"max_jobs_per_key", &c.limits.max_jobs_per_key}}) {
        CRUX_RETURN_IF_ERROR(Optional(l, "limits", key, field, Int(0, 100000000)));
      }
    }
    CRUX_RETURN_IF_ERROR(Optional(root, "", "dry_run", &c.dry_run, Bool()));
    CRUX_RETURN_IF_ERROR(Optional(root, "", "log_level", &c.log_level, Str()));
    if (const YAML::Node pool = root["dscp_pool"]; pool.IsDefined()) {
      if (root["qos"].IsDefined() && root["qos"].IsMap() && root["qos"]["dscp_pool"].IsDefined()) {
        return Err(pool, "dscp_pool",
                   "given twice: use qos.dscp_pool only (top-level dscp_pool is deprecated)");
      }
      CRUX_RETURN_IF_ERROR(ReadIntList(pool, "dscp_pool", 0, 63, &c.qos.dscp_pool));
    }
    if (const YAML::Node q = root["qos"]; q.IsDefined()) CRUX_RETURN_IF_ERROR(ParseQos(q, &c.qos));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("invalid YAML: " + e.msg + " (line " +
                                std::to_string(e.mark.line + 1) + ", column " +
                                std::to_string(e.mark.column + 1) + ")");
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("invalid config: ") + e.what());
  }
  CRUX_RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

Result<DaemonConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::NotFoundError(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  auto c = ParseConfig(ss.str(), dir);
  if (!c.ok()) return c.status().WithContext(path);
  c->source = path;
  return c;
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
  std::filesystem::path t(c.topology);
  if (t.is_absolute() || c.base_dir.empty()) return t.string();
  return (std::filesystem::path(c.base_dir) / t).string();
}

std::string EffectiveConfigYaml(const DaemonConfig& c) {
  std::ostringstream o;
  o << "# source: " << c.source << "\n";
  o << "topology: " << Quote(TopologyPath(c)) << "\n";
  o << "state_dir: " << Quote(c.state_dir) << "\n";
  o << "database: " << Quote(DatabasePath(c)) << "\n";
  o << "client_endpoint: " << Quote(c.client_endpoint) << "\n";
  o << "admin_endpoint: " << Quote(AdminEndpoint(c)) << "\n";
  o << "curve: {enabled: " << (c.curve.enabled ? "true" : "false")
    << ", server_secret_key_file: " << Quote(c.curve.server_secret_key_file)
    << ", authorized_keys_dir: " << Quote(c.curve.authorized_keys_dir) << "}\n";
  o << "insecure: " << (c.insecure ? "true" : "false") << "\n";
  o << "metrics_listen: " << Quote(c.metrics_listen) << "\n";
  o << "planner: {levels: " << c.planner.levels
    << ", reserved_high_levels: " << c.planner.reserved_high_levels
    << ", reserved_low_levels: " << c.planner.reserved_low_levels
    << ", topo_orders: " << c.planner.topo_orders << ", seed: " << c.planner.seed
    << ", gpu_peak_tflops: " << c.planner.gpu_peak_tflops << "}\n";
  o << "debounce_ms: " << c.debounce_ms << "\n";
  o << "min_replan_interval_ms: " << c.min_replan_interval_ms << "\n";
  o << "lease_ms: " << c.lease_ms << "\n";
  o << "max_lease_ms: " << c.max_lease_ms << "\n";
  o << "profiling_samples: " << c.profiling_samples << "\n";
  o << "replan_threshold_pct: " << c.replan_threshold_pct << "\n";
  o << "limits: {max_jobs: " << c.limits.max_jobs
    << ", max_jobs_per_connection: " << c.limits.max_jobs_per_connection
    << ", max_jobs_per_key: " << c.limits.max_jobs_per_key << "}\n";
  o << "dry_run: " << (c.dry_run ? "true" : "false") << "\n";
  o << "log_level: " << c.log_level << "\n";
  auto list = [&](const std::vector<int>& v) {
    o << "[";
    for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
    o << "]";
  };
  const core::QosConfig& q = c.qos;
  o << "qos:\n  dscp_pool: ";
  list(q.dscp_pool);
  o << "\n  num_tcs: " << q.num_tcs << "\n  level_tcs: ";
  list(q.level_tcs);
  o << "\n  jobs_strict: " << (q.jobs_strict ? "true" : "false");
  if (!q.level_weights.empty()) {
    o << "\n  level_weights: ";
    list(q.level_weights);
  }
  o << "\n  jobs_lossless: " << (q.jobs_lossless ? "true" : "false") << "\n  reserved:";
  for (const core::ReservedClass& rc : q.reserved) {
    o << "\n    - {name: " << Quote(rc.name) << ", dscps: ";
    list(rc.dscps);
    o << ", tc: " << rc.tc << ", scheduler: " << core::SchedulerTypeName(rc.scheduler);
    if (rc.scheduler == core::SchedulerType::kDwrr) o << ", weight: " << rc.weight;
    o << ", lossless: " << (rc.lossless ? "true" : "false") << "}";
  }
  if (q.reserved.empty()) o << " []";
  o << "\n  default_tc: " << q.default_tc << "\n  default_weight: " << q.default_weight
    << "\n  pfc: " << (q.pfc ? "true" : "false") << "\n";
  return o.str();
}

std::vector<std::string> RestartOnlyChanges(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> out;
  if (TopologyPath(a) != TopologyPath(b)) out.push_back("topology");
  if (a.state_dir != b.state_dir) out.push_back("state_dir");
  if (a.database != b.database) out.push_back("database");
  if (a.client_endpoint != b.client_endpoint) out.push_back("client_endpoint");
  if (AdminEndpoint(a) != AdminEndpoint(b)) out.push_back("admin_endpoint");
  if (a.curve.enabled != b.curve.enabled ||
      a.curve.server_secret_key_file != b.curve.server_secret_key_file ||
      a.curve.authorized_keys_dir != b.curve.authorized_keys_dir) {
    out.push_back("curve");
  }
  if (a.insecure != b.insecure) out.push_back("insecure");
  if (a.metrics_listen != b.metrics_listen) out.push_back("metrics_listen");
  if (a.max_lease_ms != b.max_lease_ms) out.push_back("max_lease_ms");
  if (a.qos.dscp_pool != b.qos.dscp_pool) out.push_back("qos.dscp_pool");
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
  return o;
}

}  // namespace crux::daemon
