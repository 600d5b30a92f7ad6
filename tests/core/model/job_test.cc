#include "crux/core/model/job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::MakeStar;
using ::crux::core::testing::Must;
using ::crux::core::testing::Star;
using ::testing::HasSubstr;
using ::testing::StartsWith;

JobSpec RingJob(const std::vector<NodeId>& hosts, int gpus, Bytes bytes) {
  JobSpec j;
  j.id = "job";
  j.hosts = hosts;
  j.gpus_per_host = gpus;
  j.compute_time = Duration::Millis(100);
  j.pattern = TrafficPattern::kRingAllReduce;
  j.pattern_bytes = bytes;
  return j;
}

std::vector<FlowDemand> MustExpand(const Topology& t, const JobSpec& j) {
  return Must(ExpandTraffic(t, j), "ExpandTraffic");
}

using Pair = std::pair<NodeId, NodeId>;
std::multiset<Pair> Pairs(const std::vector<FlowDemand>& flows) {
  std::multiset<Pair> out;
  for (const FlowDemand& f : flows) out.insert({f.src, f.dst});
  return out;
}

// ---- TrafficPattern names ----

TEST(TrafficPatternTest, NamesRoundTrip) {
  for (TrafficPattern p : {TrafficPattern::kExplicit, TrafficPattern::kRingAllReduce,
                           TrafficPattern::kAllToAll, TrafficPattern::kPipeline}) {
    const Result<TrafficPattern> parsed = ParseTrafficPattern(TrafficPatternName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(TrafficPatternName(TrafficPattern::kRingAllReduce), "ring_allreduce");
  EXPECT_EQ(TrafficPatternName(TrafficPattern::kAllToAll), "all_to_all");
  EXPECT_EQ(TrafficPatternName(TrafficPattern::kPipeline), "pipeline");
  EXPECT_EQ(TrafficPatternName(TrafficPattern::kExplicit), "explicit");
}

TEST(TrafficPatternTest, UnknownNameIsInvalidAndNamed) {
  const Result<TrafficPattern> r = ParseTrafficPattern("allreduce");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'allreduce'"));
  EXPECT_FALSE(ParseTrafficPattern("").ok());
  EXPECT_FALSE(ParseTrafficPattern("Ring_AllReduce").ok());  // Case-sensitive.
}

// ---- ValidateJob ----

class ValidateJobTest : public ::testing::Test {
 protected:
  ValidateJobTest() : star_(MakeStar({2, 2, 2})) {}

  JobSpec Good() const { return RingJob({star_.hosts[0], star_.hosts[1]}, 8, Bytes::MiB(64)); }
  // Validates and expects an INVALID_ARGUMENT whose message starts with `field`.
  void ExpectInvalid(const JobSpec& j, const std::string& field) const {
    const Status s = ValidateJob(star_.topo, j);
    ASSERT_FALSE(s.ok()) << "expected an error for " << field;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), StartsWith(field + ":")) << s.ToString();
    // ExpandTraffic re-validates.
    const Result<std::vector<FlowDemand>> r = ExpandTraffic(star_.topo, j);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status(), s);
  }

  Star star_;
};

TEST_F(ValidateJobTest, AcceptsAGoodJob) { EXPECT_TRUE(ValidateJob(star_.topo, Good()).ok()); }

TEST_F(ValidateJobTest, RejectsEmptyId) {
  JobSpec j = Good();
  j.id = "";
  ExpectInvalid(j, "id");
}

TEST_F(ValidateJobTest, RejectsNoHosts) {
  JobSpec j = Good();
  j.hosts.clear();
  ExpectInvalid(j, "hosts");
}

TEST_F(ValidateJobTest, RejectsUnknownHostIds) {
  JobSpec j = Good();
  j.hosts.push_back(NodeId(99999));
  ExpectInvalid(j, "hosts[2]");
  j.hosts.back() = NodeId();
  ExpectInvalid(j, "hosts[2]");
}

