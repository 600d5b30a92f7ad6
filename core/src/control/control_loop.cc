#include "crux/core/control/control_loop.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <utility>

namespace crux::core {

Status ValidateControlLoopOptions(const ControlLoopOptions& o) {
  if (o.debounce < Duration::Zero()) return InvalidArgumentError("control.debounce: must be >= 0");
  if (o.min_replan_interval < Duration::Zero()) {
    return InvalidArgumentError("control.min_replan_interval: must be >= 0");
  }
  if (!std::isfinite(o.replan_threshold_pct) || o.replan_threshold_pct < 0 ||
      o.replan_threshold_pct > 1000) {
    return InvalidArgumentError("control.replan_threshold_pct: must be in [0, 1000]");
  }
  if (o.reoptimize_interval < Duration::Zero()) {
    return InvalidArgumentError("control.reoptimize_interval: must be >= 0");
  }
  if (!(o.reoptimize_min_gain >= 0 && o.reoptimize_min_gain < 1)) {
    return InvalidArgumentError("control.reoptimize_min_gain: must be in [0, 1)");
  }
  if (o.profiling_samples < 1) {
    return InvalidArgumentError("control.profiling_samples: must be >= 1");
  }
  if (o.assumed_compute_time <= Duration::Zero()) {
    return InvalidArgumentError("control.assumed_compute_time: must be > 0");
  }
  if (Status s = ValidateBackoffOptions(o.retry); !s.ok()) {
    return InvalidArgumentError("control.retry: " + s.message());
  }
  if (o.qos) CRUX_RETURN_IF_ERROR(ValidateQosConfig(*o.qos));
  CRUX_RETURN_IF_ERROR(ValidateFaultOptions(o.faults));
  if (o.impact) CRUX_RETURN_IF_ERROR(ValidateImpactOptions(*o.impact));
  return Status::Ok();
}

Result<std::optional<JobSpec>> BuildJobSpec(const Topology& topo, const LoopJob& job,
                                            Duration assumed_compute_time) {
  const JobDemand& d = job.demand;
  JobSpec s;
  s.id = d.id;
  uint32_t max_gpus = 1;
  for (size_t i = 0; i < d.placement.size(); ++i) {
    const NodeId h = d.placement[i].host;
    if (!h.valid() || h.value() >= topo.num_nodes() || topo.node(h).kind != NodeKind::kHost) {
      return InvalidArgumentError("job " + d.id + ": placement[" + std::to_string(i) +
                                  "].host: not a host of the topology");
    }
    s.hosts.push_back(h);
    max_gpus = std::max(max_gpus, d.placement[i].gpus);
  }
  // JobSpec models a uniform placement: the largest per-host GPU count stands
  // for all.
  s.gpus_per_host = static_cast<int>(max_gpus);
  s.compute_time = assumed_compute_time;
  s.flops_per_iteration = d.flops_per_iteration;
  s.pattern = d.pattern;
  Bytes pattern_bytes = d.bytes_per_iteration;
  // The planned profile (hysteresis), not necessarily the latest report.
  const std::optional<JobProfile>& planned = job.planned ? job.planned : job.profile;
  if (planned) {
    const JobProfile& p = *planned;
    s.compute_time = p.compute_time;
    if (p.flops_per_iteration) s.flops_per_iteration = p.flops_per_iteration;
    s.overlap_start = p.overlap_start;
    s.compression_ratio = p.compression_ratio > 0 ? p.compression_ratio : 1.0;
    if (!p.peers.empty()) {
      // Measured per-peer bytes are on the wire already: no compression on top.
      s.pattern = TrafficPattern::kExplicit;
      s.compression_ratio = 1.0;
      std::map<std::pair<uint32_t, uint32_t>, int64_t> merged;
      for (const PeerTraffic& pt : p.peers) {
        for (NodeId n : {pt.local_nic, pt.remote_nic}) {
          if (!n.valid() || n.value() >= topo.num_nodes()) {
            return InvalidArgumentError("job " + d.id + ": profile peer: not a node of the " +
                                        "topology");
          }
        }
        if (pt.bytes.count() <= 0) continue;
        merged[{pt.local_nic.value(), pt.remote_nic.value()}] += pt.bytes.count();
      }
      for (const auto& [ab, bytes] : merged) {
        s.flows.push_back({NodeId(ab.first), NodeId(ab.second), Bytes::Of(bytes)});
      }
      if (s.flows.empty()) return std::optional<JobSpec>();
      return std::optional<JobSpec>(std::move(s));
    }
    if (p.bytes_per_iteration.count() > 0) pattern_bytes = p.bytes_per_iteration;
  }
  if (pattern_bytes.count() <= 0 || s.hosts.size() < 2) return std::optional<JobSpec>();
  s.pattern_bytes = pattern_bytes;
  return std::optional<JobSpec>(std::move(s));
}

namespace {

AssignmentHeader MakeHeader(const PlanningJob& job, const JobPlan* plan) {
  AssignmentHeader h;
  h.job_id = job.id;
  h.phase = job.phase;
  h.dscp = job.dscp;
  h.traffic_class = TrafficClassFor(job.dscp);
  h.nccl_env = NcclEnvFor(job.dscp);
  h.level = 0;  // Newcomers: the temporary top level.
  if (plan != nullptr && job.phase == JobPhase::kScheduled) h.level = plan->level;
  h.reference_job = plan != nullptr && plan->reference;
  return h;
}

// The one mapping of a planned flow to a pin, and its comparison (keep the two together: the
// static_assert fails when FlowPin gains a field).
struct FlowPinFields {
  NodeId src_nic;
  NodeId dst_nic;
  uint16_t udp_sport;
  std::vector<LinkId> path;
};
static_assert(sizeof(FlowPin) == sizeof(FlowPinFields), "FlowPin changed: update PinOf, IsPinOf");
FlowPin PinOf(const FlowPlan& f) {
  FlowPin p;
  p.src_nic = f.src;
  p.dst_nic = f.dst;
  p.udp_sport = f.udp_sport.value_or(0);
  p.path = f.path;
  return p;
}
bool IsPinOf(const FlowPin& p, const FlowPlan& f) {
  return p.src_nic == f.src && p.dst_nic == f.dst && p.udp_sport == f.udp_sport.value_or(0) &&
         p.path == f.path;
}

// Whether a pinned flow of `a` crosses one of `links` (sorted).
bool Crosses(const Assignment& a, const std::vector<LinkId>& links) {
  if (links.empty()) return false;
  for (const FlowPin& f : a.flows) {
    for (LinkId l : f.path) {
      if (std::binary_search(links.begin(), links.end(), l)) return true;
    }
  }
  return false;
}

// The plan in force as seeds for a stable policy without state (RunPlan), except the jobs that
// cross a link whose health changed (`unseat`, sorted): they are planned afresh. Spans point into
// `applied`, which the snapshot holds for the run.
std::vector<PlanSeed> SeedsOf(const AppliedPlan& applied, const std::vector<LinkId>& unseat) {
  std::vector<PlanSeed> seeds;
  seeds.reserve(applied.size());
  for (const auto& [id, entry] : applied) {
    const Assignment& a = entry->assignment;
    if (Crosses(a, unseat)) continue;
    PlanSeed seed;
    seed.id = id;
    // A newcomer's level is the temporary top level, not one the planner chose.
    if (a.phase == JobPhase::kScheduled) seed.level = a.level;
    seed.reference = a.reference_job;
    seed.flows.reserve(a.flows.size());
    for (const FlowPin& f : a.flows) seed.flows.push_back({f.src_nic, f.dst_nic, f.path});
    seeds.push_back(std::move(seed));
  }
  return seeds;
}

}  // namespace

Assignment MakeAssignment(const PlanningJob& job, const JobPlan* plan) {
  Assignment a;
  static_cast<AssignmentHeader&>(a) = MakeHeader(job, plan);
  if (plan == nullptr) return a;
  a.flows.reserve(plan->flows.size());
  for (const FlowPlan& f : plan->flows) a.flows.push_back(PinOf(f));
  return a;
}

bool IsAssignmentOf(const Assignment& a, const PlanningJob& job, const JobPlan* plan) {
  const size_t flows = plan != nullptr ? plan->flows.size() : 0;
  if (a.flows.size() != flows) return false;
  for (size_t f = 0; f < flows; ++f) {
    if (!IsPinOf(a.flows[f], plan->flows[f])) return false;
  }
  return static_cast<const AssignmentHeader&>(a) == MakeHeader(job, plan);
}

std::vector<QosJob> QosJobsOf(const Topology& topo, const std::vector<const Assignment*>& jobs) {
  std::vector<QosJob> out;
  out.reserve(jobs.size());
  std::vector<uint32_t> seen(topo.num_nodes(), 0);  // Job number + 1 that listed the switch.
  for (const Assignment* a : jobs) {
    QosJob q;
    q.id = a->job_id;
    q.dscp = static_cast<int>(a->dscp);
    q.level = a->level;
    const uint32_t stamp = static_cast<uint32_t>(out.size()) + 1;
    for (const FlowPin& f : a->flows) {
      for (LinkId l : f.path) {
        if (l.value() >= topo.num_links()) continue;
        for (NodeId n : {topo.link(l).src, topo.link(l).dst}) {
          if (seen[n.value()] == stamp || !IsNetworkSwitch(topo.node(n).kind)) continue;
          seen[n.value()] = stamp;
          q.switches.push_back(n);
        }
      }
    }
    std::sort(q.switches.begin(), q.switches.end());  // A few switches, for a stable order.
    out.push_back(std::move(q));
  }
  return out;
}

namespace {

// ---- the steps of RunPlan, in order ----

// The jobs a run plans: specs[k] is snap.jobs[job[k]].
struct SpecList {
  std::vector<JobSpec> specs;
  std::vector<size_t> job;
};

// Every snapshot job's assignment after the run: current[i] is job i's (kept or fresh), fresh[i]
// is set when it differs from the applied one (current[i] then points into it).
struct RunAssignments {
  std::vector<const Assignment*> current;
  std::vector<std::shared_ptr<AppliedAssignment>> fresh;
};

// A re-optimisation to weigh against the plan in force (ScheduleWeighed) first continues that
// plan, as an ordinary run would.
bool WeighsReoptimization(const PlanningSnapshot& snap, const AppliedPlan& applied) {
  return snap.reoptimize && snap.reoptimize_min_gain > 0 && !applied.empty();
}

// A stable policy without state continues the plan in force (SeedsOf).
void SeedFromApplied(SchedulingPolicy& policy, const PlanningSnapshot& snap,
                     const AppliedPlan& applied, PlanOutcome& out) {
  if (policy.WantsSeed() && !applied.empty()) {
    policy.Seed(SeedsOf(applied, snap.unseat_links));
    out.seeded = true;
  }
}

// A re-optimisation (not weighed) forgets the plan in force; any other run continues it.
void StartPolicy(SchedulingPolicy& policy, const PlanningSnapshot& snap, const AppliedPlan& applied,
                 PlanOutcome& out) {
  if (snap.reoptimize && !WeighsReoptimization(snap, applied)) {
    policy.Reoptimize();
    out.reoptimized = true;
  } else {
    SeedFromApplied(policy, snap, applied, out);
  }
}

// The jobs with something to plan; a job whose spec could not be built or fails validation is
// excluded with the reason.
SpecList CollectSpecs(const Topology& topo, const PlanningSnapshot& snap, PlanOutcome& out) {
  SpecList list;
  for (size_t i = 0; i < snap.jobs.size(); ++i) {
    const PlanningJob& j = snap.jobs[i];
    if (!j.spec_error.empty()) {
      out.excluded[j.id] = j.spec_error;
      continue;
    }
    if (!j.spec) continue;
    if (Status v = ValidateJob(topo, *j.spec); !v.ok()) {
      out.excluded[j.id] = v.message();
      continue;
    }
    list.specs.push_back(*j.spec);
    list.job.push_back(i);
  }
  return list;
}

// Seeds that make a policy continue `plan`, levels included. The seeds' paths point into `plan`.
std::vector<PlanSeed> SeedsOfPlan(const Plan& plan) {
  std::vector<PlanSeed> seeds;
  seeds.reserve(plan.jobs.size());
  for (const JobPlan& jp : plan.jobs) {
    PlanSeed kept;
    kept.id = jp.id;
    kept.level = jp.level;
    kept.reference = jp.reference;
    kept.flows.reserve(jp.flows.size());
    for (const FlowPlan& f : jp.flows) kept.flows.push_back({f.src, f.dst, f.path});
    seeds.push_back(std::move(kept));
  }
  return seeds;
}

// Schedules `specs`. A re-optimisation to weigh plans twice, continuing the plan in force and
// afresh, and with a stable policy keeps the fresh plan only if it gains at least
// snap.reoptimize_min_gain (out.reoptimize_verdict).
Result<Plan> ScheduleWeighed(SchedulingPolicy& policy, const Topology& topo,
                             const PlanningSnapshot& snap, const AppliedPlan& applied,
                             const std::vector<JobSpec>& specs, PlanOutcome& out) {
  Result<Plan> plan = policy.Schedule(specs);
  if (!WeighsReoptimization(snap, applied)) return plan;
  out.reoptimized = true;
  Result<Plan> in_force = std::move(plan);
  policy.Reoptimize();
  // Only a policy that keeps a plan of its own (stable) forgets something by re-optimising.
  const bool stateful = policy.WantsSeed();
  plan = policy.Schedule(specs);
  if (!stateful || !in_force.ok() || !plan.ok()) return plan;
  PlanOutcome::ReoptimizeVerdict v;
  v.in_force = MeasurePlan(topo, *in_force);
  v.fresh = MeasurePlan(topo, *plan);
  v.adopted = ImprovesBy(v.fresh, v.in_force, snap.reoptimize_min_gain);
  if (!v.adopted) {
    // The plan in force stays: the policy continues it again (its state becomes that plan,
    // levels included), so no job moves for a gain below the threshold.
    policy.Reoptimize();
    policy.Seed(SeedsOfPlan(*in_force));
    plan = policy.Schedule(specs);  // The seeds' paths live in in_force, alive here.
  }
  out.reoptimize_verdict = v;
  return plan;
}

// After the planner refused the whole set: finds the jobs it refuses on their own (e.g. no path
// left), excludes them with the reason and plans the others.
Result<Plan> ScheduleWithoutRefused(SchedulingPolicy& policy, const PlanningSnapshot& snap,
                                    const AppliedPlan& applied, SpecList& list, PlanOutcome& out) {
  SpecList kept;
  for (size_t k = 0; k < list.specs.size(); ++k) {
    Result<Plan> alone = policy.Schedule({list.specs[k]});
    if (alone.ok()) {
      kept.specs.push_back(std::move(list.specs[k]));
      kept.job.push_back(list.job[k]);
    } else {
      out.excluded[list.specs[k].id] = alone.status().message();
    }
  }
  list = std::move(kept);
  // The trials replaced what the policy kept: start again from the plan in force (or from
  // scratch, for a re-optimisation).
  policy.Reoptimize();
  if (!snap.reoptimize) SeedFromApplied(policy, snap, applied, out);
  return policy.Schedule(list.specs);
}

// Lists the planned jobs (out.planned) and returns each snapshot job's plan (null: not planned).
std::vector<const JobPlan*> PlansByJob(const PlanningSnapshot& snap, const SpecList& list,
                                       PlanOutcome& out) {
  std::vector<const JobPlan*> job_plan(snap.jobs.size(), nullptr);
  for (size_t k = 0; k < list.job.size(); ++k) {
    out.planned.push_back(list.specs[k].id);
    job_plan[list.job[k]] = &out.plan.jobs[k];
  }
  return job_plan;
}

// Diffs the plan against what was in force when the snapshot was taken (both sorted by id): an
// applied assignment that is still what the plan says is kept as it is (not rebuilt); applied
// jobs no longer in the snapshot go to out.removed.
RunAssignments DiffAgainstApplied(const PlanningSnapshot& snap, const AppliedPlan& applied,
                                  const std::vector<const JobPlan*>& job_plan, PlanOutcome& out) {
  RunAssignments as;
  as.current.assign(snap.jobs.size(), nullptr);
  as.fresh.resize(snap.jobs.size());
  auto it = applied.begin();
  for (size_t i = 0; i < snap.jobs.size(); ++i) {
    const PlanningJob& job = snap.jobs[i];
    while (it != applied.end() && it->first < job.id) out.removed.push_back((it++)->first);
    const AppliedAssignment* old = nullptr;
    if (it != applied.end() && it->first == job.id) old = (it++)->second.get();
    if (old != nullptr && IsAssignmentOf(old->assignment, job, job_plan[i])) {
      as.current[i] = &old->assignment;
      continue;
    }
    auto a = std::make_shared<AppliedAssignment>();
    a->assignment = MakeAssignment(job, job_plan[i]);
    a->assignment.probes = old != nullptr ? old->assignment.probes : std::vector<FlowPin>{};
    a->epoch = snap.epoch + 1;
    as.current[i] = &a->assignment;
    as.fresh[i] = std::move(a);
  }
  for (; it != applied.end(); ++it) out.removed.push_back(it->first);
  return as;
}

// Probes over the links the new plan's flows leave uncovered (none when probing is off); a kept
// assignment whose probes change is re-issued.
void AttachProbes(const Topology& topo, const PlanningSnapshot& snap, RunAssignments& as,
                  PlanOutcome& out) {
  ProbeDesign design;
  if (snap.probes) {
    PathFinder paths(topo);
    const HashEcmpModel ecmp(0);  // The planner's source-port model (planner.h).
    design = DesignProbes(topo, as.current, paths, ecmp, *snap.probes, snap.probe_suspects);
  }
  for (size_t i = 0; i < snap.jobs.size(); ++i) {
    auto p = design.probes.find(snap.jobs[i].id);
    std::vector<FlowPin> want =
        p != design.probes.end() ? std::move(p->second) : std::vector<FlowPin>{};
    if (as.current[i] == nullptr || as.current[i]->probes == want) continue;
    if (!as.fresh[i]) {
      auto a = std::make_shared<AppliedAssignment>();
      a->assignment = *as.current[i];
      a->epoch = snap.epoch + 1;
      as.current[i] = &a->assignment;
      as.fresh[i] = std::move(a);
    }
    as.fresh[i]->assignment.probes = std::move(want);
  }
  if (snap.probes) out.probe_design = std::make_shared<const ProbeDesign>(std::move(design));
}

// With snap.qos: every switch's desired QoS state over the run's assignments, and the switches
// whose device state differs from snap.qos_applied (all of them when there was none).
Status DecideSwitchStates(const Topology& topo, const PlanningSnapshot& snap,
                          const std::vector<const Assignment*>& current, PlanOutcome& out) {
  if (!snap.qos) return Status::Ok();
  Result<std::map<std::string, SwitchQosState>> states =
      ComputeDesiredQos(*snap.qos, topo, QosJobsOf(topo, current));
  if (!states.ok()) return states.status().WithContext("switch QoS");
  if (snap.qos_applied) {
    out.qos_changed = ChangedSwitches(snap.qos_applied->states, *states);
  } else {
    for (const auto& [name, st] : *states) out.qos_changed.push_back(name);
  }
  out.qos_states =
      std::make_shared<const std::map<std::string, SwitchQosState>>(std::move(states).value());
  return Status::Ok();
}

// A run that failed with `status`: what it decided before the failure stays in `out`.
PlanOutcome Failed(PlanOutcome out, Status status, Duration planning_time) {
  out.status = std::move(status);
  out.planning_time = planning_time;
  return out;
}

}  // namespace

Result<PlanImpact> EstimatePlanImpact(const Topology& topo, const PlanningSnapshot& snap,
                                      const Plan& plan, const ImpactOptions& options,
                                      std::stop_token stop) {
  std::vector<const JobSpec*> planned;
  planned.reserve(plan.jobs.size());
  for (const JobPlan& jp : plan.jobs) {  // snap.jobs is sorted by id.
    const auto it =
        std::lower_bound(snap.jobs.begin(), snap.jobs.end(), jp.id,
                         [](const PlanningJob& j, const std::string& id) { return j.id < id; });
    planned.push_back(it != snap.jobs.end() && it->id == jp.id ? it->spec.get() : nullptr);
  }
  return EstimateImpact(topo, planned, plan, options, stop);
}

// With snap.impact: the shadow accounting of the run's plan (impact.h). A failure is reported in
// the outcome, never fails the run (the plan is good; only its accounting is missing).
void EstimateRunImpact(const Topology& topo, const PlanningSnapshot& snap, PlanOutcome& out) {
  if (!snap.impact) return;
  Result<PlanImpact> impact = EstimatePlanImpact(topo, snap, out.plan, *snap.impact);
  if (impact.ok()) {
    out.impact = std::make_shared<const PlanImpact>(std::move(impact).value());
  } else {
    out.impact_error = impact.status().message();
  }
}

// The steps above, in order; the clock is read between them for the outcome's timings.
PlanOutcome RunPlan(SchedulingPolicy& policy, const Topology& topo, const PlanningSnapshot& snap,
                    const Clock& clock) {
  const Duration start = clock.Now();
  PlanOutcome out;
  static const AppliedPlan kNone;
  const AppliedPlan& applied = snap.applied ? *snap.applied : kNone;
  StartPolicy(policy, snap, applied, out);
  SpecList specs = CollectSpecs(topo, snap, out);

  const Duration t_schedule = clock.Now();
  Result<Plan> plan = ScheduleWeighed(policy, topo, snap, applied, specs.specs, out);
  if (!plan.ok()) plan = ScheduleWithoutRefused(policy, snap, applied, specs, out);
  if (!plan.ok()) return Failed(std::move(out), plan.status(), clock.Now() - start);
  out.plan = std::move(plan).value();
  const Duration t_assign = clock.Now();
  out.schedule_time = t_assign - t_schedule;
  if (const ReplanStats* stats = policy.last_replan()) out.replan = *stats;

  const std::vector<const JobPlan*> job_plan = PlansByJob(snap, specs, out);
  RunAssignments as = DiffAgainstApplied(snap, applied, job_plan, out);
  AttachProbes(topo, snap, as, out);
  for (auto& a : as.fresh) {
    if (a) out.changed.push_back(std::move(a));
  }
  const Duration t_qos = clock.Now();
  out.assign_time = t_qos - t_assign;
  if (Status s = DecideSwitchStates(topo, snap, as.current, out); !s.ok()) {
    return Failed(std::move(out), std::move(s), clock.Now() - start);
  }
  const Duration t_impact = clock.Now();
  out.qos_time = t_impact - t_qos;
  EstimateRunImpact(topo, snap, out);
  const Duration end = clock.Now();
  out.impact_time = end - t_impact;
  out.planning_time = end - start;
  return out;
}

ReoptimizeOutcome RunReoptimization(SchedulingPolicy& policy, const Topology& topo,
                                    const PlanningSnapshot& snap) {
  ReoptimizeOutcome out;
  auto finish = [&](Status s) {
    out.status = std::move(s);
    return std::move(out);
  };
  if (!policy.WantsSeed()) {
    return finish(FailedPreconditionError(
        "re-optimisation beside the runs: needs a new stable policy (planner.stable)"));
  }
  static const AppliedPlan kNone;
  const AppliedPlan& applied = snap.applied ? *snap.applied : kNone;
  PlanOutcome scratch;  // CollectSpecs' exclusions: the runs report them.
  const SpecList list = CollectSpecs(topo, snap, scratch);
  out.jobs = list.specs.size();
  std::optional<Plan> in_force;
  if (snap.reoptimize_min_gain > 0 && !applied.empty()) {
    // The plan in force, continued over the snapshot's jobs as the runs' policy would.
    policy.Seed(SeedsOf(applied, snap.unseat_links));
    Result<Plan> continued = policy.Schedule(list.specs);
    if (!continued.ok()) return finish(continued.status().WithContext("plan in force"));
    in_force = std::move(continued).value();
    policy.Reoptimize();
  }
  Result<Plan> fresh = policy.Schedule(list.specs);
  if (!fresh.ok()) return finish(fresh.status().WithContext("fresh plan"));
  if (!in_force) {
    out.adopt = true;
    return finish(Status::Ok());
  }
  PlanOutcome::ReoptimizeVerdict v;
  v.in_force = MeasurePlan(topo, *in_force);
  v.fresh = MeasurePlan(topo, *fresh);
  v.adopted = ImprovesBy(v.fresh, v.in_force, snap.reoptimize_min_gain);
  out.adopt = v.adopted;
  out.verdict = v;
  return finish(Status::Ok());
}

ControlLoop::ControlLoop(const Clock* clock, const Topology* topo, ControlLoopOptions options)
    : clock_(clock),
      topo_(topo),
      options_(std::move(options)),
      applied_(std::make_shared<AppliedPlan>()),
      retry_(options_.retry),
      faults_(options_.faults) {}

void ControlLoop::SetOptions(const ControlLoopOptions& options) {
  const bool retry_changed = !(options.retry == options_.retry);
  const bool specs_changed = options.assumed_compute_time != options_.assumed_compute_time;
  options_ = options;
  if (retry_changed) retry_ = ExponentialBackoff(options_.retry);
  if (!(faults_.options() == options_.faults)) faults_.SetOptions(options_.faults);
  if (specs_changed) {
    for (auto& [id, job] : jobs_) RebuildSpec(job);
  }
  Request("options changed");
}

JobPhase ControlLoop::PhaseFor(const JobProfile& p) const {
  return (p.converged || p.samples >= options_.profiling_samples) ? JobPhase::kScheduled
                                                                  : JobPhase::kProfiling;
}

void ControlLoop::Request(std::string_view reason) {
  if (reasons_.size() < 16) reasons_.emplace_back(reason);
  if (!requested_) {
    requested_ = true;
    requested_at_ = clock_->Now();
  }
}

void ControlLoop::RebuildSpec(LoopJob& job) const {
  Result<std::optional<JobSpec>> spec = BuildJobSpec(*topo_, job, options_.assumed_compute_time);
  job.spec.reset();
  job.spec_error.clear();
  if (!spec.ok()) {
    job.spec_error = spec.status().message();
  } else if (spec->has_value()) {
    job.spec = std::make_shared<const JobSpec>(std::move(**spec));
  }
}

AppliedPlan& ControlLoop::MutableApplied() {
  if (applied_.use_count() > 1) applied_ = std::make_shared<AppliedPlan>(*applied_);
  return *applied_;
}

void ControlLoop::AddJob(JobDemand demand, uint32_t dscp) {
  LoopJob j;
  const std::string id = demand.id;
  j.demand = std::move(demand);
  j.dscp = dscp;
  RebuildSpec(j);
  jobs_[id] = std::move(j);
  Request("job " + id + " registered");
}

ReportVerdict ControlLoop::ReportProfile(const std::string& id, const JobProfile& profile) {
  ReportVerdict v;
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return v;
  LoopJob& j = it->second;
  const JobPhase next = PhaseFor(profile);
  v.phase_changed = next != j.phase;
  j.phase = next;
  v.phase = next;
  v.plan_changed = v.phase_changed || !j.planned ||
                   SignificantChange(*j.planned, profile, options_.replan_threshold_pct);
  j.profile = profile;
  if (v.plan_changed) {
    j.planned = profile;
    RebuildSpec(j);
    Request("profile of " + id);
  }
  return v;
}

void ControlLoop::UpdateDemand(JobDemand demand) {
  auto it = jobs_.find(demand.id);
  if (it == jobs_.end()) return;
  LoopJob& j = it->second;
  std::set<uint32_t> hosts;
  for (const PlacementHost& h : demand.placement) hosts.insert(h.host.value());
  auto on_job = [&](NodeId n) {
    if (!n.valid() || n.value() >= topo_->num_nodes()) return false;
    return hosts.count(topo_->node(n).host.value()) > 0;  // A host owns itself.
  };
  for (std::optional<JobProfile>* p : {&j.profile, &j.planned}) {
    if (!*p) continue;
    auto& peers = (*p)->peers;
    peers.erase(std::remove_if(peers.begin(), peers.end(),
                               [&](const PeerTraffic& t) {
                                 return !on_job(t.local_nic) || !on_job(t.remote_nic);
                               }),
                peers.end());
  }
  j.demand = std::move(demand);
  RebuildSpec(j);
  Request("placement of " + it->first);
}

std::shared_ptr<const AppliedAssignment> ControlLoop::RemoveJob(const std::string& id,
                                                                std::string_view reason) {
  if (jobs_.erase(id) == 0) return nullptr;
  faults_.ForgetJob(id);
  std::shared_ptr<const AppliedAssignment> was;
  auto it = applied_->find(id);
  if (it != applied_->end()) {
    was = it->second;
    MutableApplied().erase(id);
  }
  Request("job " + id + " " + std::string(reason));
  return was;
}

void ControlLoop::Invalidate(std::string_view reason) { Request(reason); }

void ControlLoop::ObserveLinkState(const LinkStateSignal& s) {
  faults_.OnLinkState(s, clock_->Now());
}

void ControlLoop::ObserveCounters(const CounterSignal& s) { faults_.OnCounters(s, clock_->Now()); }
void ControlLoop::ObserveNicCounters(const NicCounterSignal& s) {
  faults_.OnNicCounters(s, clock_->Now());
}

void ControlLoop::ObserveFlows(const std::string& job_id, const std::vector<FlowSample>& samples) {
  if (!jobs_.count(job_id)) return;
  faults_.OnFlows(job_id, samples, clock_->Now());
}

void ControlLoop::ObserveHostProbes(const std::string& job_id,
                                    const std::vector<FlowSample>& samples) {
  if (!jobs_.count(job_id)) return;
  faults_.OnHostProbes(job_id, samples, clock_->Now());
}

void ControlLoop::SetLinkAdmin(LinkId link, AdminLinkState state) {
  faults_.SetAdmin(link, state, clock_->Now());
}

void ControlLoop::ClearLinkAdmin(LinkId link) { faults_.ClearAdmin(link, clock_->Now()); }

void ControlLoop::RestoreLinkAdmin(LinkId link, AdminLinkState state) {
  faults_.RestoreAdmin(link, state, clock_->Now());
}

std::vector<LinkDecision> ControlLoop::EvaluateFaults() {
  std::vector<LinkDecision> decisions = faults_.Evaluate(clock_->Now(), *topo_, *applied_);
  for (const LinkDecision& d : decisions) {
    unseat_[d.link] = ++unseat_seq_;
    // No job crosses a link that comes back: only planning from scratch can use it again.
    if (d.health == LinkHealth::kUp) reoptimize_after_recovery_ = true;
    Request("link " + d.reason);
  }
  if (options_.faults.probes.enabled && faults_.probe_target_set() != probe_suspects_) {
    probe_suspects_ = faults_.probe_target_set();
    Request("probe targets: " + std::to_string(probe_suspects_.size()) + " suspect links");
  }
  return decisions;
}

void ControlLoop::RestoreJob(JobDemand demand, uint32_t dscp, std::optional<JobProfile> profile,
                             std::optional<JobProfile> planned) {
  LoopJob j;
  const std::string id = demand.id;
  j.demand = std::move(demand);
  j.dscp = dscp;
  if (profile) j.phase = PhaseFor(*profile);
  j.profile = std::move(profile);
  j.planned = planned ? std::move(planned) : j.profile;
  RebuildSpec(j);
  jobs_[id] = std::move(j);
}

void ControlLoop::RestoreApplied(AppliedPlan applied, uint64_t epoch) {
  for (auto it = applied.begin(); it != applied.end();) {
    it = jobs_.count(it->first) ? std::next(it) : applied.erase(it);
  }
  applied_ = std::make_shared<AppliedPlan>(std::move(applied));
  epoch_ = epoch;
}

std::optional<Duration> ControlLoop::due() const {
  if (in_flight_) return std::nullopt;
  std::optional<Duration> at;
  if (requested_) {
    Duration t = *requested_at_ + options_.debounce;
    if (last_start_) t = std::max(t, *last_start_ + options_.min_replan_interval);
    at = t;
  }
  if (retry_at_) at = at ? std::min(*at, *retry_at_) : *retry_at_;
  if (options_.reoptimize_in_background) return at;
  if (const std::optional<Duration> r = ReoptimizeAt()) at = at ? std::min(*at, *r) : *r;
  return at;
}

std::optional<Duration> ControlLoop::reoptimize_due() const {
  if (!options_.reoptimize_in_background || reoptimizing_ || jobs_.empty()) return std::nullopt;
  // A link came back: at once (it was planned around; nothing moves back onto it otherwise).
  if (reoptimize_after_recovery_) return clock_->Now();
  return ReoptimizeAt();
}

std::shared_ptr<const PlanningSnapshot> ControlLoop::StartReoptimization() {
  const std::optional<Duration> when = reoptimize_due();
  const Duration now = clock_->Now();
  if (!when || now < *when) return nullptr;
  std::shared_ptr<PlanningSnapshot> snap = Snapshot();
  snap->reason =
      reoptimize_after_recovery_ ? "re-optimisation (a link came back)" : "re-optimisation";
  snap->reoptimize = true;
  snap->reoptimize_min_gain = options_.reoptimize_min_gain;
  reoptimize_after_recovery_ = false;
  last_reoptimize_ = now;
  reoptimizing_ = true;
  ++reoptimizations_;
  return snap;
}

void ControlLoop::FinishReoptimization(bool adopted) {
  reoptimizing_ = false;
  if (adopted) Request("re-optimisation adopted");
}

std::optional<Duration> ControlLoop::ReoptimizeAt() const {
  if (options_.reoptimize_interval <= Duration::Zero() || !last_reoptimize_ || jobs_.empty()) {
    return std::nullopt;
  }
  return *last_reoptimize_ + options_.reoptimize_interval;
}

std::shared_ptr<PlanningSnapshot> ControlLoop::Snapshot() const {
  auto snap = std::make_shared<PlanningSnapshot>();
  snap->epoch = epoch_;
  snap->jobs.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) {
    PlanningJob j;
    j.id = id;
    j.dscp = job.dscp;
    j.phase = job.phase;
    j.spec = job.spec;
    j.spec_error = job.spec_error;
    snap->jobs.push_back(std::move(j));
  }
  snap->applied = applied_;
  snap->qos = options_.qos;
  snap->qos_applied = qos_;
  for (const auto& [l, seq] : unseat_) snap->unseat_links.push_back(l);
  snap->unseat_seq = unseat_seq_;
  if (options_.faults.probes.enabled) {
    snap->probes = options_.faults.probes;
    snap->probe_suspects = faults_.probe_targets();
  }
  snap->impact = options_.impact;
  return snap;
}

