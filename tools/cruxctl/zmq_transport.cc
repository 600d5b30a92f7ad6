// The production AdminTransport: one protocol::DealerClient over the admin endpoint, after a
// check of the ipc:// socket file (ProbeAdminSocket).
#include <fcntl.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

class ZmqAdminTransport final : public AdminTransport {
 public:
  explicit ZmqAdminTransport(std::string ipc_path) : ipc_path_(std::move(ipc_path)) {}

  core::Status Connect(const std::string& endpoint) {
    protocol::ClientOptions options;
    options.endpoint = endpoint;
    // One short-lived request: no ZMTP heartbeats, quick reconnect attempts.
    options.heartbeat_ivl = core::Duration::Zero();
    options.reconnect_ivl = core::Duration::Millis(50);
    options.reconnect_ivl_max = core::Duration::Millis(500);
    CRUX_ASSIGN_OR_RETURN(client_, protocol::DealerClient::Connect(context_, std::move(options)));
    return core::Status::Ok();
  }

  core::Result<v1::Envelope> Call(const v1::Envelope& request, core::Duration timeout) override {
    auto reply = client_->Call(request, timeout);
    if (!reply.ok() && reply.status().code() == core::StatusCode::kUnavailable &&
        !ipc_path_.empty()) {
      // No answer: if the daemon died meanwhile, say so rather than only "no reply".
      if (core::Status probe = ProbeAdminSocket(ipc_path_); !probe.ok()) {
        return core::UnavailableError(reply.status().message() + "; " + probe.message());
      }
    }
    return reply;
  }

 private:
  std::string ipc_path_;  // Empty for other transports.
  // Declaration order matters: the client must be destroyed before its context.
  protocol::TransportContext context_;
  std::unique_ptr<protocol::DealerClient> client_;
};

}  // namespace

core::Status ProbeAdminSocket(const std::string& path) {
  if (path.empty()) return core::UnavailableError("no cruxd: the ipc:// endpoint has no path");
  // libzmq's "ipc://@name" is a Linux abstract socket: no file to check, only the connect.
  const bool abstract = path.front() == '@';
  struct stat st {};
  if (!abstract) {
    if (::stat(path.c_str(), &st) != 0) {
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
    if (!S_ISSOCK(st.st_mode)) {
      return core::UnavailableError("no cruxd: " + path +
                                    " is not a socket (is --socket right? cruxd's admin endpoint "
                                    "is a unix socket file)");
    }
  }
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
    CRUX_RETURN_IF_ERROR(ProbeAdminSocket(ipc_path));
  }
  auto transport = std::make_unique<ZmqAdminTransport>(ipc_path);
  CRUX_RETURN_IF_ERROR(transport->Connect(endpoint));
  return std::unique_ptr<AdminTransport>(std::move(transport));
}

}  // namespace crux::cruxctl
