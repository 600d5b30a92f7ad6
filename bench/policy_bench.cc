// Planning time of every scheduling policy (policy.h) on a 1,024-host two-tier Clos, warm (the
// policy object is reused, as the simulator and the daemon reuse it across re-plans).
//
//   build/release/bench/policy_bench [--benchmark_filter=cassini]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/model/job.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/builders.h"
#include "crux/core/topology/topology.h"

namespace crux::core {
namespace {

const Topology& Clos1024() {
  static const Topology* topo = [] {
    Clos2Params p;
    p.tors = 64;
    p.aggs = 8;
    p.hosts_per_tor = 16;
    p.host.nics_per_host = 2;
    p.uplink_gbps = 400;
    auto t = BuildClos2(p);
    if (!t.ok()) {
      std::fprintf(stderr, "BuildClos2: %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return new Topology(std::move(*t));
  }();
  return *topo;
}

// Ring all-reduce and all-to-all jobs on 2..16 random hosts each.
std::vector<JobSpec> RandomJobs(const Topology& topo, int n, uint64_t seed) {
  Rng rng(seed);
  std::vector<JobSpec> jobs;
  const auto& hosts = topo.hosts();
  for (int i = 0; i < n; ++i) {
    JobSpec j;
    j.id = "job" + std::to_string(i);
    const int h = 2 + static_cast<int>(rng.Next() % 15);
    while (static_cast<int>(j.hosts.size()) < h) {
      const NodeId cand = hosts[rng.Next() % hosts.size()];
      if (std::find(j.hosts.begin(), j.hosts.end(), cand) == j.hosts.end()) {
        j.hosts.push_back(cand);
      }
    }
    j.compute_time = Duration::Millis(50 + static_cast<int64_t>(rng.Next() % 400));
    j.overlap_start = (rng.Next() % 2) ? 1.0 : 0.5;
    j.pattern = (i % 5 == 4) ? TrafficPattern::kAllToAll : TrafficPattern::kRingAllReduce;
    j.pattern_bytes = Bytes::MiB(64 + static_cast<int64_t>(rng.Next() % 2048));
    j.fixed_rank = i;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

void BM_Schedule(benchmark::State& state, const std::string& name) {
  const Topology& topo = Clos1024();
  const std::vector<JobSpec> jobs = RandomJobs(topo, static_cast<int>(state.range(0)), 21);
  auto policy = MakePolicy(name, topo, PolicyOptions{});
  if (!policy.ok()) {
    state.SkipWithError(policy.status().ToString().c_str());
    return;
  }
  if (!(*policy)->Schedule(jobs).ok()) {  // Cold call: fills the path caches.
    state.SkipWithError("Schedule failed");
    return;
  }
  for (auto _ : state) {
    auto plan = (*policy)->Schedule(jobs);
    benchmark::DoNotOptimize(plan);
  }
}

const bool kRegistered = [] {
  for (const std::string& name : PolicyNames()) {
    benchmark::RegisterBenchmark(("BM_Schedule/" + name).c_str(), BM_Schedule, name)
        ->Arg(50)
        ->Arg(300)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
}  // namespace crux::core

BENCHMARK_MAIN();
