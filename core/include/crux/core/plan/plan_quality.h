// How good a plan is, by the two objectives the Crux pipeline optimises: what the control loop
// compares when a re-optimisation offers a fresh plan (ControlLoopOptions::reoptimize_min_gain)
// and what bench/stable_replan_bench.cc reports as the drift of stable re-planning.
//
//   contention_cost  sum over jobs of W_j (FLOP per iteration) x the load fraction of its most
//                    loaded link, a link's load being the bits per second of every flow pinned to
//                    it (flow bytes x 8 / the job's standalone period) over its capacity. What
//                    intensity-ordered path selection keeps low (heavy jobs on light links).
//                    Lower is better; in FLOP (a W_j-weighted load fraction).
//   cut_fraction     the compression's cut weight over the contention DAG's total edge weight
//                    (1 when the DAG has no edge): how much of the priority order the few
//                    hardware levels keep. Higher is better; in [0, 1].
//
// Pure functions of the plan and the topology; no state, thread-compatible.
#ifndef CRUX_CORE_PLAN_PLAN_QUALITY_H_
#define CRUX_CORE_PLAN_PLAN_QUALITY_H_

#include "crux/core/plan/planner.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

struct PlanQuality {
  double contention_cost = 0;  // FLOP; lower is better.
  double cut_fraction = 1;     // [0, 1]; higher is better.

  friend bool operator==(const PlanQuality&, const PlanQuality&) = default;
};

// Jobs with a non-positive period and links with no capacity (down) add nothing to the cost.
// Every link of `plan` must be a link of `topo` (the planner's own topology).
PlanQuality MeasurePlan(const Topology& topo, const Plan& plan);

// Whether `fresh` improves on `current` by at least `min_gain` (a fraction, >= 0) in either
// objective: contention cost lower by min_gain x current's cost, or cut fraction higher by
// min_gain (absolute). With min_gain 0 a tie counts as an improvement.
bool ImprovesBy(const PlanQuality& fresh, const PlanQuality& current, double min_gain);

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_PLAN_QUALITY_H_
