#include "crux/core/base/clock.h"

#include <chrono>

namespace crux::core {

Duration SteadyClock::Now() const {
  return Duration::Nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count());
}

const SteadyClock& SteadyClock::Instance() {
  static const SteadyClock kClock;
  return kClock;
}

}  // namespace crux::core
