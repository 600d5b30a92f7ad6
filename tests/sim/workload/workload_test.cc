// Workload loading (jobs YAML, trace + models -> SimJobs) and the shipped scenario files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "crux/core/base/text.h"
#include "crux/sim/workload/scenario.h"
#include "crux/sim/workload/workload.h"
#include "crux/spec/topology_spec.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

core::Topology Load(const std::string& name) {
  core::Result<core::Topology> t =
      spec::LoadTopologyFile((kConfigs / "topologies" / name).string());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : core::Topology();
}

ModelCatalog Models() {
  core::Result<ModelCatalog> c = LoadModelsFile((kConfigs / "models.yaml").string());
  EXPECT_TRUE(c.ok());
  return c.ok() ? *c : ModelCatalog();
}

size_t CountKind(const core::Topology& t, core::NodeKind k) {
  size_t n = 0;
  for (const core::Node& node : t.nodes()) n += node.kind == k ? 1 : 0;
  return n;
}

TEST(FabricsTest, CruxSimulatedFabricsHaveThePaperShapes) {
  for (const char* f : {"crux_clos2.yaml", "crux_clos2_2k.yaml", "crux_clos2_bw8.yaml"}) {
    const core::Topology t = Load(f);
    EXPECT_EQ(CountKind(t, core::NodeKind::kTor), 173u) << f;
    EXPECT_EQ(CountKind(t, core::NodeKind::kAgg), 16u) << f;
    EXPECT_EQ(CountKind(t, core::NodeKind::kCore), 0u) << f;
  }
  EXPECT_GE(Load("crux_clos2.yaml").hosts().size(), 847u);  // Holds the Lingjun hosts.
  EXPECT_EQ(Load("crux_clos2_2k.yaml").hosts().size() * 8, 2768u);
  EXPECT_EQ(Load("crux_clos2_bw8.yaml").hosts().size() * 8, 2768u);
  for (const char* f : {"crux_dualtor3.yaml", "crux_dualtor3_2k.yaml", "crux_dualtor3_bw8.yaml"}) {
    const core::Topology t = Load(f);
    EXPECT_EQ(CountKind(t, core::NodeKind::kTor), 6u) << f;
    EXPECT_EQ(CountKind(t, core::NodeKind::kAgg), 12u) << f;
    EXPECT_EQ(CountKind(t, core::NodeKind::kCore), 32u) << f;
    // Every host reaches two ToRs through eight links.
    const core::NodeId h = t.hosts()[0];
    std::set<uint32_t> tors;
    size_t links = 0;
    for (core::NodeId nic : t.NicsOf(h)) {
      for (core::LinkId l : t.OutLinks(nic)) {
        if (t.node(t.link(l).dst).kind == core::NodeKind::kTor) {
          tors.insert(t.link(l).dst.value());
          ++links;
        }
      }
    }
    EXPECT_EQ(tors.size(), 2u) << f;
    EXPECT_EQ(links, 8u) << f;
  }
  EXPECT_GE(Load("crux_dualtor3.yaml").hosts().size(), 847u);
}

// Oversubscription of every switch of `kind` towards the tier above: down / up capacity.
std::set<double> Oversubscription(const core::Topology& t, core::NodeKind kind,
                                  core::NodeKind up_kind) {
  std::set<double> out;
  for (size_t i = 0; i < t.num_nodes(); ++i) {
    const core::NodeId n(static_cast<uint32_t>(i));
    if (t.node(n).kind != kind) continue;
    double down = 0;
    double up = 0;
    for (core::LinkId l : t.OutLinks(n)) {
      const double bps = t.link(l).capacity.ToBitsPerSec();
      (t.node(t.link(l).dst).kind == up_kind ? up : down) += bps;
    }
    out.insert(std::round(down / up * 1000) / 1000);
  }
  return out;
}

