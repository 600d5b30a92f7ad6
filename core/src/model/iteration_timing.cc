// Standalone timing of a multi-phase iteration; see iteration_timing.h for the rules.
#include "crux/core/model/iteration_timing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "iteration_timing_internal.h"

namespace crux::core {

using timing_internal::OpWork;
using timing_internal::TimeWithWork;
using timing_internal::ValidateNetwork;

namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// ---- Network work ----

int NicOf(int gpu, int gpus_per_host, int nics) {
  return static_cast<int>(GpuNicIndex(
      static_cast<uint32_t>(gpu), static_cast<uint32_t>(gpus_per_host), static_cast<size_t>(nics)));
}

// Bytes per NIC and direction: [host * nics + nic] for egress, then the same for ingress.
class NicBytes {
 public:
  NicBytes(const IterationModel& m, int nics)
      : g_(m.layout.gpus_per_host),
        nics_(nics),
        bytes_(2 * static_cast<size_t>(m.layout.hosts()) * static_cast<size_t>(nics), 0.0) {}

  void Add(const std::vector<RailFlow>& flows, double times) {
    const size_t half = bytes_.size() / 2;
    for (const RailFlow& f : flows) {
      const double b = f.bytes.ToDouble() * times;
      bytes_[Index(f.src_host, f.src_gpu)] += b;
      bytes_[half + Index(f.dst_host, f.dst_gpu)] += b;
    }
  }
  double Max() const {
    double mx = 0;
    for (double b : bytes_) mx = std::max(mx, b);
    return mx;
  }

 private:
  size_t Index(int host, int gpu) const {
    return static_cast<size_t>(host) * static_cast<size_t>(nics_) +
           static_cast<size_t>(NicOf(gpu, g_, nics_));
  }
  int g_;
  int nics_;
  std::vector<double> bytes_;
};

double InstanceSeconds(const IterationModel& m, const CommOp& op, const HostNetwork& net) {
  NicBytes bytes(m, net.nics_per_host);
  bytes.Add(op.flows, 1.0);
  return bytes.Max() * 8.0 / net.nic_bandwidth.ToBitsPerSec();
}

// ---- The clock ----

constexpr double kTimeEps = 1e-12;

// The event-driven standalone timing (header). Times in double seconds. Transfers share the
// NICs by processor sharing, kept in virtual time: every active transfer has received the same
// service `virtual_` since it started, so a min-heap of finish points gives the next completion
// in O(log n) whatever the number of transfers in flight.
class IterationClock {
 public:
  // Segment durations are multiplied by compute_scale (calibration scales the compute without
  // copying the model).
  IterationClock(const IterationModel& m, const std::vector<double>& work, double scale,
                 double compute_scale)
      : m_(m), work_(work), scale_(scale), compute_scale_(compute_scale) {}

