#include "crux/switch_adapters/sonic_adapter.h"

#include "crux/switch_adapters/sonic_port_monitor.h"
#include "crux/switch_adapters/sonic_verifier.h"

#include <set>
#include <utility>

namespace crux::switch_adapters {
namespace {

using core::Duration;
using core::Result;
using core::Status;
using core::SwitchQosState;

RedisEndpoint EndpointOf(const SonicOptions& o) {
  RedisEndpoint e;
  e.unix_socket = o.unix_socket;
  e.host = o.host;
  e.port = o.port;
  e.db = o.db;
  e.connect_timeout = o.connect_timeout;
  e.command_timeout = o.command_timeout;
  return e;
}

ConfigDbLayout LayoutOf(const SonicOptions& o) {
  ConfigDbLayout l;
  l.ports = o.ports;
  l.profile = o.profile;
  l.scheduler_prefix = o.scheduler_prefix;
  l.manage_pfc = o.manage_pfc;
  return l;
}

}  // namespace

Status ValidateSonicOptions(const SonicOptions& o) {
  if (o.switch_name.empty()) return core::InvalidArgumentError("sonic.switch_name: required");
  CRUX_RETURN_IF_ERROR(ValidateRedisEndpoint(EndpointOf(o), "sonic."));
  CRUX_RETURN_IF_ERROR(ValidateConfigDbLayout(LayoutOf(o)));
  if (o.queues < 1 || o.queues > core::kMaxTrafficClasses) {
    return core::InvalidArgumentError("sonic.queues: " + std::to_string(o.queues) +
                                      " out of range 1.." +
                                      std::to_string(core::kMaxTrafficClasses));
  }
  return Status::Ok();
}

Result<std::unique_ptr<SonicAdapter>> SonicAdapter::Create(SonicOptions options) {
  CRUX_RETURN_IF_ERROR(ValidateSonicOptions(options));
  return std::unique_ptr<SonicAdapter>(new SonicAdapter(std::move(options)));
}

SonicAdapter::SonicAdapter(SonicOptions options)
    : options_(std::move(options)), schema_(LayoutOf(options_)), session_(EndpointOf(options_)) {}

Capabilities SonicAdapter::capabilities() const {
  Capabilities c;
  c.backend = "sonic";
  c.queues = options_.queues;
  c.strict_priority = true;
  c.dwrr = true;
  c.pfc = options_.manage_pfc;
  c.pbr_redirect = false;
  c.transactional = true;
  return c;
}

Status SonicAdapter::CheckState(const SwitchQosState& desired) const {
  CRUX_RETURN_IF_ERROR(core::ValidateSwitchQosState(desired));
  return CheckCapabilities(capabilities(), desired);
}

Result<ConfigDbSnapshot> SonicAdapter::ReadSnapshot(bool watch) {
  const std::vector<std::string>& keys = schema_.Keys();
  std::vector<std::vector<std::string>> commands;
  commands.reserve(keys.size() + 1);
  if (watch) {
    std::vector<std::string> w{"WATCH"};
    w.insert(w.end(), keys.begin(), keys.end());
    commands.push_back(std::move(w));
  }
  for (const std::string& k : keys) commands.push_back({"HGETALL", k});
  // Reads and WATCH are safe to send twice: a stale kept connection is replaced once.
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> replies,
                        session_.Pipeline(commands, /*replay_if_stale=*/true));
  size_t at = 0;
  if (watch) {
    const RedisReply& w = replies[at++];
    if (w.is_error()) {
      return core::InternalError("CONFIG_DB at " + address() + ": WATCH: " + w.str);
    }
  }
  ConfigDbSnapshot snap;
  Status first_error;
  for (const std::string& k : keys) {
    const RedisReply& r = replies[at++];
    if (r.is_error()) {
      if (first_error.ok()) {
        first_error = core::FailedPreconditionError("CONFIG_DB key " + k + ": " + r.str);
      }
      continue;
    }
    if (r.type != RedisReply::Type::kArray || r.elements.size() % 2 != 0) {
      if (first_error.ok()) {
        first_error = core::InternalError("CONFIG_DB key " + k + ": unexpected HGETALL reply");
      }
      continue;
    }
    if (r.elements.empty()) continue;  // Absent key.
    ConfigDbFields& f = snap[k];
    for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      f[r.elements[i].str] = r.elements[i + 1].str;
    }
  }
  if (!first_error.ok()) {
    if (watch) CRUX_RETURN_IF_ERROR(session_.Command({"UNWATCH"}).status());
    return first_error;
  }
  return snap;
}

