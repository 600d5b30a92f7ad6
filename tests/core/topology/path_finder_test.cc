#include "crux/core/topology/path_finder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Clos2Small;
using ::crux::core::testing::Connect;
using ::crux::core::testing::DualPlane;
using ::crux::core::testing::ExplicitStar;
using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::MakeDualPlane;
using ::crux::core::testing::MakeExplicitStar;
using ::crux::core::testing::Must;
using ::testing::HasSubstr;

const PathSet& MustPaths(PathFinder& f, NodeId src, NodeId dst) {
  return *Must(f.Paths(src, dst), "Paths");
}

LinkId L(const Topology& t, NodeId a, NodeId b) { return Must(t.FindLink(a, b), "FindLink"); }

// Every path of `set` is a contiguous walk src -> dst of set.hops() up links, no path repeats,
// and ForEachLink agrees with Path().
void ExpectWellFormed(const Topology& t, const PathSet& set, NodeId src, NodeId dst) {
  std::set<std::vector<LinkId>> seen;
  for (size_t i = 0; i < set.size(); ++i) {
    SCOPED_TRACE("path " + std::to_string(i));
    const std::vector<LinkId> p = set.Path(i);
    ASSERT_EQ(static_cast<int>(p.size()), set.hops());
    ASSERT_FALSE(p.empty());
    EXPECT_EQ(t.link(p.front()).src, src);
    EXPECT_EQ(t.link(p.back()).dst, dst);
    for (size_t h = 0; h + 1 < p.size(); ++h) {
      EXPECT_EQ(t.link(p[h]).dst, t.link(p[h + 1]).src) << "hop " << h;
    }
    for (LinkId l : p) EXPECT_TRUE(t.link(l).up) << t.LinkName(l);
    std::vector<LinkId> via_each;
    set.ForEachLink(i, [&](LinkId l) { via_each.push_back(l); });
    EXPECT_EQ(via_each, p);
    EXPECT_TRUE(seen.insert(p).second) << "duplicate path";
  }
}

// The set of nodes a path visits after leaving src (including dst).
std::vector<NodeId> Visited(const Topology& t, const std::vector<LinkId>& p) {
  std::vector<NodeId> out;
  for (LinkId l : p) out.push_back(t.link(l).dst);
  return out;
}

// ---- 2-tier Clos ----

TEST(PathFinderTest, CrossTorPairHasOnePathPerAgg) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const NodeId src = c.nic[0][0];
  const NodeId dst = c.nic[2][0];
  const PathSet& set = MustPaths(f, src, dst);
  ASSERT_EQ(set.size(), 3u);
  EXPECT_FALSE(set.empty());
  EXPECT_EQ(set.hops(), 4);  // NIC -> ToR -> Agg -> ToR -> NIC.
  ExpectWellFormed(c.topo, set, src, dst);
  // Switch paths are ordered by LinkId; the ToR -> Agg links were created in Agg order.
  for (int a = 0; a < 3; ++a) {
    const std::vector<LinkId> expected = {L(c.topo, src, c.tor[0]), c.tor_agg[0][a],
                                          L(c.topo, c.agg[a], c.tor[1]), L(c.topo, c.tor[1], dst)};
    EXPECT_EQ(set.Path(static_cast<size_t>(a)), expected) << "agg " << a;
  }
}

TEST(PathFinderTest, CrossTorReverseDirectionUsesReverseLinks) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& fwd = MustPaths(f, c.nic[0][0], c.nic[2][0]);
  const PathSet& rev = MustPaths(f, c.nic[2][0], c.nic[0][0]);
  ASSERT_EQ(rev.size(), 3u);
  ExpectWellFormed(c.topo, rev, c.nic[2][0], c.nic[0][0]);
  // Every reverse path is the reversal of some forward path.
  std::set<std::vector<LinkId>> fwd_reversed;
  for (size_t i = 0; i < fwd.size(); ++i) {
    std::vector<LinkId> p = fwd.Path(i);
    std::vector<LinkId> r;
    for (auto it = p.rbegin(); it != p.rend(); ++it) r.push_back(c.topo.link(*it).reverse);
    fwd_reversed.insert(r);
  }
  for (size_t i = 0; i < rev.size(); ++i) EXPECT_EQ(fwd_reversed.count(rev.Path(i)), 1u);
}

