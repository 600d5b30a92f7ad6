#include "crux/core/plan/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/topology/ecmp.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::AddHost;
using ::crux::core::testing::AddSwitch;
using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::Connect;
using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::Must;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A clock that moves forward by `step` on every read, to see which reads the planner makes.
class TickingClock final : public Clock {
 public:
  explicit TickingClock(Duration step) : step_(step) {}
  Duration Now() const override {
    now_ += step_;
    ++reads_;
    return now_;
  }
  int reads() const { return reads_; }

 private:
  Duration step_;
  mutable Duration now_;
  mutable int reads_ = 0;
};

JobSpec ExplicitJob(const std::string& id, std::vector<NodeId> hosts, std::vector<FlowDemand> flows,
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

const JobPlan& ById(const Plan& plan, const std::string& id) {
  for (const JobPlan& j : plan.jobs) {
    if (j.id == id) return j;
  }
  ADD_FAILURE() << "no job " << id;
  return plan.jobs.front();
}

// h1, h2 (and optionally more hosts) on one switch s1; every cable `gbps`. Hosts have no NIC
// nodes, so a flow h1 -> h2 uses exactly the links h1 -> s1 and s1 -> h2.
struct OneSwitch {
  Topology topo;
  std::vector<NodeId> h;  // h[0] is "h1".
  NodeId s1;
};

OneSwitch MakeOneSwitch(int hosts, double gbps) {
  OneSwitch o;
  o.s1 = AddSwitch(o.topo, "s1");
  for (int i = 0; i < hosts; ++i) {
    o.h.push_back(AddHost(o.topo, "h" + std::to_string(i + 1)));
    Connect(o.topo, o.h.back(), o.s1, gbps);
  }
  return o;
}

// ---- The paper's Example 1 (§4.2, Fig. 11) ----
// Job A: W = 10 Gflop, 2 s compute, 2 s of transmission; job B: W = 5 Gflop, 1 s compute, 1 s
// of transmission; one shared 8 Gbps link. Equal intensity (5 Gflop/s), but prioritising the
// shorter-iteration job B moves more useful data: k_B = 1.5 with A as the reference.
// (Needs priority.cc; see priority.h.)
class PaperExample1Test : public ::testing::Test {
 protected:
  PaperExample1Test() : net_(MakeOneSwitch(2, 8)) {}

  std::vector<JobSpec> Jobs() const {
    const NodeId h1 = net_.h[0];
    const NodeId h2 = net_.h[1];
    return {ExplicitJob("A", {h1, h2}, {FlowDemand{h1, h2, Bytes::Of(2000000000)}},
                        Duration::Seconds(2), Flops::Giga(10)),
            ExplicitJob("B", {h1, h2}, {FlowDemand{h1, h2, Bytes::Of(1000000000)}},
                        Duration::Seconds(1), Flops::Giga(5))};
  }

  OneSwitch net_;
  FakeClock clock_;
};

TEST_F(PaperExample1Test, ProfilesEqualIntensities) {
  Planner planner(net_.topo, PlannerOptions{}, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const JobPlan& a = plan->jobs[0];
  const JobPlan& b = plan->jobs[1];
  EXPECT_EQ(a.comm_time, Duration::Seconds(2));
  EXPECT_EQ(b.comm_time, Duration::Seconds(1));
  EXPECT_DOUBLE_EQ(a.intensity, 5e9);
  EXPECT_DOUBLE_EQ(b.intensity, 5e9);
  // No overlap: period = compute + transmission.
  EXPECT_EQ(a.period, Duration::Seconds(4));
  EXPECT_EQ(b.period, Duration::Seconds(2));
  EXPECT_DOUBLE_EQ(a.bytes_per_sec, 5e8);
  EXPECT_DOUBLE_EQ(b.bytes_per_sec, 5e8);
}

TEST_F(PaperExample1Test, ShorterIterationJobRanksFirstWithOneAndAHalfTimesThePriority) {
  Planner planner(net_.topo, PlannerOptions{}, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const JobPlan& a = plan->jobs[0];
  const JobPlan& b = plan->jobs[1];
  // Equal traffic rates; A moves more bytes per iteration, so A is the reference.
  EXPECT_EQ(plan->reference_job, 0);
  EXPECT_TRUE(a.reference);
  EXPECT_FALSE(b.reference);
  EXPECT_DOUBLE_EQ(a.k, 1.0);
  EXPECT_NEAR(b.k, 1.5, 0.015);
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(a.rank, 1);
  ASSERT_GT(a.priority, 0);
  EXPECT_NEAR(b.priority / a.priority, 1.5, 0.015);
  EXPECT_DOUBLE_EQ(b.priority, b.k * b.intensity);
}

TEST_F(PaperExample1Test, SharedLinkPutsTheJobsOnDifferentLevels) {
  Planner planner(net_.topo, PlannerOptions{}, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->dag.num_nodes, 2);
  ASSERT_EQ(plan->dag.edges.size(), 1u);
  EXPECT_EQ(plan->dag.edges[0].from, 1);  // B -> A.
  EXPECT_EQ(plan->dag.edges[0].to, 0);
  EXPECT_DOUBLE_EQ(plan->dag.edges[0].weight, 5e9);
  EXPECT_LT(plan->jobs[1].level, plan->jobs[0].level);
  EXPECT_DOUBLE_EQ(plan->total_edge_weight, 5e9);
  EXPECT_DOUBLE_EQ(plan->cut_weight, 5e9);
}

// ---- §4.2 / Fig. 13: four jobs, two levels ----
// Jobs 1-2 share one link, jobs 3-4 another; P_1 > P_2 > P_3 > P_4 (identical timing, so
// k = 1 and P follows W). Sincronia would give {1} / {2,3,4}, Varys {1,2} / {3,4}; the
// optimum is {1,3} high and {2,4} low. (Needs compression.cc and priority.cc.)
class FourJobsTest : public ::testing::Test {
 protected:
  FourJobsTest() : net_(MakeOneSwitch(4, 100)) {}

  std::vector<JobSpec> Jobs() const {
    const auto job = [&](const std::string& id, int a, int b, double tflops) {
      return ExplicitJob(id, {net_.h[a], net_.h[b]},
                         {FlowDemand{net_.h[a], net_.h[b], Bytes::Of(1250000000)}},  // 0.1 s
                         Duration::Seconds(1), Flops::Tera(tflops));
    };
    // Deliberately not in priority order.
    return {job("j2", 0, 1, 30), job("j4", 2, 3, 10), job("j1", 0, 1, 40), job("j3", 2, 3, 20)};
  }

  OneSwitch net_;
  FakeClock clock_;
};

TEST_F(FourJobsTest, PrioritiesFollowIntensity) {
  Planner planner(net_.topo, PlannerOptions{}, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(ById(*plan, "j1").rank, 0);
  EXPECT_EQ(ById(*plan, "j2").rank, 1);
  EXPECT_EQ(ById(*plan, "j3").rank, 2);
  EXPECT_EQ(ById(*plan, "j4").rank, 3);
  for (const JobPlan& j : plan->jobs) EXPECT_NEAR(j.k, 1.0, 1e-9) << j.id;
  EXPECT_DOUBLE_EQ(ById(*plan, "j1").intensity, 4e14);  // 40 Tflop / 0.1 s.
}

TEST_F(FourJobsTest, TwoLevelsSplitEachContendingPair) {
  PlannerOptions options;
  options.levels = 2;
  Planner planner(net_.topo, options, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->levels, 2);
  EXPECT_EQ(plan->usable_levels, 2);
  EXPECT_EQ(ById(*plan, "j1").level, 0);
  EXPECT_EQ(ById(*plan, "j3").level, 0);
  EXPECT_EQ(ById(*plan, "j2").level, 1);
  EXPECT_EQ(ById(*plan, "j4").level, 1);
  // Two edges (j1 -> j2 weighted I_1, j3 -> j4 weighted I_3), both cut.
  ASSERT_EQ(plan->dag.edges.size(), 2u);
  EXPECT_DOUBLE_EQ(plan->total_edge_weight, 4e14 + 2e14);
  EXPECT_DOUBLE_EQ(plan->cut_weight, plan->total_edge_weight);
}

TEST_F(FourJobsTest, ReservedHighLevelsShiftJobLevels) {
  PlannerOptions options;
  options.levels = 5;
  options.reserved_high_levels = 2;
  options.reserved_low_levels = 1;
  Planner planner(net_.topo, options, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->levels, 5);
  EXPECT_EQ(plan->first_job_level, 2);
  EXPECT_EQ(plan->usable_levels, 2);
  EXPECT_EQ(ById(*plan, "j1").level, 2);
  EXPECT_EQ(ById(*plan, "j3").level, 2);
  EXPECT_EQ(ById(*plan, "j2").level, 3);
  EXPECT_EQ(ById(*plan, "j4").level, 3);
}

TEST_F(FourJobsTest, OneLevelPutsEveryJobOnIt) {
  PlannerOptions options;
  options.levels = 3;
  options.reserved_high_levels = 1;
  options.reserved_low_levels = 1;
  Planner planner(net_.topo, options, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->usable_levels, 1);
  for (const JobPlan& j : plan->jobs) EXPECT_EQ(j.level, 1) << j.id;
  EXPECT_DOUBLE_EQ(plan->cut_weight, 0.0);
}

TEST_F(FourJobsTest, JobsStayInInputOrder) {
  Planner planner(net_.topo, PlannerOptions{}, &clock_);
  const Result<Plan> plan = planner.Run(Jobs());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->jobs.size(), 4u);
  EXPECT_EQ(plan->jobs[0].id, "j2");
  EXPECT_EQ(plan->jobs[1].id, "j4");
  EXPECT_EQ(plan->jobs[2].id, "j1");
  EXPECT_EQ(plan->jobs[3].id, "j3");
  EXPECT_EQ(plan->dag.num_nodes, 4);
}

// ---- Profiling: I = W / t with t = max_e M_e / B_e ----

TEST(PlannerTest, IntensityUsesTheMostLoadedLinkOfTheStandaloneRouting) {
  // h1 -10G- s1, h3 -10G- s1, s1 -20G- h2. Flows h1 -> h2 (10 Gbit) and h3 -> h2 (20 Gbit):
  // h1 -> s1 1 s, h3 -> s1 2 s, s1 -> h2 30 Gbit / 20 G = 1.5 s. t = 2 s on h3 -> s1.
  Topology t;
  const NodeId h1 = AddHost(t, "h1");
  const NodeId h2 = AddHost(t, "h2");
  const NodeId h3 = AddHost(t, "h3");
  const NodeId s1 = AddSwitch(t, "s1");
  Connect(t, h1, s1, 10);
  const LinkId h3s1 = Connect(t, h3, s1, 10);
  Connect(t, s1, h2, 20);
  JobSpec job = ExplicitJob(
      "j", {h1, h2, h3},
      {FlowDemand{h1, h2, Bytes::Of(1250000000)}, FlowDemand{h3, h2, Bytes::Of(2500000000)}},
      Duration::Seconds(1), Flops::Tera(6));
  job.overlap_start = 0.5;
  FakeClock clock;
  Planner planner(t, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({job});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const JobPlan& jp = plan->jobs[0];
  EXPECT_EQ(jp.comm_time, Duration::Seconds(2));
  EXPECT_EQ(jp.bottleneck, h3s1);
  EXPECT_DOUBLE_EQ(jp.work.value(), 6e12);
  EXPECT_DOUBLE_EQ(jp.intensity, 3e12);
  // period = max(c, o * c + t) = max(1, 0.5 + 2) = 2.5 s; 3.75 GB / 2.5 s.
  EXPECT_EQ(jp.period, Duration::Millis(2500));
  EXPECT_DOUBLE_EQ(jp.bytes_per_sec, 1.5e9);
  EXPECT_EQ(jp.gpus, 3);
}

TEST(PlannerTest, BottleneckTiesGoToTheLowestLinkId) {
  // Both links of h1 -> s1 -> h2 carry the same bytes at the same speed. The cable to h2 was
  // added first, so s1 -> h2 has the lower id although the path crosses it second.
  Topology t;
  const NodeId h1 = AddHost(t, "h1");
  const NodeId h2 = AddHost(t, "h2");
  const NodeId s1 = AddSwitch(t, "s1");
  const LinkId h2s1 = Connect(t, h2, s1, 10);
  const LinkId h1s1 = Connect(t, h1, s1, 10);
  const LinkId s1h2 = t.link(h2s1).reverse;
  ASSERT_LT(s1h2, h1s1);
  FakeClock clock;
  Planner planner(t, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({ExplicitJob(
      "j", {h1, h2}, {FlowDemand{h1, h2, Bytes::Of(1250000000)}}, Duration::Seconds(1))});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->jobs[0].comm_time, Duration::Seconds(1));
  EXPECT_EQ(plan->jobs[0].bottleneck, s1h2);
}

TEST(PlannerTest, PeriodIsComputeWhenCommunicationHides) {
  const OneSwitch net = MakeOneSwitch(2, 8);
  JobSpec job = ExplicitJob("j", {net.h[0], net.h[1]},
                            {FlowDemand{net.h[0], net.h[1], Bytes::Of(500000000)}},  // 0.5 s
                            Duration::Seconds(2), Flops::Tera(1));
  job.overlap_start = 0.25;  // 0.5 + 0.5 < 2.
  FakeClock clock;
  Planner planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({job});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->jobs[0].comm_time, Duration::Millis(500));
  EXPECT_EQ(plan->jobs[0].period, Duration::Seconds(2));
  EXPECT_DOUBLE_EQ(plan->jobs[0].intensity, 2e12);
}

TEST(PlannerTest, DefaultWorkUsesGpuPeakFlops) {
  const OneSwitch net = MakeOneSwitch(2, 8);
  JobSpec job = ExplicitJob("j", {net.h[0], net.h[1]},
                            {FlowDemand{net.h[0], net.h[1], Bytes::Of(1000000000)}},  // 1 s
                            Duration::Millis(500));
  job.gpus_per_host = 4;
  PlannerOptions options;
  options.gpu_peak_flops = 1e12;
  FakeClock clock;
  Planner planner(net.topo, options, &clock);
  const Result<Plan> plan = planner.Run({job});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->jobs[0].gpus, 8);
  EXPECT_DOUBLE_EQ(plan->jobs[0].work.value(), 8 * 0.5 * 1e12);
  EXPECT_DOUBLE_EQ(plan->jobs[0].intensity, 4e12);
}

TEST(PlannerTest, StandaloneProfileIgnoresOtherJobs) {
  // Two identical jobs on the same link: each is profiled alone, so neither sees the other's
  // bytes in t_j.
  const OneSwitch net = MakeOneSwitch(2, 8);
  const auto job = [&](const std::string& id) {
    return ExplicitJob(id, {net.h[0], net.h[1]},
                       {FlowDemand{net.h[0], net.h[1], Bytes::Of(1000000000)}},
                       Duration::Seconds(1), Flops::Tera(1));
  };
  FakeClock clock;
  Planner planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({job("a"), job("b")});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->jobs[0].comm_time, Duration::Seconds(1));
  EXPECT_EQ(plan->jobs[1].comm_time, Duration::Seconds(1));
}

TEST(PlannerTest, JobWithoutTrafficHasZeroIntensityAndRanksLast) {
  const OneSwitch net = MakeOneSwitch(2, 8);
  JobSpec talker = ExplicitJob("talker", {net.h[0], net.h[1]},
                               {FlowDemand{net.h[0], net.h[1], Bytes::Of(1000000000)}},
                               Duration::Seconds(1), Flops::Giga(1));
  JobSpec silent;
  silent.id = "silent";
  silent.hosts = {net.h[0]};  // Single-host ring: no network flows.
  silent.compute_time = Duration::Seconds(1);
  silent.flops_per_iteration = Flops::Tera(100);
  silent.pattern_bytes = Bytes::GiB(1);
  FakeClock clock;
  Planner planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({silent, talker});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const JobPlan& s = plan->jobs[0];
  EXPECT_TRUE(s.flows.empty());
  EXPECT_EQ(s.comm_time, Duration::Zero());
  EXPECT_FALSE(s.bottleneck.valid());
  EXPECT_EQ(s.intensity, 0.0);
  EXPECT_EQ(s.period, Duration::Seconds(1));
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(plan->jobs[1].rank, 0);
  EXPECT_EQ(plan->reference_job, 1);
}

TEST(PlannerTest, EmptyJobListGivesEmptyPlan) {
  const Clos2Small c = MakeClos2Small();
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->jobs.empty());
  EXPECT_EQ(plan->reference_job, -1);
  EXPECT_TRUE(plan->dag.edges.empty());
  EXPECT_EQ(plan->unpinned_flows, 0);
}

