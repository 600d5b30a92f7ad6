#include "crux/core/faults/planned_share.h"

#include <gtest/gtest.h>

#include <vector>

#include "crux/core/topology/builders.h"

namespace crux::core {
namespace {

// a -- s -- b, c -- s: 100 G cables (explicit topology: hosts are the endpoints).
class PlannedShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ExplicitParams p;
    p.nodes = {{"a", true}, {"b", true}, {"c", true}, {"s", false}};
    p.links = {{"a", "s", 100}, {"b", "s", 100}, {"c", "s", 100}};
    topo_ = BuildExplicit(p).value();
  }
  LinkId L(const char* x, const char* y) const {
    return topo_.FindLink(topo_.FindNode(x).value(), topo_.FindNode(y).value()).value();
  }
  Topology topo_;
};

TEST_F(PlannedShareTest, OneLevelIsMaxMinFair) {
  // a->b and c->b share s->b (50 each); a->c alone on s->c but a->s is shared with a->b: a->c
  // gets the 50 a->b leaves on a->s.
  const std::vector<LinkId> ab{L("a", "s"), L("s", "b")};
  const std::vector<LinkId> cb{L("c", "s"), L("s", "b")};
  const std::vector<LinkId> ac{L("a", "s"), L("s", "c")};
  const std::vector<ShareFlow> flows{{ab, 0}, {cb, 0}, {ac, 0}};
  const std::vector<double> r = PlannedShares(flows, topo_);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_NEAR(r[0], 50e9, 1);
  EXPECT_NEAR(r[1], 50e9, 1);
  EXPECT_NEAR(r[2], 50e9, 1);
}

TEST_F(PlannedShareTest, BottleneckLeftoversGoToTheOthers) {
  // Three flows into b (33.3 each); a fourth, c->a, shares only c->s with c->b and gets the
  // 66.7 that c->b leaves there.
  const std::vector<LinkId> ab{L("a", "s"), L("s", "b")};
  const std::vector<LinkId> cb{L("c", "s"), L("s", "b")};
  const std::vector<LinkId> ca{L("c", "s"), L("s", "a")};
  const std::vector<ShareFlow> flows{{ab, 0}, {cb, 0}, {ab, 0}, {ca, 0}};
  const std::vector<double> r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 100e9 / 3, 1);
  EXPECT_NEAR(r[1], 100e9 / 3, 1);
  EXPECT_NEAR(r[2], 100e9 / 3, 1);
  EXPECT_NEAR(r[3], 100e9 * 2 / 3, 1);
}

TEST_F(PlannedShareTest, StrictPriorityServesLevelZeroFirst) {
  const std::vector<LinkId> ab{L("a", "s"), L("s", "b")};
  const std::vector<LinkId> cb{L("c", "s"), L("s", "b")};
  // Level 0 takes s->b whole; level 1 is starved there (0: the plan promises it nothing).
  const std::vector<ShareFlow> flows{{cb, 1}, {ab, 0}};
  const std::vector<double> r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 0, 1);
  EXPECT_NEAR(r[1], 100e9, 1);
}

TEST_F(PlannedShareTest, AProbeTakesNothingAndGetsWhatANewcomerWould) {
  // a->b and c->b share s->b at 50 each; a probe a->b (a newcomer) leaves them at 50 and would
  // get 100 / 3 there; a probe c->a gets what c->b leaves on c->s (50); a probe below their
  // level on s->b nothing.
  const std::vector<LinkId> ab{L("a", "s"), L("s", "b")};
  const std::vector<LinkId> cb{L("c", "s"), L("s", "b")};
  const std::vector<LinkId> ca{L("c", "s"), L("s", "a")};
  const std::vector<ShareFlow> flows{{ab, 1},
                                     {ab, 1, /*newcomer=*/true},
                                     {cb, 1},
                                     {ca, 1, /*newcomer=*/true},
                                     {cb, 2, /*newcomer=*/true}};
  const std::vector<double> r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 50e9, 1);
  EXPECT_NEAR(r[1], 100e9 / 3, 1);
  EXPECT_NEAR(r[2], 50e9, 1);
  EXPECT_NEAR(r[3], 50e9, 1);
  EXPECT_NEAR(r[4], 0, 1);
}

TEST_F(PlannedShareTest, AFlowTakesNoMoreThanItsDemand) {
  // a->b wants 10 of s->b: c->b takes the other 90 (unbounded, it would split 50/50). A demand
  // above the fair share changes nothing; at level 0 a bounded flow leaves level 1 the rest.
  const std::vector<LinkId> ab{L("a", "s"), L("s", "b")};
  const std::vector<LinkId> cb{L("c", "s"), L("s", "b")};
  std::vector<ShareFlow> flows{{ab, 0, false, 10e9}, {cb, 0}};
  std::vector<double> r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 10e9, 1);
  EXPECT_NEAR(r[1], 90e9, 1);
  flows[0].demand = 70e9;
  r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 50e9, 1);
  EXPECT_NEAR(r[1], 50e9, 1);
  flows = {{cb, 1}, {ab, 0, false, 30e9}};
  r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 70e9, 1);
  EXPECT_NEAR(r[1], 30e9, 1);
  // Three into b, one of them small: the other two split what it leaves.
  flows = {{ab, 0}, {cb, 0}, {ab, 0, false, 1e9}};
  r = PlannedShares(flows, topo_);
  EXPECT_NEAR(r[0], 49.5e9, 1);
  EXPECT_NEAR(r[1], 49.5e9, 1);
  EXPECT_NEAR(r[2], 1e9, 1);
}

TEST_F(PlannedShareTest, AnEmptyPathGetsNothingAndNoFlowsIsFine) {
  const std::vector<LinkId> ab{L("a", "s"), L("s", "b")};
  const std::vector<ShareFlow> flows{{{}, 0}, {ab, 3}};
  const std::vector<double> r = PlannedShares(flows, topo_);
  EXPECT_EQ(r[0], 0);
  EXPECT_NEAR(r[1], 100e9, 1);
  EXPECT_TRUE(PlannedShares({}, topo_).empty());
}

}  // namespace
}  // namespace crux::core
