#include "crux/core/base/text.h"

#include <cstdint>

namespace crux::core {
namespace {

// Decodes one UTF-8 character at `s[i]`: its length (1-4) and code point, or 0 when invalid.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t min;
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    *cp = c & 0x1f;
    min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    *cp = c & 0x0f;
    min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    *cp = c & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    *cp = (*cp << 6) | (b(k) & 0x3f);
  }
  if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff)) return 0;
  return len;
}

bool Printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp >= 0x80 && cp <= 0x9f) return false;
  if (cp >= 0x202a && cp <= 0x202e) return false;
  if (cp >= 0x2066 && cp <= 0x2069) return false;
  return true;
}

}  // namespace

size_t FirstUnprintable(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0 || !Printable(cp)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string EscapeForTerminal(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len > 0 && Printable(cp)) {
      if (cp == '\\') {
        out += "\\\\";
      } else {
        out.append(text.substr(i, len));
      }
      i += len;
      continue;
    }
    // One byte at a time: an invalid sequence or a control character.
    const size_t n = len == 0 ? 1 : len;
    for (size_t k = 0; k < n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    i += n;
  }
  return out;
}

std::string_view Trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace crux::core
