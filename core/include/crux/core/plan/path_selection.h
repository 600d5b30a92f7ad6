// Intensity-ordered path selection (Crux §4.1) and the link-load bookkeeping it needs.
//
// Congestion metric (the paper is silent; digest Q1): each flow f has a rate
// r_f = bytes_f * 8 / period_j bits/s (bytes per iteration over the job's standalone iteration
// period), so a job that iterates twice as fast loads a link twice as much. LinkLoad keeps the
// committed rate per directed link. A flow picks, among its equal-cost paths, the one that
// minimises, in this order:
//   1. the bottleneck utilisation after placing it, max_{e in p} (load_e + r_f) / B_e;
//   2. the summed utilisation over the path, sum_{e in p} (load_e + r_f) / B_e;
//   3. the path index (deterministic enumeration order, see PathFinder).
// Utilisation comparisons use a relative tolerance of 1e-9 so that ties are decided by the next
// criterion rather than by floating-point noise. Then r_f is committed to the chosen links.
//
// Jobs are processed in the order given (the planner passes decreasing I_j; digest Q2); inside
// a job, flows go largest first, ties by input order.
//
// Thread-safety: not thread-safe (PathFinder and LinkLoad are mutated).
#ifndef CRUX_CORE_PLAN_PATH_SELECTION_H_
#define CRUX_CORE_PLAN_PATH_SELECTION_H_

#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/model/job.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// Committed load (bits/s) per directed link, with O(touched) reset.
class LinkLoad {
 public:
  explicit LinkLoad(size_t num_links) : bps_(num_links, 0.0) {}
  // Also caches 1 / capacity per link so that path selection multiplies instead of dividing.
  // The topology's capacities must not change while this LinkLoad is in use.
  explicit LinkLoad(const Topology& topo) : bps_(topo.num_links(), 0.0) {
    inv_capacity_.reserve(topo.num_links());
    for (const Link& l : topo.links()) inv_capacity_.push_back(1.0 / l.capacity.ToBitsPerSec());
  }
  // Null when constructed from a link count.
  const double* inverse_capacity() const {
    return inv_capacity_.empty() ? nullptr : inv_capacity_.data();
  }
  double Get(LinkId l) const { return bps_[l.value()]; }
  void Add(LinkId l, double bps) {
    if (bps == 0.0) return;
    if (bps_[l.value()] == 0.0) touched_.push_back(l);
    bps_[l.value()] += bps;
  }
  // Clears every link that was touched since the last reset.
  void Reset() {
    for (LinkId l : touched_) bps_[l.value()] = 0.0;
    touched_.clear();
  }
  const std::vector<LinkId>& touched() const { return touched_; }

 private:
  std::vector<double> bps_;
  std::vector<double> inv_capacity_;
  std::vector<LinkId> touched_;
};

// One job's flows and, after SelectPaths, the chosen path of each.
struct JobRouting {
  std::vector<FlowDemand> flows;
  double iterations_per_sec = 1.0;  // 1 / standalone period; > 0.
  // Per flow; filled by SelectPaths. Entries already set (same flows, same PathFinder) are
  // reused instead of looked up again.
  std::vector<const PathSet*> paths;
  std::vector<size_t> choice;  // Output: per flow, index into *paths[i].
};

// Routes every job in `order` (indices into `jobs`) greedily as described above, committing
// each flow's rate to `load`. Errors: kNotFound (naming the flow) when a flow has no path.
Status SelectPaths(PathFinder& finder, const std::vector<size_t>& order,
                   std::vector<JobRouting>& jobs, LinkLoad& load);

// ---- One job at a time (incremental re-planning, planner.h) ----

// The order in which SelectPaths routes, and commits the load of, one job's flows: bytes
// descending, ties by flow index. Written to `order` (resized to the number of flows).
void FlowRoutingOrder(const JobRouting& job, std::vector<size_t>& order);

// Routes one job exactly as SelectPaths does for each job of its `order` (same flow order, same
// rule, same commits to `load`); `flow_order` receives FlowRoutingOrder(job). Errors as
// SelectPaths.
Status SelectJobPaths(PathFinder& finder, JobRouting& job, LinkLoad& load,
                      std::vector<size_t>& flow_order);

// Commits the paths already chosen for `job` (paths/choice filled) to `load`: the very additions
// SelectPaths made when it chose them, in the same order (`flow_order` = FlowRoutingOrder(job)),
// so the resulting loads are bit for bit those of SelectPaths.
void CommitJobPaths(const JobRouting& job, const std::vector<size_t>& flow_order, LinkLoad& load);

// Least-congested choice for one flow of rate `bps` given `load` (criteria 1-3 above).
// REQUIRES: !paths.empty().
size_t LeastCongestedPath(const Topology& topo, const PathSet& paths, double bps,
                          const LinkLoad& load);

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_PATH_SELECTION_H_
