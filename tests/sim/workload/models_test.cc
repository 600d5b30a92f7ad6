// configs/models.yaml and the model-profile parser: the shipped file, every kind of bad input,
// and the profile -> JobSpec mapping.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "crux/core/model/job.h"
#include "crux/sim/workload/models.h"
#include "crux/spec/topology_spec.h"
#include "yaml_cases.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

constexpr const char* kGood = R"(models:
  - name: m1
    gpu: A100
    compute_time_s: 0.5
    parallelism: data
    gradient_bytes: 1e9
    overlap_start: 0.4
    min_gpus: 2
    max_gpus: 64
    sources: {compute_time_s: a, gradient_bytes: b, overlap_start: c}
  - name: m2
    gpu: A100
    compute_time_s: 1
    parallelism: pipeline
    activation_bytes: 2e8
    overlap_start: 0.2
    sources: {compute_time_s: a, activation_bytes: b, overlap_start: c}
)";

TEST(ModelsTest, ShippedCatalogHasElevenSourcedProfiles) {
  core::Result<ModelCatalog> c = LoadModelsFile((kConfigs / "models.yaml").string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_GE(c->models().size(), 11u);
  bool has_ge_128 = false;
  for (const ModelProfile& m : c->models()) {
    if (m.hybrid) continue;  // The 2024-2026 profiles: llm_profiles_test.cc.
    EXPECT_FALSE(m.gpu.empty()) << m.name;
    EXPECT_GT(m.compute_time, core::Duration::Zero()) << m.name;
    EXPECT_GT(m.pattern_bytes().count(), 0) << m.name;
    EXPECT_EQ(m.sources.count("compute_time_s"), 1u) << m.name;
    EXPECT_EQ(m.sources.count("overlap_start"), 1u) << m.name;
    if (m.max_gpus >= 128) {
      has_ge_128 = true;
      // Only GPT / LLaMA variants reach 128 GPUs (the paper's large jobs).
      EXPECT_TRUE(m.name.rfind("gpt", 0) == 0 || m.name.rfind("llama", 0) == 0) << m.name;
    }
  }
  EXPECT_TRUE(has_ge_128);
  for (const char* name : {"resnet50", "bert_large", "gpt3_13b", "transformer_big", "dlrm"}) {
    EXPECT_NE(c->Find(name), nullptr) << name;
  }
  // Every size 1..512 has at least one model (the generator needs it).
  for (int g = 1; g <= 512; g *= 2) {
    bool any = false;
    for (const ModelProfile& m : c->models()) {
      any = any || (!m.hybrid && m.min_gpus <= g && g <= m.max_gpus);
    }
    EXPECT_TRUE(any) << g;
  }
}

TEST(ModelsTest, ParsesFieldsAndMapsParallelismToPatterns) {
  core::Result<ModelCatalog> c = ParseModels(kGood);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->models().size(), 2u);
  const ModelProfile& m1 = c->models()[0];
  EXPECT_EQ(m1.compute_time, core::Duration::Millis(500));
  EXPECT_EQ(m1.pattern(), core::TrafficPattern::kRingAllReduce);
  EXPECT_EQ(m1.pattern_bytes(), core::Bytes::Of(1000000000));
  EXPECT_EQ(m1.min_gpus, 2);
  EXPECT_EQ(m1.max_gpus, 64);
  EXPECT_EQ(m1.sources.at("gradient_bytes"), "b");
  const ModelProfile& m2 = c->models()[1];
  EXPECT_EQ(m2.pattern(), core::TrafficPattern::kPipeline);
  EXPECT_EQ(m2.pattern_bytes(), core::Bytes::Of(200000000));
  EXPECT_EQ(c->Find("m3"), nullptr);
  EXPECT_EQ(c->Names(), "m1, m2");
}

