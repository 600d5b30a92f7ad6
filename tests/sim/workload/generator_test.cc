// The Lingjun-calibrated trace generator: published statistics, determinism, placement on the
// real Lingjun hosts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "crux/sim/workload/generator.h"
#include "crux/sim/workload/workload.h"
#include "crux/spec/topology_spec.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

ModelCatalog Models() {
  core::Result<ModelCatalog> c = LoadModelsFile((kConfigs / "models.yaml").string());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelCatalog();
}

TEST(GeneratorTest, MatchesThePublishedLingjunStatistics) {
  const ModelCatalog models = Models();
  for (uint64_t seed : {1, 2, 3}) {
    GeneratorOptions o;
    o.seed = seed;
    core::Result<std::vector<TraceJob>> t = GenerateTrace(o, models, nullptr, nullptr);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const TraceStats s = ComputeTraceStats(*t);
    EXPECT_GT(s.jobs, 4500u) << seed;  // > 5,000 expected (Poisson, 14 d / 240 s).
    EXPECT_LT(s.jobs, 5600u) << seed;
    EXPECT_GT(s.share_ge_128, 0.10) << seed;          // "> 10% of jobs use >= 128 GPUs".
    EXPECT_EQ(s.max_gpus, 512) << seed;               // "the largest uses 512".
    EXPECT_GT(s.peak_jobs_on_1000_gpus, 30) << seed;  // "> 30 concurrent jobs on 1,000+ GPUs".
    EXPECT_GT(s.span_s, 13.5 * 86400) << seed;        // Two weeks.
    EXPECT_LE(s.span_s, 14 * 86400) << seed;
    // Size mix: every bucket present, single-host jobs the majority.
    std::map<int, size_t> counts(s.size_counts.begin(), s.size_counts.end());
    for (int g = 1; g <= 512; g *= 2) EXPECT_GT(counts[g], 0u) << g;
    size_t small = 0;
    for (const auto& [g, n] : counts) small += g <= 8 ? n : 0;
    EXPECT_GT(static_cast<double>(small) / static_cast<double>(s.jobs), 0.5);
    for (const TraceJob& j : *t) {
      const ModelProfile* m = models.Find(j.model);
      ASSERT_NE(m, nullptr) << j.model;
      EXPECT_LE(m->min_gpus, j.gpus);
      EXPECT_GE(m->max_gpus, j.gpus);
      ASSERT_TRUE(j.duration_s.has_value());
      EXPECT_GE(*j.duration_s, o.min_duration_s);
      EXPECT_LE(*j.duration_s, o.max_duration_s);
      EXPECT_TRUE(j.placement.empty());
    }
  }
}

