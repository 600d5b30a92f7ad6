// The allocator cruxd is linked with (daemon/CMakeLists.txt: jemalloc unless CRUX_JEMALLOC=OFF
// or a sanitizer build), for the start-up log. Part of the cruxd executable only.
#ifndef CRUX_DAEMON_ALLOCATOR_H_
#define CRUX_DAEMON_ALLOCATOR_H_

#include <string>

namespace crux::daemon {

// "jemalloc 5.3.0-0-g..." (from mallctl "version") or "system malloc".
std::string AllocatorName();

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_ALLOCATOR_H_
