// MergeHostParts: a multi-host job's profile from its host parts, checked against bytes worked
// out by hand (core/host_parts.h has the rules).
#include "crux/core/model/host_parts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using testing::Clos2Small;
using testing::MakeClos2Small;

constexpr uint64_t kComm = 0xA11;

// One communicator's traffic as a part reports it.
CommTraffic Comm(uint64_t hash, uint32_t nranks, std::vector<uint32_t> local,
                 std::vector<RankPeerBytes> bytes) {
  CommTraffic c;
  c.comm_hash = hash;
  c.nranks = nranks;
  c.nnodes = 2;
  c.local_ranks = std::move(local);
  c.bytes = std::move(bytes);
  return c;
}

RankPeerBytes B(uint32_t rank, int32_t peer, int64_t bytes) {
  return {rank, peer, Bytes::Of(bytes)};
}

HostPartReport Report(int64_t compute_ms, int64_t period_ms, uint32_t samples,
                      std::vector<CommTraffic> comms, bool converged = true) {
  HostPartReport r;
  r.profile.compute_time = Duration::Millis(compute_ms);
  r.profile.iteration_period = Duration::Millis(period_ms);
  r.profile.samples = samples;
  r.profile.converged = converged;
  r.comms = std::move(comms);
  return r;
}

class HostPartsTest : public ::testing::Test {
 protected:
  // host0 (nic0, nic1) runs ranks 0, 1; host2 (nic0, nic1) runs ranks 2, 3 of a 4-rank ring.
  // Per iteration: 0 -> 1 and 2 -> 3 stay on their host (100 each); 1 -> 2 and 3 -> 0 cross
  // (150 each); rank 0 also reports 7 bytes not split over peers yet.
  void SetUp() override {
    host0_ =
        Report(40, 100, 5, {Comm(kComm, 4, {0, 1}, {B(0, 1, 100), B(1, 2, 150), B(0, -1, 7)})});
    host2_ = Report(60, 102, 4, {Comm(kComm, 4, {3, 2}, {B(2, 3, 100), B(3, 0, 150)})});
  }
  HostPartInput Part(int h, const HostPartReport* report, uint32_t expected = 2) {
    HostPartInput in;
    in.host = c_.host[h];
    in.nics = c_.nic[h];
    in.hosts_expected = expected;
    in.report = report;
    return in;
  }

  Clos2Small c_ = MakeClos2Small();
  HostPartReport host0_;
  HostPartReport host2_;
};

TEST_F(HostPartsTest, TwoHostRingGivesTheCrossHostNicPairs) {
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  ASSERT_TRUE(m.profile.has_value());
  const JobProfile& p = *m.profile;
  // Rank 1 is host0's second of two local ranks: NIC 1 * 2 / 2 = nic1; rank 2 is host2's first
  // (ranks sorted): nic0. Rank 3 -> host2/nic1, rank 0 -> host0/nic0. Sorted by (local, remote).
  ASSERT_EQ(p.peers.size(), 2u);
  EXPECT_EQ(p.peers[0], (PeerTraffic{c_.nic[0][1], c_.nic[2][0], Bytes::Of(150)}));
  EXPECT_EQ(p.peers[1], (PeerTraffic{c_.nic[2][1], c_.nic[0][0], Bytes::Of(150)}));
  EXPECT_EQ(p.bytes_per_iteration, Bytes::Of(300));
  // Upper median of two: the larger; samples: the smaller; both converged and complete.
  EXPECT_EQ(p.compute_time, Duration::Millis(60));
  EXPECT_EQ(p.iteration_period, Duration::Millis(102));
  EXPECT_EQ(p.samples, 4u);
  EXPECT_TRUE(p.converged);
  EXPECT_EQ(p.compression_ratio, 1.0);
  EXPECT_FALSE(p.flops_per_iteration.has_value());
  const HostPartMergeStats& st = m.stats;
  EXPECT_EQ(st.parts, 2u);
  EXPECT_EQ(st.parts_reporting, 2u);
  EXPECT_EQ(st.hosts_expected, 2u);
  EXPECT_TRUE(st.complete);
  EXPECT_EQ(st.cross_host, Bytes::Of(300));
  EXPECT_EQ(st.same_host, Bytes::Of(200));
  EXPECT_EQ(st.unsplit, Bytes::Of(7));
  EXPECT_EQ(st.unattributed, Bytes::Of(0));
  EXPECT_EQ(st.conflicting_ranks, 0u);
}

