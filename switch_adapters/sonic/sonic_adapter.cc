#include "crux/switch_adapters/sonic_adapter.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>

namespace crux::switch_adapters {
namespace {

using core::Duration;
using core::Result;
using core::Status;
using core::SwitchQosState;

constexpr char kDscpTable[] = "DSCP_TO_TC_MAP";
constexpr char kTcTable[] = "TC_TO_QUEUE_MAP";
constexpr char kSchedulerTable[] = "SCHEDULER";
constexpr char kQueueTable[] = "QUEUE";
constexpr char kPortQosTable[] = "PORT_QOS_MAP";

using Fields = std::map<std::string, std::string>;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval ToTimeval(Duration d) {
  timeval tv{};
  int64_t us = d.nanos() / 1000;
  tv.tv_sec = static_cast<time_t>(us / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  return tv;
}

std::string RedisKey(const std::string& table, const std::string& key) { return table + "|" + key; }

Result<int> ParseInt(const std::string& s, const std::string& where) {
  int v = 0;
  size_t pos = 0;
  try {
    v = std::stoi(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (s.empty() || pos != s.size()) {
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

// Writing to a socket whose peer died raises SIGPIPE, which kills the process by default and
// hiredis does not use MSG_NOSIGNAL. For the lifetime of this guard SIGPIPE is blocked in the
// calling thread; one raised meanwhile is consumed (the write then fails with EPIPE, which is
// reported as a connection error). Other threads and the process disposition are untouched.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~ScopedSigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t pipe;
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

}  // namespace

struct SonicAdapter::Snapshot {
  std::map<std::string, Fields> keys;  // Redis key -> fields; absent keys are not present.
  const Fields* Find(const std::string& redis_key) const {
    auto it = keys.find(redis_key);
    return it == keys.end() ? nullptr : &it->second;
  }
};

Status ValidateSonicOptions(const SonicOptions& o) {
  if (o.switch_name.empty()) return core::InvalidArgumentError("sonic.switch_name: required");
  if (o.unix_socket.empty()) {
    if (o.host.empty())
      return core::InvalidArgumentError("sonic.host: required without unix_socket");
    if (o.port < 1 || o.port > 65535) {
      return core::InvalidArgumentError("sonic.port: " + std::to_string(o.port) +
                                        " out of range 1..65535");
    }
  }
  if (o.db < 0 || o.db > 15) return core::InvalidArgumentError("sonic.db: out of range 0..15");
  if (o.connect_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError("sonic.connect_timeout: must be > 0");
  }
  if (o.command_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError("sonic.command_timeout: must be > 0");
  }
  if (o.ports.empty()) return core::InvalidArgumentError("sonic.ports: must not be empty");
  for (size_t i = 0; i < o.ports.size(); ++i) {
    const std::string& p = o.ports[i];
    if (p.empty() || p.find('|') != std::string::npos || p.find(',') != std::string::npos) {
      return core::InvalidArgumentError("sonic.ports[" + std::to_string(i) + "]: bad port name '" +
                                        p + "'");
    }
  }
  if (o.profile.empty() || o.profile.find('|') != std::string::npos) {
    return core::InvalidArgumentError("sonic.profile: must be non-empty without '|'");
  }
  if (o.scheduler_prefix.rfind("crux_", 0) != 0 ||
      o.scheduler_prefix.find('|') != std::string::npos) {
    return core::InvalidArgumentError("sonic.scheduler_prefix: must start with 'crux_' (got '" +
                                      o.scheduler_prefix + "')");
  }
  if (o.max_attempts < 1) return core::InvalidArgumentError("sonic.max_attempts: must be >= 1");
  if (o.initial_backoff < Duration::Zero() || o.max_backoff < o.initial_backoff) {
    return core::InvalidArgumentError(
        "sonic.initial_backoff/max_backoff: need 0 <= initial_backoff <= max_backoff");
  }
  return Status::Ok();
}

Result<std::unique_ptr<SonicAdapter>> SonicAdapter::Create(SonicOptions options) {
  CRUX_RETURN_IF_ERROR(ValidateSonicOptions(options));
  if (!options.sleep) {
    options.sleep = [](Duration d) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(d.nanos()));
    };
  }
  return std::unique_ptr<SonicAdapter>(new SonicAdapter(std::move(options)));
}

SonicAdapter::SonicAdapter(SonicOptions options) : options_(std::move(options)) {}

SonicAdapter::~SonicAdapter() { Disconnect(); }

std::string SonicAdapter::address() const {
  if (!options_.unix_socket.empty()) return "unix:" + options_.unix_socket;
  return "tcp:" + options_.host + ":" + std::to_string(options_.port);
}

Capabilities SonicAdapter::capabilities() const {
  Capabilities c;
  c.backend = "sonic";
  c.queues = core::kMaxTrafficClasses;
  c.strict_priority = true;
  c.dwrr = true;
  c.pfc = options_.manage_pfc;
  c.pbr_redirect = false;
  c.transactional = true;
  return c;
}

void SonicAdapter::Disconnect() {
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
}

Status SonicAdapter::ConnectionError(const std::string& what) {
  std::string detail;
  if (ctx_ == nullptr) {
    detail = "no connection";
  } else if (ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    detail = "timed out after " + std::to_string(options_.command_timeout.nanos() / 1000000) +
             " ms (server stalled?)";
  } else if (ctx_->err == REDIS_ERR_EOF) {
    detail = "connection closed by server";
  } else {
    detail = ctx_->errstr[0] != '\0' ? std::string(ctx_->errstr) : std::strerror(errno);
  }
  Disconnect();  // The stream may hold half a reply; never reuse it.
  return core::UnavailableError("CONFIG_DB at " + address() + ": " + what + ": " + detail);
}

Status SonicAdapter::EnsureConnected() {
  if (ctx_ != nullptr) return Status::Ok();
  const timeval tv = ToTimeval(options_.connect_timeout);
  redisContext* c = options_.unix_socket.empty()
                        ? redisConnectWithTimeout(options_.host.c_str(), options_.port, tv)
                        : redisConnectUnixWithTimeout(options_.unix_socket.c_str(), tv);
  if (c == nullptr) {
    return core::UnavailableError("CONFIG_DB at " + address() + ": connect: out of memory");
  }
  if (c->err != 0) {
    std::string err = c->errstr;
    redisFree(c);
    return core::UnavailableError("CONFIG_DB at " + address() + ": connect: " + err);
  }
  ctx_ = c;
  if (redisSetTimeout(ctx_, ToTimeval(options_.command_timeout)) != REDIS_OK) {
    return ConnectionError("set timeout");
  }
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "SELECT %d", options_.db)));
  if (!r) return ConnectionError("SELECT " + std::to_string(options_.db));
  if (r->type == REDIS_REPLY_ERROR) {
    std::string err(r->str, r->len);
    Disconnect();
    return core::FailedPreconditionError("CONFIG_DB at " + address() + ": SELECT " +
                                         std::to_string(options_.db) + ": " + err);
  }
  return Status::Ok();
}

Result<SonicAdapter::Snapshot> SonicAdapter::ReadSnapshot(bool watch) {
  // A kept connection may have died while idle (server restarted): the first command on it then
  // fails. Reconnect once at once instead of reporting a stale socket.
  const bool reused = ctx_ != nullptr;
  Result<Snapshot> r = ReadSnapshotOnce(watch);
  if (!r.ok() && reused && ctx_ == nullptr && r.status().code() == core::StatusCode::kUnavailable) {
    r = ReadSnapshotOnce(watch);
  }
  return r;
}

Result<SonicAdapter::Snapshot> SonicAdapter::ReadSnapshotOnce(bool watch) {
  CRUX_RETURN_IF_ERROR(EnsureConnected());
  std::vector<std::string> keys;
  keys.push_back(RedisKey(kDscpTable, options_.profile));
  keys.push_back(RedisKey(kTcTable, options_.profile));
  for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
    keys.push_back(RedisKey(kSchedulerTable, options_.scheduler_prefix + std::to_string(q)));
  }
  for (const std::string& p : options_.ports) {
    for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
      keys.push_back(RedisKey(kQueueTable, p + "|" + std::to_string(q)));
    }
    keys.push_back(RedisKey(kPortQosTable, p));
  }
  // Pipeline: [WATCH k...], HGETALL k for each key.
  if (watch) {
    std::vector<const char*> argv{"WATCH"};
    std::vector<size_t> lens{5};
    for (const std::string& k : keys) {
      argv.push_back(k.c_str());
      lens.push_back(k.size());
    }
    redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
  }
  for (const std::string& k : keys) {
    const char* argv[] = {"HGETALL", k.c_str()};
    const size_t lens[] = {7, k.size()};
    redisAppendCommandArgv(ctx_, 2, argv, lens);
  }
  Snapshot snap;
  if (watch) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK) return ConnectionError("WATCH");
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) {
      return core::InternalError("CONFIG_DB at " + address() +
                                 ": WATCH: " + std::string(r->str, r->len));
    }
  }
  Status first_error;
  for (const std::string& k : keys) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK) return ConnectionError("HGETALL " + k);
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) {
      // Keep reading the pipeline so the connection stays in sync.
      if (first_error.ok()) {
        first_error = core::FailedPreconditionError("CONFIG_DB key " + k + ": " +
                                                    std::string(r->str, r->len));
      }
      continue;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0) {
      if (first_error.ok()) {
        first_error = core::InternalError("CONFIG_DB key " + k + ": unexpected HGETALL reply");
      }
      continue;
    }
    if (r->elements == 0) continue;  // Absent key.
    Fields& f = snap.keys[k];
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
      f[std::string(r->element[i]->str, r->element[i]->len)] =
          std::string(r->element[i + 1]->str, r->element[i + 1]->len);
    }
  }
  if (!first_error.ok()) {
    if (watch) {
      ReplyPtr u(static_cast<redisReply*>(redisCommand(ctx_, "UNWATCH")));
      if (!u) return ConnectionError("UNWATCH");
    }
    return first_error;
  }
  return snap;
}