TEST(PathFinderTest, SameTorPairHasOneTwoHopPath) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.nic[0][0], c.nic[1][0]);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.hops(), 2);
  EXPECT_EQ(set.Path(0), (std::vector<LinkId>{L(c.topo, c.nic[0][0], c.tor[0]),
                                              L(c.topo, c.tor[0], c.nic[1][0])}));
}

TEST(PathFinderTest, SameHostNicsUseIntraHostPathThroughTheHost) {
  // host0's two NICs share tor0, so NIC -> ToR -> NIC would also be 2 hops; the path must stay
  // inside the host.
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.nic[0][0], c.nic[0][1]);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.hops(), 2);
  EXPECT_EQ(set.Path(0), (std::vector<LinkId>{L(c.topo, c.nic[0][0], c.host[0]),
                                              L(c.topo, c.host[0], c.nic[0][1])}));
  ASSERT_EQ(set.segments().size(), 1u);
  EXPECT_EQ(set.segments()[0].mid, nullptr);
}

TEST(PathFinderTest, HostToOwnNicIsOnePcieHop) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.host[0], c.nic[0][1]);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.hops(), 1);
  EXPECT_EQ(set.Path(0), (std::vector<LinkId>{L(c.topo, c.host[0], c.nic[0][1])}));
}

TEST(PathFinderTest, IntraHostEnumeratesEveryShortestPath) {
  // nic0 and nic1 of host0 joined both through the host and through a PCIe switch.
  Clos2Small c = MakeClos2Small();
  const NodeId pcie = Must(c.topo.AddNode("host0/pcie0", NodeKind::kPcieSwitch, c.host[0]), "sw");
  Connect(c.topo, c.nic[0][0], pcie, 256);
  Connect(c.topo, c.nic[0][1], pcie, 256);
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.nic[0][0], c.nic[0][1]);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.hops(), 2);
  ExpectWellFormed(c.topo, set, c.nic[0][0], c.nic[0][1]);
  std::set<NodeId> middles;
  for (size_t i = 0; i < set.size(); ++i) middles.insert(c.topo.link(set.Path(i)[0]).dst);
  EXPECT_EQ(middles, (std::set<NodeId>{c.host[0], pcie}));
}

TEST(PathFinderTest, HostEndpointsGoThroughEveryNicPair) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.host[0], c.host[2]);
  // 2 source NICs x 2 destination NICs x 3 Aggs.
  ASSERT_EQ(set.size(), 12u);
  EXPECT_EQ(set.hops(), 6);  // host -> NIC -> ToR -> Agg -> ToR -> NIC -> host.
  ExpectWellFormed(c.topo, set, c.host[0], c.host[2]);
  // Order: source access route, then destination egress route, then Agg.
  for (size_t i = 0; i < set.size(); ++i) {
    const std::vector<LinkId> p = set.Path(i);
    const size_t src_nic = i / 6;
    const size_t dst_nic = (i / 3) % 2;
    const size_t agg = i % 3;
    EXPECT_EQ(p[0], L(c.topo, c.host[0], c.nic[0][src_nic])) << i;
    EXPECT_EQ(p[2], c.tor_agg[0][agg]) << i;
    EXPECT_EQ(p[5], L(c.topo, c.nic[2][dst_nic], c.host[2])) << i;
  }
  EXPECT_EQ(set.segments().size(), 4u);
  for (size_t s = 0; s < set.segments().size(); ++s) {
    EXPECT_EQ(set.segments()[s].first_index, 3 * s);
    EXPECT_EQ(set.segments()[s].count, 3u);
  }
}

TEST(PathFinderTest, SameTorHostsHaveOnePathPerNicPair) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.host[0], c.host[1]);
  ASSERT_EQ(set.size(), 2u);  // host0 has 2 NICs, host1 has 1.
  EXPECT_EQ(set.hops(), 4);
  ExpectWellFormed(c.topo, set, c.host[0], c.host[1]);
}

