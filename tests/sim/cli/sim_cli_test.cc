// crux-sim end to end, in-process: run / compare / gen-trace on tiny inputs, the files they
// write (summary.json parsed back, CSVs, non-empty PNGs from gnuplot) and the exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "crux/core/policies/policy.h"
#include "crux/sim/workload/file_io.h"
#include "crux/sim/workload/models.h"
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
  EXPECT_TRUE(s["engine"]["fast_forwarded_s"].is_number());
  EXPECT_GT(s["engine"]["flow_events"].get<uint64_t>(), 0u);
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

// --days stretches a scenario's generated trace (the two-week runs of docs/evaluation.md).
TEST_F(SimCliTest, DaysOverridesTheSpanOfAScenariosGeneratedTrace) {
  const std::string sc = (kConfigs / "scenarios/llm2025_clos2_os1.yaml").string();
  auto jobs_for = [&](const std::string& days, const std::string& out) {
    const CliResult r = Cli({"run", "--scenario", sc, "--policy", "ideal", "--days", days,
                             "--horizon-s", "60", "--quiet", "--no-plots", "--out", P(out)});
    EXPECT_EQ(r.code, 0) << r.err;
    return ReadJson(P(out + "/summary.json"))["jobs"].size();
  };
  const size_t short_trace = jobs_for("0.05", "d005");
  const size_t longer_trace = jobs_for("0.2", "d02");
  EXPECT_GT(short_trace, 0u);
  EXPECT_GT(longer_trace, 2 * short_trace);
}

TEST_F(SimCliTest, FaultsWritesAReportPerModeAndRejectsUnknownModes) {
  const std::string sc = (kConfigs / "scenarios/testbed_pair.yaml").string();
  const CliResult r = Cli({"faults",
                           "--scenario",
                           sc,
                           "--faults",
                           "3",
                           "--fault-start-s",
                           "20",
                           "--fault-spacing-s",
                           "20",
                           "--fault-min-duration-s",
                           "5",
                           "--fault-max-duration-s",
                           "10",
                           "--horizon-s",
                           "100",
                           "--modes",
                           "none,manual,auto",
                           "--quiet",
                           "--out",
                           P("faults")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("precision"));
  const nlohmann::json rep = ReadJson(P("faults/report.json"));
  ASSERT_EQ(rep["modes"].size(), 3u);
  EXPECT_EQ(rep["modes"][0]["mode"], "none");
  EXPECT_EQ(rep["modes"][0]["score"]["injected"], 0);
  EXPECT_EQ(rep["modes"][1]["link_decisions"], 0);  // automatic off: nothing changes
  EXPECT_EQ(rep["setup"]["faults"], 3);
  EXPECT_TRUE(fs::exists(P("faults/report.md")));
  EXPECT_TRUE(fs::exists(P("faults/faults_auto.csv")));
  const CliResult bad = Cli({"faults", "--scenario", sc, "--faults", "1", "--horizon-s", "50",
                             "--modes", "auto,sideways", "--quiet", "--out", P("bad")});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("--modes: unknown mode 'sideways'"));
}

// --after-reroute-s: one busy switch-to-switch cable down, the run going on as long again; in
// the Fig. 23 Clos the re-route leaves every other link alone (2 decisions: the cable's two
// directions), and a usage error for a faults file.
TEST_F(SimCliTest, AfterRerouteFailsOneBusyFabricCableAndNothingElseIsMarked) {
  const std::string sc = (kConfigs / "scenarios/fig23_clos2_main.yaml").string();
  const CliResult r = Cli({"faults", "--scenario", sc, "--after-reroute-s", "120", "--modes",
                           "auto", "--quiet", "--out", P("ar")});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json rep = ReadJson(P("ar/report.json"));
  ASSERT_EQ(rep["modes"].size(), 1u);
  const nlohmann::json& m = rep["modes"][0];
  ASSERT_EQ(m["per_fault"].size(), 1u) << m.dump();
  const nlohmann::json& f = m["per_fault"][0];
  EXPECT_EQ(f["kind"], "link_down");
  const std::string target = f["target"].get<std::string>();
  EXPECT_EQ(target.find("host"), std::string::npos) << target;  // Switch to switch.
  EXPECT_DOUBLE_EQ(f["duration_s"].get<double>(), 120);
  EXPECT_EQ(m["score"]["detected"], 1) << m["score"].dump();
  EXPECT_EQ(m["score"]["decisions"], 2) << m["false_decisions_first_50"].dump();
  EXPECT_EQ(m["score"]["precision"], 1.0);
  const CliResult bad = Cli({"faults", "--scenario", sc, "--after-reroute-s", "120",
                             "--faults-file", P("none.csv"), "--quiet", "--out", P("bad")});
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("--after-reroute-s: not with --faults-file"));
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

