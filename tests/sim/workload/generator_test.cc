// The Lingjun-calibrated trace generator: published statistics, determinism, placement on the
// real Lingjun hosts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "crux/sim/workload/generator.h"
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

}  // namespace
}  // namespace crux::sim::workload
