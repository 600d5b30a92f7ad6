#include "profiler.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

namespace crux::client::internal {
namespace {

constexpr int64_t kMs = 1'000'000;

// Feeds marked iterations: compute `compute` ns, then a transfer of `bytes` to peer 0 and
// `bytes / 2` to peer 1 lasting `comm` ns (starting at `comm_offset` after begin).
class Feeder {
 public:
  explicit Feeder(Profiler* p) : p_(p) {}
  std::optional<Profile> Iteration(int64_t compute, int64_t comm, uint64_t bytes,
                                   int64_t comm_offset = -1, bool mark_compute_end = false) {
    int64_t begin = t_;
    p_->Consume({begin, 0, 0, 0, EventKind::kIterationBegin});
    int64_t cs = begin + (comm_offset < 0 ? compute : comm_offset);
    p_->Consume({cs, 0, bytes, 0, EventKind::kCommStart});
    p_->Consume({cs, 0, bytes / 2, 1, EventKind::kCommStart});
    if (mark_compute_end) p_->Consume({begin + compute, 0, 0, 0, EventKind::kComputeEnd});
    p_->Consume({cs + comm, 0, 0, 0, EventKind::kCommEnd});
    p_->Consume({cs + comm, 0, 0, 1, EventKind::kCommEnd});
    int64_t end = std::max(begin + compute, cs + comm);
    p_->Consume({end, 0, 0, 0, EventKind::kIterationEnd});
    t_ = end + gap_;
    std::vector<PeerId> idx;
    auto r = p_->TakeReport(&idx);
    last_index_ = idx;
    return r;
  }
  std::vector<PeerId> last_index_;
  int64_t gap_ = 1 * kMs;

 private:
  Profiler* p_;
  int64_t t_ = 1000 * kMs;
};

TEST(ProfilerTest, StableIterationsConvergeEarlyWithCorrectNumbers) {
  Profiler p(ProfilerOptions{}, 0, 0);
  Feeder f(&p);
  std::optional<Profile> report;
  int at = 0;
  for (int i = 1; i <= 10 && !report; ++i) {
    report = f.Iteration(80 * kMs, 20 * kMs, 1'000'000);
    at = i;
  }
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(at, 3);  // Stable from the start: converge_min_iterations.
  EXPECT_TRUE(report->converged);
  EXPECT_EQ(report->compute_time_ns, 80 * kMs);  // duration - exposed comm.
  EXPECT_EQ(report->comm_time_ns, 20 * kMs);
  EXPECT_EQ(report->iteration_period_ns, 101 * kMs);  // Includes the 1 ms between iterations.
  EXPECT_DOUBLE_EQ(report->overlap_start, 1.0);
  EXPECT_EQ(report->bytes_per_iteration, 1'500'000u);
  ASSERT_EQ(report->peers.size(), 2u);
  EXPECT_EQ(f.last_index_, (std::vector<PeerId>{0, 1}));
  EXPECT_EQ(report->peers[0].bytes, 1'000'000u);
  EXPECT_EQ(report->peers[1].bytes, 500'000u);
  EXPECT_EQ(report->flops_per_iteration, 0.0);
  // Unchanged afterwards: no further report.
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(f.Iteration(80 * kMs, 20 * kMs, 1'000'000));
}

TEST(ProfilerTest, NoisyIterationsConvergeWithinTen) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.7, 1.3);  // +-30%: never "stable".
  Profiler p(ProfilerOptions{}, 0, 0);
  Feeder f(&p);
  int at = 0;
  std::optional<Profile> report;
  for (int i = 1; i <= 10 && !report; ++i) {
    report = f.Iteration(static_cast<int64_t>(50 * kMs * u(rng)), 10 * kMs, 4096);
    at = i;
  }
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(at, 10);
  EXPECT_TRUE(report->converged);
  EXPECT_NEAR(static_cast<double>(report->compute_time_ns), 50.0 * kMs, 10.0 * kMs);
  EXPECT_EQ(report->samples, 10u);
}

TEST(ProfilerTest, OverlapAndComputeEndMark) {
  Profiler p(ProfilerOptions{}, 0, 0);
  Feeder f(&p);
  std::optional<Profile> report;
  // Communication starts 30 ms into 80 ms of compute and ends 10 ms after it.
  for (int i = 0; i < 10 && !report; ++i) {
    report = f.Iteration(80 * kMs, 60 * kMs, 1000, 30 * kMs, /*mark_compute_end=*/true);
  }
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->compute_time_ns, 80 * kMs);
  EXPECT_NEAR(report->overlap_start, 30.0 / 80.0, 1e-9);
  EXPECT_EQ(report->comm_time_ns, 60 * kMs);
}

