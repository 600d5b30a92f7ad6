// The policy and control-loop host (docs/simulator.md, section 3): how plans reach the
// simulated jobs. It owns the policy (made by the PolicyFactory on the simulator's copy of the
// topology and the simulated clock) and writes each job's plan in force (level, flows on
// fabric resources, time shift) into the job model.
//
//   oracle        Replan(): every running job planned from its true JobSpec at once.
//   control loop  cruxd's core::ControlLoop (control_host.h): jobs register at arrival (Arrive),
//                 run on their default (hash ECMP) routes below every job level, report
//                 profiles from their simulated profiler (ReportIteration), leave (Remove); the
//                 loop's due runs (RunDue) commit assignments: pinned paths and levels.
//
// Link events change the host's topology (SetLink) and make the policy stale (rebuilt before
// the next plan); flows stuck on a down link move to a usable planned path (RerouteStalled).
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_CONTROL_PLAN_APPLIER_H_
#define CRUX_SIM_SRC_CONTROL_PLAN_APPLIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "control/control_host.h"
#include "crux/core/base/status.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/link_name.h"
#include "crux/core/topology/path_finder.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/sim_types.h"
#include "engine/sim_clock.h"
#include "jobs/job_model.h"
#include "network/fabric.h"

namespace crux::sim::internal {

class PlanApplier {
 public:
  // `nominal`, `factory`, `options`, `clock` and `result` outlive the host.
  PlanApplier(const core::Topology& nominal, const PolicyFactory& factory,
              const std::vector<SimJob>& jobs, const SimOptions& options,
              const engine::SimClock& clock, SimResult& result);

  // Makes the policy (the fabric needs to know whether it isolates jobs). Call first.
  core::Status Init();
  bool isolates_jobs() const { return isolate_; }
  // The fabric and job model it writes plans into. Call once, after Init().
  void Bind(Fabric* fabric, JobModel* jobs);
  // What the fast-forward wakes first: `before_change` gets a job's index before a control loop
  // run changes its plan or time shift; `before_reroute` is called before flows in flight move
  // to other paths (RerouteStalled: rare, after link events; a moved flow may cross any group).
  // Either may be empty.
  void SetWakeHooks(std::function<void(uint32_t)> before_change,
                    std::function<void()> before_reroute) {
    before_change_ = std::move(before_change);
    before_reroute_ = std::move(before_reroute);
  }

  bool oracle() const { return oracle_; }

  // ---- Oracle ----
  // Plans every running job now. A failed re-plan keeps every job's previous plan (error only
  // when a job that never had one cannot run).
  core::Status Replan();

  // ---- Control loop ----
  // Job `j` arrives: it runs at once on its default routes below every job level.
  void Arrive(uint32_t j);
  // An iteration of `j` ended: its profiler's sample, and the report if one is due.
  void ReportIteration(uint32_t j);
  // `j` left before the horizon.
  void Remove(uint32_t j);
  // When the loop's next run is due, if one is requested.
  std::optional<core::Duration> due() const;
  // Runs the due plan in zero simulated time. `changed`: an assignment or a time shift changed
  // (the groups of interacting jobs may be different).
  core::Status RunDue(bool* changed);
  // The profiler of `j` (if any) reported and confirms no change, and has `window` samples of
  // the current regime (JobState::epoch_iterations), or is quiet, or (an exactly periodic job)
  // would stay settled through the iterations that fill its window with its cycle's samples:
  // no report of it can be half-way or due while it sleeps.
  bool ProfilerSettled(uint32_t j) const;
  // After a link event: flows without a pin follow the fabric's hash routing at once.
  void RefreshDefaults();
  bool defaults_stale() const { return defaults_stale_; }
  uint64_t epochs() const { return loop_ ? loop_->loop().epoch() : 0; }

  // ---- Both ----
  // Link `l` (one direction) now has `capacity` (0: down).
  void SetLink(core::LinkId l, core::Bandwidth capacity);
  // A link event happened (after SetLink of both directions).
  void OnLinkEvent();
  // Flows in flight on a down link whose job has a usable path for them now move onto it.
  void RerouteStalled();

