// Tests for PlanToJson / PlanToJsonText (the stable JSON contract) and PlanToTable.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/plan/planner.h"
#include "crux/spec/jobs_spec.h"
#include "crux/spec/plan_output.h"
#include "crux/spec/topology_spec.h"
#include "crux/testing/ring_jobs_yaml.h"

namespace crux::spec {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kTopology = R"(
topology:
  kind: clos2
  tors: 2
  aggs: 2
  hosts_per_tor: 2
  nics_per_host: 2
  nic_gbps: 100
  uplink_gbps: 100
)";

// Two jobs crossing the ToR uplinks (contention) and one explicit job inside tor1.
constexpr const char* kJobs = R"(
jobs:
  - {id: big, hosts: [host0, host2], compute_time_s: 1.0,
     traffic: {pattern: ring_allreduce, bytes: 4e9}}
  - {id: 7, hosts: [host1, host3], gpus_per_host: 4, compute_time_s: 0.2,
     traffic: {pattern: all_to_all, bytes: 1e9}}
  - {id: local, hosts: [host2, host3], gpus_per_host: 2, compute_time_s: 0.5,
     flows: [{src: host3/nic1, dst: host2/nic1, bytes: 5e8}]}
)";

class PlanOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::Result<core::Topology> topo = ParseTopology(kTopology, "");
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    topo_ = std::move(topo).value();
    core::Result<std::vector<JobEntry>> jobs = ParseJobs(kJobs, topo_);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    specs_ = JobSpecs(*jobs);
  }

  core::Plan RunPlanner(core::PlannerOptions options = {}) {
    core::Planner planner(topo_, options);
    core::Result<core::Plan> plan = planner.Run(specs_);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? std::move(plan).value() : core::Plan{};
  }

  core::Topology topo_;
  std::vector<core::JobSpec> specs_;
};

TEST_F(PlanOutputTest, JsonHasEveryRequiredFieldWithTheRightType) {
  const core::Plan plan = RunPlanner();
  const json j = PlanToJson(plan, topo_);

  ASSERT_TRUE(j.contains("levels"));
  EXPECT_TRUE(j["levels"].is_number_integer());
  EXPECT_EQ(j["levels"], 8);
  ASSERT_TRUE(j.contains("cut_weight"));
  EXPECT_TRUE(j["cut_weight"].is_number());
  ASSERT_TRUE(j.contains("timing_ms"));
  for (const char* stage : {"path_selection", "priority", "compression", "total"}) {
    ASSERT_TRUE(j["timing_ms"].contains(stage)) << stage;
    EXPECT_TRUE(j["timing_ms"][stage].is_number()) << stage;
    EXPECT_GE(j["timing_ms"][stage].get<double>(), 0.0) << stage;
  }
  ASSERT_TRUE(j.contains("dag"));
  ASSERT_TRUE(j["dag"].contains("edges"));
  ASSERT_TRUE(j["dag"]["edges"].is_array());

  ASSERT_TRUE(j["jobs"].is_array());
  ASSERT_EQ(j["jobs"].size(), 3u);
  std::set<std::string> ids;
  for (const json& job : j["jobs"]) {
    ASSERT_TRUE(job["id"].is_string());
    ids.insert(job["id"].get<std::string>());
    for (const char* key :
         {"intensity", "k", "priority", "work_flops", "comm_time_s", "period_s", "bytes_per_sec"}) {
      ASSERT_TRUE(job.contains(key)) << key;
      EXPECT_TRUE(job[key].is_number()) << key;
    }
    for (const char* key : {"rank", "level", "gpus"}) {
      ASSERT_TRUE(job.contains(key)) << key;
      EXPECT_TRUE(job[key].is_number_integer()) << key;
    }
    EXPECT_TRUE(job["reference"].is_boolean());
    EXPECT_TRUE(job["bottleneck"].is_string() || job["bottleneck"].is_null());
    ASSERT_TRUE(job["flows"].is_array());
    EXPECT_FALSE(job["flows"].empty());
    for (const json& f : job["flows"]) {
      ASSERT_TRUE(f["src"].is_string());
      ASSERT_TRUE(f["dst"].is_string());
      EXPECT_TRUE(f["bytes"].is_number_integer());
      EXPECT_GT(f["bytes"].get<int64_t>(), 0);
      ASSERT_TRUE(f.contains("udp_sport"));
      EXPECT_TRUE(f["udp_sport"].is_number_integer() || f["udp_sport"].is_null());
      EXPECT_TRUE(f["path_index"].is_number_integer());
      EXPECT_TRUE(f["num_paths"].is_number_integer());
      EXPECT_EQ(f["pinned"].get<bool>(), f["udp_sport"].is_number_integer());
      ASSERT_TRUE(f["path"].is_array());
      ASSERT_GE(f["path"].size(), 2u);
      EXPECT_EQ(f["path"].front(), f["src"]);
      EXPECT_EQ(f["path"].back(), f["dst"]);
      // Consecutive path nodes are adjacent in the topology.
      for (size_t h = 0; h + 1 < f["path"].size(); ++h) {
        core::Result<core::NodeId> a = topo_.FindNode(f["path"][h].get<std::string>());
        core::Result<core::NodeId> b = topo_.FindNode(f["path"][h + 1].get<std::string>());
        ASSERT_TRUE(a.ok() && b.ok());
        EXPECT_TRUE(topo_.FindLink(*a, *b).ok()) << f["path"].dump();
      }
    }
  }
  // Input order, ids as given (the integer id 7 is the string "7").
  EXPECT_EQ(j["jobs"][0]["id"], "big");
  EXPECT_EQ(j["jobs"][1]["id"], "7");
  EXPECT_EQ(j["jobs"][2]["id"], "local");

  for (const json& e : j["dag"]["edges"]) {
    ASSERT_TRUE(e["from"].is_string());
    ASSERT_TRUE(e["to"].is_string());
    EXPECT_TRUE(ids.count(e["from"].get<std::string>()));
    EXPECT_TRUE(ids.count(e["to"].get<std::string>()));
    EXPECT_TRUE(e["weight"].is_number());
  }
  // Extra fields.
  for (const char* key : {"first_job_level", "usable_levels", "unpinned_flows"}) {
    EXPECT_TRUE(j[key].is_number_integer()) << key;
  }
  EXPECT_TRUE(j["total_edge_weight"].is_number());
  EXPECT_TRUE(j["reference_job"].is_string() || j["reference_job"].is_null());
}

