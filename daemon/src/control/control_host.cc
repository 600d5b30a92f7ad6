#include "crux/daemon/control/control_host.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

#include "crux/daemon/store/store_codec.h"

namespace crux::daemon {

core::Result<std::unique_ptr<core::SchedulingPolicy>> MakeDaemonPolicy(
    const core::Topology& topo, const core::PlannerOptions& options) {
  core::PolicyOptions po;
  po.planner = options;
  po.resolve_ports = true;  // The daemon pins flows: clients need their UDP source ports.
  po.stable = options.stable;
  return core::MakePolicy("crux", topo, po);
}

PlanRun PlanEngine::Run(std::shared_ptr<const core::PlanningSnapshot> snap,
                        std::shared_ptr<const core::Topology> topo, uint64_t topology_version,
                        const core::PlannerOptions& options, bool rows,
                        std::shared_ptr<AdoptedPolicy> adopt) {
  const auto start = std::chrono::steady_clock::now();
  PlanRun run;
  run.snapshot = snap;
  run.topology = topo;
  auto outcome = std::make_shared<core::PlanOutcome>();
  if (adopt && adopt->policy && adopt->topology == topo &&
      adopt->topology_version == topology_version && adopt->options == options) {
    policy_ = std::move(adopt->policy);
    topology_ = topo;
    version_ = topology_version;
    options_ = options;
  }
  if (!policy_ || topology_ != topo || version_ != topology_version || !(options_ == options)) {
    auto policy = MakeDaemonPolicy(*topo, options);
    if (!policy.ok()) {
      policy_.reset();
      outcome->status = policy.status();
      run.outcome = std::move(outcome);
      return run;
    }
    policy_ = std::move(policy).value();
    topology_ = topo;
    version_ = topology_version;
    options_ = options;
  }
  *outcome = core::RunPlan(*policy_, *topo, *snap, core::SteadyClock::Instance());
  if (rows && outcome->status.ok()) {
    const StoreCodec codec(*topo);
    run.rows.reserve(outcome->changed.size());
    for (const auto& applied : outcome->changed) {  // Stamped snapshot->epoch + 1.
      run.rows.push_back(codec.EncodePlanRow(*applied));
    }
  }
  run.outcome = std::move(outcome);
  run.replan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return run;
}

struct ControlHost::Mailbox {
  std::mutex mu;
  EventLoop* loop = nullptr;  // Null once the host is gone.
  ControlHost* host = nullptr;
};

ControlHost::ControlHost(EventLoop* loop, TopologyManager* topo,
                         core::ControlLoopOptions loop_options,
                         core::PlannerOptions planner_options, DoneCallback on_done,
                         LinkDecisionsCallback on_link_decisions, Executor executor)
    : loop_(loop),
      topo_(topo),
      clock_(loop),
      control_(&clock_, &topo->nominal(), std::move(loop_options)),
      planner_options_(std::move(planner_options)),
      on_done_(std::move(on_done)),
      on_link_decisions_(std::move(on_link_decisions)),
      executor_(std::move(executor)),
      engine_(std::make_shared<PlanEngine>()),
      mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->loop = loop;
  mailbox_->host = this;
}

ControlHost::~ControlHost() {
  std::lock_guard<std::mutex> lock(mailbox_->mu);
  mailbox_->loop = nullptr;
  mailbox_->host = nullptr;
}

// ---- events ----

void ControlHost::AddJob(core::JobDemand demand, uint32_t dscp) {
  control_.AddJob(std::move(demand), dscp);
  Kick();
}

core::ReportVerdict ControlHost::ReportProfile(const std::string& id,
                                               const core::JobProfile& profile) {
  const core::ReportVerdict v = control_.ReportProfile(id, profile);
  Kick();
  return v;
}

void ControlHost::UpdateDemand(core::JobDemand demand) {
  control_.UpdateDemand(std::move(demand));
  Kick();
}

std::shared_ptr<const core::AppliedAssignment> ControlHost::RemoveJob(const std::string& id,
                                                                      std::string_view reason) {
  std::shared_ptr<const core::AppliedAssignment> was = control_.RemoveJob(id, reason);
  Kick();
  return was;
}

