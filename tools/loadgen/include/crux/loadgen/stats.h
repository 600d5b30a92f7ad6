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

#include "crux/core/base/status.h"

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

// Why jobs ended a run unregistered, for one reason (see RunSummary::register_failures).
struct RegisterFailure {
  uint64_t jobs = 0;
  std::string example;  // The first such job's last error message (the daemon's text, raw).

  friend bool operator==(const RegisterFailure&, const RegisterFailure&) = default;
};

struct RunSummary {
  int jobs = 0;
  int registered = 0;     // Jobs registered at the end (their RegisterJob got a reply).
  double duration_s = 0;  // Measurement window (from the end of registration to the end).
  double register_s = 0;  // Time to register every job (or until the run ended).
  // Jobs not registered at the end (jobs - registered), by the last reason each got: the error
  // code name of the daemon's last refusal ("ERROR_CODE_RESOURCE_EXHAUSTED", ...; a job refused
  // with UNAVAILABLE keeps retrying until the run ends), "TIMEOUT" (its last attempt got no
  // reply within the request timeout), "NO_REPLY" (its attempt was still unanswered when the
  // run ended), "SEND_FAILED" (could not even be sent).
  int register_failed = 0;
  std::map<std::string, RegisterFailure> register_failures;
  uint64_t reports_sent = 0;
  uint64_t reports_quiet = 0;            // Of reports_sent, those sent quiet (ack_every).
  uint64_t reports_acked = 0;            // All acknowledged reports (a quiet one once the Ack of
                                         // a later one confirms it).
  uint64_t reports_acked_in_window = 0;  // Acknowledged inside the measurement window.
  uint64_t heartbeats_sent = 0;
  uint64_t heartbeats_acked = 0;
  uint64_t assignments = 0;  // Assignments pushed (alone or in an AssignmentBatch).
  uint64_t push_frames = 0;  // Frames that carried them (an AssignmentBatch counts once).
  // Pushes not applied: epoch not above the applied one and the same state_id (acked with
  // "stale epoch ignored").
  uint64_t assignments_stale = 0;
  // Pushes applied only because their state_id differed from the applied one (the daemon's
  // state was reset: a new epoch sequence) although their epoch was not above the applied one.
  uint64_t state_resets = 0;
  // High availability: pushes refused because their cruxd term was below one already seen by
  // that job (a deposed leader), and the highest term seen by any job.
  uint64_t stale_term_refused = 0;
  uint64_t highest_term = 0;
  uint64_t faulted_flow_reports = 0;  // Flow stats slowed or cut by a --fault.
  uint64_t acks_sent = 0;             // Acks of pushes (each ack of an AckBatch counts).
  uint64_t ack_frames = 0;            // Frames that carried them (an AckBatch counts once).
  uint64_t timeouts = 0;              // Requests without a reply within the timeout.
  uint64_t send_failures = 0;
  // Following cruxd (HA leader changes, restarts; protocol/client.h "Following the daemon"):
  // jobs' connections that dropped, the requests outstanding on them (abandoned at once: no
  // reply can come), and connections established again after a drop (each answered at once by
  // the job's heartbeat, or its registration when it was not registered).
  uint64_t connections_lost = 0;
  uint64_t requests_lost = 0;
  uint64_t reconnects = 0;
  std::map<std::string, uint64_t> errors;  // Error replies by code name.
  uint64_t stray_pushes = 0;               // Pushes naming a job the connection does not carry.
  // Host-agent mode (runner.h): agents played and the jobs whose parts they carry (0 otherwise;
  // `jobs` and `registered` then count parts).
  int agents = 0;
  int hostd_jobs = 0;
  // Arrivals (runner.h): jobs held back, and per arrival that got its pushes the time from the
  // trigger (its completing report acknowledged) to the last of its clients' pushes.
  int arrivals = 0;
  LatencyRecorder arrival_latency;
  LatencyRecorder push_latency;  // Assignment receipt - Assignment.sent_unix_ns.
  LatencyRecorder report_rtt;    // ProfileReport send -> its reply.
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
