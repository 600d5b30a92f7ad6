#include "crux/hostd/local_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "crux/hostd/host_protocol.h"

namespace crux::hostd {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

core::Result<sockaddr_un> Address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(a.sun_path)) {
    return core::InvalidArgumentError("socket path '" + path + "': must be 1-" +
                                      std::to_string(sizeof(a.sun_path) - 1) + " bytes");
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

PeerCredentials Credentials(int fd) {
  PeerCredentials p;
  ucred c{};
  socklen_t len = sizeof c;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) == 0) {
    p.pid = c.pid;
    p.uid = c.uid;
  }
  return p;
}

}  // namespace

LocalConnection::LocalConnection(int fd) : fd_(fd), peer_(Credentials(fd)) {}

LocalConnection::~LocalConnection() { Close(); }

LocalConnection::LocalConnection(LocalConnection&& o) noexcept : fd_(o.fd_), peer_(o.peer_) {
  o.fd_ = -1;
}

LocalConnection& LocalConnection::operator=(LocalConnection&& o) noexcept {
  if (this != &o) {
    Close();
    fd_ = o.fd_;
    peer_ = o.peer_;
    o.fd_ = -1;
  }
  return *this;
}

void LocalConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

core::Result<LocalConnection> LocalConnection::Connect(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(sockaddr_un a, Address(path));
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return core::UnavailableError(Errno("socket(AF_UNIX, SOCK_SEQPACKET)"));
  // A Unix-socket connect completes at once or fails (EAGAIN only when the backlog is full).
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    core::Status s = core::UnavailableError(Errno("connect(" + path + ")"));
    ::close(fd);
    return s;
  }
  return LocalConnection(fd);
}

core::Status LocalConnection::Send(std::string_view message) {
  if (fd_ < 0) return core::UnavailableError("not connected");
  if (message.size() > kMaxMessageBytes) {
    return core::OutOfRangeError("message of " + std::to_string(message.size()) +
                                 " bytes exceeds " + std::to_string(kMaxMessageBytes));
  }
  for (;;) {
    ssize_t n = ::send(fd_, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(message.size())) return core::Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return core::UnavailableError("socket buffer full");
    }
    core::Status s = core::UnavailableError(Errno("send"));
    Close();
    return s;
  }
}

core::Result<std::optional<std::string>> LocalConnection::Receive() {
  if (fd_ < 0) return core::UnavailableError("not connected");
  std::vector<char> buf(kMaxMessageBytes + 1);
  for (;;) {
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n > 0) {
      if (static_cast<size_t>(n) > kMaxMessageBytes) {
        // Truncated by the kernel: hand over a marker the decoder refuses.
        return std::optional<std::string>(std::string(kMaxMessageBytes + 1, ' '));
      }
      return std::optional<std::string>(std::string(buf.data(), static_cast<size_t>(n)));
    }
    if (n == 0) {
      Close();
      return core::UnavailableError("peer closed the connection");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<std::string>();
    core::Status s = core::UnavailableError(Errno("recv"));
    Close();
    return s;
  }
}

core::Result<LocalListener> LocalListener::Listen(const std::string& path, mode_t mode) {
  CRUX_ASSIGN_OR_RETURN(sockaddr_un a, Address(path));
  // A live listener must not be stolen; a stale file (its process died) is replaced.
  if (auto probe = LocalConnection::Connect(path); probe.ok()) {
    return core::FailedPreconditionError("another process listens on " + path);
  }
  ::unlink(path.c_str());
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return core::UnavailableError(Errno("socket(AF_UNIX, SOCK_SEQPACKET)"));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    core::Status s = core::UnavailableError(Errno("bind(" + path + ")"));
    ::close(fd);
    return s;
  }
  if (::chmod(path.c_str(), mode) != 0 || ::listen(fd, 256) != 0) {
    core::Status s = core::UnavailableError(Errno("listen(" + path + ")"));
    ::close(fd);
    ::unlink(path.c_str());
    return s;
  }
  LocalListener l;
  l.fd_ = fd;
  l.path_ = path;
  return l;
}

LocalListener::~LocalListener() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

LocalListener::LocalListener(LocalListener&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

LocalListener& LocalListener::operator=(LocalListener&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());
    }
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

core::Result<std::optional<LocalConnection>> LocalListener::Accept() {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return std::optional<LocalConnection>(LocalConnection(fd));
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<LocalConnection>();
    if (errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
      return core::UnavailableError(Errno("accept"));
    }
    return core::InternalError(Errno("accept"));
  }
}

}  // namespace crux::hostd