TEST_F(SimCliTest, GenTraceMixAndSpillSelectTheLlm2025MixAndSpillPlacement) {
  const std::string topo = (kConfigs / "topologies/crux_clos2_2k_os1.yaml").string();
  const CliResult llm = Cli({"gen-trace", "--days", "2", "--load", "0.58", "--mix", "llm-2025",
                             "--spill", "0.6", "--topology", topo, "--out", P("llm.csv")});
  ASSERT_EQ(llm.code, 0) << llm.err;
  core::Result<std::vector<sim::workload::TraceJob>> t = sim::workload::LoadTraceFile(P("llm.csv"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // llm-2025 draws 2024-2026 hybrid profiles for its large classes; lingjun-2023 never does.
  core::Result<sim::workload::ModelCatalog> models =
      sim::workload::LoadModelsFile((kConfigs / "models.yaml").string());
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  const auto hybrid = [&](const std::vector<sim::workload::TraceJob>& jobs) {
    return std::count_if(jobs.begin(), jobs.end(), [&](const sim::workload::TraceJob& j) {
      const sim::workload::ModelProfile* m = models->Find(j.model);
      return m != nullptr && m->hybrid.has_value();
    });
  };
  EXPECT_GT(hybrid(*t), 0);
  const CliResult old = Cli({"gen-trace", "--days", "2", "--load", "0.58", "--spill", "0.6",
                             "--topology", topo, "--out", P("old.csv")});
  ASSERT_EQ(old.code, 0) << old.err;
  core::Result<std::vector<sim::workload::TraceJob>> o = sim::workload::LoadTraceFile(P("old.csv"));
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(hybrid(*o), 0);
  // Spill puts multi-host jobs across ToRs: some may contend (packing alone gives 0 here).
  EXPECT_GT(nlohmann::json::parse(old.out)["share_gpus_may_contend"].get<double>(), 0.05);
  // Errors name the flag.
  const CliResult bad = Cli({"gen-trace", "--days", "1", "--mix", "nosuch", "--out", P("x.csv")});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--mix: unknown mix 'nosuch'"));
  const CliResult unplaced =
      Cli({"gen-trace", "--days", "1", "--spill", "0.5", "--out", P("y.csv")});
  EXPECT_EQ(unplaced.code, 2);
  EXPECT_THAT(unplaced.err, HasSubstr("--spill: need --topology"));
}

TEST_F(SimCliTest, ControlLoopIsStableByDefaultAndRecordsItsMode) {
  const std::vector<std::string> base = {
      "run",
      "--topology",
      (kConfigs / "topologies/example_explicit.yaml").string(),
      "--jobs",
      (kConfigs / "scenarios/jobs/example1_short_first.yaml").string(),
      "--horizon-s",
      "200",
      "--no-plots",
      "--quiet"};
  auto with = [&](std::vector<std::string> extra, const std::string& out) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), {"--out", P(out)});
    return Cli(a);
  };
  const CliResult def = with({}, "def");
  ASSERT_EQ(def.code, 0) << def.err;
  const nlohmann::json d = ReadJson(P("def/summary.json"));
  EXPECT_EQ(d["control"]["mode"], "loop");
  EXPECT_EQ(d["control"]["stable"], true);
  EXPECT_DOUBLE_EQ(d["control"]["reoptimize_interval_s"].get<double>(), 600);
  EXPECT_THAT(def.out, HasSubstr("work_utilization"));
  // Without flops_per_iteration every job has the same FLOP/s per GPU: both metrics agree.
  EXPECT_NEAR(d["work_utilization"].get<double>(), d["gpu_utilization"].get<double>(), 1e-9);
  for (const auto& j : d["jobs"]) EXPECT_GT(j["flops_per_compute_s"].get<double>(), 0);
  const CliResult full = with({"--no-stable"}, "full");
  ASSERT_EQ(full.code, 0) << full.err;
  const nlohmann::json f = ReadJson(P("full/summary.json"));
  EXPECT_EQ(f["control"]["stable"], false);
  EXPECT_DOUBLE_EQ(f["control"]["reoptimize_interval_s"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(d["control"]["reoptimize_min_gain"].get<double>(), 0.01);
  const CliResult every =
      with({"--reoptimize-interval-s", "60", "--reoptimize-min-gain", "0"}, "every");
  ASSERT_EQ(every.code, 0) << every.err;
  const nlohmann::json e = ReadJson(P("every/summary.json"));
  EXPECT_DOUBLE_EQ(e["control"]["reoptimize_interval_s"].get<double>(), 60);
  EXPECT_DOUBLE_EQ(e["control"]["reoptimize_min_gain"].get<double>(), 0);
  // Min gain 0: every re-optimisation takes the fresh plan without weighing it.
  EXPECT_EQ(e["control"]["reoptimizations"].get<int>(), 0);
  const CliResult both = with({"--no-stable", "--reoptimize-interval-s", "60"}, "both");
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr("--reoptimize-interval-s, --reoptimize-min-gain: only with "
                                  "stable re-planning"));
  const CliResult bad_gain = with({"--reoptimize-min-gain", "1"}, "bad_gain");
  EXPECT_EQ(bad_gain.code, 2) << bad_gain.err;
  const CliResult oracle = with({"--oracle", "--no-stable"}, "oracle");
  EXPECT_EQ(oracle.code, 2);
  EXPECT_THAT(oracle.err, HasSubstr("the oracle has no control loop"));
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
      {{"gen-trace", "--load", "0.5", "--out", P("x.csv")}, "--load: need --topology"},
      {{"gen-trace", "--share", "1", "--out", P("x.csv")}, "--share: need --topology"},
      {{"gen-trace", "--share", "1.5", "--out", P("x.csv")}, "--share"},
      {{"gen-trace", "--scatter", "2", "--out", P("x.csv")}, "--scatter"},
      {{"run", "--topology", topo, "--jobs", jobs, "--overlap-start", "0.5", "--out", P("o")},
       "--overlap-start: only for traces"},
      {{"run", "--topology", topo, "--jobs", jobs, "--overlap-start", "1.5", "--out", P("o")},
       "--overlap-start"},
      {{"run", "--topology", topo, "--jobs", jobs, "--load", "0.5", "--out", P("o")},
       "--load: needs a scenario that generates"},
      {{"run", "--topology", topo, "--jobs", jobs, "--days", "14", "--out", P("o")},
       "--days: needs a scenario that generates"},
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

// ---- Issue #10 (black-box attack report) ----

std::string Topo(const std::string& name) { return (kConfigs / "topologies" / name).string(); }

// Item 6: the second 128-GPU job, arriving after the first has left, was refused ("not enough
// whole free hosts for 128 GPUs (need 16, 0 free)").
TEST_F(SimCliTest, JobsArrivingAfterOthersLeftGetTheirGpus) {
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, std::string(sim::workload::kTraceHeader) +
                                                      "\na,0,10,,128,,bert_large"
                                                      "\nb,100,10,,128,,bert_large\n")
                  .ok());
  const CliResult r = Cli({"run", "--topology", Topo("example_clos2.yaml"), "--trace", trace,
                           "--quiet", "--no-plots", "--out", P("o")});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json s = ReadJson(P("o/summary.json"));
  ASSERT_EQ(s["jobs"].size(), 2u);
  EXPECT_NEAR(s["jobs"][1]["finish_s"].get<double>(), 110, 1e-9);
  EXPECT_GT(s["jobs"][1]["iterations"].get<int>(), 0);
}

