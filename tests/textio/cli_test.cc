// The CLI11 validators of crux/textio/cli.h: a command-line number reads as it does in a file.
#include "crux/textio/cli.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace crux::textio {
namespace {

// What the validator says of `text`: "" when it accepts it.
std::string Check(const std::string& text) {
  std::string copy = text;
  return FinitePositiveReal()(copy);
}

TEST(CliTest, FinitePositiveRealAcceptsThePositiveRealsOfTheNumberGrammar) {
  for (const std::string text : {"1", "0.5", ".5", "5.", "2.6e9", "1e-3", "100"}) {
    EXPECT_EQ(Check(text), "") << text;
  }
}

TEST(CliTest, FinitePositiveRealRefusesWhatTheFilesRefuseAndNamesTheText) {
  const std::vector<std::string> refused = {"0",    "-5",    "-0",  "inf",  "nan", "1e999",
                                            "0x10", "0X1p3", "+1",  "010",  " 1",  "1 ",
                                            "1,5",  "",      "abc", "1_000"};
  for (const std::string& text : refused) {
    EXPECT_EQ(Check(text), "must be a finite number > 0 (got " + text + ")") << text;
  }
}

TEST(CliTest, FinitePositiveRealWorksOnAnOptionAndLeavesTheValueAlone) {
  CLI::App app;
  double value = 0;
  app.add_option("--x", value)->check(FinitePositiveReal());
  EXPECT_NO_THROW(app.parse(std::vector<std::string>{"1e3", "--x"}));  // Reversed: CLI11.
  EXPECT_EQ(value, 1000.0);
  CLI::App refusing;
  refusing.add_option("--x", value)->check(FinitePositiveReal());
  EXPECT_THROW(refusing.parse(std::vector<std::string>{"0x10", "--x"}), CLI::ValidationError);
}

}  // namespace
}  // namespace crux::textio
