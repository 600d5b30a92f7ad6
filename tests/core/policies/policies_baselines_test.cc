// What makes each policy of policy.h different, on the hand-built 2-tier Clos of
// test_topologies.h (tor0: host0 (nic0, nic1), host1; tor1: host2 (nic0, nic1), host3;
// agg0..agg2; every link 100 Gbps).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crux/core/plan/planner.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/path_finder.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::Must;
using ::testing::HasSubstr;

constexpr int64_t kGB = 1'000'000'000;

JobSpec Job(const std::string& id, std::vector<NodeId> hosts, std::vector<FlowDemand> flows,
            Duration compute, std::optional<Flops> work = std::nullopt) {
  JobSpec j;
  j.id = id;
  j.hosts = std::move(hosts);
  j.gpus_per_host = 1;
  j.compute_time = compute;
  j.flops_per_iteration = work;
  j.pattern = TrafficPattern::kExplicit;
  j.flows = std::move(flows);
  return j;
}

FlowDemand Flow(NodeId src, NodeId dst, int64_t bytes) { return {src, dst, Bytes::Of(bytes)}; }

Plan MustSchedule(const std::string& policy, const Topology& topo, const std::vector<JobSpec>& jobs,
                  int levels = 8, uint64_t seed = 1) {
  PolicyOptions o;
  o.planner.levels = levels;
  o.planner.seed = seed;
  auto p = Must(MakePolicy(policy, topo, o), "MakePolicy");
  return Must(p->Schedule(jobs), "Schedule");
}

bool Uses(const FlowPlan& f, LinkId l) {
  return std::find(f.path.begin(), f.path.end(), l) != f.path.end();
}

// Two cross-ToR jobs whose flows can share a ToR -> Agg uplink: "slow" comes first in the input
// but has a tenth of the work (lower intensity) of "fast".
std::vector<JobSpec> TwoCrossTorJobs(const Clos2Small& c) {
  return {Job("slow", {c.host[1], c.host[3]}, {Flow(c.nic[1][0], c.nic[3][0], kGB)},
              Duration::Millis(100), Flops::Of(1e12)),
          Job("fast", {c.host[0], c.host[2]}, {Flow(c.nic[0][0], c.nic[2][0], kGB)},
              Duration::Millis(100), Flops::Of(1e13))};
}

TEST(CruxPolicyTest, IsThePlannerWithoutPortsUnlessAsked) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = TwoCrossTorJobs(c);
  PlannerOptions po;
  po.levels = 2;
  Planner planner(c.topo, po);
  const Plan want = Must(planner.Run(jobs), "Run");
  PolicyOptions o;
  o.planner = po;
  const Plan got = Must(Must(MakePolicy("crux", c.topo, o), "Make")->Schedule(jobs), "Schedule");
  ASSERT_EQ(got.jobs.size(), want.jobs.size());
  for (size_t j = 0; j < got.jobs.size(); ++j) {
    EXPECT_EQ(got.jobs[j].rank, want.jobs[j].rank);
    EXPECT_EQ(got.jobs[j].level, want.jobs[j].level);
    EXPECT_EQ(got.jobs[j].priority, want.jobs[j].priority);
    ASSERT_EQ(got.jobs[j].flows.size(), 1u);
    EXPECT_EQ(got.jobs[j].flows[0].path, want.jobs[j].flows[0].path);
    EXPECT_FALSE(got.jobs[j].flows[0].udp_sport.has_value());
    EXPECT_TRUE(want.jobs[j].flows[0].udp_sport.has_value());
  }
  o.resolve_ports = true;
  const Plan ported = Must(Must(MakePolicy("crux", c.topo, o), "Make")->Schedule(jobs), "S");
  for (size_t j = 0; j < ported.jobs.size(); ++j) {
    EXPECT_EQ(ported.jobs[j].flows[0].udp_sport, want.jobs[j].flows[0].udp_sport);
  }
}

