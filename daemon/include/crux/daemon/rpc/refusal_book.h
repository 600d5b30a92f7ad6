// RefusalBook: the security refusals by reason ("unauthorised_key", "role", "quota", ...): the
// gateway's and the transports' (Daemon::RefreshMetrics copies the transports' counters in).
// Each is counted (crux_refusals_total{reason}, `cruxctl status`) and logged at most once per
// kRefusalLogEveryMs per reason, so a misbehaving peer cannot flood the log.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_RPC_REFUSAL_BOOK_H_
#define CRUX_DAEMON_RPC_REFUSAL_BOOK_H_

#include <cstdint>
#include <map>
#include <string>

#include "crux/daemon/runtime/metrics.h"

namespace crux::daemon {

inline constexpr int64_t kRefusalLogEveryMs = 10000;

class RefusalBook {
 public:
  // `metrics` may be null; else it must outlive the book.
  explicit RefusalBook(Metrics* metrics) : metrics_(metrics) {}
  void Count(const std::string& reason, uint64_t n = 1);
  // Logs the reasons whose count moved, at most once per kRefusalLogEveryMs each.
  void Log(int64_t now_ms);
  const std::map<std::string, uint64_t>& counts() const { return counts_; }

 private:
  struct LogState {
    uint64_t logged = 0;   // Count at the last log line.
    int64_t last_ms = -1;  // Loop time of the last log line.
  };
  Metrics* metrics_;
  std::map<std::string, uint64_t> counts_;
  std::map<std::string, LogState> log_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_RPC_REFUSAL_BOOK_H_
