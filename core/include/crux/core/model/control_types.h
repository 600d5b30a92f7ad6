// The control loop's domain model: what a job asked for (JobDemand), what it measured
// (JobProfile), what the daemon decided for it (Assignment) and what is in force (AppliedPlan;
// the switches' AppliedQos is in qos.h). Plain value types with defaulted operator==, so a field
// added later can never be left out of a comparison (a diff against the applied plan compares whole
// Assignments).
//
// These are the types cruxd's tracker, planner host and store codec work in, and the ones the
// simulator's jobs produce: protobuf appears only at the wire and in the store codec
// (crux/protocol/convert.h), converted once, with the topology: hosts, NICs and path links are
// NodeIds / LinkIds of the nominal topology here (compact, checked once at the edge), names on
// the wire and in the store (so a stored job is re-resolved against whatever topology the next
// start loads).
//
// Thread-safety: value types.
#ifndef CRUX_CORE_MODEL_CONTROL_TYPES_H_
#define CRUX_CORE_MODEL_CONTROL_TYPES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/units.h"
#include "crux/core/model/job.h"

namespace crux::core {

// Lifecycle of a live job (a job that is gone is no longer in the loop).
//   kRegistered: known, no profile yet.
//   kProfiling:  profile not converged yet; sits on the temporary top level.
//   kScheduled:  converged profile; has the level the plan computed.
enum class JobPhase { kRegistered, kProfiling, kScheduled };

// "registered", "profiling", "scheduled".
std::string_view JobPhaseName(JobPhase p);

struct PlacementHost {
  NodeId host;               // A kHost node.
  uint32_t gpus = 0;         // GPUs of the job on this host, >= 1.
  std::vector<NodeId> nics;  // kNic nodes of `host` used (empty: all of the host's NICs).

  friend bool operator==(const PlacementHost&, const PlacementHost&) = default;
};

// A registration: what the job is and where it runs.
struct JobDemand {
  std::string id;
  std::string tenant;
  std::string model;                     // Informational.
  std::vector<PlacementHost> placement;  // Order matters (it orders pipeline stages).
  TrafficPattern pattern = TrafficPattern::kRingAllReduce;
  Bytes bytes_per_iteration;                 // Collective size S before a profile; 0 = unknown.
  std::optional<Flops> flops_per_iteration;  // W_j if the job knows it.
  Duration lease;                            // Requested; 0 = the daemon's default.

  friend bool operator==(const JobDemand&, const JobDemand&) = default;
};

// Bytes to one peer NIC per iteration, on the wire.
struct PeerTraffic {
  NodeId local_nic;  // A NIC (or host) node on one of the job's hosts.
  NodeId remote_nic;
  Bytes bytes;

  friend bool operator==(const PeerTraffic&, const PeerTraffic&) = default;
};

// A measured profile (client library, load generator, or a simulated job).
struct JobProfile {
  Duration compute_time;                     // Per iteration, > 0.
  std::optional<Flops> flops_per_iteration;  // W_j; absent: estimated from compute time.
  std::vector<PeerTraffic> peers;            // Measured per-peer bytes (empty: pattern bytes).
  Duration iteration_period;                 // Measured, > 0.
  double overlap_start = 1.0;                // [0, 1].
  double compression_ratio = 1.0;            // (0, 1000].
  uint32_t samples = 0;                      // Iterations the profile is based on.
  bool converged = false;                    // The client considers it stable.
  Bytes bytes_per_iteration;                 // Total on-wire bytes when `peers` is empty.

  friend bool operator==(const JobProfile&, const JobProfile&) = default;
};

// Hysteresis: whether `next` differs from `planned` by more than `threshold_pct` percent for
// planning: compute time, period, W_j, total or per-peer bytes or compression ratio moving by
// more than threshold_pct % of the planned value (a planned 0 counts any change), overlap_start
// by more than threshold_pct / 100 absolute, or a different set of peers. threshold_pct <= 0:
// every report is significant. Pure.
bool SignificantChange(const JobProfile& planned, const JobProfile& next, double threshold_pct);

// One pinned flow.
struct FlowPin {
  NodeId src_nic;
  NodeId dst_nic;
  uint16_t udp_sport = 0;    // 0 = unpinned (no port reaches the path).
  std::vector<LinkId> path;  // Directed links src..dst (empty: no path).

  friend bool operator==(const FlowPin&, const FlowPin&) = default;
};

// Everything of an Assignment but its flows: compared on its own where building the flows
// just to compare them would cost (a re-plan of 10,000 jobs keeps most assignments).
struct AssignmentHeader {
  std::string job_id;
  JobPhase phase = JobPhase::kRegistered;
  int level = 0;                                // 0 = highest.
  uint32_t dscp = 0;                            // The job's colour (0-63).
  uint32_t traffic_class = 0;                   // IB traffic class byte = dscp << 2 (ECN bits 0).
  std::map<std::string, std::string> nccl_env;  // NCCL_IB_TC = traffic_class.
  // The planner's reference job (k = 1; priority.h), stored so that a restart's stable planner
  // keeps the same one (PlanSeed::reference).
  bool reference_job = false;

  friend bool operator==(const AssignmentHeader&, const AssignmentHeader&) = default;
};

// What a job must do: its level (in force: the temporary top level while not scheduled), its
// colour and the NIC settings derived from it, and its pinned flows.
struct Assignment : AssignmentHeader {
  std::vector<FlowPin> flows;
  // Probes the job's hosts send with its DSCP over links no live flow covers (fault_probes.h;
  // empty unless faults.probes are on).
  std::vector<FlowPin> probes;

  friend bool operator==(const Assignment&, const Assignment&) = default;
};

// The traffic class byte and NCCL settings for a colour (the one place that rule is written).
uint32_t TrafficClassFor(uint32_t dscp);
std::map<std::string, std::string> NcclEnvFor(uint32_t dscp);

struct AppliedAssignment {
  Assignment assignment;
  uint64_t epoch = 0;  // Epoch at which this assignment last changed.

  friend bool operator==(const AppliedAssignment&, const AppliedAssignment&) = default;
};

// What is in force, by job id. Entries are shared and immutable, so a snapshot of the applied
// plan (handed to a planner thread, published to readers) costs one map of pointers, never a
// copy of every job's flows.
using AppliedPlan = std::map<std::string, std::shared_ptr<const AppliedAssignment>>;

}  // namespace crux::core

#endif  // CRUX_CORE_MODEL_CONTROL_TYPES_H_
