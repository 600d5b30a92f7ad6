// Checks for names and text read from workload files (traces, link events, models, scenarios):
// ids (job ids, model names, host names) must be printable text (crux/core/text.h: valid UTF-8,
// no control characters, no bidirectional overrides) of at most sim::kMaxNameLength bytes; free
// text (descriptions, sources, paths) printable and at most kMaxTextLength bytes. Untrusted text
// echoed in an error message goes through Shown, so that an error can never carry an escape
// sequence to the user's terminal.
//
// Thread-safety: pure functions.
#ifndef CRUX_SIM_WORKLOAD_SRC_TEXT_CHECKS_H_
#define CRUX_SIM_WORKLOAD_SRC_TEXT_CHECKS_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace crux::sim::workload::internal {

inline constexpr size_t kMaxTextLength = 4096;

// "" when `s` is printable and at most `max` bytes long, else what is wrong with it, e.g.
// "must be printable text (byte 3 is a control character, a bidirectional override or invalid
// UTF-8)" or "is too long (300 bytes, at most 128)".
std::string TextProblem(std::string_view s, size_t max);
// `s` quoted for an error message: '...' with unprintable bytes as \xHH (core::EscapeForTerminal),
// cut after 64 bytes.
std::string Shown(std::string_view s);

}  // namespace crux::sim::workload::internal

#endif  // CRUX_SIM_WORKLOAD_SRC_TEXT_CHECKS_H_
