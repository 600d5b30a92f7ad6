// The event loop of crux::sim. docs/simulator.md describes the model and every choice made here.
#include "crux/sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "control_host.h"
#include "crux/core/ids.h"
#include "crux/sim/fluid_network.h"
#include "crux/sim/profiler_model.h"

namespace crux::sim {
namespace {

using core::LinkId;
using core::Status;
using ResourceId = FluidNetwork::ResourceId;

constexpr int64_t kNever = FluidNetwork::kNever;
// Snapshots kept per plan epoch for steady-state detection, and anchor iterations skipped after
// an epoch starts (flows started under the previous plan must have drained).
constexpr size_t kMaxSnapshots = 64;
constexpr int64_t kWarmupIterations = 2;
// Windows (in anchor iterations) over which approximate steadiness is checked, largest first.
// Shorter windows let beats of quasi-periodic contention through (fast-forward then drifts
// from the full simulation by a few percent: tests/sim/simulator_test.cc).
constexpr size_t kSteadyWindows[] = {64, 32};
// The level of traffic no assignment covers yet (control loop: a job between its arrival and
// its first committed assignment). It crosses the switches in the best-effort default class,
// below every job level (core::QosConfig::default_tc), so it is below any level a plan uses.
constexpr int kBestEffortLevel = 1'000'000;

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

int Tier(core::NodeKind k) {
  switch (k) {
    case core::NodeKind::kHost:
      return 0;
    case core::NodeKind::kNvSwitch:
    case core::NodeKind::kPcieSwitch:
      return 1;
    case core::NodeKind::kNic:
      return 2;
    case core::NodeKind::kTor:
      return 3;
    case core::NodeKind::kAgg:
      return 4;
    case core::NodeKind::kCore:
      return 5;
    case core::NodeKind::kSwitch:
      return 6;
  }
  return 7;
}

std::string LinkClass(const core::Topology& topo, LinkId l) {
  core::NodeKind a = topo.node(topo.link(l).src).kind;
  core::NodeKind b = topo.node(topo.link(l).dst).kind;
  if (Tier(b) < Tier(a)) std::swap(a, b);
  return std::string(core::NodeKindName(a)) + "-" + std::string(core::NodeKindName(b));
}

enum class JobEventKind : uint8_t { kComputeDone, kCommStart, kDeliver };

struct JobEvent {
  int64_t t;
  uint64_t seq;
  uint32_t job;
  uint32_t gen;  // The job's iteration generation when scheduled; stale otherwise.
  uint32_t flow;
  JobEventKind kind;
};
struct JobEventAfter {
  bool operator()(const JobEvent& a, const JobEvent& b) const {
    return a.t != b.t ? a.t > b.t : a.seq > b.seq;
  }
};

// Cluster events at the same time: departures, then link events, then arrivals (an arriving job
// is planned without the jobs leaving at that instant and on the updated fabric).
enum class ClusterKind : uint8_t { kDeparture = 0, kLink = 1, kArrival = 2 };
struct ClusterEvent {
  int64_t t;
  ClusterKind kind;
  uint32_t index;  // Job or link-event index.
};

enum class FlowStatus : uint8_t { kInNetwork, kDelivering, kDone };
struct FlowRun {
  FluidNetwork::FlowId id = 0;
  FlowStatus status = FlowStatus::kDone;
  int64_t deliver_at = 0;
  double bytes = 0;
  uint32_t epoch = 0;  // The plan epoch it was started in.
};

enum class JobStatus : uint8_t { kWaiting, kRunning, kDone };

struct JobState {
  const SimJob* job = nullptr;
  JobStatus status = JobStatus::kWaiting;
  int gpus = 0;
  int64_t arrival = 0;
  int64_t compute_ns = 0;
  int64_t overlap_ns = 0;  // round(overlap_start * compute).
  std::optional<int64_t> finish;
  std::optional<int64_t> iteration_limit;
  // Totals.
  int64_t iterations = 0;
  int64_t iteration_ns_sum = 0;
  int64_t compute_busy = 0;
  // The current iteration.
  uint32_t gen = 0;
  int64_t iter_start = 0;
  int64_t compute_end = 0;
  bool computing = false;
  int64_t comm_start = 0;
  bool comm_started = false;
  bool comm_done = false;
  int outstanding = 0;
  std::vector<FlowRun> flows;
  // The plan in force (applies to communication phases that start after it was made).
  bool planned = false;
  int level = 0;
  std::vector<core::FlowPlan> plan_flows;
  std::vector<std::vector<ResourceId>> plan_resources;
  int64_t period = 0;
  int64_t applied_shift = 0;
  int64_t pending_shift = 0;
  std::optional<int64_t> standalone;
  // Fast-forward: cumulative traffic, and the steady rates of its group (per ns).
  double bytes_sent = 0;
  std::vector<double> class_bits;
  int group = -1;
  double rate_iterations = 0;
  double rate_iteration_ns = 0;  // Mean iteration time over the group's period.
  double rate_busy = 0;
  double rate_bytes = 0;
  std::vector<double> rate_class_bits;
  double iteration_credit = 0;  // Fractional iterations credited by jumps.
  // Iterations completed since its group or plan last changed (the control loop's
  // fast-forward gate: its profiler's window holds only samples of the current regime).
  int64_t epoch_iterations = 0;
  // Fingerprint of its plan (level, paths, bytes, time shift) when the groups were last built:
  // a group whose jobs and plans are all unchanged keeps its steady state across re-plans.
  uint64_t plan_fingerprint = 0;
  // Result bookkeeping: when first scheduled, and every change of level or phase in force.
  std::optional<int64_t> scheduled_at;
  std::vector<LevelChange> level_log;
  // ---- Control loop only ----
  // The job's own flows (its true traffic, on the wire) with their default (ECMP hash) paths;
  // plan_flows[f] carries flows[f] on the path in force: the assignment's pin for its NIC pair,
  // else the default path.
  std::vector<core::FlowPlan> own_flows;
  std::vector<bool> pinned;              // plan_flows[f] follows a pinned path.
  std::vector<uint32_t> peer_of;         // Flow -> index into the profiler's peers.
  std::vector<int64_t> iter_peer_bytes;  // Bytes per peer started in the current iteration.
  bool assigned = false;                 // An assignment is in force.
  core::JobPhase phase = core::JobPhase::kRegistered;  // Of the assignment in force.
  std::optional<ProfilerModel> profiler;
  uint32_t reports = 0;
};

struct JobSnap {
  int64_t phase = 0;  // now - iter_start.
  int64_t compute_left = 0;
  int64_t comm_start_left = 0;
  int64_t pending_shift = 0;
  bool computing = false;
  bool comm_started = false;
  bool comm_done = false;
  std::vector<uint8_t> flow_status;
  std::vector<double> flow_value;  // Remaining bytes, or time to delivery.
  int64_t iterations = 0;
  // Continuous: iterations plus the part of the one under way, in units of the job's mean
  // iteration so far (for the rates of approximately steady groups).
  double progress = 0;
  int64_t iteration_ns_sum = 0;
  int64_t compute_busy = 0;
  double bytes_sent = 0;
  std::vector<double> class_bits;
};
struct Snapshot {
  int64_t t = 0;
  std::vector<JobSnap> snaps;  // One per job of the group, in group order.
};
// Jobs whose planned flows share resources, transitively: their dynamics are independent of
// every other group's, so each group's steady state is detected on its own.
struct Group {
  std::vector<uint32_t> jobs;  // Ascending.
  uint32_t anchor = 0;         // Snapshots are taken when it starts an iteration.
  int64_t anchor_iterations = 0;
  bool pending = false;  // A snapshot is due at the end of this instant.
  bool known = false;    // Periodic: the rates of its jobs are set.
  int64_t period = 0;
  std::vector<Snapshot> snaps;
};

class Engine {
 public:
  Engine(const core::Topology& topo, const PolicyFactory& factory, const std::vector<SimJob>& jobs,
         const std::vector<LinkEvent>& link_events, const SimOptions& options)
      : nominal_(topo),
        topo_(topo),
        factory_(factory),
        jobs_in_(jobs),
        link_events_(link_events),
        options_(options),
        horizon_(options.horizon.nanos()),
        alpha_(options.per_hop_latency.nanos()),
        oracle_(options.control.oracle),
        clock_(&now_) {}

