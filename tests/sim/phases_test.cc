// The engine's phase-level iteration machine (docs/simulator.md, section 2) on hand-made
// iteration models whose timing is computed by hand: exposed and hidden ops, paced releases,
// needed_before and after_op dependencies, contention, the single-overlap fallback, a
// multi-phase MoE-like job with fixed figures, fast-forward, determinism.
//
// Fabric: hosts h0, h1 on switch s0, h2, h3 on s1, every cable 1 Gbps (125 MB per second), so
// bytes are chosen as seconds x 125e6. A job of two hosts (one GPU each) sends between its
// hosts through s0 -> s1; two such jobs share that cable.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/model/iteration_summary.h"
#include "crux/core/model/iteration_timing.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/topology/builders.h"
#include "crux/sim/simulator.h"
#include "crux/testing/sim_jobs.h"
#include "crux/testing/test_topologies.h"

namespace crux::sim {
namespace {

using core::Bytes;
using core::Duration;
using core::NodeId;
using core::Topology;

using core::testing::Must;

constexpr double kBytesPerSecond = 125e6;  // 1 Gbps.

Topology Fabric() {
  core::ExplicitParams p;
  p.nodes = {{"h0", true}, {"h1", true}, {"h2", true}, {"h3", true}, {"s0", false}, {"s1", false}};
  p.links = {{"h0", "s0", 1.0, 0.0},
             {"h1", "s0", 1.0, 0.0},
             {"h2", "s1", 1.0, 0.0},
             {"h3", "s1", 1.0, 0.0},
             {"s0", "s1", 1.0, 0.0}};
  return Must(core::BuildExplicit(p));
}

core::IterationModel Model() {
  core::IterationModel m;
  m.layout.dp = 2;
  m.layout.gpus_per_host = 1;
  m.work = core::Flops::Of(1e15);
  return m;
}

void Segment(core::IterationModel& m, const std::string& name, double s, bool busy = true) {
  m.segments.push_back({name, Duration::Seconds(s), busy});
}

// An op whose every instance sends `seconds` worth of bytes from host 0 to host 1, and, when
// `both`, as much back.
void Op(core::IterationModel& m, const std::string& name, double seconds, int issue_after,
        int needed_before, int instances = 1, core::Pacing pacing = core::Pacing::kBurst,
        bool both = false, int after_op = -1) {
  core::CommOp op;
  op.name = name;
  op.instances = instances;
  op.pacing = pacing;
  op.issue_after = issue_after;
  op.needed_before = needed_before;
  op.after_op = after_op;
  const Bytes b = Bytes::FromDouble(seconds * kBytesPerSecond);
  op.flows.push_back({0, 0, 1, 0, b});
  if (both) op.flows.push_back({1, 0, 0, 0, b});
  m.ops.push_back(op);
}

// Job `id` on hosts (a, b) running `m`'s phases; spec is its single-overlap summary.
SimJob Job(const Topology& topo, const std::string& id, const core::IterationModel& m,
           const std::string& a, const std::string& b) {
  const std::vector<NodeId> hosts = {Must(topo.FindNode(a)), Must(topo.FindNode(b))};
  SimJob j;
  j.spec = Must(core::SingleOverlapJobSpec(topo, id, hosts, m));
  j.iteration = std::make_shared<const core::IterationModel>(m);
  return j;
}

SimOptions Options(double horizon_s) {
  SimOptions o = testing::OracleOptions(horizon_s);
  o.fast_forward = false;
  return o;
}

SimResult RunSim(const Topology& topo, const std::vector<SimJob>& jobs, const SimOptions& o,
                 const std::string& policy = "ecmp") {
  core::Result<SimResult> r = Simulate(topo, policy, jobs, {}, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *std::move(r) : SimResult{};
}

// The standalone reference of a model on this fabric (one 1 Gbps "NIC" per host).
double Reference(const core::IterationModel& m, double scale = 1.0) {
  return Must(core::TimeIteration(m, core::HostNetwork{1, core::Bandwidth::Gbps(1)}, scale))
      .iteration.ToSeconds();
}

constexpr double kTol = 1e-6;  // Seconds: flow finishes round up to the nanosecond.

// fwd 1 s, bwd 2 s; a 3 s op issued after fwd and needed by the end: it runs 1 -> 4 s, the
// iteration is 4 s, of which 3 s busy (1 s exposed).
TEST(PhasesTest, TwoSegmentsAndOneExposedOp) {
  const Topology topo = Fabric();
  core::IterationModel m = Model();
  Segment(m, "fwd", 1);
  Segment(m, "bwd", 2);
  Op(m, "dp", 3, /*issue_after=*/0, /*needed_before=*/2);
  SimJob j = Job(topo, "a", m, "h0", "h2");
  j.iterations = 3;
  const SimResult r = RunSim(topo, {j}, Options(100));
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].iterations, 3);
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 4.0, kTol);
  EXPECT_NEAR(Reference(m), 4.0, kTol);
  EXPECT_NEAR(r.jobs[0].compute_busy.ToSeconds(), 9.0, kTol);
  ASSERT_TRUE(r.jobs[0].finish.has_value());
  EXPECT_NEAR(r.jobs[0].finish->ToSeconds(), 12.0, kTol);
  EXPECT_NEAR(r.bytes_sent, 3 * 3 * kBytesPerSecond, 1);
  EXPECT_DOUBLE_EQ(r.bytes_sent, r.bytes_delivered);
}

