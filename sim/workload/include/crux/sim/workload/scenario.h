// Scenario files (configs/scenarios/*.yaml): a topology, a workload, the policies to compare
// and the simulation options, in one place. `crux-sim run|compare --scenario FILE` reads them;
// command-line flags override their values.
//
//   scenario:
//     description: free text                  # optional
//     topology: ../topologies/testbed.yaml    # required; paths relative to the scenario file
//     jobs: ../jobs/example1.yaml             # exactly one of jobs | trace | generate
//     trace: traces/day1.csv
//     generate: {seed: 1, days: 1, mean_interarrival_s: 240, place: false}
//                                             # or load: 0.8 instead of mean_interarrival_s
//                                             # (offered load, fraction of GPUs; place: true)
//                                             # a generated trace (generator.h); place: true
//                                             # places it on `topology` at generation time,
//                                             # false leaves placement to load time (same
//                                             # policy, on the run's topology)
//                                             # mix: lingjun-2023 (default) | llm-2025,
//                                             # scatter: P, spill: Q, share: S
//                                             # (generator.h)
//     models: ../models.yaml                  # for trace/generate (default ../models.yaml)
//     link_events: failures.csv               # optional (link_events.h)
//     policies: [crux, sincronia, ideal]      # optional (default [crux])
//     levels: 8                               # optional, >= 1
//     seed: 1                                 # optional, >= 0
//     horizon_s: 86400                        # optional, > 0
//     fast_forward: true                      # optional
//     oracle: false                           # optional: true plans every job from its true
//                                             # profile at once (sim::ControlOptions::oracle)
//     gpus_per_host: 8                        # optional, >= 1 (placement)
//     spray: false                            # optional: true = the fabric sprays packets
//                                             # over every path (sim::SimOptions::spray)
//
// Strict like the other YAML formats (unknown keys, wrong types, bad values are errors naming
// the key path and position).
//
// Thread-safety: pure functions.
#ifndef CRUX_SIM_WORKLOAD_SCENARIO_H_
#define CRUX_SIM_WORKLOAD_SCENARIO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/sim/workload/generator.h"

namespace crux::sim::workload {

struct Scenario {
  std::string description;
  std::string topology_path;  // Resolved against the scenario's directory.
  std::string jobs_path;      // One of jobs_path, trace_path, generate is set.
  std::string trace_path;
  std::optional<GeneratorOptions> generate;
  bool generate_place = false;
  // generate.load: offered load as a fraction of the topology's GPUs (needs place: true); the
  // mean inter-arrival gap is then derived from it (MeanInterarrivalForLoad, generator.h).
  std::optional<double> generate_load;
  std::string models_path;       // Resolved; defaults to <dir>/../models.yaml.
  std::string link_events_path;  // Resolved; "" = none.
  std::vector<std::string> policies;
  std::optional<int> levels;
  std::optional<uint64_t> seed;
  std::optional<double> horizon_s;
  std::optional<bool> fast_forward;
  std::optional<bool> oracle;
  std::optional<int> gpus_per_host;
  std::optional<bool> spray;  // sim::SimOptions::spray (crux-sim --spray sets it too).
};

// `base_dir` resolves relative paths ("" = current directory).
core::Result<Scenario> ParseScenario(std::string_view yaml, const std::string& base_dir);
core::Result<Scenario> LoadScenarioFile(const std::string& path);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_SCENARIO_H_
