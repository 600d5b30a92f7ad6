#include "crux/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/plan/priority.h"
#include "crux/core/topology/builders.h"
#include "crux/testing/sim_jobs.h"
#include "crux/testing/test_topologies.h"

namespace crux::sim {
namespace {

using core::Bandwidth;
using core::Bytes;
using core::Duration;
using core::JobSpec;
using core::NodeId;
using core::Topology;

using core::testing::Must;
using testing::ClosWorkload;
using testing::OracleOptions;
using testing::PairJob;
using testing::RingJob;
using testing::RunFullAndFast;
using testing::RunSim;
using testing::SmallClos;
using testing::TwoHosts;

// The engine's tests run under the oracle (OracleOptions: every job planned from its true spec at
// once): they test the network and job model, fast-forward and link events against closed-form
// figures. The control loop has its own tests (control_loop_host_test.cc).

// ---- The digest's Example 1 under `fixed` ranks ----

class Example1Test : public ::testing::TestWithParam<bool> {};

TEST_P(Example1Test, LongIterationJobFirstGivesThirtySevenAndAHalfPercent) {
  const Topology topo = TwoHosts();
  std::vector<SimJob> jobs = {PairJob(topo, "job1", 2, 2), PairJob(topo, "job2", 1, 1)};
  jobs[0].spec.fixed_rank = 0;
  jobs[1].spec.fixed_rank = 1;
  SimOptions o = OracleOptions(2400);
  o.fast_forward = GetParam();
  const SimResult r = RunSim(topo, "fixed", jobs, o);
  EXPECT_EQ(r.policy, "fixed");
  EXPECT_NEAR(r.gpu_utilization, 0.375, 0.005);
  // Both jobs iterate every 4 s (digest reconstruction).
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 4.0, 0.01);
  EXPECT_NEAR(r.jobs[1].mean_iteration.ToSeconds(), 4.0, 0.01);
  EXPECT_LT(r.jobs[0].level, r.jobs[1].level);
  EXPECT_EQ(r.fast_forward_jumps > 0, GetParam());
}

TEST_P(Example1Test, ShortIterationJobFirstGivesFortyOnePointSevenPercent) {
  const Topology topo = TwoHosts();
  std::vector<SimJob> jobs = {PairJob(topo, "job1", 2, 2), PairJob(topo, "job2", 1, 1)};
  jobs[0].spec.fixed_rank = 1;
  jobs[1].spec.fixed_rank = 0;
  SimOptions o = OracleOptions(2400);
  o.fast_forward = GetParam();
  const SimResult r = RunSim(topo, "fixed", jobs, o);
  EXPECT_NEAR(r.gpu_utilization, 0.41667, 0.005);
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 6.0, 0.01);
  EXPECT_NEAR(r.jobs[1].mean_iteration.ToSeconds(), 2.0, 0.01);
}

INSTANTIATE_TEST_SUITE_P(FullAndFastForward, Example1Test, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "FastForward" : "Full";
                         });

// The engine agrees with core's independent pair simulator (priority.h) on random pairs.
TEST(SimulatorTest, MatchesCorePairSimulationOnRandomPairs) {
  const Topology topo = TwoHosts();
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> secs(0.2, 2.0);
  std::uniform_real_distribution<double> frac(0.0, 1.0);
  for (int trial = 0; trial < 6; ++trial) {
    const double ca = secs(rng), ta = secs(rng), oa = frac(rng);
    const double cb = secs(rng), tb = secs(rng), ob = frac(rng);
    std::vector<SimJob> jobs = {PairJob(topo, "a", ca, ta, oa), PairJob(topo, "b", cb, tb, ob)};
    jobs[0].spec.fixed_rank = 0;
    jobs[1].spec.fixed_rank = 1;
    const SimResult r = RunSim(topo, "fixed", jobs, OracleOptions(3000));
    core::PairSimOptions po;
    po.measure_periods = 400;
    const core::PairOutcome ref = core::SimulatePair(
        {Duration::Seconds(ca), Duration::Seconds(ta), oa},
        {Duration::Seconds(cb), Duration::Seconds(tb), ob}, /*a_first=*/true, po);
    const double ref_util = (ref.compute_a_s + ref.compute_b_s) / (2 * ref.window_s);
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_NEAR(r.gpu_utilization, ref_util, 0.01);
    EXPECT_NEAR(r.jobs[0].compute_busy.ToSeconds() / 3000, ref.compute_a_s / ref.window_s, 0.01);
  }
}

// ---- Strict priority and fairness ----

