// End-to-end tests of the real crux-plan binary: exit codes, stdout (JSON or table, nothing on
// error) and stderr messages naming the offending flag or key; output size at scale, memory
// exhaustion under a real address-space limit, control characters in names (issue #10).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "crux/testing/ring_jobs_yaml.h"

#ifndef CRUX_PLAN_BINARY
#define CRUX_PLAN_BINARY CRUX_BINARY_DIR "/tools/plan/crux-plan"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CRUX_PLAN_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CRUX_PLAN_TEST_ASAN 1
#endif
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

  // Runs crux-plan with `args` under an address-space limit of `limit_kb` (the shell's ulimit
  // -v, then exec, so the exit status is crux-plan's own; a signal gives exit_code -1).
  RunResult RunLimited(const std::string& args, long limit_kb) {
    const std::string err_file = (dir_ / "stderr.txt").string();
    const std::string out_file = (dir_ / "stdout.txt").string();
    const std::string cmd = "ulimit -v " + std::to_string(limit_kb) + " && exec " +
                            Quote(CRUX_PLAN_BINARY) + " " + args + " >" + Quote(out_file) + " 2>" +
                            Quote(err_file);
    RunResult r;
    const int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream out(out_file);
    r.out.assign(std::istreambuf_iterator<char>(out), std::istreambuf_iterator<char>());
    std::ifstream err(err_file);
    r.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
    return r;
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

// --policy runs any registry policy (docs/policies.md); `crux` stays the planner. The jobs carry
// what the pair comparison found.
TEST_F(CruxPlanCliTest, PolicyFlagRunsARegistryPolicy) {
  const json crux = json::parse(RunWith(kClosTopo, kClosJobs, "--no-ports").out);
  const RunResult r = RunWith(kClosTopo, kClosJobs, "--no-ports --policy crux-pa-guard");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json guard = json::parse(r.out);
  ASSERT_EQ(guard["jobs"].size(), crux["jobs"].size());
  for (size_t i = 0; i < crux["jobs"].size(); ++i) {
    const json& a = crux["jobs"][i];
    const json& b = guard["jobs"][i];
    EXPECT_EQ(b["id"], a["id"]);
    EXPECT_EQ(b["rank"], a["rank"]);  // crux-pa-guard keeps Crux's priorities.
    EXPECT_EQ(b["k"], a["k"]);
    EXPECT_EQ(b["pair_gain"], a["pair_gain"]);
    EXPECT_EQ(b["pair_loss"], a["pair_loss"]);
    EXPECT_GE(a["pair_gain"].get<double>(), 0.0);
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
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--gpu-peak-tflops 0x10"), 2,
                {"--gpu-peak-tflops: must be a finite number > 0 (got 0x10)"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--seed -1"), 2, {"--seed"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--bogus 1"), 2, {"--bogus"});
  ExpectFailure(RunWith(kClosTopo, kClosJobs, "--policy varys"), 2, {"--policy"});
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

// Issue #10 (5): 10,000 jobs on a 16-host fabric made crux-plan list all 43 M contention edges
// (> 6 GB, then an abort). The output now lists at most --max-edges-per-job (default 32) edges
// per job and counts the rest, so doubling the jobs doubles the output while the DAG
// quadruples.
TEST_F(CruxPlanCliTest, OutputGrowsLinearlyWithTheJobs) {
  size_t bytes[2] = {0, 0};
  size_t edges[2] = {0, 0};
  const int sizes[2] = {300, 600};
  for (int i = 0; i < 2; ++i) {
    const int n = sizes[i];
    const std::string jobs =
        Write("jobs" + std::to_string(n) + ".yaml", testing_util::RingJobsYaml(n));
    const RunResult r = RunWith(kClosTopo, jobs);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const json& dag = j["dag"];
    EXPECT_EQ(dag["max_edges_per_job"], 32);
    EXPECT_LE(dag["edges"].size(), static_cast<size_t>(n) * 32);
    EXPECT_GT(dag["num_edges"].get<size_t>(), static_cast<size_t>(n) * 32);
    EXPECT_EQ(dag["edges"].size() + dag["edges_omitted"].get<size_t>(),
              dag["num_edges"].get<size_t>());
    bytes[i] = r.out.size();
    edges[i] = dag["num_edges"].get<size_t>();
  }
  EXPECT_GT(static_cast<double>(edges[1]) / static_cast<double>(edges[0]), 3.5);
  EXPECT_LT(static_cast<double>(bytes[1]) / static_cast<double>(bytes[0]), 2.4)
      << bytes[0] << " -> " << bytes[1] << " bytes";
}

TEST_F(CruxPlanCliTest, MaxEdgesPerJobZeroListsEveryEdge) {
  const std::string jobs = Write("jobs.yaml", testing_util::RingJobsYaml(60));
  const RunResult r = RunWith(kClosTopo, jobs, "--max-edges-per-job 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["dag"]["edges"].size(), j["dag"]["num_edges"].get<size_t>());
  EXPECT_EQ(j["dag"]["edges_omitted"], 0);
  const RunResult capped = RunWith(kClosTopo, jobs, "--max-edges-per-job 1");
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_LE(json::parse(capped.out)["dag"]["edges"].size(), 60u);
  ExpectFailure(RunWith(kClosTopo, jobs, "--max-edges-per-job -1"), 2, {"--max-edges-per-job"});
  ExpectFailure(RunWith(kClosTopo, jobs, "--max-edges-per-job lots"), 2, {"--max-edges-per-job"});
}

// Issue #10 (5): running out of memory was an uncaught std::bad_alloc and an abort (exit 134:
// nlohmann::json's destructor allocates while the exception unwinds). Under a real
// address-space limit crux-plan now either succeeds or exits 3 with a message, at whatever
// point the allocation fails (loading, planning, rendering every edge).
TEST_F(CruxPlanCliTest, OutOfMemoryIsAnErrorNotAnAbort) {
#ifdef CRUX_PLAN_TEST_ASAN
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space; ulimit -v cannot work";
#else
  const std::string jobs = Write("jobs.yaml", testing_util::RingJobsYaml(500));
  const std::string args =
      "--topology " + Quote(kClosTopo) + " --jobs " + Quote(jobs) + " --max-edges-per-job 0";
  // From "fails while loading" to "needs ~28 MB of address space and fits".
  int out_of_memory = 0;
  for (long limit_kb : {16'000L, 24'000L, 32'000L, 48'000L, 2'000'000L}) {
    const RunResult r = RunLimited(args, limit_kb);
    SCOPED_TRACE("ulimit -v " + std::to_string(limit_kb) + ": exit " + std::to_string(r.exit_code) +
                 ", stderr: " + r.err);
    if (r.exit_code == 127 &&
        r.err.find("error while loading shared libraries") != std::string::npos) {
      continue;  // The dynamic loader itself did not fit: crux-plan never ran.
    }
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 3) << "crashed or failed otherwise";
    if (r.exit_code == 3) {
      ++out_of_memory;
      EXPECT_TRUE(r.out.empty());
      EXPECT_THAT(r.err, HasSubstr("crux-plan: error: out of memory"));
    } else {
      EXPECT_FALSE(json::parse(r.out, nullptr, false).is_discarded());
    }
    if (limit_kb == 2'000'000L) {
      EXPECT_EQ(r.exit_code, 0);
    }
  }
  EXPECT_GE(out_of_memory, 1) << "no limit made crux-plan run out of memory";
#endif
}

// Issue #10 (8, 13): control characters in a job id are refused at load (exit 2, the YAML
// path and line), and nothing crux-plan prints carries them raw.
TEST_F(CruxPlanCliTest, ControlCharactersInIdsAreRefusedAndNeverPrintedRaw) {
  const std::string jobs = Write("evil.yaml",
                                 "jobs:\n  - {id: \"x\\e]0;owned\\a\\e[2J\", "
                                 "hosts: [host0, host4], compute_time_s: 1,\n"
                                 "     traffic: {pattern: pipeline, bytes: 1e6}}\n");
  for (const char* format : {"json", "table"}) {
    const RunResult r = RunWith(kClosTopo, jobs, std::string("--format ") + format);
    ExpectFailure(r, 2, {"jobs[0].id: invalid job id 'x\\x1b]0;owned\\x07\\x1b[2J'", "line 2"});
    for (char c : r.err) {
      EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "raw byte " << static_cast<int>(c);
    }
  }
  // Unknown keys echo the file's text: escaped as well.
  const std::string keys = Write("keys.yaml", "jobs:\n  - {\"k\\e[31m\": 1}\n");
  const RunResult r = RunWith(kClosTopo, keys);
  ExpectFailure(r, 2, {"jobs[0].k\\x1b[31m: unknown key"});
  for (char c : r.err) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << static_cast<int>(c);
}

// Issue #10 (13): bad explicit topologies fail crux-plan with the node or link, path and line.
TEST_F(CruxPlanCliTest, MalformedExplicitTopologiesNameTheNodeOrLink) {
  const std::string head =
      "topology:\n  kind: explicit\n  nodes:\n    - {name: host0, type: host}\n"
      "    - {name: host1, type: host}\n    - {name: s0, type: switch}\n";
  const std::string links =
      "  links:\n    - {a: host0, b: s0, gbps: 100}\n    - {a: host1, b: s0, gbps: 100}\n";
  const std::string jobs = Write("j.yaml",
                                 "jobs:\n  - {id: a, hosts: [host0, host1], compute_time_s: 1,\n"
                                 "     traffic: {pattern: pipeline, bytes: 1e6}}\n");
  ExpectFailure(
      RunWith(Write("dup.yaml", head + links + "    - {a: s0, b: host1, gbps: 100}\n"), jobs), 2,
      {"dup.yaml", "topology.links[2]: duplicate link s0 <-> host1", "line 10"});
  ExpectFailure(
      RunWith(Write("iso.yaml", head + "    - {name: host2, type: host}\n" + links), jobs), 2,
      {"topology.nodes[3]: host 'host2' has no link", "line 7"});
  ExpectFailure(RunWith(Write("none.yaml", head), jobs), 2,
                {"topology.links: missing required key"});
  ExpectFailure(
      RunWith(Write("name.yaml", head + "    - {name: \"sw 1\", type: switch}\n" + links), jobs), 2,
      {"topology.nodes[3].name: invalid node name 'sw 1'", "line 7"});
  const RunResult ok = RunWith(Write("ok.yaml", head + links), jobs);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

}  // namespace
}  // namespace crux::plan