TEST(PathFinderTest, HostToRemoteNic) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.host[0], c.nic[3][0]);
  ASSERT_EQ(set.size(), 6u);  // 2 NICs x 3 Aggs.
  EXPECT_EQ(set.hops(), 5);
  ExpectWellFormed(c.topo, set, c.host[0], c.nic[3][0]);
}

TEST(PathFinderTest, PathsNeverTransitAThirdHost) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.host[0], c.host[2]);
  for (size_t i = 0; i < set.size(); ++i) {
    for (NodeId v : Visited(c.topo, set.Path(i))) {
      const Node& n = c.topo.node(v);
      if (!IsNetworkSwitch(n.kind)) {
        EXPECT_TRUE(n.host == c.host[0] || n.host == c.host[2]) << n.name;
      }
    }
  }
}

TEST(PathFinderTest, DownUplinkIsExcluded) {
  Clos2Small c = MakeClos2Small();
  c.topo.SetLinkUp(c.tor_agg[0][1], false);  // tor0 -> agg1 only.
  PathFinder f(c.topo);
  const PathSet& fwd = MustPaths(f, c.nic[0][0], c.nic[2][0]);
  ASSERT_EQ(fwd.size(), 2u);
  ExpectWellFormed(c.topo, fwd, c.nic[0][0], c.nic[2][0]);
  for (size_t i = 0; i < fwd.size(); ++i) {
    for (NodeId v : Visited(c.topo, fwd.Path(i))) EXPECT_NE(v, c.agg[1]);
  }
  // The other direction (agg1 -> tor0) is still up.
  EXPECT_EQ(MustPaths(f, c.nic[2][0], c.nic[0][0]).size(), 3u);
}

TEST(PathFinderTest, DownDownlinkIsExcluded) {
  Clos2Small c = MakeClos2Small();
  c.topo.SetLinkUp(L(c.topo, c.agg[2], c.tor[1]), false);
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.nic[0][0], c.nic[2][0]);
  ASSERT_EQ(set.size(), 2u);
  ExpectWellFormed(c.topo, set, c.nic[0][0], c.nic[2][0]);
  EXPECT_EQ(set.Path(0)[1], c.tor_agg[0][0]);
  EXPECT_EQ(set.Path(1)[1], c.tor_agg[0][1]);
}

TEST(PathFinderTest, DownNicLinksRemoveThatNicsRoutes) {
  Clos2Small c = MakeClos2Small();
  c.topo.SetLinkUp(L(c.topo, c.nic[0][0], c.tor[0]), false);  // host0/nic0 uplink.
  c.topo.SetLinkUp(L(c.topo, c.tor[1], c.nic[2][1]), false);  // host2/nic1 downlink.
  PathFinder f(c.topo);
  const Result<const PathSet*> dead = f.Paths(c.nic[0][0], c.nic[2][0]);
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.status().code(), StatusCode::kNotFound);
  const PathSet& set = MustPaths(f, c.host[0], c.host[2]);
  ASSERT_EQ(set.size(), 3u);  // Only host0/nic1 -> host2/nic0 remains, via 3 Aggs.
  ExpectWellFormed(c.topo, set, c.host[0], c.host[2]);
  for (size_t i = 0; i < set.size(); ++i) {
    EXPECT_EQ(set.Path(i)[0], L(c.topo, c.host[0], c.nic[0][1]));
    EXPECT_EQ(set.Path(i)[5], L(c.topo, c.nic[2][0], c.host[2]));
  }
}

TEST(PathFinderTest, DownPcieLinkRemovesThatNicFromHostPaths) {
  Clos2Small c = MakeClos2Small();
  c.topo.SetLinkUp(L(c.topo, c.host[0], c.nic[0][0]), false);
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.host[0], c.host[2]);
  ASSERT_EQ(set.size(), 6u);
  for (size_t i = 0; i < set.size(); ++i) {
    EXPECT_EQ(set.Path(i)[0], L(c.topo, c.host[0], c.nic[0][1]));
  }
}

