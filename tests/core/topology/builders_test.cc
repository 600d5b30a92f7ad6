#include "crux/core/topology/builders.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/text.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

size_t CountKind(const Topology& t, NodeKind kind) {
  size_t n = 0;
  for (const Node& v : t.nodes()) n += v.kind == kind ? 1 : 0;
  return n;
}

NodeId Id(const Topology& t, const std::string& name) {
  Result<NodeId> id = t.FindNode(name);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : NodeId();
}

bool Adjacent(const Topology& t, const std::string& a, const std::string& b) {
  return t.FindLink(Id(t, a), Id(t, b)).ok();
}

// Number of parallel a -> b links.
size_t CablesBetween(const Topology& t, const std::string& a, const std::string& b) {
  const NodeId src = Id(t, a);
  const NodeId dst = Id(t, b);
  size_t n = 0;
  for (LinkId l : t.OutLinks(src)) n += t.link(l).dst == dst ? 1 : 0;
  return n;
}

size_t PathCount(PathFinder& pf, const std::string& a, const std::string& b) {
  const Topology& t = pf.topology();
  Result<const PathSet*> set = pf.Paths(Id(t, a), Id(t, b));
  EXPECT_TRUE(set.ok()) << a << " -> " << b << ": " << set.status().ToString();
  return set.ok() ? (*set)->size() : 0;
}

int PathHops(PathFinder& pf, const std::string& a, const std::string& b) {
  const Topology& t = pf.topology();
  Result<const PathSet*> set = pf.Paths(Id(t, a), Id(t, b));
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? (*set)->hops() : -1;
}

// Every NIC is a kNic owned by the host added right before its NICs, with a PCIe link to it.
void ExpectNicsOwnedByTheirHosts(const Topology& t, int nics_per_host, double pcie_gbps) {
  for (size_t h = 0; h < t.hosts().size(); ++h) {
    const NodeId host = t.hosts()[h];
    EXPECT_EQ(t.node(host).name, "host" + std::to_string(h));
    EXPECT_EQ(t.node(host).kind, NodeKind::kHost);
    EXPECT_EQ(t.node(host).host, host);
    const std::vector<NodeId>& nics = t.NicsOf(host);
    ASSERT_EQ(nics.size(), static_cast<size_t>(nics_per_host));
    for (size_t i = 0; i < nics.size(); ++i) {
      const Node& nic = t.node(nics[i]);
      EXPECT_EQ(nic.name, t.node(host).name + "/nic" + std::to_string(i));
      EXPECT_EQ(nic.kind, NodeKind::kNic);
      EXPECT_EQ(nic.host, host);
      EXPECT_EQ(nics[i].value(), host.value() + 1 + i);  // Added right after the host.
      Result<LinkId> pcie = t.FindLink(nics[i], host);
      ASSERT_TRUE(pcie.ok()) << nic.name;
      EXPECT_EQ(t.link(*pcie).capacity, Bandwidth::Gbps(pcie_gbps));
    }
  }
}

void ExpectInvalid(const Status& s, const std::string& message_prefix) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), StartsWith(message_prefix));
}

// Same node names/kinds/owners and same links, in the same order.
void ExpectIdentical(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  ASSERT_EQ(a.num_links(), b.num_links());
  for (size_t i = 0; i < a.num_nodes(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.host, y.host);
  }
  for (size_t i = 0; i < a.num_links(); ++i) {
    const Link& x = a.links()[i];
    const Link& y = b.links()[i];
    EXPECT_EQ(x.src, y.src);
    EXPECT_EQ(x.dst, y.dst);
    EXPECT_EQ(x.capacity, y.capacity);
    EXPECT_EQ(x.latency, y.latency);
  }
}

// ---- explicit ----

ExplicitParams SmallExplicit() {
  ExplicitParams p;
  p.nodes = {{"gpu-a", true}, {"gpu-b", true}, {"sw", false}};
  p.links = {{"gpu-a", "sw", 100, 2}, {"gpu-b", "sw", 100, 2}, {"gpu-a", "gpu-b", 50, 0.5}};
  return p;
}

TEST(BuildersTest, ExplicitKeepsNamesAndCreatesNoNicNodes) {
  Result<Topology> t = BuildExplicit(SmallExplicit());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_nodes(), 3u);
  EXPECT_EQ(t->num_links(), 6u);
  EXPECT_EQ(t->hosts().size(), 2u);
  EXPECT_EQ(t->node(Id(*t, "gpu-a")).kind, NodeKind::kHost);
  EXPECT_EQ(t->node(Id(*t, "sw")).kind, NodeKind::kSwitch);
  EXPECT_FALSE(t->node(Id(*t, "sw")).host.valid());
  EXPECT_TRUE(t->NicsOf(Id(*t, "gpu-a")).empty());
  EXPECT_EQ(CountKind(*t, NodeKind::kNic), 0u);
  Result<LinkId> l = t->FindLink(Id(*t, "gpu-a"), Id(*t, "sw"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(t->link(*l).capacity, Bandwidth::Gbps(100));
  EXPECT_EQ(t->link(*l).latency, Duration::Micros(2));
  Result<LinkId> direct = t->FindLink(Id(*t, "gpu-a"), Id(*t, "gpu-b"));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(t->link(*direct).latency, Duration::Nanos(500));
}

TEST(BuildersTest, ExplicitHostToHostCableIsTheShortestPath) {
  Result<Topology> t = BuildExplicit(SmallExplicit());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "gpu-a", "gpu-b"), 1u);
  EXPECT_EQ(PathHops(pf, "gpu-a", "gpu-b"), 1);
}

