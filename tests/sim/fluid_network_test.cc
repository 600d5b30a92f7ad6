#include "crux/sim/fluid_network.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

namespace crux::sim {
namespace {

using core::Duration;
using R = FluidNetwork::ResourceId;
constexpr Duration kT0 = Duration::Zero();
Duration Sec(double s) { return Duration::Seconds(s); }
Duration Ns(int64_t ns) { return Duration::Nanos(ns); }

// Runs the network until `until` and returns tag -> finish time.
std::map<uint64_t, Duration> Drain(FluidNetwork& net, Duration now,
                                   Duration until = Duration::Infinite()) {
  std::map<uint64_t, Duration> done;
  while (true) {
    const Duration t = net.NextFinishTime(now);
    if (t.IsInfinite() || t > until) break;
    now = t;
    net.PopFinished(t, [&](uint64_t tag, double) { done[tag] = t; });
  }
  return done;
}

TEST(FluidNetworkTest, SingleFlowTakesSizeOverCapacity) {
  FluidNetwork net;
  const R link = net.AddResource(1e9);
  const std::vector<R> path = {link};
  net.AddFlow(path, 0, 125e6, kT0, 7);  // 1 Gbit over 1 Gbps.
  auto done = Drain(net, kT0);
  ASSERT_EQ(done.count(7), 1u);
  EXPECT_EQ(done[7], Sec(1));
  EXPECT_EQ(net.active_flows(), 0u);
}

TEST(FluidNetworkTest, EqualFlowsShareALinkAndTheSurvivorSpeedsUp) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto a = net.AddFlow(path, 0, 125e6, kT0, 1);  // 1 Gbit.
  const auto b = net.AddFlow(path, 0, 250e6, kT0, 2);  // 2 Gbit.
  ASSERT_EQ(net.NextFinishTime(kT0), Sec(2));          // Each at 0.5 Gbps.
  EXPECT_DOUBLE_EQ(net.Rate(a), 0.5e9);
  EXPECT_DOUBLE_EQ(net.Rate(b), 0.5e9);
  auto done = Drain(net, kT0);
  EXPECT_EQ(done[1], Sec(2));
  EXPECT_EQ(done[2], Sec(3));  // 1 Gbit left at full rate.
}

TEST(FluidNetworkTest, MaxMinFairnessGivesTheUnusedShareToUnconstrainedFlows) {
  // f1 on A; f2 on A and B; f3 on B. B (4) is the bottleneck: f2 = f3 = 2, f1 = 10 - 2 = 8.
  FluidNetwork net;
  const R a = net.AddResource(10e9);
  const R b = net.AddResource(4e9);
  const std::vector<R> p1 = {a}, p2 = {a, b}, p3 = {b};
  const auto f1 = net.AddFlow(p1, 0, 1e12, kT0, 1);
  const auto f2 = net.AddFlow(p2, 0, 1e12, kT0, 2);
  const auto f3 = net.AddFlow(p3, 0, 1e12, kT0, 3);
  net.NextFinishTime(kT0);
  EXPECT_NEAR(net.Rate(f1), 8e9, 1);
  EXPECT_NEAR(net.Rate(f2), 2e9, 1);
  EXPECT_NEAR(net.Rate(f3), 2e9, 1);
}

// A resource limits a flow when it is the flow's bottleneck: B (4) does, A (10) does not.
TEST(FluidNetworkTest, LimitsAFlowOnlyWhereAFlowIsBottlenecked) {
  FluidNetwork net;
  const R a = net.AddResource(10e9);
  const R b = net.AddResource(4e9);
  const R idle = net.AddResource(1e9);
  const std::vector<R> path = {a, b};
  net.AddFlow(path, 0, 1e9, kT0, 1);
  net.NextFinishTime(kT0);
  EXPECT_TRUE(net.LimitsAFlow(b));
  EXPECT_FALSE(net.LimitsAFlow(a));
  EXPECT_FALSE(net.LimitsAFlow(idle));
  Drain(net, kT0);
  EXPECT_FALSE(net.LimitsAFlow(b));  // Gone with its flow.
}

TEST(FluidNetworkTest, StrictPriorityStarvesTheLowerLevelUntilTheHigherOneLeaves) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto low = net.AddFlow(path, 3, 125e6, kT0, 1);
  const auto high = net.AddFlow(path, 0, 125e6, kT0, 2);
  net.NextFinishTime(kT0);
  EXPECT_DOUBLE_EQ(net.Rate(high), 1e9);
  EXPECT_EQ(net.Rate(low), 0.0);
  EXPECT_DOUBLE_EQ(net.Remaining(low, Sec(0.5)), 125e6);  // Nothing moved.
  auto done = Drain(net, kT0);
  EXPECT_EQ(done[2], Sec(1));
  EXPECT_EQ(done[1], Sec(2));
}

