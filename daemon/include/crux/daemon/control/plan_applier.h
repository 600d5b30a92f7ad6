// PlanApplier: commits a finished run on the loop thread. The worker already did everything
// heavy (planning, assignments, the diff, switch states, store rows: control_host.h); here the
// control loop's FinishPlan filters the jobs that left meanwhile, the batch is made durable in
// one store transaction (assignments, audit rows, the epoch), committed to the loop, pushed
// (assignments to their jobs' connections, states to the changed switches) and published to
// cruxctl as a new DaemonView. A batch that cannot be stored is not applied (nothing is pushed
// with an epoch that is not durable) and the loop retries the run with backoff. With `dry_run`
// the batch is only logged.
//
// A host agent whose parts registered with HostPart.accepts_batches gets one AssignmentBatch per
// epoch carrying all of its changed parts (issue #28) instead of one push per part; such a batch
// counts as one entry of a chunk.
//
// Pushes go out in chunks of kPushChunk assignments: the first chunk at once, each further one as
// a posted task of its own, so that a 10,000-job epoch does not hold the loop for the whole
// burst (messages run between chunks). A chunk skips an assignment that a later epoch has
// replaced meanwhile (that epoch pushes its own).
//
// The store write runs on the StoreWriter's thread; the run stays in flight meanwhile and the
// rest (commit, pushes, publish) happens when it is done, so the loop never waits for SQLite.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_CONTROL_PLAN_APPLIER_H_
#define CRUX_DAEMON_CONTROL_PLAN_APPLIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crux/daemon/config/config.h"
#include "crux/daemon/control/control_host.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/state/enforcer.h"
#include "crux/daemon/state/job_tracker.h"
#include "crux/daemon/state/topology_manager.h"
#include "crux/daemon/store/job_journal.h"
#include "crux/daemon/store/store_health.h"
#include "crux/daemon/store/store_writer.h"

namespace crux::daemon {

// The shadow accounting of one published plan (docs/impact.md), estimated after it was pushed.
struct ImpactState {
  uint64_t epoch = 0;                              // The epoch the estimated plan was published at.
  std::shared_ptr<const core::PlanImpact> impact;  // Null when the estimate failed.
  std::string error;                               // Why it failed ("" otherwise).
  std::unordered_map<std::string, size_t> index;   // Job id -> its position in impact->jobs.
};

// What cruxctl reads: an immutable picture the applier publishes at each commit.
struct DaemonView {
  uint64_t epoch = 0;
  std::shared_ptr<const core::AppliedPlan> applied;
  std::shared_ptr<const core::PlanOutcome> outcome;  // Of the last successful run (null: none).
  std::shared_ptr<const core::Topology> topology;    // The one `outcome` was planned on.
  // The newest shadow accounting (null: none yet, or impact.enabled false). It may describe an
  // earlier plan than `outcome` (ImpactState::epoch): estimates run after the push, at most
  // every impact.interval_ms.
  std::shared_ptr<const ImpactState> impact;
};

class PlanApplier {
 public:
  // `config` is the running one (dry_run is live). Every pointer must outlive the applier;
  // `metrics` may be null.
  PlanApplier(const DaemonConfig* config, EventLoop* loop, Metrics* metrics,
              const TopologyManager* topo, JobTracker* tracker, Enforcer* enforcer,
              ControlHost* control, JobJournal* journal, StoreWriter* writer,
              StoreHealth* store_health)
      : config_(config),
        loop_(loop),
        metrics_(metrics),
        topo_(topo),
        tracker_(tracker),
        enforcer_(enforcer),
        control_(control),
        journal_(journal),
        writer_(writer),
        store_health_(store_health) {}
  PlanApplier(const PlanApplier&) = delete;
  PlanApplier& operator=(const PlanApplier&) = delete;

  void Apply(PlanRun run);

  // Where the shadow accounting of a published plan is estimated (a thread of its own in cruxd:
  // it is never on a plan's path). Unset: on the loop thread, right after the publish (tests).
  // The executor runs the work it is given once, on any thread, with a token that stops it early
  // (a shutdown); the result comes back through the loop (EventLoop::Post) and is dropped if the
  // applier is gone by then.
  using ImpactExecutor = std::function<void(WorkerThread::CancellableWork)>;
  void SetImpactExecutor(ImpactExecutor executor) { impact_executor_ = std::move(executor); }

  // Publishes the plan in force without a run (after the restore).
  void PublishApplied() { Publish(PlanRun{}); }

  // The view published last (never null once PublishApplied ran).
  const std::shared_ptr<const DaemonView>& view() const { return view_; }
  uint64_t replans() const { return replans_; }
  double last_replan_ms() const { return last_replan_ms_; }

  static constexpr size_t kPushChunk = 256;