TEST(SimulatorTest, StrictPriorityStarvesALowerLevelWhileAHigherOneSaturatesTheLink) {
  const Topology topo = TwoHosts();
  // The high job communicates from the start of every iteration for far longer than it computes:
  // it keeps the link busy all the time.
  std::vector<SimJob> jobs = {PairJob(topo, "high", 0.1, 1.0, 0.0), PairJob(topo, "low", 0.1, 0.5)};
  jobs[0].spec.fixed_rank = 0;
  jobs[1].spec.fixed_rank = 1;
  const SimResult r = RunSim(topo, "fixed", jobs, OracleOptions(100));
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 1.0, 1e-6);
  EXPECT_GE(r.jobs[0].iterations, 99);
  EXPECT_EQ(r.jobs[1].iterations, 0);                                // Never got a byte through.
  EXPECT_NEAR(r.jobs[1].compute_busy.ToSeconds(), 0.1, 1e-9);        // Its first compute only.
  EXPECT_NEAR(r.link_class_utilization.at("host-host"), 0.5, 0.01);  // One direction of two.
}

TEST(SimulatorTest, JobsOnOneLevelShareALinkMaxMinFairly) {
  const Topology topo = TwoHosts();
  // Two identical communication-bound jobs on one level (ecmp): each gets half the link, so an
  // iteration takes its compute plus twice its standalone transfer.
  std::vector<SimJob> jobs = {PairJob(topo, "a", 0.001, 1.0, 0.0),
                              PairJob(topo, "b", 0.001, 1.0, 0.0)};
  const SimResult r = RunSim(topo, "ecmp", jobs, OracleOptions(200));
  EXPECT_EQ(r.jobs[0].level, r.jobs[1].level);
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 2.0, 1e-3);
  EXPECT_NEAR(r.jobs[1].mean_iteration.ToSeconds(), 2.0, 1e-3);
  EXPECT_NEAR(r.jobs[0].standalone_iteration.ToSeconds(), 1.0, 1e-3);
}

TEST(SimulatorTest, PerHopLatencyAddsToEveryIteration) {
  const Topology topo = TwoHosts();
  SimOptions o = OracleOptions(100);
  o.per_hop_latency = Duration::Millis(50);  // One hop.
  const SimResult r = RunSim(topo, "ecmp", {PairJob(topo, "a", 1.0, 1.0)}, o);
  EXPECT_NEAR(r.jobs[0].mean_iteration.ToSeconds(), 2.05, 1e-6);
}

// ---- A small Clos with several jobs (SmallClos, ClosWorkload) ----

TEST(SimulatorTest, ConservesBytesWhenEveryJobFinishes) {
  const Topology topo = SmallClos();
  std::vector<SimJob> jobs = ClosWorkload(topo);
  for (SimJob& j : jobs) {
    j.duration.reset();
    j.iterations = 40;
  }
  const SimResult r = RunSim(topo, "crux", jobs, OracleOptions(1000));
  for (const JobResult& j : r.jobs) {
    ASSERT_TRUE(j.finish.has_value()) << j.id;
    EXPECT_EQ(j.iterations, 40);
  }
  EXPECT_GT(r.bytes_sent, 0);
  EXPECT_NEAR(r.bytes_delivered, r.bytes_sent, 1e-9 * r.bytes_sent);
  EXPECT_EQ(r.bytes_in_flight, 0);
  // Every byte counted on its links: ring traffic crosses NIC-ToR links on both ends.
  EXPECT_GT(r.link_class_utilization.at("nic-tor"), 0);
}

TEST(SimulatorTest, CutShortFlowsAreCountedInFlight) {
  const Topology topo = SmallClos();
  SimOptions o = OracleOptions(20.05);  // Stops in the middle of communication phases.
  const SimResult r = RunSim(topo, "ecmp", ClosWorkload(topo), o);
  EXPECT_GT(r.bytes_in_flight, 0);
  EXPECT_NEAR(r.bytes_delivered + r.bytes_in_flight, r.bytes_sent, 1e-9 * r.bytes_sent);
}

TEST(SimulatorTest, IdealIsAtLeastEveryPolicyOnAContendedCase) {
  const Topology topo = SmallClos();
  const std::vector<SimJob> jobs = ClosWorkload(topo);
  const SimOptions o = OracleOptions(120);
  const SimResult ideal = RunSim(topo, "ideal", jobs, o);
  EXPECT_GT(ideal.gpu_utilization, 0);
  for (const char* p : {"crux", "ecmp", "crux-pa", "crux-ps-pa", "sincronia", "taccl", "cassini"}) {
    const SimResult r = RunSim(topo, p, jobs, o);
    EXPECT_LE(r.gpu_utilization, ideal.gpu_utilization + 1e-9) << p;
    EXPECT_GT(r.gpu_utilization, 0) << p;
  }
  // Two-job Example 1 as well: alone each job keeps its GPUs busy half the time.
  const Topology two = TwoHosts();
  const SimResult e1 =
      RunSim(two, "ideal", {PairJob(two, "job1", 2, 2), PairJob(two, "job2", 1, 1)}, o);
  EXPECT_NEAR(e1.gpu_utilization, 0.5, 1e-3);
}

