#include "control/plan_applier.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/num_text.h"

namespace crux::sim::internal {
namespace {

// ProfilerSettled: iterations of the current regime, and the share of the change threshold,
// after which a profiler whose window is near its last report cannot report again.
constexpr int64_t kQuietIterations = 3;
constexpr double kQuietMargin = 0.5;

uint64_t PairKey(core::NodeId x, core::NodeId y) {
  return (static_cast<uint64_t>(x.value()) << 32) | y.value();
}

}  // namespace

PlanApplier::PlanApplier(const core::Topology& nominal, const PolicyFactory& factory,
                         const std::vector<SimJob>& jobs, const SimOptions& options,
                         const engine::SimClock& clock, SimResult& result)
    : nominal_(nominal),
      topo_(nominal),
      factory_(factory),
      options_(options),
      clock_(clock),
      result_(result),
      oracle_(options.control.oracle) {
  for (size_t j = 0; j < jobs.size(); ++j) {
    index_of_.emplace(jobs[j].spec.id, static_cast<uint32_t>(j));
  }
}

core::Status PlanApplier::MakePolicy() {
  CRUX_ASSIGN_OR_RETURN(policy_, factory_(topo_, clock_));
  if (policy_ == nullptr) return core::InternalError("policy factory returned null");
  policy_stale_ = false;
  return core::Status::Ok();
}

core::Status PlanApplier::Init() {
  CRUX_RETURN_IF_ERROR(MakePolicy());
  isolate_ = policy_->isolates_jobs();
  result_.policy = std::string(policy_->name());
  result_.oracle = oracle_;
  if (!oracle_) {
    core::ControlLoopOptions loop = options_.control.loop;
    if (!options_.control.stable) loop.reoptimize_interval = Duration::Zero();
    loop_ = std::make_unique<ControlHost>(&clock_, &nominal_, loop);
    ecmp_stale_ = true;
  }
  return core::Status::Ok();
}

void PlanApplier::Bind(Fabric* fabric, JobModel* jobs) {
  fabric_ = fabric;
  jobs_ = jobs;
}

void PlanApplier::NoteLevel(uint32_t j, core::JobPhase phase, int level) {
  JobState& s = jobs_->job(j);
  if (phase == core::JobPhase::kScheduled && !s.scheduled_at) s.scheduled_at = clock_.Now();
  if (!s.level_log.empty() && s.level_log.back().phase == phase &&
      s.level_log.back().level == level) {
    return;
  }
  s.level_log.push_back({clock_.Now(), phase, level});
}

// A new time shift (CASSINI) delays the next communication phase once by the difference to the
// shift already applied, modulo the period (never negative).
void PlanApplier::ApplyTimeShift(JobState& s, core::Duration shift) {
  if (shift == s.applied_shift) return;
  int64_t delta = (shift - s.applied_shift).nanos();
  const int64_t period = s.period.nanos();
  if (delta < 0 && period > 0) delta = ((delta % period) + period) % period;
  s.pending_shift += core::Duration::Nanos(std::max<int64_t>(delta, 0));
  s.applied_shift = shift;
}

core::Status PlanApplier::Replan() {
  std::vector<JobState>& js = jobs_->jobs();
  std::vector<core::JobSpec> specs;
  std::vector<uint32_t> idx;
  for (uint32_t j = 0; j < js.size(); ++j) {
    if (js[j].status != JobStatus::kRunning) continue;
    specs.push_back(js[j].job->spec);
    idx.push_back(j);
  }
  if (specs.empty()) return core::Status::Ok();
  if (policy_stale_) CRUX_RETURN_IF_ERROR(MakePolicy());
  ++result_.replans;
  core::Result<core::Plan> plan = policy_->Schedule(specs);
  if (!plan.ok()) {
    // Keep every job's previous plan; a job that never had one cannot run.
    for (uint32_t j : idx) {
      if (!js[j].planned) {
        return plan.status().WithContext("re-plan at t=" + Num(clock_.Now().ToSeconds()) +
                                         " s (job '" + js[j].job->spec.id + "' has no plan)");
      }
    }
    ++result_.replan_failures;
    return core::Status::Ok();
  }
  if (plan->jobs.size() != idx.size()) {
    return core::InternalError("policy '" + result_.policy + "' returned " +
                               std::to_string(plan->jobs.size()) + " job plans for " +
                               std::to_string(idx.size()) + " jobs");
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    JobState& s = js[idx[k]];
    core::JobPlan& jp = plan->jobs[k];
    s.planned = true;
    s.level = jp.level;
    s.period = jp.period;
    if (!s.standalone) s.standalone = s.period;
    NoteLevel(idx[k], core::JobPhase::kScheduled, s.level);
    s.plan_flows = std::move(jp.flows);
    ++s.plan_version;
    s.plan_resources.assign(s.plan_flows.size(), {});
    for (size_t f = 0; f < s.plan_flows.size(); ++f) {
      for (core::LinkId l : s.plan_flows[f].path) {
        s.plan_resources[f].push_back(fabric_->ResourceFor(idx[k], l));
      }
    }
    if (options_.spray) SprayPlanFlows(idx[k]);
    ApplyTimeShift(s, jp.time_shift);
  }
  return core::Status::Ok();
}

void PlanApplier::RerouteStalled() {
  std::vector<JobState>& js = jobs_->jobs();
  FluidNetwork& net = fabric_->net();
  auto moves = [&](const JobState& s, const FlowRun& run) {
    if (run.status != FlowStatus::kInNetwork) return false;
    const size_t f = run.plan_flow;  // The plan flow whose path it took.
    if (!fabric_->Stalled(net.Resources(run.id)) || f >= s.plan_resources.size()) return false;
    const std::vector<ResourceId>& path = s.plan_resources[f];
    return !path.empty() && !fabric_->Stalled(path);
  };
  // Whether anything moves, first: usually nothing does, and waking groups changes their flows.
  const bool any = std::any_of(js.begin(), js.end(), [&](const JobState& s) {
    return s.status == JobStatus::kRunning &&
           std::any_of(s.flows.begin(), s.flows.end(),
                       [&](const FlowRun& run) { return moves(s, run); });
  });
  if (!any) return;
  if (before_reroute_) before_reroute_();
  for (JobState& s : js) {
    if (s.status != JobStatus::kRunning) continue;
    for (FlowRun& run : s.flows) {
      if (moves(s, run)) net.Reroute(run.id, s.plan_resources[run.plan_flow], clock_.Now());
    }
  }
}

// The job's own flows (ExpandTraffic of its true spec, on the wire) with their default paths:
// what the `ecmp` policy routes for the job alone (hash ECMP), and its standalone period
// (policy-independent, as in every plan). When the current fabric has no route for it (a link
// event took its only path down), the routes on the nominal fabric: its traffic then waits on
// the down link until a plan or a recovery moves it. False if neither exists.
bool PlanApplier::RouteAlone(uint32_t j) {
  JobState& s = jobs_->job(j);
  auto route = [&](std::unique_ptr<core::SchedulingPolicy>& ecmp,
                   const core::Topology& t) -> std::optional<core::JobPlan> {
    if (ecmp == nullptr) {
      core::Result<std::unique_ptr<core::SchedulingPolicy>> p =
          core::MakePolicy("ecmp", t, options_.policy, &clock_);
      if (!p.ok()) return std::nullopt;
      ecmp = std::move(p).value();
    }
    core::Result<core::Plan> plan = ecmp->Schedule({s.job->spec});
    if (!plan.ok() || plan->jobs.size() != 1) return std::nullopt;
    return std::move(plan->jobs[0]);
  };
  if (ecmp_stale_) {
    ecmp_.reset();
    ecmp_stale_ = false;
  }
  std::optional<core::JobPlan> jp = route(ecmp_, topo_);
  if (!jp) jp = route(nominal_ecmp_, nominal_);
  if (!jp) return false;
  s.period = jp->period;
  if (!s.standalone) s.standalone = s.period;
  s.own_flows = std::move(jp->flows);
  return true;
}

// plan_flows / plan_resources from the job's own flows: each on the pinned path of `a` for its
// NIC pair (the k-th flow of a pair on the k-th pin of that pair), else on its default path.
uint64_t PlanApplier::FlowsHash(const core::Assignment& a) {
  // FNV-1a over every pin's NIC pair, source port and links.
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](uint64_t v) {
    h ^= v;
    h *= 1099511628211ULL;
  };
  for (const core::FlowPin& p : a.flows) {
    mix(PairKey(p.src_nic, p.dst_nic));
    mix(p.udp_sport);
    for (core::LinkId l : p.path) mix(l.value());
    mix(~0ULL);
  }
  return h;
}

