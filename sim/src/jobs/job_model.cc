#include "jobs/job_model.h"

#include <algorithm>
#include <cmath>

namespace crux::sim::internal {
namespace {

uint64_t PairKey(core::NodeId x, core::NodeId y) {
  return (static_cast<uint64_t>(x.value()) << 32) | y.value();
}

core::NodeId Endpoint(const core::Topology& topo, core::NodeId host, int gpu, int gpus_per_host) {
  const std::vector<core::NodeId>& nics = topo.NicsOf(host);
  if (nics.empty()) return host;
  return nics[core::GpuNicIndex(static_cast<uint32_t>(gpu), static_cast<uint32_t>(gpus_per_host),
                                nics.size())];
}

// The constant part of a phase-level job (ValidateSimInput checked the model against its hosts).
std::shared_ptr<const PhaseModel> MakePhaseModel(const core::Topology& topo, const SimJob& job) {
  auto pm = std::make_shared<PhaseModel>();
  const core::IterationModel& m = *job.iteration;
  pm->model = &m;
  const int n_seg = static_cast<int>(m.segments.size());
  const int n_ops = static_cast<int>(m.ops.size());
  pm->waiting.assign(static_cast<size_t>(n_seg) + 1, 0);
  pm->issue_after.assign(static_cast<size_t>(n_seg) + 1, {});
  pm->paced_in.assign(static_cast<size_t>(n_seg), {});
  pm->dependents.assign(static_cast<size_t>(n_ops), {});
  pm->window.assign(static_cast<size_t>(n_ops), Duration::Zero());
  pm->pairs.assign(static_cast<size_t>(n_ops), {});
  for (int seg = 0; seg < n_seg; ++seg) {
    if (m.segments[static_cast<size_t>(seg)].busy) pm->last_busy = seg;
  }
  for (int i = 0; i < n_ops; ++i) {
    const core::CommOp& o = m.ops[static_cast<size_t>(i)];
    ++pm->waiting[static_cast<size_t>(o.needed_before)];
    pm->issue_after[static_cast<size_t>(o.issue_after + 1)].push_back(i);
    if (o.after_op >= 0) pm->dependents[static_cast<size_t>(o.after_op)].push_back(i);
    Duration w;
    for (int seg = o.issue_after + 1; seg < o.needed_before; ++seg) {
      if (o.pacing == core::Pacing::kPaced) {
        pm->paced_in[static_cast<size_t>(seg)].push_back({i, w});
      }
      w += m.segments[static_cast<size_t>(seg)].duration;
    }
    pm->window[static_cast<size_t>(i)] = w;
    for (const core::RailFlow& f : o.flows) {
      const core::NodeId src = Endpoint(topo, job.spec.hosts[static_cast<size_t>(f.src_host)],
                                        f.src_gpu, m.layout.gpus_per_host);
      const core::NodeId dst = Endpoint(topo, job.spec.hosts[static_cast<size_t>(f.dst_host)],
                                        f.dst_gpu, m.layout.gpus_per_host);
      pm->pairs[static_cast<size_t>(i)].push_back(PairKey(src, dst));
    }
  }
  return pm;
}

// When instance k of n of a paced op with window compute w is released: floor(k w / n) ns into
// the window (exact without overflow: w = q n + r, k w / n = k q + k r / n, 0 <= k <= n).
int64_t PacedAt(int64_t k, int64_t n, int64_t w) { return k * (w / n) + k * (w % n) / n; }

}  // namespace

JobModel::JobModel(const core::Topology& topo, const std::vector<SimJob>& jobs,
                   const SimOptions& options, const engine::SimClock& clock, Fabric& fabric,
                   Metrics& metrics, SimResult& result, JobListener& listener)
    : clock_(clock),
      fabric_(fabric),
      metrics_(metrics),
      result_(result),
      listener_(listener),
      horizon_(options.horizon),
      alpha_(options.per_hop_latency),
      spray_(options.spray) {
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
    if (in.iteration && !options.single_overlap) {
      s.phases = MakePhaseModel(topo, in);
      s.compute = Duration::Zero();
      for (const core::ComputeSegment& seg : in.iteration->segments) {
        if (seg.busy) s.compute += seg.duration;
      }
    }
  }
}

void JobModel::Push(Duration at, uint32_t j, JobEventKind kind, uint32_t flow) {
  events_.Push(at, JobEvent{j, js_[j].gen, flow, kind});
}