TEST_F(HostPartsTest, ResultDoesNotDependOnPartOrder) {
  EXPECT_EQ(MergeHostParts({Part(0, &host0_), Part(2, &host2_)}),
            MergeHostParts({Part(2, &host2_), Part(0, &host0_)}));
}

TEST_F(HostPartsTest, MissingPartKeepsTheJobProfilingAndItsPeersUnattributed) {
  // host2 registered but has not reported: rank 1's 150 bytes to rank 2 have no host yet.
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, nullptr)});
  ASSERT_TRUE(m.profile.has_value());
  EXPECT_TRUE(m.profile->peers.empty());
  EXPECT_EQ(m.profile->bytes_per_iteration, Bytes::Of(0));
  EXPECT_EQ(m.profile->samples, 0u);
  EXPECT_FALSE(m.profile->converged);
  EXPECT_EQ(m.profile->compute_time, Duration::Millis(40));
  EXPECT_FALSE(m.stats.complete);
  EXPECT_EQ(m.stats.parts_reporting, 1u);
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(150));
  EXPECT_EQ(m.stats.same_host, Bytes::Of(100));

  // No report at all: no profile.
  EXPECT_FALSE(MergeHostParts({Part(0, nullptr), Part(2, nullptr)}).profile.has_value());
  // Every part reported, but a third host is expected.
  const HostPartMerge three = MergeHostParts({Part(0, &host0_, 3), Part(2, &host2_, 2)});
  EXPECT_FALSE(three.stats.complete);
  EXPECT_EQ(three.stats.hosts_expected, 3u);
  EXPECT_EQ(three.profile->samples, 0u);
  EXPECT_FALSE(three.profile->converged);
  EXPECT_EQ(three.profile->peers.size(), 2u);  // What is known is attributed.
}

TEST_F(HostPartsTest, UnconvergedPartMakesTheMergeUnconverged) {
  host2_.profile.converged = false;
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  EXPECT_TRUE(m.stats.complete);
  EXPECT_FALSE(m.profile->converged);
  EXPECT_EQ(m.profile->samples, 4u);
}

TEST_F(HostPartsTest, RankClaimedByTwoPartsBelongsToNeither) {
  // host2 wrongly lists rank 1 too (and reports bytes for it): rank 1 is nobody's, so host0's
  // 1 -> 2 and host2's 1 -> 3 bytes are unattributed; 0 -> 1 has no destination host either.
  host2_.comms[0].local_ranks.push_back(1);
  host2_.comms[0].bytes.push_back(B(1, 3, 40));
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  EXPECT_EQ(m.stats.conflicting_ranks, 1u);
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(150 + 40 + 100));
  // 3 -> 0 still crosses. host2 now has three local ranks {1, 2, 3}: rank 3 is the third of
  // three on two NICs: 2 * 2 / 3 = nic1.
  ASSERT_EQ(m.profile->peers.size(), 1u);
  EXPECT_EQ(m.profile->peers[0], (PeerTraffic{c_.nic[2][1], c_.nic[0][0], Bytes::Of(150)}));
  EXPECT_EQ(m.stats.same_host, Bytes::Of(100));  // 2 -> 3.
}

