#include "crux/loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace crux::loadgen {

int64_t LatencyRecorder::Percentile(double p) {
  if (samples_.empty()) return 0;
  if (!sorted_) {
    std::sort(samples_.begin(), samples_.end());
    sorted_ = true;
  }
  p = std::clamp(p, 0.0, 100.0);
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples_.size())));
  if (rank == 0) rank = 1;
  return samples_[rank - 1];
}

double LatencyRecorder::MeanNs() const {
  if (samples_.empty()) return 0;
  long double sum = std::accumulate(samples_.begin(), samples_.end(), 0.0L);
  return static_cast<double>(sum / samples_.size());
}

nlohmann::json LatencyRecorder::ToJson() {
  auto ms = [](double ns) { return std::round(ns / 1e3) / 1e3; };  // Microsecond resolution.
  return {{"samples", samples_.size()},    {"p50_ms", ms(Percentile(50))},
          {"p90_ms", ms(Percentile(90))},  {"p99_ms", ms(Percentile(99))},
          {"max_ms", ms(Percentile(100))}, {"mean_ms", ms(MeanNs())}};
}

namespace {

nlohmann::json FailuresJson(const std::map<std::string, RegisterFailure>& failures) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [reason, f] : failures) out[reason] = {{"jobs", f.jobs}, {"example", f.example}};
  return out;
}

}  // namespace

nlohmann::json RunSummary::ToJson() {
  nlohmann::json errs = nlohmann::json::object();
  for (const auto& [code, n] : errors) errs[code] = n;
  return {{"jobs", jobs},
          {"workers", workers},
          {"registered", registered},
          {"register_failed", register_failed},
          {"register_failures", FailuresJson(register_failures)},
          {"register_s", register_s},
          {"duration_s", duration_s},
          {"reports_sent", reports_sent},
          {"reports_quiet", reports_quiet},
          {"reports_acked", reports_acked},
          {"reports_acked_in_window", reports_acked_in_window},
          {"report_rate_per_s", ReportRate()},
          {"heartbeats_sent", heartbeats_sent},
          {"heartbeats_acked", heartbeats_acked},
          {"assignments", assignments},
          {"push_frames", push_frames},
          {"assignments_stale", assignments_stale},
          {"state_resets", state_resets},
          {"stale_term_refused", stale_term_refused},
          {"highest_term", highest_term},
          {"faulted_flow_reports", faulted_flow_reports},
          {"acks_sent", acks_sent},
          {"ack_frames", ack_frames},
          {"timeouts", timeouts},
          {"send_failures", send_failures},
          {"connections_lost", connections_lost},
          {"requests_lost", requests_lost},
          {"reconnects", reconnects},
          {"errors", errs},
          {"stray_pushes", stray_pushes},
          {"agents", agents},
          {"hostd_jobs", hostd_jobs},
          {"arrivals", arrivals},
          {"arrival_trigger_to_push", arrival_latency.ToJson()},
          {"push_latency", push_latency.ToJson()},
          {"report_rtt", report_rtt.ToJson()},
          {"register_rtt", register_rtt.ToJson()}};
}

nlohmann::json RunSummary::ToWireJson() const {
  nlohmann::json errs = nlohmann::json::object();
  for (const auto& [code, n] : errors) errs[code] = n;
  return {{"jobs", jobs},
          {"registered", registered},
          {"register_failed", register_failed},
          {"register_failures", FailuresJson(register_failures)},
          {"duration_s", duration_s},
          {"register_s", register_s},
          {"reports_sent", reports_sent},
          {"reports_quiet", reports_quiet},
          {"reports_acked", reports_acked},
          {"reports_acked_in_window", reports_acked_in_window},
          {"heartbeats_sent", heartbeats_sent},
          {"heartbeats_acked", heartbeats_acked},
          {"assignments", assignments},
          {"push_frames", push_frames},
          {"assignments_stale", assignments_stale},
          {"state_resets", state_resets},
          {"stale_term_refused", stale_term_refused},
          {"highest_term", highest_term},
          {"faulted_flow_reports", faulted_flow_reports},
          {"acks_sent", acks_sent},
          {"ack_frames", ack_frames},
          {"timeouts", timeouts},
          {"send_failures", send_failures},
          {"connections_lost", connections_lost},
          {"requests_lost", requests_lost},
          {"reconnects", reconnects},
          {"errors", errs},
          {"rate", ReportRate()},
          {"stray_pushes", stray_pushes},
          {"agents", agents},
          {"hostd_jobs", hostd_jobs},
          {"arrivals", arrivals},
          {"arrival_latency_ns", arrival_latency.samples()},
          {"push_latency_ns", push_latency.samples()},
          {"report_rtt_ns", report_rtt.samples()},
          {"register_rtt_ns", register_rtt.samples()}};
}

