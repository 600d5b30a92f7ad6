#include "jobs/client_profiler.h"

#include <algorithm>
#include <cmath>

namespace crux::sim::internal {
namespace {

client::ProfilerOptions ToClient(const ClientProfilerOptions& o) {
  client::ProfilerOptions c;
  c.window = o.window;
  c.converge_min_iterations = o.converge_min_iterations;
  c.converge_max_iterations = o.converge_max_iterations;
  c.stable_spread = o.stable_spread;
  c.change_threshold = o.change_threshold;
  c.change_persistence = o.change_persistence;
  return c;
}

// The protocol's byte counts are capped at 2^62 where cruxd reads them (convert.cc).
core::Bytes WireBytes(uint64_t b) {
  return core::Bytes::Of(static_cast<int64_t>(std::min<uint64_t>(b, uint64_t{1} << 62)));
}

}  // namespace

core::Status ValidateClientProfilerOptions(const ClientProfilerOptions& o) {
  if (o.window < 3) return core::InvalidArgumentError("control.profiler.window: must be >= 3");
  if (o.converge_min_iterations < 2) {
    return core::InvalidArgumentError("control.profiler.converge_min_iterations: must be >= 2");
  }
  if (o.converge_max_iterations < 1) {
    return core::InvalidArgumentError("control.profiler.converge_max_iterations: must be >= 1");
  }
  if (!(o.stable_spread >= 0 && o.stable_spread < 1)) {
    return core::InvalidArgumentError("control.profiler.stable_spread: must be in [0, 1)");
  }
  if (!(o.change_threshold >= 0 && std::isfinite(o.change_threshold))) {
    return core::InvalidArgumentError("control.profiler.change_threshold: must be >= 0");
  }
  if (o.change_persistence < 1) {
    return core::InvalidArgumentError("control.profiler.change_persistence: must be >= 1");
  }
  return core::Status::Ok();
}

ClientProfiler::ClientProfiler(const ClientProfilerOptions& options,
                               std::vector<std::pair<core::NodeId, core::NodeId>> peers,
                               std::optional<core::Flops> flops)
    : profiler_(ToClient(options), flops ? flops->value() : 0.0, /*peak_flops_total=*/0.0),
      peers_(std::move(peers)),
      change_threshold_(options.change_threshold) {}

bool ClientProfiler::Quiet(double margin) const {
  if (!settled() || !last_report_) return false;
  const double limit = margin * change_threshold_;
  auto near = [limit](double x, double reported) {
    return reported > 0 ? std::abs(x - reported) <= limit * reported : x <= 0;
  };
  for (const client::internal::IterationSample& s : profiler_.window()) {
    if (!near(static_cast<double>(s.period_ns),
              static_cast<double>(last_report_->iteration_period_ns)) ||
        !near(static_cast<double>(s.compute_ns),
              static_cast<double>(last_report_->compute_time_ns)) ||
        !near(static_cast<double>(s.bytes),
              static_cast<double>(last_report_->bytes_per_iteration))) {
      return false;
    }
  }
  return true;
}

bool ClientProfiler::QuietThrough(int64_t n, size_t cycle) const {
  client::internal::Profiler copy = profiler_;
  std::vector<client::PeerId> index;
  for (int64_t i = 0; i < n; ++i) {
    copy.ReplaySample(cycle);
    if (copy.TakeReport(&index).has_value()) return false;
  }
  return copy.settled();
}

void ClientProfiler::Replay(int64_t n, size_t cycle) {
  std::vector<client::PeerId> index;
  for (int64_t i = 0; i < n; ++i) {
    profiler_.ReplaySample(cycle);
    // Nothing is due (QuietThrough said so); taking it keeps the profiler's state as after a
    // real iteration whose report the job's client checked.
    (void)profiler_.TakeReport(&index);
  }
}

void ClientProfiler::Consume(client::internal::EventKind kind, core::Duration t, uint32_t peer,
                             uint64_t bytes) {
  client::internal::Event e;
  e.kind = kind;
  e.t_ns = t.nanos();
  e.peer = peer;
  e.bytes = bytes;
  profiler_.Consume(e);
}

void ClientProfiler::BeginIteration(core::Duration t) {
  Consume(client::internal::EventKind::kIterationBegin, t);
}
void ClientProfiler::CommStart(core::Duration t, uint32_t peer, int64_t bytes) {
  Consume(client::internal::EventKind::kCommStart, t, peer,
          static_cast<uint64_t>(std::max<int64_t>(0, bytes)));
}
void ClientProfiler::ComputeEnd(core::Duration t) {
  Consume(client::internal::EventKind::kComputeEnd, t);
}
void ClientProfiler::CommEnd(core::Duration t, uint32_t peer) {
  Consume(client::internal::EventKind::kCommEnd, t, peer);
}
void ClientProfiler::EndIteration(core::Duration t) {
  Consume(client::internal::EventKind::kIterationEnd, t);
}

std::optional<core::JobProfile> ClientProfiler::TakeReport() {
  std::vector<client::PeerId> index;
  std::optional<client::Profile> p = profiler_.TakeReport(&index);
  if (!p) return std::nullopt;
  last_report_ = *p;
  // What MakeProfileReport puts on the wire and ProfileFromProto makes of it.
  core::JobProfile prof;
  prof.compute_time = core::Duration::Nanos(std::max<int64_t>(1, p->compute_time_ns));
  if (p->flops_per_iteration > 0)
    prof.flops_per_iteration = core::Flops::Of(p->flops_per_iteration);
  for (size_t i = 0; i < index.size() && i < p->peers.size(); ++i) {
    if (index[i] >= peers_.size()) continue;  // Never declared: bytes only in the total.
    prof.peers.push_back(
        {peers_[index[i]].first, peers_[index[i]].second, WireBytes(p->peers[i].bytes)});
  }
  prof.iteration_period = core::Duration::Nanos(std::max<int64_t>(1, p->iteration_period_ns));
  prof.overlap_start = p->overlap_start;
  prof.compression_ratio = 1.0;  // Measured bytes are on the wire.
  prof.samples = std::max<uint32_t>(1, p->samples);
  prof.converged = p->converged;
  prof.bytes_per_iteration = WireBytes(p->bytes_per_iteration);
  return prof;
}

}  // namespace crux::sim::internal
