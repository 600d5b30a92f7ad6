// crux-loadgen --hostd (issue #28) against a real cruxd: a few simulated crux-hostd agents, one
// connection per host, carry the parts of jobs placed over their hosts (some jobs on several
// hosts, some hosts with several jobs). Every part registers and gets its host's cut of the
// job's assignment, cruxd merges each job from its parts (cruxctl --json job <id>: one part per
// host of the placement, merge complete), and the loadgen summary counts the agents, the parts
// and one held-back arrival's trigger-to-push latency.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "crux/loadgen/workload.h"
#include "crux/spec/topology_spec.h"
#include "cruxd_harness.h"
#include "process_util.h"

namespace crux::system_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kAgents = 4;
constexpr int kJobs = 6;
constexpr int kSeed = 3;

// The placement crux-loadgen computes for these arguments (same functions, same seed).
std::vector<loadgen::SimJob> ExpectedJobs() {
  auto topo = spec::LoadTopologyFile(kExampleClos2.string());
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  if (!topo.ok()) return {};
  loadgen::WorkloadOptions wo;
  wo.jobs = kJobs;
  wo.seed = kSeed;
  auto jobs = loadgen::MakeHostdJobs(*topo, wo, kAgents);
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return jobs.ok() ? *jobs : std::vector<loadgen::SimJob>{};
}

