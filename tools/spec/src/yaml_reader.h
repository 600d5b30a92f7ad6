// Internal helpers for strict YAML reading (not part of crux::spec's public API).
//
// Every reader takes the node and its YAML key path ("topology.links[3].gbps") and returns a
// Status whose message starts with that path and ends with yaml-cpp's position when known:
//   "topology.links[3].gbps: must be > 0 (got -1) (line 12, column 11)"
// Lines and columns are 1-based. Numbers must be plain (unquoted) scalars; "got" quotes the text
// as written. No function here throws: yaml-cpp exceptions are caught and converted.
//
// Thread-safety: pure functions.
#ifndef CRUX_SPEC_SRC_YAML_READER_H_
#define CRUX_SPEC_SRC_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "crux/core/status.h"

namespace crux::spec::internal {

// " (line L, column C)" for a node with a known position, "" otherwise.
std::string Position(const YAML::Node& node);

// kInvalidArgument (or `code`) "<path>: <what><Position(node)>"; an empty path (the document
// root) reads "document". A message that is not printable text (core/text.h: keys or scalars
// echoed from the file with control characters) is passed through core::EscapeForTerminal;
// names quoted with core::QuoteName are escaped already.
core::Status ErrorAt(const YAML::Node& node, const std::string& path, const std::string& what,
                     core::StatusCode code = core::StatusCode::kInvalidArgument);

// "a.b" (or "b" when `path` is empty) and "a[3]".
std::string Child(const std::string& path, std::string_view key);
std::string Element(const std::string& path, size_t index);

// Short description of a node for "got ..." messages: the scalar text, "null", "a list", "a map".
std::string Describe(const YAML::Node& node);

// Parses one YAML document. An empty document is a null node. Syntax errors become
// kInvalidArgument "invalid YAML: <reason> (line L, column C)".
core::Result<YAML::Node> LoadYaml(std::string_view text);

// OK iff `node` is a map whose keys are distinct scalars listed in `allowed`.
// Errors: "<path>: must be a map (got ...)", "<path>.<key>: unknown key (allowed: a, b)",
// "<path>.<key>: duplicate key".
core::Status CheckMap(const YAML::Node& node, const std::string& path,
                      std::initializer_list<std::string_view> allowed);
// OK iff `node` is a sequence.
core::Status CheckSequence(const YAML::Node& node, const std::string& path);

// Scalar conversions. Strings accept plain or quoted scalars; numbers and booleans only plain
// ones. AsNumber returns NaN and infinities as parsed (callers apply the bounds below).
core::Result<std::string> AsString(const YAML::Node& node, const std::string& path);
core::Result<int64_t> AsInteger(const YAML::Node& node, const std::string& path);
core::Result<double> AsNumber(const YAML::Node& node, const std::string& path);
core::Result<bool> AsBool(const YAML::Node& node, const std::string& path);

// Bounds for real-valued fields. NaN and infinities are always rejected.
enum class Bound {
  kAny,          // Any finite number.
  kPositive,     // > 0.
  kNonNegative,  // >= 0.
};
core::Result<double> AsBoundedNumber(const YAML::Node& node, const std::string& path, Bound bound);
// An integer >= min (and <= max).
core::Result<int64_t> AsBoundedInteger(const YAML::Node& node, const std::string& path, int64_t min,
                                       int64_t max = INT64_MAX);

// `map[key]` without inserting (undefined node when absent). REQUIRES: CheckMap(map) passed.
YAML::Node Get(const YAML::Node& map, std::string_view key);
bool Has(const YAML::Node& map, std::string_view key);
// "<path>.<key>: missing required key" at the map's position.
core::Status MissingKey(const YAML::Node& map, const std::string& path, std::string_view key);

// Optional fields of a checked map: an absent key leaves *out unchanged and returns OK.
core::Status OptionalInt(const YAML::Node& map, const std::string& path, std::string_view key,
                         int min, int* out);
core::Status OptionalNumber(const YAML::Node& map, const std::string& path, std::string_view key,
                            Bound bound, double* out);
core::Status OptionalBool(const YAML::Node& map, const std::string& path, std::string_view key,
                          bool* out);
core::Status OptionalString(const YAML::Node& map, const std::string& path, std::string_view key,
                            std::string* out);

}  // namespace crux::spec::internal

#endif  // CRUX_SPEC_SRC_YAML_READER_H_
