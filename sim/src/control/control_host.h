// The simulator's host of core::ControlLoop (docs/simulator.md, section 3): a clock that reads
// simulated time, the registration a simulated job sends, and one synchronous plan run.
//
// The host loop is the one control_loop.h documents, in virtual time:
//   on every event:        AddJob / Report / RemoveJob / Invalidate (arrival, iteration end,
//                          departure, link event);
//   the engine schedules   due() as an event;
//   at that event:         Run(): StartPlan, RunPlan on the same thread (planning takes zero
//                          simulated time: the clock does not move while it runs), FinishPlan,
//                          Commit (the simulator has no store, so a commit never fails).
//
// Internal to crux::sim. Thread-safety: none (owned by the engine).
#ifndef CRUX_SIM_SRC_CONTROL_CONTROL_HOST_H_
#define CRUX_SIM_SRC_CONTROL_CONTROL_HOST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/control/control_loop.h"
#include "crux/core/model/control_types.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/sim_types.h"

namespace crux::sim::internal {

// The registration cruxd would receive for `job`: its placement (every host with the job's
// GPUs per host, all of the host's NICs), traffic pattern and collective size S (before
// compression: the client registers the logical size), W_j if the spec has it. No
// per-flow traffic: a job with an explicit flow list registers with S = 0 (nothing to plan until
// its first profile, as for a client that registers without a size).
core::JobDemand DemandFor(const SimJob& job);

// What one run changed.
struct LoopRun {
  bool planned = false;  // The policy ran (false: no job to plan).
  // A re-optimisation weighed against the plan in force, and whether its fresh plan was adopted.
  bool reoptimize_weighed = false;
  bool reoptimize_adopted = false;
  core::Status status;  // Of the plan (not OK: nothing changed, every job keeps its plan).
  std::vector<core::AppliedAssignment> changed;                     // Now in force.
  std::vector<std::pair<std::string, core::Duration>> time_shifts;  // Of every planned job.
  size_t excluded = 0;  // Jobs left out by the planner-refusal rule.
  size_t removed = 0;   // Applied assignments the run drops.
  // With ControlLoopOptions::impact: the run's shadow accounting (core/control/impact.h).
  std::shared_ptr<const core::PlanImpact> impact;
};

class ControlHost {
 public:
  // REQUIRES: ValidateControlLoopOptions(options).ok(); `clock` (the simulated clock,
  // engine/sim_clock.h) and `nominal` (the topology registrations are resolved against) outlive
  // the host.
  ControlHost(const core::Clock* clock, const core::Topology* nominal,
              const core::ControlLoopOptions& options);

  // A job registers (at its arrival). Its fixed_rank (policy `fixed`) is kept here: see Run.
  void AddJob(const SimJob& job);
  // A report of a live job; returns the loop's verdict.
  core::ReportVerdict Report(const std::string& id, const core::JobProfile& profile);
  void RemoveJob(const std::string& id, std::string_view reason);
  void Invalidate(std::string_view reason);

  // When the next run is due (simulated time), if one is requested.
  std::optional<core::Duration> due() const { return loop_.due(); }

  // Runs the due plan with `policy` (made for `topo`) and commits it. REQUIRES: a run is due
  // (due() <= now). Core's JobDemand has no fixed_rank, so BuildJobSpec cannot carry it:
  // the ranks of `fixed` are put back into the snapshot's specs before RunPlan (a copy; the
  // loop's own snapshot is untouched).
  LoopRun Run(core::SchedulingPolicy& policy, const core::Topology& topo);

  const core::ControlLoop& loop() const { return loop_; }
  // Link health signals and decisions (fault injection): straight to the loop.
  core::ControlLoop& mutable_loop() { return loop_; }

 private:
  // `snap` with the fixed ranks put back (a copy), or `snap` itself when there are none.
  std::shared_ptr<const core::PlanningSnapshot> WithFixedRanks(
      std::shared_ptr<const core::PlanningSnapshot> snap) const;

  const core::Clock* clock_;
  core::ControlLoop loop_;
  std::unordered_map<std::string, int> fixed_rank_;
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_CONTROL_CONTROL_HOST_H_
