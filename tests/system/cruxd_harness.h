// CruxdHarness: one real cruxd process for system tests - a temp config and state directory, a
// free TCP port, start/stop, cruxctl (table or --json) against its admin socket, and the
// crux-loadgen arguments of a few jobs' clients. Logs of every run are kept in the temp dir and
// printed by DumpLogs() (call it when a test failed). The programs are found through the
// CRUXD_BINARY, ... definitions of tests/CMakeLists.txt (defaults below).
#ifndef CRUX_TESTS_SYSTEM_CRUXD_HARNESS_H_
#define CRUX_TESTS_SYSTEM_CRUXD_HARNESS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "process_util.h"
#include "redis_process.h"  // The redis binaries of MissingSwitchE2eBinary.

#ifndef CRUXD_BINARY
#define CRUXD_BINARY CRUX_BINARY_DIR "/daemon/cruxd"
#endif
#ifndef CRUXCTL_BINARY
#define CRUXCTL_BINARY CRUX_BINARY_DIR "/tools/cruxctl/cruxctl"
#endif
#ifndef CRUX_LOADGEN_BINARY
#define CRUX_LOADGEN_BINARY CRUX_BINARY_DIR "/tools/loadgen/crux-loadgen"
#endif
#ifndef CRUX_SWITCH_AGENT_BINARY
#define CRUX_SWITCH_AGENT_BINARY CRUX_BINARY_DIR "/switch_adapters/crux-switch-agent"
#endif

namespace crux::system_test {

// The topology the system tests' clients run on (cruxd's embedded one, "topology: embedded").
inline const fs::path kExampleClos2 =
    fs::path(CRUX_SOURCE_DIR) / "configs/topologies/example_clos2.yaml";

// The binary of a switch end-to-end test (cruxd, cruxctl, crux-loadgen, crux-switch-agent,
// redis-server, redis-cli) that is not there, or "" when all are.
inline std::string MissingSwitchE2eBinary() {
  for (const char* bin :
       {CRUXD_BINARY, CRUXCTL_BINARY, CRUX_LOADGEN_BINARY, CRUX_SWITCH_AGENT_BINARY,
        CRUX_REDIS_SERVER_BINARY, CRUX_REDIS_CLI_BINARY}) {
    if (!fs::exists(bin)) return bin;
  }
  return "";
}

class CruxdHarness {
 public:
  explicit CruxdHarness(const fs::path& dir) : dir_(dir) {
    state_dir_ = dir_ / "state";
    admin_socket_ = state_dir_ / "admin.sock";
    port_ = FreeTcpPort();
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(port_);
    config_ = dir_ / "cruxd.yaml";
  }
  ~CruxdHarness() {
    if (cruxd_) cruxd_->Kill(SIGKILL);
  }

  // Writes the config: the common lab settings (embedded topology unless `extra` sets one, the
  // temp state dir, the port, insecure unless `curve`, metrics off, short debounce, long leases)
  // plus `extra` (YAML lines).
  void WriteConfig(const std::string& extra = "", bool curve = false) {
    std::string yaml;
    if (extra.find("topology:") == std::string::npos) yaml += "topology: embedded\n";
    yaml += "state_dir: " + state_dir_.string() + "\n";
    yaml += "client_endpoint: " + endpoint_ + "\n";
    if (!curve) yaml += "insecure: true\n";
    if (extra.find("metrics_listen:") == std::string::npos) {
      yaml += "metrics_listen: \"127.0.0.1:0\"\n";
    }
    if (extra.find("debounce_ms:") == std::string::npos) yaml += "debounce_ms: 10\n";
    if (extra.find("lease_ms:") == std::string::npos) yaml += "lease_ms: 120000\n";
    if (extra.find("profiling_samples:") == std::string::npos) yaml += "profiling_samples: 3\n";
    if (extra.find("log_level:") == std::string::npos) yaml += "log_level: debug\n";
    yaml += extra;
    WriteFile(config_, yaml);
  }

  std::vector<std::string> CruxdArgs(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> argv = {CRUXD_BINARY, "--config", config_.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // Starts cruxd and waits until `cruxctl status` answers; false (with the reason in *why) when
  // it exits or does not answer within 30 s.
  bool Start(const std::vector<std::string>& extra_args = {}, std::string* why = nullptr) {
    const fs::path log = dir_ / ("cruxd" + std::to_string(logs_.size()) + ".err");
    logs_.push_back(log);
    cruxd_ = std::make_unique<ChildProcess>();
    std::string error;
    if (!cruxd_->Start(CruxdArgs(extra_args), dir_ / "cruxd.out", log, dir_, {}, &error)) {
      if (why) *why = error;
      return false;
    }
    const bool up = WaitUntil(
        [&] {
          if (!cruxd_->running()) return true;
          return Cruxctl({"status"}, std::chrono::milliseconds(1000)).exit_code == 0;
        },
        std::chrono::seconds(30), std::chrono::milliseconds(100));
    if (up && cruxd_->running()) return true;
    if (why) {
      *why = "cruxd did not come up (exit " + std::to_string(cruxd_->exit_code().value_or(-1)) +
             "): " + ReadFile(log).substr(0, 4000);
    }
    return false;
  }

  // Runs cruxd expecting it to refuse to start; returns its exit code and stderr.
  CommandResult RunToExit(const std::vector<std::string>& extra_args = {}) {
    return RunCommand(CruxdArgs(extra_args), dir_, std::chrono::seconds(30));
  }

  void Kill(int sig = SIGKILL) {
    if (cruxd_) cruxd_->Kill(sig);
  }
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    return cruxd_ ? cruxd_->Wait(timeout) : std::optional<int>(-1);
  }

  CommandResult Cruxctl(std::vector<std::string> args, std::chrono::milliseconds timeout) const {
    std::vector<std::string> argv = {CRUXCTL_BINARY, "--socket", admin_socket_.string(),
                                     "--timeout-ms", std::to_string(timeout.count())};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_, timeout + std::chrono::seconds(10));
  }

