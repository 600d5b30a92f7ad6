#include "crux/core/faults/fault_probes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using testing::Clos2Small;
using testing::MakeClos2Small;

std::shared_ptr<AppliedAssignment> AssignmentWith(const std::string& id,
                                                  std::vector<FlowPin> flows) {
  auto a = std::make_shared<AppliedAssignment>();
  a->assignment.job_id = id;
  a->assignment.flows = std::move(flows);
  a->epoch = 1;
  return a;
}

FlowPin Pin(PathFinder& paths, NodeId src, NodeId dst, size_t path_index) {
  FlowPin p;
  p.src_nic = src;
  p.dst_nic = dst;
  p.udp_sport = 0xC000;
  p.path = (*paths.Paths(src, dst))->Path(path_index);
  return p;
}

std::set<LinkId> Links(const std::vector<LinkId>& v) { return {v.begin(), v.end()}; }

std::vector<const Assignment*> Of(const AppliedPlan& plan) {
  std::vector<const Assignment*> out;
  for (const auto& [id, a] : plan) out.push_back(&a->assignment);
  return out;
}

class FaultProbesTest : public ::testing::Test {
 protected:
  FaultProbesTest() : c_(MakeClos2Small()), paths_(c_.topo) {}

  // Job "a": host0/nic0 <-> host2/nic0, both directions pinned through agg0.
  AppliedPlan OneJobThroughAgg0() {
    AppliedPlan plan;
    plan["a"] = AssignmentWith("a", {Pin(paths_, c_.nic[0][0], c_.nic[2][0], 0),
                                     Pin(paths_, c_.nic[2][0], c_.nic[0][0], 0)});
    return plan;
  }

  Clos2Small c_;
  PathFinder paths_;
  HashEcmpModel ecmp_{0};
};

TEST_F(FaultProbesTest, WatchedLinksAreTheFabricAndNicLinksThatAreUp) {
  const std::vector<LinkId> watched = WatchedLinks(c_.topo);
  // 2 ToRs x 3 Aggs x 2 directions + 6 NICs x 2 directions; no PCIe link.
  EXPECT_EQ(watched.size(), 24u);
  for (LinkId l : watched) {
    const Link& link = c_.topo.link(l);
    EXPECT_NE(c_.topo.node(link.src).kind, NodeKind::kHost);
    EXPECT_NE(c_.topo.node(link.dst).kind, NodeKind::kHost);
  }
  c_.topo.SetLinkUp(c_.tor_agg[0][1], false);
  EXPECT_EQ(WatchedLinks(c_.topo).size(), 23u);
}

TEST_F(FaultProbesTest, ProbesCoverTheSpareUplinksOnTheJobsOwnPairs) {
  const AppliedPlan plan = OneJobThroughAgg0();
  const ProbeDesign d = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, {});
  // The flows cover 4 NIC links and 4 uplinks through agg0.
  EXPECT_EQ(d.covered_by_flows.size(), 8u);
  // agg1 and agg2 in both directions: 2 probes per direction, 4 in all (max_per_job).
  ASSERT_EQ(d.probes.count("a"), 1u);
  const std::vector<FlowPin>& probes = d.probes.at("a");
  EXPECT_EQ(d.total, 4u);
  ASSERT_EQ(probes.size(), 4u);
  std::set<LinkId> expected;
  for (int t = 0; t < 2; ++t) {
    for (int a = 1; a < 3; ++a) {
      expected.insert(c_.tor_agg[t][a]);
      expected.insert(c_.topo.link(c_.tor_agg[t][a]).reverse);
    }
  }
  EXPECT_EQ(Links(d.covered_by_probes), expected);
  // Coverage 2 is wanted, but each of those links is on one path of the job's two pairs only.
  EXPECT_EQ(Links(d.under_covered).size(), 8u + 8u);
  for (const FlowPin& p : probes) {
    // A pair of the job, a path of the pair that the source port really takes, not agg0's.
    const bool forward = p.src_nic == c_.nic[0][0] && p.dst_nic == c_.nic[2][0];
    const bool backward = p.src_nic == c_.nic[2][0] && p.dst_nic == c_.nic[0][0];
    EXPECT_TRUE(forward || backward);
    const PathSet* set = *paths_.Paths(p.src_nic, p.dst_nic);
    const std::optional<size_t> index = set->IndexOf(p.path);
    ASSERT_TRUE(index.has_value());
    EXPECT_NE(*index, 0u);
    EXPECT_GE(p.udp_sport, 0xC000);
    auto route = ecmp_.Route(paths_, p.src_nic, p.dst_nic, p.udp_sport);
    ASSERT_TRUE(route.ok());
    EXPECT_EQ(*route, *index);
  }
  // The idle NICs' access links: no job can reach them.
  EXPECT_EQ(d.uncovered.size(), 8u);
  for (LinkId l : d.uncovered) {
    const Link& link = c_.topo.link(l);
    EXPECT_TRUE(c_.topo.node(link.src).kind == NodeKind::kNic ||
                c_.topo.node(link.dst).kind == NodeKind::kNic);
  }
}