TEST(FabricsTest, Issue16FabricsHaveTheirOversubscription) {
  // Meta-like: racks of 2 hosts at 1:1, pods under a 1:7 (or 1:1) aggregation tier. HPN-like:
  // rail-optimised dual-plane segments at 1:1 under a 15:1 (or 1:1) core tier.
  struct Fabric {
    const char* file;
    size_t gpus;
    size_t tors;
    size_t aggs;
    size_t cores;
    double agg_core;       // Down / up capacity of every Agg.
    size_t hosts_per_tor;  // Hosts per ToR group (a rack, or an HPN segment).
    size_t hosts_per_pod;
  };
  for (const Fabric& f : {Fabric{"meta_like_os7.yaml", 2688, 168, 32, 32, 7.0, 2, 84},
                          Fabric{"meta_like_os1.yaml", 2688, 168, 32, 32, 1.0, 2, 84},
                          Fabric{"hpn_2pod_os15.yaml", 3072, 96, 32, 8, 15.0, 64, 192},
                          Fabric{"hpn_2pod_os1.yaml", 3072, 96, 32, 8, 1.0, 64, 192}}) {
    const core::Topology t = Load(f.file);
    EXPECT_EQ(t.hosts().size() * 8, f.gpus) << f.file;
    EXPECT_EQ(t.NicsOf(t.hosts()[0]).size(), 8u) << f.file;
    EXPECT_EQ(CountKind(t, core::NodeKind::kTor), f.tors) << f.file;
    EXPECT_EQ(CountKind(t, core::NodeKind::kAgg), f.aggs) << f.file;
    EXPECT_EQ(CountKind(t, core::NodeKind::kCore), f.cores) << f.file;
    EXPECT_EQ(Oversubscription(t, core::NodeKind::kTor, core::NodeKind::kAgg),
              std::set<double>{1.0})
        << f.file;
    EXPECT_EQ(Oversubscription(t, core::NodeKind::kAgg, core::NodeKind::kCore),
              std::set<double>{f.agg_core})
        << f.file;
    // The placement tiers: ToR group, then pod (Agg group).
    core::Result<Placer> p = Placer::Create(t, 8);
    ASSERT_TRUE(p.ok());
    const auto& h = t.hosts();
    EXPECT_EQ(p->tor_group(h[0]), p->tor_group(h[f.hosts_per_tor - 1])) << f.file;
    EXPECT_NE(p->tor_group(h[0]), p->tor_group(h[f.hosts_per_tor])) << f.file;
    EXPECT_EQ(p->agg_group(h[0]), p->agg_group(h[f.hosts_per_pod - 1])) << f.file;
    EXPECT_NE(p->agg_group(h[0]), p->agg_group(h[f.hosts_per_pod])) << f.file;
  }
}

TEST(WorkloadTest, HybridTraceRowsBecomeExplicitFlowJobs) {
  const core::Topology topo = Load("meta_like_os7.yaml");
  const ModelCatalog models = Models();
  TraceJob moe;
  moe.id = "dsv3";
  moe.gpus = 1024;
  moe.duration_s = 3600;
  moe.model = "deepseek_v3_h800";
  TraceJob small;
  small.id = "rn";
  small.gpus = 8;
  small.iterations = 100;
  small.model = "resnet50";
  core::Result<std::vector<SimJob>> jobs = TraceToSimJobs({moe, small}, models, topo, 8);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const core::JobSpec& j = (*jobs)[0].spec;
  EXPECT_EQ(j.pattern, core::TrafficPattern::kExplicit);
  EXPECT_EQ(j.gpus(), 1024);
  EXPECT_FALSE(j.flows.empty());
  EXPECT_TRUE(j.flops_per_iteration.has_value());
  EXPECT_EQ((*jobs)[1].spec.pattern, core::TrafficPattern::kRingAllReduce);
  // A size the profile does not run on names the line and the job.
  moe.gpus = 512;
  EXPECT_THAT(TraceToSimJobs({moe}, models, topo, 8).status().message(),
              HasSubstr("job dsv3: model 'deepseek_v3_h800' does not run on 512 GPUs"));
}