TEST_F(PlanOutputTest, JsonMirrorsThePlan) {
  const core::Plan plan = RunPlanner();
  const json j = PlanToJson(plan, topo_);
  ASSERT_EQ(j["jobs"].size(), plan.jobs.size());
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const core::JobPlan& p = plan.jobs[i];
    const json& job = j["jobs"][i];
    EXPECT_EQ(job["rank"], p.rank);
    EXPECT_EQ(job["level"], p.level);
    EXPECT_DOUBLE_EQ(job["intensity"].get<double>(), p.intensity);
    EXPECT_DOUBLE_EQ(job["k"].get<double>(), p.k);
    EXPECT_EQ(job["flows"].size(), p.flows.size());
    for (size_t f = 0; f < p.flows.size(); ++f) {
      EXPECT_EQ(job["flows"][f]["bytes"].get<int64_t>(), p.flows[f].bytes.count());
      EXPECT_EQ(job["flows"][f]["path"].size(), p.flows[f].path.size() + 1);
      if (p.flows[f].udp_sport.has_value()) {
        EXPECT_EQ(job["flows"][f]["udp_sport"].get<int>(), *p.flows[f].udp_sport);
      }
    }
  }
  EXPECT_EQ(j["dag"]["edges"].size(), plan.dag.edges.size());
  EXPECT_DOUBLE_EQ(j["cut_weight"].get<double>(), plan.cut_weight);
}

TEST_F(PlanOutputTest, UnpinnedFlowsHaveNullPorts) {
  core::PlannerOptions options;
  options.resolve_ports = false;
  const core::Plan plan = RunPlanner(options);
  const json j = PlanToJson(plan, topo_);
  for (const json& job : j["jobs"]) {
    for (const json& f : job["flows"]) {
      EXPECT_TRUE(f["udp_sport"].is_null());
      EXPECT_FALSE(f["pinned"].get<bool>());
    }
  }
}