void ExpectSameResult(const SimResult& a, const SimResult& b) {
  EXPECT_EQ(a.gpu_utilization, b.gpu_utilization);
  EXPECT_EQ(a.cluster_utilization, b.cluster_utilization);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.replans, b.replans);
  EXPECT_EQ(a.bytes_sent, b.bytes_sent);
  EXPECT_EQ(a.link_class_utilization, b.link_class_utilization);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].iterations, b.jobs[i].iterations);
    EXPECT_EQ(a.jobs[i].compute_busy, b.jobs[i].compute_busy);
    EXPECT_EQ(a.jobs[i].jct, b.jobs[i].jct);
    EXPECT_EQ(a.jobs[i].level, b.jobs[i].level);
  }
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].gpu_utilization, b.samples[i].gpu_utilization);
  }
}

TEST(SimulatorTest, SameSeedGivesIdenticalResults) {
  const Topology topo = SmallClos();
  SimOptions o = OracleOptions(100);
  o.policy.planner.seed = 42;
  const SimResult a = RunSim(topo, "crux", ClosWorkload(topo), o);
  const SimResult b = RunSim(topo, "crux", ClosWorkload(topo), o);
  ExpectSameResult(a, b);
  EXPECT_GT(a.events, 1000u);
}

TEST(SimulatorTest, FastForwardMatchesFullSimulation) {
  const Topology topo = SmallClos();
  const std::vector<SimJob> jobs = ClosWorkload(topo);
  for (const char* policy : {"crux", "ecmp"}) {
    SimOptions o = OracleOptions(400);
    const auto [full, fast] = RunFullAndFast(topo, policy, jobs, o);
    SCOPED_TRACE(policy);
    EXPECT_GT(fast.fast_forward_jumps, 0u);
    EXPECT_GT(fast.fast_forwarded, Duration::Seconds(150));
    EXPECT_LT(fast.events, full.events * 3 / 4);
    EXPECT_NEAR(fast.gpu_utilization, full.gpu_utilization, 0.005);
    EXPECT_NEAR(fast.cluster_utilization, full.cluster_utilization, 0.005);
    EXPECT_NEAR(fast.bytes_sent, full.bytes_sent, 0.01 * full.bytes_sent);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_NEAR(fast.jobs[i].iterations, full.jobs[i].iterations,
                  2 + 0.01 * full.jobs[i].iterations)
          << jobs[i].spec.id;
      EXPECT_NEAR(fast.jobs[i].mean_iteration.ToSeconds(), full.jobs[i].mean_iteration.ToSeconds(),
                  0.01 * full.jobs[i].mean_iteration.ToSeconds());
    }
    for (size_t s = 0; s < full.samples.size(); ++s) {
      EXPECT_NEAR(fast.samples[s].gpu_utilization, full.samples[s].gpu_utilization, 0.02) << s;
    }
  }
}

// Jobs with commensurate periods (0.3 s and 0.5 s standalone, sharing the 1 Gbps link at one
// level) settle into a joint cycle of three anchor iterations: fast-forward recognises it as
// exactly periodic (no approximate group) and jumps, and matches the full simulation.
TEST(SimulatorTest, FastForwardRecognisesAJointCycleOfCommensuratePeriods) {
  const Topology topo = TwoHosts();
  const std::vector<SimJob> jobs = {PairJob(topo, "a", 0.2, 0.1), PairJob(topo, "b", 0.4, 0.1)};
  SimOptions o = OracleOptions(600);
  const auto [full, fast] = RunFullAndFast(topo, "ecmp", jobs, o);
  EXPECT_GT(fast.fast_forward_jumps, 0u);
  EXPECT_EQ(fast.fast_forward_approximate, 0u);
  EXPECT_GT(fast.fast_forwarded, Duration::Seconds(500));
  EXPECT_NEAR(fast.gpu_utilization, full.gpu_utilization, 1e-3);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_NEAR(fast.jobs[i].iterations, full.jobs[i].iterations, 2) << jobs[i].spec.id;
  }
  // a runs 5 iterations per 3 of b (the anchor): the cycle is 3 anchor iterations long, so a
  // snapshot matches one 3 anchor iterations back, not the previous one.
  EXPECT_NEAR(3.0 * full.jobs[0].iterations, 5.0 * full.jobs[1].iterations, 5.0);
}

