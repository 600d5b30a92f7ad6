// Tests for crux::spec topology parsing: every kind, defaults, and strict error reporting
// (key paths, positions, no exceptions).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "crux/core/topology/builders.h"
#include "crux/core/topology/topology.h"
#include "crux/spec/topology_spec.h"

namespace crux::spec {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Parses `yaml` and expects an error whose message contains every fragment.
void ExpectTopologyError(const std::string& yaml, std::initializer_list<std::string> fragments) {
  core::Result<core::Topology> topo = ParseTopology(yaml, "");
  ASSERT_FALSE(topo.ok()) << "parsed unexpectedly:\n" << yaml;
  for (const std::string& f : fragments) {
    EXPECT_THAT(topo.status().message(), HasSubstr(f)) << yaml;
  }
}

// A fresh directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("crux_spec_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& content) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
    return p.string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(SpecTopologyTest, ParsesClos2WithEveryKey) {
  core::Result<core::Topology> topo = ParseTopology(R"(
topology:
  kind: clos2
  tors: 3
  aggs: 2
  hosts_per_tor: 2
  nics_per_host: 2
  gpus_per_host: 4
  nic_gbps: 100
  pcie_gbps: 256
  link_latency_us: 0.5
  uplink_gbps: 400
  uplinks_per_agg: 2
  rail_optimized: false
)",
                                                    "");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->hosts().size(), 6u);
  ASSERT_TRUE(topo->FindNode("host5/nic1").ok());
  ASSERT_TRUE(topo->FindNode("tor2").ok());
  ASSERT_TRUE(topo->FindNode("agg1").ok());
  core::Result<core::NodeId> nic = topo->FindNode("host0/nic0");
  core::Result<core::NodeId> tor = topo->FindNode("tor0");
  ASSERT_TRUE(nic.ok() && tor.ok());
  core::Result<core::LinkId> link = topo->FindLink(*nic, *tor);
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(topo->link(*link).capacity, core::Bandwidth::Gbps(100));
  EXPECT_EQ(topo->link(*link).latency, core::Duration::Nanos(500));
}

TEST(SpecTopologyTest, OmittedKeysTakeTheBuilderDefaults) {
  core::Result<core::Topology> topo = ParseTopology("topology: {kind: clos2}\n", "");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  const core::Clos2Params defaults;
  EXPECT_EQ(topo->hosts().size(), static_cast<size_t>(defaults.tors * defaults.hosts_per_tor));
}

TEST(SpecTopologyTest, ParsesEveryGeneratedKind) {
  struct Case {
    const char* yaml;
    size_t hosts;
  };
  const Case cases[] = {
      {"topology: {kind: clos3, pods: 2, tors_per_pod: 2, aggs_per_pod: 2, cores: 4, "
       "hosts_per_tor: 3, tor_agg_gbps: 100, agg_core_gbps: 100}",
       12},
      {"topology: {kind: clos3, pods: 3, tors_per_pod: 2, aggs_per_pod: 2, cores: 4, "
       "hosts_per_tor: 5, nics_per_host: 2, dual_tor: true}",
       15},
      {"topology: {kind: fattree, k: 4, link_gbps: 100}", 16},
      {"topology: {kind: hpn, segments: 2, hosts_per_segment: 4, rails: 2, planes: 2, "
       "aggs_per_plane: 2, nic_port_gbps: 200, tor_agg_gbps: 400}",
       8},
      {"topology: {kind: clos2, tors: 4, nics_per_host: 4, hosts_per_tor: 3, "
       "rail_optimized: true}",
       3},
  };
  for (const Case& c : cases) {
    core::Result<core::Topology> topo = ParseTopology(c.yaml, "");
    ASSERT_TRUE(topo.ok()) << c.yaml << ": " << topo.status().ToString();
    EXPECT_EQ(topo->hosts().size(), c.hosts) << c.yaml;
  }
}

