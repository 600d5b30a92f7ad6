// Simulated jobs report through the client library's own Profiler (sim/src/jobs/client_profiler.h):
// its rule (docs/client.md: first report once stable, >= 3 iterations within 10 % of the median,
// or at 10 iterations at the latest; then only on a > 20 % change that lasts 3 candidates) on
// simulated iteration events, and the profile cruxd receives (as the gateway converts it).
#include "jobs/client_profiler.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace crux::sim::internal {
namespace {

using core::Duration;
using core::NodeId;

const std::vector<std::pair<NodeId, NodeId>> kPeers = {{NodeId(1), NodeId(2)},
                                                       {NodeId(3), NodeId(4)}};

// A job's iterations as its client records them: compute 40 ms, communication from 10 ms
// (overlap 0.25) to the end of the iteration, `bytes0` to peer 0 and `bytes1` to peer 1.
class Job {
 public:
  explicit Job(ClientProfiler* p) : p_(p) {}
  std::optional<core::JobProfile> Iterate(int64_t period_ms, int64_t bytes0 = 1000,
                                          int64_t bytes1 = 500) {
    const Duration begin = t_;
    p_->BeginIteration(begin);
    if (bytes0 > 0) p_->CommStart(begin + Duration::Millis(10), 0, bytes0);
    if (bytes1 > 0) p_->CommStart(begin + Duration::Millis(10), 1, bytes1);
    p_->ComputeEnd(begin + Duration::Millis(40));
    t_ = begin + Duration::Millis(period_ms);
    if (bytes0 > 0) p_->CommEnd(t_, 0);
    if (bytes1 > 0) p_->CommEnd(t_, 1);
    p_->EndIteration(t_);
    ++n_;
    return p_->TakeReport();
  }
  // Feeds periods one by one; returns the 1-based iteration of every report.
  std::vector<uint32_t> ReportsAt(const std::vector<int64_t>& periods_ms) {
    std::vector<uint32_t> at;
    for (int64_t p : periods_ms) {
      if (auto r = Iterate(p)) {
        at.push_back(n_);
        last_ = *r;
      }
    }
    return at;
  }
  const core::JobProfile& last() const { return last_; }

 private:
  ClientProfiler* p_;
  Duration t_;
  uint32_t n_ = 0;
  core::JobProfile last_;
};

TEST(ClientProfilerTest, StableIterationsReportAtTheThirdWithTheMedians) {
  ClientProfiler p({}, kPeers, core::Flops::Of(5e15));
  Job job(&p);
  EXPECT_FALSE(job.Iterate(100));
  EXPECT_FALSE(job.Iterate(104));
  EXPECT_FALSE(p.settled());
  std::optional<core::JobProfile> r = job.Iterate(102);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->converged);
  EXPECT_EQ(r->samples, 3u);
  // The client measures a period from one iteration start to the next: 100 (the first
  // iteration's duration), 100, 104.
  EXPECT_EQ(r->iteration_period, Duration::Millis(100));
  EXPECT_EQ(r->compute_time, Duration::Millis(40));
  EXPECT_DOUBLE_EQ(r->overlap_start, 0.25);
  EXPECT_EQ(r->bytes_per_iteration, core::Bytes::Of(1500));
  ASSERT_EQ(r->peers.size(), 2u);
  EXPECT_EQ(r->peers[0].local_nic, NodeId(1));
  EXPECT_EQ(r->peers[0].remote_nic, NodeId(2));
  EXPECT_EQ(r->peers[0].bytes, core::Bytes::Of(1000));
  EXPECT_EQ(r->peers[1].local_nic, NodeId(3));
  EXPECT_EQ(r->peers[1].bytes, core::Bytes::Of(500));
  EXPECT_EQ(r->flops_per_iteration, core::Flops::Of(5e15));
  EXPECT_DOUBLE_EQ(r->compression_ratio, 1.0);
  EXPECT_TRUE(p.settled());
}

