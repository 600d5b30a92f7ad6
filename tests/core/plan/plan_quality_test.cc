#include "crux/core/plan/plan_quality.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "crux/core/topology/builders.h"

namespace crux::core {
namespace {

// host0 -> tor0 -> host1 on 100 Gbps links; plans written by hand.
class PlanQualityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ExplicitParams e;
    e.nodes = {{"host0", true}, {"host1", true}, {"tor0", false}};
    e.links = {{"host0", "tor0", 100}, {"tor0", "host1", 100}};
    auto t = BuildExplicit(e);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    topo_ = std::make_unique<Topology>(std::move(t).value());
    up_ = Link("host0", "tor0");
    down_ = Link("tor0", "host1");
  }
  LinkId Link(const char* a, const char* b) {
    const NodeId src = topo_->FindNode(a).value();
    const NodeId dst = topo_->FindNode(b).value();
    for (size_t l = 0; l < topo_->num_links(); ++l) {
      const LinkId id(static_cast<uint32_t>(l));
      if (topo_->link(id).src == src && topo_->link(id).dst == dst) return id;
    }
    ADD_FAILURE() << a << " -> " << b;
    return LinkId();
  }
  // A job sending `gbits` per iteration of `period_s` over `path`, with work `flops`.
  JobPlan Job(double flops, double gbits, double period_s, std::vector<LinkId> path) {
    JobPlan jp;
    jp.work = Flops::Of(flops);
    jp.period = Duration::Seconds(period_s);
    FlowPlan f;
    f.bytes = Bytes::FromDouble(gbits * 1e9 / 8);
    f.path = std::move(path);
    jp.flows.push_back(f);
    return jp;
  }

  std::unique_ptr<Topology> topo_;
  LinkId up_, down_;
};

TEST_F(PlanQualityTest, ContentionCostWeighsEachJobsMostLoadedLinkByItsWork) {
  Plan plan;
  // Job A: 20 Gbit per 1 s = 20 Gbps on both links. Job B: 30 Gbit per 0.5 s = 60 Gbps on the
  // uplink only. Uplink 80 Gbps of 100 (0.8), downlink 20 of 100 (0.2).
  plan.jobs.push_back(Job(10, 20, 1.0, {up_, down_}));
  plan.jobs.push_back(Job(3, 30, 0.5, {up_}));
  plan.cut_weight = 3;
  plan.total_edge_weight = 4;
  const PlanQuality q = MeasurePlan(*topo_, plan);
  // Both jobs' most loaded link is the uplink: 10 x 0.8 + 3 x 0.8.
  EXPECT_NEAR(q.contention_cost, 10.4, 1e-12);
  EXPECT_DOUBLE_EQ(q.cut_fraction, 0.75);
}

TEST_F(PlanQualityTest, NoEdgesIsAFullCutAndIdlePeriodsAndDownLinksAddNothing) {
  Plan plan;
  plan.jobs.push_back(Job(10, 20, 0.0, {up_}));  // No period: no load.
  EXPECT_EQ(MeasurePlan(*topo_, plan), (PlanQuality{0, 1}));
  plan.jobs.push_back(Job(5, 50, 1.0, {up_}));  // 0.5 of the uplink: 10 x 0.5 + 5 x 0.5.
  EXPECT_NEAR(MeasurePlan(*topo_, plan).contention_cost, 7.5, 1e-12);
}

TEST_F(PlanQualityTest, ImprovesByNeedsTheMinimumGainInEitherObjective) {
  const PlanQuality current{100, 0.90};
  EXPECT_TRUE(ImprovesBy({98, 0.90}, current, 0.02));     // Cost -2 %.
  EXPECT_FALSE(ImprovesBy({98.5, 0.90}, current, 0.02));  // Cost -1.5 %.
  EXPECT_TRUE(ImprovesBy({101, 0.92}, current, 0.02));    // Cut +0.02.
  EXPECT_FALSE(ImprovesBy({101, 0.91}, current, 0.02));
  EXPECT_FALSE(ImprovesBy(current, current, 0.01)) << "equal plans: keep the one in force";
  EXPECT_TRUE(ImprovesBy(current, current, 0)) << "min gain 0: a tie adopts";
}

}  // namespace
}  // namespace crux::core