Result<ApplyResult> SonicAdapter::Apply(const SwitchQosState& desired) {
  CRUX_RETURN_IF_ERROR(CheckState(desired));
  CRUX_ASSIGN_OR_RETURN(ConfigDbSnapshot snap, ReadSnapshot(/*watch=*/true));
  const std::vector<ConfigDbChange> changes = schema_.Diff(snap, desired);
  ApplyResult result;
  if (changes.empty()) {
    CRUX_RETURN_IF_ERROR(session_.Command({"UNWATCH"}).status());
    return result;
  }
  for (const ConfigDbChange& c : changes) {
    if (c.kind == ConfigDbChange::Kind::kSet) {
      ++result.writes;
    } else {
      ++result.deletes;
    }
    result.operations.push_back(c.ToString());
  }

  // MULTI and the commands, pipelined; the QUEUED replies are read before EXEC so that a fault
  // injected by the test hook happens with the whole transaction queued but not executed.
  std::vector<std::vector<std::string>> queued{{"MULTI"}};
  for (auto& cmd : ConfigDbSchema::Commands(changes)) queued.push_back(std::move(cmd));
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, session_.Pipeline(queued));
  std::string queue_error;
  for (const RedisReply& r : replies) {
    if (r.is_error() && queue_error.empty()) queue_error = r.str;
  }
  if (options_.before_exec) options_.before_exec();
  if (!queue_error.empty()) {
    CRUX_RETURN_IF_ERROR(session_.Command({"DISCARD"}).status());
    return core::InternalError("CONFIG_DB at " + address() +
                               ": transaction rejected: " + queue_error);
  }
  CRUX_ASSIGN_OR_RETURN(RedisReply exec, session_.Command({"EXEC"}));
  if (exec.type == RedisReply::Type::kNil) {
    return core::UnavailableError("CONFIG_DB at " + address() +
                                  ": a watched key changed during the apply (EXEC aborted)");
  }
  if (exec.is_error()) {
    return core::InternalError("CONFIG_DB at " + address() + ": EXEC: " + exec.str);
  }
  if (exec.type != RedisReply::Type::kArray) {
    return core::InternalError("CONFIG_DB at " + address() + ": EXEC: unexpected reply");
  }
  for (size_t i = 0; i < exec.elements.size(); ++i) {
    if (exec.elements[i].is_error()) {
      // Redis does not roll back a command that failed at run time (e.g. WRONGTYPE).
      return core::InternalError("CONFIG_DB at " + address() + ": EXEC command " +
                                 std::to_string(i) + " failed: " + exec.elements[i].str);
    }
  }
  return result;
}

Result<std::vector<ConfigDbChange>> SonicAdapter::Plan(const SwitchQosState& desired) {
  CRUX_RETURN_IF_ERROR(CheckState(desired));
  CRUX_ASSIGN_OR_RETURN(ConfigDbSnapshot snap, ReadSnapshot(/*watch=*/false));
  return schema_.Diff(snap, desired);
}

Result<SwitchQosState> SonicAdapter::ReadBack() {
  CRUX_ASSIGN_OR_RETURN(ConfigDbSnapshot snap, ReadSnapshot(/*watch=*/false));
  Result<SwitchQosState> s = schema_.Reconstruct(snap, options_.switch_name);
  if (!s.ok()) {
    return Status(s.status().code(), "CONFIG_DB at " + address() + ": " + s.status().message());
  }
  return s;
}

Status SonicAdapter::Health() {
  CRUX_ASSIGN_OR_RETURN(RedisReply r, session_.Command({"PING"}, /*replay_if_stale=*/true));
  if (r.is_error()) return core::UnavailableError("CONFIG_DB at " + address() + ": PING: " + r.str);
  return Status::Ok();
}

Result<std::string> SonicAdapter::ApplyPatchJson(const SwitchQosState& desired) {
  CRUX_ASSIGN_OR_RETURN(std::vector<ConfigDbChange> changes, Plan(desired));
  // Whether each table that gets a new key exists already (any key), checked with SCAN.
  std::set<std::string> existing;
  for (const std::string& table : ConfigDbSchema::TablesGettingNewKeys(changes)) {
    std::string cursor = "0";
    bool found = false;
    do {
      CRUX_ASSIGN_OR_RETURN(
          RedisReply r,
          session_.Command({"SCAN", cursor, "MATCH", table + "|*", "COUNT", "1000"}, true));
      if (r.type != RedisReply::Type::kArray || r.elements.size() != 2) {
        return core::InternalError("CONFIG_DB at " + address() + ": unexpected SCAN reply");
      }
      cursor = r.elements[0].str;
      found = !r.elements[1].elements.empty();
    } while (!found && cursor != "0");
    if (found) existing.insert(table);
  }
  return ConfigDbSchema::ApplyPatchJson(changes, existing);
}

namespace {

// The Redis endpoint (--redis-socket or --redis-host/--redis-port, --redis-timeout-ms) and the
// required --ports of the monitor and the verifier (the adapter keeps its own SonicOptions).
core::Status ReadEndpointAndPorts(const BackendConfig& c, RedisEndpoint& endpoint,
                                  std::vector<std::string>& ports) {
  endpoint.unix_socket = ParamString(c, "redis-socket");
  endpoint.host = ParamString(c, "redis-host", endpoint.host);
  CRUX_ASSIGN_OR_RETURN(endpoint.port, ParamInt(c, "redis-port", endpoint.port, 1, 65535));
  CRUX_ASSIGN_OR_RETURN(int timeout_ms, ParamInt(c, "redis-timeout-ms", 1000, 1, 600000));
  endpoint.connect_timeout = Duration::Millis(timeout_ms);
  endpoint.command_timeout = Duration::Millis(timeout_ms);
  CRUX_ASSIGN_OR_RETURN(ports, ParamList(c, "ports"));
  if (ports.empty()) return core::InvalidArgumentError("--ports: required by the sonic backend");
  return core::Status::Ok();
}

}  // namespace

