#include "crux/switch_adapters/sonic_verifier.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "crux/switch_adapters/asic_db_schema.h"

namespace crux::switch_adapters {
namespace {

using core::EnforcementCheck;
using core::EnforcementStatus;
using core::Result;
using core::Status;

constexpr const char* kQueuePackets = "SAI_QUEUE_STAT_PACKETS";

RedisEndpoint WithDb(RedisEndpoint e, int db, const char* name) {
  e.db = db;
  e.name = name;
  return e;
}

}  // namespace

SonicEnforcementVerifier::SonicEnforcementVerifier(SonicVerifierOptions options)
    : options_(std::move(options)),
      asic_(WithDb(options_.endpoint, options_.asic_db, "ASIC_DB")),
      counters_(WithDb(options_.endpoint, options_.counters_db, "COUNTERS_DB")),
      judge_(options_.queues) {}

Result<std::unique_ptr<SonicEnforcementVerifier>> SonicEnforcementVerifier::Create(
    SonicVerifierOptions options) {
  if (options.ports.empty()) return core::InvalidArgumentError("sonic.ports: must not be empty");
  for (int db : {options.asic_db, options.counters_db}) {
    if (db < 0 || db > 15) return core::InvalidArgumentError("sonic: database ids must be 0-15");
  }
  CRUX_RETURN_IF_ERROR(ValidateRedisEndpoint(options.endpoint));
  CRUX_RETURN_IF_ERROR(ValidateQueueCheckOptions(options.queues));
  return std::unique_ptr<SonicEnforcementVerifier>(
      new SonicEnforcementVerifier(std::move(options)));
}

Result<SonicEnforcementVerifier::MapVerdict> SonicEnforcementVerifier::CheckMaps(
    const core::SwitchQosState& desired) {
  MapVerdict verdict;
  CRUX_RETURN_IF_ERROR(names_.EnsureFresh(counters_, options_.ports));
  const CountersNameMaps& names = names_.maps();
  std::vector<std::string> vids;
  for (const std::string& port : options_.ports) {
    auto it = names.port_oid.find(port);
    if (it == names.port_oid.end()) {
      verdict.unknown = port +
                        " is not in COUNTERS_DB COUNTERS_PORT_NAME_MAP (orchagent has "
                        "not created the port yet?)";
      return verdict;
    }
    if (!IsObjectId(it->second)) {
      return core::FailedPreconditionError("COUNTERS_DB COUNTERS_PORT_NAME_MAP " + port + ": '" +
                                           it->second + "' is not an object id");
    }
    vids.push_back(it->second);
  }

  // The ports' rows, then the map objects they name.
  std::vector<std::vector<std::string>> cmds;
  for (const std::string& vid : vids) cmds.push_back({"HGETALL", AsicPortKey(vid)});
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> port_rows, asic_.Pipeline(cmds, true));
  constexpr QosMapKind kKinds[] = {QosMapKind::kDscpToTc, QosMapKind::kTcToQueue};
  struct Binding {
    std::optional<std::string> oid;  // nullopt: nothing bound.
  };
  std::vector<std::map<QosMapKind, Binding>> bindings(options_.ports.size());
  std::set<std::string> map_oids;
  for (size_t i = 0; i < options_.ports.size(); ++i) {
    const std::string key = AsicPortKey(vids[i]);
    CRUX_RETURN_IF_ERROR(ErrorReply(port_rows[i], "ASIC_DB " + key));
    const std::map<std::string, std::string> fields = HashOf(port_rows[i]);
    if (fields.empty()) {
      verdict.unknown = options_.ports[i] + " (" + vids[i] + ") is not in ASIC_DB (no " + key +
                        "; syncd has not created the port yet?)";
      return verdict;
    }
    for (QosMapKind kind : kKinds) {
      auto attr = fields.find(std::string(PortMapAttr(kind)));
      if (attr == fields.end() || IsNullObjectId(attr->second)) continue;
      if (!IsObjectId(attr->second)) {
        return core::FailedPreconditionError("ASIC_DB " + key + " " +
                                             std::string(PortMapAttr(kind)) + ": '" + attr->second +
                                             "' is not an object id");
      }
      bindings[i][kind].oid = attr->second;
      map_oids.insert(attr->second);
    }
  }
  std::map<std::string, std::map<std::string, std::string>> map_rows;
  if (!map_oids.empty()) {
    cmds.clear();
    for (const std::string& oid : map_oids) cmds.push_back({"HGETALL", AsicQosMapKey(oid)});
    CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> rows, asic_.Pipeline(cmds, true));
    size_t k = 0;
    for (const std::string& oid : map_oids) {
      CRUX_RETURN_IF_ERROR(ErrorReply(rows[k], "ASIC_DB " + AsicQosMapKey(oid)));
      map_rows[oid] = HashOf(rows[k]);
      ++k;
    }
  }

  // Ports in order, DSCP_TO_TC before TC_TO_QUEUE: the first difference wins; a row that cannot
  // be read is reported only when no definite difference was found.
  std::optional<Status> first_error;
  for (size_t i = 0; i < options_.ports.size() && verdict.difference.empty(); ++i) {
    const std::string& port = options_.ports[i];
    AppliedPortMaps applied;
    applied.port = port;
    for (QosMapKind kind : kKinds) {
      const std::optional<std::string>& oid = bindings[i][kind].oid;
      ++verdict.maps_checked;
      if (!oid) continue;  // Not bound: FirstMapDifference says so.
      const std::string key = AsicQosMapKey(*oid);
      const std::map<std::string, std::string>& fields = map_rows[*oid];
      const std::string attr = std::string(PortMapAttr(kind));
      if (fields.empty()) {
        verdict.difference =
            port + ": " + attr + " names " + *oid + ", which is not in ASIC_DB (no " + key + ")";
        break;
      }
      Result<AsicQosMap> map = ParseQosMapObject(fields, key);
      if (!map.ok()) {
        if (!first_error) first_error = map.status();
        continue;
      }
      if (map->type != QosMapTypeName(kind)) {
        verdict.difference = port + ": " + attr + " names " + *oid + ", a " + map->type +
                             " map, not a " + std::string(QosMapTypeName(kind)) + " map";
        break;
      }
      Result<std::map<int, int>> entries = QosMapEntries(*map, kind, key);
      if (!entries.ok()) {
        if (!first_error) first_error = entries.status();
        continue;
      }
      (kind == QosMapKind::kDscpToTc ? applied.dscp_to_tc : applied.tc_to_queue) =
          *std::move(entries);
      (kind == QosMapKind::kDscpToTc ? applied.dscp_to_tc_object : applied.tc_to_queue_object) =
          "ASIC_DB " + *oid;
    }
    if (!verdict.difference.empty()) break;
    // A map that could not be read is not compared (its error is reported below).
    if (bindings[i][QosMapKind::kDscpToTc].oid && !applied.dscp_to_tc) {
      applied.dscp_to_tc = desired.dscp_to_tc;
      --verdict.maps_checked;
    }
    if (bindings[i][QosMapKind::kTcToQueue].oid && !applied.tc_to_queue) {
      applied.tc_to_queue = desired.tc_to_queue;
      --verdict.maps_checked;
    }
    verdict.difference = FirstMapDifference(desired, applied);
  }
  if (verdict.difference.empty() && first_error) return *first_error;
  return verdict;
}