// ---- Path selection inside the planner ----

TEST(PlannerTest, HigherIntensityJobsAreRoutedFirst) {
  // Four single-flow jobs from tor0 to tor1 over 3 Aggs, listed lowest intensity first. j1 (the
  // most intensive) sends twice the bytes of the others. Routed by decreasing I, j1 takes Agg 0
  // alone; the others fill Aggs 1 and 2 and j4 (last) joins the lighter of those. Routed in
  // input order, j1 would come last and share an Agg.
  const Clos2Small c = MakeClos2Small();
  const auto job = [&](const std::string& id, NodeId src, NodeId dst, int64_t bytes,
                       double tflops) {
    return ExplicitJob(id, {c.topo.node(src).host, c.topo.node(dst).host},
                       {FlowDemand{src, dst, Bytes::Of(bytes)}}, Duration::Seconds(1),
                       Flops::Tera(tflops));
  };
  const std::vector<JobSpec> jobs = {
      job("j4", c.nic[0][0], c.nic[3][0], 1000000000, 10),
      job("j3", c.nic[1][0], c.nic[3][0], 1000000000, 20),
      job("j2", c.nic[0][1], c.nic[2][1], 1000000000, 30),
      job("j1", c.nic[0][0], c.nic[2][0], 2000000000, 80),
  };
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run(jobs);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto uplink = [&](const std::string& id) {
    const JobPlan& j = ById(*plan, id);
    EXPECT_EQ(j.flows.size(), 1u);
    EXPECT_EQ(j.flows[0].path.size(), 4u);
    return j.flows[0].path[1];  // tor0 -> agg.
  };
  const LinkId j1 = uplink("j1");
  EXPECT_EQ(j1, c.tor_agg[0][0]);
  for (const char* other : {"j2", "j3", "j4"}) EXPECT_NE(uplink(other), j1) << other;
}