std::vector<ConfigDbChange> SonicAdapter::Diff(const Snapshot& cur,
                                               const SwitchQosState& desired) const {
  using Kind = ConfigDbChange::Kind;
  std::vector<ConfigDbChange> creates;   // Maps and schedulers (referenced objects first).
  std::vector<ConfigDbChange> attaches;  // QUEUE / PORT_QOS_MAP fields.
  std::vector<ConfigDbChange> detaches;  // QUEUE fields no longer used.
  std::vector<ConfigDbChange> removals;  // Owned map fields and scheduler keys.

  // A key wholly owned by Crux: make it exactly `want` (absent when `want` is null).
  auto owned = [&](const std::string& table, const std::string& key, const Fields* want) {
    const Fields* have = cur.Find(RedisKey(table, key));
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

  Fields dscp;
  for (const auto& [d, tc] : desired.dscp_to_tc) dscp[std::to_string(d)] = std::to_string(tc);
  owned(kDscpTable, options_.profile, &dscp);
  Fields tcq;
  for (const auto& [tc, q] : desired.tc_to_queue) tcq[std::to_string(tc)] = std::to_string(q);
  owned(kTcTable, options_.profile, &tcq);

  std::map<int, const core::QueueScheduler*> by_queue;
  for (const core::QueueScheduler& s : desired.schedulers) by_queue[s.queue] = &s;
  for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
    const std::string name = options_.scheduler_prefix + std::to_string(q);
    auto it = by_queue.find(q);
    if (it == by_queue.end()) {
      owned(kSchedulerTable, name, nullptr);
      continue;
    }
    Fields f{{"type", std::string(core::SchedulerTypeName(it->second->type))}};
    if (it->second->type == core::SchedulerType::kDwrr) {
      f["weight"] = std::to_string(it->second->weight);
    }
    owned(kSchedulerTable, name, &f);
  }

  // Shared keys: only the fields Crux sets.
  auto shared_set = [&](const std::string& table, const std::string& key, const std::string& f,
                        const std::string& v) {
    const Fields* have = cur.Find(RedisKey(table, key));
    const std::string* old = nullptr;
    if (have != nullptr) {
      auto it = have->find(f);
      if (it != have->end()) old = &it->second;
    }
    if (old == nullptr || *old != v)
      attaches.push_back({Kind::kSet, table, key, f, v, have != nullptr});
  };
  const std::string pfc = JoinInts(desired.pfc_enable);
  for (const std::string& port : options_.ports) {
    for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
      const std::string key = port + "|" + std::to_string(q);
      if (by_queue.count(q)) {
        shared_set(kQueueTable, key, "scheduler", options_.scheduler_prefix + std::to_string(q));
        continue;
      }
      const Fields* have = cur.Find(RedisKey(kQueueTable, key));
      if (have == nullptr) continue;
      auto it = have->find("scheduler");
      if (it != have->end() && it->second.rfind(options_.scheduler_prefix, 0) == 0) {
        detaches.push_back({Kind::kDeleteField, kQueueTable, key, "scheduler", "", true});
      }
    }
    shared_set(kPortQosTable, port, "dscp_to_tc_map", options_.profile);
    shared_set(kPortQosTable, port, "tc_to_queue_map", options_.profile);
    if (options_.manage_pfc && !pfc.empty()) shared_set(kPortQosTable, port, "pfc_enable", pfc);
  }

  std::vector<ConfigDbChange> out;
  for (auto* v : {&creates, &attaches, &detaches, &removals}) {
    out.insert(out.end(), std::make_move_iterator(v->begin()), std::make_move_iterator(v->end()));
  }
  return out;
}