  Result<IterationTiming> Run() {
    const int n_seg = static_cast<int>(m_.segments.size());
    const int n_ops = static_cast<int>(m_.ops.size());
    seg_start_.assign(static_cast<size_t>(n_seg), -1);
    seg_end_.assign(static_cast<size_t>(n_seg), -1);
    op_.assign(static_cast<size_t>(n_ops), OpState{});
    waiting_.assign(static_cast<size_t>(n_seg) + 1, 0);
    issue_after_.assign(static_cast<size_t>(n_seg) + 1, {});
    paced_in_.assign(static_cast<size_t>(n_seg), {});
    dependents_.assign(static_cast<size_t>(n_ops), {});
    for (int i = 0; i < n_ops; ++i) {
      const CommOp& o = m_.ops[static_cast<size_t>(i)];
      if (o.issue_after < -1 || o.issue_after >= n_seg || o.needed_before < 0 ||
          o.needed_before > n_seg || o.needed_before <= o.issue_after || o.after_op >= i ||
          o.after_op < -1 || o.instances < 1) {
        return InvalidArgumentError("ops[" + std::to_string(i) + "] (" + o.name +
                                    "): bad window or dependency");
      }
      ++waiting_[static_cast<size_t>(o.needed_before)];
      issue_after_[static_cast<size_t>(o.issue_after + 1)].push_back(i);
      if (o.after_op >= 0) dependents_[static_cast<size_t>(o.after_op)].push_back(i);
      // Window compute of paced ops, and where each window segment starts inside it.
      double w = 0;
      for (int seg = o.issue_after + 1; seg < o.needed_before; ++seg) {
        if (o.pacing == Pacing::kPaced) paced_in_[static_cast<size_t>(seg)].push_back({i, w});
        w += SegSeconds(seg);
      }
      op_[static_cast<size_t>(i)].window = w;
    }
    SegmentEnded(-1);  // Iteration start.
    while (true) {
      TryStartSegment();
      if (done_) break;
      // Next event.
      double next = std::numeric_limits<double>::infinity();
      if (running_ >= 0) next = std::min(next, seg_end_[static_cast<size_t>(running_)]);
      if (!releases_.empty()) next = std::min(next, releases_.top().time);
      if (!active_.empty()) {
        next = std::min(next, now_ + (active_.top().finish - virtual_) *
                                         static_cast<double>(active_.size()) / scale_);
      }
      if (!std::isfinite(next)) {
        return InternalError(
            "iteration cannot complete: an op waits for a segment after the "
            "one that needs it");
      }
      Advance(next);
    }
    IterationTiming out;
    out.iteration = Duration::Seconds(now_);
    double busy = 0;
    double idle = 0;
    for (size_t seg = 0; seg < m_.segments.size(); ++seg) {
      (m_.segments[seg].busy ? busy : idle) += SegSeconds(static_cast<int>(seg));
    }
    out.busy = Duration::Seconds(busy);
    out.idle = Duration::Seconds(idle);
    out.exposed = std::max(Duration::Zero(), out.iteration - out.busy - out.idle);
    double network = 0;
    for (size_t i = 0; i < m_.ops.size(); ++i) network += work_[i] * m_.ops[i].instances;
    out.network = Duration::Seconds(network);
    for (double t : seg_start_) out.segment_start.push_back(Duration::Seconds(t));
    for (const OpState& o : op_) {
      out.ops.push_back(OpSpan{Duration::Seconds(o.first_release), Duration::Seconds(o.end)});
    }
    return out;
  }

 private:
  struct OpState {
    double window = 0;
    int released = 0;
    int completed = 0;
    bool issued = false;  // Its issue segment has ended.
    bool done = false;
    double first_release = -1;
    double end = -1;
  };
  struct Transfer {
    double finish;  // Virtual time at which it completes.
    uint64_t seq;   // Release order (deterministic ties).
    int op;
    bool operator>(const Transfer& o) const {
      return std::tie(finish, seq) > std::tie(o.finish, o.seq);
    }
  };
  struct PendingRelease {
    double time;
    int op;
    int count;
    bool operator>(const PendingRelease& o) const {
      return std::tie(time, op) > std::tie(o.time, o.op);
    }
  };
  struct PacedWindow {
    int op;
    double offset;  // Window compute before this segment.
  };

  double SegSeconds(int seg) const {
    return m_.segments[static_cast<size_t>(seg)].duration.ToSeconds() * compute_scale_;
  }

  bool OpReady(int i) const {
    const CommOp& o = m_.ops[static_cast<size_t>(i)];
    return op_[static_cast<size_t>(i)].issued &&
           (o.after_op < 0 || op_[static_cast<size_t>(o.after_op)].done);
  }

  void ReleaseInstances(int i, int count) {
    OpState& st = op_[static_cast<size_t>(i)];
    if (st.first_release < 0) st.first_release = now_;
    st.released += count;
    for (int c = 0; c < count; ++c) {
      if (work_[static_cast<size_t>(i)] <= kTimeEps) {
        Complete(i);
      } else {
        active_.push(Transfer{virtual_ + work_[static_cast<size_t>(i)], seq_++, i});
      }
    }
  }

  void Complete(int i) {
    OpState& st = op_[static_cast<size_t>(i)];
    ++st.completed;
    if (st.completed < m_.ops[static_cast<size_t>(i)].instances) return;
    st.done = true;
    st.end = now_;
    --waiting_[static_cast<size_t>(m_.ops[static_cast<size_t>(i)].needed_before)];
    for (int j : dependents_[static_cast<size_t>(i)]) Issue(j);
  }