TEST(BuildersTest, ExplicitParallelCablesAreOneLinkWithCables) {
  ExplicitParams p = SmallExplicit();
  p.links[0].cables = 2;
  Result<Topology> t = BuildExplicit(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_links(), 8u);
  EXPECT_EQ(CablesBetween(*t, "gpu-a", "sw"), 2u);
  EXPECT_EQ(CablesBetween(*t, "sw", "gpu-a"), 2u);
}

// Issue #10 (13): a repeated link, in either direction, is refused and names both entries
// (parallel cables are `cables`, so a copy-paste duplicate cannot double a link silently).
TEST(BuildersTest, ExplicitRejectsDuplicateLinks) {
  ExplicitParams p = SmallExplicit();
  p.links.push_back({"sw", "gpu-a", 100, 1});
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links[3]: duplicate link sw <-> gpu-a");
  EXPECT_THAT(BuildExplicit(p).status().message(), HasSubstr("also links[0]"));
  p = SmallExplicit();
  p.links.push_back(p.links[1]);
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links[3]: duplicate link gpu-b <-> sw");
  p = SmallExplicit();
  p.links[0].cables = 0;
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links[0].cables: must be >= 1 (got 0)");
}

// Issue #10 (13): a node without a link, and a topology without links, are refused.
TEST(BuildersTest, ExplicitRejectsIsolatedNodesAndNoLinks) {
  ExplicitParams p = SmallExplicit();
  p.nodes.push_back({"gpu-c", true});
  ExpectInvalid(BuildExplicit(p).status(), "explicit.nodes[3]: host 'gpu-c' has no link");
  p = SmallExplicit();
  p.nodes.push_back({"spare", false});
  ExpectInvalid(BuildExplicit(p).status(), "explicit.nodes[3]: switch 'spare' has no link");
  p = SmallExplicit();
  p.links.clear();
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links: must not be empty");
  p.nodes = {{"solo", true}};
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links: must not be empty");
}

// Issue #10 (13): node names follow core::IsValidName; the message escapes what it quotes.
TEST(BuildersTest, ExplicitRejectsInvalidNames) {
  for (const std::string& bad :
       {std::string("a b"), std::string("sw\x1b[2J"), std::string("q\"uote"),
        std::string("caf\xc3\xa9"), std::string("a->b"), std::string(129, 'x')}) {
    ExplicitParams p = SmallExplicit();
    p.nodes[2].name = bad;
    for (ExplicitLink& l : p.links) {
      if (l.a == "sw") l.a = bad;
      if (l.b == "sw") l.b = bad;
    }
    const Status s = BuildExplicit(p).status();
    ExpectInvalid(s, "explicit.nodes[2].name: invalid node name '");
    EXPECT_THAT(s.message(), HasSubstr("[A-Za-z0-9._:/-]"));
    EXPECT_TRUE(IsPrintableText(s.message())) << EscapeForTerminal(s.message());
  }
}

TEST(BuildersTest, ExplicitRejectsBadNodesAndLinks) {
  ExpectInvalid(BuildExplicit(ExplicitParams{}).status(), "explicit.nodes: must not be empty");
  ExplicitParams p = SmallExplicit();
  p.nodes[1].name = "";
  ExpectInvalid(BuildExplicit(p).status(), "explicit.nodes[1].name: must not be empty");
  p = SmallExplicit();
  p.nodes[2].name = "gpu-a";
  ExpectInvalid(BuildExplicit(p).status(), "explicit.nodes[2].name: duplicate node name 'gpu-a'");
  p = SmallExplicit();
  p.links[1].a = "nope";
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links[1].a: unknown node 'nope'");
  p = SmallExplicit();
  p.links[0].b = "nope";
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links[0].b: unknown node 'nope'");
  p = SmallExplicit();
  p.links[2].b = "gpu-a";
  ExpectInvalid(BuildExplicit(p).status(), "explicit.links[2]: a and b are the same node");
  for (double bad : {0.0, -1.0, kNaN, kInf, 1e-12}) {
    p = SmallExplicit();
    p.links[0].gbps = bad;
    ExpectInvalid(BuildExplicit(p).status(), "explicit.links[0].gbps: ");
  }
  for (double bad : {-1.0, kNaN, kInf}) {
    p = SmallExplicit();
    p.links[2].latency_us = bad;
    ExpectInvalid(BuildExplicit(p).status(), "explicit.links[2].latency_us: ");
  }
}

// ---- clos2 ----

TEST(BuildersTest, Clos2DefaultCountsNamesAndCapacities) {
  const Clos2Params p;  // 2 ToRs x 4 hosts, 2 Aggs, 1 NIC per host.
  Result<Topology> t = BuildClos2(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 8u);
  EXPECT_EQ(t->num_nodes(), 8u + 8u + 2u + 2u);
  EXPECT_EQ(t->num_links(), 2u * (8u + 8u + 2u * 2u));
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 2u);
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 2u);
  EXPECT_EQ(t->NumNetworkSwitches(), 4u);
  ExpectNicsOwnedByTheirHosts(*t, 1, p.host.pcie_gbps);
  EXPECT_TRUE(Adjacent(*t, "host3/nic0", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "host4/nic0", "tor1"));
  EXPECT_FALSE(Adjacent(*t, "host4/nic0", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "tor1", "agg0"));
  Result<LinkId> nic = t->FindLink(Id(*t, "host0/nic0"), Id(*t, "tor0"));
  ASSERT_TRUE(nic.ok());
  EXPECT_EQ(t->link(*nic).capacity, Bandwidth::Gbps(200));
  EXPECT_EQ(t->link(*nic).latency, Duration::Micros(1));
  Result<LinkId> up = t->FindLink(Id(*t, "tor0"), Id(*t, "agg1"));
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(t->link(*up).capacity, Bandwidth::Gbps(400));
  EXPECT_EQ(t->link(t->link(*up).reverse).src, Id(*t, "agg1"));
}