TEST(SpecTopologyTest, ExplicitKeepsNamesAndDefaultsLatency) {
  core::Result<core::Topology> topo = ParseTopology(R"(
topology:
  kind: explicit
  nodes:
    - {name: a, type: host}
    - {name: b, type: host}
    - {name: s, type: switch}
  links:
    - {a: a, b: s, gbps: 100}
    - {a: s, b: b, gbps: 50, latency_us: 3}
)",
                                                    "");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->hosts().size(), 2u);
  EXPECT_EQ(topo->num_links(), 4u);
  core::Result<core::LinkId> l = topo->FindLink(*topo->FindNode("s"), *topo->FindNode("b"));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(topo->link(*l).capacity, core::Bandwidth::Gbps(50));
  EXPECT_EQ(topo->link(*l).latency, core::Duration::Micros(3));
  core::Result<core::LinkId> first = topo->FindLink(*topo->FindNode("a"), *topo->FindNode("s"));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(topo->link(*first).latency, core::Duration::Micros(1));
}

TEST(SpecTopologyTest, UnknownKeyIsNamedWithItsPosition) {
  ExpectTopologyError("topology:\n  kind: hpn\n  tors: 4\n",
                      {"topology.tors: unknown key", "line 3, column 3"});
  ExpectTopologyError("topology:\n  kind: clos2\n  segments: 2\n", {"topology.segments"});
  ExpectTopologyError("topology: {kind: clos2}\nextra: 1\n", {"extra: unknown key"});
  ExpectTopologyError(
      "topology:\n  kind: explicit\n  nodes:\n    - {name: a, type: host, gpus: 8}\n",
      {"topology.nodes[0].gpus: unknown key"});
}

TEST(SpecTopologyTest, NanAndInfinityAreRejected) {
  ExpectTopologyError("topology: {kind: clos2, nic_gbps: .nan}",
                      {"topology.nic_gbps", "finite", ".nan"});
  ExpectTopologyError("topology: {kind: clos2, uplink_gbps: .inf}", {"topology.uplink_gbps"});
  ExpectTopologyError("topology: {kind: hpn, link_latency_us: -.inf}",
                      {"topology.link_latency_us"});
  ExpectTopologyError("topology: {kind: clos2, nic_gbps: nan}", {"topology.nic_gbps"});
}

TEST(SpecTopologyTest, NegativeAndZeroSpeedsAreRejected) {
  const std::string base = R"(
topology:
  kind: explicit
  nodes: [{name: a, type: host}, {name: s, type: switch}, {name: t, type: switch},
          {name: b, type: host}]
  links:
    - {a: a, b: s, gbps: 100}
    - {a: s, b: t, gbps: 100}
    - {a: t, b: b, gbps: 100}
)";
  ExpectTopologyError(base + "    - {a: s, b: b, gbps: -1}\n",
                      {"topology.links[3].gbps: must be > 0 (got -1)", "line 10"});
  ExpectTopologyError(base + "    - {a: s, b: b, gbps: 0}\n",
                      {"topology.links[3].gbps: must be > 0 (got 0)"});
  ExpectTopologyError(base + "    - {a: s, b: b, gbps: 1, latency_us: -2}\n",
                      {"topology.links[3].latency_us: must be >= 0 (got -2)"});
  ExpectTopologyError("topology: {kind: clos3, agg_core_gbps: -400}",
                      {"topology.agg_core_gbps: must be > 0"});
  ExpectTopologyError("topology: {kind: clos2, tors: 0}", {"topology.tors: must be >= 1 (got 0)"});
  ExpectTopologyError("topology: {kind: clos2, tors: -3}", {"topology.tors"});
}

TEST(SpecTopologyTest, WrongTypesAreRejected) {
  ExpectTopologyError("topology: {kind: clos2, tors: '4'}",
                      {"topology.tors: must be an integer (got '4')"});
  ExpectTopologyError("topology: {kind: clos2, tors: 2.5}", {"topology.tors: must be an integer"});
  ExpectTopologyError("topology: {kind: clos2, tors: [1, 2]}", {"topology.tors", "a list"});
  ExpectTopologyError("topology: {kind: clos2, nic_gbps: fast}",
                      {"topology.nic_gbps: must be a number (got fast)"});
  ExpectTopologyError("topology: {kind: clos2, rail_optimized: 1}",
                      {"topology.rail_optimized: must be true or false"});
  ExpectTopologyError("topology: {kind: clos2, tors: 99999999999999}", {"topology.tors"});
  ExpectTopologyError("topology: [1, 2]", {"topology: must be a map"});
  ExpectTopologyError("- 1\n- 2\n", {"document: must be a map (got a list)"});
}

