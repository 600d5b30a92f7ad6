#include "crux/core/plan/path_selection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::Must;
using ::testing::HasSubstr;

constexpr double kG = 1e9;  // 1 Gbps in bits/s.

LinkId L(const Topology& t, NodeId a, NodeId b) { return Must(t.FindLink(a, b), "FindLink"); }

// The Agg a cross-ToR path (of a Clos2Small) goes through.
NodeId AggOf(const Clos2Small& c, const PathSet& set, size_t i) {
  return c.topo.link(set.Path(i)[1]).dst;
}

// ---- LinkLoad ----

TEST(LinkLoadTest, StartsEmpty) {
  const LinkLoad load(10);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(load.Get(LinkId(i)), 0.0);
  EXPECT_TRUE(load.touched().empty());
}

TEST(LinkLoadTest, AddAccumulatesAndTracksTouchedLinksOnce) {
  LinkLoad load(10);
  load.Add(LinkId(3), 5.0);
  load.Add(LinkId(7), 1.0);
  load.Add(LinkId(3), 2.5);
  EXPECT_EQ(load.Get(LinkId(3)), 7.5);
  EXPECT_EQ(load.Get(LinkId(7)), 1.0);
  EXPECT_EQ(load.Get(LinkId(0)), 0.0);
  EXPECT_EQ(load.touched(), (std::vector<LinkId>{LinkId(3), LinkId(7)}));
}

TEST(LinkLoadTest, ResetClearsTouchedLinks) {
  LinkLoad load(10);
  load.Add(LinkId(1), 4.0);
  load.Add(LinkId(9), 6.0);
  load.Reset();
  EXPECT_EQ(load.Get(LinkId(1)), 0.0);
  EXPECT_EQ(load.Get(LinkId(9)), 0.0);
  EXPECT_TRUE(load.touched().empty());
  // Usable again after a reset.
  load.Add(LinkId(9), 2.0);
  EXPECT_EQ(load.Get(LinkId(9)), 2.0);
  EXPECT_EQ(load.touched(), (std::vector<LinkId>{LinkId(9)}));
}

TEST(LinkLoadTest, TopologyConstructorCachesInverseCapacities) {
  const Clos2Small c = MakeClos2Small(/*nic_gbps=*/50, /*uplink_gbps=*/200);
  const LinkLoad cached(c.topo);
  ASSERT_NE(cached.inverse_capacity(), nullptr);
  for (uint32_t i = 0; i < c.topo.num_links(); ++i) {
    EXPECT_DOUBLE_EQ(cached.inverse_capacity()[i],
                     1.0 / c.topo.link(LinkId(i)).capacity.ToBitsPerSec());
    EXPECT_EQ(cached.Get(LinkId(i)), 0.0);
  }
  EXPECT_DOUBLE_EQ(cached.inverse_capacity()[c.tor_agg[0][0].value()], 1.0 / (200 * kG));
  const LinkLoad plain(c.topo.num_links());
  EXPECT_EQ(plain.inverse_capacity(), nullptr);
}

// ---- LeastCongestedPath ----

class LeastCongestedPathTest : public ::testing::Test {
 protected:
  LeastCongestedPathTest() : c_(MakeClos2Small()) {}

  // The 3 cross-ToR paths host0/nic0 -> host2/nic0; path a goes through agg a.
  const PathSet& Paths(PathFinder& f) { return *Must(f.Paths(c_.nic[0][0], c_.nic[2][0]), "P"); }
  LinkId Up(int a) const { return c_.tor_agg[0][a]; }
  LinkId Down(int a) const { return L(c_.topo, c_.agg[a], c_.tor[1]); }

  Clos2Small c_;
};