TEST(BuildersTest, Clos2CrossTorPairHasOnePathPerAggAndSameTorPairOne) {
  Clos2Params p;
  p.aggs = 3;
  Result<Topology> t = BuildClos2(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host5/nic0"), 3u);
  EXPECT_EQ(PathHops(pf, "host0/nic0", "host5/nic0"), 4);
  EXPECT_EQ(PathCount(pf, "host0", "host5"), 3u);  // host -> NIC -> ... -> NIC -> host.
  EXPECT_EQ(PathHops(pf, "host0", "host5"), 6);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host3/nic0"), 1u);
  EXPECT_EQ(PathHops(pf, "host0/nic0", "host3/nic0"), 2);
}

TEST(BuildersTest, Clos2ParallelUplinksMultiplyCrossTorPaths) {
  Clos2Params p;
  p.aggs = 3;
  p.uplinks_per_agg = 2;
  Result<Topology> t = BuildClos2(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_links(), 2u * (8u + 8u + 2u * 3u * 2u));
  EXPECT_EQ(CablesBetween(*t, "tor0", "agg2"), 2u);
  EXPECT_EQ(CablesBetween(*t, "agg2", "tor0"), 2u);
  PathFinder pf(*t);
  // aggs x uplinks_per_agg choices of uplink cable, each followed by uplinks_per_agg choices of
  // downlink cable: link-level paths = aggs * uplinks_per_agg^2.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host5/nic0"), 3u * 2u * 2u);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host3/nic0"), 1u);
}

TEST(BuildersTest, Clos2RailOptimizedSendsNicIToTheRailTorOfItsGroup) {
  Clos2Params p;
  p.host.nics_per_host = 4;
  p.tors = 8;  // 2 rail groups of 4 ToRs.
  p.hosts_per_tor = 2;
  p.rail_optimized = true;
  Result<Topology> t = BuildClos2(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 4u);
  EXPECT_EQ(t->num_nodes(), 4u * 5u + 8u + 2u);
  EXPECT_EQ(t->num_links(), 2u * (16u + 16u + 8u * 2u));
  ExpectNicsOwnedByTheirHosts(*t, 4, p.host.pcie_gbps);
  EXPECT_TRUE(Adjacent(*t, "host0/nic0", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "host1/nic3", "tor3"));
  EXPECT_TRUE(Adjacent(*t, "host2/nic0", "tor4"));
  EXPECT_TRUE(Adjacent(*t, "host3/nic3", "tor7"));
  EXPECT_FALSE(Adjacent(*t, "host3/nic3", "tor3"));
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic2", "host1/nic2"), 1u);  // Same rail ToR.
  EXPECT_EQ(PathCount(pf, "host0/nic2", "host3/nic2"), 2u);  // Via either Agg.
}

TEST(BuildersTest, Clos2NonRailPutsAllNicsOfAHostOnItsTor) {
  Clos2Params p;
  p.host.nics_per_host = 2;
  Result<Topology> t = BuildClos2(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_nodes(), 8u * 3u + 4u);
  EXPECT_TRUE(Adjacent(*t, "host5/nic1", "tor1"));
  EXPECT_TRUE(Adjacent(*t, "host5/nic0", "tor1"));
  PathFinder pf(*t);
  // NIC to NIC of one host stays inside the host: NIC -> host -> NIC.
  EXPECT_EQ(PathCount(pf, "host5/nic0", "host5/nic1"), 1u);
  EXPECT_EQ(PathHops(pf, "host5/nic0", "host5/nic1"), 2);
}

TEST(BuildersTest, Clos2RejectsBadParameters) {
  auto err = [](auto mutate) {
    Clos2Params p;
    mutate(p);
    return BuildClos2(p).status();
  };
  EXPECT_EQ(err([](Clos2Params& p) { p.tors = 0; }).message(), "clos2.tors: must be >= 1 (got 0)");
  ExpectInvalid(err([](Clos2Params& p) { p.aggs = -2; }), "clos2.aggs: must be >= 1 (got -2)");
  ExpectInvalid(err([](Clos2Params& p) { p.hosts_per_tor = 0; }), "clos2.hosts_per_tor: ");
  ExpectInvalid(err([](Clos2Params& p) { p.uplinks_per_agg = 0; }), "clos2.uplinks_per_agg: ");
  ExpectInvalid(err([](Clos2Params& p) { p.uplink_gbps = kNaN; }), "clos2.uplink_gbps: ");
  ExpectInvalid(err([](Clos2Params& p) { p.uplink_gbps = 0; }), "clos2.uplink_gbps: ");
  ExpectInvalid(err([](Clos2Params& p) { p.uplink_gbps = -400; }), "clos2.uplink_gbps: ");
  ExpectInvalid(err([](Clos2Params& p) { p.host.nics_per_host = 0; }),
                "clos2.host.nics_per_host: must be >= 1 (got 0)");
  ExpectInvalid(err([](Clos2Params& p) { p.host.gpus_per_host = 0; }),
                "clos2.host.gpus_per_host: ");
  ExpectInvalid(err([](Clos2Params& p) { p.host.nic_gbps = kInf; }), "clos2.host.nic_gbps: ");
  ExpectInvalid(err([](Clos2Params& p) { p.host.pcie_gbps = 0; }), "clos2.host.pcie_gbps: ");
  ExpectInvalid(err([](Clos2Params& p) { p.host.link_latency_us = -1; }),
                "clos2.host.link_latency_us: must be >= 0");
  ExpectInvalid(err([](Clos2Params& p) { p.host.link_latency_us = kNaN; }),
                "clos2.host.link_latency_us: ");
  ExpectInvalid(err([](Clos2Params& p) {
                  p.rail_optimized = true;
                  p.host.nics_per_host = 4;
                  p.tors = 6;
                }),
                "clos2.tors: must be a multiple of host.nics_per_host (4)");
  ExpectInvalid(err([](Clos2Params& p) {
                  p.tors = 1'000'000;
                  p.hosts_per_tor = 1'000'000;
                }),
                "clos2: topology too large");
}

TEST(BuildersTest, ZeroLatencyIsAllowed) {
  Clos2Params p;
  p.host.link_latency_us = 0;
  Result<Topology> t = BuildClos2(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const Link& l : t->links()) EXPECT_EQ(l.latency, Duration::Zero());
}

// ---- clos3 ----

TEST(BuildersTest, Clos3DefaultCountsAndCorePlanes) {
  const Clos3Params p;  // 2 pods x (2 ToRs x 4 hosts, 2 Aggs), 4 cores.
  Result<Topology> t = BuildClos3(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 16u);
  EXPECT_EQ(t->num_nodes(), 16u * 2u + 4u + 4u + 4u);
  EXPECT_EQ(t->num_links(), 2u * (16u + 16u + 2u * 2u * 2u + 4u * 2u));
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 4u);
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 4u);
  EXPECT_EQ(CountKind(*t, NodeKind::kCore), 4u);
  ExpectNicsOwnedByTheirHosts(*t, 1, p.host.pcie_gbps);
  EXPECT_TRUE(Adjacent(*t, "host15/nic0", "tor3"));
  EXPECT_TRUE(Adjacent(*t, "tor2", "agg3"));
  EXPECT_FALSE(Adjacent(*t, "tor2", "agg1"));  // Other pod.
  // Agg a of every pod serves core plane a: cores [2a, 2a + 2).
  EXPECT_TRUE(Adjacent(*t, "agg0", "core1"));
  EXPECT_FALSE(Adjacent(*t, "agg0", "core2"));
  EXPECT_TRUE(Adjacent(*t, "agg3", "core3"));
  EXPECT_TRUE(Adjacent(*t, "agg2", "core0"));
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host5/nic0"), 2u);   // Same pod, other ToR.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host12/nic0"), 4u);  // Other pod: 2 Aggs x 2 cores.
  EXPECT_EQ(PathHops(pf, "host0/nic0", "host12/nic0"), 6);
}