TEST(FluidNetworkTest, LowerLevelGetsWhatTheHigherLevelCannotUse) {
  // The high flow is limited to 3 Gbps elsewhere; the low flow gets the other 7 of the shared
  // 10 Gbps link.
  FluidNetwork net;
  const R shared = net.AddResource(10e9);
  const R narrow = net.AddResource(3e9);
  const std::vector<R> hp = {shared, narrow}, lp = {shared};
  const auto high = net.AddFlow(hp, 0, 1e12, kT0, 1);
  const auto low = net.AddFlow(lp, 1, 1e12, kT0, 2);
  net.NextFinishTime(kT0);
  EXPECT_NEAR(net.Rate(high), 3e9, 1);
  EXPECT_NEAR(net.Rate(low), 7e9, 1);
}

TEST(FluidNetworkTest, CapacityZeroStallsAndRecoveryResumes) {
  FluidNetwork net;
  const R link = net.AddResource(1e9);
  const std::vector<R> path = {link};
  const auto f = net.AddFlow(path, 0, 125e6, kT0, 1);
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(1));
  net.SetCapacity(link, 0);  // Down at 0.5 s.
  EXPECT_EQ(net.NextFinishTime(Sec(0.5)), Duration::Infinite());
  EXPECT_NEAR(net.Remaining(f, Sec(5)), 62.5e6, 1);
  net.SetCapacity(link, 1e9);  // Up at 5 s: 0.5 s of transfer left.
  EXPECT_EQ(net.NextFinishTime(Sec(5)), Sec(5.5));
}

TEST(FluidNetworkTest, RerouteKeepsTheRemainingBytes) {
  FluidNetwork net;
  const R a = net.AddResource(1e9);
  const R b = net.AddResource(2e9);
  const std::vector<R> pa = {a}, pb = {b};
  const auto f = net.AddFlow(pa, 0, 250e6, kT0, 1);  // 2 Gbit: 2 s on a.
  net.NextFinishTime(kT0);
  net.Reroute(f, pb, Sec(1));  // 1 Gbit left, at 2 Gbps: 0.5 s.
  EXPECT_EQ(net.NextFinishTime(Sec(1)), Sec(1.5));
}

TEST(FluidNetworkTest, TransmittedBytesAddUp) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto a = net.AddFlow(path, 0, 125e6, kT0, 1);
  net.AddFlow(path, 0, 125e6, kT0, 2);
  net.NextFinishTime(kT0);
  // At 1 s each has sent 0.5 Gbit = 62.5 MB.
  EXPECT_NEAR(net.RemoveFlow(a, Sec(1)), 62.5e6, 1);
  double sent = 0;
  Duration now = Sec(1);
  while (true) {
    const Duration t = net.NextFinishTime(now);
    if (t.IsInfinite()) break;
    now = t;
    net.PopFinished(t, [&](uint64_t, double bytes) { sent = bytes; });
  }
  EXPECT_DOUBLE_EQ(sent, 125e6);
  EXPECT_EQ(now, Sec(1.5));
}

TEST(FluidNetworkTest, ShiftFlowMovesItsFinishEventBothWays) {
  FluidNetwork net;
  const std::vector<R> a = {net.AddResource(1e9)};
  const std::vector<R> b = {net.AddResource(1e9)};
  const FluidNetwork::FlowId f = net.AddFlow(a, 0, 125e6, kT0, 1);
  net.AddFlow(b, 0, 250e6, kT0, 2);
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(1));
  net.ShiftFlows({&f, 1}, Sec(10));  // Asleep: the other flow finishes first now.
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(2));
  EXPECT_DOUBLE_EQ(net.Remaining(f, Sec(10.5)), 62.5e6);  // Its clock moved with it.
  net.ShiftFlows({&f, 1}, Sec(-9.5));  // Woken early: half a second later than without the sleep.
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(1.5));
  std::vector<uint64_t> done;
  net.PopFinished(Sec(1.5), [&done](uint64_t tag, double) { done.push_back(tag); });
  EXPECT_EQ(done, std::vector<uint64_t>{1});
}