void ControlHost::Invalidate(std::string_view reason) {
  control_.Invalidate(reason);
  Kick();
}

void ControlHost::SetOptions(const core::ControlLoopOptions& options) {
  control_.SetOptions(options);
  Kick();
  KickFaults();
}

core::Status ControlHost::SetPlannerOptions(const core::PlannerOptions& o) {
  CRUX_RETURN_IF_ERROR(core::ValidatePlannerOptions(o));
  if (!(o == planner_options_)) {
    planner_options_ = o;
    Invalidate("planner options changed");
  }
  return core::Status::Ok();
}

void ControlHost::ObserveLinkState(const core::LinkStateSignal& signal) {
  control_.ObserveLinkState(signal);
  KickFaults();
}

void ControlHost::ObserveCounters(const core::CounterSignal& signal) {
  control_.ObserveCounters(signal);
  KickFaults();
}

void ControlHost::ObserveNicCounters(const core::NicCounterSignal& signal) {
  control_.ObserveNicCounters(signal);
  KickFaults();
}

void ControlHost::ObserveFlows(const std::string& job_id,
                               const std::vector<core::FlowSample>& samples) {
  control_.ObserveFlows(job_id, samples);
  KickFaults();
}

void ControlHost::ObserveHostProbes(const std::string& job_id,
                                    const std::vector<core::FlowSample>& samples) {
  control_.ObserveHostProbes(job_id, samples);
  KickFaults();
}

void ControlHost::SetLinkAdmin(core::LinkId link, core::AdminLinkState state) {
  control_.SetLinkAdmin(link, state);
  KickFaults();
}

void ControlHost::ClearLinkAdmin(core::LinkId link) {
  control_.ClearLinkAdmin(link);
  KickFaults();
}

std::vector<core::LinkDecision> ControlHost::EvaluateFaults() {
  std::vector<core::LinkDecision> decisions = control_.EvaluateFaults();
  if (!decisions.empty()) Kick();  // Each decision asked for a plan.
  KickFaults();
  return decisions;
}

void ControlHost::RestoreJob(core::JobDemand demand, uint32_t dscp,
                             std::optional<core::JobProfile> profile,
                             std::optional<core::JobProfile> planned) {
  control_.RestoreJob(std::move(demand), dscp, std::move(profile), std::move(planned));
}

void ControlHost::RestoreApplied(core::AppliedPlan applied, uint64_t epoch) {
  control_.RestoreApplied(std::move(applied), epoch);
}

void ControlHost::RestoreLinkAdmin(core::LinkId link, core::AdminLinkState state) {
  control_.RestoreLinkAdmin(link, state);
}

core::ApplyBatch ControlHost::FinishPlan(const core::PlanningSnapshot& snap,
                                         const core::PlanOutcome& outcome) {
  return control_.FinishPlan(snap, outcome);
}

void ControlHost::Commit(const core::ApplyBatch& batch) {
  control_.Commit(batch);
  Kick();  // The run is over: the next may start.
}

void ControlHost::CommitFailed() {
  control_.CommitFailed();
  Kick();  // At the retry's time.
}

void ControlHost::PostToHost(const std::shared_ptr<Mailbox>& mailbox,
                             std::function<void(ControlHost&)> deliver) {
  std::lock_guard<std::mutex> lock(mailbox->mu);
  if (!mailbox->loop) return;
  mailbox->loop->Post([mailbox, deliver = std::move(deliver)] {
    ControlHost* host = nullptr;
    {
      std::lock_guard<std::mutex> inner(mailbox->mu);
      host = mailbox->host;
    }
    if (host) deliver(*host);
  });
}

// ---- timers ----

std::shared_ptr<const core::Topology> ControlHost::CurrentTopology() {
  if (!topology_copy_ || topology_copy_version_ != topo_->version()) {
    topology_copy_ = std::make_shared<const core::Topology>(topo_->current());
    topology_copy_version_ = topo_->version();
  }
  return topology_copy_;
}

void ControlHost::Kick() {
  Arm(plan_timer_, control_.due(), &ControlHost::Fire);
  Arm(reoptimize_timer_, control_.reoptimize_due(), &ControlHost::FireReoptimize);
}