TEST(BuildersTest, Clos3RejectsBadParameters) {
  auto err = [](auto mutate) {
    Clos3Params p;
    mutate(p);
    return BuildClos3(p).status();
  };
  ExpectInvalid(err([](Clos3Params& p) { p.pods = 0; }), "clos3.pods: must be >= 1 (got 0)");
  ExpectInvalid(err([](Clos3Params& p) { p.tors_per_pod = 0; }), "clos3.tors_per_pod: ");
  ExpectInvalid(err([](Clos3Params& p) { p.aggs_per_pod = 0; }), "clos3.aggs_per_pod: ");
  ExpectInvalid(err([](Clos3Params& p) { p.cores = 0; }), "clos3.cores: must be >= 1");
  ExpectInvalid(err([](Clos3Params& p) { p.cores = 5; }),
                "clos3.cores: must be a multiple of aggs_per_pod (2) (got 5)");
  ExpectInvalid(err([](Clos3Params& p) { p.hosts_per_tor = 0; }), "clos3.hosts_per_tor: ");
  ExpectInvalid(err([](Clos3Params& p) { p.tor_agg_gbps = kNaN; }), "clos3.tor_agg_gbps: ");
  ExpectInvalid(err([](Clos3Params& p) { p.agg_core_gbps = -1; }), "clos3.agg_core_gbps: ");
  ExpectInvalid(err([](Clos3Params& p) { p.host.nic_gbps = 0; }), "clos3.host.nic_gbps: ");
}

TEST(BuildersTest, Clos3DualTorWiresEachHostToAToRPair) {
  Clos3Params p;  // 2 pods x (one ToR pair, 2 Aggs), 4 cores.
  p.dual_tor = true;
  p.hosts_per_tor = 3;  // Hosts per ToR pair.
  p.host.nics_per_host = 4;
  Result<Topology> t = BuildClos3(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 6u);  // 2 pods x 1 pair x 3 hosts.
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 4u);
  // Even NICs on the pair's first ToR, odd NICs on its second.
  EXPECT_TRUE(Adjacent(*t, "host0/nic0", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "host0/nic1", "tor1"));
  EXPECT_TRUE(Adjacent(*t, "host0/nic2", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "host0/nic3", "tor1"));
  EXPECT_FALSE(Adjacent(*t, "host0/nic1", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "host3/nic0", "tor2"));
  EXPECT_TRUE(Adjacent(*t, "host5/nic3", "tor3"));
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic0"), 1u);  // Same ToR.
  EXPECT_EQ(PathHops(pf, "host0/nic0", "host1/nic0"), 2);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host3/nic0"), 4u);  // Other pod: 2 Aggs x 2 cores.
}

