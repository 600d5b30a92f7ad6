#include "crux/switch_adapters/log_adapter.h"

#include <spdlog/spdlog.h>

#include <utility>
#include <vector>

#include "crux/switch_adapters/state_json.h"

namespace crux::switch_adapters {

LogAdapter::LogAdapter(std::string switch_name, std::shared_ptr<spdlog::logger> logger)
    : switch_name_(std::move(switch_name)),
      logger_(logger ? std::move(logger) : spdlog::default_logger()) {}

Capabilities LogAdapter::capabilities() const {
  Capabilities c;
  c.backend = "log";
  c.pfc = true;
  c.transactional = true;  // Nothing to tear.
  return c;
}

core::Result<ApplyResult> LogAdapter::Apply(const core::SwitchQosState& desired) {
  CRUX_RETURN_IF_ERROR(core::ValidateSwitchQosState(desired));
  if (desired.switch_name != switch_name_) {
    return core::InvalidArgumentError("switch_name: state is for '" + desired.switch_name +
                                      "', this adapter is '" + switch_name_ + "'");
  }
  core::SwitchQosState empty;
  empty.switch_name = switch_name_;
  std::vector<std::string> diff = DescribeDifferences(last_ ? *last_ : empty, desired);
  ApplyResult result;
  for (const std::string& line : diff) {
    logger_->info("[dry-run] switch {}: would set {}", switch_name_, line);
    result.operations.push_back(line);
  }
  result.writes = static_cast<int>(diff.size());
  if (diff.empty()) logger_->debug("[dry-run] switch {}: already up to date", switch_name_);
  last_ = desired;
  return result;
}

core::Result<core::SwitchQosState> LogAdapter::ReadBack() {
  if (!last_) return core::NotFoundError("log adapter " + switch_name_ + ": nothing applied yet");
  return *last_;
}

Backend LogBackend() {
  Backend b;
  b.name = "log";
  b.summary = "dry run: logs what it would apply";
  b.create = [](const BackendConfig& c) -> core::Result<std::unique_ptr<SwitchAdapter>> {
    return std::unique_ptr<SwitchAdapter>(std::make_unique<LogAdapter>(c.switch_name));
  };
  return b;
}

}  // namespace crux::switch_adapters
