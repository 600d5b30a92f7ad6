// Incremental re-planning (PlannerOptions::incremental, docs/algorithms.md §8) against a full
// re-plan of the same state, on one Alibaba HPN pod (core's BuildHpn defaults: 1,920 hosts,
// 15,360 NICs, 120 equal-cost paths per cross-segment NIC pair) with 1,000 running jobs: ring
// all-reduce, the production-like size mix of planner_bench.cc (1..32 hosts, seed 42).
//
// One event per iteration, applied to the 1,000-job state:
//   arrival:        a newcomer (a different one each iteration, same mix) appended to the list,
//                   as the daemon and the simulator append new jobs;
//   departure:      one of the 1,000 jobs leaves (a different one each iteration);
//   profile change: one job's measured profile changes (compute time and bytes per iteration),
//                   as when the daemon receives a new profile report.
// Incremental (BM_Incremental*): one Planner with incremental = true holds the 1,000-job plan;
// the timed part is the Run of the event, then an untimed Run restores the 1,000-job state (so
// every iteration starts from the same state; the restore is itself an incremental re-plan).
// Full (BM_Full*): a warm Planner (path and port caches filled, as in cruxd) with incremental =
// false runs the same post-event job list from scratch. Times are wall times of Planner::Run
// (manual timing); counters: p50_ms / p90_ms over the iterations, and what the incremental
// planner recomputed (ReplanStats, averaged over the iterations).
// Goal (issue #11 item 5): <= 5 ms p50 for an incremental arrival (a full re-plan is ~48 ms).
// BM_Stable*: the same events with stable re-planning (PlannerOptions::stable, cruxd's default):
// kept jobs keep their paths and levels, so an arrival costs what the newcomer and the plan's
// bookkeeping cost.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/builders.h"

namespace crux::core {
namespace {

constexpr int kJobs = 1000;
// Timed events per benchmark; CRUX_BENCH_ITERATIONS overrides it (e.g. 300 to profile the
// re-plans with perf: the untimed 1,000-job plan then no longer dominates the samples).
const int kIterations = [] {
  const char* v = std::getenv("CRUX_BENCH_ITERATIONS");
  const int n = v == nullptr ? 0 : std::atoi(v);
  return n > 0 ? n : 20;
}();

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

// planner_bench.cc's RandomRingJob / RandomRingJobs: ring all-reduce over distinct random hosts.
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

std::vector<JobSpec> RandomRingJobs(const Topology& topo, int n, uint64_t seed,
                                    const std::string& prefix) {
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
    jobs.push_back(RandomRingJob(rng, pool, prefix + std::to_string(j), size));
  }
  return jobs;
}

const std::vector<JobSpec>& BaseJobs() {
  static const auto* jobs = new std::vector<JobSpec>(RandomRingJobs(HpnPod(), kJobs, 42, "job"));
  return *jobs;
}

// Newcomer `i`: one job of the same mix, a different one for every i.
JobSpec Newcomer(int64_t i) {
  return RandomRingJobs(HpnPod(), 1, 4242 + static_cast<uint64_t>(i),
                        "new" + std::to_string(i) + "-")[0];
}

enum class Event { kArrival, kDeparture, kProfileChange, kNone };

// The job list after event number `i` of kind `event` on BaseJobs().
std::vector<JobSpec> AfterEvent(Event event, int64_t i) {
  std::vector<JobSpec> jobs = BaseJobs();
  // Spread over the jobs (997 is prime): a different job each iteration.
  const size_t victim = static_cast<size_t>((i * 997 + 13) % kJobs);
  switch (event) {
    case Event::kArrival:
      jobs.push_back(Newcomer(i));
      break;
    case Event::kDeparture:
      jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(victim));
      break;
    case Event::kProfileChange: {
      JobSpec& spec = jobs[victim];
      spec.compute_time = Duration::Seconds(spec.compute_time.ToSeconds() * 1.25);
      spec.pattern_bytes = Bytes::FromDouble(spec.pattern_bytes.ToDouble() * 0.8);
      break;
    }
    case Event::kNone:
      break;
  }
  return jobs;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

// Per-stage wall times (Plan::timing), summed over the iterations.
struct StageTotals {
  double traffic = 0, profile = 0, priority = 0, paths = 0, compression = 0, ports = 0;
  void Add(const StageTimings& t) {
    traffic += t.traffic.ToMillis();
    profile += t.profile.ToMillis();
    priority += t.priority.ToMillis();
    paths += t.path_selection.ToMillis();
    compression += t.compression.ToMillis();
    ports += t.ports.ToMillis();
  }
};

// This thread's CPU time: on a shared machine (the 2-core VM with builds beside it) it moves far
// less than wall time when other processes take the cores.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double RunTimed(Planner& planner, const std::vector<JobSpec>& jobs, benchmark::State& state,
                std::vector<double>& samples, StageTotals& stages,
                std::vector<double>* cpu_samples = nullptr) {
  const double c0 = ThreadCpuMs();
  const auto t0 = std::chrono::steady_clock::now();
  auto plan = planner.Run(jobs);
  const auto t1 = std::chrono::steady_clock::now();
  if (cpu_samples != nullptr) cpu_samples->push_back(ThreadCpuMs() - c0);
  if (!plan.ok()) {
    state.SkipWithError(plan.status().ToString().c_str());
    return -1;
  }
  benchmark::DoNotOptimize(plan->cut_weight);
  stages.Add(plan->timing);
  const double sec = std::chrono::duration<double>(t1 - t0).count();
  samples.push_back(sec * 1e3);
  return sec;
}