TEST_F(ValidateJobTest, RejectsNonHostNodes) {
  JobSpec j = Good();
  j.hosts[1] = star_.nics[1][0];
  ExpectInvalid(j, "hosts[1]");
  EXPECT_THAT(ValidateJob(star_.topo, j).message(), HasSubstr("'host1/nic0' is not a host"));
  j.hosts[1] = star_.sw;
  ExpectInvalid(j, "hosts[1]");
}

TEST_F(ValidateJobTest, RejectsDuplicateHosts) {
  JobSpec j = Good();
  j.hosts.push_back(star_.hosts[0]);
  ExpectInvalid(j, "hosts[2]");
  EXPECT_THAT(ValidateJob(star_.topo, j).message(), HasSubstr("listed twice"));
}

TEST_F(ValidateJobTest, RejectsNonPositiveGpusPerHost) {
  JobSpec j = Good();
  j.gpus_per_host = 0;
  ExpectInvalid(j, "gpus_per_host");
  j.gpus_per_host = -3;
  ExpectInvalid(j, "gpus_per_host");
  EXPECT_THAT(ValidateJob(star_.topo, j).message(), HasSubstr("-3"));
}

TEST_F(ValidateJobTest, RejectsBadComputeTime) {
  JobSpec j = Good();
  for (Duration d : {Duration::Zero(), Duration::Millis(-1), Duration::Infinite()}) {
    j.compute_time = d;
    ExpectInvalid(j, "compute_time_s");
  }
  j.compute_time = Duration::Nanos(1);
  EXPECT_TRUE(ValidateJob(star_.topo, j).ok());
}

TEST_F(ValidateJobTest, RejectsBadFlops) {
  JobSpec j = Good();
  for (double w : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    j.flops_per_iteration = Flops::Of(w);
    ExpectInvalid(j, "flops_per_iteration");
  }
  j.flops_per_iteration = Flops::Tera(1);
  EXPECT_TRUE(ValidateJob(star_.topo, j).ok());
}

TEST_F(ValidateJobTest, RejectsOverlapOutsideUnitInterval) {
  JobSpec j = Good();
  for (double o : {-0.01, 1.01, std::nan("")}) {
    j.overlap_start = o;
    ExpectInvalid(j, "overlap_start");
  }
  for (double o : {0.0, 0.5, 1.0}) {
    j.overlap_start = o;
    EXPECT_TRUE(ValidateJob(star_.topo, j).ok()) << o;
  }
}