TEST(WorkloadTest, TraceRowsBecomeSimJobs) {
  const core::Topology topo = Load("example_clos2.yaml");  // 16 hosts, 4 per ToR.
  core::Result<std::vector<TraceJob>> trace = ParseTraceCsv(std::string(kTraceHeader) +
                                                            "\n"
                                                            "a,0,100,,16,host3;host9,bert_large\n"
                                                            "b,5,,50,32,,gpt2_medium\n"
                                                            "c,6,,,4,,resnet50\n");
  ASSERT_TRUE(trace.ok());
  core::Result<std::vector<SimJob>> jobs = TraceToSimJobs(*trace, Models(), topo, 8);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  const SimJob& a = (*jobs)[0];
  EXPECT_EQ(a.spec.id, "a");
  EXPECT_EQ(a.model, "bert_large");
  EXPECT_EQ(a.spec.hosts.size(), 2u);
  EXPECT_EQ(topo.node(a.spec.hosts[0]).name, "host3");
  EXPECT_EQ(a.spec.gpus_per_host, 8);
  EXPECT_EQ(a.duration, core::Duration::Seconds(100));
  EXPECT_EQ(a.spec.pattern, core::TrafficPattern::kRingAllReduce);
  EXPECT_EQ(a.spec.pattern_bytes, core::Bytes::Of(680000000));
  const SimJob& b = (*jobs)[1];
  EXPECT_EQ(b.arrival, core::Duration::Seconds(5));
  EXPECT_EQ(b.iterations, 50);
  ASSERT_EQ(b.spec.hosts.size(), 4u);
  // Placed under one ToR (host3 is taken by a: tor0 has 3 free, tor1 has 4 -> tor1).
  EXPECT_EQ(topo.node(b.spec.hosts[0]).name, "host4");
  EXPECT_EQ(topo.node(b.spec.hosts[3]).name, "host7");
  const SimJob& c = (*jobs)[2];
  EXPECT_EQ(c.spec.hosts.size(), 1u);
  EXPECT_EQ(c.spec.gpus_per_host, 4);
  EXPECT_FALSE(c.duration.has_value());
  EXPECT_FALSE(c.iterations.has_value());
}

TEST(WorkloadTest, TraceErrorsNameTheLineAndJob) {
  const core::Topology topo = Load("example_clos2.yaml");
  const ModelCatalog models = Models();
  auto error = [&](const std::string& row) {
    core::Result<std::vector<TraceJob>> t =
        ParseTraceCsv(std::string(kTraceHeader) + "\n" + row + "\n");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return TraceToSimJobs(*t, models, topo, 8).status();
  };
  EXPECT_THAT(error("a,0,10,,8,,nosuchmodel").message(),
              HasSubstr("line 2: job a: unknown model 'nosuchmodel' (known: resnet50"));
  EXPECT_THAT(error("a,0,10,,16,host0;host99,resnet50").message(),
              HasSubstr("line 2: job a: placement: 'host99' is not a host"));
  EXPECT_THAT(error("a,0,10,,8,tor0,resnet50").message(), HasSubstr("'tor0' is not a host"));
  core::Status full = error("a,0,10,,256,,gpt2_xl");
  EXPECT_EQ(full.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(full.message(), HasSubstr("line 2: job a: placement: not enough whole free hosts"));
}

// Issue #10, item 6: a departed job's GPUs were never given back (the loader released an empty
// placement), so a job arriving after another had left found the cluster full.
TEST(WorkloadTest, DepartedJobsReleaseTheirGpus) {
  const core::Topology topo = Load("example_clos2.yaml");  // 16 hosts x 8 GPUs = 128 GPUs.
  core::Result<std::vector<TraceJob>> trace =
      ParseTraceCsv(std::string(kTraceHeader) +
                    "\n"
                    "a,0,10,,128,,bert_large\n"
                    "b,100,10,,128,,bert_large\n"
                    // Leaves exactly when c arrives (an end at t frees the GPUs for t).
                    "c,110,,,64,,bert_large\n"
                    "d,110,50,,64,,bert_large\n"
                    "e,160,5,,64,,bert_large\n");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  core::Result<std::vector<SimJob>> jobs = TraceToSimJobs(*trace, Models(), topo, 8);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 5u);
  EXPECT_EQ((*jobs)[1].spec.hosts.size(), 16u);
  // c runs to the horizon on one half; d, then e (after d left), get the other half.
  std::set<uint32_t> c_hosts;
  for (core::NodeId h : (*jobs)[2].spec.hosts) c_hosts.insert(h.value());
  for (size_t k : {size_t{3}, size_t{4}}) {
    ASSERT_EQ((*jobs)[k].spec.hosts.size(), 8u);
    for (core::NodeId h : (*jobs)[k].spec.hosts) EXPECT_EQ(c_hosts.count(h.value()), 0u) << k;
  }
  EXPECT_EQ((*jobs)[3].spec.hosts, (*jobs)[4].spec.hosts);
  // A job that never leaves keeps its GPUs: a third 64-GPU job does not fit.
  core::Result<std::vector<TraceJob>> full =
      ParseTraceCsv(std::string(kTraceHeader) +
                    "\nc,0,,,64,,bert_large\nd,0,,,64,,bert_large\nx,500,10,,64,,bert_large\n");
  ASSERT_TRUE(full.ok());
  core::Status st = TraceToSimJobs(*full, Models(), topo, 8).status();
  EXPECT_EQ(st.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("line 4: job x: placement: not enough whole free hosts"));
}

