// The production AdminTransport: one protocol::DealerClient over the admin endpoint, after a
// check of the ipc:// socket file (ProbeAdminSocket).
#include <fcntl.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "crux/protocol/client.h"
#include "crux/protocol/transport_context.h"
#include "cruxctl.h"

namespace crux::cruxctl {
namespace {

constexpr std::string_view kIpc = "ipc://";

std::string ErrnoName(int e) {
  switch (e) {
    case EACCES:
      return "EACCES";
    case EPERM:
      return "EPERM";
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case ENOENT:
      return "ENOENT";
    case ENOTDIR:
      return "ENOTDIR";
    case ENOTSOCK:
      return "ENOTSOCK";
    case EPROTOTYPE:
      return "EPROTOTYPE";
    default:
      return "errno " + std::to_string(e);
  }
}

std::string UserName(uid_t uid) {
  std::vector<char> buf(4096);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return std::string("uid ") + std::to_string(uid) + " (" + found->pw_name + ")";
  }
  return "uid " + std::to_string(uid);
}

std::string CurrentUser() { return "user " + UserName(geteuid()); }

std::string Mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Stat only: what can be said about an ipc path without connecting to it.
core::Status CheckSocketFile(const std::string& path, struct stat* st) {
  if (::stat(path.c_str(), st) != 0) {
    const int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
      return core::UnavailableError("no cruxd: " + path +
                                    " does not exist (no admin socket there; is cruxd running? "
                                    "--socket or $" +
                                    kAdminSocketEnv + " names another one)");
    }
    if (e == EACCES) {
      return core::UnavailableError(
          "permission denied: " + CurrentUser() + " cannot look up " + path +
          " (EACCES: a directory on the way is not searchable); run cruxctl as the user cruxd "
          "runs as, or with sudo");
    }
    return core::UnavailableError("cannot check " + path + ": " + ErrnoName(e) + " (" +
                                  std::strerror(e) + ")");
  }
  if (!S_ISSOCK(st->st_mode)) {
    return core::UnavailableError("no cruxd: " + path +
                                  " is not a socket (is --socket right? cruxd's admin endpoint "
                                  "is a unix socket file)");
  }
  return core::Status::Ok();
}

// Over ipc://, the DEALER's connection attempts are watched with a ZeroMQ socket monitor: when
// one fails (ZMQ_EVENT_CONNECT_RETRIED: nothing accepted it), ProbeAdminSocket names the reason
// at once instead of waiting out the timeout. The probe's own connect(2) is only made then, so
// a live daemon never sees it (a bare connect-and-close counts as a failed ZMTP handshake in
// cruxd's refusals).
class ZmqAdminTransport final : public AdminTransport {
 public:
  explicit ZmqAdminTransport(std::string ipc_path) : ipc_path_(std::move(ipc_path)) {}
  ~ZmqAdminTransport() override {
    if (monitor_) {
      zmq_socket_monitor(client_->raw_socket(), nullptr, 0);
      monitor_.close();
    }
  }
  ZmqAdminTransport(const ZmqAdminTransport&) = delete;
  ZmqAdminTransport& operator=(const ZmqAdminTransport&) = delete;

  core::Status Connect(const std::string& endpoint) {
    protocol::ClientOptions options;
    options.endpoint = endpoint;
    // One short-lived request: no ZMTP heartbeats, quick reconnect attempts.
    options.heartbeat_ivl = core::Duration::Zero();
    options.reconnect_ivl = core::Duration::Millis(50);
    options.reconnect_ivl_max = core::Duration::Millis(500);
    CRUX_ASSIGN_OR_RETURN(client_, protocol::DealerClient::Connect(context_, std::move(options)));
    if (!ipc_path_.empty()) StartMonitor();
    return core::Status::Ok();
  }

