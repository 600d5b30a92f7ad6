// Job specs: YAML -> core::JobSpec plus the simulator's extra keys.
//
// Format (times in seconds, sizes in bytes, work in FLOPs):
//
//   jobs:
//     - id: gpt                  # string or integer, kept as text; unique; required;
//                                # a valid name (crux/core/ids.h: 1-128 of [A-Za-z0-9._:/-])
//       hosts: [host0, host1]    # host node names of the topology; required, >= 1, distinct
//       gpus_per_host: 8         # >= 1 (default 8)
//       compute_time_s: 1.2      # per-iteration computation alone, > 0; required
//       flops_per_iteration: 3e15  # W_j, > 0 (default: gpus * compute time * peak FLOP/s)
//       overlap_start: 0.5       # in [0, 1] (default 1: communicate after computing)
//       compression_ratio: 1.0   # on-wire / logical bytes, in (0, 1000] (default 1)
//       traffic: {pattern: ring_allreduce, bytes: 2.6e9}  # ring_allreduce|all_to_all|pipeline
//       # or, instead of traffic, explicit flows (NIC or host node names):
//       # flows: [{src: host0/nic0, dst: host1/nic0, bytes: 1e8}]
//       arrival_s: 0             # optional, >= 0     (simulator)
//       duration_s: 3600         # optional, > 0      (simulator)
//       iterations: 1000         # optional, >= 1     (simulator)
//       fixed_rank: 0            # optional, >= 0     (simulator: pin the priority rank)
//
// `bytes` is a plain number (integer or float, finite, > 0, at least one byte after rounding).
// Exactly one of `traffic` and `flows` is required. Strictness and error format are those of
// topology_spec.h: unknown keys, missing required keys, wrong types, NaN, out-of-range values,
// unknown hosts or nodes ("jobs[1].hosts[2]: unknown host 'host99'"), a node that is not a
// host, an id that breaks the name rule (control characters, spaces, quotes, non-ASCII, more
// than 128 bytes: "jobs[0].id: invalid job id 'a\x1b[2J' (allowed: ...) (line 2, column 9)"),
// duplicate ids (kAlreadyExists) are errors naming the key path. Names quoted in messages are
// quoted with core::QuoteName (ids.h: escaped, cut to 64 bytes). After parsing, every job
// is checked with core::ValidateJob; its errors get the context "jobs[i]".
// No exception escapes.
//
// Thread-safety: pure functions (the file loader reads the file system).
#ifndef CRUX_SPEC_JOBS_SPEC_H_
#define CRUX_SPEC_JOBS_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/model/job.h"
#include "crux/core/topology/topology.h"

namespace crux::spec {

struct JobEntry {
  core::JobSpec spec;
  std::optional<double> arrival_s;    // >= 0.
  std::optional<double> duration_s;   // > 0.
  std::optional<int64_t> iterations;  // >= 1.
  std::optional<int> fixed_rank;      // >= 0.
};

// Parses a jobs document against `topo` (host and node names are resolved there).
// An empty list (`jobs: []`) is valid.
core::Result<std::vector<JobEntry>> ParseJobs(std::string_view yaml, const core::Topology& topo);

// Reads and parses `path`; errors carry the file name as context.
core::Result<std::vector<JobEntry>> LoadJobsFile(const std::string& path,
                                                 const core::Topology& topo);

// The JobSpecs of `entries`, in order (what core::Planner::Run takes).
std::vector<core::JobSpec> JobSpecs(const std::vector<JobEntry>& entries);

}  // namespace crux::spec

#endif  // CRUX_SPEC_JOBS_SPEC_H_