// One 4 s segment; a paced op of 4 instances of 0.5 s over it: released at 0, 1, 2, 3 s, each
// done 0.5 s later, the last at 3.5 s: hidden, the iteration is the compute.
TEST(PhasesTest, PacedOpHidesUnderItsCompute) {
  const Topology topo = Fabric();
  core::IterationModel m = Model();
  Segment(m, "fwd", 4);
  Op(m, "pp", 0.5, -1, 1, /*instances=*/4, core::Pacing::kPaced);
  SimJob j = Job(topo, "a", m, "h0", "h2");
  j.iterations = 2;
  const SimResult r = RunSim(topo, {j}, Options(100));
  EXPECT_EQ(r.jobs[0].iterations, 2);
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 4.0, kTol);
  EXPECT_NEAR(r.jobs[0].compute_busy.ToSeconds(), 8.0, kTol);
  EXPECT_NEAR(r.bytes_sent, 2 * 4 * 0.5 * kBytesPerSecond, 1);
  // The same op as one burst of 2 s at the start is hidden too; paced releases are spread:
  // never more than one instance in flight, so the peak is one flow.
  EXPECT_EQ(r.peak_active_flows, 1u);
}

// Segments A (1 s), B (1 s). Op x (2 s) from the start, needed before B: B waits until 2 s and
// ends at 3 s. Op y (0.5 s) chained after x (after_op), needed by the end: 2 -> 2.5 s, hidden
// under B. Iteration 3 s, busy 2 s.
TEST(PhasesTest, NeededBeforeHoldsTheSegmentAndAfterOpChains) {
  const Topology topo = Fabric();
  core::IterationModel m = Model();
  Segment(m, "A", 1);
  Segment(m, "B", 1);
  Op(m, "x", 2, -1, /*needed_before=*/1);
  Op(m, "y", 0.5, -1, /*needed_before=*/2, 1, core::Pacing::kBurst, false, /*after_op=*/0);
  SimJob j = Job(topo, "a", m, "h0", "h2");
  j.iterations = 2;
  const SimResult r = RunSim(topo, {j}, Options(100));
  EXPECT_EQ(r.jobs[0].iterations, 2);
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 3.0, kTol);
  EXPECT_NEAR(Reference(m), 3.0, kTol);
  EXPECT_NEAR(r.jobs[0].compute_busy.ToSeconds(), 4.0, kTol);
  // The GPUs idle while B waits: the utilisation is busy / lifetime = 4 / 6.
  EXPECT_NEAR(r.gpu_utilization, 4.0 / 6.0, 1e-9);
}

