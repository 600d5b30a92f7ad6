// The strict YAML reader of every Crux YAML input (planner topology and job specs, the cruxd
// config, simulator scenarios and model catalogs). yaml-cpp parses; its exceptions are caught
// here and never escape; callers see only this header (they neither include nor link yaml-cpp).
//
// ParseYaml turns a document into a YamlNode tree: maps keep their entries in file order,
// duplicate keys included (CheckMap refuses them), and every node keeps its position and, for
// scalars, whether it was written plain (unquoted, untagged). Aliases are expanded; a document
// that expands beyond its node budget (an "alias bomb") or nests deeper than the depth limit is
// refused, so a hostile file cannot exhaust memory or the stack. More than one document in a
// file is refused (yaml-cpp alone would silently read the first).
//
// Strictness, for the readers below: only plain scalars are numbers or booleans ("8" in quotes
// is a string, so `levels: '8'` is "must be an integer (got '8')"); numbers follow the one
// grammar of crux/textio/number.h (no 0x10, no +1, no leading zeros; .nan / inf are "must be a
// finite number"); booleans are true / false (also True, TRUE, False, FALSE: YAML 1.2's core
// schema; YAML 1.1's yes / no / on / off are refused); unknown and duplicate keys are errors.
//
// Every error is kInvalidArgument (unless a reader says otherwise) with the message
//   "<YAML path>: <what> (line L, column C)"
// e.g. "topology.links[3].gbps: must be > 0 (got -1) (line 12, column 11)". The path is dotted
// keys and [index]es from the document root ("document" for the root itself); lines and columns
// are 1-based and left out when unknown. "got" quotes the text as written (quoted scalars in
// '...'). A message holding unprintable text (keys or scalars echoed from the file with control
// characters, crux/core/text.h) is escaped with core::EscapeForTerminal. Syntax errors read
// "invalid YAML: <yaml-cpp's reason> (line L, column C)".
//
// Thread-safety: YamlNode is an immutable value once parsed; all functions are pure.
#ifndef CRUX_TEXTIO_YAML_H_
#define CRUX_TEXTIO_YAML_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::textio {

class YamlNode {
 public:
  enum class Kind { kMissing, kNull, kScalar, kSequence, kMap };

  // A missing node: what Get returns for an absent key.
  YamlNode() = default;

  Kind kind() const { return kind_; }
  bool IsDefined() const { return kind_ != Kind::kMissing; }
  bool IsNull() const { return kind_ == Kind::kNull; }
  bool IsScalar() const { return kind_ == Kind::kScalar; }
  bool IsSequence() const { return kind_ == Kind::kSequence; }
  bool IsMap() const { return kind_ == Kind::kMap; }

  // Scalars: the text (after YAML unescaping) and whether it was written plain.
  const std::string& scalar() const { return scalar_; }
  bool plain() const { return plain_; }

  // 1-based position; 0 when unknown (missing nodes, an empty document).
  int line() const { return line_; }
  int column() const { return column_; }

  // Sequences: the number of items; maps: the number of entries (duplicates included).
  size_t size() const;
  // REQUIRES: IsSequence(), i < size().
  const YamlNode& item(size_t i) const { return children_[i]; }
  // REQUIRES: IsMap(), i < size().
  const YamlNode& key(size_t i) const { return children_[2 * i]; }
  const YamlNode& value(size_t i) const { return children_[2 * i + 1]; }

  // Maps: the value of the first entry whose key is the scalar `key`; a missing node when
  // absent or when this is not a map.
  const YamlNode& Get(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key).IsDefined(); }

 private:
  friend class YamlTreeBuilder;

  Kind kind_ = Kind::kMissing;
  bool plain_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string scalar_;
  std::vector<YamlNode> children_;  // Sequence items; map entries as key, value, key, ...
};

struct YamlLimits {
  // Nodes after alias expansion; 0 = 4 per input byte plus 1024 (more than any document
  // without aliases can hold).
  size_t max_nodes = 0;
  int max_depth = 256;  // Nesting of maps and sequences.
};

// Parses one YAML document. An empty document (or one holding only comments) is a null node.
core::Result<YamlNode> ParseYaml(std::string_view text, const YamlLimits& limits = {});

// ---- Paths and errors ----

// "a.b" ("b" when `path` is empty) and "a[3]".
std::string ChildPath(const std::string& path, std::string_view key);
std::string ElementPath(const std::string& path, size_t index);

// " (line L, column C)", or "" when the position is unknown.
std::string Position(const YamlNode& node);

// `code` "<path>: <what><Position(node)>" (path "" reads "document"), escaped when unprintable.
core::Status ErrorAt(const YamlNode& node, const std::string& path, const std::string& what,
                     core::StatusCode code = core::StatusCode::kInvalidArgument);

// A node for "got ..." messages: the plain scalar text, '<text>' for a quoted scalar, "null",
// "a list", "a map", "nothing" (missing).
std::string Describe(const YamlNode& node);

// ---- Structure ----

