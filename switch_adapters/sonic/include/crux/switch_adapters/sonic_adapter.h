// SonicAdapter: programs a SONiC switch through CONFIG_DB (Redis database 4). It composes the two
// halves of the backend:
//   * ConfigDbSchema (config_db_schema.h): pure; which keys and fields Crux owns, the diff, the
//     state read back, the JSON Patch;
//   * RedisSession (redis_session.h): the one hiredis connection, one attempt per call.
//
// Apply() is ONE attempt, never a retry loop: WATCH every key of the schema and read them
// (pipelined HGETALL), diff against the desired state; when nothing differs send UNWATCH and write
// nothing; otherwise send all changes in ONE MULTI/EXEC. Redis executes the transaction
// all-or-nothing, so a failure (connection lost, timeout, server killed) before EXEC leaves the
// previous state whole. Connection errors and timeouts are kUnavailable; a watched key that changed
// meanwhile (EXEC aborted) is kUnavailable too ("... changed during the apply (EXEC aborted)"):
// the caller retries against the fresh values. Redis error replies are not retryable
// (kFailedPrecondition for a key of the wrong type, kInternal for a rejected transaction).
//
// ReadBack(), Plan() and ApplyPatchJson() are reads (one attempt each).
//
// Thread-safety: not thread-safe (see adapter.h); capabilities() is constant.
#ifndef CRUX_SWITCH_ADAPTERS_SONIC_ADAPTER_H_
#define CRUX_SWITCH_ADAPTERS_SONIC_ADAPTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/switch_adapters/adapter.h"
#include "crux/switch_adapters/config_db_schema.h"
#include "crux/switch_adapters/redis_session.h"
#include "crux/switch_adapters/registry.h"

namespace crux::switch_adapters {

struct SonicOptions {
  std::string switch_name;  // Name reported by ReadBack; required.
  // Where CONFIG_DB listens: `unix_socket` when set, else TCP host:port (see RedisEndpoint).
  std::string unix_socket;  // e.g. "/var/run/redis/redis.sock".
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 4;                                                     // CONFIG_DB.
  core::Duration connect_timeout = core::Duration::Millis(1000);  // > 0.
  core::Duration command_timeout = core::Duration::Millis(1000);  // > 0; per reply.
  // The keys and fields Crux owns (see ConfigDbLayout).
  std::vector<std::string> ports;           // Non-empty.
  std::string profile = "CRUX";             // DSCP_TO_TC_MAP / TC_TO_QUEUE_MAP key.
  std::string scheduler_prefix = "crux_q";  // Must start with "crux_".
  bool manage_pfc = true;                   // Write pfc_enable.
  // Hardware queues per port of this platform (capabilities().queues), 1..8. A pushed state that
  // uses a queue at or above it is refused before anything is written.
  int queues = core::kMaxTrafficClasses;
  // Test hook: called once per Apply after MULTI and all commands are queued, before EXEC (fault
  // injection: kill or stop the server, edit a watched key). Null in production.
  std::function<void()> before_exec;
};

// Checks the options; errors name the field ("sonic.ports: must not be empty").
core::Status ValidateSonicOptions(const SonicOptions& o);

class SonicAdapter final : public SwitchAdapter {
 public:
  // Validates the options; does not connect yet.
  static core::Result<std::unique_ptr<SonicAdapter>> Create(SonicOptions options);

  Capabilities capabilities() const override;
  core::Result<ApplyResult> Apply(const core::SwitchQosState& desired) override;
  core::Result<core::SwitchQosState> ReadBack() override;
  // PING within the timeouts.
  core::Status Health() override;

  // The changes Apply(desired) would make now (reads CONFIG_DB, writes nothing).
  core::Result<std::vector<ConfigDbChange>> Plan(const core::SwitchQosState& desired);

  // The same changes as an RFC 6902 JSON Patch for `config apply-patch` (see
  // ConfigDbSchema::ApplyPatchJson; whether a table exists is probed with SCAN).
  core::Result<std::string> ApplyPatchJson(const core::SwitchQosState& desired);

  const ConfigDbSchema& schema() const { return schema_; }
  std::string address() const { return session_.address(); }

 private:
  explicit SonicAdapter(SonicOptions options);
  // Reads every key of the schema (WATCHing them first when `watch`).
  core::Result<ConfigDbSnapshot> ReadSnapshot(bool watch);
  core::Status CheckState(const core::SwitchQosState& desired) const;

  SonicOptions options_;
  ConfigDbSchema schema_;
  RedisSession session_;
};

// The registry entry of this backend (registry.h): parameters --redis-socket, --redis-host,
// --redis-port, --redis-db, --redis-timeout-ms, --ports, --no-pfc, --queues, --appl-db,
// --counters-db, --asic-db; a port monitor (sonic_port_monitor.h) and an enforcement verifier
// (sonic_verifier.h) from the same parameters.
Backend SonicBackend();

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_SONIC_ADAPTER_H_