TEST(SpecTopologyTest, KindIsRequiredAndChecked) {
  ExpectTopologyError("topology: {tors: 2}", {"topology.kind: missing required key"});
  ExpectTopologyError("topology: {kind: torus}", {"topology.kind: unknown kind 'torus'"});
  ExpectTopologyError("", {"topology: missing required key"});
  ExpectTopologyError("other: 1", {"other: unknown key"});
}

TEST(SpecTopologyTest, DuplicateKeysAreRejected) {
  ExpectTopologyError("topology:\n  kind: clos2\n  tors: 2\n  tors: 3\n",
                      {"topology.tors: duplicate key", "line 4"});
}

TEST(SpecTopologyTest, BadYamlSyntaxReportsTheLine) {
  ExpectTopologyError("topology:\n  kind: clos2\n  tors: [1, 2\n  aggs: 3\n",
                      {"invalid YAML", "line"});
  ExpectTopologyError("topology: {kind: clos2", {"invalid YAML"});
}

TEST(SpecTopologyTest, KindSpecificRulesNameTheKey) {
  ExpectTopologyError("topology: {kind: fattree, k: 3}", {"topology.k: must be even (got 3)"});
  ExpectTopologyError("topology: {kind: fattree, nics_per_host: 2}", {"topology.nics_per_host"});
  ExpectTopologyError("topology: {kind: fattree, nic_gbps: 100}", {"topology.nic_gbps"});
  ExpectTopologyError("topology: {kind: hpn, planes: 9}",
                      {"topology.planes: must be in [1, 8] (got 9)"});
  ExpectTopologyError("topology: {kind: clos3, aggs_per_pod: 3, cores: 4}",
                      {"topology.cores: must be a multiple of aggs_per_pod"});
  ExpectTopologyError("topology: {kind: clos2, tors: 3, nics_per_host: 2, rail_optimized: true}",
                      {"topology.tors: must be a multiple of nics_per_host"});
}

TEST(SpecTopologyTest, ExplicitErrorsNameTheEntry) {
  const std::string nodes =
      "topology:\n  kind: explicit\n  nodes:\n    - {name: a, type: host}\n"
      "    - {name: s, type: switch}\n";
  ExpectTopologyError(nodes + "  links:\n    - {a: a, b: zz, gbps: 10}\n",
                      {"topology.links[0].b: unknown node 'zz'"});
  ExpectTopologyError(nodes + "  links:\n    - {a: a, b: s}\n",
                      {"topology.links[0].gbps: missing required key"});
  ExpectTopologyError(nodes + "  links:\n    - {a: s, b: s, gbps: 1}\n", {"topology.links[0].b"});
  ExpectTopologyError(nodes + "    - {name: a, type: switch}\n",
                      {"topology.nodes[2].name: duplicate node 'a'"});
  ExpectTopologyError(nodes + "    - {name: x, type: router}\n",
                      {"topology.nodes[2].type: must be 'host' or 'switch' (got 'router')"});
  ExpectTopologyError(nodes + "    - {type: host}\n",
                      {"topology.nodes[2].name: missing required key"});
  ExpectTopologyError("topology: {kind: explicit}", {"topology.nodes: missing required key"});
}