TEST(PlannerTest, FlowPlansDescribeTheChosenPath) {
  const Clos2Small c = MakeClos2Small();
  JobSpec ring;
  ring.id = "ring";
  ring.hosts = {c.host[0], c.host[2]};
  ring.gpus_per_host = 8;
  ring.compute_time = Duration::Millis(200);
  ring.pattern_bytes = Bytes::MiB(256);
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({ring});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const JobPlan& jp = plan->jobs[0];
  ASSERT_EQ(jp.flows.size(), 4u);  // 2 hosts x 2 rails.
  std::set<LinkId> uplinks;
  for (const FlowPlan& f : jp.flows) {
    const PathSet* set = Must(planner.path_finder().Paths(f.src, f.dst), "Paths");
    EXPECT_EQ(f.num_paths, 3u);
    ASSERT_LT(f.path_index, set->size());
    EXPECT_EQ(f.path, set->Path(f.path_index));
    // 2 (p - 1) / p * S / R with p = 16, R = 2.
    EXPECT_EQ(f.bytes, Bytes::Of(2 * 15 * (int64_t{256} << 20) / 16 / 2));
    uplinks.insert(f.path[1]);
  }
  // The two rails leaving each ToR were spread over different Aggs.
  EXPECT_EQ(uplinks.size(), 4u);
}

