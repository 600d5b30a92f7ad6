#include "crux/switch_adapters/config_db_schema.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

namespace crux::switch_adapters {
namespace {

using core::Result;
using core::Status;
using core::SwitchQosState;

constexpr char kDscpTable[] = "DSCP_TO_TC_MAP";
constexpr char kTcTable[] = "TC_TO_QUEUE_MAP";
constexpr char kSchedulerTable[] = "SCHEDULER";
constexpr char kQueueTable[] = "QUEUE";
constexpr char kPortQosTable[] = "PORT_QOS_MAP";

std::string RedisKey(const std::string& table, const std::string& key) { return table + "|" + key; }

Result<int> ParseInt(const std::string& s, const std::string& where) {
  int v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end) {
    return core::FailedPreconditionError(where + ": '" + s + "' is not an integer");
  }
  return v;
}

std::string JoinInts(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// RFC 6901 escaping of one reference token.
std::string PointerToken(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

const ConfigDbFields* Find(const ConfigDbSnapshot& snap, const std::string& redis_key) {
  auto it = snap.find(redis_key);
  return it == snap.end() || it->second.empty() ? nullptr : &it->second;
}

}  // namespace

Status ValidateConfigDbLayout(const ConfigDbLayout& l) {
  if (l.ports.empty()) return core::InvalidArgumentError("sonic.ports: must not be empty");
  for (size_t i = 0; i < l.ports.size(); ++i) {
    const std::string& p = l.ports[i];
    if (p.empty() || p.find('|') != std::string::npos || p.find(',') != std::string::npos) {
      return core::InvalidArgumentError("sonic.ports[" + std::to_string(i) + "]: bad port name '" +
                                        p + "'");
    }
    if (std::find(l.ports.begin(), l.ports.begin() + static_cast<std::ptrdiff_t>(i), p) !=
        l.ports.begin() + static_cast<std::ptrdiff_t>(i)) {
      return core::InvalidArgumentError("sonic.ports[" + std::to_string(i) + "]: '" + p +
                                        "' given twice");
    }
  }
  if (l.profile.empty() || l.profile.find('|') != std::string::npos) {
    return core::InvalidArgumentError("sonic.profile: must be non-empty without '|'");
  }
  if (l.scheduler_prefix.rfind("crux_", 0) != 0 ||
      l.scheduler_prefix.find('|') != std::string::npos) {
    return core::InvalidArgumentError("sonic.scheduler_prefix: must start with 'crux_' (got '" +
                                      l.scheduler_prefix + "')");
  }
  return Status::Ok();
}

std::string ConfigDbChange::ToString() const {
  switch (kind) {
    case Kind::kSet:
      return "HSET " + RedisKey() + " " + field + " " + value;
    case Kind::kDeleteField:
      return "HDEL " + RedisKey() + " " + field;
    case Kind::kDeleteKey:
      return "DEL " + RedisKey();
  }
  return "?";
}

ConfigDbSchema::ConfigDbSchema(ConfigDbLayout layout) : layout_(std::move(layout)) {
  keys_.push_back(RedisKey(kDscpTable, layout_.profile));
  keys_.push_back(RedisKey(kTcTable, layout_.profile));
  for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
    keys_.push_back(RedisKey(kSchedulerTable, layout_.scheduler_prefix + std::to_string(q)));
  }
  for (const std::string& p : layout_.ports) {
    for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
      keys_.push_back(RedisKey(kQueueTable, p + "|" + std::to_string(q)));
    }
    keys_.push_back(RedisKey(kPortQosTable, p));
  }
}

