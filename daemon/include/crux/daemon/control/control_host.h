// ControlHost: the one owner of core::ControlLoop (all of the daemon's control rules: lifecycle,
// hysteresis, debounce, newcomer level, planner refusals, the diff, switch QoS decisions, link
// health) on the daemon's event loop, with the planning itself on a worker thread.
//
//   loop thread:  the services' events (a job registered, reported, ended; link signals; admin
//                 pins; options) -> ControlLoop; each event arms the timer it may have moved:
//                 the plan timer at ControlLoop::due(), the faults timer at faults_due().
//   plan timer:   takes the snapshot (one pointer per job) and hands it to the worker.
//   worker:       core::RunPlan (the policy "crux", cached per topology version and planner
//                 options), then everything the commit needs that is not cheap: the store rows
//                 (each changed assignment serialized) - nothing on the loop but the commit.
//   loop thread:  on_done(PlanRun) -> the PlanApplier (plan_applier.h) commits through
//                 FinishPlan and Commit / CommitFailed, which re-arm the plan timer.
//   faults timer: ControlLoop::EvaluateFaults -> on_link_decisions, after every evaluation even
//                 without decisions (FaultService::Apply puts them into the topology and keeps
//                 the fault metrics current; the plan they ask for runs later, on the plan
//                 timer).
//
// No caller arms a timer or changes the loop directly: loop() is read-only, for views.
//
// Re-optimisations (core::ControlLoopOptions::reoptimize_in_background, which cruxd sets) run
// beside the runs, on a worker of their own (SetReoptimizeExecutor), so no event waits for one:
//   reoptimize timer: at loop().reoptimize_due() takes a snapshot of its own and hands it to the
//                 re-optimisation worker: core::RunReoptimization on a new policy.
//   loop thread:  OnReoptimized: a fresh plan that gained enough is adopted if the topology
//                 version and planner options it was made for are still in force (else it is
//                 discarded and the next re-optimisation tries again): the policy that holds it
//                 replaces the engine's before the next run (which the adoption requests), so
//                 that run continues the fresh plan, with what changed since its snapshot
//                 planned incrementally on top, and pushes the jobs it moved.
//
// Dry runs (`cruxctl plan --dry-run`) take the same worker path on a PeekSnapshot and reply
// through their callback on the loop thread. They change nothing, the next real plan included:
// each plans on a new engine whose policy starts from the plan in force, never on the real runs'
// engine (a stable policy continues the plan of its last Schedule).
//
// Cancellation: work on the worker checks its CancellationToken (event_loop.h) before planning
// and before delivering a result; a run cancelled at shutdown delivers nothing.
//
// Thread-safety: loop thread only (the worker touches only what a run owns: the snapshot, the
// engine, a shared topology copy).
#ifndef CRUX_DAEMON_CONTROL_CONTROL_HOST_H_
#define CRUX_DAEMON_CONTROL_CONTROL_HOST_H_

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/control/control_loop.h"
#include "crux/core/plan/planner.h"
#include "crux/core/policies/policy.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/state/topology_manager.h"
#include "crux/daemon/store/store.h"

namespace crux::daemon {

// The event loop's monotonic time as a core::Clock (what the ControlLoop runs on).
class LoopClock final : public core::Clock {
 public:
  explicit LoopClock(const EventLoop* loop) : loop_(loop) {}
  core::Duration Now() const override { return loop_->Now(); }