// fwd 2 s, bwd 2 s, a 3 s op after fwd needed by the end: alone 2 + 3 = 5 s (1 s exposed).
// Two such jobs in step on the shared s0 -> s1 cable at one level (ecmp) each get half of it:
// the op takes 6 s, the iteration 8 s: only the exposed part grew (1 -> 4 s), the busy compute
// per iteration is 4 s either way. TimeIteration at half the bandwidth agrees.
TEST(PhasesTest, ContentionHalvesTheRateAndLengthensOnlyTheExposedPart) {
  const Topology topo = Fabric();
  core::IterationModel m = Model();
  Segment(m, "fwd", 2);
  Segment(m, "bwd", 2);
  Op(m, "dp", 3, 0, 2);
  SimJob a = Job(topo, "a", m, "h0", "h2");
  SimJob b = Job(topo, "b", m, "h1", "h3");
  a.iterations = b.iterations = 4;
  const SimResult alone = RunSim(topo, {a}, Options(100));
  EXPECT_NEAR(alone.jobs[0].mean_iteration.ToSeconds(), 5.0, kTol);
  const SimResult both = RunSim(topo, {a, b}, Options(100));
  for (const JobResult& jr : both.jobs) {
    EXPECT_EQ(jr.iterations, 4) << jr.id;
    EXPECT_NEAR(jr.mean_iteration.ToSeconds(), 8.0, kTol) << jr.id;
    EXPECT_NEAR(jr.compute_busy.ToSeconds(), 16.0, kTol) << jr.id;
  }
  EXPECT_NEAR(Reference(m, 0.5), 8.0, kTol);
}

// A multi-phase MoE-like iteration (DeepSeek-V3's shape, scaled down), every transfer both ways
// between the job's two hosts:
//   segments: fwd 3 s (busy), bubble 1 s (idle), bwd 6 s (busy);
//   dp.ag:  0.5 s burst from the start, needed before fwd (exposed: fwd starts at 0.5 s);
//   ep.fwd: 6 all-to-alls of 0.25 s paced over fwd (released every 0.5 s from 0.5 s, the last
//           done at 3.25 s < 3.5 s: hidden);
//   ep.bwd: 12 all-to-alls of 0.25 s paced over bwd (every 0.5 s from 4.5 s; last done at
//           10.25 s: hidden);
//   dp.rs:  1 s burst after bwd, needed by the end (exposed: 10.5 -> 11.5 s).
// Alone: 0.5 + 3 + 1 + 6 + 1 = 11.5 s per iteration, 9 s busy; 6 s of link time per direction.
// Its single-overlap summary: c = 10 s (busy + bubble), t = 6 s, o = (11.5 - 6) / 10 = 0.55,
// so alone it also takes max(10, 5.5 + 6) = 11.5 s.
// Two of them in step on the shared cable at one level (ecmp): every transfer takes twice as
// long. Phases: ag 1 s (fwd at 1 s), the paced all-to-alls now take exactly their 0.5 s slot
// (ep.fwd's last done at 4.0 s = fwd's end; ep.bwd's at 11.0 s = bwd's end: still hidden), rs
// 2 s: 1 + 3 + 1 + 6 + 2 = 13 s. The single-overlap summary instead sends its 6 s per direction
// in one block from 5.5 s, shared: 5.5 + 12 = 17.5 s: it turns hidden all-to-alls into exposed
// time (docs/sim-workloads.md, "What the single-overlap formula loses").
core::IterationModel MoeModel() {
  core::IterationModel m = Model();
  Segment(m, "fwd", 3);
  Segment(m, "bubble", 1, /*busy=*/false);
  Segment(m, "bwd", 6);
  Op(m, "dp.ag", 0.5, -1, 0, 1, core::Pacing::kBurst, true);
  Op(m, "ep.fwd", 0.25, -1, 1, 6, core::Pacing::kPaced, true);
  Op(m, "ep.bwd", 0.25, 1, 3, 12, core::Pacing::kPaced, true);
  Op(m, "dp.rs", 1, 2, 3, 1, core::Pacing::kBurst, true);
  return m;
}

