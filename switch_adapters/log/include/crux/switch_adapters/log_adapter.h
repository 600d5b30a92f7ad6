// LogAdapter: dry run. Apply() logs (spdlog, info level) the differences between the last
// "applied" state and the desired one, one line per changed entry, and remembers the desired
// state; ReadBack() returns it. Nothing outside the process changes. An apply with nothing to
// change logs one line at debug level only (the agent re-applies on every reconcile).
//
// Thread-safety: not thread-safe (see adapter.h).
#ifndef CRUX_SWITCH_ADAPTERS_LOG_ADAPTER_H_
#define CRUX_SWITCH_ADAPTERS_LOG_ADAPTER_H_

#include <memory>
#include <optional>
#include <string>

#include "crux/switch_adapters/adapter.h"
#include "crux/switch_adapters/registry.h"

namespace spdlog {
class logger;
}

namespace crux::switch_adapters {

class LogAdapter final : public SwitchAdapter {
 public:
  // `logger` null: spdlog's default logger.
  explicit LogAdapter(std::string switch_name, std::shared_ptr<spdlog::logger> logger = nullptr);

  Capabilities capabilities() const override;
  // writes = number of changed entries (the lines logged); 0 when nothing changes.
  core::Result<ApplyResult> Apply(const core::SwitchQosState& desired) override;
  // kNotFound before the first Apply.
  core::Result<core::SwitchQosState> ReadBack() override;
  core::Status Health() override { return core::Status::Ok(); }

 private:
  std::string switch_name_;
  std::shared_ptr<spdlog::logger> logger_;
  std::optional<core::SwitchQosState> last_;
};

// The registry entry of this backend (registry.h): no parameters.
Backend LogBackend();

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_LOG_ADAPTER_H_
