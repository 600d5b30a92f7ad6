#include "crux/core/topology/ecmp.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/topology/path_finder.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::MakeDualPlane;
using ::crux::core::testing::Must;

constexpr PortRange kDefaultRange{};

// For every path of src -> dst: FindPort gives a port in `range` that Route maps back to it.
void ExpectEveryPathPinnable(const HashEcmpModel& model, PathFinder& f, NodeId src, NodeId dst,
                             PortRange range, size_t expected_paths) {
  const PathSet* set = Must(f.Paths(src, dst), "Paths");
  ASSERT_EQ(set->size(), expected_paths);
  for (size_t i = 0; i < set->size(); ++i) {
    SCOPED_TRACE("path " + std::to_string(i));
    const std::optional<uint16_t> port = model.FindPort(f, src, dst, i, range);
    ASSERT_TRUE(port.has_value());
    EXPECT_GE(*port, range.min);
    EXPECT_LE(*port, range.max);
    const Result<size_t> routed = model.Route(f, src, dst, *port);
    ASSERT_TRUE(routed.ok()) << routed.status().ToString();
    EXPECT_EQ(*routed, i);
  }
}

TEST(EcmpTest, DefaultRangeIsTheFlowLabelReachablePorts) {
  EXPECT_EQ(kDefaultRange.min, 0xC000);
  EXPECT_EQ(kDefaultRange.max, 0xFFFF);
  EXPECT_EQ(kRoceV2DstPort, 4791);
}

TEST(HashEcmpModelTest, FindPortRoutesBackToEveryCrossTorPath) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  ExpectEveryPathPinnable(model, f, c.nic[0][0], c.nic[2][0], kDefaultRange, 3);
  ExpectEveryPathPinnable(model, f, c.nic[2][1], c.nic[0][1], kDefaultRange, 3);
}

TEST(HashEcmpModelTest, FindPortRoutesBackToEveryHostPairPath) {
  // Decisions at the source host (NIC), at tor0 (Agg) and at tor1 (destination NIC).
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  ExpectEveryPathPinnable(model, f, c.host[0], c.host[2], kDefaultRange, 12);
  ExpectEveryPathPinnable(model, f, c.host[2], c.host[0], kDefaultRange, 12);
  ExpectEveryPathPinnable(model, f, c.host[0], c.host[1], kDefaultRange, 2);
}

TEST(HashEcmpModelTest, FindPortRoutesBackOnDualPlanePaths) {
  const testing::DualPlane d = MakeDualPlane();
  PathFinder f(d.topo);
  const HashEcmpModel model(7);
  ExpectEveryPathPinnable(model, f, d.nic[0], d.nic[1], kDefaultRange, 4);
  ExpectEveryPathPinnable(model, f, d.host[1], d.host[0], kDefaultRange, 4);
}

TEST(HashEcmpModelTest, FindPortRespectsCustomRanges) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  ExpectEveryPathPinnable(model, f, c.host[0], c.host[2], PortRange{1000, 1999}, 12);
  ExpectEveryPathPinnable(model, f, c.nic[0][0], c.nic[2][0], PortRange{0, 0xFFFF}, 3);
  ExpectEveryPathPinnable(model, f, c.nic[0][0], c.nic[2][0], PortRange{50000, 50063}, 3);
}

TEST(HashEcmpModelTest, FindPortWorksForEverySeed) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  for (uint64_t seed : {0ULL, 1ULL, 42ULL, 0xdeadbeefULL}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExpectEveryPathPinnable(HashEcmpModel(seed), f, c.host[0], c.host[2], kDefaultRange, 12);
  }
}

TEST(HashEcmpModelTest, SinglePathPairAlwaysRoutesToIt) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  const std::optional<uint16_t> port =
      model.FindPort(f, c.nic[0][0], c.nic[1][0], 0, kDefaultRange);
  ASSERT_TRUE(port.has_value());
  EXPECT_GE(*port, 0xC000);
  for (uint16_t sport : {uint16_t{0}, uint16_t{1234}, uint16_t{0xFFFF}}) {
    EXPECT_EQ(Must(model.Route(f, c.nic[0][0], c.nic[1][0], sport), "Route"), 0u);
  }
}