// Groups sleep on their own (issue #30 item 1): a steady job sleeps through a run in which
// another group, two contending jobs of incommensurate periods, is never steady (approximate
// steadiness off). The old global jump waited for every group and never jumped here; the
// contending pair is simulated exactly as in the full run, the sleeper is credited its rates.
TEST(SimulatorTest, ASteadyGroupSleepsWhileAnotherIsNeverSteady) {
  const Topology topo = SmallClos();
  const std::vector<SimJob> jobs = {RingJob(topo, "a", {0, 1}, 0.3, 2000),
                                    RingJob(topo, "b", {4, 5}, 0.2, 1500),
                                    RingJob(topo, "c", {4, 5}, 0.2828427, 1500)};
  SimOptions o = OracleOptions(400);
  o.fast_forward_tolerance = 0;
  const auto [full, fast] = RunFullAndFast(topo, "ecmp", jobs, o);
  EXPECT_GT(fast.fast_forward_jumps, 0u);
  EXPECT_EQ(fast.fast_forwarded, Duration::Zero()) << "the pair is always simulated";
  EXPECT_GT(fast.group_slept, Duration::Seconds(390));
  EXPECT_LT(fast.events, full.events * 3 / 4);
  ASSERT_GT(full.jobs[0].iterations, 500);
  EXPECT_NEAR(fast.jobs[0].iterations, full.jobs[0].iterations, 1);
  EXPECT_NEAR(fast.jobs[0].compute_busy.ToSeconds(), full.jobs[0].compute_busy.ToSeconds(), 0.3);
  for (size_t i = 1; i < jobs.size(); ++i) {
    EXPECT_EQ(fast.jobs[i].iterations, full.jobs[i].iterations) << jobs[i].spec.id;
    EXPECT_EQ(fast.jobs[i].compute_busy, full.jobs[i].compute_busy) << jobs[i].spec.id;
  }
  EXPECT_NEAR(fast.gpu_utilization, full.gpu_utilization, 1e-3);
}

// A sleeping group woken early by events elsewhere (arrivals and departures of short jobs on other
// hosts) lands on its last whole period and catches up the rest in detail, so its figures are the
// full simulation's: same iterations, compute within rounding. Resuming from the state it fell
// asleep in instead restarted its iteration (compute first) at every event and overstated its
// compute by a share of a period per event.
TEST(SimulatorTest, AGroupWokenEarlyResumesInTheExactState) {
  const Topology topo = SmallClos();
  std::vector<SimJob> jobs = {RingJob(topo, "a", {0, 1}, 0.3, 2000)};
  for (int i = 0; i < 12; ++i) {
    SimJob j = RingJob(topo, "s" + std::to_string(i), {4, 5}, 0.05, 200);
    j.arrival = Duration::Seconds(17.3 + 29.71 * i);
    j.duration = Duration::Seconds(3.1);
    jobs.push_back(j);
  }
  SimOptions o = OracleOptions(400);
  const auto [full, fast] = RunFullAndFast(topo, "ecmp", jobs, o);
  EXPECT_GT(fast.fast_forward_jumps, 12u);
  EXPECT_LT(fast.events, full.events / 4);
  ASSERT_GT(full.jobs[0].iterations, 500);
  EXPECT_EQ(fast.jobs[0].iterations, full.jobs[0].iterations);
  EXPECT_NEAR(fast.jobs[0].compute_busy.ToSeconds(), full.jobs[0].compute_busy.ToSeconds(), 1e-3);
  EXPECT_NEAR(fast.gpu_utilization, full.gpu_utilization, 1e-6);
}