// Item 6: overlapping explicit placements used to oversubscribe a host without a word.
TEST_F(SimCliTest, OverlappingExplicitPlacementsAreAnErrorNamingJobsAndHost) {
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, std::string(sim::workload::kTraceHeader) +
                                                      "\na,0,100,,16,host3;host9,bert_large"
                                                      "\nb,50,100,,16,host9;host12,resnet50\n")
                  .ok());
  const CliResult r = Cli({"run", "--topology", Topo("example_clos2.yaml"), "--trace", trace,
                           "--quiet", "--no-plots", "--out", P("o")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("crux-sim: error: line 3: job b: placement: host 'host9' has 0 of "
                               "8 GPUs free at t=50 s, the job needs 8; held by line 2: job a"));
  EXPECT_FALSE(fs::exists(P("o/summary.json")));
}

// Item 6, jobs files: their placements are given, and checked the same way.
TEST_F(SimCliTest, JobsFileThatOversubscribesAHostIsAnError) {
  const std::string jobs = P("j.yaml");
  ASSERT_TRUE(sim::workload::WriteTextFile(
                  jobs,
                  "jobs:\n"
                  "  - {id: a, hosts: [host0, host2], gpus_per_host: 5, compute_time_s: 1,\n"
                  "     flows: [{src: host0, dst: host2, bytes: 1000000}]}\n"
                  "  - {id: b, hosts: [host1, host2], gpus_per_host: 5, compute_time_s: 1,\n"
                  "     flows: [{src: host1, dst: host2, bytes: 1000000}]}\n")
                  .ok());
  const CliResult r = Cli({"run", "--topology", Topo("example_explicit.yaml"), "--jobs", jobs,
                           "--quiet", "--no-plots", "--out", P("o")});
  EXPECT_EQ(r.code, kExitUsage) << r.err;
  EXPECT_THAT(r.err, HasSubstr("j.yaml: job 'b': host 'host2' has 3 of 8 GPUs free at t=0 s, the "
                               "job needs 5; held by job 'a' (5 GPUs, to the horizon)"));
  // With 10 GPUs per host they fit.
  const CliResult ok =
      Cli({"run", "--topology", Topo("example_explicit.yaml"), "--jobs", jobs, "--gpus-per-host",
           "10", "--horizon-s", "10", "--quiet", "--no-plots", "--out", P("o")});
  EXPECT_EQ(ok.code, kExitOk) << ok.err;
}