TEST_F(HostPartsTest, RanksSpreadOverNicsInOrder) {
  // Four ranks on host0's two NICs: ranks 4, 5 -> nic0 and 6, 7 -> nic1 (k * 2 / 4); each sends
  // to host1 (one NIC) rank 8 + k.
  HostPartReport a =
      Report(10, 20, 3,
             {Comm(kComm, 12, {7, 5, 4, 6}, {B(4, 8, 1), B(5, 9, 2), B(6, 10, 4), B(7, 11, 8)})});
  HostPartReport b = Report(10, 20, 3, {Comm(kComm, 12, {8, 9, 10, 11}, {})});
  const HostPartMerge m = MergeHostParts({Part(0, &a), Part(1, &b)});
  ASSERT_EQ(m.profile->peers.size(), 2u);
  EXPECT_EQ(m.profile->peers[0], (PeerTraffic{c_.nic[0][0], c_.nic[1][0], Bytes::Of(1 + 2)}));
  EXPECT_EQ(m.profile->peers[1], (PeerTraffic{c_.nic[0][1], c_.nic[1][0], Bytes::Of(4 + 8)}));
}

TEST_F(HostPartsTest, CommunicatorsAreKeptApart) {
  // The same rank numbers in another communicator run elsewhere: comm B's rank 2 is on host0.
  host0_.comms.push_back(Comm(0xB, 2, {1}, {B(1, 0, 33)}));
  host2_.comms.push_back(Comm(0xB, 2, {0}, {}));
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  // Comm B rank 1 (host0, only local rank: nic0) -> rank 0 (host2, nic0).
  ASSERT_EQ(m.profile->peers.size(), 3u);
  EXPECT_EQ(m.profile->peers[0], (PeerTraffic{c_.nic[0][0], c_.nic[2][0], Bytes::Of(33)}));
  EXPECT_EQ(m.stats.cross_host, Bytes::Of(333));
}

TEST_F(HostPartsTest, FiguresAreMediansAndFlopsSum) {
  HostPartReport a = Report(10, 100, 9, {});
  HostPartReport b = Report(30, 300, 7, {});
  HostPartReport c = Report(20, 200, 8, {});
  a.profile.overlap_start = 0.2;
  b.profile.overlap_start = 0.6;
  c.profile.overlap_start = 0.4;
  for (HostPartReport* r : {&a, &b, &c}) r->profile.flops_per_iteration = Flops::Of(1e12);
  std::vector<HostPartInput> parts = {Part(0, &a, 3), Part(1, &b, 3), Part(2, &c, 3)};
  HostPartMerge m = MergeHostParts(parts);
  EXPECT_EQ(m.profile->compute_time, Duration::Millis(20));
  EXPECT_EQ(m.profile->iteration_period, Duration::Millis(200));
  EXPECT_DOUBLE_EQ(m.profile->overlap_start, 0.4);
  EXPECT_EQ(m.profile->samples, 7u);
  ASSERT_TRUE(m.profile->flops_per_iteration.has_value());
  EXPECT_DOUBLE_EQ(m.profile->flops_per_iteration->value(), 3e12);
  b.profile.flops_per_iteration.reset();  // One part without W_j: no job W_j.
  m = MergeHostParts(parts);
  EXPECT_FALSE(m.profile->flops_per_iteration.has_value());
}

TEST_F(HostPartsTest, ExplicitPeersOfAPartAreAdded) {
  host0_.profile.peers.push_back({c_.nic[0][0], c_.nic[2][1], Bytes::Of(5)});
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  ASSERT_EQ(m.profile->peers.size(), 3u);
  EXPECT_EQ(m.profile->peers[0], (PeerTraffic{c_.nic[0][0], c_.nic[2][1], Bytes::Of(5)}));
  EXPECT_EQ(m.profile->bytes_per_iteration, Bytes::Of(305));
}

