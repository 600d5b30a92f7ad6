// Test helper: a jobs YAML of `n` ring all-reduce jobs over 2-4 distinct hosts of host0..
// host<hosts-1>, deterministic for a seed (the shape of tools/plan/scripts/gen_ring_jobs.py and
// bench/planner_bench.cc). On a 16-host fabric almost every pair of jobs shares a link, so the
// contention DAG has ~0.4 n^2 edges: the input of the issue #10 output-size attack.
#ifndef CRUX_TESTING_RING_JOBS_YAML_H_
#define CRUX_TESTING_RING_JOBS_YAML_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "crux/core/base/random.h"

namespace crux::testing_util {

inline std::string RingJobsYaml(int n, int hosts = 16, uint64_t seed = 1) {
  core::Rng rng(seed);
  std::string out = "jobs:\n";
  for (int j = 0; j < n; ++j) {
    std::vector<int> all(static_cast<size_t>(hosts));
    for (int h = 0; h < hosts; ++h) all[static_cast<size_t>(h)] = h;
    rng.Shuffle(all);
    const int k = 2 + static_cast<int>(rng.Uniform(static_cast<uint64_t>(std::min(3, hosts - 1))));
    out += "  - {id: job" + std::to_string(j) + ", hosts: [";
    for (int i = 0; i < k; ++i) {
      out += (i > 0 ? ", host" : "host") + std::to_string(all[static_cast<size_t>(i)]);
    }
    static const char* const kCompute[] = {"0.05", "0.1", "0.2", "0.4", "0.8"};
    static const char* const kBytes[] = {"1e8", "2e8", "5e8", "1e9", "2e9"};
    out += std::string("], compute_time_s: ") + kCompute[rng.Uniform(5)] +
           ", traffic: {pattern: ring_allreduce, bytes: " + kBytes[rng.Uniform(5)] + "}}\n";
  }
  return out;
}

}  // namespace crux::testing_util

#endif  // CRUX_TESTING_RING_JOBS_YAML_H_
