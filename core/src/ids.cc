#include "crux/core/ids.h"

#include <string>
#include <string_view>

namespace crux::core {

std::string EscapeForDisplay(std::string_view text, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out;
  out.reserve(text.size() + (cut ? 3 : 0));
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  if (cut) out += "...";
  return out;
}

}  // namespace crux::core