TEST_F(PlanOutputTest, NonFiniteNumbersBecomeFinite) {
  core::Plan plan;
  plan.levels = 4;
  plan.usable_levels = 4;
  plan.cut_weight = std::numeric_limits<double>::quiet_NaN();
  plan.total_edge_weight = std::numeric_limits<double>::infinity();
  core::JobPlan job;
  job.id = "x";
  job.intensity = std::numeric_limits<double>::infinity();
  job.k = std::numeric_limits<double>::quiet_NaN();
  job.priority = -std::numeric_limits<double>::infinity();
  job.work = core::Flops::Of(std::numeric_limits<double>::quiet_NaN());
  job.comm_time = core::Duration::Infinite();
  plan.jobs.push_back(job);
  const json j = PlanToJson(plan, topo_);
  const std::string text = j.dump();
  for (const char* key : {"intensity", "k", "priority", "work_flops", "comm_time_s"}) {
    ASSERT_TRUE(j["jobs"][0][key].is_number()) << key;
    EXPECT_TRUE(std::isfinite(j["jobs"][0][key].get<double>())) << key;
  }
  EXPECT_TRUE(std::isfinite(j["cut_weight"].get<double>()));
  EXPECT_TRUE(std::isfinite(j["total_edge_weight"].get<double>()));
  EXPECT_TRUE(j["jobs"][0]["bottleneck"].is_null());  // Invalid link id.
  EXPECT_TRUE(j["reference_job"].is_null());
  // Round-trips through text.
  EXPECT_EQ(json::parse(text), j);
}

TEST_F(PlanOutputTest, TableListsJobsByRankThenASummary) {
  const core::Plan plan = RunPlanner();
  const std::string table = PlanToTable(plan, topo_);
  EXPECT_THAT(table, HasSubstr("rank"));
  EXPECT_THAT(table, HasSubstr("bottleneck"));
  EXPECT_THAT(table, HasSubstr("levels 8"));
  EXPECT_THAT(table, HasSubstr("cut weight"));
  EXPECT_THAT(table, HasSubstr("unpinned flows"));
  EXPECT_THAT(table, HasSubstr("timing ms"));
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(table.back(), '\n');

  // Job rows (lines 2..4) appear in rank order.
  std::istringstream in(table);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_GE(lines.size(), 2u + plan.jobs.size());
  for (size_t r = 0; r < plan.jobs.size(); ++r) {
    std::istringstream row(lines[2 + r]);
    int rank = -1;
    std::string id;
    row >> rank >> id;
    EXPECT_EQ(rank, static_cast<int>(r));
    if (!id.empty() && id.back() == '*') id.pop_back();  // Reference marker.
    bool found = false;
    for (const core::JobPlan& j : plan.jobs) found = found || (j.id == id && j.rank == rank);
    EXPECT_TRUE(found) << lines[2 + r];
  }
}