// Five jobs from the first two hosts to the last two, one flow each, of different sizes and
// compute times: they contend, so the priorities give them distinct ranks.
std::vector<JobSpec> FiveCrossingJobs(const Clos2Small& c) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(Job("j" + std::to_string(i), {c.host[i % 2], c.host[2 + (i + 1) % 2]},
                       {Flow(c.nic[i % 2][0], c.nic[2 + (i + 1) % 2][0], kGB * (i + 1))},
                       Duration::Millis(100 + 10 * i)));
  }
  return jobs;
}

TEST(CruxPsPaPolicyTest, EveryJobGetsItsOwnLevelEvenBeyondK) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = FiveCrossingJobs(c);
  const Plan plan = MustSchedule("crux-ps-pa", c.topo, jobs, /*levels=*/2);
  const Plan crux = MustSchedule("crux", c.topo, jobs, 2);
  std::set<int> levels;
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(plan.jobs[j].level, plan.jobs[j].rank);
    EXPECT_EQ(plan.jobs[j].rank, crux.jobs[j].rank);                    // Crux's priorities.
    EXPECT_EQ(plan.jobs[j].flows[0].path, crux.jobs[j].flows[0].path);  // Crux's paths.
    levels.insert(plan.jobs[j].level);
  }
  EXPECT_EQ(levels.size(), jobs.size());
  EXPECT_EQ(*levels.rbegin(), 4);  // Beyond K = 2: crux-ps-pa is the unlimited-levels variant.
}

// crux-ps is crux-ps-pa's paths with the priorities taken away: one level for every job.
TEST(CruxPsPolicyTest, CruxPathsOneLevel) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = FiveCrossingJobs(c);
  PolicyOptions o;
  o.planner.levels = 4;
  o.planner.reserved_high_levels = 1;
  const Plan plan = Must(Must(MakePolicy("crux-ps", c.topo, o), "make")->Schedule(jobs), "plan");
  const Plan full = Must(Must(MakePolicy("crux-ps-pa", c.topo, o), "make")->Schedule(jobs), "plan");
  std::set<int> full_levels;
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(plan.jobs[j].level, 1) << j;  // The first job level, for everyone.
    EXPECT_EQ(plan.jobs[j].flows[0].path, full.jobs[j].flows[0].path) << j;  // Crux's paths.
    full_levels.insert(full.jobs[j].level);
  }
  EXPECT_GT(full_levels.size(), 1u);  // The same jobs do get distinct levels with priorities.
}

TEST(TacclPolicyTest, RoutesInArrivalOrderWhereCruxRoutesByIntensity) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = TwoCrossTorJobs(c);
  const LinkId via_agg0 = c.tor_agg[0][0];
  const Plan taccl = MustSchedule("taccl", c.topo, jobs);
  EXPECT_TRUE(Uses(taccl.jobs[0].flows[0], via_agg0));  // "slow" arrived first: first pick.
  EXPECT_FALSE(Uses(taccl.jobs[1].flows[0], via_agg0));
  const Plan crux = MustSchedule("crux-ps-pa", c.topo, jobs);
  EXPECT_FALSE(Uses(crux.jobs[0].flows[0], via_agg0));
  EXPECT_TRUE(Uses(crux.jobs[1].flows[0], via_agg0));  // "fast" is more intensive.
}

TEST(TacclPolicyTest, LongerPathsGetHigherPriority) {
  const Clos2Small c = MakeClos2Small();
  // "near" stays under tor0 (2 hops), "far" crosses an Agg (4 hops); near comes first and is
  // far more GPU-intensive, which TACCL* ignores.
  const std::vector<JobSpec> jobs = {
      Job("near", {c.host[0], c.host[1]}, {Flow(c.nic[0][0], c.nic[1][0], kGB)},
          Duration::Millis(100), Flops::Of(1e15)),
      Job("far", {c.host[0], c.host[2]}, {Flow(c.nic[0][1], c.nic[2][0], kGB)},
          Duration::Millis(100), Flops::Of(1e12)),
      Job("far2", {c.host[1], c.host[3]}, {Flow(c.nic[1][0], c.nic[3][0], kGB)},
          Duration::Millis(100), Flops::Of(1e12))};
  const Plan plan = MustSchedule("taccl", c.topo, jobs);
  EXPECT_EQ(plan.jobs[0].flows[0].path.size(), 2u);
  EXPECT_EQ(plan.jobs[1].flows[0].path.size(), 4u);
  EXPECT_EQ(plan.jobs[1].rank, 0);  // Longest first, ties in arrival order.
  EXPECT_EQ(plan.jobs[2].rank, 1);
  EXPECT_EQ(plan.jobs[0].rank, 2);
  // Equal distances share a level: two distance classes.
  EXPECT_EQ(plan.jobs[1].level, 0);
  EXPECT_EQ(plan.jobs[2].level, 0);
  EXPECT_EQ(plan.jobs[0].level, 1);
  const Plan one = MustSchedule("taccl", c.topo, jobs, /*levels=*/1);
  for (const JobPlan& jp : one.jobs) EXPECT_EQ(jp.level, 0);
}

