// The multi-phase iteration model: byte maths against hand-computed values (the fact sheet's
// rows R1 and R5, docs/sim-workloads.md), phase timing against hand-computed schedules, and the
// single-overlap summary.
#include "crux/core/model/traffic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "crux/core/model/iteration_summary.h"
#include "crux/core/model/iteration_timing.h"
#include "crux/core/topology/builders.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using testing::Must;

double Sec(Duration d) { return d.ToSeconds(); }

const CommOp* FindOp(const IterationModel& m, const std::string& name) {
  for (const CommOp& op : m.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// Bytes an op sends per iteration from (host, gpu), all instances.
double EgressBytes(const CommOp& op, int host, int gpu) {
  double b = 0;
  for (const RailFlow& f : op.flows) {
    if (f.src_host == host && f.src_gpu == gpu) b += f.bytes.ToDouble();
  }
  return b * op.instances;
}

// 1 byte per nanosecond per NIC: 1 GB of bytes = 1 s.
HostNetwork Gigabyte(int nics = 8) { return HostNetwork{nics, Bandwidth::Gbps(8)}; }

// ---- Byte maths ----

TEST(TrafficModelBytesTest, RingHostBytesFollowTheHierarchicalRingFormula) {
  // c (H - 1) / H * S * b.
  EXPECT_EQ(RingHostBytes(Collective::kAllReduce, 1e9, 4, WireDtype::kBf16).count(), 3'000'000'000);
  EXPECT_EQ(RingHostBytes(Collective::kReduceScatter, 1e9, 16, WireDtype::kFp32).count(),
            3'750'000'000);
  EXPECT_EQ(RingHostBytes(Collective::kAllGather, 1e9, 2, WireDtype::kFp8).count(), 500'000'000);
  EXPECT_EQ(RingHostBytes(Collective::kAllReduce, 1e9, 1, WireDtype::kBf16).count(), 0);
  EXPECT_DOUBLE_EQ(RemoteShare(8, 1), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(RemoteShare(64, 8), 56.0 / 64.0);
  EXPECT_EQ(BytesPerElement(WireDtype::kFp8), 1);
  EXPECT_EQ(BytesPerElement(WireDtype::kFp32), 4);
  EXPECT_EQ(Must(ParseWireDtype("bf16")), WireDtype::kBf16);
  EXPECT_FALSE(ParseWireDtype("int4").ok());
}

TrainingRecipe Gpt3PtdP(int dp) {
  // Fact sheet R1: GPT-3 175B, Megatron PTD-P, TP8 PP12, m = 96 micro-batches of one 2,048-token
  // sequence, hidden 12,288, plain DP all-reduce of bf16 gradients.
  TrainingRecipe r;
  r.layout.tp = 8;
  r.layout.pp = 12;
  r.layout.dp = dp;
  r.micro_batches = 96;
  r.compute = Duration::Seconds(18);
  r.sharding = DpSharding::kNone;
  r.dense_params_per_rank = 175e9 / 96;
  r.pp_elements_per_transfer = 2048.0 * 12288.0;
  return r;
}

TEST(TrafficModelBytesTest, Gpt3PtdPMatchesTheFactSheetBytesPerNic) {
  const IterationModel m = Must(BuildIteration(Gpt3PtdP(16)));
  ASSERT_EQ(m.layout.hosts(), 192);
  const CommOp* ar = FindOp(m, "dp.ar.bucket1");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->collective, Collective::kAllReduce);
  // DP group of GPU 0: 16 members, one per host (TP fills the host): 2 (15/16) S b.
  EXPECT_NEAR(EgressBytes(*ar, 0, 0), 2.0 * 15 / 16 * 175e9 / 96 * 2, 1);
  EXPECT_NEAR(EgressBytes(*ar, 0, 0), 6.836e9, 1e6);  // "6.8 GB/NIC".
  // PP: b s h / t = 6.29 MB per transfer; a middle stage sends m = 96 each way (one of them in
  // the fill or drain chain): 192 x 6,291,456 B = 1.208 GB/NIC ("1.2 GB/NIC").
  const int middle_host = 16 * 5;  // Stage 5 of pipeline 0 (DP inner, PP outer).
  double pp = 0;
  for (const CommOp& op : m.ops) {
    if (op.axis == ParallelAxis::kPp) pp += EgressBytes(op, middle_host, 3);
  }
  EXPECT_NEAR(pp, 192.0 * 6291456, 1);
  const IterationSummary s = Must(SummarizeIteration(m, Gigabyte()));
  EXPECT_NEAR(s.nic_bytes.ToDouble(), 6.8359375e9 + 192.0 * 6291456, 200);
}

TEST(TrafficModelBytesTest, Llama3FsdpReduceScattersInFp32) {
  // Fact sheet R5: TP8 PP16, FSDP without reshard: all-gather bf16 + reduce-scatter fp32 of
  // 405e9 / 128 parameters per rank; at DP 128, 6.3 + 12.6 = 18.8 GB per NIC. Here DP 4 (the
  // formula is the same with 3/4 for 127/128).
  TrainingRecipe r;
  r.layout = {.tp = 8, .cp = 1, .pp = 16, .dp = 4, .order = RankOrder::kTpCpPpDp};
  r.micro_batches = 16;
  r.compute = Duration::Seconds(5);
  r.sharding = DpSharding::kZero1;
  r.dense_params_per_rank = 405e9 / 128;
  r.grad_dtype = WireDtype::kFp32;
  const IterationModel m = Must(BuildIteration(r));
  const CommOp* ag = FindOp(m, "dp.ag.bucket1");
  const CommOp* rs = FindOp(m, "dp.rs.bucket1");
  ASSERT_NE(ag, nullptr);
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(ag->dtype, WireDtype::kBf16);
  EXPECT_EQ(rs->dtype, WireDtype::kFp32);
  // Llama order (DP outermost): GPU 0's DP ring is hosts 0, 16, 32, 48.
  EXPECT_NEAR(EgressBytes(*ag, 0, 0), 0.75 * 405e9 / 128 * 2, 1);
  EXPECT_NEAR(EgressBytes(*rs, 0, 0), 0.75 * 405e9 / 128 * 4, 1);
  for (const RailFlow& f : ag->flows) {
    if (f.src_host == 0 && f.src_gpu == 0) {
      EXPECT_EQ(f.dst_host, 16);
      EXPECT_EQ(f.dst_gpu, 0);  // Rail-aligned.
    }
  }
  // At DP 128 the same code gives the fact sheet's 18.8 GB (checked on the formula, the
  // 16,384-GPU build is not needed): 127/128 x S x (2 + 4).
  EXPECT_NEAR(
      RingHostBytes(Collective::kAllGather, 405e9 / 128, 128, WireDtype::kBf16).ToDouble() +
          RingHostBytes(Collective::kReduceScatter, 405e9 / 128, 128, WireDtype::kFp32).ToDouble(),
      18.836e9, 1e6);
}

TEST(TrafficModelBytesTest, Zero3MovesOneAndAHalfAllReduces) {
  TrainingRecipe r;
  r.layout = {.tp = 1, .dp = 16, .gpus_per_host = 8};  // 2 hosts, 8 rings of S / 8.
  r.compute = Duration::Seconds(1);
  r.sharding = DpSharding::kZero3;
  r.dense_params_per_rank = 8e9;
  const IterationModel m = Must(BuildIteration(r));
  double total = 0;
  for (const CommOp& op : m.ops) total += EgressBytes(op, 0, 2);
  // Per host 3 x (1/2) x 8e9 x 2 B = 24 GB over 8 rails: 3 GB on GPU 2's rail.
  EXPECT_NEAR(total, 3e9, 1);
  EXPECT_NE(FindOp(m, "dp.ag_bwd.bucket1"), nullptr);
  // The same buffer without sharding: one all-reduce, 2 x (1/2) x 8e9 x 2 / 8 = 2 GB.
  r.sharding = DpSharding::kNone;
  const IterationModel plain = Must(BuildIteration(r));
  total = 0;
  for (const CommOp& op : plain.ops) total += EgressBytes(op, 0, 2);
  EXPECT_NEAR(total, 2e9, 1);
}

TEST(TrafficModelBytesTest, ExpertAllToAllSendsTheRemoteShareRailAligned) {
  // 4 GPUs per host, EP 8 over two hosts: each GPU routes 1,000 tokens x 4 destinations of a
  // 1,000-element hidden vector per MoE layer per micro-batch; 4 of the 8 members are remote,
  // so half the copies leave the host: 1000 x 4 x 1000 x b / 2 per all-to-all.
  TrainingRecipe r;
  r.layout = {.tp = 1, .dp = 8, .ep = 8, .gpus_per_host = 4};
  r.micro_batches = 2;
  r.compute = Duration::Seconds(1);
  r.moe_layers_per_rank = 3;
  r.ep_tokens_per_microbatch = 1000;
  r.ep_fanout = 4;
  r.ep_hidden = 1000;
  r.ep_dispatch_dtype = WireDtype::kFp8;
  const IterationModel m = Must(BuildIteration(r));
  const CommOp* dispatch = FindOp(m, "ep.dispatch.fwd");
  const CommOp* combine = FindOp(m, "ep.combine.fwd");
  ASSERT_NE(dispatch, nullptr);
  ASSERT_NE(combine, nullptr);
  EXPECT_EQ(dispatch->instances, 6);  // 3 layers x 2 micro-batches.
  EXPECT_EQ(dispatch->pacing, Pacing::kPaced);
  ASSERT_EQ(dispatch->flows.size(), 8u);  // Every GPU to the other host.
  for (const RailFlow& f : dispatch->flows) {
    EXPECT_NE(f.src_host, f.dst_host);
    EXPECT_EQ(f.src_gpu, f.dst_gpu);
    EXPECT_EQ(f.bytes.count(), 2'000'000);  // fp8.
  }
  EXPECT_EQ(combine->flows[0].bytes.count(), 4'000'000);  // bf16.
  EXPECT_NE(FindOp(m, "ep.dispatch.bwd"), nullptr);
  // No DP bytes were given: only the four all-to-alls.
  EXPECT_EQ(m.ops.size(), 4u);
}

TEST(TrafficModelBytesTest, TensorParallelOnlyOnTheNetworkWhenItCrossesHosts) {
  TrainingRecipe r;
  r.layout = {.tp = 8, .dp = 2};
  r.micro_batches = 4;
  r.compute = Duration::Seconds(1);
  r.layers_per_rank = 2;
  r.tp_elements_per_layer = 1e6;
  EXPECT_TRUE(Must(BuildIteration(r)).ops.empty());
  r.layout = {.tp = 16, .dp = 1};  // Two hosts of 8.
  const IterationModel m = Must(BuildIteration(r));
  const CommOp* fwd = FindOp(m, "tp.ar.fwd");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->instances, 2 * 2 * 4);  // Two all-reduces per layer per micro-batch.
  // 8 local members per host: 8 rings of S / 8, each edge 2 (1/2) S b / 8 = 250 KB.
  EXPECT_EQ(fwd->flows.size(), 16u);
  EXPECT_EQ(fwd->flows[0].bytes.count(), 250'000);
  // Exposed by design: from the iteration start, before the first forward chunk.
  EXPECT_EQ(fwd->issue_after, -1);
  EXPECT_EQ(fwd->needed_before, 0);
}

TEST(TrafficModelBytesTest, ContextParallelAllGathersKvOverTheCpHosts) {
  // Llama 3 405B at 128K (fact sheet §1.4): S = 131,072 x 2 x (8 / 8) x 128 per layer per
  // sequence; with c = 16 hosts a GPU sends 15/16 of it: 62.9 MB (bf16).
  TrainingRecipe r;
  r.layout = {.tp = 8, .cp = 16, .dp = 1};
  r.micro_batches = 1;
  r.compute = Duration::Seconds(1);
  r.layers_per_rank = 1;
  r.cp_buffer_elements = 131072.0 * 2 * 1 * 128;
  const IterationModel m = Must(BuildIteration(r));
  const CommOp* ag = FindOp(m, "cp.ag.fwd");
  ASSERT_NE(ag, nullptr);
  EXPECT_NEAR(EgressBytes(*ag, 0, 0), 62.9e6, 0.1e6);
  EXPECT_NE(FindOp(m, "cp.rs.bwd"), nullptr);
}

TEST(TrafficModelBytesTest, PipelineFillAndDrainAreChainsOfOneTransferPerBoundary) {
  TrainingRecipe r;
  r.layout = {.tp = 8, .pp = 3, .dp = 1};
  r.micro_batches = 4;
  r.compute = Duration::Seconds(3);
  r.pp_elements_per_transfer = 8e6;  // 1e6 per GPU, 2 MB bf16.
  const IterationModel m = Must(BuildIteration(r));
  const CommOp* fill1 = FindOp(m, "pp.fill1");
  const CommOp* fill2 = FindOp(m, "pp.fill2");
  const CommOp* fwd = FindOp(m, "pp.fwd");
  const CommOp* drain1 = FindOp(m, "pp.drain1");
  ASSERT_TRUE(fill1 && fill2 && fwd && drain1);
  EXPECT_EQ(fill2->after_op, static_cast<int>(fill1 - m.ops.data()));
  EXPECT_EQ(fill1->flows.size(), 8u);  // Boundary 0 -> 1, one flow per rail.
  EXPECT_EQ(fill1->flows[0].src_host, 0);
  EXPECT_EQ(fill1->flows[0].dst_host, 1);
  EXPECT_EQ(fill2->flows[0].src_host, 1);
  EXPECT_EQ(fwd->instances, 3);  // m v - 1.
  EXPECT_EQ(fwd->flows.size(), 16u);
  EXPECT_EQ(fwd->flows[0].bytes.count(), 2'000'000);
  EXPECT_EQ(drain1->flows[0].src_host, 2);  // Gradients flow back from the last stage.
  // Bubble: C (p - 1) / (v m) = 3 x 2 / 4 = 1.5 s between the forward and the backward of
  // stage 0; the fill chain precedes it, the drain chain follows it.
  ASSERT_EQ(m.segments.size(), 3u);
  EXPECT_EQ(m.segments[1].name, "bubble");
  EXPECT_EQ(m.segments[1].duration, Duration::Millis(1500));
  EXPECT_FALSE(m.segments[1].busy);
  EXPECT_EQ(fill1->issue_after, 0);
  EXPECT_EQ(fill1->needed_before, 1);
  EXPECT_EQ(drain1->issue_after, 1);
  EXPECT_EQ(drain1->needed_before, 2);
  // Timing at 1 GB/s per NIC (2 MB per hop = 2 ms): fwd 1 s, two fill hops 4 ms, bubble 1.5 s,
  // two drain hops 4 ms, bwd 2 s. The paced steady-state transfers hide under the compute.
  const IterationTiming t = Must(TimeIteration(m, Gigabyte()));
  EXPECT_NEAR(Sec(t.iteration), 1 + 0.004 + 1.5 + 0.004 + 2, 1e-9);
  EXPECT_NEAR(Sec(t.exposed), 0.008, 1e-9);
}

TEST(TrafficModelBytesTest, InvalidRecipesNameTheField) {
  TrainingRecipe r;
  r.layout.dp = 6;
  r.layout.ep = 4;
  Status s = BuildIteration(r).status();
  EXPECT_NE(s.message().find("layout.ep: must divide dp"), std::string::npos) << s.ToString();
  r = TrainingRecipe{};
  r.layout = {.tp = 3, .dp = 3};  // 9 GPUs on 8-GPU hosts.
  EXPECT_NE(BuildIteration(r).status().message().find("whole hosts"), std::string::npos);
  r = TrainingRecipe{};
  r.forward_share = 1.5;
  EXPECT_NE(BuildIteration(r).status().message().find("forward_share"), std::string::npos);
  r = TrainingRecipe{};
  r.ep_fanout = std::nan("");
  EXPECT_NE(BuildIteration(r).status().message().find("ep_fanout"), std::string::npos);
}

// ---- Phase timing on hand-built iterations (1 GB of bytes = 1 s on a NIC) ----

// Two hosts, one GPU each: an op of `gb` GB per instance from host 0 to host 1.
CommOp Op(const std::string& name, double gb, int issue_after, int needed_before, int instances = 1,
          Pacing pacing = Pacing::kBurst) {
  CommOp op;
  op.name = name;
  op.instances = instances;
  op.pacing = pacing;
  op.issue_after = issue_after;
  op.needed_before = needed_before;
  op.flows = {RailFlow{0, 0, 1, 0, Bytes::FromDouble(gb * 1e9)}};
  return op;
}

IterationModel TwoHostModel(std::vector<double> segments) {
  IterationModel m;
  m.layout = {.tp = 1, .dp = 2, .gpus_per_host = 1};
  int i = 0;
  for (double s : segments) {
    m.segments.push_back({"s" + std::to_string(i++), Duration::Seconds(s), true});
  }
  return m;
}

// Segments A = 2 s, B = 2 s. E: from the start, needed before A (1 s, exposed). H: after A,
// needed at the end (1 s, hidden under B). Iteration 1 + 2 + 2 = 5 s.
IterationModel ExposedAndHidden() {
  IterationModel m = TwoHostModel({2, 2});
  m.ops = {Op("E", 1, -1, 0), Op("H", 1, 0, 2)};
  return m;
}

TEST(TrafficModelTimingTest, AnExposedOpAddsAndAHiddenOpDoesNot) {
  const IterationModel m = ExposedAndHidden();
  const IterationTiming t = Must(TimeIteration(m, Gigabyte(1)));
  EXPECT_DOUBLE_EQ(Sec(t.iteration), 5.0);
  EXPECT_DOUBLE_EQ(Sec(t.exposed), 1.0);
  EXPECT_DOUBLE_EQ(Sec(t.segment_start[0]), 1.0);
  EXPECT_DOUBLE_EQ(Sec(t.ops[1].first_release), 3.0);
  EXPECT_DOUBLE_EQ(Sec(t.ops[1].end), 4.0);
  EXPECT_DOUBLE_EQ(Sec(t.network), 2.0);
  // Half the bandwidth: E takes 2 s, H 2 s (still under B): 2 + 2 + 2 = 6 s.
  EXPECT_DOUBLE_EQ(Sec(Must(TimeIteration(m, Gigabyte(1), 0.5)).iteration), 6.0);
}

TEST(TrafficModelTimingTest, PacedInstancesShareTheNicFairly) {
  // Window = one 4 s segment; four 1.5 s instances released at 0, 1, 2, 3 s. By hand
  // (processor sharing): #0 alone to 1 s (0.5 left), shares to 2 s (done); #1 has 1.0 left at
  // 2 s, #2 arrives; at 3 s #1 0.5, #2 1.0, #3 1.5 left; three-way to 4.5 s (#1 done), two-way
  // to 5.5 s (#2 done), #3 alone to 6 s. The next segment waits until 6 s.
  IterationModel m = TwoHostModel({4, 1});
  m.ops = {Op("P", 1.5, -1, 1, 4, Pacing::kPaced)};
  const IterationTiming t = Must(TimeIteration(m, Gigabyte(1)));
  EXPECT_NEAR(Sec(t.ops[0].end), 6.0, 1e-9);
  EXPECT_NEAR(Sec(t.segment_start[1]), 6.0, 1e-9);
  EXPECT_NEAR(Sec(t.iteration), 7.0, 1e-9);
  EXPECT_NEAR(Sec(t.exposed), 2.0, 1e-9);
  // With 0.5 s instances they finish at 0.5, 1.5, 2.5, 3.5 s: hidden.
  m.ops = {Op("P", 0.5, -1, 1, 4, Pacing::kPaced)};
  EXPECT_NEAR(Sec(Must(TimeIteration(m, Gigabyte(1))).iteration), 5.0, 1e-9);
}

TEST(TrafficModelTimingTest, ChainedOpsWaitForEachOther) {
  // Three 1 s hops, each after the previous, all needed before the only segment: 3 s + 1 s.
  IterationModel m = TwoHostModel({1});
  m.ops = {Op("h1", 1, -1, 0), Op("h2", 1, -1, 0), Op("h3", 1, -1, 0)};
  m.ops[1].after_op = 0;
  m.ops[2].after_op = 1;
  const IterationTiming t = Must(TimeIteration(m, Gigabyte(1)));
  EXPECT_DOUBLE_EQ(Sec(t.iteration), 4.0);
  EXPECT_DOUBLE_EQ(Sec(t.ops[2].first_release), 2.0);
  // Without the chain they share the NIC and also end at 3 s.
  m.ops[1].after_op = -1;
  m.ops[2].after_op = -1;
  EXPECT_DOUBLE_EQ(Sec(Must(TimeIteration(m, Gigabyte(1))).iteration), 4.0);
}

TEST(TrafficModelTimingTest, ThousandsOfPacedInstancesKeepTheNicBusy) {
  // 20,000 instances of 1 ms released every 0.2 ms over a 4 s segment: the backlog never
  // empties, so the NIC works from 0 to 20 s without a gap, and the next segment starts then.
  IterationModel m = TwoHostModel({4, 1});
  m.ops = {Op("P", 0.001, -1, 1, kMaxOpInstances, Pacing::kPaced)};
  const IterationTiming t = Must(TimeIteration(m, Gigabyte(1)));
  EXPECT_NEAR(Sec(t.ops[0].end), 20.0, 1e-6);
  EXPECT_NEAR(Sec(t.iteration), 21.0, 1e-6);
}

TEST(TrafficModelBytesTest, BoundsKeepEveryIterationCheapToBuildAndTime) {
  TrainingRecipe r;
  r.layout = {.tp = 8, .pp = 4, .dp = 2, .vp = 2};
  r.micro_batches = kMaxOpInstances / 2;
  EXPECT_TRUE(ValidateRecipe(r).ok());
  r.micro_batches += 1;
  EXPECT_NE(ValidateRecipe(r).message().find("micro_batches x vp: must be at most 20000"),
            std::string::npos);
  r = TrainingRecipe{};
  r.micro_batches = 100;
  r.layers_per_rank = 201;
  EXPECT_NE(ValidateRecipe(r).message().find("layers_per_rank x micro_batches"), std::string::npos);
  r = TrainingRecipe{};
  r.layout = {.tp = 8, .pp = 2048, .dp = 1};
  EXPECT_NE(ValidateRecipe(r).message().find("layout.pp: must be at most 1024"), std::string::npos);
  r = TrainingRecipe{};
  r.layout = {.tp = 8, .dp = 16384};
  EXPECT_NE(ValidateRecipe(r).message().find("at most 65536 GPUs"), std::string::npos);
  r = TrainingRecipe{};
  r.layout = {.tp = 8, .dp = 8192};
  r.dp_buckets = 64;
  EXPECT_NE(ValidateRecipe(r).message().find("dp_buckets x GPUs"), std::string::npos);
}

TEST(TrafficModelTimingTest, BadWindowsAndNetworksAreErrors) {
  IterationModel m = TwoHostModel({1, 1});
  m.ops = {Op("bad", 1, 1, 1)};
  EXPECT_NE(TimeIteration(m, Gigabyte(1)).status().message().find("bad window"), std::string::npos);
  m.ops = {Op("ok", 1, -1, 2)};
  EXPECT_FALSE(TimeIteration(m, HostNetwork{0, Bandwidth::Gbps(8)}).ok());
  EXPECT_FALSE(TimeIteration(m, Gigabyte(1), 0).ok());
  EXPECT_FALSE(TimeIteration(m, Gigabyte(1), std::nan("")).ok());
}

TEST(TrafficModelTimingTest, DpBucketsHideAllButTheLastReduceScatter) {
  // Plain DP, 2 buckets, 8 GPUs per host over 2 hosts (8 rings): each bucket all-reduces
  // 2 x (1/2) x 2e9 x 2 B / 8 = 0.5 GB per rail = 0.5 s. Segments: fwd1 fwd2 (1 s each),
  // (no bubble), bwd2 bwd1 (2 s each). Bucket 2 runs [4, 4.5] under bwd1; bucket 1 [6, 6.5]
  // is exposed.
  TrainingRecipe r;
  r.layout = {.tp = 1, .dp = 16};
  r.compute = Duration::Seconds(6);
  r.dp_buckets = 2;
  r.sharding = DpSharding::kNone;
  r.dense_params_per_rank = 4e9;
  const IterationModel m = Must(BuildIteration(r));
  const IterationTiming t = Must(TimeIteration(m, Gigabyte()));
  EXPECT_NEAR(Sec(t.iteration), 6.5, 1e-9);
  EXPECT_NEAR(Sec(t.exposed), 0.5, 1e-9);
  EXPECT_NEAR(Sec(t.network), 1.0, 1e-9);
}

// ---- Summary and the single-overlap equivalent ----

TEST(TrafficModelSummaryTest, ExposedCommunicationSetsTheOverlapStart) {
  // c = 4, t = 2, iteration 5 -> o = (5 - 2) / 4.
  const IterationModel m = ExposedAndHidden();
  const IterationSummary s = Must(SummarizeIteration(m, Gigabyte(1)));
  EXPECT_DOUBLE_EQ(Sec(s.compute), 4.0);
  EXPECT_DOUBLE_EQ(Sec(s.comm), 2.0);
  EXPECT_DOUBLE_EQ(Sec(s.iteration), 5.0);
  EXPECT_DOUBLE_EQ(s.overlap_start, 0.75);
  EXPECT_DOUBLE_EQ(s.stretch_slack, 1.0);
  EXPECT_DOUBLE_EQ(Sec(SingleOverlapIteration(s, 1.0)), 5.0);
  // What the single-overlap formula loses: at half bandwidth it predicts 3 + 4 = 7 s, the
  // phases give 6 s (H stays hidden under B).
  EXPECT_DOUBLE_EQ(Sec(SingleOverlapIteration(s, 0.5)), 7.0);
  EXPECT_DOUBLE_EQ(Sec(Must(TimeIteration(m, Gigabyte(1), 0.5)).iteration), 6.0);
}

TEST(TrafficModelSummaryTest, HiddenCommunicationKeepsItsSlack) {
  // One 1 s op after A (2 s), needed at the end: hidden under B (2 s) until it is 2x slower.
  // o = 1 - 2 x 1 / 4 = 0.5, so max(4, 0.5 x 4 + t / s) also grows beyond s = 2 only.
  IterationModel m = TwoHostModel({2, 2});
  m.ops = {Op("H", 1, 0, 2)};
  const IterationSummary s = Must(SummarizeIteration(m, Gigabyte(1)));
  EXPECT_NEAR(s.stretch_slack, 2.0, 1e-5);
  EXPECT_NEAR(s.overlap_start, 0.5, 1e-5);
  EXPECT_DOUBLE_EQ(Sec(s.iteration), 4.0);
  EXPECT_NEAR(Sec(SingleOverlapIteration(s, 1.0 / 3)), 5.0, 1e-4);
  EXPECT_NEAR(Sec(Must(TimeIteration(m, Gigabyte(1), 1.0 / 3)).iteration), 5.0, 1e-9);
}

TEST(TrafficModelSummaryTest, CalibrationReproducesTheTargetIteration) {
  TrainingRecipe r = Gpt3PtdP(4);
  r.dp_buckets = 4;
  const HostNetwork net{8, Bandwidth::Gbps(200)};
  const Duration c = Must(CalibrateCompute(r, net, Duration::Seconds(20.3)));
  r.compute = c;
  const IterationTiming t = Must(TimeIteration(Must(BuildIteration(r)), net));
  EXPECT_NEAR(Sec(t.iteration), 20.3, 1e-6);
  EXPECT_LT(Sec(c), 20.3 * 96 / (96 + 11));  // Below the bubble-only bound.
  // A target below what the communication alone takes is refused.
  const Status too_short =
      CalibrateCompute(r, HostNetwork{8, Bandwidth::Gbps(1)}, Duration::Seconds(20.3)).status();
  EXPECT_EQ(too_short.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(too_short.message().find("communication alone"), std::string::npos);
}

TEST(TrafficModelSummaryTest, JobSpecCarriesFlowsWorkAndTheEquivalentOverlap) {
  // Two 8-GPU hosts with 2 NICs each on a 2-ToR Clos: GPU g uses NIC g * 2 / 8.
  Clos2Params p;
  p.host.nics_per_host = 2;
  p.host.nic_gbps = 100;
  p.tors = 2;
  p.aggs = 1;
  p.hosts_per_tor = 1;
  const Topology topo = Must(BuildClos2(p));
  TrainingRecipe r;
  r.layout = {.tp = 1, .dp = 16};
  r.compute = Duration::Seconds(2);
  r.sharding = DpSharding::kNone;
  r.dense_params_per_rank = 1e9;
  r.work_per_gpu = Flops::Tera(100);
  const IterationModel m = Must(BuildIteration(r));
  const JobSpec j = Must(SingleOverlapJobSpec(topo, "llm", topo.hosts(), m));
  EXPECT_TRUE(ValidateJob(topo, j).ok());
  EXPECT_EQ(j.pattern, TrafficPattern::kExplicit);
  EXPECT_EQ(j.flops_per_iteration->value(), 1.6e15);
  // 8 rails of 2 (1/2) 1e9 x 2 / 8 = 0.25 GB fold onto 2 NICs per direction: 4 flows of 1 GB.
  ASSERT_EQ(j.flows.size(), 4u);
  for (const FlowDemand& f : j.flows) EXPECT_EQ(f.bytes.count(), 1'000'000'000);
  // 1 GB at 100 Gbps = 0.08 s after the last backward chunk: exposed (iteration 2.08 s).
  EXPECT_EQ(j.compute_time, Duration::Seconds(2));
  EXPECT_NEAR(j.overlap_start, (2.08 - 0.08) / 2, 1e-6);
  EXPECT_FALSE(SingleOverlapJobSpec(topo, "x", {topo.hosts()[0]}, m).ok());
}

TEST(TrafficModelSummaryTest, IsDeterministic) {
  TrainingRecipe r = Gpt3PtdP(2);
  r.dp_buckets = 3;
  const IterationModel a = Must(BuildIteration(r));
  const IterationModel b = Must(BuildIteration(r));
  EXPECT_EQ(a, b);
  const HostNetwork net{8, Bandwidth::Gbps(200)};
  EXPECT_EQ(Must(TimeIteration(a, net)), Must(TimeIteration(b, net)));
  EXPECT_EQ(Must(SummarizeIteration(a, net)), Must(SummarizeIteration(b, net)));
}

}  // namespace
}  // namespace crux::core
