// End-to-end tests of the real crux-plan binary: exit codes, stdout (JSON or table, nothing on
// error) and stderr messages naming the offending flag or key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#ifndef CRUX_PLAN_BINARY
#define CRUX_PLAN_BINARY CRUX_BINARY_DIR "/tools/plan/crux-plan"
#endif

namespace crux::plan {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const std::string kConfigs = std::string(CRUX_SOURCE_DIR) + "/configs";
const std::string kClosTopo = kConfigs + "/topologies/example_clos2.yaml";
const std::string kClosJobs = kConfigs + "/jobs/example_clos2.yaml";

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

class CruxPlanCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(CRUX_PLAN_BINARY)) << "crux-plan not built at " << CRUX_PLAN_BINARY;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("crux_plan_cli_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << content;
    return p.string();
  }

  // Runs crux-plan with `args` (already shell-quoted where needed).
  RunResult Run(const std::string& args) {
    const std::string err_file = (dir_ / "stderr.txt").string();
    const std::string cmd = Quote(CRUX_PLAN_BINARY) + " " + args + " 2>" + Quote(err_file);
    RunResult r;
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed: " << cmd;
      return r;
    }
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = ::pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(err_file);
    r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return r;
  }

  RunResult RunWith(const std::string& topo, const std::string& jobs,
                    const std::string& extra = "") {
    return Run("--topology " + Quote(topo) + " --jobs " + Quote(jobs) + " " + extra);
  }

  // Expects a failed run: the exit code, no stdout, and stderr naming every fragment.
  static void ExpectFailure(const RunResult& r, int code,
                            std::initializer_list<std::string> fragments) {
    EXPECT_EQ(r.exit_code, code) << r.err;
    EXPECT_TRUE(r.out.empty()) << "stdout: " << r.out;
    EXPECT_FALSE(r.err.empty());
    for (const std::string& f : fragments) EXPECT_THAT(r.err, HasSubstr(f));
  }

  fs::path dir_;
};

TEST_F(CruxPlanCliTest, ValidRunPrintsJsonAndExitsZero) {
  const RunResult r = RunWith(kClosTopo, kClosJobs);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["levels"], 8);
  ASSERT_TRUE(j["jobs"].is_array());
  EXPECT_EQ(j["jobs"].size(), 6u);
  EXPECT_EQ(j["jobs"][0]["id"], "gpt");
  for (const char* key : {"dag", "cut_weight", "timing_ms"}) EXPECT_TRUE(j.contains(key)) << key;
  for (const json& job : j["jobs"]) {
    for (const char* key : {"id", "intensity", "k", "priority", "rank", "level", "flows"}) {
      EXPECT_TRUE(job.contains(key)) << key;
    }
    for (const json& f : job["flows"]) {
      EXPECT_EQ(f["path"].front(), f["src"]);
      EXPECT_EQ(f["path"].back(), f["dst"]);
      EXPECT_TRUE(f.contains("udp_sport"));
    }
  }
  // Pretty-printed with a 2-space indent.
  EXPECT_EQ(r.out.rfind("{\n  \"", 0), 0u) << r.out.substr(0, 20);
}

TEST_F(CruxPlanCliTest, FlagsReachThePlanner) {
  const RunResult r =
      RunWith(kClosTopo, kClosJobs, "--levels 4 --reserved-high 1 --seed 7 --topo-orders 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["levels"], 4);
  EXPECT_EQ(j["first_job_level"], 1);
  EXPECT_EQ(j["usable_levels"], 3);
  for (const json& job : j["jobs"]) {
    EXPECT_GE(job["level"].get<int>(), 1);
    EXPECT_LE(job["level"].get<int>(), 3);
  }
}

TEST_F(CruxPlanCliTest, SameInputsGiveTheSamePlan) {
  json a = json::parse(RunWith(kClosTopo, kClosJobs, "--seed 3").out);
  json b = json::parse(RunWith(kClosTopo, kClosJobs, "--seed 3").out);
  a.erase("timing_ms");
  b.erase("timing_ms");
  EXPECT_EQ(a, b);
}

TEST_F(CruxPlanCliTest, NoPortsLeavesFlowsUnpinned) {
  const RunResult r = RunWith(kClosTopo, kClosJobs, "--no-ports");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const json& job : j["jobs"]) {
    for (const json& f : job["flows"]) EXPECT_TRUE(f["udp_sport"].is_null());
  }
}

TEST_F(CruxPlanCliTest, TableFormatPrintsATable) {
  const RunResult r = RunWith(kClosTopo, kClosJobs, "--format table");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("rank", 0), 0u) << r.out;
  for (const char* id : {"gpt", "bert", "moe", "llama_pp", "resnet", "ps"}) {
    EXPECT_THAT(r.out, HasSubstr(id));
  }
  EXPECT_THAT(r.out, HasSubstr("cut weight"));
  EXPECT_THAT(r.out, HasSubstr("timing ms"));
  EXPECT_TRUE(json::parse(r.out, nullptr, false).is_discarded());
}

TEST_F(CruxPlanCliTest, EveryShippedJobFileRuns) {
  const std::pair<const char*, const char*> pairs[] = {
      {"example_explicit", "example1"},
      {"testbed", "testbed_contention"},
      {"hpn_small", "hpn_jobs"},
      {"lingjun", "lingjun_jobs"},
  };
  for (const auto& [topo, jobs] : pairs) {
    const RunResult r = RunWith(kConfigs + "/topologies/" + topo + ".yaml",
                                kConfigs + "/jobs/" + jobs + ".yaml", "--levels 3");
    EXPECT_EQ(r.exit_code, 0) << jobs << ": " << r.err;
    EXPECT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << jobs;
  }
}