void PlanApplier::SetPlanFlows(uint32_t j, const core::Assignment* a) {
  JobState& s = jobs_->job(j);
  std::unordered_map<uint64_t, std::vector<const core::FlowPin*>> pins;
  if (a != nullptr) {
    for (const core::FlowPin& p : a->flows) {
      if (!p.path.empty()) pins[PairKey(p.src_nic, p.dst_nic)].push_back(&p);
    }
  }
  std::unordered_map<uint64_t, size_t> used;
  const size_t n = s.own_flows.size();
  s.plan_flows = s.own_flows;
  ++s.plan_version;
  s.pinned.assign(n, false);
  s.report_flow.assign(n, false);
  s.plan_sport.assign(n, 0);
  s.plan_resources.assign(n, {});
  for (size_t f = 0; f < n; ++f) {
    core::FlowPlan& fp = s.plan_flows[f];
    const uint64_t k = PairKey(fp.src, fp.dst);
    auto it = pins.find(k);
    if (it != pins.end()) {
      const size_t pin = used[k]++ % it->second.size();
      fp.path = it->second[pin]->path;
      s.pinned[f] = true;
      // One sample per pin: the fault manager matches a sample to the pin of its pair with its
      // source port (port 0: the pair's first pin, so a pin without a port other than the first
      // is not reported).
      s.plan_sport[f] = it->second[pin]->udp_sport;
      s.report_flow[f] = pin == 0 || s.plan_sport[f] != 0;
    }
    for (core::LinkId l : fp.path) s.plan_resources[f].push_back(fabric_->ResourceFor(j, l));
  }
  if (options_.spray) SprayPlanFlows(j);
}

