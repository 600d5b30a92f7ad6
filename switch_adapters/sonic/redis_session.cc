#include "crux/switch_adapters/redis_session.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

namespace crux::switch_adapters {
namespace {

using core::Duration;
using core::Result;
using core::Status;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval ToTimeval(Duration d) {
  timeval tv{};
  const int64_t us = d.nanos() / 1000;
  tv.tv_sec = static_cast<time_t>(us / 1000000);
  tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  return tv;
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
      break;
  }
  return out;
}

// Writing to a socket whose peer died raises SIGPIPE, which kills the process by default, and
// hiredis does not use MSG_NOSIGNAL. For the lifetime of this guard SIGPIPE is blocked in the
// calling thread; one raised meanwhile is consumed (the write then fails with EPIPE, which is
// reported as a connection error).
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

Status ValidateRedisEndpoint(const RedisEndpoint& e, const std::string& prefix) {
  if (e.unix_socket.empty()) {
    if (e.host.empty()) {
      return core::InvalidArgumentError(prefix + "host: required without unix_socket");
    }
    if (e.port < 1 || e.port > 65535) {
      return core::InvalidArgumentError(prefix + "port: " + std::to_string(e.port) +
                                        " out of range 1..65535");
    }
  }
  if (e.db < 0 || e.db > 15) return core::InvalidArgumentError(prefix + "db: out of range 0..15");
  if (e.connect_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError(prefix + "connect_timeout: must be > 0");
  }
  if (e.command_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError(prefix + "command_timeout: must be > 0");
  }
  return Status::Ok();
}

RedisSession::RedisSession(RedisEndpoint endpoint) : endpoint_(std::move(endpoint)) {}

RedisSession::~RedisSession() { Disconnect(); }

std::string RedisSession::address() const {
  if (!endpoint_.unix_socket.empty()) return "unix:" + endpoint_.unix_socket;
  return "tcp:" + endpoint_.host + ":" + std::to_string(endpoint_.port);
}

void RedisSession::Disconnect() {
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
}

Status RedisSession::IoError(const std::string& what, int err, bool* stale) {
  std::string detail;
  bool closed = false;
  if (ctx_ == nullptr) {
    detail = "no connection";
  } else if (ctx_->err == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK)) {
    detail = "timed out after " + std::to_string(endpoint_.command_timeout.nanos() / 1000000) +
             " ms (server stalled?)";
  } else if (ctx_->err == REDIS_ERR_EOF) {
    detail = "connection closed by server";
    closed = true;
  } else {
    closed = ctx_->err == REDIS_ERR_IO && (err == EPIPE || err == ECONNRESET);
    detail = ctx_->errstr[0] != '\0' ? std::string(ctx_->errstr) : std::strerror(err);
  }
  if (stale != nullptr) *stale = closed;
  Disconnect();  // The stream may hold half a reply; never reuse it.
  return core::UnavailableError(endpoint_.name + " at " + address() + ": " + what + ": " + detail);
}

Status RedisSession::EnsureConnected() {
  if (ctx_ != nullptr) return Status::Ok();
  const timeval tv = ToTimeval(endpoint_.connect_timeout);
  redisContext* c = endpoint_.unix_socket.empty()
                        ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv)
                        : redisConnectUnixWithTimeout(endpoint_.unix_socket.c_str(), tv);
  if (c == nullptr) {
    return core::UnavailableError(endpoint_.name + " at " + address() + ": connect: out of memory");
  }
  if (c->err != 0) {
    std::string err = c->errstr;
    redisFree(c);
    return core::UnavailableError(endpoint_.name + " at " + address() + ": connect: " + err);
  }
  ctx_ = c;
  if (redisSetTimeout(ctx_, ToTimeval(endpoint_.command_timeout)) != REDIS_OK) {
    return IoError("set timeout", errno);
  }
  const std::string db = std::to_string(endpoint_.db);
  ReplyPtr r(static_cast<redisReply*>(redisCommand(ctx_, "SELECT %s", db.c_str())));
  if (!r) {
    const int err = errno;
    return IoError("SELECT " + db, err);
  }
  if (r->type == REDIS_REPLY_ERROR) {
    std::string err(r->str, r->len);
    Disconnect();
    return core::FailedPreconditionError(endpoint_.name + " at " + address() + ": SELECT " + db +
                                         ": " + err);
  }
  return Status::Ok();
}

Result<std::vector<RedisReply>> RedisSession::PipelineOnce(
    const std::vector<std::vector<std::string>>& commands, bool* stale_before_reply) {
  *stale_before_reply = false;
  CRUX_RETURN_IF_ERROR(EnsureConnected());
  for (const std::vector<std::string>& cmd : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(cmd.size());
    lens.reserve(cmd.size());
    for (const std::string& a : cmd) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      const int err = errno;
      return IoError("queue " + (cmd.empty() ? std::string("command") : cmd[0]), err);
    }
  }
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK) {
      const int err = errno;
      const std::vector<std::string>& cmd = commands[i];
      std::string what = cmd.empty() ? "command" : cmd[0];
      if (cmd.size() > 1) what += " " + cmd[1];
      bool closed = false;
      Status s = IoError(what, err, &closed);
      *stale_before_reply = closed && i == 0;
      return s;
    }
    ReplyPtr r(static_cast<redisReply*>(raw));
    out.push_back(Convert(r.get()));
  }
  return out;
}

Result<std::vector<RedisReply>> RedisSession::Pipeline(
    const std::vector<std::vector<std::string>>& commands, bool replay_if_stale) {
  ScopedSigpipeBlock no_sigpipe;
  const bool reused = ctx_ != nullptr;
  bool stale = false;
  Result<std::vector<RedisReply>> r = PipelineOnce(commands, &stale);
  if (!r.ok() && replay_if_stale && reused && stale) r = PipelineOnce(commands, &stale);
  return r;
}

Result<RedisReply> RedisSession::Command(const std::vector<std::string>& argv,
                                         bool replay_if_stale) {
  CRUX_ASSIGN_OR_RETURN(std::vector<RedisReply> r, Pipeline({argv}, replay_if_stale));
  return std::move(r.front());
}

}  // namespace crux::switch_adapters
