// The simulated profiler follows the client library's reporting rule (docs/client.md): first
// report once stable (>= 3 iterations within 10 % of the median) or at 10 iterations at the
// latest, then only on a > 20 % change that lasts 3 candidates.
#include "crux/sim/profiler_model.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace crux::sim {
namespace {

using core::NodeId;

const std::vector<std::pair<NodeId, NodeId>> kPeers = {{NodeId(1), NodeId(2)},
                                                       {NodeId(3), NodeId(4)}};

IterationSample Sample(int64_t period_ms, int64_t bytes0 = 1000, int64_t bytes1 = 500) {
  IterationSample s;
  s.period_ns = period_ms * 1'000'000;
  s.compute_ns = 40'000'000;
  s.overlap_start = 0.25;
  s.peer_bytes = {bytes0, bytes1};
  return s;
}

// Feeds periods one by one; returns the 1-based iteration of every report.
std::vector<uint32_t> ReportsAt(ProfilerModel& m, const std::vector<int64_t>& periods_ms) {
  std::vector<uint32_t> at;
  uint32_t n = 0;
  for (int64_t p : periods_ms) {
    if (m.AddIteration(Sample(p), ++n)) at.push_back(n);
  }
  return at;
}

TEST(ProfilerModelTest, StableIterationsReportAtTheThirdWithTheMedians) {
  ProfilerModel m({}, kPeers, core::Flops::Of(5e15));
  EXPECT_FALSE(m.AddIteration(Sample(100), 1));
  EXPECT_FALSE(m.AddIteration(Sample(104), 2));
  EXPECT_FALSE(m.reported());
  std::optional<core::JobProfile> p = m.AddIteration(Sample(102), 3);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->converged);
  EXPECT_EQ(p->samples, 3u);
  EXPECT_EQ(p->iteration_period, core::Duration::Millis(102));
  EXPECT_EQ(p->compute_time, core::Duration::Millis(40));
  EXPECT_DOUBLE_EQ(p->overlap_start, 0.25);
  EXPECT_EQ(p->bytes_per_iteration, core::Bytes::Of(1500));
  ASSERT_EQ(p->peers.size(), 2u);
  EXPECT_EQ(p->peers[0].local_nic, NodeId(1));
  EXPECT_EQ(p->peers[0].remote_nic, NodeId(2));
  EXPECT_EQ(p->peers[0].bytes, core::Bytes::Of(1000));
  EXPECT_EQ(p->peers[1].bytes, core::Bytes::Of(500));
  EXPECT_EQ(p->flops_per_iteration, core::Flops::Of(5e15));
  EXPECT_DOUBLE_EQ(p->compression_ratio, 1.0);
  EXPECT_TRUE(m.settled());
}

TEST(ProfilerModelTest, UnstableIterationsReportAtTheTenthAtTheLatest) {
  ProfilerModel m({}, kPeers, std::nullopt);
  // Alternating 100 / 150 ms: never within 10 % of the median.
  std::vector<int64_t> periods;
  for (int i = 0; i < 12; ++i) periods.push_back(i % 2 == 0 ? 100 : 150);
  EXPECT_EQ(ReportsAt(m, periods), std::vector<uint32_t>{10});
  EXPECT_EQ(m.last_reported().samples, 10u);
  EXPECT_FALSE(m.last_reported().flops_per_iteration.has_value());
}

TEST(ProfilerModelTest, OnlyALastingChangeAboveTwentyPercentIsReportedAgain) {
  // 15 %: below the threshold, never reported again.
  {
    ProfilerModel m({}, kPeers, std::nullopt);
    std::vector<int64_t> p(3, 100);
    p.insert(p.end(), 30, 115);
    EXPECT_EQ(ReportsAt(m, p), std::vector<uint32_t>{3});
  }
  // 50 % for good: the median of the window (3 fast, then the slow ones) is (100 + 150) / 2 =
  // 125 at iteration 6 (> 20 % from 100) and 150 from iteration 7: candidates 6, 7 and 8 are
  // changed, and the third one reports.
  {
    ProfilerModel m({}, kPeers, std::nullopt);
    std::vector<int64_t> p(3, 100);
    p.insert(p.end(), 30, 150);
    const std::vector<uint32_t> at = ReportsAt(m, p);
    ASSERT_EQ(at.size(), 2u);
    EXPECT_EQ(at[0], 3u);
    EXPECT_EQ(at[1], 8u);
    EXPECT_EQ(m.last_reported().iteration_period, core::Duration::Millis(150));
  }
  // A burst of slow iterations that does not last: the median never moves.
  {
    ProfilerModel m({}, kPeers, std::nullopt);
    std::vector<int64_t> p(10, 100);
    p.insert(p.end(), 3, 300);
    p.insert(p.end(), 20, 100);
    EXPECT_EQ(ReportsAt(m, p), std::vector<uint32_t>{3});
  }
}

TEST(ProfilerModelTest, AChangeIsNotSettledUntilItIsConfirmed) {
  ProfilerModel m({}, kPeers, std::nullopt);
  uint32_t n = 0;
  for (int i = 0; i < 10; ++i) m.AddIteration(Sample(100), ++n);
  ASSERT_TRUE(m.settled());
  // Six slow samples move the median (to 125 at the fifth: changed, run 1).
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(m.AddIteration(Sample(150), ++n));
  EXPECT_FALSE(m.settled());
}

TEST(ProfilerModelTest, PeersWhoseMedianIsZeroAreLeftOut) {
  ProfilerModel m({}, kPeers, std::nullopt);
  std::optional<core::JobProfile> p;
  for (uint32_t i = 1; i <= 3 && !p; ++i) p = m.AddIteration(Sample(100, 1000, 0), i);
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->peers.size(), 1u);
  EXPECT_EQ(p->peers[0].remote_nic, NodeId(2));
}

TEST(ProfilerModelTest, OptionsAreCheckedNamingTheField) {
  EXPECT_TRUE(ValidateProfilerModelOptions({}).ok());
  ProfilerModelOptions o;
  o.window = 2;
  EXPECT_EQ(ValidateProfilerModelOptions(o).message(), "control.profiler.window: must be >= 3");
  o = {};
  o.converge_min_iterations = 1;
  EXPECT_NE(ValidateProfilerModelOptions(o).message().find("converge_min_iterations"),
            std::string::npos);
  o = {};
  o.change_persistence = 0;
  EXPECT_NE(ValidateProfilerModelOptions(o).message().find("change_persistence"),
            std::string::npos);
  o = {};
  o.stable_spread = 1.5;
  EXPECT_NE(ValidateProfilerModelOptions(o).message().find("stable_spread"), std::string::npos);
}

}  // namespace
}  // namespace crux::sim
