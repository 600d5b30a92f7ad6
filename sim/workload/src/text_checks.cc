#include "text_checks.h"

#include "crux/core/base/ids.h"
#include "crux/core/base/text.h"

namespace crux::sim::workload::internal {

std::string NameProblem(std::string_view s) {
  if (core::IsValidName(s)) return "";
  if (s.size() > core::kMaxNameLength) {
    return "is too long (" + std::to_string(s.size()) + " bytes; a name is " +
           std::string(core::kNameRule) + ")";
  }
  return "must be " + std::string(core::kNameRule) + " (got " + Shown(s) + ")";
}

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

std::string Shown(std::string_view s) { return core::QuoteName(s); }

core::Status ReadText(const textio::YamlNode& map, const std::string& path, std::string_view key,
                      bool required, std::string* out) {
  const textio::YamlNode& v = map.Get(key);
  if (!v.IsDefined()) return required ? textio::MissingKey(map, path, key) : core::Status::Ok();
  const std::string p = textio::ChildPath(path, key);
  if (!v.IsScalar() || v.scalar().empty()) {
    return textio::ErrorAt(v, p, "must be a non-empty string");
  }
  if (std::string problem = TextProblem(v.scalar(), kMaxTextLength); !problem.empty()) {
    return textio::ErrorAt(v, p, problem);
  }
  *out = v.scalar();
  return core::Status::Ok();
}

core::Status ReadReal(const textio::YamlNode& map, const std::string& path, std::string_view key,
                      bool required, textio::RealRange range, double* out) {
  if (required && !map.Has(key)) return textio::MissingKey(map, path, key);
  return textio::OptionalReal(map, path, key, range, out);
}

core::Status ReadInteger(const textio::YamlNode& map, const std::string& path, std::string_view key,
                         bool required, textio::IntRange range, int64_t* out) {
  if (required && !map.Has(key)) return textio::MissingKey(map, path, key);
  return textio::OptionalInteger(map, path, key, range, out);
}

}  // namespace crux::sim::workload::internal
