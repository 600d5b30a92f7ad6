// The policy-specific algorithms behind policy.h, on cases small enough to compute by hand:
// Sincronia's BSSI order, the level mappings, CASSINI's time shifts, ECMP source ports.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "crux/core/policies/policies.h"

namespace crux::core::policies {
namespace {

TEST(HeadDistinctLevelTest, MatchesSincroniaMaxKMinus1MinusRankFlipped) {
  // Sincronia's implementation: priority = max(K - 1 - rank, 0) with K - 1 the highest level.
  // Crux counts 0 as the highest, so the level is (K - 1) - that.
  for (int k : {1, 2, 3, 8}) {
    for (int rank = 0; rank < 20; ++rank) {
      const int sincronia = std::max(k - 1 - rank, 0);
      EXPECT_EQ(HeadDistinctLevel(rank, k), (k - 1) - sincronia) << "k=" << k << " rank=" << rank;
    }
  }
  // Explicitly: with 8 levels ranks 0..6 are distinct, 7 and later share level 7.
  EXPECT_EQ(HeadDistinctLevel(0, 8), 0);
  EXPECT_EQ(HeadDistinctLevel(6, 8), 6);
  EXPECT_EQ(HeadDistinctLevel(7, 8), 7);
  EXPECT_EQ(HeadDistinctLevel(30, 8), 7);
  EXPECT_EQ(HeadDistinctLevel(5, 1), 0);
}

TEST(BssiOrderTest, OnePortIsShortestFirst) {
  // One port, D = 1, 2, 3, unit weights. Step 1: argmin w/D = C (1/3) goes last; scale
  // A: 1 - 1 * 1/3 = 2/3, B: 1 - 1 * 2/3 = 1/3. Step 2: A 2/3, B 1/6 -> B last. Order A, B, C.
  const std::vector<std::vector<PortDemand>> d = {{{7, 1.0}}, {{7, 2.0}}, {{7, 3.0}}};
  EXPECT_EQ(BssiOrder(d, {1, 1, 1}), (std::vector<int>{0, 1, 2}));
  // Input order does not matter: the same coflows listed C, A, B.
  const std::vector<std::vector<PortDemand>> d2 = {{{7, 3.0}}, {{7, 1.0}}, {{7, 2.0}}};
  EXPECT_EQ(BssiOrder(d2, {1, 1, 1}), (std::vector<int>{1, 2, 0}));
}

TEST(BssiOrderTest, WeightsFavourHeavyCoflows) {
  // A: D = 2, w = 4 (w/D = 2); B: D = 1, w = 1 (w/D = 1) -> B last despite being shorter.
  const std::vector<std::vector<PortDemand>> d = {{{0, 2.0}}, {{0, 1.0}}};
  EXPECT_EQ(BssiOrder(d, {4, 1}), (std::vector<int>{0, 1}));
  EXPECT_EQ(BssiOrder(d, {1, 1}), (std::vector<int>{1, 0}));
}

TEST(BssiOrderTest, TwoPortsByHand) {
  // Ports p1 = 1, p2 = 2. A: p1 4. B: p1 1, p2 1. C: p2 3. Unit weights.
  // Totals p1 = 5, p2 = 4 -> bottleneck p1; w/D: A 1/4, B 1 -> A last; B: 1 - 1/4 = 3/4.
  // Totals p1 = 1, p2 = 4 -> bottleneck p2; w/D: B 3/4, C 1/3 -> C last. Order B, C, A.
  const std::vector<std::vector<PortDemand>> d = {{{1, 4.0}}, {{1, 1.0}, {2, 1.0}}, {{2, 3.0}}};
  EXPECT_EQ(BssiOrder(d, {1, 1, 1}), (std::vector<int>{1, 2, 0}));
}

TEST(BssiOrderTest, CoflowsWithoutDemandGoLastInIndexOrderAndTiesKeepIndexOrder) {
  const std::vector<std::vector<PortDemand>> d = {{}, {{3, 1.0}}, {}, {{3, 1.0}}};
  // Equal coflows: the higher index goes last, so 1 before 3; the empty ones after, 0 then 2.
  EXPECT_EQ(BssiOrder(d, {1, 1, 1, 1}), (std::vector<int>{1, 3, 0, 2}));
  EXPECT_TRUE(BssiOrder({}, {}).empty());
}

// Fraction of time (fine sampling over `horizon`) in which both jobs transmit.
double OverlapFraction(const CassiniJob& a, double sa, const CassiniJob& b, double sb,
                       double horizon) {
  auto active = [](const CassiniJob& c, double s, double t) {
    double ph = std::fmod(t - s - c.comm_start_s, c.period_s);
    if (ph < 0) ph += c.period_s;
    return ph < c.comm_s;
  };
  const int n = 100000;
  int both = 0;
  for (int i = 0; i < n; ++i) {
    const double t = (i + 0.5) * horizon / n;
    if (active(a, sa, t) && active(b, sb, t)) ++both;
  }
  return static_cast<double>(both) / n;
}

CassiniJob Pulse(double period, double start, double comm, std::vector<uint32_t> links,
                 double bps) {
  CassiniJob c;
  c.period_s = period;
  c.comm_start_s = start;
  c.comm_s = comm;
  c.links = std::move(links);
  c.bps.assign(c.links.size(), bps);
  return c;
}

TEST(CassiniShiftsTest, SeparatesTwoEqualPeriodJobsOnOneLink) {
  // Both transmit at full link rate for 0.4 s at the end of a 1 s iteration: unshifted they
  // collide completely.
  const std::vector<CassiniJob> jobs = {Pulse(1.0, 0.6, 0.4, {0}, 100),
                                        Pulse(1.0, 0.6, 0.4, {0}, 100)};
  const std::vector<double> cap = {100};
  EXPECT_NEAR(OverlapFraction(jobs[0], 0, jobs[1], 0, 1.0), 0.4, 1e-3);
  const std::vector<double> s = CassiniShifts(jobs, cap);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], 0.0);  // The BFS root keeps its schedule.
  EXPECT_GT(s[1], 0.0);
  EXPECT_LT(s[1], 1.0);
  EXPECT_LT(OverlapFraction(jobs[0], s[0], jobs[1], s[1], 1.0), 1e-3);
}