void JobModel::SetRunning(uint32_t j) {
  js_[j].status = JobStatus::kRunning;
  running_.insert(std::lower_bound(running_.begin(), running_.end(), j), j);
}

void JobModel::NewEpoch() {
  ++epoch_;
  old_in_flight_ = 0;
  for (uint32_t j : running_) {
    JobState& s = js_[j];
    for (FlowRun& run : s.flows) {
      if (run.status == FlowStatus::kDone) continue;
      if (s.asleep) {
        run.epoch = epoch_;  // A sleeping group sleeps on with its plans: its flows are current.
      } else {
        ++old_in_flight_;
      }
    }
  }
}

void JobModel::ShiftJobs(std::span<const uint32_t> jobs, Duration d) {
  // Their flows move together (flows of one path and level share one clock in the network).
  std::vector<FluidNetwork::FlowId> in_network;
  for (uint32_t j : jobs) {
    JobState& s = js_[j];
    s.slept += d;
    s.iter_start += d;
    s.compute_end += d;
    s.comm_start += d;
    s.phase_run.seg_start += d;
    s.phase_run.seg_end += d;
    for (FlowRun& run : s.flows) {
      if (run.status == FlowStatus::kInNetwork) in_network.push_back(run.id);
      if (run.status == FlowStatus::kDelivering) run.deliver_at += d;
      run.reported_at += d;
      run.progress_at += d;
    }
  }
  fabric_.net().ShiftFlows(in_network, d);
  events_.ShiftIf(
      [jobs](const JobEvent& e) { return std::binary_search(jobs.begin(), jobs.end(), e.job); }, d);
}