TEST_F(HostPartsTest, ThreeHostRingWithSkipsGivesNineNicPairs) {
  // Ranks 2h, 2h + 1 on host h (h = 0, 1, 2; host1 has one NIC); every rank r sends 100 bytes
  // to r + 1 and 10 to r + 3 (mod 6). Worked out per rank (k-th local rank -> NIC k * nics / 2):
  //   0 (h0/nic0): -> 1 same host;            -> 3 (h1/nic0): 10
  //   1 (h0/nic1): -> 2 (h1/nic0): 100;       -> 4 (h2/nic0): 10
  //   2 (h1/nic0): -> 3 same host;            -> 5 (h2/nic1): 10
  //   3 (h1/nic0): -> 4 (h2/nic0): 100;       -> 0 (h0/nic0): 10
  //   4 (h2/nic0): -> 5 same host;            -> 1 (h0/nic1): 10
  //   5 (h2/nic1): -> 0 (h0/nic0): 100;       -> 2 (h1/nic0): 10
  std::vector<HostPartReport> r;
  for (uint32_t h = 0; h < 3; ++h) {
    std::vector<RankPeerBytes> bytes;
    for (uint32_t rank = 2 * h; rank < 2 * h + 2; ++rank) {
      bytes.push_back(B(rank, static_cast<int32_t>((rank + 1) % 6), 100));
      bytes.push_back(B(rank, static_cast<int32_t>((rank + 3) % 6), 10));
    }
    r.push_back(Report(10 + h, 100, 5, {Comm(kComm, 6, {2 * h + 1, 2 * h}, bytes)}));
  }
  const HostPartMerge m = MergeHostParts({Part(2, &r[2], 3), Part(0, &r[0], 3), Part(1, &r[1], 3)});
  const NodeId h0n0 = c_.nic[0][0], h0n1 = c_.nic[0][1], h1 = c_.nic[1][0];
  const NodeId h2n0 = c_.nic[2][0], h2n1 = c_.nic[2][1];
  const std::vector<PeerTraffic> expected = {
      {h0n0, h1, Bytes::Of(10)},   {h0n1, h1, Bytes::Of(100)},   {h0n1, h2n0, Bytes::Of(10)},
      {h1, h0n0, Bytes::Of(10)},   {h1, h2n0, Bytes::Of(100)},   {h1, h2n1, Bytes::Of(10)},
      {h2n0, h0n1, Bytes::Of(10)}, {h2n1, h0n0, Bytes::Of(100)}, {h2n1, h1, Bytes::Of(10)}};
  EXPECT_EQ(m.profile->peers, expected);
  EXPECT_EQ(m.profile->bytes_per_iteration, Bytes::Of(3 * 100 + 6 * 10));
  EXPECT_EQ(m.stats.same_host, Bytes::Of(300));
  EXPECT_EQ(m.stats.cross_host, Bytes::Of(360));
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(0));
  EXPECT_TRUE(m.stats.complete);
  EXPECT_EQ(m.profile->compute_time, Duration::Millis(11));  // Median of 10, 11, 12.
  EXPECT_EQ(m.stats.entries, 3u * (2 + 4));                  // Local ranks + byte entries.
}

TEST_F(HostPartsTest, TwoPartsOfOneHostClaimTheSameRanksAndGetNone) {
  // cruxd keys parts by host, so this only comes from a caller's bug: host0 twice. Its ranks 0
  // and 1 are claimed twice and belong to neither copy; host2's 3 -> 0 has no destination.
  const HostPartReport copy = host0_;
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_), Part(0, &copy)});
  EXPECT_EQ(m.stats.parts, 3u);
  EXPECT_EQ(m.stats.conflicting_ranks, 2u);
  EXPECT_TRUE(m.profile->peers.empty());
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(2 * (100 + 150 + 7) + 150));
  EXPECT_EQ(m.stats.same_host, Bytes::Of(100));  // 2 -> 3 on host2 is still host2's.
  EXPECT_EQ(m, MergeHostParts({Part(0, &copy), Part(0, &host0_), Part(2, &host2_)}));
}