TEST(PhasesTest, MultiPhaseMoeJobGoldenFigures) {
  const Topology topo = Fabric();
  const core::IterationModel m = MoeModel();
  SimJob a = Job(topo, "moe-a", m, "h0", "h2");
  SimJob b = Job(topo, "moe-b", m, "h1", "h3");
  EXPECT_NEAR(a.spec.overlap_start, 0.55, 1e-9);
  EXPECT_NEAR(a.spec.compute_time.ToSeconds(), 10.0, kTol);
  a.iterations = b.iterations = 5;
  const double per_iteration_bytes = 2 * (0.5 + 6 * 0.25 + 12 * 0.25 + 1) * kBytesPerSecond;

  SimOptions o = Options(200);
  const SimResult alone = RunSim(topo, {a}, o);
  EXPECT_NEAR(alone.jobs[0].mean_iteration.ToSeconds(), 11.5, kTol);
  EXPECT_NEAR(Reference(m), 11.5, kTol);
  EXPECT_NEAR(alone.jobs[0].compute_busy.ToSeconds(), 5 * 9.0, kTol);
  EXPECT_NEAR(alone.bytes_sent, 5 * per_iteration_bytes, 10);

  const SimResult both = RunSim(topo, {a, b}, o);
  for (const JobResult& jr : both.jobs) {
    EXPECT_EQ(jr.iterations, 5) << jr.id;
    EXPECT_NEAR(jr.mean_iteration.ToSeconds(), 13.0, kTol) << jr.id;
    EXPECT_NEAR(jr.compute_busy.ToSeconds(), 5 * 9.0, kTol) << jr.id;
  }
  // Busy 9 s of each 13 s iteration, both jobs to their end at 65 s.
  EXPECT_NEAR(both.gpu_utilization, 9.0 / 13.0, 1e-6);
  EXPECT_NEAR(both.bytes_sent, 2 * 5 * per_iteration_bytes, 20);
  EXPECT_DOUBLE_EQ(both.bytes_sent, both.bytes_delivered);

  o.single_overlap = true;
  const SimResult single_alone = RunSim(topo, {a}, o);
  EXPECT_NEAR(single_alone.jobs[0].mean_iteration.ToSeconds(), 11.5, kTol);
  const SimResult single = RunSim(topo, {a, b}, o);
  for (const JobResult& jr : single.jobs) {
    EXPECT_NEAR(jr.mean_iteration.ToSeconds(), 17.5, kTol) << jr.id;
    // The summary counts the bubble as compute: 10 s per iteration.
    EXPECT_NEAR(jr.compute_busy.ToSeconds(), 5 * 10.0, kTol) << jr.id;
  }

  // Determinism: the same run twice gives the same figures.
  const SimResult again = RunSim(topo, {a, b}, Options(200));
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(again.jobs[k].mean_iteration, both.jobs[k].mean_iteration);
    EXPECT_EQ(again.jobs[k].compute_busy, both.jobs[k].compute_busy);
  }
  EXPECT_EQ(again.events, both.events);
  EXPECT_EQ(again.bytes_sent, both.bytes_sent);
}

