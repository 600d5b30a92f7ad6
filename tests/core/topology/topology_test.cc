#include "crux/core/topology/topology.h"
#include "crux/core/base/text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::Must;
using ::testing::HasSubstr;

TEST(TopologyTest, StartsEmpty) {
  const Topology t;
  EXPECT_EQ(t.num_nodes(), 0u);
  EXPECT_EQ(t.num_links(), 0u);
  EXPECT_TRUE(t.hosts().empty());
  EXPECT_EQ(t.NumNetworkSwitches(), 0u);
}

TEST(TopologyTest, AddNodeAssignsSequentialIdsAndStoresFields) {
  Topology t;
  const NodeId h = Must(t.AddNode("host0", NodeKind::kHost), "host");
  const NodeId n = Must(t.AddNode("host0/nic0", NodeKind::kNic, h), "nic");
  const NodeId s = Must(t.AddNode("tor0", NodeKind::kTor), "tor");
  EXPECT_EQ(h.value(), 0u);
  EXPECT_EQ(n.value(), 1u);
  EXPECT_EQ(s.value(), 2u);
  EXPECT_EQ(t.num_nodes(), 3u);
  EXPECT_EQ(t.node(n).name, "host0/nic0");
  EXPECT_EQ(t.node(n).kind, NodeKind::kNic);
  EXPECT_EQ(t.node(n).host, h);
  EXPECT_EQ(t.nodes().size(), 3u);
}

TEST(TopologyTest, HostOwnsItselfAndIgnoresGivenOwner) {
  Topology t;
  const NodeId h0 = Must(t.AddNode("host0", NodeKind::kHost), "host0");
  const NodeId h1 = Must(t.AddNode("host1", NodeKind::kHost, h0), "host1");
  EXPECT_EQ(t.node(h0).host, h0);
  EXPECT_EQ(t.node(h1).host, h1);
}

TEST(TopologyTest, SwitchesHaveNoOwner) {
  Topology t;
  const NodeId s = Must(t.AddNode("agg0", NodeKind::kAgg), "agg");
  EXPECT_FALSE(t.node(s).host.valid());
}

TEST(TopologyTest, AddNodeRejectsDuplicateName) {
  Topology t;
  ASSERT_TRUE(t.AddNode("x", NodeKind::kHost).ok());
  const Result<NodeId> dup = t.AddNode("x", NodeKind::kTor);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.status().message(), HasSubstr("'x'"));
  EXPECT_EQ(t.num_nodes(), 1u);  // Nothing was added.
  EXPECT_EQ(t.node(Must(t.FindNode("x"), "find")).kind, NodeKind::kHost);
}

// Issue #10 (13): every topology node obeys the one name rule (ids.h), whoever builds it.
TEST(TopologyTest, AddNodeRejectsNamesOutsideTheNameRule) {
  Topology t;
  for (const std::string& bad :
       {std::string("tor 0"), std::string("tor\x1b[31m"), std::string("h\n"), std::string("a->b"),
        std::string("caf\xc3\xa9"), std::string(129, 'h')}) {
    const Result<NodeId> r = t.AddNode(bad, NodeKind::kTor);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("invalid node name"));
    EXPECT_TRUE(IsPrintableText(r.status().message())) << EscapeForTerminal(r.status().message());
  }
  EXPECT_EQ(t.num_nodes(), 0u);
  EXPECT_TRUE(t.AddNode(std::string(128, 'h'), NodeKind::kHost).ok());
  EXPECT_TRUE(t.AddNode("P10/S14", NodeKind::kTor).ok());
  // Look-ups of unknown names quote them escaped.
  EXPECT_THAT(t.FindNode("x\x1b[2J").status().message(), HasSubstr("'x\\x1b[2J'"));
}

TEST(TopologyTest, AddNodeRejectsEmptyName) {
  Topology t;
  const Result<NodeId> r = t.AddNode("", NodeKind::kSwitch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.num_nodes(), 0u);
}