Result<std::vector<QueueCounterReading>> SonicEnforcementVerifier::ReadQueueCounters() {
  const CountersNameMaps& names = names_.maps();
  std::vector<std::vector<std::string>> cmds;
  struct Slot {
    size_t reading;
    int index;
    std::string key;
  };
  std::vector<Slot> slots;
  std::vector<QueueCounterReading> out;
  for (const std::string& port : options_.ports) {
    auto q = names.queues.find(port);
    if (q == names.queues.end()) continue;
    QueueCounterReading r;
    r.port = port;
    out.push_back(std::move(r));
    for (const CounterQueue& queue : q->second) {
      if (!queue.Unicast()) continue;  // Multicast queues: the TC_TO_QUEUE map does not steer.
      cmds.push_back({"HGET", "COUNTERS:" + queue.oid, kQueuePackets});
      slots.push_back({out.size() - 1, queue.Index(), "COUNTERS:" + queue.oid});
    }
  }
  if (cmds.empty()) return out;
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> replies, counters_.Pipeline(cmds, true));
  for (size_t k = 0; k < slots.size(); ++k) {
    CRUX_RETURN_IF_ERROR(ErrorReply(replies[k], "COUNTERS_DB " + slots[k].key));
    if (replies[k].type == RedisReply::Type::kNil) continue;  // Not counted yet.
    CRUX_ASSIGN_OR_RETURN(uint64_t packets, ParseCounter(replies[k], slots[k].key, kQueuePackets));
    out[slots[k].reading].packets[slots[k].index] += packets;  // Same index twice: one queue.
  }
  return out;
}

Result<EnforcementCheck> SonicEnforcementVerifier::Verify(const EnforcementPlan& plan,
                                                          core::Duration now) {
  EnforcementCheck check;
  CRUX_ASSIGN_OR_RETURN(MapVerdict maps, CheckMaps(plan.state));
  check.maps_checked = maps.maps_checked;
  if (!maps.unknown.empty()) {
    check.detail = maps.unknown;
    return check;
  }
  if (!maps.difference.empty()) {
    check.status = EnforcementStatus::kMismatch;
    check.detail = maps.difference;
    return check;
  }
  Result<std::vector<QueueCounterReading>> readings = ReadQueueCounters();
  if (!readings.ok()) {
    if (readings.status().code() != core::StatusCode::kFailedPrecondition) {
      return readings.status();
    }
    check.detail =
        "the maps match, but the queue counters cannot be judged: " + readings.status().message();
    return check;
  }
  const QueueTrafficJudge::Verdict traffic = judge_.Observe(plan, *readings, now);
  check.queues_checked = traffic.queues_checked;
  if (!traffic.difference.empty()) {
    check.status = EnforcementStatus::kMismatch;
    check.detail = traffic.difference;
  } else {
    check.status = EnforcementStatus::kMatch;
  }
  return check;
}

}  // namespace crux::switch_adapters