// Issue #10, item 6: jobs with explicit placements could oversubscribe a host silently.
TEST(WorkloadTest, ExplicitPlacementsMayNotOversubscribeAHost) {
  const core::Topology topo = Load("example_clos2.yaml");
  const ModelCatalog models = Models();
  auto load = [&](const std::string& rows) {
    core::Result<std::vector<TraceJob>> t = ParseTraceCsv(std::string(kTraceHeader) + "\n" + rows);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return TraceToSimJobs(*t, models, topo, 8);
  };
  // Two explicit placements on host3 while both run.
  core::Status st = load(
                        "a,0,100,,16,host3;host9,bert_large\n"
                        "b,50,100,,8,host3,resnet50\n")
                        .status();
  EXPECT_EQ(st.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(),
              HasSubstr("line 3: job b: placement: host 'host3' has 0 of 8 GPUs free at t=50 s, "
                        "the job needs 8; held by line 2: job a (8 GPUs, until t=100 s)"));
  // An explicit placement onto a host the policy gave to an earlier job.
  st = load("p,0,,,8,,resnet50\nq,1,10,,8,host0,resnet50\n").status();  // p: on host0.
  EXPECT_EQ(st.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(),
              HasSubstr("line 3: job q: placement: host 'host0' has 0 of 8 GPUs free at t=1 s"));
  EXPECT_THAT(st.message(), HasSubstr("held by line 2: job p (8 GPUs, to the horizon)"));
  // More GPUs per host than a host has.
  st = load("a,0,10,,32,host0;host1,bert_large\n").status();
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(),
              HasSubstr("line 2: job a: placement: 32 GPUs on 2 hosts is 16 GPUs per host, but a "
                        "host has 8"));
  // Sharing a host within its GPUs, and reusing it once the first job has left, are fine; the
  // placement policy then avoids the hosts the trace gave away.
  core::Result<std::vector<SimJob>> ok = load(
      "a,0,100,,4,host3,resnet50\n"
      "b,50,100,,4,host3,resnet50\n"
      "c,100,10,,8,host3;host9,bert_large\n"
      "d,150,10,,8,host9,resnet50\n"
      "e,150,10,,120,,bert_large\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  for (core::NodeId h : (*ok)[4].spec.hosts) EXPECT_NE(topo.node(h).name, "host9");
}

// The same rule for workloads with given placements (jobs YAML files).
TEST(WorkloadTest, CheckHostCapacityNamesTheJobsAndTheHost) {
  const core::Topology topo = Load("example_clos2.yaml");
  auto job = [&](const std::string& id, double arrival, std::optional<double> duration, int g,
                 std::vector<std::string> hosts) {
    SimJob j;
    j.spec.id = id;
    for (const std::string& h : hosts) j.spec.hosts.push_back(*topo.FindNode(h));
    j.spec.gpus_per_host = g;
    j.spec.compute_time = core::Duration::Seconds(1);
    j.arrival = core::Duration::Seconds(arrival);
    if (duration) j.duration = core::Duration::Seconds(*duration);
    return j;
  };
  EXPECT_TRUE(CheckHostCapacity({job("a", 0, 100, 4, {"host3"}), job("b", 0, 100, 4, {"host3"}),
                                 job("c", 100, 10, 8, {"host3", "host9"})},
                                topo, 8)
                  .ok());
  core::Status st = CheckHostCapacity(
      {job("a", 0, 100, 8, {"host3", "host9"}), job("b", 50, std::nullopt, 4, {"host9"})}, topo, 8);
  EXPECT_EQ(st.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "job 'b': host 'host9' has 0 of 8 GPUs free at t=50 s, the job needs 4; held by job "
            "'a' (8 GPUs, until t=100 s) (jobs may not share a host's GPUs)");
  st = CheckHostCapacity({job("a", 0, 100, 16, {"host3"})}, topo, 8);
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(),
              HasSubstr("job 'a': gpus_per_host: 16 GPUs per host, but a host has 8"));
  // Every shipped jobs file fits.
  for (const char* f :
       {"jobs/example1.yaml", "jobs/example_clos2.yaml", "scenarios/jobs/testbed_pair.yaml"}) {
    const std::string name =
        std::string(f).find("example1") != std::string::npos  ? "example_explicit.yaml"
        : std::string(f).find("testbed") != std::string::npos ? "testbed_pair_clos2.yaml"
                                                              : "example_clos2.yaml";
    const core::Topology t = Load(name);
    core::Result<std::vector<SimJob>> jobs = LoadJobsWorkload((kConfigs / f).string(), t);
    ASSERT_TRUE(jobs.ok()) << f << ": " << jobs.status().ToString();
    EXPECT_TRUE(CheckHostCapacity(*jobs, t, 8).ok()) << f;
  }
}

