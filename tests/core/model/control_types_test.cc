// core::SignificantChange, the control loop's hysteresis, figure by figure: a profile report
// re-plans a job only when one of its figures moved by more than the threshold. Each figure is
// checked just inside and just outside the threshold, in both directions.
#include "crux/core/model/control_types.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace crux::core {
namespace {

constexpr double kThresholdPct = 10;

// A planned profile whose figures are all non-zero, with two peers.
JobProfile Planned() {
  JobProfile p;
  p.compute_time = Duration::Millis(100);
  p.flops_per_iteration = Flops::Of(1e15);
  p.iteration_period = Duration::Millis(200);
  p.overlap_start = 0.5;
  p.compression_ratio = 2.0;
  p.samples = 10;
  p.converged = true;
  p.bytes_per_iteration = Bytes::Of(1'000'000);
  p.peers = {{NodeId(1), NodeId(2), Bytes::Of(100'000)},
             {NodeId(1), NodeId(3), Bytes::Of(200'000)}};
  return p;
}

// One relative figure of a profile: its name, and how to scale it by a factor.
struct Figure {
  std::string name;
  std::function<void(JobProfile&, double)> scale;
};

std::vector<Figure> RelativeFigures() {
  return {
      {"compute time",
       [](JobProfile& p, double f) { p.compute_time = Duration::Seconds(0.1 * f); }},
      {"iteration period",
       [](JobProfile& p, double f) { p.iteration_period = Duration::Seconds(0.2 * f); }},
      {"flops per iteration",
       [](JobProfile& p, double f) { p.flops_per_iteration = Flops::Of(1e15 * f); }},
      {"bytes per iteration",
       [](JobProfile& p, double f) { p.bytes_per_iteration = Bytes::FromDouble(1e6 * f); }},
      {"compression ratio", [](JobProfile& p, double f) { p.compression_ratio = 2.0 * f; }},
      {"bytes to one peer",
       [](JobProfile& p, double f) { p.peers[1].bytes = Bytes::FromDouble(2e5 * f); }},
  };
}

TEST(SignificantChangeTest, TheSameProfileIsNotSignificant) {
  EXPECT_FALSE(SignificantChange(Planned(), Planned(), kThresholdPct));
}

TEST(SignificantChangeTest, EachFigureCountsOnlyWhenItMovesByMoreThanTheThreshold) {
  for (const Figure& figure : RelativeFigures()) {
    for (const double factor : {1.09, 0.91}) {
      JobProfile next = Planned();
      figure.scale(next, factor);
      EXPECT_FALSE(SignificantChange(Planned(), next, kThresholdPct))
          << figure.name << " x " << factor;
    }
    for (const double factor : {1.11, 0.89}) {
      JobProfile next = Planned();
      figure.scale(next, factor);
      EXPECT_TRUE(SignificantChange(Planned(), next, kThresholdPct))
          << figure.name << " x " << factor;
    }
  }
}

TEST(SignificantChangeTest, AMoveOfExactlyTheThresholdIsNotSignificant) {
  JobProfile next = Planned();
  next.bytes_per_iteration = Bytes::Of(1'100'000);  // +10 % exactly.
  EXPECT_FALSE(SignificantChange(Planned(), next, kThresholdPct));
  next.bytes_per_iteration = Bytes::Of(1'100'001);
  EXPECT_TRUE(SignificantChange(Planned(), next, kThresholdPct));
}

TEST(SignificantChangeTest, OverlapStartMovesAreMeasuredAbsolutelyInHundredths) {
  // 10 % means 0.1 of the [0, 1] range, not 10 % of the planned 0.5 (which would be 0.05).
  for (const double overlap : {0.56, 0.44, 0.59, 0.41}) {
    JobProfile next = Planned();
    next.overlap_start = overlap;
    EXPECT_FALSE(SignificantChange(Planned(), next, kThresholdPct)) << overlap;
  }
  for (const double overlap : {0.61, 0.39, 1.0, 0.0}) {
    JobProfile next = Planned();
    next.overlap_start = overlap;
    EXPECT_TRUE(SignificantChange(Planned(), next, kThresholdPct)) << overlap;
  }
}

TEST(SignificantChangeTest, ChangingTheNumberOfPeersIsSignificant) {
  JobProfile more = Planned();
  more.peers.push_back({NodeId(1), NodeId(4), Bytes::Of(1)});
  EXPECT_TRUE(SignificantChange(Planned(), more, kThresholdPct));
  JobProfile fewer = Planned();
  fewer.peers.pop_back();
  EXPECT_TRUE(SignificantChange(Planned(), fewer, kThresholdPct));
  JobProfile none = Planned();
  none.peers.clear();
  EXPECT_TRUE(SignificantChange(Planned(), none, kThresholdPct));
}

TEST(SignificantChangeTest, APeerOnAnotherNicIsSignificantWhateverItsBytes) {
  JobProfile remote = Planned();
  remote.peers[0].remote_nic = NodeId(9);
  EXPECT_TRUE(SignificantChange(Planned(), remote, kThresholdPct));
  JobProfile local = Planned();
  local.peers[0].local_nic = NodeId(9);
  EXPECT_TRUE(SignificantChange(Planned(), local, kThresholdPct));
}

TEST(SignificantChangeTest, PerPeerBytesCountEvenWhenTheTotalStaysTheSame) {
  // 40 % of one peer's bytes move to the other: the total (and every other figure) is unchanged.
  JobProfile next = Planned();
  next.peers[0].bytes = Bytes::Of(140'000);
  next.peers[1].bytes = Bytes::Of(160'000);
  EXPECT_TRUE(SignificantChange(Planned(), next, kThresholdPct));
}

TEST(SignificantChangeTest, SamplesAndConvergenceAloneAreNotSignificant) {
  JobProfile next = Planned();
  next.samples = 1000;
  next.converged = false;
  EXPECT_FALSE(SignificantChange(Planned(), next, kThresholdPct));
}

TEST(SignificantChangeTest, ThresholdZeroOrBelowMakesEveryReportSignificant) {
  EXPECT_TRUE(SignificantChange(Planned(), Planned(), 0));
  EXPECT_TRUE(SignificantChange(Planned(), Planned(), -5));
  EXPECT_TRUE(SignificantChange(JobProfile{}, JobProfile{}, 0));
}

TEST(SignificantChangeTest, FromAPlannedZeroAnyChangeCounts) {
  // However large the threshold: no percentage of 0 can absorb a change.
  constexpr double kHuge = 1e6;
  JobProfile zero = Planned();
  zero.bytes_per_iteration = Bytes::Of(0);
  zero.peers[1].bytes = Bytes::Of(0);
  zero.flops_per_iteration.reset();  // Absent counts as 0.
  zero.compute_time = Duration::Zero();
  EXPECT_FALSE(SignificantChange(zero, zero, kHuge));

  JobProfile bytes = zero;
  bytes.bytes_per_iteration = Bytes::Of(1);
  EXPECT_TRUE(SignificantChange(zero, bytes, kHuge));
  JobProfile peer = zero;
  peer.peers[1].bytes = Bytes::Of(1);
  EXPECT_TRUE(SignificantChange(zero, peer, kHuge));
  JobProfile flops = zero;
  flops.flops_per_iteration = Flops::Of(1);
  EXPECT_TRUE(SignificantChange(zero, flops, kHuge));
  JobProfile compute = zero;
  compute.compute_time = Duration::Nanos(1);
  EXPECT_TRUE(SignificantChange(zero, compute, kHuge));
}

}  // namespace
}  // namespace crux::core