std::shared_ptr<const PlanningSnapshot> ControlLoop::PeekSnapshot() const {
  std::shared_ptr<PlanningSnapshot> snap = Snapshot();
  snap->reason = "dry run";
  return snap;
}

std::shared_ptr<const PlanningSnapshot> ControlLoop::StartPlan() {
  const std::optional<Duration> when = due();
  const Duration now = clock_->Now();
  if (!when || now < *when) return nullptr;
  std::shared_ptr<PlanningSnapshot> snap = Snapshot();
  snap->run = ++runs_;
  for (const std::string& r : reasons_) {
    if (!snap->reason.empty()) snap->reason += ", ";
    snap->reason += r;
  }
  if (snap->reason.empty() && retry_at_) snap->reason = "retry after a failed commit";
  if (!last_reoptimize_) {
    last_reoptimize_ = now;  // The first run starts the interval (after a restart it continues
                             // the plan in force: see RunPlan).
  } else if (options_.reoptimize_in_background) {
    // Re-optimisations run beside the runs (StartReoptimization).
  } else if (reoptimize_after_recovery_) {
    reoptimize_after_recovery_ = false;
    snap->reoptimize = true;
    snap->reoptimize_min_gain = options_.reoptimize_min_gain;
    snap->reason +=
        std::string(snap->reason.empty() ? "" : ", ") + "re-optimisation (a link came back)";
  } else if (const std::optional<Duration> r = ReoptimizeAt(); r && now >= *r) {
    snap->reoptimize = true;
    snap->reoptimize_min_gain = options_.reoptimize_min_gain;
    last_reoptimize_ = now;
    snap->reason += std::string(snap->reason.empty() ? "" : ", ") + "re-optimisation";
  }
  reasons_.clear();
  requested_ = false;
  requested_at_.reset();
  retry_at_.reset();
  in_flight_ = true;
  last_start_ = now;
  return snap;
}

