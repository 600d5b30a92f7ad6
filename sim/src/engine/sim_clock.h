// The simulated clock: time since the start of a run. It implements core::Clock, so the policy
// and the control loop (core::ControlLoop) read virtual time, never the wall clock.
//
// Internal to crux::sim. Thread-safety: none (one simulation, one thread).
#ifndef CRUX_SIM_SRC_ENGINE_SIM_CLOCK_H_
#define CRUX_SIM_SRC_ENGINE_SIM_CLOCK_H_

#include "crux/core/base/clock.h"
#include "crux/core/base/units.h"

namespace crux::sim::engine {

class SimClock final : public core::Clock {
 public:
  core::Duration Now() const override { return now_; }
  // Moves to the next event. REQUIRES: t >= Now(), except while a woken fast-forward group
  // catches up (SteadyStateDetector): then the clock goes back to where the group landed and
  // forward again, and only that group's events lie in between.
  void AdvanceTo(core::Duration t) { now_ = t; }

 private:
  core::Duration now_;
};

}  // namespace crux::sim::engine

#endif  // CRUX_SIM_SRC_ENGINE_SIM_CLOCK_H_
