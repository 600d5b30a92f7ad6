#include "sim_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>

#include "crux/core/control/impact.h"
#include "crux/sim/workload/file_io.h"

namespace crux::simcli {

using core::Status;
using nlohmann::json;

namespace {

double Finite(double v) {
  if (std::isnan(v)) return 0;
  if (std::isinf(v)) {
    return v > 0 ? std::numeric_limits<double>::max() : std::numeric_limits<double>::lowest();
  }
  return v;
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", Finite(v));
  return buf;
}

std::optional<double> Slowdown(const sim::JobResult& j) {
  if (j.iterations <= 0 || j.standalone_iteration <= core::Duration::Zero()) return std::nullopt;
  return j.mean_iteration / j.standalone_iteration;
}

std::vector<double> SortedJcts(const sim::SimResult& r) {
  std::vector<double> v;
  v.reserve(r.jobs.size());
  for (const sim::JobResult& j : r.jobs) v.push_back(j.jct.ToSeconds());
  std::sort(v.begin(), v.end());
  return v;
}

// Slowdowns, worst first, with job ids.
std::vector<std::pair<double, std::string>> SortedSlowdowns(const sim::SimResult& r) {
  std::vector<std::pair<double, std::string>> v;
  for (const sim::JobResult& j : r.jobs) {
    if (auto s = Slowdown(j)) v.emplace_back(*s, j.id);
  }
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return v;
}

// A gnuplot single-quoted string ('' is a quote inside).
std::string GpQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

Status EnsureDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return core::InvalidArgumentError(dir + ": cannot create directory: " + ec.message());
  return Status::Ok();
}

std::string Path(const std::string& dir, const std::string& file) {
  return (std::filesystem::path(dir) / file).string();
}

std::string TimeSeriesCsv(const sim::SimResult& r) {
  std::string out = "t_s,gpu_utilization,cluster_utilization,running_jobs\n";
  for (const sim::Sample& s : r.samples) {
    out += Num(s.t.ToSeconds()) + "," + Num(s.gpu_utilization) + "," + Num(s.cluster_utilization) +
           "," + std::to_string(s.running_jobs) + "\n";
  }
  return out;
}

std::string JobsCsv(const sim::SimResult& r) {
  std::string out =
      "id,model,gpus,arrival_s,finish_s,iterations,jct_s,mean_iteration_s,"
      "standalone_iteration_s,slowdown,scheduled_s,profiling_s\n";
  for (const sim::JobResult& j : r.jobs) {
    const auto s = Slowdown(j);
    out += j.id + "," + j.model + "," + std::to_string(j.gpus) + "," + Num(j.arrival.ToSeconds()) +
           "," + (j.finish ? Num(j.finish->ToSeconds()) : "") + "," + std::to_string(j.iterations) +
           "," + Num(j.jct.ToSeconds()) + "," + Num(j.mean_iteration.ToSeconds()) + "," +
           Num(j.standalone_iteration.ToSeconds()) + "," + (s ? Num(*s) : "") + "," +
           (j.scheduled ? Num(j.scheduled->ToSeconds()) : "") + "," + Num(j.profiling.ToSeconds()) +
           "\n";
  }
  return out;
}

std::string JctCdfCsv(const sim::SimResult& r) {
  std::string out = "jct_s,cdf\n";
  const std::vector<double> v = SortedJcts(r);
  for (size_t i = 0; i < v.size(); ++i) {
    out += Num(v[i]) + "," + Num(static_cast<double>(i + 1) / static_cast<double>(v.size())) + "\n";
  }
  return out;
}

std::string SlowdownCsv(const sim::SimResult& r) {
  std::string out = "rank,id,slowdown\n";
  const auto v = SortedSlowdowns(r);
  for (size_t i = 0; i < v.size(); ++i) {
    out += std::to_string(i + 1) + "," + v[i].second + "," + Num(v[i].first) + "\n";
  }
  return out;
}

// True when the CSV file has a line after its header.
bool HasDataRows(const std::string& path) {
  core::Result<std::string> text = sim::workload::ReadTextFile(path);
  if (!text.ok()) return false;
  const size_t nl = text->find('\n');
  return nl != std::string::npos && nl + 1 < text->size();
}

// One gnuplot script drawing the three plots; `series` are (label, run directory) pairs.
std::string PlotScript(const std::vector<std::pair<std::string, std::string>>& series,
                       const std::string& out_dir) {
  std::ostringstream gp;
  gp << "set terminal pngcairo size 1000,600 noenhanced\n"
     << "set datafile separator ','\n"
     << "set key outside right\n"
     << "set grid\n";
  auto plot = [&](const std::string& png, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel, const std::string& file, const std::string& cols,
                  const std::string& style) {
    gp << "set output " << GpQuote(Path(out_dir, png)) << "\n"
       << "set title " << GpQuote(title) << "\n"
       << "set xlabel " << GpQuote(xlabel) << "\n"
       << "set ylabel " << GpQuote(ylabel) << "\n"
       << "plot ";
    bool any = false;
    for (size_t i = 0; i < series.size(); ++i) {
      const std::string data = Path(series[i].second, file);
      if (!HasDataRows(data)) continue;  // gnuplot fails on empty files.
      gp << (any ? ", " : "") << GpQuote(data) << " skip 1 using " << cols << " with " << style
         << " dt " << (i % 5 + 1) << " title " << GpQuote(series[i].first);
      any = true;
    }
    if (!any) gp << "[0:1] NaN title 'no data'";
    gp << "\n";
  };
  gp << "set yrange [0:1.05]\n";
  plot("utilization.png", "GPU utilisation over time (busy fraction of running jobs' GPUs)",
       "simulated time (h)", "GPU utilisation", "timeseries.csv", "($1/3600):2", "lines lw 2");
  plot("jct_cdf.png", "Job completion time CDF", "JCT (s)", "fraction of jobs", "jct_cdf.csv",
       "1:2", "steps lw 2");
  gp << "set autoscale y\n";
  plot("slowdown.png", "Per-job slowdown (mean iteration / standalone iteration), worst first",
       "job (rank)", "slowdown", "slowdown.csv", "1:3", "linespoints pt 7 ps 0.6");
  gp << "unset output\n";
  return gp.str();
}

Status WritePlots(const std::vector<std::pair<std::string, std::string>>& series,
                  const std::string& dir) {
  const std::string script = Path(dir, "plots.gp");
  CRUX_RETURN_IF_ERROR(sim::workload::WriteTextFile(script, PlotScript(series, dir)));
  return RunGnuplot(script);
}

json ControlJson(const sim::SimResult& r, const RunInfo& info) {
  json c;
  c["mode"] = r.oracle ? "oracle" : "loop";
  if (!r.oracle) {
    c["debounce_ms"] = Finite(info.debounce_ms);
    c["min_replan_interval_ms"] = Finite(info.min_replan_interval_ms);
    c["replan_threshold_pct"] = Finite(info.replan_threshold_pct);
    c["stable"] = info.stable;
    c["reoptimize_interval_s"] = Finite(info.reoptimize_interval_s);
    c["reoptimize_min_gain"] = Finite(info.reoptimize_min_gain);
    c["reoptimizations"] = r.reoptimizations;
    c["reoptimizations_adopted"] = r.reoptimizations_adopted;
  }
  return c;
}

}  // namespace