TEST_F(ValidateJobTest, RejectsCompressionRatioOutsideRange) {
  JobSpec j = Good();
  for (double c : {0.0, -0.5, 1000.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    j.compression_ratio = c;
    ExpectInvalid(j, "compression_ratio");
  }
  for (double c : {1e-6, 1.0, 1000.0}) {
    j.compression_ratio = c;
    EXPECT_TRUE(ValidateJob(star_.topo, j).ok()) << c;
  }
}

TEST_F(ValidateJobTest, RejectsNonPositivePatternBytes) {
  JobSpec j = Good();
  j.pattern_bytes = Bytes::Of(0);
  ExpectInvalid(j, "traffic.bytes");
  j.pattern = TrafficPattern::kAllToAll;
  j.pattern_bytes = Bytes::Of(-5);
  ExpectInvalid(j, "traffic.bytes");
  j.pattern = TrafficPattern::kPipeline;
  ExpectInvalid(j, "traffic.bytes");
}

TEST_F(ValidateJobTest, ExplicitJobsIgnorePatternBytes) {
  JobSpec j = Good();
  j.pattern = TrafficPattern::kExplicit;
  j.pattern_bytes = Bytes::Of(0);
  j.flows = {FlowDemand{star_.nics[0][0], star_.nics[1][0], Bytes::Of(10)}};
  EXPECT_TRUE(ValidateJob(star_.topo, j).ok());
  j.flows.clear();  // A compute-only job.
  EXPECT_TRUE(ValidateJob(star_.topo, j).ok());
}

TEST_F(ValidateJobTest, RejectsBadExplicitFlows) {
  JobSpec j = Good();
  j.pattern = TrafficPattern::kExplicit;
  const FlowDemand good{star_.nics[0][0], star_.nics[1][0], Bytes::Of(10)};
  j.flows = {good, good};

  j.flows[1].dst = NodeId(12345);
  ExpectInvalid(j, "flows[1]");
  j.flows[1] = good;
  j.flows[1].src = NodeId();
  ExpectInvalid(j, "flows[1]");

  j.flows[1] = good;
  j.flows[1].dst = star_.sw;
  ExpectInvalid(j, "flows[1]");
  EXPECT_THAT(ValidateJob(star_.topo, j).message(), HasSubstr("switch"));

  j.flows[1] = good;
  j.flows[1].dst = good.src;
  ExpectInvalid(j, "flows[1]");

  j.flows[1] = good;
  j.flows[1].bytes = Bytes::Of(0);
  ExpectInvalid(j, "flows[1].bytes");

  // Hosts are valid explicit endpoints.
  j.flows[1] = FlowDemand{star_.hosts[0], star_.hosts[2], Bytes::Of(1)};
  EXPECT_TRUE(ValidateJob(star_.topo, j).ok());
}

// ---- ExpandTraffic: ring all-reduce ----

TEST(ExpandTrafficTest, RingAllReduceRailAlignedBytes) {
  // H = 4 hosts, G = 8 GPUs, R = min(8, 2 NICs) = 2; p = 32.
  const Star s = MakeStar({2, 2, 2, 2});
  const JobSpec j = RingJob(s.hosts, 8, Bytes::GiB(1));
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 8u);  // H * R.
  // 2 (p - 1) / p * S / R = 2 * 31 / 32 * 2^30 / 2 = 31 * 2^25.
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(int64_t{31} << 25));
  std::multiset<Pair> expected;
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 4; ++i) expected.insert({s.nics[i][r], s.nics[(i + 1) % 4][r]});
  }
  EXPECT_EQ(Pairs(flows), expected);
}

TEST(ExpandTrafficTest, RingAllReduceFollowsHostListOrder) {
  const Star s = MakeStar({1, 1, 1});
  const JobSpec j = RingJob({s.hosts[2], s.hosts[0], s.hosts[1]}, 1, Bytes::Of(3000));
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  // p = 3: 2 * 2 / 3 * 3000 = 4000 bytes per flow; ring 2 -> 0 -> 1 -> 2.
  EXPECT_EQ(Pairs(flows), (std::multiset<Pair>{{s.nics[2][0], s.nics[0][0]},
                                               {s.nics[0][0], s.nics[1][0]},
                                               {s.nics[1][0], s.nics[2][0]}}));
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(4000));
}

TEST(ExpandTrafficTest, RingAllReduceRailsLimitedByGpus) {
  // One GPU per host: a single rail even though hosts have 2 NICs.
  const Star s = MakeStar({2, 2});
  const std::vector<FlowDemand> flows = MustExpand(s.topo, RingJob(s.hosts, 1, Bytes::Of(1000)));
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(Pairs(flows),
            (std::multiset<Pair>{{s.nics[0][0], s.nics[1][0]}, {s.nics[1][0], s.nics[0][0]}}));
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(1000));  // 2 * 1/2 * S.
}

TEST(ExpandTrafficTest, RingAllReduceRailsLimitedByTheSmallestHost) {
  // Host 1 has a single NIC, so the job uses one rail everywhere.
  const Star s = MakeStar({2, 1, 2});
  const std::vector<FlowDemand> flows = MustExpand(s.topo, RingJob(s.hosts, 4, Bytes::Of(1200)));
  ASSERT_EQ(flows.size(), 3u);
  for (const FlowDemand& f : flows) {
    EXPECT_EQ(s.topo.node(f.src).name.substr(s.topo.node(f.src).name.size() - 4), "nic0");
    // p = 12: 2 * 11 / 12 * 1200 / 1 = 2200.
    EXPECT_EQ(f.bytes, Bytes::Of(2200));
  }
}

