#include "crux/loadgen/flow_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/protocol/validate.h"
#include "crux/spec/topology_spec.h"

namespace crux::loadgen {
namespace {

core::Topology Clos2() {
  auto topo = spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) +
                                     "/configs/topologies/example_clos2.yaml");
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  return std::move(topo).value();
}

PinnedFlow Flow(std::vector<std::string> path, uint64_t bytes = 1000000) {
  PinnedFlow f;
  f.src = path.front();
  f.dst = path.back();
  f.udp_sport = 49152;
  f.path = std::move(path);
  f.bytes_per_iteration = bytes;
  return f;
}

TEST(FlowModelTest, ParsesDirectedAndBothWayFaultsWithTimes) {
  const core::Topology topo = Clos2();
  auto a = ParseLinkFault("tor0->agg0:0.3@10", topo);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->from, "tor0");
  EXPECT_EQ(a->to, "agg0");
  EXPECT_FALSE(a->both);
  EXPECT_DOUBLE_EQ(a->rate_fraction, 0.3);
  EXPECT_EQ(a->after, core::Duration::Seconds(10));
  EXPECT_EQ(a->duration, core::Duration::Zero());
  EXPECT_EQ(DescribeFault(*a), "tor0->agg0 at 30% from 10000 ms");

  // Node names with '-' and '/': every split is tried.
  auto b = ParseLinkFault("host0/nic0-tor0:0@0.5+2", topo);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->from, "host0/nic0");
  EXPECT_EQ(b->to, "tor0");
  EXPECT_TRUE(b->both);
  EXPECT_EQ(b->rate_fraction, 0);
  EXPECT_EQ(b->after, core::Duration::Millis(500));
  EXPECT_EQ(b->duration, core::Duration::Seconds(2));
  EXPECT_EQ(DescribeFault(*b), "host0/nic0<->tor0 cut from 500 ms for 2000 ms");
}

TEST(FlowModelTest, BadSpecsNameTheirPart) {
  const core::Topology topo = Clos2();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"tor0->agg0", "expected LINK:FRACTION"},
      {"tor0->agg0:x", "FRACTION: 'x' is not a number"},
      {"tor0->agg0:1", "FRACTION must be in [0, 1)"},
      {"tor0->agg0:-0.1", "FRACTION must be in [0, 1)"},
      {"tor0->agg0:0.5@-1", "AFTER_S must be >= 0"},
      {"tor0->agg0:0.5@1+0", "DURATION_S must be > 0"},
      {"tor0->agg0:0.5@1+", "DURATION_S: '' is not a number"},
      {"tor0->tor1:0.5", "two adjacent nodes"},
      {"nope-agg0:0.5", "two adjacent nodes"},
  };
  for (const auto& [spec, want] : cases) {
    auto f = ParseLinkFault(spec, topo);
    ASSERT_FALSE(f.ok()) << spec;
    EXPECT_EQ(f.status().code(), core::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(f.status().message().find("--fault '" + spec + "'"), std::string::npos)
        << f.status().message();
    EXPECT_NE(f.status().message().find(want), std::string::npos) << f.status().message();
  }
}

// --lie: one job reports a fraction of its rate from a time on, whatever its paths cross.
TEST(FlowModelTest, LiesNameAJobAFractionAndATime) {
  auto lie = ParseJobLie("lg-2:0.1@5");
  ASSERT_TRUE(lie.ok()) << lie.status().ToString();
  EXPECT_EQ(lie->job_id, "lg-2");
  EXPECT_DOUBLE_EQ(lie->rate_fraction, 0.1);
  EXPECT_EQ(lie->after, core::Duration::Seconds(5));
  const std::vector<JobLie> lies = {*lie, *ParseJobLie("lg-2:0")};  // From the start, cut.
  EXPECT_DOUBLE_EQ(LieFactor("lg-1", lies, core::Duration::Seconds(9)), 1.0);
  EXPECT_DOUBLE_EQ(LieFactor("lg-2", lies, core::Duration::Seconds(9)), 0.0);
  EXPECT_DOUBLE_EQ(LieFactor("lg-2", {*lie}, core::Duration::Seconds(4)), 1.0);
  EXPECT_DOUBLE_EQ(LieFactor("lg-2", {*lie}, core::Duration::Seconds(5)), 0.1);
  EXPECT_EQ(ParseJobLie("lg-2").status().message(),
            "--lie 'lg-2': expected JOB:FRACTION[@AFTER_S]");
  EXPECT_EQ(ParseJobLie(":0.5").status().message(),
            "--lie ':0.5': expected JOB:FRACTION[@AFTER_S]");
  EXPECT_EQ(ParseJobLie("lg-2:1").status().message(),
            "--lie 'lg-2:1': FRACTION must be in [0, 1) (0 = no progress)");
  EXPECT_EQ(ParseJobLie("lg-2:0.5@-1").status().message(),
            "--lie 'lg-2:0.5@-1': AFTER_S must be >= 0");
}

