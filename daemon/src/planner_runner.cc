#include "crux/daemon/planner_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace crux::daemon {
namespace {

// Compute time assumed before a job reports a profile (it only matters for I_j, and such jobs
// sit on the temporary top level anyway).
constexpr core::Duration kAssumedComputeTime = core::Duration::Millis(100);

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

}  // namespace

core::Result<std::optional<core::JobSpec>> BuildJobSpec(const core::Topology& topo,
                                                        const JobEntry& job) {
  const v1::RegisterJob& r = job.registration;
  core::JobSpec s;
  s.id = r.job_id();
  uint32_t max_gpus = 1;
  for (const auto& p : r.placement()) {
    CRUX_ASSIGN_OR_RETURN(core::NodeId h, topo.FindNode(p.host()));
    s.hosts.push_back(h);
    max_gpus = std::max(max_gpus, p.gpus());
  }
  // core::JobSpec models a uniform placement: the largest per-host GPU count stands for all.
  s.gpus_per_host = static_cast<int>(max_gpus);
  s.compute_time = kAssumedComputeTime;
  if (r.flops_per_iteration() > 0) {
    s.flops_per_iteration = core::Flops::Of(static_cast<double>(r.flops_per_iteration()));
  }
  CRUX_ASSIGN_OR_RETURN(
      s.pattern, core::ParseTrafficPattern(r.pattern().empty() ? "ring_allreduce" : r.pattern()));
  uint64_t pattern_bytes = r.bytes_per_iteration();
  // The planned profile (hysteresis, see job_tracker.h), not necessarily the latest report.
  const std::optional<v1::ProfileReport>& planned = job.planned ? job.planned : job.profile;
  if (planned) {
    const v1::ProfileReport& p = *planned;
    s.compute_time = core::Duration::Nanos(static_cast<int64_t>(p.compute_time_ns()));
    if (p.flops_per_iteration() > 0)
      s.flops_per_iteration = core::Flops::Of(p.flops_per_iteration());
    s.overlap_start = p.overlap_start();
    s.compression_ratio = p.compression_ratio() > 0 ? p.compression_ratio() : 1.0;
    if (p.peers_size() > 0) {
      // Measured per-peer bytes are on the wire already: no compression on top.
      s.pattern = core::TrafficPattern::kExplicit;
      s.compression_ratio = 1.0;
      std::map<std::pair<uint32_t, uint32_t>, int64_t> merged;
      for (const auto& pb : p.peers()) {
        CRUX_ASSIGN_OR_RETURN(core::NodeId a, topo.FindNode(pb.local_nic()));
        CRUX_ASSIGN_OR_RETURN(core::NodeId b, topo.FindNode(pb.remote_nic()));
        if (pb.bytes() == 0) continue;
        merged[{a.value(), b.value()}] += static_cast<int64_t>(pb.bytes());
      }
      for (const auto& [ab, bytes] : merged) {
        s.flows.push_back(
            {core::NodeId(ab.first), core::NodeId(ab.second), core::Bytes::Of(bytes)});
      }
      if (s.flows.empty()) return std::optional<core::JobSpec>();
      return std::optional<core::JobSpec>(std::move(s));
    }
    if (p.bytes_per_iteration() > 0) pattern_bytes = p.bytes_per_iteration();
  }
  if (pattern_bytes == 0 || s.hosts.size() < 2) return std::optional<core::JobSpec>();
  s.pattern_bytes = core::Bytes::Of(static_cast<int64_t>(pattern_bytes));
  return std::optional<core::JobSpec>(std::move(s));
}

bool SameAssignment(const v1::Assignment& a, const v1::Assignment& b) {
  if (a.job_id() != b.job_id() || a.level() != b.level() || a.dscp() != b.dscp() ||
      a.traffic_class() != b.traffic_class() || a.state() != b.state() ||
      a.flows_size() != b.flows_size() || a.nccl_env_size() != b.nccl_env_size()) {
    return false;
  }
  for (int i = 0; i < a.flows_size(); ++i) {
    const auto& x = a.flows(i);
    const auto& y = b.flows(i);
    if (x.src_nic() != y.src_nic() || x.dst_nic() != y.dst_nic() ||
        x.udp_sport() != y.udp_sport() || x.path_size() != y.path_size()) {
      return false;
    }
    for (int h = 0; h < x.path_size(); ++h) {
      if (x.path(h) != y.path(h)) return false;
    }
  }
  for (const auto& [k, v] : a.nccl_env()) {
    auto it = b.nccl_env().find(k);
    if (it == b.nccl_env().end() || it->second != v) return false;
  }
  return true;
}