  core::Result<v1::Envelope> Call(const v1::Envelope& request, core::Duration timeout) override {
    if (!monitor_) {
      auto reply = client_->Call(request, timeout);
      if (!reply.ok() && reply.status().code() == core::StatusCode::kUnavailable &&
          !ipc_path_.empty()) {
        if (core::Status probe = ProbeAdminSocket(ipc_path_); !probe.ok()) {
          return core::UnavailableError(reply.status().message() + "; " + probe.message());
        }
      }
      return reply;
    }
    v1::Envelope msg = request;
    const uint64_t id = client_->NextRequestId();
    msg.set_request_id(id);
    CRUX_RETURN_IF_ERROR(client_->Send(msg));
    const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout.nanos());
    while (true) {
      CRUX_ASSIGN_OR_RETURN(auto got, client_->TryReceive());
      if (got.has_value()) {
        if (got->request_id() == id) return std::move(*got);
        continue;  // A push or a stray reply: not ours.
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        return core::UnavailableError("no reply within " +
                                      std::to_string(timeout.nanos() / 1000000) + " ms");
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
      zmq::pollitem_t items[] = {{client_->raw_socket(), 0, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, left);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) return core::InternalError(std::string("poll: ") + e.what());
      }
      if ((items[1].revents & ZMQ_POLLIN) != 0 && ConnectFailed()) {
        // ZeroMQ could not connect: find out why (nothing of a daemon can be disturbed now).
        if (core::Status probe = ProbeAdminSocket(ipc_path_); !probe.ok()) {
          return core::NotFoundError(probe.message());
        }
      }
    }
  }

 private:
  using Clock = std::chrono::steady_clock;

  void StartMonitor() {
    const std::string ep =
        "inproc://cruxctl.monitor." + std::to_string(reinterpret_cast<uintptr_t>(this));
    if (zmq_socket_monitor(client_->raw_socket(), ep.c_str(), ZMQ_EVENT_CONNECT_RETRIED) != 0) {
      return;  // Best effort: without it, a failure is explained after the timeout.
    }
    try {
      monitor_ = zmq::socket_t(context_.context(), zmq::socket_type::pair);
      monitor_.set(zmq::sockopt::linger, 0);
      monitor_.connect(ep);
    } catch (const zmq::error_t&) {
      zmq_socket_monitor(client_->raw_socket(), nullptr, 0);
      monitor_.close();
    }
  }

  // Reads the queued monitor events; true when one says a connection attempt failed.
  bool ConnectFailed() {
    bool failed = false;
    while (true) {
      std::vector<zmq::message_t> parts;
      zmq::recv_result_t got;
      try {
        got = zmq::recv_multipart(monitor_, std::back_inserter(parts), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        return failed;
      }
      if (!got) return failed;
      if (!parts.empty() && parts[0].size() >= sizeof(uint16_t)) {
        uint16_t event = 0;
        std::memcpy(&event, parts[0].data(), sizeof(event));
        failed = failed || event == ZMQ_EVENT_CONNECT_RETRIED;
      }
    }
  }

  std::string ipc_path_;  // Empty for other transports.
  // Declaration order matters: the client (and its monitor) before the context.
  protocol::TransportContext context_;
  std::unique_ptr<protocol::DealerClient> client_;
  zmq::socket_t monitor_;
};

}  // namespace

core::Status ProbeAdminSocket(const std::string& path) {
  if (path.empty()) return core::UnavailableError("no cruxd: the ipc:// endpoint has no path");
  // libzmq's "ipc://@name" is a Linux abstract socket: no file to check, only the connect.
  const bool abstract = path.front() == '@';
  struct stat st {};
  if (!abstract) CRUX_RETURN_IF_ERROR(CheckSocketFile(path, &st));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return core::UnavailableError(path + ": path too long for a unix socket (at most " +
                                  std::to_string(sizeof(addr.sun_path) - 1) + " bytes)");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (abstract) addr.sun_path[0] = '\0';
  const auto len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + (abstract ? 0 : 1));
  // Non-blocking: a daemon whose accept backlog is full must not make cruxctl hang here.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return core::Status::Ok();  // Cannot probe; ZeroMQ will tell (or time out).
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len);
  const int e = errno;
  ::close(fd);
  if (rc == 0 || e == EAGAIN || e == EINPROGRESS) return core::Status::Ok();
  switch (e) {
    case ECONNREFUSED:
      return core::UnavailableError(
          "cruxd is not running: " + path +
          " is a stale socket (ECONNREFUSED: nothing listens on it; a killed cruxd leaves its "
          "socket file behind, starting cruxd again replaces it)");
    case EACCES:
    case EPERM: {
      std::string owner;
      if (!abstract) {
        owner = " (socket owned by " + UserName(st.st_uid) + ", mode " + Mode(st.st_mode) + ")";
      }
      return core::UnavailableError("permission denied: " + CurrentUser() + " may not connect to " +
                                    path + owner + " (" + ErrnoName(e) +
                                    "); run cruxctl as the user cruxd runs as, or with sudo");
    }
    case ENOENT:
      return core::UnavailableError("no cruxd: " + path + " does not exist (no admin socket)");
    default:
      return core::UnavailableError("cannot connect to " + path + ": " + ErrnoName(e) + " (" +
                                    std::strerror(e) + ")");
  }
}

core::Result<std::unique_ptr<AdminTransport>> MakeZmqAdminTransport(const std::string& endpoint) {
  std::string ipc_path;
  if (endpoint.rfind(kIpc, 0) == 0) {
    // ZeroMQ would wait (and retry) on a socket that does not exist or nobody listens on; tell
    // the operator at once instead.
    ipc_path = endpoint.substr(kIpc.size());
    struct stat st {};
    if (ipc_path.empty() || ipc_path.front() != '@') {
      CRUX_RETURN_IF_ERROR(CheckSocketFile(ipc_path, &st));
    }
  }
  auto transport = std::make_unique<ZmqAdminTransport>(ipc_path);
  CRUX_RETURN_IF_ERROR(transport->Connect(endpoint));
  return std::unique_ptr<AdminTransport>(std::move(transport));
}

}  // namespace crux::cruxctl