TEST(TopologyTest, EndpointSideNodesNeedAHostOwner) {
  Topology t;
  const NodeId h = Must(t.AddNode("host0", NodeKind::kHost), "host");
  const NodeId sw = Must(t.AddNode("tor0", NodeKind::kTor), "tor");
  const NodeId nic = Must(t.AddNode("host0/nic0", NodeKind::kNic, h), "nic");
  for (NodeKind kind : {NodeKind::kNic, NodeKind::kNvSwitch, NodeKind::kPcieSwitch}) {
    SCOPED_TRACE(std::string(NodeKindName(kind)));
    // No owner.
    Result<NodeId> r = t.AddNode("orphan", kind);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("orphan"));
    // Owner is a switch, a NIC, or out of range.
    EXPECT_EQ(t.AddNode("bad1", kind, sw).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.AddNode("bad2", kind, nic).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(t.AddNode("bad3", kind, NodeId(999)).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(t.num_nodes(), 3u);
  // A good owner works for every endpoint-side kind.
  EXPECT_TRUE(t.AddNode("host0/nvs", NodeKind::kNvSwitch, h).ok());
  EXPECT_TRUE(t.AddNode("host0/pcie", NodeKind::kPcieSwitch, h).ok());
}

TEST(TopologyTest, NetworkSwitchesRejectAnOwner) {
  Topology t;
  const NodeId h = Must(t.AddNode("host0", NodeKind::kHost), "host");
  for (NodeKind kind : {NodeKind::kTor, NodeKind::kAgg, NodeKind::kCore, NodeKind::kSwitch}) {
    SCOPED_TRACE(std::string(NodeKindName(kind)));
    const Result<NodeId> r = t.AddNode("sw", kind, h);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(t.num_nodes(), 1u);
}

TEST(TopologyTest, AddLinkCreatesBothDirectionsThatReferToEachOther) {
  Topology t;
  const NodeId a = Must(t.AddNode("a", NodeKind::kHost), "a");
  const NodeId b = Must(t.AddNode("b", NodeKind::kSwitch), "b");
  const LinkId ab = Must(t.AddLink(a, b, Bandwidth::Gbps(100), Duration::Micros(2)), "link");
  ASSERT_EQ(t.num_links(), 2u);
  const Link& fwd = t.link(ab);
  EXPECT_EQ(fwd.src, a);
  EXPECT_EQ(fwd.dst, b);
  EXPECT_EQ(fwd.capacity, Bandwidth::Gbps(100));
  EXPECT_EQ(fwd.latency, Duration::Micros(2));
  EXPECT_TRUE(fwd.up);
  const LinkId ba = fwd.reverse;
  ASSERT_TRUE(ba.valid());
  EXPECT_NE(ba, ab);
  const Link& rev = t.link(ba);
  EXPECT_EQ(rev.src, b);
  EXPECT_EQ(rev.dst, a);
  EXPECT_EQ(rev.capacity, Bandwidth::Gbps(100));
  EXPECT_EQ(rev.latency, Duration::Micros(2));
  EXPECT_EQ(rev.reverse, ab);
  EXPECT_TRUE(rev.up);
}

TEST(TopologyTest, OutLinksListInsertionOrder) {
  Topology t;
  const NodeId s = Must(t.AddNode("s", NodeKind::kSwitch), "s");
  std::vector<LinkId> expected;
  for (int i = 0; i < 3; ++i) {
    const NodeId h = Must(t.AddNode("h" + std::to_string(i), NodeKind::kHost), "h");
    expected.push_back(Must(t.AddLink(s, h, Bandwidth::Gbps(10)), "link"));
  }
  EXPECT_EQ(t.OutLinks(s), expected);
  const NodeId h1 = Must(t.FindNode("h1"), "h1");
  ASSERT_EQ(t.OutLinks(h1).size(), 1u);
  EXPECT_EQ(t.OutLinks(h1)[0], t.link(expected[1]).reverse);
}

TEST(TopologyTest, AddLinkRejectsSelfLoop) {
  Topology t;
  const NodeId a = Must(t.AddNode("a", NodeKind::kSwitch), "a");
  const Result<LinkId> r = t.AddLink(a, a, Bandwidth::Gbps(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'a'"));
  EXPECT_EQ(t.num_links(), 0u);
}

TEST(TopologyTest, AddLinkRejectsNonPositiveCapacity) {
  Topology t;
  const NodeId a = Must(t.AddNode("a", NodeKind::kSwitch), "a");
  const NodeId b = Must(t.AddNode("b", NodeKind::kSwitch), "b");
  for (Bandwidth bw : {Bandwidth::BitsPerSec(0), Bandwidth::Gbps(-5), Bandwidth()}) {
    const Result<LinkId> r = t.AddLink(a, b, bw);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("capacity"));
  }
  EXPECT_EQ(t.num_links(), 0u);
  EXPECT_TRUE(t.AddLink(a, b, Bandwidth::BitsPerSec(1)).ok());
}

TEST(TopologyTest, AddLinkRejectsNegativeLatency) {
  Topology t;
  const NodeId a = Must(t.AddNode("a", NodeKind::kSwitch), "a");
  const NodeId b = Must(t.AddNode("b", NodeKind::kSwitch), "b");
  const Result<LinkId> r = t.AddLink(a, b, Bandwidth::Gbps(1), Duration::Nanos(-1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("latency"));
  EXPECT_EQ(t.num_links(), 0u);
}

TEST(TopologyTest, AddLinkRejectsUnknownEndpoints) {
  Topology t;
  const NodeId a = Must(t.AddNode("a", NodeKind::kSwitch), "a");
  EXPECT_EQ(t.AddLink(a, NodeId(5), Bandwidth::Gbps(1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t.AddLink(NodeId(), a, Bandwidth::Gbps(1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(t.num_links(), 0u);
}

TEST(TopologyTest, ParallelCablesAreDistinctLinks) {
  Topology t;
  const NodeId a = Must(t.AddNode("a", NodeKind::kSwitch), "a");
  const NodeId b = Must(t.AddNode("b", NodeKind::kSwitch), "b");
  const LinkId l1 = Must(t.AddLink(a, b, Bandwidth::Gbps(1)), "l1");
  const LinkId l2 = Must(t.AddLink(a, b, Bandwidth::Gbps(2)), "l2");
  EXPECT_NE(l1, l2);
  EXPECT_EQ(t.num_links(), 4u);
  EXPECT_EQ(t.OutLinks(a).size(), 2u);
}

TEST(TopologyTest, FindNodeByName) {
  const testing::Clos2Small c = testing::MakeClos2Small();
  EXPECT_EQ(Must(c.topo.FindNode("agg2"), "agg2"), c.agg[2]);
  EXPECT_EQ(Must(c.topo.FindNode("host2/nic1"), "nic"), c.nic[2][1]);
  const Result<NodeId> missing = c.topo.FindNode("agg9");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("agg9"));
}

TEST(TopologyTest, FindLinkIsDirectional) {
  const testing::Clos2Small c = testing::MakeClos2Small();
  const LinkId up = Must(c.topo.FindLink(c.tor[0], c.agg[1]), "up");
  EXPECT_EQ(up, c.tor_agg[0][1]);
  const LinkId down = Must(c.topo.FindLink(c.agg[1], c.tor[0]), "down");
  EXPECT_EQ(down, c.topo.link(up).reverse);
  EXPECT_EQ(c.topo.link(down).src, c.agg[1]);
}

TEST(TopologyTest, FindLinkFailsForNonAdjacentNodes) {
  const testing::Clos2Small c = testing::MakeClos2Small();
  const Result<LinkId> r = c.topo.FindLink(c.tor[0], c.tor[1]);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c.topo.FindLink(NodeId(), c.tor[1]).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c.topo.FindLink(NodeId(9999), c.tor[1]).status().code(), StatusCode::kNotFound);
}

TEST(TopologyTest, HostsListedInInsertionOrder) {
  Topology t;
  const NodeId b = Must(t.AddNode("b-host", NodeKind::kHost), "b");
  Must(t.AddNode("sw", NodeKind::kSwitch), "sw");
  const NodeId a = Must(t.AddNode("a-host", NodeKind::kHost), "a");
  Must(t.AddNode("a-host/nic0", NodeKind::kNic, a), "nic");
  const NodeId c = Must(t.AddNode("c-host", NodeKind::kHost), "c");
  EXPECT_EQ(t.hosts(), (std::vector<NodeId>{b, a, c}));
}

TEST(TopologyTest, NicsOfListsNicsInIndexOrder) {
  Topology t;
  const NodeId h0 = Must(t.AddNode("host0", NodeKind::kHost), "h0");
  const NodeId h1 = Must(t.AddNode("host1", NodeKind::kHost), "h1");
  const NodeId n00 = Must(t.AddNode("host0/nic0", NodeKind::kNic, h0), "n00");
  const NodeId n10 = Must(t.AddNode("host1/nic0", NodeKind::kNic, h1), "n10");
  // Intra-host switches are not NICs.
  Must(t.AddNode("host0/pcie0", NodeKind::kPcieSwitch, h0), "pcie");
  const NodeId n01 = Must(t.AddNode("host0/nic1", NodeKind::kNic, h0), "n01");
  EXPECT_EQ(t.NicsOf(h0), (std::vector<NodeId>{n00, n01}));
  EXPECT_EQ(t.NicsOf(h1), (std::vector<NodeId>{n10}));
  EXPECT_TRUE(t.NicsOf(n00).empty());  // A NIC has no NICs.
  EXPECT_TRUE(t.NicsOf(NodeId()).empty());
  EXPECT_TRUE(t.NicsOf(NodeId(12345)).empty());
}

TEST(TopologyTest, CountsNetworkSwitches) {
  const testing::Clos2Small c = testing::MakeClos2Small();
  EXPECT_EQ(c.topo.NumNetworkSwitches(), 5u);
  // 6 ToR-Agg cables + 6 NIC-ToR cables + 6 PCIe cables, two directions each.
  EXPECT_EQ(c.topo.num_links(), 36u);
  EXPECT_EQ(c.topo.hosts().size(), 4u);
}

TEST(TopologyTest, IsNetworkSwitchClassifiesKinds) {
  EXPECT_TRUE(IsNetworkSwitch(NodeKind::kTor));
  EXPECT_TRUE(IsNetworkSwitch(NodeKind::kAgg));
  EXPECT_TRUE(IsNetworkSwitch(NodeKind::kCore));
  EXPECT_TRUE(IsNetworkSwitch(NodeKind::kSwitch));
  EXPECT_FALSE(IsNetworkSwitch(NodeKind::kHost));
  EXPECT_FALSE(IsNetworkSwitch(NodeKind::kNic));
  EXPECT_FALSE(IsNetworkSwitch(NodeKind::kNvSwitch));
  EXPECT_FALSE(IsNetworkSwitch(NodeKind::kPcieSwitch));
}

TEST(TopologyTest, NodeKindNames) {
  EXPECT_EQ(NodeKindName(NodeKind::kHost), "host");
  EXPECT_EQ(NodeKindName(NodeKind::kNic), "nic");
  EXPECT_EQ(NodeKindName(NodeKind::kNvSwitch), "nvswitch");
  EXPECT_EQ(NodeKindName(NodeKind::kPcieSwitch), "pcie_switch");
  EXPECT_EQ(NodeKindName(NodeKind::kTor), "tor");
  EXPECT_EQ(NodeKindName(NodeKind::kAgg), "agg");
  EXPECT_EQ(NodeKindName(NodeKind::kCore), "core");
  EXPECT_EQ(NodeKindName(NodeKind::kSwitch), "switch");
}

TEST(TopologyTest, LinkNameShowsDirection) {
  const testing::Clos2Small c = testing::MakeClos2Small();
  EXPECT_EQ(c.topo.LinkName(c.tor_agg[1][2]), "tor1 -> agg2");
  EXPECT_EQ(c.topo.LinkName(c.topo.link(c.tor_agg[1][2]).reverse), "agg2 -> tor1");
}

TEST(TopologyTest, SetLinkUpAffectsOneDirectionOnly) {
  testing::Clos2Small c = testing::MakeClos2Small();
  const LinkId l = c.tor_agg[0][0];
  c.topo.SetLinkUp(l, false);
  EXPECT_FALSE(c.topo.link(l).up);
  EXPECT_TRUE(c.topo.link(c.topo.link(l).reverse).up);
  c.topo.SetLinkUp(l, true);
  EXPECT_TRUE(c.topo.link(l).up);
}

TEST(TopologyTest, SetLinkCapacityChangesOneDirection) {
  testing::Clos2Small c = testing::MakeClos2Small();
  const LinkId l = c.tor_agg[0][0];
  ASSERT_TRUE(c.topo.SetLinkCapacity(l, Bandwidth::Gbps(25)).ok());
  EXPECT_EQ(c.topo.link(l).capacity, Bandwidth::Gbps(25));
  EXPECT_EQ(c.topo.link(c.topo.link(l).reverse).capacity, Bandwidth::Gbps(100));
}

TEST(TopologyTest, SetLinkCapacityValidates) {
  testing::Clos2Small c = testing::MakeClos2Small();
  const LinkId l = c.tor_agg[0][0];
  EXPECT_EQ(c.topo.SetLinkCapacity(l, Bandwidth::BitsPerSec(0)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c.topo.link(l).capacity, Bandwidth::Gbps(100));
  EXPECT_EQ(c.topo.SetLinkCapacity(LinkId(100000), Bandwidth::Gbps(1)).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(c.topo.SetLinkCapacity(LinkId(), Bandwidth::Gbps(1)).code(), StatusCode::kNotFound);
}

TEST(TopologyTest, CopiesAreIndependent) {
  testing::Clos2Small c = testing::MakeClos2Small();
  Topology copy = c.topo;
  ASSERT_TRUE(copy.AddNode("extra", NodeKind::kSwitch).ok());
  copy.SetLinkUp(c.tor_agg[0][0], false);
  EXPECT_EQ(copy.num_nodes(), c.topo.num_nodes() + 1);
  EXPECT_TRUE(c.topo.link(c.tor_agg[0][0]).up);
  EXPECT_FALSE(c.topo.FindNode("extra").ok());
  EXPECT_TRUE(copy.FindNode("extra").ok());
}

}  // namespace
}  // namespace crux::core
