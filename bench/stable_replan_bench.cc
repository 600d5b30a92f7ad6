// What stable re-planning (PlannerOptions::stable, cruxd's default) costs in plan quality and
// saves in churn, against the full re-plan, over a long sequence of events.
//
// One Alibaba HPN pod (core's BuildHpn defaults), 1,000 running ring all-reduce jobs of
// planner_bench.cc's size mix, then `kEvents` random events (40 % arrivals, 30 % departures,
// 30 % profile changes: compute time and bytes scaled by 0.6-1.6), seeded. After every event a
// stable planner (carrying its state across events; re-optimised every `reoptimize` events,
// 0 = never) and a fresh full planner plan the same jobs. Per event and planner:
//   cost     core::MeasurePlan's contention cost (plan_quality.h): sum over jobs of W_j x (its
//            most loaded link's load / capacity); lower is better;
//   cut      its cut fraction (cut weight / total edge weight);
//   churn    jobs present before and after whose paths, ports or level changed.
// Counters: cost_gap_mean / cost_gap_max (stable cost / full cost - 1), cut_stable / cut_full
// (means), churn_stable / churn_full (mean jobs moved per event), insertions refused. The numbers
// are measurements, nothing is asserted; docs/algorithms.md §9 reports them.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/plan/plan_quality.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/builders.h"

namespace crux::core {
namespace {

constexpr int kJobs = 1000;
constexpr int kEvents = 300;

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

// planner_bench.cc's ring all-reduce jobs with the production-like size mix.
JobSpec RandomJob(Rng& rng, const Topology& topo, std::string id) {
  const int sizes[] = {1, 2, 4, 8, 16, 32};
  const double cdf[] = {0.30, 0.55, 0.75, 0.90, 0.98, 1.0};
  const double u = rng.UniformDouble();
  int size = sizes[5];
  for (int s = 0; s < 6; ++s) {
    if (u < cdf[s]) {
      size = sizes[s];
      break;
    }
  }
  std::vector<NodeId> pool = topo.hosts();
  JobSpec spec;
  spec.id = std::move(id);
  for (int i = 0; i < size; ++i) {
    const size_t k = static_cast<size_t>(i) + rng.Uniform(pool.size() - static_cast<size_t>(i));
    std::swap(pool[static_cast<size_t>(i)], pool[k]);
    spec.hosts.push_back(pool[static_cast<size_t>(i)]);
  }
  spec.gpus_per_host = 8;
  spec.compute_time = Duration::Seconds(0.05 + 0.95 * rng.UniformDouble());
  spec.pattern = TrafficPattern::kRingAllReduce;
  spec.pattern_bytes = Bytes::FromDouble(1e8 + 4.9e9 * rng.UniformDouble());
  spec.overlap_start = rng.UniformDouble();
  return spec;
}

struct Placed {
  int level;
  std::vector<FlowPlan> flows;
};

std::map<std::string, Placed> Index(const Plan& plan) {
  std::map<std::string, Placed> out;
  for (const JobPlan& jp : plan.jobs) out[jp.id] = {jp.level, jp.flows};
  return out;
}

int Churn(const std::map<std::string, Placed>& before, const std::map<std::string, Placed>& after) {
  int moved = 0;
  for (const auto& [id, now] : after) {
    auto it = before.find(id);
    if (it == before.end()) continue;
    bool same = it->second.level == now.level && it->second.flows.size() == now.flows.size();
    for (size_t f = 0; same && f < now.flows.size(); ++f) {
      same = it->second.flows[f].path == now.flows[f].path &&
             it->second.flows[f].udp_sport == now.flows[f].udp_sport;
    }
    moved += same ? 0 : 1;
  }
  return moved;
}

void BM_StableVsFull(benchmark::State& state) {
  const Topology& topo = HpnPod();
  const int reoptimize = static_cast<int>(state.range(0));
  double gap_sum = 0, gap_max = 0, cut_stable = 0, cut_full = 0;
  double churn_stable = 0, churn_full = 0, refused = 0;
  for (auto _ : state) {
    Rng rng(7);
    std::vector<JobSpec> jobs;
    for (int j = 0; j < kJobs; ++j) jobs.push_back(RandomJob(rng, topo, "job" + std::to_string(j)));
    PlannerOptions stable_options;
    stable_options.incremental = true;
    stable_options.stable = true;
    Planner stable(topo, stable_options);
    Planner full(topo, PlannerOptions{});
    auto s0 = stable.Run(jobs);
    auto f0 = full.Run(jobs);
    if (!s0.ok() || !f0.ok()) {
      state.SkipWithError("initial plan failed");
      return;
    }
    std::map<std::string, Placed> last_stable = Index(*s0);
    std::map<std::string, Placed> last_full = Index(*f0);
    int next_id = kJobs;
    for (int e = 1; e <= kEvents; ++e) {
      const double u = rng.UniformDouble();
      if (u < 0.4 || jobs.size() < 10) {
        jobs.push_back(RandomJob(rng, topo, "job" + std::to_string(next_id++)));
      } else if (u < 0.7) {
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(jobs.size())));
      } else {
        JobSpec& spec = jobs[rng.Uniform(jobs.size())];
        spec.compute_time = spec.compute_time * (0.6 + rng.UniformDouble());
        spec.pattern_bytes = spec.pattern_bytes * (0.6 + rng.UniformDouble());
      }
      if (reoptimize > 0 && e % reoptimize == 0) stable.ResetIncrementalState();
      auto s = stable.Run(jobs);
      auto f = full.Run(jobs);
      if (!s.ok() || !f.ok()) {
        state.SkipWithError("plan failed");
        return;
      }
      refused += stable.last_replan().insertions_repaired;
      const PlanQuality q_stable = MeasurePlan(topo, *s);
      const PlanQuality q_full = MeasurePlan(topo, *f);
      const double gap = q_stable.contention_cost / q_full.contention_cost - 1;
      gap_sum += gap;
      gap_max = std::max(gap_max, gap);
      cut_stable += q_stable.cut_fraction;
      cut_full += q_full.cut_fraction;
      std::map<std::string, Placed> now_stable = Index(*s);
      std::map<std::string, Placed> now_full = Index(*f);
      churn_stable += Churn(last_stable, now_stable);
      churn_full += Churn(last_full, now_full);
      last_stable = std::move(now_stable);
      last_full = std::move(now_full);
    }
  }
  const double n = static_cast<double>(kEvents) * static_cast<double>(state.iterations());
  state.counters["cost_gap_mean"] = gap_sum / n;
  state.counters["cost_gap_max"] = gap_max;
  state.counters["cut_stable"] = cut_stable / n;
  state.counters["cut_full"] = cut_full / n;
  state.counters["churn_stable"] = churn_stable / n;
  state.counters["churn_full"] = churn_full / n;
  state.counters["insertions_repaired"] = refused / n;
}
// Arg: re-optimise every N events (0 = never).
BENCHMARK(BM_StableVsFull)->Arg(0)->Arg(50)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace crux::core

BENCHMARK_MAIN();
