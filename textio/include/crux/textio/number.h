// The one number grammar of every Crux text input (YAML configs and specs, CSV traces, link
// events, the Lingjun topology): planner specs, the daemon config and the simulator's files all
// read numbers through these two functions, so "0x10" or "1e3" means the same everywhere.
//
// Grammar (the whole text must match; nothing is trimmed, so " 1" and "1 " are refused):
//
//   integer  = ["-"] digits                          e.g. 0, 42, -7, -0
//   real     = ["-"] mantissa [exponent]             e.g. 0.5, 2.6e9, 1e3, .5, 5., -0
//   mantissa = digits ["." [digits]] | "." digits
//   exponent = ("e" | "E") ["+" | "-"] digits
//   digits   = one or more of 0-9, with no leading zero unless the digit run is just "0"
//              (the integer part only: "0.05" and "1e05" are fine, "007" and "00.5" are not)
//
// Refused: a leading "+", hexadecimal / octal / binary forms ("0x10", "0o17", "0b1"), leading
// zeros ("010": octal in YAML 1.1 and C), digit separators ("1_000", "1,000"), and every
// spelling of infinity and NaN ("inf", ".inf", "-.Inf", "nan", ".NaN", "infinity"): those are
// reported as kNotFinite, not as syntax errors, so messages can say "must be a finite number".
// Every integer is also a real ("8" reads as 8.0). A real whose magnitude does not fit a double
// (overflow, e.g. 1e999) or that is non-zero but too small to represent (it would round to
// zero, e.g. 1e-400) is kOutOfRange; subnormal values are kept. An integer outside int64_t is
// kOutOfRange.
//
// Pure functions, thread-safe, no allocation, no locale.
#ifndef CRUX_TEXTIO_NUMBER_H_
#define CRUX_TEXTIO_NUMBER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace crux::textio {

enum class NumberStatus {
  kOk,
  kSyntax,      // Not a number of the grammar above (for ParseInteger: not an integer).
  kNotFinite,   // An infinity or NaN spelling (ParseReal only).
  kOutOfRange,  // Well formed but does not fit the type.
};

// Parses `text` as an `integer`. *out is written only on kOk.
NumberStatus ParseInteger(std::string_view text, int64_t* out);

// Parses `text` as a `real` (integers included). *out is written only on kOk.
NumberStatus ParseReal(std::string_view text, double* out);

// What is wrong, for messages: "must be an integer" / "must be a number" (kSyntax), "must be a
// finite number" (kNotFinite), "integer out of range" / "number out of range" (kOutOfRange);
// "" for kOk. `integer` picks the wording for ParseInteger.
std::string_view NumberProblem(NumberStatus status, bool integer);

// The shortest text that ParseReal reads back as exactly `v` ("0.1", "1e+09", "-0"); for a
// non-finite v, ".inf", "-.inf" or ".nan" (which ParseReal refuses, by design).
std::string FormatReal(double v);

}  // namespace crux::textio

#endif  // CRUX_TEXTIO_NUMBER_H_