// Fast-forward over phase-level jobs: two MoE jobs in step repeat exactly every 13 s; the
// jump gives the full simulation's figures.
TEST(PhasesTest, FastForwardMatchesTheFullSimulation) {
  const Topology topo = Fabric();
  const core::IterationModel m = MoeModel();
  std::vector<SimJob> jobs = {Job(topo, "moe-a", m, "h0", "h2"), Job(topo, "moe-b", m, "h1", "h3")};
  jobs[1].arrival = Duration::Seconds(3.3);  // Out of step: a different periodic pattern.
  SimOptions o = Options(3000);
  const SimResult full = RunSim(topo, jobs, o);
  o.fast_forward = true;
  const SimResult ff = RunSim(topo, jobs, o);
  EXPECT_GT(ff.fast_forward_jumps, 0u);
  EXPECT_GT(ff.fast_forwarded.ToSeconds(), 2000);
  EXPECT_LT(ff.events, full.events / 5);
  for (size_t k = 0; k < jobs.size(); ++k) {
    EXPECT_NEAR(static_cast<double>(ff.jobs[k].iterations),
                static_cast<double>(full.jobs[k].iterations), 1.0)
        << jobs[k].spec.id;
    EXPECT_NEAR(ff.jobs[k].compute_busy.ToSeconds(), full.jobs[k].compute_busy.ToSeconds(), 13.0)
        << jobs[k].spec.id;
  }
  EXPECT_NEAR(ff.gpu_utilization, full.gpu_utilization, 0.005);
  std::printf("full: util %.6f, %llu events; fast-forward: util %.6f, %llu events, %.0f s jumped\n",
              full.gpu_utilization, static_cast<unsigned long long>(full.events),
              ff.gpu_utilization, static_cast<unsigned long long>(ff.events),
              ff.fast_forwarded.ToSeconds());
}

// Every policy runs phase-level jobs (CASSINI's time shifts hold an iteration's first segment
// once): both MoE jobs finish their 5 iterations, no iteration is shorter than alone (11.5 s),
// bytes are conserved; `ideal` (every job on its own copy of the fabric) gives exactly 11.5 s.
TEST(PhasesTest, EveryPolicyRunsPhaseJobs) {
  const Topology topo = Fabric();
  const core::IterationModel m = MoeModel();
  SimJob a = Job(topo, "moe-a", m, "h0", "h2");
  SimJob b = Job(topo, "moe-b", m, "h1", "h3");
  a.iterations = b.iterations = 5;
  b.arrival = Duration::Seconds(2.5);
  for (const char* policy : {"crux", "ecmp", "sincronia", "cassini", "taccl", "ideal"}) {
    const SimResult r = RunSim(topo, {a, b}, Options(400), policy);
    ASSERT_EQ(r.jobs.size(), 2u) << policy;
    for (const JobResult& jr : r.jobs) {
      EXPECT_EQ(jr.iterations, 5) << policy << " " << jr.id;
      EXPECT_GE(jr.mean_iteration.ToSeconds(), 11.5 - kTol) << policy << " " << jr.id;
      EXPECT_NEAR(jr.compute_busy.ToSeconds(), 5 * 9.0, kTol) << policy << " " << jr.id;
      if (std::string(policy) == "ideal") {
        EXPECT_NEAR(jr.mean_iteration.ToSeconds(), 11.5, kTol) << jr.id;
      }
    }
    EXPECT_DOUBLE_EQ(r.bytes_sent, r.bytes_delivered) << policy;
  }
}

