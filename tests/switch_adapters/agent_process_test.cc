// The crux-switch-agent binary as a real process: exit statuses for configuration errors (a switch
// cruxd refuses, a bad command line) and the systemd unit that must not restart on them.
#if defined(CRUX_HAVE_SWITCH_AGENT) && defined(CRUX_SWITCH_AGENT_BINARY)

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>

#include "../system/process_util.h"
#include "crux/protocol/transport_context.h"
#include "fake_daemon.h"
#include "switch_agent.h"

namespace crux::switch_adapters {
namespace {

namespace fs = std::filesystem;
using system_test::ChildProcess;
using system_test::CommandResult;
using system_test::ReadFile;
using system_test::RunCommand;
using system_test::TempDir;
using system_test::WriteFile;

const fs::path kAgent = CRUX_SWITCH_AGENT_BINARY;
const fs::path kUnit =
    fs::path(CRUX_SOURCE_DIR) / "switch_adapters/agent/crux-switch-agent.service";

TEST(AgentProcessTest, SwitchRefusedByCruxdExitsWithTheConfigErrorStatus) {
  for (v1::ErrorCode code : {v1::ERROR_CODE_UNKNOWN_HOST, v1::ERROR_CODE_PERMISSION_DENIED}) {
    TempDir dir("crux_agent_refused");
    const std::string endpoint = "ipc://" + (dir.path() / "cruxd.sock").string();
    protocol::TransportContext ctx;
    testing::FakeDaemon daemon(ctx, endpoint, code);
    ChildProcess agent;
    ASSERT_TRUE(
        agent.Start({kAgent.string(), "--switch-name", "tor0", "--daemon", endpoint, "--insecure",
                     "--backend", "log", "--hello-interval-ms", "100", "--call-timeout-ms", "2000",
                     "--term-file", (dir.path() / "tor0.term").string()},
                    dir.path() / "agent.out", dir.path() / "agent.err"));
    // Bounded wait: a retry loop would never exit.
    const std::optional<int> rc = agent.Wait(std::chrono::seconds(20));
    ASSERT_TRUE(rc.has_value()) << "the agent kept running after cruxd refused it:\n"
                                << agent.Stderr();
    EXPECT_EQ(*rc, kExitRefusedByDaemon) << agent.Stderr();
    EXPECT_NE(agent.Stderr().find("fatal configuration error: cruxd at " + endpoint +
                                  " refused switch 'tor0' (" +
                                  std::string(protocol::ErrorCodeName(code)) + ")"),
              std::string::npos)
        << agent.Stderr();
    EXPECT_EQ(daemon.Hellos().size(), 1u);
  }
}

// Issue #31: a term file that cannot be trusted stops the agent before it talks to anyone (fail
// closed: starting from term 0 would accept a deposed leader's push), with the usage status
// systemd does not restart on, naming the file.
TEST(AgentProcessTest, ACorruptTermFileStopsTheAgentWithTheUsageStatus) {
  TempDir dir("crux_agent_term");
  const fs::path term = dir.path() / "tor0.term";
  std::ofstream(term) << "crux-leader-term 1\nowner tor0\nterm 18446744073709551616\n";
  const CommandResult r = RunCommand({kAgent.string(), "--switch-name", "tor0", "--daemon",
                                      "ipc://" + (dir.path() / "none.sock").string(), "--insecure",
                                      "--backend", "log", "--term-file", term.string()},
                                     dir.path(), std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  EXPECT_NE(r.err.find(term.string() + ": term '18446744073709551616' is not a positive integer"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("refusing to start"), std::string::npos) << r.err;
}

TEST(AgentProcessTest, BadBackendConfigurationExitsWithTheUsageStatus) {
  TempDir dir("crux_agent_usage");
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {kAgent.string(),
                                     "--switch-name",
                                     "tor0",
                                     "--daemon",
                                     "ipc://" + (dir.path() / "none.sock").string(),
                                     "--insecure",
                                     "--term-file",
                                     (dir.path() / "tor0.term").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, dir.path(), std::chrono::seconds(20));
  };
  CommandResult r = run({"--backend", "sonic"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  EXPECT_NE(r.err.find("--ports: required by the sonic backend"), std::string::npos) << r.err;
  r = run({"--backend", "sonic", "--ports", "Ethernet0", "--state-dir", dir.path().string()});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  EXPECT_NE(r.err.find("--state-dir: not a parameter of the sonic backend"), std::string::npos)
      << r.err;
  r = run({"--backend", "gnmi"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  r = run({"--backend", "file"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  EXPECT_NE(r.err.find("--state-dir: required by the file backend"), std::string::npos) << r.err;
  // --help lists every built-in backend's options.
  r = RunCommand({kAgent.string(), "--help"}, dir.path(), std::chrono::seconds(20));
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt : {"--state-dir", "--reconcile-period-ms"}) {
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt << "\n" << r.out;
  }
#ifdef CRUX_WITH_SONIC
  for (const char* opt : {"--redis-socket", "--ports", "--no-pfc", "--queues"}) {
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt << "\n" << r.out;
  }
#endif
}

TEST(AgentUnitTest, DoesNotRestartOnConfigurationErrors) {
  const std::string text = ReadFile(kUnit);
  EXPECT_NE(text.find("Restart=always"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\\nRestartPreventExitStatus=([0-9 ]+)\\n")))
      << text;
  const std::string codes = " " + m[1].str() + " ";
  EXPECT_NE(codes.find(" " + std::to_string(kExitRefusedByDaemon) + " "), std::string::npos);
  EXPECT_NE(codes.find(" " + std::to_string(kExitUsage) + " "), std::string::npos);
}

TEST(AgentUnitTest, SystemdAnalyzeVerifyPasses) {
  const fs::path analyze = "/usr/bin/systemd-analyze";
  if (!fs::exists(analyze)) GTEST_SKIP() << "systemd-analyze is not installed";
  TempDir dir("crux_agent_unit");
  // Same file name; ExecStart -> the built binary (verify checks that it exists).
  const fs::path unit = dir.path() / "crux-switch-agent.service";
  const std::string text = ReadFile(kUnit);
  const std::string rewritten = std::regex_replace(
      text, std::regex("ExecStart=/usr/bin/crux-switch-agent"), "ExecStart=" + kAgent.string());
  ASSERT_NE(rewritten, text);
  WriteFile(unit, rewritten);
  const CommandResult r =
      RunCommand({analyze.string(), "verify", unit.string()}, dir.path(), std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("crux-switch-agent.service"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace crux::switch_adapters

#endif  // CRUX_HAVE_SWITCH_AGENT && CRUX_SWITCH_AGENT_BINARY
