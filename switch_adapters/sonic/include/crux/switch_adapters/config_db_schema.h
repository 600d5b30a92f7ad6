// ConfigDbSchema: the pure mapping between a switch's desired QoS state and SONiC CONFIG_DB hash
// fields. No I/O, no Redis: the sonic backend reads a snapshot through its Redis session
// (redis_session.h), asks this module what to change, and sends the commands it returns.
//
// What Crux writes (names with the default layout; `profile` = "CRUX", `scheduler_prefix` =
// "crux_q"):
//   DSCP_TO_TC_MAP|CRUX        "<dscp>" -> "<tc>"          (owned: the whole key)
//   TC_TO_QUEUE_MAP|CRUX       "<tc>" -> "<queue>"         (owned: the whole key)
//   SCHEDULER|crux_q<q>        type STRICT|DWRR, weight    (owned: every key with the prefix)
//   QUEUE|<port>|<q>           scheduler = crux_q<q>       (shared key: only that field, and
//                                                           only while it names a crux_ scheduler)
//   PORT_QOS_MAP|<port>        dscp_to_tc_map, tc_to_queue_map = CRUX; pfc_enable = "2,3,4"
//                              when `manage_pfc` and the state has lossless TCs (shared key:
//                              only those fields; pfc_enable is never deleted, only replaced)
// Everything else (other profiles such as AZURE, other schedulers, wred_profile, tc_to_pg_map,
// BUFFER_*, ...) is never written or deleted.
//
// Thread-safety: immutable after construction; all methods are const and pure.
#ifndef CRUX_SWITCH_ADAPTERS_CONFIG_DB_SCHEMA_H_
#define CRUX_SWITCH_ADAPTERS_CONFIG_DB_SCHEMA_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/control/qos.h"

namespace crux::switch_adapters {

// Which keys and fields Crux owns on one switch.
struct ConfigDbLayout {
  std::vector<std::string> ports;           // Ports to program ("Ethernet0", ...); non-empty.
  std::string profile = "CRUX";             // DSCP_TO_TC_MAP / TC_TO_QUEUE_MAP key.
  std::string scheduler_prefix = "crux_q";  // Must start with "crux_".
  bool manage_pfc = true;                   // Write pfc_enable (see the file comment).

  friend bool operator==(const ConfigDbLayout&, const ConfigDbLayout&) = default;
};

// Errors name the field ("sonic.ports: must not be empty").
core::Status ValidateConfigDbLayout(const ConfigDbLayout& layout);

// The fields of one Redis hash.
using ConfigDbFields = std::map<std::string, std::string>;
// Redis key ("TABLE|key") -> fields. A key absent from CONFIG_DB is absent here (HGETALL of a
// missing key is empty, so an empty hash and a missing key are the same thing).
using ConfigDbSnapshot = std::map<std::string, ConfigDbFields>;

// One field change of CONFIG_DB.
struct ConfigDbChange {
  enum class Kind { kSet, kDeleteField, kDeleteKey };
  Kind kind = Kind::kSet;
  std::string table;         // "DSCP_TO_TC_MAP".
  std::string key;           // "CRUX", "Ethernet0|3".
  std::string field;         // Empty for kDeleteKey.
  std::string value;         // kSet only.
  bool key_existed = false;  // The key existed before the change.

  std::string RedisKey() const { return table + "|" + key; }
  // "HSET DSCP_TO_TC_MAP|CRUX 10 5", "HDEL QUEUE|Ethernet0|2 scheduler", "DEL SCHEDULER|crux_q7".
  std::string ToString() const;
  friend bool operator==(const ConfigDbChange&, const ConfigDbChange&) = default;
};

class ConfigDbSchema {
 public:
  // REQUIRES: ValidateConfigDbLayout(layout).ok().
  explicit ConfigDbSchema(ConfigDbLayout layout);

  const ConfigDbLayout& layout() const { return layout_; }

  // Every key Crux owns or shares, in a fixed order: what to WATCH and read before a diff.
  const std::vector<std::string>& Keys() const { return keys_; }

  // The changes that make `current` hold `desired`: referenced objects (maps, schedulers) first,
  // then port and queue attachments, then detaches and removals (so that at no point a port or
  // queue names a missing object). Empty when `current` already holds `desired`.
  // REQUIRES: core::ValidateSwitchQosState(desired).ok().
  std::vector<ConfigDbChange> Diff(const ConfigDbSnapshot& current,
                                   const core::SwitchQosState& desired) const;

  // The state `snapshot` holds: the CRUX maps, and the schedulers attached to the first port
  // (ports are programmed identically; drift on other ports shows in Diff, not here). Errors:
  // kNotFound when DSCP_TO_TC_MAP|<profile> does not exist (nothing applied yet);
  // kFailedPrecondition naming the key and field when a value does not parse.
  core::Result<core::SwitchQosState> Reconstruct(const ConfigDbSnapshot& snapshot,
                                                 const std::string& switch_name) const;

  // The Redis commands for `changes`, in order: consecutive sets of one key become one HSET,
  // field deletes HDEL, key deletes DEL.
  static std::vector<std::vector<std::string>> Commands(const std::vector<ConfigDbChange>& changes);

  // What Redis makes of `snapshot` after the commands of `changes` (a model, for tests and dry
  // runs): sets and deletes applied, keys left without fields removed.
  static void ApplyChanges(const std::vector<ConfigDbChange>& changes, ConfigDbSnapshot& snapshot);

  // Tables that get a new key in `changes` (the JSON Patch must know whether they exist).
  static std::set<std::string> TablesGettingNewKeys(const std::vector<ConfigDbChange>& changes);

  // The same changes as an RFC 6902 JSON Patch for `config apply-patch` (Generic Config Updater):
  // paths /TABLE/key/field (JSON-Pointer escaped); a key or table that does not exist yet is added
  // whole (a table not in `existing_tables` counts as missing). "[]\n" when `changes` is empty.
  static std::string ApplyPatchJson(const std::vector<ConfigDbChange>& changes,
                                    const std::set<std::string>& existing_tables);

 private:
  ConfigDbLayout layout_;
  std::vector<std::string> keys_;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_CONFIG_DB_SCHEMA_H_
