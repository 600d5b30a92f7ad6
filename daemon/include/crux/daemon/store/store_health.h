// StoreHealth: the outcome of every store write after start-up, in one place. A failure is
// logged, counted (crux_errors_total{endpoint="store"}, crux_store_healthy 0), kept for `cruxctl
// status` and told to the listener (systemd's status line); the first success after a failure
// says the store works again. The services record each write's status here as its StoreWriter
// `done` runs.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_STORE_STORE_HEALTH_H_
#define CRUX_DAEMON_STORE_STORE_HEALTH_H_

#include <functional>
#include <string>

#include "crux/core/base/status.h"
#include "crux/daemon/runtime/metrics.h"

namespace crux::daemon {

class StoreHealth {
 public:
  // `metrics` may be null (no metrics); else it must outlive this.
  explicit StoreHealth(Metrics* metrics) : metrics_(metrics) {}
  // Called with "" when the store works again after a failure, else with the failure.
  void SetListener(std::function<void(const std::string& error)> f) { listener_ = std::move(f); }
  // Records the outcome of a write named `what` ("apply_plan"); returns `s`.
  core::Status Stored(core::Status s, const char* what);
  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }

 private:
  Metrics* metrics_;
  std::function<void(const std::string&)> listener_;
  std::string error_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STORE_STORE_HEALTH_H_
