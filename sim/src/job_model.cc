#include "job_model.h"

#include <algorithm>
#include <cmath>

namespace crux::sim::internal {

JobModel::JobModel(const std::vector<SimJob>& jobs, const SimOptions& options,
                   const engine::SimClock& clock, Fabric& fabric, Metrics& metrics,
                   SimResult& result, JobListener& listener)
    : clock_(clock),
      fabric_(fabric),
      metrics_(metrics),
      result_(result),
      listener_(listener),
      horizon_(options.horizon),
      alpha_(options.per_hop_latency) {
  js_.resize(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const SimJob& in = jobs[j];
    JobState& s = js_[j];
    s.job = &in;
    s.gpus = in.spec.gpus();
    s.arrival = in.arrival;
    s.compute = in.spec.compute_time;
    s.overlap = Duration::Nanos(static_cast<int64_t>(
        std::llround(in.spec.overlap_start * static_cast<double>(s.compute.nanos()))));
    if (in.iterations) s.iteration_limit = *in.iterations;
  }
}

void JobModel::Push(Duration at, uint32_t j, JobEventKind kind, uint32_t flow) {
  events_.Push(at, JobEvent{j, js_[j].gen, flow, kind});
}

void JobModel::NewEpoch() {
  ++epoch_;
  old_in_flight_ = 0;
  for (const JobState& s : js_) {
    if (s.status != JobStatus::kRunning) continue;
    for (const FlowRun& run : s.flows) {
      if (run.status != FlowStatus::kDone) ++old_in_flight_;
    }
  }
}

void JobModel::Shift(Duration d) {
  for (JobState& s : js_) {
    if (s.status != JobStatus::kRunning) continue;
    s.iter_start += d;
    s.compute_end += d;
    s.comm_start += d;
    for (FlowRun& run : s.flows) {
      if (run.status == FlowStatus::kDelivering) run.deliver_at += d;
      run.reported_at += d;
      run.progress_at += d;
    }
  }
  events_.Shift(d);
}

void JobModel::StartIteration(uint32_t j) {
  JobState& s = js_[j];
  const Duration now = clock_.Now();
  ++s.gen;
  s.iter_start = now;
  s.computing = true;
  s.compute_end = now + s.compute;
  Push(s.compute_end, j, JobEventKind::kComputeDone);
  s.comm_start = now + s.overlap + s.pending_shift;
  s.pending_shift = Duration::Zero();
  s.comm_started = false;
  s.comm_done = false;
  s.outstanding = 0;
  s.flows.clear();
  if (s.profiler) s.profiler->BeginIteration(ProfilerTime());
  Push(s.comm_start, j, JobEventKind::kCommStart);
  listener_.OnIterationStart(j);
}

bool JobModel::Handle(const JobEvent& e) {
  JobState& s = js_[e.job];
  if (s.status != JobStatus::kRunning || s.gen != e.gen) return false;
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
  return true;
}

void JobModel::OnComputeDone(uint32_t j) {
  JobState& s = js_[j];
  s.computing = false;
  s.compute_busy += s.compute_end - s.iter_start;
  metrics_.AddBusy(s.iter_start, s.compute_end, s.gpus);
  if (s.profiler) s.profiler->ComputeEnd(ProfilerTime());
  MaybeEndIteration(j);
}

void JobModel::OnCommStart(uint32_t j) {
  JobState& s = js_[j];
  FluidNetwork& net = fabric_.net();
  s.comm_started = true;
  s.flows.assign(s.plan_flows.size(), FlowRun{});
  for (size_t f = 0; f < s.plan_flows.size(); ++f) {
    FlowRun& run = s.flows[f];
    run.bytes = s.plan_flows[f].bytes.ToDouble();
    if (run.bytes <= 0 || s.plan_resources[f].empty()) {
      run.status = FlowStatus::kDone;
      continue;
    }
    metrics_.Sent(run.bytes);
    s.bytes_sent += run.bytes;
    if (s.profiler && f < s.peer_of.size()) {
      s.profiler->CommStart(ProfilerTime(), s.peer_of[f], s.plan_flows[f].bytes.count());
    }
    run.epoch = epoch_;
    run.status = FlowStatus::kInNetwork;
    if (telemetry_) {
      run.report = f < s.report_flow.size() && s.report_flow[f];
      run.reported = 0;
      run.reported_at = clock_.Now();
      run.progress_at = clock_.Now();
    }
    run.id = net.AddFlow(s.plan_resources[f], s.level, run.bytes, clock_.Now(),
                         (static_cast<uint64_t>(j) << 32) | f);
    ++s.outstanding;
  }
  result_.peak_active_flows = std::max<uint64_t>(result_.peak_active_flows, net.active_flows());
  if (s.outstanding == 0) {
    s.comm_done = true;
    MaybeEndIteration(j);
  }
}

void JobModel::AccountFlowBits(uint32_t j, FluidNetwork::FlowId id, double transmitted) {
  std::vector<double>& job_bits = js_[j].class_bits;
  job_bits.resize(metrics_.num_classes(), 0.0);
  for (ResourceId r : fabric_.net().Resources(id)) {
    const int c = metrics_.ClassOf(fabric_.LinkOf(r));
    metrics_.AddClassBits(c, transmitted * 8.0);
    job_bits[c] += transmitted * 8.0;
  }
}

void JobModel::OnFlowFinished(uint64_t tag, double transmitted) {
  ++result_.flow_events;
  const uint32_t j = static_cast<uint32_t>(tag >> 32);
  const uint32_t f = static_cast<uint32_t>(tag & 0xffffffffu);
  JobState& s = js_[j];
  FlowRun& run = s.flows[f];
  AccountFlowBits(j, run.id, transmitted);
  if (telemetry_ && run.report) {
    FlowWindow& w = WindowOf(s, f);
    w.bytes += std::max(0.0, transmitted - run.reported);
    w.time += clock_.Now() - run.reported_at;
    run.reported = transmitted;
    run.reported_at = clock_.Now();
  }
  const int64_t hops = static_cast<int64_t>(fabric_.net().Resources(run.id).size());
  run.bytes = transmitted;
  if (alpha_ == Duration::Zero()) {
    OnDeliver(j, f);
    return;
  }
  run.status = FlowStatus::kDelivering;
  run.deliver_at = clock_.Now() + Duration::Nanos(hops * alpha_.nanos());
  Push(run.deliver_at, j, JobEventKind::kDeliver, f);
}

void JobModel::OnDeliver(uint32_t j, uint32_t f) {
  JobState& s = js_[j];
  FlowRun& run = s.flows[f];
  run.status = FlowStatus::kDone;
  if (run.epoch != epoch_) --old_in_flight_;
  metrics_.Delivered(run.bytes);
  if (s.profiler && f < s.peer_of.size()) s.profiler->CommEnd(ProfilerTime(), s.peer_of[f]);
  if (--s.outstanding == 0) {
    s.comm_done = true;
    MaybeEndIteration(j);
  }
}

void JobModel::MaybeEndIteration(uint32_t j) {
  JobState& s = js_[j];
  if (s.computing || !s.comm_done) return;
  ++s.iterations;
  ++s.epoch_iterations;
  s.iteration_time_sum += clock_.Now() - s.iter_start;
  if (s.iteration_limit && s.iterations >= *s.iteration_limit) {
    Depart(j, /*at_horizon=*/false);
    return;
  }
  if (s.profiler) s.profiler->EndIteration(ProfilerTime());
  listener_.OnIterationEnd(j);
  StartIteration(j);
}

void JobModel::Depart(uint32_t j, bool at_horizon) {
  JobState& s = js_[j];
  if (s.status != JobStatus::kRunning) return;
  const Duration now = clock_.Now();
  const Duration end = std::min(now, horizon_);
  if (s.computing) {
    const Duration stop = std::min(end, s.compute_end);
    if (stop > s.iter_start) {
      s.compute_busy += stop - s.iter_start;
      metrics_.AddBusy(s.iter_start, stop, s.gpus);
    }
    s.computing = false;
  }
  for (FlowRun& run : s.flows) {
    if (run.status == FlowStatus::kInNetwork) {
      const double transmitted = fabric_.net().RemoveFlow(run.id, now);
      AccountFlowBits(j, run.id, transmitted);
      metrics_.InFlight(run.bytes);
    } else if (run.status == FlowStatus::kDelivering) {
      metrics_.InFlight(run.bytes);
    }
    if (run.status != FlowStatus::kDone && run.epoch != epoch_) --old_in_flight_;
    run.status = FlowStatus::kDone;
  }
  s.status = JobStatus::kDone;
  ++s.gen;  // Invalidates its pending events.
  if (!at_horizon) s.finish = end;
  metrics_.AddLifetime(s.arrival, end, s.gpus);
  if (!at_horizon) listener_.OnDeparture(j);
}

FlowWindow& JobModel::WindowOf(JobState& s, uint32_t f) {
  const core::FlowPlan& fp = s.plan_flows[f];
  FlowWindow& w = s.window[(static_cast<uint64_t>(fp.src.value()) << 32) | fp.dst.value()];
  w.src = fp.src;
  w.dst = fp.dst;
  w.sport = f < s.plan_sport.size() ? s.plan_sport[f] : 0;
  if (w.path.empty()) w.path = fp.path;
  return w;
}

std::vector<ReportedFlow> JobModel::TakeFlowSamples(uint32_t j, Duration stall_timeout) {
  JobState& s = js_[j];
  const Duration now = clock_.Now();
  std::vector<ReportedFlow> out;
  if (s.status != JobStatus::kRunning) {
    s.window.clear();
    return out;
  }
  FluidNetwork& net = fabric_.net();
  for (uint32_t f = 0; f < s.flows.size(); ++f) {
    FlowRun& run = s.flows[f];
    if (!run.report || run.status != FlowStatus::kInNetwork || f >= s.plan_flows.size()) continue;
    const double moved = std::max(0.0, run.bytes - net.Remaining(run.id, now));
    const double delta = std::max(0.0, moved - run.reported);
    FlowWindow& w = WindowOf(s, f);
    w.bytes += delta;
    w.time += now - run.reported_at;
    // Less than a byte in the window: no progress. A transport times out only when its packets
    // are lost, i.e. on a link that is physically down; a flow starved by higher levels or
    // congestion is paused (lossless RoCE with PFC) and reports nothing.
    if (delta >= 1.0) {
      run.progress_at = now;
    } else if (now - run.progress_at >= stall_timeout && fabric_.Stalled(net.Resources(run.id))) {
      ++w.errors;
    }
    run.reported = moved;
    run.reported_at = now;
  }
  for (auto& [key, w] : s.window) {
    (void)key;
    // A flow that moved nothing without timing out yet says nothing (starved for a moment by a
    // higher level, or just started).
    if (w.bytes < 1.0 && w.errors == 0) continue;
    ReportedFlow r;
    r.sample.src_nic = w.src;
    r.sample.dst_nic = w.dst;
    r.sample.udp_sport = w.sport;
    r.sample.bytes = core::Bytes::Of(static_cast<int64_t>(w.bytes));
    r.sample.transfer_time = w.bytes >= 1.0 ? std::max(w.time, Duration::Nanos(1)) : w.time;
    r.sample.errors = w.errors;
    r.path = std::move(w.path);
    out.push_back(std::move(r));
  }
  s.window.clear();
  return out;
}

}  // namespace crux::sim::internal
