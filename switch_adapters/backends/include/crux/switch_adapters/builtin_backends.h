// The switch backends compiled into this build, by name: "sonic" (only when built with hiredis,
// CMake option CRUX_WITH_SONIC), "file", "log". crux-switch-agent picks its backend here.
//
// Thread-safety: the registry is built once, on first use (thread-safe static), then immutable.
#ifndef CRUX_SWITCH_ADAPTERS_BUILTIN_BACKENDS_H_
#define CRUX_SWITCH_ADAPTERS_BUILTIN_BACKENDS_H_

#include "crux/switch_adapters/registry.h"

namespace crux::switch_adapters {

const BackendRegistry& BuiltinBackends();

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_BUILTIN_BACKENDS_H_
