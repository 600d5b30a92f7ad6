// ControlLoop: cruxd's control logic, pure (no I/O, no threads), driven by an injected Clock and
// by events. cruxd hosts it on its event loop with the planner on a worker thread; crux-sim hosts
// it in virtual time. It is the one place these rules are written:
//
//   * Lifecycle: kRegistered (no profile) -> kProfiling (profile not converged) -> kScheduled
//     (the client marked the profile converged, or it is based on >= profiling_samples
//     iterations); a removed job (ended, lease expired) is gone.
//   * Hysteresis (`replan_threshold_pct`): a report replaces the job's *planned* profile, and
//     asks for a plan, only when it is significant (SignificantChange) or moves the phase;
//     otherwise it is kept as the latest profile only.
//   * When to plan: every event that changes what a plan would see asks for one; a plan starts
//     `debounce` after the first such request of a burst, and no sooner than
//     `min_replan_interval` after the previous start. One run at a time: requests during a run
//     make one more run after it. A run whose result could not be made durable (CommitFailed)
//     is retried with backoff.
//   * What a job looks like to the planner (BuildJobSpec): its planned profile, else its
//     registration (pattern bytes, `assumed_compute_time` of compute).
//   * Newcomer rule: a job not yet kScheduled is assigned the temporary top level 0, whatever the
//     planner computed for it (reserved_high_levels keeps scheduled jobs below it).
//   * Planner refusal (RunPlan): if the planner refuses the whole set, each job is tried alone;
//     the ones refused alone are excluded (with the reason) and the rest is planned without them.
//   * Re-optimisation (`reoptimize_interval`): with a stable policy (PlannerOptions::stable)
//     plans keep jobs' paths and levels between events and drift from the best plan; every
//     reoptimize_interval a run re-optimises (snapshot.reoptimize: the policy forgets what it
//     kept). With reoptimize_min_gain > 0 the fresh plan is weighed against the plan in force,
//     continued (plan_quality.h), and adopted only if it gains at least that much; otherwise
//     the policy is seeded with the plan in force again and no job moves. A policy without
//     state of its own (new after a restart or a topology change) is seeded with the plan in
//     force (RunPlan), so it continues that plan instead.
//     With reoptimize_in_background (cruxd) a re-optimisation is not part of a run: when it is
//     due (reoptimize_due()) the host takes a snapshot of its own (StartReoptimization), plans
//     it afresh with a policy of its own, beside the runs (RunReoptimization, on another
//     worker), and reports the verdict (FinishReoptimization). Runs go on meanwhile, so no
//     event waits for it. An adopted fresh plan reaches the jobs through the next ordinary run,
//     which the host plans with the re-optimising policy (its state is the fresh plan): what
//     changed since its snapshot is planned incrementally on top of it. A plan kept in force
//     costs nothing (the runs' policy never forgot it). A link that came back asks for a
//     re-optimisation now.
//   * Diff: the assignments a run produces are compared, whole, with the applied ones; if any
//     changed or disappeared, the epoch advances by one and the changed ones carry it. Jobs that
//     left while the run was in flight are not applied again.
//   * Link health (FaultManager, fault_manager.h: the decision rules, hysteresis and flap
//     damping): link-state, counter and flow signals go in (ObserveLinkState / ObserveCounters /
//     ObserveNicCounters / ObserveFlows), EvaluateFaults (at faults_due()) applies the rules over
//     the applied plan's routing matrix and returns the links whose health changed; the host
//     applies them to its topology (a new topology version: a new policy, seeded with the plan in
//     force) and the loop asks for a plan. The next run re-plans only the jobs whose pinned paths
//     cross a changed link: their seeds are dropped (PlanningSnapshot::unseat_links), every other
//     job keeps its paths and level (a down link drops out of the equal-cost sets anyway; a
//     degraded one would otherwise keep its jobs).
//   * Probes (faults.probes.enabled): every run designs probes (fault_probes.h) over the links
//     no flow covers and, first, over the fault manager's probe targets (suspects one job's
//     flows alone accuse); when an evaluation changes those targets, the loop asks for a plan
//     (the stable policy keeps every job's paths: only the probes change).
//   * Switch QoS (when the options carry a QosConfig): each run computes every switch's desired
//     state (core::ComputeDesiredQos over the jobs' colours, levels in force and the switches
//     their pinned flows cross) and the switches whose state changed; a change advances the epoch
//     too (except the very first state after a start, which only establishes it), and each
//     switch remembers the epoch of its last change.
//
// Typical host:
//   on every event:        loop.AddJob / ReportProfile / RemoveJob / Invalidate, then arm a
//                          timer for loop.due();
//   when the timer fires:  snap = loop.StartPlan(); outcome = RunPlan(policy, topo, *snap,
//                          clock) (on a worker, if you like); batch = loop.FinishPlan(*snap,
//                          outcome); make the batch durable; loop.Commit(batch) (or
//                          loop.CommitFailed()); push batch.changed and the changed switches;
//                          arm a timer for loop.due() again.
//
// Cost on the owner's thread: an event is O(log jobs) plus BuildJobSpec for the job it touches
// (specs are cached per job, rebuilt only when its planned profile changes); StartPlan copies
// one pointer per job; Commit copies one pointer per changed job. Planning, the assignments, the
// diff and the QoS computation all happen in RunPlan, which the host runs where it likes.
//
// Thread-safety: a ControlLoop is not thread-safe (one owner thread). RunPlan may run on another
// thread: it reads only the snapshot (immutable, shared) and the policy it is given.
#ifndef CRUX_CORE_CONTROL_CONTROL_LOOP_H_
#define CRUX_CORE_CONTROL_CONTROL_LOOP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/backoff.h"
#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/control/impact.h"
#include "crux/core/control/qos.h"
#include "crux/core/faults/fault_manager.h"
#include "crux/core/model/control_types.h"
#include "crux/core/model/job.h"
#include "crux/core/plan/plan_quality.h"
#include "crux/core/plan/planner.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

