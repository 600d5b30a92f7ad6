// HostdLink: a rank-side connection to crux-hostd (used by the NCCL profiler plugin and the verbs
// shim, on their own background threads). It connects when due, reconnects at most every
// `retry_ns` after a failure, and reports a fresh connection so that the caller re-sends its
// whole state (host_protocol.h: hostd may have restarted). A failed send closes the connection
// (nothing is queued: the state replay on the next connection replaces it). Bad messages from
// hostd are dropped and counted. A Refused from hostd (a per-user limit, another uid's job) is
// counted and kept as last_error() ("crux-hostd refused job 'x': <reason>"), and returned too.
//
// Thread-safety: one owner thread.
#ifndef CRUX_HOSTD_HOSTD_LINK_H_
#define CRUX_HOSTD_HOSTD_LINK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "crux/hostd/host_protocol.h"
#include "crux/hostd/local_socket.h"

namespace crux::hostd {

class HostdLink {
 public:
  explicit HostdLink(std::string path, int64_t retry_ns = 1'000'000'000);

  // Connects when not connected and the retry delay has passed (time `now_ns`, any monotonic
  // clock). Returns true exactly when a new connection was made by this call.
  bool Poll(int64_t now_ns);
  bool connected() const { return conn_.is_open(); }
  const std::string& path() const { return path_; }

  // Sends one message; on failure the connection is closed (Poll reconnects later).
  core::Status Send(const Message& m);
  // Every message waiting from hostd (non-blocking).
  std::vector<Message> Receive();

  uint64_t connects() const { return connects_; }
  uint64_t send_failures() const { return send_failures_; }
  uint64_t bad_messages() const { return bad_messages_; }
  uint64_t refusals() const { return refusals_; }
  const std::string& last_error() const { return last_error_; }

 private:
  std::string path_;
  int64_t retry_ns_;
  int64_t next_try_ns_ = 0;
  bool tried_ = false;
  LocalConnection conn_;
  uint64_t connects_ = 0;
  uint64_t send_failures_ = 0;
  uint64_t bad_messages_ = 0;
  uint64_t refusals_ = 0;
  std::string last_error_;
};

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_HOSTD_LINK_H_