// Item 7: --horizon-s 1e10 died with "cannot create std::vector larger than max_size()" and
// 1e15 hung. Both are now a usage error naming the option and the bound.
TEST_F(SimCliTest, HorizonIsBoundedAndAnIdleHorizonIsCheap) {
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, std::string(sim::workload::kTraceHeader) +
                                                      "\na,0,10,,16,host0;host4,bert_large\n")
                  .ok());
  const std::string topo = Topo("example_clos2.yaml");
  for (const char* h : {"1e10", "1e15", "1000000001", "1e308"}) {
    const CliResult r = Cli({"run", "--topology", topo, "--trace", trace, "--horizon-s", h,
                             "--quiet", "--no-plots", "--out", P("o")});
    EXPECT_EQ(r.code, kExitUsage) << h << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("crux-sim: error: --horizon-s: must be > 0 and <= 1e+09 s "
                                 "(about 31.7 years; got "))
        << h;
  }
  // Too many samples for the horizon: named, with the smallest interval that works.
  const CliResult many =
      Cli({"run", "--topology", topo, "--trace", trace, "--horizon-s", "1e9", "--sample-interval-s",
           "1", "--quiet", "--no-plots", "--out", P("o")});
  EXPECT_EQ(many.code, kExitUsage);
  EXPECT_THAT(many.err, HasSubstr("--sample-interval-s: 1 s gives more than 1000000 samples over "
                                  "the 1e+09 s horizon (use at least 1000 s)"));
  // The longest horizon itself runs, and as fast as a short one: the 10 s job is simulated and
  // the remaining 31.7 years are skipped (same event count as with a 1-hour horizon).
  const CliResult longest = Cli({"run", "--topology", topo, "--trace", trace, "--horizon-s", "1e9",
                                 "--quiet", "--no-plots", "--out", P("long")});
  ASSERT_EQ(longest.code, kExitOk) << longest.err;
  const CliResult hour = Cli({"run", "--topology", topo, "--trace", trace, "--horizon-s", "3600",
                              "--quiet", "--no-plots", "--out", P("hour")});
  ASSERT_EQ(hour.code, kExitOk) << hour.err;
  const nlohmann::json l = ReadJson(P("long/summary.json"));
  const nlohmann::json s = ReadJson(P("hour/summary.json"));
  EXPECT_EQ(l["events"], s["events"]);
  EXPECT_EQ(l["horizon_s"].get<double>(), 1e9);
  EXPECT_EQ(l["jobs"][0]["iterations"], s["jobs"][0]["iterations"]);
  core::Result<std::string> ts = sim::workload::ReadTextFile(P("long/timeseries.csv"));
  ASSERT_TRUE(ts.ok());
  EXPECT_EQ(std::count(ts->begin(), ts->end(), '\n'), 501);  // Header + horizon / 500 samples.
}