  // cruxctl --json <args>; fails the test on a non-zero exit or unparsable output.
  nlohmann::json CruxctlJson(std::vector<std::string> args) const {
    args.insert(args.begin(), "--json");
    const CommandResult r = Cruxctl(args, std::chrono::milliseconds(5000));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return nlohmann::json::object();
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  // cruxctl --json <args> for a poll: an empty object when cruxctl fails or prints no JSON (the
  // daemon may be restarting), without failing the test.
  nlohmann::json PollJson(std::vector<std::string> args) const {
    args.insert(args.begin(), "--json");
    const CommandResult r = Cruxctl(args, std::chrono::milliseconds(3000));
    if (r.exit_code != 0) return nlohmann::json::object();
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  // crux-loadgen playing `jobs` jobs' clients for `duration_s` on kExampleClos2 against this cruxd
  // (seed 7, a profile report every 50 ms, a JSON summary on stdout).
  std::vector<std::string> LoadgenArgs(int jobs, int duration_s) const {
    return {CRUX_LOADGEN_BINARY,
            "--endpoint",
            endpoint_,
            "--insecure",
            "--topology",
            kExampleClos2.string(),
            "--jobs",
            std::to_string(jobs),
            "--duration-s",
            std::to_string(duration_s),
            "--report-interval-ms",
            "50",
            "--seed",
            "7",
            "--json",
            "--quiet"};
  }

  // Every run's stderr; a long one as its start and its end.
  void DumpLogs() const {
    constexpr size_t kHead = 5000;
    constexpr size_t kTail = 15000;
    for (size_t i = 0; i < logs_.size(); ++i) {
      const std::string log = ReadFile(logs_[i]);
      std::cerr << "---- cruxd run " << i << " stderr ----\n";
      if (log.size() <= kHead + kTail) {
        std::cerr << log << "\n";
      } else {
        std::cerr << log.substr(0, kHead) << "\n[...]\n" << log.substr(log.size() - kTail) << "\n";
      }
    }
  }
  // The stderr of run `run` (0 = the first Start).
  std::string Log(size_t run) const { return run < logs_.size() ? ReadFile(logs_[run]) : ""; }
  std::string LastLog() const { return logs_.empty() ? "" : ReadFile(logs_.back()); }

  const fs::path& dir() const { return dir_; }
  const fs::path& state_dir() const { return state_dir_; }
  fs::path database() const { return state_dir_ / "cruxd.sqlite"; }
  const fs::path& admin_socket() const { return admin_socket_; }
  const fs::path& config() const { return config_; }
  const std::string& endpoint() const { return endpoint_; }
  ChildProcess* process() { return cruxd_.get(); }

 private:
  fs::path dir_, state_dir_, admin_socket_, config_;
  int port_ = 0;
  std::string endpoint_;
  std::unique_ptr<ChildProcess> cruxd_;
  std::vector<fs::path> logs_;
};

// A test of one cruxd (the harness's lab config) and the crux-loadgen clients it starts: when the
// test failed, teardown prints cruxd's logs and crux-loadgen's stderr; it kills crux-loadgen (the
// harness kills cruxd). `name` prefixes the temp directory.
class CruxdTest : public ::testing::Test {
 protected:
  explicit CruxdTest(const std::string& name) : dir_(name), cruxd_(dir_.path()) {}

  void SetUp() override {
    for (const char* bin : {CRUXD_BINARY, CRUXCTL_BINARY, CRUX_LOADGEN_BINARY}) {
      ASSERT_TRUE(fs::exists(bin)) << bin << " is not built";
    }
    ASSERT_FALSE(dir_.path().empty());
    cruxd_.WriteConfig();
  }
  void TearDown() override {
    if (HasFailure()) {
      cruxd_.DumpLogs();
      if (loadgen_) std::cerr << "---- crux-loadgen stderr ----\n" << loadgen_->Stderr() << "\n";
    }
    if (loadgen_) loadgen_->Kill(SIGKILL);
  }

  // Starts crux-loadgen (CruxdHarness::LoadgenArgs) with its output in <name>.out and <name>.err.
  void StartLoadgen(int jobs, int duration_s, const std::string& name = "loadgen") {
    loadgen_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(loadgen_->Start(cruxd_.LoadgenArgs(jobs, duration_s), dir_.path() / (name + ".out"),
                                dir_.path() / (name + ".err"), dir_.path()));
  }

  TempDir dir_;
  CruxdHarness cruxd_;
  std::unique_ptr<ChildProcess> loadgen_;
};

}  // namespace crux::system_test

#endif  // CRUX_TESTS_SYSTEM_CRUXD_HARNESS_H_
