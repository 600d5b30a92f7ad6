#include "crux/switch_adapters/state_json.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace crux::switch_adapters {
namespace {

using core::InvalidArgumentError;
using core::Result;
using core::Status;
using core::SwitchQosState;
using nlohmann::json;

json IntMap(const std::map<int, int>& m) {
  json o = json::object();
  for (const auto& [k, v] : m) o[std::to_string(k)] = v;
  return o;
}

// Reads {"<int>": int} into `out`; errors name `key`.
Status ReadIntMap(const json& j, const std::string& key, std::map<int, int>& out) {
  if (!j.is_object()) return InvalidArgumentError(key + ": must be an object");
  for (const auto& [k, v] : j.items()) {
    size_t pos = 0;
    int ik = 0;
    try {
      ik = std::stoi(k, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos == 0 || pos != k.size()) {
      return InvalidArgumentError(key + ": key '" + k + "' is not an integer");
    }
    if (!v.is_number_integer()) {
      return InvalidArgumentError(key + "[" + k + "]: must be an integer");
    }
    out[ik] = v.get<int>();
  }
  return Status::Ok();
}

}  // namespace

std::string StateToJson(const SwitchQosState& s) {
  json j = json::object();
  j["switch"] = s.switch_name;
  j["dscp_to_tc"] = IntMap(s.dscp_to_tc);
  j["tc_to_queue"] = IntMap(s.tc_to_queue);
  json sch = json::array();
  for (const core::QueueScheduler& q : s.schedulers) {
    json e = {{"queue", q.queue}, {"type", std::string(core::SchedulerTypeName(q.type))}};
    if (q.type == core::SchedulerType::kDwrr) e["weight"] = q.weight;
    sch.push_back(std::move(e));
  }
  j["schedulers"] = std::move(sch);
  j["pfc_enable"] = s.pfc_enable;
  j["jobs"] = s.jobs;
  return j.dump(2) + "\n";
}

Result<SwitchQosState> StateFromJson(std::string_view text, std::string_view source) {
  const std::string src(source);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgumentError(src + ": not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& msg) { return InvalidArgumentError(src + ": " + msg); };
  if (!j.is_object()) return fail("top level must be an object");
  static const std::set<std::string> kKnown = {"switch",     "dscp_to_tc", "tc_to_queue",
                                               "schedulers", "pfc_enable", "jobs"};
  for (const auto& [k, v] : j.items()) {
    if (!kKnown.count(k)) return fail("unknown key '" + k + "'");
  }
  SwitchQosState s;
  if (!j.contains("switch") || !j["switch"].is_string()) return fail("switch: must be a string");
  s.switch_name = j["switch"].get<std::string>();
  if (j.contains("dscp_to_tc")) {
    Status st = ReadIntMap(j["dscp_to_tc"], "dscp_to_tc", s.dscp_to_tc);
    if (!st.ok()) return st.WithContext(src);
  }
  if (j.contains("tc_to_queue")) {
    Status st = ReadIntMap(j["tc_to_queue"], "tc_to_queue", s.tc_to_queue);
    if (!st.ok()) return st.WithContext(src);
  }
  if (j.contains("schedulers")) {
    if (!j["schedulers"].is_array()) return fail("schedulers: must be an array");
    for (size_t i = 0; i < j["schedulers"].size(); ++i) {
      const json& e = j["schedulers"][i];
      const std::string key = "schedulers[" + std::to_string(i) + "]";
      if (!e.is_object()) return fail(key + ": must be an object");
      for (const auto& [k, v] : e.items()) {
        if (k != "queue" && k != "type" && k != "weight") {
          return fail(key + ": unknown key '" + k + "'");
        }
      }
      core::QueueScheduler q;
      if (!e.contains("queue") || !e["queue"].is_number_integer()) {
        return fail(key + ".queue: must be an integer");
      }
      q.queue = e["queue"].get<int>();
      if (!e.contains("type") || !e["type"].is_string())
        return fail(key + ".type: must be a string");
      auto type = core::ParseSchedulerType(e["type"].get<std::string>());
      if (!type.ok()) return fail(key + ".type: " + type.status().message());
      q.type = *type;
      if (e.contains("weight")) {
        if (!e["weight"].is_number_integer()) return fail(key + ".weight: must be an integer");
        q.weight = e["weight"].get<int>();
      }
      s.schedulers.push_back(q);
    }
  }
  if (j.contains("pfc_enable")) {
    const json& p = j["pfc_enable"];
    if (!p.is_array()) return fail("pfc_enable: must be an array");
    for (size_t i = 0; i < p.size(); ++i) {
      if (!p[i].is_number_integer()) {
        return fail("pfc_enable[" + std::to_string(i) + "]: must be an integer");
      }
      s.pfc_enable.push_back(p[i].get<int>());
    }
  }
  if (j.contains("jobs")) {
    const json& p = j["jobs"];
    if (!p.is_array()) return fail("jobs: must be an array");
    for (size_t i = 0; i < p.size(); ++i) {
      if (!p[i].is_string()) return fail("jobs[" + std::to_string(i) + "]: must be a string");
      s.jobs.push_back(p[i].get<std::string>());
    }
  }
  Status v = core::ValidateSwitchQosState(s);
  if (!v.ok()) return v.WithContext(src);
  return s;
}

std::vector<std::string> DescribeDifferences(const SwitchQosState& from, const SwitchQosState& to) {
  std::vector<std::string> out;
  if (from.switch_name != to.switch_name) {
    out.push_back("switch: " + from.switch_name + " -> " + to.switch_name);
  }
  auto maps = [&](const char* name, const std::map<int, int>& a, const std::map<int, int>& b) {
    std::set<int> keys;
    for (const auto& [k, v] : a) keys.insert(k);
    for (const auto& [k, v] : b) keys.insert(k);
    for (int k : keys) {
      auto ia = a.find(k);
      auto ib = b.find(k);
      std::string prefix = std::string(name) + "[" + std::to_string(k) + "]: ";
      if (ia == a.end()) {
        out.push_back(prefix + "added " + std::to_string(ib->second));
      } else if (ib == b.end()) {
        out.push_back(prefix + "removed");
      } else if (ia->second != ib->second) {
        out.push_back(prefix + std::to_string(ia->second) + " -> " + std::to_string(ib->second));
      }
    }
  };
  maps("dscp_to_tc", from.dscp_to_tc, to.dscp_to_tc);
  maps("tc_to_queue", from.tc_to_queue, to.tc_to_queue);
  auto describe = [](const core::QueueScheduler& q) {
    std::string s(core::SchedulerTypeName(q.type));
    if (q.type == core::SchedulerType::kDwrr) s += " weight " + std::to_string(q.weight);
    return s;
  };
  std::map<int, core::QueueScheduler> sa, sb;
  for (const auto& q : from.schedulers) sa[q.queue] = q;
  for (const auto& q : to.schedulers) sb[q.queue] = q;
  std::set<int> queues;
  for (const auto& [q, s] : sa) queues.insert(q);
  for (const auto& [q, s] : sb) queues.insert(q);
  for (int q : queues) {
    std::string prefix = "schedulers[q" + std::to_string(q) + "]: ";
    auto ia = sa.find(q);
    auto ib = sb.find(q);
    if (ia == sa.end()) {
      out.push_back(prefix + "added " + describe(ib->second));
    } else if (ib == sb.end()) {
      out.push_back(prefix + "removed");
    } else if (!(ia->second == ib->second)) {
      out.push_back(prefix + describe(ia->second) + " -> " + describe(ib->second));
    }
  }
  if (from.pfc_enable != to.pfc_enable) {
    auto list = [](const std::vector<int>& v) {
      std::string s;
      for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
      return "[" + s + "]";
    };
    out.push_back("pfc_enable: " + list(from.pfc_enable) + " -> " + list(to.pfc_enable));
  }
  return out;
}

}  // namespace crux::switch_adapters
