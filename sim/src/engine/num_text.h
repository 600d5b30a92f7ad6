// Numbers in the engine's error messages ("%g": 12.5, 1e+09).
//
// Internal to crux::sim. Thread-safe.
#ifndef CRUX_SIM_SRC_ENGINE_NUM_TEXT_H_
#define CRUX_SIM_SRC_ENGINE_NUM_TEXT_H_

#include <cstdio>
#include <string>

namespace crux::sim::internal {

inline std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_ENGINE_NUM_TEXT_H_
