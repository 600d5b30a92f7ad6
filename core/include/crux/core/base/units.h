// Strong unit types used throughout core/: time, data volume, bandwidth and computation.
//
// Conversions to and from plain numbers happen only at the edges (YAML, protobuf, JSON). Inside
// core/ a duration is never a bare double of seconds and a rate is never a bare double.
//
//   Duration  - signed 64-bit nanoseconds (range +-292 years).
//   Bytes     - signed 64-bit byte count (negative values are representable so that differences
//               are well defined; validated inputs are >= 0).
//   Bandwidth - signed 64-bit bits per second (400 Gbps = 4e11 fits comfortably).
//   Flops     - double floating-point operations (W_j reaches 1e18 and beyond).
//
// All types are trivially copyable value types and thread-compatible.
#ifndef CRUX_CORE_BASE_UNITS_H_
#define CRUX_CORE_BASE_UNITS_H_

#include <cmath>
#include <cstdint>
#include <limits>

namespace crux::core {

class Duration {
 public:
  constexpr Duration() = default;

  static constexpr Duration Nanos(int64_t ns) { return Duration(ns); }
  static constexpr Duration Micros(int64_t us) { return Duration(us * 1000); }
  static constexpr Duration Millis(int64_t ms) { return Duration(ms * 1000 * 1000); }
  // Rounds to the nearest nanosecond; saturates at Infinite() for huge or infinite inputs.
  static Duration Seconds(double s) {
    double ns = std::round(s * 1e9);
    if (!(ns < 9.2e18)) return Infinite();
    if (ns < -9.2e18) return Duration(std::numeric_limits<int64_t>::min());
    return Duration(static_cast<int64_t>(ns));
  }
  static constexpr Duration Zero() { return Duration(0); }
  static constexpr Duration Infinite() { return Duration(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t nanos() const { return ns_; }
  constexpr double ToSeconds() const { return static_cast<double>(ns_) * 1e-9; }
  constexpr double ToMillis() const { return static_cast<double>(ns_) * 1e-6; }
  constexpr bool IsInfinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  constexpr Duration operator+(Duration o) const { return Duration(ns_ + o.ns_); }
  constexpr Duration operator-(Duration o) const { return Duration(ns_ - o.ns_); }
  constexpr Duration& operator+=(Duration o) {
    ns_ += o.ns_;
    return *this;
  }
  constexpr Duration& operator-=(Duration o) {
    ns_ -= o.ns_;
    return *this;
  }
  Duration operator*(double f) const { return Seconds(ToSeconds() * f); }
  constexpr double operator/(Duration o) const {
    return static_cast<double>(ns_) / static_cast<double>(o.ns_);
  }

  friend constexpr bool operator==(Duration a, Duration b) { return a.ns_ == b.ns_; }
  friend constexpr bool operator!=(Duration a, Duration b) { return a.ns_ != b.ns_; }
  friend constexpr bool operator<(Duration a, Duration b) { return a.ns_ < b.ns_; }
  friend constexpr bool operator<=(Duration a, Duration b) { return a.ns_ <= b.ns_; }
  friend constexpr bool operator>(Duration a, Duration b) { return a.ns_ > b.ns_; }
  friend constexpr bool operator>=(Duration a, Duration b) { return a.ns_ >= b.ns_; }

 private:
  constexpr explicit Duration(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

class Bytes {
 public:
  constexpr Bytes() = default;
  static constexpr Bytes Of(int64_t b) { return Bytes(b); }
  static constexpr Bytes KiB(int64_t v) { return Bytes(v << 10); }
  static constexpr Bytes MiB(int64_t v) { return Bytes(v << 20); }
  static constexpr Bytes GiB(int64_t v) { return Bytes(v << 30); }
  // Rounds to the nearest byte; saturates at the int64 range.
  static Bytes FromDouble(double b) {
    double r = std::round(b);
    if (!(r < 9.2e18)) return Bytes(std::numeric_limits<int64_t>::max());
    if (r < -9.2e18) return Bytes(std::numeric_limits<int64_t>::min());
    return Bytes(static_cast<int64_t>(r));
  }

  constexpr int64_t count() const { return b_; }
  constexpr double ToDouble() const { return static_cast<double>(b_); }
  constexpr double ToBits() const { return static_cast<double>(b_) * 8.0; }

  constexpr Bytes operator+(Bytes o) const { return Bytes(b_ + o.b_); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(b_ - o.b_); }
  constexpr Bytes& operator+=(Bytes o) {
    b_ += o.b_;
    return *this;
  }
  Bytes operator*(double f) const { return FromDouble(ToDouble() * f); }

  friend constexpr bool operator==(Bytes a, Bytes b) { return a.b_ == b.b_; }
  friend constexpr bool operator!=(Bytes a, Bytes b) { return a.b_ != b.b_; }
  friend constexpr bool operator<(Bytes a, Bytes b) { return a.b_ < b.b_; }
  friend constexpr bool operator<=(Bytes a, Bytes b) { return a.b_ <= b.b_; }
  friend constexpr bool operator>(Bytes a, Bytes b) { return a.b_ > b.b_; }
  friend constexpr bool operator>=(Bytes a, Bytes b) { return a.b_ >= b.b_; }

 private:
  constexpr explicit Bytes(int64_t b) : b_(b) {}
  int64_t b_ = 0;
};

class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth BitsPerSec(int64_t bps) { return Bandwidth(bps); }
  // Rounds to the nearest bit per second.
  static Bandwidth Gbps(double gbps) {
    return Bandwidth(static_cast<int64_t>(std::llround(gbps * 1e9)));
  }

  constexpr int64_t bits_per_sec() const { return bps_; }
  constexpr double ToBitsPerSec() const { return static_cast<double>(bps_); }
  constexpr double ToGbps() const { return static_cast<double>(bps_) * 1e-9; }
  constexpr bool IsPositive() const { return bps_ > 0; }

  friend constexpr bool operator==(Bandwidth a, Bandwidth b) { return a.bps_ == b.bps_; }
  friend constexpr bool operator!=(Bandwidth a, Bandwidth b) { return a.bps_ != b.bps_; }
  friend constexpr bool operator<(Bandwidth a, Bandwidth b) { return a.bps_ < b.bps_; }
  friend constexpr bool operator>(Bandwidth a, Bandwidth b) { return a.bps_ > b.bps_; }
  friend constexpr bool operator<=(Bandwidth a, Bandwidth b) { return a.bps_ <= b.bps_; }
  friend constexpr bool operator>=(Bandwidth a, Bandwidth b) { return a.bps_ >= b.bps_; }

 private:
  constexpr explicit Bandwidth(int64_t bps) : bps_(bps) {}
  int64_t bps_ = 0;
};

// Floating-point operations (a count of work, not a rate).
class Flops {
 public:
  constexpr Flops() = default;
  static constexpr Flops Of(double f) { return Flops(f); }
  static constexpr Flops Giga(double g) { return Flops(g * 1e9); }
  static constexpr Flops Tera(double t) { return Flops(t * 1e12); }
  constexpr double value() const { return f_; }

  friend constexpr bool operator==(Flops a, Flops b) { return a.f_ == b.f_; }
  friend constexpr bool operator<(Flops a, Flops b) { return a.f_ < b.f_; }
  friend constexpr bool operator>(Flops a, Flops b) { return a.f_ > b.f_; }

 private:
  constexpr explicit Flops(double f) : f_(f) {}
  double f_ = 0.0;
};

// Time to push `b` through a link of bandwidth `bw` (no latency).
// REQUIRES: bw.IsPositive(). Returns Infinite() on overflow.
inline Duration TransmitTime(Bytes b, Bandwidth bw) {
  return Duration::Seconds(b.ToBits() / bw.ToBitsPerSec());
}

// GPU intensity unit: FLOPs per second of bottleneck-link transmission (I_j = W_j / t_j).
// Kept as a plain double: it is a derived ranking key, never converted back to time or bytes.
using Intensity = double;

}  // namespace crux::core

#endif  // CRUX_CORE_BASE_UNITS_H_
