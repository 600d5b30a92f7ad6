// RedisSession: the one place Crux talks to hiredis. One connection to one Redis database (SONiC
// CONFIG_DB, db 4), opened lazily, with connect and per-reply timeouts.
//
// Every call is ONE attempt: it either returns the server's replies or fails with kUnavailable
// ("CONFIG_DB at unix:/var/run/redis/redis.sock: HGETALL DSCP_TO_TC_MAP|CRUX: timed out after
// 1000 ms (server stalled?)"), drops the connection (the stream may hold half a reply) and leaves
// retrying to the caller's caller (the switch agent, with core/backoff.h). The only exception is a
// kept connection that turns out closed by the server before it answered anything (the server was
// restarted while the session was idle): with `replay_if_stale`, meant only for commands that are
// safe to send twice (reads, WATCH, PING), the commands are sent once more on a fresh connection.
// A timeout is never replayed, so a stalled server costs one command timeout per call.
//
// Redis error replies (WRONGTYPE, ...) are values (RedisReply::Type::kError), not Status errors.
// SIGPIPE is blocked in the calling thread during I/O (a dead peer gives EPIPE, not a killed
// process); other threads and the process disposition are untouched.
//
// Thread-safety: NOT thread-safe (one owner thread).
#ifndef CRUX_SWITCH_ADAPTERS_REDIS_SESSION_H_
#define CRUX_SWITCH_ADAPTERS_REDIS_SESSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

struct redisContext;

namespace crux::switch_adapters {

struct RedisEndpoint {
  // Where Redis listens: `unix_socket` when set, else TCP host:port.
  std::string unix_socket;  // e.g. "/var/run/redis/redis.sock".
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 4;                                                     // CONFIG_DB.
  core::Duration connect_timeout = core::Duration::Millis(1000);  // > 0.
  core::Duration command_timeout = core::Duration::Millis(1000);  // > 0; per reply.
  std::string name = "CONFIG_DB";  // The database's SONiC name, for messages ("ASIC_DB at ...").
};

// Errors name the field, prefixed by `prefix` ("sonic.port: 70000 out of range 1..65535").
core::Status ValidateRedisEndpoint(const RedisEndpoint& e, const std::string& prefix = "sonic.");

struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError.
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray.

  bool is_error() const { return type == Type::kError; }
};

class RedisSession {
 public:
  // REQUIRES: ValidateRedisEndpoint(endpoint).ok(). Does not connect yet.
  explicit RedisSession(RedisEndpoint endpoint);
  ~RedisSession();
  RedisSession(const RedisSession&) = delete;
  RedisSession& operator=(const RedisSession&) = delete;

  // Sends `commands` in one pipelined write and reads one reply per command, in order. Connects
  // first when needed (and SELECTs the database). See the file comment for errors.
  core::Result<std::vector<RedisReply>> Pipeline(
      const std::vector<std::vector<std::string>>& commands, bool replay_if_stale = false);
  core::Result<RedisReply> Command(const std::vector<std::string>& argv,
                                   bool replay_if_stale = false);

  bool connected() const { return ctx_ != nullptr; }
  void Disconnect();
  // "unix:/path" or "tcp:host:port", for messages.
  std::string address() const;

 private:
  core::Status EnsureConnected();
  // Why the last I/O failed (`err`: errno right after the failure); drops the connection.
  // *stale: the server closed the connection.
  core::Status IoError(const std::string& what, int err, bool* stale = nullptr);
  core::Result<std::vector<RedisReply>> PipelineOnce(
      const std::vector<std::vector<std::string>>& commands, bool* stale_before_reply);

  RedisEndpoint endpoint_;
  redisContext* ctx_ = nullptr;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_REDIS_SESSION_H_
