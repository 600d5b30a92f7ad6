#include <string>

#include "crux/switch_adapters/adapter.h"

namespace crux::switch_adapters {

core::Status CheckCapabilities(const Capabilities& caps, const core::SwitchQosState& state) {
  const std::string of = " of the " + (caps.backend.empty() ? "" : caps.backend + " ") + "backend";
  auto beyond = [&](const std::string& field, int queue) {
    return core::FailedPreconditionError(field + ": queue " + std::to_string(queue) +
                                         " is beyond the " + std::to_string(caps.queues) +
                                         " queues per port" + of);
  };
  for (const auto& [tc, queue] : state.tc_to_queue) {
    if (queue >= caps.queues) {
      return beyond("switch_state.tc_to_queue[" + std::to_string(tc) + "]", queue);
    }
  }
  for (const core::QueueScheduler& s : state.schedulers) {
    const std::string field = "switch_state.schedulers[q" + std::to_string(s.queue) + "]";
    if (s.queue >= caps.queues) return beyond(field, s.queue);
    if (s.type == core::SchedulerType::kStrict && !caps.strict_priority) {
      return core::FailedPreconditionError(field + ": STRICT scheduling is not supported" + of);
    }
    if (s.type == core::SchedulerType::kDwrr && !caps.dwrr) {
      return core::FailedPreconditionError(field + ": DWRR scheduling is not supported" + of);
    }
  }
  return core::Status::Ok();
}

}  // namespace crux::switch_adapters