// Flows of one path and level are one bundle with one clock: joining later, they still finish
// where max-min puts them (1 Gbps link: A alone for 0.5 s, then A and B at 0.5 Gbps each).
TEST(FluidNetworkTest, FlowsOfOnePathShareABundleAndFinishWhereMaxMinPutsThem) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const auto a = net.AddFlow(path, 0, 125e6, kT0, 1);  // 1 Gbit.
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(1));
  const auto b = net.AddFlow(path, 0, 31.25e6, Sec(0.5), 2);  // 0.25 Gbit.
  EXPECT_EQ(net.active_bundles(), 1u);
  EXPECT_EQ(net.NextFinishTime(Sec(0.5)), Sec(1));  // B: 0.25 Gbit at 0.5 Gbps.
  EXPECT_DOUBLE_EQ(net.Rate(a), 0.5e9);
  EXPECT_DOUBLE_EQ(net.Rate(b), 0.5e9);
  EXPECT_DOUBLE_EQ(net.Remaining(a, Sec(0.75)), 62.5e6 - 15.625e6);
  EXPECT_DOUBLE_EQ(net.Remaining(b, Sec(0.75)), 31.25e6 - 15.625e6);
  std::map<uint64_t, double> sent;
  std::map<uint64_t, Duration> at;
  Duration now = Sec(0.5);
  while (true) {
    const Duration t = net.NextFinishTime(now);
    if (t.IsInfinite()) break;
    now = t;
    net.PopFinished(t, [&](uint64_t tag, double bytes) {
      sent[tag] = bytes;
      at[tag] = t;
    });
  }
  EXPECT_EQ(at[2], Sec(1));
  EXPECT_EQ(at[1], Sec(1.25));  // 31.25 MB left at 1 s, alone at 1 Gbps.
  EXPECT_DOUBLE_EQ(sent[1], 125e6);
  EXPECT_DOUBLE_EQ(sent[2], 31.25e6);
  EXPECT_EQ(net.active_bundles(), 0u);
  // A different level or path is a bundle of its own.
  const std::vector<R> other = {net.AddResource(1e9)};
  net.AddFlow(path, 0, 1e6, now, 3);
  net.AddFlow(path, 1, 1e6, now, 4);
  net.AddFlow(other, 0, 1e6, now, 5);
  net.AddFlow(path, 0, 1e6, now, 6);
  EXPECT_EQ(net.active_bundles(), 3u);
  EXPECT_EQ(net.active_flows(), 4u);
}

// A sleeping group's flows move together: two flows of one bundle shift as one clock.
TEST(FluidNetworkTest, ShiftFlowsMovesABundleOnce) {
  FluidNetwork net;
  const std::vector<R> path = {net.AddResource(1e9)};
  const FluidNetwork::FlowId f[] = {net.AddFlow(path, 0, 62.5e6, kT0, 1),
                                    net.AddFlow(path, 0, 125e6, kT0, 2)};
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(1));  // Each at 0.5 Gbps.
  net.ShiftFlows(f, Sec(2));
  EXPECT_EQ(net.NextFinishTime(kT0), Sec(3));
  std::vector<uint64_t> done;
  net.PopFinished(Sec(3), [&done](uint64_t tag, double) { done.push_back(tag); });
  EXPECT_EQ(done, std::vector<uint64_t>{1});
  EXPECT_EQ(net.NextFinishTime(Sec(3)), Sec(3.5));  // 62.5 MB left at 1 Gbps.
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
    if (trial % 2 == 0) net.set_small_component(0);  // The local recomputation only.
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
    Duration now;
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
      now += Ns(1000);
      net.NextFinishTime(now - Ns(1000));
      const std::vector<double> expect = ReferenceRates(caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        ASSERT_NEAR(net.Rate(ids[f]), expect[f], 1e-6 * std::max(1e3, expect[f]))
            << "trial " << trial << " step " << step << " flow " << f;
      }
    }
  }
}

