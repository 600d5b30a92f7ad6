// The client library's reporting rule, replayed on simulated iterations (profiler_model.h). The
// arithmetic follows client_lib/src/profiler.cc (MedianOf, Stable, RelChanged, Decide) so that
// a simulated job converges at the same iteration a real one would on the same timings.
#include "crux/sim/profiler_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace crux::sim {
namespace {

template <typename T>
T MedianOf(std::vector<T> v) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n % 2 == 1) return v[n / 2];
  return static_cast<T>((v[n / 2 - 1] + v[n / 2]) / 2);
}

template <typename T>
bool Stable(const std::vector<T>& v, double spread) {
  const double m = static_cast<double>(MedianOf(v));
  for (T x : v) {
    if (std::abs(static_cast<double>(x) - m) > spread * m) return false;
  }
  return true;
}

bool RelChanged(double now, double before, double threshold) {
  if (before <= 0) return now > 0;
  return std::abs(now - before) > threshold * before;
}

int64_t Total(const IterationSample& s) {
  int64_t t = 0;
  for (int64_t b : s.peer_bytes) t += b;
  return t;
}

}  // namespace

core::Status ValidateProfilerModelOptions(const ProfilerModelOptions& o) {
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

ProfilerModel::ProfilerModel(ProfilerModelOptions options,
                             std::vector<std::pair<core::NodeId, core::NodeId>> peers,
                             std::optional<core::Flops> flops)
    : options_(options), peers_(std::move(peers)), flops_(flops) {}

core::JobProfile ProfilerModel::Median(uint32_t iterations) const {
  std::vector<int64_t> period, compute, bytes;
  std::vector<double> overlap;
  for (const IterationSample& s : window_) {
    period.push_back(s.period_ns);
    compute.push_back(s.compute_ns);
    overlap.push_back(s.overlap_start);
    bytes.push_back(Total(s));
  }
  core::JobProfile p;
  p.iteration_period = core::Duration::Nanos(MedianOf(period));
  p.compute_time = core::Duration::Nanos(MedianOf(compute));
  p.overlap_start = MedianOf(overlap);
  p.bytes_per_iteration = core::Bytes::Of(MedianOf(bytes));
  p.flops_per_iteration = flops_;
  p.compression_ratio = 1.0;
  p.samples = iterations;
  p.converged = true;
  for (size_t i = 0; i < peers_.size(); ++i) {
    std::vector<int64_t> b;
    b.reserve(window_.size());
    for (const IterationSample& s : window_)
      b.push_back(i < s.peer_bytes.size() ? s.peer_bytes[i] : 0);
    const int64_t med = MedianOf(std::move(b));
    if (med == 0) continue;
    p.peers.push_back({peers_[i].first, peers_[i].second, core::Bytes::Of(med)});
  }
  return p;
}

bool ProfilerModel::Changed(const core::JobProfile& p) const {
  const double t = options_.change_threshold;
  return RelChanged(static_cast<double>(p.iteration_period.nanos()),
                    static_cast<double>(last_reported_.iteration_period.nanos()), t) ||
         RelChanged(static_cast<double>(p.compute_time.nanos()),
                    static_cast<double>(last_reported_.compute_time.nanos()), t) ||
         RelChanged(static_cast<double>(p.bytes_per_iteration.count()),
                    static_cast<double>(last_reported_.bytes_per_iteration.count()), t);
}

std::optional<core::JobProfile> ProfilerModel::AddIteration(const IterationSample& s,
                                                            uint32_t iterations) {
  window_.push_back(s);
  while (window_.size() > std::max<uint32_t>(options_.window, 3)) window_.pop_front();
  ++count_;
  if (!reported_) {
    bool due = count_ >= options_.converge_max_iterations;
    if (!due && count_ >= std::max<uint32_t>(2, options_.converge_min_iterations)) {
      std::vector<int64_t> period, compute, bytes;
      for (const IterationSample& w : window_) {
        period.push_back(w.period_ns);
        compute.push_back(w.compute_ns);
        bytes.push_back(Total(w));
      }
      due = Stable(period, options_.stable_spread) && Stable(compute, options_.stable_spread) &&
            Stable(bytes, options_.stable_spread);
    }
    if (!due) return std::nullopt;
  }
  core::JobProfile candidate = Median(iterations);
  if (reported_) {
    if (!Changed(candidate)) {
      changed_run_ = 0;
      return std::nullopt;
    }
    if (++changed_run_ < std::max<uint32_t>(1, options_.change_persistence)) return std::nullopt;
  }
  changed_run_ = 0;
  reported_ = true;
  last_reported_ = candidate;
  return candidate;
}

}  // namespace crux::sim