TEST(FlowModelTest, OnlyFlowsCrossingTheLinkInItsDirectionAreHit) {
  const core::Topology topo = Clos2();
  const LinkFault one_way = *ParseLinkFault("tor0->agg0:0.25@1+2", topo);
  const LinkFault both = *ParseLinkFault("tor0-agg0:0@1", topo);
  const PinnedFlow up = Flow({"host0/nic0", "tor0", "agg0", "tor1", "host4/nic0"});
  const PinnedFlow down = Flow({"host4/nic0", "tor1", "agg0", "tor0", "host0/nic0"});
  const PinnedFlow other = Flow({"host0/nic0", "tor0", "agg1", "tor1", "host4/nic0"});
  EXPECT_TRUE(Crosses(up, one_way));
  EXPECT_FALSE(Crosses(down, one_way));
  EXPECT_TRUE(Crosses(down, both));
  EXPECT_FALSE(Crosses(other, both));

  // In force from `after` for `duration` (none: to the end).
  EXPECT_FALSE(Active(one_way, core::Duration::Millis(999)));
  EXPECT_TRUE(Active(one_way, core::Duration::Seconds(1)));
  EXPECT_TRUE(Active(one_way, core::Duration::Millis(2999)));
  EXPECT_FALSE(Active(one_way, core::Duration::Seconds(3)));
  EXPECT_TRUE(Active(both, core::Duration::Seconds(1000)));

  const std::vector<LinkFault> faults = {one_way, both};
  EXPECT_EQ(FaultFactor(up, faults, core::Duration::Millis(500)), 1.0);
  EXPECT_EQ(FaultFactor(other, faults, core::Duration::Seconds(2)), 1.0);
  // The worst active fault wins: the cut.
  EXPECT_EQ(FaultFactor(up, faults, core::Duration::Seconds(2)), 0.0);
  EXPECT_EQ(FaultFactor(up, {one_way}, core::Duration::Seconds(2)), 0.25);
}

TEST(FlowModelTest, StatsFollowTheFactorAndAreValidOnTheWire) {
  core::Rng rng(3);
  // 100 Gbps = 12.5 GB/s; 1 GB per 100 ms iteration = 10 GB/s demanded: healthy flows deliver it.
  const PinnedFlow f = Flow({"host0/nic0", "tor0", "agg0", "tor1", "host4/nic0"}, 1000000000);
  const core::Duration window = core::Duration::Millis(200);
  const core::Duration period = core::Duration::Millis(100);

  v1::Heartbeat hb;
  hb.set_job_id("lg-0");
  const v1::FlowStats healthy = FlowStatsFor(f, window, period, 100, 1.0, rng, 0);
  EXPECT_EQ(healthy.src_nic(), "host0/nic0");
  EXPECT_EQ(healthy.dst_nic(), "host4/nic0");
  EXPECT_EQ(healthy.udp_sport(), 49152u);
  EXPECT_EQ(healthy.window_ns(), 200000000u);
  EXPECT_EQ(healthy.bytes(), 2000000000u);
  EXPECT_EQ(healthy.errors(), 0u);
  const double healthy_rate = healthy.bytes() / (healthy.transfer_time_ns() / 1e9);
  EXPECT_NEAR(healthy_rate, 12.5e9, 12.5e9 * 1e-6);
  *hb.add_flows() = healthy;

  // At 30 %: 3.75 GB/s, less than demanded: the whole window is spent and the rate shows it.
  const v1::FlowStats slow = FlowStatsFor(f, window, period, 100, 0.3, rng, 0);
  EXPECT_NEAR(static_cast<double>(slow.transfer_time_ns()), 2e8, 2);
  EXPECT_NEAR(slow.bytes() / 0.2, 3.75e9, 3.75e9 * 1e-6);
  *hb.add_flows() = slow;

  // Cut: nothing delivered, one transport error per iteration of the window.
  const v1::FlowStats cut = FlowStatsFor(f, window, period, 100, 0, rng, 0);
  EXPECT_EQ(cut.bytes(), 0u);
  EXPECT_EQ(cut.transfer_time_ns(), 0u);
  EXPECT_EQ(cut.errors(), 2u);
  *hb.add_flows() = cut;

  // Jitter stays within its bound.
  for (int i = 0; i < 100; ++i) {
    const v1::FlowStats j = FlowStatsFor(f, window, period, 100, 1.0, rng, 0.05);
    const double rate = j.bytes() / (j.transfer_time_ns() / 1e9);
    EXPECT_GE(rate, 12.5e9 * 0.95 * (1 - 1e-6));
    EXPECT_LE(rate, 12.5e9 * 1.05 * (1 + 1e-6));
    *hb.add_flows() = j;
  }
  const core::Status valid = protocol::ValidateHeartbeat(hb, "heartbeat");
  EXPECT_TRUE(valid.ok()) << valid.ToString();
}

