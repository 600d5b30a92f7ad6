#include "period_detector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace crux::client::internal {
namespace {

constexpr int64_t kMs = 1'000'000;

// A training-like series: every `period` a burst of `events` transfers spread over `burst`.
struct Series {
  int64_t period = 100 * kMs;
  int64_t burst = 15 * kMs;
  int events = 20;
  int iterations = 30;
  double jitter = 0;         // Relative period jitter (uniform +-).
  double spurious = 0;       // Extra random events, as a fraction of all events.
  std::vector<int> missing;  // Iterations without a burst.
  uint32_t seed = 1;
};

std::vector<int64_t> Make(const Series& s) {
  std::mt19937 rng(s.seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<int64_t> t;
  int64_t start = 1'000 * kMs;
  for (int it = 0; it < s.iterations; ++it) {
    int64_t p = static_cast<int64_t>(static_cast<double>(s.period) * (1 + s.jitter * u(rng)));
    if (std::find(s.missing.begin(), s.missing.end(), it) == s.missing.end()) {
      for (int e = 0; e < s.events; ++e) {
        int64_t off = static_cast<int64_t>(static_cast<double>(s.burst) * (u(rng) + 1) / 2);
        t.push_back(start + off);
      }
    }
    start += p;
  }
  int extra = static_cast<int>(s.spurious * static_cast<double>(t.size()));
  std::uniform_int_distribution<int64_t> anywhere(1'000 * kMs, start);
  for (int i = 0; i < extra; ++i) t.push_back(anywhere(rng));
  std::sort(t.begin(), t.end());
  return t;
}

TEST(PeriodDetectorTest, CleanBursts) {
  auto est = DetectPeriod(Make({}));
  ASSERT_TRUE(est.ok()) << est.status().ToString();
  EXPECT_NEAR(static_cast<double>(est->period_ns), 100.0 * kMs, 1.0 * kMs);
  EXPECT_EQ(est->bursts, 30u);
  EXPECT_GT(est->confidence, 0.95);
}

TEST(PeriodDetectorTest, NoisySeriesManySeeds) {
  // 10% period jitter, 2% spurious events anywhere, two missing bursts: within 5% every time.
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    Series s;
    s.jitter = 0.10;
    s.spurious = 0.02;
    s.missing = {7, 19};
    s.seed = seed;
    s.period = 80 * kMs;
    auto est = DetectPeriod(Make(s));
    ASSERT_TRUE(est.ok()) << "seed " << seed << ": " << est.status().ToString();
    EXPECT_NEAR(static_cast<double>(est->period_ns), 80.0 * kMs, 4.0 * kMs) << "seed " << seed;
  }
}

TEST(PeriodDetectorTest, OneTransferPerIteration) {
  Series s;
  s.events = 1;
  s.jitter = 0.05;
  s.period = 250 * kMs;
  auto est = DetectPeriod(Make(s));
  ASSERT_TRUE(est.ok()) << est.status().ToString();
  EXPECT_NEAR(static_cast<double>(est->period_ns), 250.0 * kMs, 10.0 * kMs);
}

TEST(PeriodDetectorTest, ShortBurstGapsAreNotIterations) {
  // Long bursts (60% of the period) of many events: still the period, not the event spacing.
  Series s;
  s.burst = 60 * kMs;
  s.events = 200;
  auto est = DetectPeriod(Make(s));
  ASSERT_TRUE(est.ok()) << est.status().ToString();
  EXPECT_NEAR(static_cast<double>(est->period_ns), 100.0 * kMs, 3.0 * kMs);
}

TEST(PeriodDetectorTest, TooFewEventsOrBursts) {
  EXPECT_EQ(DetectPeriod({1, 2}).status().code(), core::StatusCode::kFailedPrecondition);
  Series s;
  s.iterations = 2;
  auto est = DetectPeriod(Make(s));  // Two bursts: no period can be trusted.
  ASSERT_FALSE(est.ok()) << est->period_ns;
  EXPECT_EQ(est.status().code(), core::StatusCode::kFailedPrecondition);
}

TEST(PeriodDetectorTest, UnsortedInputIsAnError) {
  EXPECT_EQ(DetectPeriod({5, 4, 3, 2, 1}).status().code(), core::StatusCode::kInvalidArgument);
}

TEST(PeriodDetectorTest, RandomEventsHaveNoConsistentPeriod) {
  std::mt19937 rng(7);
  std::exponential_distribution<double> gap(1.0 / 10e6);
  std::vector<int64_t> t;
  int64_t now = 0;
  for (int i = 0; i < 400; ++i) {
    now += static_cast<int64_t>(gap(rng)) + 1;
    t.push_back(now);
  }
  auto est = DetectPeriod(t);
  // A Poisson process has no period: either refused or low confidence.
  if (est.ok()) {
    EXPECT_LT(est->confidence, 0.9);
  }
}

}  // namespace
}  // namespace crux::client::internal
