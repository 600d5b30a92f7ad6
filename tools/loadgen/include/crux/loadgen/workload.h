// Synthetic training jobs for crux-loadgen: placement from a topology and plausible profiles.
//
// Jobs draw a model from a small built-in catalogue (numbers from configs/models.yaml: public
// parameter counts and the 6 x params x tokens FLOP rule at 125 TFLOP/s effective per A100),
// a host count within the model's range (capped by the topology), and hosts either as a
// contiguous block (as a locality-aware scheduler would) or scattered (fragmented cluster), so
// plans differ between jobs. Per-iteration bytes per peer NIC come from core::ExpandTraffic, the
// same byte maths the planner uses, so the daemon sees consistent demands.
//
// Thread-safety: pure functions; deterministic for a given seed.
#ifndef CRUX_LOADGEN_WORKLOAD_H_
#define CRUX_LOADGEN_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/topology/topology.h"
#include "crux/v1/client.pb.h"

namespace crux::loadgen {

struct ModelProfile {
  std::string name;
  double compute_time_s;  // Per iteration, > 0.
  double bytes;           // S of the pattern (gradient or activation bytes), > 0.
  double overlap_start;   // [0, 1].
  std::string pattern;    // "ring_allreduce", "all_to_all" or "pipeline".
  int min_hosts;          // >= 1.
  int max_hosts;          // >= min_hosts.
};

// The built-in model catalogue (non-empty, stable order).
const std::vector<ModelProfile>& ModelCatalogue();

struct WorkloadOptions {
  int jobs = 8;  // >= 1.
  uint64_t seed = 1;
  std::string job_prefix = "lg";            // Job ids are "<prefix>-<index>" (zero-padded).
  int gpus_per_host = 8;                    // 1..1024.
  double effective_flops_per_gpu = 125e12;  // For W_j.
  int max_hosts_per_job = 16;               // >= 1; also capped by the topology's host count.
};

struct PeerDemand {
  std::string local_nic;
  std::string remote_nic;
  uint64_t bytes;  // Per iteration, on the wire.
};

struct SimJob {
  std::string job_id;
  std::string tenant;
  std::string model;
  std::string pattern;
  std::vector<std::string> hosts;              // Distinct topology hosts.
  std::vector<std::vector<std::string>> nics;  // NIC names per host (same order as hosts).
  int gpus_per_host = 8;
  uint64_t pattern_bytes = 0;  // S.
  core::Duration compute_time;
  double flops_per_iteration = 0;  // W_j.
  double overlap_start = 0;
  std::vector<PeerDemand> peers;  // From core::ExpandTraffic.
  uint64_t wire_bytes = 0;        // Sum of peers.
  core::Duration period;          // Estimated iteration period (>= compute_time).
};

// Builds `options.jobs` jobs on `topo`. Errors: kInvalidArgument naming the option
// ("jobs: must be >= 1"), or "topology: has no hosts".
core::Result<std::vector<SimJob>> MakeJobs(const core::Topology& topo,
                                           const WorkloadOptions& options);

// The RegisterJob message of a job (placement with NICs, pattern, S, W_j, model).
v1::RegisterJob MakeRegister(const SimJob& job, uint32_t lease_ms);

// The `sample`-th profile report of a job (sample 0 = first). Compute time and period carry a
// uniform +-`jitter` relative noise drawn from `rng` (measurement noise; 0 = identical reports,
// clamped to [0, 0.5]); `samples` grows with `sample`; converged from the second report.
// Always passes crux::protocol::ValidateProfileReport.
v1::ProfileReport SynthesizeProfile(const SimJob& job, uint64_t sample, core::Rng& rng,
                                    double jitter = 0.02);

}  // namespace crux::loadgen

#endif  // CRUX_LOADGEN_WORKLOAD_H_
