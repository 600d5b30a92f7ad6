// The planner's shared stages (plan_stages.h) that are more than a moved function: the source
// port cache of stage 5 and the stage timings.
#include "crux/core/plan/plan_stages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "crux/core/plan/path_selection.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/path_finder.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::MakeClos2Small;

// Answers as the hash model does (or never, with `reachable` false) and counts the questions.
class CountingResolver final : public SourcePortResolver {
 public:
  explicit CountingResolver(bool reachable) : reachable_(reachable) {}
  std::optional<uint16_t> FindPort(PathFinder& paths, NodeId src, NodeId dst, size_t path_index,
                                   PortRange range) const override {
    ++calls_;
    if (!reachable_) return std::nullopt;
    return hash_.FindPort(paths, src, dst, path_index, range);
  }
  int calls() const { return calls_; }

 private:
  bool reachable_;
  HashEcmpModel hash_{0};
  mutable int calls_ = 0;
};

// Routes `flows` alone (every flow on its least-congested path).
JobRouting Routed(PathFinder& finder, const Topology& topo, std::vector<FlowDemand> flows) {
  JobRouting routing;
  routing.flows = std::move(flows);
  LinkLoad load(topo);
  std::vector<size_t> flow_order;
  EXPECT_TRUE(SelectJobPaths(finder, routing, load, flow_order).ok());
  return routing;
}

class SourcePortCacheTest : public ::testing::Test {
 protected:
  SourcePortCacheTest() : c_(MakeClos2Small()), finder_(c_.topo) {}

  // Two inter-host flows (host0 -> host2, host1 -> host3) and one inside host0.
  JobRouting ThreeFlows() {
    return Routed(finder_, c_.topo,
                  {FlowDemand{c_.nic[0][0], c_.nic[2][0], Bytes::FromDouble(1e6)},
                   FlowDemand{c_.nic[1][0], c_.nic[3][0], Bytes::FromDouble(2e6)},
                   FlowDemand{c_.nic[0][0], c_.nic[0][1], Bytes::FromDouble(3e6)}});
  }

  Clos2Small c_;
  PathFinder finder_;
};

TEST_F(SourcePortCacheTest, GivesTheFlowPlansOfMakeFlowPlansWithAPortPerInterHostFlow) {
  CountingResolver resolver(/*reachable=*/true);
  SourcePortCache ports(c_.topo, finder_, &resolver, PortRange{}, /*resolve=*/true);
  const JobRouting routing = ThreeFlows();
  int unpinned = 0;
  const std::vector<FlowPlan> flows = ports.FlowPlans(routing, unpinned);
  const std::vector<FlowPlan> plain = MakeFlowPlans(routing);
  ASSERT_EQ(flows.size(), 3u);
  for (size_t f = 0; f < flows.size(); ++f) {
    EXPECT_EQ(flows[f].src, plain[f].src);
    EXPECT_EQ(flows[f].dst, plain[f].dst);
    EXPECT_EQ(flows[f].bytes, plain[f].bytes);
    EXPECT_EQ(flows[f].path, plain[f].path);
    EXPECT_EQ(flows[f].path_index, plain[f].path_index);
    EXPECT_EQ(flows[f].num_paths, plain[f].num_paths);
  }
  EXPECT_TRUE(flows[0].udp_sport.has_value());
  EXPECT_TRUE(flows[1].udp_sport.has_value());
  EXPECT_FALSE(flows[2].udp_sport.has_value());  // Inside one host: nothing to pin.
  EXPECT_EQ(unpinned, 0);
  EXPECT_EQ(resolver.calls(), 2);
}

TEST_F(SourcePortCacheTest, AsksTheResolverOncePerFlowPath) {
  CountingResolver resolver(/*reachable=*/true);
  SourcePortCache ports(c_.topo, finder_, &resolver, PortRange{}, /*resolve=*/true);
  const JobRouting routing = ThreeFlows();
  int unpinned = 0;
  const std::vector<FlowPlan> first = ports.FlowPlans(routing, unpinned);
  const std::vector<FlowPlan> again = ports.FlowPlans(routing, unpinned);
  EXPECT_EQ(resolver.calls(), 2);
  for (size_t f = 0; f < first.size(); ++f) EXPECT_EQ(first[f].udp_sport, again[f].udp_sport);
}

TEST_F(SourcePortCacheTest, RemembersThatNoPortReachesAPathAndCountsTheFlowEachTime) {
  CountingResolver resolver(/*reachable=*/false);
  SourcePortCache ports(c_.topo, finder_, &resolver, PortRange{}, /*resolve=*/true);
  const JobRouting routing = ThreeFlows();
  int unpinned = 0;
  ports.FlowPlans(routing, unpinned);
  ports.FlowPlans(routing, unpinned);
  EXPECT_EQ(unpinned, 4);  // The two inter-host flows, twice.
  EXPECT_EQ(resolver.calls(), 2);
}

TEST_F(SourcePortCacheTest, WithoutResolvingLeavesEveryFlowUnpinnedAndUncounted) {
  CountingResolver resolver(/*reachable=*/true);
  SourcePortCache ports(c_.topo, finder_, &resolver, PortRange{}, /*resolve=*/false);
  int unpinned = 0;
  for (const FlowPlan& f : ports.FlowPlans(ThreeFlows(), unpinned)) {
    EXPECT_FALSE(f.udp_sport.has_value());
  }
  EXPECT_EQ(unpinned, 0);
  EXPECT_EQ(resolver.calls(), 0);
}

TEST_F(SourcePortCacheTest, WithoutAResolverUsesTheHashModelWithSeedZero) {
  SourcePortCache ports(c_.topo, finder_, nullptr, PortRange{}, /*resolve=*/true);
  const HashEcmpModel hash(0);
  const JobRouting routing = ThreeFlows();
  int unpinned = 0;
  const std::vector<FlowPlan> flows = ports.FlowPlans(routing, unpinned);
  EXPECT_EQ(flows[0].udp_sport,
            hash.FindPort(finder_, flows[0].src, flows[0].dst, flows[0].path_index, PortRange{}));
}

TEST(StageMarksTest, EachStageTakesTheTimeSinceThePreviousMark) {
  StageMarks t;
  t.start = Duration::Millis(10);
  t.traffic = Duration::Millis(11);
  t.profile = Duration::Millis(13);
  t.priority = Duration::Millis(16);
  t.paths = Duration::Millis(20);
  t.compression = Duration::Millis(25);
  t.end = Duration::Millis(31);
  const StageTimings timing = t.Timings();
  EXPECT_EQ(timing.traffic, Duration::Millis(1));
  EXPECT_EQ(timing.profile, Duration::Millis(2));
  EXPECT_EQ(timing.priority, Duration::Millis(3));
  EXPECT_EQ(timing.path_selection, Duration::Millis(4));
  EXPECT_EQ(timing.compression, Duration::Millis(5));
  EXPECT_EQ(timing.ports, Duration::Millis(6));
  EXPECT_EQ(timing.total, Duration::Millis(21));
}

}  // namespace
}  // namespace crux::core
