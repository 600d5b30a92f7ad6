// Benchmarks of the full Crux pipeline (crux::core::Planner) on large fabrics.
//
// BM_PlanHpnPod: one Alibaba HPN pod (1,920 hosts, 15,360 NICs, 240 ToRs, 120 Aggs, 120
// equal-cost paths per cross-segment NIC pair) with N jobs, ring all-reduce, random placements
// (seeded). Job sizes follow a small-job-heavy mix (1/2/4/8/16/32 hosts with probabilities
// 30/25/20/15/8/2 %; hosts drawn without replacement inside a job, jobs may share hosts as
// tenants on different GPUs). Each iteration plans from scratch with a fresh Planner, so path
// caches are cold (the daemon keeps them warm across re-plans: see BM_PlanHpnPodWarm).
// Goal (issue #2): <= 50 ms on one core for N = 1,000.
//
// BM_PlanSmallRings*: issue #4's daemon benchmark, N = 10,000 simulated clients, each one job
// running a small ring all-reduce over 2-4 random hosts (seeded), otherwise the same timing mix.
// "Hpn" is the HPN pod above; "Clos2" is configs/topologies/example_clos2.yaml (16 hosts, 4 ToRs
// with 2:1 oversubscribed uplinks), where nearly every job shares a link with every other one
// and the contention DAG is one component of N jobs. Goal (issue #4): < 1 s warm and < 300 MB
// peak RSS on HPN, a few seconds at most on the 16-host fabric.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/builders.h"