TEST(ClientProfilerTest, UnstableIterationsReportAtTheTenthAtTheLatest) {
  ClientProfiler p({}, kPeers, std::nullopt);
  Job job(&p);
  // Alternating 100 / 150 ms: never within 10 % of the median.
  std::vector<int64_t> periods;
  for (int i = 0; i < 12; ++i) periods.push_back(i % 2 == 0 ? 100 : 150);
  EXPECT_EQ(job.ReportsAt(periods), std::vector<uint32_t>{10});
  EXPECT_EQ(job.last().samples, 10u);
  // No W_j known: absent, cruxd estimates it from the compute time.
  EXPECT_FALSE(job.last().flops_per_iteration.has_value());
}

TEST(ClientProfilerTest, OnlyALastingChangeAboveTwentyPercentIsReportedAgain) {
  // 15 %: below the threshold, never reported again.
  {
    ClientProfiler p({}, kPeers, std::nullopt);
    Job job(&p);
    std::vector<int64_t> periods(3, 100);
    periods.insert(periods.end(), 30, 115);
    EXPECT_EQ(job.ReportsAt(periods), std::vector<uint32_t>{3});
  }
  // 50 % for good: reported again once the window's median has moved for 3 candidates.
  {
    ClientProfiler p({}, kPeers, std::nullopt);
    Job job(&p);
    std::vector<int64_t> periods(3, 100);
    periods.insert(periods.end(), 30, 150);
    const std::vector<uint32_t> at = job.ReportsAt(periods);
    ASSERT_EQ(at.size(), 2u);
    EXPECT_EQ(at[0], 3u);
    EXPECT_GT(at[1], 6u);
    EXPECT_LT(at[1], 12u);
    EXPECT_EQ(job.last().iteration_period, Duration::Millis(150));
  }
  // A burst of slow iterations that does not last: the median never moves.
  {
    ClientProfiler p({}, kPeers, std::nullopt);
    Job job(&p);
    std::vector<int64_t> periods(10, 100);
    periods.insert(periods.end(), 3, 300);
    periods.insert(periods.end(), 20, 100);
    EXPECT_EQ(job.ReportsAt(periods), std::vector<uint32_t>{3});
  }
}

TEST(ClientProfilerTest, AChangeIsNotSettledUntilItIsConfirmed) {
  ClientProfiler p({}, kPeers, std::nullopt);
  Job job(&p);
  for (int i = 0; i < 10; ++i) job.Iterate(100);
  ASSERT_TRUE(p.settled());
  // Slow samples move the median: the change is being confirmed, not yet reported.
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(job.Iterate(150));
  EXPECT_FALSE(p.settled());
}

// Quiet (the fast-forward's early gate, plan_applier.cc): settled, and every sample of the window
// within margin x the 20 % change threshold of the last report.
TEST(ClientProfilerTest, QuietWhenEverySampleOfTheWindowIsNearTheLastReport) {
  ClientProfiler p({}, kPeers, std::nullopt);
  Job job(&p);
  EXPECT_FALSE(p.Quiet(0.5));  // Nothing reported yet.
  for (int i = 0; i < 3; ++i) job.Iterate(100);
  ASSERT_TRUE(p.settled());
  EXPECT_TRUE(p.Quiet(0.5));
  // 108 ms: within 10 % (half the threshold) of the reported 100 ms.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(job.Iterate(108));
  EXPECT_TRUE(p.Quiet(0.5));
  // One iteration 15 % off: below the threshold (no report), but not within half of it. The
  // client measures a period from one iteration start to the next, so it is in the window after
  // the following iteration.
  EXPECT_FALSE(job.Iterate(115));
  EXPECT_FALSE(job.Iterate(100));
  EXPECT_TRUE(p.settled());
  EXPECT_FALSE(p.Quiet(0.5));
  EXPECT_TRUE(p.Quiet(1.0));
  // It stays not quiet while that sample is in the window (10 samples).
  for (int i = 0; i < 9; ++i) job.Iterate(100);
  EXPECT_FALSE(p.Quiet(0.5));
  job.Iterate(100);
  EXPECT_TRUE(p.Quiet(0.5));
  // Bytes count too: 1,800 bytes, 20 % more than reported.
  job.Iterate(100, 1300, 500);  // 1,800 bytes: 20 % more.
  EXPECT_FALSE(p.Quiet(0.5));
}