struct ControlLoopOptions {
  Duration debounce = Duration::Millis(30);               // >= 0.
  Duration min_replan_interval = Duration::Zero();        // Between two starts, >= 0.
  double replan_threshold_pct = 10;                       // Hysteresis, [0, 1000]; 0 = all.
  uint32_t profiling_samples = 20;                        // >= 1.
  Duration assumed_compute_time = Duration::Millis(100);  // Before a profile exists, > 0.
  // Retry after CommitFailed (the store could not take the batch).
  BackoffOptions retry = {.initial = Duration::Millis(1000), .max = Duration::Millis(30000)};
  // Switch QoS decisions (above); nullopt: none (the simulator). Must pass ValidateQosConfig.
  std::optional<QosConfig> qos;
  // How often a run re-optimises (above), counted from the first run; >= 0, 0 = never.
  Duration reoptimize_interval = Duration::Zero();
  // What a re-optimisation must gain to replace the plan in force (RunPlan; plan_quality.h):
  // contention cost lower by this fraction, or cut fraction higher by this much. Otherwise the
  // plan in force stays (no job moves). [0, 1); 0 = always take the fresh plan.
  double reoptimize_min_gain = 0;
  // Re-optimisations beside the runs instead of inside one (above; cruxd). The simulator keeps
  // them inside: its runs take no virtual time, so nothing waits for them there.
  bool reoptimize_in_background = false;
  // Automatic link health (FaultManager).
  FaultOptions faults;
  // Shadow accounting (impact.h): with a value, every run predicts each planned job's iteration
  // under the plan and under ECMP (PlanOutcome::impact), on the worker. nullopt: off.
  std::optional<ImpactOptions> impact;

  friend bool operator==(const ControlLoopOptions&, const ControlLoopOptions&) = default;
};

// kInvalidArgument naming the field ("control.debounce: must be >= 0").
Status ValidateControlLoopOptions(const ControlLoopOptions& o);

// The loop's view of a live job.
struct LoopJob {
  JobDemand demand;
  uint32_t dscp = 0;
  JobPhase phase = JobPhase::kRegistered;
  std::optional<JobProfile> profile;  // Latest report.
  std::optional<JobProfile> planned;  // What plans use (see Hysteresis).
  // BuildJobSpec of the planned profile (null: nothing to plan yet, or spec_error).
  std::shared_ptr<const JobSpec> spec;
  std::string spec_error;
};

struct ReportVerdict {
  JobPhase phase = JobPhase::kRegistered;
  bool phase_changed = false;
  bool plan_changed = false;  // The planned profile changed (a plan was requested).
};