TEST(PathFinderTest, DownPcieLinkDoesNotDivertIntraHostTrafficToTheNetwork) {
  Clos2Small c = MakeClos2Small();
  c.topo.SetLinkUp(L(c.topo, c.nic[0][0], c.host[0]), false);
  PathFinder f(c.topo);
  const Result<const PathSet*> r = f.Paths(c.nic[0][0], c.nic[0][1]);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("host0"));
}

TEST(PathFinderTest, UnreachableNicIsNotFound) {
  Clos2Small c = MakeClos2Small();
  const NodeId h = testing::AddHost(c.topo, "host4");
  const NodeId nic = testing::AddNic(c.topo, h, 0);  // PCIe only, no network cable.
  PathFinder f(c.topo);
  const Result<const PathSet*> r = f.Paths(c.nic[0][0], nic);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("host0/nic0"));
  EXPECT_THAT(r.status().message(), HasSubstr("host4/nic0"));
  EXPECT_EQ(f.Paths(c.host[0], h).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.Paths(nic, c.nic[0][0]).status().code(), StatusCode::kNotFound);
}

TEST(PathFinderTest, AllUplinksDownIsNotFound) {
  Clos2Small c = MakeClos2Small();
  for (int a = 0; a < 3; ++a) c.topo.SetLinkUp(c.tor_agg[0][a], false);
  PathFinder f(c.topo);
  EXPECT_EQ(f.Paths(c.nic[0][0], c.nic[2][0]).status().code(), StatusCode::kNotFound);
  // Same-ToR traffic does not need the uplinks.
  EXPECT_EQ(MustPaths(f, c.nic[0][0], c.nic[1][0]).size(), 1u);
}

TEST(PathFinderTest, SwitchEndpointsAreRejected) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  for (const auto& [src, dst] : std::vector<std::pair<NodeId, NodeId>>{
           {c.tor[0], c.nic[2][0]}, {c.nic[0][0], c.agg[1]}, {c.tor[0], c.tor[1]}}) {
    const Result<const PathSet*> r = f.Paths(src, dst);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("switch"));
  }
  EXPECT_EQ(f.CachedPairs(), 0u);
}

TEST(PathFinderTest, SelfAndInvalidEndpointsAreRejected) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  EXPECT_EQ(f.Paths(c.nic[0][0], c.nic[0][0]).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Paths(NodeId(), c.nic[0][0]).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Paths(c.nic[0][0], NodeId(100000)).status().code(), StatusCode::kInvalidArgument);
}

TEST(PathFinderTest, CachingReturnsTheSamePointer) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  EXPECT_EQ(f.CachedPairs(), 0u);
  const PathSet* a = Must(f.Paths(c.nic[0][0], c.nic[2][0]), "a");
  EXPECT_EQ(f.CachedPairs(), 1u);
  const PathSet* b = Must(f.Paths(c.nic[0][0], c.nic[2][0]), "b");
  EXPECT_EQ(a, b);
  EXPECT_EQ(f.CachedPairs(), 1u);
  // The reverse direction is a different pair.
  const PathSet* r = Must(f.Paths(c.nic[2][0], c.nic[0][0]), "r");
  EXPECT_NE(a, r);
  EXPECT_EQ(f.CachedPairs(), 2u);
  // The first pointer stays valid and unchanged as more pairs are cached.
  for (int h = 1; h < 4; ++h) Must(f.Paths(c.host[0], c.host[h]), "more");
  EXPECT_EQ(Must(f.Paths(c.nic[0][0], c.nic[2][0]), "again"), a);
  EXPECT_EQ(a->size(), 3u);
}

TEST(PathFinderTest, FailedLookupsAreNotCached) {
  Clos2Small c = MakeClos2Small();
  const NodeId h = testing::AddHost(c.topo, "host4");
  PathFinder f(c.topo);
  EXPECT_FALSE(f.Paths(c.host[0], h).ok());
  EXPECT_FALSE(f.Paths(c.host[0], h).ok());
  EXPECT_EQ(f.CachedPairs(), 0u);
}

