// The routed variants `crux-guard` and `crux-pa-guard` (docs/policies.md): Crux's pair
// comparison run on each job's communication time on its routed paths. Hand-computed cases for
// RoutedCommTime, RetimedPriorityInput and the decision they change (docs/evaluation.md §11).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crux/core/plan/compression.h"
#include "crux/core/plan/planner.h"
#include "crux/core/plan/priority.h"
#include "crux/core/policies/policies.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/path_finder.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::policies::CommBudgetSeconds;
using ::crux::core::policies::JobLinkShares;
using ::crux::core::policies::LiftGuardedLevels;
using ::crux::core::policies::LinkShare;
using ::crux::core::policies::PriorityCannotHelp;
using ::crux::core::policies::RetimedPriorityInput;
using ::crux::core::policies::RoutedCommTime;
using ::crux::core::policies::SimulatePairFair;
using ::crux::core::policies::StrictOrderPays;
using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::Must;

constexpr int64_t kGB = 1'000'000'000;

// Index of the path of `paths` that uses link `l`.
size_t PathVia(const PathSet& paths, LinkId l) {
  for (size_t i = 0; i < paths.size(); ++i) {
    bool uses = false;
    paths.ForEachLink(i, [&](LinkId x) { uses = uses || x == l; });
    if (uses) return i;
  }
  ADD_FAILURE() << "no path via link " << l.value();
  return 0;
}

// host0 -> host2 over both NICs, 1 GB per flow (8 Gb), every link 100 Gbps.
JobRouting TwoFlows(const Clos2Small& c, PathFinder& finder, int agg_a, int agg_b) {
  JobRouting r;
  r.flows = {{c.nic[0][0], c.nic[2][0], Bytes::Of(kGB)},
             {c.nic[0][1], c.nic[2][1], Bytes::Of(kGB)}};
  for (const FlowDemand& f : r.flows) r.paths.push_back(Must(finder.Paths(f.src, f.dst), "Paths"));
  r.choice = {PathVia(*r.paths[0], c.tor_agg[0][agg_a]), PathVia(*r.paths[1], c.tor_agg[0][agg_b])};
  return r;
}

TEST(RoutedCommTimeTest, IsTheMostLoadedLinkOfTheJobsOwnFlows) {
  const Clos2Small c = MakeClos2Small();
  PathFinder finder(c.topo);
  // Distinct Aggs: every link carries one flow, 8 Gb / 100 Gbps = 80 ms.
  EXPECT_NEAR(RoutedCommTime(c.topo, TwoFlows(c, finder, 0, 1)).ToSeconds(), 0.08, 1e-12);
  // Both through agg0 (an ECMP collision): tor0 -> agg0 carries 16 Gb, 160 ms.
  EXPECT_NEAR(RoutedCommTime(c.topo, TwoFlows(c, finder, 0, 0)).ToSeconds(), 0.16, 1e-12);
}

TEST(JobLinkSharesTest, CountsSecondsAndFlowsPerLink) {
  const Clos2Small c = MakeClos2Small();
  PathFinder finder(c.topo);
  const std::vector<LinkShare> shares = JobLinkShares(c.topo, TwoFlows(c, finder, 0, 0));
  bool found = false;
  for (size_t i = 0; i < shares.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(shares[i - 1].link, shares[i].link);
    }
    if (shares[i].link == c.tor_agg[0][0].value()) {
      found = true;
      EXPECT_EQ(shares[i].flows, 2);
      EXPECT_NEAR(shares[i].seconds, 0.16, 1e-12);
    }
  }
  EXPECT_TRUE(found);
}

TEST(CommBudgetSecondsTest, IsReadyToIterationEnd) {
  // Hidden: compute 1 s, ready at 0.4 s, 0.1 s of communication -> 0.6 s of budget.
  EXPECT_DOUBLE_EQ(CommBudgetSeconds(PairJob{Duration::Seconds(1), Duration::Seconds(0.1), 0.4}),
                   0.6);
  // Exposed: 0.9 s of communication from 0.4 s -> the budget is the communication itself.
  EXPECT_DOUBLE_EQ(CommBudgetSeconds(PairJob{Duration::Seconds(1), Duration::Seconds(0.9), 0.4}),
                   0.9);
}