TEST_F(LeastCongestedPathTest, PicksTheEmptiestPath) {
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  load.Add(Up(0), 50 * kG);
  load.Add(Up(1), 10 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 2u);
  load.Add(Up(2), 20 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
}

TEST_F(LeastCongestedPathTest, BottleneckBeatsSummedUtilisation) {
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  load.Add(Up(0), 60 * kG);  // max 0.61, sum 0.64
  load.Add(Up(1), 40 * kG);  // max 0.41, sum 0.84
  load.Add(Down(1), 40 * kG);
  load.Add(Up(2), 70 * kG);  // max 0.71
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
}

TEST_F(LeastCongestedPathTest, EqualBottlenecksAreDecidedBySummedUtilisation) {
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  for (int a = 0; a < 3; ++a) load.Add(Up(a), 50 * kG);
  load.Add(Down(0), 30 * kG);
  load.Add(Down(1), 10 * kG);
  load.Add(Down(2), 20 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
}

TEST_F(LeastCongestedPathTest, FullTiesGoToTheLowestIndex) {
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 0u);
  load.Add(Up(0), 5 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
  load.Add(Up(1), 5 * kG);
  load.Add(Up(2), 5 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 0u);
}

TEST_F(LeastCongestedPathTest, DifferencesBelowRelativeToleranceAreTies) {
  PathFinder f(c_.topo);
  {
    LinkLoad load(c_.topo.num_links());
    load.Add(Up(0), 50 * kG * (1 + 1e-12));  // Noise: still a tie, lowest index wins.
    load.Add(Up(1), 50 * kG);
    load.Add(Up(2), 50 * kG);
    EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 0u);
  }
  {
    LinkLoad load(c_.topo.num_links());
    load.Add(Up(0), 50 * kG * (1 + 1e-6));  // A real difference.
    load.Add(Up(1), 50 * kG);
    load.Add(Up(2), 50 * kG);
    EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
  }
}

TEST_F(LeastCongestedPathTest, UtilisationIsRelativeToCapacity) {
  ASSERT_TRUE(c_.topo.SetLinkCapacity(Up(1), Bandwidth::Gbps(400)).ok());
  ASSERT_TRUE(c_.topo.SetLinkCapacity(Down(1), Bandwidth::Gbps(400)).ok());
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  load.Add(Up(0), 50 * kG);   // 0.51 of 100 G.
  load.Add(Up(1), 100 * kG);  // 0.2525 of 400 G: more bits, less utilisation.
  load.Add(Up(2), 60 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
}

TEST_F(LeastCongestedPathTest, EmptyNetworkPrefersTheWiderPathBySum) {
  // All bottlenecks are the 100 G NIC links; the sum then favours the 400 G Agg path.
  ASSERT_TRUE(c_.topo.SetLinkCapacity(Up(2), Bandwidth::Gbps(400)).ok());
  ASSERT_TRUE(c_.topo.SetLinkCapacity(Down(2), Bandwidth::Gbps(400)).ok());
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 2u);
}

TEST_F(LeastCongestedPathTest, FlowRateCountsTowardsUtilisation) {
  // Path 0 is 400 G end to end and already carries 10 G; paths 1 and 2 cross 100 G Agg links
  // carrying 0.5 G. A 1 G flow: path 0 peaks at (10 + 1) / 400 = 0.0275, path 1 at
  // (0.5 + 1) / 100 = 0.015, so path 1 wins. A 50 G flow flips it: (10 + 50) / 400 = 0.15 vs
  // (0.5 + 50) / 100 = 0.505.
  ASSERT_TRUE(c_.topo.SetLinkCapacity(Up(0), Bandwidth::Gbps(400)).ok());
  ASSERT_TRUE(c_.topo.SetLinkCapacity(Down(0), Bandwidth::Gbps(400)).ok());
  ASSERT_TRUE(
      c_.topo.SetLinkCapacity(L(c_.topo, c_.nic[0][0], c_.tor[0]), Bandwidth::Gbps(400)).ok());
  ASSERT_TRUE(
      c_.topo.SetLinkCapacity(L(c_.topo, c_.tor[1], c_.nic[2][0]), Bandwidth::Gbps(400)).ok());
  PathFinder f(c_.topo);
  LinkLoad load(c_.topo.num_links());
  load.Add(Up(0), 10 * kG);
  load.Add(Up(1), 0.5 * kG);
  load.Add(Up(2), 0.5 * kG);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 1 * kG, load), 1u);
  EXPECT_EQ(LeastCongestedPath(c_.topo, Paths(f), 50 * kG, load), 0u);
}