// Spraying (SimOptions::spray): plan flow f becomes one sub-flow per equal-cost path of its NIC
// pair on the planner's fabric (topo_), each with 1/P of its bytes (the first bytes % P one
// byte more), in f's place and order; the parallel per-flow vectors follow (no pin, no port:
// pinning is impossible on a sprayed fabric; the client's peer and the report flag go with every
// sub-flow of f, the report flag on its first only). A pair without a path keeps its flow as
// planned (it waits on a down link like an unsprayed one).
void PlanApplier::SprayPlanFlows(uint32_t j) {
  JobState& s = jobs_->job(j);
  if (spray_paths_ == nullptr) spray_paths_ = std::make_unique<core::PathFinder>(topo_);
  const size_t n = s.plan_flows.size();
  const bool loop = s.pinned.size() == n;
  const bool peers = s.own_peer_of.size() == n;
  std::vector<core::FlowPlan> flows;
  std::vector<std::vector<ResourceId>> resources;
  std::vector<bool> report;
  std::vector<uint32_t> peer_of;
  flows.reserve(n);
  for (size_t f = 0; f < n; ++f) {
    core::FlowPlan& fp = s.plan_flows[f];
    core::Result<const core::PathSet*> set = spray_paths_->Paths(fp.src, fp.dst);
    const size_t all = set.ok() ? (*set)->size() : 0;
    const size_t p = options_.spray_max_paths > 0
                         ? std::min(all, static_cast<size_t>(options_.spray_max_paths))
                         : all;
    const size_t first = flows.size();
    if (p == 0) {
      flows.push_back(std::move(fp));
      resources.push_back(std::move(s.plan_resources[f]));
    } else {
      const int64_t total = fp.bytes.count();
      const int64_t each = total / static_cast<int64_t>(p);
      const int64_t extra = total % static_cast<int64_t>(p);
      // Capped: P evenly spaced paths, shifted within the stride by the pair (so that the pairs
      // of a plane do not all take its first path); uncapped: every path.
      const size_t stride = all / p;
      const size_t shift =
          stride > 1 ? static_cast<size_t>(PairKey(fp.src, fp.dst) % 0x9E3779B1u) % stride : 0;
      for (size_t i = 0; i < p; ++i) {
        const size_t index = (i * all / p + shift) % all;
        core::FlowPlan sub;
        sub.src = fp.src;
        sub.dst = fp.dst;
        sub.bytes = core::Bytes::Of(each + (static_cast<int64_t>(i) < extra ? 1 : 0));
        sub.path = (*set)->Path(index);
        sub.path_index = index;
        sub.num_paths = all;
        std::vector<ResourceId> res;
        res.reserve(sub.path.size());
        for (core::LinkId l : sub.path) res.push_back(fabric_->ResourceFor(j, l));
        flows.push_back(std::move(sub));
        resources.push_back(std::move(res));
      }
    }
    for (size_t i = first; i < flows.size(); ++i) {
      if (loop) report.push_back(i == first && s.report_flow[f]);
      if (peers) peer_of.push_back(s.own_peer_of[f]);
    }
  }
  const size_t m = flows.size();
  s.plan_flows = std::move(flows);
  s.plan_resources = std::move(resources);
  if (loop) {
    s.pinned.assign(m, false);
    s.plan_sport.assign(m, 0);
    s.report_flow = std::move(report);
  }
  if (peers) s.peer_of = std::move(peer_of);
}