TEST(PathFinderTest, PathsAreDeterministicAcrossFinders) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f1(c.topo);
  PathFinder f2(c.topo);
  // Warm f2's caches in a different order first.
  Must(f2.Paths(c.host[3], c.host[1]), "warm");
  Must(f2.Paths(c.nic[2][1], c.nic[0][1]), "warm");
  for (NodeId src : c.topo.hosts()) {
    for (NodeId dst : c.topo.hosts()) {
      if (src == dst) continue;
      const PathSet& a = MustPaths(f1, src, dst);
      const PathSet& b = MustPaths(f2, src, dst);
      ASSERT_EQ(a.size(), b.size());
      ASSERT_EQ(a.hops(), b.hops());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.Path(i), b.Path(i));
    }
  }
}

TEST(PathFinderTest, ParallelCablesAreDistinctPaths) {
  Clos2Small c = MakeClos2Small();
  Connect(c.topo, c.tor[0], c.agg[0], 100);  // A second tor0 <-> agg0 cable.
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.nic[0][0], c.nic[2][0]);
  EXPECT_EQ(set.size(), 4u);
  ExpectWellFormed(c.topo, set, c.nic[0][0], c.nic[2][0]);
}

TEST(PathFinderTest, ThreeTierPathsBranchAtEveryTier) {
  // Two pods; pod p has tor<p> and two Aggs; Agg a of each pod meets core plane a (2 cores).
  Topology t;
  NodeId tor[2];
  NodeId agg[2][2];
  NodeId core[2][2];
  for (int p = 0; p < 2; ++p) tor[p] = testing::AddSwitch(t, "tor" + std::to_string(p));
  for (int p = 0; p < 2; ++p) {
    for (int a = 0; a < 2; ++a) {
      agg[p][a] = testing::AddSwitch(t, "agg" + std::to_string(p) + std::to_string(a));
      Connect(t, tor[p], agg[p][a], 100);
    }
  }
  for (int a = 0; a < 2; ++a) {
    for (int k = 0; k < 2; ++k) {
      core[a][k] = testing::AddSwitch(t, "core" + std::to_string(a) + std::to_string(k));
      for (int p = 0; p < 2; ++p) Connect(t, agg[p][a], core[a][k], 100);
    }
  }
  NodeId nic[2];
  for (int p = 0; p < 2; ++p) {
    const NodeId h = testing::AddHost(t, "host" + std::to_string(p));
    nic[p] = testing::AddNic(t, h, 0);
    Connect(t, nic[p], tor[p], 100);
  }
  PathFinder f(t);
  const PathSet& set = MustPaths(f, nic[0], nic[1]);
  ASSERT_EQ(set.size(), 4u);  // 2 Aggs x 2 cores.
  EXPECT_EQ(set.hops(), 6);
  ExpectWellFormed(t, set, nic[0], nic[1]);
  // Lexicographic LinkId order within the switch paths.
  for (size_t i = 1; i < set.size(); ++i) EXPECT_LT(set.Path(i - 1), set.Path(i));
  // Each path climbs in one plane and descends in the same plane.
  for (size_t i = 0; i < set.size(); ++i) {
    const std::vector<LinkId> p = set.Path(i);
    const NodeId up_agg = t.link(p[1]).dst;
    const NodeId down_agg = t.link(p[3]).dst;
    const int plane = up_agg == agg[0][0] ? 0 : 1;
    EXPECT_EQ(down_agg, agg[1][plane]);
  }
}

TEST(PathFinderTest, SwitchPathsRecordLinkSourcesAndUniformCapacity) {
  const Clos2Small c = MakeClos2Small();
  PathFinder f(c.topo);
  const PathSet& set = MustPaths(f, c.nic[0][0], c.nic[2][0]);
  ASSERT_EQ(set.segments().size(), 1u);
  const SwitchPaths* mid = set.segments()[0].mid;
  ASSERT_NE(mid, nullptr);
  EXPECT_EQ(mid->hops, 2);
  EXPECT_EQ(mid->count, 3u);
  ASSERT_EQ(mid->links.size(), 6u);
  ASSERT_EQ(mid->link_src.size(), mid->links.size());
  for (size_t i = 0; i < mid->links.size(); ++i) {
    EXPECT_EQ(mid->link_src[i], c.topo.link(mid->links[i]).src);
  }
  EXPECT_TRUE(mid->uniform_capacity);
}