Result<SonicAdapter::Outcome> SonicAdapter::ApplyOnce(const SwitchQosState& desired,
                                                      ApplyResult& result) {
  result.writes = 0;
  result.deletes = 0;
  result.operations.clear();
  CRUX_ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(/*watch=*/true));
  std::vector<ConfigDbChange> changes = Diff(snap, desired);
  if (changes.empty()) {
    ReplyPtr u(static_cast<redisReply*>(redisCommand(ctx_, "UNWATCH")));
    if (!u) return ConnectionError("UNWATCH");
    return Outcome::kDone;
  }

  // Group consecutive sets of one key into one HSET; keep the change order otherwise.
  std::vector<std::vector<std::string>> commands;
  for (size_t i = 0; i < changes.size();) {
    const ConfigDbChange& c = changes[i];
    const std::string rk = RedisKey(c.table, c.key);
    if (c.kind == ConfigDbChange::Kind::kSet) {
      std::vector<std::string> cmd{"HSET", rk};
      size_t j = i;
      for (; j < changes.size() && changes[j].kind == ConfigDbChange::Kind::kSet &&
             changes[j].table == c.table && changes[j].key == c.key;
           ++j) {
        cmd.push_back(changes[j].field);
        cmd.push_back(changes[j].value);
        result.operations.push_back("HSET " + rk + " " + changes[j].field + " " + changes[j].value);
        ++result.writes;
      }
      commands.push_back(std::move(cmd));
      i = j;
    } else if (c.kind == ConfigDbChange::Kind::kDeleteField) {
      commands.push_back({"HDEL", rk, c.field});
      result.operations.push_back("HDEL " + rk + " " + c.field);
      ++result.deletes;
      ++i;
    } else {
      commands.push_back({"DEL", rk});
      result.operations.push_back("DEL " + rk);
      ++result.deletes;
      ++i;
    }
  }

  // MULTI, the commands, EXEC — pipelined; every reply is read back to keep the stream in sync.
  auto append = [&](const std::vector<std::string>& cmd) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : cmd) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
  };
  append({"MULTI"});
  for (const auto& cmd : commands) append(cmd);
  // Flush and collect the QUEUED replies before EXEC so that a fault injected by the test hook
  // happens with the whole transaction queued on the server but not executed.
  std::string queue_error;
  for (size_t i = 0; i < commands.size() + 1; ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK) return ConnectionError("MULTI");
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR && queue_error.empty()) {
      queue_error = std::string(r->str, r->len);
    }
  }
  if (options_.before_exec) options_.before_exec();
  if (!queue_error.empty()) {
    ReplyPtr d(static_cast<redisReply*>(redisCommand(ctx_, "DISCARD")));
    if (!d) return ConnectionError("DISCARD");
    return core::InternalError("CONFIG_DB at " + address() +
                               ": transaction rejected: " + queue_error);
  }
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "EXEC")));
  if (!r) return ConnectionError("EXEC");
  if (r->type == REDIS_REPLY_NIL) return Outcome::kConflict;  // A watched key changed.
  if (r->type == REDIS_REPLY_ERROR) {
    return core::InternalError("CONFIG_DB at " + address() +
                               ": EXEC: " + std::string(r->str, r->len));
  }
  if (r->type != REDIS_REPLY_ARRAY) {
    return core::InternalError("CONFIG_DB at " + address() + ": EXEC: unexpected reply");
  }
  for (size_t i = 0; i < r->elements; ++i) {
    if (r->element[i]->type == REDIS_REPLY_ERROR) {
      // Redis does not roll back a command that failed at run time (e.g. WRONGTYPE).
      return core::InternalError("CONFIG_DB at " + address() + ": EXEC command " +
                                 std::to_string(i) +
                                 " failed: " + std::string(r->element[i]->str, r->element[i]->len));
    }
  }
  return Outcome::kDone;
}

