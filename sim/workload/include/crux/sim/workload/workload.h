// Turning workload files into the simulator's input (crux::sim::SimJob).
//
// Thread-safety: pure functions (the loaders read the file system).
#ifndef CRUX_SIM_WORKLOAD_WORKLOAD_H_
#define CRUX_SIM_WORKLOAD_WORKLOAD_H_

#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/sim_types.h"
#include "crux/sim/workload/models.h"
#include "crux/sim/workload/trace.h"
#include "crux/spec/jobs_spec.h"

namespace crux::sim::workload {

// crux-plan jobs YAML entries -> SimJobs (arrival_s default 0; duration_s, iterations and
// fixed_rank carried over). Model is "".
std::vector<SimJob> FromJobEntries(const std::vector<spec::JobEntry>& entries);
// Loads a jobs YAML file against `topo` (spec::LoadJobsFile) and converts it.
core::Result<std::vector<SimJob>> LoadJobsWorkload(const std::string& path,
                                                   const core::Topology& topo);

// Checks that no host is ever given more than `gpus_per_host` GPUs by the jobs running on it at
// the same time (each job holds spec.gpus_per_host GPUs on each of its hosts from arrival to
// arrival + duration, or arrival + iterations x compute time, a lower bound, or forever).
// For workloads whose placements are given (jobs YAML files); TraceToSimJobs does the same for
// traces, with line numbers. Errors (kInvalidArgument / kFailedPrecondition) name the jobs and
// the host: "job 'b': host 'host3' has 0 of 8 GPUs free at t=5 s, the job needs 4; held by job
// 'a' (8 GPUs, until t=100 s)".
core::Status CheckHostCapacity(const std::vector<SimJob>& jobs, const core::Topology& topo,
                               int gpus_per_host);

// Trace rows -> SimJobs, in trace order. Each row's model must be in `models` and its hosts in
// `topo`. Every host has `gpus_per_host` GPUs. Jobs are taken in arrival order; a job holds its
// hosts' GPUs from arrival until arrival + duration_s, or arrival + iterations x compute time
// (a lower bound of its real end), or forever when it has neither, and then releases them. Rows
// without placement are placed by the placement policy (placement.h) on the GPUs free at their
// arrival. Rows with a placement must find those GPUs free: a host is never given more GPUs
// than it has, whether the jobs sharing it were placed by the trace or by the policy.
// Errors (kInvalidArgument / kFailedPrecondition) start with "line N: job <id>: ...":
//   "line 3: job b: placement: host 'host3' has 0 of 8 GPUs free at t=5 s, the job needs 8;
//    held by line 2: job a (8 GPUs, until t=100 s) (...)"
// and a placement of more GPUs per host than gpus_per_host, or no room for an unplaced job, is
// an error too (the simulator does not queue jobs; the generator does, see generator.h).
// Rows of hybrid profiles carry their multi-phase iteration (SimJob::iteration, HybridIteration)
// besides its single-overlap summary (spec); jobs of one profile and size share one model.
core::Result<std::vector<SimJob>> TraceToSimJobs(const std::vector<TraceJob>& trace,
                                                 const ModelCatalog& models,
                                                 const core::Topology& topo, int gpus_per_host);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_WORKLOAD_H_