// u sends 0.2 s on link 7 (one flow) and 0.5 s on link 9; v shares link 7 only.
TEST(PriorityCannotHelpTest, HandComputedShares) {
  const std::vector<LinkShare> u = {{7, 0.2, 1}, {9, 0.5, 2}};
  // v with one flow on link 7: u gets half, 0.4 s <= budget 0.5 -> priority cannot help u.
  EXPECT_TRUE(PriorityCannotHelp(u, 0.5, {{3, 1.0, 1}, {7, 0.3, 1}}));
  // v with three flows on link 7: u gets a quarter, 0.8 s > 0.5 -> it may help.
  EXPECT_FALSE(PriorityCannotHelp(u, 0.5, {{7, 0.3, 3}}));
  // Budget 0.3: even half the link is too little (0.4 s).
  EXPECT_FALSE(PriorityCannotHelp(u, 0.3, {{7, 0.3, 1}}));
  // v shares link 9, where u has two flows against v's two: 0.5 * 4 / 2 = 1.0 > 0.9.
  EXPECT_FALSE(PriorityCannotHelp(u, 0.9, {{9, 0.1, 2}}));
  EXPECT_TRUE(PriorityCannotHelp(u, 1.0, {{9, 0.1, 2}}));
  // No shared link.
  EXPECT_TRUE(PriorityCannotHelp(u, 0.0, {{8, 5.0, 1}}));
}

// DAG over ranks 0..3 (node = rank): 0 -> 1 guarded, 0 -> 2 unguarded, 1 -> 3 guarded,
// 2 -> 3 unguarded. Compression gave levels 0, 1, 1, 2.
//  - node 1: guarded in-edge from level 0 -> up to level 0.
//  - node 2: unguarded and cut from level 0 -> stays at 1 (level[0] + 1).
//  - node 3: guarded from node 1 (now 0), unguarded and cut from node 2 (level 1) -> 2: stays.
// From levels 0, 1, 2, 2 node 2 rises to 1 (as high as its cut allows), then node 3 stays at 2.
// Dropping edge 2 -> 3 lets node 3 rise to node 1's level 0.
TEST(LiftGuardedLevelsTest, HandComputedDag) {
  ContentionDag dag;
  dag.num_nodes = 4;
  dag.edges = {{0, 1, 1.0}, {0, 2, 1.0}, {1, 3, 1.0}, {2, 3, 1.0}};
  const std::vector<int> rank = {0, 1, 2, 3};
  std::vector<int> level = {0, 1, 1, 2};
  LiftGuardedLevels(dag, {1, 0, 1, 0}, rank, level);
  EXPECT_EQ(level, (std::vector<int>{0, 0, 1, 2}));
  EXPECT_TRUE(IsValidCompression(dag, level, 3));

  level = {0, 1, 2, 2};
  LiftGuardedLevels(dag, {1, 0, 1, 0}, rank, level);
  EXPECT_EQ(level, (std::vector<int>{0, 0, 1, 2}));

  ContentionDag three = dag;
  three.edges = {{0, 1, 1.0}, {0, 2, 1.0}, {1, 3, 1.0}};
  level = {0, 1, 1, 2};
  LiftGuardedLevels(three, {1, 0, 1}, rank, level);
  EXPECT_EQ(level, (std::vector<int>{0, 0, 1, 0}));
  EXPECT_TRUE(IsValidCompression(three, level, 3));

  // Nothing guarded: every cut is kept, nodes only rise to them (node 3 from 5 to 2).
  level = {0, 1, 1, 5};
  LiftGuardedLevels(dag, {0, 0, 0, 0}, rank, level);
  EXPECT_EQ(level, (std::vector<int>{0, 1, 1, 2}));
  EXPECT_EQ(CutWeight(dag, level), 4.0);
}

