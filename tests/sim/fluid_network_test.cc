#include "crux/sim/fluid_network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace crux::sim {
namespace {

using R = FluidNetwork::ResourceId;
constexpr int64_t kSec = 1'000'000'000;

// Runs the network until `until` and returns tag -> finish time.
std::map<uint64_t, int64_t> Drain(FluidNetwork& net, int64_t now, int64_t until = INT64_MAX) {
  std::map<uint64_t, int64_t> done;
  while (true) {
    const int64_t t = net.NextFinishTime(now);
    if (t == FluidNetwork::kNever || t > until) break;
    now = t;
    net.PopFinished(t, [&](uint64_t tag, double) { done[tag] = t; });
  }
  return done;
}

TEST(FluidNetworkTest, SingleFlowTakesSizeOverCapacity) {
  FluidNetwork net;
  const R link = net.AddResource(1e9);
  const std::vector<R> path = {link};
  net.AddFlow(path, 0, 125e6, 0, 7);  // 1 Gbit over 1 Gbps.
  auto done = Drain(net, 0);
  ASSERT_EQ(done.count(7), 1u);
  EXPECT_EQ(done[7], kSec);
  EXPECT_EQ(net.active_flows(), 0u);
}

TEST(FluidNetworkTest, EqualFlowsShareALinkAndTheSurvivorSpeedsUp) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto a = net.AddFlow(path, 0, 125e6, 0, 1);  // 1 Gbit.
  const auto b = net.AddFlow(path, 0, 250e6, 0, 2);  // 2 Gbit.
  ASSERT_EQ(net.NextFinishTime(0), 2 * kSec);        // Each at 0.5 Gbps.
  EXPECT_DOUBLE_EQ(net.Rate(a), 0.5e9);
  EXPECT_DOUBLE_EQ(net.Rate(b), 0.5e9);
  auto done = Drain(net, 0);
  EXPECT_EQ(done[1], 2 * kSec);
  EXPECT_EQ(done[2], 3 * kSec);  // 1 Gbit left at full rate.
}

TEST(FluidNetworkTest, MaxMinFairnessGivesTheUnusedShareToUnconstrainedFlows) {
  // f1 on A; f2 on A and B; f3 on B. B (4) is the bottleneck: f2 = f3 = 2, f1 = 10 - 2 = 8.
  FluidNetwork net;
  const R a = net.AddResource(10e9);
  const R b = net.AddResource(4e9);
  const std::vector<R> p1 = {a}, p2 = {a, b}, p3 = {b};
  const auto f1 = net.AddFlow(p1, 0, 1e12, 0, 1);
  const auto f2 = net.AddFlow(p2, 0, 1e12, 0, 2);
  const auto f3 = net.AddFlow(p3, 0, 1e12, 0, 3);
  net.NextFinishTime(0);
  EXPECT_NEAR(net.Rate(f1), 8e9, 1);
  EXPECT_NEAR(net.Rate(f2), 2e9, 1);
  EXPECT_NEAR(net.Rate(f3), 2e9, 1);
}

TEST(FluidNetworkTest, StrictPriorityStarvesTheLowerLevelUntilTheHigherOneLeaves) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto low = net.AddFlow(path, 3, 125e6, 0, 1);
  const auto high = net.AddFlow(path, 0, 125e6, 0, 2);
  net.NextFinishTime(0);
  EXPECT_DOUBLE_EQ(net.Rate(high), 1e9);
  EXPECT_EQ(net.Rate(low), 0.0);
  EXPECT_DOUBLE_EQ(net.Remaining(low, kSec / 2), 125e6);  // Nothing moved.
  auto done = Drain(net, 0);
  EXPECT_EQ(done[2], kSec);
  EXPECT_EQ(done[1], 2 * kSec);
}

TEST(FluidNetworkTest, LowerLevelGetsWhatTheHigherLevelCannotUse) {
  // The high flow is limited to 3 Gbps elsewhere; the low flow gets the other 7 of the shared
  // 10 Gbps link.
  FluidNetwork net;
  const R shared = net.AddResource(10e9);
  const R narrow = net.AddResource(3e9);
  const std::vector<R> hp = {shared, narrow}, lp = {shared};
  const auto high = net.AddFlow(hp, 0, 1e12, 0, 1);
  const auto low = net.AddFlow(lp, 1, 1e12, 0, 2);
  net.NextFinishTime(0);
  EXPECT_NEAR(net.Rate(high), 3e9, 1);
  EXPECT_NEAR(net.Rate(low), 7e9, 1);
}