TEST(PathFinderTest, MixedSwitchLinkCapacitiesAreNotUniform) {
  Clos2Small c = MakeClos2Small();
  ASSERT_TRUE(c.topo.SetLinkCapacity(L(c.topo, c.agg[1], c.tor[1]), Bandwidth::Gbps(400)).ok());
  PathFinder f(c.topo);
  const PathSet& fwd = MustPaths(f, c.nic[0][0], c.nic[2][0]);
  ASSERT_NE(fwd.segments()[0].mid, nullptr);
  EXPECT_FALSE(fwd.segments()[0].mid->uniform_capacity);
  // The other direction does not use the changed link.
  const PathSet& rev = MustPaths(f, c.nic[2][0], c.nic[0][0]);
  EXPECT_TRUE(rev.segments()[0].mid->uniform_capacity);
}

TEST(PathFinderTest, NameHashIsTheStableHashOfTheName) {
  const Clos2Small c = MakeClos2Small();
  const PathFinder f(c.topo);
  for (uint32_t i = 0; i < c.topo.num_nodes(); ++i) {
    const std::string& name = c.topo.node(NodeId(i)).name;
    EXPECT_EQ(f.NameHash(NodeId(i)), StableHash(name.data(), name.size())) << name;
  }
}

// ---- Dual-plane HPN ----

bool InPlane(const Topology& t, const std::vector<LinkId>& p, char plane) {
  for (NodeId v : Visited(t, p)) {
    const Node& n = t.node(v);
    if (IsNetworkSwitch(n.kind) && n.name[1] != plane) return false;
  }
  return true;
}

TEST(PathFinderTest, DualPlaneNicReachesPeerThroughBothPlanesSeparately) {
  const DualPlane d = MakeDualPlane();
  PathFinder f(d.topo);
  const PathSet& set = MustPaths(f, d.nic[0], d.nic[1]);
  ASSERT_EQ(set.size(), 4u);  // 2 Aggs per plane x 2 planes.
  EXPECT_EQ(set.hops(), 4);
  ExpectWellFormed(d.topo, set, d.nic[0], d.nic[1]);
  int plane0 = 0;
  int plane1 = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    const std::vector<LinkId> p = set.Path(i);
    if (InPlane(d.topo, p, '0')) ++plane0;
    if (InPlane(d.topo, p, '1')) ++plane1;
  }
  EXPECT_EQ(plane0, 2);
  EXPECT_EQ(plane1, 2);
}

TEST(PathFinderTest, DualPlaneSinglePortPeerIsReachedOnlyInItsPlane) {
  const DualPlane d = MakeDualPlane();
  PathFinder f(d.topo);
  const PathSet& to2 = MustPaths(f, d.nic[0], d.nic[2]);
  ASSERT_EQ(to2.size(), 2u);
  for (size_t i = 0; i < to2.size(); ++i) EXPECT_TRUE(InPlane(d.topo, to2.Path(i), '0'));
  const PathSet& to3 = MustPaths(f, d.nic[0], d.nic[3]);
  ASSERT_EQ(to3.size(), 2u);
  for (size_t i = 0; i < to3.size(); ++i) EXPECT_TRUE(InPlane(d.topo, to3.Path(i), '1'));
}

TEST(PathFinderTest, DualPlaneNicsOnDifferentPlanesAreNotFound) {
  const DualPlane d = MakeDualPlane();
  PathFinder f(d.topo);
  const Result<const PathSet*> r = f.Paths(d.nic[2], d.nic[3]);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.Paths(d.host[3], d.host[2]).status().code(), StatusCode::kNotFound);
}

TEST(PathFinderTest, DualPlaneHostEndpoints) {
  const DualPlane d = MakeDualPlane();
  PathFinder f(d.topo);
  const PathSet& set = MustPaths(f, d.host[0], d.host[1]);
  ASSERT_EQ(set.size(), 4u);
  EXPECT_EQ(set.hops(), 6);
  ExpectWellFormed(d.topo, set, d.host[0], d.host[1]);
}

// ---- Explicit topologies without NIC nodes ----

