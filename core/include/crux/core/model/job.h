// Jobs and their per-iteration traffic.
//
// A JobSpec is what the user (crux-plan's jobs YAML), the daemon (client registrations and
// profile reports) or the simulator (trace) knows about a training job. ExpandTraffic turns its
// traffic description into NIC-to-NIC flows: bytes each flow carries per training iteration, on
// the wire (after compression).
//
// Byte maths (S = `bytes`, the logical per-iteration size; c = compression_ratio; H hosts,
// G GPUs per host, p = H * G GPUs, R = rails = NICs per host used by the job, min(G, NICs)):
//   ring_allreduce: NCCL's flat ring over p GPUs moves 2 (p - 1) / p * S bytes over every ring
//     edge. Crux runs R rail-aligned rings, each carrying S / R of the buffer; inside a host a
//     ring uses NVLink, and it crosses host boundaries once per host, NIC r of host i -> NIC r
//     of host (i + 1) mod H. So each of the H * R inter-host flows carries
//     2 (p - 1) / p * S / R * c bytes. H == 1: no network flows.
//   all_to_all: S is each GPU's send buffer; a GPU sends S / p to every GPU. Host a sends
//     G * G * S / p to host b (a != b), spread over the R rails (NIC r -> NIC r, as PXN does):
//     G * G * S / p / R * c per flow, H * (H - 1) * R flows.
//   pipeline: one stage per host, in the order of `hosts`. S is the activation size sent
//     forward between consecutive stages per iteration; the same S of gradients comes back.
//     Each of the 2 (H - 1) host pairs gets R flows (one per rail) of S / R * c bytes.
//   explicit: the user's flows, each `bytes` * c. Endpoints are NICs or hosts.
//
// Thread-safety: pure functions.
#ifndef CRUX_CORE_MODEL_JOB_H_
#define CRUX_CORE_MODEL_JOB_H_

#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

enum class TrafficPattern { kExplicit, kRingAllReduce, kAllToAll, kPipeline };

std::string_view TrafficPatternName(TrafficPattern p);
// "ring_allreduce", "all_to_all", "pipeline", "explicit". kInvalidArgument otherwise.
Result<TrafficPattern> ParseTrafficPattern(std::string_view name);

// One flow per training iteration. src/dst are NICs or hosts (endpoint-side nodes).
struct FlowDemand {
  NodeId src;
  NodeId dst;
  Bytes bytes;  // Per iteration, on the wire. > 0.
};

struct JobSpec {
  std::string id;             // Unique, non-empty.
  std::vector<NodeId> hosts;  // Placement: distinct kHost nodes, >= 1.
  int gpus_per_host = 8;      // >= 1.
  Duration compute_time;      // Per iteration when running alone, > 0.
  // W_j per iteration. Absent: gpus * compute_time * peak FLOP/s (PlannerOptions).
  std::optional<Flops> flops_per_iteration;
  // Fraction of an iteration's compute after which its communication may start, in [0, 1].
  // 1 = no overlap (communicate after compute), 0 = communication may start immediately.
  double overlap_start = 1.0;
  // On-wire bytes / logical bytes, in (0, 1e3]. Applied to every flow.
  double compression_ratio = 1.0;

  TrafficPattern pattern = TrafficPattern::kRingAllReduce;
  Bytes pattern_bytes;            // S for the collective patterns (see above). > 0.
  std::vector<FlowDemand> flows;  // For kExplicit: bytes before compression.

  // Rank for the `fixed` policy only (policy.h), 0 = highest; ignored by every other policy.
  std::optional<int> fixed_rank;

  int gpus() const { return gpus_per_host * static_cast<int>(hosts.size()); }
};

// Checks every field; errors name the field ("compute_time_s: must be > 0 (got nan)").
Status ValidateJob(const Topology& topo, const JobSpec& job);

// The job's flows for one iteration (see the byte maths above). Flows with zero bytes are
// dropped. REQUIRES: ValidateJob(topo, job).ok() (checked again; errors are returned).
Result<std::vector<FlowDemand>> ExpandTraffic(const Topology& topo, const JobSpec& job);

// W_j: the given value, or gpus * compute_time * peak_flops_per_gpu.
Flops WorkPerIteration(const JobSpec& job, double peak_flops_per_gpu);

}  // namespace crux::core

#endif  // CRUX_CORE_MODEL_JOB_H_
