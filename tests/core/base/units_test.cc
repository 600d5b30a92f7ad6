// Tests for the value types of units.h, plus the tiny header-only helpers that have no .cc of
// their own (ids.h, random.h, clock.h).
#include "crux/core/base/units.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/ids.h"
#include "crux/core/base/random.h"

namespace crux::core {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// ---- Duration ----

TEST(DurationTest, DefaultIsZero) {
  EXPECT_EQ(Duration().nanos(), 0);
  EXPECT_EQ(Duration(), Duration::Zero());
}

TEST(DurationTest, IntegerFactoriesScaleToNanos) {
  EXPECT_EQ(Duration::Nanos(7).nanos(), 7);
  EXPECT_EQ(Duration::Micros(3).nanos(), 3000);
  EXPECT_EQ(Duration::Millis(2).nanos(), 2000000);
  EXPECT_EQ(Duration::Millis(-2).nanos(), -2000000);
}

TEST(DurationTest, SecondsConvertsExactly) {
  EXPECT_EQ(Duration::Seconds(1.0).nanos(), 1000000000);
  EXPECT_EQ(Duration::Seconds(0.25).nanos(), 250000000);
  EXPECT_EQ(Duration::Seconds(-1.5).nanos(), -1500000000);
}

TEST(DurationTest, SecondsRoundsToNearestNanosecond) {
  EXPECT_EQ(Duration::Seconds(1.4e-9).nanos(), 1);
  EXPECT_EQ(Duration::Seconds(1.6e-9).nanos(), 2);
  EXPECT_EQ(Duration::Seconds(0.4e-9).nanos(), 0);
  EXPECT_EQ(Duration::Seconds(-1.6e-9).nanos(), -2);
  // 1/3 s is not representable; nearest is 333333333 ns.
  EXPECT_EQ(Duration::Seconds(1.0 / 3.0).nanos(), 333333333);
}

TEST(DurationTest, SecondsSaturatesHugeAndInfiniteInputs) {
  EXPECT_TRUE(Duration::Seconds(1e300).IsInfinite());
  EXPECT_TRUE(Duration::Seconds(std::numeric_limits<double>::infinity()).IsInfinite());
  EXPECT_TRUE(Duration::Seconds(1e10).IsInfinite());  // 1e19 ns > int64 max.
  EXPECT_EQ(Duration::Seconds(-1e300).nanos(), kInt64Min);
  EXPECT_EQ(Duration::Seconds(-std::numeric_limits<double>::infinity()).nanos(), kInt64Min);
  // 292 years still fits.
  EXPECT_FALSE(Duration::Seconds(9.0e9).IsInfinite());
}

TEST(DurationTest, SecondsOfNanIsInfinite) {
  EXPECT_TRUE(Duration::Seconds(std::nan("")).IsInfinite());
}

TEST(DurationTest, InfiniteIsInt64Max) {
  EXPECT_EQ(Duration::Infinite().nanos(), kInt64Max);
  EXPECT_TRUE(Duration::Infinite().IsInfinite());
  EXPECT_FALSE(Duration::Seconds(1).IsInfinite());
  EXPECT_GT(Duration::Infinite(), Duration::Seconds(1e9));
}

TEST(DurationTest, ConvertsToSecondsAndMillis) {
  EXPECT_DOUBLE_EQ(Duration::Millis(1500).ToSeconds(), 1.5);
  EXPECT_DOUBLE_EQ(Duration::Micros(2500).ToMillis(), 2.5);
}

TEST(DurationTest, ArithmeticAndComparison) {
  Duration d = Duration::Millis(10);
  d += Duration::Millis(5);
  EXPECT_EQ(d, Duration::Millis(15));
  d -= Duration::Millis(20);
  EXPECT_EQ(d, Duration::Millis(-5));
  EXPECT_EQ(Duration::Millis(3) + Duration::Millis(4), Duration::Millis(7));
  EXPECT_EQ(Duration::Millis(3) - Duration::Millis(4), Duration::Millis(-1));
  EXPECT_EQ(Duration::Seconds(2) * 1.5, Duration::Seconds(3));
  EXPECT_DOUBLE_EQ(Duration::Seconds(3) / Duration::Seconds(2), 1.5);
  EXPECT_LT(Duration::Millis(1), Duration::Millis(2));
  EXPECT_LE(Duration::Millis(2), Duration::Millis(2));
  EXPECT_GT(Duration::Millis(3), Duration::Millis(2));
  EXPECT_GE(Duration::Millis(3), Duration::Millis(3));
  EXPECT_NE(Duration::Millis(3), Duration::Millis(2));
}

TEST(DurationTest, FactoriesAreConstexpr) {
  constexpr Duration kD = Duration::Millis(5) + Duration::Micros(1);
  static_assert(kD.nanos() == 5001000);
  EXPECT_EQ(kD.nanos(), 5001000);
}

// ---- Bytes ----

TEST(BytesTest, FactoriesUseBinaryPrefixes) {
  EXPECT_EQ(Bytes::Of(12).count(), 12);
  EXPECT_EQ(Bytes::KiB(1).count(), 1024);
  EXPECT_EQ(Bytes::MiB(3).count(), 3 * 1048576);
  EXPECT_EQ(Bytes::GiB(2).count(), int64_t{2} << 30);
}

TEST(BytesTest, ConvertsToDoubleAndBits) {
  EXPECT_DOUBLE_EQ(Bytes::Of(3).ToDouble(), 3.0);
  EXPECT_DOUBLE_EQ(Bytes::Of(3).ToBits(), 24.0);
}

TEST(BytesTest, FromDoubleRoundsToNearestByte) {
  EXPECT_EQ(Bytes::FromDouble(2.4).count(), 2);
  EXPECT_EQ(Bytes::FromDouble(2.6).count(), 3);
  EXPECT_EQ(Bytes::FromDouble(2.5).count(), 3);  // Half away from zero (std::round).
  EXPECT_EQ(Bytes::FromDouble(-2.5).count(), -3);
  EXPECT_EQ(Bytes::FromDouble(0.49).count(), 0);
}

TEST(BytesTest, FromDoubleSaturates) {
  EXPECT_EQ(Bytes::FromDouble(1e30).count(), kInt64Max);
  EXPECT_EQ(Bytes::FromDouble(std::numeric_limits<double>::infinity()).count(), kInt64Max);
  EXPECT_EQ(Bytes::FromDouble(-1e30).count(), kInt64Min);
}

TEST(BytesTest, ArithmeticAndScaling) {
  Bytes b = Bytes::Of(100);
  b += Bytes::Of(28);
  EXPECT_EQ(b, Bytes::Of(128));
  EXPECT_EQ(b - Bytes::Of(200), Bytes::Of(-72));  // Differences may be negative.
  EXPECT_EQ(Bytes::Of(10) * 0.25, Bytes::Of(3));  // 2.5 rounds to 3.
  EXPECT_EQ(Bytes::Of(1000) * 0.5, Bytes::Of(500));
  EXPECT_LT(Bytes::Of(1), Bytes::Of(2));
  EXPECT_GE(Bytes::Of(2), Bytes::Of(2));
}

// ---- Bandwidth ----

TEST(BandwidthTest, GbpsConvertsToBitsPerSecond) {
  EXPECT_EQ(Bandwidth::Gbps(400).bits_per_sec(), 400000000000);
  EXPECT_EQ(Bandwidth::Gbps(1.5).bits_per_sec(), 1500000000);
  EXPECT_DOUBLE_EQ(Bandwidth::Gbps(200).ToGbps(), 200.0);
  EXPECT_DOUBLE_EQ(Bandwidth::BitsPerSec(1000).ToBitsPerSec(), 1000.0);
}

TEST(BandwidthTest, GbpsRoundsToNearestBitPerSecond) {
  EXPECT_EQ(Bandwidth::Gbps(1.6e-9).bits_per_sec(), 2);
  EXPECT_EQ(Bandwidth::Gbps(1.4e-9).bits_per_sec(), 1);
}

TEST(BandwidthTest, IsPositiveOnlyAboveZero) {
  EXPECT_TRUE(Bandwidth::BitsPerSec(1).IsPositive());
  EXPECT_FALSE(Bandwidth::BitsPerSec(0).IsPositive());
  EXPECT_FALSE(Bandwidth::Gbps(-1).IsPositive());
  EXPECT_FALSE(Bandwidth().IsPositive());
}

TEST(BandwidthTest, Comparison) {
  EXPECT_LT(Bandwidth::Gbps(100), Bandwidth::Gbps(200));
  EXPECT_EQ(Bandwidth::Gbps(100), Bandwidth::BitsPerSec(100000000000));
  EXPECT_NE(Bandwidth::Gbps(100), Bandwidth::Gbps(101));
}

// ---- Flops ----

TEST(FlopsTest, PrefixesScale) {
  EXPECT_DOUBLE_EQ(Flops::Of(3.5).value(), 3.5);
  EXPECT_DOUBLE_EQ(Flops::Giga(5).value(), 5e9);
  EXPECT_DOUBLE_EQ(Flops::Tera(2).value(), 2e12);
  EXPECT_DOUBLE_EQ(Flops().value(), 0.0);
  EXPECT_LT(Flops::Giga(1), Flops::Tera(1));
  EXPECT_EQ(Flops::Giga(1000), Flops::Tera(1));
}

// ---- TransmitTime ----

TEST(TransmitTimeTest, OneGigabyteAtEightGbpsTakesOneSecond) {
  EXPECT_EQ(TransmitTime(Bytes::Of(1000000000), Bandwidth::Gbps(8)), Duration::Seconds(1));
}

TEST(TransmitTimeTest, ScalesLinearly) {
  EXPECT_EQ(TransmitTime(Bytes::Of(500000000), Bandwidth::Gbps(8)), Duration::Millis(500));
  EXPECT_EQ(TransmitTime(Bytes::Of(1000000000), Bandwidth::Gbps(16)), Duration::Millis(500));
  EXPECT_EQ(TransmitTime(Bytes::Of(1), Bandwidth::Gbps(8)), Duration::Nanos(1));
  EXPECT_EQ(TransmitTime(Bytes::Of(0), Bandwidth::Gbps(8)), Duration::Zero());
}

TEST(TransmitTimeTest, SaturatesToInfiniteOnOverflow) {
  EXPECT_TRUE(TransmitTime(Bytes::Of(kInt64Max), Bandwidth::BitsPerSec(1)).IsInfinite());
}

// ---- StrongId (ids.h) ----

TEST(StrongIdTest, DefaultIsInvalid) {
  EXPECT_FALSE(NodeId().valid());
  EXPECT_EQ(NodeId().value(), NodeId::kInvalid);
  EXPECT_TRUE(NodeId(0).valid());
  EXPECT_EQ(LinkId(7).value(), 7u);
}

TEST(StrongIdTest, ComparesAndHashesByValue) {
  EXPECT_EQ(NodeId(3), NodeId(3));
  EXPECT_NE(NodeId(3), NodeId(4));
  EXPECT_LT(NodeId(3), NodeId(4));
  std::unordered_set<LinkId> set = {LinkId(1), LinkId(2), LinkId(1)};
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.count(LinkId(2)), 1u);
}