TEST_F(HostPartsTest, RepeatedEntriesOfOnePartAreOneRankAndSummedBytes) {
  // A rank listed twice is still the part's (no conflict with itself); a communicator listed
  // twice adds its bytes; so does a repeated (rank, peer) entry.
  host0_.comms[0].local_ranks.push_back(1);
  host0_.comms[0].bytes.push_back(B(1, 2, 20));
  host0_.comms.push_back(Comm(kComm, 4, {0, 1}, {B(1, 2, 30)}));
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  EXPECT_EQ(m.stats.conflicting_ranks, 0u);
  ASSERT_EQ(m.profile->peers.size(), 2u);
  EXPECT_EQ(m.profile->peers[0], (PeerTraffic{c_.nic[0][1], c_.nic[2][0], Bytes::Of(200)}));
}

TEST_F(HostPartsTest, AVanishedHostTakesItsRanksAndTheJobBackToProfiling) {
  // Both hosts in: complete. host2's part expires (cruxd drops it from the job): host0's bytes to
  // ranks 2, 3 have no host any more, nothing crosses, and with 1 of 2 expected hosts the merge
  // is incomplete (samples 0: the job profiles again until a host2 part is back).
  ASSERT_TRUE(MergeHostParts({Part(0, &host0_), Part(2, &host2_)}).stats.complete);
  const HostPartMerge m = MergeHostParts({Part(0, &host0_)});
  EXPECT_FALSE(m.stats.complete);
  EXPECT_EQ(m.stats.parts, 1u);
  EXPECT_TRUE(m.profile->peers.empty());
  EXPECT_EQ(m.profile->samples, 0u);
  EXPECT_FALSE(m.profile->converged);
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(150));
  // A registered part whose NICs are unknown (no placement NICs, no topology NICs) owns no rank.
  HostPartInput bare = Part(2, &host2_);
  bare.nics.clear();
  const HostPartMerge no_nics = MergeHostParts({Part(0, &host0_), bare});
  EXPECT_TRUE(no_nics.profile->peers.empty());
  EXPECT_EQ(no_nics.stats.unattributed, Bytes::Of(150 + 100 + 150));
}

TEST_F(HostPartsTest, NonFiniteFiguresAreLeftOutAndHugeBytesSaturate) {
  host0_.profile.overlap_start = std::nan("");
  host2_.profile.overlap_start = 0.25;
  host0_.profile.flops_per_iteration = Flops::Of(1e12);
  host2_.profile.flops_per_iteration = Flops::Of(std::numeric_limits<double>::infinity());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  host0_.comms[0].bytes = {B(1, 2, kMax - 1), B(1, 3, kMax - 1), B(0, 99, 5), B(0, 2, -4)};
  const HostPartMerge m = MergeHostParts({Part(0, &host0_), Part(2, &host2_)});
  EXPECT_DOUBLE_EQ(m.profile->overlap_start, 0.25) << "NaN has no place in a median";
  EXPECT_FALSE(m.profile->flops_per_iteration.has_value()) << "an infinite W_j is no W_j";
  // 1 -> 2 and 1 -> 3 both go host0/nic1 -> host2 (nic0, nic1), then 3 -> 0 adds 150: sums
  // saturate instead of wrapping.
  ASSERT_EQ(m.profile->peers.size(), 3u);
  EXPECT_EQ(m.profile->peers[0].bytes, Bytes::Of(kMax - 1));
  EXPECT_EQ(m.profile->bytes_per_iteration, Bytes::Of(kMax));
  EXPECT_EQ(m.stats.cross_host, Bytes::Of(kMax));
  // Rank 99 is no rank of any part; negative bytes are ignored.
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(5));
  // Two finite W_j whose sum is not finite: none.
  host0_.profile.flops_per_iteration = Flops::Of(1e308);
  host2_.profile.flops_per_iteration = Flops::Of(1e308);
  EXPECT_FALSE(MergeHostParts({Part(0, &host0_), Part(2, &host2_)})
                   .profile->flops_per_iteration.has_value());
  // Only NaN overlaps: 0.
  host2_.profile.overlap_start = std::nan("");
  EXPECT_EQ(MergeHostParts({Part(0, &host0_), Part(2, &host2_)}).profile->overlap_start, 0.0);
}