TEST(ExpandTrafficTest, RingAllReduceAppliesCompression) {
  const Star s = MakeStar({1, 1});
  JobSpec j = RingJob(s.hosts, 2, Bytes::Of(4000));
  j.compression_ratio = 0.25;
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 2u);
  // 2 * 3 / 4 * 4000 * 0.25 = 1500.
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(1500));
}

TEST(ExpandTrafficTest, SingleHostRingHasNoNetworkFlows) {
  const Star s = MakeStar({2});
  const Result<std::vector<FlowDemand>> r =
      ExpandTraffic(s.topo, RingJob(s.hosts, 8, Bytes::GiB(1)));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST(ExpandTrafficTest, HostsWithoutNicsUseTheHostAsEndpoint) {
  const testing::ExplicitStar e = testing::MakeExplicitStar();
  const std::vector<FlowDemand> flows =
      MustExpand(e.topo, RingJob({e.h1, e.h2, e.h3}, 8, Bytes::Of(2400)));
  ASSERT_EQ(flows.size(), 3u);  // One rail.
  EXPECT_EQ(Pairs(flows), (std::multiset<Pair>{{e.h1, e.h2}, {e.h2, e.h3}, {e.h3, e.h1}}));
  // p = 24: 2 * 23 / 24 * 2400 = 4600.
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(4600));
}

// ---- all-to-all ----

TEST(ExpandTrafficTest, AllToAllBytesPerRailFlow) {
  // H = 3, G = 4, R = 2, p = 12: G * G * S / p / R = 16 * 3e6 / 12 / 2 = 2e6.
  const Star s = MakeStar({2, 2, 2});
  JobSpec j = RingJob(s.hosts, 4, Bytes::Of(3000000));
  j.pattern = TrafficPattern::kAllToAll;
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 12u);  // H (H - 1) R.
  std::multiset<Pair> expected;
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      if (a == b) continue;
      for (int r = 0; r < 2; ++r) expected.insert({s.nics[a][r], s.nics[b][r]});
    }
  }
  EXPECT_EQ(Pairs(flows), expected);
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(2000000));
}

TEST(ExpandTrafficTest, AllToAllAppliesCompression) {
  const Star s = MakeStar({1, 1});
  JobSpec j = RingJob(s.hosts, 2, Bytes::Of(1000));
  j.pattern = TrafficPattern::kAllToAll;
  j.compression_ratio = 2.0;  // Expansion is allowed (ratio up to 1000).
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 2u);
  // G * G * S / p / R * c = 4 * 1000 / 4 / 1 * 2 = 2000.
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(2000));
}

TEST(ExpandTrafficTest, SingleHostAllToAllHasNoNetworkFlows) {
  const Star s = MakeStar({2});
  JobSpec j = RingJob(s.hosts, 8, Bytes::Of(1000));
  j.pattern = TrafficPattern::kAllToAll;
  EXPECT_TRUE(MustExpand(s.topo, j).empty());
}

// ---- pipeline ----

TEST(ExpandTrafficTest, PipelineSendsActivationsForwardAndGradientsBack) {
  // H = 3 stages, R = 2: 2 (H - 1) host pairs x R flows of S / R.
  const Star s = MakeStar({2, 2, 2});
  JobSpec j = RingJob({s.hosts[1], s.hosts[0], s.hosts[2]}, 8, Bytes::Of(4000000));
  j.pattern = TrafficPattern::kPipeline;
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 8u);
  std::multiset<Pair> expected;
  const int order[3] = {1, 0, 2};
  for (int i = 0; i < 2; ++i) {
    for (int r = 0; r < 2; ++r) {
      expected.insert({s.nics[order[i]][r], s.nics[order[i + 1]][r]});
      expected.insert({s.nics[order[i + 1]][r], s.nics[order[i]][r]});
    }
  }
  EXPECT_EQ(Pairs(flows), expected);
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(2000000));
}