  core::Result<SimResult> Run();

 private:
  Status Init();
  Status Replan();
  Status DoReplanAndStarts();
  // Control loop (docs/simulator.md section 3).
  Status EndOfInstant();
  Status MakePolicy();
  void Arrive(uint32_t j);
  bool RouteAlone(uint32_t j);
  void SetPlanFlows(uint32_t j, const core::Assignment* a);
  Status RunLoop();
  void RefreshDefaults();
  void ReportIteration(uint32_t j);
  bool ProfilersSettled() const;
  void NoteLevel(uint32_t j, core::JobPhase phase, int level);
  void StartIteration(uint32_t j);
  void OnComputeDone(uint32_t j);
  void OnCommStart(uint32_t j);
  void OnFlowFinished(uint64_t tag, double transmitted);
  void OnDeliver(uint32_t j, uint32_t fi);
  void MaybeEndIteration(uint32_t j);
  void Depart(uint32_t j, bool at_horizon);
  void ApplyLinkEvent(const LinkEvent& e);
  void RerouteStalledFlows();
  void PushJobEvent(int64_t t, uint32_t j, JobEventKind kind, uint32_t flow = 0);
  ResourceId ResourceFor(uint32_t job, LinkId l);
  void AccountFlowBits(uint32_t j, FluidNetwork::FlowId id, double transmitted);
  void CreditBins(std::vector<double>& bins, int64_t start, int64_t end, double weight);
  void IntegrateCapacity();
  void MaybeProgress(bool force);
  void FastForward();
  void CheckGroup(Group& g);
  bool RatesAgree(const Group& g, const Snapshot& a, const Snapshot& b, const Snapshot& c) const;
  void SetRates(Group& g, const Snapshot& match, const Snapshot& snap, int64_t period, bool exact);
  void Jump();
  void ShiftAll(int64_t jump);
  void BuildGroups();
  uint64_t PlanFingerprint(uint32_t j) const;
  Snapshot TakeSnapshot(const Group& g) const;
  bool Matches(const Group& g, const Snapshot& a, const Snapshot& b, int64_t period) const;
  void ResetEpoch();

  // Inputs.
  const core::Topology& nominal_;  // As given (no link event applied).
  core::Topology topo_;            // Our copy: link events change it.
  const PolicyFactory& factory_;
  const std::vector<SimJob>& jobs_in_;
  const std::vector<LinkEvent>& link_events_;
  const SimOptions& options_;
  const int64_t horizon_;
  const int64_t alpha_;
  const bool oracle_;

  std::unique_ptr<core::SchedulingPolicy> policy_;
  bool isolate_ = false;
  bool policy_stale_ = false;
  FluidNetwork net_;
  // Resources: one per directed link (shared), or one per (job, link) when isolating.
  std::vector<std::vector<ResourceId>> link_resources_;
  std::vector<LinkId> resource_link_;
  std::unordered_map<uint64_t, ResourceId> isolated_;
  std::vector<double> link_cap_;  // Current capacity in bps (0 = down).
  std::vector<int> link_class_;
  std::vector<std::string> class_names_;
  std::vector<double> class_bits_;
  std::vector<double> class_cap_;       // Current summed capacity (bps).
  std::vector<double> class_cap_time_;  // Integral of capacity over time (bits).
  int64_t cap_t_ = 0;

  std::vector<JobState> js_;
  std::vector<JobEvent> job_events_;  // Min-heap (JobEventAfter).
  uint64_t seq_ = 0;
  std::vector<ClusterEvent> cluster_;
  size_t cluster_next_ = 0;
  int64_t now_ = 0;
  // Work left for the end of the instant: the oracle's re-plan, or (control loop) iteration
  // starts, regrouping, default routes.
  bool replan_needed_ = false;
  std::vector<uint32_t> to_start_;

  // Control loop.
  internal::SimClock clock_;  // Reads now_: the clock of the policy and of the loop.
  std::unique_ptr<internal::LoopHost> host_;
  std::unique_ptr<core::SchedulingPolicy> ecmp_;          // Default routes (hash ECMP, job alone).
  std::unique_ptr<core::SchedulingPolicy> nominal_ecmp_;  // The same on `nominal_`.
  bool ecmp_stale_ = false;
  bool defaults_stale_ = false;  // A link event changed the routes of unpinned flows.
  bool regroup_needed_ = false;
  bool ff_blocked_ = false;  // A jump waited for profilers: re-check at anchor iterations.
  std::unordered_map<std::string, uint32_t> index_of_;

  // Sampling bins: num_bins_ over the horizon, but the vectors only grow as far as activity
  // reaches (an idle tail costs nothing until the samples are written).
  int64_t bin_ns_ = 0;
  int64_t num_bins_ = 0;
  std::vector<double> bin_busy_;   // GPU-ns computing.
  std::vector<double> bin_alive_;  // GPU-ns of running jobs.
  std::vector<int> bin_running_;   // Difference array of running jobs (<= num_bins_ + 1).
  int64_t total_gpus_ = 0;

  // Fast-forward state.
  uint32_t epoch_ = 0;
  int64_t old_in_flight_ = 0;  // Flows in flight started under an earlier plan.
  bool ff_check_ = false;
  std::vector<Group> groups_;
  std::vector<Group> previous_groups_;  // Before the last ResetEpoch, until BuildGroups.
  bool fabric_changed_ = false;         // A link event since BuildGroups: nothing carries over.
  std::vector<int> resource_owner_;     // Scratch for BuildGroups.