TEST(PlannerTest, PathOrderCanFollowPriorityRank) {
  // Example 1's timings on two cross-ToR flows that do not share links: equal intensity, so
  // by intensity A (listed first) is routed first and takes Agg 0; by priority B (k = 1.5)
  // ranks first and takes it.
  const Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = {
      ExplicitJob("A", {c.host[0], c.host[2]},
                  {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(25000000000)}},  // 2 s
                  Duration::Seconds(2), Flops::Giga(10)),
      ExplicitJob("B", {c.host[1], c.host[3]},
                  {FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(12500000000)}},  // 1 s
                  Duration::Seconds(1), Flops::Giga(5))};
  FakeClock clock;
  {
    Planner planner(c.topo, PlannerOptions{}, &clock);
    const Result<Plan> plan = planner.Run(jobs);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_DOUBLE_EQ(plan->jobs[0].intensity, plan->jobs[1].intensity);
    EXPECT_EQ(plan->jobs[1].rank, 0);
    EXPECT_EQ(plan->jobs[0].flows[0].path_index, 0u);
    EXPECT_EQ(plan->jobs[1].flows[0].path_index, 1u);
  }
  {
    PlannerOptions options;
    options.path_order = PathOrder::kPriority;
    Planner planner(c.topo, options, &clock);
    const Result<Plan> plan = planner.Run(jobs);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->jobs[1].flows[0].path_index, 0u);
    EXPECT_EQ(plan->jobs[0].flows[0].path_index, 1u);
  }
}

// ---- Source ports ----

TEST(PlannerTest, EveryInterHostFlowGetsAPortThatRoutesBackToItsPath) {
  const Clos2Small c = MakeClos2Small();
  JobSpec a;
  a.id = "a";
  a.hosts = {c.host[0], c.host[2], c.host[1], c.host[3]};
  a.gpus_per_host = 8;
  a.compute_time = Duration::Millis(300);
  a.pattern = TrafficPattern::kAllToAll;
  a.pattern_bytes = Bytes::MiB(64);
  JobSpec b = ExplicitJob("b", {c.host[0], c.host[2]},
                          {FlowDemand{c.host[0], c.host[2], Bytes::MiB(10)},
                           FlowDemand{c.nic[2][1], c.nic[0][0], Bytes::MiB(20)}},
                          Duration::Millis(100));
  FakeClock clock;
  PlannerOptions options;
  options.ports = PortRange{0x1000, 0x1FFF};
  Planner planner(c.topo, options, &clock);
  const Result<Plan> plan = planner.Run({a, b});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->unpinned_flows, 0);
  const HashEcmpModel model(0);  // The planner's default resolver.
  int checked = 0;
  for (const JobPlan& jp : plan->jobs) {
    for (const FlowPlan& f : jp.flows) {
      ASSERT_TRUE(f.udp_sport.has_value()) << jp.id;
      EXPECT_GE(*f.udp_sport, 0x1000);
      EXPECT_LE(*f.udp_sport, 0x1FFF);
      EXPECT_EQ(Must(model.Route(planner.path_finder(), f.src, f.dst, *f.udp_sport), "Route"),
                f.path_index);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 3 * 1 + 2);  // all_to_all: H (H - 1) R with R = 1; plus 2 explicit.
}