TEST(ProfilerTest, WorkGivenOrEstimatedFromPeak) {
  {
    Profiler p(ProfilerOptions{}, 5e12, 1e15);
    Feeder f(&p);
    std::optional<Profile> r;
    for (int i = 0; i < 10 && !r; ++i) r = f.Iteration(100 * kMs, 0, 0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->flops_per_iteration, 5e12);  // Given wins.
  }
  {
    Profiler p(ProfilerOptions{}, 0, 2 * 312e12);  // 2 GPUs at 312 TFLOP/s.
    Feeder f(&p);
    std::optional<Profile> r;
    for (int i = 0; i < 10 && !r; ++i) r = f.Iteration(100 * kMs, 0, 0);
    ASSERT_TRUE(r);
    EXPECT_NEAR(r->flops_per_iteration, 0.1 * 2 * 312e12, 1e6);
  }
}

// ReplaySample (the simulator's fast-forward): a copy of a recent sample joins the window as if
// an iteration had ended with it; the window stays bounded and the next real iteration's period
// still runs from the last real begin.
TEST(ProfilerTest, ReplaySampleRepeatsARecentSampleAndLeavesTheNextPeriodAlone) {
  Profiler p(ProfilerOptions{}, 0, 0);
  Feeder f(&p);
  for (int i = 0; i < 10; ++i) f.Iteration(80 * kMs, 20 * kMs, 1'000'000);
  f.Iteration(80 * kMs, 20 * kMs, 2'000'000);
  ASSERT_EQ(p.window().size(), 10u);
  const uint64_t iterations = p.iterations();
  p.ReplaySample(1);  // The 2 MB one.
  p.ReplaySample(3);  // A 1 MB one, two places before it.
  EXPECT_EQ(p.window().size(), 10u);
  EXPECT_EQ(p.iterations(), iterations + 2);
  EXPECT_EQ(p.window()[8].bytes, 3'000'000u);
  EXPECT_EQ(p.window()[9].bytes, 1'500'000u);
  std::vector<PeerId> idx;
  EXPECT_FALSE(p.TakeReport(&idx).has_value());  // A new sample, no change of the median.
  f.Iteration(80 * kMs, 20 * kMs, 1'000'000);
  EXPECT_EQ(p.window().back().period_ns, 101 * kMs);  // 100 ms + the 1 ms gap, as before.
}

TEST(ProfilerTest, ReportsAgainOnlyOnSignificantPersistentChange) {
  Profiler p(ProfilerOptions{}, 0, 0);
  Feeder f(&p);
  int reports = 0;
  for (int i = 0; i < 10; ++i) reports += f.Iteration(80 * kMs, 20 * kMs, 1'000'000) ? 1 : 0;
  ASSERT_EQ(reports, 1);
  // One outlier iteration (3x slower) and 10% noise: no new report.
  reports += f.Iteration(240 * kMs, 20 * kMs, 1'000'000) ? 1 : 0;
  for (int i = 0; i < 10; ++i) {
    reports += f.Iteration((i % 2 ? 88 : 72) * kMs, 20 * kMs, 1'000'000) ? 1 : 0;
  }
  EXPECT_EQ(reports, 1);
  // The model doubles its gradient volume for good: one new report with the new bytes.
  std::optional<Profile> changed;
  int after = 0;
  for (int i = 1; i <= 12; ++i) {
    auto r = f.Iteration(80 * kMs, 20 * kMs, 2'000'000);
    if (r) {
      ++reports;
      if (!changed) {
        changed = r;
        after = i;
      }
    }
  }
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(reports, 2);
  EXPECT_LE(after, 9);  // Median flips after 5-6 samples, plus persistence.
  EXPECT_EQ(changed->bytes_per_iteration, 3'000'000u);
}