// Item 13: a scenario's policies were only partly checked (run took the first and ignored the
// rest, unknown or not).
TEST_F(SimCliTest, ScenarioWithAnUnknownPolicyIsAnErrorListingTheKnownOnes) {
  const std::string sc = P("s.yaml");
  ASSERT_TRUE(sim::workload::WriteTextFile(
                  sc, "scenario:\n  topology: " + Topo("example_explicit.yaml") + "\n  jobs: " +
                          (kConfigs / "scenarios/jobs/example1_short_first.yaml").string() +
                          "\n  policies: [fixed, no-such-policy]\n  horizon_s: 50\n")
                  .ok());
  for (const char* cmd : {"run", "compare"}) {
    const CliResult r = Cli({cmd, "--scenario", sc, "--quiet", "--no-plots", "--out", P("o")});
    EXPECT_EQ(r.code, kExitUsage) << cmd;
    EXPECT_THAT(r.err, HasSubstr("scenario.policies[1]: unknown policy 'no-such-policy' (known: "))
        << cmd;
    for (const std::string& known : core::PolicyNames()) EXPECT_THAT(r.err, HasSubstr(known));
    EXPECT_THAT(r.err, HasSubstr("(line 4, column"));
  }
  const CliResult dup = Cli({"compare", "--topology", Topo("example_explicit.yaml"), "--jobs",
                             (kConfigs / "scenarios/jobs/example1_short_first.yaml").string(),
                             "--policies", "fixed,ecmp,fixed", "--out", P("o")});
  EXPECT_EQ(dup.code, kExitUsage);
  EXPECT_THAT(dup.err, HasSubstr("--policies: policy 'fixed' is listed twice"));
  EXPECT_FALSE(fs::exists(P("o/summary.json")));
}

