// The one number grammar (crux/textio/number.h), table-driven: what every Crux loader accepts
// as an integer or a real, and why it refuses the rest.
#include "crux/textio/number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace crux::textio {
namespace {

struct IntCase {
  const char* text;
  NumberStatus status;
  int64_t value;  // When kOk.
};

TEST(NumberTest, IntegerGrammar) {
  const IntCase cases[] = {
      {"0", NumberStatus::kOk, 0},
      {"42", NumberStatus::kOk, 42},
      {"-7", NumberStatus::kOk, -7},
      {"-0", NumberStatus::kOk, 0},
      {"9223372036854775807", NumberStatus::kOk, std::numeric_limits<int64_t>::max()},
      {"-9223372036854775808", NumberStatus::kOk, std::numeric_limits<int64_t>::min()},
      {"9223372036854775808", NumberStatus::kOutOfRange, 0},
      {"-9223372036854775809", NumberStatus::kOutOfRange, 0},
      {"123456789012345678901234567890", NumberStatus::kOutOfRange, 0},
      {"0x10", NumberStatus::kSyntax, 0},  // Hexadecimal: refused everywhere.
      {"0X10", NumberStatus::kSyntax, 0},
      {"0o17", NumberStatus::kSyntax, 0},
      {"0b101", NumberStatus::kSyntax, 0},
      {"010", NumberStatus::kSyntax, 0},  // Leading zero (octal in YAML 1.1 and C).
      {"-01", NumberStatus::kSyntax, 0},
      {"00", NumberStatus::kSyntax, 0},
      {"+1", NumberStatus::kSyntax, 0},
      {"1e3", NumberStatus::kSyntax, 0},  // A real, not an integer.
      {"1.0", NumberStatus::kSyntax, 0},
      {"2.5", NumberStatus::kSyntax, 0},
      {" 1", NumberStatus::kSyntax, 0},  // Nothing is trimmed.
      {"1 ", NumberStatus::kSyntax, 0},
      {"1\n", NumberStatus::kSyntax, 0},
      {"", NumberStatus::kSyntax, 0},
      {"-", NumberStatus::kSyntax, 0},
      {"1_000", NumberStatus::kSyntax, 0},
      {"1,000", NumberStatus::kSyntax, 0},
      {"inf", NumberStatus::kSyntax, 0},
      {"nan", NumberStatus::kSyntax, 0},
      {"eight", NumberStatus::kSyntax, 0},
      {"\xEF\xBC\x91", NumberStatus::kSyntax, 0},  // Fullwidth digit one.
  };
  for (const IntCase& c : cases) {
    int64_t v = 12345;
    EXPECT_EQ(ParseInteger(c.text, &v), c.status) << "'" << c.text << "'";
    if (c.status == NumberStatus::kOk) {
      EXPECT_EQ(v, c.value) << c.text;
    } else {
      EXPECT_EQ(v, 12345) << "written on failure: " << c.text;
    }
  }
}

struct RealCase {
  const char* text;
  NumberStatus status;
  double value;  // When kOk.
};

TEST(NumberTest, RealGrammar) {
  const RealCase cases[] = {
      {"0", NumberStatus::kOk, 0},
      {"8", NumberStatus::kOk, 8},  // Every integer is a real.
      {"0.5", NumberStatus::kOk, 0.5},
      {".5", NumberStatus::kOk, 0.5},
      {"5.", NumberStatus::kOk, 5},
      {"-2.25", NumberStatus::kOk, -2.25},
      {"1e3", NumberStatus::kOk, 1000},
      {"1E3", NumberStatus::kOk, 1000},
      {"2.6e9", NumberStatus::kOk, 2.6e9},
      {"1e+09", NumberStatus::kOk, 1e9},
      {"1e-3", NumberStatus::kOk, 1e-3},
      {"1e05", NumberStatus::kOk, 1e5},  // Leading zeros in the exponent are fine.
      {"0.05", NumberStatus::kOk, 0.05},
      {"1.7976931348623157e308", NumberStatus::kOk, std::numeric_limits<double>::max()},
      {"4.9e-324", NumberStatus::kOk, std::numeric_limits<double>::denorm_min()},
      {"1e999", NumberStatus::kOutOfRange, 0},
      {"-1e999", NumberStatus::kOutOfRange, 0},
      {"1e-400", NumberStatus::kOutOfRange, 0},  // Would round to zero.
      {"inf", NumberStatus::kNotFinite, 0},
      {"-inf", NumberStatus::kNotFinite, 0},
      {"+inf", NumberStatus::kNotFinite, 0},
      {"Infinity", NumberStatus::kNotFinite, 0},
      {".inf", NumberStatus::kNotFinite, 0},
      {"-.Inf", NumberStatus::kNotFinite, 0},
      {"+.INF", NumberStatus::kNotFinite, 0},
      {"nan", NumberStatus::kNotFinite, 0},
      {"NaN", NumberStatus::kNotFinite, 0},
      {".nan", NumberStatus::kNotFinite, 0},
      {".NaN", NumberStatus::kNotFinite, 0},
      {"0x10", NumberStatus::kSyntax, 0},
      {"0x1p3", NumberStatus::kSyntax, 0},
      {"+1.5", NumberStatus::kSyntax, 0},
      {"01.5", NumberStatus::kSyntax, 0},
      {"00.5", NumberStatus::kSyntax, 0},
      {".", NumberStatus::kSyntax, 0},
      {"-.", NumberStatus::kSyntax, 0},
      {"e3", NumberStatus::kSyntax, 0},
      {"1e", NumberStatus::kSyntax, 0},
      {"1e+", NumberStatus::kSyntax, 0},
      {"1.2.3", NumberStatus::kSyntax, 0},
      {" 1.5", NumberStatus::kSyntax, 0},
      {"1.5 ", NumberStatus::kSyntax, 0},
      {"1.5\t", NumberStatus::kSyntax, 0},
      {"", NumberStatus::kSyntax, 0},
      {"1h", NumberStatus::kSyntax, 0},
      {"1,5", NumberStatus::kSyntax, 0},
  };
  for (const RealCase& c : cases) {
    double v = 12345;
    EXPECT_EQ(ParseReal(c.text, &v), c.status) << "'" << c.text << "'";
    if (c.status == NumberStatus::kOk) {
      EXPECT_EQ(v, c.value) << c.text;
    } else {
      EXPECT_EQ(v, 12345) << "written on failure: " << c.text;
    }
  }
}

TEST(NumberTest, MinusZeroIsNegativeZero) {
  double v = 1;
  ASSERT_EQ(ParseReal("-0", &v), NumberStatus::kOk);
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(std::signbit(v));
  ASSERT_EQ(ParseReal("-0.0e5", &v), NumberStatus::kOk);
  EXPECT_TRUE(std::signbit(v));
}

TEST(NumberTest, ProblemsNameWhatIsWrong) {
  EXPECT_EQ(NumberProblem(NumberStatus::kSyntax, true), "must be an integer");
  EXPECT_EQ(NumberProblem(NumberStatus::kSyntax, false), "must be a number");
  EXPECT_EQ(NumberProblem(NumberStatus::kNotFinite, false), "must be a finite number");
  EXPECT_EQ(NumberProblem(NumberStatus::kOutOfRange, true), "integer out of range");
  EXPECT_EQ(NumberProblem(NumberStatus::kOutOfRange, false), "number out of range");
  EXPECT_EQ(NumberProblem(NumberStatus::kOk, false), "");
}

TEST(NumberTest, FormatRealReadsBackExactly) {
  for (double v : {0.0, -0.0, 0.1, 1.0 / 3, 2.6e9, 1e9, 1e-7, 312.0, 989.5, -42.25,
                   std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::min()}) {
    const std::string text = FormatReal(v);
    double back = 12345;
    ASSERT_EQ(ParseReal(text, &back), NumberStatus::kOk) << text;
    EXPECT_EQ(back, v) << text;
    EXPECT_EQ(std::signbit(back), std::signbit(v)) << text;
  }
  EXPECT_EQ(FormatReal(0.5), "0.5");
  EXPECT_EQ(FormatReal(1e9), "1e+09");
  // Non-finite values are written in YAML's spelling, which ParseReal refuses on purpose.
  double v = 0;
  EXPECT_EQ(ParseReal(FormatReal(std::numeric_limits<double>::infinity()), &v),
            NumberStatus::kNotFinite);
  EXPECT_EQ(ParseReal(FormatReal(std::nan("")), &v), NumberStatus::kNotFinite);
}

}  // namespace
}  // namespace crux::textio