  SimResult result_;
  double bytes_sent_ = 0;
  double bytes_delivered_ = 0;
  double bytes_in_flight_ = 0;
  std::chrono::steady_clock::time_point wall_start_;
  std::chrono::steady_clock::time_point last_progress_;
};

Status Engine::MakePolicy() {
  CRUX_ASSIGN_OR_RETURN(policy_, factory_(topo_, clock_));
  if (policy_ == nullptr) return core::InternalError("policy factory returned null");
  policy_stale_ = false;
  return Status::Ok();
}

Status Engine::Init() {
  CRUX_RETURN_IF_ERROR(MakePolicy());
  isolate_ = policy_->isolates_jobs();
  result_.policy = std::string(policy_->name());
  result_.oracle = oracle_;
  if (!oracle_) {
    host_ = std::make_unique<internal::LoopHost>(&clock_, &nominal_, options_.control.loop);
    ecmp_stale_ = true;
  }

  const size_t nl = topo_.num_links();
  link_resources_.assign(nl, {});
  link_cap_.assign(nl, 0);
  link_class_.assign(nl, 0);
  std::map<std::string, int> class_index;
  for (size_t i = 0; i < nl; ++i) {
    const LinkId l(static_cast<uint32_t>(i));
    const core::Link& link = topo_.link(l);
    link_cap_[i] = link.up ? link.capacity.ToBitsPerSec() : 0.0;
    const std::string name = LinkClass(topo_, l);
    auto [it, inserted] = class_index.emplace(name, static_cast<int>(class_names_.size()));
    if (inserted) class_names_.push_back(name);
    link_class_[i] = it->second;
    if (!isolate_) {
      const ResourceId r = net_.AddResource(link_cap_[i]);
      link_resources_[i].push_back(r);
      resource_link_.push_back(l);
    }
  }
  class_bits_.assign(class_names_.size(), 0);
  class_cap_.assign(class_names_.size(), 0);
  class_cap_time_.assign(class_names_.size(), 0);
  for (size_t i = 0; i < nl; ++i) class_cap_[link_class_[i]] += link_cap_[i];

  total_gpus_ = static_cast<int64_t>(topo_.hosts().size()) * options_.gpus_per_host;
  bin_ns_ = options_.sample_interval.nanos();
  num_bins_ = horizon_ / bin_ns_ + (horizon_ % bin_ns_ != 0 ? 1 : 0);  // No overflow.
  bin_busy_.clear();
  bin_alive_.clear();
  bin_running_.clear();

  js_.resize(jobs_in_.size());
  for (size_t j = 0; j < jobs_in_.size(); ++j) {
    const SimJob& in = jobs_in_[j];
    JobState& s = js_[j];
    s.job = &in;
    index_of_.emplace(in.spec.id, static_cast<uint32_t>(j));
    s.gpus = in.spec.gpus();
    s.arrival = in.arrival.nanos();
    s.compute_ns = in.spec.compute_time.nanos();
    s.overlap_ns = static_cast<int64_t>(
        std::llround(in.spec.overlap_start * static_cast<double>(s.compute_ns)));
    if (in.iterations) s.iteration_limit = *in.iterations;
    if (s.arrival >= horizon_) continue;  // Never runs.
    cluster_.push_back({s.arrival, ClusterKind::kArrival, static_cast<uint32_t>(j)});
    if (in.duration) {
      const int64_t end = s.arrival + in.duration->nanos();
      if (end < horizon_) {
        cluster_.push_back({end, ClusterKind::kDeparture, static_cast<uint32_t>(j)});
      }
    }
  }
  for (size_t i = 0; i < link_events_.size(); ++i) {
    const int64_t t = link_events_[i].at.nanos();
    if (t < horizon_) cluster_.push_back({t, ClusterKind::kLink, static_cast<uint32_t>(i)});
  }
  std::stable_sort(cluster_.begin(), cluster_.end(),
                   [](const ClusterEvent& a, const ClusterEvent& b) {
                     if (a.t != b.t) return a.t < b.t;
                     if (a.kind != b.kind) return a.kind < b.kind;
                     return a.index < b.index;
                   });
  return Status::Ok();
}

ResourceId Engine::ResourceFor(uint32_t job, LinkId l) {
  if (!isolate_) return link_resources_[l.value()][0];
  const uint64_t key = (static_cast<uint64_t>(job) << 32) | l.value();
  auto it = isolated_.find(key);
  if (it != isolated_.end()) return it->second;
  const ResourceId r = net_.AddResource(link_cap_[l.value()]);
  isolated_.emplace(key, r);
  link_resources_[l.value()].push_back(r);
  resource_link_.push_back(l);
  return r;
}

void Engine::PushJobEvent(int64_t t, uint32_t j, JobEventKind kind, uint32_t flow) {
  job_events_.push_back(JobEvent{t, seq_++, j, js_[j].gen, flow, kind});
  std::push_heap(job_events_.begin(), job_events_.end(), JobEventAfter());
}

void Engine::CreditBins(std::vector<double>& bins, int64_t start, int64_t end, double weight) {
  start = std::max<int64_t>(start, 0);
  end = std::min(end, horizon_);
  if (end <= start || weight == 0) return;
  int64_t b = start / bin_ns_;
  const int64_t last = std::min<int64_t>((end - 1) / bin_ns_, num_bins_ - 1);
  if (last >= static_cast<int64_t>(bins.size())) bins.resize(static_cast<size_t>(last) + 1, 0.0);
  while (start < end && b < static_cast<int64_t>(bins.size())) {
    const int64_t bin_end = std::min((b + 1) * bin_ns_, end);
    bins[b] += weight * static_cast<double>(bin_end - start);
    start = bin_end;
    ++b;
  }
}

void Engine::IntegrateCapacity() {
  const int64_t t = std::min(now_, horizon_);
  if (t <= cap_t_) return;
  const double dt = static_cast<double>(t - cap_t_) * 1e-9;
  for (size_t c = 0; c < class_cap_.size(); ++c) class_cap_time_[c] += class_cap_[c] * dt;
  cap_t_ = t;
}

Status Engine::Replan() {
  std::vector<core::JobSpec> specs;
  std::vector<uint32_t> idx;
  for (uint32_t j = 0; j < js_.size(); ++j) {
    if (js_[j].status != JobStatus::kRunning) continue;
    specs.push_back(js_[j].job->spec);
    idx.push_back(j);
  }
  ResetEpoch();
  if (specs.empty()) return Status::Ok();
  if (policy_stale_) CRUX_RETURN_IF_ERROR(MakePolicy());
  ++result_.replans;
  core::Result<core::Plan> plan = policy_->Schedule(specs);
  if (!plan.ok()) {
    // Keep every job's previous plan; a job that never had one cannot run.
    for (uint32_t j : idx) {
      if (!js_[j].planned) {
        return plan.status().WithContext("re-plan at t=" + Num(now_ * 1e-9) + " s (job '" +
                                         js_[j].job->spec.id + "' has no plan)");
      }
    }
    ++result_.replan_failures;
    return Status::Ok();
  }
  if (plan->jobs.size() != idx.size()) {
    return core::InternalError("policy '" + result_.policy + "' returned " +
                               std::to_string(plan->jobs.size()) + " job plans for " +
                               std::to_string(idx.size()) + " jobs");
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    JobState& s = js_[idx[k]];
    core::JobPlan& jp = plan->jobs[k];
    s.planned = true;
    s.level = jp.level;
    s.period = jp.period.nanos();
    if (!s.standalone) s.standalone = s.period;
    NoteLevel(idx[k], core::JobPhase::kScheduled, s.level);
    s.plan_flows = std::move(jp.flows);
    s.plan_resources.assign(s.plan_flows.size(), {});
    for (size_t f = 0; f < s.plan_flows.size(); ++f) {
      for (LinkId l : s.plan_flows[f].path) s.plan_resources[f].push_back(ResourceFor(idx[k], l));
    }
    const int64_t shift = jp.time_shift.nanos();
    if (shift != s.applied_shift) {
      int64_t delta = shift - s.applied_shift;
      if (delta < 0 && s.period > 0) delta = ((delta % s.period) + s.period) % s.period;
      s.pending_shift += std::max<int64_t>(delta, 0);
      s.applied_shift = shift;
    }
  }
  return Status::Ok();
}

void Engine::RerouteStalledFlows() {
  for (uint32_t j = 0; j < js_.size(); ++j) {
    JobState& s = js_[j];
    if (s.status != JobStatus::kRunning) continue;
    for (size_t f = 0; f < s.flows.size(); ++f) {
      FlowRun& run = s.flows[f];
      if (run.status != FlowStatus::kInNetwork) continue;
      bool stalled = false;
      for (ResourceId r : net_.Resources(run.id)) {
        if (link_cap_[resource_link_[r].value()] <= 0) stalled = true;
      }
      if (!stalled || f >= s.plan_resources.size()) continue;
      bool usable = !s.plan_resources[f].empty();
      for (ResourceId r : s.plan_resources[f]) {
        if (link_cap_[resource_link_[r].value()] <= 0) usable = false;
      }
      if (usable) net_.Reroute(run.id, s.plan_resources[f], now_);
    }
  }
}

void Engine::ResetEpoch() {
  ++epoch_;
  // BuildGroups carries the steady state of unchanged groups over.
  previous_groups_ = std::move(groups_);
  groups_.clear();
  ff_check_ = false;
  ff_blocked_ = false;
  old_in_flight_ = 0;
  for (const JobState& s : js_) {
    if (s.status != JobStatus::kRunning) continue;
    for (const FlowRun& run : s.flows) {
      if (run.status != FlowStatus::kDone) ++old_in_flight_;
    }
  }
}

void Engine::BuildGroups() {
  groups_.clear();
  for (JobState& s : js_) s.group = -1;
  if (!options_.fast_forward) return;
  // Union-find over running jobs through the resources of their planned flows.
  std::vector<uint32_t> running;
  for (uint32_t j = 0; j < js_.size(); ++j) {
    if (js_[j].status == JobStatus::kRunning) running.push_back(j);
  }
  std::vector<size_t> parent(running.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto find = [&parent](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  resource_owner_.assign(net_.num_resources(), -1);
  for (size_t i = 0; i < running.size(); ++i) {
    for (const std::vector<ResourceId>& path : js_[running[i]].plan_resources) {
      for (ResourceId r : path) {
        if (resource_owner_[r] < 0) {
          resource_owner_[r] = static_cast<int>(i);
        } else {
          const size_t a = find(i), b = find(static_cast<size_t>(resource_owner_[r]));
          if (a != b) parent[std::max(a, b)] = std::min(a, b);
        }
      }
    }
  }
  std::vector<int> group_of_root(running.size(), -1);
  for (size_t i = 0; i < running.size(); ++i) {
    const size_t root = find(i);
    if (group_of_root[root] < 0) {
      group_of_root[root] = static_cast<int>(groups_.size());
      groups_.emplace_back();
      groups_.back().anchor = running[i];
    }
    Group& g = groups_[group_of_root[root]];
    g.jobs.push_back(running[i]);
    js_[running[i]].group = group_of_root[root];
  }
  // Anchor: the job of the group with the longest standalone period (fewest snapshots).
  for (Group& g : groups_) {
    for (uint32_t j : g.jobs) {
      if (js_[j].period > js_[g.anchor].period) g.anchor = j;
    }
  }
  // A group with the same jobs on the same plans as before the re-plan has the same dynamics
  // (groups never influence each other): it keeps what was learnt about it. The others start
  // over, and so do their jobs' profiler windows.
  std::unordered_map<uint32_t, size_t> previous_of;  // Smallest job -> previous group.
  for (size_t k = 0; k < previous_groups_.size(); ++k) {
    previous_of.emplace(previous_groups_[k].jobs.front(), k);
  }
  std::vector<uint64_t> fingerprint(js_.size(), 0);
  for (Group& g : groups_) {
    bool unchanged = !fabric_changed_ && !std::getenv("NOCARRY");
    for (uint32_t j : g.jobs) {
      fingerprint[j] = PlanFingerprint(j);
      unchanged = unchanged && fingerprint[j] == js_[j].plan_fingerprint;
    }
    auto it = previous_of.find(g.jobs.front());
    if (unchanged && it != previous_of.end() && previous_groups_[it->second].jobs == g.jobs) {
      Group& old = previous_groups_[it->second];
      g.anchor = old.anchor;
      g.anchor_iterations = old.anchor_iterations;
      g.known = old.known;
      g.period = old.period;
      g.snaps = std::move(old.snaps);
      if (g.known) ++result_.fast_forward_carried;
      continue;
    }
    for (uint32_t j : g.jobs) js_[j].epoch_iterations = 0;
  }
  for (Group& g : groups_) {
    for (uint32_t j : g.jobs) js_[j].plan_fingerprint = fingerprint[j];
  }
  previous_groups_.clear();
  fabric_changed_ = false;
  // Groups that stayed steady take no new snapshot: the next anchor iteration start of any of
  // them re-checks whether a jump is possible.
  ff_blocked_ = true;
}

// What determines a job's dynamics besides the other jobs of its group: level, flows (paths
// and bytes) and time shift.
uint64_t Engine::PlanFingerprint(uint32_t j) const {
  const JobState& s = js_[j];
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  };
  mix(static_cast<uint64_t>(s.level));
  mix(static_cast<uint64_t>(s.pending_shift));
  mix(static_cast<uint64_t>(s.applied_shift));
  mix(s.plan_resources.size());
  for (size_t f = 0; f < s.plan_resources.size(); ++f) {
    mix(static_cast<uint64_t>(s.plan_flows[f].bytes.count()));
    for (ResourceId r : s.plan_resources[f]) mix(static_cast<uint64_t>(r));
  }
  return h;
}

Status Engine::DoReplanAndStarts() {
  replan_needed_ = false;
  CRUX_RETURN_IF_ERROR(Replan());
  RerouteStalledFlows();
  for (uint32_t j : to_start_) {
    if (js_[j].status == JobStatus::kRunning) StartIteration(j);
  }
  to_start_.clear();
  BuildGroups();
  return Status::Ok();
}

// ---- The control loop (docs/simulator.md section 3) ----

void Engine::NoteLevel(uint32_t j, core::JobPhase phase, int level) {
  JobState& s = js_[j];
  if (phase == core::JobPhase::kScheduled && !s.scheduled_at) s.scheduled_at = now_;
  if (!s.level_log.empty() && s.level_log.back().phase == phase &&
      s.level_log.back().level == level) {
    return;
  }
  s.level_log.push_back({Duration::Nanos(now_), phase, level});
}

// The job's own flows (ExpandTraffic of its true spec, on the wire) with their default paths:
// what the `ecmp` policy routes for the job alone (hash ECMP), and its standalone period
// (policy-independent, as in every plan). When the current fabric has no route for it (a link
// event took its only path down), the routes on the nominal fabric: its traffic then waits on
// the down link until a plan or a recovery moves it. False if neither exists.
bool Engine::RouteAlone(uint32_t j) {
  JobState& s = js_[j];
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
  s.period = jp->period.nanos();
  if (!s.standalone) s.standalone = s.period;
  s.own_flows = std::move(jp->flows);
  return true;
}

// plan_flows / plan_resources from the job's own flows: each on the pinned path of `a` for its
// NIC pair (the k-th flow of a pair on the k-th pin of that pair), else on its default path.
void Engine::SetPlanFlows(uint32_t j, const core::Assignment* a) {
  JobState& s = js_[j];
  auto key = [](core::NodeId x, core::NodeId y) {
    return (static_cast<uint64_t>(x.value()) << 32) | y.value();
  };
  std::unordered_map<uint64_t, std::vector<const core::FlowPin*>> pins;
  if (a != nullptr) {
    for (const core::FlowPin& p : a->flows) {
      if (!p.path.empty()) pins[key(p.src_nic, p.dst_nic)].push_back(&p);
    }
  }
  std::unordered_map<uint64_t, size_t> used;
  const size_t n = s.own_flows.size();
  s.plan_flows = s.own_flows;
  s.pinned.assign(n, false);
  s.plan_resources.assign(n, {});
  for (size_t f = 0; f < n; ++f) {
    core::FlowPlan& fp = s.plan_flows[f];
    const uint64_t k = key(fp.src, fp.dst);
    auto it = pins.find(k);
    if (it != pins.end()) {
      fp.path = it->second[used[k]++ % it->second.size()]->path;
      s.pinned[f] = true;
    }
    for (LinkId l : fp.path) s.plan_resources[f].push_back(ResourceFor(j, l));
  }
}

// A job registers: it runs at once on its default routes below every job level, and its
// profiler starts measuring.
void Engine::Arrive(uint32_t j) {
  JobState& s = js_[j];
  s.status = JobStatus::kRunning;
  if (!RouteAlone(j)) {
    // No route on either fabric (the policy would refuse it too): only its compute runs.
    s.own_flows.clear();
  }
  std::vector<std::pair<core::NodeId, core::NodeId>> peers;
  std::unordered_map<uint64_t, uint32_t> peer_index;
  s.peer_of.assign(s.own_flows.size(), 0);
  for (size_t f = 0; f < s.own_flows.size(); ++f) {
    const core::FlowPlan& fp = s.own_flows[f];
    const uint64_t k = (static_cast<uint64_t>(fp.src.value()) << 32) | fp.dst.value();
    auto [it, inserted] = peer_index.emplace(k, static_cast<uint32_t>(peers.size()));
    if (inserted) peers.emplace_back(fp.src, fp.dst);
    s.peer_of[f] = it->second;
  }
  s.iter_peer_bytes.assign(peers.size(), 0);
  s.profiler.emplace(options_.control.profiler, std::move(peers), s.job->spec.flops_per_iteration);
  s.assigned = false;
  s.phase = core::JobPhase::kRegistered;
  s.level = kBestEffortLevel;
  SetPlanFlows(j, nullptr);
  host_->AddJob(*s.job);
  to_start_.push_back(j);
  replan_needed_ = true;
  regroup_needed_ = true;
}

// One iteration of job j ended: its profiler's sample, and the report if one is due.
void Engine::ReportIteration(uint32_t j) {
  JobState& s = js_[j];
  if (!s.profiler) return;
  IterationSample smp;
  smp.period_ns = std::max<int64_t>(1, now_ - s.iter_start);
  smp.compute_ns = std::max<int64_t>(1, s.compute_ns);
  bool sent = false;
  for (int64_t b : s.iter_peer_bytes) sent = sent || b > 0;
  smp.overlap_start = sent ? std::clamp(static_cast<double>(s.comm_start - s.iter_start) /
                                            static_cast<double>(smp.compute_ns),
                                        0.0, 1.0)
                           : 1.0;
  smp.peer_bytes = s.iter_peer_bytes;
  const uint32_t done = static_cast<uint32_t>(std::min<int64_t>(s.iterations, UINT32_MAX));
  std::optional<core::JobProfile> p = s.profiler->AddIteration(smp, done);
  if (!p) return;
  ++s.reports;
  ++result_.profile_reports;
  host_->Report(s.job->spec.id, *p);
}

// Fast-forward skips iterations, which the profilers would otherwise see: a jump waits until
// no report can be under way (each profiler reported and confirms no change) and every
// profiler's window holds only samples of the current epoch (so a plan change has shown up in
// the medians). Approximate: a window median that would drift within a steady state is missed.
bool Engine::ProfilersSettled() const {
  const int64_t window = std::max<uint32_t>(options_.control.profiler.window, 3);
  for (const JobState& s : js_) {
    if (s.status != JobStatus::kRunning || !s.profiler) continue;
    if (!s.profiler->settled() || s.epoch_iterations < window) return false;
  }
  return true;
}

// A link event changed the fabric: flows without a pin follow the fabric's hash routing at
// once (routes re-converge); pinned flows keep their pins until the next plan.
void Engine::RefreshDefaults() {
  defaults_stale_ = false;
  ecmp_stale_ = true;
  for (uint32_t j = 0; j < js_.size(); ++j) {
    JobState& s = js_[j];
    if (s.status != JobStatus::kRunning || !s.profiler) continue;
    if (std::all_of(s.pinned.begin(), s.pinned.end(), [](bool b) { return b; })) continue;
    if (!RouteAlone(j)) continue;
    const core::AppliedAssignment* applied = host_->loop().Applied(s.job->spec.id);
    SetPlanFlows(j, applied != nullptr ? &applied->assignment : nullptr);
  }
  RerouteStalledFlows();
  regroup_needed_ = true;
}

// The loop's due run, synchronously, in zero simulated time; its committed assignments are in
// force for the communication phases that start from now on.
Status Engine::RunLoop() {
  if (policy_stale_) CRUX_RETURN_IF_ERROR(MakePolicy());
  const internal::LoopRun run = host_->Run(*policy_, topo_);
  if (run.planned) {
    ++result_.replans;
    if (!run.status.ok()) ++result_.replan_failures;
  }
  result_.excluded += run.excluded;
  bool changed = false;
  for (const core::AppliedAssignment& aa : run.changed) {
    auto it = index_of_.find(aa.assignment.job_id);
    if (it == index_of_.end()) continue;
    const uint32_t j = it->second;
    JobState& s = js_[j];
    if (s.status != JobStatus::kRunning) continue;
    s.assigned = true;
    s.phase = aa.assignment.phase;
    s.level = aa.assignment.level;
    SetPlanFlows(j, &aa.assignment);
    NoteLevel(j, s.phase, s.level);
    changed = true;
  }
  // Core's Assignment has no time shift (cruxd cannot enforce CASSINI's shifts): the simulator
  // takes them from the run's JobPlans, for every planned job.
  for (const auto& [id, time_shift] : run.time_shifts) {
    auto it = index_of_.find(id);
    if (it == index_of_.end()) continue;
    JobState& s = js_[it->second];
    if (s.status != JobStatus::kRunning) continue;
    const int64_t shift = time_shift.nanos();
    if (shift == s.applied_shift) continue;
    int64_t delta = shift - s.applied_shift;
    if (delta < 0 && s.period > 0) delta = ((delta % s.period) + s.period) % s.period;
    s.pending_shift += std::max<int64_t>(delta, 0);
    s.applied_shift = shift;
    changed = true;
  }
  if (changed) {
    regroup_needed_ = true;
    RerouteStalledFlows();
  }
  return Status::Ok();
}

Status Engine::EndOfInstant() {
  if (oracle_) return DoReplanAndStarts();
  replan_needed_ = false;
  if (defaults_stale_) RefreshDefaults();
  const std::optional<int64_t> due = host_->due_ns();
  if (due && *due <= now_) CRUX_RETURN_IF_ERROR(RunLoop());
  const bool regroup = regroup_needed_;
  regroup_needed_ = false;
  if (regroup) ResetEpoch();
  for (uint32_t j : to_start_) {
    if (js_[j].status == JobStatus::kRunning) StartIteration(j);
  }
  to_start_.clear();
  if (regroup) BuildGroups();
  return Status::Ok();
}

void Engine::StartIteration(uint32_t j) {
  JobState& s = js_[j];
  ++s.gen;
  s.iter_start = now_;
  s.computing = true;
  s.compute_end = now_ + s.compute_ns;
  PushJobEvent(s.compute_end, j, JobEventKind::kComputeDone);
  s.comm_start = now_ + s.overlap_ns + s.pending_shift;
  s.pending_shift = 0;
  s.comm_started = false;
  s.comm_done = false;
  s.outstanding = 0;
  s.flows.clear();
  std::fill(s.iter_peer_bytes.begin(), s.iter_peer_bytes.end(), 0);
  PushJobEvent(s.comm_start, j, JobEventKind::kCommStart);
  if (s.group >= 0 && groups_[s.group].anchor == j) {
    Group& g = groups_[s.group];
    if (!g.known) {
      if (++g.anchor_iterations > kWarmupIterations) {
        g.pending = true;
        ff_check_ = true;
      }
    } else if (ff_blocked_) {
      ff_check_ = true;  // Every group is steady; the jump waits for the profilers.
    }
  }
}

void Engine::OnComputeDone(uint32_t j) {
  JobState& s = js_[j];
  s.computing = false;
  s.compute_busy += s.compute_end - s.iter_start;
  CreditBins(bin_busy_, s.iter_start, s.compute_end, s.gpus);
  MaybeEndIteration(j);
}

void Engine::OnCommStart(uint32_t j) {
  JobState& s = js_[j];
  s.comm_started = true;
  s.flows.assign(s.plan_flows.size(), FlowRun{});
  for (size_t f = 0; f < s.plan_flows.size(); ++f) {
    FlowRun& run = s.flows[f];
    run.bytes = s.plan_flows[f].bytes.ToDouble();
    if (run.bytes <= 0 || s.plan_resources[f].empty()) {
      run.status = FlowStatus::kDone;
      continue;
    }
    bytes_sent_ += run.bytes;
    s.bytes_sent += run.bytes;
    if (f < s.peer_of.size()) s.iter_peer_bytes[s.peer_of[f]] += s.plan_flows[f].bytes.count();
    run.epoch = epoch_;
    run.status = FlowStatus::kInNetwork;
    run.id = net_.AddFlow(s.plan_resources[f], s.level, run.bytes, now_,
                          (static_cast<uint64_t>(j) << 32) | f);
    ++s.outstanding;
  }
  result_.peak_active_flows = std::max<uint64_t>(result_.peak_active_flows, net_.active_flows());
  if (s.outstanding == 0) {
    s.comm_done = true;
    MaybeEndIteration(j);
  }
}

void Engine::AccountFlowBits(uint32_t j, FluidNetwork::FlowId id, double transmitted) {
  std::vector<double>& job_bits = js_[j].class_bits;
  job_bits.resize(class_bits_.size(), 0.0);
  for (ResourceId r : net_.Resources(id)) {
    const int c = link_class_[resource_link_[r].value()];
    class_bits_[c] += transmitted * 8.0;
    job_bits[c] += transmitted * 8.0;
  }
}

void Engine::OnFlowFinished(uint64_t tag, double transmitted) {
  ++result_.flow_events;
  const uint32_t j = static_cast<uint32_t>(tag >> 32);
  const uint32_t f = static_cast<uint32_t>(tag & 0xffffffffu);
  JobState& s = js_[j];
  FlowRun& run = s.flows[f];
  AccountFlowBits(j, run.id, transmitted);
  const int64_t hops = static_cast<int64_t>(net_.Resources(run.id).size());
  run.bytes = transmitted;
  if (alpha_ == 0) {
    OnDeliver(j, f);
    return;
  }
  run.status = FlowStatus::kDelivering;
  run.deliver_at = now_ + hops * alpha_;
  PushJobEvent(run.deliver_at, j, JobEventKind::kDeliver, f);
}

void Engine::OnDeliver(uint32_t j, uint32_t f) {
  JobState& s = js_[j];
  FlowRun& run = s.flows[f];
  run.status = FlowStatus::kDone;
  if (run.epoch != epoch_) --old_in_flight_;
  bytes_delivered_ += run.bytes;
  if (--s.outstanding == 0) {
    s.comm_done = true;
    MaybeEndIteration(j);
  }
}

void Engine::MaybeEndIteration(uint32_t j) {
  JobState& s = js_[j];
  if (s.computing || !s.comm_done) return;
  ++s.iterations;
  ++s.epoch_iterations;
  s.iteration_ns_sum += now_ - s.iter_start;
  if (s.iteration_limit && s.iterations >= *s.iteration_limit) {
    Depart(j, /*at_horizon=*/false);
    return;
  }
  if (host_) ReportIteration(j);
  StartIteration(j);
}

void Engine::Depart(uint32_t j, bool at_horizon) {
  JobState& s = js_[j];
  if (s.status != JobStatus::kRunning) return;
  const int64_t end = std::min(now_, horizon_);
  if (s.computing) {
    const int64_t stop = std::min(end, s.compute_end);
    if (stop > s.iter_start) {
      s.compute_busy += stop - s.iter_start;
      CreditBins(bin_busy_, s.iter_start, stop, s.gpus);
    }
    s.computing = false;
  }
  for (FlowRun& run : s.flows) {
    if (run.status == FlowStatus::kInNetwork) {
      const double transmitted = net_.RemoveFlow(run.id, now_);
      AccountFlowBits(j, run.id, transmitted);
      bytes_in_flight_ += run.bytes;
    } else if (run.status == FlowStatus::kDelivering) {
      bytes_in_flight_ += run.bytes;
    }
    if (run.status != FlowStatus::kDone && run.epoch != epoch_) --old_in_flight_;
    run.status = FlowStatus::kDone;
  }
  s.status = JobStatus::kDone;
  ++s.gen;  // Invalidates its pending events.
  CreditBins(bin_alive_, s.arrival, end, s.gpus);
  if (!at_horizon) {
    s.finish = end;
    replan_needed_ = true;
    if (host_) {
      host_->RemoveJob(s.job->spec.id, "ended");
      regroup_needed_ = true;
    }
  }
  const int64_t b0 = s.arrival / bin_ns_;
  const int64_t b1 = std::min(end <= s.arrival ? b0 : (end - 1) / bin_ns_ + 1, num_bins_);
  if (b0 < num_bins_) {
    if (b1 >= static_cast<int64_t>(bin_running_.size())) {
      bin_running_.resize(static_cast<size_t>(b1) + 1, 0);
    }
    bin_running_[b0] += 1;
    bin_running_[b1] -= 1;
  }
}

void Engine::ApplyLinkEvent(const LinkEvent& e) {
  IntegrateCapacity();
  const double cap = std::max(0.0, e.capacity.ToBitsPerSec());
  const LinkId both[2] = {e.link, topo_.link(e.link).reverse};
  for (LinkId l : both) {
    if (!l.valid()) continue;
    const size_t i = l.value();
    class_cap_[link_class_[i]] += cap - link_cap_[i];
    link_cap_[i] = cap;
    topo_.SetLinkUp(l, cap > 0);
    if (cap > 0) (void)topo_.SetLinkCapacity(l, e.capacity);  // Validated: > 0.
    for (ResourceId r : link_resources_[i]) net_.SetCapacity(r, cap);
  }
  policy_stale_ = true;
  replan_needed_ = true;
  fabric_changed_ = true;
  if (host_) {
    host_->Invalidate("link event");
    defaults_stale_ = true;
    regroup_needed_ = true;
  }
}

void Engine::MaybeProgress(bool force) {
  if (!options_.progress) return;
  const auto wall = std::chrono::steady_clock::now();
  if (!force && wall - last_progress_ < std::chrono::seconds(1)) return;
  last_progress_ = wall;
  Progress p;
  p.simulated = Duration::Nanos(std::min(now_, horizon_));
  p.horizon = options_.horizon;
  p.events = result_.events;
  p.wall_s = std::chrono::duration<double>(wall - wall_start_).count();
  options_.progress(p);
}

Snapshot Engine::TakeSnapshot(const Group& g) const {
  Snapshot snap;
  snap.t = now_;
  for (uint32_t j : g.jobs) {
    const JobState& s = js_[j];
    JobSnap js;
    js.phase = now_ - s.iter_start;
    js.computing = s.computing;
    js.compute_left = s.computing ? s.compute_end - now_ : 0;
    js.comm_started = s.comm_started;
    js.comm_start_left = s.comm_started ? 0 : s.comm_start - now_;
    js.comm_done = s.comm_done;
    js.pending_shift = s.pending_shift;
    for (const FlowRun& run : s.flows) {
      js.flow_status.push_back(static_cast<uint8_t>(run.status));
      if (run.status == FlowStatus::kInNetwork) {
        js.flow_value.push_back(net_.Remaining(run.id, now_));
      } else if (run.status == FlowStatus::kDelivering) {
        js.flow_value.push_back(static_cast<double>(run.deliver_at - now_));
      } else {
        js.flow_value.push_back(0);
      }
    }
    js.iterations = s.iterations;
    js.progress = static_cast<double>(s.iterations);
    if (s.iterations > 0 && s.iteration_ns_sum > 0) {
      const double mean =
          static_cast<double>(s.iteration_ns_sum) / static_cast<double>(s.iterations);
      js.progress += std::min(1.0, static_cast<double>(now_ - s.iter_start) / mean);
    }
    js.iteration_ns_sum = s.iteration_ns_sum;
    // Continuous: the compute phase under way counts up to now (compute_busy grows only when
    // a phase ends, which would quantise the rates of approximately steady groups).
    js.compute_busy = s.compute_busy + (s.computing ? now_ - s.iter_start : 0);
    js.bytes_sent = s.bytes_sent;
    js.class_bits = s.class_bits;
    snap.snaps.push_back(std::move(js));
  }
  return snap;
}

bool Engine::Matches(const Group& g, const Snapshot& a, const Snapshot& b, int64_t period) const {
  const int64_t tol_ns = std::max<int64_t>(10, period / 1'000'000);
  auto close = [tol_ns](int64_t x, int64_t y) { return std::llabs(x - y) <= tol_ns; };
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    const JobSnap& x = a.snaps[k];
    const JobSnap& y = b.snaps[k];
    if (x.computing != y.computing || x.comm_started != y.comm_started ||
        x.comm_done != y.comm_done || x.flow_status != y.flow_status) {
      return false;
    }
    if (!close(x.phase, y.phase) || !close(x.compute_left, y.compute_left) ||
        !close(x.comm_start_left, y.comm_start_left) || !close(x.pending_shift, y.pending_shift)) {
      return false;
    }
    const std::vector<core::FlowPlan>& flows = js_[g.jobs[k]].plan_flows;
    for (size_t f = 0; f < x.flow_value.size(); ++f) {
      if (x.flow_status[f] == static_cast<uint8_t>(FlowStatus::kInNetwork)) {
        const double bytes = f < flows.size() ? flows[f].bytes.ToDouble() : 1.0;
        if (std::abs(x.flow_value[f] - y.flow_value[f]) > std::max(1.0, 1e-6 * bytes)) {
          return false;
        }
      } else if (x.flow_status[f] == static_cast<uint8_t>(FlowStatus::kDelivering)) {
        if (!close(static_cast<int64_t>(x.flow_value[f]), static_cast<int64_t>(y.flow_value[f]))) {
          return false;
        }
      }
    }
  }
  return true;
}

// Snapshot of a group at its anchor's iteration start; a match with an earlier snapshot means
// the group's state repeats with that period: its rates are then known for the rest of the epoch.
void Engine::CheckGroup(Group& g) {
  g.pending = false;
  if (g.known || js_[g.anchor].iter_start != now_ || old_in_flight_ > 0) return;
  Snapshot snap = TakeSnapshot(g);
  const Snapshot* match = nullptr;
  for (auto it = g.snaps.rbegin(); it != g.snaps.rend(); ++it) {
    if (snap.t > it->t && Matches(g, *it, snap, snap.t - it->t)) {
      match = &*it;
      break;
    }
  }
  if (match == nullptr) {
    if (g.snaps.size() >= kMaxSnapshots) g.snaps.erase(g.snaps.begin());
    g.snaps.push_back(std::move(snap));
    if (options_.fast_forward_tolerance <= 0 || std::getenv("NOAPPROX")) return;
    // Not exactly periodic (contending jobs with incommensurate periods): steady if the rates
    // of the two halves of the last k anchor iterations agree, for the largest such window.
    const size_t n = g.snaps.size();
    for (size_t k : kSteadyWindows) {
      if (n < k) continue;
      const Snapshot& first = g.snaps[n - k];
      if (RatesAgree(g, first, g.snaps[n - k / 2], g.snaps.back())) {
        SetRates(g, first, g.snaps.back(),
                 (g.snaps.back().t - first.t) / static_cast<int64_t>(k - 1), /*exact=*/false);
        ++result_.fast_forward_approximate;
        return;
      }
    }
    return;
  }
  SetRates(g, *match, snap, snap.t - match->t, /*exact=*/true);
}

// Rates of each job of `g` over [a.t, b.t] and over [b.t, c.t] agree: compute (continuous, see
// TakeSnapshot) within the tolerance; iterations and bytes, which advance in steps of one
// iteration, within the tolerance plus one step per half.
bool Engine::RatesAgree(const Group& g, const Snapshot& a, const Snapshot& b,
                        const Snapshot& c) const {
  const double tol = options_.fast_forward_tolerance;
  const double d1 = static_cast<double>(b.t - a.t);
  const double d2 = static_cast<double>(c.t - b.t);
  if (d1 <= 0 || d2 <= 0) return false;
  auto agree = [tol](double x, double y, double slack) {
    return std::abs(x - y) <= tol * std::max(std::abs(x), std::abs(y)) + slack + 1e-15;
  };
  const double step = 1 / d1 + 1 / d2;
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    const JobSnap& x = a.snaps[k];
    const JobSnap& y = b.snaps[k];
    const JobSnap& z = c.snaps[k];
    double iteration_bytes = 0;
    for (const core::FlowPlan& fp : js_[g.jobs[k]].plan_flows) {
      iteration_bytes += fp.bytes.ToDouble();
    }
    if (!agree(static_cast<double>(y.compute_busy - x.compute_busy) / d1,
               static_cast<double>(z.compute_busy - y.compute_busy) / d2, 0) ||
        !agree((y.progress - x.progress) / d1, (z.progress - y.progress) / d2, step) ||
        !agree((y.bytes_sent - x.bytes_sent) / d1, (z.bytes_sent - y.bytes_sent) / d2,
               step * iteration_bytes)) {
      return false;
    }
  }
  return true;
}

// Sets the group's per-job rates from the progress between two of its snapshots; `period` is
// the granularity of jumps (the exact period, or the mean anchor iteration).
void Engine::SetRates(Group& g, const Snapshot& match, const Snapshot& snap, int64_t period,
                      bool exact) {
  const double p = static_cast<double>(snap.t - match.t);
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    JobState& s = js_[g.jobs[k]];
    const JobSnap& a = match.snaps[k];
    const JobSnap& b = snap.snaps[k];
    const int64_t d_iter = b.iterations - a.iterations;
    s.rate_iteration_ns =
        d_iter > 0 ? static_cast<double>(b.iteration_ns_sum - a.iteration_ns_sum) / d_iter : 0;
    s.rate_class_bits.assign(b.class_bits.size(), 0.0);
    for (size_t c = 0; c < b.class_bits.size(); ++c) {
      s.rate_class_bits[c] =
          (b.class_bits[c] - (c < a.class_bits.size() ? a.class_bits[c] : 0)) / p;
    }
    if (exact) {  // Both ends at the same phase: every difference is whole iterations.
      s.rate_iterations = static_cast<double>(d_iter) / p;
      s.rate_busy = static_cast<double>(b.compute_busy - a.compute_busy) / p;
      s.rate_bytes = (b.bytes_sent - a.bytes_sent) / p;
      continue;
    }
    // A window of anchor iterations ends at arbitrary phases of the other jobs: a job's compute
    // and bytes over it are biased by up to one compute phase or one communication phase. Its
    // continuous progress is not, and every iteration computes compute_time and sends the same
    // bytes, so the rates derive from the rate of iterations.
    s.rate_iterations = std::max(0.0, b.progress - a.progress) / p;
    s.rate_busy = s.rate_iterations * static_cast<double>(s.compute_ns);
    double iteration_bytes = 0;
    for (size_t f = 0; f < s.plan_flows.size(); ++f) {
      if (!s.plan_resources[f].empty()) iteration_bytes += s.plan_flows[f].bytes.ToDouble();
    }
    s.rate_bytes = s.rate_iterations * iteration_bytes;
  }
  g.known = true;
  g.period = std::max<int64_t>(period, 1);
  g.snaps.clear();
}