// The same with flows that finish on their own.
TEST(FluidNetworkTest, IncrementalRatesMatchAFullRecomputationWhenFlowsFinish) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20; ++trial) {
    FluidNetwork net;
    if (trial % 2 == 0) net.set_small_component(0);  // The local recomputation only.
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
    auto check = [&](Duration t) {
      const std::vector<double> expect = ReferenceRates(caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        ASSERT_NEAR(net.Rate(ids[f]), expect[f], 1e-6 * std::max(1e3, expect[f]))
            << "trial " << trial << " t " << t.nanos() << " flow " << f;
      }
    };
    Duration now;
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
      const Duration until = now + Ns(50'000);
      while (true) {
        const Duration t = net.NextFinishTime(now);
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

// ---- Issue #30: bundles against one bundle per flow ----

// Many flows on a few paths (collectives on pinned paths), several levels, flows that finish,
// leave early, are re-routed and see capacities change: with bundles every flow finishes at the
// same instant (within rounding to the nanosecond) and with the same bytes as with a bundle of
// its own per flow, and rates are the max-min ones throughout.
TEST(FluidNetworkTest, BundlesFinishEveryFlowWhereFlowsOfTheirOwnDo) {
  std::mt19937 rng(30);
  for (int trial = 0; trial < 12; ++trial) {
    FluidNetwork bundled, single;
    single.set_bundling(false);
    if (trial % 2 == 0) {
      bundled.set_small_component(0);
      single.set_small_component(0);
    }
    const int nr = 8;
    std::vector<double> caps;
    for (int r = 0; r < nr; ++r) {
      caps.push_back(1e9 * (1 + rng() % 8));
      bundled.AddResource(caps.back());
      single.AddResource(caps.back());
    }
    std::vector<std::vector<R>> shapes;  // The few paths every flow takes one of.
    for (int k = 0; k < 5; ++k) {
      std::vector<R> path;
      const int hops = 1 + static_cast<int>(rng() % 3);
      while (static_cast<int>(path.size()) < hops) {
        const R r = static_cast<R>(rng() % nr);
        if (std::find(path.begin(), path.end(), r) == path.end()) path.push_back(r);
      }
      shapes.push_back(path);
    }
    std::vector<std::vector<R>> paths;
    std::vector<int> levels;
    std::vector<bool> alive;
    std::vector<FluidNetwork::FlowId> ids_b, ids_s;
    std::map<uint64_t, std::pair<Duration, double>> done_b, done_s;
    size_t peak_flows = 0;
    size_t peak_bundles = 0;
    Duration now;
    // Runs both networks to `until`; flows the two finish within a few nanoseconds of each
    // other may land on either side of it, so both keep running to the same instant.
    auto run = [&](FluidNetwork& net, std::map<uint64_t, std::pair<Duration, double>>& done,
                   Duration from, Duration until) {
      Duration t0 = from;
      while (true) {
        const Duration t = net.NextFinishTime(t0);
        if (t.IsInfinite() || t > until) break;  // Flows on a link that is down stay.
        t0 = t;
        net.PopFinished(t, [&](uint64_t tag, double bytes) { done[tag] = {t, bytes}; });
      }
    };
    for (int step = 0; step < 50; ++step) {
      const int ops = 1 + static_cast<int>(rng() % 10);
      for (int k = 0; k < ops; ++k) {
        const int op = static_cast<int>(rng() % 10);
        if (op < 7 || paths.empty()) {  // A flow on one of the shapes (often a bundle's).
          paths.push_back(shapes[rng() % shapes.size()]);
          levels.push_back(static_cast<int>(rng() % 2));
          alive.push_back(true);
          const double bytes = 1e4 + static_cast<double>(rng() % 2'000'000);
          ids_b.push_back(
              bundled.AddFlow(paths.back(), levels.back(), bytes, now, paths.size() - 1));
          ids_s.push_back(
              single.AddFlow(paths.back(), levels.back(), bytes, now, paths.size() - 1));
        } else if (op == 7 || op == 8) {  // Leave or re-route a flow both still run.
          const size_t f = rng() % paths.size();
          if (!alive[f] || done_b.count(f) || done_s.count(f)) continue;
          if (op == 7) {
            ASSERT_NEAR(bundled.RemoveFlow(ids_b[f], now), single.RemoveFlow(ids_s[f], now), 1.0);
            alive[f] = false;
          } else {
            paths[f] = shapes[rng() % shapes.size()];
            bundled.Reroute(ids_b[f], paths[f], now);
            single.Reroute(ids_s[f], paths[f], now);
          }
        } else {
          const R r = static_cast<R>(rng() % nr);
          caps[r] = rng() % 6 == 0 ? 0.0 : 1e9 * (1 + rng() % 8);
          bundled.SetCapacity(r, caps[r]);
          single.SetCapacity(r, caps[r]);
        }
      }
      for (size_t f = 0; f < paths.size(); ++f) {
        if (done_b.count(f) || done_s.count(f)) alive[f] = false;
      }
      bundled.NextFinishTime(now);
      single.NextFinishTime(now);
      peak_flows = std::max(peak_flows, bundled.active_flows());
      peak_bundles = std::max(peak_bundles, bundled.active_bundles());
      const std::vector<double> expect = ReferenceRates(caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        const double tol = 1e-7 * std::max(1e6, expect[f]);
        ASSERT_NEAR(bundled.Rate(ids_b[f]), expect[f], tol) << "trial " << trial << " flow " << f;
        ASSERT_NEAR(single.Rate(ids_s[f]), expect[f], tol) << "trial " << trial << " flow " << f;
        ASSERT_NEAR(bundled.Remaining(ids_b[f], now), single.Remaining(ids_s[f], now), 1.0);
      }
      const Duration until = now + Ns(1 + static_cast<int64_t>(rng() % 400'000));
      run(bundled, done_b, now, until);
      run(single, done_s, now, until);
      now = until;
    }
    run(bundled, done_b, now, Duration::Infinite());
    run(single, done_s, now, Duration::Infinite());
    EXPECT_LT(peak_bundles, peak_flows) << "trial " << trial;  // Bundles did form.
    ASSERT_EQ(done_b.size(), done_s.size()) << "trial " << trial;
    for (const auto& [tag, bs] : done_s) {
      ASSERT_EQ(done_b.count(tag), 1u) << "trial " << trial << " flow " << tag;
      const auto& [t_b, bytes_b] = done_b.at(tag);
      EXPECT_LE(std::abs((t_b - bs.first).nanos()), 8) << "trial " << trial << " flow " << tag;
      EXPECT_NEAR(bytes_b, bs.second, 1.0) << "trial " << trial << " flow " << tag;
    }
  }
}

// Thousands of paths come and go (the key table grows, and erases shift entries back): at
// every step there is exactly one bundle per live (path, level).
TEST(FluidNetworkTest, OneBundlePerLivePathAndLevelWhilePathsComeAndGo) {
  std::mt19937 rng(31);
  FluidNetwork net;
  const int nr = 120;
  for (int r = 0; r < nr; ++r) net.AddResource(1e9);
  std::map<std::pair<int, std::vector<R>>, int> live;  // (level, path) -> flows.
  std::vector<std::pair<FluidNetwork::FlowId, std::pair<int, std::vector<R>>>> flows;
  for (int step = 0; step < 20'000; ++step) {
    if (flows.empty() || rng() % 5 < 3) {
      std::vector<R> path = {static_cast<R>(rng() % nr), static_cast<R>(rng() % nr)};
      if (path[0] == path[1]) path.pop_back();
      const int level = static_cast<int>(rng() % 2);
      flows.push_back({net.AddFlow(path, level, 1e15, kT0, flows.size()), {level, path}});
      ++live[flows.back().second];
    } else {
      const size_t i = rng() % flows.size();
      net.RemoveFlow(flows[i].first, kT0);
      if (--live[flows[i].second] == 0) live.erase(flows[i].second);
      flows[i] = flows.back();
      flows.pop_back();
    }
    ASSERT_EQ(net.active_bundles(), live.size()) << "step " << step;
    ASSERT_EQ(net.active_flows(), flows.size()) << "step " << step;
  }
  for (const auto& [id, key] : flows) {
    ASSERT_EQ(net.Level(id), key.first);
    ASSERT_TRUE(std::ranges::equal(net.Resources(id), key.second));
  }
}

// ---- Issue #13: the local recomputation against full recomputations and the reference ----

// A two-tier fabric as in bench/sim_engine_bench (host uplink, spine link, host downlink): every
// flow is transitively coupled to every other, so each change's connected component is the
// whole network, while only a few flows' rates change.
struct Fabric {
  std::vector<double> caps;
  std::vector<R> up, down, spine;
  void Build(std::mt19937& rng, int hosts, int spines, std::vector<FluidNetwork*> nets) {
    auto add = [&](double cap) {
      caps.push_back(cap);
      R id = 0;
      for (FluidNetwork* n : nets) id = n->AddResource(cap);
      return id;
    };
    for (int h = 0; h < hosts; ++h) {
      up.push_back(add(1e9 * (20 + rng() % 80)));
      down.push_back(add(1e9 * (20 + rng() % 80)));
    }
    for (int s = 0; s < spines; ++s) spine.push_back(add(1e9 * (50 + rng() % 350)));
  }
  std::vector<R> RandomPath(std::mt19937& rng) const {
    const size_t a = rng() % up.size();
    size_t b = rng() % down.size();
    if (rng() % 8 == 0) return {up[a], down[b]};  // Some flows skip the spines.
    return {up[a], spine[rng() % spine.size()], down[b]};
  }
};

// Every change at an instant applied together (as the engine batches a collective), then the
// incremental allocation (local recomputation only on even trials, the default mix of small
// components and local recomputation on odd ones) is compared with a full recomputation of the
// same state, and both with the brute-force reference; time moves on so that rates also drive
// Remaining().
TEST(FluidNetworkTest, IncrementalMatchesFullRecomputationOnACoupledFabricUnderBatchedChanges) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 4; ++trial) {
    FluidNetwork inc, full;
    if (trial % 2 == 0) inc.set_small_component(0);
    full.set_full_recompute(true);
    Fabric fab;
    fab.Build(rng, 24, 6, {&inc, &full});
    std::vector<std::vector<R>> paths;
    std::vector<int> levels;
    std::vector<bool> alive;
    std::vector<FluidNetwork::FlowId> ids_inc, ids_full;
    Duration now;
    for (int step = 0; step < 60; ++step) {
      const int ops = 1 + static_cast<int>(rng() % 12);
      for (int k = 0; k < ops; ++k) {
        const int op = static_cast<int>(rng() % 10);
        if (op < 6 || paths.empty()) {
          paths.push_back(fab.RandomPath(rng));
          levels.push_back(static_cast<int>(rng() % 4));
          alive.push_back(true);
          const double bytes = 1e15;
          ids_inc.push_back(inc.AddFlow(paths.back(), levels.back(), bytes, now, paths.size() - 1));
          ids_full.push_back(
              full.AddFlow(paths.back(), levels.back(), bytes, now, paths.size() - 1));
        } else if (op < 8) {
          const size_t f = rng() % paths.size();
          if (!alive[f]) continue;
          EXPECT_NEAR(inc.RemoveFlow(ids_inc[f], now), full.RemoveFlow(ids_full[f], now),
                      1e-6 * std::max(1.0, inc.Remaining(ids_inc[f], now)));
          alive[f] = false;
        } else if (op == 8) {
          const size_t f = rng() % paths.size();
          if (!alive[f]) continue;
          paths[f] = fab.RandomPath(rng);
          inc.Reroute(ids_inc[f], paths[f], now);
          full.Reroute(ids_full[f], paths[f], now);
        } else {
          const R r = static_cast<R>(rng() % fab.caps.size());
          fab.caps[r] = rng() % 5 == 0 ? 0.0 : 1e9 * (10 + rng() % 300);
          inc.SetCapacity(r, fab.caps[r]);
          full.SetCapacity(r, fab.caps[r]);
        }
      }
      inc.NextFinishTime(now);
      full.NextFinishTime(now);
      const std::vector<double> expect = ReferenceRates(fab.caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        const double tol = 1e-7 * std::max(1e6, expect[f]);
        ASSERT_NEAR(inc.Rate(ids_inc[f]), full.Rate(ids_full[f]), tol)
            << "trial " << trial << " step " << step << " flow " << f;
        ASSERT_NEAR(inc.Rate(ids_inc[f]), expect[f], tol)
            << "trial " << trial << " step " << step << " flow " << f;
      }
      now += Ns(1 + static_cast<int64_t>(rng() % 100'000));
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        ASSERT_NEAR(inc.Remaining(ids_inc[f], now), full.Remaining(ids_full[f], now), 1e-6 * 1e15);
      }
    }
  }
}

// Flows that finish on their own, several levels, on the coupled fabric: after every instant
// the incremental rates are the max-min ones, and the next finish is where the rates put it.
TEST(FluidNetworkTest, IncrementalRatesAreMaxMinWhileFlowsFinishOnACoupledFabric) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 4; ++trial) {
    FluidNetwork net;
    if (trial % 2 == 0) net.set_small_component(0);  // The local recomputation only.
    Fabric fab;
    fab.Build(rng, 16, 4, {&net});
    std::vector<std::vector<R>> paths;
    std::vector<int> levels;
    std::vector<bool> alive;
    std::vector<FluidNetwork::FlowId> ids;
    Duration now;
    auto check = [&](Duration t) {
      const std::vector<double> expect = ReferenceRates(fab.caps, paths, levels, alive);
      for (size_t f = 0; f < paths.size(); ++f) {
        if (!alive[f]) continue;
        ASSERT_NEAR(net.Rate(ids[f]), expect[f], 1e-7 * std::max(1e6, expect[f]))
            << "trial " << trial << " t " << t.nanos() << " flow " << f;
      }
    };
    for (int step = 0; step < 40; ++step) {
      // A collective: 1-12 flows start together.
      const int starts = 1 + static_cast<int>(rng() % 12);
      const int level = static_cast<int>(rng() % 3);
      for (int k = 0; k < starts; ++k) {
        paths.push_back(fab.RandomPath(rng));
        levels.push_back(level);
        alive.push_back(true);
        ids.push_back(net.AddFlow(paths.back(), level,
                                  1e5 + static_cast<double>(rng() % 10'000'000), now,
                                  paths.size() - 1));
      }
      net.NextFinishTime(now);
      check(now);
      const Duration until = now + Ns(200'000);
      while (true) {
        const Duration t = net.NextFinishTime(now);
        if (t > until) break;
        ASSERT_GE(t, now);
        now = t;
        int finished = 0;
        net.PopFinished(t, [&](uint64_t tag, double) {
          alive[tag] = false;
          ++finished;
        });
        ASSERT_GT(finished, 0);
        net.NextFinishTime(now);
        check(now);
      }
      now = until;
    }
  }
}

// The point of the local recomputation: on one coupled component (every flow shares a host
// link with flows of other spine links), a change re-rates about the flows whose bottleneck it
// moves (here those of one spine link), not the component.
TEST(FluidNetworkTest, AChangeReratesOnlyTheFlowsWhoseBottleneckItMoves) {
  std::mt19937 rng(5);
  FluidNetwork net;
  std::vector<R> up, down, spine;
  for (int h = 0; h < 256; ++h) {
    up.push_back(net.AddResource(400e9));
    down.push_back(net.AddResource(400e9));
  }
  for (int s = 0; s < 16; ++s) spine.push_back(net.AddResource(100e9));
  std::vector<FluidNetwork::FlowId> ids;
  for (int f = 0; f < 4000; ++f) {
    const std::vector<R> path = {up[rng() % up.size()], spine[rng() % spine.size()],
                                 down[rng() % down.size()]};
    ids.push_back(net.AddFlow(path, 0, 1e15, kT0, static_cast<uint64_t>(f)));
  }
  net.NextFinishTime(kT0);
  const FluidNetwork::Stats before = net.stats();
  for (int k = 0; k < 100; ++k) {
    net.RemoveFlow(ids[static_cast<size_t>(k) * 37], Ns(k + 1));
    net.NextFinishTime(Ns(k + 1));
  }
  const FluidNetwork::Stats& after = net.stats();
  const double changes = static_cast<double>(after.recomputations - before.recomputations);
  const double visited = static_cast<double>(after.flows_visited - before.flows_visited) / changes;
  const double rerated = static_cast<double>(after.rates_changed - before.rates_changed) / changes;
  // About 4000 / 16 = 250 flows share a spine link and all of them speed up; the component is
  // all 4000 flows.
  EXPECT_GT(rerated, 150.0);
  EXPECT_LT(visited, 400.0);
}

}  // namespace
}  // namespace crux::sim