std::vector<ConfigDbChange> ConfigDbSchema::Diff(const ConfigDbSnapshot& cur,
                                                 const SwitchQosState& desired) const {
  using Kind = ConfigDbChange::Kind;
  std::vector<ConfigDbChange> creates;   // Maps and schedulers (referenced objects first).
  std::vector<ConfigDbChange> attaches;  // QUEUE / PORT_QOS_MAP fields.
  std::vector<ConfigDbChange> detaches;  // QUEUE fields no longer used.
  std::vector<ConfigDbChange> removals;  // Owned map fields and scheduler keys.

  // A key wholly owned by Crux: make it exactly `want` (absent when `want` is null).
  auto owned = [&](const std::string& table, const std::string& key, const ConfigDbFields* want) {
    const ConfigDbFields* have = Find(cur, RedisKey(table, key));
    if (want == nullptr) {
      if (have != nullptr) removals.push_back({Kind::kDeleteKey, table, key, "", "", true});
      return;
    }
    for (const auto& [f, v] : *want) {
      const std::string* old = nullptr;
      if (have != nullptr) {
        auto it = have->find(f);
        if (it != have->end()) old = &it->second;
      }
      if (old == nullptr || *old != v) {
        creates.push_back({Kind::kSet, table, key, f, v, have != nullptr});
      }
    }
    if (have != nullptr) {
      for (const auto& [f, v] : *have) {
        if (!want->count(f)) removals.push_back({Kind::kDeleteField, table, key, f, "", true});
      }
    }
  };

  ConfigDbFields dscp;
  for (const auto& [d, tc] : desired.dscp_to_tc) dscp[std::to_string(d)] = std::to_string(tc);
  owned(kDscpTable, layout_.profile, &dscp);
  ConfigDbFields tcq;
  for (const auto& [tc, q] : desired.tc_to_queue) tcq[std::to_string(tc)] = std::to_string(q);
  owned(kTcTable, layout_.profile, &tcq);

  std::map<int, const core::QueueScheduler*> by_queue;
  for (const core::QueueScheduler& s : desired.schedulers) by_queue[s.queue] = &s;
  for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
    const std::string name = layout_.scheduler_prefix + std::to_string(q);
    auto it = by_queue.find(q);
    if (it == by_queue.end()) {
      owned(kSchedulerTable, name, nullptr);
      continue;
    }
    ConfigDbFields f{{"type", std::string(core::SchedulerTypeName(it->second->type))}};
    if (it->second->type == core::SchedulerType::kDwrr) {
      f["weight"] = std::to_string(it->second->weight);
    }
    owned(kSchedulerTable, name, &f);
  }

  // Shared keys: only the fields Crux sets.
  auto shared_set = [&](const std::string& table, const std::string& key, const std::string& f,
                        const std::string& v) {
    const ConfigDbFields* have = Find(cur, RedisKey(table, key));
    const std::string* old = nullptr;
    if (have != nullptr) {
      auto it = have->find(f);
      if (it != have->end()) old = &it->second;
    }
    if (old == nullptr || *old != v) {
      attaches.push_back({Kind::kSet, table, key, f, v, have != nullptr});
    }
  };
  const std::string pfc = JoinInts(desired.pfc_enable);
  for (const std::string& port : layout_.ports) {
    for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
      const std::string key = port + "|" + std::to_string(q);
      if (by_queue.count(q)) {
        shared_set(kQueueTable, key, "scheduler", layout_.scheduler_prefix + std::to_string(q));
        continue;
      }
      const ConfigDbFields* have = Find(cur, RedisKey(kQueueTable, key));
      if (have == nullptr) continue;
      auto it = have->find("scheduler");
      if (it != have->end() && it->second.rfind(layout_.scheduler_prefix, 0) == 0) {
        detaches.push_back({Kind::kDeleteField, kQueueTable, key, "scheduler", "", true});
      }
    }
    shared_set(kPortQosTable, port, "dscp_to_tc_map", layout_.profile);
    shared_set(kPortQosTable, port, "tc_to_queue_map", layout_.profile);
    if (layout_.manage_pfc && !pfc.empty()) shared_set(kPortQosTable, port, "pfc_enable", pfc);
  }

  std::vector<ConfigDbChange> out;
  for (auto* v : {&creates, &attaches, &detaches, &removals}) {
    out.insert(out.end(), std::make_move_iterator(v->begin()), std::make_move_iterator(v->end()));
  }
  return out;
}

