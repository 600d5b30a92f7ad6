// The placement policy for trace jobs that come without hosts: pack a job as close together as
// the free GPUs allow, as the production scheduler behind the Crux trace does ("co-locate a
// job's GPUs in one host / under one switch"):
//   1. same host:  a job of at most G GPUs (G = GPUs per host) goes on one host; best fit (the
//                  host with the fewest free GPUs that still fit), ties to the lower host index.
//   2. same ToR:   a larger job takes gpus / G whole free hosts (gpus must be a multiple of G)
//                  from one ToR group if one has enough; best fit among ToR groups.
//   3. same Agg:   else from one Agg group (best fit), filling its fullest-free ToR groups first.
//   4. anywhere:   else from the whole cluster, filling Agg groups and then ToR groups with the
//                  most free hosts first (fewest switches crossed).
// Hosts inside a chosen group are taken in host order, which is also the job's ring order.
// Groups are read from the topology: a host's ToR group is the set of network switches its NICs
// (or, in explicit topologies, the host itself) connect to, so both ToRs of a dual-ToR pair form
// one group; its Agg group is the set of switches those ToRs connect to that serve no host
// directly (for Lingjun: the PSWs of the ASW). Topologies whose ToRs all reach the same Aggs
// (2-tier Clos) therefore have one Agg group.
//
// Thread-safety: not thread-safe (a Placer has state). The Topology must outlive it.
#ifndef CRUX_SIM_WORKLOAD_PLACEMENT_H_
#define CRUX_SIM_WORKLOAD_PLACEMENT_H_

#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/random.h"
#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"

namespace crux::sim::workload {

enum class PlacementLevel { kSameHost = 0, kSameTor = 1, kSameAgg = 2, kAnywhere = 3 };

struct Placement {
  std::vector<core::NodeId> hosts;  // In ring order.
  int gpus_per_host = 0;
  PlacementLevel level = PlacementLevel::kSameHost;
};

class Placer {
 public:
  // Every host of `topo` has `gpus_per_host` GPUs (>= 1). Errors: no hosts, bad count.
  static core::Result<Placer> Create(const core::Topology& topo, int gpus_per_host);

  // Chooses and reserves hosts for a `gpus`-GPU job (order above).
  // Errors: kInvalidArgument if gpus < 1 or gpus > G and not a multiple of G;
  // kFailedPrecondition (message with free counts) if the cluster has no room now.
  core::Result<Placement> Place(int gpus);
  // The fragmented alternative (what a busy production cluster ends up doing, Crux §2.2 / Fig. 6:
  // 36.3% of jobs may share links): a job of at most G GPUs is placed as by Place (one host,
  // best fit); a larger one takes gpus / G whole free hosts drawn uniformly at random from all
  // whole free hosts of the cluster (ignoring ToR/Agg groups), in host order (its ring order).
  // `level` reports the tightest group that happens to hold them. Same errors as Place.
  core::Result<Placement> PlaceScattered(int gpus, core::Rng& rng);
  // Pack-then-spill, the way a busy scheduler that keeps empty domains free for large jobs
  // fragments a cluster: a job of at most G GPUs is placed as by Place; a larger one takes whole
  // free hosts from the fullest Agg group that has any, inside it from the fullest ToR group
  // first, and spills what does not fit into the next fullest ToR group, then Agg group (tier
  // by tier). Jobs placed so share ToR groups (and their uplinks) with their neighbours, where
  // Place would have chosen a group that holds them whole. Deterministic. Same errors as Place.
  core::Result<Placement> PlaceSpilled(int gpus);
  // GPU-sharing hosts (docs/evaluation.md, "Where priorities matter"): a job larger than one
  // host takes half of each of 2 x gpus / G hosts (G / 2 GPUs on each; its per-host GPU count is
  // then G / 2), hosts another job already half-holds first, then whole free hosts, each in host
  // order (its ring order: the half-held ones first). Every host it uses it may share with
  // another job, NICs included: with one NIC per host that NIC is a bottleneck no path choice
  // avoids. A job of at most G GPUs, or any job when G is odd, is placed by Place. Errors as
  // Place ("not enough half-free hosts ...").
  core::Result<Placement> PlaceShared(int gpus);
  // Reserves a given placement (e.g. from a trace). kFailedPrecondition if a host lacks the
  // GPUs, kInvalidArgument for a node that is not a host.
  core::Status Reserve(const Placement& p);
  // Returns the GPUs of an earlier Place/Reserve. REQUIRES: it was reserved and not released.
  void Release(const Placement& p);

  int gpus_per_host() const { return gpus_per_host_; }
  int free_gpus() const { return free_total_; }
  int free_gpus(core::NodeId host) const;
  int total_gpus() const { return gpus_per_host_ * static_cast<int>(hosts_.size()); }
  // Group indices (for tests and statistics).
  int tor_group(core::NodeId host) const;
  int agg_group(core::NodeId host) const;

 private:
  Placer() = default;
  std::vector<core::NodeId> TakeWholeHosts(const std::vector<int>& host_indices, int n) const;
  // Reserves whole hosts (indices into hosts_, in ring order) and reports the tightest group.
  core::Result<Placement> ReserveWholeHosts(const std::vector<int>& host_indices) {
    return ReserveHosts(host_indices, gpus_per_host_);
  }
  // Reserves `per_host` GPUs on each of the hosts (indices, ring order); the tightest group.
  core::Result<Placement> ReserveHosts(const std::vector<int>& host_indices, int per_host);

  int gpus_per_host_ = 8;
  int free_total_ = 0;
  std::vector<core::NodeId> hosts_;          // Topology host order.
  std::vector<int> index_of_node_;           // NodeId value -> index in hosts_ (-1 if not a host).
  std::vector<int> free_;                    // Per host index.
  std::vector<int> tor_of_;                  // Per host index: ToR group.
  std::vector<int> agg_of_tor_;              // Per ToR group: Agg group.
  std::vector<std::vector<int>> tor_hosts_;  // Per ToR group: host indices in order.
  int num_agg_groups_ = 0;
};

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_PLACEMENT_H_