TEST_F(CruxPlanCliTest, HelpGoesToStdoutAndExitsZero) {
  const RunResult r = Run("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--topology"));
  EXPECT_THAT(r.out, HasSubstr("--reserved-high"));
}

TEST_F(CruxPlanCliTest, BadFlagsAreUsageErrors) {
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--levels 0"), 2, {"--levels"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--levels 65"), 2, {"--levels"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--levels many"), 2, {"--levels"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--format xml"), 2, {"--format"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--topo-orders 0"), 2, {"--topo-orders"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--reserved-high -1"), 2, {"--reserved-high"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--gpu-peak-tflops nan"), 2, {"--gpu-peak-tflops"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--gpu-peak-tflops -5"), 2,
                {"--gpu-peak-tflops: must be a finite number > 0 (got -5)"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--seed -1"), 2, {"--seed"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--bogus 1"), 2, {"--bogus"});
  ExpectFailure(Run("--jobs " + Quote(kClosJobs)), 2, {"--topology"});
  // All levels reserved: rejected by the planner's option check, naming the flag.
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--levels 2 --reserved-high 1 --reserved-low 1"), 2,
                {"--levels", "reserved"});
}

TEST_F(CruxPlanCliTest, MissingFilesAreNamed) {
  ExpectFailure(RunWith((dir_ / "none.yaml").string(), kClosJobs), 2, {"none.yaml"});
  ExpectFailure(RunWith(kClosTopo, (dir_ / "nojobs.yaml").string()), 2, {"nojobs.yaml"});
}

TEST_F(CruxPlanCliTest, BadTopologyYamlNamesTheKey) {
  const std::string topo = Write("t.yaml", R"(topology:
  kind: explicit
  nodes: [{name: a, type: host}, {name: b, type: host}]
  links:
    - {a: a, b: b, gbps: -1}
)");
  ExpectFailure(RunWith(topo, kClosJobs), 2,
                {"topology.links[0].gbps: must be > 0 (got -1)", "t.yaml"});
  const std::string unknown = Write("u.yaml", "topology: {kind: clos2, tors: 2, spines: 4}\n");
  ExpectFailure(RunWith(unknown, kClosJobs), 2, {"topology.spines: unknown key"});
  const std::string syntax = Write("s.yaml", "topology: {kind: clos2, tors: [2\n");
  ExpectFailure(RunWith(syntax, kClosJobs), 2, {"invalid YAML", "line"});
}

TEST_F(CruxPlanCliTest, BadJobsYamlNamesTheKey) {
  const std::string unknown_host = Write("h.yaml", R"(jobs:
  - {id: a, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 1e6}}
  - {id: b, hosts: [host2, host3, host99], compute_time_s: 1,
     traffic: {pattern: pipeline, bytes: 1e6}}
)");
  ExpectFailure(RunWith(kClosTopo, unknown_host), 2, {"jobs[1].hosts[2]: unknown host 'host99'"});

  const std::string nan = Write("n.yaml", R"(jobs:
  - {id: a, hosts: [host0, host1], compute_time_s: .nan, traffic: {pattern: pipeline, bytes: 1}}
)");
  ExpectFailure(RunWith(kClosTopo, nan), 2, {"jobs[0].compute_time_s"});

  const std::string negative = Write("neg.yaml", R"(jobs:
  - {id: a, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: -7}}
)");
  ExpectFailure(RunWith(kClosTopo, negative), 2, {"jobs[0].traffic.bytes: must be > 0"});

  const std::string dup = Write("d.yaml", R"(jobs:
  - {id: a, hosts: [host0, host1], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 1}}
  - {id: a, hosts: [host2, host3], compute_time_s: 1, traffic: {pattern: pipeline, bytes: 1}}
)");
  ExpectFailure(RunWith(kClosTopo, dup), 2, {"jobs[1].id: duplicate job id 'a'"});

  const std::string both = Write("b.yaml", R"(jobs:
  - id: a
    hosts: [host0, host1]
    compute_time_s: 1
    traffic: {pattern: pipeline, bytes: 1}
    flows: [{src: host0/nic0, dst: host1/nic0, bytes: 1}]
)");
  ExpectFailure(RunWith(kClosTopo, both), 2, {"jobs[0].flows"});
}

TEST_F(CruxPlanCliTest, FlowWithoutAPathIsAPlanningFailure) {
  // Two islands: no route from host0 to host1.
  const std::string topo = Write("islands.yaml", R"(topology:
  kind: explicit
  nodes: [{name: host0, type: host}, {name: host1, type: host},
          {name: s0, type: switch}, {name: s1, type: switch}]
  links:
    - {a: host0, b: s0, gbps: 100}
    - {a: host1, b: s1, gbps: 100}
)");
  const std::string jobs = Write("j.yaml", R"(jobs:
  - {id: stranded, hosts: [host0, host1], compute_time_s: 1,
     flows: [{src: host0, dst: host1, bytes: 1e6}]}
)");
  ExpectFailure(RunWith(topo, jobs), 1, {"planning failed"});
}

}  // namespace
}  // namespace crux::plan
