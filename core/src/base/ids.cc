#include "crux/core/base/ids.h"

#include <string>
#include <string_view>

#include "crux/core/base/text.h"

namespace crux::core {

std::string QuoteName(std::string_view name) {
  constexpr size_t kShown = 64;
  const bool cut = name.size() > kShown;
  return "'" + EscapeForTerminal(name.substr(0, kShown)) + (cut ? "...'" : "'");
}

}  // namespace crux::core