// Many cross-ToR flows, so hash choices are visible.
std::vector<JobSpec> ManyCrossTorJobs(const Clos2Small& c) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 6; ++i) {
    const int src = i % 2;
    const int dst = 2 + (i / 2) % 2;
    jobs.push_back(
        Job("job" + std::to_string(i), {c.host[src], c.host[dst]},
            {Flow(c.nic[src][0], c.nic[dst][0], kGB), Flow(c.nic[dst][0], c.nic[src][0], kGB / 2)},
            Duration::Millis(50 + 20 * i)));
  }
  return jobs;
}

TEST(EcmpPolicyTest, HashPathsOneLevelInputOrder) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = ManyCrossTorJobs(c);
  const Plan plan = MustSchedule("ecmp", c.topo, jobs, 4, /*seed=*/3);
  PathFinder finder(c.topo);
  const HashEcmpModel model(0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const JobPlan& jp = plan.jobs[j];
    EXPECT_EQ(jp.rank, static_cast<int>(j));
    EXPECT_EQ(jp.level, 0);
    for (const FlowPlan& f : jp.flows) {
      ASSERT_TRUE(f.udp_sport.has_value());
      // The path is exactly where the hash model sends the flow's source port.
      EXPECT_EQ(Must(model.Route(finder, f.src, f.dst, *f.udp_sport), "Route"), f.path_index);
      EXPECT_EQ(f.num_paths, 3u);
    }
  }
  // Another seed means other ports, hence (for some flows) other paths.
  const Plan other = MustSchedule("ecmp", c.topo, jobs, 4, /*seed=*/4);
  int moved = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t f = 0; f < plan.jobs[j].flows.size(); ++f) {
      EXPECT_NE(plan.jobs[j].flows[f].udp_sport, other.jobs[j].flows[f].udp_sport);
      moved += plan.jobs[j].flows[f].path != other.jobs[j].flows[f].path;
    }
  }
  EXPECT_GT(moved, 0);
}

TEST(CruxPaPolicyTest, CruxPrioritiesAndCompressionOnEcmpPaths) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = ManyCrossTorJobs(c);
  const Plan pa = MustSchedule("crux-pa", c.topo, jobs, 2, 3);
  const Plan ecmp = MustSchedule("ecmp", c.topo, jobs, 2, 3);
  const Plan crux = MustSchedule("crux", c.topo, jobs, 2, 3);
  std::set<int> levels;
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(pa.jobs[j].rank, crux.jobs[j].rank);
    EXPECT_EQ(pa.jobs[j].priority, crux.jobs[j].priority);
    for (size_t f = 0; f < jobs[j].flows.size(); ++f) {
      EXPECT_EQ(pa.jobs[j].flows[f].path, ecmp.jobs[j].flows[f].path);
    }
    levels.insert(pa.jobs[j].level);
  }
  // Compression ran on the ECMP paths' contention DAG and used both levels.
  EXPECT_FALSE(pa.dag.edges.empty());
  EXPECT_EQ(levels, (std::set<int>{0, 1}));
}