// Link events: the job's flows on a cable that goes down move to the other cable of the
// pair (the re-plan's path for their NIC pair); each cable fails once while the job runs (the
// second failure, at 30.7 s, falls while an ep.bwd instance is in flight). The job finishes its
// iterations at its standalone pace and every byte arrives.
TEST(PhasesTest, FlowsOfADownCableMoveToTheOther) {
  core::ExplicitParams p;
  p.nodes = {{"h0", true}, {"h2", true}, {"s0", false}, {"s1", false}};
  p.links = {{"h0", "s0", 1.0, 0.0}, {"h2", "s1", 1.0, 0.0}, {"s0", "s1", 1.0, 0.0, 2}};
  const Topology topo = Must(core::BuildExplicit(p));
  const NodeId s0 = Must(topo.FindNode("s0"));
  const NodeId s1 = Must(topo.FindNode("s1"));
  std::vector<core::LinkId> cables;
  for (core::LinkId l : topo.OutLinks(s0)) {
    if (topo.link(l).dst == s1) cables.push_back(l);
  }
  ASSERT_EQ(cables.size(), 2u);
  SimJob j = Job(topo, "moe", MoeModel(), "h0", "h2");
  j.iterations = 5;
  const core::Bandwidth up = core::Bandwidth::Gbps(1);
  const std::vector<LinkEvent> events = {{Duration::Seconds(5), cables[0], core::Bandwidth()},
                                         {Duration::Seconds(20), cables[0], up},
                                         {Duration::Seconds(30.7), cables[1], core::Bandwidth()},
                                         {Duration::Seconds(45), cables[1], up}};
  core::Result<SimResult> r = Simulate(topo, "crux", {j}, events, Options(200));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->jobs[0].iterations, 5);
  // The re-plan at the failure instant moves a stalled flow at once: nothing is lost.
  EXPECT_NEAR(r->jobs[0].mean_iteration.ToSeconds(), 11.5, kTol);
  EXPECT_DOUBLE_EQ(r->bytes_sent, r->bytes_delivered);
}

// Through cruxd's control loop: the jobs register on their single-overlap summary, run on
// default routes, report profiles from the phases their simulated profiler sees, get planned;
// bytes are conserved and every job keeps iterating.
TEST(PhasesTest, ControlLoopRunsPhaseJobs) {
  const Topology topo = Fabric();
  const core::IterationModel m = MoeModel();
  std::vector<SimJob> jobs = {Job(topo, "moe-a", m, "h0", "h2"), Job(topo, "moe-b", m, "h1", "h3")};
  jobs[1].arrival = Duration::Seconds(100);
  SimOptions o = Options(400);
  o.control.oracle = false;
  o.policy.planner.reserved_high_levels = 1;
  const SimResult r = RunSim(topo, jobs, o, "crux");
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_GT(r.profile_reports, 0u);
  for (const JobResult& jr : r.jobs) {
    EXPECT_GT(jr.iterations, 15) << jr.id;
    EXPECT_TRUE(jr.scheduled.has_value()) << jr.id;
  }
  EXPECT_NEAR(r.bytes_sent, r.bytes_delivered + r.bytes_in_flight, 1);
}

// Input checks: a layout whose hosts differ from the placement, a rail flow to a host the job
// does not have, and an op chained after one that starts too late (the iteration deadlocks).
TEST(PhasesTest, BadIterationModelsAreRefused) {
  const Topology topo = Fabric();
  core::IterationModel m = Model();
  Segment(m, "A", 1);
  Segment(m, "B", 1);
  Op(m, "x", 1, -1, 2);
  SimJob j = Job(topo, "a", m, "h0", "h2");
  SimOptions o = Options(10);

  core::IterationModel three = m;
  three.layout.dp = 3;
  SimJob bad = j;
  bad.iteration = std::make_shared<const core::IterationModel>(three);
  core::Result<SimResult> r = Simulate(topo, "ecmp", {bad}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("layout needs 3 hosts"), std::string::npos)
      << r.status().ToString();

  core::IterationModel far = m;
  far.ops[0].flows[0].dst_host = 2;
  bad.iteration = std::make_shared<const core::IterationModel>(far);
  r = Simulate(topo, "ecmp", {bad}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ops[0] (x)"), std::string::npos) << r.status().ToString();

  core::IterationModel stuck = m;
  Op(stuck, "late", 1, 1, 2);                                         // After B.
  Op(stuck, "chained", 1, -1, 1, 1, core::Pacing::kBurst, false, 1);  // Needed before B.
  bad.iteration = std::make_shared<const core::IterationModel>(stuck);
  r = Simulate(topo, "ecmp", {bad}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot complete"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace crux::sim