// Random workloads (sizes, patterns, overlaps, arrivals, durations, iteration counts) under
// several policies: fast-forward stays within a small tolerance of the full simulation.
TEST(SimulatorTest, FastForwardMatchesFullSimulationOnRandomWorkloads) {
  core::Clos2Params cp;
  cp.tors = 3;
  cp.aggs = 2;
  cp.hosts_per_tor = 4;
  cp.host.nics_per_host = 2;
  cp.host.nic_gbps = 100;
  cp.uplink_gbps = 100;
  const Topology topo = Must(core::BuildClos2(cp));
  std::mt19937 rng(5);
  const char* policies[] = {"crux", "ecmp", "sincronia", "ideal", "crux-pa", "cassini"};
  uint64_t full_events = 0, fast_events = 0;
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<SimJob> jobs;
    const int n = 2 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) {
      std::vector<int> hosts;
      const int h = 2 + static_cast<int>(rng() % 3);
      while (static_cast<int>(hosts.size()) < h) {
        const int x = static_cast<int>(rng() % 12);
        if (std::find(hosts.begin(), hosts.end(), x) == hosts.end()) hosts.push_back(x);
      }
      SimJob j = RingJob(topo, "j" + std::to_string(i), hosts, 0.05 + 0.3 * (rng() % 1000) / 1e3,
                         50 + rng() % 2000, (rng() % 5) / 4.0);
      if (rng() % 2) j.spec.pattern = core::TrafficPattern::kAllToAll;
      j.arrival = Duration::Seconds(rng() % 100);
      if (rng() % 2) {
        j.duration = Duration::Seconds(20 + rng() % 200);
      } else if (rng() % 2) {
        j.iterations = 50 + rng() % 500;
      }
      jobs.push_back(j);
    }
    SimOptions o = OracleOptions(600);
    const auto [full, fast] = RunFullAndFast(topo, policies[trial], jobs, o);
    SCOPED_TRACE(std::string(policies[trial]) + " trial " + std::to_string(trial));
    EXPECT_NEAR(fast.gpu_utilization, full.gpu_utilization, 0.01);
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_NEAR(fast.jobs[i].iterations, full.jobs[i].iterations,
                  2 + 0.02 * full.jobs[i].iterations);
      EXPECT_NEAR(fast.jobs[i].compute_busy.ToSeconds(), full.jobs[i].compute_busy.ToSeconds(),
                  0.02 * full.jobs[i].compute_busy.ToSeconds() + 1.0);
    }
    full_events += full.events;
    fast_events += fast.events;
  }
  EXPECT_LT(fast_events, full_events / 2);
}

// ---- Link events ----

TEST(SimulatorTest, LinkFailureTriggersAReplanAndTrafficMoves) {
  const Topology topo = SmallClos();
  // One cross-ToR job; whichever uplink of tor0 it uses fails at 10 s. Without re-routing it
  // would stall for good; with the re-plan it keeps iterating on the other Agg.
  const SimJob job = RingJob(topo, "x", {0, 4}, 0.05, 200, 1.0);
  SimOptions o = OracleOptions(30);
  const SimResult before = RunSim(topo, "crux", {job}, o);
  ASSERT_GT(before.jobs[0].iterations, 100);
  const NodeId tor0 = Must(topo.FindNode("tor0"));
  for (const char* agg : {"agg0", "agg1"}) {
    const core::LinkId up = Must(topo.FindLink(tor0, Must(topo.FindNode(agg))));
    const std::vector<LinkEvent> events = {{Duration::Seconds(10), up, Bandwidth()}};
    const SimResult r = RunSim(topo, "crux", {job}, o, events);
    SCOPED_TRACE(agg);
    EXPECT_EQ(r.replans, 2u);  // Arrival and failure.
    EXPECT_EQ(r.replan_failures, 0u);
    // Same progress as without the failure: the flows run on the other uplink (one of the two
    // runs fails the link they were on, and must have moved to keep iterating).
    EXPECT_NEAR(r.jobs[0].iterations, before.jobs[0].iterations, 2);
  }
}

TEST(SimulatorTest, FlowsWaitOnADownLinkWithoutAlternativeAndResumeOnRecovery) {
  const Topology topo = TwoHosts();
  const core::LinkId link =
      Must(topo.FindLink(Must(topo.FindNode("h0")), Must(topo.FindNode("h1"))));
  const std::vector<LinkEvent> events = {{Duration::Seconds(10.5), link, Bandwidth()},
                                         {Duration::Seconds(20.5), link, Bandwidth::Gbps(1)}};
  SimOptions o = OracleOptions(40);
  for (const char* policy : {"ecmp", "ideal"}) {  // Shared and private (isolated) link copies.
    const SimResult r = RunSim(topo, policy, {PairJob(topo, "a", 1.0, 1.0)}, o, events);
    SCOPED_TRACE(policy);
    // 2 s iterations; the one in flight at 10.5 s waits 10 s: (40 - 10) / 2 = 15 iterations.
    EXPECT_EQ(r.jobs[0].iterations, 15);
    EXPECT_GE(r.replan_failures, 1u);  // No path while the only cable is down.
    EXPECT_EQ(r.replans, 3u);
  }
  // Degradation halves the rate: 1 s compute + 2 s transfer.
  const std::vector<LinkEvent> slow = {{Duration::Zero(), link, Bandwidth::Gbps(0.5)}};
  const SimResult d = RunSim(topo, "ecmp", {PairJob(topo, "a", 1.0, 1.0)}, o, slow);
  EXPECT_NEAR(d.jobs[0].mean_iteration.ToSeconds(), 3.0, 1e-6);
}

// ---- Time shifts (CASSINI) through the PolicyFactory overload ----