TEST(BuildersTest, Clos3DualTorRejectsOddPairsAndSingleNics) {
  Clos3Params p;
  p.dual_tor = true;
  p.tors_per_pod = 3;
  ExpectInvalid(BuildClos3(p).status(), "clos3.tors_per_pod: must be even when dual_tor (got 3)");
  p.tors_per_pod = 2;
  p.host.nics_per_host = 1;
  ExpectInvalid(BuildClos3(p).status(), "clos3.nics_per_host: must be >= 2 when dual_tor (got 1)");
}

// ---- fattree ----

TEST(BuildersTest, FatTreeK4Has16Hosts20SwitchesAnd4CrossPodPaths) {
  FatTreeParams p;
  p.host.nics_per_host = 4;  // Forced to 1.
  Result<Topology> t = BuildFatTree(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 16u);
  EXPECT_EQ(t->NumNetworkSwitches(), 20u);
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 8u);
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 8u);
  EXPECT_EQ(CountKind(*t, NodeKind::kCore), 4u);
  EXPECT_EQ(t->num_nodes(), 16u * 2u + 20u);
  EXPECT_EQ(t->num_links(), 2u * (16u + 16u + 16u + 16u));
  ExpectNicsOwnedByTheirHosts(*t, 1, p.host.pcie_gbps);
  Result<LinkId> l = t->FindLink(Id(*t, "host0/nic0"), Id(*t, "tor0"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(t->link(*l).capacity, Bandwidth::Gbps(100));
  // Every switch has k = 4 network ports.
  for (const Node& n : t->nodes()) {
    if (!IsNetworkSwitch(n.kind)) continue;
    EXPECT_EQ(t->OutLinks(Id(*t, n.name)).size(), 4u) << n.name;
  }
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic0"), 1u);   // Same edge switch.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host2/nic0"), 2u);   // Same pod: k/2 Aggs.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host15/nic0"), 4u);  // Cross pod: (k/2)^2.
  EXPECT_EQ(PathHops(pf, "host0/nic0", "host15/nic0"), 6);
}

TEST(BuildersTest, FatTreeK6HasK3Over4Hosts) {
  FatTreeParams p;
  p.k = 6;
  Result<Topology> t = BuildFatTree(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 54u);
  EXPECT_EQ(t->NumNetworkSwitches(), 45u);
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host53/nic0"), 9u);
}

TEST(BuildersTest, FatTreeRejectsBadParameters) {
  auto err = [](auto mutate) {
    FatTreeParams p;
    mutate(p);
    return BuildFatTree(p).status();
  };
  ExpectInvalid(err([](FatTreeParams& p) { p.k = 0; }), "fattree.k: must be >= 2 (got 0)");
  ExpectInvalid(err([](FatTreeParams& p) { p.k = 5; }), "fattree.k: must be even (got 5)");
  ExpectInvalid(err([](FatTreeParams& p) { p.link_gbps = 0; }), "fattree.link_gbps: ");
  ExpectInvalid(err([](FatTreeParams& p) { p.host.pcie_gbps = kNaN; }), "fattree.host.pcie_gbps: ");
  ExpectInvalid(err([](FatTreeParams& p) { p.k = 100'000; }), "fattree: topology too large");
  EXPECT_TRUE(err([](FatTreeParams& p) { p.host.nics_per_host = 0; }).ok());  // Ignored.
}

// ---- hpn ----

TEST(BuildersTest, HpnDefaultPodHas1920Hosts15360Nics240Tors120Aggs) {
  const HpnParams p;
  Result<Topology> t = BuildHpn(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 1920u);
  EXPECT_EQ(CountKind(*t, NodeKind::kNic), 15360u);
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 240u);
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 120u);
  EXPECT_EQ(t->NumNetworkSwitches(), 360u);
  EXPECT_EQ(t->num_nodes(), 1920u + 15360u + 360u);
  // PCIe + 2 ports per NIC + 60 uplinks per ToR.
  EXPECT_EQ(t->num_links(), 2u * (15360u + 2u * 15360u + 240u * 60u));
  // A ToR has 128 host ports and 60 uplinks; an Agg 120 ToR ports.
  EXPECT_EQ(t->OutLinks(Id(*t, "tor0")).size(), 128u + 60u);
  EXPECT_EQ(t->OutLinks(Id(*t, "agg119")).size(), 120u);
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic3", "host1919/nic3"), 120u);
  EXPECT_EQ(PathCount(pf, "host0/nic3", "host127/nic3"), 2u);
}

HpnParams SmallHpn() {
  HpnParams p;
  p.segments = 2;
  p.hosts_per_segment = 4;
  p.rails = 2;
  p.planes = 2;
  p.aggs_per_plane = 3;
  return p;
}

TEST(BuildersTest, HpnSmallPodCountsAndDualPlaneWiring) {
  const HpnParams p = SmallHpn();
  Result<Topology> t = BuildHpn(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 8u);
  EXPECT_EQ(CountKind(*t, NodeKind::kNic), 16u);
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 8u);
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 6u);
  EXPECT_EQ(t->num_nodes(), 8u + 16u + 8u + 6u);
  EXPECT_EQ(t->num_links(), 2u * (16u + 32u + 8u * 3u));
  ExpectNicsOwnedByTheirHosts(*t, 2, p.pcie_gbps);
  // tor i = (segment * rails + rail) * planes + plane.
  EXPECT_TRUE(Adjacent(*t, "host0/nic0", "tor0"));
  EXPECT_TRUE(Adjacent(*t, "host0/nic0", "tor1"));
  EXPECT_TRUE(Adjacent(*t, "host3/nic1", "tor2"));
  EXPECT_TRUE(Adjacent(*t, "host3/nic1", "tor3"));
  EXPECT_TRUE(Adjacent(*t, "host4/nic0", "tor4"));
  EXPECT_TRUE(Adjacent(*t, "host7/nic1", "tor7"));
  EXPECT_FALSE(Adjacent(*t, "host7/nic1", "tor3"));
  EXPECT_EQ(t->OutLinks(Id(*t, "host0/nic0")).size(), 3u);  // PCIe + 2 ports.
  // agg j = plane * aggs_per_plane + a: plane-0 ToRs reach agg0..2 only.
  for (int tor = 0; tor < 8; ++tor) {
    for (int agg = 0; agg < 6; ++agg) {
      EXPECT_EQ(Adjacent(*t, "tor" + std::to_string(tor), "agg" + std::to_string(agg)),
                tor % 2 == agg / 3)
          << tor << " " << agg;
    }
  }
  Result<LinkId> port = t->FindLink(Id(*t, "host0/nic0"), Id(*t, "tor1"));
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(t->link(*port).capacity, Bandwidth::Gbps(200));
  Result<LinkId> up = t->FindLink(Id(*t, "tor1"), Id(*t, "agg3"));
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(t->link(*up).capacity, Bandwidth::Gbps(400));
}