void PlanApplier::Arrive(uint32_t j) {
  jobs_->SetRunning(j);
  JobState& s = jobs_->job(j);
  if (!RouteAlone(j)) {
    // No route on either fabric (the policy would refuse it too): only its compute runs.
    s.own_flows.clear();
  }
  // The job's client declares one peer per NIC pair it sends on (AddPeer), in flow order.
  std::vector<std::pair<core::NodeId, core::NodeId>> peers;
  std::unordered_map<uint64_t, uint32_t> peer_index;
  s.peer_of.assign(s.own_flows.size(), 0);
  for (size_t f = 0; f < s.own_flows.size(); ++f) {
    const core::FlowPlan& fp = s.own_flows[f];
    auto [it, inserted] =
        peer_index.emplace(PairKey(fp.src, fp.dst), static_cast<uint32_t>(peers.size()));
    if (inserted) peers.emplace_back(fp.src, fp.dst);
    s.peer_of[f] = it->second;
  }
  if (options_.spray) s.own_peer_of = s.peer_of;  // SprayPlanFlows rewrites peer_of.
  s.profiler.emplace(options_.control.profiler, std::move(peers), s.job->spec.flops_per_iteration);
  s.assigned = false;
  s.phase = core::JobPhase::kRegistered;
  s.level = kBestEffortLevel;
  SetPlanFlows(j, nullptr);
  loop_->AddJob(*s.job);
}

void PlanApplier::ReportIteration(uint32_t j) {
  JobState& s = jobs_->job(j);
  if (!s.profiler) return;
  std::optional<core::JobProfile> p = s.profiler->TakeReport();
  if (!p) return;
  ++s.reports;
  ++result_.profile_reports;
  loop_->Report(s.job->spec.id, *p);
}

void PlanApplier::Remove(uint32_t j) {
  CloseImpact(j, clock_.Now());
  loop_->RemoveJob(jobs_->job(j).job->spec.id, "ended");
}