double MeanJct(const sim::SimResult& r) {
  if (r.jobs.empty()) return 0;
  double sum = 0;
  for (const sim::JobResult& j : r.jobs) sum += j.jct.ToSeconds();
  return sum / static_cast<double>(r.jobs.size());
}

double P99Jct(const sim::SimResult& r) {
  const std::vector<double> v = SortedJcts(r);
  if (v.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

double MeanSlowdown(const sim::SimResult& r) {
  double sum = 0;
  int n = 0;
  for (const sim::JobResult& j : r.jobs) {
    if (auto s = Slowdown(j)) {
      sum += *s;
      ++n;
    }
  }
  return n > 0 ? sum / n : 0;
}

double MeanProfiling(const sim::SimResult& r) {
  double sum = 0;
  int n = 0;
  for (const sim::JobResult& j : r.jobs) {
    if (j.arrival >= r.simulated) continue;  // Never ran.
    sum += j.profiling.ToSeconds();
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

// Shadow accounting against the simulated truth: the distribution of |observed - predicted| /
// observed over the jobs that ran scheduled under a prediction (JobResult::observed_iteration).
json ImpactJson(const sim::SimResult& r) {
  std::vector<double> err;
  for (const sim::JobResult& x : r.jobs) {
    if (x.predicted_iteration && x.observed_iteration) {
      err.push_back(core::PredictionError(*x.observed_iteration, *x.predicted_iteration));
    }
  }
  std::sort(err.begin(), err.end());
  auto at = [&](double q) {
    if (err.empty()) return json(nullptr);
    const size_t i = std::min(err.size() - 1, static_cast<size_t>(q * (err.size() - 1) + 0.5));
    return json(Finite(err[i]));
  };
  size_t within = 0;
  for (double e : err) within += e <= 0.05 ? 1 : 0;
  json o;
  o["plans"] = r.impact_plans;
  o["jobs"] = err.size();
  o["error_p50"] = at(0.5);
  o["error_p90"] = at(0.9);
  o["error_max"] = err.empty() ? json(nullptr) : json(Finite(err.back()));
  o["within_5pct"] = err.empty() ? json(nullptr) : json(Finite(double(within) / err.size()));
  o["predicted_gpus_recovered"] = Finite(r.predicted_gpus_recovered);
  return o;
}

json SummaryJson(const sim::SimResult& r, const RunInfo& info) {
  json j;
  j["policy"] = r.policy;
  j["gpu_utilization"] = Finite(r.gpu_utilization);
  j["work_utilization"] = Finite(r.work_utilization);
  j["cluster_utilization"] = Finite(r.cluster_utilization);
  json jobs = json::array();
  for (const sim::JobResult& x : r.jobs) {
    json o;
    o["id"] = x.id;
    o["model"] = x.model;
    o["gpus"] = x.gpus;
    o["arrival_s"] = Finite(x.arrival.ToSeconds());
    o["finish_s"] = x.finish ? json(Finite(x.finish->ToSeconds())) : json(nullptr);
    o["iterations"] = x.iterations;
    o["jct_s"] = Finite(x.jct.ToSeconds());
    o["mean_iteration_s"] = Finite(x.mean_iteration.ToSeconds());
    o["standalone_iteration_s"] = Finite(x.standalone_iteration.ToSeconds());
    const auto s = Slowdown(x);
    o["slowdown"] = s ? json(Finite(*s)) : json(nullptr);
    o["compute_busy_s"] = Finite(x.compute_busy.ToSeconds());
    o["flops_per_compute_s"] = Finite(x.flops_per_compute_s);
    o["level"] = x.level;
    o["scheduled_s"] = x.scheduled ? json(Finite(x.scheduled->ToSeconds())) : json(nullptr);
    o["profiling_s"] = Finite(x.profiling.ToSeconds());
    o["profile_reports"] = x.profile_reports;
    json levels = json::array();
    for (const sim::LevelChange& c : x.levels) {
      levels.push_back({{"t_s", Finite(c.at.ToSeconds())},
                        {"phase", std::string(core::JobPhaseName(c.phase))},
                        {"level", c.level}});
    }
    o["levels"] = std::move(levels);
    if (x.predicted_iteration && x.observed_iteration) {
      o["predicted_iteration_s"] = Finite(x.predicted_iteration->ToSeconds());
      o["predicted_ecmp_iteration_s"] = Finite(x.predicted_ecmp_iteration->ToSeconds());
      o["observed_iteration_s"] = Finite(x.observed_iteration->ToSeconds());
      o["predicted_for_s"] = Finite(x.predicted_for.ToSeconds());
      o["prediction_error"] =
          Finite(core::PredictionError(*x.observed_iteration, *x.predicted_iteration));
    }
    jobs.push_back(std::move(o));
  }
  j["jobs"] = std::move(jobs);
  if (r.impact_plans > 0) j["impact"] = ImpactJson(r);
  json links = json::object();
  for (const auto& [k, v] : r.link_class_utilization) links[k] = Finite(v);
  j["link_class_utilization"] = std::move(links);
  j["events"] = r.events;
  j["replans"] = r.replans;
  j["replan_failures"] = r.replan_failures;
  j["profile_reports"] = r.profile_reports;
  j["epochs"] = r.epochs;
  j["excluded"] = r.excluded;
  j["wall_s"] = Finite(r.wall_s);
  j["engine"] = {{"flow_events", r.flow_events},
                 {"peak_active_flows", r.peak_active_flows},
                 {"fast_forward_jumps", r.fast_forward_jumps},
                 {"fast_forward_approximate", r.fast_forward_approximate},
                 {"fast_forward_carried", r.fast_forward_carried},
                 {"early_wakes", r.early_wakes},
                 {"late_wakes", r.late_wakes},
                 {"catch_up_events", r.catch_up_events},
                 {"fast_forwarded_s", Finite(r.fast_forwarded.ToSeconds())},
                 {"group_slept_s", Finite(r.group_slept.ToSeconds())},
                 {"phase_jobs", r.phase_jobs}};
  j["bytes_sent"] = Finite(r.bytes_sent);
  j["bytes_delivered"] = Finite(r.bytes_delivered);
  j["bytes_in_flight"] = Finite(r.bytes_in_flight);
  j["mean_jct_s"] = Finite(MeanJct(r));
  j["p99_jct_s"] = Finite(P99Jct(r));
  j["mean_slowdown"] = Finite(MeanSlowdown(r));
  j["mean_profiling_s"] = Finite(MeanProfiling(r));
  j["horizon_s"] = Finite(info.horizon_s);
  j["control"] = ControlJson(r, info);
  j["levels"] = info.levels;
  j["reserved_high_levels"] = info.reserved_high_levels;
  j["seed"] = info.seed;
  j["topology"] = info.topology;
  j["workload"] = info.workload;
  return j;
}

Status WriteRunOutputs(const sim::SimResult& r, const RunInfo& info, const std::string& dir,
                       bool plots) {
  CRUX_RETURN_IF_ERROR(EnsureDir(dir));
  using sim::workload::WriteTextFile;
  CRUX_RETURN_IF_ERROR(WriteTextFile(
      Path(dir, "summary.json"),
      SummaryJson(r, info).dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
  CRUX_RETURN_IF_ERROR(WriteTextFile(Path(dir, "timeseries.csv"), TimeSeriesCsv(r)));
  CRUX_RETURN_IF_ERROR(WriteTextFile(Path(dir, "jobs.csv"), JobsCsv(r)));
  CRUX_RETURN_IF_ERROR(WriteTextFile(Path(dir, "jct_cdf.csv"), JctCdfCsv(r)));
  CRUX_RETURN_IF_ERROR(WriteTextFile(Path(dir, "slowdown.csv"), SlowdownCsv(r)));
  if (plots) CRUX_RETURN_IF_ERROR(WritePlots({{r.policy, dir}}, dir));
  return Status::Ok();
}

Status WriteCompareOutputs(const std::vector<sim::SimResult>& results, const RunInfo& info,
                           const std::string& dir, bool plots) {
  CRUX_RETURN_IF_ERROR(EnsureDir(dir));
  json all = json::array();
  std::string csv =
      "policy,gpu_utilization,work_utilization,cluster_utilization,ratio_to_ideal,"
      "work_ratio_to_ideal,mean_jct_s,p99_jct_s,mean_slowdown,mean_profiling_s,events,wall_s\n";
  const sim::SimResult* ideal = nullptr;
  for (const sim::SimResult& r : results) {
    if (r.policy == "ideal") ideal = &r;
  }
  std::vector<std::pair<std::string, std::string>> series;
  for (const sim::SimResult& r : results) {
    const double ratio = ideal != nullptr && ideal->gpu_utilization > 0
                             ? r.gpu_utilization / ideal->gpu_utilization
                             : 0;
    const double work_ratio = ideal != nullptr && ideal->work_utilization > 0
                                  ? r.work_utilization / ideal->work_utilization
                                  : 0;
    json o;
    o["policy"] = r.policy;
    o["gpu_utilization"] = Finite(r.gpu_utilization);
    o["work_utilization"] = Finite(r.work_utilization);
    o["cluster_utilization"] = Finite(r.cluster_utilization);
    o["ratio_to_ideal"] = ideal != nullptr ? json(Finite(ratio)) : json(nullptr);
    o["work_ratio_to_ideal"] = ideal != nullptr ? json(Finite(work_ratio)) : json(nullptr);
    o["mean_jct_s"] = Finite(MeanJct(r));
    o["p99_jct_s"] = Finite(P99Jct(r));
    o["mean_slowdown"] = Finite(MeanSlowdown(r));
    o["mean_profiling_s"] = Finite(MeanProfiling(r));
    o["events"] = r.events;
    o["wall_s"] = Finite(r.wall_s);
    all.push_back(std::move(o));
    csv += r.policy + "," + Num(r.gpu_utilization) + "," + Num(r.work_utilization) + "," +
           Num(r.cluster_utilization) + "," + (ideal != nullptr ? Num(ratio) : "") + "," +
           (ideal != nullptr ? Num(work_ratio) : "") + "," + Num(MeanJct(r)) + "," +
           Num(P99Jct(r)) + "," + Num(MeanSlowdown(r)) + "," + Num(MeanProfiling(r)) + "," +
           std::to_string(r.events) + "," + Num(r.wall_s) + "\n";
    series.emplace_back(r.policy, Path(dir, r.policy));
  }
  json doc;
  doc["topology"] = info.topology;
  doc["workload"] = info.workload;
  doc["levels"] = info.levels;
  doc["reserved_high_levels"] = info.reserved_high_levels;
  doc["seed"] = info.seed;
  doc["horizon_s"] = Finite(info.horizon_s);
  doc["control"] = results.empty() ? json(nullptr) : ControlJson(results.front(), info);
  doc["policies"] = std::move(all);
  CRUX_RETURN_IF_ERROR(sim::workload::WriteTextFile(
      Path(dir, "compare.json"), doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
  CRUX_RETURN_IF_ERROR(sim::workload::WriteTextFile(Path(dir, "compare.csv"), csv));
  if (plots) CRUX_RETURN_IF_ERROR(WritePlots(series, dir));
  return Status::Ok();
}

std::string CompareTable(const std::vector<sim::SimResult>& results) {
  const sim::SimResult* ideal = nullptr;
  for (const sim::SimResult& r : results) {
    if (r.policy == "ideal") ideal = &r;
  }
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-12s %9s %9s %9s %9s %12s %12s %9s %9s %12s %9s\n", "policy",
                "gpu_util", "work_util", "clus_util", "vs_ideal", "mean_jct_s", "p99_jct_s",
                "mean_slow", "prof_s", "events", "wall_s");
  out << line;
  for (const sim::SimResult& r : results) {
    std::string ratio = "-";
    if (ideal != nullptr && ideal->gpu_utilization > 0) {
      char b[32];
      std::snprintf(b, sizeof(b), "%.3f", r.gpu_utilization / ideal->gpu_utilization);
      ratio = b;
    }
    std::snprintf(line, sizeof(line),
                  "%-12s %9.4f %9.4f %9.4f %9s %12.1f %12.1f %9.4f %9.2f %12llu %9.2f\n",
                  r.policy.c_str(), Finite(r.gpu_utilization), Finite(r.work_utilization),
                  Finite(r.cluster_utilization), ratio.c_str(), MeanJct(r), P99Jct(r),
                  Finite(MeanSlowdown(r)), Finite(MeanProfiling(r)),
                  static_cast<unsigned long long>(r.events), Finite(r.wall_s));
    out << line;
  }
  return out.str();
}

Status RunGnuplot(const std::string& script_path) {
  const std::string cmd = std::string(CRUX_GNUPLOT) + " " + ShellQuote(script_path) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return core::UnavailableError("gnuplot: cannot start '" + cmd + "'");
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  const int rc = pclose(pipe);
  if (rc != 0) {
    return core::UnavailableError("gnuplot failed on " + script_path + " (status " +
                                  std::to_string(rc) + "): " + output);
  }
  return Status::Ok();
}

}  // namespace crux::simcli
