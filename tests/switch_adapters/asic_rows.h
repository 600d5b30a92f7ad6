// ASIC_DB rows shaped as SONiC writes them, for the enforcement tests (issue #29). Independent of
// the parser under test (crux/switch_adapters/asic_db_schema.h): built with nlohmann::json the way
// sonic-sairedis's sai_serialize_qos_map_list does (meta/SaiSerialize.cpp: one object per item
// with "key" and "value" params objects holding tc, dscp, dot1p, prio, pg, qidx, mpls_exp, color,
// fc; json::dump sorts the keys), from the entries qosorch's handlers put in (DSCP_TO_TC:
// key.dscp -> value.tc; TC_TO_QUEUE: key.tc -> value.qidx; every other field 0, colour GREEN).
#ifndef CRUX_TESTS_SWITCH_ADAPTERS_ASIC_ROWS_H_
#define CRUX_TESTS_SWITCH_ADAPTERS_ASIC_ROWS_H_

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace crux::switch_adapters::testing {

// One sai_qos_map_params_t as serialised, every field 0 and GREEN but the ones given.
inline nlohmann::json QosParams(const std::map<std::string, int>& set) {
  nlohmann::json j = {{"color", "SAI_PACKET_COLOR_GREEN"},
                      {"dot1p", 0},
                      {"dscp", 0},
                      {"fc", 0},
                      {"mpls_exp", 0},
                      {"pg", 0},
                      {"prio", 0},
                      {"qidx", 0},
                      {"tc", 0}};
  for (const auto& [k, v] : set) j[k] = v;
  return j;
}

// SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST of a map from `key_field` to `value_field` ("dscp" -> "tc"
// for DSCP_TO_TC, "tc" -> "qidx" for TC_TO_QUEUE).
inline std::string QosMapList(const std::string& key_field, const std::string& value_field,
                              const std::map<int, int>& entries) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [k, v] : entries) {
    list.push_back(
        {{"key", QosParams({{key_field, k}})}, {"value", QosParams({{value_field, v}})}});
  }
  return nlohmann::json{{"count", entries.size()}, {"list", list}}.dump();
}

inline std::string DscpToTcList(const std::map<int, int>& m) { return QosMapList("dscp", "tc", m); }
inline std::string TcToQueueList(const std::map<int, int>& m) {
  return QosMapList("tc", "qidx", m);
}

}  // namespace crux::switch_adapters::testing

#endif  // CRUX_TESTS_SWITCH_ADAPTERS_ASIC_ROWS_H_
