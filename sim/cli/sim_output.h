// crux-sim outputs: summary JSON, CSV time series and gnuplot PNGs.
//
// Per run (directory D):
//   D/summary.json   {"policy", "gpu_utilization", "cluster_utilization", "jobs": [{"id",
//                    "model", "gpus", "arrival_s", "finish_s" (null if unfinished),
//                    "iterations", "jct_s", "mean_iteration_s", "standalone_iteration_s",
//                    "slowdown" (mean / standalone iteration; null without iterations),
//                    "compute_busy_s", "level", "scheduled_s" (null: never scheduled),
//                    "profiling_s", "profile_reports", "levels": [{"t_s", "phase", "level"}]}],
//                    "link_class_utilization": {class: u}, "events", "replans",
//                    "replan_failures", "profile_reports", "epochs", "excluded", "wall_s",
//                    "engine": {"flow_events", "peak_active_flows", "fast_forward_jumps",
//                    "fast_forward_approximate", "fast_forward_carried", "fast_forwarded_s",
//                    "group_slept_s",
//                    "phase_jobs" (jobs run phase by phase; 0 with --single-overlap)}
//                    (docs/simulator.md sections 2, 6),
//                    "bytes_sent", "bytes_delivered", "bytes_in_flight", "mean_jct_s",
//                    "p99_jct_s", "mean_slowdown", "mean_profiling_s", "horizon_s",
//                    "control": {"mode": "loop" | "oracle", "debounce_ms",
//                    "min_replan_interval_ms", "replan_threshold_pct", "stable",
//                    "reoptimize_interval_s", "reoptimize_min_gain",
//                    "reoptimizations", "reoptimizations_adopted"},
//                    "reserved_high_levels", ...}
//   D/timeseries.csv t_s,gpu_utilization,cluster_utilization,running_jobs
//   D/jobs.csv       id,model,gpus,arrival_s,finish_s,iterations,jct_s,mean_iteration_s,
//                    standalone_iteration_s,slowdown,scheduled_s,profiling_s
//   D/jct_cdf.csv    jct_s,cdf   and   D/slowdown.csv   rank,id,slowdown (worst first)
//   D/utilization.png, D/jct_cdf.png, D/slowdown.png   (gnuplot, pngcairo)
// compare adds, in its directory, one such sub-directory per policy plus compare.json,
// compare.csv and combined plots (utilization.png, jct_cdf.png, slowdown.png: one curve per
// policy).
//
// Every number written is finite (NaN -> 0, infinities -> the largest finite double).
// Thread-safety: functions touch only the named files.
#ifndef CRUX_SIM_CLI_SIM_OUTPUT_H_
#define CRUX_SIM_CLI_SIM_OUTPUT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/sim/simulator.h"

namespace crux::simcli {

struct RunInfo {
  std::string topology;  // Paths, for the record.
  std::string workload;
  int levels = 8;
  int reserved_high_levels = 0;
  bool oracle = false;
  double debounce_ms = 0;
  double min_replan_interval_ms = 0;
  double replan_threshold_pct = 0;
  bool stable = false;               // Stable re-planning (crux only; see --no-stable).
  double reoptimize_interval_s = 0;  // Its re-optimisation period; 0 = never or not stable.
  double reoptimize_min_gain = 0;    // What a re-optimisation must gain (0 when not stable).
  uint64_t seed = 0;
  double horizon_s = 0;
};

// Mean and 99th percentile (nearest rank) of the jobs' JCTs, 0 for no jobs.
double MeanJct(const sim::SimResult& r);
double P99Jct(const sim::SimResult& r);
// Mean per-job slowdown (mean / standalone iteration) over the jobs with iterations, 0 for none.
double MeanSlowdown(const sim::SimResult& r);
// Mean time the jobs that ran spent in the profiling phase (JobResult::profiling), seconds.
double MeanProfiling(const sim::SimResult& r);

nlohmann::json SummaryJson(const sim::SimResult& r, const RunInfo& info);

// Writes summary.json, the CSVs and (unless !plots) the PNGs of one run into `dir` (created).
core::Status WriteRunOutputs(const sim::SimResult& r, const RunInfo& info, const std::string& dir,
                             bool plots);

// Combined outputs of a comparison (the per-policy directories are written separately).
core::Status WriteCompareOutputs(const std::vector<sim::SimResult>& results, const RunInfo& info,
                                 const std::string& dir, bool plots);

// The side-by-side table printed by `compare`: policy, GPU util, cluster util, ratio to
// `ideal` (when ideal ran, else "-"), mean JCT, p99 JCT, mean slowdown, mean profiling time,
// events, wall time.
std::string CompareTable(const std::vector<sim::SimResult>& results);

// Runs gnuplot on `script_path`. Errors: gnuplot missing or failing (kUnavailable).
core::Status RunGnuplot(const std::string& script_path);

}  // namespace crux::simcli

#endif  // CRUX_SIM_CLI_SIM_OUTPUT_H_