TEST(RetimedPriorityInputTest, RecomputesPeriodRateAndIntensity) {
  PriorityInput in;
  in.timing = PairJob{Duration::Seconds(1.0), Duration::Seconds(0.5), 0.5};
  in.intensity = 2e12;  // W / t = 1e12 / 0.5.
  in.bytes_per_iteration = 4e9;
  in.bytes_per_sec = 4e9;  // Standalone period max(1, 0.5 + 0.5) = 1 s.
  in.gpus = 8;
  in.has_traffic = true;
  const PriorityInput out = RetimedPriorityInput(in, Flops::Of(1e12), Duration::Seconds(1.5));
  EXPECT_EQ(out.timing.comm, Duration::Seconds(1.5));
  EXPECT_EQ(out.timing.compute, in.timing.compute);
  EXPECT_EQ(out.timing.overlap_start, 0.5);
  EXPECT_DOUBLE_EQ(out.bytes_per_sec, 2e9);  // Period max(1, 0.5 + 1.5) = 2 s.
  EXPECT_DOUBLE_EQ(out.intensity, 1e12 / 1.5);
  EXPECT_EQ(out.gpus, 8);
  EXPECT_TRUE(out.has_traffic);
  // No routed time, or no traffic: unchanged.
  EXPECT_EQ(RetimedPriorityInput(in, Flops::Of(1e12), Duration::Zero()).timing.comm,
            in.timing.comm);
  PriorityInput silent;
  EXPECT_FALSE(RetimedPriorityInput(silent, Flops::Of(1e12), Duration::Seconds(1)).has_traffic);
}

// The 4:1 mechanism in miniature (docs/evaluation.md §11); both jobs have 8 GPUs and do the
// same work per iteration. Reference r: compute 1 s, its communication ready at 0.8 s;
// standalone it needs 0.2 s (period 1 s, link busy [0.8, 1) of every period, no slack), on its
// ECMP paths 1.2 s (period 2 s, busy [0.8, 2)). Job j: compute 0.7 s, ready at 0.35 s, needs
// 0.1 s, so it has 0.35 s from ready to the end of its compute; I_j = 2 I_r.
//  - Standalone, r first: r holds the link for at most 0.2 s at a time, so j always finds its
//    0.1 s before its compute ends: j loses nothing (dS_j = 0). j first: modulo 1 s, j's
//    transmissions start at 0.05, 0.15, 0.35, 0.45, 0.55, 0.75, 0.85 (periods 0.7 and 1 s), which
//    leave no free 0.2 s for r, so r keeps being preempted and, without slack, slows down
//    (dS_r > 0). Crux finds "only the reference gains": k_j = 1e-3, j ranks below r whatever the
//    intensities. On these timings r first is indeed worth more computation than one level,
//    where r waits for half of each of j's transmissions that fall into its own.
//  - Routed, r first: r holds the link for 1.2 s at a time, longer than j's 0.35 s, so j waits
//    for r's compute gaps and completes at most one iteration per gap (about 1 per second
//    instead of 1 / 0.7). On one level j's 0.1 s takes at most 0.2 s, within its 0.35 s, and r
//    loses half of it per overlap. So on the routed timings strict priority is worth less
//    computation than one level: the guard keeps the two on one level.
struct MiniPair {
  PriorityInput r, j;
};

MiniPair MakeMiniPair() {
  MiniPair m;
  const double work = 1e12;
  m.r.timing = PairJob{Duration::Seconds(1), Duration::Seconds(0.2), 0.8};
  m.r.intensity = work / 0.2;
  m.r.bytes_per_iteration = 6e9;
  m.r.bytes_per_sec = 6e9;
  m.r.gpus = 8;
  m.r.has_traffic = true;
  m.j.timing = PairJob{Duration::Seconds(0.7), Duration::Seconds(0.1), 0.5};
  m.j.intensity = work / 0.1;
  m.j.bytes_per_iteration = 1e9;
  m.j.bytes_per_sec = 1e9 / 0.7;
  m.j.gpus = 8;
  m.j.has_traffic = true;
  return m;
}

TEST(RoutedPrioritiesTest, StandaloneTimingPutsTheHiddenJobBelowTheReference) {
  const MiniPair m = MakeMiniPair();
  const Correction c = CompareWithReference(m.j.timing, m.r.timing);
  EXPECT_EQ(c.finding, PairFinding::kOnlyRefGains);
  EXPECT_EQ(c.gain_job, 0.0);
  EXPECT_GT(c.loss_reference, 0.0);
  const PriorityAssignment a = AssignPriorities({m.r, m.j});
  EXPECT_EQ(a.reference, 0);
  EXPECT_EQ(a.rank[1], 1);  // j below r although I_j = 2 I_r.
}