TEST(HashEcmpModelTest, OnePortRangeOnlyReachesThePathItHashesTo) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  const NodeId src = c.nic[0][0];
  const NodeId dst = c.nic[2][0];
  // Scan single-port ranges: each reaches exactly the path Route() picks for that port.
  bool found_unreachable = false;
  for (uint32_t p = 0xC000; p < 0xC000 + 64; ++p) {
    const uint16_t sport = static_cast<uint16_t>(p);
    const PortRange one{sport, sport};
    const size_t routed = Must(model.Route(f, src, dst, sport), "Route");
    for (size_t i = 0; i < 3; ++i) {
      const std::optional<uint16_t> got = model.FindPort(f, src, dst, i, one);
      if (i == routed) {
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(*got, sport);
      } else {
        EXPECT_FALSE(got.has_value()) << "port " << p << " path " << i;
        found_unreachable = true;
      }
    }
  }
  EXPECT_TRUE(found_unreachable);
}

TEST(HashEcmpModelTest, FindPortRejectsBadInputs) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  // Inverted range.
  EXPECT_FALSE(model.FindPort(f, c.nic[0][0], c.nic[2][0], 0, PortRange{200, 100}).has_value());
  // Path index out of range.
  EXPECT_FALSE(model.FindPort(f, c.nic[0][0], c.nic[2][0], 3, kDefaultRange).has_value());
  // No path set (switch endpoint).
  EXPECT_FALSE(model.FindPort(f, c.tor[0], c.nic[2][0], 0, kDefaultRange).has_value());
}

TEST(HashEcmpModelTest, RoutePropagatesPathErrors) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  EXPECT_EQ(model.Route(f, c.tor[0], c.nic[2][0], 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model.Route(f, c.nic[0][0], c.nic[0][0], 1).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(HashEcmpModelTest, RouteSpreadsPortsOverAllPaths) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  std::vector<int> hits(3, 0);
  for (uint32_t p = 0xC000; p <= 0xFFFF; p += 4) {
    ++hits[Must(model.Route(f, c.nic[0][0], c.nic[2][0], static_cast<uint16_t>(p)), "Route")];
  }
  const int total = hits[0] + hits[1] + hits[2];
  EXPECT_EQ(total, 4096);
  for (int h : hits) {
    EXPECT_GT(h, total / 4);  // Expected a third each.
    EXPECT_LT(h, total / 2);
  }
}

TEST(HashEcmpModelTest, RouteIsDeterministic) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f1(c.topo);
  PathFinder f2(c.topo);
  const HashEcmpModel m1(3);
  const HashEcmpModel m2(3);
  for (uint32_t p = 0xC000; p < 0xC000 + 200; ++p) {
    const uint16_t sport = static_cast<uint16_t>(p);
    EXPECT_EQ(Must(m1.Route(f1, c.host[0], c.host[2], sport), "r1"),
              Must(m2.Route(f2, c.host[0], c.host[2], sport), "r2"));
  }
}

TEST(HashEcmpModelTest, SeedChangesTheMapping) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel a(0);
  const HashEcmpModel b(1);
  int differ = 0;
  for (uint32_t p = 0xC000; p < 0xC000 + 200; ++p) {
    const uint16_t sport = static_cast<uint16_t>(p);
    differ += Must(a.Route(f, c.host[0], c.host[2], sport), "a") !=
              Must(b.Route(f, c.host[0], c.host[2], sport), "b");
  }
  EXPECT_GT(differ, 50);
}

TEST(HashEcmpModelTest, HashDependsOnEveryInput) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model;
  const uint64_t h = model.Hash(f, c.tor[0], c.nic[0][0], c.nic[2][0], 0xC000);
  EXPECT_EQ(h, model.Hash(f, c.tor[0], c.nic[0][0], c.nic[2][0], 0xC000));
  EXPECT_NE(h, model.Hash(f, c.tor[1], c.nic[0][0], c.nic[2][0], 0xC000));  // Node.
  EXPECT_NE(h, model.Hash(f, c.tor[0], c.nic[0][1], c.nic[2][0], 0xC000));  // Source.
  EXPECT_NE(h, model.Hash(f, c.tor[0], c.nic[0][0], c.nic[2][1], 0xC000));  // Destination.
  EXPECT_NE(h, model.Hash(f, c.tor[0], c.nic[0][0], c.nic[2][0], 0xC001));  // Source port.
  EXPECT_NE(h, HashEcmpModel(5).Hash(f, c.tor[0], c.nic[0][0], c.nic[2][0], 0xC000));  // Seed.
  // Swapping source and destination is a different flow.
  EXPECT_NE(h, model.Hash(f, c.tor[0], c.nic[2][0], c.nic[0][0], 0xC000));
}