// OK iff `node` is a map whose keys are distinct scalars listed in `allowed`. Errors:
//   "<path>: must be a map (got ...)"
//   "<path>.<key>: unknown key (allowed: a, b, c)"   (in the order given)
//   "<path>.<key>: duplicate key"
//   "<path>: keys must be plain names (got a map)"
core::Status CheckMap(const YamlNode& node, const std::string& path,
                      std::span<const std::string_view> allowed);
inline core::Status CheckMap(const YamlNode& node, const std::string& path,
                             std::initializer_list<std::string_view> allowed) {
  return CheckMap(node, path, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}
// OK iff `node` is a sequence: "<path>: must be a list (got ...)".
core::Status CheckSequence(const YamlNode& node, const std::string& path);
// "<path>.<key>: missing required key", at the map's position.
core::Status MissingKey(const YamlNode& map, const std::string& path, std::string_view key);

// ---- Scalars ----

// Plain or quoted scalars: "<path>: must be a string (got a list)".
core::Result<std::string> AsString(const YamlNode& node, const std::string& path);
// Plain scalars of number.h's grammar: "must be an integer (got 2.5)", "must be an integer (got
// '8')", "integer out of range (got 99999999999999999999)".
core::Result<int64_t> AsInteger(const YamlNode& node, const std::string& path);
// Plain scalars of number.h's grammar, always finite: "must be a number (got fast)", "must be a
// finite number (got .nan)", "number out of range (got 1e999)".
core::Result<double> AsReal(const YamlNode& node, const std::string& path);
// "must be true or false (got yes)".
core::Result<bool> AsBool(const YamlNode& node, const std::string& path);

// An interval of integers. Describe(): ">= 1", "<= 7", "in [1, 64]" (only the bounds given).
struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();

  static IntRange AtLeast(int64_t lo) { return {lo, std::numeric_limits<int64_t>::max()}; }
  static IntRange Closed(int64_t lo, int64_t hi) { return {lo, hi}; }
  bool Contains(int64_t v) const { return v >= min && v <= max; }
  std::string Describe() const;
};

// An interval of reals; bounds may be open. Describe(): "> 0", ">= 0", "<= 1", "in [0, 1]",
// "> 0 and <= 1e+09" (bounds printed with FormatReal).
struct RealRange {
  double min = -std::numeric_limits<double>::infinity();
  bool min_open = false;
  double max = std::numeric_limits<double>::infinity();
  bool max_open = false;

  static RealRange Any() { return {}; }
  static RealRange Positive() { return {0, true}; }
  static RealRange NonNegative() { return {0, false}; }
  static RealRange Closed(double lo, double hi) { return {lo, false, hi, false}; }
  // (lo, hi].
  static RealRange AboveAtMost(double lo, double hi) { return {lo, true, hi, false}; }
  bool Contains(double v) const;
  std::string Describe() const;
};

// AsInteger / AsReal plus the range: "<path>: must be in [1, 64] (got 0)".
core::Result<int64_t> AsBoundedInteger(const YamlNode& node, const std::string& path,
                                       IntRange range);
core::Result<double> AsBoundedReal(const YamlNode& node, const std::string& path, RealRange range);

// ---- Optional keys of a checked map: an absent key leaves *out unchanged and returns OK ----

core::Status OptionalString(const YamlNode& map, const std::string& path, std::string_view key,
                            std::string* out);
core::Status OptionalBool(const YamlNode& map, const std::string& path, std::string_view key,
                          bool* out);
core::Status OptionalReal(const YamlNode& map, const std::string& path, std::string_view key,
                          RealRange range, double* out);
// Also refuses values outside T: "must be <= 2147483647 (got 3000000000)".
template <typename T>
core::Status OptionalInteger(const YamlNode& map, const std::string& path, std::string_view key,
                             IntRange range, T* out);

// ---- Implementation ----

// The integer of `node` (already checked against a range) converted to T, or the error naming
// T's limit.
core::Status IntegerFitsError(const YamlNode& node, const std::string& path, int64_t v, int64_t lo,
                              uint64_t hi);

template <typename T>
core::Status OptionalInteger(const YamlNode& map, const std::string& path, std::string_view key,
                             IntRange range, T* out) {
  static_assert(std::numeric_limits<T>::is_integer);
  const YamlNode& n = map.Get(key);
  if (!n.IsDefined()) return core::Status::Ok();
  const std::string p = ChildPath(path, key);
  CRUX_ASSIGN_OR_RETURN(int64_t v, AsBoundedInteger(n, p, range));
  constexpr int64_t kLo =
      std::numeric_limits<T>::is_signed ? static_cast<int64_t>(std::numeric_limits<T>::min()) : 0;
  constexpr uint64_t kHi = static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (v < kLo || (v > 0 && static_cast<uint64_t>(v) > kHi)) {
    return IntegerFitsError(n, p, v, kLo, kHi);
  }
  *out = static_cast<T>(v);
  return core::Status::Ok();
}

}  // namespace crux::textio

#endif  // CRUX_TEXTIO_YAML_H_