TEST(FluidNetworkTest, CapacityZeroStallsAndRecoveryResumes) {
  FluidNetwork net;
  const R link = net.AddResource(1e9);
  const std::vector<R> path = {link};
  const auto f = net.AddFlow(path, 0, 125e6, 0, 1);
  EXPECT_EQ(net.NextFinishTime(0), kSec);
  net.SetCapacity(link, 0);  // Down at 0.5 s.
  EXPECT_EQ(net.NextFinishTime(kSec / 2), FluidNetwork::kNever);
  EXPECT_NEAR(net.Remaining(f, 5 * kSec), 62.5e6, 1);
  net.SetCapacity(link, 1e9);  // Up at 5 s: 0.5 s of transfer left.
  EXPECT_EQ(net.NextFinishTime(5 * kSec), 5 * kSec + kSec / 2);
}

TEST(FluidNetworkTest, RerouteKeepsTheRemainingBytes) {
  FluidNetwork net;
  const R a = net.AddResource(1e9);
  const R b = net.AddResource(2e9);
  const std::vector<R> pa = {a}, pb = {b};
  const auto f = net.AddFlow(pa, 0, 250e6, 0, 1);  // 2 Gbit: 2 s on a.
  net.NextFinishTime(0);
  net.Reroute(f, pb, kSec);  // 1 Gbit left, at 2 Gbps: 0.5 s.
  EXPECT_EQ(net.NextFinishTime(kSec), kSec + kSec / 2);
}

TEST(FluidNetworkTest, TransmittedBytesAddUp) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto a = net.AddFlow(path, 0, 125e6, 0, 1);
  net.AddFlow(path, 0, 125e6, 0, 2);
  net.NextFinishTime(0);
  // At 1 s each has sent 0.5 Gbit = 62.5 MB.
  EXPECT_NEAR(net.RemoveFlow(a, kSec), 62.5e6, 1);
  double sent = 0;
  int64_t now = kSec;
  while (true) {
    const int64_t t = net.NextFinishTime(now);
    if (t == FluidNetwork::kNever) break;
    now = t;
    net.PopFinished(t, [&](uint64_t, double bytes) { sent = bytes; });
  }
  EXPECT_DOUBLE_EQ(sent, 125e6);
  EXPECT_EQ(now, kSec + kSec / 2);
}

TEST(FluidNetworkTest, ShiftTimeMovesFinishEvents) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  net.AddFlow(path, 0, 125e6, 0, 1);
  EXPECT_EQ(net.NextFinishTime(0), kSec);
  net.ShiftTime(10 * kSec);
  EXPECT_EQ(net.NextFinishTime(10 * kSec), 11 * kSec);
}

// Reference allocation: per level, repeatedly freeze the flows of the resource with the
// smallest fair share (brute force, no heap, no incrementality).
std::vector<double> ReferenceRates(const std::vector<double>& caps,
                                   const std::vector<std::vector<R>>& paths,
                                   const std::vector<int>& levels, const std::vector<bool>& alive) {
  std::vector<double> residual = caps;
  std::vector<double> rate(paths.size(), 0);
  std::vector<int> order_levels(levels.begin(), levels.end());
  std::sort(order_levels.begin(), order_levels.end());
  order_levels.erase(std::unique(order_levels.begin(), order_levels.end()), order_levels.end());
  for (int level : order_levels) {
    std::vector<bool> frozen(paths.size(), false);
    while (true) {
      double best = 1e300;
      int best_r = -1;
      for (size_t r = 0; r < caps.size(); ++r) {
        int n = 0;
        for (size_t f = 0; f < paths.size(); ++f) {
          if (!alive[f] || frozen[f] || levels[f] != level) continue;
          if (std::count(paths[f].begin(), paths[f].end(), static_cast<R>(r))) ++n;
        }
        if (n == 0) continue;
        const double share = std::max(0.0, residual[r]) / n;
        if (share < best) {
          best = share;
          best_r = static_cast<int>(r);
        }
      }
      if (best_r < 0) break;
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f] || frozen[f] || levels[f] != level) continue;
        if (!std::count(paths[f].begin(), paths[f].end(), static_cast<R>(best_r))) continue;
        frozen[f] = true;
        rate[f] = best;
        for (R r : paths[f]) residual[r] -= best;
      }
    }
  }
  return rate;
}

