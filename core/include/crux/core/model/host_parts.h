// Multi-host jobs: one job reported in parts, one per host. crux-hostd speaks for the ranks of a
// job on its host (docs/client.md "NCCL jobs without code"); cruxd merges the parts' latest
// reports into the job's one profile (docs/daemon.md "Multi-host jobs"), which the control loop
// then treats like any other report (hysteresis, lifecycle).
//
// What a part reports besides its own figures: per NCCL communicator (identified by its hash,
// equal on every rank) the communicator ranks that run on its host and, per local rank and peer
// rank, the bytes per iteration the rank sends (RankPeerBytes; peer_rank -1: the plugin's
// estimate, not split over peers yet). No single part knows where a peer rank runs; the merge
// does, from every part's local ranks.
//
// The merge (MergeHostParts):
//   * Rank -> host: (communicator, rank) belongs to the part that lists it among its local ranks.
//     A rank two parts claim belongs to neither (counted in conflicting_ranks), so a confused or
//     bad part cannot take another part's ranks.
//   * Rank -> NIC: the part's NICs in order. A communicator that reports each local rank's slot
//     (local_slots: the process's local GPU index) on a host whose GPU count is known maps slot
//     s to NIC GpuNicIndex(s, gpus, nics), the rail rule every part of Crux uses (traffic_model.h):
//     a rail ring of one rank per host lands on the NIC of the GPU the rank runs on. Without slots
//     (an older sender) or GPU count, the k-th of the communicator's n local ranks on the host (by
//     rank number) uses NIC floor(k * nics / n), which is right only when the communicator spans
//     every GPU of the host. Neither knows which NIC a rank's QPs really use (the plugin does
//     not see it), so both are assumptions.
//   * Bytes: each split RankPeerBytes of a rank the part owns goes to its peer's host: another
//     host -> bytes of the NIC pair (summed); the same host -> dropped (NVLink / shared memory,
//     never on the network); a peer rank no part owns (its part has not reported or registered) ->
//     unattributed; peer_rank -1 -> unsplit. Explicit NIC-level peers a part reports (PeerBytes,
//     local NIC on its own host) are added as they are. Only attributed bytes reach the profile.
//   * Figures: period, compute time and overlap are the medians over the reporting parts (the
//     upper median for an even count, like crux-hostd's merge over ranks); W_j is the sum when
//     every reporting part gives one; compression 1 (bytes are on the wire).
//   * Completeness: the job is complete when every registered part has reported and at least
//     hosts_expected (the largest any part says; 0 = unknown) parts are registered. An
//     incomplete merge is never converged and carries samples 0, so the job stays profiling (on
//     the newcomers' level) until every host is in; complete: samples = the smallest of the
//     parts', converged when every part's report is.
//   * Bad input loses nothing else: two parts of one host (never from cruxd, which keys parts by
//     host) claim the same ranks, which then belong to neither; a figure that is not finite
//     (overlap, W_j) is left out (overlap: of the median; W_j: the job has none); sums saturate
//     at INT64_MAX bytes instead of wrapping.
//
// What each host gets back (SplitAssignmentByHost): the job's assignment header (level, colour,
// NCCL settings) and only the flows that leave its own NICs, since a flow is pinned at its
// sending QP (the verbs shim on the source host).
//
// Pure functions over value types; thread-compatible.
#ifndef CRUX_CORE_MODEL_HOST_PARTS_H_
#define CRUX_CORE_MODEL_HOST_PARTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// Bytes per iteration from a communicator rank to one peer rank (-1: not split over peers).
struct RankPeerBytes {
  uint32_t rank = 0;
  int32_t peer_rank = -1;
  Bytes bytes;

  friend bool operator==(const RankPeerBytes&, const RankPeerBytes&) = default;
};

// One NCCL communicator as one host sees it.
struct CommTraffic {
  uint64_t comm_hash = 0;
  uint32_t nranks = 0;
  uint32_t nnodes = 0;
  std::vector<uint32_t> local_ranks;  // The communicator's ranks on this host.
  // local_slots[i]: the local slot (GPU index on the host) of local_ranks[i]; empty: not
  // reported (an older sender, or a rank whose slot crux-hostd does not know).
  std::vector<uint32_t> local_slots;
  std::vector<RankPeerBytes> bytes;  // Of local ranks.

