// hostd/systemd/crux-hostd.service: systemd's linters accept it (verify, and an exposure rating
// in systemd's "OK" band), on a copy whose ExecStart points at the built binary (verify checks
// that it exists).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "../system/process_util.h"

namespace crux::system_test {
namespace {

constexpr const char* kSystemdAnalyze = "/usr/bin/systemd-analyze";
constexpr double kMaxExposure = 2.5;

TEST(HostdSystemdUnitTest, VerifiesAndKeepsExposureLow) {
  if (!fs::exists(kSystemdAnalyze)) GTEST_SKIP() << "systemd-analyze is not installed";
  TempDir dir("crux_hostd_unit");
  const std::string text = ReadFile(fs::path(CRUX_SOURCE_DIR) / "hostd/systemd/crux-hostd.service");
  const std::string rewritten =
      std::regex_replace(text, std::regex("^ExecStart=/usr/bin/crux-hostd", std::regex::multiline),
                         std::string("ExecStart=") + CRUX_HOSTD_BINARY);
  ASSERT_NE(rewritten, text);
  const fs::path unit = dir.path() / "crux-hostd.service";
  WriteFile(unit, rewritten);
  CommandResult r =
      RunCommand({kSystemdAnalyze, "verify", unit.string()}, dir.path(), std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("crux-hostd.service"), std::string::npos) << r.err;
  r = RunCommand(
      {kSystemdAnalyze, "security", "--offline=true", "--no-pager",
       "--threshold=" + std::to_string(static_cast<int>(kMaxExposure * 10)), unit.string()},
      dir.path(), std::chrono::seconds(60));
  std::smatch m;
  const std::string all = r.out + r.err;
  ASSERT_TRUE(std::regex_search(
      all, m, std::regex("Overall exposure level for crux-hostd\\.service: ([0-9]+\\.[0-9]+)")))
      << all;
  EXPECT_LE(std::stod(m[1].str()), kMaxExposure) << all;
}

}  // namespace
}  // namespace crux::system_test