TEST(ModelsTest, MakeJobSpecValidatesOnATopology) {
  core::Result<core::Topology> topo =
      spec::LoadTopologyFile((kConfigs / "topologies" / "example_clos2.yaml").string());
  ASSERT_TRUE(topo.ok());
  core::Result<ModelCatalog> c = ParseModels(kGood);
  ASSERT_TRUE(c.ok());
  const core::JobSpec j = MakeJobSpec(c->models()[0], "a", {topo->hosts()[0], topo->hosts()[5]}, 8);
  EXPECT_TRUE(core::ValidateJob(*topo, j).ok());
  EXPECT_EQ(j.gpus(), 16);
  EXPECT_DOUBLE_EQ(j.overlap_start, 0.4);
  core::Result<std::vector<core::FlowDemand>> flows = core::ExpandTraffic(*topo, j);
  ASSERT_TRUE(flows.ok());
  EXPECT_FALSE(flows->empty());
}

using testing::BadCase;

TEST(ModelsTest, RejectsEveryKindOfBadInput) {
  const BadCase cases[] = {
      {"    gpu: A100\n    compute_time_s: 0.5",
       "    gpu: A100\n    colour: red\n    compute_time_s: 0.5", "models[0].colour: unknown key"},
      {"  - name: m1\n    gpu: A100\n", "  - name: m1\n", "models[0].gpu: missing required key"},
      {"compute_time_s: 0.5", "compute_time_s: '0.5'",
       "models[0].compute_time_s: must be a number"},
      {"compute_time_s: 0.5", "compute_time_s: .nan",
       "models[0].compute_time_s: must be a finite number (got .nan)"},
      {"compute_time_s: 0.5", "compute_time_s: -1", "models[0].compute_time_s: must be > "},
      {"compute_time_s: 0.5", "compute_time_s: [1]", "models[0].compute_time_s: must be a number"},
      {"parallelism: data", "parallelism: tensor", "models[0].parallelism: must be data, pipeline"},
      {"gradient_bytes: 1e9", "gradient_bytes: 0", "models[0].gradient_bytes: must be >= 1 byte"},
      {"overlap_start: 0.4", "overlap_start: 1.5", "models[0].overlap_start: must be in [0, 1]"},
      {"min_gpus: 2", "min_gpus: 3", "models[0].min_gpus: must be a power of two"},
      {"min_gpus: 2", "min_gpus: 128", "models[0].max_gpus: must be >= min_gpus (128)"},
      {"min_gpus: 2", "min_gpus: 2.5", "models[0].min_gpus: must be an integer"},
      {"sources: {compute_time_s: a, gradient_bytes: b, overlap_start: c}",
       "sources: {compute_time_s: a, overlap_start: c}",
       "models[0].sources.gradient_bytes: missing required key"},
      {"sources: {compute_time_s: a, gradient_bytes: b, overlap_start: c}",
       "sources: {compute_time_s: a, gradient_bytes: '', overlap_start: c}",
       "models[0].sources.gradient_bytes: must be a non-empty string"},
      {"    sources: {compute_time_s: a, activation_bytes: b, overlap_start: c}\n", "\n",
       "models[1].sources: missing required key"},
      {"name: m2", "name: m1", "models[1].name: duplicate model name 'm1'"},
      {"name: m2", "name: 'M 2'", "models[1].name: must use only"},
      {"models:", "modelz:", "modelz: unknown key"},
      {"gpu: A100\n    compute_time_s: 1", "gpu: [A100]\n    compute_time_s: 1",
       "models[1].gpu: must be a non-empty string"},
      {"  - name: m1", "  - name: m1\n    name: m9", "duplicate"},
      {"models:", "models: [\n", "invalid YAML"},
  };
  testing::ExpectEveryCaseRefused(kGood, cases, ParseModels);
  EXPECT_THAT(ParseModels("models: []").status().message(), HasSubstr("must be a non-empty list"));
  EXPECT_THAT(ParseModels("").status().message(), HasSubstr("must be a map"));
  // Positions are reported.
  std::string yaml = kGood;
  yaml.replace(yaml.find("overlap_start: 0.4"), 18, "overlap_start: 2");
  EXPECT_THAT(ParseModels(yaml).status().message(),
              HasSubstr("models[0].overlap_start: must be in [0, 1] (got 2) (line 7, column 20)"));
  EXPECT_THAT(LoadModelsFile("/nonexistent/models.yaml").status().message(),
              HasSubstr("/nonexistent/models.yaml: cannot open"));
}

}  // namespace
}  // namespace crux::sim::workload
