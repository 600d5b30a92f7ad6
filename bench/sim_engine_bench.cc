// Flow events per second of the simulator's fluid core (FluidNetwork) and of the whole engine.
//
//   BM_FluidClustered/<flows>/<group>: `flows` active flows in groups of `group` that share one
//     bottleneck (jobs whose flows meet on their own links, as Crux's pinned paths make them).
//     Every finished flow is restarted on its path after a short pause (RunChurn), so about
//     `flows` stay active; items = flow events (starts and finishes).
//   BM_FluidRandom/<flows>/<hosts>: the same churn with flows between random hosts of a
//     two-tier fabric (uplink, spine link, downlink): one giant connected component, the worst
//     case for the incremental recomputation (every event re-rates every flow).
//   BM_SimulateClos/<spread>: crux::sim::Simulate end to end (policy `ecmp`, fast-forward off,
//     2 simulated seconds) on a 2-tier Clos with ~1.4 x 10^4 flows of 32 all-to-all jobs; items
//     = flow events (finishes and deliveries). Includes the re-plans (one per arrival).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/topology/builders.h"
#include "crux/sim/fluid_network.h"
#include "crux/sim/simulator.h"

namespace {

using crux::core::Duration;
using crux::sim::FluidNetwork;
using R = FluidNetwork::ResourceId;

double RandomBytes(std::mt19937_64& rng) {
  return 1e6 + static_cast<double>(rng() % 63'000'000);  // 1..64 MB, continuous.
}

// Keeps the flows churning: a finished flow is restarted on the same path after a random pause
// of 0-50 us (a new communication phase), so finishes and starts are separate events, as in the
// engine. One benchmark iteration = one instant with flow events; items = flow starts + finishes.
void RunChurn(benchmark::State& state, FluidNetwork& net,
              const std::vector<std::vector<R>>& paths_by_tag, std::mt19937_64& rng) {
  Duration now;
  uint64_t events = 0;
  // Pending restarts: (time, tag), a min-heap.
  std::vector<std::pair<Duration, uint64_t>> restarts;
  auto later = [](const auto& a, const auto& b) { return a > b; };
  for (auto _ : state) {
    const Duration t_finish = net.NextFinishTime(now);
    const Duration t_start = restarts.empty() ? Duration::Infinite() : restarts.front().first;
    if (t_start < t_finish) {
      now = t_start;
      while (!restarts.empty() && restarts.front().first == now) {
        std::pop_heap(restarts.begin(), restarts.end(), later);
        const uint64_t tag = restarts.back().second;
        restarts.pop_back();
        net.AddFlow(paths_by_tag[tag], static_cast<int>(tag % 2), RandomBytes(rng), now, tag);
        ++events;
      }
      continue;
    }
    now = t_finish;
    net.PopFinished(now, [&](uint64_t tag, double) {
      ++events;
      restarts.emplace_back(now + Duration::Nanos(static_cast<int64_t>(rng() % 50'000)), tag);
      std::push_heap(restarts.begin(), restarts.end(), later);
    });
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["active_flows"] = static_cast<double>(net.active_flows());
  state.counters["flows_rerated_per_recompute"] =
      static_cast<double>(net.stats().flows_visited) /
      static_cast<double>(net.stats().recomputations ? net.stats().recomputations : 1);
  const double recomputations =
      static_cast<double>(net.stats().recomputations ? net.stats().recomputations : 1);
  state.counters["solves_per_recompute"] = static_cast<double>(net.stats().solves) / recomputations;
  state.counters["scans_per_recompute"] = static_cast<double>(net.stats().scans) / recomputations;
  state.counters["rates_changed_per_recompute"] =
      static_cast<double>(net.stats().rates_changed) / recomputations;
}

void BM_FluidClustered(benchmark::State& state) {
  const int flows = static_cast<int>(state.range(0));
  const int group = static_cast<int>(state.range(1));
  std::mt19937_64 rng(1);
  FluidNetwork net;
  std::vector<std::vector<R>> paths(flows);
  const int groups = flows / group;
  std::vector<R> links;
  for (int g = 0; g < groups; ++g) links.push_back(net.AddResource(100e9));
  for (int f = 0; f < flows; ++f) {
    // Each flow: its group's shared link plus a private access link.
    paths[f] = {links[f % groups], net.AddResource(200e9)};
    net.AddFlow(paths[f], f % 2, RandomBytes(rng), Duration::Zero(), static_cast<uint64_t>(f));
  }
  RunChurn(state, net, paths, rng);
}
BENCHMARK(BM_FluidClustered)->Args({10000, 8})->Args({10000, 64})->Unit(benchmark::kMicrosecond);

void BM_FluidRandom(benchmark::State& state) {
  const int flows = static_cast<int>(state.range(0));
  const int hosts = static_cast<int>(state.range(1));
  const int spines = 16;
  std::mt19937_64 rng(2);
  FluidNetwork net;
  std::vector<R> up(hosts), down(hosts), spine_links;
  for (int h = 0; h < hosts; ++h) {
    up[h] = net.AddResource(100e9);
    down[h] = net.AddResource(100e9);
  }
  for (int s = 0; s < spines * 2; ++s) spine_links.push_back(net.AddResource(400e9));
  std::vector<std::vector<R>> paths(flows);
  for (int f = 0; f < flows; ++f) {
    const int a = static_cast<int>(rng() % hosts);
    int b = static_cast<int>(rng() % hosts);
    if (b == a) b = (a + 1) % hosts;
    paths[f] = {up[a], spine_links[rng() % spine_links.size()], down[b]};
    net.AddFlow(paths[f], f % 2, RandomBytes(rng), Duration::Zero(), static_cast<uint64_t>(f));
  }
  RunChurn(state, net, paths, rng);
}
BENCHMARK(BM_FluidRandom)->Args({10000, 1024})->Args({1000, 1024})->Unit(benchmark::kMicrosecond);

void BM_SimulateClos(benchmark::State& state) {
  const bool spread = state.range(0) != 0;
  crux::core::Clos2Params p;
  p.tors = 16;
  p.aggs = 8;
  p.hosts_per_tor = 16;
  p.host.nics_per_host = 8;
  p.rail_optimized = false;
  const crux::core::Topology topo = crux::core::BuildClos2(p).value();
  // 32 jobs of 8 hosts: all-to-all over 8 rails gives 8 * 7 * 8 = 448 flows each, ~14k in all.
  std::vector<crux::sim::SimJob> jobs;
  for (int j = 0; j < 32; ++j) {
    crux::sim::SimJob job;
    job.spec.id = "job" + std::to_string(j);
    for (int h = 0; h < 8; ++h) {
      // ToR-local: a job's 8 hosts under one ToR (jobs contend only inside their own hosts'
      // NICs). Spread: host h of job j is host h * 32 + j, under 8 different ToRs, so every job
      // crosses the ToR-Agg links and all flows form one coupled component.
      const int host = spread ? h * 32 + j : j * 8 + h;
      job.spec.hosts.push_back(topo.FindNode("host" + std::to_string(host)).value());
    }
    job.spec.compute_time = crux::core::Duration::Millis(50 + 7 * j);
    job.spec.overlap_start = 0.5;
    job.spec.pattern = crux::core::TrafficPattern::kAllToAll;
    job.spec.pattern_bytes = crux::core::Bytes::FromDouble(2e9);
    jobs.push_back(job);
  }
  crux::sim::SimOptions o;
  o.control.oracle = true;  // The engine alone: every job planned at once (docs/simulator.md 9).
  o.horizon = crux::core::Duration::Seconds(2);
  o.fast_forward = false;
  uint64_t events = 0;
  uint64_t peak = 0;
  double wall = 0;
  for (auto _ : state) {
    auto r = crux::sim::Simulate(topo, "ecmp", jobs, {}, o);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    events += r->flow_events;
    wall += r->wall_s;
    peak = std::max<uint64_t>(peak, r->peak_active_flows);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["flow_events_per_run"] =
      static_cast<double>(events) / static_cast<double>(state.iterations());
  state.counters["peak_active_flows"] = static_cast<double>(peak);
  state.counters["engine_wall_s"] = wall;
}
BENCHMARK(BM_SimulateClos)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
