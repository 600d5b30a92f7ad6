// Local sockets of the host protocol (host_protocol.h): SOCK_SEQPACKET Unix sockets, so every
// send is one message and a peer's exit is seen as end-of-stream. Everything is non-blocking:
// Send never waits (a full socket buffer is kUnavailable and the caller drops or retries), and
// Receive / Accept return nullopt when nothing is there. The NCCL plugin and the verbs shim call
// these only from their own background threads, never from an NCCL thread.
//
// Thread-safety: one owner thread per object; distinct objects are independent.
#ifndef CRUX_HOSTD_LOCAL_SOCKET_H_
#define CRUX_HOSTD_LOCAL_SOCKET_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "crux/core/base/status.h"

namespace crux::hostd {

// The process at the other end (SO_PEERCRED), -1 when unknown.
struct PeerCredentials {
  pid_t pid = -1;
  uid_t uid = static_cast<uid_t>(-1);
};

class LocalConnection {
 public:
  // Connects to the socket at `path`. Errors: kUnavailable ("connect(/run/crux/hostd.sock): No
  // such file or directory") when nobody listens, kInvalidArgument for a path longer than
  // sun_path.
  static core::Result<LocalConnection> Connect(const std::string& path);

  LocalConnection() = default;
  ~LocalConnection();
  LocalConnection(LocalConnection&& o) noexcept;
  LocalConnection& operator=(LocalConnection&& o) noexcept;
  LocalConnection(const LocalConnection&) = delete;
  LocalConnection& operator=(const LocalConnection&) = delete;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const PeerCredentials& peer() const { return peer_; }

  // One message. kUnavailable when the socket buffer is full (nothing sent) or the peer is gone
  // (then the connection is closed); kOutOfRange for a message over kMaxMessageBytes.
  core::Status Send(std::string_view message);
  // The next message, nullopt when none is waiting. kUnavailable when the peer closed (the
  // connection is closed then).
  core::Result<std::optional<std::string>> Receive();
  void Close();

 private:
  friend class LocalListener;
  explicit LocalConnection(int fd);
  int fd_ = -1;
  PeerCredentials peer_;
};

class LocalListener {
 public:
  // Binds and listens at `path` (a stale socket file from a dead process is replaced; a live
  // listener there is kFailedPrecondition) and chmods it to `mode` (0666: any local user's
  // ranks may report; hostd tracks each connection's uid).
  static core::Result<LocalListener> Listen(const std::string& path, mode_t mode = 0666);

  LocalListener() = default;
  ~LocalListener();  // Closes and unlinks the socket file.
  LocalListener(LocalListener&& o) noexcept;
  LocalListener& operator=(LocalListener&& o) noexcept;
  LocalListener(const LocalListener&) = delete;
  LocalListener& operator=(const LocalListener&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // The next pending connection (non-blocking, close-on-exec), nullopt when none.
  core::Result<std::optional<LocalConnection>> Accept();

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_LOCAL_SOCKET_H_
