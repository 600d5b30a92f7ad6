#include "crux/switch_adapters/builtin_backends.h"

#include <cstdlib>

#include "crux/switch_adapters/file_adapter.h"
#include "crux/switch_adapters/log_adapter.h"
#ifdef CRUX_WITH_SONIC
#include "crux/switch_adapters/sonic_adapter.h"
#endif

namespace crux::switch_adapters {

const BackendRegistry& BuiltinBackends() {
  static const BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
    // The descriptors are static data: a failure here is a programming error.
    auto add = [r](Backend b) {
      if (!r->Add(std::move(b)).ok()) std::abort();
    };
#ifdef CRUX_WITH_SONIC
    add(SonicBackend());
#endif
    add(FileBackend());
    add(LogBackend());
    return r;
  }();
  return *registry;
}

}  // namespace crux::switch_adapters