ApplyBatch ControlLoop::FinishPlan(const PlanningSnapshot& snap, const PlanOutcome& outcome) {
  ApplyBatch b;
  b.run = snap.run;
  b.epoch = epoch_;
  if (!outcome.status.ok()) return b;
  b.unseated = snap.unseat_links;
  b.unseat_seq = snap.unseat_seq;
  for (const auto& a : outcome.changed) {
    if (!jobs_.count(a->assignment.job_id)) continue;  // Left while the run was in flight.
    b.changed.push_back(a);
  }
  for (const std::string& id : outcome.removed) {
    if (applied_->count(id)) b.removed.push_back(id);  // Not already dropped by RemoveJob.
  }
  const bool qos_established = qos_ != nullptr;
  b.qos_changed = outcome.qos_changed;
  b.advances_epoch =
      !b.changed.empty() || !b.removed.empty() || (qos_established && !b.qos_changed.empty());
  if (b.advances_epoch) {
    b.epoch = epoch_ + 1;
    for (auto& a : b.changed) {  // Stamped snap.epoch + 1 by RunPlan: the same unless restored.
      if (a->epoch == b.epoch) continue;
      auto stamped = std::make_shared<AppliedAssignment>(*a);
      stamped->epoch = b.epoch;
      a = std::move(stamped);
    }
  }
  if (outcome.qos_states && (!qos_established || !b.qos_changed.empty())) {
    auto next = std::make_shared<AppliedQos>();
    next->states = *outcome.qos_states;
    if (qos_) next->epochs = qos_->epochs;
    for (const std::string& name : b.qos_changed) next->epochs[name] = b.epoch;
    for (auto it = next->epochs.begin(); it != next->epochs.end();) {
      it = next->states.count(it->first) ? std::next(it) : next->epochs.erase(it);
    }
    b.qos = std::move(next);
  }
  return b;
}

void ControlLoop::Commit(const ApplyBatch& batch) {
  in_flight_ = false;
  retry_.Reset();
  retry_at_.reset();
  if (batch.qos) qos_ = batch.qos;
  if (!batch.changed.empty() || !batch.removed.empty()) {
    AppliedPlan& applied = MutableApplied();
    for (const std::string& id : batch.removed) applied.erase(id);
    for (const auto& a : batch.changed) {
      if (jobs_.count(a->assignment.job_id)) applied[a->assignment.job_id] = a;
    }
  }
  if (batch.advances_epoch) epoch_ = batch.epoch;
  // Those links' jobs are re-planned now (links that changed again since stay).
  for (LinkId l : batch.unseated) {
    auto it = unseat_.find(l);
    if (it != unseat_.end() && it->second <= batch.unseat_seq) unseat_.erase(it);
  }
}

void ControlLoop::CommitFailed() {
  in_flight_ = false;
  retry_at_ = clock_->Now() + retry_.Next();
}

const LoopJob* ControlLoop::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const AppliedAssignment* ControlLoop::Applied(const std::string& id) const {
  auto it = applied_->find(id);
  return it == applied_->end() ? nullptr : it->second.get();
}

}  // namespace crux::core
