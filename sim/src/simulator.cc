// crux::sim's engine: the event loop and the wiring of its parts. docs/simulator.md describes
// the model and every choice made in it.
//
//   engine/sim_clock.h         simulated time (a core::Clock for the policy and the control loop)
//   engine/event_queue.h       job events and cluster events
//   network/fabric.h           the fluid network on the topology's links
//   metrics/metrics.h          samples, link classes, byte accounting
//   jobs/job_model.h           the jobs and their iteration machine
//   control/control_host.h     cruxd's control loop, hosted in simulated time
//   control/plan_applier.h     the policy and the loop's plans applied to the jobs
//   steady/fast_forward.h      the steady-state detector and its groups' sleeps
//   faults/fault_injector.h    hidden faults and the telemetry the loop sees of them
#include "crux/sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "control/plan_applier.h"
#include "crux/core/base/ids.h"
#include "crux/core/model/iteration_timing.h"
#include "engine/event_queue.h"
#include "engine/num_text.h"
#include "engine/sim_clock.h"
#include "faults/fault_injector.h"
#include "jobs/client_profiler.h"
#include "jobs/job_model.h"
#include "metrics/metrics.h"
#include "network/fabric.h"
#include "steady/fast_forward.h"

namespace crux::sim {
namespace {

using core::Status;
using engine::ClusterEvent;
using engine::ClusterKind;
using internal::JobState;
using internal::JobStatus;
using internal::Num;

class Engine final : public internal::JobListener {
 public:
  Engine(const core::Topology& topo, const PolicyFactory& factory, const std::vector<SimJob>& jobs,
         const std::vector<LinkEvent>& link_events, const SimOptions& options)
      : topo_(topo),
        jobs_in_(jobs),
        link_events_(link_events),
        options_(options),
        horizon_(options.horizon),
        host_(topo, factory, jobs, options, clock_, result_) {}

  core::Result<SimResult> Run();

  // internal::JobListener.
  void OnIterationEnd(uint32_t j) override {
    if (!host_.oracle()) host_.ReportIteration(j);
  }
  void OnIterationStart(uint32_t j) override { ff_->OnIterationStart(j); }
  void OnOldFlowsDone() override { ff_->OnOldFlowsDone(); }
  void OnDeparture(uint32_t j) override {
    replan_needed_ = true;
    if (!host_.oracle()) {
      host_.Remove(j);
      regroup_needed_ = true;
    }
  }

 private:
  Status Init();
  Status EndOfInstant();
  void Arrive(uint32_t j);
  void ApplyLinkEvent(const LinkEvent& e);
  void EvaluateFaults();
  void FastForward();
  // A woken group's events from its landing point up to `until` (SteadyStateDetector::Wake).
  void CatchUp(Duration until);
  void StepFlowsOrJob(Duration t, Duration t_flow);
  void StartPending();
  void MaybeProgress(bool force);
  void BuildResult();

  // Inputs.
  const core::Topology& topo_;  // As given (no link event applied).
  const std::vector<SimJob>& jobs_in_;
  const std::vector<LinkEvent>& link_events_;
  const SimOptions& options_;
  const Duration horizon_;

  engine::SimClock clock_;
  SimResult result_;
  internal::PlanApplier host_;
  std::optional<internal::Fabric> fabric_;
  std::optional<internal::Metrics> metrics_;
  std::optional<internal::JobModel> jobs_;
  std::optional<internal::SteadyStateDetector> ff_;
  engine::ClusterEvents cluster_;
  std::optional<internal::FaultInjector> faults_;
  std::optional<Duration> evaluated_at_;  // Last EvaluateFaults (at most one per instant).

  // Work left for the end of the instant: the oracle's re-plan, or (control loop) iteration
  // starts, regrouping, default routes.
  bool replan_needed_ = false;
  bool regroup_needed_ = false;
  std::vector<uint32_t> to_start_;

