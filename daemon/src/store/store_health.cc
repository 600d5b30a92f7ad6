#include "crux/daemon/store/store_health.h"

#include <spdlog/spdlog.h>

namespace crux::daemon {

core::Status StoreHealth::Stored(core::Status s, const char* what) {
  if (s.ok()) {
    if (!error_.empty()) {
      spdlog::info("store works again ({} succeeded; last failure was: {})", what, error_);
      error_.clear();
      if (metrics_) metrics_->SetStoreHealthy(true);
      if (listener_) listener_("");
    }
    return s;
  }
  const std::string error = std::string(what) + ": " + s.ToString();
  spdlog::error("store failed: {}", error);
  if (metrics_) {
    metrics_->AddError("store", what);
    metrics_->SetStoreHealthy(false);
  }
  if (error != error_) {
    error_ = error;
    if (listener_) listener_(error_);
  }
  return s;
}

}  // namespace crux::daemon
