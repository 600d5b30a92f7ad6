// ExponentialBackoff: the one retry schedule of Crux (client session re-registration, switch
// agent hello/reconnect and device re-apply, loadgen). Pure: it never reads a clock or sleeps;
// the caller asks for the next delay and schedules the retry on its own timer.
//
// Schedule: attempt n (0-based, counted since the last Reset) waits
//   min(max, initial * multiplier^n), then jitter: the delay is scaled by a factor drawn uniformly
//   from [1 - jitter, 1] with a SplitMix64 stream seeded by `seed` (so two agents restarting
//   together do not retry in lock-step, and a test with a given seed sees a fixed sequence).
// `max_attempts` > 0 bounds the attempts: Exhausted() turns true once that many delays have been
// handed out (the caller then gives up with its last error); 0 = retry forever.
//
// Thread-compatible value type.
#ifndef CRUX_CORE_BASE_BACKOFF_H_
#define CRUX_CORE_BASE_BACKOFF_H_

#include <cstdint>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

namespace crux::core {

struct BackoffOptions {
  Duration initial = Duration::Millis(100);  // > 0.
  Duration max = Duration::Millis(10000);    // >= initial.
  double multiplier = 2;                     // >= 1, finite.
  double jitter = 0;                         // [0, 1): fraction of the delay that is random.
  int max_attempts = 0;                      // >= 0; 0 = unlimited.
  uint64_t seed = 1;

  friend bool operator==(const BackoffOptions&, const BackoffOptions&) = default;
};

// kInvalidArgument naming the field ("backoff.max: must be >= backoff.initial").
Status ValidateBackoffOptions(const BackoffOptions& o);

class ExponentialBackoff {
 public:
  // REQUIRES: ValidateBackoffOptions(o).ok() (invalid values are clamped into range).
  explicit ExponentialBackoff(BackoffOptions o = {});

  // The delay before the next attempt; counts one attempt.
  Duration Next();
  // After a success: the next failure starts again from `initial`.
  void Reset() { attempts_ = 0; }

  int attempts() const { return attempts_; }
  bool Exhausted() const { return options_.max_attempts > 0 && attempts_ >= options_.max_attempts; }
  const BackoffOptions& options() const { return options_; }

 private:
  BackoffOptions options_;
  int attempts_ = 0;
  uint64_t rng_state_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_BASE_BACKOFF_H_