TEST_F(HostPartsTest, EachHostGetsTheHeaderAndTheFlowsAndProbesLeavingItsNics) {
  Assignment a;
  a.job_id = "ring";
  a.phase = JobPhase::kScheduled;
  a.level = 2;
  a.dscp = 26;
  a.traffic_class = 104;
  a.nccl_env = {{"NCCL_IB_TC", "104"}};
  a.flows = {{c_.nic[0][0], c_.nic[2][0], 49153, {}},
             {c_.nic[2][1], c_.nic[0][0], 49154, {}},
             {c_.nic[0][1], c_.nic[1][0], 0, {}},
             {c_.nic[1][0], c_.nic[0][0], 49155, {}},
             {NodeId(), c_.nic[0][0], 1, {}}};  // No source: nobody's.
  a.probes = {{c_.nic[2][0], c_.nic[0][1], 50000, {}}, {c_.nic[1][0], c_.nic[2][0], 50001, {}}};
  const std::map<NodeId, Assignment> cut =
      SplitAssignmentByHost(a, c_.topo, {c_.host[2], c_.host[0], c_.host[3], c_.host[0]});
  ASSERT_EQ(cut.size(), 3u);  // host1 was not asked for.
  const AssignmentHeader& header = a;
  for (const auto& [host, part] : cut) {
    EXPECT_EQ(static_cast<const AssignmentHeader&>(part), header);
  }
  EXPECT_EQ(cut.at(c_.host[0]).flows, (std::vector<FlowPin>{a.flows[0], a.flows[2]}));
  EXPECT_EQ(cut.at(c_.host[2]).flows, std::vector<FlowPin>{a.flows[1]});
  EXPECT_TRUE(cut.at(c_.host[3]).flows.empty()) << "a host without flows gets the header";
  // Probes go to the host that sends them (host1 was not asked for).
  EXPECT_EQ(cut.at(c_.host[2]).probes, std::vector<FlowPin>{a.probes[0]});
  EXPECT_TRUE(cut.at(c_.host[0]).probes.empty());
  EXPECT_TRUE(SplitAssignmentByHost(a, c_.topo, {}).empty());
}

// Hosts of 8 GPUs with `nics` NICs each, for the rail cases: the merge needs only the host and
// its NICs in order, the GPU count comes from the topology (host_gpus).
struct RailHosts {
  Topology topo;
  std::vector<NodeId> host;
  std::vector<std::vector<NodeId>> nic;
};
RailHosts MakeRailHosts(const std::vector<int>& nics) {
  RailHosts r;
  for (size_t h = 0; h < nics.size(); ++h) {
    r.host.push_back(testing::AddHost(r.topo, "h" + std::to_string(h)));
    r.topo.SetHostGpus(r.host.back(), 8);
    r.nic.emplace_back();
    for (int k = 0; k < nics[h]; ++k) r.nic.back().push_back(testing::AddNic(r.topo, r.host[h], k));
  }
  return r;
}
HostPartInput RailPart(const RailHosts& r, size_t h, const HostPartReport* report) {
  HostPartInput in;
  in.host = r.host[h];
  in.nics = r.nic[h];
  in.gpus = static_cast<uint32_t>(r.topo.host_gpus(r.host[h]));
  in.hosts_expected = static_cast<uint32_t>(r.host.size());
  in.report = report;
  return in;
}
// Communicator `hash` with one local rank in local slot `slot` (-1: not reported).
CommTraffic OneRank(uint64_t hash, uint32_t nranks, uint32_t rank, int slot,
                    std::vector<RankPeerBytes> bytes) {
  CommTraffic c = Comm(hash, nranks, {rank}, std::move(bytes));
  if (slot >= 0) c.local_slots = {static_cast<uint32_t>(slot)};
  return c;
}
using NicPairs = std::map<std::pair<NodeId, NodeId>, int64_t>;
NicPairs PairsOf(const JobProfile& p) {
  NicPairs out;
  for (const PeerTraffic& t : p.peers) out[{t.local_nic, t.remote_nic}] += t.bytes.count();
  return out;
}

