#include "crux/core/base/backoff.h"

#include <algorithm>
#include <cmath>

#include "crux/core/base/random.h"

namespace crux::core {

Status ValidateBackoffOptions(const BackoffOptions& o) {
  if (o.initial <= Duration::Zero()) {
    return InvalidArgumentError("backoff.initial: must be > 0");
  }
  if (o.max < o.initial) return InvalidArgumentError("backoff.max: must be >= backoff.initial");
  if (!std::isfinite(o.multiplier) || o.multiplier < 1) {
    return InvalidArgumentError("backoff.multiplier: must be finite and >= 1");
  }
  if (!std::isfinite(o.jitter) || o.jitter < 0 || o.jitter >= 1) {
    return InvalidArgumentError("backoff.jitter: must be in [0, 1)");
  }
  if (o.max_attempts < 0) return InvalidArgumentError("backoff.max_attempts: must be >= 0");
  return Status::Ok();
}

ExponentialBackoff::ExponentialBackoff(BackoffOptions o) : options_(o), rng_state_(o.seed) {
  if (options_.initial <= Duration::Zero()) options_.initial = Duration::Nanos(1);
  if (options_.max < options_.initial) options_.max = options_.initial;
  if (!std::isfinite(options_.multiplier) || options_.multiplier < 1) options_.multiplier = 1;
  if (!std::isfinite(options_.jitter) || options_.jitter < 0) options_.jitter = 0;
  if (options_.jitter >= 1) options_.jitter = 0.999;
  options_.max_attempts = std::max(0, options_.max_attempts);
}

Duration ExponentialBackoff::Next() {
  const double initial_s = options_.initial.ToSeconds();
  const double max_s = options_.max.ToSeconds();
  // Exponent capped: beyond ~1100 doublings every delay is `max` anyway.
  const double exponent = std::min<double>(attempts_, 1100);
  const double grown = initial_s * std::pow(options_.multiplier, exponent);
  double delay_s = std::isfinite(grown) ? std::min(max_s, grown) : max_s;
  if (options_.jitter > 0) {
    rng_state_ = Mix64(rng_state_);
    const double u = static_cast<double>(rng_state_ >> 11) * 0x1.0p-53;  // [0, 1).
    delay_s *= 1 - options_.jitter * u;
  }
  if (attempts_ < (1 << 30)) ++attempts_;
  return std::max(Duration::Nanos(1), Duration::Seconds(delay_s));
}

}  // namespace crux::core
