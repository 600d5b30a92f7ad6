// Real processes end to end: cruxd (CruxdHarness: temp config + state dir, random port),
// crux-loadgen playing a few jobs' clients over ZeroMQ, cruxctl --json reading the result (and
// degrading a link); then kill -9 cruxd, restart it on the same state and check that jobs, levels,
// the epoch and the link's health are back and that clients re-register idempotently. Also: cruxctl
// exits 3 when no daemon is running.
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

#include "cruxd_harness.h"
#include "process_util.h"

namespace crux::system_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kJobs = 4;

// The harness's lab settings: short debounce and few samples, so plans settle within a second;
// long leases, so jobs do not expire while the daemon is down.
class CruxdRestartTest : public CruxdTest {
 protected:
  CruxdRestartTest() : CruxdTest("crux_cruxd_restart") {}

  // Starts cruxd and waits until `cruxctl status` answers.
  void StartCruxd() {
    std::string why;
    ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  }

  // job_id -> {state, level} of every job not gone.
  std::map<std::string, std::pair<std::string, int>> LiveJobs() {
    std::map<std::string, std::pair<std::string, int>> out;
    const nlohmann::json j = cruxd_.CruxctlJson({"jobs"});
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
};

TEST_F(CruxdRestartTest, CruxctlExitsThreeWithoutDaemon) {
  // No socket file at all: immediate.
  CommandResult r = cruxd_.Cruxctl({"jobs"}, milliseconds(2000));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("no admin socket"), std::string::npos) << r.err;

  // A stale socket file left by a killed daemon: named as such at once (nothing listens on it),
  // not waited on until --timeout-ms runs out, which would end in "did not answer" instead.
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());
  cruxd_.Kill(SIGKILL);
  ASSERT_TRUE(fs::exists(cruxd_.admin_socket()));
  r = cruxd_.Cruxctl({"status"}, seconds(30));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find(cruxd_.admin_socket().string() + " is a stale socket"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("did not answer"), std::string::npos) << r.err;
}

TEST_F(CruxdRestartTest, JobsLevelsAndEpochSurviveKill9) {
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());

  // 1. Jobs arrive through crux-loadgen and get scheduled.
  StartLoadgen(kJobs, 120, "loadgen1");
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitUntil([&] { return AllScheduled(kJobs); }, seconds(60), milliseconds(200)))
      << cruxd_.CruxctlJson({"jobs"}).dump(2);

  // 2. The clients vanish (kill -9; their leases outlive the test), the plan settles: two status
  //    reads 300 ms apart with no re-plan in between, and a dry run that would change nothing
  //    (the applied plan is what the current state gives). That is the reference snapshot.
  loadgen_->Kill(SIGKILL);
  // A degraded link is part of the state that must survive, too; an unknown link is refused.
  const nlohmann::json changed =
      cruxd_.CruxctlJson({"set-link", "tor0-agg0", "degraded", "--capacity-gbps", "100"});
  EXPECT_EQ(changed.value("changed", nlohmann::json::array()).size(), 2u) << changed.dump();
  const CommandResult unknown = cruxd_.Cruxctl({"set-link", "tor0-nowhere", "down"}, seconds(5));
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("tor0-nowhere"), std::string::npos) << unknown.err;
  nlohmann::json status_before;
  std::map<std::string, std::pair<std::string, int>> before;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const nlohmann::json a = cruxd_.CruxctlJson({"status"});
        before = LiveJobs();
        status_before = cruxd_.CruxctlJson({"status"});
        const nlohmann::json dry = cruxd_.CruxctlJson({"plan", "--dry-run"});
        return a.value("replans", 0) == status_before.value("replans", 1) &&
               a.value("epoch", 0) == status_before.value("epoch", 1) &&
               dry.value("changes", nlohmann::json::array({0})).empty();
      },
      seconds(30), milliseconds(300)))
      << "the plan never settled: " << cruxd_.CruxctlJson({"plan", "--dry-run"}).dump();
  ASSERT_EQ(before.size(), static_cast<size_t>(kJobs));
  const uint64_t epoch_before = status_before["epoch"].get<uint64_t>();
  EXPECT_GT(epoch_before, 0u);
  for (const auto& [id, s] : before) {
    EXPECT_EQ(s.first, "scheduled") << id;
    EXPECT_GE(s.second, 0) << id;
  }

  // kill -9 the daemon; cruxctl now reports it unreachable.
  cruxd_.Kill(SIGKILL);
  EXPECT_EQ(cruxd_.Cruxctl({"jobs"}, milliseconds(500)).exit_code, 3);

  // 3. Restart on the same state: jobs, levels and epoch are back before any client speaks.
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());
  const auto after = LiveJobs();
  EXPECT_EQ(after, before);
  const nlohmann::json status_after = cruxd_.CruxctlJson({"status"});
  EXPECT_GE(status_after["epoch"].get<uint64_t>(), epoch_before);
  EXPECT_EQ(status_after["jobs"].get<int>(), kJobs);
  EXPECT_EQ(status_after["links_not_up"].get<int>(), 2);
  bool found_degraded = false;
  const nlohmann::json links = cruxd_.CruxctlJson({"links", "--all"});
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
  StartLoadgen(kJobs, 3, "loadgen2");
  ASSERT_FALSE(HasFatalFailure());
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
  EXPECT_EQ(cruxd_.CruxctlJson({"status"})["jobs"].get<int>(), kJobs);
  EXPECT_GE(cruxd_.CruxctlJson({"status"})["epoch"].get<uint64_t>(),
            status_after["epoch"].get<uint64_t>());
}

}  // namespace
}  // namespace crux::system_test