// Issue #10 (13): node names must obey the one name rule (core::IsValidName, the protocol's);
// the message names the YAML path and line and shows the name escaped.
TEST(SpecTopologyTest, ExplicitNodeNamesFollowTheNameRule) {
  const std::string head = "topology:\n  kind: explicit\n  nodes:\n    - {name: a, type: host}\n";
  const std::string links = "  links:\n    - {a: a, b: s, gbps: 10}\n";
  ExpectTopologyError(
      head + "    - {name: \"s\\e[2J\", type: switch}\n" + links,
      {"topology.nodes[1].name: invalid node name 's\\x1b[2J'", "[A-Za-z0-9._:/-]", "line 5"});
  ExpectTopologyError(head + "    - {name: \"sw one\", type: switch}\n" + links,
                      {"topology.nodes[1].name: invalid node name 'sw one'"});
  ExpectTopologyError(head + "    - {name: \"caf\u00e9\", type: switch}\n" + links,
                      {"topology.nodes[1].name: invalid node name 'caf\u00e9'"});
  ExpectTopologyError(head + "    - {name: " + std::string(129, 'x') + ", type: switch}\n" + links,
                      {"topology.nodes[1].name: invalid node name"});
  // Valid characters all pass.
  core::Result<core::Topology> ok =
      ParseTopology(head + "    - {name: \"pod-1.rack_2:sw/3\", type: switch}\n" +
                        "  links:\n    - {a: a, b: \"pod-1.rack_2:sw/3\", gbps: 10}\n",
                    "");
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
  // No message carries a raw control character.
  core::Result<core::Topology> bad =
      ParseTopology(head + "    - {name: \"\\e]0;x\\a\", type: switch}\n" + links, "");
  ASSERT_FALSE(bad.ok());
  for (char c : bad.status().message()) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << bad.status().message();
  }
}

// Issue #10 (13): a second link between the same two nodes (either direction) is an error
// naming both entries and the line; parallel cables are one link with `cables`.
TEST(SpecTopologyTest, ExplicitDuplicateLinksAreRejected) {
  const std::string nodes =
      "topology:\n  kind: explicit\n  nodes:\n    - {name: a, type: host}\n"
      "    - {name: s, type: switch}\n  links:\n    - {a: a, b: s, gbps: 10}\n";
  ExpectTopologyError(
      nodes + "    - {a: a, b: s, gbps: 10}\n",
      {"topology.links[1]: duplicate link a <-> s (also topology.links[0]", "cables", "line 8"});
  ExpectTopologyError(nodes + "    - {a: s, b: a, gbps: 40}\n",
                      {"topology.links[1]: duplicate link s <-> a"});
  core::Result<core::Topology> two = ParseTopology(
      "topology:\n  kind: explicit\n  nodes: [{name: a, type: host}, "
      "{name: s, type: switch}]\n  links: [{a: a, b: s, gbps: 10, cables: 2}]\n",
      "");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->num_links(), 4u);  // Two cables, both directions.
  ExpectTopologyError(
      "topology:\n  kind: explicit\n  nodes: [{name: a, type: host}, {name: s, type: switch}]\n"
      "  links: [{a: a, b: s, gbps: 10, cables: 0}]\n",
      {"topology.links[0].cables: must be >= 1 (got 0)"});
}

// Issue #10 (13): a host or switch without any link, and a topology without links, are errors
// naming the node and its line.
TEST(SpecTopologyTest, ExplicitIsolatedNodesAndMissingLinksAreRejected) {
  const std::string nodes =
      "topology:\n  kind: explicit\n  nodes:\n    - {name: a, type: host}\n"
      "    - {name: s, type: switch}\n    - {name: lonely, type: host}\n";
  ExpectTopologyError(nodes + "  links:\n    - {a: a, b: s, gbps: 10}\n",
                      {"topology.nodes[2]: host 'lonely' has no link", "line 6"});
  ExpectTopologyError(
      "topology:\n  kind: explicit\n  nodes:\n    - {name: a, type: host}\n"
      "    - {name: s, type: switch}\n    - {name: spare, type: switch}\n"
      "  links:\n    - {a: a, b: s, gbps: 10}\n",
      {"topology.nodes[2]: switch 'spare' has no link"});
  ExpectTopologyError(nodes, {"topology.links: missing required key"});
  ExpectTopologyError(nodes + "  links: []\n", {"topology.links: must list at least one link"});
  ExpectTopologyError("topology: {kind: explicit, nodes: [{name: solo, type: host}]}",
                      {"topology.links: missing required key"});
}

