// crux-sim end to end, in-process: run / compare / gen-trace on tiny inputs, the files they
// write (summary.json parsed back, CSVs, non-empty PNGs from gnuplot) and the exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "crux/sim/workload/file_io.h"
#include "crux/sim/workload/trace.h"
#include "sim_cli.h"

namespace crux::simcli {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "crux-sim");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const int code = RunSimCli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

class SimCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("crux_sim_cli_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

nlohmann::json ReadJson(const std::string& path) {
  core::Result<std::string> text = sim::workload::ReadTextFile(path);
  EXPECT_TRUE(text.ok()) << path;
  return nlohmann::json::parse(text.ok() ? *text : "{}");
}

void ExpectPng(const fs::path& p) {
  ASSERT_TRUE(fs::exists(p)) << p;
  EXPECT_GT(fs::file_size(p), 1000u) << p;
  std::ifstream in(p, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG") << p;
}

TEST_F(SimCliTest, RunWritesSummaryCsvsAndPlots) {
  const CliResult r =
      Cli({"run", "--topology", (kConfigs / "topologies/example_explicit.yaml").string(), "--jobs",
           (kConfigs / "scenarios/jobs/example1_short_first.yaml").string(), "--policy", "fixed",
           "--horizon-s", "400", "--out", P("run")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("policy fixed: gpu_utilization 0.41"));
  EXPECT_THAT(r.err, HasSubstr("simulated"));  // Progress line.
  const nlohmann::json s = ReadJson(P("run/summary.json"));
  EXPECT_EQ(s["policy"], "fixed");
  // Example 1, short-iteration job first: 41.7% (paper), over 400 s.
  EXPECT_NEAR(s["gpu_utilization"].get<double>(), 5.0 / 12.0, 0.01);
  EXPECT_GT(s["cluster_utilization"].get<double>(), 0);
  ASSERT_EQ(s["jobs"].size(), 2u);
  for (const auto& j : s["jobs"]) {
    for (const char* key : {"id", "gpus", "iterations", "jct_s", "mean_iteration_s"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["gpus"], 10);
    EXPECT_GT(j["iterations"].get<int>(), 50);
  }
  EXPECT_GT(s["events"].get<uint64_t>(), 0u);
  EXPECT_TRUE(s["wall_s"].is_number());
  EXPECT_TRUE(s["link_class_utilization"].is_object());
  EXPECT_FALSE(s["link_class_utilization"].empty());
  core::Result<std::string> ts = sim::workload::ReadTextFile(P("run/timeseries.csv"));
  ASSERT_TRUE(ts.ok());
  EXPECT_THAT(*ts, HasSubstr("t_s,gpu_utilization,cluster_utilization,running_jobs\n"));
  EXPECT_GT(std::count(ts->begin(), ts->end(), '\n'), 10);
  EXPECT_TRUE(fs::exists(P("run/jobs.csv")));
  for (const char* png : {"utilization.png", "jct_cdf.png", "slowdown.png"}) {
    ExpectPng(dir_ / "run" / png);
  }
}

TEST_F(SimCliTest, ScenarioAndCompareWithATraceWriteATableAndCombinedPlots) {
  // A small trace on the example Clos: two placed jobs and one placed by the policy.
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, std::string(sim::workload::kTraceHeader) +
                                                      "\n"
                                                      "a,0,60,,16,host0;host4,bert_large\n"
                                                      "b,0,60,,16,host1;host5,gpt2_medium\n"
                                                      "c,10,30,,8,,resnet50\n")
                  .ok());
  const CliResult r =
      Cli({"compare", "--topology", (kConfigs / "topologies/example_clos2.yaml").string(),
           "--trace", trace, "--policies", "crux,ecmp,ideal", "--quiet", "--out", P("cmp")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;  // --quiet.
  EXPECT_THAT(r.out, HasSubstr("policy"));
  EXPECT_THAT(r.out, HasSubstr("vs_ideal"));
  for (const char* p : {"crux", "ecmp", "ideal"}) {
    EXPECT_THAT(r.out, HasSubstr(p));
    const nlohmann::json s = ReadJson(P(std::string("cmp/") + p + "/summary.json"));
    EXPECT_EQ(s["policy"], p);
    ASSERT_EQ(s["jobs"].size(), 3u);
    EXPECT_EQ(s["jobs"][2]["model"], "resnet50");
    EXPECT_NEAR(s["jobs"][0]["jct_s"].get<double>(), 60, 1e-6);
  }
  const nlohmann::json c = ReadJson(P("cmp/compare.json"));
  ASSERT_EQ(c["policies"].size(), 3u);
  EXPECT_NEAR(c["policies"][2]["ratio_to_ideal"].get<double>(), 1.0, 1e-9);
  for (const auto& p : c["policies"]) {
    EXPECT_LE(p["gpu_utilization"].get<double>(), 1.0 + 1e-9);
    EXPECT_GT(p["gpu_utilization"].get<double>(), 0.0);
  }
  for (const char* png : {"utilization.png", "jct_cdf.png", "slowdown.png"}) {
    ExpectPng(dir_ / "cmp" / png);
  }
  // The same through a scenario file.
  const std::string sc = P("s.yaml");
  ASSERT_TRUE(
      sim::workload::WriteTextFile(
          sc, "scenario:\n  topology: " + (kConfigs / "topologies/example_clos2.yaml").string() +
                  "\n  trace: t.csv\n  models: " + (kConfigs / "models.yaml").string() +
                  "\n  policies: [ecmp]\n  horizon_s: 50\n")
          .ok());
  const CliResult s = Cli({"run", "--scenario", sc, "--quiet", "--no-plots", "--out", P("sc")});
  ASSERT_EQ(s.code, 0) << s.err;
  const nlohmann::json sj = ReadJson(P("sc/summary.json"));
  EXPECT_EQ(sj["policy"], "ecmp");
  EXPECT_EQ(sj["horizon_s"], 50.0);
  EXPECT_FALSE(fs::exists(P("sc/utilization.png")));
}

TEST_F(SimCliTest, LinkFailureSlowsTheJobThatCrossesIt) {
  // Example 1's shared sw0 <-> sw1 link degraded to a quarter for the second half of the run:
  // the jobs' iterations slow down and utilisation drops below the undisturbed 41.7%.
  const std::string events = P("e.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(events, "time_s,a,b,gbps\n200,sw0,sw1,25\n").ok());
  const std::string topo = (kConfigs / "topologies/example_explicit.yaml").string();
  const std::string jobs = (kConfigs / "scenarios/jobs/example1_short_first.yaml").string();
  const CliResult r =
      Cli({"run", "--topology", topo, "--jobs", jobs, "--policy", "fixed", "--horizon-s", "400",
           "--link-events", events, "--quiet", "--no-plots", "--out", P("fail")});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json s = ReadJson(P("fail/summary.json"));
  EXPECT_LT(s["gpu_utilization"].get<double>(), 5.0 / 12.0 - 0.05);
  EXPECT_GT(s["gpu_utilization"].get<double>(), 0.1);
  ASSERT_TRUE(sim::workload::WriteTextFile(events, "time_s,a,b,gbps\n200,sw0,host3,25\n").ok());
  const CliResult bad = Cli({"run", "--topology", topo, "--jobs", jobs, "--link-events", events,
                             "--quiet", "--out", P("bad")});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("line 2, column 3 (b): no link between 'sw0' and 'host3'"));
}

TEST_F(SimCliTest, GenTraceWritesAParsableTraceAndStatistics) {
  const CliResult r = Cli({"gen-trace", "--days", "1", "--seed", "7", "--topology",
                           (kConfigs / "topologies/lingjun.yaml").string(), "--out", P("g.csv")});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json stats = nlohmann::json::parse(r.out);
  EXPECT_GT(stats["jobs"].get<int>(), 200);
  core::Result<std::vector<sim::workload::TraceJob>> t = sim::workload::LoadTraceFile(P("g.csv"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(static_cast<int>(t->size()), stats["jobs"].get<int>());
  for (const auto& j : *t) EXPECT_FALSE(j.placement.empty());
  // Deterministic.
  const CliResult again =
      Cli({"gen-trace", "--days", "1", "--seed", "7", "--topology",
           (kConfigs / "topologies/lingjun.yaml").string(), "--out", P("g2.csv")});
  ASSERT_EQ(again.code, 0);
  EXPECT_EQ(*sim::workload::ReadTextFile(P("g.csv")), *sim::workload::ReadTextFile(P("g2.csv")));
}

TEST_F(SimCliTest, GenTraceLoadAndScatterSetTheGapAndFragmentPlacement) {
  const std::string topo = (kConfigs / "topologies/crux_clos2_2k_os1.yaml").string();
  const CliResult packed =
      Cli({"gen-trace", "--days", "1", "--load", "0.5", "--topology", topo, "--out", P("p.csv")});
  ASSERT_EQ(packed.code, 0) << packed.err;
  const nlohmann::json p = nlohmann::json::parse(packed.out);
  EXPECT_NEAR(p["offered_load"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(p["cluster_gpus"].get<int>(), 2768);
  EXPECT_GT(p["mean_interarrival_s"].get<double>(), 240);  // Lighter than the default (0.58).
  EXPECT_EQ(p["share_jobs_may_contend"].get<double>(), 0);
  const CliResult heavy = Cli({"gen-trace", "--days", "1", "--load", "0.95", "--scatter", "1",
                               "--topology", topo, "--out", P("h.csv")});
  ASSERT_EQ(heavy.code, 0) << heavy.err;
  const nlohmann::json h = nlohmann::json::parse(heavy.out);
  EXPECT_GT(h["jobs"].get<int>(), p["jobs"].get<int>());
  EXPECT_GT(h["mean_gpu_occupancy"].get<double>(), p["mean_gpu_occupancy"].get<double>());
  EXPECT_GT(h["share_jobs_may_contend"].get<double>(), 0.1);
  EXPECT_GT(h["share_gpus_may_contend"].get<double>(), 0.5);
}

TEST_F(SimCliTest, OverlapStartOverrideExposesCommunication) {
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, std::string(sim::workload::kTraceHeader) +
                                                      "\na,0,60,,16,host0;host4,bert_large\n")
                  .ok());
  const std::string topo = (kConfigs / "topologies/example_clos2.yaml").string();
  const CliResult base = Cli({"run", "--topology", topo, "--trace", trace, "--policy", "ideal",
                              "--quiet", "--no-plots", "--out", P("base")});
  ASSERT_EQ(base.code, 0) << base.err;
  const CliResult none = Cli({"run", "--topology", topo, "--trace", trace, "--policy", "ideal",
                              "--overlap-start", "1", "--quiet", "--no-plots", "--out", P("none")});
  ASSERT_EQ(none.code, 0) << none.err;
  const nlohmann::json b = ReadJson(P("base/summary.json"));
  const nlohmann::json n = ReadJson(P("none/summary.json"));
  // bert_large: 0.134 s compute; without overlap the all-reduce is added to every iteration.
  EXPECT_GT(n["jobs"][0]["mean_iteration_s"].get<double>(),
            b["jobs"][0]["mean_iteration_s"].get<double>() + 1e-3);
  EXPECT_LT(n["gpu_utilization"].get<double>(), b["gpu_utilization"].get<double>());
}

TEST_F(SimCliTest, BadInputExitsTwoWithAMessage) {
  const std::string topo = (kConfigs / "topologies/example_explicit.yaml").string();
  const std::string jobs = (kConfigs / "jobs/example1.yaml").string();
  const std::string bad_trace = P("bad.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(
                  bad_trace, std::string(sim::workload::kTraceHeader) + "\na,-1,10,,8,,resnet50\n")
                  .ok());
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const Case cases[] = {
      {{"run", "--topology", topo, "--jobs", jobs, "--policy", "magic", "--out", P("o")},
       "--policy: unknown policy 'magic'"},
      {{"run", "--topology", P("none.yaml"), "--jobs", jobs, "--out", P("o")}, "none.yaml"},
      {{"run", "--topology", topo, "--out", P("o")}, "--jobs or --trace: one is required"},
      {{"run", "--jobs", jobs, "--out", P("o")}, "--topology: required"},
      {{"run", "--topology", topo, "--jobs", jobs, "--trace", bad_trace, "--out", P("o")},
       "give only one"},
      {{"run", "--topology", topo, "--trace", bad_trace, "--out", P("o")},
       "line 2, column 2 (arrival_s)"},
      {{"run", "--topology", topo, "--jobs", jobs, "--levels", "0", "--out", P("o")}, "--levels"},
      {{"run", "--topology", topo, "--jobs", jobs, "--horizon-s", "-3", "--out", P("o")},
       "--horizon-s"},
      {{"run", "--topology", topo, "--jobs", jobs}, "--out is required"},
      {{"compare", "--topology", topo, "--jobs", jobs, "--policies", "crux,nope", "--out", P("o")},
       "--policies: unknown policy 'nope'"},
      {{"gen-trace", "--days", "0", "--out", P("x.csv")}, "--days"},
      {{"gen-trace", "--load", "0.5", "--out", P("x.csv")}, "--load/--scatter: need --topology"},
      {{"gen-trace", "--scatter", "2", "--out", P("x.csv")}, "--scatter"},
      {{"run", "--topology", topo, "--jobs", jobs, "--overlap-start", "0.5", "--out", P("o")},
       "--overlap-start: only for traces"},
      {{"run", "--topology", topo, "--jobs", jobs, "--overlap-start", "1.5", "--out", P("o")},
       "--overlap-start"},
      {{"run", "--topology", topo, "--jobs", jobs, "--load", "0.5", "--out", P("o")},
       "--load: needs a scenario that generates"},
      {{"gen-trace", "--models", P("missing.yaml"), "--out", P("x.csv")}, "missing.yaml"},
      {{"frobnicate"}, "error"},
  };
  for (const Case& c : cases) {
    const CliResult r = Cli(c.args);
    EXPECT_EQ(r.code, kExitUsage) << c.error << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.error));
    EXPECT_THAT(r.err, HasSubstr("crux-sim: error"));
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(fs::exists(P("o/summary.json")));
}

}  // namespace
}  // namespace crux::simcli