// The job as the planner sees it, or nullopt when it has nothing to plan yet (no traffic figure:
// no pattern bytes and no measured peers, or a single host with no peers). Errors: a demand or
// profile whose nodes are not in `topo` (names the field).
Result<std::optional<JobSpec>> BuildJobSpec(const Topology& topo, const LoopJob& job,
                                            Duration assumed_compute_time);

// One plan run's input: immutable once taken, shared with the worker.
struct PlanningJob {
  std::string id;
  uint32_t dscp = 0;
  JobPhase phase = JobPhase::kRegistered;
  std::shared_ptr<const JobSpec> spec;  // null: nothing to plan (it still gets an assignment).
  std::string spec_error;               // BuildJobSpec failed: excluded with this reason.
};

struct PlanningSnapshot {
  uint64_t run = 0;  // 1, 2, ... per loop; 0 for PeekSnapshot (a dry run).
  std::string reason;
  uint64_t epoch = 0;                             // In force when the snapshot was taken.
  std::vector<PlanningJob> jobs;                  // Sorted by id.
  std::shared_ptr<const AppliedPlan> applied;     // In force when the snapshot was taken.
  std::optional<QosConfig> qos;                   // ControlLoopOptions::qos.
  std::shared_ptr<const AppliedQos> qos_applied;  // null: no switch state computed yet.
  bool reoptimize = false;                        // Plan from scratch (reoptimize_interval).
  double reoptimize_min_gain = 0;                 // ControlLoopOptions::reoptimize_min_gain.
  // Links whose health changed since the plan in force: a seeded policy re-plans the jobs that
  // cross them (RunPlan). Sorted.
  std::vector<LinkId> unseat_links;
  uint64_t unseat_seq = 0;  // The loop's link-change count when the snapshot was taken.
  // ControlLoopOptions::faults.probes when enabled: RunPlan designs the jobs' probes
  // (fault_probes.h) over the new plan and puts them in the assignments.
  std::optional<ProbeOptions> probes;
  // With probes: the fault manager's probe targets (FaultManager::probe_targets), probed
  // first, in its order (the strongest suspicion first).
  std::vector<LinkId> probe_suspects;
  std::optional<ImpactOptions> impact;  // ControlLoopOptions::impact.
};

// What one run produced. Computed by RunPlan on the worker.
struct PlanOutcome {
  // Not OK: the run failed (the error) and nothing of it is to be applied; what it found before
  // failing (excluded, how it started, planning_time) is kept for reports.
  Status status;
  Plan plan;  // For `planned` (plan.jobs[i] is job planned[i]).
  std::vector<std::string> planned;
  std::map<std::string, std::string> excluded;  // Job -> why it was left out.
  // The assignments that differ from the snapshot's applied ones (new jobs included), sorted by
  // id, stamped with the epoch they get if the run is applied next: snap.epoch + 1. A job whose
  // applied assignment is still what the plan says is not rebuilt.
  std::vector<std::shared_ptr<const AppliedAssignment>> changed;
  std::vector<std::string> removed;  // Applied at snapshot time, not desired now.
  // What the policy recomputed (when it says: the `crux` policy), and how the run started.
  std::optional<ReplanStats> replan;
  bool reoptimized = false;  // snap.reoptimize: planned from scratch.
  bool seeded = false;       // The policy had no state and started from the applied plan.
  // A re-optimisation weighed against the plan in force (snap.reoptimize_min_gain > 0 and a
  // stable policy): both plans' quality, and whether the fresh one was adopted (else `plan` is
  // the plan in force, continued, and the policy keeps it as its state).
  struct ReoptimizeVerdict {
    PlanQuality in_force;
    PlanQuality fresh;
    bool adopted = false;
    friend bool operator==(const ReoptimizeVerdict&, const ReoptimizeVerdict&) = default;
  };
  std::optional<ReoptimizeVerdict> reoptimize_verdict;
  // With snap.qos: every switch's desired state and the switches whose device state differs
  // from snap.qos_applied (all of them when there was none).
  std::shared_ptr<const std::map<std::string, SwitchQosState>> qos_states;
  std::vector<std::string> qos_changed;
  // With snap.probes: the probe design (coverage included) the assignments carry.
  std::shared_ptr<const ProbeDesign> probe_design;
  // With snap.impact: the plan's predicted iteration times against ECMP (impact.h), parallel to
  // plan.jobs; null when the estimate failed (impact_error says why) or was not asked for.
  std::shared_ptr<const PlanImpact> impact;
  std::string impact_error;
  // Measured with the clock RunPlan was given: the whole run, and its parts (the policy's
  // Schedule calls, building and diffing the assignments, the switch states).
  Duration planning_time;
  Duration schedule_time;
  Duration assign_time;
  Duration qos_time;
  Duration impact_time;
};