TEST(PlannerTest, IntraHostFlowsAreNeverPinned) {
  const Clos2Small c = MakeClos2Small();
  const JobSpec j =
      ExplicitJob("local", {c.host[0]}, {FlowDemand{c.nic[0][0], c.nic[0][1], Bytes::MiB(1)}},
                  Duration::Millis(10));
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({j});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->jobs[0].flows.size(), 1u);
  EXPECT_FALSE(plan->jobs[0].flows[0].udp_sport.has_value());
  EXPECT_EQ(plan->jobs[0].flows[0].path.size(), 2u);  // NIC -> host -> NIC.
  EXPECT_EQ(plan->unpinned_flows, 0);
}

TEST(PlannerTest, PortResolutionCanBeTurnedOff) {
  const Clos2Small c = MakeClos2Small();
  const JobSpec j =
      ExplicitJob("j", {c.host[0], c.host[2]},
                  {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::MiB(1)}}, Duration::Millis(10));
  PlannerOptions options;
  options.resolve_ports = false;
  FakeClock clock;
  Planner planner(c.topo, options, &clock);
  const Result<Plan> plan = planner.Run({j});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->jobs[0].flows[0].udp_sport.has_value());
  EXPECT_EQ(plan->unpinned_flows, 0);
}

// A sprayed fabric: no ports whatever resolve_ports says (full and incremental planning), the
// flows keep the paths the planner models the load on.
TEST(PlannerTest, SprayedFabricPlansNoPorts) {
  const Clos2Small c = MakeClos2Small();
  const JobSpec j = ExplicitJob("j", {c.host[0], c.host[2]},
                                {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::MiB(1)},
                                 FlowDemand{c.nic[0][1], c.nic[2][1], Bytes::MiB(1)}},
                                Duration::Millis(10));
  for (const bool incremental : {false, true}) {
    SCOPED_TRACE(incremental ? "incremental" : "full");
    PlannerOptions options;
    options.resolve_ports = true;
    options.incremental = incremental;
    options.spray = true;
    FakeClock clock;
    Planner planner(c.topo, options, &clock);
    const Result<Plan> plan = planner.Run({j});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(plan->jobs[0].flows.size(), 2u);
    for (const FlowPlan& f : plan->jobs[0].flows) {
      EXPECT_FALSE(f.udp_sport.has_value());
      EXPECT_FALSE(f.path.empty());
    }
    EXPECT_EQ(plan->unpinned_flows, 0);  // Not a failure to pin: nothing is pinned.
    options.spray = false;
    Planner pinned(c.topo, options, &clock);
    const Result<Plan> with_ports = pinned.Run({j});
    ASSERT_TRUE(with_ports.ok());
    for (const FlowPlan& f : with_ports->jobs[0].flows) EXPECT_TRUE(f.udp_sport.has_value());
  }
}

TEST(PlannerTest, UnresolvablePortsAreCountedAsUnpinned) {
  const Clos2Small c = MakeClos2Small();
  const JobSpec j = ExplicitJob("j", {c.host[0], c.host[2]},
                                {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::MiB(1)},
                                 FlowDemand{c.nic[0][1], c.nic[2][1], Bytes::MiB(1)},
                                 FlowDemand{c.nic[0][0], c.nic[0][1], Bytes::MiB(1)}},
                                Duration::Millis(10));
  const ProbedPortTable empty_table;  // Nothing was probed.
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock, &empty_table);
  const Result<Plan> plan = planner.Run({j});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->unpinned_flows, 2);  // The intra-host flow is not counted.
  for (const FlowPlan& f : plan->jobs[0].flows) EXPECT_FALSE(f.udp_sport.has_value());
}

TEST(PlannerTest, InjectedResolverIsUsed) {
  const Clos2Small c = MakeClos2Small();
  const JobSpec j =
      ExplicitJob("j", {c.host[0], c.host[2]},
                  {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::MiB(1)}}, Duration::Millis(10));
  PathFinder f(c.topo);
  const PathSet* set = Must(f.Paths(c.nic[0][0], c.nic[2][0]), "Paths");
  ProbedPortTable table;
  for (size_t i = 0; i < set->size(); ++i) {
    table.Add("host0/nic0", "host2/nic0", PathNodeNames(c.topo, c.nic[0][0], set->Path(i)),
              static_cast<uint16_t>(0xC000 + 100 * i));
  }
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock, &table);
  const Result<Plan> plan = planner.Run({j});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const FlowPlan& fp = plan->jobs[0].flows[0];
  ASSERT_TRUE(fp.udp_sport.has_value());
  EXPECT_EQ(*fp.udp_sport, 0xC000 + 100 * fp.path_index);
}

// Counts FindPort calls and delegates to the hash model.
class CountingResolver final : public SourcePortResolver {
 public:
  std::optional<uint16_t> FindPort(PathFinder& paths, NodeId src, NodeId dst, size_t path_index,
                                   PortRange range) const override {
    ++calls_;
    return model_.FindPort(paths, src, dst, path_index, range);
  }
  int calls() const { return calls_; }

 private:
  HashEcmpModel model_;
  mutable int calls_ = 0;
};

TEST(PlannerTest, ResolvedPortsAreReusedAcrossRuns) {
  const Clos2Small c = MakeClos2Small();
  const JobSpec j = ExplicitJob("j", {c.host[0], c.host[2]},
                                {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::MiB(1)},
                                 FlowDemand{c.nic[0][1], c.nic[2][1], Bytes::MiB(1)}},
                                Duration::Millis(10));
  const CountingResolver resolver;
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock, &resolver);
  const Result<Plan> first = planner.Run({j});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(resolver.calls(), 2);
  const Result<Plan> second = planner.Run({j});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(resolver.calls(), 2);  // Same flows on the same paths: no new search.
  for (size_t f = 0; f < 2; ++f) {
    EXPECT_EQ(first->jobs[0].flows[f].udp_sport, second->jobs[0].flows[f].udp_sport);
    ASSERT_TRUE(second->jobs[0].flows[f].udp_sport.has_value());
  }
  // A new flow is resolved; the known ones are not searched again.
  JobSpec more = j;
  more.flows.push_back(FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::MiB(1)});
  ASSERT_TRUE(planner.Run({more}).ok());
  EXPECT_EQ(resolver.calls(), 3);
}