TEST(ProfilerTest, DetectsPeriodWithoutMarks) {
  Profiler p(ProfilerOptions{}, 0, 0);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  int64_t t = 5000 * kMs;
  std::optional<Profile> report;
  int iterations = 0;
  std::vector<PeerId> idx;
  while (!report && iterations < 30) {
    // 4 buckets of 1 MB to peer 0, each 2 ms, 1 ms apart, then ~90 ms of compute.
    for (int b = 0; b < 4; ++b) {
      int64_t s = t + b * 3 * kMs;
      p.Consume({s, s + 2 * kMs, 1'000'000, 0, EventKind::kComm});
    }
    t += static_cast<int64_t>(100.0 * kMs * jitter(rng));
    ++iterations;
    report = p.TakeReport(&idx);
  }
  ASSERT_TRUE(report.has_value());
  EXPECT_LE(iterations, 11);
  EXPECT_TRUE(report->detected);
  EXPECT_NEAR(static_cast<double>(report->iteration_period_ns), 100.0 * kMs, 5.0 * kMs);
  EXPECT_NEAR(static_cast<double>(report->bytes_per_iteration), 4e6, 0.3e6);
  EXPECT_NEAR(static_cast<double>(report->comm_time_ns), 8.0 * kMs, 1.0 * kMs);  // 4 x 2 ms.
  EXPECT_FALSE(p.marked_mode());
}

// Detection is paced by the transfers' own timestamps (one per 100 ms of traffic), so the
// result does not depend on how the background thread batches events between TakeReport calls:
// the same series consumed all at once or one transfer at a time gives the same report.
TEST(ProfilerTest, DetectionDependsOnTimestampsNotOnBatching) {
  std::vector<Event> series;
  int64_t t = 7000 * kMs;
  for (int i = 0; i < 16; ++i) {
    for (int b = 0; b < 3; ++b) {
      int64_t s = t + b * 2 * kMs;
      series.push_back({s, s + 1 * kMs, 1000, 0, EventKind::kComm});
    }
    t += 50 * kMs;
  }
  Profiler batched(ProfilerOptions{}, 0, 0);
  for (const Event& e : series) batched.Consume(e);
  std::vector<PeerId> idx;
  std::optional<Profile> at_once = batched.TakeReport(&idx);
  ASSERT_TRUE(at_once.has_value());
  EXPECT_EQ(idx, (std::vector<PeerId>{0}));
  EXPECT_FALSE(batched.TakeReport(&idx).has_value());  // Taken.

  Profiler stepwise(ProfilerOptions{}, 0, 0);
  std::optional<Profile> first;
  for (const Event& e : series) {
    stepwise.Consume(e);
    auto r = stepwise.TakeReport(&idx);
    if (r && !first) first = r;
  }
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(stepwise.detections(), batched.detections());
  // 16 bursts over 750 ms of start times: a detection at the first transfer and then one per
  // 100 ms, whatever the batching.
  EXPECT_EQ(batched.detections(), 8u);
  EXPECT_EQ(first->iteration_period_ns, at_once->iteration_period_ns);
  EXPECT_NEAR(static_cast<double>(at_once->iteration_period_ns), 50.0 * kMs, 1.0 * kMs);
  EXPECT_EQ(at_once->bytes_per_iteration, 3000u);
  EXPECT_NEAR(static_cast<double>(at_once->compute_time_ns), 47.0 * kMs, 1.0 * kMs);
  EXPECT_TRUE(at_once->detected);
  EXPECT_TRUE(at_once->converged);
}

