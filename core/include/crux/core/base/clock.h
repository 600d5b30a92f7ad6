// Clock: the only way core/ reads time. The daemon and the CLI pass a SteadyClock; tests and the
// simulator pass their own (e.g. FakeClock in tests, virtual time in the simulator).
// Implementations must be safe to call from the thread that owns the caller.
#ifndef CRUX_CORE_BASE_CLOCK_H_
#define CRUX_CORE_BASE_CLOCK_H_

#include "crux/core/base/units.h"

namespace crux::core {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time since an arbitrary epoch. Never goes backwards.
  virtual Duration Now() const = 0;
};

// std::chrono::steady_clock. Thread-safe.
class SteadyClock final : public Clock {
 public:
  Duration Now() const override;
  // A process-wide instance (stateless, so sharing is safe).
  static const SteadyClock& Instance();
};

// A manually advanced clock for tests. Not thread-safe.
class FakeClock final : public Clock {
 public:
  Duration Now() const override { return now_; }
  void Advance(Duration d) { now_ += d; }
  void Set(Duration t) { now_ = t; }

 private:
  Duration now_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_BASE_CLOCK_H_