TEST(GeneratorTest, IsDeterministicForASeed) {
  const ModelCatalog models = Models();
  GeneratorOptions o;
  o.days = 2;
  core::Result<std::vector<TraceJob>> a = GenerateTrace(o, models, nullptr, nullptr);
  core::Result<std::vector<TraceJob>> b = GenerateTrace(o, models, nullptr, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(FormatTraceCsv(*a), FormatTraceCsv(*b));
  o.seed = 2;
  core::Result<std::vector<TraceJob>> c = GenerateTrace(o, models, nullptr, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(FormatTraceCsv(*a), FormatTraceCsv(*c));
  // Arrivals ascend and stay inside the span.
  for (size_t i = 1; i < a->size(); ++i) EXPECT_LE((*a)[i - 1].arrival_s, (*a)[i].arrival_s);
  EXPECT_LT(a->back().arrival_s, 2 * 86400.0);
}

TEST(GeneratorTest, PlacesJobsOnTheRealLingjunHostsWithoutOverbooking) {
  core::Result<core::Topology> topo =
      spec::LoadTopologyFile((kConfigs / "topologies" / "lingjun.yaml").string());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  core::Result<Placer> placer = Placer::Create(*topo, 8);
  ASSERT_TRUE(placer.ok());
  const ModelCatalog models = Models();
  GeneratorOptions o;
  o.days = 3;
  core::Result<std::vector<TraceJob>> t = GenerateTrace(o, models, &*topo, &*placer);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(placer->free_gpus(), placer->total_gpus());  // Everything released at the end.
  // Replay: at no time does a host hold more than 8 GPUs; multi-host jobs use whole hosts.
  struct Ev {
    double t;
    int sign;
    size_t job;
  };
  std::vector<Ev> ev;
  for (size_t i = 0; i < t->size(); ++i) {
    const TraceJob& j = (*t)[i];
    ASSERT_FALSE(j.placement.empty()) << j.id;
    const int per_host = j.gpus / static_cast<int>(j.placement.size());
    EXPECT_EQ(per_host * static_cast<int>(j.placement.size()), j.gpus);
    if (j.gpus > 8) {
      EXPECT_EQ(per_host, 8) << j.id;
    }
    for (const std::string& h : j.placement) EXPECT_TRUE(topo->FindNode(h).ok()) << h;
    ev.push_back({j.arrival_s, +1, i});
    ev.push_back({j.arrival_s + *j.duration_s, -1, i});
  }
  std::sort(ev.begin(), ev.end(),
            [](const Ev& a, const Ev& b) { return a.t != b.t ? a.t < b.t : a.sign < b.sign; });
  std::map<std::string, int> used;
  for (const Ev& e : ev) {
    const TraceJob& j = (*t)[e.job];
    const int per_host = j.gpus / static_cast<int>(j.placement.size());
    for (const std::string& h : j.placement) {
      used[h] += e.sign * per_host;
      ASSERT_LE(used[h], 8) << h << " at " << e.t;
      ASSERT_GE(used[h], 0);
    }
  }
  // Same seed, same placement.
  core::Result<std::vector<TraceJob>> again = GenerateTrace(o, models, &*topo, &*placer);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(FormatTraceCsv(*t), FormatTraceCsv(*again));
}

TEST(GeneratorTest, ExpectedGpuSecondsMatchesClosedFormWithoutClamping) {
  // One size, no clamping in reach: E = gpus x median x exp(sigma^2 / 2) x (1 + slope log2 g).
  GeneratorOptions o;
  o.size_mix = {{16, 1.0}};
  o.median_duration_s = 600;
  o.duration_sigma = 0.5;
  o.min_duration_s = 1e-3;
  o.max_duration_s = 1e9;
  const double expected = 16 * 600 * std::exp(0.125) * (1 + 0.25 * 4);
  EXPECT_NEAR(ExpectedGpuSecondsPerJob(o), expected, expected * 1e-6);
  // A clamp that caps every draw: E = gpus x max.
  o.max_duration_s = 1e-2;
  o.min_duration_s = 1e-2;
  EXPECT_NEAR(ExpectedGpuSecondsPerJob(o), 16 * 1e-2, 1e-9);
}

TEST(GeneratorTest, LoadSetsTheArrivalGapAndTheTraceOccupiesThatShare) {
  const ModelCatalog models = Models();
  GeneratorOptions o;
  o.days = 14;
  const int cluster = 100000;  // Large enough that nothing waits: occupancy = offered load.
  for (double load : {0.2, 0.5}) {
    core::Result<double> gap = MeanInterarrivalForLoad(o, cluster, load);
    ASSERT_TRUE(gap.ok()) << gap.status().ToString();
    EXPECT_NEAR(*gap, ExpectedGpuSecondsPerJob(o) / (load * cluster), 1e-9);
    GeneratorOptions g = o;
    g.mean_interarrival_s = *gap;
    core::Result<std::vector<TraceJob>> t = GenerateTrace(g, models, nullptr, nullptr);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    // Measured over the middle of the trace (past the warm-up): heavy-tailed, so +-25%.
    const double occ = MeanGpuOccupancy(*t, cluster, o.days * 86400.0);
    EXPECT_GT(occ, load * 0.7) << load;
    EXPECT_LT(occ, load * 1.25) << load;
  }
  // Twice the load, half the gap.
  EXPECT_NEAR(*MeanInterarrivalForLoad(o, 2000, 0.4), 2 * *MeanInterarrivalForLoad(o, 2000, 0.8),
              1e-9);
  EXPECT_THAT(MeanInterarrivalForLoad(o, 2000, 0).status().message(), HasSubstr("load: must be"));
  EXPECT_THAT(MeanInterarrivalForLoad(o, 2000, 5).status().message(), HasSubstr("load: must be"));
  EXPECT_THAT(MeanInterarrivalForLoad(o, 0, 0.5).status().message(), HasSubstr("no GPUs"));
}

TEST(GeneratorTest, MeanGpuOccupancyClipsJobsToTheWindow) {
  TraceJob a;
  a.id = "a";
  a.arrival_s = 0;
  a.duration_s = 50;
  a.gpus = 4;
  TraceJob b;
  b.id = "b";
  b.arrival_s = 80;
  b.duration_s = 100;  // Only 20 s inside [0, 100].
  b.gpus = 8;
  TraceJob c;  // No duration: ignored.
  c.id = "c";
  c.gpus = 8;
  EXPECT_DOUBLE_EQ(MeanGpuOccupancy({a, b, c}, 10, 100), (4 * 50 + 8 * 20) / 1000.0);
  EXPECT_EQ(MeanGpuOccupancy({a}, 10, 0), 0);
  EXPECT_EQ(MeanGpuOccupancy({a}, 0, 100), 0);
}

// Hosts host0..: ToR group = index / 2 (the _2k Clos: two hosts per ToR).
int TorOfHost(const std::string& h) { return std::stoi(h.substr(4)) / 2; }

TEST(GeneratorTest, ContentionStatsCountJobsSharingAToRWhileBothCrossToRs) {
  auto job = [](std::string id, double at, double d, int gpus, std::vector<std::string> hosts) {
    TraceJob j;
    j.id = std::move(id);
    j.arrival_s = at;
    j.duration_s = d;
    j.gpus = gpus;
    j.placement = std::move(hosts);
    return j;
  };
  const std::vector<TraceJob> jobs = {
      job("a", 0, 100, 16, {"host0", "host2"}),   // ToRs 0, 1.
      job("b", 50, 100, 16, {"host1", "host4"}),  // ToRs 0, 2: shares ToR 0 with a, overlaps.
      job("c", 500, 10, 32, {"host3", "host5", "host6", "host7"}),  // Alone in time.
      job("d", 0, 1000, 8, {"host8"}),                              // One host.
      job("e", 0, 1000, 16, {"host10", "host11"}),                  // One ToR (5).
  };
  const ContentionStats c = ComputeContentionStats(jobs, TorOfHost);
  EXPECT_DOUBLE_EQ(c.share_jobs_cross_tor, 3.0 / 5);
  EXPECT_DOUBLE_EQ(c.share_jobs_may_contend, 2.0 / 5);
  EXPECT_DOUBLE_EQ(c.share_gpus_may_contend, 32.0 / 88);
}

TEST(GeneratorTest, ScatterFragmentsPlacementAndZeroKeepsPackedTraces) {
  const ModelCatalog models = Models();
  core::Result<core::Topology> topo =
      spec::LoadTopologyFile((kConfigs / "topologies" / "crux_clos2_2k_os1.yaml").string());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  GeneratorOptions o;
  o.days = 2;
  auto run = [&](double scatter) {
    GeneratorOptions g = o;
    g.scatter_probability = scatter;
    core::Result<Placer> placer = Placer::Create(*topo, 8);
    EXPECT_TRUE(placer.ok());
    core::Result<std::vector<TraceJob>> t = GenerateTrace(g, models, &*topo, &*placer);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : std::vector<TraceJob>();
  };
  const std::vector<TraceJob> packed = run(0);
  const std::vector<TraceJob> half = run(0.5);
  const std::vector<TraceJob> all = run(1);
  // Same jobs (sizes, models, durations): only placement (and so waiting) changes.
  ASSERT_EQ(packed.size(), half.size());
  for (size_t i = 0; i < packed.size(); ++i) {
    EXPECT_EQ(packed[i].gpus, all[i].gpus);
    EXPECT_EQ(packed[i].model, all[i].model);
    EXPECT_EQ(packed[i].duration_s, all[i].duration_s);
  }
  const ContentionStats c0 = ComputeContentionStats(packed, TorOfHost);
  const ContentionStats c5 = ComputeContentionStats(half, TorOfHost);
  const ContentionStats c1 = ComputeContentionStats(all, TorOfHost);
  EXPECT_EQ(c0.share_jobs_may_contend, 0);  // Packing never splits a ToR between two jobs here.
  EXPECT_GT(c5.share_jobs_may_contend, c0.share_jobs_may_contend);
  EXPECT_GT(c1.share_jobs_may_contend, c5.share_jobs_may_contend);
  EXPECT_GT(c1.share_gpus_may_contend, 0.5);
  EXPECT_EQ(FormatTraceCsv(half), FormatTraceCsv(run(0.5)));  // Deterministic.
  GeneratorOptions bad;
  bad.scatter_probability = 1.5;
  EXPECT_THAT(ValidateGeneratorOptions(bad).message(), HasSubstr("scatter_probability"));
}

// ---- The llm-2025 mix and pack-then-spill placement (issue #16) ----

TEST(GeneratorTest, Llm2025MixFollowsItsClassesAndThePublishedSizeFacts) {
  const ModelCatalog models = Models();
  GeneratorOptions o;
  o.mix = std::string(kLlm2025Mix);
  o.days = 14;
  core::Result<std::vector<TraceJob>> t = GenerateTrace(o, models, nullptr, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::map<std::string, std::string> class_of;
  for (const MixClass& c : Llm2025Classes()) {
    for (const std::string& m : c.models) class_of[m] = c.name;
  }
  size_t over8 = 0;
  size_t single = 0;
  double gpu_s = 0;
  double gpu_s_ge_128 = 0;
  size_t moe = 0;
  for (const TraceJob& j : *t) {
    const ModelProfile* m = models.Find(j.model);
    ASSERT_NE(m, nullptr) << j.model;
    EXPECT_TRUE(m->AcceptsGpus(j.gpus)) << j.model << " " << j.gpus;
    // Jobs of 64 GPUs and more are the LLM classes' hybrid profiles, and only those.
    if (j.gpus > 64) {
      EXPECT_TRUE(m->hybrid) << j.model;
    }
    if (m->hybrid) {
      EXPECT_EQ(class_of.count(j.model), 1u) << j.model;
    }
    over8 += j.gpus > 8;
    single += j.gpus == 1;
    moe += j.model == "deepseek_v3_h800";
    gpu_s += j.gpus * *j.duration_s;
    if (j.gpus >= 128) gpu_s_ge_128 += j.gpus * *j.duration_s;
  }
  const double n = static_cast<double>(t->size());
  // Acme: "less than 7% of jobs request over 8 GPUs", median 1 GPU; the mix says 6.5% / 55.5%.
  EXPECT_GT(over8 / n, 0.05);
  EXPECT_LT(over8 / n, 0.07);
  EXPECT_GT(single / n, 0.5);
  // Acme: pre-training jobs hold 69.5-94% of GPU time.
  EXPECT_GT(gpu_s_ge_128 / gpu_s, 0.695);
  EXPECT_GT(moe, 5u);  // 0.5% of ~5,000 jobs.
  // The expected GPU-seconds (load maths) cover the mix's classes: within 25% of this trace's.
  EXPECT_NEAR(ExpectedGpuSecondsPerJob(o), gpu_s / n, 0.25 * gpu_s / n);
  // Deterministic.
  EXPECT_EQ(FormatTraceCsv(*t), FormatTraceCsv(*GenerateTrace(o, models, nullptr, nullptr)));
  // A catalog without the mix's models says which one is missing.
  const ModelCatalog legacy_only({*models.Find("resnet50")});
  EXPECT_THAT(GenerateTrace(o, legacy_only, nullptr, nullptr).status().message(),
              HasSubstr("is not in the catalog"));
}

TEST(GeneratorTest, SpillFragmentsPlacementTowardsTheCruxShare) {
  const ModelCatalog models = Models();
  core::Result<core::Topology> topo =
      spec::LoadTopologyFile((kConfigs / "topologies" / "meta_like_os7.yaml").string());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  auto run = [&](double spill) {
    GeneratorOptions g;
    g.mix = std::string(kLlm2025Mix);
    g.days = 3;
    g.spill_probability = spill;
    core::Result<Placer> placer = Placer::Create(*topo, 8);
    EXPECT_TRUE(placer.ok());
    g.mean_interarrival_s = *MeanInterarrivalForLoad(g, placer->total_gpus(), 0.58);
    core::Result<std::vector<TraceJob>> t = GenerateTrace(g, models, &*topo, &*placer);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return ComputeContentionStats(t.ok() ? *t : std::vector<TraceJob>(), [&](const std::string& h) {
      return placer->tor_group(*topo->FindNode(h));
    });
  };
  const ContentionStats packed = run(0);
  const ContentionStats spilled = run(0.6);
  const ContentionStats all = run(1);
  EXPECT_GT(spilled.share_gpus_may_contend, packed.share_gpus_may_contend);
  EXPECT_GT(all.share_gpus_may_contend, spilled.share_gpus_may_contend);
  // The calibrated value lands near Crux's 51% of GPUs (docs/sim-workloads.md has the sweep).
  EXPECT_GT(spilled.share_gpus_may_contend, 0.35);
  EXPECT_LT(spilled.share_gpus_may_contend, 0.65);
  GeneratorOptions bad;
  bad.spill_probability = -0.1;
  EXPECT_THAT(ValidateGeneratorOptions(bad).message(), HasSubstr("spill_probability"));
  bad = GeneratorOptions();
  bad.mix = "llm-2099";
  EXPECT_THAT(ValidateGeneratorOptions(bad).message(), HasSubstr("unknown mix 'llm-2099'"));
}

TEST(GeneratorTest, RejectsBadOptions) {
  const ModelCatalog models = Models();
  GeneratorOptions o;
  o.days = 0;
  EXPECT_THAT(GenerateTrace(o, models, nullptr, nullptr).status().message(),
              HasSubstr("days: must be > 0"));
  o = GeneratorOptions();
  o.size_mix = {{1, 0}};
  EXPECT_THAT(ValidateGeneratorOptions(o).message(), HasSubstr("positive sum"));
  o = GeneratorOptions();
  o.size_mix = {{1024, 1}};
  EXPECT_THAT(GenerateTrace(o, models, nullptr, nullptr).status().message(),
              HasSubstr("no model accepts 1024 GPUs"));
  o = GeneratorOptions();
  o.mean_interarrival_s = -1;
  EXPECT_FALSE(ValidateGeneratorOptions(o).ok());
}

TEST(GeneratorTest, SharePutsMultiHostJobsOnHalfHostsAndLoadsAsSimJobs) {
  const ModelCatalog models = Models();
  core::Result<core::Topology> topo =
      spec::LoadTopologyFile((kConfigs / "topologies" / "crux_clos2_2k_os1.yaml").string());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  auto run = [&](const std::string& mix, double share) {
    GeneratorOptions g;
    g.mix = mix;
    g.days = 1;
    g.share_probability = share;
    core::Result<Placer> placer = Placer::Create(*topo, 8);
    EXPECT_TRUE(placer.ok());
    core::Result<std::vector<TraceJob>> t = GenerateTrace(g, models, &*topo, &*placer);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : std::vector<TraceJob>();
  };
  const std::vector<TraceJob> packed = run(std::string(kLingjun2023Mix), 0);
  const std::vector<TraceJob> shared = run(std::string(kLingjun2023Mix), 1);
  // share = 0 draws nothing from the new stream: the trace of options without it.
  {
    GeneratorOptions g;
    g.days = 1;
    core::Result<Placer> placer = Placer::Create(*topo, 8);
    ASSERT_TRUE(placer.ok());
    EXPECT_EQ(FormatTraceCsv(packed), FormatTraceCsv(*GenerateTrace(g, models, &*topo, &*placer)));
  }
  size_t multi = 0;
  for (const TraceJob& j : shared) {
    if (j.gpus <= 8) continue;
    ++multi;
    EXPECT_EQ(static_cast<int>(j.placement.size()), j.gpus / 4) << j.id;  // 4 GPUs per host.
  }
  EXPECT_GT(multi, 10u);
  // Hosts are shared within their GPUs: the loader's capacity check accepts the trace.
  core::Result<std::vector<SimJob>> jobs = TraceToSimJobs(shared, models, *topo, 8);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  size_t half_hosts = 0;
  for (const SimJob& j : *jobs) half_hosts += j.spec.hosts.size() > 1 && j.spec.gpus_per_host == 4;
  EXPECT_EQ(half_hosts, multi);
  // llm-2025: hybrid profiles (8 GPUs per host by recipe) stay on whole hosts.
  const std::vector<TraceJob> llm = run(std::string(kLlm2025Mix), 1);
  for (const TraceJob& j : llm) {
    if (models.Find(j.model)->hybrid) {
      EXPECT_EQ(static_cast<int>(j.placement.size()) * 8, j.gpus) << j.id;
    }
  }
  EXPECT_TRUE(TraceToSimJobs(llm, models, *topo, 8).ok());
  GeneratorOptions bad;
  bad.share_probability = 2;
  EXPECT_THAT(ValidateGeneratorOptions(bad).message(), HasSubstr("share_probability"));
}

}  // namespace
}  // namespace crux::sim::workload
