// Synthetic training jobs for crux-loadgen: placement from a topology and plausible profiles.
//
// Jobs draw a model from a small built-in catalogue (numbers from configs/models.yaml: public
// parameter counts and the 6 x params x tokens FLOP rule at 125 TFLOP/s effective per A100),
// a host count within the model's range (capped by the topology), and hosts either as a
// contiguous block (as a locality-aware scheduler would) or scattered (fragmented cluster), so
// plans differ between jobs. Per-iteration bytes per peer NIC come from core::ExpandTraffic, the
// same byte maths the planner uses, so the daemon sees consistent demands.
//
// Host-agent mode (crux-loadgen --hostd N, issue #28): MakeHostdJobs packs the jobs onto the
// first N hosts of the topology, at most as many GPUs per host as the host has, so that a
// multi-host job becomes one part per host and each host's agent carries the parts of every job
// on it (see "Host-agent mode" in docs/client.md's crux-loadgen section). The part messages
// (MakePartRegister, SynthesizePartProfile, MakeHostPart) have the shape crux-hostd sends
// (hostd/include/crux/hostd/host_agent.h): placement = the part's host with GPUs = its local
// ranks and every NIC of the host, a HostPart, and a profile per NCCL communicator (one world
// communicator per job: local ranks, their GPU slots, bytes per rank and peer rank).
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
  // Host-agent mode only (MakeHostdJobs; empty otherwise): the job's GPUs (= ranks) on each of
  // `hosts` and their GPU slots there. Ranks are numbered host by host in `hosts` order, slots
  // ascending within a host.
  std::vector<std::vector<uint32_t>> host_slots;
  uint64_t comm_hash = 0;  // The job's world communicator (host-agent mode).
};

// One host's part of a job (host-agent mode): jobs[job].hosts[host].
struct SimPart {
  size_t job = 0;
  size_t host = 0;
  friend bool operator==(const SimPart&, const SimPart&) = default;
};

// One crux-hostd agent: a host and the parts of every job placed on it (job order).
struct SimAgent {
  std::string host;
  std::vector<SimPart> parts;
};

// Builds `options.jobs` jobs on `topo`. Errors: kInvalidArgument naming the option
// ("jobs: must be >= 1"), or "topology: has no hosts".
core::Result<std::vector<SimJob>> MakeJobs(const core::Topology& topo,
                                           const WorkloadOptions& options);

// Host-agent mode: `options.jobs` jobs packed onto the first `agents` hosts of `topo` (every
// host with at least one GPU; GPUs per host from the topology, else options.gpus_per_host).
// Each job draws a model and a host count h as MakeJobs does and wants h hosts x G GPUs (G: the
// most GPUs a host has). When the jobs together want more GPUs than the hosts hold, every job's
// host count and GPUs per host are scaled down by the same factor, the square root of the one
// that fits (so jobs keep spanning hosts; at least one host and one GPU each), until the rounded
// sizes fit. A job takes its GPUs per host on hosts with room for them, then whatever is free,
// starting at a random host (in host order half of the time, scattered otherwise), so small jobs
// share hosts and large ones span several. Errors (kInvalidArgument): agents
// outside 1..hosts ("--hostd: ..."), more jobs than GPUs ("--jobs: ..."), and MakeJobs' ones.
// ENSURES: every job has host_slots, sum over jobs of a host's slots <= its GPUs, slots distinct
// per host.
core::Result<std::vector<SimJob>> MakeHostdJobs(const core::Topology& topo,
                                                const WorkloadOptions& options, int agents);

// The agents of `jobs` (host-agent mode): one per host that carries a part, in first-appearance
// order over the jobs' hosts; each with its parts in job order.
std::vector<SimAgent> AgentsOf(const std::vector<SimJob>& jobs);

// The HostPart of jobs[p.job]'s part on its host p.host (hosts expected = the job's hosts).
v1::HostPart MakeHostPart(const SimJob& job, size_t host);
// crux-hostd's registration of a part: placement = that host only (GPUs = local ranks, every NIC
// of the host), model "nccl", the HostPart. REQUIRES: host < job.hosts.size(), job has
// host_slots.
v1::RegisterJob MakePartRegister(const SimJob& job, size_t host, uint32_t lease_ms);
// crux-hostd's `sample`-th profile report of a part: period and compute time (with the jitter of
// SynthesizeProfile), overlap 1, bytes per iteration = what the part's ranks send, the HostPart,
// and the world communicator's CommTraffic (local ranks, slots, per rank the bytes to each peer
// rank of the pattern: ring -> next rank 2(n-1)/n S; all_to_all -> every other rank S/n;
// pipeline -> next rank S). Always passes crux::protocol::ValidateProfileReport.
v1::ProfileReport SynthesizePartProfile(const SimJob& job, size_t host, uint64_t sample,
                                        core::Rng& rng, double jitter = 0.02);

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