void PlanApplier::CloseImpact(uint32_t j, core::Duration now) {
  if (j >= impact_.size() || !impact_[j].open) return;
  ImpactTrack& t = impact_[j];
  const JobState& s = jobs_->job(j);
  const double dt = (now - t.since).ToSeconds();
  if (dt > 0) {
    t.seconds += dt;
    t.predicted_s2 += dt * t.predicted.ToSeconds();
    t.ecmp_s2 += dt * t.ecmp.ToSeconds();
    t.observed_iterations += s.iterations - t.iterations;
    t.observed_time += s.iteration_time_sum - t.iteration_time;
  }
  t.open = false;
}

void PlanApplier::NoteImpact(const core::PlanImpact& impact) {
  const core::Duration now = clock_.Now();
  recovered_integral_ += recovered_now_ * (now - recovered_since_).ToSeconds();
  recovered_now_ = impact.gpus_recovered;
  recovered_since_ = now;
  ++result_.impact_plans;
  if (impact_.size() < jobs_->jobs().size()) impact_.resize(jobs_->jobs().size());
  for (uint32_t j = 0; j < impact_.size(); ++j) CloseImpact(j, now);
  for (const core::JobImpact& ji : impact.jobs) {
    auto it = index_of_.find(ji.id);
    if (it == index_of_.end()) continue;
    const JobState& s = jobs_->job(it->second);
    // Only jobs that run under their planned level: a newcomer's assignment puts it on the top
    // level whatever its plan says.
    if (s.status != JobStatus::kRunning || s.phase != core::JobPhase::kScheduled) continue;
    ImpactTrack& t = impact_[it->second];
    t.open = true;
    t.predicted = ji.predicted;
    t.ecmp = ji.ecmp;
    t.since = now;
    t.iterations = s.iterations;
    t.iteration_time = s.iteration_time_sum;
  }
}

void PlanApplier::FinishImpact(core::Duration end, std::vector<JobResult>& jobs) {
  if (impact_.empty()) return;
  recovered_integral_ += recovered_now_ * (end - recovered_since_).ToSeconds();
  recovered_since_ = end;
  result_.predicted_gpus_recovered =
      end > core::Duration::Zero() ? recovered_integral_ / end.ToSeconds() : 0;
  for (uint32_t j = 0; j < impact_.size() && j < jobs.size(); ++j) {
    CloseImpact(j, end);
    const ImpactTrack& t = impact_[j];
    if (!(t.seconds > 0) || t.observed_iterations <= 0) continue;
    jobs[j].predicted_iteration = core::Duration::Seconds(t.predicted_s2 / t.seconds);
    jobs[j].predicted_ecmp_iteration = core::Duration::Seconds(t.ecmp_s2 / t.seconds);
    jobs[j].observed_iteration =
        core::Duration::Nanos(t.observed_time.nanos() / t.observed_iterations);
    jobs[j].predicted_for = core::Duration::Seconds(t.seconds);
  }
}

std::optional<core::Duration> PlanApplier::due() const {
  if (!loop_) return std::nullopt;
  return loop_->due();
}

// Fast-forward skips iterations, which the profilers would otherwise see: a sleep waits until
// no report can be under way (each profiler reported and confirms no change), and until each
// profiler's window holds only samples of the current regime (so a plan change has shown up in
// the medians) - or, after at least 3 iterations of it, until every sample in the window is
// within half the change threshold of the last report (then no median of such samples can move
// by the threshold). Approximate: a window median that would drift within a steady state is
// missed.
bool PlanApplier::ProfilerSettled(uint32_t j) const {
  const int64_t window = std::max<uint32_t>(options_.control.profiler.window, 3);
  const JobState& s = jobs_->jobs()[j];
  if (!s.profiler) return true;
  if (!s.profiler->settled()) return false;
  if (s.epoch_iterations >= window) return true;
  if (s.epoch_iterations >= kQuietIterations && s.profiler->Quiet(kQuietMargin)) return true;
  // An exactly periodic job repeats its cycle's samples: settled if the iterations that would
  // fill its window with them leave no report due (a copy of its profiler replays them). The
  // cycle's samples must all be of the current regime (a sample's period reaches back to the
  // previous iteration's start).
  const int64_t cycle = s.cycle_iterations;
  return cycle > 0 && s.epoch_iterations > cycle &&
         static_cast<size_t>(cycle) <= s.profiler->samples() &&
         s.profiler->QuietThrough(window - s.epoch_iterations, static_cast<size_t>(cycle));
}