TEST(SincroniaPolicyTest, BssiOrderComputedByHand) {
  const Clos2Small c = MakeClos2Small();
  // Links (all 100 Gbps, so D is proportional to bytes): h0nic0->tor0 carries A 3, B 1;
  // tor0->h1nic0 carries A 3, B 1, C 2; h0nic1->tor0 carries C 2 (units of 1 GB).
  // Bottleneck tor0->h1nic0 (6): w/D A 1/3, B 1, C 1/2 -> A last; B = 1 - 1/3 = 2/3,
  // C = 1 - 2/3 = 1/3. Then tor0->h1nic0 (3): B 2/3, C 1/6 -> C last. Order B, C, A.
  const std::vector<JobSpec> jobs = {
      Job("A", {c.host[0], c.host[1]}, {Flow(c.nic[0][0], c.nic[1][0], 3 * kGB)},
          Duration::Millis(100)),
      Job("B", {c.host[0], c.host[1]}, {Flow(c.nic[0][0], c.nic[1][0], kGB)},
          Duration::Millis(100)),
      Job("C", {c.host[0], c.host[1]}, {Flow(c.nic[0][1], c.nic[1][0], 2 * kGB)},
          Duration::Millis(100))};
  const Plan plan = MustSchedule("sincronia", c.topo, jobs, /*levels=*/2);
  EXPECT_EQ(plan.jobs[1].rank, 0);
  EXPECT_EQ(plan.jobs[2].rank, 1);
  EXPECT_EQ(plan.jobs[0].rank, 2);
  // Head-distinct levels with K = 2: rank 0 -> 0, every later rank shares level 1.
  EXPECT_EQ(plan.jobs[1].level, 0);
  EXPECT_EQ(plan.jobs[2].level, 1);
  EXPECT_EQ(plan.jobs[0].level, 1);
  const Plan eight = MustSchedule("sincronia", c.topo, jobs, 8);
  EXPECT_EQ(eight.jobs[1].level, 0);
  EXPECT_EQ(eight.jobs[2].level, 1);
  EXPECT_EQ(eight.jobs[0].level, 2);
}

TEST(SincroniaPolicyTest, UsesEcmpPaths) {
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = ManyCrossTorJobs(c);
  const Plan s = MustSchedule("sincronia", c.topo, jobs, 8, 3);
  const Plan e = MustSchedule("ecmp", c.topo, jobs, 8, 3);
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t f = 0; f < jobs[j].flows.size(); ++f) {
      EXPECT_EQ(s.jobs[j].flows[f].path, e.jobs[j].flows[f].path);
    }
  }
}

// Fraction of one period in which both jobs are in their communication phase.
double PhaseOverlap(const JobSpec& a, const JobPlan& pa, const JobSpec& b, const JobPlan& pb) {
  const double period = pa.period.ToSeconds();
  auto busy = [&](const JobSpec& s, const JobPlan& p, double t) {
    double ph =
        std::fmod(t - p.time_shift.ToSeconds() - s.overlap_start * s.compute_time.ToSeconds(),
                  p.period.ToSeconds());
    if (ph < 0) ph += p.period.ToSeconds();
    return ph < p.comm_time.ToSeconds();
  };
  const int n = 20000;
  int both = 0;
  for (int i = 0; i < n; ++i) {
    const double t = (i + 0.5) * period / n;
    both += busy(a, pa, t) && busy(b, pb, t);
  }
  return static_cast<double>(both) / n;
}