 private:
  const EventLoop* loop_;
};

// A policy that re-optimised beside the runs and holds the fresh plan, with what it was made for.
struct AdoptedPolicy {
  std::unique_ptr<core::SchedulingPolicy> policy;
  std::shared_ptr<const core::Topology> topology;
  uint64_t topology_version = 0;
  core::PlannerOptions options;
};

// The policy cruxd plans with ("crux", source ports resolved, stable per the options).
core::Result<std::unique_ptr<core::SchedulingPolicy>> MakeDaemonPolicy(
    const core::Topology& topo, const core::PlannerOptions& options);

// What cruxd counts of its re-optimisations beside the runs (ControlHost::reoptimize_stats).
struct ReoptimizeStats {
  uint64_t adopted = 0;    // Fresh plan adopted (handed to the next run).
  uint64_t kept = 0;       // The plan in force gained too little to be replaced.
  uint64_t discarded = 0;  // Adoptable, but the topology or planner options changed meanwhile.
  uint64_t failed = 0;     // No fresh plan (the status says why; logged).
};

// One finished run, handed back to the loop thread.
struct PlanRun {
  std::shared_ptr<const core::PlanningSnapshot> snapshot;
  std::shared_ptr<const core::PlanOutcome> outcome;
  std::shared_ptr<const core::Topology> topology;  // The topology it was planned on.
  // Store rows of outcome->changed, serialized on the worker for epoch snapshot->epoch + 1 (the
  // epoch the commit will use unless something else advanced it meanwhile).
  std::vector<PlanRow> rows;
  double replan_ms = 0;  // Worker time of the whole run (planning and rows).
};

// The worker side: a policy cached per topology version and planner options. Not thread-safe:
// one run at a time (the worker thread, or the loop for inline hosts).
class PlanEngine {
 public:
  // With `adopt` (a re-optimisation's policy for this topology version and these options), the
  // run plans with it instead of the cached policy (which it replaces).
  PlanRun Run(std::shared_ptr<const core::PlanningSnapshot> snap,
              std::shared_ptr<const core::Topology> topo, uint64_t topology_version,
              const core::PlannerOptions& options, bool rows,
              std::shared_ptr<AdoptedPolicy> adopt = nullptr);

 private:
  std::unique_ptr<core::SchedulingPolicy> policy_;
  std::shared_ptr<const core::Topology> topology_;
  uint64_t version_ = 0;
  core::PlannerOptions options_;
};

class ControlHost {
 public:
  // Runs work on the worker (cruxd); an empty executor runs it inline on the loop (tests on a
  // ManualEventLoop: deterministic).
  using Executor = std::function<void(WorkerThread::CancellableWork)>;
  using DoneCallback = std::function<void(PlanRun)>;
  using DryRunCallback = std::function<void(PlanRun)>;
  // Links whose health the fault rules changed (never empty), to put into the topology at once.
  using LinkDecisionsCallback = std::function<void(const std::vector<core::LinkDecision>&)>;

  // `loop`, `topo` must outlive the host. The callbacks run on the loop thread, never inline in
  // an event. REQUIRES: valid options.
  ControlHost(EventLoop* loop, TopologyManager* topo, core::ControlLoopOptions loop_options,
              core::PlannerOptions planner_options, DoneCallback on_done,
              LinkDecisionsCallback on_link_decisions, Executor executor);
  ~ControlHost();
  ControlHost(const ControlHost&) = delete;
  ControlHost& operator=(const ControlHost&) = delete;

  // Read-only: what views (cruxctl, metrics, the gateway's replies) read.
  const core::ControlLoop& loop() const { return control_; }
  uint64_t runs() const { return control_.runs(); }
  const core::PlannerOptions& planner_options() const { return planner_options_; }

  // ---- job events (the gateway; core::ControlLoop's of the same name) ----
  void AddJob(core::JobDemand demand, uint32_t dscp);
  core::ReportVerdict ReportProfile(const std::string& id, const core::JobProfile& profile);
  void UpdateDemand(core::JobDemand demand);
  std::shared_ptr<const core::AppliedAssignment> RemoveJob(const std::string& id,
                                                           std::string_view reason);

  // ---- what else a plan depends on ----
  // A plan is due: "start", "config reload", ...
  void Invalidate(std::string_view reason);
  // The loop's options (a reload): its own, and the fault rules'.
  void SetOptions(const core::ControlLoopOptions& options);
  // Errors: invalid options (nothing changes). New options invalidate the plan.
  core::Status SetPlannerOptions(const core::PlannerOptions& options);