TEST_F(FaultProbesTest, BoundsPerJobAndInAll) {
  const AppliedPlan plan = OneJobThroughAgg0();
  ProbeOptions o;
  o.max_per_job = 1;
  const ProbeDesign one = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, o);
  EXPECT_EQ(one.total, 1u);
  EXPECT_EQ(one.covered_by_probes.size(), 2u);
  EXPECT_EQ(one.uncovered.size(), 8u + 6u);

  o.max_per_job = 4;
  o.max_total = 0;
  const ProbeDesign none = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, o);
  EXPECT_EQ(none.total, 0u);
  EXPECT_TRUE(none.probes.empty());
  EXPECT_EQ(none.uncovered.size(), 16u);
}

TEST_F(FaultProbesTest, NothingToProbeWhenTheFlowsCoverEveryReachableLink) {
  AppliedPlan plan;
  std::vector<FlowPin> flows;
  for (size_t k = 0; k < 3; ++k) {
    flows.push_back(Pin(paths_, c_.nic[0][0], c_.nic[2][0], k));
    flows.push_back(Pin(paths_, c_.nic[2][0], c_.nic[0][0], k));
  }
  plan["a"] = AssignmentWith("a", std::move(flows));
  const ProbeDesign d = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, {});
  EXPECT_EQ(d.total, 0u);
  EXPECT_TRUE(d.probes.empty());
  EXPECT_EQ(d.covered_by_flows.size(), 16u);
  EXPECT_EQ(d.uncovered.size(), 8u);  // Idle NICs only.
  // No plan: nothing covered, nothing to probe from.
  const ProbeDesign empty = DesignProbes(c_.topo, {}, paths_, ecmp_, {});
  EXPECT_EQ(empty.total, 0u);
  EXPECT_EQ(empty.uncovered.size(), 24u);
}

TEST_F(FaultProbesTest, CoverageAsksForSeveralProbesPerLinkFromDifferentPairs) {
  // Two jobs on the same ToR pair: each uncovered uplink can be probed from both.
  AppliedPlan plan = OneJobThroughAgg0();
  plan["b"] = AssignmentWith("b", {Pin(paths_, c_.nic[1][0], c_.nic[3][0], 0),
                                   Pin(paths_, c_.nic[3][0], c_.nic[1][0], 0)});
  const ProbeDesign d = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, {});
  EXPECT_EQ(d.total, 8u);
  for (LinkId l : d.covered_by_probes) {
    EXPECT_FALSE(std::count(d.under_covered.begin(), d.under_covered.end(), l))
        << c_.topo.LinkName(l);
  }
  EXPECT_EQ(d.covered_by_probes.size(), 8u);
  ProbeOptions once;
  once.coverage = 1;
  EXPECT_EQ(DesignProbes(c_.topo, Of(plan), paths_, ecmp_, once).total, 4u);
}

TEST_F(FaultProbesTest, SuspectsThatFlowsCoverAreProbedFirstOnTheirOwnBudget) {
  const AppliedPlan plan = OneJobThroughAgg0();
  const LinkId suspect = c_.tor_agg[0][0];  // tor0 -> agg0: the job's flow crosses it.
  const ProbeDesign d = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, {}, {suspect});
  EXPECT_EQ(d.suspects, std::vector<LinkId>{suspect});
  size_t over = 0;
  for (const FlowPin& p : d.probes.at("a")) {
    over += std::count(p.path.begin(), p.path.end(), suspect);
  }
  EXPECT_GE(over, 1u);
  // The uncovered links still get their max_per_job probes (4) besides.
  EXPECT_GE(d.total, 5u);
  EXPECT_EQ(d.covered_by_probes.size(), 8u);
  // A link that is not watched (down) is no target.
  Clos2Small down = MakeClos2Small();
  down.topo.SetLinkUp(down.tor_agg[0][0], false);
  PathFinder paths(down.topo);
  const ProbeDesign none = DesignProbes(down.topo, {}, paths, ecmp_, {}, {down.tor_agg[0][0]});
  EXPECT_TRUE(none.suspects.empty());
  EXPECT_EQ(none.total, 0u);
}

TEST_F(FaultProbesTest, ASuspectsProbeLeavesTheOtherSuspectsOfTheSlowFlowsPath) {
  // One slow flow host0 -> host2 through agg0: every link of its path is a suspect. Its job also
  // sends host1 -> host3 through agg1, so probes host0 -> host3 and host1 -> host2 can cross one
  // access link of the slow path without the other: each NIC access link gets a probe that
  // crosses no other suspect.
  AppliedPlan plan;
  const FlowPin slow = Pin(paths_, c_.nic[0][0], c_.nic[2][0], 0);
  plan["a"] = AssignmentWith("a", {slow, Pin(paths_, c_.nic[1][0], c_.nic[3][0], 1)});
  std::vector<LinkId> suspects = slow.path;
  std::sort(suspects.begin(), suspects.end());
  const ProbeDesign d = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, {}, suspects);
  EXPECT_EQ(d.suspects, suspects);
  const std::set<LinkId> s(suspects.begin(), suspects.end());
  for (LinkId access : {slow.path.front(), slow.path.back()}) {
    bool alone = false;
    for (const FlowPin& p : d.probes.at("a")) {
      size_t crossed = 0;
      bool crosses = false;
      for (LinkId l : p.path) {
        crossed += s.count(l);
        crosses = crosses || l == access;
      }
      alone = alone || (crosses && crossed == 1);
    }
    EXPECT_TRUE(alone) << c_.topo.LinkName(access);
  }
}