// PlanToJsonText writes the DOM's text without building the DOM: same bytes, every cap.
TEST_F(PlanOutputTest, JsonTextIsTheDomDumpByteForByte) {
  const core::Plan plan = RunPlanner();
  ASSERT_FALSE(plan.dag.edges.empty());
  for (int cap : {0, 1, 32}) {
    PlanJsonOptions options;
    options.max_edges_per_job = cap;
    EXPECT_EQ(
        PlanToJsonText(plan, topo_, options),
        PlanToJson(plan, topo_, options).dump(2, ' ', false, json::error_handler_t::replace) + "\n")
        << "cap " << cap;
  }
  const core::Plan empty;
  EXPECT_EQ(PlanToJsonText(empty, topo_),
            PlanToJson(empty, topo_).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

TEST_F(PlanOutputTest, SmallPlansListEveryEdge) {
  const core::Plan plan = RunPlanner();
  const json j = PlanToJson(plan, topo_);
  EXPECT_EQ(j["dag"]["num_edges"], plan.dag.edges.size());
  EXPECT_EQ(j["dag"]["edges_omitted"], 0);
  EXPECT_EQ(j["dag"]["max_edges_per_job"], 32);
  std::vector<int64_t> degree(plan.jobs.size(), 0);
  for (const core::DagEdge& e : plan.dag.edges) {
    ++degree[static_cast<size_t>(e.from)];
    ++degree[static_cast<size_t>(e.to)];
  }
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    EXPECT_EQ(j["jobs"][i]["contending_jobs"], degree[i]);
    EXPECT_EQ(j["jobs"][i]["dag_edges_omitted"], 0);
  }
}

// Issue #10 (5): with n jobs that all meet, the DAG has ~0.4 n^2 edges and the JSON listed all
// of them (10,000 jobs: > 6 GB, then std::bad_alloc and an abort). Now each job lists at most
// max_edges_per_job edges, the closest-ranked ones, and the rest are counted: the output grows
// linearly while the DAG keeps growing quadratically.
TEST_F(PlanOutputTest, DagEdgesAreCappedPerJobSoTheOutputGrowsLinearly) {
  core::Result<core::Topology> topo =
      LoadTopologyFile(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/example_clos2.yaml");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  constexpr int kCap = 8;
  PlanJsonOptions options;
  options.max_edges_per_job = kCap;
  std::map<int, std::pair<size_t, size_t>> sizes;  // Jobs -> (DAG edges, JSON bytes).
  for (int n : {150, 300}) {
    core::Result<std::vector<JobEntry>> jobs = ParseJobs(testing_util::RingJobsYaml(n), *topo);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    core::PlannerOptions planner_options;
    planner_options.resolve_ports = false;
    core::Planner planner(*topo, planner_options);
    core::Result<core::Plan> plan = planner.Run(JobSpecs(*jobs));
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const std::string text = PlanToJsonText(*plan, *topo, options);
    const json j = json::parse(text);
    const json& dag = j["dag"];
    const size_t num_edges = plan->dag.edges.size();
    ASSERT_GT(num_edges, static_cast<size_t>(n) * kCap) << "the cap must matter";
    EXPECT_EQ(dag["num_edges"], num_edges);
    EXPECT_EQ(dag["max_edges_per_job"], kCap);
    EXPECT_LE(dag["edges"].size(), static_cast<size_t>(n) * kCap);
    EXPECT_EQ(dag["edges"].size() + dag["edges_omitted"].get<size_t>(), num_edges);

    // Per job: at most kCap listed, min(out-degree, kCap) exactly, to its closest-ranked lower
    // jobs, and the omitted count adds up.
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < plan->jobs.size(); ++i) index[plan->jobs[i].id] = i;
    std::vector<std::vector<int>> out_ranks(plan->jobs.size());  // Ranks of every `to`.
    for (const core::DagEdge& e : plan->dag.edges) {
      out_ranks[static_cast<size_t>(e.from)].push_back(plan->jobs[static_cast<size_t>(e.to)].rank);
    }
    std::vector<std::vector<int>> listed_ranks(plan->jobs.size());
    for (const json& e : dag["edges"]) {
      listed_ranks[index.at(e["from"].get<std::string>())].push_back(
          plan->jobs[index.at(e["to"].get<std::string>())].rank);
    }
    int64_t omitted = 0;
    for (size_t i = 0; i < plan->jobs.size(); ++i) {
      std::vector<int>& all = out_ranks[i];
      std::vector<int>& listed = listed_ranks[i];
      const size_t out_degree = all.size();
      const size_t kept = std::min(out_degree, static_cast<size_t>(kCap));
      std::sort(all.begin(), all.end());
      std::sort(listed.begin(), listed.end());
      all.resize(kept);
      EXPECT_EQ(listed, all) << plan->jobs[i].id;
      const json& job = j["jobs"][i];
      EXPECT_EQ(job["dag_edges_omitted"].get<size_t>(), out_degree - kept) << plan->jobs[i].id;
      omitted += job["dag_edges_omitted"].get<int64_t>();
    }
    EXPECT_EQ(omitted, dag["edges_omitted"].get<int64_t>());
    sizes[n] = {num_edges, text.size()};
  }
  // Twice the jobs: about four times the DAG, about twice the text (quadratic would be ~4x).
  const double edge_growth =
      static_cast<double>(sizes[300].first) / static_cast<double>(sizes[150].first);
  const double text_growth =
      static_cast<double>(sizes[300].second) / static_cast<double>(sizes[150].second);
  EXPECT_GT(edge_growth, 3.5);
  EXPECT_LT(text_growth, 2.4) << sizes[150].second << " -> " << sizes[300].second << " bytes";
}

// Issue #10 (8): job ids and node names reach the table escaped, whatever the plan holds
// (the loaders refuse such names too; this is the last line of defence).
TEST_F(PlanOutputTest, TableEscapesControlCharactersInNames) {
  core::Plan plan = RunPlanner();
  plan.jobs[0].id = "evil\x1b]0;owned\x07\x1b[2J\r\x7f\xc2\x9b";
  const std::string table = PlanToTable(plan, topo_);
  EXPECT_THAT(table, HasSubstr("evil\\x1b]0;owned\\x07\\x1b[2J\\x0d\\x7f\\xc2\\x9b"));
  for (char c : table) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (u >= 0x20 && u < 0x7f)) << "raw byte " << static_cast<int>(u);
  }
}

}  // namespace
}  // namespace crux::spec