  // ---- link health (signals and admin pins for core::FaultManager) ----
  void ObserveLinkState(const core::LinkStateSignal& signal);
  void ObserveCounters(const core::CounterSignal& signal);
  void ObserveNicCounters(const core::NicCounterSignal& signal);
  void ObserveFlows(const std::string& job_id, const std::vector<core::FlowSample>& samples);
  // Probes of the job's assignment that a host agent sent and measured (the operator's
  // measurement of the probes' path capacity: core::ControlLoop::ObserveHostProbes).
  void ObserveHostProbes(const std::string& job_id, const std::vector<core::FlowSample>& samples);
  void SetLinkAdmin(core::LinkId link, core::AdminLinkState state);
  void ClearLinkAdmin(core::LinkId link);
  // Runs the fault rules now (an admin pin wants its answer at once) and returns the links whose
  // health changed. The caller must put them into the topology before it returns to the event
  // loop: the plan they ask for starts on the plan timer, which never fires inline.
  std::vector<core::LinkDecision> EvaluateFaults();

  // ---- start-up (Daemon's restore, before Start: nothing is armed) ----
  void RestoreJob(core::JobDemand demand, uint32_t dscp, std::optional<core::JobProfile> profile,
                  std::optional<core::JobProfile> planned);
  void RestoreApplied(core::AppliedPlan applied, uint64_t epoch);
  void RestoreLinkAdmin(core::LinkId link, core::AdminLinkState state);

  // ---- the commit of a run handed to on_done (the PlanApplier) ----
  core::ApplyBatch FinishPlan(const core::PlanningSnapshot& snap, const core::PlanOutcome& outcome);
  // The batch is durable (or there was nothing to store): it is in force; the next run may start.
  void Commit(const core::ApplyBatch& batch);
  // The batch could not be made durable: nothing changes; the run is retried after a backoff.
  void CommitFailed();

  // A dry run on the worker, on an engine of its own (above): `done` gets the outcome on the loop
  // thread (never inline in the caller when an executor is set).
  void DryRun(DryRunCallback done);

  // Where re-optimisations run (above); unset: inline on the loop (tests on a ManualEventLoop).
  void SetReoptimizeExecutor(Executor executor) { reoptimize_executor_ = std::move(executor); }
  const ReoptimizeStats& reoptimize_stats() const { return reoptimize_stats_; }

 private:
  struct Mailbox;  // Shared with running work and timers, so that a result or a timer arriving
                   // after the host is gone is dropped instead of touching it.
  // A timer for one of the loop's due times, re-armed when the time moves earlier.
  struct Timer {
    bool armed = false;
    core::Duration at;
    uint64_t generation = 0;
  };
  // Arms the plan timer for loop().due() / the faults timer for loop().faults_due() unless
  // armed for that time already.
  void Kick();
  void KickFaults();
  // Arms `timer` for `due` (nullopt: nothing to arm); `fire` gets the host and the generation.
  void Arm(Timer& timer, std::optional<core::Duration> due, void (ControlHost::*fire)(uint64_t));
  void Fire(uint64_t generation);
  void FireFaults(uint64_t generation);
  void FireReoptimize(uint64_t generation);
  // A re-optimisation is over (loop thread): adopt, keep or discard (above).
  struct ReoptimizeRun;
  void OnReoptimized(ReoptimizeRun run);
  std::shared_ptr<const core::Topology> CurrentTopology();
  // From a worker: runs `deliver` on the loop thread with the host, unless the host is gone by
  // then (the result is dropped).
  static void PostToHost(const std::shared_ptr<Mailbox>& mailbox,
                         std::function<void(ControlHost&)> deliver);

  EventLoop* loop_;
  TopologyManager* topo_;
  LoopClock clock_;
  core::ControlLoop control_;
  core::PlannerOptions planner_options_;
  DoneCallback on_done_;
  LinkDecisionsCallback on_link_decisions_;
  Executor executor_;
  std::shared_ptr<PlanEngine> engine_;
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<const core::Topology> topology_copy_;
  uint64_t topology_copy_version_ = 0;
  Timer plan_timer_;
  Timer faults_timer_;
  Timer reoptimize_timer_;
  Executor reoptimize_executor_;
  // An adopted re-optimisation's policy, for the next run (null: none waiting).
  std::shared_ptr<AdoptedPolicy> adopted_;
  ReoptimizeStats reoptimize_stats_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_CONTROL_HOST_H_