Result<ApplyResult> SonicAdapter::Apply(const SwitchQosState& desired) {
  ScopedSigpipeBlock no_sigpipe;
  CRUX_RETURN_IF_ERROR(core::ValidateSwitchQosState(desired));
  Duration backoff = options_.initial_backoff;
  Status last;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    ApplyResult result;
    result.attempts = attempt;
    Result<Outcome> r = ApplyOnce(desired, result);
    if (r.ok() && *r == Outcome::kDone) return result;
    if (r.ok()) {
      last = core::UnavailableError("CONFIG_DB at " + address() +
                                    ": a watched key changed during the apply (EXEC aborted)");
    } else if (r.status().code() == core::StatusCode::kUnavailable) {
      last = r.status();
    } else {
      return r.status();  // Not retryable (Redis rejected a command, bad data).
    }
    if (attempt < options_.max_attempts) {
      options_.sleep(backoff);
      backoff = std::min(options_.max_backoff, backoff + backoff);
    }
  }
  return core::UnavailableError("apply gave up after " + std::to_string(options_.max_attempts) +
                                " attempts: " + last.message());
}

Result<std::vector<ConfigDbChange>> SonicAdapter::Plan(const SwitchQosState& desired) {
  ScopedSigpipeBlock no_sigpipe;
  CRUX_RETURN_IF_ERROR(core::ValidateSwitchQosState(desired));
  CRUX_ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(/*watch=*/false));
  return Diff(snap, desired);
}