Result<SwitchQosState> ConfigDbSchema::Reconstruct(const ConfigDbSnapshot& snap,
                                                   const std::string& switch_name) const {
  const std::string dscp_key = RedisKey(kDscpTable, layout_.profile);
  const ConfigDbFields* dscp = Find(snap, dscp_key);
  if (dscp == nullptr) {
    return core::NotFoundError(dscp_key + " does not exist (nothing applied yet)");
  }
  SwitchQosState s;
  s.switch_name = switch_name;
  for (const auto& [f, v] : *dscp) {
    const std::string where = dscp_key + "[" + f + "]";
    CRUX_ASSIGN_OR_RETURN(int d, ParseInt(f, where));
    CRUX_ASSIGN_OR_RETURN(int tc, ParseInt(v, where));
    s.dscp_to_tc[d] = tc;
  }
  const std::string tc_key = RedisKey(kTcTable, layout_.profile);
  if (const ConfigDbFields* tcq = Find(snap, tc_key)) {
    for (const auto& [f, v] : *tcq) {
      const std::string where = tc_key + "[" + f + "]";
      CRUX_ASSIGN_OR_RETURN(int tc, ParseInt(f, where));
      CRUX_ASSIGN_OR_RETURN(int q, ParseInt(v, where));
      s.tc_to_queue[tc] = q;
    }
  }
  const std::string& port = layout_.ports.front();
  for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
    const std::string queue_key = RedisKey(kQueueTable, port + "|" + std::to_string(q));
    const ConfigDbFields* queue = Find(snap, queue_key);
    if (queue == nullptr) continue;
    auto it = queue->find("scheduler");
    if (it == queue->end() || it->second.rfind(layout_.scheduler_prefix, 0) != 0) continue;
    const std::string sk = RedisKey(kSchedulerTable, it->second);
    const ConfigDbFields* sch = Find(snap, sk);
    if (sch == nullptr) {
      return core::FailedPreconditionError(queue_key + ".scheduler: names missing scheduler " +
                                           it->second);
    }
    core::QueueScheduler qs;
    qs.queue = q;
    auto type = sch->find("type");
    if (type == sch->end()) return core::FailedPreconditionError(sk + ": no type");
    auto parsed = core::ParseSchedulerType(type->second);
    if (!parsed.ok()) {
      return core::FailedPreconditionError(sk + ".type: " + parsed.status().message());
    }
    qs.type = *parsed;
    if (auto w = sch->find("weight"); w != sch->end() && qs.type == core::SchedulerType::kDwrr) {
      CRUX_ASSIGN_OR_RETURN(qs.weight, ParseInt(w->second, sk + ".weight"));
    }
    s.schedulers.push_back(qs);
  }
  if (layout_.manage_pfc) {
    if (const ConfigDbFields* pqm = Find(snap, RedisKey(kPortQosTable, port))) {
      auto it = pqm->find("pfc_enable");
      if (it != pqm->end() && !it->second.empty()) {
        const std::string where = std::string(kPortQosTable) + "|" + port + ".pfc_enable";
        std::string item;
        for (size_t i = 0; i <= it->second.size(); ++i) {
          if (i == it->second.size() || it->second[i] == ',') {
            CRUX_ASSIGN_OR_RETURN(int tc, ParseInt(item, where));
            s.pfc_enable.push_back(tc);
            item.clear();
          } else {
            item += it->second[i];
          }
        }
        std::sort(s.pfc_enable.begin(), s.pfc_enable.end());
      }
    }
  }
  return s;
}