TEST(PlannerTest, PortsFollowPathChangesAcrossRuns) {
  // Run 1: job "low" alone takes Agg 0. Run 2: a more intensive job on the same ToR pair is
  // routed first and takes Agg 0, so "low" moves; its port must be re-resolved for the new
  // path, not reused from the first plan.
  const Clos2Small c = MakeClos2Small();
  const JobSpec low = ExplicitJob("low", {c.host[0], c.host[2]},
                                  {FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::MiB(100)}},
                                  Duration::Seconds(1), Flops::Tera(1));
  const JobSpec high = ExplicitJob("high", {c.host[1], c.host[3]},
                                   {FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::MiB(100)}},
                                   Duration::Seconds(1), Flops::Tera(100));
  FakeClock clock;
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const HashEcmpModel model(0);
  const Result<Plan> first = planner.Run({low});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const FlowPlan& f1 = first->jobs[0].flows[0];
  EXPECT_EQ(f1.path_index, 0u);
  const Result<Plan> second = planner.Run({low, high});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const FlowPlan& f2 = second->jobs[0].flows[0];
  ASSERT_NE(f2.path_index, f1.path_index);
  for (const JobPlan& jp : second->jobs) {
    for (const FlowPlan& f : jp.flows) {
      ASSERT_TRUE(f.udp_sport.has_value());
      EXPECT_EQ(Must(model.Route(planner.path_finder(), f.src, f.dst, *f.udp_sport), "Route"),
                f.path_index)
          << jp.id;
    }
  }
}

// ---- Determinism ----

std::vector<JobSpec> MixedJobs(const Clos2Small& c) {
  std::vector<JobSpec> jobs;
  JobSpec ring;
  ring.id = "ring";
  ring.hosts = {c.host[0], c.host[1], c.host[2], c.host[3]};
  ring.gpus_per_host = 8;
  ring.compute_time = Duration::Millis(250);
  ring.pattern_bytes = Bytes::MiB(512);
  jobs.push_back(ring);
  JobSpec a2a = ring;
  a2a.id = "a2a";
  a2a.hosts = {c.host[2], c.host[0]};
  a2a.pattern = TrafficPattern::kAllToAll;
  a2a.compute_time = Duration::Millis(120);
  a2a.overlap_start = 0.3;
  jobs.push_back(a2a);
  JobSpec pipe = ring;
  pipe.id = "pipe";
  pipe.hosts = {c.host[3], c.host[1], c.host[0]};
  pipe.pattern = TrafficPattern::kPipeline;
  pipe.pattern_bytes = Bytes::MiB(32);
  pipe.compute_time = Duration::Millis(400);
  jobs.push_back(pipe);
  jobs.push_back(ExplicitJob("x", {c.host[1], c.host[3]},
                             {FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::MiB(100)}},
                             Duration::Millis(50), Flops::Tera(3)));
  return jobs;
}

void ExpectSamePlan(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  EXPECT_EQ(a.reference_job, b.reference_job);
  EXPECT_EQ(a.cut_weight, b.cut_weight);
  EXPECT_EQ(a.total_edge_weight, b.total_edge_weight);
  EXPECT_EQ(a.unpinned_flows, b.unpinned_flows);
  ASSERT_EQ(a.dag.edges.size(), b.dag.edges.size());
  for (size_t e = 0; e < a.dag.edges.size(); ++e) {
    EXPECT_EQ(a.dag.edges[e].from, b.dag.edges[e].from);
    EXPECT_EQ(a.dag.edges[e].to, b.dag.edges[e].to);
    EXPECT_EQ(a.dag.edges[e].weight, b.dag.edges[e].weight);
  }
  for (size_t j = 0; j < a.jobs.size(); ++j) {
    const JobPlan& x = a.jobs[j];
    const JobPlan& y = b.jobs[j];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.intensity, y.intensity);
    EXPECT_EQ(x.k, y.k);
    EXPECT_EQ(x.priority, y.priority);
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.level, y.level);
    EXPECT_EQ(x.comm_time, y.comm_time);
    EXPECT_EQ(x.period, y.period);
    EXPECT_EQ(x.bottleneck, y.bottleneck);
    ASSERT_EQ(x.flows.size(), y.flows.size());
    for (size_t f = 0; f < x.flows.size(); ++f) {
      EXPECT_EQ(x.flows[f].src, y.flows[f].src);
      EXPECT_EQ(x.flows[f].dst, y.flows[f].dst);
      EXPECT_EQ(x.flows[f].bytes, y.flows[f].bytes);
      EXPECT_EQ(x.flows[f].path, y.flows[f].path);
      EXPECT_EQ(x.flows[f].path_index, y.flows[f].path_index);
      EXPECT_EQ(x.flows[f].udp_sport, y.flows[f].udp_sport);
    }
  }
}

TEST(PlannerTest, SameSeedGivesIdenticalPlans) {
  const Clos2Small c = MakeClos2Small();
  PlannerOptions options;
  options.levels = 2;
  options.seed = 1234;
  FakeClock clock;
  Planner p1(c.topo, options, &clock);
  Planner p2(c.topo, options, &clock);
  const Result<Plan> a = p1.Run(MixedJobs(c));
  const Result<Plan> b = p2.Run(MixedJobs(c));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSamePlan(*a, *b);
  // Running again on a warm planner changes nothing either.
  const Result<Plan> again = p1.Run(MixedJobs(c));
  ASSERT_TRUE(again.ok());
  ExpectSamePlan(*a, *again);
}

