// Every shipped file in configs/topologies and configs/jobs parses, and every job file plans on
// its topology.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crux/core/plan/planner.h"
#include "crux/spec/jobs_spec.h"
#include "crux/spec/topology_spec.h"

namespace crux::spec {
namespace {

namespace fs = std::filesystem;

const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

std::vector<fs::path> YamlFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The topology each job file is written for. A job file without an entry here must have a
// topology of the same name.
fs::path TopologyFor(const fs::path& jobs_file) {
  static const std::map<std::string, std::string> kTopology = {
      {"example_clos2", "example_clos2"}, {"example1", "example_explicit"},
      {"testbed_contention", "testbed"},  {"lingjun_jobs", "lingjun"},
      {"hpn_jobs", "hpn_small"},
  };
  const std::string stem = jobs_file.stem().string();
  auto it = kTopology.find(stem);
  return kConfigs / "topologies" / ((it != kTopology.end() ? it->second : stem) + ".yaml");
}

TEST(ConfigsTest, EveryTopologyFileParses) {
  const std::vector<fs::path> files = YamlFiles(kConfigs / "topologies");
  ASSERT_GE(files.size(), 8u);
  for (const fs::path& f : files) {
    core::Result<core::Topology> topo = LoadTopologyFile(f.string());
    ASSERT_TRUE(topo.ok()) << f << ": " << topo.status().ToString();
    EXPECT_GT(topo->hosts().size(), 0u) << f;
  }
}

TEST(ConfigsTest, ShippedTopologiesHaveTheDocumentedShape) {
  struct Expect {
    const char* file;
    size_t hosts;
    size_t nics_per_host;
  };
  const Expect expects[] = {
      {"example_clos2.yaml", 16, 2}, {"testbed.yaml", 12, 4},         {"fattree_k4.yaml", 16, 1},
      {"clos3.yaml", 16, 2},         {"hpn_pod.yaml", 1920, 8},       {"hpn_small.yaml", 16, 8},
      {"lingjun.yaml", 847, 2},      {"example_explicit.yaml", 4, 0},
  };
  for (const Expect& e : expects) {
    core::Result<core::Topology> topo =
        LoadTopologyFile((kConfigs / "topologies" / e.file).string());
    ASSERT_TRUE(topo.ok()) << e.file << ": " << topo.status().ToString();
    EXPECT_EQ(topo->hosts().size(), e.hosts) << e.file;
    EXPECT_EQ(topo->NicsOf(topo->hosts()[0]).size(), e.nics_per_host) << e.file;
  }
}

TEST(ConfigsTest, EveryJobFileParsesAndPlansOnItsTopology) {
  const std::vector<fs::path> files = YamlFiles(kConfigs / "jobs");
  ASSERT_GE(files.size(), 5u);
  for (const fs::path& f : files) {
    const fs::path topo_file = TopologyFor(f);
    ASSERT_TRUE(fs::exists(topo_file))
        << f << ": no topology " << topo_file << " (add the job file to TopologyFor)";
    core::Result<core::Topology> topo = LoadTopologyFile(topo_file.string());
    ASSERT_TRUE(topo.ok()) << topo_file << ": " << topo.status().ToString();
    core::Result<std::vector<JobEntry>> jobs = LoadJobsFile(f.string(), *topo);
    ASSERT_TRUE(jobs.ok()) << f << ": " << jobs.status().ToString();
    EXPECT_GE(jobs->size(), 2u) << f;

    core::Planner planner(*topo, core::PlannerOptions{});
    core::Result<core::Plan> plan = planner.Run(JobSpecs(*jobs));
    ASSERT_TRUE(plan.ok()) << f << ": " << plan.status().ToString();
    EXPECT_EQ(plan->jobs.size(), jobs->size()) << f;
  }
}

TEST(ConfigsTest, HpnJobsAlsoFitTheFullPod) {
  core::Result<core::Topology> topo =
      LoadTopologyFile((kConfigs / "topologies" / "hpn_pod.yaml").string());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  core::Result<std::vector<JobEntry>> jobs =
      LoadJobsFile((kConfigs / "jobs" / "hpn_jobs.yaml").string(), *topo);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
}

TEST(ConfigsTest, ExampleOneRanksTheShorterIterationFirst) {
  core::Result<core::Topology> topo =
      LoadTopologyFile((kConfigs / "topologies" / "example_explicit.yaml").string());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  core::Result<std::vector<JobEntry>> jobs =
      LoadJobsFile((kConfigs / "jobs" / "example1.yaml").string(), *topo);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  core::Planner planner(*topo, core::PlannerOptions{});
  core::Result<core::Plan> plan = planner.Run(JobSpecs(*jobs));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->jobs.size(), 2u);
  // Equal intensity (W / t = 5 GFLOP/s); job1 moves more bytes and is the reference.
  EXPECT_DOUBLE_EQ(plan->jobs[0].intensity, plan->jobs[1].intensity);
  EXPECT_NEAR(plan->jobs[0].intensity, 5e9, 1);
  EXPECT_EQ(plan->reference_job, 0);
  EXPECT_NEAR(plan->jobs[1].k, 1.5, 1e-6);
  EXPECT_EQ(plan->jobs[1].rank, 0);
}

}  // namespace
}  // namespace crux::spec