TEST(CassiniPolicyTest, ShiftsSeparateTwoEqualPeriodJobsOnOneLink) {
  const Clos2Small c = MakeClos2Small();
  // 2.5 GB at 100 Gbps = 0.2 s after 0.8 s of compute: period 1 s, both jobs end on
  // tor0 -> host1/nic0. "lone" shares nothing.
  const int64_t bytes = 2'500'000'000;
  const std::vector<JobSpec> jobs = {
      Job("a", {c.host[0], c.host[1]}, {Flow(c.nic[0][0], c.nic[1][0], bytes)},
          Duration::Millis(800)),
      Job("b", {c.host[0], c.host[1]}, {Flow(c.nic[0][1], c.nic[1][0], bytes)},
          Duration::Millis(800)),
      Job("lone", {c.host[2], c.host[3]}, {Flow(c.nic[2][0], c.nic[3][0], bytes)},
          Duration::Millis(500))};
  const Plan plan = MustSchedule("cassini", c.topo, jobs, 4);
  ASSERT_NEAR(plan.jobs[0].period.ToSeconds(), 1.0, 1e-6);
  ASSERT_NEAR(plan.jobs[0].comm_time.ToSeconds(), 0.2, 1e-6);
  EXPECT_NEAR(PhaseOverlap(jobs[0], plan.jobs[0], jobs[1], plan.jobs[0]), 0.2, 1e-3);  // Unshifted.
  EXPECT_LT(PhaseOverlap(jobs[0], plan.jobs[0], jobs[1], plan.jobs[1]), 1e-3);
  EXPECT_GT(plan.jobs[1].time_shift, Duration::Zero());
  EXPECT_LT(plan.jobs[1].time_shift, plan.jobs[1].period);
  EXPECT_EQ(plan.jobs[2].time_shift, Duration::Zero());
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(plan.jobs[j].level, 0);
    EXPECT_EQ(plan.jobs[j].rank, static_cast<int>(j));
  }
}

TEST(FixedPolicyTest, HonoursFixedRanksThenInputOrder) {
  const Clos2Small c = MakeClos2Small();
  std::vector<JobSpec> jobs = ManyCrossTorJobs(c);  // job0..job5.
  jobs[0].fixed_rank = 2;
  jobs[2].fixed_rank = 0;
  jobs[3].fixed_rank = 1;
  jobs[5].fixed_rank = 1;  // Tie with job3: input order.
  // job1 and job4 have none: after the given ones, in input order.
  const Plan plan = MustSchedule("fixed", c.topo, jobs, /*levels=*/3);
  const std::vector<int> want_rank = {3, 4, 0, 1, 5, 2};
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(plan.jobs[j].rank, want_rank[j]) << jobs[j].id;
    EXPECT_EQ(plan.jobs[j].level, std::min(want_rank[j], 2)) << jobs[j].id;
  }
  // Crux's paths.
  const Plan crux = MustSchedule("crux-ps-pa", c.topo, jobs, 3);
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t f = 0; f < jobs[j].flows.size(); ++f) {
      EXPECT_EQ(plan.jobs[j].flows[f].path, crux.jobs[j].flows[f].path);
    }
  }
}

TEST(FixedPolicyTest, NegativeRankIsAnErrorNamingJobAndField) {
  const Clos2Small c = MakeClos2Small();
  std::vector<JobSpec> jobs = ManyCrossTorJobs(c);
  jobs[4].fixed_rank = -1;
  auto p = Must(MakePolicy("fixed", c.topo, {}), "Make");
  auto plan = p->Schedule(jobs);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("job4"));
  EXPECT_THAT(plan.status().message(), HasSubstr("fixed_rank"));
}

TEST(IdealPolicyTest, EveryJobOnItsStandalonePathsIsolated) {
  const Clos2Small c = MakeClos2Small();
  // Two identical jobs: together, Crux spreads them over two Aggs; alone, each takes the first
  // least-congested path (agg0).
  const std::vector<JobSpec> jobs = {
      Job("x", {c.host[0], c.host[2]}, {Flow(c.nic[0][0], c.nic[2][0], kGB)},
          Duration::Millis(100)),
      Job("y", {c.host[1], c.host[3]}, {Flow(c.nic[1][0], c.nic[3][0], kGB)},
          Duration::Millis(100))};
  auto p = Must(MakePolicy("ideal", c.topo, {}), "Make");
  EXPECT_TRUE(p->isolates_jobs());
  const Plan ideal = Must(p->Schedule(jobs), "Schedule");
  EXPECT_TRUE(Uses(ideal.jobs[0].flows[0], c.tor_agg[0][0]));
  EXPECT_TRUE(Uses(ideal.jobs[1].flows[0], c.tor_agg[0][0]));
  for (const JobPlan& jp : ideal.jobs) EXPECT_EQ(jp.level, 0);
  const Plan crux = MustSchedule("crux", c.topo, jobs);
  EXPECT_NE(crux.jobs[0].flows[0].path[1], crux.jobs[1].flows[0].path[1]);
}

}  // namespace
}  // namespace crux::core