TEST(PlannerTest, LevelsStayInsideTheUsableBand) {
  const Clos2Small c = MakeClos2Small();
  PlannerOptions options;
  options.levels = 6;
  options.reserved_high_levels = 1;
  options.reserved_low_levels = 2;
  FakeClock clock;
  Planner planner(c.topo, options, &clock);
  const Result<Plan> plan = planner.Run(MixedJobs(c));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->usable_levels, 3);
  std::set<int> ranks;
  for (const JobPlan& j : plan->jobs) {
    EXPECT_GE(j.level, 1) << j.id;
    EXPECT_LE(j.level, 3) << j.id;
    ranks.insert(j.rank);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));  // A permutation.
  EXPECT_LE(plan->cut_weight, plan->total_edge_weight);
  // Every contention edge respects the level order.
  for (const DagEdge& e : plan->dag.edges) {
    EXPECT_LE(plan->jobs[static_cast<size_t>(e.from)].level,
              plan->jobs[static_cast<size_t>(e.to)].level);
    EXPECT_LT(plan->jobs[static_cast<size_t>(e.from)].rank,
              plan->jobs[static_cast<size_t>(e.to)].rank);
  }
}

// ---- Errors ----

TEST(PlannerTest, DuplicateJobIdsAreRejected) {
  const OneSwitch net = MakeOneSwitch(2, 8);
  const JobSpec j =
      ExplicitJob("same", {net.h[0], net.h[1]}, {FlowDemand{net.h[0], net.h[1], Bytes::Of(1000)}},
                  Duration::Seconds(1));
  FakeClock clock;
  Planner planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({j, j});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(plan.status().message(), HasSubstr("'same'"));
}

TEST(PlannerTest, InvalidJobErrorNamesJobAndField) {
  const OneSwitch net = MakeOneSwitch(2, 8);
  JobSpec good =
      ExplicitJob("good", {net.h[0], net.h[1]}, {FlowDemand{net.h[0], net.h[1], Bytes::Of(1000)}},
                  Duration::Seconds(1));
  JobSpec bad = good;
  bad.id = "bad";
  bad.gpus_per_host = 0;
  FakeClock clock;
  Planner planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({good, bad});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), StartsWith("job 'bad': gpus_per_host"));
}

TEST(PlannerTest, FlowWithoutPathErrorNamesJob) {
  OneSwitch net = MakeOneSwitch(2, 8);
  const NodeId lonely = AddHost(net.topo, "lonely");
  const JobSpec j =
      ExplicitJob("stuck", {net.h[0], lonely}, {FlowDemand{net.h[0], lonely, Bytes::Of(1000)}},
                  Duration::Seconds(1));
  FakeClock clock;
  Planner planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run({j});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(plan.status().message(), HasSubstr("job 'stuck'"));
  EXPECT_THAT(plan.status().message(), HasSubstr("h1 -> lonely"));
}

struct BadOption {
  const char* name;
  void (*mutate)(PlannerOptions&);
  const char* expected_prefix;
};

TEST(PlannerTest, InvalidOptionsAreRejectedByName) {
  const BadOption cases[] = {
      {"levels 0", [](PlannerOptions& o) { o.levels = 0; }, "levels"},
      {"levels 65", [](PlannerOptions& o) { o.levels = 65; }, "levels"},
      {"no usable level",
       [](PlannerOptions& o) {
         o.levels = 4;
         o.reserved_high_levels = 2;
         o.reserved_low_levels = 2;
       },
       "levels"},
      {"topo_orders", [](PlannerOptions& o) { o.topo_orders = 0; }, "topo_orders"},
      {"max_exact_component", [](PlannerOptions& o) { o.max_exact_component = -1; },
       "max_exact_component"},
      {"peak 0", [](PlannerOptions& o) { o.gpu_peak_flops = 0; }, "gpu_peak_flops"},
      {"peak nan", [](PlannerOptions& o) { o.gpu_peak_flops = std::nan(""); }, "gpu_peak_flops"},
      {"peak inf", [](PlannerOptions& o) { o.gpu_peak_flops = HUGE_VAL; }, "gpu_peak_flops"},
      {"ports",
       [](PlannerOptions& o) {
         o.ports = PortRange{10, 9};
       },
       "ports"},
      {"measure", [](PlannerOptions& o) { o.pair_sim.measure_periods = 0; }, "pair_sim"},
      {"warmup", [](PlannerOptions& o) { o.pair_sim.warmup_periods = -1; }, "pair_sim"},
      {"events", [](PlannerOptions& o) { o.pair_sim.max_events = 99; }, "pair_sim"},
  };
  const OneSwitch net = MakeOneSwitch(2, 8);
  FakeClock clock;
  for (const BadOption& c : cases) {
    SCOPED_TRACE(c.name);
    PlannerOptions o;
    c.mutate(o);
    const Status s = ValidatePlannerOptions(o);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), StartsWith(std::string(c.expected_prefix) + ":"));
    // Run() checks too.
    Planner planner(net.topo, o, &clock);
    const Result<Plan> plan = planner.Run({});
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status(), s);
  }
}

// Each reserved-level option is named on its own (planner.h: "errors name the option").
TEST(PlannerTest, NegativeReservedLevelsNameTheOption) {
  PlannerOptions high;
  high.reserved_high_levels = -1;
  const Status sh = ValidatePlannerOptions(high);
  ASSERT_FALSE(sh.ok());
  EXPECT_EQ(sh.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sh.message(), StartsWith("reserved_high_levels:"));
  PlannerOptions low;
  low.reserved_low_levels = -1;
  const Status sl = ValidatePlannerOptions(low);
  ASSERT_FALSE(sl.ok());
  EXPECT_THAT(sl.message(), StartsWith("reserved_low_levels:"));
}

