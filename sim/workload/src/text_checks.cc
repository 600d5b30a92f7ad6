#include "text_checks.h"

#include "crux/core/text.h"

namespace crux::sim::workload::internal {

std::string TextProblem(std::string_view s, size_t max) {
  if (const size_t at = core::FirstUnprintable(s); at != std::string_view::npos) {
    return "must be printable text (byte " + std::to_string(at + 1) +
           " starts a control character, an escape sequence, a bidirectional override or "
           "invalid UTF-8; got " +
           Shown(s) + ")";
  }
  if (s.size() > max) {
    return "is too long (" + std::to_string(s.size()) + " bytes, at most " + std::to_string(max) +
           ")";
  }
  return "";
}

std::string Shown(std::string_view s) {
  constexpr size_t kCut = 64;
  const bool cut = s.size() > kCut;
  return "'" + core::EscapeForTerminal(s.substr(0, kCut)) + (cut ? "...'" : "'");
}

}  // namespace crux::sim::workload::internal
