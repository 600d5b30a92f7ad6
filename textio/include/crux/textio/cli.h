// CLI11 validators over the one number grammar (crux/textio/number.h), so that a number on a
// command line reads as it does in a file: "0x10", "inf", "+1" and " 1" are refused everywhere.
//
// Header-only, so that crux::textio itself does not depend on CLI11: a program that uses it links
// crux::textio_cli (which brings CLI11 and crux::textio).
#ifndef CRUX_TEXTIO_CLI_H_
#define CRUX_TEXTIO_CLI_H_

#include <CLI/CLI.hpp>
#include <string>

#include "crux/textio/number.h"

namespace crux::textio {

// Accepts a finite real > 0 of the number grammar; refuses anything else with "must be a finite
// number > 0 (got TEXT)". (CLI11's PositiveNumber lets infinity and hexadecimal through and
// prints DBL_MAX in its message.)
inline CLI::Validator FinitePositiveReal() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (ParseReal(text, &v) != NumberStatus::kOk || !(v > 0)) {
          return "must be a finite number > 0 (got " + text + ")";
        }
        return "";
      },
      "POSITIVE");
}

}  // namespace crux::textio

#endif  // CRUX_TEXTIO_CLI_H_
