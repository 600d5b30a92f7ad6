#include "crux/daemon/rpc/refusal_book.h"

#include <spdlog/spdlog.h>

namespace crux::daemon {
namespace {

// Why each refusal reason happens, for the log.
const char* RefusalMeaning(const std::string& reason) {
  if (reason == "unauthorised_key") return "CURVE client keys not in the authorised keys";
  if (reason == "mechanism") {
    return "peers without CURVE (plain ZeroMQ) on the CURVE endpoint, or CURVE peers on a plain "
           "one";
  }
  if (reason == "handshake") {
    return "failed CURVE handshakes (a client using the wrong server public key, or a plain "
           "client that hung up)";
  }
  if (reason == "identity") {
    return "messages on a routing id bound to another CURVE key (an identity takeover attempt?)";
  }
  if (reason == "role") {
    return "keys used outside their role (a job key as a switch or host agent, a switch or host "
           "key for another switch or host, a switch key for a job)";
  }
  if (reason == "job_owner") return "keys speaking for a job another key registered";
  if (reason == "connection") {
    return "messages for a job from a connection other than the one that registered it";
  }
  if (reason == "quota") return "registrations beyond a job quota (limits.*)";
  return "refusals";
}

}  // namespace

void RefusalBook::Count(const std::string& reason, uint64_t n) {
  if (n == 0) return;
  counts_[reason] += n;
  if (metrics_) metrics_->AddRefusal(reason, n);
}

void RefusalBook::Log(int64_t now_ms) {
  for (const auto& [reason, total] : counts_) {
    LogState& l = log_[reason];
    if (total == l.logged) continue;
    if (l.last_ms >= 0 && now_ms - l.last_ms < kRefusalLogEveryMs) continue;
    spdlog::warn("refused {} {} (reason '{}'){}; {} since start", total - l.logged,
                 RefusalMeaning(reason), reason,
                 l.last_ms < 0 ? "" : fmt::format(" in the last {} s", (now_ms - l.last_ms) / 1000),
                 total);
    l.logged = total;
    l.last_ms = now_ms;
  }
}

}  // namespace crux::daemon