// Reference: materialise every path and compare them in index order exactly as documented.
size_t BruteForceLeastCongested(const Topology& t, const PathSet& paths, double bps,
                                const LinkLoad& load) {
  const auto less = [](double a, double b) {
    return a < b - 1e-9 * std::max(std::abs(a), std::abs(b));
  };
  size_t best = 0;
  double best_max = 0;
  double best_sum = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    double mx = 0;
    double sum = 0;
    for (LinkId l : paths.Path(i)) {
      const double u = (load.Get(l) + bps) / t.link(l).capacity.ToBitsPerSec();
      mx = std::max(mx, u);
      sum += u;
    }
    if (i == 0 || less(mx, best_max) || (!less(best_max, mx) && less(sum, best_sum))) {
      best = i;
      best_max = mx;
      best_sum = sum;
    }
  }
  return best;
}

TEST(LeastCongestedPathPropertyTest, MatchesExhaustiveComparisonInIndexOrder) {
  // Random, often idle, often tied loads on uniform and non-uniform fabrics: the segment-wise
  // scan with its shortcuts must pick exactly what an exhaustive scan picks.
  Rng rng(2024);
  const double levels[] = {0, 0, 0, 1 * kG, 1 * kG, 5 * kG, 20 * kG, 60 * kG};
  int trials = 0;
  for (int topo_case = 0; topo_case < 4; ++topo_case) {
    Clos2Small c = MakeClos2Small();
    if (topo_case >= 2) {  // Non-uniform Agg capacities, and a slower NIC.
      ASSERT_TRUE(c.topo.SetLinkCapacity(c.tor_agg[0][1], Bandwidth::Gbps(400)).ok());
      ASSERT_TRUE(c.topo.SetLinkCapacity(L(c.topo, c.agg[2], c.tor[1]), Bandwidth::Gbps(40)).ok());
      ASSERT_TRUE(
          c.topo.SetLinkCapacity(L(c.topo, c.nic[0][1], c.tor[0]), Bandwidth::Gbps(25)).ok());
    }
    PathFinder f(c.topo);
    const std::vector<std::pair<NodeId, NodeId>> pairs = {{c.host[0], c.host[2]},
                                                          {c.nic[0][0], c.nic[2][1]},
                                                          {c.host[2], c.host[0]},
                                                          {c.host[0], c.nic[3][0]}};
    for (int trial = 0; trial < 300; ++trial) {
      LinkLoad plain(c.topo.num_links());
      LinkLoad cached(c.topo);
      for (uint32_t l = 0; l < c.topo.num_links(); ++l) {
        const double v = levels[rng.Uniform(8)];
        if (v > 0) {
          plain.Add(LinkId(l), v);
          cached.Add(LinkId(l), v);
        }
      }
      const double bps = levels[3 + rng.Uniform(5)];
      for (const auto& [src, dst] : pairs) {
        const PathSet& set = *Must(f.Paths(src, dst), "Paths");
        const size_t expected = BruteForceLeastCongested(c.topo, set, bps, plain);
        ASSERT_EQ(LeastCongestedPath(c.topo, set, bps, plain), expected)
            << "case " << topo_case << " trial " << trial;
        ASSERT_EQ(LeastCongestedPath(c.topo, set, bps, cached), expected)
            << "case " << topo_case << " trial " << trial;
        ++trials;
      }
    }
  }
  EXPECT_EQ(trials, 4 * 300 * 4);
}

// ---- SelectPaths ----

JobRouting OneJob(std::vector<FlowDemand> flows, double ips = 1.0) {
  JobRouting j;
  j.flows = std::move(flows);
  j.iterations_per_sec = ips;
  return j;
}

