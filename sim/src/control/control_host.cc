#include "control/control_host.h"

#include <memory>

namespace crux::sim::internal {

core::JobDemand DemandFor(const SimJob& job) {
  core::JobDemand d;
  d.id = job.spec.id;
  d.model = job.model;
  d.placement.reserve(job.spec.hosts.size());
  for (core::NodeId h : job.spec.hosts) {
    d.placement.push_back({h, static_cast<uint32_t>(job.spec.gpus_per_host), {}});
  }
  d.pattern = job.spec.pattern;
  if (job.spec.pattern != core::TrafficPattern::kExplicit)
    d.bytes_per_iteration = job.spec.pattern_bytes;
  d.flops_per_iteration = job.spec.flops_per_iteration;
  return d;
}

namespace {

// What a run's outcome says, before its assignments are committed (`changed` is left empty).
LoopRun FromOutcome(const core::PlanOutcome& outcome) {
  LoopRun run;
  run.planned = true;
  run.status = outcome.status;
  run.excluded = outcome.excluded.size();
  if (outcome.reoptimize_verdict) {
    run.reoptimize_weighed = true;
    run.reoptimize_adopted = outcome.reoptimize_verdict->adopted;
  }
  if (outcome.status.ok()) {
    run.impact = outcome.impact;
    for (size_t k = 0; k < outcome.planned.size() && k < outcome.plan.jobs.size(); ++k) {
      run.time_shifts.emplace_back(outcome.planned[k], outcome.plan.jobs[k].time_shift);
    }
  }
  return run;
}

}  // namespace

ControlHost::ControlHost(const core::Clock* clock, const core::Topology* nominal,
                         const core::ControlLoopOptions& options)
    : clock_(clock), loop_(clock, nominal, options) {}

void ControlHost::AddJob(const SimJob& job) {
  if (job.spec.fixed_rank) fixed_rank_[job.spec.id] = *job.spec.fixed_rank;
  loop_.AddJob(DemandFor(job), /*dscp=*/0);
}

core::ReportVerdict ControlHost::Report(const std::string& id, const core::JobProfile& profile) {
  return loop_.ReportProfile(id, profile);
}

void ControlHost::RemoveJob(const std::string& id, std::string_view reason) {
  fixed_rank_.erase(id);
  loop_.RemoveJob(id, reason);
}

void ControlHost::Invalidate(std::string_view reason) { loop_.Invalidate(reason); }

std::shared_ptr<const core::PlanningSnapshot> ControlHost::WithFixedRanks(
    std::shared_ptr<const core::PlanningSnapshot> snap) const {
  if (fixed_rank_.empty()) return snap;
  auto patched = std::make_shared<core::PlanningSnapshot>(*snap);
  for (core::PlanningJob& j : patched->jobs) {
    auto it = fixed_rank_.find(j.id);
    if (it == fixed_rank_.end() || j.spec == nullptr) continue;
    auto spec = std::make_shared<core::JobSpec>(*j.spec);
    spec->fixed_rank = it->second;
    j.spec = std::move(spec);
  }
  return patched;
}

LoopRun ControlHost::Run(core::SchedulingPolicy& policy, const core::Topology& topo) {
  std::shared_ptr<const core::PlanningSnapshot> snap = loop_.StartPlan();
  if (snap == nullptr) return {};
  core::PlanOutcome outcome;
  const bool planned = !snap->jobs.empty();
  if (planned) outcome = core::RunPlan(policy, topo, *WithFixedRanks(snap), *clock_);
  LoopRun run = FromOutcome(outcome);
  run.planned = planned;
  const core::ApplyBatch batch = loop_.FinishPlan(*snap, outcome);
  loop_.Commit(batch);
  run.changed.reserve(batch.changed.size());
  for (const auto& a : batch.changed) {
    if (a != nullptr) run.changed.push_back(*a);
  }
  return run;
}

}  // namespace crux::sim::internal