// The rules of one run: plans the snapshot's jobs with `policy` (planner refusal handling
// above), builds every job's Assignment (newcomer rule, colour, traffic class, NCCL settings,
// pinned flows, and with snap.probes the probes over the links no flow covers), diffs them
// against snap.applied and, with snap.qos, computes the switch states.
// `policy` must have been made for `topo` (the current topology, link health applied). Never
// throws for bad input; the status says what failed.
PlanOutcome RunPlan(SchedulingPolicy& policy, const Topology& topo, const PlanningSnapshot& snap,
                    const Clock& clock);

// The shadow accounting (impact.h) of `plan`, a plan of `snap`'s jobs (RunPlan's, or an earlier
// one of a snapshot that still holds its jobs), as RunPlan computes it with snap.impact: a host
// that keeps it off the plan's critical path (cruxd) calls it on its own, later. Errors: a
// planned job without a spec in `snap`, and EstimateImpact's.
Result<PlanImpact> EstimatePlanImpact(const Topology& topo, const PlanningSnapshot& snap,
                                      const Plan& plan, const ImpactOptions& options,
                                      std::stop_token stop = {});

// What a re-optimisation beside the runs (ControlLoopOptions::reoptimize_in_background) found.
struct ReoptimizeOutcome {
  // Not OK: no fresh plan (e.g. the planner refused the set; the runs deal with refusals), or no
  // plan in force to weigh it against could be made; nothing to adopt.
  Status status;
  // The fresh plan is to replace the plan in force: the policy RunReoptimization was given
  // holds it as its state, and the host plans the next run with that policy.
  bool adopt = false;
  // Weighed against the plan in force (snap.reoptimize_min_gain > 0 and a plan in force).
  std::optional<PlanOutcome::ReoptimizeVerdict> verdict;
  size_t jobs = 0;  // Planned.
};

// A re-optimisation of `snap` (StartReoptimization's) beside the runs: with a min gain and a
// plan in force, `policy` continues that plan (seeded with it, as after a restart) and then plans
// afresh, and the fresh plan is adopted only if it gains at least snap.reoptimize_min_gain
// (plan_quality.h); otherwise the fresh plan is adopted. `policy` must be new (no state), made
// for `topo`, and stable (PlannerOptions::stable: it keeps its plan between Schedule calls);
// errors otherwise. Never throws for bad input.
ReoptimizeOutcome RunReoptimization(SchedulingPolicy& policy, const Topology& topo,
                                    const PlanningSnapshot& snap);

// The assignment of one job from its plan (nullptr: the job was not planned: no flows, level 0).
Assignment MakeAssignment(const PlanningJob& job, const JobPlan* plan);
// Whether `a` is MakeAssignment(job, plan), without building the flows.
bool IsAssignmentOf(const Assignment& a, const PlanningJob& job, const JobPlan* plan);

// The QoS view of a run's jobs: colour, level in force, switches their pinned flows cross.
std::vector<QosJob> QosJobsOf(const Topology& topo, const std::vector<const Assignment*>& jobs);

// What the host must make durable and push after a run.
struct ApplyBatch {
  uint64_t run = 0;
  uint64_t epoch = 0;           // The epoch after the batch.
  bool advances_epoch = false;  // `epoch` is new: assignments or switch states changed.
  std::vector<std::shared_ptr<const AppliedAssignment>> changed;  // By job id; carry `epoch`.
  std::vector<std::string> removed;                               // Sorted.
  // Switch QoS after the batch (null: no QoS, or unchanged) and the switches whose state changed
  // (to push, stamped `epoch`).
  std::shared_ptr<const AppliedQos> qos;
  std::vector<std::string> qos_changed;
  std::vector<LinkId> unseated;  // The snapshot's unseat_links (cleared from the loop on Commit).
  uint64_t unseat_seq = 0;
  bool empty() const { return changed.empty() && removed.empty() && qos_changed.empty(); }
};

