// Probe design: which links no live flow looks at, and the few probes that cover them (issue
// #14 item 4, docs/faults.md "Probes"). Pure.
//
// Tomography (fault_localisation.h) sees a link only through the pinned flows that cross it. A
// link no flow crosses - a spare uplink, a path the planner moved every job off after a fault -
// is invisible: a fault there goes unnoticed until a job is placed on it, and a link marked
// degraded by tomography cannot show that it healed. Probes fill the gaps: a probe is a flow of
// an existing job (from one of its NICs to one of its peers, so the receiving side is a host of
// the same job and the probe shares the job's DSCP, hence its queue) pinned by its UDP source
// port to an equal-cost path that crosses uncovered links. Its measurements come back like the
// job's flows (Heartbeat.flows with probe set) and enter the same routing matrix.
//
// DesignProbes, over the plan's assignments:
//   1. covered = every directed link a pinned flow crosses;
//   2. suspects first: the fault manager's probe targets (FaultManager::probe_targets: links
//      one job's flows accuse with no second source, ambiguous ones, the paths of slow flows
//      the localisation cannot place) that are watched: host agents' probes over them are the
//      independent source the tenant rule asks for (fault_manager.h). Per suspect in the order
//      given (the fault manager's: the strongest suspicion first, so budgets go to it),
//      `coverage` probes, one at a time, each crossing it and as few other suspects as possible
//      (ties: job, pair, path order): a probe over one link of an ambiguous set and not the
//      others is what tells them apart, and the localisation places a link from min_flows (2)
//      rows, so the probes can settle a suspect without a job's flow. Candidates: the
//      jobs' first max_pairs_per_job pairs, every pair one of whose pinned flows crosses a
//      suspect, those flows' ends paired across, and each such flow's source (destination) NIC
//      with up to max_pairs_per_job other NICs of the job (probes that share the first or the
//      last links of its path and leave the rest). Up to 2 x max_per_job probes per job;
//   3. then targets = watched links (WatchedLinks: up links between a NIC and a switch or
//      between two switches) that are not covered;
//      by a greedy multi-cover (each target wanted `coverage` times), lazily re-evaluated:
//      candidates are (job, one of its first max_pairs_per_job flow NIC pairs, one of the pair's
//      equal-cost paths); the candidate crossing the most targets still wanted is taken (ties: job
//      id, pair order, path index) if the resolver finds a source port for its path, until no
//      candidate covers a target, every job has max_per_job probes or max_total probes are
//      designed (max_per_job per job in this pass; max_total counts both passes).
// Links no job can reach (no job has a NIC pair whose equal-cost paths cross them, e.g. the
// access link of an idle host) stay in `uncovered`: only a host-side prober independent of jobs
// could look there (see docs/faults.md).
//
// Rate bound (documented for operators; crux-hostd enforces it when it sends): each probe is one
// message of `size` bytes per `interval`, so the fabric carries at most
// max_total x size / interval of probe traffic (defaults: 256 x 64 KiB per second = 134 Mb/s
// across the whole fabric) and one job at most 3 x max_per_job x size / interval (6.3 Mb/s:
// 2 x max_per_job over suspects, max_per_job over uncovered links).
//
// Cost: O(candidates x hops) to build the candidate heap, plus one re-evaluation per popped
// candidate; candidates <= jobs x max_pairs_per_job x paths per pair.
//
// Thread-safety: pure function; `paths` is the caller's (PathFinder is not thread-safe).
#ifndef CRUX_CORE_FAULTS_FAULT_PROBES_H_
#define CRUX_CORE_FAULTS_FAULT_PROBES_H_

#include <map>
#include <string>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

struct ProbeOptions {
  // Whether the control loop designs probes (DesignProbes itself ignores it). Off by default:
  // only job-side senders that measure them (crux-loadgen's simulation today; crux-hostd's
  // HostProbe seam) make them useful.
  bool enabled = false;
  int max_per_job = 4;  // >= 0 (0: no probes).
  // Probes wanted over each uncovered link and designed over each suspect: localisation needs
  // min_flows unhealthy observations of a link (faults.min_flows, 2 by default), so one probe
  // alone could never accuse it. >= 1 (fixed in cruxd).
  int coverage = 2;
  int max_total = 256;          // >= 0.
  int max_pairs_per_job = 8;    // >= 1: NIC pairs of a job whose paths are candidates.
  int max_paths_per_pair = 64;  // >= 1: equal-cost paths of a pair considered.
  PortRange ports;              // Source ports searched (the planner's range).
  Duration interval = Duration::Millis(1000);  // Each probe once per interval (> 0).
  Bytes size = Bytes::KiB(64);                 // Per probe message (> 0).
  // A flow below this fraction of what it is entitled to (its expected rate, as the gray rule
  // measures it) but not below gray_ratio is no evidence against any link; unexplained, it makes
  // its links probe targets, so that capacity probes (which congestion does not lower) settle
  // them: a gray link that slows its one flow by 10-20 % (a 200 G NIC link at 45 % under a
  // 100 G flow) is found. In (0, 1]; at or below gray_ratio it adds nothing.
  double suspect_ratio = 0.9;

  friend bool operator==(const ProbeOptions&, const ProbeOptions&) = default;
};

// kInvalidArgument naming the field ("faults.probes.max_per_job: must be >= 0").
Status ValidateProbeOptions(const ProbeOptions& o);

// Upper bound of the probe traffic the options allow, in bits per second, fabric-wide.
double ProbeRateBoundBps(const ProbeOptions& o);

struct ProbeDesign {
  // Job id -> its probes (src and dst NICs are the job's; path and source port pinned).
  std::map<std::string, std::vector<FlowPin>> probes;
  std::vector<LinkId> covered_by_flows;   // Watched links some pinned flow crosses; sorted.
  std::vector<LinkId> covered_by_probes;  // Targets at least one probe crosses; sorted.
  std::vector<LinkId> uncovered;          // Targets neither reaches; sorted.
  std::vector<LinkId> under_covered;      // Targets fewer than `coverage` probes cross; sorted.
  std::vector<LinkId> suspects;  // The suspects probed for (watched ones), in the order given.
  size_t total = 0;              // Probes designed.

  friend bool operator==(const ProbeDesign&, const ProbeDesign&) = default;
};

// The links worth watching: up links NIC <-> switch and switch <-> switch (both directions
// separately). Sorted.
std::vector<LinkId> WatchedLinks(const Topology& topo);

// See the file comment. `assignments` are the plan's (their probes are ignored; null entries
// are skipped), in job id order for a deterministic design. `paths` must be built over `topo`
// (the effective topology the plan was made on); `resolver` is the planner's source-port model.
// `suspects`: link ids, the first probed first (step 2).
ProbeDesign DesignProbes(const Topology& topo, const std::vector<const Assignment*>& assignments,
                         PathFinder& paths, const SourcePortResolver& resolver,
                         const ProbeOptions& options, const std::vector<LinkId>& suspects = {});

}  // namespace crux::core

#endif  // CRUX_CORE_FAULTS_FAULT_PROBES_H_
