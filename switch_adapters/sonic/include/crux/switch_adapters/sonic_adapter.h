// SonicAdapter: programs a SONiC switch through CONFIG_DB (Redis database 4) with hiredis.
//
// What it writes (names with the default options; `profile` = "CRUX", `scheduler_prefix` =
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
// Apply() algorithm (one attempt): WATCH every key above, read them (HGETALL, pipelined), diff
// against the desired state, and if anything differs send all changes in ONE MULTI/EXEC. If a
// watched key changed meanwhile, EXEC aborts and the attempt is retried; Redis executes the
// transaction all-or-nothing, so a failure (connection lost, timeout, server killed) before EXEC
// leaves the previous state whole. A state equal to what the switch holds sends no write.
// Connection errors and timeouts are retried with exponential backoff (initial_backoff doubling
// up to max_backoff, at most max_attempts tries in total); Redis error replies are not retried.
//
// ReadBack(), Plan() and ApplyPatchJson() make a single attempt (no retries): they are cheap to
// call again. ReadBack() reconstructs the state from the CRUX maps and the schedulers attached to
// the first configured port (ports are programmed identically).
//
// Thread-safety: not thread-safe (see adapter.h). Owns one hiredis connection, opened lazily and
// re-opened after an error.
#ifndef CRUX_SWITCH_ADAPTERS_SONIC_ADAPTER_H_
#define CRUX_SWITCH_ADAPTERS_SONIC_ADAPTER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/units.h"
#include "crux/switch_adapters/adapter.h"

struct redisContext;

namespace crux::switch_adapters {

struct SonicOptions {
  std::string switch_name;  // Name reported by ReadBack; required.
  // Where CONFIG_DB listens: `unix_socket` when set, else TCP host:port.
  std::string unix_socket;  // e.g. "/var/run/redis/redis.sock".
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 4;                                                     // CONFIG_DB.
  core::Duration connect_timeout = core::Duration::Millis(1000);  // > 0.
  core::Duration command_timeout = core::Duration::Millis(1000);  // > 0; per reply.
  std::vector<std::string> ports;           // Ports to program ("Ethernet0", ...); non-empty.
  std::string profile = "CRUX";             // DSCP_TO_TC_MAP / TC_TO_QUEUE_MAP key.
  std::string scheduler_prefix = "crux_q";  // Must start with "crux_".
  bool manage_pfc = true;                   // Write pfc_enable (see file comment).
  // Retries of connection errors / timeouts / WATCH conflicts.
  int max_attempts = 4;  // >= 1.
  core::Duration initial_backoff = core::Duration::Millis(100);
  core::Duration max_backoff = core::Duration::Millis(2000);
  // How to wait between attempts; default std::this_thread::sleep_for. Tests inject their own.
  std::function<void(core::Duration)> sleep;
  // Test hook: called once per attempt after MULTI and all commands are queued, before EXEC
  // (fault injection: kill or stop the server here). Null in production.
  std::function<void()> before_exec;
};

// Checks the options; errors name the field ("sonic.ports: must not be empty").
core::Status ValidateSonicOptions(const SonicOptions& o);

// One field change of CONFIG_DB.
struct ConfigDbChange {
  enum class Kind { kSet, kDeleteField, kDeleteKey };
  Kind kind = Kind::kSet;
  std::string table;         // "DSCP_TO_TC_MAP".
  std::string key;           // "CRUX", "Ethernet0|3".
  std::string field;         // Empty for kDeleteKey.
  std::string value;         // kSet only.
  bool key_existed = false;  // The key existed before the change.
};

class SonicAdapter final : public SwitchAdapter {
 public:
  // Validates the options; does not connect yet.
  static core::Result<std::unique_ptr<SonicAdapter>> Create(SonicOptions options);
  ~SonicAdapter() override;
  SonicAdapter(const SonicAdapter&) = delete;
  SonicAdapter& operator=(const SonicAdapter&) = delete;

  Capabilities capabilities() const override;
  core::Result<ApplyResult> Apply(const core::SwitchQosState& desired) override;
  core::Result<core::SwitchQosState> ReadBack() override;
  // PING within the timeouts (no backoff retries; a dead kept connection is replaced once).
  core::Status Health() override;

  // The changes Apply(desired) would make now (reads CONFIG_DB, writes nothing).
  core::Result<std::vector<ConfigDbChange>> Plan(const core::SwitchQosState& desired);

  // The same changes as an RFC 6902 JSON Patch for `config apply-patch` (Generic Config Updater):
  // paths /TABLE/key/field (JSON-Pointer escaped); a key or table that does not exist yet is
  // added whole. "[]" when nothing differs.
  core::Result<std::string> ApplyPatchJson(const core::SwitchQosState& desired);

  // "unix:/path" or "tcp:host:port", for messages.
  std::string address() const;

 private:
  explicit SonicAdapter(SonicOptions options);
  struct Snapshot;  // Current values of every key the adapter reads.
  enum class Outcome { kDone, kConflict };

  core::Status EnsureConnected();
  void Disconnect();
  core::Status ConnectionError(const std::string& what);
  // Reads every key the adapter owns or shares (WATCHing them first when `watch`). A kept
  // connection that turns out dead is replaced once, immediately.
  core::Result<Snapshot> ReadSnapshot(bool watch);
  core::Result<Snapshot> ReadSnapshotOnce(bool watch);
  core::Result<Outcome> ApplyOnce(const core::SwitchQosState& desired, ApplyResult& result);
  std::vector<ConfigDbChange> Diff(const Snapshot& current,
                                   const core::SwitchQosState& desired) const;

  SonicOptions options_;
  redisContext* ctx_ = nullptr;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_SONIC_ADAPTER_H_
