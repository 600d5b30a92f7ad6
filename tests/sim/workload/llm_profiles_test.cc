// The 2024-2026 hybrid profiles of configs/models.yaml (issue #16): they load, reproduce their
// measured or derived iteration at the reference, move the bytes the fact sheet derives, become
// valid JobSpecs, and bad hybrid entries are refused with the key named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "crux/core/model/iteration_summary.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/topology/builders.h"
#include "crux/sim/workload/models.h"
#include "yaml_cases.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

const ModelCatalog& Shipped() {
  static const ModelCatalog* catalog = [] {
    core::Result<ModelCatalog> c = LoadModelsFile((kConfigs / "models.yaml").string());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return new ModelCatalog(c.ok() ? *c : ModelCatalog());
  }();
  return *catalog;
}

// The phase model of a profile at its reference scale and network.
core::IterationSummary AtReference(const ModelProfile& m) {
  core::Result<core::IterationModel> it = core::BuildIteration(m.hybrid->recipe);
  EXPECT_TRUE(it.ok()) << m.name << ": " << it.status().ToString();
  core::Result<core::IterationSummary> s =
      core::SummarizeIteration(*it, m.hybrid->reference_network);
  EXPECT_TRUE(s.ok()) << m.name << ": " << s.status().ToString();
  return s.ok() ? *s : core::IterationSummary{};
}

TEST(LlmProfilesTest, AtLeastTenSourcedHybridProfilesOnTheNamedGpus) {
  int hybrid = 0;
  std::map<std::string, int> gpus;
  for (const ModelProfile& m : Shipped().models()) {
    if (!m.hybrid) continue;
    ++hybrid;
    ++gpus[m.gpu];
    EXPECT_EQ(m.pattern(), core::TrafficPattern::kExplicit) << m.name;
    for (const char* key : {"iteration_time_s", "model_tflops_per_gpu", "layout", "reference"}) {
      EXPECT_EQ(m.sources.count(key), 1u) << m.name << " " << key;
    }
    EXPECT_TRUE(m.AcceptsGpus(m.min_gpus)) << m.name;
  }
  EXPECT_GE(hybrid, 10);
  EXPECT_GE(gpus["A100-SXM4-80GB"], 2);
  EXPECT_GE(gpus["H100-SXM"], 4);
  EXPECT_GE(gpus["H800"], 1);
  EXPECT_GE(gpus["B200"], 2);
}

TEST(LlmProfilesTest, EveryProfileReproducesItsIterationAtTheReference) {
  for (const ModelProfile& m : Shipped().models()) {
    if (!m.hybrid) continue;
    const core::IterationSummary s = AtReference(m);
    EXPECT_NEAR(s.iteration.ToSeconds(), m.hybrid->iteration_time.ToSeconds(),
                1e-6 * m.hybrid->iteration_time.ToSeconds())
        << m.name;
    // The calibrated busy compute is positive and below the iteration.
    EXPECT_GT(m.hybrid->recipe.compute, core::Duration::Zero()) << m.name;
    EXPECT_LT(s.busy, s.iteration) << m.name;
    // W_j = achieved model FLOP/s per GPU x iteration x GPUs.
    EXPECT_NEAR(s.work.value(),
                m.hybrid->model_tflops_per_gpu * 1e12 * m.hybrid->iteration_time.ToSeconds() *
                    m.hybrid->reference_gpus,
                1e-9 * s.work.value())
        << m.name;
  }
}