// A capacity probe measures its path's narrowest link, so it sees a 200 G access link's loss
// only below the narrowest other link: through 100 G uplinks, a fault at 45 % (90 G) looks like
// no fault at all. The probe over a suspect access link is the one through its ToR alone, to a
// NIC of another host of the job under the same ToR (all 200 G), not one of the job's pairs
// through the uplinks.
TEST(FaultProbesSensitivityTest, ASuspectAccessLinkIsProbedThroughItsToRAlone) {
  Clos2Small c = MakeClos2Small(/*nic_gbps=*/200, /*uplink_gbps=*/100);
  PathFinder paths(c.topo);
  HashEcmpModel ecmp(0);
  AppliedPlan plan;
  const FlowPin slow = Pin(paths, c.nic[0][0], c.nic[2][0], 0);  // host0 -> host2 (tor1).
  plan["a"] = AssignmentWith("a", {slow, Pin(paths, c.nic[1][0], c.nic[3][0], 0)});
  const LinkId access = slow.path.front();  // host0/nic0 -> tor0.
  const ProbeDesign d = DesignProbes(c.topo, Of(plan), paths, ecmp, {}, {access});
  ASSERT_EQ(d.suspects, std::vector<LinkId>{access});
  const FlowPin& first = d.probes.at("a").front();  // Suspects are designed first.
  EXPECT_EQ(first.src_nic, c.nic[0][0]);
  EXPECT_EQ(first.dst_nic, c.nic[1][0]);  // host1, under tor0 as well.
  ASSERT_EQ(first.path.size(), 2u);
  EXPECT_EQ(first.path.front(), access);
}

// The localisation places a link from min_flows (2) rows; with one probe per suspect, a probe
// waited for a job's flow over the link, which an intermittent job sends only in its
// communication phases. Each suspect now gets `coverage` probes of its own. Here the job's flows
// cover every link it can reach, so step 3 designs nothing and every probe is the suspect's (one
// before stop 52, whatever `coverage` said).
TEST_F(FaultProbesTest, EachSuspectGetsCoverageProbesThatCrossIt) {
  AppliedPlan plan;
  std::vector<FlowPin> flows;
  for (size_t k = 0; k < 3; ++k) {
    flows.push_back(Pin(paths_, c_.nic[0][0], c_.nic[2][0], k));
    flows.push_back(Pin(paths_, c_.nic[2][0], c_.nic[0][0], k));
  }
  plan["a"] = AssignmentWith("a", flows);
  const LinkId access = flows[0].path.front();  // host0/nic0 -> tor0: every path crosses it.
  for (int coverage : {1, 2, 3}) {
    ProbeOptions o;
    o.coverage = coverage;
    const ProbeDesign d = DesignProbes(c_.topo, Of(plan), paths_, ecmp_, o, {access});
    ASSERT_EQ(d.suspects, std::vector<LinkId>{access});
    EXPECT_EQ(d.total, static_cast<size_t>(coverage));
    std::set<std::tuple<uint32_t, uint32_t, uint16_t>> distinct;
    for (const FlowPin& p : d.probes.at("a")) {
      EXPECT_EQ(p.path.front(), access) << "coverage " << coverage;
      distinct.insert({p.src_nic.value(), p.dst_nic.value(), p.udp_sport});
    }
    EXPECT_EQ(distinct.size(), static_cast<size_t>(coverage)) << "different probes";
  }
}

TEST(ProbeOptionsTest, ValidationNamesTheFieldAndTheRateBoundIsDocumented) {
  EXPECT_TRUE(ValidateProbeOptions({}).ok());
  ProbeOptions o;
  o.max_per_job = -1;
  EXPECT_NE(ValidateProbeOptions(o).message().find("faults.probes.max_per_job"), std::string::npos);
  o = {};
  o.interval = Duration::Zero();
  EXPECT_NE(ValidateProbeOptions(o).message().find("faults.probes.interval"), std::string::npos);
  o = {};
  o.ports = {100, 50};
  EXPECT_FALSE(ValidateProbeOptions(o).ok());
  for (double bad : {0.0, -0.5, 1.5}) {
    o = {};
    o.suspect_ratio = bad;
    EXPECT_NE(ValidateProbeOptions(o).message().find("faults.probes.suspect_ratio"),
              std::string::npos);
  }
  // 256 probes x 64 KiB per second = 134 Mb/s across the fabric.
  EXPECT_DOUBLE_EQ(ProbeRateBoundBps({}), 256.0 * 65536 * 8);
}

}  // namespace
}  // namespace crux::core