class ControlLoop {
 public:
  // `clock` and `topo` (the nominal topology jobs are resolved against; link health does not
  // matter here) must outlive the loop. REQUIRES: ValidateControlLoopOptions(options).ok().
  ControlLoop(const Clock* clock, const Topology* topo, ControlLoopOptions options);

  // Takes effect at once (a pending plan keeps its time); asks for a plan.
  void SetOptions(const ControlLoopOptions& options);
  const ControlLoopOptions& options() const { return options_; }

  // ---- events ----
  // A new job. REQUIRES: `demand.id` unknown, demand checked against the topology.
  void AddJob(JobDemand demand, uint32_t dscp);
  // A report for a known job (unknown ids are ignored). See Hysteresis and Lifecycle.
  ReportVerdict ReportProfile(const std::string& id, const JobProfile& profile);
  // A known job's registration changed (unknown ids are ignored): a multi-host job's host part
  // joined or left (core/host_parts.h). The job keeps its colour, phase and applied assignment;
  // peers of its profiles that are no longer on one of its hosts are dropped, its spec is
  // rebuilt and a plan is requested. REQUIRES: demand.id known, checked against the topology.
  void UpdateDemand(JobDemand demand);
  // The job is gone (ended, lease expired). Unknown ids are ignored. Its applied assignment is
  // dropped at once (returned, if it had one) and a plan is requested.
  std::shared_ptr<const AppliedAssignment> RemoveJob(const std::string& id,
                                                     std::string_view reason);
  // Something else a plan depends on changed (link health, planner options).
  void Invalidate(std::string_view reason);

  // ---- link health (FaultManager) ----
  // Signals: recorded; EvaluateFaults decides. Flow samples of unknown jobs are ignored.
  void ObserveLinkState(const LinkStateSignal& s);
  void ObserveCounters(const CounterSignal& s);
  void ObserveNicCounters(const NicCounterSignal& s);
  void ObserveFlows(const std::string& job_id, const std::vector<FlowSample>& samples);
  // Results of job `job_id`'s probes that a host agent sent and measured (an independent
  // source: FaultManager::OnHostProbes). Unknown jobs are ignored.
  void ObserveHostProbes(const std::string& job_id, const std::vector<FlowSample>& samples);
  // Admin pins (cruxctl set-link): in force until ClearLinkAdmin hands the link back.
  void SetLinkAdmin(LinkId link, AdminLinkState state);
  void ClearLinkAdmin(LinkId link);
  // Restart: a stored pin the host already applied to its topology.
  void RestoreLinkAdmin(LinkId link, AdminLinkState state);
  // Applies the rules now (over the applied plan): the links whose effective health changed,
  // for the host to apply to its topology before the next plan. Each change asks for a plan
  // that re-plans the jobs crossing the link (see Link health above).
  std::vector<LinkDecision> EvaluateFaults();
  // When EvaluateFaults should run (absolute Clock time; nullopt: nothing pending).
  std::optional<Duration> faults_due() const { return faults_.NextDue(); }
  const FaultManager& faults() const { return faults_; }

  // ---- restart ----
  // Puts back a stored job (its phase follows from `profile`), its applied assignment and the
  // epoch. Then call Invalidate("restart"): a restart plan from the same inputs reproduces the
  // applied plan, so it changes nothing and keeps the epoch. Switch states are not stored: the
  // first run after a start establishes them (without an epoch of its own).
  void RestoreJob(JobDemand demand, uint32_t dscp, std::optional<JobProfile> profile,
                  std::optional<JobProfile> planned);
  void RestoreApplied(AppliedPlan applied, uint64_t epoch);

