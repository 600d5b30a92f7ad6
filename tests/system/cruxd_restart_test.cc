// Real processes end to end: cruxd (temp config + state dir, random port), crux-loadgen playing
// a few jobs' clients over ZeroMQ, cruxctl --json reading the result (and degrading a link);
// then kill -9 cruxd, restart it on the same state and check that jobs, levels, the epoch and
// the link's health are back and that clients re-register idempotently. Also: cruxctl exits 3 when
// no daemon is running.
//
// Children are spawned with fork/exec, their output goes to files in the temp dir (printed on
// failure), and every child is SIGKILLed in teardown. Waits poll a condition with generous
// deadlines; nothing sleeps for a fixed time to synchronise.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "process_util.h"

#ifndef CRUXD_BINARY
#define CRUXD_BINARY CRUX_BINARY_DIR "/daemon/cruxd"
#endif
#ifndef CRUXCTL_BINARY
#define CRUXCTL_BINARY CRUX_BINARY_DIR "/tools/cruxctl/cruxctl"
#endif
#ifndef CRUX_LOADGEN_BINARY
#define CRUX_LOADGEN_BINARY CRUX_BINARY_DIR "/tools/loadgen/crux-loadgen"
#endif

namespace crux::system_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kJobs = 4;
const fs::path kTopology = fs::path(CRUX_SOURCE_DIR) / "configs/topologies/example_clos2.yaml";

class CruxdRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* bin : {CRUXD_BINARY, CRUXCTL_BINARY}) {
      ASSERT_TRUE(fs::exists(bin)) << bin << " is not built";
    }
    ASSERT_FALSE(dir_.path().empty());
    state_dir_ = dir_.path() / "state";
    admin_socket_ = state_dir_ / "admin.sock";
    port_ = FreeTcpPort();
    ASSERT_GT(port_, 0);
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(port_);
    config_ = dir_.path() / "cruxd.yaml";
    // Short debounce and few samples: plans settle within a second. Long leases: jobs must
    // not expire while the daemon is down.
    WriteFile(config_,
              "topology: embedded\n"
              "state_dir: " +
                  state_dir_.string() +
                  "\n"
                  "client_endpoint: " +
                  endpoint_ +
                  "\n"
                  "insecure: true\n"
                  "metrics_listen: \"127.0.0.1:0\"\n"
                  "debounce_ms: 10\n"
                  "lease_ms: 120000\n"
                  "profiling_samples: 3\n"
                  "log_level: debug\n");
  }

  void TearDown() override {
    if (HasFailure()) {
      for (size_t i = 0; i < daemon_logs_.size(); ++i) {
        std::cerr << "---- cruxd run " << i << " stderr ----\n"
                  << ReadFile(daemon_logs_[i]).substr(0, 20000) << "\n";
      }
      if (loadgen_) std::cerr << "---- crux-loadgen stderr ----\n" << loadgen_->Stderr() << "\n";
    }
    if (loadgen_) loadgen_->Kill(SIGKILL);
    if (cruxd_) cruxd_->Kill(SIGKILL);
  }

  // Starts cruxd and waits until `cruxctl status` answers.
  void StartCruxd() {
    const fs::path log = dir_.path() / ("cruxd" + std::to_string(daemon_logs_.size()) + ".err");
    daemon_logs_.push_back(log);
    cruxd_ = std::make_unique<ChildProcess>();
    std::string error;
    ASSERT_TRUE(cruxd_->Start({CRUXD_BINARY, "--config", config_.string()},
                              dir_.path() / "cruxd.out", log, dir_.path(), {}, &error))
        << error;
    const bool up = WaitUntil(
        [&] {
          if (!cruxd_->running()) return true;  // Fails below.
          return Cruxctl({"status"}, milliseconds(1000)).exit_code == 0;
        },
        seconds(30), milliseconds(100));
    ASSERT_TRUE(up && cruxd_->running())
        << "cruxd did not come up (exit " << cruxd_->exit_code().value_or(-1) << ")";
  }

  CommandResult Cruxctl(std::vector<std::string> args, milliseconds timeout_ms) {
    std::vector<std::string> argv = {CRUXCTL_BINARY, "--socket", admin_socket_.string(),
                                     "--timeout-ms", std::to_string(timeout_ms.count())};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_.path(), timeout_ms + seconds(10));
  }

  // cruxctl --json <args>; fails the test on a non-zero exit or unparsable output.
  nlohmann::json CruxctlJson(std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    const CommandResult r = Cruxctl(args, milliseconds(5000));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return nlohmann::json::object();
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j.is_discarded() ? nlohmann::json::object() : j;
  }

  std::vector<std::string> LoadgenArgs(int duration_s) const {
    return {CRUX_LOADGEN_BINARY,
            "--endpoint",
            endpoint_,
            "--insecure",
            "--topology",
            kTopology.string(),
            "--jobs",
            std::to_string(kJobs),
            "--duration-s",
            std::to_string(duration_s),
            "--report-interval-ms",
            "50",
            "--seed",
            "7",
            "--json",
            "--quiet"};
  }

  // job_id -> {state, level} of every job not gone.
  std::map<std::string, std::pair<std::string, int>> LiveJobs() {
    std::map<std::string, std::pair<std::string, int>> out;
    const nlohmann::json j = CruxctlJson({"jobs"});
    if (!j.contains("jobs")) return out;
    for (const auto& job : j["jobs"]) {
      if (job["state"] == "gone") continue;
      out[job["job_id"].get<std::string>()] = {job["state"].get<std::string>(),
                                               job["level"].get<int>()};
    }
    return out;
  }

  bool AllScheduled(size_t n) {
    const auto jobs = LiveJobs();
    if (jobs.size() != n) return false;
    for (const auto& [id, s] : jobs) {
      if (s.first != "scheduled") return false;
    }
    return true;
  }

  TempDir dir_{"crux_cruxd_restart"};
  fs::path state_dir_, admin_socket_, config_;
  int port_ = 0;
  std::string endpoint_;
  std::unique_ptr<ChildProcess> cruxd_;
  std::unique_ptr<ChildProcess> loadgen_;
  std::vector<fs::path> daemon_logs_;
};

