// Measurement helpers for crux-loadgen: latency samples with percentiles, and the run summary.
//
// Thread-safety: thread-compatible value types (the load generator is single-threaded).
#ifndef CRUX_LOADGEN_STATS_H_
#define CRUX_LOADGEN_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "crux/core/status.h"

namespace crux::loadgen {

// Latency samples in nanoseconds. Percentiles use the nearest-rank method on the sorted
// samples (p in [0, 100]; p50 of {1,2,3,4} is 2, p100 is the maximum). Empty: 0.
class LatencyRecorder {
 public:
  void Add(int64_t ns) {
    samples_.push_back(ns);
    sorted_ = false;
  }
  size_t count() const { return samples_.size(); }
  int64_t Percentile(double p);
  double MeanNs() const;
  const std::vector<int64_t>& samples() const { return samples_; }
  void AddAll(const std::vector<int64_t>& more) {
    samples_.insert(samples_.end(), more.begin(), more.end());
    sorted_ = samples_.empty();
  }
  // {"samples": n, "p50_ms": .., "p90_ms": .., "p99_ms": .., "max_ms": .., "mean_ms": ..}.
  nlohmann::json ToJson();

 private:
  std::vector<int64_t> samples_;
  bool sorted_ = true;
};

struct RunSummary {
  int jobs = 0;
  int registered = 0;     // Jobs whose RegisterJob got a RegisterJobReply.
  double duration_s = 0;  // Measurement window (after registration).
  double register_s = 0;  // Time to register every job.
  uint64_t reports_sent = 0;
  uint64_t reports_acked = 0;            // All acknowledged reports.
  uint64_t reports_acked_in_window = 0;  // Acknowledged inside the measurement window.
  uint64_t heartbeats_sent = 0;
  uint64_t heartbeats_acked = 0;
  uint64_t assignments = 0;  // Assignment pushes received.
  uint64_t acks_sent = 0;    // Acks of pushes.
  uint64_t timeouts = 0;     // Requests without a reply within the timeout.
  uint64_t send_failures = 0;
  std::map<std::string, uint64_t> errors;  // Error replies by code name.
  LatencyRecorder push_latency;            // Assignment receipt - Assignment.sent_unix_ns.
  LatencyRecorder report_rtt;              // ProfileReport send -> its reply.
  LatencyRecorder register_rtt;

  int workers = 1;          // Processes whose results are merged in.
  double merged_rate = -1;  // Sum of the workers' rates (set by Merge).

  // Acknowledged reports per second inside the measurement window (for a merged summary: the
  // sum of the workers' rates, each over its own window).
  double ReportRate() const {
    if (merged_rate >= 0) return merged_rate;
    return duration_s > 0 ? static_cast<double>(reports_acked_in_window) / duration_s : 0.0;
  }
  // The printed summary (percentiles, no raw samples).
  nlohmann::json ToJson();

  // Lossless form (raw latency samples included) for passing a worker's result to its parent.
  nlohmann::json ToWireJson() const;
  // Inverse of ToWireJson. kInvalidArgument naming the field on a malformed document.
  static core::Result<RunSummary> FromWireJson(const nlohmann::json& j);
  // Adds another worker's result: counters summed, durations maxed, samples concatenated.
  void Merge(const RunSummary& other);
};

}  // namespace crux::loadgen

#endif  // CRUX_LOADGEN_STATS_H_