PlanResult PlanEngine::Run(const PlanSnapshot& snap) {
  const auto start = std::chrono::steady_clock::now();
  PlanResult out;
  out.reason = snap.reason;
  if (!policy_ || topology_ != snap.topology || version_ != snap.topology_version ||
      options_.levels != snap.options.levels ||
      options_.reserved_high_levels != snap.options.reserved_high_levels ||
      options_.reserved_low_levels != snap.options.reserved_low_levels ||
      options_.topo_orders != snap.options.topo_orders || options_.seed != snap.options.seed ||
      options_.gpu_peak_flops != snap.options.gpu_peak_flops) {
    core::PolicyOptions po;
    po.planner = snap.options;
    po.resolve_ports = true;  // The daemon pins flows: clients need their UDP source ports.
    auto policy = core::MakePolicy("crux", *snap.topology, po);
    if (!policy.ok()) {
      policy_.reset();
      out.ok = false;
      out.error = policy.status().ToString();
      return out;
    }
    policy_ = std::move(policy).value();
    topology_ = snap.topology;
    version_ = snap.topology_version;
    options_ = snap.options;
  }
  const core::Topology& topo = *snap.topology;
  std::vector<core::JobSpec> specs;
  for (const PlanSnapshot::Job& j : snap.jobs) {
    if (!j.spec_error.empty()) {
      out.excluded[j.id] = j.spec_error;
      continue;
    }
    if (!j.spec) continue;
    if (core::Status v = core::ValidateJob(topo, *j.spec); !v.ok()) {
      out.excluded[j.id] = v.message();
      continue;
    }
    specs.push_back(*j.spec);
  }
  auto plan = policy_->Schedule(specs);
  if (!plan.ok()) {
    // Find the jobs the planner refuses on their own (e.g. no path left) and plan without them.
    std::vector<core::JobSpec> kept;
    for (auto& sp : specs) {
      auto alone = policy_->Schedule({sp});
      if (alone.ok()) {
        kept.push_back(std::move(sp));
      } else {
        out.excluded[sp.id] = alone.status().message();
      }
    }
    specs = std::move(kept);
    plan = policy_->Schedule(specs);
  }
  if (!plan.ok()) {
    out.ok = false;
    out.error = plan.status().ToString();
    return out;
  }
  out.plan = std::move(plan).value();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) {
    out.plan_jobs.push_back(specs[i].id);
    index[specs[i].id] = i;
  }
  for (const PlanSnapshot::Job& j : snap.jobs) {
    v1::Assignment a;
    a.set_job_id(j.id);
    a.set_dscp(j.dscp);
    a.set_traffic_class(j.dscp << 2);
    (*a.mutable_nccl_env())["NCCL_IB_TC"] = std::to_string(j.dscp << 2);
    a.set_state(j.state);
    a.set_level(0);
    auto it = index.find(j.id);
    if (it != index.end()) {
      const core::JobPlan& jp = out.plan.jobs[it->second];
      if (j.state == v1::JOB_STATE_SCHEDULED) a.set_level(static_cast<uint32_t>(jp.level));
      for (const core::FlowPlan& f : jp.flows) {
        v1::FlowAssignment* fa = a.add_flows();
        fa->set_src_nic(topo.node(f.src).name);
        fa->set_dst_nic(topo.node(f.dst).name);
        fa->set_udp_sport(f.udp_sport.value_or(0));
        if (!f.path.empty()) fa->add_path(topo.node(topo.link(f.path.front()).src).name);
        for (core::LinkId l : f.path) fa->add_path(topo.node(topo.link(l).dst).name);
      }
    }
    out.desired[j.id] = std::move(a);
  }
  out.replan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