// Found by fuzz/client_profiler (reproducer fuzz/corpus/client_profiler/repro_int64_min_start):
// RecordComm timestamps are the caller's; INT64_MIN overflowed `start - last_detection` (UB).
// Transfer times outside [0, 2^61] are now ignored: the detected profile is the same as without
// them.
TEST(ProfilerTest, CallerTimesOutsideTheClockAreIgnored) {
  std::vector<Event> series;
  int64_t t = 7000 * kMs;
  for (int i = 0; i < 16; ++i) {
    for (int b = 0; b < 3; ++b) {
      int64_t s = t + b * 2 * kMs;
      series.push_back({s, s + 1 * kMs, 1000, 0, EventKind::kComm});
    }
    t += 50 * kMs;
  }
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<Event> bogus = {{kMin, kMin, 1, 0, EventKind::kComm},
                                    {kMin, kMax, 1, 0, EventKind::kComm},
                                    {-1, 5, 1, 0, EventKind::kComm},
                                    {kMax - 1, kMax, 1, 0, EventKind::kComm},
                                    {7000 * kMs, kMax, 1, 0, EventKind::kComm}};
  Profiler clean(ProfilerOptions{}, 0, 0);
  Profiler noisy(ProfilerOptions{}, 0, 0);
  for (size_t i = 0; i < series.size(); ++i) {
    clean.Consume(series[i]);
    noisy.Consume(bogus[i % bogus.size()]);
    noisy.Consume(series[i]);
  }
  std::vector<PeerId> idx;
  std::optional<Profile> want = clean.TakeReport(&idx);
  std::optional<Profile> got = noisy.TakeReport(&idx);
  ASSERT_TRUE(want.has_value());
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(noisy.detections(), clean.detections());
  EXPECT_EQ(got->iteration_period_ns, want->iteration_period_ns);
  EXPECT_EQ(got->bytes_per_iteration, want->bytes_per_iteration);
  EXPECT_EQ(got->comm_time_ns, want->comm_time_ns);
}

// Communication time of a marked iteration saturates instead of overflowing int64 when the
// caller records absurdly long transfers: exposed comm is then the whole iteration.
TEST(ProfilerTest, CommTimeSaturatesOnHugeRecordedTransfers) {
  Profiler p(ProfilerOptions{}, 0, 0);
  constexpr int64_t kLongest = int64_t{1} << 61;
  const int64_t begin = 1000 * kMs;
  p.Consume({begin, 0, 0, 0, EventKind::kIterationBegin});
  for (int i = 0; i < 8; ++i) p.Consume({0, kLongest, 1000, 0, EventKind::kComm});  // 8 x 2^61.
  p.Consume({begin + 100 * kMs, 0, 0, 0, EventKind::kIterationEnd});
  ASSERT_EQ(p.window().size(), 1u);
  EXPECT_EQ(p.window().back().comm_ns, 100 * kMs);  // All of it, not a wrapped sum.
  EXPECT_EQ(p.window().back().compute_ns, 1);
}

// Found by fuzz/client_profiler: caller-given byte counts summed past what the protocol accepts
// (and could wrap uint64), so the library built a ProfileReport the daemon refuses
// (profile_report.bytes_per_iteration: too large). Sums now saturate at 1 PiB per iteration.
TEST(ProfilerTest, RecordedBytesSaturateAtTheProtocolLimit) {
  Profiler p(ProfilerOptions{}, 0, 0);
  constexpr uint64_t kLimit = uint64_t{1} << 50;
  const int64_t begin = 1000 * kMs;
  p.Consume({begin, 0, 0, 0, EventKind::kIterationBegin});
  for (int i = 0; i < 3; ++i) {
    p.Consume({begin + kMs, begin + 2 * kMs, UINT64_MAX / 2, 0, EventKind::kComm});  // Wraps.
  }
  p.Consume({begin + kMs, begin + 2 * kMs, 1000, 1, EventKind::kComm});
  p.Consume({begin + 100 * kMs, 0, 0, 0, EventKind::kIterationEnd});
  ASSERT_EQ(p.window().size(), 1u);
  EXPECT_EQ(p.window().back().bytes, kLimit);
  ASSERT_EQ(p.window().back().peer_bytes.size(), 2u);
  EXPECT_EQ(p.window().back().peer_bytes[0], kLimit);
  EXPECT_EQ(p.window().back().peer_bytes[1], 1000u);
}

}  // namespace
}  // namespace crux::client::internal