void ControlHost::KickFaults() {
  Arm(faults_timer_, control_.faults_due(), &ControlHost::FireFaults);
}

void ControlHost::Arm(Timer& timer, std::optional<core::Duration> due,
                      void (ControlHost::*fire)(uint64_t)) {
  if (!due) return;
  if (timer.armed && timer.at <= *due) return;  // The armed timer fires first; it re-checks.
  timer.armed = true;
  timer.at = *due;
  const uint64_t generation = ++timer.generation;
  const core::Duration wait = std::max(core::Duration::Zero(), *due - loop_->Now());
  // Through the mailbox: a timer that fires after the host is gone does nothing.
  loop_->RunAfter(wait, [mailbox = mailbox_, generation, fire] {
    ControlHost* host = nullptr;
    {
      std::lock_guard<std::mutex> lock(mailbox->mu);
      host = mailbox->host;
    }
    if (host) (host->*fire)(generation);
  });
}

void ControlHost::FireFaults(uint64_t generation) {
  if (generation != faults_timer_.generation) return;  // Replaced by a newer timer.
  faults_timer_.armed = false;
  const std::optional<core::Duration> due = control_.faults_due();
  if (due && *due <= loop_->Now()) {
    const std::vector<core::LinkDecision> decisions = EvaluateFaults();
    // Also without decisions: the host keeps its fault metrics current.
    if (on_link_decisions_) on_link_decisions_(decisions);
  }
  KickFaults();
}

void ControlHost::Fire(uint64_t generation) {
  if (generation != plan_timer_.generation) return;  // A newer timer replaced this one.
  plan_timer_.armed = false;
  std::shared_ptr<const core::PlanningSnapshot> snap = control_.StartPlan();
  if (!snap) {
    Kick();  // Not due yet (e.g. min_replan_interval) or in flight: re-arm if needed.
    return;
  }
  std::shared_ptr<const core::Topology> topo = CurrentTopology();
  const uint64_t version = topology_copy_version_;
  const core::PlannerOptions options = planner_options_;
  std::shared_ptr<AdoptedPolicy> adopt = std::move(adopted_);
  adopted_.reset();
  if (!executor_) {
    on_done_(engine_->Run(snap, topo, version, options, /*rows=*/true, std::move(adopt)));
    return;
  }
  executor_([engine = engine_, snap, topo, version, options, adopt = std::move(adopt),
             mailbox = mailbox_](CancellationToken token) {
    if (token.stop_requested()) return;
    auto run = std::make_shared<PlanRun>(engine->Run(snap, topo, version, options, true, adopt));
    if (token.stop_requested()) return;
    PostToHost(mailbox, [run](ControlHost& host) { host.on_done_(std::move(*run)); });
  });
}

struct ControlHost::ReoptimizeRun {
  core::ReoptimizeOutcome outcome;
  std::shared_ptr<AdoptedPolicy> policy;  // Holds the fresh plan when outcome.adopt.
  double worker_ms = 0;
};

namespace {

// The re-optimisation itself (on its worker, or inline).
std::shared_ptr<AdoptedPolicy> ReoptimizeOn(const core::PlanningSnapshot& snap,
                                            std::shared_ptr<const core::Topology> topo,
                                            uint64_t version, const core::PlannerOptions& options,
                                            core::ReoptimizeOutcome& outcome) {
  auto adopted = std::make_shared<AdoptedPolicy>();
  auto policy = MakeDaemonPolicy(*topo, options);
  if (!policy.ok()) {
    outcome.status = policy.status();
    return adopted;
  }
  outcome = core::RunReoptimization(**policy, *topo, snap);
  if (outcome.adopt) {
    adopted->policy = std::move(policy).value();
    adopted->topology = std::move(topo);
    adopted->topology_version = version;
    adopted->options = options;
  }
  return adopted;
}

}  // namespace