TEST(WorkloadTest, JobsYamlCarriesSimulatorKeys) {
  const core::Topology topo = Load("example_explicit.yaml");
  core::Result<std::vector<SimJob>> jobs = LoadJobsWorkload(
      (kConfigs / "scenarios" / "jobs" / "example1_short_first.yaml").string(), topo);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].spec.fixed_rank, 1);
  EXPECT_EQ((*jobs)[1].spec.fixed_rank, 0);
  EXPECT_EQ((*jobs)[0].arrival, core::Duration::Zero());
}

TEST(ScenarioTest, EveryShippedScenarioLoadsWithItsWorkload) {
  const ModelCatalog models = Models();
  size_t n = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(kConfigs / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    core::Result<Scenario> s = LoadScenarioFile(e.path().string());
    ASSERT_TRUE(s.ok()) << e.path() << ": " << s.status().ToString();
    core::Result<core::Topology> topo = spec::LoadTopologyFile(s->topology_path);
    ASSERT_TRUE(topo.ok()) << e.path() << ": " << topo.status().ToString();
    EXPECT_FALSE(s->policies.empty()) << e.path();
    if (!s->jobs_path.empty()) {
      core::Result<std::vector<SimJob>> jobs = LoadJobsWorkload(s->jobs_path, *topo);
      ASSERT_TRUE(jobs.ok()) << e.path() << ": " << jobs.status().ToString();
      EXPECT_GE(jobs->size(), 2u);
    } else {
      ASSERT_TRUE(s->generate.has_value()) << e.path();
      core::Result<ModelCatalog> m = LoadModelsFile(s->models_path);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      core::Result<Placer> placer = Placer::Create(*topo, s->gpus_per_host.value_or(8));
      ASSERT_TRUE(placer.ok());
      GeneratorOptions g = *s->generate;
      if (s->generate_load) {
        core::Result<double> gap =
            MeanInterarrivalForLoad(g, placer->total_gpus(), *s->generate_load);
        ASSERT_TRUE(gap.ok()) << gap.status().ToString();
        g.mean_interarrival_s = *gap;
      }
      core::Result<std::vector<TraceJob>> trace =
          GenerateTrace(g, *m, &*topo, s->generate_place ? &*placer : nullptr);
      ASSERT_TRUE(trace.ok()) << e.path() << ": " << trace.status().ToString();
      core::Result<std::vector<SimJob>> jobs =
          TraceToSimJobs(*trace, *m, *topo, s->gpus_per_host.value_or(8));
      ASSERT_TRUE(jobs.ok()) << e.path() << ": " << jobs.status().ToString();
      EXPECT_GT(jobs->size(), 100u);
    }
  }
  EXPECT_GE(n, 5u);
}