TEST(HashEcmpModelTest, HashDependsOnNamesNotNodeIds) {
  // Two topologies with the same names in a different node order hash a flow identically:
  // the hash stands in for addresses, which do not depend on construction order.
  Topology t1;
  const NodeId a1 = testing::AddHost(t1, "a");
  const NodeId b1 = testing::AddHost(t1, "b");
  const NodeId s1 = testing::AddSwitch(t1, "s");
  Topology t2;
  const NodeId s2 = testing::AddSwitch(t2, "s");
  const NodeId b2 = testing::AddHost(t2, "b");
  const NodeId a2 = testing::AddHost(t2, "a");
  PathFinder f1(t1);
  PathFinder f2(t2);
  const HashEcmpModel model(3);
  for (uint16_t sport : {uint16_t{1}, uint16_t{0xC000}, uint16_t{0xFFFF}}) {
    EXPECT_EQ(model.Hash(f1, s1, a1, b1, sport), model.Hash(f2, s2, a2, b2, sport));
  }
}

TEST(HashEcmpModelTest, ChooseMapsHashesUniformlyOntoChoices) {
  // Lemire's reduction: the high 32 bits times n, shifted down by 32.
  EXPECT_EQ(HashEcmpModel::Choose(0, 3), 0u);
  EXPECT_EQ(HashEcmpModel::Choose(~uint64_t{0}, 3), 2u);
  EXPECT_EQ(HashEcmpModel::Choose(uint64_t{1} << 63, 2), 1u);
  EXPECT_EQ(HashEcmpModel::Choose((uint64_t{1} << 63) - 1, 2), 0u);
  EXPECT_EQ(HashEcmpModel::Choose(0x00000000FFFFFFFFULL, 7), 0u);  // Low bits are ignored.
  for (uint32_t n : {1u, 2u, 3u, 60u, 1000u}) {
    std::vector<int> hits(n, 0);
    for (uint64_t i = 0; i < 20000; ++i) {
      const uint32_t c = HashEcmpModel::Choose(Mix64(i), n);
      ASSERT_LT(c, n);
      ++hits[c];
    }
    if (n <= 60) {
      for (int h : hits) EXPECT_GT(h, 20000 / static_cast<int>(n) / 2) << n;
    }
  }
}

TEST(HashEcmpModelTest, RouteFollowsTheDocumentedHashAtEachDecision) {
  // For a NIC pair across ToRs the only decision is tor0's choice among its 3 uplinks, sorted
  // by LinkId: next_hops[Choose(H(tuple, tor0), 3)].
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model(11);
  for (uint32_t p = 0xC000; p < 0xC000 + 100; ++p) {
    const uint16_t sport = static_cast<uint16_t>(p);
    const uint64_t h = model.Hash(f, c.tor[0], c.nic[0][0], c.nic[2][0], sport);
    EXPECT_EQ(Must(model.Route(f, c.nic[0][0], c.nic[2][0], sport), "Route"),
              HashEcmpModel::Choose(h, 3));
  }
}

TEST(HashEcmpModelTest, RouteDecidesAtEveryBranchingNode) {
  // host0 -> host2: the host picks a NIC (2 choices), tor0 an Agg (3), tor1 a NIC (2). The
  // path index is (src NIC) * 6 + (dst NIC) * 3 + Agg.
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const HashEcmpModel model(5);
  for (uint32_t p = 0xC000; p < 0xC000 + 100; ++p) {
    const uint16_t sport = static_cast<uint16_t>(p);
    const uint32_t nic =
        HashEcmpModel::Choose(model.Hash(f, c.host[0], c.host[0], c.host[2], sport), 2);
    const uint32_t agg =
        HashEcmpModel::Choose(model.Hash(f, c.tor[0], c.host[0], c.host[2], sport), 3);
    const uint32_t dst_nic =
        HashEcmpModel::Choose(model.Hash(f, c.tor[1], c.host[0], c.host[2], sport), 2);
    EXPECT_EQ(Must(model.Route(f, c.host[0], c.host[2], sport), "Route"),
              size_t{nic} * 6 + size_t{dst_nic} * 3 + agg);
  }
}

// ---- ProbedPortTable ----

TEST(ProbedPortTableTest, RoundTripsProbedPaths) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const NodeId src = c.nic[0][0];
  const NodeId dst = c.nic[2][0];
  const PathSet* set = Must(f.Paths(src, dst), "Paths");
  ProbedPortTable table;
  EXPECT_EQ(table.size(), 0u);
  for (size_t i = 0; i < set->size(); ++i) {
    table.Add("host0/nic0", "host2/nic0", PathNodeNames(c.topo, src, set->Path(i)),
              static_cast<uint16_t>(0xC100 + i));
  }
  EXPECT_EQ(table.size(), 3u);
  for (size_t i = 0; i < set->size(); ++i) {
    const std::optional<uint16_t> port = table.FindPort(f, src, dst, i, kDefaultRange);
    ASSERT_TRUE(port.has_value());
    EXPECT_EQ(*port, 0xC100 + i);
  }
}