// state.range(0) == 0: the caches are warm for the 1,000-job state only, so the paths a job
// moves to may need a UDP source-port search (as when cruxd sees the event for the first time);
// 1: the same events were planned (and undone) once before the timed loop, so every port is
// cached and the time is the planner's own work.
// kFull: a warm Planner without incremental state; kExact: incremental, the full re-plan's
// result; kStable: stable re-planning (PlannerOptions::stable, cruxd's default).
enum class Mode { kFull, kExact, kStable };

void Replan(benchmark::State& state, Event event, Mode mode) {
  const Topology& topo = HpnPod();
  const bool incremental = mode != Mode::kFull;
  PlannerOptions options;
  options.incremental = incremental;
  options.stable = mode == Mode::kStable;
  Planner planner(topo, options);
  // Untimed: the 1,000-job plan (fills the caches; the incremental state when incremental).
  if (!planner.Run(BaseJobs()).ok()) {
    state.SkipWithError("initial plan failed");
    return;
  }
  if (state.range(0) != 0) {
    for (int64_t i = 0; i < kIterations; ++i) {
      if (!planner.Run(AfterEvent(event, i)).ok() || !planner.Run(BaseJobs()).ok()) {
        state.SkipWithError("warm-up plan failed");
        return;
      }
    }
  }
  std::vector<double> samples;
  std::vector<double> cpu_samples;
  StageTotals stages;
  double searched = 0, compressed = 0, jobs_compressed = 0, components = 0, moved = 0;
  int64_t i = 0;
  for (auto _ : state) {
    const std::vector<JobSpec> jobs = AfterEvent(event, i++);
    const double sec = RunTimed(planner, jobs, state, samples, stages, &cpu_samples);
    if (sec < 0) return;
    state.SetIterationTime(sec);
    const ReplanStats& s = planner.last_replan();
    searched += s.paths_searched;
    compressed += s.components_compressed;
    jobs_compressed += s.jobs_compressed;
    components += s.components;
    moved += s.paths_changed;
    if (incremental && !planner.Run(BaseJobs()).ok()) {  // Untimed: back to the same state.
      state.SkipWithError("restoring plan failed");
      return;
    }
  }
  const double iters = static_cast<double>(std::max<int64_t>(i, 1));
  state.counters["p50_ms"] = Percentile(samples, 0.5);
  state.counters["p90_ms"] = Percentile(samples, 0.9);
  state.counters["cpu_p50_ms"] = Percentile(cpu_samples, 0.5);
  state.counters["cpu_p90_ms"] = Percentile(cpu_samples, 0.9);
  state.counters["paths_searched"] = searched / iters;
  state.counters["paths_changed"] = moved / iters;
  state.counters["components"] = components / iters;
  state.counters["comps_compressed"] = compressed / iters;
  state.counters["jobs_compressed"] = jobs_compressed / iters;
  state.counters["profile_ms"] = (stages.traffic + stages.profile) / iters;
  state.counters["priority_ms"] = stages.priority / iters;
  state.counters["paths_ms"] = stages.paths / iters;
  state.counters["compress_ms"] = stages.compression / iters;
  state.counters["ports_ms"] = stages.ports / iters;
}

void BM_IncrementalArrival(benchmark::State& state) {
  Replan(state, Event::kArrival, Mode::kExact);
}
void BM_FullArrival(benchmark::State& state) { Replan(state, Event::kArrival, Mode::kFull); }
void BM_StableArrival(benchmark::State& state) { Replan(state, Event::kArrival, Mode::kStable); }
void BM_IncrementalDeparture(benchmark::State& state) {
  Replan(state, Event::kDeparture, Mode::kExact);
}
void BM_FullDeparture(benchmark::State& state) { Replan(state, Event::kDeparture, Mode::kFull); }
void BM_StableDeparture(benchmark::State& state) {
  Replan(state, Event::kDeparture, Mode::kStable);
}
void BM_IncrementalProfileChange(benchmark::State& state) {
  Replan(state, Event::kProfileChange, Mode::kExact);
}
void BM_FullProfileChange(benchmark::State& state) {
  Replan(state, Event::kProfileChange, Mode::kFull);
}
void BM_StableProfileChange(benchmark::State& state) {
  Replan(state, Event::kProfileChange, Mode::kStable);
}
// The floor: an incremental Run of an unchanged job list (DAG rebuild, plan copy, checks).
void BM_IncrementalNoChange(benchmark::State& state) { Replan(state, Event::kNone, Mode::kExact); }
void BM_StableNoChange(benchmark::State& state) { Replan(state, Event::kNone, Mode::kStable); }

#define CRUX_REPLAN_BENCHMARK(fn)     \
  BENCHMARK(fn)                       \
      ->ArgName("ports_cached")       \
      ->Arg(0)                        \
      ->Arg(1)                        \
      ->Iterations(kIterations)       \
      ->Unit(benchmark::kMillisecond) \
      ->UseManualTime()
CRUX_REPLAN_BENCHMARK(BM_IncrementalArrival);
CRUX_REPLAN_BENCHMARK(BM_FullArrival);
CRUX_REPLAN_BENCHMARK(BM_IncrementalDeparture);
CRUX_REPLAN_BENCHMARK(BM_FullDeparture);
CRUX_REPLAN_BENCHMARK(BM_IncrementalProfileChange);
CRUX_REPLAN_BENCHMARK(BM_FullProfileChange);
CRUX_REPLAN_BENCHMARK(BM_StableArrival);
CRUX_REPLAN_BENCHMARK(BM_StableDeparture);
CRUX_REPLAN_BENCHMARK(BM_StableProfileChange);
BENCHMARK(BM_IncrementalNoChange)
    ->Arg(1)
    ->Iterations(kIterations)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_StableNoChange)
    ->Arg(1)
    ->Iterations(kIterations)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

}  // namespace
}  // namespace crux::core

BENCHMARK_MAIN();
