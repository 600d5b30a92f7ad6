// Text safety: what counts as printable text, and how untrusted text is shown to humans; and Trim,
// the one trim of the text readers.
//
// Printable text is valid UTF-8 with no control characters: no C0 controls (U+0000-U+001F,
// including tab and newline), no DEL (U+007F), no C1 controls (U+0080-U+009F, which terminals
// also interpret), no bidirectional overrides/isolates (U+202A-U+202E, U+2066-U+2069: they make
// text display in another order than it is stored), no overlong encodings or surrogates.
//
// EscapeForTerminal makes any byte string safe to print on a terminal: printable characters stay
// as they are, a backslash becomes "\\", and every other byte is shown as "\xHH" (so ESC is
// "\x1b" and a newline cannot start a forged line). The result is printable ASCII plus the
// printable multi-byte characters of the input.
//
// Pure functions, thread-safe.
#ifndef CRUX_CORE_BASE_TEXT_H_
#define CRUX_CORE_BASE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace crux::core {

// Byte offset of the first character that is not printable (see above); npos when all are.
size_t FirstUnprintable(std::string_view text);
inline bool IsPrintableText(std::string_view text) {
  return FirstUnprintable(text) == std::string_view::npos;
}

// See the file comment.
std::string EscapeForTerminal(std::string_view text);

// `text` without the blanks (spaces and tabs) at either end: a view into `text`. Line endings are
// the caller's: a reader of CRLF text drops the '\r' of a line before trimming it.
std::string_view Trim(std::string_view text);

}  // namespace crux::core

#endif  // CRUX_CORE_BASE_TEXT_H_