TEST(ScenarioTest, ParsesOptionsAndRejectsBadFiles) {
  core::Result<Scenario> s = ParseScenario(
      "scenario:\n  topology: t.yaml\n  trace: x/tr.csv\n  policies: [crux, ecmp]\n"
      "  levels: 3\n  seed: 9\n  horizon_s: 60\n  fast_forward: false\n  gpus_per_host: 4\n"
      "  oracle: true\n  spray: true\n",
      "/base");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->topology_path, "/base/t.yaml");
  EXPECT_EQ(s->trace_path, "/base/x/tr.csv");
  EXPECT_EQ(s->models_path, "/models.yaml");
  EXPECT_EQ(s->policies, (std::vector<std::string>{"crux", "ecmp"}));
  EXPECT_EQ(s->levels, 3);
  EXPECT_EQ(s->seed, 9u);
  EXPECT_EQ(s->horizon_s, 60);
  EXPECT_EQ(s->fast_forward, false);
  EXPECT_EQ(s->gpus_per_host, 4);
  EXPECT_EQ(s->oracle, true);
  EXPECT_EQ(s->spray, true);
  EXPECT_FALSE(s->generate_load.has_value());
  core::Result<Scenario> loaded =
      ParseScenario("scenario: {topology: t.yaml, generate: {place: true, load: 0.8}}", "");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->generate_load, 0.8);
  EXPECT_TRUE(loaded->generate_place);
  EXPECT_EQ(loaded->generate->mix, "lingjun-2023");
  EXPECT_EQ(loaded->generate->spill_probability, 0);
  core::Result<Scenario> mixed = ParseScenario(
      "scenario: {topology: t.yaml, generate: {mix: llm-2025, spill: 0.6, place: true}}", "");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->generate->mix, "llm-2025");
  EXPECT_EQ(mixed->generate->spill_probability, 0.6);
  struct Case {
    const char* yaml;
    const char* error;
  };
  const Case cases[] = {
      {"scenario: {jobs: j.yaml}", "scenario.topology: missing required key"},
      {"scenario: {topology: t.yaml}", "exactly one of jobs, trace and generate"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, trace: t.csv}", "exactly one of jobs"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, levels: 0}",
       "scenario.levels: must be in [1, 64]"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, horizon_s: -5}",
       "scenario.horizon_s: must be >"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, policies: []}",
       "scenario.policies: must be a non-empty list"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, colour: red}", "scenario.colour: unknown key"},
      {"scenario: {topology: t.yaml, generate: {days: 0}}", "scenario.generate.days: must be >"},
      {"scenario: {topology: t.yaml, generate: {place: maybe}}",
       "scenario.generate.place: must be true or false"},
      {"scenario: {topology: t.yaml, generate: {load: 0.8}}",
       "scenario.generate.load: needs place: true"},
      {"scenario: {topology: t.yaml, generate: {place: true, load: 0}}",
       "scenario.generate.load: must be >"},
      {"scenario: {topology: t.yaml, generate: {place: true, load: 0.5, mean_interarrival_s: 9}}",
       "give load or mean_interarrival_s, not both"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, fast_forward: 1}",
       "scenario.fast_forward: must be true or false"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, oracle: yes please}",
       "scenario.oracle: must be true or false"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, spray: maybe}",
       "scenario.spray: must be true or false"},
      {"scenario: [", "invalid YAML"},
      {"scenario: {topology: t.yaml, generate: {mix: llm-2099}}",
       "scenario.generate.mix: unknown mix 'llm-2099' (known: lingjun-2023, llm-2025)"},
      {"scenario: {topology: t.yaml, generate: {spill: 2}}",
       "scenario.generate.spill: must be in [0, 1]"},
      // Issue #10, item 13: every policy must be known (run used to ignore all but the first).
      {"scenario: {topology: t.yaml, jobs: j.yaml, policies: [crux, nosuch]}",
       "scenario.policies[1]: unknown policy 'nosuch' (known: "},
      {"scenario: {topology: t.yaml, jobs: j.yaml, policies: [crux, ecmp, crux]}",
       "scenario.policies[2]: policy 'crux' is listed twice"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, policies: [\"cr\\eux\"]}",
       "scenario.policies[0]: unknown policy 'cr\\x1bux'"},
      // Control characters and escape sequences in strings.
      {"scenario: {topology: \"t\\e[2J.yaml\", jobs: j.yaml}",
       "scenario.topology: must be printable text (byte 2 starts a control character"},
      {"scenario: {topology: t.yaml, jobs: j.yaml, description: \"ok\\u202Eevil\"}",
       "scenario.description: must be printable text (byte 3"},
  };
  for (const Case& c : cases) {
    core::Result<Scenario> r = ParseScenario(c.yaml, "");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.yaml;
    EXPECT_TRUE(core::IsPrintableText(r.status().message())) << r.status().message();
  }
}

}  // namespace
}  // namespace crux::sim::workload