  // ---- Link health (control loop; fault injection, docs/fault-simulation.md) ----
  // The signals cruxd's gateway would pass on, in simulated time.
  void ObserveFlows(uint32_t j, const std::vector<core::FlowSample>& samples);
  void ObserveLinkState(const core::LinkStateSignal& s);
  void ObserveCounters(const core::CounterSignal& s);
  void ObserveNicCounters(const core::NicCounterSignal& s);
  // Results of job j's probes that its hosts' agents measured (ControlLoop::ObserveHostProbes).
  void ObserveHostProbes(uint32_t j, const std::vector<core::FlowSample>& samples);
  // The probes of job j's assignment in force (null: none, or no loop).
  const std::vector<core::FlowPin>* ProbesOf(uint32_t j) const;
  const core::ProbeOptions& probe_options() const { return options_.control.loop.faults.probes; }
  // The fault manager's FaultManager::disbelieved_reports (0 without a loop).
  uint64_t disbelieved_reports() const;
  // When the fault manager wants to evaluate (nullopt: nothing pending, or the oracle).
  std::optional<core::Duration> faults_due() const;
  // EvaluateFaults now; each decision is applied to the planner's topology as cruxd's
  // FaultService does (down: down; degraded: nominal x fraction; up: nominal), which makes the
  // policy and the default routes stale. Returns the decisions.
  std::vector<core::LinkDecision> EvaluateFaults();
  // Links whose health in force is not up (the loop's fault manager).
  bool any_link_not_up() const { return not_up_ > 0; }

  // ---- Shadow accounting (ControlLoopOptions::impact; docs/impact.md) ----
  // Closes every open prediction interval at `end` and writes each job's figures (JobResult::
  // predicted_iteration, ...) into `jobs` (parallel to the job model's jobs) and the cluster
  // figure into the result. No-op without predictions.
  void FinishImpact(core::Duration end, std::vector<JobResult>& jobs);

 private:
  // A job's prediction in force and what it accumulated (ImpactTrack per job index).
  struct ImpactTrack {
    bool open = false;  // An interval is open: the job runs scheduled under a prediction.
    core::Duration predicted;
    core::Duration ecmp;
    core::Duration since;           // Start of the open interval.
    int64_t iterations = 0;         // JobState::iterations at `since`.
    core::Duration iteration_time;  // JobState::iteration_time_sum at `since`.
    // Closed intervals: sum of their lengths (s), of length x prediction, and what completed.
    double seconds = 0;
    double predicted_s2 = 0;
    double ecmp_s2 = 0;
    int64_t observed_iterations = 0;
    core::Duration observed_time;
  };
  void CloseImpact(uint32_t j, core::Duration now);
  void NoteImpact(const core::PlanImpact& impact);

  core::Status MakePolicy();
  // The running job `id` if `time_shift` differs from the one it runs under, else null.
  JobState* ShiftChanges(const std::string& id, core::Duration time_shift);
  bool RouteAlone(uint32_t j);
  void SetPlanFlows(uint32_t j, const core::Assignment* a);
  // SimOptions::spray: each plan flow of `j` becomes one sub-flow per equal-cost path.
  void SprayPlanFlows(uint32_t j);
  // A hash of an assignment's pinned flows (pairs, ports, paths).
  static uint64_t FlowsHash(const core::Assignment& a);
  void ApplyTimeShift(JobState& s, core::Duration shift);
  void NoteLevel(uint32_t j, core::JobPhase phase, int level);

  const core::Topology& nominal_;  // As given (no link event applied).
  core::Topology topo_;            // Our copy: link events change it.
  const PolicyFactory& factory_;
  const SimOptions& options_;
  const engine::SimClock& clock_;
  SimResult& result_;
  const bool oracle_;
  Fabric* fabric_ = nullptr;
  JobModel* jobs_ = nullptr;

  std::unique_ptr<core::SchedulingPolicy> policy_;
  // SimOptions::spray: the equal-cost paths on topo_ (reset whenever topo_ changes).
  std::unique_ptr<core::PathFinder> spray_paths_;
  bool isolate_ = false;
  bool policy_stale_ = false;
  // Control loop.
  std::unique_ptr<ControlHost> loop_;
  std::unique_ptr<core::SchedulingPolicy> ecmp_;          // Default routes (hash ECMP, job alone).
  std::unique_ptr<core::SchedulingPolicy> nominal_ecmp_;  // The same on `nominal_`.
  bool ecmp_stale_ = false;
  bool defaults_stale_ = false;  // A link event changed the routes of unpinned flows.
  std::unordered_map<std::string, uint32_t> index_of_;
  std::function<void(uint32_t)> before_change_;
  std::function<void()> before_reroute_;
  std::vector<core::LinkHealth> health_;  // Per directed link, as decided (fault injection).
  // faults_due() (FaultManager::NextDue walks every link it knows; the engine asks at every
  // event): recomputed only after a signal or an evaluation, the only things that change it.
  mutable std::optional<std::optional<core::Duration>> faults_due_;
  size_t not_up_ = 0;
  std::vector<ImpactTrack> impact_;
  double recovered_now_ = 0;        // gpus_recovered of the prediction in force.
  core::Duration recovered_since_;  // When it took force.
  double recovered_integral_ = 0;   // Sum of gpus_recovered x seconds.
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_CONTROL_PLAN_APPLIER_H_
