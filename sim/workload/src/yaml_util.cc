#include "yaml_util.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "crux/core/text.h"
#include "text_checks.h"

namespace crux::sim::workload::internal {

using core::InvalidArgumentError;
using core::Status;

std::string Where(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return "";
  return " (line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) + ")";
}

Status ErrorAt(const YAML::Node& n, const std::string& path, const std::string& msg) {
  return InvalidArgumentError(path + ": " + msg + Where(n));
}

std::string Child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

core::Result<YAML::Node> ParseDocument(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::string msg = "invalid YAML: " + e.msg;
    if (!e.mark.is_null()) {
      msg += " (line " + std::to_string(e.mark.line + 1) + ", column " +
             std::to_string(e.mark.column + 1) + ")";
    }
    return InvalidArgumentError(msg);
  }
}

bool Has(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return false;
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return true;
  }
  return false;
}

YAML::Node Get(const YAML::Node& map, std::string_view key) {
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node();
}

Status CheckMap(const YAML::Node& n, const std::string& path,
                std::initializer_list<std::string_view> allowed) {
  if (!n.IsMap()) return ErrorAt(n, path, "must be a map");
  std::set<std::string> seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return ErrorAt(kv.first, path, "keys must be strings");
    const std::string& key = kv.first.Scalar();
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return ErrorAt(kv.first, Child(path, core::EscapeForTerminal(key)),
                     "unknown key (allowed: " + list + ")");
    }
    if (!seen.insert(key).second) {
      return ErrorAt(kv.first, Child(path, core::EscapeForTerminal(key)), "duplicate key");
    }
  }
  return Status::Ok();
}

Status ReadString(const YAML::Node& map, const std::string& path, std::string_view key,
                  bool required, std::string* out) {
  const std::string p = Child(path, key);
  if (!Has(map, key)) {
    return required ? ErrorAt(map, p, "required key is missing") : Status::Ok();
  }
  const YAML::Node v = Get(map, key);
  if (!v.IsScalar() || v.Scalar().empty()) return ErrorAt(v, p, "must be a non-empty string");
  if (std::string problem = TextProblem(v.Scalar(), kMaxTextLength); !problem.empty()) {
    return ErrorAt(v, p, problem);
  }
  *out = v.Scalar();
  return Status::Ok();
}

Status ReadNumber(const YAML::Node& map, const std::string& path, std::string_view key,
                  bool required, double min, bool min_exclusive, double max, double* out) {
  const std::string p = Child(path, key);
  if (!Has(map, key)) {
    return required ? ErrorAt(map, p, "required key is missing") : Status::Ok();
  }
  const YAML::Node v = Get(map, key);
  if (!v.IsScalar() || v.Tag() == "!") return ErrorAt(v, p, "must be a number");
  const std::string& s = v.Scalar();
  for (const char* special : {".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf",
                              "+.INF", "-.inf", "-.Inf", "-.INF"}) {
    if (s == special) return ErrorAt(v, p, "must be finite (got " + s + ")");
  }
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    return ErrorAt(v, p, "must be a number (got " + Shown(s) + ")");
  }
  if (!std::isfinite(d)) return ErrorAt(v, p, "must be finite (got " + s + ")");
  const bool low = min_exclusive ? !(d > min) : !(d >= min);
  if (low || d > max) {
    char lo[32];
    char hi[32];
    std::snprintf(lo, sizeof(lo), "%g", min);
    std::snprintf(hi, sizeof(hi), "%g", max);
    std::string range = std::string(min_exclusive ? "> " : ">= ") + lo;
    if (max < 1e300) range += std::string(" and <= ") + hi;
    return ErrorAt(v, p, "must be " + range + " (got " + s + ")");
  }
  *out = d;
  return Status::Ok();
}

Status ReadInt(const YAML::Node& map, const std::string& path, std::string_view key, bool required,
               int64_t min, int64_t max, int64_t* out) {
  const std::string p = Child(path, key);
  if (!Has(map, key)) {
    return required ? ErrorAt(map, p, "required key is missing") : Status::Ok();
  }
  const YAML::Node v = Get(map, key);
  if (!v.IsScalar() || v.Tag() == "!") return ErrorAt(v, p, "must be an integer");
  const std::string& s = v.Scalar();
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    return ErrorAt(v, p, "must be an integer (got " + Shown(s) + ")");
  }
  if (x < min || x > max) {
    return ErrorAt(
        v, p,
        "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "] (got " + s + ")");
  }
  *out = x;
  return Status::Ok();
}

Status ReadBool(const YAML::Node& map, const std::string& path, std::string_view key, bool* out) {
  const std::string p = Child(path, key);
  if (!Has(map, key)) return Status::Ok();
  const YAML::Node v = Get(map, key);
  if (v.IsScalar() && v.Tag() != "!") {
    if (v.Scalar() == "true") {
      *out = true;
      return Status::Ok();
    }
    if (v.Scalar() == "false") {
      *out = false;
      return Status::Ok();
    }
  }
  return ErrorAt(v, p, "must be true or false");
}

}  // namespace crux::sim::workload::internal