TEST(BuildersTest, HpnPodsUnderACoreTier) {
  // 2 pods x 2 segments x 2 hosts, 2 rails, 2 planes, 3 Aggs per plane, 2 cores per plane.
  HpnParams p;
  p.pods = 2;
  p.segments = 2;
  p.hosts_per_segment = 2;
  p.rails = 2;
  p.aggs_per_plane = 3;
  p.cores_per_plane = 2;
  p.agg_core_gbps = 100;
  Result<Topology> t = BuildHpn(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 8u);
  // ToRs: 4 segments x 2 rails x 2 planes; Aggs: 2 pods x 2 planes x 3; cores: 2 planes x 2.
  size_t tors = 0;
  size_t aggs = 0;
  size_t cores = 0;
  for (const Node& n : t->nodes()) {
    tors += n.kind == NodeKind::kTor;
    aggs += n.kind == NodeKind::kAgg;
    cores += n.kind == NodeKind::kCore;
  }
  EXPECT_EQ(tors, 16u);
  EXPECT_EQ(aggs, 12u);
  EXPECT_EQ(cores, 4u);
  // Pod 1's plane-1 ToR of segment 2 (tor ((2 * 2 + 0) * 2 + 1) = tor9) reaches pod 1's plane-1
  // Aggs (j = (1 * 2 + 1) * 3 + a = agg9..agg11) only; agg9 reaches the plane-1 cores.
  const NodeId tor9 = *t->FindNode("tor9");
  std::set<std::string> up;
  for (LinkId l : t->OutLinks(tor9)) {
    if (t->node(t->link(l).dst).kind == NodeKind::kAgg) up.insert(t->node(t->link(l).dst).name);
  }
  EXPECT_EQ(up, (std::set<std::string>{"agg9", "agg10", "agg11"}));
  std::set<std::string> core_up;
  for (LinkId l : t->OutLinks(*t->FindNode("agg9"))) {
    if (t->node(t->link(l).dst).kind == NodeKind::kCore) {
      core_up.insert(t->node(t->link(l).dst).name);
      EXPECT_EQ(t->link(l).capacity, Bandwidth::Gbps(100));
    }
  }
  EXPECT_EQ(core_up, (std::set<std::string>{"core2", "core3"}));
  // More than one pod needs a core tier; the defaults add none.
  p.pods = 2;
  p.cores_per_plane = 0;
  EXPECT_NE(BuildHpn(p).status().message().find("cores_per_plane: must be >= 1"),
            std::string::npos);
  Result<Topology> one = BuildHpn(SmallHpn());
  ASSERT_TRUE(one.ok());
  for (const Node& n : one->nodes()) EXPECT_NE(n.kind, NodeKind::kCore);
}

TEST(BuildersTest, HpnSmallPodPathCounts) {
  const HpnParams p = SmallHpn();
  Result<Topology> t = BuildHpn(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  PathFinder pf(*t);
  // Same segment, same rail: one path per plane through the shared dual-ToR pair.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic0"), 2u);
  EXPECT_EQ(PathHops(pf, "host0/nic0", "host1/nic0"), 2);
  // Cross segment, same rail: planes x aggs_per_plane.
  EXPECT_EQ(PathCount(pf, "host0/nic1", "host5/nic1"), 6u);
  EXPECT_EQ(PathHops(pf, "host0/nic1", "host5/nic1"), 4);
  // Same segment, different rails: up through the Aggs of either plane.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic1"), 6u);
  // Every NIC has a port on both planes, so any two NICs are reachable; each path stays in one
  // plane (ToR parity == Agg plane) and the 6 cross-segment paths use 6 distinct Aggs.
  Result<const PathSet*> set = pf.Paths(Id(*t, "host0/nic1"), Id(*t, "host5/nic1"));
  ASSERT_TRUE(set.ok());
  std::set<std::string> aggs;
  for (size_t i = 0; i < (*set)->size(); ++i) {
    std::set<int> planes;
    (*set)->ForEachLink(i, [&](LinkId l) {
      const Node& n = t->node(t->link(l).dst);
      if (n.kind == NodeKind::kTor) planes.insert(std::stoi(n.name.substr(3)) % 2);
      if (n.kind == NodeKind::kAgg) {
        planes.insert(std::stoi(n.name.substr(3)) / 3);
        aggs.insert(n.name);
      }
    });
    EXPECT_EQ(planes.size(), 1u) << "path " << i << " crosses planes";
  }
  EXPECT_EQ(aggs.size(), 6u);
  // Two NICs of one host: NIC -> host -> NIC.
  EXPECT_EQ(PathCount(pf, "host2/nic0", "host2/nic1"), 1u);
  EXPECT_EQ(PathHops(pf, "host2/nic0", "host2/nic1"), 2);
}

TEST(BuildersTest, HpnSinglePlaneHasOnePortPerNic) {
  HpnParams p = SmallHpn();
  p.planes = 1;
  Result<Topology> t = BuildHpn(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 4u);
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 3u);
  EXPECT_EQ(t->num_links(), 2u * (16u + 16u + 4u * 3u));
  EXPECT_TRUE(Adjacent(*t, "host4/nic1", "tor3"));
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic0"), 1u);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host5/nic0"), 3u);
}