void PlanApplier::RefreshDefaults() {
  defaults_stale_ = false;
  ecmp_stale_ = true;
  std::vector<JobState>& js = jobs_->jobs();
  for (uint32_t j = 0; j < js.size(); ++j) {
    JobState& s = js[j];
    if (s.status != JobStatus::kRunning || !s.profiler) continue;
    if (std::all_of(s.pinned.begin(), s.pinned.end(), [](bool b) { return b; })) continue;
    if (!RouteAlone(j)) continue;
    const core::AppliedAssignment* applied = loop_->loop().Applied(s.job->spec.id);
    SetPlanFlows(j, applied != nullptr ? &applied->assignment : nullptr);
  }
  RerouteStalled();
}

JobState* PlanApplier::ShiftChanges(const std::string& id, core::Duration time_shift) {
  auto it = index_of_.find(id);
  if (it == index_of_.end()) return nullptr;
  JobState& s = jobs_->job(it->second);
  if (s.status != JobStatus::kRunning || time_shift == s.applied_shift) return nullptr;
  return &s;
}

core::Status PlanApplier::RunDue(bool* changed) {
  *changed = false;
  if (policy_stale_) CRUX_RETURN_IF_ERROR(MakePolicy());
  const LoopRun run = loop_->Run(*policy_, topo_);
  if (run.planned) {
    ++result_.replans;
    if (!run.status.ok()) ++result_.replan_failures;
    result_.reoptimizations += run.reoptimize_weighed ? 1 : 0;
    result_.reoptimizations_adopted += run.reoptimize_adopted ? 1 : 0;
  }
  result_.excluded += run.excluded;
  // What this run changes, first: the jobs whose flows move, and those whose time shift does.
  std::vector<std::pair<uint32_t, const core::Assignment*>> moved;
  for (const core::AppliedAssignment& aa : run.changed) {
    auto it = index_of_.find(aa.assignment.job_id);
    if (it == index_of_.end()) continue;
    JobState& s = jobs_->job(it->second);
    if (s.status != JobStatus::kRunning) continue;
    // An assignment re-issued only for its probes (the loop re-designs them when the fault
    // manager's probe targets change) leaves the job's flows where they are.
    const bool probes = s.assignment_probes || !aa.assignment.probes.empty();
    s.assignment_probes = !aa.assignment.probes.empty();
    if (probes && s.assigned && s.phase == aa.assignment.phase && s.level == aa.assignment.level &&
        FlowsHash(aa.assignment) == s.assignment_hash) {
      continue;
    }
    moved.emplace_back(it->second, &aa.assignment);
  }
  // Core's Assignment has no time shift (cruxd cannot enforce CASSINI's shifts): the simulator
  // takes them from the run's JobPlans, for every planned job.
  std::vector<std::pair<uint32_t, core::Duration>> shifted;
  for (const auto& [id, time_shift] : run.time_shifts) {
    if (ShiftChanges(id, time_shift) != nullptr) shifted.emplace_back(index_of_.at(id), time_shift);
  }
  // Before any change (a woken group catches up on its old plans).
  if (before_change_) {
    for (const auto& [j, a] : moved) before_change_(j);
    for (const auto& [j, shift] : shifted) before_change_(j);
  }
  for (const auto& [j, a] : moved) {
    JobState& s = jobs_->job(j);
    s.assigned = true;
    s.phase = a->phase;
    s.level = a->level;
    s.assignment_hash = FlowsHash(*a);
    SetPlanFlows(j, a);
    NoteLevel(j, s.phase, s.level);
    *changed = true;
  }
  for (const auto& [j, shift] : shifted) {
    ApplyTimeShift(jobs_->job(j), shift);
    *changed = true;
  }
  if (*changed) RerouteStalled();
  if (run.impact != nullptr) NoteImpact(*run.impact);
  return core::Status::Ok();
}