// Wraps a registered policy and gives every job the same communication time shift.
class ShiftingPolicy final : public core::SchedulingPolicy {
 public:
  ShiftingPolicy(std::unique_ptr<core::SchedulingPolicy> inner, Duration shift)
      : inner_(std::move(inner)), shift_(shift) {}
  std::string_view name() const override { return "shifted"; }
  core::Result<core::Plan> Schedule(const std::vector<JobSpec>& jobs) override {
    CRUX_ASSIGN_OR_RETURN(core::Plan plan, inner_->Schedule(jobs));
    for (core::JobPlan& jp : plan.jobs) jp.time_shift = shift_;
    return plan;
  }

 private:
  std::unique_ptr<core::SchedulingPolicy> inner_;
  Duration shift_;
};

TEST(SimulatorTest, TimeShiftDelaysTheCommunicationPhaseOnce) {
  const Topology topo = TwoHosts();
  const SimOptions o = OracleOptions(20.2);
  auto factory = [&o](Duration shift) -> PolicyFactory {
    return [&o, shift](
               const Topology& t,
               const core::Clock& clock) -> core::Result<std::unique_ptr<core::SchedulingPolicy>> {
      CRUX_ASSIGN_OR_RETURN(auto inner, core::MakePolicy("ecmp", t, o.policy, &clock));
      return std::unique_ptr<core::SchedulingPolicy>(
          std::make_unique<ShiftingPolicy>(std::move(inner), shift));
    };
  };
  const std::vector<SimJob> jobs = {PairJob(topo, "a", 1.0, 1.0)};  // 2 s iterations.
  core::Result<SimResult> plain = Simulate(topo, factory(Duration::Zero()), jobs, {}, o);
  core::Result<SimResult> shifted = Simulate(topo, factory(Duration::Millis(500)), jobs, {}, o);
  ASSERT_TRUE(plain.ok() && shifted.ok());
  EXPECT_EQ(shifted->policy, "shifted");
  EXPECT_EQ(plain->jobs[0].iterations, 10);
  // Iterations end at 2.5, 4.5, ..., 18.5 s (20.5 is past the horizon): the timeline moved by
  // 0.5 s, once.
  EXPECT_EQ(shifted->jobs[0].iterations, 9);
  EXPECT_NEAR(shifted->jobs[0].mean_iteration.ToSeconds(), 18.5 / 9, 1e-6);
  // A factory that fails makes the run fail with its error.
  PolicyFactory broken =
      [](const Topology&,
         const core::Clock&) -> core::Result<std::unique_ptr<core::SchedulingPolicy>> {
    return core::InvalidArgumentError("levels: broken on purpose");
  };
  core::Result<SimResult> r = Simulate(topo, broken, jobs, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("broken on purpose"), std::string::npos);
}

// ---- Metrics and errors ----

TEST(SimulatorTest, SamplesAndUtilisationDefinitions) {
  const Topology topo = TwoHosts();
  SimJob a = PairJob(topo, "a", 1.0, 1.0);  // Alone: busy half the time.
  a.arrival = Duration::Seconds(50);
  SimOptions o = OracleOptions(100);
  o.gpus_per_host = 10;  // 20 GPUs in the cluster; the job has 10.
  const SimResult r = RunSim(topo, "ecmp", {a}, o);
  EXPECT_NEAR(r.gpu_utilization, 0.5, 1e-3);
  EXPECT_NEAR(r.cluster_utilization, 0.5 * 0.5 * 0.5, 1e-3);  // Half the GPUs, half the time.
  ASSERT_EQ(r.samples.size(), 10u);
  EXPECT_EQ(r.samples[0].running_jobs, 0);
  EXPECT_EQ(r.samples[0].gpu_utilization, 0);
  EXPECT_EQ(r.samples[9].running_jobs, 1);
  EXPECT_NEAR(r.samples[9].gpu_utilization, 0.5, 0.01);
  EXPECT_NEAR(r.samples[9].cluster_utilization, 0.25, 0.01);
  EXPECT_EQ(r.jobs[0].jct, Duration::Seconds(50));
  EXPECT_FALSE(r.jobs[0].finish.has_value());
}