void Engine::FastForward() {
  ff_check_ = false;
  if (replan_needed_ || !to_start_.empty() || groups_.empty()) return;
  bool all_known = true;
  for (Group& g : groups_) {
    if (g.pending) CheckGroup(g);
    all_known = all_known && g.known;
  }
  if (!all_known) return;
  // Flows started under an earlier plan (of any group) still in flight: not yet the steady
  // state the rates describe.
  if (old_in_flight_ > 0 || (host_ && !ProfilersSettled())) {
    ff_blocked_ = true;
    return;
  }
  ff_blocked_ = false;
  Jump();
}

// Every group is periodic: jump to shortly before the next cluster event, crediting each job
// its group's rates over the jump. The state moves as a whole (the phases inside a group are a
// state the group really is in; the phase at the landing point differs from the exact one by
// less than one group period, which is the error bound of the credit as well).
void Engine::Jump() {
  int64_t max_period = 0;
  for (const Group& g : groups_) max_period = std::max(max_period, g.period);
  int64_t next = horizon_;
  if (cluster_next_ < cluster_.size()) next = std::min(next, cluster_[cluster_next_].t);
  if (host_) {
    if (std::optional<int64_t> due = host_->due_ns()) next = std::min(next, *due);
  }
  // Land at least two group periods before the next cluster event: the approach is simulated.
  int64_t jump = next - now_ - 2 * max_period;
  for (const JobState& s : js_) {
    if (s.status != JobStatus::kRunning || !s.iteration_limit || s.rate_iterations <= 0) {
      continue;
    }
    // Leave a couple of group periods' worth of iterations to be simulated.
    const double left = static_cast<double>(*s.iteration_limit - s.iterations) -
                        2.0 * s.rate_iterations * static_cast<double>(max_period) - 1.0;
    jump = std::min(jump, static_cast<int64_t>(left / s.rate_iterations));
  }
  // Whole periods of the slowest group: exact for it (and for groups whose period divides it).
  jump = max_period > 0 ? jump / max_period * max_period : 0;
  if (jump <= 0) {
    // Too close to the next event (or a plan run, or a job's last iterations): try again at
    // the next anchor iteration instead of giving up on the epoch.
    ff_blocked_ = true;
    return;
  }
  const double jd = static_cast<double>(jump);
  for (JobState& s : js_) {
    if (s.status != JobStatus::kRunning) continue;
    const double x = jd * s.rate_iterations + s.iteration_credit;
    const double n = std::floor(x + 1e-9);  // k periods x m iterations is an integer.
    s.iteration_credit = x - n;
    s.iterations += static_cast<int64_t>(n);
    s.iteration_ns_sum += static_cast<int64_t>(std::llround(n * s.rate_iteration_ns));
    s.compute_busy += static_cast<int64_t>(std::llround(jd * s.rate_busy));
    CreditBins(bin_busy_, now_, now_ + jump, s.gpus * s.rate_busy);
    bytes_sent_ += jd * s.rate_bytes;
    bytes_delivered_ += jd * s.rate_bytes;
    s.bytes_sent += jd * s.rate_bytes;
    s.class_bits.resize(class_bits_.size(), 0.0);
    for (size_t c = 0; c < s.rate_class_bits.size(); ++c) {
      class_bits_[c] += jd * s.rate_class_bits[c];
      s.class_bits[c] += jd * s.rate_class_bits[c];
    }
  }
  ShiftAll(jump);
}