void PlanApplier::SetLink(core::LinkId l, core::Bandwidth capacity) {
  spray_paths_.reset();  // Its paths skip down links: stale once topo_ changes.
  topo_.SetLinkUp(l, capacity.IsPositive());
  if (capacity.IsPositive()) (void)topo_.SetLinkCapacity(l, capacity);  // Validated: > 0.
}

void PlanApplier::OnLinkEvent() {
  policy_stale_ = true;
  if (loop_) {
    loop_->Invalidate("link event");
    defaults_stale_ = true;
  }
}

void PlanApplier::ObserveFlows(uint32_t j, const std::vector<core::FlowSample>& samples) {
  if (!loop_ || samples.empty()) return;
  faults_due_.reset();
  loop_->mutable_loop().ObserveFlows(jobs_->job(j).job->spec.id, samples);
}

void PlanApplier::ObserveLinkState(const core::LinkStateSignal& s) {
  if (!loop_) return;
  faults_due_.reset();
  loop_->mutable_loop().ObserveLinkState(s);
}

void PlanApplier::ObserveCounters(const core::CounterSignal& s) {
  if (!loop_) return;
  faults_due_.reset();
  loop_->mutable_loop().ObserveCounters(s);
}

void PlanApplier::ObserveNicCounters(const core::NicCounterSignal& s) {
  if (!loop_) return;
  faults_due_.reset();
  loop_->mutable_loop().ObserveNicCounters(s);
}

void PlanApplier::ObserveHostProbes(uint32_t j, const std::vector<core::FlowSample>& samples) {
  if (!loop_ || samples.empty()) return;
  faults_due_.reset();
  loop_->mutable_loop().ObserveHostProbes(jobs_->job(j).job->spec.id, samples);
}

const std::vector<core::FlowPin>* PlanApplier::ProbesOf(uint32_t j) const {
  if (!loop_) return nullptr;
  const core::AppliedAssignment* a = loop_->loop().Applied(jobs_->job(j).job->spec.id);
  return a == nullptr || a->assignment.probes.empty() ? nullptr : &a->assignment.probes;
}

uint64_t PlanApplier::disbelieved_reports() const {
  return loop_ ? loop_->loop().faults().disbelieved_reports() : 0;
}

std::optional<core::Duration> PlanApplier::faults_due() const {
  if (!loop_) return std::nullopt;
  if (!faults_due_) faults_due_ = loop_->loop().faults_due();
  return *faults_due_;
}

std::vector<core::LinkDecision> PlanApplier::EvaluateFaults() {
  if (!loop_) return {};
  faults_due_.reset();
  std::vector<core::LinkDecision> decisions = loop_->mutable_loop().EvaluateFaults();
  if (decisions.empty()) return decisions;
  if (health_.empty()) health_.assign(nominal_.num_links(), core::LinkHealth::kUp);
  for (const core::LinkDecision& d : decisions) {
    const core::Bandwidth nominal = nominal_.link(d.link).capacity;
    if (d.health == core::LinkHealth::kDown) {
      SetLink(d.link, core::Bandwidth::BitsPerSec(0));
    } else if (d.health == core::LinkHealth::kDegraded) {
      SetLink(d.link, core::Bandwidth::BitsPerSec(std::max<int64_t>(
                          1, std::llround(nominal.ToBitsPerSec() * d.capacity_fraction))));
    } else {
      SetLink(d.link, nominal);
    }
    core::LinkHealth& h = health_[d.link.value()];
    if (h != core::LinkHealth::kUp) --not_up_;
    h = d.health;
    if (h != core::LinkHealth::kUp) ++not_up_;
  }
  // The loop asked for a plan itself (and unseats the jobs crossing the changed links).
  policy_stale_ = true;
  defaults_stale_ = true;
  spray_paths_.reset();
  return decisions;
}

}  // namespace crux::sim::internal