  // Called when an op's issue condition may have become true.
  void Issue(int i) {
    if (!OpReady(i) || op_[static_cast<size_t>(i)].released > 0) return;
    const CommOp& o = m_.ops[static_cast<size_t>(i)];
    if (o.pacing == Pacing::kBurst || op_[static_cast<size_t>(i)].window <= kTimeEps) {
      ReleaseInstances(i, o.instances);
    }
    // Paced ops are released as their window's segments start (StartSegment).
  }

  void SegmentEnded(int seg) {
    for (int i : issue_after_[static_cast<size_t>(seg + 1)]) {
      op_[static_cast<size_t>(i)].issued = true;
      Issue(i);
    }
  }

  void StartSegment(int seg) {
    seg_start_[static_cast<size_t>(seg)] = now_;
    const double d = SegSeconds(seg);
    seg_end_[static_cast<size_t>(seg)] = now_ + d;
    running_ = seg;
    if (!(d > 0)) return;
    // Paced releases that fall inside this segment: instance j at j / n of the window.
    for (const PacedWindow& pw : paced_in_[static_cast<size_t>(seg)]) {
      const CommOp& o = m_.ops[static_cast<size_t>(pw.op)];
      const double window = op_[static_cast<size_t>(pw.op)].window;
      if (window <= kTimeEps) continue;
      const double n = o.instances;
      const int first = std::max(0, static_cast<int>(std::ceil(pw.offset / window * n - 1e-9)));
      for (int j = first; j < o.instances; ++j) {
        const double at = j / n * window;
        if (at >= pw.offset + d - kTimeEps) break;
        releases_.push(PendingRelease{now_ + (at - pw.offset), pw.op, 1});
      }
    }
  }

  void TryStartSegment() {
    while (running_ < 0 && !done_) {
      const int next = last_ended_ + 1;
      if (waiting_[static_cast<size_t>(next)] > 0) return;
      if (next == static_cast<int>(m_.segments.size())) {
        done_ = true;
        return;
      }
      StartSegment(next);
      if (seg_end_[static_cast<size_t>(next)] <= now_ + kTimeEps) EndSegment();
    }
  }

  void EndSegment() {
    const int seg = running_;
    running_ = -1;
    last_ended_ = seg;
    SegmentEnded(seg);
  }

  void Advance(double to) {
    const double dt = std::max(0.0, to - now_);
    now_ = to;
    // Transfers: each active one received dt * scale / n of service.
    if (!active_.empty()) {
      virtual_ += dt * scale_ / static_cast<double>(active_.size());
      const double eps = kTimeEps * std::max(1.0, virtual_);
      std::vector<int> finished;
      while (!active_.empty() && active_.top().finish <= virtual_ + eps) {
        finished.push_back(active_.top().op);
        active_.pop();
      }
      for (int op : finished) Complete(op);
    }
    // Releases due now.
    while (!releases_.empty() && releases_.top().time <= now_ + kTimeEps) {
      const PendingRelease r = releases_.top();
      releases_.pop();
      if (OpReady(r.op)) {
        ReleaseInstances(r.op, r.count);
      } else {
        deferred_.push_back(r);
      }
    }
    // Deferred paced releases whose op became ready (after_op completed).
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      if (OpReady(it->op)) {
        ReleaseInstances(it->op, it->count);
        it = deferred_.erase(it);
      } else {
        ++it;
      }
    }
    if (running_ >= 0 && seg_end_[static_cast<size_t>(running_)] <= now_ + kTimeEps) {
      EndSegment();
    }
  }

  const IterationModel& m_;
  const std::vector<double>& work_;
  double scale_;
  double compute_scale_;
  double now_ = 0;
  double virtual_ = 0;
  uint64_t seq_ = 0;
  int running_ = -1;
  int last_ended_ = -1;
  bool done_ = false;
  std::vector<double> seg_start_;
  std::vector<double> seg_end_;
  std::vector<OpState> op_;
  std::vector<int> waiting_;  // Per segment (and the end): ops not yet done that it waits for.
  std::vector<std::vector<int>> issue_after_;       // [segment + 1]: ops issued after it.
  std::vector<std::vector<PacedWindow>> paced_in_;  // Per segment: paced ops whose window has it.
  std::vector<std::vector<int>> dependents_;        // Per op: ops chained after it.
  std::priority_queue<Transfer, std::vector<Transfer>, std::greater<Transfer>> active_;
  std::priority_queue<PendingRelease, std::vector<PendingRelease>, std::greater<PendingRelease>>
      releases_;
  std::vector<PendingRelease> deferred_;
};

}  // namespace