std::vector<std::vector<std::string>> ConfigDbSchema::Commands(
    const std::vector<ConfigDbChange>& changes) {
  using Kind = ConfigDbChange::Kind;
  std::vector<std::vector<std::string>> commands;
  for (size_t i = 0; i < changes.size();) {
    const ConfigDbChange& c = changes[i];
    if (c.kind == Kind::kSet) {
      std::vector<std::string> cmd{"HSET", c.RedisKey()};
      size_t j = i;
      for (; j < changes.size() && changes[j].kind == Kind::kSet && changes[j].table == c.table &&
             changes[j].key == c.key;
           ++j) {
        cmd.push_back(changes[j].field);
        cmd.push_back(changes[j].value);
      }
      commands.push_back(std::move(cmd));
      i = j;
    } else if (c.kind == Kind::kDeleteField) {
      commands.push_back({"HDEL", c.RedisKey(), c.field});
      ++i;
    } else {
      commands.push_back({"DEL", c.RedisKey()});
      ++i;
    }
  }
  return commands;
}

void ConfigDbSchema::ApplyChanges(const std::vector<ConfigDbChange>& changes,
                                  ConfigDbSnapshot& snapshot) {
  for (const ConfigDbChange& c : changes) {
    const std::string k = c.RedisKey();
    switch (c.kind) {
      case ConfigDbChange::Kind::kSet:
        snapshot[k][c.field] = c.value;
        break;
      case ConfigDbChange::Kind::kDeleteField:
        if (auto it = snapshot.find(k); it != snapshot.end()) {
          it->second.erase(c.field);
          if (it->second.empty()) snapshot.erase(it);
        }
        break;
      case ConfigDbChange::Kind::kDeleteKey:
        snapshot.erase(k);
        break;
    }
  }
}

std::set<std::string> ConfigDbSchema::TablesGettingNewKeys(
    const std::vector<ConfigDbChange>& changes) {
  std::set<std::string> out;
  for (const ConfigDbChange& c : changes) {
    if (c.kind == ConfigDbChange::Kind::kSet && !c.key_existed) out.insert(c.table);
  }
  return out;
}

std::string ConfigDbSchema::ApplyPatchJson(const std::vector<ConfigDbChange>& changes,
                                           const std::set<std::string>& existing_tables) {
  using nlohmann::json;
  json patch = json::array();
  std::map<std::string, json> new_tables;  // table -> {key: {field: value}}.
  std::map<std::pair<std::string, std::string>, json> new_keys;
  std::vector<std::pair<std::string, std::string>> new_key_order;
  for (const ConfigDbChange& c : changes) {
    const std::string key_path = "/" + PointerToken(c.table) + "/" + PointerToken(c.key);
    switch (c.kind) {
      case ConfigDbChange::Kind::kSet:
        if (c.key_existed) {
          patch.push_back({{"op", "add"},
                           {"path", key_path + "/" + PointerToken(c.field)},
                           {"value", c.value}});
        } else if (!existing_tables.count(c.table)) {
          new_tables[c.table][c.key][c.field] = c.value;
        } else {
          auto k = std::make_pair(c.table, c.key);
          if (!new_keys.count(k)) new_key_order.push_back(k);
          new_keys[k][c.field] = c.value;
        }
        break;
      case ConfigDbChange::Kind::kDeleteField:
        patch.push_back({{"op", "remove"}, {"path", key_path + "/" + PointerToken(c.field)}});
        break;
      case ConfigDbChange::Kind::kDeleteKey:
        patch.push_back({{"op", "remove"}, {"path", key_path}});
        break;
    }
  }
  // New objects first, so later field operations can refer to them.
  json head = json::array();
  for (auto& [table, value] : new_tables) {
    head.push_back({{"op", "add"}, {"path", "/" + PointerToken(table)}, {"value", value}});
  }
  for (const auto& k : new_key_order) {
    head.push_back({{"op", "add"},
                    {"path", "/" + PointerToken(k.first) + "/" + PointerToken(k.second)},
                    {"value", new_keys[k]}});
  }
  for (auto& op : patch) head.push_back(std::move(op));
  return head.dump(2) + "\n";
}

}  // namespace crux::switch_adapters