TEST(SelectPathsTest, SpreadsEqualFlowsFromTheSameTorOverDifferentAggs) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {
      OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000000000)},
              FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000000000)},
              FlowDemand{c.nic[0][1], c.nic[2][1], Bytes::Of(1000000000)}})};
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  ASSERT_EQ(jobs[0].paths.size(), 3u);
  ASSERT_EQ(jobs[0].choice.size(), 3u);
  std::set<NodeId> aggs;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_NE(jobs[0].paths[i], nullptr);
    aggs.insert(AggOf(c, *jobs[0].paths[i], jobs[0].choice[i]));
  }
  EXPECT_EQ(aggs.size(), 3u);
  for (int a = 0; a < 3; ++a) EXPECT_EQ(load.Get(c.tor_agg[0][a]), 8 * kG) << a;
}

TEST(SelectPathsTest, TwoJobsFromOneTorTakeDifferentAggs) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {
      OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000000000)}}),
      OneJob({FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000000000)}})};
  ASSERT_TRUE(SelectPaths(f, {0, 1}, jobs, load).ok());
  EXPECT_EQ(jobs[0].choice[0], 0u);
  EXPECT_NE(AggOf(c, *jobs[0].paths[0], jobs[0].choice[0]),
            AggOf(c, *jobs[1].paths[0], jobs[1].choice[0]));
}

TEST(SelectPathsTest, FirstRoutedJobGetsTheFreePath) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  // Agg 0 and 1 already carry 5 G each; Agg 2 is free.
  const auto run = [&](std::vector<size_t> order) {
    LinkLoad load(c.topo.num_links());
    load.Add(c.tor_agg[0][0], 5 * kG);
    load.Add(c.tor_agg[0][1], 5 * kG);
    std::vector<JobRouting> jobs = {
        OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000000000)}}),   // 8 G.
        OneJob({FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000000000)}})};  // 8 G.
    EXPECT_TRUE(SelectPaths(f, order, jobs, load).ok());
    return std::vector<size_t>{jobs[0].choice[0], jobs[1].choice[0]};
  };
  EXPECT_EQ(run({0, 1}), (std::vector<size_t>{2, 0}));
  EXPECT_EQ(run({1, 0}), (std::vector<size_t>{0, 2}));
}

TEST(SelectPathsTest, LargestFlowOfAJobIsRoutedFirst) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {
      OneJob({FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000)},        // small, first
              FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(5000000)}})};  // large
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  EXPECT_EQ(jobs[0].choice[1], 0u);  // The large flow had the empty network.
  EXPECT_EQ(jobs[0].choice[0], 1u);  // The small flow avoided it.
}

TEST(SelectPathsTest, EqualFlowsKeepInputOrder) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000)},
                                          FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000)}})};
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  EXPECT_EQ(jobs[0].choice[0], 0u);
  EXPECT_EQ(jobs[0].choice[1], 1u);
}

TEST(SelectPathsTest, CommitsBytesTimesIterationRateOnEveryLinkOfThePath) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {
      OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000000000)}}, 2.5)};
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  const std::vector<LinkId> path = jobs[0].paths[0]->Path(jobs[0].choice[0]);
  for (LinkId l : path) EXPECT_DOUBLE_EQ(load.Get(l), 20 * kG) << c.topo.LinkName(l);
  EXPECT_EQ(load.touched().size(), path.size());
}

TEST(SelectPathsTest, SinglePathFlowsStillCommitLoad) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {
      OneJob({FlowDemand{c.nic[0][0], c.nic[1][0], Bytes::Of(125)}})};  // 1000 bits.
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  EXPECT_EQ(jobs[0].choice[0], 0u);
  EXPECT_EQ(jobs[0].paths[0]->size(), 1u);
  EXPECT_DOUBLE_EQ(load.Get(L(c.topo, c.nic[0][0], c.tor[0])), 1000.0);
  EXPECT_DOUBLE_EQ(load.Get(L(c.topo, c.tor[0], c.nic[1][0])), 1000.0);
}

TEST(SelectPathsTest, OutputPointsIntoTheFindersCache) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.host[0], c.host[2], Bytes::Of(100)}})};
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  EXPECT_EQ(jobs[0].paths[0], Must(f.Paths(c.host[0], c.host[2]), "Paths"));
  EXPECT_LT(jobs[0].choice[0], 12u);
}