  std::chrono::steady_clock::time_point wall_start_;
  std::chrono::steady_clock::time_point last_progress_;
};

Status Engine::Init() {
  CRUX_RETURN_IF_ERROR(host_.Init());
  fabric_.emplace(topo_, host_.isolates_jobs());
  metrics_.emplace(topo_, horizon_, options_.sample_interval, options_.gpus_per_host);
  jobs_.emplace(topo_, jobs_in_, options_, clock_, *fabric_, *metrics_, result_, *this);
  ff_.emplace(options_, clock_, *jobs_, *fabric_, *metrics_, result_,
              [this](Duration until) { CatchUp(until); });
  host_.Bind(&*fabric_, &*jobs_);
  host_.SetWakeHooks([this](uint32_t j) { ff_->WakeGroupOf(j); }, [this] { ff_->WakeAll(); });
  if (options_.faults.enabled()) {
    jobs_->set_telemetry(options_.faults.flow_reports);
    faults_.emplace(topo_, options_.faults, horizon_, result_);
  }
  for (size_t j = 0; j < jobs_in_.size(); ++j) {
    const SimJob& in = jobs_in_[j];
    if (in.arrival >= horizon_) continue;  // Never runs.
    cluster_.Add({in.arrival, ClusterKind::kArrival, static_cast<uint32_t>(j)});
    if (in.duration) {
      const Duration end = in.arrival + *in.duration;
      if (end < horizon_) cluster_.Add({end, ClusterKind::kDeparture, static_cast<uint32_t>(j)});
    }
  }
  for (size_t i = 0; i < link_events_.size(); ++i) {
    if (link_events_[i].at < horizon_) {
      cluster_.Add({link_events_[i].at, ClusterKind::kLink, static_cast<uint32_t>(i)});
    }
  }
  cluster_.Seal();
  return Status::Ok();
}

void Engine::StartPending() {
  for (uint32_t j : to_start_) {
    if (jobs_->job(j).status == JobStatus::kRunning) jobs_->StartIteration(j);
  }
  to_start_.clear();
}

// The work of an instant, once its events are processed: re-plan (oracle) or the control
// loop's due run, default routes after a link event, the iteration starts of arrived jobs,
// and the groups of interacting jobs for the fast-forward.
Status Engine::EndOfInstant() {
  replan_needed_ = false;
  if (host_.oracle()) {
    ff_->WakeAll();  // Every job is re-planned: every group resumes in detail.
    ff_->BeginRegroup();
    CRUX_RETURN_IF_ERROR(host_.Replan());
    host_.RerouteStalled();
    StartPending();
    ff_->EndRegroup();
    return Status::Ok();
  }
  // The control loop's run wakes the groups of the jobs it changes (SetWakeHooks), the
  // regroup those a job outside them now crosses; the others sleep on.
  if (host_.defaults_stale()) {
    ff_->WakeAll();  // After a link event (which woke every group already).
    host_.RefreshDefaults();
    regroup_needed_ = true;
  }
  const std::optional<Duration> due = host_.due();
  if (due && *due <= clock_.Now()) {
    bool changed = false;
    CRUX_RETURN_IF_ERROR(host_.RunDue(&changed));
    regroup_needed_ = regroup_needed_ || changed;
  }
  const bool regroup = regroup_needed_;
  regroup_needed_ = false;
  if (regroup) ff_->BeginRegroup();
  StartPending();
  if (regroup) ff_->EndRegroup();
  return Status::Ok();
}

void Engine::Arrive(uint32_t j) {
  if (host_.oracle()) {
    jobs_->SetRunning(j);
  } else {
    host_.Arrive(j);
    regroup_needed_ = true;
  }
  to_start_.push_back(j);
  replan_needed_ = true;
}

// `LinkEvent{at, link, capacity}` changes both directions of the cable.
void Engine::ApplyLinkEvent(const LinkEvent& e) {
  const double cap = std::max(0.0, e.capacity.ToBitsPerSec());
  const core::LinkId both[2] = {e.link, topo_.link(e.link).reverse};
  for (core::LinkId l : both) {
    if (!l.valid()) continue;
    metrics_->CapacityChanged(l, fabric_->capacity_bps(l), cap, clock_.Now());
    fabric_->SetCapacity(l, cap);
    host_.SetLink(l, e.capacity);
  }
  host_.OnLinkEvent();
  ff_->FabricChanged();
  replan_needed_ = true;
  if (!host_.oracle()) regroup_needed_ = true;
}

// The fault manager's due evaluation; its decisions are applied to the planner's topology
// (PlanApplier::EvaluateFaults), never to the fabric (the physical links are the faults').
void Engine::EvaluateFaults() {
  evaluated_at_ = clock_.Now();
  ++result_.fault_evaluations;
  const std::vector<core::LinkDecision> decisions = host_.EvaluateFaults();
  result_.disbelieved_reports = host_.disbelieved_reports();
  for (const core::LinkDecision& d : decisions) {
    result_.link_decisions.push_back(
        {clock_.Now(), d.link, d.health, d.capacity_fraction, d.automatic, d.reason});
  }
  if (!decisions.empty()) {
    replan_needed_ = true;
    regroup_needed_ = true;
  }
}

void Engine::FastForward() {
  if (replan_needed_ || !to_start_.empty()) {
    ff_->ClearCheck();
    return;
  }
  // Sleeps end before the horizon and before the fault injector's barrier (telemetry it must
  // see); anything else that may change a plan wakes every group when it happens.
  Duration limit = horizon_;
  if (faults_) limit = std::min(limit, faults_->barrier(host_.any_link_not_up()));
  ff_->Check(limit, [this](uint32_t j) { return host_.oracle() || host_.ProfilerSettled(j); });
}

// The flow finishes (when `t_flow` is `t`) or else the next job event at `t`: the detailed
// simulation's step, shared by the event loop and a woken group's catch-up.
void Engine::StepFlowsOrJob(Duration t, Duration t_flow) {
  if (t_flow == t) {
    fabric_->net().PopFinished(t, [this](uint64_t tag, double transmitted) {
      ++result_.events;
      jobs_->OnFlowFinished(tag, transmitted);
    });
    return;
  }
  if (jobs_->Handle(jobs_->events().Pop())) ++result_.events;
}

void Engine::CatchUp(Duration until) {
  FluidNetwork& net = fabric_->net();
  const engine::EventQueue<internal::JobEvent>& job_events = jobs_->events();
  const Duration resume = clock_.Now();
  const uint64_t events_before = result_.events;
  while (true) {
    const Duration t_flow = net.NextFinishTime(clock_.Now());
    const Duration t = std::min(t_flow, job_events.next_time());
    if (t >= until) break;
    clock_.AdvanceTo(t);  // Back to the woken group's landing point first.
    StepFlowsOrJob(t, t_flow);
  }
  result_.catch_up_events += result_.events - events_before;
  clock_.AdvanceTo(resume);
}

void Engine::MaybeProgress(bool force) {
  if (!options_.progress) return;
  const auto wall = std::chrono::steady_clock::now();
  if (!force && wall - last_progress_ < std::chrono::seconds(1)) return;
  last_progress_ = wall;
  Progress p;
  p.simulated = std::min(clock_.Now(), horizon_);
  p.horizon = options_.horizon;
  p.events = result_.events;
  p.wall_s = std::chrono::duration<double>(wall - wall_start_).count();
  options_.progress(p);
}

core::Result<SimResult> Engine::Run() {
  wall_start_ = std::chrono::steady_clock::now();
  last_progress_ = wall_start_;
  CRUX_RETURN_IF_ERROR(Init());
  FluidNetwork& net = fabric_->net();
  engine::EventQueue<internal::JobEvent>& job_events = jobs_->events();
  uint64_t since_progress = 0;
  while (true) {
    const Duration now = clock_.Now();
    const Duration t_flow = net.NextFinishTime(now);
    const Duration t_job = job_events.next_time();
    const Duration t_cl = cluster_.next_time();
    // Fault injection: fault events, heartbeats, and the fault manager's evaluations.
    Duration t_fault = Duration::Infinite();
    Duration t_eval = Duration::Infinite();
    if (faults_) {
      t_fault = faults_->next_time(now);
      if (const std::optional<Duration> due = host_.faults_due()) {
        if (!(evaluated_at_ && *evaluated_at_ == now && *due <= now)) {
          t_eval = std::max(*due, now);
        }
      }
    }
    const Duration t_wake = ff_->next_wake();
    const Duration t_other = std::min({t_flow, t_job, t_cl, t_fault, t_eval, t_wake});
    // The control loop's next run is an event too; it runs after the other events of its
    // instant (EndOfInstant), like the oracle's re-plan.
    Duration t_plan = Duration::Infinite();
    if (const std::optional<Duration> due = host_.due()) t_plan = std::max(*due, now);
    if (t_other > now && (replan_needed_ || t_plan == now)) {
      CRUX_RETURN_IF_ERROR(EndOfInstant());
      continue;
    }
    if (t_other > now && ff_->check_due()) {
      FastForward();
      continue;
    }
    const Duration t = std::min(t_other, t_plan);
    if (t >= horizon_) break;
    if (ff_->all_asleep()) result_.fast_forwarded += t - now;
    clock_.AdvanceTo(t);
    if (t_other > t) continue;  // Only the loop's run is due at t.
    if (t_wake == t) {
      ff_->WakeDue();  // Before its own events at t (an iteration limit counts the credit).
      continue;
    }
    // Fault events change capacities: every sleeping group wakes first (a heartbeat leaves
    // sleeping jobs out; an evaluation's decisions re-plan, which wakes the groups it changes).
    // Cluster events wake what they change, below.
    if (t_fault == t && faults_->event_due(t)) ff_->WakeAll();
    if (++since_progress >= 4096) {
      since_progress = 0;
      MaybeProgress(false);
    }
    if (t_flow == t || t_job == t) {
      StepFlowsOrJob(t, t_flow);
      continue;
    }
    if (t_cl != t) {
      if (t_fault == t) {
        if (faults_->Handle(t, *fabric_, *metrics_, *jobs_, host_)) {
          ff_->FabricChanged();
          regroup_needed_ = true;
          replan_needed_ = true;
        }
        continue;
      }
      EvaluateFaults();
      continue;
    }
    ++result_.events;
    const ClusterEvent e = cluster_.Pop();
    switch (e.kind) {
      case ClusterKind::kArrival:
        // Its flows start at the end of the instant; the regroup first wakes the groups its
        // default routes cross.
        Arrive(e.index);
        break;
      case ClusterKind::kDeparture:
        ff_->WakeGroupOf(e.index);  // Its flows leave: its group's rates change.
        jobs_->Depart(e.index, /*at_horizon=*/false);
        break;
      case ClusterKind::kLink:
        ff_->WakeAll();
        ApplyLinkEvent(link_events_[e.index]);
        break;
    }
  }
  // The horizon: cut what is still running.
  if (ff_->all_asleep()) result_.fast_forwarded += horizon_ - clock_.Now();
  clock_.AdvanceTo(horizon_);
  ff_->WakeAll();  // None sleeps (sleeps end before the horizon); credited up to it otherwise.
  metrics_->IntegrateCapacity(horizon_);
  for (uint32_t j = 0; j < jobs_->jobs().size(); ++j) jobs_->Depart(j, /*at_horizon=*/true);
  MaybeProgress(true);
  BuildResult();
  return std::move(result_);
}

void Engine::BuildResult() {
  SimResult& r = result_;
  r.simulated = options_.horizon;
  double busy = 0;
  double life = 0;
  double work = 0;
  double work_life = 0;
  for (const JobState& s : jobs_->jobs()) {
    JobResult jr;
    jr.id = s.job->spec.id;
    jr.model = s.job->model;
    jr.gpus = s.gpus;
    jr.arrival = s.arrival;
    jr.finish = s.finish;
    jr.iterations = s.iterations;
    const Duration end = s.finish.value_or(horizon_);
    jr.jct = std::max(Duration::Zero(), end - s.arrival);
    if (s.iterations > 0) {
      jr.mean_iteration = Duration::Nanos(s.iteration_time_sum.nanos() / s.iterations);
    }
    jr.standalone_iteration = s.standalone.value_or(Duration::Zero());
    jr.compute_busy = s.compute_busy;
    const double compute_s = s.job->spec.compute_time.ToSeconds();
    jr.flops_per_compute_s =
        compute_s > 0
            ? core::WorkPerIteration(s.job->spec, options_.policy.planner.gpu_peak_flops).value() /
                  compute_s
            : 0;
    jr.level = s.level == internal::kBestEffortLevel ? -1 : s.level;
    jr.scheduled = s.scheduled_at;
    if (s.arrival < horizon_) {
      jr.profiling = std::max(Duration::Zero(), s.scheduled_at.value_or(end) - s.arrival);
    }
    jr.profile_reports = s.reports;
    jr.levels = s.level_log;
    if (s.phases && s.arrival < horizon_) ++r.phase_jobs;
    busy += static_cast<double>(s.gpus) * static_cast<double>(s.compute_busy.nanos());
    life += static_cast<double>(s.gpus) * static_cast<double>(jr.jct.nanos());
    work += jr.flops_per_compute_s * s.compute_busy.ToSeconds();
    work_life += jr.flops_per_compute_s * jr.jct.ToSeconds();
    r.jobs.push_back(std::move(jr));
  }
  if (!host_.oracle()) host_.FinishImpact(horizon_, r.jobs);
  r.gpu_utilization = life > 0 ? busy / life : 0;
  r.work_utilization = work_life > 0 ? work / work_life : 0;
  const int64_t total_gpus = metrics_->total_gpus();
  r.cluster_utilization =
      total_gpus > 0
          ? busy / (static_cast<double>(total_gpus) * static_cast<double>(horizon_.nanos()))
          : 0;
  metrics_->Fill(r);
  r.epochs = host_.epochs();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
}

// A job's multi-phase iteration fits its placement and can run: rail flows between its hosts
// and local GPUs, windows and dependencies that TimeIteration accepts (an op starts after the
// segment it is issued after and before the one that waits for it; after_op names an earlier
// op), and some compute (an iteration takes time).
Status ValidatePhases(const SimJob& j) {
  const core::IterationModel& m = *j.iteration;
  const int hosts = static_cast<int>(j.spec.hosts.size());
  if (m.layout.hosts() != hosts) {
    return core::InvalidArgumentError("iteration: the layout needs " +
                                      std::to_string(m.layout.hosts()) + " hosts (got " +
                                      std::to_string(hosts) + ")");
  }
  if (m.layout.gpus_per_host < 1) {
    return core::InvalidArgumentError("iteration: layout.gpus_per_host must be >= 1");
  }
  Duration total;
  for (const core::ComputeSegment& seg : m.segments) {
    if (seg.duration < Duration::Zero() || seg.duration > kMaxSimTime) {
      return core::InvalidArgumentError("iteration: segment '" + seg.name +
                                        "': duration must be >= 0 and <= " + Num(kMaxSimSeconds) +
                                        " s");
    }
    total += seg.duration;
    if (total > kMaxSimTime) {
      return core::InvalidArgumentError("iteration: segments longer than " + Num(kMaxSimSeconds) +
                                        " s");
    }
  }
  if (total <= Duration::Zero()) {
    return core::InvalidArgumentError("iteration: its segments must take some time");
  }
  const int n_seg = static_cast<int>(m.segments.size());
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const core::CommOp& o = m.ops[i];
    const std::string oc = "iteration: ops[" + std::to_string(i) + "] (" + o.name + ")";
    if (o.issue_after < -1 || o.issue_after >= n_seg || o.needed_before <= o.issue_after ||
        o.needed_before > n_seg || o.after_op < -1 || o.after_op >= static_cast<int>(i) ||
        o.instances < 1 || o.instances > core::kMaxOpInstances) {
      return core::InvalidArgumentError(oc + ": bad window, dependency or instance count");
    }
    for (const core::RailFlow& f : o.flows) {
      if (f.src_host < 0 || f.src_host >= hosts || f.dst_host < 0 || f.dst_host >= hosts ||
          f.src_gpu < 0 || f.src_gpu >= m.layout.gpus_per_host || f.dst_gpu < 0 ||
          f.dst_gpu >= m.layout.gpus_per_host || f.bytes.count() < 0) {
        return core::InvalidArgumentError(oc +
                                          ": a rail flow names a host or GPU the job does "
                                          "not have");
      }
    }
  }
  // An op chained after one that starts too late deadlocks the iteration: the reference timing
  // finds it.
  core::Result<core::IterationTiming> t = core::TimeIteration(m, core::HostNetwork{});
  if (!t.ok()) return t.status().WithContext("iteration");
  return Status::Ok();
}

}  // namespace

