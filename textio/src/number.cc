#include "crux/textio/number.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <system_error>

namespace crux::textio {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Length of the digit run starting at `pos`.
size_t DigitRun(std::string_view s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && IsDigit(s[pos + n])) ++n;
  return n;
}

// An infinity or NaN spelling, with an optional sign, in any letter case.
bool IsNonFiniteSpelling(std::string_view s) {
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) s.remove_prefix(1);
  if (s.size() > 8) return false;
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "inf" || lower == ".inf" || lower == "infinity" || lower == "nan" ||
         lower == ".nan";
}

// True iff `s` matches `real` of the grammar (number.h).
bool MatchesReal(std::string_view s) {
  size_t pos = 0;
  if (pos < s.size() && s[pos] == '-') ++pos;
  const size_t int_digits = DigitRun(s, pos);
  if (int_digits > 1 && s[pos] == '0') return false;  // Leading zero.
  pos += int_digits;
  size_t frac_digits = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    frac_digits = DigitRun(s, pos);
    pos += frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (pos < s.size() && (s[pos] == 'e' || s[pos] == 'E')) {
    ++pos;
    if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) ++pos;
    const size_t exp_digits = DigitRun(s, pos);
    if (exp_digits == 0) return false;
    pos += exp_digits;
  }
  return pos == s.size();
}

// True iff `s` matches `integer`.
bool MatchesInteger(std::string_view s) {
  size_t pos = 0;
  if (pos < s.size() && s[pos] == '-') ++pos;
  const size_t digits = DigitRun(s, pos);
  if (digits == 0 || pos + digits != s.size()) return false;
  return digits == 1 || s[pos] != '0';
}

}  // namespace

NumberStatus ParseInteger(std::string_view text, int64_t* out) {
  if (!MatchesInteger(text)) return NumberStatus::kSyntax;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return NumberStatus::kOutOfRange;
  if (ec != std::errc() || ptr != text.data() + text.size()) return NumberStatus::kSyntax;
  *out = v;
  return NumberStatus::kOk;
}

NumberStatus ParseReal(std::string_view text, double* out) {
  if (!MatchesReal(text)) {
    return IsNonFiniteSpelling(text) ? NumberStatus::kNotFinite : NumberStatus::kSyntax;
  }
  double v = 0;
  const auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), v, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return NumberStatus::kOutOfRange;
  if (ec != std::errc() || ptr != text.data() + text.size()) return NumberStatus::kSyntax;
  if (!std::isfinite(v)) return NumberStatus::kOutOfRange;  // Defensive: overflow to inf.
  *out = v;
  return NumberStatus::kOk;
}

std::string_view NumberProblem(NumberStatus status, bool integer) {
  switch (status) {
    case NumberStatus::kOk:
      return "";
    case NumberStatus::kSyntax:
      return integer ? "must be an integer" : "must be a number";
    case NumberStatus::kNotFinite:
      return "must be a finite number";
    case NumberStatus::kOutOfRange:
      return integer ? "integer out of range" : "number out of range";
  }
  return "must be a number";
}

std::string FormatReal(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return ".nan";  // Cannot happen: 64 bytes hold any double.
  return std::string(buf, ptr);
}

}  // namespace crux::textio