Result<SwitchQosState> SonicAdapter::ReadBack() {
  ScopedSigpipeBlock no_sigpipe;
  CRUX_ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(/*watch=*/false));
  const std::string dscp_key = RedisKey(kDscpTable, options_.profile);
  const Fields* dscp = snap.Find(dscp_key);
  if (dscp == nullptr) {
    return core::NotFoundError("CONFIG_DB at " + address() + ": " + dscp_key +
                               " does not exist (nothing applied yet)");
  }
  SwitchQosState s;
  s.switch_name = options_.switch_name;
  for (const auto& [f, v] : *dscp) {
    const std::string where = dscp_key + "[" + f + "]";
    CRUX_ASSIGN_OR_RETURN(int d, ParseInt(f, where));
    CRUX_ASSIGN_OR_RETURN(int tc, ParseInt(v, where));
    s.dscp_to_tc[d] = tc;
  }
  const std::string tc_key = RedisKey(kTcTable, options_.profile);
  if (const Fields* tcq = snap.Find(tc_key)) {
    for (const auto& [f, v] : *tcq) {
      const std::string where = tc_key + "[" + f + "]";
      CRUX_ASSIGN_OR_RETURN(int tc, ParseInt(f, where));
      CRUX_ASSIGN_OR_RETURN(int q, ParseInt(v, where));
      s.tc_to_queue[tc] = q;
    }
  }
  const std::string& port = options_.ports.front();
  for (int q = 0; q < core::kMaxTrafficClasses; ++q) {
    const Fields* queue = snap.Find(RedisKey(kQueueTable, port + "|" + std::to_string(q)));
    if (queue == nullptr) continue;
    auto it = queue->find("scheduler");
    if (it == queue->end() || it->second.rfind(options_.scheduler_prefix, 0) != 0) continue;
    const std::string sk = RedisKey(kSchedulerTable, it->second);
    const Fields* sch = snap.Find(sk);
    if (sch == nullptr) {
      return core::FailedPreconditionError("CONFIG_DB: QUEUE|" + port + "|" + std::to_string(q) +
                                           " names missing scheduler " + it->second);
    }
    core::QueueScheduler qs;
    qs.queue = q;
    auto type = sch->find("type");
    if (type == sch->end()) return core::FailedPreconditionError(sk + ": no type");
    auto parsed = core::ParseSchedulerType(type->second);
    if (!parsed.ok())
      return core::FailedPreconditionError(sk + ".type: " + parsed.status().message());
    qs.type = *parsed;
    if (auto w = sch->find("weight"); w != sch->end() && qs.type == core::SchedulerType::kDwrr) {
      CRUX_ASSIGN_OR_RETURN(qs.weight, ParseInt(w->second, sk + ".weight"));
    }
    s.schedulers.push_back(qs);
  }
  if (options_.manage_pfc) {
    if (const Fields* pqm = snap.Find(RedisKey(kPortQosTable, port))) {
      auto it = pqm->find("pfc_enable");
      if (it != pqm->end() && !it->second.empty()) {
        std::string item;
        const std::string where = std::string(kPortQosTable) + "|" + port + ".pfc_enable";
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

Status SonicAdapter::Health() {
  ScopedSigpipeBlock no_sigpipe;
  const bool reused = ctx_ != nullptr;
  CRUX_RETURN_IF_ERROR(EnsureConnected());
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "PING")));
  if (!r && reused) {
    Disconnect();  // Stale kept connection: one fresh try (see ReadSnapshot).
    CRUX_RETURN_IF_ERROR(EnsureConnected());
    r.reset(static_cast<redisReply*>(redisCommand(ctx_, "PING")));
  }
  if (!r) return ConnectionError("PING");
  if (r->type == REDIS_REPLY_ERROR) {
    return core::UnavailableError("CONFIG_DB at " + address() +
                                  ": PING: " + std::string(r->str, r->len));
  }
  return Status::Ok();
}

