// The Lingjun topology CSV at the edge (crux/spec/lingjun_csv.h): parsing topo.csv into the
// host rows core::BuildLingjun lays out, and what the shipped 847-host file builds.
#include "crux/spec/lingjun_csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "crux/core/topology/builders.h"
#include "crux/core/topology/topology.h"

namespace crux::spec {
namespace {

using ::testing::StartsWith;

std::string ShippedCsv() {
  std::ifstream in(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/lingjun/topo.csv",
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open configs/topologies/lingjun/topo.csv";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

size_t NodesOfKind(const core::Topology& t, core::NodeKind kind) {
  size_t n = 0;
  for (const core::Node& v : t.nodes()) n += v.kind == kind ? 1 : 0;
  return n;
}

bool Linked(const core::Topology& t, const char* a, const char* b) {
  const auto x = t.FindNode(a);
  const auto y = t.FindNode(b);
  return x.ok() && y.ok() && t.FindLink(*x, *y).ok();
}

TEST(SpecLingjunTest, ParsesRowsWithTheirLines) {
  auto layout = ParseLingjunCsv(
      "\xEF\xBB\xBFip,DSW,PSW,ASW\r\n# a comment\r\nh-a, D1 ,P1,S1\r\n\r\nh-b,D1,P2,S1\r\n");
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->hosts.size(), 2u);
  EXPECT_EQ(layout->hosts[0], (core::LingjunHostRow{"h-a", "D1", "P1", "S1", 3}));
  EXPECT_EQ(layout->hosts[1], (core::LingjunHostRow{"h-b", "D1", "P2", "S1", 5}));
}

TEST(SpecLingjunTest, StructureErrorsNameTheLine) {
  struct Case {
    const char* csv;
    const char* error;
  };
  const Case cases[] = {
      {"", "lingjun csv line 1: missing the header 'ip,DSW,PSW,ASW'"},
      {"ip,DSW,PSW\nh,D,P,S\n",
       "lingjun csv line 1: expected the header 'ip,DSW,PSW,ASW' (got 'ip,DSW,PSW')"},
      {"ip,DSW,ASW,PSW\nh,D,P,S\n",
       "lingjun csv line 1: expected the header 'ip,DSW,PSW,ASW' (got 'ip,DSW,ASW,PSW')"},
      {"ip,DSW,PSW,ASW\nh1,D,P,S\nh2,D,P\n",
       "lingjun csv line 3: expected 4 comma-separated fields (got 3)"},
      {"ip,DSW,PSW,ASW\nh1,D,P,S,extra\n",
       "lingjun csv line 2: expected 4 comma-separated fields (got 5)"},
  };
  for (const Case& c : cases) {
    auto layout = ParseLingjunCsv(c.csv);
    ASSERT_FALSE(layout.ok()) << c.csv;
    EXPECT_EQ(layout.status().code(), core::StatusCode::kInvalidArgument);
    EXPECT_EQ(layout.status().message(), c.error);
  }
  // Content errors come from core, at the file's lines (blank lines counted).
  auto built = BuildLingjunFromCsv("ip,DSW,PSW,ASW\n\nh1,D,P,S\nh1,D,P,S\n", {});
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(),
            "lingjun csv line 4, column 1 (ip): duplicate host ip 'h1' (first on line 3)");
  EXPECT_THAT(BuildLingjunFromCsv("ip,DSW,PSW,ASW\r\nh1,D,,S\r\n", {}).status().message(),
              StartsWith("lingjun csv line 2, column 3 (PSW): empty field"));
  EXPECT_THAT(BuildLingjunFromCsv("ip,DSW,PSW,ASW\n", {}).status().message(),
              StartsWith("lingjun csv: no host rows"));
}

TEST(SpecLingjunTest, TheShippedFileHas847HostsIn48AswTors) {
  core::LingjunParams p;
  auto t = BuildLingjunFromCsv(ShippedCsv(), p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->hosts().size(), 847u);
  EXPECT_EQ(NodesOfKind(*t, core::NodeKind::kNic), 847u);
  EXPECT_EQ(NodesOfKind(*t, core::NodeKind::kTor), 48u);
  EXPECT_EQ(NodesOfKind(*t, core::NodeKind::kAgg), 3u);
  EXPECT_EQ(NodesOfKind(*t, core::NodeKind::kCore), 1u);
  // PCIe + NIC + one uplink per distinct (ASW, PSW) pair (119) + 3 PSW-DSW.
  EXPECT_EQ(t->num_links(), 2u * (847u + 847u + 119u + 3u));
  // Row 1 is "...,G6,P10,S14"; S14 appears under all three PSWs.
  EXPECT_TRUE(Linked(*t, "host0/nic0", "S14"));
  for (const char* psw : {"P8", "P10", "P12"}) {
    EXPECT_TRUE(Linked(*t, "S14", psw)) << psw;
    EXPECT_TRUE(Linked(*t, psw, "G6")) << psw;
  }
}

TEST(SpecLingjunTest, TheShippedFileHas119PswAswTors) {
  core::LingjunParams p;
  p.grouping = core::LingjunTorGrouping::kPswAsw;
  p.host.nics_per_host = 2;
  auto t = BuildLingjunFromCsv(ShippedCsv(), p);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(NodesOfKind(*t, core::NodeKind::kNic), 2u * 847u);
  EXPECT_EQ(NodesOfKind(*t, core::NodeKind::kTor), 119u);
  EXPECT_TRUE(Linked(*t, "host0/nic1", "P10/S14"));
  EXPECT_FALSE(Linked(*t, "P10/S14", "P8"));
  EXPECT_FALSE(t->FindNode("S14").ok());
  // Each (PSW, ASW) ToR has exactly one PSW.
  for (const core::Node& n : t->nodes()) {
    if (n.kind != core::NodeKind::kTor) continue;
    std::set<core::NodeId> psws;
    for (core::LinkId l : t->OutLinks(*t->FindNode(n.name))) {
      if (t->node(t->link(l).dst).kind == core::NodeKind::kAgg) psws.insert(t->link(l).dst);
    }
    EXPECT_EQ(psws.size(), 1u) << n.name;
  }
}

}  // namespace
}  // namespace crux::spec