Status ValidateSimInput(const core::Topology& topo, const std::vector<SimJob>& jobs,
                        const std::vector<LinkEvent>& link_events, const SimOptions& options) {
  if (options.horizon <= Duration::Zero() || options.horizon > kMaxSimTime) {
    return core::InvalidArgumentError("horizon: must be > 0 and <= " + Num(kMaxSimSeconds) +
                                      " s (got " + Num(options.horizon.ToSeconds()) + " s)");
  }
  if (options.per_hop_latency < Duration::Zero()) {
    return core::InvalidArgumentError("per_hop_latency: must be >= 0");
  }
  if (options.sample_interval <= Duration::Zero()) {
    return core::InvalidArgumentError("sample_interval: must be > 0");
  }
  {
    const int64_t h = options.horizon.nanos();
    const int64_t dt = options.sample_interval.nanos();
    if (h / dt + (h % dt != 0 ? 1 : 0) > kMaxSamples) {
      return core::InvalidArgumentError("sample_interval: too small for the horizon (more than " +
                                        std::to_string(kMaxSamples) + " samples; at least " +
                                        Num(options.horizon.ToSeconds() / kMaxSamples) + " s)");
    }
  }
  if (!(options.fast_forward_tolerance >= 0 && options.fast_forward_tolerance < 1)) {
    return core::InvalidArgumentError("fast_forward_tolerance: must be in [0, 1) (got " +
                                      Num(options.fast_forward_tolerance) + ")");
  }
  if (options.gpus_per_host < 1) return core::InvalidArgumentError("gpus_per_host: must be >= 1");
  if (options.spray_max_paths < 0) {
    return core::InvalidArgumentError("spray_max_paths: must be >= 0 (got " +
                                      std::to_string(options.spray_max_paths) + ")");
  }
  CRUX_RETURN_IF_ERROR(core::ValidateControlLoopOptions(options.control.loop));
  if (options.faults.enabled()) {
    if (options.control.oracle) {
      return core::InvalidArgumentError(
          "faults: fault injection needs the control loop (the oracle has no fault manager)");
    }
    CRUX_RETURN_IF_ERROR(ValidateFaultSimOptions(topo, options.faults));
  }
  CRUX_RETURN_IF_ERROR(internal::ValidateClientProfilerOptions(options.control.profiler));
  CRUX_RETURN_IF_ERROR(core::ValidatePlannerOptions(options.policy.planner));
  std::unordered_map<std::string, size_t> ids;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SimJob& j = jobs[i];
    const std::string ctx = "job " + core::QuoteName(j.spec.id) + " (#" + std::to_string(i) + ")";
    if (!core::IsValidName(j.spec.id)) {
      return core::InvalidArgumentError(ctx + ": id: must be " + std::string(core::kNameRule));
    }
    if (!j.model.empty() && !core::IsValidName(j.model)) {
      return core::InvalidArgumentError(ctx + ": model: must be " + std::string(core::kNameRule) +
                                        " (got " + core::QuoteName(j.model) + ")");
    }
    CRUX_RETURN_IF_ERROR(core::ValidateJob(topo, j.spec).WithContext(ctx));
    if (j.spec.compute_time > kMaxSimTime) {
      return core::InvalidArgumentError(ctx +
                                        ": compute_time_s: must be <= " + Num(kMaxSimSeconds) +
                                        " (got " + Num(j.spec.compute_time.ToSeconds()) + ")");
    }
    if (!ids.emplace(j.spec.id, i).second) {
      return core::InvalidArgumentError(ctx + ": id: duplicate of job #" +
                                        std::to_string(ids[j.spec.id]));
    }
    if (j.arrival < Duration::Zero() || j.arrival > kMaxSimTime) {
      return core::InvalidArgumentError(ctx +
                                        ": arrival_s: must be >= 0 and <= " + Num(kMaxSimSeconds) +
                                        " (got " + Num(j.arrival.ToSeconds()) + ")");
    }
    if (j.duration && (*j.duration <= Duration::Zero() || *j.duration > kMaxSimTime)) {
      return core::InvalidArgumentError(ctx +
                                        ": duration_s: must be > 0 and <= " + Num(kMaxSimSeconds) +
                                        " (got " + Num(j.duration->ToSeconds()) + ")");
    }
    if (j.iterations && *j.iterations < 1) {
      return core::InvalidArgumentError(ctx + ": iterations: must be >= 1 (got " +
                                        std::to_string(*j.iterations) + ")");
    }
    if (j.iteration) CRUX_RETURN_IF_ERROR(ValidatePhases(j).WithContext(ctx));
  }
  for (size_t i = 0; i < link_events.size(); ++i) {
    const LinkEvent& e = link_events[i];
    const std::string ctx = "link event #" + std::to_string(i);
    if (!e.link.valid() || e.link.value() >= topo.num_links()) {
      return core::InvalidArgumentError(ctx + ": link: unknown link id");
    }
    if (e.at < Duration::Zero() || e.at > kMaxSimTime) {
      return core::InvalidArgumentError(ctx + ": at: must be >= 0 and <= " + Num(kMaxSimSeconds) +
                                        " s");
    }
    if (e.capacity.bits_per_sec() < 0) {
      return core::InvalidArgumentError(ctx + ": capacity: must be >= 0 (0 = down)");
    }
  }
  return Status::Ok();
}

core::Result<SimResult> Simulate(const core::Topology& topo, const PolicyFactory& make_policy,
                                 const std::vector<SimJob>& jobs,
                                 const std::vector<LinkEvent>& link_events,
                                 const SimOptions& options) {
  CRUX_RETURN_IF_ERROR(ValidateSimInput(topo, jobs, link_events, options));
  if (!make_policy) return core::InvalidArgumentError("policy: no policy factory given");
  // Nothing the engine or the policy throws leaves Simulate: running out of memory (a workload
  // too large for the machine) and any other exception become an error status.
  try {
    auto engine = std::make_unique<Engine>(topo, make_policy, jobs, link_events, options);
    return engine->Run();
  } catch (const std::bad_alloc&) {
    return core::InternalError(
        "out of memory while simulating (the workload needs more memory than is available)");
  } catch (const std::exception& e) {
    return core::InternalError(std::string("simulation failed with an exception: ") + e.what());
  } catch (...) {
    return core::InternalError("simulation failed with an unknown exception");
  }
}

}  // namespace crux::sim
