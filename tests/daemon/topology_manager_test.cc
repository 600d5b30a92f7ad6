// TopologyManager on its own (issue #12 item 6): link names, health changes, versions,
// persistence rows and restore.
#include "crux/daemon/state/topology_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "crux/core/topology/builders.h"

namespace crux::daemon {
namespace {

using core::LinkHealth;
using ::testing::HasSubstr;

TopologyManager Make() {
  core::Clos2Params p;  // tor0..1, agg0..1, 400 Gbps uplinks.
  core::Result<core::Topology> t = core::BuildClos2(p);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return TopologyManager(*std::move(t), "test clos2");
}

TEST(TopologyManagerTest, ResolvesDirectedAndBothWayNamesAndNamesWhatIsMissing) {
  const TopologyManager m = Make();
  EXPECT_EQ(m.source(), "test clos2");
  auto one = m.Resolve("tor0->agg1");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(m.Name((*one)[0]), "tor0->agg1");
  for (const char* both : {"tor0-agg1", "tor0<->agg1"}) {
    auto two = m.Resolve(both);
    ASSERT_TRUE(two.ok()) << both;
    ASSERT_EQ(two->size(), 2u) << both;
    EXPECT_EQ(m.Name((*two)[0]), "tor0->agg1");
    EXPECT_EQ(m.Name((*two)[1]), "agg1->tor0");
  }
  EXPECT_THAT(m.Resolve("tor0->nope").status().message(), HasSubstr("no node 'nope'"));
  EXPECT_THAT(m.Resolve("tor0->tor1").status().message(), HasSubstr("are not adjacent"));
  EXPECT_THAT(m.Resolve("tor0").status().message(), HasSubstr("expected 'a->b' or 'a-b'"));
  EXPECT_EQ(m.Resolve("x-y").status().code(), core::StatusCode::kNotFound);
}

TEST(TopologyManagerTest, HealthChangesApplyToTheCurrentTopologyAndBumpTheVersion) {
  TopologyManager m = Make();
  const uint64_t v0 = m.version();
  const core::LinkId l = (*m.Resolve("tor0->agg1"))[0];
  const core::Bandwidth nominal = m.nominal().link(l).capacity;

  auto changed = m.Set("tor0->agg1", LinkHealth::kDown, 0);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(*changed, std::vector<core::LinkId>{l});
  EXPECT_EQ(m.health(l), LinkHealth::kDown);
  EXPECT_FALSE(m.current().link(l).up);
  EXPECT_TRUE(m.nominal().link(l).up);  // The nominal graph never changes.
  EXPECT_EQ(m.links_not_up(), 1u);
  EXPECT_EQ(m.version(), v0 + 1);

  // Setting the same state again changes nothing, not even the version.
  changed = m.Set("tor0->agg1", LinkHealth::kDown, 0);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(changed->empty());
  EXPECT_EQ(m.version(), v0 + 1);

  // Degraded: up with the given capacity, both directions.
  const double half = nominal.ToBitsPerSec() / 2;
  changed = m.Set("tor0-agg1", LinkHealth::kDegraded, half);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(changed->size(), 2u);
  EXPECT_TRUE(m.current().link(l).up);
  EXPECT_EQ(m.current().link(l).capacity.ToBitsPerSec(), half);
  EXPECT_EQ(m.health(m.nominal().link(l).reverse), LinkHealth::kDegraded);
  EXPECT_EQ(m.links_not_up(), 2u);
  EXPECT_EQ(m.version(), v0 + 2);

  // Back up: the nominal capacity, no override left.
  changed = m.Set("tor0-agg1", LinkHealth::kUp, 0);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->size(), 2u);
  EXPECT_EQ(m.current().link(l).capacity, nominal);
  EXPECT_EQ(m.links_not_up(), 0u);
  EXPECT_TRUE(m.Overrides(0).empty());
}

TEST(TopologyManagerTest, DegradedCapacityMustBeWithinTheNominalAndBadInputChangesNothing) {
  TopologyManager m = Make();
  const uint64_t v0 = m.version();
  const double nominal = m.nominal().link((*m.Resolve("tor0->agg0"))[0]).capacity.ToBitsPerSec();
  for (double bad : {0.0, -1.0, nominal * 2, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    auto r = m.Set("tor0-agg0", LinkHealth::kDegraded, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("DEGRADED needs 0 < capacity_bps <= nominal"));
  }
  EXPECT_FALSE(m.Set("nope->agg0", LinkHealth::kDown, 0).ok());
  EXPECT_EQ(m.version(), v0);
  EXPECT_EQ(m.links_not_up(), 0u);
}

TEST(TopologyManagerTest, OverridesRoundTripThroughRestore) {
  TopologyManager m = Make();
  ASSERT_TRUE(m.Set("tor1->agg0", LinkHealth::kDown, 0).ok());
  const double cap = 1e11;
  ASSERT_TRUE(m.Set("agg1->tor1", LinkHealth::kDegraded, cap).ok());
  const std::vector<LinkOverride> rows = m.Overrides(1234);
  ASSERT_EQ(rows.size(), 2u);
  for (const LinkOverride& o : rows) EXPECT_EQ(o.updated_ms, 1234);

  TopologyManager fresh = Make();
  for (const LinkOverride& o : rows) ASSERT_TRUE(fresh.Restore(o).ok()) << o.link;
  EXPECT_EQ(fresh.health((*fresh.Resolve("tor1->agg0"))[0]), LinkHealth::kDown);
  const core::LinkId d = (*fresh.Resolve("agg1->tor1"))[0];
  EXPECT_EQ(fresh.health(d), LinkHealth::kDegraded);
  EXPECT_EQ(fresh.current().link(d).capacity.ToBitsPerSec(), cap);
  EXPECT_EQ(fresh.links_not_up(), 2u);

  // Stored rows that do not fit this topology are errors naming the link.
  LinkOverride unknown{"tor9->agg0", rows[0].health, 0, 0};
  EXPECT_THAT(fresh.Restore(unknown).message(), HasSubstr("tor9"));
  LinkOverride undirected{"tor1-agg0", rows[0].health, 0, 0};
  EXPECT_THAT(fresh.Restore(undirected).message(), HasSubstr("not a directed link name"));
  LinkOverride too_fast = rows[1];
  too_fast.capacity_bps = 1e15;
  EXPECT_THAT(fresh.Restore(too_fast).message(), HasSubstr("bad capacity"));
  LinkOverride bad_health = rows[0];
  bad_health.health = 99;
  EXPECT_FALSE(fresh.Restore(bad_health).ok());
}

}  // namespace
}  // namespace crux::daemon
