// Checks for names and text read from workload files (traces, link events, models, scenarios).
// Ids (job ids, model names, host and node names) follow Crux's one name rule (crux/core/ids.h,
// core::IsValidName: 1-128 characters of [A-Za-z0-9._:/-]), which also keeps control
// characters and escape sequences out. Free text (descriptions, sources, paths) must be
// printable (crux/core/text.h: valid UTF-8, no control characters, no bidirectional overrides)
// and at most kMaxTextLength bytes. Untrusted text echoed in an error message goes through
// Shown, so that an error can never carry an escape sequence to the user's terminal.
//
// The Read* functions read one key of a YAML map (crux/textio/yaml.h, the one strict reader)
// with the workload files' rules: a required key that is absent is "<path>.<key>: missing
// required key"; an absent optional key leaves *out unchanged. ReadText also applies the text
// rule above ("must be a non-empty string", TextProblem).
//
// Thread-safety: pure functions.
#ifndef CRUX_SIM_WORKLOAD_SRC_TEXT_CHECKS_H_
#define CRUX_SIM_WORKLOAD_SRC_TEXT_CHECKS_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "crux/core/base/status.h"
#include "crux/textio/yaml.h"

namespace crux::sim::workload::internal {

inline constexpr size_t kMaxTextLength = 4096;

// "" when `s` is a valid name, else what is wrong with it: "must be 1-128 characters of
// [A-Za-z0-9._:/-] (got 'a\x1b[31m')" or "is too long (300 bytes; a name is 1-128 characters
// of [A-Za-z0-9._:/-])".
std::string NameProblem(std::string_view s);
// "" when `s` is printable and at most `max` bytes long, else what is wrong with it, e.g.
// "must be printable text (byte 3 starts a control character, an escape sequence, a
// bidirectional override or invalid UTF-8; got '...')" or "is too long (5000 bytes, at most
// 4096)".
std::string TextProblem(std::string_view s, size_t max);
// `s` quoted for an error message: '...' with unprintable bytes as \xHH (core::QuoteName: cut
// after 64 bytes).
std::string Shown(std::string_view s);

core::Status ReadText(const textio::YamlNode& map, const std::string& path, std::string_view key,
                      bool required, std::string* out);
core::Status ReadReal(const textio::YamlNode& map, const std::string& path, std::string_view key,
                      bool required, textio::RealRange range, double* out);
core::Status ReadInteger(const textio::YamlNode& map, const std::string& path, std::string_view key,
                         bool required, textio::IntRange range, int64_t* out);

}  // namespace crux::sim::workload::internal

#endif  // CRUX_SIM_WORKLOAD_SRC_TEXT_CHECKS_H_