TEST(HostPartsRailTest, EightRailRingsOfOneRankPerHostLandOnEightNics) {
  // Two hosts of 8 GPUs and 8 NICs; 8 rail rings (tensor parallelism 8, data parallelism over
  // the hosts): ring g has rank 0 on GPU g of h0 and rank 1 on GPU g of h1. Rank 0 sends 100 + g,
  // rank 1 sends 200 + g. GPU g uses NIC g * 8 / 8 = g on both hosts.
  const RailHosts r = MakeRailHosts({8, 8});
  std::vector<CommTraffic> a, b;
  for (int g = 0; g < 8; ++g) {
    a.push_back(OneRank(0x100 + g, 2, 0, g, {B(0, 1, 100 + g)}));
    b.push_back(OneRank(0x100 + g, 2, 1, g, {B(1, 0, 200 + g)}));
  }
  const HostPartReport ra = Report(10, 20, 3, a), rb = Report(10, 20, 3, b);
  const HostPartMerge m = MergeHostParts({RailPart(r, 0, &ra), RailPart(r, 1, &rb)});
  ASSERT_TRUE(m.profile.has_value());
  NicPairs want;
  for (int g = 0; g < 8; ++g) {
    want[{r.nic[0][g], r.nic[1][g]}] = 100 + g;
    want[{r.nic[1][g], r.nic[0][g]}] = 200 + g;
  }
  EXPECT_EQ(PairsOf(*m.profile), want);
  EXPECT_EQ(m.profile->peers.size(), 16u);
  EXPECT_EQ(m.stats.cross_host, Bytes::Of(8 * 300 + 2 * 28));
  EXPECT_EQ(m.stats.unattributed, Bytes::Of(0));

  // The same reports without slots (older senders): every ring is the first of one local rank,
  // so all of it is h0/nic0 <-> h1/nic0, today's rule.
  std::vector<CommTraffic> a0 = a, b0 = b;
  for (CommTraffic& c : a0) c.local_slots.clear();
  for (CommTraffic& c : b0) c.local_slots.clear();
  const HostPartReport ra0 = Report(10, 20, 3, a0), rb0 = Report(10, 20, 3, b0);
  const HostPartMerge old = MergeHostParts({RailPart(r, 0, &ra0), RailPart(r, 1, &rb0)});
  EXPECT_EQ(PairsOf(*old.profile), (NicPairs{{{r.nic[0][0], r.nic[1][0]}, 800 + 28},
                                             {{r.nic[1][0], r.nic[0][0]}, 1600 + 28}}));
}