void JobModel::StartIteration(uint32_t j) {
  JobState& s = js_[j];
  const Duration now = clock_.Now();
  if (s.phases) {
    StartPhases(j);
    return;
  }
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
  if (s.profiler) s.profiler->BeginIteration(ProfilerTime(s));
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
      if (s.phases) {
        // The time shift that held the first segment is over.
        s.phase_run.held = false;
        s.comm_started = true;
        SegmentEnded(e.job, -1);
        TryStartSegment(e.job);
      } else {
        OnCommStart(e.job);
      }
      break;
    case JobEventKind::kSegmentEnd:
      EndSegment(e.job);
      TryStartSegment(e.job);
      break;
    case JobEventKind::kRelease:
      ReleaseDue(e.job, static_cast<int>(e.flow));
      TryStartSegment(e.job);
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
  if (s.profiler) s.profiler->ComputeEnd(ProfilerTime(s));
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
    run.size = run.bytes;
    run.plan_flow = static_cast<uint32_t>(f);
    if (run.bytes <= 0 || s.plan_resources[f].empty()) {
      run.status = FlowStatus::kDone;
      continue;
    }
    metrics_.Sent(run.bytes);
    s.bytes_sent += run.bytes;
    if (s.profiler && f < s.peer_of.size()) {
      s.profiler->CommStart(ProfilerTime(s), s.peer_of[f], s.plan_flows[f].bytes.count());
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
    FlowWindow& w = WindowOf(s, run.plan_flow);
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
  if (run.epoch != epoch_ && --old_in_flight_ == 0) listener_.OnOldFlowsDone();
  metrics_.Delivered(run.bytes);
  if (s.phases) {
    FlowDone(j, f);
    TryStartSegment(j);
    return;
  }
  if (s.profiler && f < s.peer_of.size()) s.profiler->CommEnd(ProfilerTime(s), s.peer_of[f]);
  if (--s.outstanding == 0) {
    s.comm_done = true;
    MaybeEndIteration(j);
  }
}

void JobModel::MaybeEndIteration(uint32_t j) {
  JobState& s = js_[j];
  if (s.computing || !s.comm_done) return;
  EndIteration(j);
}

void JobModel::EndIteration(uint32_t j) {
  JobState& s = js_[j];
  ++s.iterations;
  ++s.epoch_iterations;
  s.iteration_time_sum += clock_.Now() - s.iter_start;
  if (s.iteration_limit && s.iterations >= *s.iteration_limit) {
    Depart(j, /*at_horizon=*/false);
    return;
  }
  if (s.profiler) s.profiler->EndIteration(ProfilerTime(s));
  listener_.OnIterationEnd(j);
  StartIteration(j);
}

void JobModel::Depart(uint32_t j, bool at_horizon) {
  JobState& s = js_[j];
  if (s.status != JobStatus::kRunning) return;
  const Duration now = clock_.Now();
  const Duration end = std::min(now, horizon_);
  PhaseRun& r = s.phase_run;
  if (s.phases && r.running >= 0 &&
      s.phases->model->segments[static_cast<size_t>(r.running)].busy) {
    const Duration stop = std::min(end, r.seg_end);
    if (stop > r.seg_start) {
      s.compute_busy += stop - r.seg_start;
      metrics_.AddBusy(r.seg_start, stop, s.gpus);
    }
    r.running = -1;
  }
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
  running_.erase(std::lower_bound(running_.begin(), running_.end(), j));
  ++s.gen;  // Invalidates its pending events.
  if (!at_horizon) s.finish = end;
  metrics_.AddLifetime(s.arrival, end, s.gpus);
  if (!at_horizon) listener_.OnDeparture(j);
}

// ---- Phases ----

void JobModel::StartPhases(uint32_t j) {
  JobState& s = js_[j];
  const PhaseModel& pm = *s.phases;
  PhaseRun& r = s.phase_run;
  const Duration now = clock_.Now();
  ++s.gen;
  s.iter_start = now;
  s.computing = false;
  s.comm_done = false;
  s.outstanding = 0;
  s.flows.clear();
  r.running = -1;
  r.last_ended = -1;
  r.ended = false;
  r.waiting = pm.waiting;
  r.ops.assign(pm.model->ops.size(), PhaseRun::Op{});
  r.instances.clear();
  r.free_instances.clear();
  r.free_flows.clear();
  if (s.profiler) s.profiler->BeginIteration(ProfilerTime(s));
  // A pending time shift (CASSINI) holds the whole schedule once: the iteration idles first.
  s.comm_start = now + s.pending_shift;
  s.pending_shift = Duration::Zero();
  r.held = s.comm_start > now;
  s.comm_started = !r.held;
  listener_.OnIterationStart(j);
  if (r.held) {
    Push(s.comm_start, j, JobEventKind::kCommStart);
    return;
  }
  SegmentEnded(j, -1);
  TryStartSegment(j);
}

// Starts segments while the next one waits for nothing; the iteration ends after the last.
void JobModel::TryStartSegment(uint32_t j) {
  JobState& s = js_[j];
  PhaseRun& r = s.phase_run;
  const int n_seg = static_cast<int>(s.phases->model->segments.size());
  while (s.status == JobStatus::kRunning && !r.held && r.running < 0 && !r.ended) {
    const int next = r.last_ended + 1;
    if (r.waiting[static_cast<size_t>(next)] > 0) return;
    if (next == n_seg) {
      r.ended = true;
      if (s.profiler && s.phases->last_busy < 0) s.profiler->ComputeEnd(ProfilerTime(s));
      s.comm_done = true;
      EndIteration(j);  // May start the next iteration (its own machine runs from there).
      return;
    }
    StartSegment(j, next);
  }
}

void JobModel::StartSegment(uint32_t j, int seg) {
  JobState& s = js_[j];
  const PhaseModel& pm = *s.phases;
  PhaseRun& r = s.phase_run;
  const Duration now = clock_.Now();
  const Duration d = pm.model->segments[static_cast<size_t>(seg)].duration;
  r.running = seg;
  r.seg_start = now;
  r.seg_end = now + d;
  s.computing = pm.model->segments[static_cast<size_t>(seg)].busy;
  if (d <= Duration::Zero()) {
    EndSegment(j);
    return;
  }
  // Paced releases that fall inside this segment: instance k of n at k / n of the window.
  for (const PhaseModel::PacedWindow& pw : pm.paced_in[static_cast<size_t>(seg)]) {
    const int64_t w = pm.window[static_cast<size_t>(pw.op)].nanos();
    const int64_t n = pm.model->ops[static_cast<size_t>(pw.op)].instances;
    if (w <= 0) continue;
    const int64_t off = pw.offset.nanos();
    int64_t k =
        std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(off) / static_cast<double>(w) *
                                                 static_cast<double>(n)),
                            0, n);
    while (k > 0 && PacedAt(k - 1, n, w) >= off) --k;
    while (k < n && PacedAt(k, n, w) < off) ++k;
    for (; k < n; ++k) {
      const int64_t at = PacedAt(k, n, w);
      if (at >= off + d.nanos()) break;
      Push(now + Duration::Nanos(at - off), j, JobEventKind::kRelease,
           static_cast<uint32_t>(pw.op));
    }
  }
  Push(r.seg_end, j, JobEventKind::kSegmentEnd);
}

