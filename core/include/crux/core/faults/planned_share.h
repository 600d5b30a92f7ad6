// The rate the plan entitles each flow to (issue #27 item 1): what a fault manager measures a
// flow against instead of the flow's own past, so that congestion the plan itself creates (two
// jobs sharing a link, traffic concentrated next to a handled fault) is not taken for a fault.
//
// Model: every flow of `flows` is active at once on its pinned path; the switches serve levels
// in strict priority (level 0 first, as the planner's queues do) and share a link max-min fairly
// within a level (progressive filling); a flow takes at most its demand (unbounded unless
// given: a flow that cannot use more, such as a small message, leaves the rest of the link to
// the others). The result is the rate each flow gets in that worst case over the links'
// nominal capacities: a lower bound on what a healthy fabric gives it when fewer flows are
// active, exact when all are. A flow that the higher levels starve completely gets 0 (the plan
// promises it nothing: its slowness is no evidence).
//
// Pure. Cost: O((F h + L) log L + F log F) for F flows of h links over the L links they touch, plus
// O(N h f log f) for N newcomers over links of at most f flows.
#ifndef CRUX_CORE_FAULTS_PLANNED_SHARE_H_
#define CRUX_CORE_FAULTS_PLANNED_SHARE_H_

#include <limits>
#include <span>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

struct ShareFlow {
  std::span<const LinkId> path;  // Directed links; every id < topo.num_links(). Empty: rate 0.
  int level = 0;                 // 0 = highest priority.
  // A probe: it takes no share from the others (its bytes are negligible); its rate is what a
  // newcomer of its level would get on every link of its path under the others' shares (the
  // max-min share x with sum(min(rate_i, x)) + x = what the higher levels leave).
  bool newcomer = false;
  // Bits/s: the most it takes (>= 0; infinity: unbounded). A newcomer's is ignored.
  double demand = std::numeric_limits<double>::infinity();
};

// Bits per second per flow, in the order of `flows`, over the capacities of `topo` (`up` is
// ignored: the nominal capacity of every link is used).
std::vector<double> PlannedShares(std::span<const ShareFlow> flows, const Topology& topo);

}  // namespace crux::core

#endif  // CRUX_CORE_FAULTS_PLANNED_SHARE_H_
