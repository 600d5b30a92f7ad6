#include "yaml_reader.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "crux/core/text.h"

namespace crux::spec::internal {
namespace {

using core::Result;
using core::Status;

// yaml-cpp tags: "?" for plain scalars, "!" for quoted ones, the full tag for explicit ones.
bool IsPlain(const YAML::Node& node) { return node.Tag() == "?" || node.Tag().empty(); }

std::string AllowedList(std::initializer_list<std::string_view> allowed) {
  std::string out;
  for (std::string_view k : allowed) {
    if (!out.empty()) out += ", ";
    out += k;
  }
  return out;
}

// Parses a YAML 1.2 core-schema float: decimal / exponent forms, .nan, [+-].inf.
bool ParseDouble(std::string_view text, double* out) {
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  std::string_view body = text;
  bool negative = false;
  if (!body.empty() && (body.front() == '+' || body.front() == '-')) {
    negative = body.front() == '-';
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    *out = negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
    return true;
  }
  if (body.empty() || body.front() == '+' || body.front() == '-') return false;
  double v = 0;
  auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (ptr != body.data() + body.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    v = std::numeric_limits<double>::infinity();  // Reported as "must be finite".
  } else if (ec != std::errc()) {
    return false;
  }
  *out = negative ? -v : v;
  return true;
}

}  // namespace

std::string Position(const YAML::Node& node) {
  if (!node.IsDefined()) return "";
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return "";
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

Status ErrorAt(const YAML::Node& node, const std::string& path, const std::string& what,
               core::StatusCode code) {
  std::string message =
      (path.empty() ? std::string("document") : path) + ": " + what + Position(node);
  // Keys and scalars echoed from the file may hold control characters. Names quoted with
  // core::QuoteName are already escaped (the message is then printable and left alone).
  if (!core::IsPrintableText(message)) message = core::EscapeForTerminal(message);
  return Status(code, std::move(message));
}

std::string Child(const std::string& path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return path + "." + std::string(key);
}

std::string Element(const std::string& path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      if (IsPlain(node)) return node.Scalar();
      return "'" + node.Scalar() + "'";
  }
  return "?";
}

Result<YAML::Node> LoadYaml(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string msg = "invalid YAML: " + e.msg;
    if (!e.mark.is_null()) {
      msg += " (line " + std::to_string(e.mark.line + 1) + ", column " +
             std::to_string(e.mark.column + 1) + ")";
    }
    return core::InvalidArgumentError(std::move(msg));
  } catch (const std::exception& e) {
    return core::InvalidArgumentError(std::string("invalid YAML: ") + e.what());
  }
}

Status CheckMap(const YAML::Node& node, const std::string& path,
                std::initializer_list<std::string_view> allowed) {
  if (!node.IsMap()) return ErrorAt(node, path, "must be a map (got " + Describe(node) + ")");
  std::set<std::string> seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) {
      return ErrorAt(key, path, "keys must be plain names (got " + Describe(key) + ")");
    }
    const std::string& name = key.Scalar();
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known) {
      return ErrorAt(key, Child(path, name), "unknown key (allowed: " + AllowedList(allowed) + ")");
    }
    if (!seen.insert(name).second) return ErrorAt(key, Child(path, name), "duplicate key");
  }
  return Status::Ok();
}

Status CheckSequence(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) return ErrorAt(node, path, "must be a list (got " + Describe(node) + ")");
  return Status::Ok();
}

Result<std::string> AsString(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) return ErrorAt(node, path, "must be a string (got " + Describe(node) + ")");
  return node.Scalar();
}

Result<int64_t> AsInteger(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar() || !IsPlain(node)) {
    return ErrorAt(node, path, "must be an integer (got " + Describe(node) + ")");
  }
  std::string_view text = node.Scalar();
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    return ErrorAt(node, path, "integer out of range (got " + node.Scalar() + ")");
  }
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
    return ErrorAt(node, path, "must be an integer (got " + Describe(node) + ")");
  }
  return v;
}

Result<double> AsNumber(const YAML::Node& node, const std::string& path) {
  double v = 0;
  if (!node.IsScalar() || !IsPlain(node) || !ParseDouble(node.Scalar(), &v)) {
    return ErrorAt(node, path, "must be a number (got " + Describe(node) + ")");
  }
  return v;
}

Result<bool> AsBool(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar() && IsPlain(node)) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  return ErrorAt(node, path, "must be true or false (got " + Describe(node) + ")");
}

Result<double> AsBoundedNumber(const YAML::Node& node, const std::string& path, Bound bound) {
  CRUX_ASSIGN_OR_RETURN(double v, AsNumber(node, path));
  if (!std::isfinite(v)) {
    return ErrorAt(node, path, "must be a finite number (got " + node.Scalar() + ")");
  }
  if (bound == Bound::kPositive && !(v > 0)) {
    return ErrorAt(node, path, "must be > 0 (got " + node.Scalar() + ")");
  }
  if (bound == Bound::kNonNegative && !(v >= 0)) {
    return ErrorAt(node, path, "must be >= 0 (got " + node.Scalar() + ")");
  }
  return v;
}

Result<int64_t> AsBoundedInteger(const YAML::Node& node, const std::string& path, int64_t min,
                                 int64_t max) {
  CRUX_ASSIGN_OR_RETURN(int64_t v, AsInteger(node, path));
  if (v < min) {
    return ErrorAt(node, path,
                   "must be >= " + std::to_string(min) + " (got " + node.Scalar() + ")");
  }
  if (v > max) {
    return ErrorAt(node, path,
                   "must be <= " + std::to_string(max) + " (got " + node.Scalar() + ")");
  }
  return v;
}

YAML::Node Get(const YAML::Node& map, std::string_view key) {
  // Const lookup: never inserts; returns an undefined node when absent.
  const YAML::Node& m = map;
  for (const auto& entry : m) {
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool Has(const YAML::Node& map, std::string_view key) { return Get(map, key).IsDefined(); }

Status MissingKey(const YAML::Node& map, const std::string& path, std::string_view key) {
  return ErrorAt(map, Child(path, key), "missing required key");
}

Status OptionalInt(const YAML::Node& map, const std::string& path, std::string_view key, int min,
                   int* out) {
  YAML::Node n = Get(map, key);
  if (!n.IsDefined()) return Status::Ok();
  CRUX_ASSIGN_OR_RETURN(
      int64_t v, AsBoundedInteger(n, Child(path, key), min, std::numeric_limits<int>::max()));
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status OptionalNumber(const YAML::Node& map, const std::string& path, std::string_view key,
                      Bound bound, double* out) {
  YAML::Node n = Get(map, key);
  if (!n.IsDefined()) return Status::Ok();
  CRUX_ASSIGN_OR_RETURN(double v, AsBoundedNumber(n, Child(path, key), bound));
  *out = v;
  return Status::Ok();
}

Status OptionalBool(const YAML::Node& map, const std::string& path, std::string_view key,
                    bool* out) {
  YAML::Node n = Get(map, key);
  if (!n.IsDefined()) return Status::Ok();
  CRUX_ASSIGN_OR_RETURN(bool v, AsBool(n, Child(path, key)));
  *out = v;
  return Status::Ok();
}

Status OptionalString(const YAML::Node& map, const std::string& path, std::string_view key,
                      std::string* out) {
  YAML::Node n = Get(map, key);
  if (!n.IsDefined()) return Status::Ok();
  CRUX_ASSIGN_OR_RETURN(std::string v, AsString(n, Child(path, key)));
  *out = std::move(v);
  return Status::Ok();
}

}  // namespace crux::spec::internal