void JobModel::EndSegment(uint32_t j) {
  JobState& s = js_[j];
  const PhaseModel& pm = *s.phases;
  PhaseRun& r = s.phase_run;
  const int seg = r.running;
  if (pm.model->segments[static_cast<size_t>(seg)].busy && r.seg_end > r.seg_start) {
    s.compute_busy += r.seg_end - r.seg_start;
    metrics_.AddBusy(r.seg_start, r.seg_end, s.gpus);
  }
  s.computing = false;
  r.running = -1;
  r.last_ended = seg;
  if (s.profiler && seg == pm.last_busy) s.profiler->ComputeEnd(ProfilerTime(s));
  SegmentEnded(j, seg);
}

// Segment `seg` ended (-1: the iteration started): the ops issued after it may start.
void JobModel::SegmentEnded(uint32_t j, int seg) {
  JobState& s = js_[j];
  for (int op : s.phases->issue_after[static_cast<size_t>(seg + 1)]) {
    s.phase_run.ops[static_cast<size_t>(op)].issued = true;
    IssueOp(j, op);
  }
}

bool JobModel::OpReady(const JobState& s, int op) const {
  const core::CommOp& o = s.phases->model->ops[static_cast<size_t>(op)];
  return s.phase_run.ops[static_cast<size_t>(op)].issued &&
         (o.after_op < 0 || s.phase_run.ops[static_cast<size_t>(o.after_op)].done);
}

// The op's start condition may have become true: a burst (or a paced op with an empty window)
// releases every instance; a paced op releases those whose time came while it was not ready.
void JobModel::IssueOp(uint32_t j, int op) {
  JobState& s = js_[j];
  if (!OpReady(s, op)) return;
  const core::CommOp& o = s.phases->model->ops[static_cast<size_t>(op)];
  PhaseRun::Op& st = s.phase_run.ops[static_cast<size_t>(op)];
  if (o.pacing == core::Pacing::kBurst || s.phases->window[static_cast<size_t>(op)].nanos() <= 0) {
    if (st.released > 0) return;
    for (int k = 0; k < o.instances; ++k) ReleaseInstance(j, op);
    return;
  }
  const int deferred = st.deferred;
  st.deferred = 0;
  for (int k = 0; k < deferred; ++k) ReleaseInstance(j, op);
}

// A paced release is due now.
void JobModel::ReleaseDue(uint32_t j, int op) {
  JobState& s = js_[j];
  if (OpReady(s, op)) {
    ReleaseInstance(j, op);
  } else {
    ++s.phase_run.ops[static_cast<size_t>(op)].deferred;
  }
}

const std::vector<uint32_t>* JobModel::PlanFlowsFor(JobState& s, uint64_t pair) {
  PhaseRun& r = s.phase_run;
  if (r.pair_version != s.plan_version) {
    r.pair_flows.clear();
    for (size_t f = 0; f < s.plan_flows.size(); ++f) {
      r.pair_flows[PairKey(s.plan_flows[f].src, s.plan_flows[f].dst)].push_back(
          static_cast<uint32_t>(f));
    }
    r.pair_version = s.plan_version;
  }
  auto it = r.pair_flows.find(pair);
  return it == r.pair_flows.end() ? nullptr : &it->second;
}