// Fair sharing by hand. Two jobs, compute 1 s, communication ready at once: with 0.5 s each
// they share the link for 1 s at half rate, done exactly when compute ends (no loss); with 1 s
// each they need 2 s, so each computes half the time and sends at half rate throughout.
TEST(SimulatePairFairTest, HandComputedShares) {
  const PairJob half{Duration::Seconds(1), Duration::Seconds(0.5), 0.0};
  PairOutcome o = SimulatePairFair(half, half);
  ASSERT_GT(o.window_s, 0.0);
  EXPECT_NEAR(o.compute_a_s / o.window_s, 1.0, 1e-9);
  EXPECT_NEAR(o.compute_b_s / o.window_s, 1.0, 1e-9);
  EXPECT_NEAR(o.transmit_a_s / o.window_s, 0.5, 1e-9);
  const PairJob full{Duration::Seconds(1), Duration::Seconds(1), 0.0};
  o = SimulatePairFair(full, full);
  ASSERT_GT(o.window_s, 0.0);
  EXPECT_NEAR(o.compute_a_s / o.window_s, 0.5, 1e-9);
  EXPECT_NEAR(o.compute_b_s / o.window_s, 0.5, 1e-9);
  EXPECT_NEAR(o.transmit_b_s / o.window_s, 0.5, 1e-9);
  // Against a job that never transmits, a job runs as alone: period max(1, 0.5 + 1) = 1.5 s.
  const PairJob quiet{Duration::Seconds(1), Duration::Zero(), 1.0};
  const PairJob late{Duration::Seconds(1), Duration::Seconds(1), 0.5};
  o = SimulatePairFair(late, quiet);
  EXPECT_NEAR(o.compute_a_s / o.window_s, 1.0 / 1.5, 1e-9);
  EXPECT_NEAR(o.compute_b_s / o.window_s, 1.0, 1e-9);
  // Strict priority gains nothing over fair sharing in the first two cases: no gain, no levels.
  EXPECT_FALSE(StrictOrderPays(half, 8, half, 8));
  EXPECT_FALSE(StrictOrderPays(full, 8, full, 8));  // 1 + 0 = 0.5 + 0.5.
}

TEST(StrictOrderPaysTest, StandaloneYesRoutedNo) {
  const MiniPair m = MakeMiniPair();
  EXPECT_TRUE(StrictOrderPays(m.r.timing, 8, m.j.timing, 8));
  const PriorityInput r = RetimedPriorityInput(m.r, Flops::Of(1e12), Duration::Seconds(1.2));
  EXPECT_FALSE(StrictOrderPays(r.timing, 8, m.j.timing, 8));
  // j above r does not pay either: on one level j's 0.1 s at half rate (0.2 s) still fits its
  // 0.35 s, and r waits for half of it instead of all of it.
  EXPECT_FALSE(StrictOrderPays(m.j.timing, 8, r.timing, 8));
  // Jobs that do not interact: no gain either way.
  const PairJob quiet{Duration::Seconds(1), Duration::Zero(), 1.0};
  EXPECT_FALSE(StrictOrderPays(quiet, 8, m.j.timing, 8));
  EXPECT_FALSE(StrictOrderPays(m.j.timing, 8, quiet, 8));
}

// Without collisions the routed times are the standalone ones and `crux-guard` decides as
// `crux` does (two single-flow jobs, Crux's paths).
TEST(CruxGuardPolicyTest, EqualsCruxWithoutSelfCollisions) {
  const Clos2Small c = MakeClos2Small();
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 2; ++i) {
    JobSpec s;
    s.id = i == 0 ? "slow" : "fast";
    s.hosts = {c.host[1 - i], c.host[3 - i]};
    s.gpus_per_host = 1;
    s.compute_time = Duration::Millis(100);
    s.flops_per_iteration = Flops::Of(i == 0 ? 1e12 : 1e13);
    s.pattern = TrafficPattern::kExplicit;
    s.flows = {{c.nic[1 - i][0], c.nic[3 - i][0], Bytes::Of(kGB)}};
    jobs.push_back(s);
  }
  PolicyOptions o;
  o.planner.levels = 2;
  const Plan crux = Must(Must(MakePolicy("crux", c.topo, o), "Make")->Schedule(jobs), "crux");
  const Plan routed =
      Must(Must(MakePolicy("crux-guard", c.topo, o), "Make")->Schedule(jobs), "routed");
  ASSERT_EQ(routed.jobs.size(), crux.jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(routed.jobs[j].rank, crux.jobs[j].rank);
    EXPECT_EQ(routed.jobs[j].level, crux.jobs[j].level);
    EXPECT_EQ(routed.jobs[j].k, crux.jobs[j].k);
    EXPECT_DOUBLE_EQ(routed.jobs[j].priority, crux.jobs[j].priority);
    EXPECT_EQ(routed.jobs[j].flows[0].path, crux.jobs[j].flows[0].path);
  }
  EXPECT_EQ(routed.reference_job, crux.reference_job);
}

