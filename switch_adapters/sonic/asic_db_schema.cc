#include "crux/switch_adapters/asic_db_schema.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <exception>
#include <utility>

namespace crux::switch_adapters {
namespace {

using core::Result;
using nlohmann::json;

constexpr std::string_view kObjectIdPrefix = "oid:0x";
constexpr int kMaxParam = 255;  // sai_qos_map_params_t's fields are uint8_t.

core::Status Malformed(const std::string& what) { return core::FailedPreconditionError(what); }

// One params object ("key" or "value" of an item) at `where` ("list[3].key").
Result<QosMapParams> ParseParams(const json& j, const std::string& where) {
  if (!j.is_object()) return Malformed(where + ": not an object");
  QosMapParams p;
  const std::pair<const char*, std::optional<int> QosMapParams::*> ints[] = {
      {"tc", &QosMapParams::tc},
      {"dscp", &QosMapParams::dscp},
      {"dot1p", &QosMapParams::dot1p},
      {"prio", &QosMapParams::prio},
      {"pg", &QosMapParams::pg},
      {"qidx", &QosMapParams::qidx},
      {"mpls_exp", &QosMapParams::mpls_exp},
      {"fc", &QosMapParams::fc}};
  for (const auto& [name, member] : ints) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    if (!it->is_number_unsigned() || it->get<uint64_t>() > kMaxParam) {
      return Malformed(where + "." + name + ": " + it->dump() + " is not an integer 0.." +
                       std::to_string(kMaxParam));
    }
    p.*member = static_cast<int>(it->get<uint64_t>());
  }
  if (auto it = j.find("color"); it != j.end()) {
    if (!it->is_string()) return Malformed(where + ".color: " + it->dump() + " is not a string");
    p.color = it->get<std::string>();
  }
  return p;
}

Result<std::vector<QosMapItem>> ParseList(std::string_view text) {
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Malformed("not JSON");
  if (!doc.is_object()) return Malformed("not a JSON object");
  auto count = doc.find("count");
  if (count == doc.end()) return Malformed("no \"count\"");
  if (!count->is_number_unsigned()) return Malformed("count: " + count->dump() + " is not a count");
  auto list = doc.find("list");
  if (list == doc.end()) return Malformed("no \"list\"");
  if (list->is_null()) return Malformed("list is null (a count-only serialisation)");
  if (!list->is_array()) return Malformed("list is not an array");
  if (count->get<uint64_t>() != list->size()) {
    return Malformed("count is " + count->dump() + " but the list has " +
                     std::to_string(list->size()) + " items");
  }
  std::vector<QosMapItem> out;
  out.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const json& item = (*list)[i];
    const std::string where = "list[" + std::to_string(i) + "]";
    if (!item.is_object()) return Malformed(where + ": not an object");
    auto key = item.find("key");
    auto value = item.find("value");
    if (key == item.end()) return Malformed(where + ": no \"key\" object");
    if (value == item.end()) return Malformed(where + ": no \"value\" object");
    QosMapItem qi;
    CRUX_ASSIGN_OR_RETURN(qi.key, ParseParams(*key, where + ".key"));
    CRUX_ASSIGN_OR_RETURN(qi.value, ParseParams(*value, where + ".value"));
    out.push_back(std::move(qi));
  }
  return out;
}

}  // namespace

std::string AsicPortKey(std::string_view vid) {
  return std::string(kAsicPortPrefix) + std::string(vid);
}

std::string AsicQosMapKey(std::string_view vid) {
  return std::string(kAsicQosMapPrefix) + std::string(vid);
}

bool IsObjectId(std::string_view s) {
  if (s.substr(0, kObjectIdPrefix.size()) != kObjectIdPrefix) return false;
  const std::string_view hex = s.substr(kObjectIdPrefix.size());
  if (hex.empty() || hex.size() > 16) return false;
  for (char c : hex) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IsNullObjectId(std::string_view s) {
  if (!IsObjectId(s)) return false;
  for (char c : s.substr(kObjectIdPrefix.size())) {
    if (c != '0') return false;
  }
  return true;
}

std::string_view QosMapKindName(QosMapKind k) {
  return k == QosMapKind::kDscpToTc ? "DSCP_TO_TC" : "TC_TO_QUEUE";
}

std::string_view PortMapAttr(QosMapKind k) {
  return k == QosMapKind::kDscpToTc ? "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP"
                                    : "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP";
}

std::string_view QosMapTypeName(QosMapKind k) {
  return k == QosMapKind::kDscpToTc ? "SAI_QOS_MAP_TYPE_DSCP_TO_TC"
                                    : "SAI_QOS_MAP_TYPE_TC_TO_QUEUE";
}

Result<std::vector<QosMapItem>> ParseQosMapList(std::string_view text) {
  try {
    return ParseList(text);
  } catch (const std::exception& e) {  // Not expected (types are checked first); never escapes.
    return Malformed(std::string("cannot be read: ") + e.what());
  }
}

Result<AsicQosMap> ParseQosMapObject(const std::map<std::string, std::string>& fields,
                                     const std::string& key) {
  const std::string where = "ASIC_DB " + key + ": ";
  AsicQosMap m;
  auto type = fields.find(std::string(kQosMapTypeAttr));
  if (type == fields.end()) return Malformed(where + std::string(kQosMapTypeAttr) + " missing");
  m.type = type->second;
  auto list = fields.find(std::string(kQosMapListAttr));
  if (list == fields.end()) return Malformed(where + std::string(kQosMapListAttr) + " missing");
  Result<std::vector<QosMapItem>> items = ParseQosMapList(list->second);
  if (!items.ok()) {
    return Malformed(where + std::string(kQosMapListAttr) + ": " + items.status().message());
  }
  m.items = *std::move(items);
  return m;
}

Result<std::map<int, int>> QosMapEntries(const AsicQosMap& map, QosMapKind kind,
                                         const std::string& key) {
  const bool dscp = kind == QosMapKind::kDscpToTc;
  const char* key_field = dscp ? "dscp" : "tc";
  const char* value_field = dscp ? "tc" : "qidx";
  std::map<int, int> out;
  for (size_t i = 0; i < map.items.size(); ++i) {
    const QosMapItem& item = map.items[i];
    const std::optional<int>& k = dscp ? item.key.dscp : item.key.tc;
    const std::optional<int>& v = dscp ? item.value.tc : item.value.qidx;
    const std::string where = "ASIC_DB " + key + ": " + std::string(kQosMapListAttr) + ": list[" +
                              std::to_string(i) + "]";
    if (!k) return Malformed(where + ".key." + key_field + " missing");
    if (!v) return Malformed(where + ".value." + value_field + " missing");
    if (!out.emplace(*k, *v).second) {
      return Malformed(where + ": " + key_field + " " + std::to_string(*k) + " is listed twice");
    }
  }
  return out;
}

}  // namespace crux::switch_adapters
