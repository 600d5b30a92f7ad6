// Sprayed fabrics (SimOptions::spray, docs/simulator.md "Sprayed fabrics"): every transfer
// between two NICs is split over every equal-cost path; the policy's paths are ignored, its
// levels apply to every sub-flow.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/model/iteration_summary.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/builders.h"
#include "crux/core/topology/path_finder.h"
#include "crux/sim/simulator.h"
#include "crux/testing/sim_jobs.h"
#include "crux/testing/test_topologies.h"

namespace crux::sim {
namespace {

using core::Bytes;
using core::Duration;
using core::JobSpec;
using core::NodeId;
using core::Topology;
using core::testing::Clos2Small;
using core::testing::MakeClos2Small;
using testing::OracleOptions;
using testing::RunSim;

// A job sending `bytes` per iteration from `src` to `dst` (one flow), after `compute_s` of
// compute (overlap_start `overlap`: 1 = communication after compute, 0 = from the start).
SimJob NicPairJob(const Clos2Small& c, const std::string& id, int src_host, int dst_host,
                  double compute_s, double bytes, double overlap = 1.0) {
  SimJob j;
  j.spec.id = id;
  j.spec.hosts = {c.host[src_host], c.host[dst_host]};
  j.spec.gpus_per_host = 8;
  j.spec.compute_time = Duration::Seconds(compute_s);
  j.spec.overlap_start = overlap;
  j.spec.pattern = core::TrafficPattern::kExplicit;
  j.spec.flows = {{c.nic[src_host][0], c.nic[dst_host][0], Bytes::FromDouble(bytes)}};
  return j;
}

// Wraps `inner` and moves every flow onto the first equal-cost path of its pair: deterministic
// ECMP pinning in which every job collides on tor -> agg0.
class FirstPathPolicy final : public core::SchedulingPolicy {
 public:
  FirstPathPolicy(std::unique_ptr<core::SchedulingPolicy> inner, const Topology& topo)
      : inner_(std::move(inner)), paths_(topo) {}
  std::string_view name() const override { return "first-path"; }
  core::Result<core::Plan> Schedule(const std::vector<JobSpec>& jobs) override {
    CRUX_ASSIGN_OR_RETURN(core::Plan plan, inner_->Schedule(jobs));
    for (core::JobPlan& jp : plan.jobs) {
      for (core::FlowPlan& f : jp.flows) {
        CRUX_ASSIGN_OR_RETURN(const core::PathSet* set, paths_.Paths(f.src, f.dst));
        f.path = set->Path(0);
        f.path_index = 0;
      }
    }
    return plan;
  }