TEST(FluidNetworkTest, IncrementalRatesMatchAFullRecomputationUnderRandomChurn) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    FluidNetwork net;
    const int nr = 12;
    std::vector<double> caps;
    for (int r = 0; r < nr; ++r) {
      caps.push_back(1e9 * (1 + rng() % 8));
      net.AddResource(caps.back());
    }
    std::vector<std::vector<R>> paths;
    std::vector<int> levels;
    std::vector<bool> alive;
    std::vector<FluidNetwork::FlowId> ids;
    int64_t now = 0;
    for (int step = 0; step < 60; ++step) {
      const int op = static_cast<int>(rng() % 4);
      if (op <= 1 || paths.empty()) {  // Add.
        std::vector<R> path;
        const int hops = 1 + static_cast<int>(rng() % 3);
        while (static_cast<int>(path.size()) < hops) {
          const R r = static_cast<R>(rng() % nr);
          if (std::find(path.begin(), path.end(), r) == path.end()) path.push_back(r);
        }
        paths.push_back(path);
        levels.push_back(static_cast<int>(rng() % 3));
        alive.push_back(true);
        ids.push_back(net.AddFlow(path, levels.back(), 1e15, now, paths.size() - 1));
      } else if (op == 2) {  // Remove a live flow.
        const size_t f = rng() % paths.size();
        if (alive[f]) {
          net.RemoveFlow(ids[f], now);
          alive[f] = false;
        }
      } else {  // Capacity change.
        const R r = static_cast<R>(rng() % nr);
        caps[r] = 1e9 * (rng() % 6);  // Sometimes 0.
        net.SetCapacity(r, caps[r]);
      }
      now += 1000;
      net.NextFinishTime(now - 1000);
      const std::vector<double> expect = ReferenceRates(caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        ASSERT_NEAR(net.Rate(ids[f]), expect[f], 1e-6 * std::max(1e3, expect[f]))
            << "trial " << trial << " step " << step << " flow " << f;
      }
    }
  }
}

// The same with flows that finish on their own: removal-only batches take the incremental path
// that keeps flows frozen below the smallest removed rate.
TEST(FluidNetworkTest, IncrementalRatesMatchAFullRecomputationWhenFlowsFinish) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    FluidNetwork net;
    const int nr = 10;
    std::vector<double> caps;
    for (int r = 0; r < nr; ++r) {
      caps.push_back(1e9 * (1 + rng() % 8));
      net.AddResource(caps.back());
    }
    std::vector<std::vector<R>> paths;
    std::vector<int> levels;
    std::vector<bool> alive;
    std::vector<FluidNetwork::FlowId> ids;
    auto check = [&](int64_t t) {
      const std::vector<double> expect = ReferenceRates(caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        ASSERT_NEAR(net.Rate(ids[f]), expect[f], 1e-6 * std::max(1e3, expect[f]))
            << "trial " << trial << " t " << t << " flow " << f;
      }
    };
    int64_t now = 0;
    for (int step = 0; step < 40; ++step) {
      // Start 1-3 flows of 10 kB..1 MB, then let 50 us pass, checking after every finish.
      const int starts = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < starts; ++k) {
        std::vector<R> path;
        const int hops = 1 + static_cast<int>(rng() % 3);
        while (static_cast<int>(path.size()) < hops) {
          const R r = static_cast<R>(rng() % nr);
          if (std::find(path.begin(), path.end(), r) == path.end()) path.push_back(r);
        }
        paths.push_back(path);
        levels.push_back(static_cast<int>(rng() % 2));
        alive.push_back(true);
        ids.push_back(net.AddFlow(path, levels.back(), 1e4 + static_cast<double>(rng() % 1000000),
                                  now, paths.size() - 1));
      }
      net.NextFinishTime(now);
      check(now);
      const int64_t until = now + 50'000;
      while (true) {
        const int64_t t = net.NextFinishTime(now);
        if (t > until) break;
        now = t;
        net.PopFinished(t, [&](uint64_t tag, double) { alive[tag] = false; });
        net.NextFinishTime(now);
        check(now);
      }
      now = until;
    }
  }
}

}  // namespace
}  // namespace crux::sim