TEST(SelectPathsTest, JobsOutsideTheOrderAreUntouched) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(100)}}),
                                  OneJob({FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(100)}}),
                                  OneJob({FlowDemand{c.nic[0][1], c.nic[2][1], Bytes::Of(100)}})};
  ASSERT_TRUE(SelectPaths(f, {2, 0}, jobs, load).ok());
  EXPECT_EQ(jobs[0].paths.size(), 1u);
  EXPECT_TRUE(jobs[1].paths.empty());
  EXPECT_TRUE(jobs[1].choice.empty());
  EXPECT_EQ(jobs[2].paths.size(), 1u);
  // Job 2 went first and took Agg 0; job 0 then avoided it.
  EXPECT_EQ(jobs[2].choice[0], 0u);
  EXPECT_EQ(jobs[0].choice[0], 1u);
}

TEST(SelectPathsTest, EarlierLoadIsRespectedAcrossCalls) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000)}}),
                                  OneJob({FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000)}})};
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  ASSERT_TRUE(SelectPaths(f, {1}, jobs, load).ok());
  EXPECT_NE(jobs[0].choice[0], jobs[1].choice[0]);
  load.Reset();
  ASSERT_TRUE(SelectPaths(f, {1}, jobs, load).ok());
  EXPECT_EQ(jobs[1].choice[0], 0u);  // Fresh network again.
}

TEST(SelectPathsTest, UnreachableFlowIsNotFoundAndNamed) {
  Clos2Small c = MakeClos2Small();
  const NodeId h = testing::AddHost(c.topo, "host4");
  const NodeId nic = testing::AddNic(c.topo, h, 0);
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[0][0], nic, Bytes::Of(100)}})};
  const Status s = SelectPaths(f, {0}, jobs, load);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("flow host0/nic0 -> host4/nic0"));
}

TEST(SelectPathsTest, SwitchEndpointIsInvalidAndNamed) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[0][0], c.tor[1], Bytes::Of(100)}})};
  const Status s = SelectPaths(f, {0}, jobs, load);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("flow host0/nic0 -> tor1"));
}

TEST(SelectPathsTest, ReusesPathSetsAlreadyFilledIn) {
  const Clos2Small c = MakeClos2Small();
  PathFinder first(c.topo);
  LinkLoad load(c.topo);
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000)},
                                          FlowDemand{c.host[1], c.host[3], Bytes::Of(1000)}})};
  ASSERT_TRUE(SelectPaths(first, {0}, jobs, load).ok());
  const std::vector<const PathSet*> before = jobs[0].paths;
  // A second pass with another (empty) finder reuses the sets instead of looking them up.
  PathFinder second(c.topo);
  load.Reset();
  ASSERT_TRUE(SelectPaths(second, {0}, jobs, load).ok());
  EXPECT_EQ(second.CachedPairs(), 0u);
  EXPECT_EQ(jobs[0].paths, before);
}

TEST(SelectPathsTest, RefillsPathsWhenTheFlowCountChanged) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo);
  std::vector<JobRouting> jobs = {OneJob({FlowDemand{c.nic[0][0], c.nic[2][0], Bytes::Of(1000)}})};
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  jobs[0].flows.push_back(FlowDemand{c.nic[1][0], c.nic[3][0], Bytes::Of(1000)});
  ASSERT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  ASSERT_EQ(jobs[0].paths.size(), 2u);
  EXPECT_EQ(jobs[0].paths[1], Must(f.Paths(c.nic[1][0], c.nic[3][0]), "Paths"));
  EXPECT_EQ(jobs[0].paths[0], Must(f.Paths(c.nic[0][0], c.nic[2][0]), "Paths"));
}

TEST(SelectPathsTest, EmptyJobIsFine) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  LinkLoad load(c.topo.num_links());
  std::vector<JobRouting> jobs = {OneJob({})};
  EXPECT_TRUE(SelectPaths(f, {0}, jobs, load).ok());
  EXPECT_TRUE(jobs[0].paths.empty());
  EXPECT_TRUE(load.touched().empty());
}

}  // namespace
}  // namespace crux::core