 private:
  // The shadow accounting (docs/impact.md): a published plan is estimated when none is being
  // estimated and impact.interval_ms - or three times the previous estimate's duration, if
  // longer - has passed since the previous estimate started (otherwise when both hold; a newer
  // plan replaces one still waiting). The result is published in the view and exported on
  // /metrics.
  struct ImpactWork {
    std::shared_ptr<const core::PlanningSnapshot> snapshot;
    std::shared_ptr<const core::Topology> topology;
    std::shared_ptr<const core::PlanOutcome> outcome;
    uint64_t epoch = 0;
  };
  void RequestImpact(const PlanRun& run, uint64_t epoch);
  void MaybeStartImpact();
  void OnImpact(std::shared_ptr<const ImpactState> state);
  void ExportImpact(const ImpactState& state);
  struct Push {
    std::string peer;
    std::shared_ptr<const core::AppliedAssignment> assignment;  // In force when queued.
    std::string serialized;  // Its store row (AssignmentToProto, serialized): sent as is.
    // A multi-host job's part: what is sent instead (its host's cut; `serialized` empty).
    std::shared_ptr<const core::AppliedAssignment> cut = nullptr;
    // An AssignmentBatch for an agent whose parts accept batches (`assignment` null): every part
    // of `peer` changed in this epoch, each with its job's assignment in force when queued.
    struct Member {
      std::shared_ptr<const core::AppliedAssignment> assignment;
      std::shared_ptr<const core::AppliedAssignment> cut;
    };
    std::vector<Member> batch = {};
  };
  using Pushes = std::vector<Push>;

  class StepTimer;  // The loop's time per step of a commit, logged when slow (plan_applier.cc).
  // A batch's store rows: one plan row per changed assignment (in batch.changed's order) and one
  // audit row each.
  struct BatchRows {
    std::shared_ptr<std::vector<PlanRow>> plan;
    std::vector<AuditRow> audit;
  };

  // Apply's four ways, by what the run produced. Each ends the run (the control host's Commit or
  // CommitFailed lets the next one start), ApplyChanged once its store write is done.
  // The planner failed: nothing to apply.
  void ApplyFailed(const PlanRun& run);
  // config.dry_run: what would change is logged, nothing is applied.
  void ApplyDryRun(const PlanRun& run, const core::ApplyBatch& batch);
  // Nothing changed: the batch still establishes the switches' first state after a start.
  void ApplyUnchanged(const PlanRun& run, const core::ApplyBatch& batch);
  // Assignments or switch states changed: the rows are stored (when the epoch advances) and the
  // batch committed after the write (OnStored), else committed at once.
  void ApplyChanged(std::shared_ptr<PlanRun> run, std::shared_ptr<const core::ApplyBatch> batch,
                    StepTimer& timer);
  // The rows of `batch`: the plan rows the worker serialized are moved out of `run` (serialized
  // again only if the epoch moved since its snapshot).
  BatchRows RowsOf(PlanRun& run, const core::ApplyBatch& batch) const;
  // The batch's store write is done (`s`, after `store_ms`): commit it, or have it retried.
  void OnStored(core::Status s, double store_ms, std::shared_ptr<const PlanRun> run,
                std::shared_ptr<const core::ApplyBatch> batch,
                std::shared_ptr<std::vector<PlanRow>> rows);
  // After the batch is durable (or when it needed no store write): commit, push, publish.
  void Commit(std::shared_ptr<const PlanRun> run, std::shared_ptr<const core::ApplyBatch> batch,
              std::shared_ptr<std::vector<PlanRow>> rows, double store_ms);
  void Publish(const PlanRun& run);
  // Pushes pushes[from, from + kPushChunk) and posts the rest; returns how many were sent.
  size_t PushChunk(std::shared_ptr<const Pushes> pushes, size_t from);

  const DaemonConfig* config_;
  EventLoop* loop_;
  Metrics* metrics_;
  const TopologyManager* topo_;
  JobTracker* tracker_;
  Enforcer* enforcer_;
  ControlHost* control_;
  JobJournal* journal_;
  StoreWriter* writer_;
  StoreHealth* store_health_;
  std::shared_ptr<const DaemonView> view_ = std::make_shared<const DaemonView>();
  uint64_t replans_ = 0;
  double last_replan_ms_ = 0;
  ImpactExecutor impact_executor_;
  std::optional<ImpactWork> impact_waiting_;
  bool impact_running_ = false;
  bool impact_timer_armed_ = false;
  std::optional<core::Duration> impact_started_;  // Loop time the last estimate started.
  core::Duration impact_took_;                    // Loop time from its start to its result.
  std::shared_ptr<const ImpactState> impact_;
  // Results posted back hold a weak reference: dropped once the applier is gone.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_PLAN_APPLIER_H_