  // ---- planning cadence ----
  // When StartPlan should be called (absolute Clock time); nullopt: nothing requested, or a run
  // is in flight (FinishPlan/Commit re-arm).
  std::optional<Duration> due() const;
  // The snapshot of a run, if one is due now (clock >= due()); marks it in flight.
  std::shared_ptr<const PlanningSnapshot> StartPlan();
  // A snapshot of the current state that starts nothing (a dry run: what a plan now would do).
  std::shared_ptr<const PlanningSnapshot> PeekSnapshot() const;
  // ---- re-optimisation beside the runs (options().reoptimize_in_background) ----
  // When StartReoptimization should be called (absolute Clock time); nullopt: off, never, or one
  // is in flight. due() does not include it in this mode.
  std::optional<Duration> reoptimize_due() const;
  // The snapshot of a re-optimisation (reoptimize set, with the options' min gain), if one is due
  // now; marks it in flight and restarts the interval. Runs may start and commit meanwhile.
  std::shared_ptr<const PlanningSnapshot> StartReoptimization();
  // The re-optimisation is over; `adopted`: its fresh plan is to reach the jobs, so a run is
  // requested ("re-optimisation adopted"), which the host plans with the re-optimising policy.
  void FinishReoptimization(bool adopted);
  bool reoptimizing() const { return reoptimizing_; }
  uint64_t reoptimizations() const { return reoptimizations_; }
  // The run `snap` is over: the batch to make durable and push (jobs that left since the
  // snapshot are not applied again). An outcome with an error yields an empty batch. The run
  // stays in flight until Commit / CommitFailed.
  ApplyBatch FinishPlan(const PlanningSnapshot& snap, const PlanOutcome& outcome);
  // The batch is durable: it is in force, the epoch advances.
  void Commit(const ApplyBatch& batch);
  // The batch could not be made durable: nothing changes, the run is retried after a backoff.
  void CommitFailed();

  // ---- views ----
  const std::map<std::string, LoopJob>& jobs() const { return jobs_; }
  const LoopJob* Find(const std::string& id) const;
  const AppliedPlan& applied() const { return *applied_; }
  std::shared_ptr<const AppliedPlan> applied_ptr() const { return applied_; }
  // The applied assignment of `id`, or null.
  const AppliedAssignment* Applied(const std::string& id) const;
  std::shared_ptr<const AppliedQos> qos() const { return qos_; }
  uint64_t epoch() const { return epoch_; }
  bool in_flight() const { return in_flight_; }
  uint64_t runs() const { return runs_; }
  // Reasons of the requests not yet in a run (at most 16 kept).
  const std::vector<std::string>& pending_reasons() const { return reasons_; }

 private:
  JobPhase PhaseFor(const JobProfile& p) const;
  void Request(std::string_view reason);
  void RebuildSpec(LoopJob& job) const;
  // When the next re-optimisation is due (nullopt: never, or no job).
  std::optional<Duration> ReoptimizeAt() const;
  // The applied plan for writing: in place when nobody else holds it, else a copy (copy on
  // write, so snapshots and published views stay immutable).
  AppliedPlan& MutableApplied();
  std::shared_ptr<PlanningSnapshot> Snapshot() const;

  const Clock* clock_;
  const Topology* topo_;
  ControlLoopOptions options_;
  std::map<std::string, LoopJob> jobs_;
  std::shared_ptr<AppliedPlan> applied_;
  std::shared_ptr<const AppliedQos> qos_;
  uint64_t epoch_ = 0;

  std::vector<std::string> reasons_;
  bool requested_ = false;
  std::optional<Duration> requested_at_;  // First request of the pending burst.
  std::optional<Duration> last_start_;
  std::optional<Duration> last_reoptimize_;  // Start of the current reoptimize_interval.
  std::optional<Duration> retry_at_;
  bool in_flight_ = false;
  uint64_t runs_ = 0;
  ExponentialBackoff retry_;
  FaultManager faults_;
  // Links changed since the plan in force, with the change count when each last changed.
  std::map<LinkId, uint64_t> unseat_;
  uint64_t unseat_seq_ = 0;
  // A link decision brought a link back up: the next run plans from scratch (with the min gain),
  // since no job crosses the link to be unseated onto it (in background mode: the next
  // re-optimisation is due at once).
  bool reoptimize_after_recovery_ = false;
  bool reoptimizing_ = false;     // A re-optimisation beside the runs is in flight.
  uint64_t reoptimizations_ = 0;  // Started beside the runs.
  // The fault manager's probe targets the latest request was made for (probes enabled),
  // sorted: a new order of the same links asks for no plan.
  std::vector<LinkId> probe_suspects_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_CONTROL_CONTROL_LOOP_H_