TEST(LlmProfilesTest, BytesPerNicMatchTheFactSheetDerivations) {
  // Busiest NIC per iteration at the reference, in GB, by hand from workloads-2025.md §4 (the
  // middle pipeline stage carries DP + PP + EP/CP). Hierarchical rings: a DP group with k
  // members on each of H hosts sends c (H - 1) / H S b / k per NIC.
  const double pp_r1 = 192 * 6291456.0;  // 2 m v x b s h / t x 2 B.
  const std::map<std::string, double> expected = {
      // R1: DP all-reduce 2 (15/16) 1.823e9 x 2 B + PP.
      {"gpt3_175b_ptdp_a100", 2.0 * 15 / 16 * 1.823e9 * 2 + pp_r1},
      // R3: ZeRO-2 2 (191/192) 2.734e9 x 2 B + PP 2 x 32 x 6 transfers.
      {"megascale_175b_a100", 2.0 * 191 / 192 * 2.734e9 * 2 + 2 * 32 * 6 * 6291456.0},
      // R4: 2 (3/4) 2.734e9 x 2 B = 8.2 GB + 2 x 192 x 6 x 6.29 MB = 14.5 GB.
      {"megascale_175b_small_a100", 2.0 * 3 / 4 * 2.734e9 * 2 + 2 * 192 * 6 * 6291456.0},
      // R5: AG bf16 + RS fp32 of 3.164e9 over 128 hosts + PP 2 x 16 x 33.6 MB.
      {"llama3_405b_h100", 127.0 / 128 * 3.164e9 * 6 + 2 * 16 * 33554432.0},
      // R6: as R5 over the 128 CP x DP ranks + PP + CP 15/16 x 33.5e6 x 2 B x 7.875 x 16 x 2.
      {"llama3_405b_cp_h100",
       127.0 / 128 * 3.164e9 * 6 + 2 * 16 * 33554432.0 + 15.0 / 16 * 33554432 * 2 * 126 * 2},
      // R7: DP+CP 16-way 2 (15/16) 6.328e9 x 2 B + PP 2 x 64 x 8 x 16.8 MB + CP (1/2) 4.2 MB x
      // 15.75 x 64 x 2.
      {"llama31_405b_mbridge_h100",
       2.0 * 15 / 16 * 6.328e9 * 2 + 2 * 64 * 8 * 16777216.0 + 0.5 * 2097152 * 2 * 15.75 * 64 * 2},
      // R8: PP only (the 2-way DP pair shares a host): 2 x 64 x 5 x 33.6 MB = 21.5 GB.
      {"llama3_70b_h100", 2 * 64 * 5 * 33554432.0},
      // R9: ZeRO-3 3 x (3/4) x 8.03e9 x 2 B per host over 8 rails.
      {"llama3_8b_fsdp_h100", 3 * 0.75 * 8.03e9 * 2 / 8},
      // R10: EP 120 x 4096 tokens x 3.625 layers x 4 nodes x 7168 x (1 + 2 + 2 + 2) B x 7/8
      // + PP 2 x 120 x 58.7 MB + dense DP over 128 consecutive ranks (16 hosts, 8 members
      // each): 2 (15/16) 1.068e9 x 2 / 8 + expert DP (2 ranks 8 hosts apart) 2 (1/2) 6.386e8 x 2.
      {"deepseek_v3_h800", 120 * 4096 * 3.625 * 4 * 7168 * 7.0 * 7 / 8 + 2 * 120 * 58720256.0 +
                               2.0 * 15 / 16 * 1.068e9 * 2 / 8 + 2 * 0.5 * 6.386e8 * 2},
      // R11: EP and dense DP inside the host (dense DP: 8 members per host, 1/8 each); PP
      // 2 x 128 x 58.7 MB + dense 2 (1/2) 1.068e9 x 2 / 8 + expert DP 2 (1/2) 5.109e9 x 2.
      {"deepseek_v3_b200",
       2 * 128 * 58720256.0 + 2 * 0.5 * 1.068e9 * 2 / 8 + 2 * 0.5 * 5.109e9 * 2},
      // R13: only PP leaves the host: 2 x 128 x 2 x 33.5 MB = 17.2 GB.
      {"qwen3_235b_b200", 2 * 128 * 2 * 33554432.0},
  };
  int checked = 0;
  for (const auto& [name, bytes] : expected) {
    const ModelProfile* m = Shipped().Find(name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_NEAR(AtReference(*m).nic_bytes.ToDouble(), bytes, 2e-3 * bytes) << name;
    ++checked;
  }
  EXPECT_EQ(checked, 11);
}

TEST(LlmProfilesTest, CrossHostExpertParallelismIsTheProfileThatLoadsNics) {
  // Fact sheet §6: dense LLMs load NICs at ~1-9% on average, cross-host EP at ~27-36%.
  for (const ModelProfile& m : Shipped().models()) {
    if (!m.hybrid) continue;
    const core::IterationSummary s = AtReference(m);
    const double share =
        s.nic_bytes.ToDouble() * 8 /
        (m.hybrid->reference_network.nic_bandwidth.ToBitsPerSec() * s.iteration.ToSeconds());
    if (m.name == "deepseek_v3_h800") {
      EXPECT_GT(share, 0.27) << m.name;
      EXPECT_LT(share, 0.36) << m.name;
    } else {
      EXPECT_LT(share, 0.09) << m.name;
    }
  }
}

TEST(LlmProfilesTest, HybridJobsBecomeSingleOverlapJobSpecsOnATopology) {
  // Llama 3 70B on 64 GPUs: 8 hosts of 8 NICs at 400 Gbps on a rail-less Clos.
  core::Clos2Params p;
  p.host.nics_per_host = 8;
  p.host.nic_gbps = 400;
  p.tors = 4;
  p.aggs = 2;
  p.hosts_per_tor = 2;
  core::Result<core::Topology> topo = core::BuildClos2(p);
  ASSERT_TRUE(topo.ok());
  const ModelProfile* m = Shipped().Find("llama3_70b_h100");
  ASSERT_NE(m, nullptr);
  core::Result<core::JobSpec> j = MakeJobSpecOn(*topo, *m, "l70", topo->hosts(), 8);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_TRUE(core::ValidateJob(*topo, *j).ok());
  EXPECT_EQ(j->pattern, core::TrafficPattern::kExplicit);
  EXPECT_EQ(j->gpus(), 64);
  EXPECT_NEAR(j->flops_per_iteration->value(), 678.6e12 * 10.2 * 64, 1e6);
  // Stage s lives on host s: pipeline flows only, both ways between neighbours on the ring of 8
  // stages (interleaved, v = 5: the last stage also feeds the first), 8 rails: 2 x 8 x 8.
  EXPECT_EQ(j->flows.size(), 2u * 8 * 8);
  // Same network as the reference: the standalone iteration is the measured one.
  EXPECT_NEAR(std::max(j->compute_time.ToSeconds(),
                       j->overlap_start * j->compute_time.ToSeconds() + 21.47e9 * 8 / 400e9),
              10.2, 0.01);
  // Errors: a size it does not run on, partial hosts.
  EXPECT_THAT(
      MakeJobSpecOn(*topo, *m, "x", {topo->hosts()[0], topo->hosts()[1]}, 8).status().message(),
      HasSubstr("does not run on 16 GPUs"));
  EXPECT_THAT(MakeJobSpecOn(*topo, *m, "x", topo->hosts(), 4).status().message(),
              HasSubstr("whole hosts of 8 GPUs"));
  EXPECT_FALSE(HybridIteration(*Shipped().Find("resnet50"), 8).ok());
}

constexpr const char* kHybrid = R"(models:
  - name: h1
    gpu: H100
    parallelism: hybrid
    iteration_time_s: 10
    model_tflops_per_gpu: 500
    min_gpus: 16
    max_gpus: 64
    layout: {tp: 8, pp: 2}
    reference: {gpus: 32, nic_gbps: 400}
    micro_batches: 8
    sharding: zero1
    dense_params_per_rank: 1e9
    grad_dtype: fp32
    pp_elements_per_transfer: 1e7
    sources: {iteration_time_s: a, model_tflops_per_gpu: b, layout: c, reference: d, micro_batches: e, sharding: f, dense_params_per_rank: g, grad_dtype: h, pp_elements_per_transfer: i}
)";