TEST(HostPartsRailTest, OldAndNewSendersMixAndSlotsFollowTheRailRule) {
  // h0: 8 NICs, slots (new); h1: 8 NICs, no slots (old); h2: 4 NICs, slots: GPU g -> NIC
  // g * 4 / 8 = g / 2. Ring g (3 ranks): 0 on h0/GPU g, 1 on h1, 2 on h2/GPU g; 0 -> 1: 10,
  // 1 -> 2: 20, 2 -> 0: 30.
  const RailHosts r = MakeRailHosts({8, 8, 4});
  std::vector<CommTraffic> a, b, c;
  for (int g = 0; g < 8; ++g) {
    a.push_back(OneRank(0x200 + g, 3, 0, g, {B(0, 1, 10)}));
    b.push_back(OneRank(0x200 + g, 3, 1, -1, {B(1, 2, 20)}));
    c.push_back(OneRank(0x200 + g, 3, 2, g, {B(2, 0, 30)}));
  }
  const HostPartReport ra = Report(10, 20, 3, a), rb = Report(10, 20, 3, b),
                       rc = Report(10, 20, 3, c);
  const HostPartMerge m =
      MergeHostParts({RailPart(r, 0, &ra), RailPart(r, 1, &rb), RailPart(r, 2, &rc)});
  ASSERT_TRUE(m.profile.has_value());
  NicPairs want;
  for (int g = 0; g < 8; ++g) {
    want[{r.nic[0][g], r.nic[1][0]}] = 10;      // Old h1: its only local rank -> nic0.
    want[{r.nic[2][g / 2], r.nic[0][g]}] = 30;  // h2's GPUs 2k, 2k+1 share nic k.
  }
  for (int k = 0; k < 4; ++k) want[{r.nic[1][0], r.nic[2][k]}] = 2 * 20;  // Rings 2k, 2k+1.
  EXPECT_EQ(PairsOf(*m.profile), want);
  EXPECT_EQ(m.profile->peers.size(), 8u + 8u + 4u);
  EXPECT_EQ(m.stats.cross_host, Bytes::Of(8 * 60));
  EXPECT_TRUE(m.stats.complete);

  // A host whose GPU count is unknown (0) does not use slots: h0 falls back to rank order.
  HostPartInput unknown = RailPart(r, 0, &ra);
  unknown.gpus = 0;
  const HostPartMerge u = MergeHostParts({unknown, RailPart(r, 1, &rb), RailPart(r, 2, &rc)});
  EXPECT_EQ(PairsOf(*u.profile).count({r.nic[0][0], r.nic[1][0]}), 1u);
  EXPECT_EQ(PairsOf(*u.profile).at({r.nic[0][0], r.nic[1][0]}), 8 * 10);
}

TEST(HostPartsRailTest, BadSlotsAreRefusedNamingTheField) {
  HostPartReport ok = Report(
      10, 20, 3, {OneRank(1, 2, 0, 7, {}), OneRank(2, 2, 0, -1, {}), Comm(3, 4, {0, 1}, {})});
  ok.comms[2].local_slots = {3, 4};
  EXPECT_TRUE(CheckLocalSlots(ok, 8).ok());
  EXPECT_TRUE(CheckLocalSlots(ok, 0).ok());  // GPU count unknown: not checked.

  HostPartReport bad = ok;
  bad.comms[1].local_slots = {8};  // GPUs 0-7.
  const Status s = CheckLocalSlots(bad, 8);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "comms[1].local_slots[0]: 8 is not a GPU of the host (8 GPUs)");
  EXPECT_TRUE(CheckLocalSlots(bad, 16).ok());

  HostPartReport uneven = ok;
  uneven.comms[2].local_slots = {3};
  EXPECT_EQ(CheckLocalSlots(uneven, 8).message(),
            "comms[2].local_slots: 1 slots for 2 local_ranks (must be as many, or none)");

  // Should a bad slot reach the merge anyway, its communicator falls back to rank order.
  const RailHosts r = MakeRailHosts({8, 8});
  const HostPartReport ra = Report(10, 20, 3, {OneRank(9, 2, 0, 8, {B(0, 1, 5)})});
  const HostPartReport rb = Report(10, 20, 3, {OneRank(9, 2, 1, 3, {})});
  const HostPartMerge m = MergeHostParts({RailPart(r, 0, &ra), RailPart(r, 1, &rb)});
  EXPECT_EQ(PairsOf(*m.profile), (NicPairs{{{r.nic[0][0], r.nic[1][3]}, 5}}));
}

TEST_F(HostPartsTest, PartNicsFromPlacementTopologyOrHost) {
  EXPECT_EQ(PartNics(c_.topo, {c_.host[0], 8, {c_.nic[0][1]}}), std::vector<NodeId>{c_.nic[0][1]});
  EXPECT_EQ(PartNics(c_.topo, {c_.host[0], 8, {}}), c_.nic[0]);
  Topology bare;
  const NodeId h = testing::AddHost(bare, "lonely");
  EXPECT_EQ(PartNics(bare, {h, 1, {}}), std::vector<NodeId>{h});
}

}  // namespace
}  // namespace crux::core