 private:
  std::unique_ptr<core::SchedulingPolicy> inner_;
  core::PathFinder paths_;
};

PolicyFactory FirstPath(const SimOptions& o) {
  return [&o](const Topology& t,
              const core::Clock& clock) -> core::Result<std::unique_ptr<core::SchedulingPolicy>> {
    CRUX_ASSIGN_OR_RETURN(auto inner, core::MakePolicy("ecmp", t, o.policy, &clock));
    return std::unique_ptr<core::SchedulingPolicy>(
        std::make_unique<FirstPathPolicy>(std::move(inner), t));
  };
}

// 1 s of transfer alone on a 100 Gbps NIC.
constexpr double kOneSecondAt100G = 100e9 / 8;

// Two jobs whose pinned paths share tor0 -> agg0 (100 Gbps): pinned, each gets half of it and
// its transfer takes 2 s; sprayed over the three Aggs, the uplinks carry 2 x 2/3 of a NIC's rate
// each and both jobs send at their NIC's full 100 Gbps (1 s).
TEST(SprayTest, SprayingBalancesTwoJobsThatPinningCollides) {
  const Clos2Small c = MakeClos2Small(/*nic_gbps=*/100, /*uplink_gbps=*/100);
  const std::vector<SimJob> jobs = {NicPairJob(c, "a", 0, 2, 1.0, kOneSecondAt100G),
                                    NicPairJob(c, "b", 1, 3, 1.0, kOneSecondAt100G)};
  SimOptions o = OracleOptions(200);
  core::Result<SimResult> pinned = Simulate(c.topo, FirstPath(o), jobs, {}, o);
  o.spray = true;
  core::Result<SimResult> sprayed = Simulate(c.topo, FirstPath(o), jobs, {}, o);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  ASSERT_TRUE(sprayed.ok()) << sprayed.status().ToString();
  for (int j = 0; j < 2; ++j) {
    SCOPED_TRACE(jobs[static_cast<size_t>(j)].spec.id);
    EXPECT_NEAR(pinned->jobs[static_cast<size_t>(j)].mean_iteration.ToSeconds(), 3.0, 1e-3);
    EXPECT_NEAR(sprayed->jobs[static_cast<size_t>(j)].mean_iteration.ToSeconds(), 2.0, 1e-3);
  }
  EXPECT_GT(sprayed->gpu_utilization, pinned->gpu_utilization * 1.45);
  // One flow per job pinned; one per path (3 Aggs) sprayed.
  EXPECT_EQ(pinned->peak_active_flows, 2u);
  EXPECT_EQ(sprayed->peak_active_flows, 6u);
}

// The sub-flows of a transfer carry exactly its bytes: 5 iterations of a prime byte count (not a
// multiple of the 3 paths) send and deliver 5 times that count, over 3 sub-flows (or the cap).
TEST(SprayTest, SubFlowBytesSumToTheTransfer) {
  const Clos2Small c = MakeClos2Small();
  constexpr double kBytes = 1'000'000'007;
  SimJob a = NicPairJob(c, "a", 0, 2, 0.5, kBytes);
  a.iterations = 5;
  for (int cap : {0, 2}) {
    SCOPED_TRACE("spray_max_paths " + std::to_string(cap));
    SimOptions o = OracleOptions(100);
    o.spray = true;
    o.spray_max_paths = cap;
    const SimResult r = RunSim(c.topo, "ecmp", {a}, o);
    EXPECT_EQ(r.jobs[0].iterations, 5);
    EXPECT_EQ(r.bytes_sent, 5 * kBytes);
    EXPECT_EQ(r.bytes_delivered, 5 * kBytes);
    EXPECT_EQ(r.bytes_in_flight, 0);
    EXPECT_EQ(r.peak_active_flows, cap == 0 ? 3u : 2u);
    // Alone, the NIC (100 Gbps) is the bottleneck either way: 0.5 s + 80.0000006 ms per iteration.
    EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 0.5 + kBytes * 8 / 100e9, 1e-6);
  }
}

// Levels still order jobs: on a fabric whose Agg uplinks (3 x 10 Gbps) are the bottleneck, the
// top-level job, communicating all the time, takes every path and the other one starves, in
// either order. A level that reached only some sub-flows would leave the lower job paths.
TEST(SprayTest, LevelsApplyToEverySubFlow) {
  const Clos2Small c = MakeClos2Small(/*nic_gbps=*/100, /*uplink_gbps=*/10);
  // 1 s of transfer at 30 Gbps (three 10 Gbps paths), from the iteration's start.
  constexpr double kBytes = 30e9 / 8;
  for (int first : {0, 1}) {
    SCOPED_TRACE("rank 0: job " + std::to_string(first));
    std::vector<SimJob> jobs = {NicPairJob(c, "a", 0, 2, 0.1, kBytes, 0.0),
                                NicPairJob(c, "b", 1, 3, 0.1, kBytes, 0.0)};
    jobs[static_cast<size_t>(first)].spec.fixed_rank = 0;
    jobs[static_cast<size_t>(1 - first)].spec.fixed_rank = 1;
    SimOptions o = OracleOptions(100);
    o.spray = true;
    const SimResult r = RunSim(c.topo, "fixed", jobs, o);
    const JobResult& high = r.jobs[static_cast<size_t>(first)];
    const JobResult& low = r.jobs[static_cast<size_t>(1 - first)];
    EXPECT_LT(high.level, low.level);
    EXPECT_NEAR(high.mean_iteration.ToSeconds(), 1.0, 1e-3);
    EXPECT_GE(high.iterations, 99);
    EXPECT_EQ(low.iterations, 0);
  }
}

// Under the control loop (crux-sim's default) too: the jobs run sprayed from their arrival (on
// their default routes, before any assignment) and after the loop's assignments (whose pins are
// ignored). `crux` pins the two jobs apart, so pinned they do not collide either; sprayed, each
// still sends at its NIC's full rate.
TEST(SprayTest, ControlLoopRunsSprayedFlows) {
  const Clos2Small c = MakeClos2Small(/*nic_gbps=*/100, /*uplink_gbps=*/100);
  const std::vector<SimJob> jobs = {NicPairJob(c, "a", 0, 2, 1.0, kOneSecondAt100G),
                                    NicPairJob(c, "b", 1, 3, 1.0, kOneSecondAt100G)};
  SimOptions o;
  o.horizon = Duration::Seconds(200);
  o.per_hop_latency = Duration::Zero();
  o.sample_interval = Duration::Seconds(20);
  o.spray = true;
  const SimResult r = RunSim(c.topo, "crux", jobs, o);
  EXPECT_FALSE(r.oracle);
  EXPECT_GT(r.epochs, 0u);
  EXPECT_EQ(r.peak_active_flows, 6u);
  for (const JobResult& j : r.jobs) {
    SCOPED_TRACE(j.id);
    EXPECT_NEAR(j.mean_iteration.ToSeconds(), 2.0, 1e-3);
    EXPECT_TRUE(j.scheduled.has_value());
  }
}

// Phase-level jobs: a rail flow is split over its pair's sub-flows. Hosts h0 (on s0) and h2 (on
// s1) at 2 Gbps, two 1 Gbps spines between s0 and s1. fwd 1 s, bwd 2 s; an op of 3 s at 1 Gbps
// issued after fwd, needed by the end. Pinned (one spine): it runs 1 -> 4 s, a 4 s iteration.
// Sprayed (both spines, 2 Gbps): 1 -> 2.5 s, hidden under bwd, a 3 s iteration.
TEST(SprayTest, PhaseLevelRailFlowsAreSplitOverThePaths) {
  core::ExplicitParams p;
  p.nodes = {{"h0", true}, {"h2", true}, {"s0", false}, {"s1", false}, {"x", false}, {"y", false}};
  p.links = {{"h0", "s0", 2.0, 0.0}, {"h2", "s1", 2.0, 0.0}, {"s0", "x", 1.0, 0.0},
             {"s0", "y", 1.0, 0.0},  {"s1", "x", 1.0, 0.0},  {"s1", "y", 1.0, 0.0}};
  const Topology topo = core::testing::Must(core::BuildExplicit(p));
  core::IterationModel m;
  m.layout.dp = 2;
  m.layout.gpus_per_host = 1;
  m.work = core::Flops::Of(1e15);
  m.segments.push_back({"fwd", Duration::Seconds(1), true});
  m.segments.push_back({"bwd", Duration::Seconds(2), true});
  core::CommOp op;
  op.name = "dp";
  op.issue_after = 0;
  op.needed_before = 2;
  constexpr double kBytes = 3 * 125e6;  // 3 s at 1 Gbps.
  op.flows.push_back({0, 0, 1, 0, Bytes::FromDouble(kBytes)});
  m.ops.push_back(op);
  const std::vector<NodeId> hosts = {core::testing::Must(topo.FindNode("h0")),
                                     core::testing::Must(topo.FindNode("h2"))};
  SimJob j;
  j.spec = core::testing::Must(core::SingleOverlapJobSpec(topo, "a", hosts, m));
  j.iteration = std::make_shared<const core::IterationModel>(m);
  j.iterations = 3;
  SimOptions o = OracleOptions(100);
  o.fast_forward = false;
  const SimResult pinned = RunSim(topo, "ecmp", {j}, o);
  o.spray = true;
  const SimResult sprayed = RunSim(topo, "ecmp", {j}, o);
  ASSERT_EQ(pinned.jobs.size(), 1u);
  ASSERT_EQ(sprayed.jobs.size(), 1u);
  EXPECT_EQ(pinned.phase_jobs, 1u);
  EXPECT_EQ(sprayed.phase_jobs, 1u);
  EXPECT_NEAR(pinned.jobs[0].mean_iteration.ToSeconds(), 4.0, 1e-6);
  EXPECT_NEAR(sprayed.jobs[0].mean_iteration.ToSeconds(), 3.0, 1e-6);
  EXPECT_EQ(pinned.peak_active_flows, 1u);
  EXPECT_EQ(sprayed.peak_active_flows, 2u);
  EXPECT_NEAR(sprayed.bytes_sent, 3 * kBytes, 1e-3);
  EXPECT_DOUBLE_EQ(sprayed.bytes_sent, sprayed.bytes_delivered);
}

TEST(SprayTest, RejectsANegativePathCap) {
  const Clos2Small c = MakeClos2Small();
  SimOptions o = OracleOptions(10);
  o.spray = true;
  o.spray_max_paths = -1;
  core::Result<SimResult> r = Simulate(c.topo, "ecmp", {NicPairJob(c, "a", 0, 2, 1.0, 1e6)}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("spray_max_paths: must be >= 0"), std::string::npos);
}

}  // namespace
}  // namespace crux::sim