void ControlHost::FireReoptimize(uint64_t generation) {
  if (generation != reoptimize_timer_.generation) return;
  reoptimize_timer_.armed = false;
  std::shared_ptr<const core::PlanningSnapshot> snap = control_.StartReoptimization();
  if (!snap) {
    Kick();
    return;
  }
  std::shared_ptr<const core::Topology> topo = CurrentTopology();
  const uint64_t version = topology_copy_version_;
  const core::PlannerOptions options = planner_options_;
  auto work = [snap, topo, version, options]() {
    const auto start = std::chrono::steady_clock::now();
    ReoptimizeRun run;
    run.policy = ReoptimizeOn(*snap, topo, version, options, run.outcome);
    run.worker_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return run;
  };
  if (!reoptimize_executor_) {
    OnReoptimized(work());
    return;
  }
  reoptimize_executor_([work = std::move(work), mailbox = mailbox_](CancellationToken token) {
    if (token.stop_requested()) return;
    auto run = std::make_shared<ReoptimizeRun>(work());
    if (token.stop_requested()) return;
    PostToHost(mailbox, [run](ControlHost& host) { host.OnReoptimized(std::move(*run)); });
  });
}

void ControlHost::OnReoptimized(ReoptimizeRun run) {
  const core::ReoptimizeOutcome& o = run.outcome;
  ReoptimizeStats& st = reoptimize_stats_;
  std::string verdict;
  if (o.verdict) {
    const core::PlanOutcome::ReoptimizeVerdict& v = *o.verdict;
    const double cost = v.in_force.contention_cost > 0
                            ? 100 * (v.fresh.contention_cost / v.in_force.contention_cost - 1)
                            : 0.0;
    verdict = fmt::format(" (cost {:+.2f} %, cut fraction {:.4f} -> {:.4f})", cost,
                          v.in_force.cut_fraction, v.fresh.cut_fraction);
  }
  bool adopt = false;
  if (!o.status.ok()) {
    ++st.failed;
    spdlog::warn("re-optimisation of {} jobs failed after {:.1f} ms: {}", o.jobs, run.worker_ms,
                 o.status.ToString());
  } else if (!o.adopt) {
    ++st.kept;
    spdlog::info(
        "re-optimisation of {} jobs: plan in force kept, gain below the minimum{}; "
        "{:.1f} ms beside the runs",
        o.jobs, verdict, run.worker_ms);
  } else if (!run.policy || !run.policy->policy ||
             run.policy->topology_version != topo_->version() ||
             !(run.policy->options == planner_options_)) {
    ++st.discarded;
    spdlog::info(
        "re-optimisation of {} jobs: fresh plan discarded, the topology or the planner "
        "options changed while it ran ({:.1f} ms)",
        o.jobs, run.worker_ms);
  } else {
    ++st.adopted;
    adopt = true;
    adopted_ = std::move(run.policy);
    spdlog::info(
        "re-optimisation of {} jobs: fresh plan adopted{}; {:.1f} ms beside the runs, "
        "the next run pushes it",
        o.jobs, verdict, run.worker_ms);
  }
  control_.FinishReoptimization(adopt);
  Kick();
}

void ControlHost::DryRun(DryRunCallback done) {
  std::shared_ptr<const core::PlanningSnapshot> snap = control_.PeekSnapshot();
  std::shared_ptr<const core::Topology> topo = CurrentTopology();
  const uint64_t version = topology_copy_version_;
  const core::PlannerOptions options = planner_options_;
  // An engine of its own, new each time: a stable policy continues the plan its last Schedule
  // made, so a dry run on the real runs' engine would leave its plan behind for the next real
  // run. A new policy has no plan of its own; RunPlan seeds it with the plan in force, which is
  // what the real runs' policy continues too.
  auto engine = std::make_shared<PlanEngine>();
  if (!executor_) {
    done(engine->Run(snap, topo, version, options, /*rows=*/false));
    return;
  }
  executor_([engine = std::move(engine), snap, topo, version, options, mailbox = mailbox_,
             done = std::move(done)](CancellationToken token) mutable {
    if (token.stop_requested()) return;
    auto run = std::make_shared<PlanRun>(engine->Run(snap, topo, version, options, false));
    if (token.stop_requested()) return;
    PostToHost(mailbox, [run, done = std::move(done)](ControlHost&) { done(std::move(*run)); });
  });
}

}  // namespace crux::daemon