// ---- Shared with the summary ----

namespace timing_internal {

Status ValidateNetwork(const HostNetwork& net) {
  if (net.nics_per_host < 1) return InvalidArgumentError("network.nics_per_host: must be >= 1");
  if (!net.nic_bandwidth.IsPositive()) {
    return InvalidArgumentError("network.nic_bandwidth: must be > 0");
  }
  return Status::Ok();
}

std::vector<double> OpWork(const IterationModel& m, const HostNetwork& net) {
  std::vector<double> work;
  work.reserve(m.ops.size());
  for (const CommOp& op : m.ops) work.push_back(InstanceSeconds(m, op, net));
  return work;
}

Result<IterationTiming> TimeWithWork(const IterationModel& m, const std::vector<double>& work,
                                     double bandwidth_scale, double compute_scale) {
  IterationClock clock(m, work, bandwidth_scale, compute_scale);
  return clock.Run();
}

double BusiestNicBytes(const IterationModel& m, const HostNetwork& net) {
  NicBytes bytes(m, net.nics_per_host);
  for (const CommOp& op : m.ops) bytes.Add(op.flows, op.instances);
  return bytes.Max();
}

}  // namespace timing_internal

// ---- Public ----

Duration InstanceWork(const IterationModel& m, const CommOp& op, const HostNetwork& net) {
  if (!ValidateNetwork(net).ok()) return Duration::Zero();
  return Duration::Seconds(InstanceSeconds(m, op, net));
}

Result<IterationTiming> TimeIteration(const IterationModel& m, const HostNetwork& net,
                                      double bandwidth_scale) {
  CRUX_RETURN_IF_ERROR(ValidateNetwork(net));
  if (!std::isfinite(bandwidth_scale) || !(bandwidth_scale > 0)) {
    return InvalidArgumentError("bandwidth_scale: must be finite and > 0 (got " +
                                Num(bandwidth_scale) + ")");
  }
  return TimeWithWork(m, OpWork(m, net), bandwidth_scale);
}

Result<Duration> CalibrateCompute(const TrainingRecipe& recipe, const HostNetwork& net,
                                  Duration target) {
  if (!(target > Duration::Zero()) || target.IsInfinite()) {
    return InvalidArgumentError("target: must be > 0 and finite");
  }
  TrainingRecipe unit_recipe = recipe;
  unit_recipe.compute = Duration::Seconds(1);
  CRUX_ASSIGN_OR_RETURN(const IterationModel unit, BuildIteration(unit_recipe));
  CRUX_RETURN_IF_ERROR(ValidateNetwork(net));
  const std::vector<double> work = OpWork(unit, net);
  auto iteration = [&](double c) -> Result<double> {
    CRUX_ASSIGN_OR_RETURN(const IterationTiming t, TimeWithWork(unit, work, 1.0, c));
    return t.iteration.ToSeconds();
  };
  const double goal = target.ToSeconds();
  CRUX_ASSIGN_OR_RETURN(const double at_zero, iteration(0));
  if (at_zero >= goal) {
    return FailedPreconditionError("the communication alone takes " + Num(at_zero) + " s at " +
                                   Num(net.nic_bandwidth.ToGbps()) +
                                   " Gbps per NIC, not less than the target iteration " +
                                   Num(goal) + " s");
  }
  double lo = 0;
  double hi = goal;
  for (int i = 0; i < 60 && hi - lo > 1e-9 * goal; ++i) {
    const double mid = 0.5 * (lo + hi);
    CRUX_ASSIGN_OR_RETURN(const double t, iteration(mid));
    (t <= goal ? lo : hi) = mid;
  }
  return Duration::Seconds(lo);
}

}  // namespace crux::core