PlannerRunner::PlannerRunner(EventLoop* loop, TopologyManager* topo, JobTracker* tracker,
                             core::PlannerOptions options, core::Duration debounce,
                             Callback on_plan, Executor executor)
    : loop_(loop),
      topo_(topo),
      tracker_(tracker),
      options_(options),
      debounce_(debounce),
      on_plan_(std::move(on_plan)),
      executor_(std::move(executor)),
      async_engine_(std::make_shared<PlanEngine>()),
      mailbox_(std::make_shared<Mailbox>()) {
  mailbox_->loop = loop;
  mailbox_->runner = this;
}

PlannerRunner::~PlannerRunner() {
  std::lock_guard<std::mutex> lock(mailbox_->mu);
  mailbox_->loop = nullptr;
  mailbox_->runner = nullptr;
}

core::Status PlannerRunner::SetOptions(const core::PlannerOptions& o) {
  CRUX_RETURN_IF_ERROR(core::ValidatePlannerOptions(o));
  options_ = o;
  return core::Status::Ok();
}

std::shared_ptr<const PlanSnapshot> PlannerRunner::Snapshot(const std::string& reason) {
  if (!topology_copy_ || topology_copy_version_ != topo_->version()) {
    topology_copy_ = std::make_shared<const core::Topology>(topo_->current());
    topology_copy_version_ = topo_->version();
  }
  auto snap = std::make_shared<PlanSnapshot>();
  snap->topology = topology_copy_;
  snap->topology_version = topology_copy_version_;
  snap->options = options_;
  snap->reason = reason;
  snap->jobs.reserve(tracker_->jobs().size());
  for (const auto& [id, job] : tracker_->jobs()) {
    PlanSnapshot::Job j;
    j.id = id;
    j.dscp = job.dscp;
    j.state = job.state;
    auto spec = BuildJobSpec(*topology_copy_, job);
    if (!spec.ok()) {
      j.spec_error = spec.status().message();
    } else {
      j.spec = std::move(spec).value();
    }
    snap->jobs.push_back(std::move(j));
  }
  return snap;
}

PlanResult PlannerRunner::Compute(const std::string& reason) {
  return sync_engine_.Run(*Snapshot(reason));
}

void PlannerRunner::Request(const std::string& reason) {
  if (reasons_.size() < 16) reasons_.push_back(reason);
  Arm();
}

void PlannerRunner::Arm() {
  if (armed_) return;
  armed_ = true;
  core::Duration wait = debounce_;
  if (last_start_) wait = std::max(wait, *last_start_ + min_interval_ - loop_->Now());
  loop_->RunAfter(wait, [this] { Fire(); });
}

void PlannerRunner::Fire() {
  armed_ = false;
  if (in_flight_) {
    pending_ = true;  // Runs again when the current run is done.
    return;
  }
  std::vector<std::string> reasons;
  reasons.swap(reasons_);
  const auto snap_start = std::chrono::steady_clock::now();
  std::shared_ptr<const PlanSnapshot> snap = Snapshot(Join(reasons));
  const double snap_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - snap_start)
          .count();
  if (snap_ms >= 50) {
    spdlog::info("snapshot of {} jobs took {:.1f} ms on the loop", snap->jobs.size(), snap_ms);
  }
  in_flight_ = true;
  last_start_ = loop_->Now();
  if (!executor_) {
    Done(sync_engine_.Run(*snap));
    return;
  }
  // The work owns everything it touches (engine, snapshot, mailbox): it may outlive the runner.
  executor_([engine = async_engine_, snap, mailbox = mailbox_] {
    auto result = std::make_shared<PlanResult>(engine->Run(*snap));
    std::lock_guard<std::mutex> lock(mailbox->mu);
    if (!mailbox->loop) return;
    mailbox->loop->Post([mailbox, result] {
      PlannerRunner* runner = nullptr;
      {
        std::lock_guard<std::mutex> inner(mailbox->mu);
        runner = mailbox->runner;
      }
      if (runner) runner->Done(std::move(*result));
    });
  });
}

void PlannerRunner::Done(PlanResult r) {
  in_flight_ = false;
  ++runs_;
  if (on_plan_) on_plan_(std::move(r));
  if (pending_) {
    pending_ = false;
    Arm();
  }
}

}  // namespace crux::daemon