// Item 13: ids follow Crux's name rule (core::IsValidName), so control characters and escape
// sequences in them are rejected with the line and column, and never reach the terminal
// through the error message.
TEST_F(SimCliTest, ControlCharactersInIdsAreRejectedAndNotEchoed) {
  const std::string topo = Topo("example_clos2.yaml");
  const std::string hdr = std::string(sim::workload::kTraceHeader) + "\n";
  struct Case {
    std::string row;
    std::string error;
  };
  const Case cases[] = {
      {"evil\x1b]0;pwned\x07,0,10,,8,,resnet50",
       "line 2, column 1 (job_id): must be 1-128 characters of [A-Za-z0-9._:/-] (got "
       "'evil\\x1b]0;pwned\\x07')"},
      {"a,0,10,,8,host\x1b[1A,resnet50", "line 2, column 6 (placement): host name must be 1-128"},
      {"a,0,10,,8,,resnet50\x1b[2K", "line 2, column 7 (model): must be 1-128 characters"},
  };
  for (const Case& c : cases) {
    const std::string trace = P("t.csv");
    ASSERT_TRUE(sim::workload::WriteTextFile(trace, hdr + c.row + "\n").ok());
    const CliResult r = Cli(
        {"run", "--topology", topo, "--trace", trace, "--quiet", "--no-plots", "--out", P("o")});
    EXPECT_EQ(r.code, kExitUsage) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.error));
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_THAT(r.err, HasSubstr("\\x1b"));
  }
  // And in a link-event file.
  const std::string events = P("e.csv");
  ASSERT_TRUE(
      sim::workload::WriteTextFile(events, "time_s,a,b,gbps\n5,tor0\x1b[31m,agg0,0\n").ok());
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, hdr + "a,0,10,,8,,resnet50\n").ok());
  const CliResult r = Cli({"run", "--topology", topo, "--trace", trace, "--link-events", events,
                           "--quiet", "--no-plots", "--out", P("o")});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err,
              HasSubstr("line 2, column 2 (a): must be 1-128 characters of [A-Za-z0-9._:/-]"));
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
}

// Runs the CLI in a child process (a real process: memory really runs out) whose address
// space may grow by only `headroom` bytes; returns how it ended and what it wrote on stderr.
struct ChildResult {
  bool exited = false;
  int code = -1;
  int signal = 0;
  std::string err;
};
ChildResult CliWithLittleMemory(std::vector<std::string> args, size_t headroom) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    args.insert(args.begin(), "crux-sim");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    rlimit rl{};
    rl.rlim_cur = rl.rlim_max =
        static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + headroom;
    if (pages == 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(99);
    const int code = RunSimCli(static_cast<int>(argv.size()), argv.data(), std::cout, std::cerr);
    std::cerr.flush();
    _exit(code);
  }
  close(fds[1]);
  ChildResult res;
  char buf[4096];
  ssize_t n = 0;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) res.err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  res.exited = WIFEXITED(status);
  res.code = res.exited ? WEXITSTATUS(status) : -1;
  res.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return res;
}

// Allocation failure (std::bad_alloc) must end in a clear error and the simulation-failure
// exit code, never in std::terminate / abort.
TEST_F(SimCliTest, RunningOutOfMemoryIsAClearErrorNotAnAbort) {
  constexpr size_t kHeadroom = 24u << 20;  // 24 MiB more than the process already maps.
  // In the engine: a million samples over a job that runs the whole horizon.
  const std::string trace = P("t.csv");
  ASSERT_TRUE(sim::workload::WriteTextFile(trace, std::string(sim::workload::kTraceHeader) +
                                                      "\na,0,,,16,host0;host4,bert_large\n")
                  .ok());
  ChildResult r = CliWithLittleMemory(
      {"run", "--topology", Topo("example_clos2.yaml"), "--trace", trace, "--horizon-s", "1e6",
       "--sample-interval-s", "1", "--quiet", "--no-plots", "--out", P("o")},
      kHeadroom);
  EXPECT_TRUE(r.exited) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.code, kExitSimulation) << r.err;
  EXPECT_THAT(r.err, HasSubstr("crux-sim: error: "));
  EXPECT_THAT(r.err, HasSubstr("out of memory"));
  // Outside the engine (here the trace generator, ~8.6 million jobs), caught at the CLI's edge.
  r = CliWithLittleMemory(
      {"gen-trace", "--days", "100", "--mean-interarrival-s", "1", "--out", P("g.csv")}, kHeadroom);
  EXPECT_TRUE(r.exited) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.code, kExitSimulation) << r.err;
  EXPECT_THAT(r.err, HasSubstr("crux-sim: error: out of memory"));
}

}  // namespace
}  // namespace crux::simcli