TEST(ProbedPortTableTest, MissesUnprobedPathsAndPairs) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const NodeId src = c.nic[0][0];
  const NodeId dst = c.nic[2][0];
  const PathSet* set = Must(f.Paths(src, dst), "Paths");
  ProbedPortTable table;
  table.Add("host0/nic0", "host2/nic0", PathNodeNames(c.topo, src, set->Path(1)), 0xC001);
  EXPECT_FALSE(table.FindPort(f, src, dst, 0, kDefaultRange).has_value());
  EXPECT_TRUE(table.FindPort(f, src, dst, 1, kDefaultRange).has_value());
  EXPECT_FALSE(table.FindPort(f, src, dst, 2, kDefaultRange).has_value());
  // Direction matters: the reverse flow was never probed.
  EXPECT_FALSE(table.FindPort(f, dst, src, 1, kDefaultRange).has_value());
  // Out-of-range index and invalid pairs miss instead of failing.
  EXPECT_FALSE(table.FindPort(f, src, dst, 3, kDefaultRange).has_value());
  EXPECT_FALSE(table.FindPort(f, c.tor[0], dst, 0, kDefaultRange).has_value());
}

TEST(ProbedPortTableTest, ReturnsLowestPortInsideTheRange) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const NodeId src = c.nic[0][0];
  const NodeId dst = c.nic[2][0];
  const std::vector<std::string> names =
      PathNodeNames(c.topo, src, Must(f.Paths(src, dst), "Paths")->Path(2));
  ProbedPortTable table;
  table.Add("host0/nic0", "host2/nic0", names, 0xD000);
  table.Add("host0/nic0", "host2/nic0", names, 0x1000);
  table.Add("host0/nic0", "host2/nic0", names, 0xC005);
  table.Add("host0/nic0", "host2/nic0", names, 0xC005);  // Duplicate port: no effect.
  EXPECT_EQ(table.size(), 1u);                           // One path.
  EXPECT_EQ(table.FindPort(f, src, dst, 2, kDefaultRange), std::optional<uint16_t>(0xC005));
  EXPECT_EQ(table.FindPort(f, src, dst, 2, PortRange{0, 0xFFFF}), std::optional<uint16_t>(0x1000));
  EXPECT_EQ(table.FindPort(f, src, dst, 2, PortRange{0xC006, 0xFFFF}),
            std::optional<uint16_t>(0xD000));
  EXPECT_FALSE(table.FindPort(f, src, dst, 2, PortRange{0x2000, 0x3000}).has_value());
}

TEST(ProbedPortTableTest, HostPairPathsAreKeyedByFullNodeList) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet* set = Must(f.Paths(c.host[0], c.host[2]), "Paths");
  ProbedPortTable table;
  for (size_t i = 0; i < set->size(); ++i) {
    table.Add("host0", "host2", PathNodeNames(c.topo, c.host[0], set->Path(i)),
              static_cast<uint16_t>(0xE000 + 7 * i));
  }
  EXPECT_EQ(table.size(), set->size());
  for (size_t i = 0; i < set->size(); ++i) {
    EXPECT_EQ(table.FindPort(f, c.host[0], c.host[2], i, kDefaultRange),
              std::optional<uint16_t>(static_cast<uint16_t>(0xE000 + 7 * i)));
  }
}

TEST(PathNodeNamesTest, ListsSourceThenEveryHop) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet* set = Must(f.Paths(c.nic[0][0], c.nic[2][0]), "Paths");
  EXPECT_EQ(PathNodeNames(c.topo, c.nic[0][0], set->Path(1)),
            (std::vector<std::string>{"host0/nic0", "tor0", "agg1", "tor1", "host2/nic0"}));
  const PathSet* hosts = Must(f.Paths(c.host[0], c.host[2]), "Paths");
  EXPECT_EQ(PathNodeNames(c.topo, c.host[0], hosts->Path(11)),
            (std::vector<std::string>{"host0", "host0/nic1", "tor0", "agg2", "tor1", "host2/nic1",
                                      "host2"}));
}

TEST(PathNodeNamesTest, EmptyPathIsJustTheSource) {
  const Clos2Small c = MakeClos2Small();
  EXPECT_EQ(PathNodeNames(c.topo, c.host[3], {}), (std::vector<std::string>{"host3"}));
}

}  // namespace
}  // namespace crux::core