// ---- random.h ----

TEST(RandomTest, Mix64MatchesSplitMix64ReferenceOutput) {
  // The first output of the reference SplitMix64 with state 0.
  EXPECT_EQ(Mix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(Rng(0).Next(), Mix64(0));
}

TEST(RandomTest, StableHashIsFnv1a) {
  EXPECT_EQ(StableHash("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(StableHash("a", 1), 0xaf63dc4c8601ec8cULL);
}

TEST(RandomTest, SameSeedGivesSameSequence) {
  Rng a(42);
  Rng b(42);
  Rng c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(RandomTest, UniformStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::vector<int> hits(5, 0);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = rng.Uniform(5);
    ASSERT_LT(x, 5u);
    ++hits[x];
  }
  for (int h : hits) EXPECT_GT(h, 100);  // Expected 200 each.
  for (int i = 0; i < 100; ++i) {
    const double d = rng.UniformDouble();
    EXPECT_GE(d, 0.0);
    EXPECT_LT(d, 1.0);
  }
}

TEST(RandomTest, ShuffleIsADeterministicPermutation) {
  std::vector<int> v(20);
  std::iota(v.begin(), v.end(), 0);
  std::vector<int> a = v;
  std::vector<int> b = v;
  Rng ra(9);
  Rng rb(9);
  ra.Shuffle(a);
  rb.Shuffle(b);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, v);  // 20! orderings; staying sorted would mean Shuffle did nothing.
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, v);
}

// ---- clock.h ----

TEST(FakeClockTest, StartsAtZeroAndMovesOnlyWhenTold) {
  FakeClock clock;
  EXPECT_EQ(clock.Now(), Duration::Zero());
  EXPECT_EQ(clock.Now(), Duration::Zero());
  clock.Advance(Duration::Millis(5));
  EXPECT_EQ(clock.Now(), Duration::Millis(5));
  clock.Set(Duration::Seconds(100));
  EXPECT_EQ(clock.Now(), Duration::Seconds(100));
}

TEST(SteadyClockTest, NeverGoesBackwards) {
  const Clock& clock = SteadyClock::Instance();
  Duration prev = clock.Now();
  for (int i = 0; i < 1000; ++i) {
    const Duration now = clock.Now();
    EXPECT_GE(now, prev);
    prev = now;
  }
  EXPECT_EQ(&SteadyClock::Instance(), &SteadyClock::Instance());
}

}  // namespace
}  // namespace crux::core