// Issue #10 (13): Lingjun switch labels follow the rule too; the error names the CSV cell.
TEST(SpecTopologyTest, LingjunSwitchNamesFollowTheNameRule) {
  TempDir dir;
  dir.Write("bad.csv", "ip,DSW,PSW,ASW\nh1,D,P,S\nh2,D,P,S 2\n");
  ExpectTopologyError("topology: {kind: lingjun, path: " + dir.path() + "/bad.csv}",
                      {"lingjun csv line 3, column 4 (ASW): invalid switch name 'S 2'"});
}

TEST(SpecTopologyTest, LingjunReadsACsvRelativeToTheYamlFile) {
  TempDir dir;
  dir.Write("data/tiny.csv",
            "ip,DSW,PSW,ASW\n"
            "ip0,D1,P1,S1\nip1,D1,P1,S1\nip2,D1,P2,S2\nip3,D1,P2,S2\n");
  const std::string yaml = dir.Write(
      "topo.yaml",
      "topology: {kind: lingjun, path: data/tiny.csv, grouping: psw_asw, nics_per_host: 2}\n");
  core::Result<core::Topology> topo = LoadTopologyFile(yaml);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->hosts().size(), 4u);
  EXPECT_TRUE(topo->FindNode("host3/nic1").ok());
  EXPECT_TRUE(topo->FindNode("P2/S2").ok());
}

TEST(SpecTopologyTest, LingjunDefaultsToTheShippedCsv) {
  TempDir dir;  // Nothing next to the YAML: the source tree's configs/ is used.
  core::Result<core::Topology> topo = ParseTopology("topology: {kind: lingjun}", dir.path());
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->hosts().size(), 847u);
}

TEST(SpecTopologyTest, LingjunErrorsNameThePathAndGrouping) {
  TempDir dir;
  core::Result<core::Topology> missing =
      ParseTopology("topology: {kind: lingjun, path: nope.csv}", dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), core::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("topology.path"));
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.csv"));

  ExpectTopologyError("topology: {kind: lingjun, grouping: rack}",
                      {"topology.grouping: must be 'asw' or 'psw_asw' (got 'rack')"});

  dir.Write("bad.csv", "ip,DSW,PSW\nx,1,2\n");
  core::Result<core::Topology> bad =
      ParseTopology("topology: {kind: lingjun, path: bad.csv}", dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.csv"));
}

TEST(SpecTopologyTest, LoadTopologyFileNamesTheFile) {
  TempDir dir;
  core::Result<core::Topology> missing = LoadTopologyFile(dir.path() + "/absent.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), core::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("absent.yaml"));

  const std::string bad = dir.Write("bad.yaml", "topology: {kind: clos2, aggs: -1}\n");
  core::Result<core::Topology> topo = LoadTopologyFile(bad);
  ASSERT_FALSE(topo.ok());
  EXPECT_THAT(topo.status().message(), HasSubstr("bad.yaml: topology.aggs: must be >= 1"));
}

TEST(SpecTopologyTest, GarbageInputNeverThrows) {
  const char* inputs[] = {"[",
                          "{a: b",
                          ": :",
                          "\t\t",
                          "topology:",
                          "topology: 3",
                          "? [a]\n: b",
                          "topology: {kind: [x]}",
                          "topology: {kind: explicit, nodes: 3}",
                          "topology: {kind: explicit, nodes: [3]}",
                          "topology: {kind: explicit, nodes: [], links: [[1]]}",
                          "topology: {? [k] : v, kind: clos2}",
                          "%YAML 9.9\n---\na: 1\n",
                          "topology: &a {kind: clos2, x: *a}",
                          "topology: !!binary abc"};
  for (const char* in : inputs) {
    core::Result<core::Topology> topo = ParseTopology(in, "");
    EXPECT_FALSE(topo.ok()) << in;
    EXPECT_FALSE(topo.status().message().empty()) << in;
  }
}

}  // namespace
}  // namespace crux::spec