// QuietThrough / Replay (the fast-forward of an exactly periodic job, plan_applier.cc): its next
// iterations repeat the cycle's samples, so whether they would bring a report is known without
// simulating them; a sleep then replays them into the window.
TEST(ClientProfilerTest, RepeatingTheCyclesSamplesPredictsWhetherAReportWouldCome) {
  ClientProfiler p({}, kPeers, std::nullopt);
  Job job(&p);
  for (int i = 0; i < 10; ++i) job.Iterate(100);
  ASSERT_TRUE(p.settled());
  // 115 ms from now on: 15 %, below the 20 % threshold but not quiet. Filling the window with it
  // brings no report.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(job.Iterate(115));
  EXPECT_FALSE(p.Quiet(0.5));
  EXPECT_TRUE(p.QuietThrough(7, 1));
  // A cycle of two iterations, 115 and 150 ms: the window's median would reach 132.5 ms, a
  // change, so a report would come (the copy, not the profiler itself, saw it).
  EXPECT_FALSE(job.Iterate(150));
  job.Iterate(115);  // Completes the 150 ms sample: the window ends 115, 150.
  EXPECT_TRUE(p.settled());
  EXPECT_FALSE(p.QuietThrough(10, 2));
  EXPECT_TRUE(p.settled());
  // The last sample has the 150 ms period: repeating it alone is a change too.
  EXPECT_FALSE(p.QuietThrough(10, 1));
  // Back to 115 ms: the replay fills the window with it, and real iterations like it bring no
  // report afterwards (the next sample's period runs from the last real begin).
  EXPECT_FALSE(job.Iterate(115));
  EXPECT_TRUE(p.QuietThrough(10, 1));
  p.Replay(10, 1);
  EXPECT_EQ(p.samples(), 10u);
  EXPECT_TRUE(p.Quiet(1.0));
  EXPECT_FALSE(job.Iterate(115));
  EXPECT_FALSE(job.Iterate(115));
  EXPECT_TRUE(p.settled());
}

TEST(ClientProfilerTest, PeersWhoseMedianIsZeroAreLeftOut) {
  ClientProfiler p({}, kPeers, std::nullopt);
  Job job(&p);
  std::optional<core::JobProfile> r;
  for (int i = 0; i < 3 && !r; ++i) r = job.Iterate(100, 1000, 0);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->peers.size(), 1u);
  EXPECT_EQ(r->peers[0].remote_nic, NodeId(2));
  EXPECT_EQ(r->bytes_per_iteration, core::Bytes::Of(1000));
}

TEST(ClientProfilerTest, OptionsAreCheckedNamingTheField) {
  EXPECT_TRUE(ValidateClientProfilerOptions({}).ok());
  ClientProfilerOptions o;
  o.window = 2;
  EXPECT_EQ(ValidateClientProfilerOptions(o).message(), "control.profiler.window: must be >= 3");
  o = {};
  o.converge_min_iterations = 1;
  EXPECT_NE(ValidateClientProfilerOptions(o).message().find("converge_min_iterations"),
            std::string::npos);
  o = {};
  o.change_persistence = 0;
  EXPECT_NE(ValidateClientProfilerOptions(o).message().find("change_persistence"),
            std::string::npos);
  o = {};
  o.stable_spread = 1.5;
  EXPECT_NE(ValidateClientProfilerOptions(o).message().find("stable_spread"), std::string::npos);
}

}  // namespace
}  // namespace crux::sim::internal