TEST(CassiniShiftsTest, ChainOfLinksSeparatesEveryPairAndIgnoresLoners) {
  // A-B share link 0, B-C share link 1; D is alone on link 2.
  const std::vector<CassiniJob> jobs = {
      Pulse(1.0, 0.5, 0.3, {0}, 100), Pulse(1.0, 0.5, 0.3, {0, 1}, 100),
      Pulse(1.0, 0.5, 0.3, {1}, 100), Pulse(1.0, 0.5, 0.3, {2}, 100)};
  const std::vector<double> cap = {100, 100, 100};
  const std::vector<double> s = CassiniShifts(jobs, cap);
  EXPECT_LT(OverlapFraction(jobs[0], s[0], jobs[1], s[1], 1.0), 1e-3);
  EXPECT_LT(OverlapFraction(jobs[1], s[1], jobs[2], s[2], 1.0), 1e-3);
  EXPECT_EQ(s[3], 0.0);
}

TEST(CassiniShiftsTest, UnderCapacitySharingStillInterleavesAndShiftsStayInPeriod) {
  // Different periods (1 s and 2 s, unified circle 2 s); each at half capacity, so excess is 0
  // anyway: the overlap tie-break still pulls them apart.
  const std::vector<CassiniJob> jobs = {Pulse(1.0, 0.0, 0.25, {4}, 50),
                                        Pulse(2.0, 0.0, 0.5, {4}, 50)};
  std::vector<double> cap(5, 100);
  const std::vector<double> s = CassiniShifts(jobs, cap);
  EXPECT_GE(s[1], 0.0);
  EXPECT_LT(s[1], 2.0);
  EXPECT_LT(OverlapFraction(jobs[0], s[0], jobs[1], s[1], 2.0), 1e-3);
}

TEST(CassiniShiftsTest, ImpossibleSeparationMinimisesExcess) {
  // Three jobs, each busy 0.5 of a 1 s period at full rate, on one link: at least 0.5 s of
  // pairwise overlap is unavoidable; shifts must not put all three on top of each other.
  const std::vector<CassiniJob> jobs = {Pulse(1.0, 0.0, 0.5, {0}, 100),
                                        Pulse(1.0, 0.0, 0.5, {0}, 100),
                                        Pulse(1.0, 0.0, 0.5, {0}, 100)};
  const std::vector<double> s = CassiniShifts(jobs, {100});
  // Job 1 goes to the other half of the circle; job 2 overlaps at most one of them at a time.
  EXPECT_LT(OverlapFraction(jobs[0], s[0], jobs[1], s[1], 1.0), 1e-3);
  const double triple_overlap = [&] {
    int all = 0;
    const int n = 10000;
    for (int i = 0; i < n; ++i) {
      const double t = (i + 0.5) / n;
      int busy = 0;
      for (int j = 0; j < 3; ++j) {
        double ph = std::fmod(t - s[j], 1.0);
        if (ph < 0) ph += 1.0;
        busy += ph < 0.5;
      }
      all += busy == 3;
    }
    return static_cast<double>(all) / n;
  }();
  EXPECT_LT(triple_overlap, 1e-3);
}

TEST(EcmpSourcePortTest, InRangeDeterministicAndSpread) {
  const PortRange range;  // 0xC000..0xFFFF.
  std::set<uint16_t> seen;
  for (size_t f = 0; f < 64; ++f) {
    const uint16_t p = EcmpSourcePort(7, "job", f, range);
    EXPECT_GE(p, range.min);
    EXPECT_LE(p, range.max);
    EXPECT_EQ(p, EcmpSourcePort(7, "job", f, range));
    seen.insert(p);
  }
  EXPECT_GT(seen.size(), 60u);
  int differ = 0;
  for (size_t f = 0; f < 64; ++f) {
    differ += EcmpSourcePort(7, "job", f, range) != EcmpSourcePort(8, "job", f, range);
  }
  EXPECT_GT(differ, 60);
  EXPECT_NE(EcmpSourcePort(7, "a", 0, range), EcmpSourcePort(7, "b", 0, range));
  const PortRange one{4791, 4791};
  EXPECT_EQ(EcmpSourcePort(1, "x", 3, one), 4791);
}

}  // namespace
}  // namespace crux::core::policies
