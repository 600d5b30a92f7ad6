// AsicDbSchema: the pure reading of the QoS rows SONiC keeps in ASIC_DB (Redis db 1), for the
// enforcement check (issue #29, sonic_verifier.h). No I/O: the verifier reads the rows through its
// Redis session and asks this module what they say.
//
// The rows, as sonic-sairedis writes them (syncd's view of what orchagent created; keys are the
// objects' virtual ids, VIDs, the same ids COUNTERS_DB uses, so no VIDTORID/RIDTOVID lookup):
//
//   ASIC_STATE:SAI_OBJECT_TYPE_PORT:<port vid>
//       SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP    "oid:0x1400000000061f"  (set by orchagent's qosorch
//       SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP   "oid:0x14000000000624"   for PORT_QOS_MAP|<port>;
//                                                                     "oid:0x0" or absent: none)
//   ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:<map vid>
//       SAI_QOS_MAP_ATTR_TYPE               "SAI_QOS_MAP_TYPE_DSCP_TO_TC" | "..._TC_TO_QUEUE" | ...
//       SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST  sai_serialize_qos_map_list (meta/SaiSerialize.cpp):
//           {"count":2,"list":[{"key":{"color":"SAI_PACKET_COLOR_GREEN","dot1p":0,"dscp":10,
//             "fc":0,"mpls_exp":0,"pg":0,"prio":0,"qidx":0,"tc":0},"value":{...,"tc":5}},...]}
//           (nlohmann::json::dump: keys sorted; older images lack "fc" and "mpls_exp")
//
// qosorch (sonic-swss orchagent/qosorch.cpp) creates one QOS_MAP object per CONFIG_DB map
// (DSCP_TO_TC_MAP|CRUX -> key.dscp -> value.tc; TC_TO_QUEUE_MAP|CRUX -> key.tc ->
// value.qidx), updates its list in place when the CONFIG_DB map changes, and binds it to each port
// of PORT_QOS_MAP|<port> through the port attributes above.
//
// Thread-safety: pure functions.
#ifndef CRUX_SWITCH_ADAPTERS_ASIC_DB_SCHEMA_H_
#define CRUX_SWITCH_ADAPTERS_ASIC_DB_SCHEMA_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::switch_adapters {

inline constexpr std::string_view kAsicPortPrefix = "ASIC_STATE:SAI_OBJECT_TYPE_PORT:";
inline constexpr std::string_view kAsicQosMapPrefix = "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:";
inline constexpr std::string_view kQosMapTypeAttr = "SAI_QOS_MAP_ATTR_TYPE";
inline constexpr std::string_view kQosMapListAttr = "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST";

// "ASIC_STATE:SAI_OBJECT_TYPE_PORT:<vid>", "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:<vid>".
std::string AsicPortKey(std::string_view vid);
std::string AsicQosMapKey(std::string_view vid);

// An object id as sairedis serialises it: "oid:0x" and 1-16 lower- or upper-case hex digits.
bool IsObjectId(std::string_view s);
// "oid:0x0": no object (SAI_NULL_OBJECT_ID).
bool IsNullObjectId(std::string_view s);

// The two maps Crux writes and how a port binds them.
enum class QosMapKind { kDscpToTc, kTcToQueue };
std::string_view QosMapKindName(QosMapKind k);  // "DSCP_TO_TC", "TC_TO_QUEUE".
std::string_view PortMapAttr(QosMapKind k);     // "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP", ...
std::string_view QosMapTypeName(QosMapKind k);  // "SAI_QOS_MAP_TYPE_DSCP_TO_TC", ...

// sai_qos_map_params_t as serialised; a field the row does not carry is nullopt.
struct QosMapParams {
  std::optional<int> tc, dscp, dot1p, prio, pg, qidx, mpls_exp, fc;  // 0..255 each.
  std::optional<std::string> color;                                  // "SAI_PACKET_COLOR_GREEN".

  friend bool operator==(const QosMapParams&, const QosMapParams&) = default;
};
struct QosMapItem {
  QosMapParams key;
  QosMapParams value;

  friend bool operator==(const QosMapItem&, const QosMapItem&) = default;
};

// Parses SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST. Errors are kFailedPrecondition naming what is wrong
// and where: "not JSON (...)", "count is 3 but the list has 2 items", "list is null (a count-only
// serialisation)", "list[4].key.dscp: 300 is not an integer 0..255", "list[0]: no \"value\"
// object". Never throws.
core::Result<std::vector<QosMapItem>> ParseQosMapList(std::string_view text);

// A QOS_MAP object's fields (HGETALL), parsed.
struct AsicQosMap {
  std::string type;  // SAI_QOS_MAP_ATTR_TYPE, e.g. "SAI_QOS_MAP_TYPE_DSCP_TO_TC".
  std::vector<QosMapItem> items;

  friend bool operator==(const AsicQosMap&, const AsicQosMap&) = default;
};
// Errors (kFailedPrecondition) name `key` and the field: "ASIC_DB <key>: SAI_QOS_MAP_ATTR_TYPE
// missing", "ASIC_DB <key>: SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST: list[2].key.dscp: ...".
core::Result<AsicQosMap> ParseQosMapObject(const std::map<std::string, std::string>& fields,
                                           const std::string& key);

// The entries of a parsed map read as `kind` (DSCP_TO_TC: key.dscp -> value.tc; TC_TO_QUEUE:
// key.tc -> value.qidx). Errors (kFailedPrecondition, naming `key`): an item without the fields
// the kind needs, a key listed twice. The map's type is not checked here (see AsicQosMap::type).
core::Result<std::map<int, int>> QosMapEntries(const AsicQosMap& map, QosMapKind kind,
                                               const std::string& key);

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_ASIC_DB_SCHEMA_H_
