// Table-driven "bad input" cases for the workload YAML formats: each case edits a good document
// (replaces the first occurrence of `from` by `to`) and names the error the parser must give.
#ifndef CRUX_TESTS_SIM_WORKLOAD_YAML_CASES_H_
#define CRUX_TESTS_SIM_WORKLOAD_YAML_CASES_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <span>
#include <string>

namespace crux::sim::workload::testing {

struct BadCase {
  std::string from;   // Replaced in the good document...
  std::string to;     // ...by this.
  std::string error;  // A substring of the parser's error message.
};

// Parse(yaml) returns a core::Result; every edited document must be refused with its error.
template <typename Parse>
void ExpectEveryCaseRefused(const std::string& good, std::span<const BadCase> cases, Parse parse) {
  for (const BadCase& c : cases) {
    std::string yaml = good;
    const size_t pos = yaml.find(c.from);
    ASSERT_NE(pos, std::string::npos) << c.from;
    yaml.replace(pos, c.from.size(), c.to);
    const auto r = parse(yaml);
    ASSERT_FALSE(r.ok()) << "accepted: " << c.to;
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(c.error)) << c.to;
  }
}

}  // namespace crux::sim::workload::testing

#endif  // CRUX_TESTS_SIM_WORKLOAD_YAML_CASES_H_
