// SchedulingPolicy: one interface for Crux and the baselines it is compared against.
//
// A policy maps cluster state (topology + the jobs present now) to a Plan: for every job a
// priority rank and hardware level, and for every flow a path. The daemon runs `crux`; the
// simulator (sim/) runs any of them through this interface, so both execute the very same code.
//
// Names (MakePolicy):
//   crux        full pipeline (planner.h): intensity-ordered paths, P_j = k_j I_j, DAG
//               compression onto K levels.
//   crux-ps     Crux paths only: every job at one level (what the priorities add, taken away).
//   crux-ps-pa  paths + priorities, no compression: every job its own level (unlimited levels).
//   crux-pa     Crux priorities and compression, but ECMP (hash) paths.
//   crux-guard  crux's priorities and paths; a contention edge gets separate levels only where
//               strict priority is predicted to pay on the routed timings (policies.h).
//   crux-pa-guard  the same guard on crux-pa (ECMP hash paths).
//   ecmp        ECMP hash paths, one level for everyone.
//   sincronia   ECMP paths; BSSI order over links-as-ports, level = max(K - 1 - rank, 0) counted
//               from the lowest level (the top K-1 ranks get distinct levels, the rest share the
//               lowest one).
//   taccl       each job's least congested path in arrival (input) order; jobs with longer paths
//               (more hops) get higher priority.
//   cassini     ECMP paths, one level, per-job time shifts (JobPlan::time_shift) from the
//               circle / affinity-graph method.
//   fixed       Crux paths; ranks given per job (JobSpec::fixed_rank, 0 = highest) mapped onto
//               levels in rank order.
//   ideal       every job planned alone (its standalone least-congested paths, level 0);
//               `isolates_jobs()` is true: a simulator gives each job a private copy of the
//               network (the contention-free bound).
//
// Thread-safety: a policy is not thread-safe. The Topology and Clock must outlive it.
#ifndef CRUX_CORE_POLICIES_POLICY_H_
#define CRUX_CORE_POLICIES_POLICY_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/model/job.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

struct PolicyOptions {
  // Levels (K), seed, peak FLOP/s, ... Every policy honours `planner.levels`: no JobPlan::level
  // is outside [0, levels) except for crux-ps-pa, whose levels are unbounded (one per rank).
  PlannerOptions planner;
  // `crux` only: run the planner's stage 5 (a UDP source port per flow, planner.h). Off by
  // default: the simulator does not need ports; `planner.resolve_ports` is ignored.
  bool resolve_ports = false;
  // `crux` only: incremental re-planning (PlannerOptions::incremental; `planner.incremental` is
  // ignored). Each Schedule recomputes only what the jobs added, removed or changed since the
  // previous successful one touch, with the same result as a full re-plan (only Plan::timing
  // differs; tests/core/incremental_planner_test.cc checks it on random event sequences).
  bool incremental = true;
  // `crux` only: stable re-planning (PlannerOptions::stable; `planner.stable` is ignored):
  // kept jobs keep their paths and levels between re-optimisations. Requires `incremental`.
  bool stable = false;
};

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;

  // The name it was made with (e.g. "crux").
  virtual std::string_view name() const = 0;

  // True for `ideal` only: jobs must not share the network with each other.
  virtual bool isolates_jobs() const { return false; }

  // Plans the given jobs. The result has one JobPlan per input job, in input order, with
  // `rank` (0 = highest, a strict order), `level` (0 = highest) and `flows` (every flow of
  // ExpandTraffic with a non-empty `path`). Fields a policy does not compute keep their
  // standalone values (I_j, t_j, period are always filled in). Deterministic for a given
  // input and seed. Errors: invalid jobs (message names the job and field).
  virtual Result<Plan> Schedule(const std::vector<JobSpec>& jobs) = 0;

  // ---- State kept across Schedule calls (the `crux` policy; the others keep none) ----
  // The next Schedule plans from scratch, without what earlier calls kept (caches that do not
  // change results, such as paths and ports, stay). For a stable policy this re-optimises.
  virtual void Reoptimize() {}
  // True when the next Schedule would start from the plan in force if given one (a stable
  // `crux` policy without state, e.g. new after a restart or a topology change); see Seed.
  virtual bool WantsSeed() const { return false; }
  // The plan in force, for the next Schedule (Planner::Seed). Ignored unless WantsSeed().
  virtual void Seed(std::vector<PlanSeed> /*seeds*/) {}
  // What the last successful Schedule recomputed (nullptr: the policy does not say).
  virtual const ReplanStats* last_replan() const { return nullptr; }
};

// The names accepted by MakePolicy, in the order above.
const std::vector<std::string>& PolicyNames();

// Makes a policy by name. Errors: unknown name (the message lists the valid ones), invalid
// options.
Result<std::unique_ptr<SchedulingPolicy>> MakePolicy(std::string_view name, const Topology& topo,
                                                     const PolicyOptions& options,
                                                     const Clock* clock = &SteadyClock::Instance());

}  // namespace crux::core

#endif  // CRUX_CORE_POLICIES_POLICY_H_