// Starts one instance of `op`: each rail flow on the plan's path of its NIC pair (the k-th
// instance on the (k mod n)-th of n plan flows of that pair), at the job's level.
void JobModel::ReleaseInstance(uint32_t j, int op) {
  JobState& s = js_[j];
  PhaseRun& r = s.phase_run;
  const core::CommOp& o = s.phases->model->ops[static_cast<size_t>(op)];
  FluidNetwork& net = fabric_.net();
  const Duration now = clock_.Now();
  const int number = r.ops[static_cast<size_t>(op)].released++;
  uint32_t inst = 0;
  if (!r.free_instances.empty()) {
    inst = r.free_instances.back();
    r.free_instances.pop_back();
  } else {
    inst = static_cast<uint32_t>(r.instances.size());
    r.instances.emplace_back();
  }
  r.instances[inst] = PhaseRun::Instance{static_cast<uint32_t>(op), 0};
  int outstanding = 0;
  for (size_t k = 0; k < o.flows.size(); ++k) {
    const double rail_bytes = o.flows[k].bytes.ToDouble();
    if (!(rail_bytes > 0)) continue;
    const std::vector<uint32_t>* cands =
        PlanFlowsFor(s, s.phases->pairs[static_cast<size_t>(op)][k]);
    if (cands == nullptr || cands->empty()) continue;  // The plan has no flow for the pair.
    // Sprayed (SimOptions::spray): the rail flow goes on every plan flow of its pair (one per
    // equal-cost path), an equal share on each; else on one of them.
    const size_t shares = spray_ ? cands->size() : 1;
    for (size_t c = 0; c < shares; ++c) {
      const uint32_t pf =
          spray_ ? (*cands)[c] : (*cands)[static_cast<size_t>(number) % cands->size()];
      const double bytes = rail_bytes / static_cast<double>(shares);
      if (s.plan_resources[pf].empty()) continue;
      uint32_t f = 0;
      if (!r.free_flows.empty()) {
        f = r.free_flows.back();
        r.free_flows.pop_back();
      } else {
        f = static_cast<uint32_t>(s.flows.size());
        s.flows.emplace_back();
      }
      FlowRun& run = s.flows[f];
      run = FlowRun{};
      run.bytes = bytes;
      run.size = bytes;
      run.plan_flow = pf;
      run.instance = inst;
      // Sprayed: the sub-flow's share in the low 12 bits (distinct keys for up to 4,096 shares).
      run.key = (static_cast<uint64_t>(op) << 48) | (static_cast<uint64_t>(number) << 24) |
                (spray_ ? (k << 12) | (c & 0xfff) : k);
      run.epoch = epoch_;
      run.status = FlowStatus::kInNetwork;
      if (telemetry_) {  // As OnCommStart: the flow reports in its pin's sample.
        run.report = pf < s.report_flow.size() && s.report_flow[pf];
        run.reported_at = now;
        run.progress_at = now;
      }
      metrics_.Sent(bytes);
      s.bytes_sent += bytes;
      if (s.profiler && pf < s.peer_of.size()) {
        s.profiler->CommStart(
            ProfilerTime(s), s.peer_of[pf],
            spray_ ? static_cast<int64_t>(std::llround(bytes)) : o.flows[k].bytes.count());
      }
      run.id = net.AddFlow(s.plan_resources[pf], s.level, bytes, now,
                           (static_cast<uint64_t>(j) << 32) | f);
      ++outstanding;
    }
  }
  r.instances[inst].outstanding = outstanding;
  result_.peak_active_flows = std::max<uint64_t>(result_.peak_active_flows, net.active_flows());
  if (outstanding == 0) {
    r.free_instances.push_back(inst);
    CompleteInstance(j, op);
  }
}

void JobModel::CompleteInstance(uint32_t j, int op) {
  JobState& s = js_[j];
  const PhaseModel& pm = *s.phases;
  PhaseRun::Op& st = s.phase_run.ops[static_cast<size_t>(op)];
  ++st.completed;
  const core::CommOp& o = pm.model->ops[static_cast<size_t>(op)];
  if (st.completed < o.instances) return;
  st.done = true;
  --s.phase_run.waiting[static_cast<size_t>(o.needed_before)];
  for (int d : pm.dependents[static_cast<size_t>(op)]) IssueOp(j, d);
}

// Flow slot `f` of a phase-level job was delivered.
void JobModel::FlowDone(uint32_t j, uint32_t f) {
  JobState& s = js_[j];
  PhaseRun& r = s.phase_run;
  const FlowRun& run = s.flows[f];
  if (s.profiler && run.plan_flow < s.peer_of.size()) {
    s.profiler->CommEnd(ProfilerTime(s), s.peer_of[run.plan_flow]);
  }
  const uint32_t inst = run.instance;
  r.free_flows.push_back(f);
  PhaseRun::Instance& in = r.instances[inst];
  if (--in.outstanding > 0) return;
  r.free_instances.push_back(inst);
  CompleteInstance(j, static_cast<int>(in.op));
}

FlowWindow& JobModel::WindowOf(JobState& s, uint32_t f) {
  const core::FlowPlan& fp = s.plan_flows[f];
  const uint16_t sport = f < s.plan_sport.size() ? s.plan_sport[f] : 0;
  FlowWindow& w = s.window[{(static_cast<uint64_t>(fp.src.value()) << 32) | fp.dst.value(), sport}];
  w.src = fp.src;
  w.dst = fp.dst;
  w.sport = sport;
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
    if (!run.report || run.status != FlowStatus::kInNetwork ||
        run.plan_flow >= s.plan_flows.size()) {
      continue;
    }
    const double moved = std::max(0.0, run.bytes - net.Remaining(run.id, now));
    const double delta = std::max(0.0, moved - run.reported);
    FlowWindow& w = WindowOf(s, run.plan_flow);
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