// Moves every job's schedule, every pending job event and the fluid network `jump` later.
void Engine::ShiftAll(int64_t jump) {
  for (JobState& s : js_) {
    if (s.status != JobStatus::kRunning) continue;
    s.iter_start += jump;
    s.compute_end += jump;
    s.comm_start += jump;
    for (FlowRun& run : s.flows) {
      if (run.status == FlowStatus::kDelivering) run.deliver_at += jump;
    }
  }
  for (JobEvent& e : job_events_) e.t += jump;  // Uniform: the heap order holds.
  net_.ShiftTime(jump);
  now_ += jump;
  ++result_.fast_forward_jumps;
  result_.fast_forwarded += Duration::Nanos(jump);
}

core::Result<SimResult> Engine::Run() {
  wall_start_ = std::chrono::steady_clock::now();
  last_progress_ = wall_start_;
  CRUX_RETURN_IF_ERROR(Init());
  uint64_t since_progress = 0;
  while (true) {
    const int64_t t_flow = net_.NextFinishTime(now_);
    const int64_t t_job = job_events_.empty() ? kNever : job_events_.front().t;
    const int64_t t_cl = cluster_next_ < cluster_.size() ? cluster_[cluster_next_].t : kNever;
    const int64_t t_other = std::min({t_flow, t_job, t_cl});
    // The control loop's next run is an event too; it runs after the other events of its
    // instant (EndOfInstant), like the oracle's re-plan.
    int64_t t_plan = kNever;
    if (host_) {
      if (std::optional<int64_t> due = host_->due_ns()) t_plan = std::max(*due, now_);
    }
    if (t_other > now_ && (replan_needed_ || t_plan == now_)) {
      CRUX_RETURN_IF_ERROR(EndOfInstant());
      continue;
    }
    if (t_other > now_ && ff_check_) {
      FastForward();
      continue;
    }
    const int64_t t = std::min(t_other, t_plan);
    if (t >= horizon_) break;
    now_ = t;
    if (t_other > t) continue;  // Only the loop's run is due at t.
    if (++since_progress >= 4096) {
      since_progress = 0;
      MaybeProgress(false);
    }
    if (t_flow == t) {
      net_.PopFinished(t, [this](uint64_t tag, double transmitted) {
        ++result_.events;
        OnFlowFinished(tag, transmitted);
      });
      continue;
    }
    ++result_.events;
    if (t_job == t) {
      std::pop_heap(job_events_.begin(), job_events_.end(), JobEventAfter());
      const JobEvent e = job_events_.back();
      job_events_.pop_back();
      JobState& s = js_[e.job];
      if (s.status != JobStatus::kRunning || s.gen != e.gen) {
        --result_.events;  // Stale.
        continue;
      }
      switch (e.kind) {
        case JobEventKind::kComputeDone:
          OnComputeDone(e.job);
          break;
        case JobEventKind::kCommStart:
          OnCommStart(e.job);
          break;
        case JobEventKind::kDeliver:
          ++result_.flow_events;
          OnDeliver(e.job, e.flow);
          break;
      }
      continue;
    }
    const ClusterEvent e = cluster_[cluster_next_++];
    switch (e.kind) {
      case ClusterKind::kArrival:
        if (host_) {
          Arrive(e.index);
          break;
        }
        js_[e.index].status = JobStatus::kRunning;
        to_start_.push_back(e.index);
        replan_needed_ = true;
        break;
      case ClusterKind::kDeparture:
        Depart(e.index, /*at_horizon=*/false);
        break;
      case ClusterKind::kLink:
        ApplyLinkEvent(link_events_[e.index]);
        break;
    }
  }

  // The horizon: cut what is still running.
  now_ = horizon_;
  IntegrateCapacity();
  for (uint32_t j = 0; j < js_.size(); ++j) Depart(j, /*at_horizon=*/true);
  MaybeProgress(true);

  SimResult& r = result_;
  r.simulated = options_.horizon;
  double busy = 0;
  double life = 0;
  for (const JobState& s : js_) {
    JobResult jr;
    jr.id = s.job->spec.id;
    jr.model = s.job->model;
    jr.gpus = s.gpus;
    jr.arrival = Duration::Nanos(s.arrival);
    if (s.finish) jr.finish = Duration::Nanos(*s.finish);
    jr.iterations = s.iterations;
    const int64_t end = s.finish.value_or(horizon_);
    jr.jct = Duration::Nanos(std::max<int64_t>(0, end - s.arrival));
    if (s.iterations > 0) jr.mean_iteration = Duration::Nanos(s.iteration_ns_sum / s.iterations);
    jr.standalone_iteration = Duration::Nanos(s.standalone.value_or(0));
    jr.compute_busy = Duration::Nanos(s.compute_busy);
    jr.level = s.level == kBestEffortLevel ? -1 : s.level;
    if (s.scheduled_at) jr.scheduled = Duration::Nanos(*s.scheduled_at);
    if (s.arrival < horizon_) {
      jr.profiling =
          Duration::Nanos(std::max<int64_t>(0, s.scheduled_at.value_or(end) - s.arrival));
    }
    jr.profile_reports = s.reports;
    jr.levels = s.level_log;
    busy += static_cast<double>(s.gpus) * static_cast<double>(s.compute_busy);
    life += static_cast<double>(s.gpus) * static_cast<double>(jr.jct.nanos());
    r.jobs.push_back(std::move(jr));
  }
  r.gpu_utilization = life > 0 ? busy / life : 0;
  r.cluster_utilization =
      total_gpus_ > 0 ? busy / (static_cast<double>(total_gpus_) * static_cast<double>(horizon_))
                      : 0;
  for (size_t c = 0; c < class_names_.size(); ++c) {
    r.link_class_utilization[class_names_[c]] =
        class_cap_time_[c] > 0 ? class_bits_[c] / class_cap_time_[c] : 0;
  }
  int running = 0;
  r.samples.reserve(static_cast<size_t>(num_bins_));
  for (int64_t b = 0; b < num_bins_; ++b) {
    const size_t i = static_cast<size_t>(b);
    if (i < bin_running_.size()) running += bin_running_[i];
    const double busy_b = i < bin_busy_.size() ? bin_busy_[i] : 0.0;
    const double alive_b = i < bin_alive_.size() ? bin_alive_[i] : 0.0;
    Sample smp;
    smp.t = Duration::Nanos(b * bin_ns_);
    const int64_t len = std::min<int64_t>(bin_ns_, horizon_ - b * bin_ns_);
    smp.gpu_utilization = alive_b > 0 ? busy_b / alive_b : 0;
    smp.cluster_utilization =
        total_gpus_ > 0 ? busy_b / (static_cast<double>(total_gpus_) * static_cast<double>(len))
                        : 0;
    smp.running_jobs = running;
    r.samples.push_back(smp);
  }
  if (host_) r.epochs = host_->loop().epoch();
  r.bytes_sent = bytes_sent_;
  r.bytes_delivered = bytes_delivered_;
  r.bytes_in_flight = bytes_in_flight_;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  return std::move(result_);
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
  CRUX_RETURN_IF_ERROR(core::ValidateControlLoopOptions(options.control.loop));
  CRUX_RETURN_IF_ERROR(ValidateProfilerModelOptions(options.control.profiler));
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
