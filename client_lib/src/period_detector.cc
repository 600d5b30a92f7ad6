#include "period_detector.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace crux::client::internal {
namespace {

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Steps 2 and 3 of the header for one threshold (log scale; < 0: every event is a burst).
core::Result<PeriodEstimate> Evaluate(const std::vector<int64_t>& starts_ns,
                                      const std::vector<double>& log_gaps, double threshold_log,
                                      const PeriodDetectorOptions& options) {
  const size_t n = starts_ns.size();
  PeriodEstimate est;
  est.threshold_ns = threshold_log < 0 ? 0 : static_cast<int64_t>(std::exp(threshold_log) - 1.0);
  std::vector<int64_t> starts = {starts_ns[0]};
  std::vector<int64_t> sizes = {1};
  for (size_t i = 0; i + 1 < n; ++i) {
    if (log_gaps[i] > threshold_log) {
      starts.push_back(starts_ns[i + 1]);
      sizes.push_back(1);
    } else {
      ++sizes.back();
    }
  }
  const int64_t median_size = Median(sizes);
  const int64_t min_size = median_size >= 4 ? std::max<int64_t>(2, median_size / 4) : 1;
  for (size_t b = 0; b < starts.size(); ++b) {
    if (sizes[b] >= min_size) est.burst_starts_ns.push_back(starts[b]);
  }
  est.bursts = static_cast<uint32_t>(est.burst_starts_ns.size());
  if (est.bursts < options.min_bursts) {
    return core::FailedPreconditionError("period detection: only " + std::to_string(est.bursts) +
                                         " bursts (need " + std::to_string(options.min_bursts) +
                                         ")");
  }
  std::vector<int64_t> spacing(est.bursts - 1);
  for (size_t i = 0; i + 1 < est.bursts; ++i) {
    spacing[i] = est.burst_starts_ns[i + 1] - est.burst_starts_ns[i];
  }
  const double median = static_cast<double>(Median(spacing));
  if (median <= 0) return core::FailedPreconditionError("period detection: zero spacing");
  double accepted_time = 0, accepted_periods = 0;
  size_t accepted = 0;
  for (int64_t s : spacing) {
    double k = std::round(static_cast<double>(s) / median);
    if (k < 1 || k > options.max_multiple) continue;
    if (std::abs(static_cast<double>(s) - k * median) <= options.multiple_tolerance * median) {
      accepted_time += static_cast<double>(s);
      accepted_periods += k;
      ++accepted;
    }
  }
  // Time-weighted: the share of the observed span that whole periods explain. (A count would
  // let "every transfer is a burst" win on regular within-burst spacing.)
  const double span = static_cast<double>(est.burst_starts_ns.back() - est.burst_starts_ns.front());
  est.confidence = span > 0 ? accepted_time / span : 0.0;
  if (accepted == 0) return core::FailedPreconditionError("period detection: no period");
  est.period_ns = static_cast<int64_t>(accepted_time / accepted_periods);
  return est;
}

}  // namespace

core::Result<PeriodEstimate> DetectPeriod(const std::vector<int64_t>& starts_ns,
                                          const PeriodDetectorOptions& options) {
  const size_t n = starts_ns.size();
  if (n < std::max<uint32_t>(2, options.min_bursts)) {
    return core::FailedPreconditionError("period detection: only " + std::to_string(n) +
                                         " events (need " + std::to_string(options.min_bursts) +
                                         " bursts)");
  }
  for (size_t i = 1; i < n; ++i) {
    if (starts_ns[i] < starts_ns[i - 1]) {
      return core::InvalidArgumentError("period detection: event times not sorted");
    }
  }
  std::vector<double> log_gaps(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) {
    log_gaps[i] = std::log(static_cast<double>(starts_ns[i + 1] - starts_ns[i]) + 1.0);
  }
  // 1. Candidate thresholds: "every event is a burst", and the midpoints of the largest jumps
  //    between consecutive sorted log gaps in the upper half.
  std::vector<double> sorted = log_gaps;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size();
  std::vector<std::pair<double, size_t>> jumps;  // (jump, split)
  for (size_t split = std::max<size_t>(1, m / 2 == 0 ? 1 : m / 2 - 1); split < m; ++split) {
    double jump = sorted[split] - sorted[split - 1];
    if (jump >= std::log(options.min_jump)) jumps.emplace_back(jump, split);
  }
  std::sort(jumps.begin(), jumps.end(), [](const auto& a, const auto& b) { return a > b; });
  if (jumps.size() > options.max_candidates) jumps.resize(options.max_candidates);
  std::vector<double> thresholds = {-1.0};
  for (const auto& [jump, split] : jumps) {
    thresholds.push_back((sorted[split - 1] + sorted[split]) / 2);
  }
  // 2-3. The most consistent candidate wins (confidence, then more bursts).
  std::optional<PeriodEstimate> best;
  core::Status last_error = core::FailedPreconditionError("period detection: no candidate");
  for (double t : thresholds) {
    auto est = Evaluate(starts_ns, log_gaps, t, options);
    if (!est.ok()) {
      last_error = est.status();
      continue;
    }
    if (!best || est->confidence > best->confidence + 1e-9 ||
        (std::abs(est->confidence - best->confidence) <= 1e-9 && est->bursts > best->bursts)) {
      best = std::move(*est);
    }
  }
  if (!best) return last_error;
  if (best->confidence < options.min_confidence) {
    return core::FailedPreconditionError("period detection: no consistent period (confidence " +
                                         std::to_string(best->confidence) + ")");
  }
  return std::move(*best);
}

}  // namespace crux::client::internal
