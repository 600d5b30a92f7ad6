#include "crux/daemon/control/plan_applier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "crux/daemon/control/impact_report.h"
#include "crux/daemon/state/part_profiles.h"
#include "crux/daemon/store/store_codec.h"
#include "crux/protocol/validate.h"

namespace crux::daemon {
namespace {

// ", everything re-planned (reference changed)" and the like: why the planner could not keep the
// previous plan (core::ReplanStats::full_replan), except on a first plan.
std::string ReplanText(const core::PlanOutcome& o) {
  if (!o.replan || o.replan->full_replan.empty() ||
      o.replan->full_replan.starts_with("first plan")) {
    return "";
  }
  return fmt::format(", everything re-planned ({})", o.replan->full_replan);
}

}  // namespace

void PlanApplier::RequestImpact(const PlanRun& run, uint64_t epoch) {
  if (!config_->impact.enabled || !run.snapshot || !run.topology || !run.outcome) return;
  impact_waiting_ = ImpactWork{run.snapshot, run.topology, run.outcome, epoch};
  MaybeStartImpact();
}

void PlanApplier::MaybeStartImpact() {
  if (impact_running_ || !impact_waiting_) return;
  if (!config_->impact.enabled) {
    impact_waiting_.reset();
    return;
  }
  const core::Duration now = loop_->Now();
  // At least impact.interval_ms between two starts, and three times the last estimate's duration
  // (its thread busy at most a quarter of the time, whatever the cluster's size).
  const core::Duration interval =
      std::max(core::Duration::Millis(config_->impact.interval_ms), impact_took_ * 3.0);
  if (impact_started_ && now < *impact_started_ + interval) {
    if (!impact_timer_armed_) {
      impact_timer_armed_ = true;
      std::weak_ptr<int> alive = alive_;
      loop_->RunAfter(*impact_started_ + interval - now, [this, alive] {
        if (alive.expired()) return;
        impact_timer_armed_ = false;
        MaybeStartImpact();
      });
    }
    return;
  }
  impact_running_ = true;
  impact_started_ = now;
  ImpactWork work = std::move(*impact_waiting_);
  impact_waiting_.reset();
  core::ImpactOptions options;
  options.ecmp_seed = static_cast<uint64_t>(config_->planner.seed);
  auto estimate = [work = std::move(work), options](std::stop_token stop) {
    auto state = std::make_shared<ImpactState>();
    state->epoch = work.epoch;
    core::Result<core::PlanImpact> impact =
        core::EstimatePlanImpact(*work.topology, *work.snapshot, work.outcome->plan, options, stop);
    if (impact.ok()) {
      auto shared = std::make_shared<const core::PlanImpact>(std::move(impact).value());
      state->index.reserve(shared->jobs.size());
      for (size_t i = 0; i < shared->jobs.size(); ++i) state->index.emplace(shared->jobs[i].id, i);
      state->impact = std::move(shared);
    } else {
      state->error = impact.status().message();
    }
    return std::shared_ptr<const ImpactState>(std::move(state));
  };
  if (!impact_executor_) {
    OnImpact(estimate(std::stop_token()));
    return;
  }
  std::weak_ptr<int> alive = alive_;
  EventLoop* loop = loop_;
  impact_executor_([this, alive, loop, estimate = std::move(estimate)](CancellationToken stop) {
    std::shared_ptr<const ImpactState> state = estimate(stop);
    if (stop.stop_requested()) return;
    loop->Post([this, alive, state = std::move(state)] {
      if (!alive.expired()) OnImpact(state);
    });
  });
}

void PlanApplier::OnImpact(std::shared_ptr<const ImpactState> state) {
  impact_running_ = false;
  impact_took_ = loop_->Now() - *impact_started_;
  if (!config_->impact.enabled) return;  // Switched off (a reload) while it ran.
  if (!state->error.empty()) {
    spdlog::warn("shadow accounting of epoch {} failed: {}", state->epoch, state->error);
  }
  impact_ = std::move(state);
  ExportImpact(*impact_);
  auto view = std::make_shared<DaemonView>(*view_);
  view->impact = impact_;
  view_ = std::move(view);
  MaybeStartImpact();
}

void PlanApplier::ExportImpact(const ImpactState& state) {
  if (metrics_ == nullptr || state.impact == nullptr) return;
  const ImpactReport report = BuildImpactReport(&state, control_->loop());
  std::vector<Metrics::ImpactJob> jobs;
  jobs.reserve(report.rows.size());
  for (const ImpactRow& r : report.rows) {
    jobs.push_back({.id = r.id,
                    .gpus = r.gpus,
                    .predicted_s = r.predicted.ToSeconds(),
                    .ecmp_s = r.ecmp.ToSeconds(),
                    .observed_s = r.observed ? r.observed->ToSeconds() : -1.0,
                    .error = r.error.value_or(-1.0)});
  }
  metrics_->SetImpact(report.gpus_recovered, report.gpus, jobs, config_->impact.top_jobs);
}

void PlanApplier::Publish(const PlanRun& run) {
  auto view = std::make_shared<DaemonView>();
  view->epoch = control_->loop().epoch();
  view->applied = control_->loop().applied_ptr();
  if (config_->impact.enabled) view->impact = impact_;
  if (run.outcome && run.outcome->status.ok()) {
    view->outcome = run.outcome;
    view->topology = run.topology;
  } else if (view_) {
    view->outcome = view_->outcome;
    view->topology = view_->topology;
  }
  view_ = std::move(view);
  if (run.outcome && run.outcome->status.ok()) RequestImpact(run, view_->epoch);
}

// Where the loop's time goes while it commits a run: named steps, and one line at the end of
// the scope when the whole took kSlowMs or more ("committing run 7 (120 changed) took 62.0 ms on
// the loop (finish 0.1, rows 40.2, submit 0.3)").
class PlanApplier::StepTimer {
 public:
  explicit StepTimer(uint64_t run) : run_(run) {}
  ~StepTimer() {
    const double ms = MsSince(start_);
    if (silent_ || ms < kSlowMs) return;
    spdlog::info("{} run {} ({} changed) took {:.1f} ms on the loop ({})", doing_, run_, changed_,
                 ms, steps_);
  }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  // Ends the step `what`, timed since the previous one.
  void Step(const char* what) {
    const Clock::time_point now = Clock::now();
    Note(fmt::format("{} {:.1f}", what, Ms(now - last_)));
    last_ = now;
  }
  void Note(const std::string& text) { steps_ += (steps_.empty() ? "" : ", ") + text; }
  void set_changed(size_t n) { changed_ = n; }
  // The commit goes on after the store write (and is timed there): this scope only prepared it.
  void Preparing() { doing_ = "preparing"; }
  // Nothing to say: the commit already went on inline and logged itself.
  void Silence() { silent_ = true; }