TEST(BuildersTest, HpnEightPlanesIsAMultiPlaneNic) {
  // A multi-plane NIC (MRC-style 8 x 100G ports): one port per plane, planes never meet.
  HpnParams p = SmallHpn();
  p.planes = 8;
  p.nic_port_gbps = 100;
  Result<Topology> t = BuildHpn(p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 2u * 2u * 8u);  // Segments x rails x planes.
  EXPECT_EQ(CountKind(*t, NodeKind::kAgg), 8u * 3u);
  // NIC 1 of host 0 (segment 0): ports on tor ((0 * 2 + 1) * 8 + plane) = tor8..tor15.
  for (int plane = 0; plane < 8; ++plane) {
    EXPECT_TRUE(Adjacent(*t, "host0/nic1", "tor" + std::to_string(8 + plane))) << plane;
  }
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic0"), 8u);   // One per plane's ToR.
  EXPECT_EQ(PathCount(pf, "host0/nic1", "host5/nic1"), 24u);  // Planes x aggs_per_plane.
  Result<const PathSet*> set = pf.Paths(Id(*t, "host0/nic1"), Id(*t, "host5/nic1"));
  ASSERT_TRUE(set.ok());
  for (size_t i = 0; i < (*set)->size(); ++i) {
    std::set<int> planes;
    (*set)->ForEachLink(i, [&](LinkId l) {
      const Node& n = t->node(t->link(l).dst);
      if (n.kind == NodeKind::kTor) planes.insert(std::stoi(n.name.substr(3)) % 8);
      if (n.kind == NodeKind::kAgg) planes.insert(std::stoi(n.name.substr(3)) / 3);
    });
    EXPECT_EQ(planes.size(), 1u) << "path " << i << " crosses planes";
  }
}

