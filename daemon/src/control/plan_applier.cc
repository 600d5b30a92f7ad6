#include "crux/daemon/control/plan_applier.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "crux/daemon/state/part_profiles.h"
#include "crux/daemon/store/store_codec.h"

namespace crux::daemon {
namespace {

// ", fresh plan kept in force (cost -0.4 %, cut +0.000 < min gain)" and the like; empty unless
// a re-optimisation was weighed against the plan in force.
std::string ReoptimizeText(const core::PlanOutcome& o) {
  if (!o.reoptimize_verdict) return "";
  const core::PlanOutcome::ReoptimizeVerdict& v = *o.reoptimize_verdict;
  const double cost = v.in_force.contention_cost > 0
                          ? 100 * (v.fresh.contention_cost / v.in_force.contention_cost - 1)
                          : 0.0;
  return fmt::format(" ({}: cost {:+.2f} %, cut fraction {:+.4f})",
                     v.adopted ? "fresh plan adopted" : "plan in force kept, gain below minimum",
                     cost, v.fresh.cut_fraction - v.in_force.cut_fraction);
}

}  // namespace

void PlanApplier::Publish(const PlanRun& run) {
  auto view = std::make_shared<DaemonView>();
  view->epoch = control_->loop().epoch();
  view->applied = control_->loop().applied_ptr();
  if (run.outcome && run.outcome->status.ok()) {
    view->outcome = run.outcome;
    view->topology = run.topology;
  } else if (view_) {
    view->outcome = view_->outcome;
    view->topology = view_->topology;
  }
  view_ = std::move(view);
}

void PlanApplier::Finish(const PlanRun& run, size_t changed, double ms, const std::string& steps) {
  if (ms >= 50) {
    spdlog::info("committing run {} ({} changed) took {:.1f} ms on the loop ({})",
                 run.snapshot->run, changed, ms, steps);
  }
}

void PlanApplier::Apply(PlanRun run_value) {
  const auto apply_start = std::chrono::steady_clock::now();
  auto run = std::make_shared<PlanRun>(std::move(run_value));
  ControlHost& control = *control_;
  const core::ControlLoop& loop = control.loop();
  const core::PlanningSnapshot& snap = *run->snapshot;
  const core::PlanOutcome& outcome = *run->outcome;
  ++replans_;
  last_replan_ms_ = run->replan_ms;
  if (metrics_) metrics_->ObserveReplan(run->replan_ms / 1000.0, outcome.status.ok());
  // Where the loop's time goes (logged when a commit takes >= 50 ms).
  auto last = apply_start;
  std::string steps;
  auto step = [&](const char* what) {
    const auto now = std::chrono::steady_clock::now();
    steps += fmt::format("{}{} {:.1f}", steps.empty() ? "" : ", ", what,
                         std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  };
  auto batch = std::make_shared<const core::ApplyBatch>(control.FinishPlan(snap, outcome));
  step("finish");
  auto finish = [&] {
    Finish(*run, batch->changed.size(),
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - apply_start)
               .count(),
           steps);
  };
  if (!outcome.status.ok()) {
    spdlog::error("re-plan ({}) failed: {}; keeping epoch {}", snap.reason,
                  outcome.status.ToString(), loop.epoch());
    control.Commit(core::ApplyBatch{});  // Nothing to apply; the run is over.
    finish();
    return;
  }
  for (const auto& [id, why] : outcome.excluded) spdlog::warn("job {} not planned: {}", id, why);
  if (config_->dry_run) {
    if (!batch->changed.empty() || !batch->removed.empty()) {
      spdlog::info(
          "dry_run: re-plan ({}) would push {} changed assignments as epoch {} ({:.2f} ms)",
          snap.reason, batch->changed.size(), batch->epoch, run->replan_ms);
      for (const auto& a : batch->changed) {
        const core::AppliedAssignment* old = loop.Applied(a->assignment.job_id);
        spdlog::info("dry_run:   {} level {} -> {}", a->assignment.job_id,
                     old ? old->assignment.level : -1, a->assignment.level);
      }
    }
    control.Commit(core::ApplyBatch{});  // Nothing is applied in a dry run.
    Publish(*run);
    finish();
    return;
  }
  if (batch->empty()) {
    spdlog::debug("re-plan ({}) {:.2f} ms: nothing changed, epoch stays {}", snap.reason,
                  run->replan_ms, loop.epoch());
    control.Commit(*batch);
    enforcer_->Commit(batch->qos, batch->qos_changed);  // The first state after a start.
    Publish(*run);
    finish();
    return;
  }
  // Store rows: serialized on the worker for snap.epoch + 1; again here only if the epoch moved.
  std::map<std::string, PlanRow*> prepared;
  std::vector<PlanRow>& run_rows = run->rows;  // Moved from: not read again.
  if (batch->epoch == snap.epoch + 1) {
    for (PlanRow& r : run_rows) prepared[r.job_id] = &r;
  }
  const StoreCodec codec(topo_->nominal());
  auto rows = std::make_shared<std::vector<PlanRow>>();
  std::vector<AuditRow> audit;
  rows->reserve(batch->changed.size());
  const int64_t now_ms = loop_->UnixMs();
  for (const auto& a : batch->changed) {
    const std::string& id = a->assignment.job_id;
    auto p = prepared.find(id);
    if (p != prepared.end()) {
      rows->push_back(std::move(*p->second));
    } else {
      rows->push_back(codec.EncodePlanRow(*a));  // a carries batch->epoch.
    }
    const core::AppliedAssignment* old = loop.Applied(id);
    AuditRow row;
    row.ts_ms = now_ms;
    row.epoch = batch->epoch;
    row.job_id = id;
    row.old_level = old ? old->assignment.level : -1;
    row.new_level = a->assignment.level;
    row.reason = snap.reason.substr(0, 1000);
    audit.push_back(std::move(row));
  }
  step("rows");
  if (!batch->advances_epoch) {
    Commit(run, batch, rows, 0);
    finish();
    return;
  }
  // The planned profiles this run used are written first (FIFO), then the plan, off the loop.
  journal_->FlushPlanned();
  const auto submitted = std::chrono::steady_clock::now();
  writer_->Submit(
      [rows, removed = batch->removed, audit = std::move(audit), epoch = batch->epoch](
          Store& store) { return store.ApplyPlan(epoch, *rows, removed, audit); },
      [this, run, batch, rows, submitted](core::Status s) {
        const double store_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - submitted)
                .count();
        if (!store_health_->Stored(std::move(s), "apply_plan").ok()) {
          spdlog::error("re-plan ({}) not applied: epoch stays {} until the store works again",
                        run->snapshot->reason, control_->loop().epoch());
          control_->CommitFailed();
          Finish(*run, batch->changed.size(), 0, "");
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        Commit(run, batch, rows, store_ms);
        Finish(*run, batch->changed.size(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count(),
               fmt::format("after the store write of {:.1f} ms", store_ms));
      });
  step("submit");
  if (!writer_->threaded()) return;  // Inline: done already ran (and finished the run).
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - apply_start)
          .count();
  if (ms >= 50) {
    spdlog::info("preparing run {} ({} changed) took {:.1f} ms on the loop ({})", snap.run,
                 batch->changed.size(), ms, steps);
  }
}

void PlanApplier::Commit(std::shared_ptr<const PlanRun> run,
                         std::shared_ptr<const core::ApplyBatch> batch,
                         std::shared_ptr<std::vector<PlanRow>> rows, double store_ms) {
  control_->Commit(*batch);
  const core::ControlLoop& loop = control_->loop();
  auto pushes = std::make_shared<Pushes>();
  pushes->reserve(batch->changed.size());
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
        for (auto& [peer, cut] : PartAssignments(*j, *a, topo_->nominal())) {
          pushes->push_back({std::move(peer), a, "", std::move(cut)});
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
      "assignments {:.1f}, QoS {:.1f}){}{}{}, store {:.1f} ms",
      loop.epoch(), batch->changed.size(), pushed, batch->removed.size(), batch->qos_changed.size(),
      run->snapshot->reason, run->replan_ms, o.schedule_time.ToMillis(), o.assign_time.ToMillis(),
      o.qos_time.ToMillis(), o.reoptimized ? ", re-optimised" : "", ReoptimizeText(o),
      o.seeded ? ", seeded from the plan in force" : "", store_ms);
  Publish(*run);
}

size_t PlanApplier::PushChunk(std::shared_ptr<const Pushes> pushes, size_t from) {
  const size_t end = std::min(pushes->size(), from + kPushChunk);
  size_t sent = 0;
  const core::ControlLoop& loop = control_->loop();
  for (size_t i = from; i < end; ++i) {
    const Push& p = (*pushes)[i];
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