TEST(PlannerTest, DefaultOptionsAreValid) {
  EXPECT_TRUE(ValidatePlannerOptions(PlannerOptions{}).ok());
  PlannerOptions edge;
  edge.levels = 64;
  edge.reserved_high_levels = 63;
  EXPECT_TRUE(ValidatePlannerOptions(edge).ok());
  edge.levels = 1;
  edge.reserved_high_levels = 0;
  EXPECT_TRUE(ValidatePlannerOptions(edge).ok());
}

TEST(PlannerTest, KeepsItsOptions) {
  const OneSwitch net = MakeOneSwitch(2, 8);
  PlannerOptions o;
  o.levels = 3;
  o.seed = 99;
  Planner planner(net.topo, o);
  EXPECT_EQ(planner.options().levels, 3);
  EXPECT_EQ(planner.options().seed, 99u);
  EXPECT_EQ(&planner.path_finder().topology(), &net.topo);
}

// ---- Timing through the injected clock ----

TEST(PlannerTest, FrozenFakeClockGivesZeroTimings) {
  const Clos2Small c = MakeClos2Small();
  FakeClock clock;
  clock.Set(Duration::Seconds(100));  // Absolute time must not leak into durations.
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run(MixedJobs(c));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const StageTimings& t = plan->timing;
  for (Duration d :
       {t.traffic, t.profile, t.priority, t.path_selection, t.compression, t.ports, t.total}) {
    EXPECT_EQ(d, Duration::Zero());
  }
}

TEST(PlannerTest, StageTimingsComeFromTheInjectedClock) {
  const Clos2Small c = MakeClos2Small();
  const TickingClock clock(Duration::Millis(1));
  Planner planner(c.topo, PlannerOptions{}, &clock);
  const Result<Plan> plan = planner.Run(MixedJobs(c));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const StageTimings& t = plan->timing;
  // One clock read at the start and one after each of the six stages.
  EXPECT_EQ(clock.reads(), 7);
  for (Duration d : {t.traffic, t.profile, t.priority, t.path_selection, t.compression, t.ports}) {
    EXPECT_EQ(d, Duration::Millis(1));
  }
  EXPECT_EQ(t.total, Duration::Millis(6));
  EXPECT_EQ(t.total,
            t.traffic + t.profile + t.priority + t.path_selection + t.compression + t.ports);
}

TEST(PlannerTest, NullClockFallsBackToTheSteadyClock) {
  const Clos2Small c = MakeClos2Small();
  Planner planner(c.topo, PlannerOptions{}, nullptr);
  const Result<Plan> plan = planner.Run(MixedJobs(c));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const StageTimings& t = plan->timing;
  for (Duration d :
       {t.traffic, t.profile, t.priority, t.path_selection, t.compression, t.ports, t.total}) {
    EXPECT_GE(d, Duration::Zero());
  }
  EXPECT_EQ(t.total,
            t.traffic + t.profile + t.priority + t.path_selection + t.compression + t.ports);
}

// ---- Bound for huge contention components (max_exact_component) ----
// 60 jobs on one shared link form one component; with a bound of 10 it is compressed with
// split boundaries at 10 evenly spaced positions (compression.h). Everything before stage 4 is
// unchanged, the levels still respect every DAG edge and use all levels, and the cut cannot
// beat the exact one.
TEST(PlannerTest, ComponentsAboveTheBoundAreCompressedCoarselyButValidly) {
  const OneSwitch net = MakeOneSwitch(2, 100);
  std::vector<JobSpec> jobs;
  for (int j = 0; j < 60; ++j) {
    const NodeId h1 = net.h[0];
    const NodeId h2 = net.h[1];
    jobs.push_back(ExplicitJob(
        "j" + std::to_string(j), {h1, h2}, {FlowDemand{h1, h2, Bytes::Of(100000000 + 7000000 * j)}},
        Duration::Seconds(0.5 + 0.013 * ((j * 37) % 60)), Flops::Giga(10 + (j * 11) % 17)));
  }
  FakeClock clock;
  PlannerOptions exact_options;
  exact_options.max_exact_component = 0;
  PlannerOptions bounded_options;
  bounded_options.max_exact_component = 10;
  Planner exact_planner(net.topo, exact_options, &clock);
  Planner bounded_planner(net.topo, bounded_options, &clock);
  const Result<Plan> exact = exact_planner.Run(jobs);
  const Result<Plan> bounded = bounded_planner.Run(jobs);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  ASSERT_EQ(bounded->dag.edges.size(), 60u * 59u / 2u);
  EXPECT_EQ(bounded->total_edge_weight, exact->total_edge_weight);
  std::set<int> levels;
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(bounded->jobs[j].rank, exact->jobs[j].rank);
    EXPECT_EQ(bounded->jobs[j].priority, exact->jobs[j].priority);
    levels.insert(bounded->jobs[j].level);
  }
  for (const DagEdge& e : bounded->dag.edges) {
    EXPECT_LE(bounded->jobs[static_cast<size_t>(e.from)].level,
              bounded->jobs[static_cast<size_t>(e.to)].level);
  }
  EXPECT_EQ(levels.size(), 8u);
  EXPECT_GT(bounded->cut_weight, 0.0);
  EXPECT_LE(bounded->cut_weight, exact->cut_weight * (1 + 1e-12));
  // The default bound (1024) leaves this 60-job component exact.
  Planner default_planner(net.topo, PlannerOptions{}, &clock);
  const Result<Plan> by_default = default_planner.Run(jobs);
  ASSERT_TRUE(by_default.ok());
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(by_default->jobs[j].level, exact->jobs[j].level);
  }
}

}  // namespace
}  // namespace crux::core
