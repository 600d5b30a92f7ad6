// ControlHost: hosts core::ControlLoop (all of the daemon's control rules: lifecycle, hysteresis,
// debounce, newcomer level, planner refusals, the diff, switch QoS decisions) on the daemon's
// event loop, with the planning itself on a worker thread.
//
//   loop thread:  events -> ControlLoop; Kick() arms one timer for ControlLoop::due();
//                 the timer takes the snapshot (one pointer per job) and hands it to the worker.
//   worker:       core::RunPlan (the policy "crux", cached per topology version and planner
//                 options), then everything the commit needs that is not cheap: the store rows
//                 (each changed assignment serialized) - nothing on the loop but the commit.
//   loop thread:  on_done(PlanRun) -> the PlanApplier (plan_applier.h) commits and pushes.
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
#include <string>
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
  PlanRun Run(std::shared_ptr<const core::PlanningSnapshot> snap,
              std::shared_ptr<const core::Topology> topo, uint64_t topology_version,
              const core::PlannerOptions& options, bool rows);

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

  // `loop`, `topo` must outlive the host. REQUIRES: valid options.
  ControlHost(EventLoop* loop, TopologyManager* topo, core::ControlLoopOptions loop_options,
              core::PlannerOptions planner_options, DoneCallback on_done, Executor executor);
  ~ControlHost();

  core::ControlLoop& loop() { return control_; }
  const core::ControlLoop& loop() const { return control_; }

  // After events that may have asked for a plan (and after a commit): arms the timer for
  // loop().due() if it is not armed for that time already.
  void Kick();
  // The run handed to on_done was committed (or failed): the loop may start the next one.
  void RunFinished() { Kick(); }

  core::Status SetPlannerOptions(const core::PlannerOptions& o);
  const core::PlannerOptions& planner_options() const { return planner_options_; }

  // A dry run on the worker, on an engine of its own (above): `done` gets the outcome on the loop
  // thread (never inline in the caller when an executor is set).
  void DryRun(DryRunCallback done);

  uint64_t runs() const { return control_.runs(); }

 private:
  struct Mailbox;  // Shared with running work, so a result arriving after the host is gone is
                   // dropped instead of touching it.
  void Fire(uint64_t generation);
  std::shared_ptr<const core::Topology> CurrentTopology();

  EventLoop* loop_;
  TopologyManager* topo_;
  LoopClock clock_;
  core::ControlLoop control_;
  core::PlannerOptions planner_options_;
  DoneCallback on_done_;
  Executor executor_;
  std::shared_ptr<PlanEngine> engine_;
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<const core::Topology> topology_copy_;
  uint64_t topology_copy_version_ = 0;
  bool armed_ = false;
  core::Duration armed_for_;
  uint64_t generation_ = 0;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_CONTROL_HOST_H_