Result<std::string> SonicAdapter::ApplyPatchJson(const SwitchQosState& desired) {
  ScopedSigpipeBlock no_sigpipe;
  CRUX_ASSIGN_OR_RETURN(std::vector<ConfigDbChange> changes, Plan(desired));
  using nlohmann::json;
  // Tables that exist already (any key), checked with SCAN for the tables a new key goes into.
  std::map<std::string, bool> table_exists;
  for (const ConfigDbChange& c : changes) {
    if (c.kind != ConfigDbChange::Kind::kSet || c.key_existed || table_exists.count(c.table)) {
      continue;
    }
    bool found = false;
    std::string cursor = "0";
    const std::string pattern = c.table + "|*";
    do {
      ReplyPtr r(static_cast<redisReply*>(
          redisCommand(ctx_, "SCAN %s MATCH %s COUNT 1000", cursor.c_str(), pattern.c_str())));
      if (!r) return ConnectionError("SCAN " + pattern);
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        return core::InternalError("CONFIG_DB: unexpected SCAN reply");
      }
      cursor.assign(r->element[0]->str, r->element[0]->len);
      found = r->element[1]->elements > 0;
    } while (!found && cursor != "0");
    table_exists[c.table] = found;
  }

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
        } else if (!table_exists[c.table]) {
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
