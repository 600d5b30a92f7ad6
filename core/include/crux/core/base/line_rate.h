// What a link can carry, for the plausibility checks of counters read from devices (issue #31:
// switch port counters in crux-switch-agent, NIC hw_counters in crux-hostd, and cruxd's check of
// the deltas they report). A counter delta above what the port could carry at line rate in the
// interval is not a measurement (a garbled or torn read, a counter that was rewritten) and is
// dropped instead of being turned into a fault signal.
//
// Header only; pure functions of values (thread-safe).
#ifndef CRUX_CORE_BASE_LINE_RATE_H_
#define CRUX_CORE_BASE_LINE_RATE_H_

#include <cstdint>

#include "crux/core/base/units.h"

namespace crux::core {

// The smallest Ethernet frame on the wire: 64 bytes of frame + 8 of preamble + 12 of inter-frame
// gap = 84 bytes = 672 bits. No port carries more frames per second than line rate / 672 bits.
inline constexpr int64_t kMinFrameBitsOnWire = 672;

// The fastest standard Ethernet port (1.6 Tb/s, IEEE 802.3dj): the line rate assumed for a port
// whose speed the device does not tell. Generous on purpose: it still refuses 2^64-1.
inline constexpr Bandwidth kFastestPortRate = Bandwidth::BitsPerSec(1'600'000'000'000);

// The most frames a port of `rate` carries in `interval` (both >= 0), as a double (no overflow).
inline double MaxFramesAtLineRate(Bandwidth rate, Duration interval) {
  if (!rate.IsPositive() || interval <= Duration::Zero()) return 0;
  return rate.ToBitsPerSec() * interval.ToSeconds() / static_cast<double>(kMinFrameBitsOnWire);
}

}  // namespace crux::core

#endif  // CRUX_CORE_BASE_LINE_RATE_H_