TEST(FlowModelTest, PinnedFlowsKeepOnlyTheJobsDemandedPeers) {
  SimJob job;
  job.job_id = "lg-0";
  job.peers = {{"host0/nic0", "host4/nic0", 100}, {"host4/nic0", "host0/nic0", 0}};
  v1::Assignment a;
  auto add = [&](const std::string& src, const std::string& dst, uint32_t sport) {
    v1::FlowAssignment* fl = a.add_flows();
    fl->set_src_nic(src);
    fl->set_dst_nic(dst);
    fl->set_udp_sport(sport);
    fl->add_path(src);
    fl->add_path("tor0");
    fl->add_path(dst);
  };
  add("host0/nic0", "host4/nic0", 50000);
  add("host4/nic0", "host0/nic0", 50001);  // No demand.
  add("host1/nic0", "host5/nic0", 50002);  // Not the job's peer.
  const std::vector<PinnedFlow> flows = PinnedFlows(a, job);
  ASSERT_EQ(flows.size(), 1u);
  EXPECT_EQ(flows[0].src, "host0/nic0");
  EXPECT_EQ(flows[0].udp_sport, 50000u);
  EXPECT_EQ(flows[0].bytes_per_iteration, 100u);
  EXPECT_EQ(flows[0].path, (std::vector<std::string>{"host0/nic0", "tor0", "host4/nic0"}));
}

TEST(FlowModelTest, ProbesSendOneMessagePerWindowThroughTheSameFaults) {
  const core::Topology topo = Clos2();
  v1::Assignment a;
  v1::ProbeTarget* p = a.add_probes();
  p->set_src_nic("host0/nic0");
  p->set_dst_nic("host4/nic0");
  p->set_udp_sport(50123);
  for (const char* n : {"host0/nic0", "tor0", "agg1", "tor1", "host4/nic0"}) p->add_path(n);
  const std::vector<PinnedFlow> probes = PinnedProbes(a, 65536);
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_TRUE(probes[0].probe);
  EXPECT_EQ(probes[0].udp_sport, 50123u);
  EXPECT_EQ(probes[0].bytes_per_iteration, 65536u);

  core::Rng rng(1);
  const core::Duration window = core::Duration::Millis(200);
  // The job's period does not matter: one message per window.
  const v1::FlowStats ok =
      FlowStatsFor(probes[0], window, core::Duration::Millis(10), 100, 1.0, rng, 0);
  EXPECT_TRUE(ok.probe());
  EXPECT_EQ(ok.bytes(), 65536u);
  EXPECT_NEAR(ok.bytes() / (ok.transfer_time_ns() / 1e9), 12.5e9, 12.5e9 * 1e-3);

  const LinkFault slow = *ParseLinkFault("tor0->agg1:0.5", topo);
  const double factor = FaultFactor(probes[0], {slow}, core::Duration::Seconds(1));
  EXPECT_EQ(factor, 0.5);
  const v1::FlowStats half =
      FlowStatsFor(probes[0], window, core::Duration::Millis(10), 100, factor, rng, 0);
  EXPECT_EQ(half.bytes(), 65536u);
  EXPECT_NEAR(half.bytes() / (half.transfer_time_ns() / 1e9), 6.25e9, 6.25e9 * 1e-3);
}

}  // namespace
}  // namespace crux::loadgen