  static double MsSince(std::chrono::steady_clock::time_point t) {
    return Ms(std::chrono::steady_clock::now() - t);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr double kSlowMs = 50;
  static double Ms(Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  }

  const uint64_t run_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
  std::string steps_;
  size_t changed_ = 0;
  const char* doing_ = "committing";
  bool silent_ = false;
};

void PlanApplier::Apply(PlanRun run_value) {
  StepTimer timer(run_value.snapshot->run);
  auto run = std::make_shared<PlanRun>(std::move(run_value));
  const core::PlanOutcome& outcome = *run->outcome;
  ++replans_;
  last_replan_ms_ = run->replan_ms;
  if (metrics_) metrics_->ObserveReplan(run->replan_ms / 1000.0, outcome.status.ok());
  auto batch =
      std::make_shared<const core::ApplyBatch>(control_->FinishPlan(*run->snapshot, outcome));
  timer.Step("finish");
  timer.set_changed(batch->changed.size());
  if (!outcome.status.ok()) return ApplyFailed(*run);
  for (const auto& [id, why] : outcome.excluded) spdlog::warn("job {} not planned: {}", id, why);
  if (config_->dry_run) return ApplyDryRun(*run, *batch);
  if (batch->empty()) return ApplyUnchanged(*run, *batch);
  ApplyChanged(std::move(run), std::move(batch), timer);
}

void PlanApplier::ApplyFailed(const PlanRun& run) {
  spdlog::error("re-plan ({}) failed: {}; keeping epoch {}", run.snapshot->reason,
                run.outcome->status.ToString(), control_->loop().epoch());
  control_->Commit(core::ApplyBatch{});  // Nothing to apply; the run is over.
}

void PlanApplier::ApplyDryRun(const PlanRun& run, const core::ApplyBatch& batch) {
  if (!batch.changed.empty() || !batch.removed.empty()) {
    spdlog::info("dry_run: re-plan ({}) would push {} changed assignments as epoch {} ({:.2f} ms)",
                 run.snapshot->reason, batch.changed.size(), batch.epoch, run.replan_ms);
    for (const auto& a : batch.changed) {
      const core::AppliedAssignment* old = control_->loop().Applied(a->assignment.job_id);
      spdlog::info("dry_run:   {} level {} -> {}", a->assignment.job_id,
                   old ? old->assignment.level : -1, a->assignment.level);
    }
  }
  control_->Commit(core::ApplyBatch{});  // Nothing is applied in a dry run.
  Publish(run);
}

void PlanApplier::ApplyUnchanged(const PlanRun& run, const core::ApplyBatch& batch) {
  spdlog::debug("re-plan ({}) {:.2f} ms: nothing changed, epoch stays {}", run.snapshot->reason,
                run.replan_ms, control_->loop().epoch());
  control_->Commit(batch);
  enforcer_->Commit(batch.qos, batch.qos_changed);  // The first state after a start.
  Publish(run);
}

void PlanApplier::ApplyChanged(std::shared_ptr<PlanRun> run,
                               std::shared_ptr<const core::ApplyBatch> batch, StepTimer& timer) {
  BatchRows rows = RowsOf(*run, *batch);
  timer.Step("rows");
  if (!batch->advances_epoch) {
    Commit(run, batch, rows.plan, 0);
    return;
  }
  // The planned profiles this run used are written first (FIFO), then the plan, off the loop.
  journal_->FlushPlanned();
  const auto submitted = std::chrono::steady_clock::now();
  writer_->Submit([plan = rows.plan, removed = batch->removed, audit = std::move(rows.audit),
                   epoch = batch->epoch](
                      Store& store) { return store.ApplyPlan(epoch, *plan, removed, audit); },
                  [this, run, batch, plan = rows.plan, submitted](core::Status s) {
                    OnStored(std::move(s), StepTimer::MsSince(submitted), run, batch, plan);
                  });
  timer.Step("submit");
  if (writer_->threaded()) {
    timer.Preparing();
  } else {
    timer.Silence();  // OnStored already ran.
  }
}

PlanApplier::BatchRows PlanApplier::RowsOf(PlanRun& run, const core::ApplyBatch& batch) const {
  const core::PlanningSnapshot& snap = *run.snapshot;
  // Serialized on the worker for snap.epoch + 1; again here only if the epoch moved meanwhile.
  std::map<std::string, PlanRow*> prepared;
  if (batch.epoch == snap.epoch + 1) {
    for (PlanRow& r : run.rows) prepared[r.job_id] = &r;  // Moved from: not read again.
  }
  const StoreCodec codec(topo_->nominal());
  BatchRows out;
  out.plan = std::make_shared<std::vector<PlanRow>>();
  out.plan->reserve(batch.changed.size());
  out.audit.reserve(batch.changed.size());
  const int64_t now_ms = loop_->UnixMs();
  for (const auto& a : batch.changed) {
    const std::string& id = a->assignment.job_id;
    auto p = prepared.find(id);
    if (p != prepared.end()) {
      out.plan->push_back(std::move(*p->second));
    } else {
      out.plan->push_back(codec.EncodePlanRow(*a));  // a carries batch.epoch.
    }
    const core::AppliedAssignment* old = control_->loop().Applied(id);
    AuditRow row;
    row.ts_ms = now_ms;
    row.epoch = batch.epoch;
    row.job_id = id;
    row.old_level = old ? old->assignment.level : -1;
    row.new_level = a->assignment.level;
    row.reason = snap.reason.substr(0, 1000);
    out.audit.push_back(std::move(row));
  }
  return out;
}

void PlanApplier::OnStored(core::Status s, double store_ms, std::shared_ptr<const PlanRun> run,
                           std::shared_ptr<const core::ApplyBatch> batch,
                           std::shared_ptr<std::vector<PlanRow>> rows) {
  if (!store_health_->Stored(std::move(s), "apply_plan").ok()) {
    spdlog::error("re-plan ({}) not applied: epoch stays {} until the store works again",
                  run->snapshot->reason, control_->loop().epoch());
    control_->CommitFailed();
    return;
  }
  StepTimer timer(run->snapshot->run);
  timer.set_changed(batch->changed.size());
  timer.Note(fmt::format("after the store write of {:.1f} ms", store_ms));
  Commit(std::move(run), std::move(batch), std::move(rows), store_ms);
}

void PlanApplier::Commit(std::shared_ptr<const PlanRun> run,
                         std::shared_ptr<const core::ApplyBatch> batch,
                         std::shared_ptr<std::vector<PlanRow>> rows, double store_ms) {
  control_->Commit(*batch);
  const core::ControlLoop& loop = control_->loop();
  auto pushes = std::make_shared<Pushes>();
  pushes->reserve(batch->changed.size());
  std::unordered_map<std::string, size_t> batch_of_peer;  // Agent -> its batch in `pushes`.
  for (size_t i = 0; i < batch->changed.size(); ++i) {
    const auto& a = batch->changed[i];
    const std::string& id = a->assignment.job_id;
    tracker_->SetLevel(id, a->assignment.level);
    if (const JobSession* j = tracker_->Find(id)) {
      // (*rows)[i] is batch->changed[i]'s store row: the serialized assignment the push carries.
      // A multi-host job's parts get their host's cut of it (PartAssignments).
      if (!j->parted()) {
        pushes->push_back({j->peer, a, std::move((*rows)[i].assignment)});
      } else {
        std::vector<std::string> batched;  // Peers whose batch has this job already.
        for (PartCut& c : PartAssignments(*j, *a, topo_->nominal())) {
          // A batch names a job once: a second part of the job on the same connection (one
          // agent speaking for two hosts) is pushed alone.
          const bool again = std::find(batched.begin(), batched.end(), c.peer) != batched.end();
          if (!c.accepts_batches || again) {
            pushes->push_back({std::move(c.peer), a, "", std::move(c.cut)});
            continue;
          }
          // The agent's batch of this epoch (a new one when full).
          auto [it, added] = batch_of_peer.try_emplace(c.peer, pushes->size());
          if (!added && (*pushes)[it->second].batch.size() >= protocol::kMaxBatchAssignments) {
            it->second = pushes->size();
            added = true;
          }
          if (added) pushes->push_back({c.peer, nullptr, "", nullptr});
          (*pushes)[it->second].batch.push_back({a, std::move(c.cut)});
          batched.push_back(std::move(c.peer));
        }
      }
    }
  }
  const size_t pushed = PushChunk(std::move(pushes), 0);
  enforcer_->Commit(batch->qos, batch->qos_changed);
  if (metrics_) metrics_->SetEpoch(loop.epoch());
  const core::PlanOutcome& o = *run->outcome;
  spdlog::info(
      "epoch {}: {} assignments changed ({} pushed at once, the rest in chunks), {} removed, "
      "QoS changed on {} switches; re-plan ({}) {:.2f} ms on the worker (schedule {:.1f}, "
      "assignments {:.1f}, QoS {:.1f}){}{}, store {:.1f} ms",
      loop.epoch(), batch->changed.size(), pushed, batch->removed.size(), batch->qos_changed.size(),
      run->snapshot->reason, run->replan_ms, o.schedule_time.ToMillis(), o.assign_time.ToMillis(),
      o.qos_time.ToMillis(), o.seeded ? ", seeded from the plan in force" : "", ReplanText(o),
      store_ms);
  Publish(*run);
}

size_t PlanApplier::PushChunk(std::shared_ptr<const Pushes> pushes, size_t from) {
  const size_t end = std::min(pushes->size(), from + kPushChunk);
  size_t sent = 0;
  const core::ControlLoop& loop = control_->loop();
  for (size_t i = from; i < end; ++i) {
    const Push& p = (*pushes)[i];
    if (!p.batch.empty()) {
      std::vector<const core::AppliedAssignment*> cuts;
      cuts.reserve(p.batch.size());
      for (const Push::Member& m : p.batch) {
        if (loop.Applied(m.assignment->assignment.job_id) == m.assignment.get()) {
          cuts.push_back(m.cut.get());
        }
      }
      if (!cuts.empty()) sent += enforcer_->PushBatch(p.peer, cuts);
      continue;
    }
    // Still the assignment in force (a later epoch may have replaced or removed it)?
    if (loop.Applied(p.assignment->assignment.job_id) != p.assignment.get()) continue;
    const bool ok = p.cut ? enforcer_->Push(p.peer, *p.cut)
                          : enforcer_->Push(p.peer, *p.assignment, p.serialized);
    if (ok) ++sent;
  }
  if (end < pushes->size()) {
    loop_->Post([this, pushes = std::move(pushes), end] { PushChunk(pushes, end); });
  }
  return sent;
}

}  // namespace crux::daemon