  friend bool operator==(const CommTraffic&, const CommTraffic&) = default;
};

// A part's latest report: its own figures (profile.peers: explicit NIC-level peers, local NIC
// on the part's host; usually empty) and its communicators.
struct HostPartReport {
  JobProfile profile;
  std::vector<CommTraffic> comms;

  friend bool operator==(const HostPartReport&, const HostPartReport&) = default;
};

// What a part says about itself at registration (crux.v1.HostPart).
struct HostPartInfo {
  uint32_t hosts_expected = 0;  // Hosts the job spans (NCCL's nNodes); 0 = unknown.
  uint32_t local_ranks = 0;     // The job's ranks on the part's host.

  friend bool operator==(const HostPartInfo&, const HostPartInfo&) = default;
};

// One registered part, as the merge sees it.
struct HostPartInput {
  NodeId host;
  std::vector<NodeId> nics;  // PartNics: in order, non-empty.
  uint32_t hosts_expected = 0;
  uint32_t gpus = 0;  // GPUs of the host (Topology::host_gpus); 0 = unknown: slots are not used.
  const HostPartReport* report = nullptr;  // Latest accepted report; null: none yet.
};

struct HostPartMergeStats {
  uint32_t parts = 0;            // Registered.
  uint32_t parts_reporting = 0;  // With a report.
  uint32_t hosts_expected = 0;   // The largest a part says (0: unknown).
  bool complete = false;
  Bytes cross_host;                // Attributed to NIC pairs (the profile's peers).
  Bytes same_host;                 // Dropped: peer on the same host.
  Bytes unsplit;                   // peer_rank -1.
  Bytes unattributed;              // Peer rank (or the rank itself) owned by no part.
  uint32_t conflicting_ranks = 0;  // (communicator, rank) claimed by more than one part.
  uint64_t entries = 0;  // Local ranks and byte entries of the reports: what the merge cost.

  friend bool operator==(const HostPartMergeStats&, const HostPartMergeStats&) = default;
};

struct HostPartMerge {
  std::optional<JobProfile> profile;  // nullopt: no part has reported yet.
  HostPartMergeStats stats;

  friend bool operator==(const HostPartMerge&, const HostPartMerge&) = default;
};

// The NICs a part's traffic leaves through: the placement's NICs, else all of the host's NICs in
// the topology, else the host node itself (a topology without NIC nodes). REQUIRES: p.host is a
// host of `topo`.
std::vector<NodeId> PartNics(const Topology& topo, const PlacementHost& p);

// Checks a part's local slots against its host: per communicator, local_slots empty or as many
// as local_ranks, and each slot < host_gpus when that is known (> 0). Errors (kInvalidArgument)
// name the field, e.g. "comms[2].local_slots[0]: 9 is not a GPU of the host (8 GPUs)".
Status CheckLocalSlots(const HostPartReport& r, uint32_t host_gpus);

// The job's profile from its parts (see the file comment). `parts` in any order (the result does
// not depend on it); the profile's peers are sorted by (local, remote) NIC.
HostPartMerge MergeHostParts(const std::vector<HostPartInput>& parts);

// The assignment of a multi-host job cut per host: for every host of `hosts` (duplicates
// collapse), `a`'s header and the flows whose source NIC is on that host, in `a`'s order (a host
// without flows gets the header alone); probes likewise go to their source NIC's host. Flows of
// hosts not in `hosts` (or whose source NIC is not a node of `topo`) are in no entry.
// O(flows + probes + hosts log hosts).
std::map<NodeId, Assignment> SplitAssignmentByHost(const Assignment& a, const Topology& topo,
                                                   const std::vector<NodeId>& hosts);

}  // namespace crux::core

#endif  // CRUX_CORE_MODEL_HOST_PARTS_H_