// The j00069 mechanism (docs/evaluation.md §11) through the whole policy. "exposed": two 1 GB
// flows host1/nic0 -> host3/nic0, compute 0.1 s, no overlap: its bottleneck is its own NIC
// link (16 Gb / 100 Gbps = 0.16 s, period 0.26 s). "hidden": two 100 MB flows from host0's two
// NICs to host2's, compute 1 s, ready after 0.2 s. The four tor0 -> tor1 flows need the three
// Aggs, so one uplink carries a flow of each. Crux ranks exposed first (hidden gains nothing in
// the pair comparison) and puts hidden one level below. On the shared uplink exposed sends 8 Gb
// = 0.08 s; with hidden's one flow beside its one flow it would still take 0.16 s <= its budget
// (0.16 s, all of it exposed), so strict priority cannot help it there: crux-guard keeps Crux's
// order but puts both on one level.
TEST(CruxGuardPolicyTest, SameLevelWhereThePriorityCannotHelp) {
  const Clos2Small c = MakeClos2Small();
  JobSpec exposed;
  exposed.id = "exposed";
  exposed.hosts = {c.host[1], c.host[3]};
  exposed.gpus_per_host = 8;
  exposed.compute_time = Duration::Millis(100);
  exposed.overlap_start = 1.0;
  exposed.pattern = TrafficPattern::kExplicit;
  exposed.flows = {{c.nic[1][0], c.nic[3][0], Bytes::Of(kGB)},
                   {c.nic[1][0], c.nic[3][0], Bytes::Of(kGB)}};
  JobSpec hidden;
  hidden.id = "hidden";
  hidden.hosts = {c.host[0], c.host[2]};
  hidden.gpus_per_host = 8;
  hidden.compute_time = Duration::Seconds(1);
  hidden.overlap_start = 0.2;
  hidden.pattern = TrafficPattern::kExplicit;
  hidden.flows = {{c.nic[0][0], c.nic[2][0], Bytes::Of(kGB / 10)},
                  {c.nic[0][1], c.nic[2][1], Bytes::Of(kGB / 10)}};
  const std::vector<JobSpec> jobs = {exposed, hidden};
  PolicyOptions o;
  o.planner.levels = 4;
  const Plan crux = Must(Must(MakePolicy("crux", c.topo, o), "Make")->Schedule(jobs), "crux");
  const Plan guard =
      Must(Must(MakePolicy("crux-guard", c.topo, o), "Make")->Schedule(jobs), "guard");
  ASSERT_EQ(crux.dag.edges.size(), 1u);  // They share an uplink.
  EXPECT_EQ(crux.jobs[0].rank, 0);
  EXPECT_LT(crux.jobs[0].level, crux.jobs[1].level);
  ASSERT_EQ(guard.dag.edges.size(), 1u);
  EXPECT_EQ(guard.jobs[0].rank, 0);  // Crux's order...
  EXPECT_EQ(guard.jobs[1].rank, 1);
  EXPECT_EQ(guard.jobs[0].k, crux.jobs[0].k);
  EXPECT_EQ(guard.jobs[1].k, crux.jobs[1].k);
  EXPECT_EQ(guard.jobs[0].level, guard.jobs[1].level);  // ...on one level.
  EXPECT_EQ(guard.dag.edges[0].weight, 0.0);            // A guarded edge.
  EXPECT_EQ(guard.cut_weight, 0.0);
}

}  // namespace
}  // namespace crux::core