TEST(ExpandTrafficTest, PipelineAppliesCompression) {
  const Star s = MakeStar({1, 1});
  JobSpec j = RingJob(s.hosts, 8, Bytes::Of(1000));
  j.pattern = TrafficPattern::kPipeline;
  j.compression_ratio = 0.5;
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 2u);
  for (const FlowDemand& f : flows) EXPECT_EQ(f.bytes, Bytes::Of(500));
}

// ---- explicit ----

TEST(ExpandTrafficTest, ExplicitFlowsScaleByCompressionRatio) {
  const Star s = MakeStar({2, 1});
  JobSpec j = RingJob(s.hosts, 8, Bytes::Of(0));
  j.pattern = TrafficPattern::kExplicit;
  j.compression_ratio = 0.25;
  j.flows = {FlowDemand{s.nics[0][1], s.nics[1][0], Bytes::Of(1000)},
             FlowDemand{s.hosts[1], s.hosts[0], Bytes::Of(4000)},
             FlowDemand{s.nics[0][0], s.nics[0][1], Bytes::Of(8)}};
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 3u);  // In input order.
  EXPECT_EQ(flows[0].src, s.nics[0][1]);
  EXPECT_EQ(flows[0].dst, s.nics[1][0]);
  EXPECT_EQ(flows[0].bytes, Bytes::Of(250));
  EXPECT_EQ(flows[1].src, s.hosts[1]);
  EXPECT_EQ(flows[1].bytes, Bytes::Of(1000));
  EXPECT_EQ(flows[2].bytes, Bytes::Of(2));
}

TEST(ExpandTrafficTest, ExplicitBytesRoundToNearestAndZeroFlowsAreDropped) {
  const Star s = MakeStar({1, 1});
  JobSpec j = RingJob(s.hosts, 8, Bytes::Of(0));
  j.pattern = TrafficPattern::kExplicit;
  j.compression_ratio = 0.1;
  j.flows = {FlowDemand{s.nics[0][0], s.nics[1][0], Bytes::Of(4)},    // 0.4 -> 0: dropped.
             FlowDemand{s.nics[1][0], s.nics[0][0], Bytes::Of(15)},   // 1.5 -> 2.
             FlowDemand{s.nics[0][0], s.nics[1][0], Bytes::Of(14)}};  // 1.4 -> 1.
  const std::vector<FlowDemand> flows = MustExpand(s.topo, j);
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[0].src, s.nics[1][0]);
  EXPECT_EQ(flows[0].bytes, Bytes::Of(2));
  EXPECT_EQ(flows[1].bytes, Bytes::Of(1));
}

TEST(ExpandTrafficTest, ExplicitWithoutFlowsIsEmpty) {
  const Star s = MakeStar({1, 1});
  JobSpec j = RingJob(s.hosts, 8, Bytes::Of(0));
  j.pattern = TrafficPattern::kExplicit;
  EXPECT_TRUE(MustExpand(s.topo, j).empty());
}

// ---- WorkPerIteration ----

TEST(WorkPerIterationTest, DefaultsToGpusTimesComputeTimesPeak) {
  const Star s = MakeStar({1, 1});
  JobSpec j = RingJob(s.hosts, 8, Bytes::Of(1));
  j.compute_time = Duration::Millis(500);
  EXPECT_EQ(j.gpus(), 16);
  // 16 GPUs * 0.5 s * 1e12 FLOP/s.
  EXPECT_DOUBLE_EQ(WorkPerIteration(j, 1e12).value(), 8e12);
  EXPECT_DOUBLE_EQ(WorkPerIteration(j, 2e12).value(), 16e12);
}

TEST(WorkPerIterationTest, ExplicitValueWins) {
  JobSpec j;
  j.gpus_per_host = 8;
  j.compute_time = Duration::Seconds(3);
  j.flops_per_iteration = Flops::Giga(5);
  EXPECT_DOUBLE_EQ(WorkPerIteration(j, 1e15).value(), 5e9);
}

}  // namespace
}  // namespace crux::core