TEST_F(CruxdRestartTest, CruxctlExitsThreeWithoutDaemon) {
  // No socket file at all: immediate.
  CommandResult r = Cruxctl({"jobs"}, milliseconds(2000));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("no admin socket"), std::string::npos) << r.err;

  // A stale socket file left by a killed daemon: times out within --timeout-ms.
  StartCruxd();
  cruxd_->Kill(SIGKILL);
  ASSERT_TRUE(fs::exists(admin_socket_));
  const auto start = std::chrono::steady_clock::now();
  r = Cruxctl({"status"}, milliseconds(500));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
}

TEST_F(CruxdRestartTest, JobsLevelsAndEpochSurviveKill9) {
  ASSERT_TRUE(fs::exists(CRUX_LOADGEN_BINARY)) << CRUX_LOADGEN_BINARY << " is not built";
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());

  // 1. Jobs arrive through crux-loadgen and get scheduled.
  loadgen_ = std::make_unique<ChildProcess>();
  ASSERT_TRUE(loadgen_->Start(LoadgenArgs(120), dir_.path() / "loadgen1.out",
                              dir_.path() / "loadgen1.err", dir_.path()));
  ASSERT_TRUE(WaitUntil([&] { return AllScheduled(kJobs); }, seconds(60), milliseconds(200)))
      << CruxctlJson({"jobs"}).dump(2);

  // 2. The clients vanish (kill -9; their leases outlive the test), the plan settles: two status
  //    reads 300 ms apart with no re-plan in between, and a dry run that would change nothing
  //    (the applied plan is what the current state gives). That is the reference snapshot.
  loadgen_->Kill(SIGKILL);
  // A degraded link is part of the state that must survive, too; an unknown link is refused.
  const nlohmann::json changed =
      CruxctlJson({"set-link", "tor0-agg0", "degraded", "--capacity-gbps", "100"});
  EXPECT_EQ(changed.value("changed", nlohmann::json::array()).size(), 2u) << changed.dump();
  const CommandResult unknown = Cruxctl({"set-link", "tor0-nowhere", "down"}, seconds(5));
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("tor0-nowhere"), std::string::npos) << unknown.err;
  nlohmann::json status_before;
  std::map<std::string, std::pair<std::string, int>> before;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const nlohmann::json a = CruxctlJson({"status"});
        before = LiveJobs();
        status_before = CruxctlJson({"status"});
        const nlohmann::json dry = CruxctlJson({"plan", "--dry-run"});
        return a.value("replans", 0) == status_before.value("replans", 1) &&
               a.value("epoch", 0) == status_before.value("epoch", 1) &&
               dry.value("changes", nlohmann::json::array({0})).empty();
      },
      seconds(30), milliseconds(300)))
      << "the plan never settled: " << CruxctlJson({"plan", "--dry-run"}).dump();
  ASSERT_EQ(before.size(), static_cast<size_t>(kJobs));
  const uint64_t epoch_before = status_before["epoch"].get<uint64_t>();
  EXPECT_GT(epoch_before, 0u);
  for (const auto& [id, s] : before) {
    EXPECT_EQ(s.first, "scheduled") << id;
    EXPECT_GE(s.second, 0) << id;
  }

  // kill -9 the daemon; cruxctl now reports it unreachable.
  cruxd_->Kill(SIGKILL);
  EXPECT_EQ(Cruxctl({"jobs"}, milliseconds(500)).exit_code, 3);

  // 3. Restart on the same state: jobs, levels and epoch are back before any client speaks.
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());
  const auto after = LiveJobs();
  EXPECT_EQ(after, before);
  const nlohmann::json status_after = CruxctlJson({"status"});
  EXPECT_GE(status_after["epoch"].get<uint64_t>(), epoch_before);
  EXPECT_EQ(status_after["jobs"].get<int>(), kJobs);
  EXPECT_EQ(status_after["links_not_up"].get<int>(), 2);
  bool found_degraded = false;
  const nlohmann::json links = CruxctlJson({"links", "--all"});
  ASSERT_TRUE(links.contains("links"));
  EXPECT_EQ(links["links"].size(), status_after["links"].get<size_t>());
  for (const auto& link : links["links"]) {
    if (link["name"] == "tor0->agg0") {
      found_degraded = true;
      EXPECT_EQ(link["health"], "degraded");
      EXPECT_DOUBLE_EQ(link["capacity_bps"].get<double>(), 100e9);
    }
  }
  EXPECT_TRUE(found_degraded);

  // 4. The same clients come back (same seed = same job ids and placements): re-registration is
  //    idempotent (no CONFLICT), no job is duplicated or lost.
  loadgen_ = std::make_unique<ChildProcess>();
  ASSERT_TRUE(loadgen_->Start(LoadgenArgs(3), dir_.path() / "loadgen2.out",
                              dir_.path() / "loadgen2.err", dir_.path()));
  const std::optional<int> rc = loadgen_->Wait(seconds(60));
  ASSERT_TRUE(rc.has_value()) << "crux-loadgen did not finish";
  EXPECT_EQ(*rc, 0) << loadgen_->Stderr();
  const nlohmann::json summary =
      nlohmann::json::parse(loadgen_->Stdout(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(summary.is_object()) << loadgen_->Stdout();
  EXPECT_EQ(summary.value("registered", -1), kJobs) << summary.dump(2);
  // A non-idempotent registration would be refused as a CONFLICT.
  if (summary.contains("errors")) {
    EXPECT_FALSE(summary["errors"].contains("ERROR_CODE_CONFLICT")) << summary.dump(2);
  }
  // Fresh profile reports may legitimately move levels; the job set must be exactly the same.
  const auto again = LiveJobs();
  ASSERT_EQ(again.size(), before.size());
  for (const auto& [id, s] : before) {
    ASSERT_TRUE(again.count(id)) << id;
    EXPECT_GE(again.at(id).second, 0) << id;
  }
  EXPECT_EQ(CruxctlJson({"status"})["jobs"].get<int>(), kJobs);
  EXPECT_GE(CruxctlJson({"status"})["epoch"].get<uint64_t>(),
            status_after["epoch"].get<uint64_t>());
}

}  // namespace
}  // namespace crux::system_test
