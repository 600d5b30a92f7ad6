// crux::sim — trace-driven, fluid, event-driven flow-level simulator.
//
// It runs a core::SchedulingPolicy (policy.h: the very same code the daemon runs) against a
// workload on a core::Topology and measures how much GPU computation the cluster gets done.
//
// Model (docs/simulator.md has the details and the reasons):
//   - Per directed link: strict priority between levels, max-min fair sharing within a level.
//     Flow rates are recomputed at every flow start/finish and capacity change.
//   - A flow of S bytes over h hops takes h * per_hop_latency (alpha) + the fluid transfer (beta).
//   - Jobs iterate: compute (JobSpec::compute_time), communication (the flows of
//     core::ExpandTraffic on the policy's paths) starting after overlap_start * compute; the next
//     iteration's compute waits for the previous iteration's communication. A job ends after its
//     duration or iteration count, or at the horizon.
//   - Plans reach the jobs through core::ControlLoop, cruxd's control loop, hosted in virtual time
//     (ControlOptions): a job registers at its arrival, runs on the temporary top level until the
//     client library's profiler, fed with its simulated iteration events, reports a converged
//     profile, and the loop's debounce, minimum interval and hysteresis decide when plans run.
//     ControlOptions::oracle instead plans every running job from its true spec at once at
//     every arrival, departure and link event (the behaviour before issue #11, the paper's
//     idealisation).
//   - Hidden faults (SimOptions::faults, crux/sim/faults.h): physical link faults the control loop
//     must find from simulated per-flow heartbeats and switch port state (off by default).
//   - Deterministic for a seed.
//
// The value types (SimJob, SimOptions, SimResult, ...) are in sim_types.h.
//
// Thread-safety: Simulate is re-entrant (no globals); the inputs must not change during a call.
#ifndef CRUX_SIM_SIMULATOR_H_
#define CRUX_SIM_SIMULATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/sim_types.h"

namespace crux::sim {

// Runs `policy` (a core::MakePolicy name) on `jobs` and `link_events`.
// Errors: unknown policy, invalid options, invalid jobs (the message names the job).
core::Result<SimResult> Simulate(const core::Topology& topo, const std::string& policy,
                                 const std::vector<SimJob>& jobs,
                                 const std::vector<LinkEvent>& link_events,
                                 const SimOptions& options);

// The same with any policy (e.g. one not registered in core::MakePolicy). SimResult::policy is
// the policy's name().
core::Result<SimResult> Simulate(const core::Topology& topo, const PolicyFactory& make_policy,
                                 const std::vector<SimJob>& jobs,
                                 const std::vector<LinkEvent>& link_events,
                                 const SimOptions& options);

// Checks options, jobs and link events without running anything. Errors name the option, the
// job (by id) and field, or the link event (by index). Times beyond kMaxSimTime, and job ids or
// (non-empty) model names that break Crux's name rule (crux/core/ids.h, core::IsValidName:
// 1-128 characters of [A-Za-z0-9._:/-]; no control characters or escape sequences), are errors.
core::Status ValidateSimInput(const core::Topology& topo, const std::vector<SimJob>& jobs,
                              const std::vector<LinkEvent>& link_events, const SimOptions& options);

}  // namespace crux::sim

#endif  // CRUX_SIM_SIMULATOR_H_