core::Result<RunSummary> RunSummary::FromWireJson(const nlohmann::json& j) {
  RunSummary s;
  const char* field = "";
  try {
    field = "jobs";
    s.jobs = j.at(field).get<int>();
    field = "registered";
    s.registered = j.at(field).get<int>();
    field = "register_failed";
    s.register_failed = j.at(field).get<int>();
    field = "register_failures";
    for (const auto& [reason, f] : j.at(field).items()) {
      s.register_failures[reason] =
          RegisterFailure{f.at("jobs").get<uint64_t>(), f.at("example").get<std::string>()};
    }
    field = "duration_s";
    s.duration_s = j.at(field).get<double>();
    field = "register_s";
    s.register_s = j.at(field).get<double>();
    field = "reports_sent";
    s.reports_sent = j.at(field).get<uint64_t>();
    s.reports_quiet = j.value("reports_quiet", uint64_t{0});  // Optional (older workers).
    field = "reports_acked";
    s.reports_acked = j.at(field).get<uint64_t>();
    field = "reports_acked_in_window";
    s.reports_acked_in_window = j.at(field).get<uint64_t>();
    field = "heartbeats_sent";
    s.heartbeats_sent = j.at(field).get<uint64_t>();
    field = "heartbeats_acked";
    s.heartbeats_acked = j.at(field).get<uint64_t>();
    field = "assignments";
    s.assignments = j.at(field).get<uint64_t>();
    s.push_frames = j.value("push_frames", uint64_t{0});  // Optional (older workers).
    s.ack_frames = j.value("ack_frames", uint64_t{0});
    field = "assignments_stale";
    s.assignments_stale = j.at(field).get<uint64_t>();
    field = "state_resets";
    s.state_resets = j.at(field).get<uint64_t>();
    // Optional (workers of an older build send none).
    s.stale_term_refused = j.value("stale_term_refused", uint64_t{0});
    s.highest_term = j.value("highest_term", uint64_t{0});
    field = "faulted_flow_reports";
    s.faulted_flow_reports = j.value(field, uint64_t{0});
    field = "acks_sent";
    s.acks_sent = j.at(field).get<uint64_t>();
    field = "timeouts";
    s.timeouts = j.at(field).get<uint64_t>();
    field = "send_failures";
    s.send_failures = j.at(field).get<uint64_t>();
    // Optional (workers of an older build send none).
    s.connections_lost = j.value("connections_lost", uint64_t{0});
    s.requests_lost = j.value("requests_lost", uint64_t{0});
    s.reconnects = j.value("reconnects", uint64_t{0});
    s.stray_pushes = j.value("stray_pushes", uint64_t{0});
    s.agents = j.value("agents", 0);
    s.hostd_jobs = j.value("hostd_jobs", 0);
    s.arrivals = j.value("arrivals", 0);
    if (j.contains("arrival_latency_ns")) {
      field = "arrival_latency_ns";
      s.arrival_latency.AddAll(j.at(field).get<std::vector<int64_t>>());
    }
    field = "errors";
    s.errors = j.at(field).get<std::map<std::string, uint64_t>>();
    field = "rate";
    s.merged_rate = j.at(field).get<double>();
    field = "push_latency_ns";
    s.push_latency.AddAll(j.at(field).get<std::vector<int64_t>>());
    field = "report_rtt_ns";
    s.report_rtt.AddAll(j.at(field).get<std::vector<int64_t>>());
    field = "register_rtt_ns";
    s.register_rtt.AddAll(j.at(field).get<std::vector<int64_t>>());
  } catch (const nlohmann::json::exception& e) {
    return core::InvalidArgumentError(std::string("worker summary.") + field + ": " + e.what());
  }
  return s;
}

void RunSummary::Merge(const RunSummary& o) {
  const double my_rate = workers == 0 ? 0.0 : ReportRate();
  jobs += o.jobs;
  registered += o.registered;
  register_failed += o.register_failed;
  for (const auto& [reason, f] : o.register_failures) {
    RegisterFailure& mine = register_failures[reason];
    if (mine.jobs == 0) mine.example = f.example;
    mine.jobs += f.jobs;
  }
  duration_s = std::max(duration_s, o.duration_s);
  register_s = std::max(register_s, o.register_s);
  reports_sent += o.reports_sent;
  reports_quiet += o.reports_quiet;
  reports_acked += o.reports_acked;
  reports_acked_in_window += o.reports_acked_in_window;
  heartbeats_sent += o.heartbeats_sent;
  heartbeats_acked += o.heartbeats_acked;
  assignments += o.assignments;
  assignments_stale += o.assignments_stale;
  state_resets += o.state_resets;
  stale_term_refused += o.stale_term_refused;
  highest_term = std::max(highest_term, o.highest_term);
  faulted_flow_reports += o.faulted_flow_reports;
  acks_sent += o.acks_sent;
  push_frames += o.push_frames;
  ack_frames += o.ack_frames;
  timeouts += o.timeouts;
  send_failures += o.send_failures;
  connections_lost += o.connections_lost;
  requests_lost += o.requests_lost;
  reconnects += o.reconnects;
  for (const auto& [code, n] : o.errors) errors[code] += n;
  stray_pushes += o.stray_pushes;
  agents += o.agents;
  hostd_jobs += o.hostd_jobs;  // Jobs spanning workers count once per worker (the CLI resets).
  arrivals += o.arrivals;
  arrival_latency.AddAll(o.arrival_latency.samples());
  push_latency.AddAll(o.push_latency.samples());
  report_rtt.AddAll(o.report_rtt.samples());
  register_rtt.AddAll(o.register_rtt.samples());
  merged_rate = my_rate + o.ReportRate();
  workers += o.workers;
}

}  // namespace crux::loadgen