namespace crux::core {
namespace {

const Topology& HpnPod() {
  static const Topology* topo = [] {
    auto t = BuildHpn(HpnParams{});
    if (!t.ok()) {
      std::fprintf(stderr, "BuildHpn: %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return new Topology(std::move(t).value());
  }();
  return *topo;
}

// configs/topologies/example_clos2.yaml.
const Topology& ExampleClos2() {
  static const Topology* topo = [] {
    Clos2Params p;
    p.host.nics_per_host = 2;
    p.host.gpus_per_host = 8;
    p.host.nic_gbps = 200;
    p.host.pcie_gbps = 512;
    p.host.link_latency_us = 1;
    p.tors = 4;
    p.aggs = 2;
    p.hosts_per_tor = 4;
    p.uplink_gbps = 400;
    p.uplinks_per_agg = 1;
    auto t = BuildClos2(p);
    if (!t.ok()) {
      std::fprintf(stderr, "BuildClos2: %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return new Topology(std::move(t).value());
  }();
  return *topo;
}

// A ring all-reduce job `id` over `size` distinct hosts drawn from `pool` (reordered in place),
// with random compute time, size and overlap.
JobSpec RandomRingJob(Rng& rng, std::vector<NodeId>& pool, std::string id, int size) {
  JobSpec spec;
  spec.id = std::move(id);
  for (int i = 0; i < size; ++i) {
    const size_t k = i + rng.Uniform(pool.size() - i);
    std::swap(pool[i], pool[k]);
    spec.hosts.push_back(pool[i]);
  }
  spec.gpus_per_host = 8;
  spec.compute_time = Duration::Seconds(0.05 + 0.95 * rng.UniformDouble());
  spec.pattern = TrafficPattern::kRingAllReduce;
  spec.pattern_bytes = Bytes::FromDouble(1e8 + 4.9e9 * rng.UniformDouble());
  spec.overlap_start = rng.UniformDouble();
  return spec;
}

// Issue #4's clients: ring all-reduce over 2..4 distinct random hosts.
std::vector<JobSpec> SmallRingJobs(const Topology& topo, int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<NodeId> pool = topo.hosts();
  std::vector<JobSpec> jobs;
  jobs.reserve(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    const int size = 2 + static_cast<int>(rng.Uniform(3));
    jobs.push_back(RandomRingJob(rng, pool, "client" + std::to_string(j), size));
  }
  return jobs;
}

// Ring all-reduce jobs with a production-like size mix (1..32 hosts).
std::vector<JobSpec> RandomRingJobs(const Topology& topo, int n, uint64_t seed) {
  Rng rng(seed);
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  const double cdf[] = {0.30, 0.55, 0.75, 0.90, 0.98, 1.0};
  std::vector<JobSpec> jobs;
  for (int j = 0; j < n; ++j) {
    const double u = rng.UniformDouble();
    int size = sizes[5];
    for (int s = 0; s < 6; ++s) {
      if (u < cdf[s]) {
        size = sizes[s];
        break;
      }
    }
    std::vector<NodeId> pool = topo.hosts();
    jobs.push_back(RandomRingJob(rng, pool, "job" + std::to_string(j), size));
  }
  return jobs;
}

void ReportStages(benchmark::State& state, const Plan& plan, size_t flows) {
  state.counters["flows"] = static_cast<double>(flows);
  state.counters["dag_edges"] = static_cast<double>(plan.dag.edges.size());
  state.counters["profile_ms"] = plan.timing.profile.ToMillis();
  state.counters["priority_ms"] = plan.timing.priority.ToMillis();
  state.counters["paths_ms"] = plan.timing.path_selection.ToMillis();
  state.counters["compress_ms"] = plan.timing.compression.ToMillis();
  state.counters["ports_ms"] = plan.timing.ports.ToMillis();
  state.counters["unpinned"] = plan.unpinned_flows;
  state.counters["total_ms"] = plan.timing.total.ToMillis();
  state.counters["traffic_ms"] = plan.timing.traffic.ToMillis();
  state.counters["cut_fraction"] =
      plan.total_edge_weight > 0 ? plan.cut_weight / plan.total_edge_weight : 0.0;
}

// warm == false: a fresh Planner (cold path caches) every iteration; true: one Planner
// re-planning the same cluster, as the daemon does on every event.
void PlanHpnPod(benchmark::State& state, bool warm) {
  const Topology& topo = HpnPod();
  const auto jobs = RandomRingJobs(topo, static_cast<int>(state.range(0)), 42);
  std::optional<Planner> planner;
  Plan last;
  for (auto _ : state) {
    if (!warm || !planner.has_value()) planner.emplace(topo, PlannerOptions{});
    auto plan = planner->Run(jobs);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    last = std::move(plan).value();
    benchmark::DoNotOptimize(last.cut_weight);
  }
  size_t flows = 0;
  for (const JobPlan& jp : last.jobs) flows += jp.flows.size();
  ReportStages(state, last, flows);
}

void BM_PlanHpnPod(benchmark::State& state) { PlanHpnPod(state, /*warm=*/false); }
BENCHMARK(BM_PlanHpnPod)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PlanHpnPodWarm(benchmark::State& state) { PlanHpnPod(state, /*warm=*/true); }
BENCHMARK(BM_PlanHpnPodWarm)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();

void PlanSmallRings(benchmark::State& state, const Topology& topo, bool warm,
                    PlannerOptions options = {}) {
  const auto jobs = SmallRingJobs(topo, static_cast<int>(state.range(0)), 4);
  std::optional<Planner> planner;
  Plan last;
  if (warm) {  // One untimed plan fills the path and port caches, as in a running daemon.
    planner.emplace(topo, options);
    if (!planner->Run(jobs).ok()) {
      state.SkipWithError("warm-up plan failed");
      return;
    }
  }
  for (auto _ : state) {
    if (!warm || !planner.has_value()) planner.emplace(topo, options);
    auto plan = planner->Run(jobs);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    last = std::move(plan).value();
    benchmark::DoNotOptimize(last.cut_weight);
  }
  size_t flows = 0;
  for (const JobPlan& jp : last.jobs) flows += jp.flows.size();
  ReportStages(state, last, flows);
}

void BM_PlanSmallRingsHpn(benchmark::State& state) { PlanSmallRings(state, HpnPod(), false); }
BENCHMARK(BM_PlanSmallRingsHpn)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PlanSmallRingsHpnWarm(benchmark::State& state) { PlanSmallRings(state, HpnPod(), true); }
BENCHMARK(BM_PlanSmallRingsHpnWarm)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same without the compression bound (PlannerOptions::max_exact_component = 0): the exact
// Algorithm 1 on the 10,000-job component, to compare time, memory and cut_fraction.
void BM_PlanSmallRingsHpnWarmExact(benchmark::State& state) {
  PlannerOptions options;
  options.max_exact_component = 0;
  PlanSmallRings(state, HpnPod(), true, options);
}
BENCHMARK(BM_PlanSmallRingsHpnWarmExact)->Arg(10000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_PlanSmallRingsClos2Warm(benchmark::State& state) {
  PlanSmallRings(state, ExampleClos2(), true);
}
BENCHMARK(BM_PlanSmallRingsClos2Warm)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_BuildHpnPod(benchmark::State& state) {
  for (auto _ : state) {
    auto t = BuildHpn(HpnParams{});
    benchmark::DoNotOptimize(t.ok());
  }
}
BENCHMARK(BM_BuildHpnPod)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace crux::core

BENCHMARK_MAIN();