Backend SonicBackend() {
  Backend b;
  b.name = "sonic";
  b.summary = "SONiC CONFIG_DB (Redis db 4): one MULTI/EXEC per apply";
  b.params = {
      {"redis-socket", "CONFIG_DB unix socket (else TCP --redis-host/--redis-port)", false, ""},
      {"redis-host", "CONFIG_DB host, without --redis-socket", false, "127.0.0.1"},
      {"redis-port", "CONFIG_DB TCP port", false, "6379"},
      {"redis-db", "CONFIG_DB database number", false, "4"},
      {"redis-timeout-ms", "Redis connect and per-reply timeout", false, "1000"},
      {"ports", "Ports to program, comma-separated (e.g. Ethernet0,Ethernet4); required", false,
       ""},
      {"no-pfc", "Never write pfc_enable (PFC stays as the operator set it)", true, ""},
      {"queues", "Hardware queues per port of this platform (1-8)", false, "8"},
      {"appl-db", "APPL_DB database number (port state; --watch-ports)", false, "0"},
      {"counters-db",
       "COUNTERS_DB database number (port and queue counters; --watch-ports, enforcement "
       "verification)",
       false, "2"},
      {"asic-db", "ASIC_DB database number (QoS maps the ASIC holds; enforcement verification)",
       false, "1"},
  };
  b.create = [](const BackendConfig& c) -> Result<std::unique_ptr<SwitchAdapter>> {
    SonicOptions o;
    o.switch_name = c.switch_name;
    o.unix_socket = ParamString(c, "redis-socket");
    o.host = ParamString(c, "redis-host", o.host);
    CRUX_ASSIGN_OR_RETURN(o.port, ParamInt(c, "redis-port", o.port, 1, 65535));
    CRUX_ASSIGN_OR_RETURN(o.db, ParamInt(c, "redis-db", o.db, 0, 15));
    CRUX_ASSIGN_OR_RETURN(int timeout_ms, ParamInt(c, "redis-timeout-ms", 1000, 1, 600000));
    o.connect_timeout = Duration::Millis(timeout_ms);
    o.command_timeout = Duration::Millis(timeout_ms);
    CRUX_ASSIGN_OR_RETURN(o.ports, ParamList(c, "ports"));
    if (o.ports.empty())
      return core::InvalidArgumentError("--ports: required by the sonic backend");
    CRUX_ASSIGN_OR_RETURN(bool no_pfc, ParamFlag(c, "no-pfc"));
    o.manage_pfc = !no_pfc;
    CRUX_ASSIGN_OR_RETURN(o.queues, ParamInt(c, "queues", o.queues, 1, core::kMaxTrafficClasses));
    CRUX_ASSIGN_OR_RETURN(auto adapter, SonicAdapter::Create(std::move(o)));
    return std::unique_ptr<SwitchAdapter>(std::move(adapter));
  };
  b.create_monitor = [](const BackendConfig& c) -> Result<std::unique_ptr<PortMonitor>> {
    SonicMonitorOptions o;
    CRUX_RETURN_IF_ERROR(ReadEndpointAndPorts(c, o.endpoint, o.ports));
    CRUX_ASSIGN_OR_RETURN(o.appl_db, ParamInt(c, "appl-db", o.appl_db, 0, 15));
    CRUX_ASSIGN_OR_RETURN(o.counters_db, ParamInt(c, "counters-db", o.counters_db, 0, 15));
    CRUX_ASSIGN_OR_RETURN(o.config_db, ParamInt(c, "redis-db", o.config_db, 0, 15));
    CRUX_ASSIGN_OR_RETURN(auto monitor, SonicPortMonitor::Create(std::move(o)));
    return std::unique_ptr<PortMonitor>(std::move(monitor));
  };
  b.create_verifier =
      [](const BackendConfig& c,
         const QueueCheckOptions& queues) -> Result<std::unique_ptr<EnforcementVerifier>> {
    SonicVerifierOptions o;
    CRUX_RETURN_IF_ERROR(ReadEndpointAndPorts(c, o.endpoint, o.ports));
    CRUX_ASSIGN_OR_RETURN(o.asic_db, ParamInt(c, "asic-db", o.asic_db, 0, 15));
    CRUX_ASSIGN_OR_RETURN(o.counters_db, ParamInt(c, "counters-db", o.counters_db, 0, 15));
    o.queues = queues;
    CRUX_ASSIGN_OR_RETURN(auto verifier, SonicEnforcementVerifier::Create(std::move(o)));
    return std::unique_ptr<EnforcementVerifier>(std::move(verifier));
  };
  return b;
}

}  // namespace crux::switch_adapters