TEST(LlmProfilesTest, ParsesAHandWrittenHybridProfile) {
  core::Result<ModelCatalog> c = ParseModels(kHybrid);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ModelProfile& m = c->models()[0];
  ASSERT_TRUE(m.hybrid);
  EXPECT_EQ(m.parallelism, Parallelism::kHybrid);
  EXPECT_EQ(m.hybrid->recipe.layout.dp, 2);  // 32 / (8 x 2).
  EXPECT_EQ(m.hybrid->recipe.grad_dtype, core::WireDtype::kFp32);
  EXPECT_EQ(m.hybrid->reference_network.nics_per_host, 8);  // Defaults to gpus_per_host.
  EXPECT_EQ(m.compute_time, core::Duration::Seconds(10));
  EXPECT_TRUE(m.AcceptsGpus(48));    // dp 3.
  EXPECT_FALSE(m.AcceptsGpus(40));   // Not a multiple of 16.
  EXPECT_FALSE(m.AcceptsGpus(128));  // Above max_gpus.
  core::Result<core::IterationModel> it = HybridIteration(m, 64);
  ASSERT_TRUE(it.ok());
  EXPECT_EQ(it->layout.dp, 4);
}

TEST(LlmProfilesTest, RejectsBadHybridProfilesNamingTheKey) {
  const testing::BadCase cases[] = {
      {"    micro_batches: 8", "    micro_batches: 8\n    compute_time_s: 1",
       "models[0].compute_time_s: not a key of a hybrid profile"},
      {"    micro_batches: 8", "    micro_batches: 8\n    overlap_start: 0.5",
       "models[0].overlap_start: not a key of a hybrid profile"},
      {"micro_batches: e, ", "", "models[0].sources.micro_batches: missing required key"},
      {"reference: {gpus: 32,", "reference: {gpus: 36,",
       "models[0].reference.gpus: must be a multiple of tp x cp x pp (16)"},
      {"min_gpus: 16", "min_gpus: 8", "models[0].min_gpus: must be a multiple of tp x cp x pp"},
      {"grad_dtype: fp32", "grad_dtype: int4", "models[0].grad_dtype: unknown wire dtype 'int4'"},
      {"layout: {tp: 8, pp: 2}", "layout: {tp: 8, pp: 2, dp: 4}",
       "models[0].layout.dp: the DP degree follows from the job size"},
      {"layout: {tp: 8, pp: 2}", "layout: {tp: 8, pp: 2, order: pp-dp}",
       "models[0].layout.order: must be tp-cp-dp-pp or tp-cp-pp-dp"},
      {"layout: {tp: 8, pp: 2}", "layout: {tp: 8}", "models[0].layout.pp: missing required key"},
      {"sharding: zero1", "sharding: zero2", "unknown DP sharding 'zero2'"},
      {"    layout:", "    colour: red\n    layout:", "models[0].colour: unknown key"},
      // 1e12 parameters of fp32 gradients cannot move in 10 s at 400 Gbps.
      {"dense_params_per_rank: 1e9", "dense_params_per_rank: 1e12",
       "models[0].iteration_time_s: the profile cannot reproduce it at the reference: the "
       "communication alone takes"},
      {"    parallelism: hybrid", "    parallelism: data",
       "models[0].iteration_time_s: only hybrid profiles take this key"},
  };
  testing::ExpectEveryCaseRefused(kHybrid, cases, ParseModels);
}

}  // namespace
}  // namespace crux::sim::workload