TEST(PathFinderTest, ExplicitHostsConnectThroughSwitches) {
  const ExplicitStar e = MakeExplicitStar();
  PathFinder f(e.topo);
  const PathSet& same = MustPaths(f, e.h1, e.h2);
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same.Path(0), (std::vector<LinkId>{L(e.topo, e.h1, e.s1), L(e.topo, e.s1, e.h2)}));
  const PathSet& far = MustPaths(f, e.h1, e.h3);
  ASSERT_EQ(far.size(), 1u);
  EXPECT_EQ(far.hops(), 3);
  EXPECT_EQ(far.Path(0), (std::vector<LinkId>{L(e.topo, e.h1, e.s1), L(e.topo, e.s1, e.s2),
                                              L(e.topo, e.s2, e.h3)}));
}

TEST(PathFinderTest, ExplicitDirectCableIsAOneHopPath) {
  ExplicitStar e = MakeExplicitStar();
  const LinkId direct = Connect(e.topo, e.h1, e.h3, 100);
  PathFinder f(e.topo);
  const PathSet& set = MustPaths(f, e.h1, e.h3);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.hops(), 1);
  EXPECT_EQ(set.Path(0), (std::vector<LinkId>{direct}));
  const PathSet& back = MustPaths(f, e.h3, e.h1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back.Path(0), (std::vector<LinkId>{e.topo.link(direct).reverse}));
}

TEST(PathFinderTest, DownDirectCableFallsBackToTheFabric) {
  ExplicitStar e = MakeExplicitStar();
  const LinkId direct = Connect(e.topo, e.h1, e.h3, 100);
  e.topo.SetLinkUp(direct, false);
  PathFinder f(e.topo);
  const PathSet& set = MustPaths(f, e.h1, e.h3);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.hops(), 3);  // h1 -> s1 -> s2 -> h3.
  // The reverse direction of the cable is still up.
  const PathSet& back = MustPaths(f, e.h3, e.h1);
  EXPECT_EQ(back.hops(), 1);
}

TEST(PathFinderTest, ExplicitParallelDirectCablesAreTwoPaths) {
  ExplicitStar e = MakeExplicitStar();
  Connect(e.topo, e.h1, e.h3, 100);
  Connect(e.topo, e.h1, e.h3, 100);
  PathFinder f(e.topo);
  const PathSet& set = MustPaths(f, e.h1, e.h3);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.hops(), 1);
  ExpectWellFormed(e.topo, set, e.h1, e.h3);
}

TEST(PathFinderTest, HostsNeverCarryTransitTraffic) {
  // h1 - h2 - h3 cabled in a chain with no switch: h2 must not forward.
  Topology t;
  const NodeId h1 = testing::AddHost(t, "h1");
  const NodeId h2 = testing::AddHost(t, "h2");
  const NodeId h3 = testing::AddHost(t, "h3");
  Connect(t, h1, h2, 100);
  Connect(t, h2, h3, 100);
  PathFinder f(t);
  EXPECT_EQ(f.Paths(h1, h3).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MustPaths(f, h1, h2).size(), 1u);
}

TEST(PathFinderTest, ExplicitSwitchMeshHasEqualCostChoices) {
  // h1 -> s1 -> {s2, s3} -> s4 -> h2.
  Topology t;
  const NodeId h1 = testing::AddHost(t, "h1");
  const NodeId h2 = testing::AddHost(t, "h2");
  NodeId s[4];
  for (int i = 0; i < 4; ++i) s[i] = testing::AddSwitch(t, "s" + std::to_string(i + 1));
  Connect(t, h1, s[0], 10);
  Connect(t, s[3], h2, 10);
  Connect(t, s[0], s[1], 10);
  Connect(t, s[0], s[2], 10);
  Connect(t, s[1], s[3], 10);
  Connect(t, s[2], s[3], 10);
  PathFinder f(t);
  const PathSet& set = MustPaths(f, h1, h2);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.hops(), 4);
  ExpectWellFormed(t, set, h1, h2);
  EXPECT_EQ(&f.topology(), &t);
}

}  // namespace
}  // namespace crux::core