TEST(BuildersTest, HpnRejectsBadParameters) {
  auto err = [](auto mutate) {
    HpnParams p;
    mutate(p);
    return BuildHpn(p).status();
  };
  ExpectInvalid(err([](HpnParams& p) { p.segments = 0; }), "hpn.segments: must be >= 1 (got 0)");
  ExpectInvalid(err([](HpnParams& p) { p.hosts_per_segment = 0; }), "hpn.hosts_per_segment: ");
  ExpectInvalid(err([](HpnParams& p) { p.rails = 0; }), "hpn.rails: ");
  ExpectInvalid(err([](HpnParams& p) { p.planes = 9; }), "hpn.planes: must be in [1, 8] (got 9)");
  ExpectInvalid(err([](HpnParams& p) { p.planes = 0; }), "hpn.planes: must be in [1, 8] (got 0)");
  ExpectInvalid(err([](HpnParams& p) { p.aggs_per_plane = 0; }), "hpn.aggs_per_plane: ");
  ExpectInvalid(err([](HpnParams& p) { p.nic_port_gbps = kNaN; }), "hpn.nic_port_gbps: ");
  ExpectInvalid(err([](HpnParams& p) { p.tor_agg_gbps = 0; }), "hpn.tor_agg_gbps: ");
  ExpectInvalid(err([](HpnParams& p) { p.pcie_gbps = -1; }), "hpn.pcie_gbps: ");
  ExpectInvalid(err([](HpnParams& p) { p.link_latency_us = kInf; }), "hpn.link_latency_us: ");
  ExpectInvalid(err([](HpnParams& p) { p.segments = 2'000'000'000; }), "hpn: topology too large");
}

// ---- lingjun ----
// BuildLingjun takes parsed host rows; reading topo.csv (and the shipped 847-host file) is
// tested with the parser, in tests/spec/spec_lingjun_test.cc.

LingjunLayout Rows(std::initializer_list<std::array<const char*, 4>> rows) {
  LingjunLayout layout;
  for (const auto& r : rows) layout.hosts.push_back(LingjunHostRow{r[0], r[1], r[2], r[3], 0});
  return layout;
}

const LingjunLayout kSmallLingjun = Rows({{"h-a", "D1", "P1", "S1"},
                                          {"h-b", "D1", "P2", "S1"},
                                          {"h-c", "D1", "P1", "S2"},
                                          {"h-d", "D1", "P2", "S2"},
                                          {"h-e", "D1", "P2", "S3"}});

TEST(BuildersTest, LingjunAswLabelTorsHaveEcmpChoicesAcrossPsws) {
  LingjunParams p;
  Result<Topology> t = BuildLingjun(kSmallLingjun, p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 5u);
  EXPECT_EQ(CountKind(*t, NodeKind::kTor), 3u);
  EXPECT_EQ(t->num_links(), 2u * (5u + 5u + 5u + 2u));  // S1, S2: 2 PSWs each; S3: 1.
  ExpectNicsOwnedByTheirHosts(*t, 1, p.host.pcie_gbps);
  PathFinder pf(*t);
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host1/nic0"), 1u);  // Both on S1.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host2/nic0"), 2u);  // S1 -> P1|P2 -> S2.
  EXPECT_EQ(PathCount(pf, "host0/nic0", "host4/nic0"), 1u);  // S3 hangs off P2 only.

  p.grouping = LingjunTorGrouping::kPswAsw;
  Result<Topology> u = BuildLingjun(kSmallLingjun, p);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(CountKind(*u, NodeKind::kTor), 5u);
  EXPECT_FALSE(u->FindNode("S1").ok());
  LingjunParams cables = p;
  cables.tor_psw_links = 2;
  Result<Topology> c = BuildLingjun(kSmallLingjun, cables);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(CablesBetween(*c, "P1/S1", "P1"), 2u);
  PathFinder pf2(*u);
  EXPECT_EQ(PathCount(pf2, "host0/nic0", "host2/nic0"), 1u);  // P1/S1 -> P1 -> P1/S2.
  EXPECT_EQ(PathCount(pf2, "host0/nic0", "host1/nic0"), 1u);  // Via P1 -> D1 -> P2.
  EXPECT_EQ(PathHops(pf2, "host0/nic0", "host1/nic0"), 6);
}

TEST(BuildersTest, LingjunBuildIsDeterministic) {
  Result<Topology> a = BuildLingjun(kSmallLingjun, LingjunParams{});
  Result<Topology> b = BuildLingjun(kSmallLingjun, LingjunParams{});
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectIdentical(*a, *b);
  Result<Topology> c = BuildHpn(SmallHpn());
  Result<Topology> d = BuildHpn(SmallHpn());
  ASSERT_TRUE(c.ok() && d.ok());
  ExpectIdentical(*c, *d);
}

TEST(BuildersTest, LingjunBadRowsNameTheLineAndColumn) {
  const LingjunParams p;
  ExpectInvalid(BuildLingjun(LingjunLayout{}, p).status(), "lingjun csv: no host rows");
  ExpectInvalid(BuildLingjun(Rows({{"h1", "D", "", "S"}}), p).status(),
                "lingjun csv line 2, column 3 (PSW): empty field");
  ExpectInvalid(
      BuildLingjun(Rows({{"h1", "D", "P", "S"}, {"h2", "D", "P", "S"}, {"h3", "D", "P", ""}}), p)
          .status(),
      "lingjun csv line 4, column 4 (ASW): empty field");
  ExpectInvalid(BuildLingjun(Rows({{"h1", "D", "P", "S"}, {"h1", "D", "P", "S"}}), p).status(),
                "lingjun csv line 3, column 1 (ip): duplicate host ip 'h1' (first on line 2)");
  ExpectInvalid(
      BuildLingjun(Rows({{"h1", "D", "P", "S"}, {"h2", "D", "S", "T"}}), p).status(),
      "lingjun csv line 3, column 3 (PSW): switch 'S' already appears in column ASW (line 2)");
  ExpectInvalid(BuildLingjun(Rows({{"h1", "D", "P", "host0"}}), p).status(),
                "lingjun csv line 2, column 4 (ASW): switch name 'host0' clashes");
  // Issue #10 (13): switch labels follow the name rule (the real file's G6 / P10 / S14 do).
  ExpectInvalid(BuildLingjun(Rows({{"h1", "D", "P", "S"}, {"h2", "D", "P 2", "S"}}), p).status(),
                "lingjun csv line 3, column 3 (PSW): invalid switch name 'P 2'");
  ExpectInvalid(BuildLingjun(Rows({{"h1", "D\x1b]0;pwn\x07", "P", "S"}}), p).status(),
                "lingjun csv line 2, column 2 (DSW): invalid switch name 'D\\x1b]0;pwn\\x07'");
  // Rows read from a file are reported at their own line.
  LingjunLayout from_file = Rows({{"h1", "D", "P", "S"}, {"h2", "D", "P 2", "S"}});
  from_file.hosts[0].line = 7;
  from_file.hosts[1].line = 9;
  ExpectInvalid(BuildLingjun(from_file, p).status(),
                "lingjun csv line 9, column 3 (PSW): invalid switch name 'P 2'");
}

TEST(BuildersTest, LingjunRejectsBadParameters) {
  auto err = [](auto mutate) {
    LingjunParams p;
    mutate(p);
    return BuildLingjun(kSmallLingjun, p).status();
  };
  ExpectInvalid(err([](LingjunParams& p) { p.tor_psw_links = 0; }),
                "lingjun.tor_psw_links: must be >= 1 (got 0)");
  ExpectInvalid(err([](LingjunParams& p) { p.tor_psw_gbps = kNaN; }), "lingjun.tor_psw_gbps: ");
  ExpectInvalid(err([](LingjunParams& p) { p.psw_dsw_gbps = 0; }), "lingjun.psw_dsw_gbps: ");
  ExpectInvalid(err([](LingjunParams& p) { p.host.nics_per_host = 0; }),
                "lingjun.host.nics_per_host: ");
  ExpectInvalid(err([](LingjunParams& p) { p.host.link_latency_us = -0.5; }),
                "lingjun.host.link_latency_us: ");
  ExpectInvalid(err([](LingjunParams& p) { p.grouping = static_cast<LingjunTorGrouping>(7); }),
                "lingjun.grouping: ");
}

}  // namespace
}  // namespace crux::core
