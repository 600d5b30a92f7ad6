// Textbook cases for the baselines (issue #16 item 4), run through the public policy and
// simulator API (core::MakePolicy, sim::Simulate) without touching the engine:
//   * CASSINI: two periodic jobs whose communication collides on one link. With a duty cycle
//     below 50% a time shift separates their Up phases and reaches the contention-free bound;
//     above 50% no shift can. (The evaluation's null effect of CASSINI therefore says its
//     traces lack such periodic collisions, not that the shifts do nothing.)
//   * Sincronia: a three-coflow case on two ports where BSSI's order (Bottleneck-Select-Scale-
//     Iterate) differs from smallest-coflow-first; the simulated coflow completion times are
//     those of strict priority in BSSI's order, computed by hand.
// They live with the workload tests because the engine's own test folder belongs to the engine
// rewrite (issue #13); they use only Simulate and MakePolicy.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "crux/core/policies/policy.h"
#include "crux/core/topology/builders.h"
#include "crux/sim/simulator.h"
#include "crux/testing/test_topologies.h"

namespace crux::sim {
namespace {

using core::Bytes;
using core::Duration;
using core::NodeId;
using core::Topology;

using core::testing::Must;

SimOptions Oracle(double horizon_s) {
  SimOptions o;
  o.control.oracle = true;  // Plans from the true specs at once: the policies alone.
  o.horizon = Duration::Seconds(horizon_s);
  o.per_hop_latency = Duration::Zero();
  o.sample_interval = Duration::Seconds(horizon_s / 10);
  o.policy.planner.levels = 4;
  o.gpus_per_host = 1;
  return o;
}

SimResult Simulated(const Topology& topo, const std::string& policy,
                    const std::vector<SimJob>& jobs, const SimOptions& o) {
  core::Result<SimResult> r = Simulate(topo, policy, jobs, {}, o);
  EXPECT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
  return r.ok() ? *r : SimResult{};
}

// A job of one GPU per host sending `comm_s` worth of bytes at `gbps` from src to dst per
// iteration, after `compute_s` of compute (no overlap).
SimJob Job(const Topology& topo, const std::string& id, std::vector<std::string> hosts,
           double compute_s, std::vector<std::pair<std::string, std::string>> flows,
           std::vector<double> comm_s, double gbps) {
  SimJob j;
  j.spec.id = id;
  for (const std::string& h : hosts) j.spec.hosts.push_back(Must(topo.FindNode(h)));
  j.spec.gpus_per_host = 1;
  j.spec.compute_time = Duration::Seconds(compute_s);
  j.spec.overlap_start = 1.0;
  j.spec.pattern = core::TrafficPattern::kExplicit;
  for (size_t i = 0; i < flows.size(); ++i) {
    j.spec.flows.push_back({Must(topo.FindNode(flows[i].first)),
                            Must(topo.FindNode(flows[i].second)),
                            Bytes::FromDouble(comm_s[i] * gbps * 1e9 / 8)});
  }
  return j;
}

// ---- CASSINI ----

// h0, h2 -> s0 ==(10 Gbps)==> s1 -> h1, h3: jobs h0 -> h1 and h2 -> h3 share s0 -> s1.
Topology SharedLink() {
  core::ExplicitParams p;
  p.nodes = {{"h0", true}, {"h1", true}, {"h2", true}, {"h3", true}, {"s0", false}, {"s1", false}};
  p.links = {{"h0", "s0", 100, 0},
             {"h2", "s0", 100, 0},
             {"s0", "s1", 10, 0},
             {"s1", "h1", 100, 0},
             {"s1", "h3", 100, 0}};
  return Must(core::BuildExplicit(p));
}

std::vector<SimJob> PeriodicPair(const Topology& topo, double compute_s, double comm_s) {
  return {Job(topo, "a", {"h0", "h1"}, compute_s, {{"h0", "h1"}}, {comm_s}, 10),
          Job(topo, "b", {"h2", "h3"}, compute_s, {{"h2", "h3"}}, {comm_s}, 10)};
}

TEST(CassiniTextbookTest, ShiftReachesTheContentionFreeBoundBelowHalfDutyCycle) {
  // 3 s compute then 1 s of communication (duty cycle 25%), both starting at 0. Aligned, the
  // Up phases share the link: 2 s each, period 5 s, utilisation 3/5. Shifted by 1-3 s they
  // never meet: period 4 s, utilisation 3/4, the contention-free bound.
  const Topology topo = SharedLink();
  const std::vector<SimJob> jobs = PeriodicPair(topo, 3, 1);
  const SimOptions o = Oracle(400);
  const SimResult ecmp = Simulated(topo, "ecmp", jobs, o);
  const SimResult cassini = Simulated(topo, "cassini", jobs, o);
  const SimResult ideal = Simulated(topo, "ideal", jobs, o);
  EXPECT_NEAR(ecmp.gpu_utilization, 0.6, 0.01);
  EXPECT_NEAR(ecmp.jobs[0].mean_iteration.ToSeconds(), 5.0, 0.01);
  EXPECT_NEAR(ideal.gpu_utilization, 0.75, 0.01);
  EXPECT_NEAR(cassini.gpu_utilization, ideal.gpu_utilization, 0.005);
  EXPECT_NEAR(cassini.jobs[1].mean_iteration.ToSeconds(), 4.0, 0.02);
  // The shift the policy chose separates the Up phases: one job at 0, the other in [1, 3] s.
  const core::FakeClock clock;
  auto policy = Must(core::MakePolicy("cassini", topo, o.policy, &clock));
  const core::Plan plan = Must(policy->Schedule({jobs[0].spec, jobs[1].spec}));
  const double shift =
      std::max(plan.jobs[0].time_shift.ToSeconds(), plan.jobs[1].time_shift.ToSeconds());
  EXPECT_EQ(std::min(plan.jobs[0].time_shift, plan.jobs[1].time_shift), Duration::Zero());
  EXPECT_GE(shift, 1.0 - 1e-9);
  EXPECT_LE(shift, 3.0 + 1e-9);
}

TEST(CassiniTextbookTest, NoShiftHelpsAboveHalfDutyCycle) {
  // 1 s compute, 3 s communication (duty cycle 75%): any shift leaves at least 2 s of overlap
  // per 4 s period, so CASSINI cannot reach the bound (1/4); it stays near fair sharing.
  const Topology topo = SharedLink();
  const std::vector<SimJob> jobs = PeriodicPair(topo, 1, 3);
  const SimOptions o = Oracle(400);
  const SimResult ecmp = Simulated(topo, "ecmp", jobs, o);
  const SimResult cassini = Simulated(topo, "cassini", jobs, o);
  const SimResult ideal = Simulated(topo, "ideal", jobs, o);
  EXPECT_NEAR(ideal.gpu_utilization, 0.25, 0.01);
  EXPECT_NEAR(ecmp.gpu_utilization, 1.0 / 7, 0.01);  // Both at half rate: 6 s + 1 s.
  EXPECT_LT(cassini.gpu_utilization, 0.9 * ideal.gpu_utilization);
}

// ---- Sincronia ----

// Sources ha, hb, hc -> sw (fast), sw -> d1 and sw -> d2 at 10 Gbps: ports L1 and L2.
Topology TwoPorts() {
  core::ExplicitParams p;
  p.nodes = {{"ha", true}, {"hb", true}, {"hc", true}, {"d1", true}, {"d2", true}, {"sw", false}};
  p.links = {{"ha", "sw", 1000, 0},
             {"hb", "sw", 1000, 0},
             {"hc", "sw", 1000, 0},
             {"sw", "d1", 10, 0},
             {"sw", "d2", 10, 0}};
  return Must(core::BuildExplicit(p));
}

TEST(SincroniaTextbookTest, BssiOrderAndTheCoflowCompletionTimesItGives) {
  // One iteration (one coflow) per job, D in seconds on the 10 Gbps ports:
  //   A: 2 on L1 and 2 on L2;  B: 3 on L1;  C: 3.5 on L2.
  // BSSI by hand: the bottleneck is L2 (5.5 > 5): C has the largest D there, so C goes last;
  //   w_A = 1 - 1 x 2 / 3.5 = 3/7. Then L1 (5): w_A / 2 = 3/14 < w_B / 3 = 1/3, so A goes last
  //   of the two. Order B, A, C (smallest coflow first would be B, C, A).
  // Strict priority in that order: B holds L1 for [0, 3]; A's L2 part takes [0, 2], its L1
  //   part [3, 5]; C gets L2 from 2 s and finishes at 5.5 s. Completion times 3, 5, 5.5.
  // Fair sharing (ecmp, one level): every flow at half rate until A's two flows finish at 4 s,
  //   then B ends at 5 s and C at 5.5 s: 4, 5, 5.5 (mean 4.83 against BSSI's 4.5).
  const Topology topo = TwoPorts();
  std::vector<SimJob> jobs = {
      Job(topo, "A", {"ha", "d1", "d2"}, 0.001, {{"ha", "d1"}, {"ha", "d2"}}, {2, 2}, 10),
      Job(topo, "B", {"hb", "d1"}, 0.001, {{"hb", "d1"}}, {3}, 10),
      Job(topo, "C", {"hc", "d2"}, 0.001, {{"hc", "d2"}}, {3.5}, 10)};
  for (SimJob& j : jobs) j.iterations = 1;
  const SimOptions o = Oracle(20);
  const core::FakeClock clock;
  auto policy = Must(core::MakePolicy("sincronia", topo, o.policy, &clock));
  const core::Plan plan = Must(policy->Schedule({jobs[0].spec, jobs[1].spec, jobs[2].spec}));
  EXPECT_EQ(plan.jobs[1].rank, 0);  // B
  EXPECT_EQ(plan.jobs[0].rank, 1);  // A
  EXPECT_EQ(plan.jobs[2].rank, 2);  // C
  EXPECT_LT(plan.jobs[1].level, plan.jobs[0].level);
  EXPECT_LT(plan.jobs[0].level, plan.jobs[2].level);

  auto cct = [](const SimResult& r, size_t i) { return r.jobs[i].jct.ToSeconds() - 0.001; };
  const SimResult sincronia = Simulated(topo, "sincronia", jobs, o);
  ASSERT_EQ(sincronia.jobs.size(), 3u);
  EXPECT_NEAR(cct(sincronia, 0), 5.0, 1e-3);
  EXPECT_NEAR(cct(sincronia, 1), 3.0, 1e-3);
  EXPECT_NEAR(cct(sincronia, 2), 5.5, 1e-3);
  const SimResult ecmp = Simulated(topo, "ecmp", jobs, o);
  EXPECT_NEAR(cct(ecmp, 0), 4.0, 1e-3);
  EXPECT_NEAR(cct(ecmp, 1), 5.0, 1e-3);
  EXPECT_NEAR(cct(ecmp, 2), 5.5, 1e-3);
  const double mean_bssi = (cct(sincronia, 0) + cct(sincronia, 1) + cct(sincronia, 2)) / 3;
  const double mean_fair = (cct(ecmp, 0) + cct(ecmp, 1) + cct(ecmp, 2)) / 3;
  EXPECT_NEAR(mean_bssi, 4.5, 1e-3);
  EXPECT_LT(mean_bssi, mean_fair);
}

}  // namespace
}  // namespace crux::sim