TEST(LoadgenHostdE2eTest, AgentsRegisterPartsThatCruxdMergesIntoMultiHostJobs) {
  if (!fs::exists(CRUXD_BINARY) || !fs::exists(CRUXCTL_BINARY) ||
      !fs::exists(CRUX_LOADGEN_BINARY)) {
    GTEST_SKIP() << "cruxd, cruxctl or crux-loadgen not built";
  }
  const std::vector<loadgen::SimJob> jobs = ExpectedJobs();
  ASSERT_EQ(jobs.size(), static_cast<size_t>(kJobs));
  const std::vector<loadgen::SimAgent> agents = loadgen::AgentsOf(jobs);
  size_t parts = 0, multi_host = 0, shared_hosts = 0;
  for (const loadgen::SimJob& j : jobs) {
    parts += j.hosts.size();
    multi_host += j.hosts.size() >= 2 ? 1 : 0;
  }
  for (const loadgen::SimAgent& a : agents) shared_hosts += a.parts.size() >= 2 ? 1 : 0;
  // The seed gives the shape this test is about.
  ASSERT_GE(multi_host, 2u);
  ASSERT_GE(shared_hosts, 1u);
  ASSERT_EQ(agents.size(), static_cast<size_t>(kAgents));

  TempDir tmp("crux_loadgen_hostd");
  CruxdHarness cruxd(tmp.path());
  cruxd.WriteConfig();
  std::string why;
  ASSERT_TRUE(cruxd.Start({}, &why)) << why;

  ChildProcess loadgen;
  std::vector<std::string> argv = {CRUX_LOADGEN_BINARY,
                                   "--endpoint",
                                   cruxd.endpoint(),
                                   "--insecure",
                                   "--topology",
                                   kExampleClos2.string(),
                                   "--hostd",
                                   std::to_string(kAgents),
                                   "--jobs",
                                   std::to_string(kJobs),
                                   "--seed",
                                   std::to_string(kSeed),
                                   "--arrivals",
                                   "1",
                                   "--arrival-interval-ms",
                                   "200",
                                   "--report-interval-ms",
                                   "1000",
                                   "--duration-s",
                                   "0",  // Until SIGINT.
                                   "--json"};
  ASSERT_TRUE(
      loadgen.Start(argv, tmp.path() / "loadgen.out", tmp.path() / "loadgen.err", {}, {}, &why))
      << why;

  // Every job (the arrival too) is merged from one part per host of its placement, scheduled,
  // and every part acknowledged the job's current epoch (its host's cut of the assignment).
  std::map<std::string, nlohmann::json> last;
  auto settled = [&] {
    for (const loadgen::SimJob& j : jobs) {
      const nlohmann::json d = cruxd.PollJson({"job", j.job_id});
      last[j.job_id] = d;
      if (!d.contains("parts") || !d.contains("merge") || !d.contains("summary")) return false;
      if (d["parts"].size() != j.hosts.size() || !d["merge"].value("complete", false)) return false;
      if (d["summary"].value("state", "") != "scheduled") return false;
      const uint64_t epoch = d["summary"].value("epoch", uint64_t{0});
      for (const auto& p : d["parts"]) {
        if (!p.value("connected", false) || p.value("acked_epoch", uint64_t{0}) != epoch) {
          return false;
        }
      }
    }
    return true;
  };
  const bool ok = WaitUntil(settled, seconds(180), milliseconds(200));
  if (!ok) {
    for (const auto& [id, d] : last) std::cerr << id << ": " << d.dump() << "\n";
    std::cerr << "crux-loadgen stderr:\n" << loadgen.Stderr() << "\n";
    cruxd.DumpLogs();
  }
  ASSERT_TRUE(ok) << "the jobs did not settle as merged multi-host jobs";
  for (const loadgen::SimJob& j : jobs) {
    const nlohmann::json& d = last[j.job_id];
    std::set<std::string> hosts;
    for (const auto& h : d["hosts"]) hosts.insert(h.get<std::string>());
    EXPECT_EQ(hosts, std::set<std::string>(j.hosts.begin(), j.hosts.end())) << j.job_id;
    EXPECT_EQ(d["merge"].value("parts", 0u), j.hosts.size()) << j.job_id;
    EXPECT_EQ(d["merge"].value("conflicting_ranks", 1u), 0u) << j.job_id;
    uint32_t gpus = 0;
    for (const auto& p : d["parts"]) gpus += p.value("local_ranks", 0u);
    size_t ranks = 0;
    for (const auto& s : j.host_slots) ranks += s.size();
    EXPECT_EQ(gpus, ranks) << j.job_id;
    if (j.hosts.size() >= 2) {  // Every pattern sends across a host boundary.
      EXPECT_GT(d["merge"].value("cross_host_bytes", uint64_t{0}), 0u) << j.job_id;
    }
  }

  loadgen.Kill(SIGINT);
  const std::optional<int> rc = loadgen.Wait(milliseconds(60000));
  ASSERT_TRUE(rc.has_value()) << "crux-loadgen did not stop on SIGINT";
  EXPECT_EQ(*rc, 0) << loadgen.Stderr();
  const nlohmann::json s =
      nlohmann::json::parse(loadgen.Stdout(), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(s.is_discarded()) << loadgen.Stdout();
  EXPECT_EQ(s.value("agents", 0), kAgents);
  EXPECT_EQ(s.value("hostd_jobs", 0), kJobs);
  EXPECT_EQ(s.value("jobs", 0), static_cast<int>(parts));  // Clients = parts.
  EXPECT_EQ(s.value("registered", 0), static_cast<int>(parts));
  EXPECT_EQ(s.value("register_failed", -1), 0);
  EXPECT_EQ(s.value("stray_pushes", 1), 0);
  EXPECT_TRUE(s["errors"].empty()) << s["errors"].dump();
  EXPECT_GE(s.value("assignments", 0), static_cast<int>(parts));
  EXPECT_GE(s.value("acks_sent", 0), static_cast<int>(parts));
  // The parts register with HostPart.accepts_batches: every frame of pushes (an AssignmentBatch
  // or a single Assignment) is answered by one frame of acks.
  EXPECT_GT(s.value("push_frames", 0), 0);
  EXPECT_EQ(s.value("ack_frames", -1), s.value("push_frames", -2));
  EXPECT_EQ(s.value("arrivals", 0), 1);
  EXPECT_EQ(s["arrival_trigger_to_push"].value("samples", 0), 1)
      << s["arrival_trigger_to_push"].dump();
}

}  // namespace
}  // namespace crux::system_test