TEST(SimulatorTest, RejectsBadInputNamingTheField) {
  const Topology topo = TwoHosts();
  SimJob a = PairJob(topo, "a", 1.0, 1.0);
  auto err = [&](std::vector<SimJob> jobs, SimOptions o, std::vector<LinkEvent> ev = {}) {
    core::Result<SimResult> r = Simulate(topo, "ecmp", jobs, ev, o);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  SimOptions o = OracleOptions(10);
  SimJob bad = a;
  bad.arrival = Duration::Seconds(-1);
  EXPECT_NE(err({bad}, o).find("arrival_s"), std::string::npos);
  bad = a;
  bad.iterations = 0;
  EXPECT_NE(err({bad}, o).find("iterations"), std::string::npos);
  bad = a;
  bad.duration = Duration::Zero();
  EXPECT_NE(err({bad}, o).find("duration_s"), std::string::npos);
  EXPECT_NE(err({a, a}, o).find("duplicate"), std::string::npos);
  bad = a;
  bad.spec.compute_time = Duration::Zero();
  EXPECT_NE(err({bad}, o).find("job 'a'"), std::string::npos);
  SimOptions bo = o;
  bo.horizon = Duration::Zero();
  EXPECT_NE(err({a}, bo).find("horizon"), std::string::npos);
  bo = o;
  bo.sample_interval = Duration::Zero();
  EXPECT_NE(err({a}, bo).find("sample_interval"), std::string::npos);
  EXPECT_NE(err({a}, o, {{Duration::Zero(), core::LinkId(99), Bandwidth()}}).find("link"),
            std::string::npos);
  core::Result<SimResult> r = Simulate(topo, "nope", {a}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

// Issue #10, item 7: a horizon beyond int64 nanoseconds saturated and then overflowed the
// sampling arithmetic ("cannot create std::vector larger than max_size()", or a hang). Every
// time is now bounded by kMaxSimTime, with an error naming the field.
TEST(SimulatorTest, TimesBeyondTheLongestHorizonAreRejected) {
  const Topology topo = TwoHosts();
  const SimJob a = PairJob(topo, "a", 1.0, 1.0);
  auto err = [&](std::vector<SimJob> jobs, SimOptions o, std::vector<LinkEvent> ev = {}) {
    core::Result<SimResult> r = Simulate(topo, "ecmp", jobs, ev, o);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  for (double h : {1e9 + 1, 1e10, 1e15, 1e300}) {
    SimOptions o = OracleOptions(10);
    o.horizon = Duration::Seconds(h);
    o.sample_interval = Duration::Seconds(1e7);
    EXPECT_EQ(err({a}, o).rfind("horizon: must be > 0 and <= 1e+09 s", 0), 0u) << h;
  }
  SimOptions o = OracleOptions(10);
  SimJob bad = a;
  bad.arrival = Duration::Seconds(2e9);
  EXPECT_NE(err({bad}, o).find("arrival_s: must be >= 0 and <= 1e+09"), std::string::npos);
  bad = a;
  bad.duration = Duration::Infinite();
  EXPECT_NE(err({bad}, o).find("duration_s: must be > 0 and <= 1e+09"), std::string::npos);
  bad = a;
  bad.spec.compute_time = Duration::Seconds(5e9);
  EXPECT_NE(err({bad}, o).find("compute_time_s: must be <= 1e+09"), std::string::npos);
  EXPECT_NE(err({a}, o, {{Duration::Infinite(), core::LinkId(0), Bandwidth()}})
                .find("link event #0: at: must be >= 0 and <= 1e+09 s"),
            std::string::npos);
  o.horizon = Duration::Seconds(1e9);
  o.sample_interval = Duration::Seconds(1);
  EXPECT_NE(err({a}, o).find("sample_interval: too small for the horizon (more than 1000000 "
                             "samples; at least 1000 s)"),
            std::string::npos);
}

// Issue #10, item 7: work and memory must not grow with the horizon where nothing happens. A
// 10 s job under a 3,600 s and under a 10^9 s horizon: the same events, the same busy time,
// the same number of samples (the default sampling gives a fixed count), and the idle tail is
// skipped rather than stepped through.
TEST(SimulatorTest, AnIdleTailCostsNothing) {
  const Topology topo = TwoHosts();
  SimJob a = PairJob(topo, "a", 1.0, 1.0);
  a.duration = Duration::Seconds(10);
  auto run = [&](double horizon_s) {
    SimOptions o = OracleOptions(horizon_s);
    o.sample_interval = Duration::Seconds(horizon_s / 500);
    return RunSim(topo, "ecmp", {a}, o);
  };
  const SimResult short_run = run(3600);
  const SimResult long_run = run(kMaxSimSeconds);
  EXPECT_GT(short_run.events, 0u);
  EXPECT_EQ(long_run.events, short_run.events);
  EXPECT_EQ(long_run.flow_events, short_run.flow_events);
  EXPECT_EQ(long_run.jobs[0].compute_busy, short_run.jobs[0].compute_busy);
  EXPECT_EQ(long_run.jobs[0].iterations, short_run.jobs[0].iterations);
  EXPECT_EQ(long_run.simulated, kMaxSimTime);
  ASSERT_EQ(long_run.samples.size(), 500u);
  EXPECT_EQ(long_run.samples[0].running_jobs, 1);
  EXPECT_NEAR(long_run.samples[0].gpu_utilization, 0.5, 0.05);
  EXPECT_EQ(long_run.samples[1].running_jobs, 0);
  EXPECT_EQ(long_run.samples[499].running_jobs, 0);
  EXPECT_EQ(long_run.samples[499].gpu_utilization, 0);
  EXPECT_EQ(long_run.samples[499].t, Duration::Seconds(499 * 2e6));
  // Nothing at all to simulate for the first 10^9 - 20 s: the arrival is the first event.
  SimJob late = a;
  late.arrival = Duration::Seconds(kMaxSimSeconds - 20);
  const SimResult late_run = Must(Simulate(topo, "ecmp", {late}, {}, [&] {
    SimOptions o = OracleOptions(kMaxSimSeconds);
    o.sample_interval = Duration::Seconds(kMaxSimSeconds / 500);
    return o;
  }()));
  EXPECT_EQ(late_run.events, short_run.events);
  EXPECT_EQ(late_run.jobs[0].compute_busy, short_run.jobs[0].compute_busy);
  EXPECT_EQ(late_run.jobs[0].iterations, short_run.jobs[0].iterations);
  EXPECT_EQ(late_run.samples[499].running_jobs, 1);
  // A job that runs to a 10^9 s horizon is jumped over by the fast-forward, not stepped.
  SimJob forever = PairJob(topo, "f", 1.0, 1.0);
  SimOptions o = OracleOptions(kMaxSimSeconds);
  o.sample_interval = Duration::Seconds(kMaxSimSeconds / 500);
  const SimResult ff = RunSim(topo, "ecmp", {forever}, o);
  EXPECT_LT(ff.events, 10'000u);
  EXPECT_GT(ff.fast_forwarded, Duration::Seconds(0.99 * kMaxSimSeconds));
  EXPECT_NEAR(ff.gpu_utilization, 0.5, 1e-3);
}

// Issue #10, item 13: job ids and model names reach logs, CSV and JSON outputs and terminals;
// they follow Crux's one name rule (core::IsValidName), so control characters and escape
// sequences in them are errors, as are overlong ones.
TEST(SimulatorTest, RejectsUnprintableOrOverlongIds) {
  const Topology topo = TwoHosts();
  const SimOptions o = OracleOptions(10);
  auto err = [&](const SimJob& j) {
    core::Result<SimResult> r = Simulate(topo, "ecmp", {j}, {}, o);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  SimJob j = PairJob(topo, "a\x1b[2Jb", 1.0, 1.0);
  EXPECT_EQ(err(j), "job 'a\\x1b[2Jb' (#0): id: must be 1-128 characters of [A-Za-z0-9._:/-]");
  j = PairJob(topo, std::string(core::kMaxNameLength + 1, 'x'), 1.0, 1.0);
  EXPECT_NE(err(j).find("(#0): id: must be 1-128 characters"), std::string::npos);
  j = PairJob(topo, "a", 1.0, 1.0);
  j.model = "bert\n";
  EXPECT_EQ(err(j),
            "job 'a' (#0): model: must be 1-128 characters of [A-Za-z0-9._:/-] (got 'bert\\x0a')");
  j.model = "bert_large";
  EXPECT_EQ(err(j), "ok");
}

// Anything thrown inside a run (here by the progress callback; in practice std::bad_alloc when
// a workload outgrows the machine) comes back as an error status, never as an exception.
TEST(SimulatorTest, ExceptionsInsideARunBecomeAnErrorStatus) {
  const Topology topo = TwoHosts();
  SimOptions o = OracleOptions(10);
  o.progress = [](const Progress&) { throw std::bad_alloc(); };
  core::Result<SimResult> r = Simulate(topo, "ecmp", {PairJob(topo, "a", 1.0, 1.0)}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("out of memory"), std::string::npos);
  o.progress = [](const Progress&) { throw std::runtime_error("boom"); };
  r = Simulate(topo, "ecmp", {PairJob(topo, "a", 1.0, 1.0)}, {}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("boom"), std::string::npos);
}

TEST(SimulatorTest, ProgressIsReportedAtTheEnd) {
  const Topology topo = TwoHosts();
  SimOptions o = OracleOptions(10);
  int calls = 0;
  Progress last;
  o.progress = [&](const Progress& p) {
    ++calls;
    last = p;
  };
  RunSim(topo, "ecmp", {PairJob(topo, "a", 1.0, 1.0)}, o);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(last.simulated, Duration::Seconds(10));
  EXPECT_GT(last.events, 0u);
}

}  // namespace
}  // namespace crux::sim
