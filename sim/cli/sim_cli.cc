#include "sim_cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "crux/core/base/text.h"
#include "crux/core/control/impact.h"
#include "crux/core/policies/policy.h"
#include "crux/sim/simulator.h"
#include "crux/sim/workload/generator.h"
#include "crux/sim/workload/link_events.h"
#include "crux/sim/workload/models.h"
#include "crux/sim/workload/placement.h"
#include "crux/sim/workload/scenario.h"
#include "crux/sim/workload/trace.h"
#include "crux/sim/workload/workload.h"
#include "crux/spec/topology_spec.h"
#include "crux/textio/file.h"
#include "sim_fault_report.h"
#include "sim_output.h"

namespace crux::simcli {
namespace {

namespace wl = sim::workload;
constexpr const char* kProgram = "crux-sim";

// An error with its exit code.
struct Failure {
  int code = kExitOk;
  std::string message;
};

int ExitCodeFor(const core::Status& s) {
  switch (s.code()) {
    case core::StatusCode::kInvalidArgument:
    case core::StatusCode::kNotFound:
    case core::StatusCode::kAlreadyExists:
    case core::StatusCode::kOutOfRange:
    case core::StatusCode::kFailedPrecondition:
      return kExitUsage;
    default:
      return kExitSimulation;
  }
}

std::string DefaultModelsPath() {
  return (std::filesystem::path(CRUX_DATA_DIR) / "models.yaml").string();
}

struct RunFlags {
  std::string scenario;
  std::string topology;
  std::string jobs;
  std::string trace;
  std::string models;
  std::string link_events;
  std::string policies;  // run: one; compare: comma-separated.
  std::optional<int> levels;
  std::optional<uint64_t> seed;
  std::optional<double> horizon_s;
  std::optional<double> sample_interval_s;
  std::optional<int> gpus_per_host;
  std::optional<double> overlap_start;  // Overrides every model's overlap_start (traces only).
  std::optional<double> load;           // Overrides the scenario's generate load / gap.
  std::optional<double> days;           // Overrides the scenario's generate days.
  bool no_fast_forward = false;
  bool single_overlap = false;
  bool spray = false;                  // SimOptions::spray (or the scenario's spray: true).
  std::optional<int> spray_max_paths;  // SimOptions::spray_max_paths.
  bool no_plots = false;
  bool quiet = false;
  // Control loop (sim::ControlOptions).
  bool oracle = false;
  std::optional<double> debounce_ms;
  std::optional<double> min_replan_interval_ms;
  std::optional<double> replan_threshold_pct;
  std::optional<int> reserved_high_levels;
  bool no_stable = false;                       // Full re-plans (planner.stable off).
  std::optional<double> reoptimize_interval_s;  // Stable mode's re-optimisation period.
  std::optional<double> reoptimize_min_gain;    // What a re-optimisation must gain.
  bool impact = false;                          // Shadow accounting (docs/impact.md).
  std::string out;
};

// crux-sim faults (docs/fault-simulation.md).
struct FaultFlags {
  uint32_t count = 200;
  std::optional<uint64_t> fault_seed;  // Default: --seed.
  std::string file;                    // A faults CSV instead of generated ones.
  double start_s = 3600;
  double spacing_s = 60;
  double min_duration_s = 15;
  double max_duration_s = 40;
  double link_down = 0.4;
  double link_gray = 0.4;
  double tor_down = 0.2;
  double link_lossy = 0;
  double gray_min = 0.1;
  double gray_max = 0.7;
  bool uniform = false;
  double switch_delay_ms = 250;
  double report_interval_ms = 1000;
  double stall_timeout_ms = 1000;
  double grace_s = 5;
  std::string modes = "none,manual,auto,tomography";
  std::string expectation = "plan_share";  // faults.expectation: plan_share or own_best.
  int min_jobs = 2;                        // faults.min_jobs.
  bool no_nic_signals = false;             // No host agents' NIC counters.
  bool probes = false;                     // faults.probes: host agents probe (every mode).
  // One busy link_down at --fault-start-s lasting --after-reroute-s (the rest of the run): every
  // decision on another link is a false positive the re-route provoked.
  std::optional<double> after_reroute_s;
};

struct GenFlags {
  uint64_t seed = 1;
  double days = 14;
  double mean_interarrival_s = 240;
  std::optional<double> load;  // Offered load (fraction of --topology's GPUs); sets the gap.
  double scatter = 0;          // GeneratorOptions::scatter_probability.
  double spill = 0;            // GeneratorOptions::spill_probability.
  double share = 0;            // GeneratorOptions::share_probability.
  std::string mix;             // GeneratorOptions::mix; empty: the default (lingjun-2023).
  std::string models;
  std::string topology;
  int gpus_per_host = 8;
  std::string out;
};

void AddRunFlags(CLI::App* cmd, RunFlags* f, bool compare) {
  cmd->add_option("--scenario", f->scenario, "Scenario YAML (configs/scenarios); flags override");
  cmd->add_option("--topology", f->topology, "Topology YAML");
  cmd->add_option("--jobs", f->jobs, "Jobs YAML (crux-plan format + arrival_s, duration_s, ...)");
  cmd->add_option("--trace", f->trace, "Trace CSV (docs/sim-workloads.md)");
  cmd->add_option("--models", f->models, "Model profiles YAML for traces (default: shipped)");
  cmd->add_option("--link-events", f->link_events,
                  "Link failure/degradation CSV (time_s,a,b,gbps)");
  if (compare) {
    cmd->add_option("--policies", f->policies, "Comma-separated policies, e.g. crux,ecmp,ideal");
  } else {
    cmd->add_option("--policy", f->policies, "Scheduling policy (default crux)");
  }
  cmd->add_option("--levels", f->levels, "Hardware priority levels K (default 8)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--seed", f->seed, "Seed (default 1)");
  cmd->add_option("--horizon-s", f->horizon_s, "Simulated seconds (default: last job's end)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--sample-interval-s", f->sample_interval_s,
                  "Time-series sampling period (default: horizon / 500, at least 1 s)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gpus-per-host", f->gpus_per_host, "GPUs per host for placement (default 8)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--overlap-start", f->overlap_start,
                  "Override every model's overlap_start (0..1; 1 = no overlap) for traces")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--load", f->load,
                  "Offered load for a scenario's generated trace (fraction of GPUs, (0, 4])");
  cmd->add_option("--days", f->days,
                  "Span of a scenario's generated trace in days (e.g. 14 for the two-week runs)")
      ->check(CLI::Range(1e-6, 3650.0));
  cmd->add_flag("--no-fast-forward", f->no_fast_forward,
                "Simulate every flow (no steady-state fast-forward)");
  cmd->add_flag("--single-overlap", f->single_overlap,
                "Run hybrid (multi-phase) jobs as their single-overlap summary: one compute "
                "block, one communication block (default: their phases)");
  cmd->add_flag("--spray", f->spray,
                "Packet-spraying fabric: every transfer between two NICs is split evenly over "
                "every equal-cost path (all planes); paths are not pinned, policies set levels "
                "only (docs/simulator.md, \"Sprayed fabrics\")");
  cmd->add_option("--spray-max-paths", f->spray_max_paths,
                  "With --spray: at most this many sub-flows per transfer, on evenly spaced "
                  "paths (default 0 = every path)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--oracle", f->oracle,
                "Plan every job from its true profile at once at every event (no control loop: "
                "no registration, profiling phase or debounce)");
  cmd->add_option("--debounce-ms", f->debounce_ms, "Control loop debounce (default 30, as cruxd)")
      ->check(CLI::Range(0.0, 3.6e6));
  cmd->add_option("--min-replan-interval-ms", f->min_replan_interval_ms,
                  "Control loop: least time between two plan starts (default 0)")
      ->check(CLI::Range(0.0, 3.6e6));
  cmd->add_option("--replan-threshold-pct", f->replan_threshold_pct,
                  "Control loop hysteresis (default 10)")
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--reserved-high-levels", f->reserved_high_levels,
                  "Levels above scheduled jobs (default: 1 with the control loop, as cruxd; 0 "
                  "with --oracle)")
      ->check(CLI::Range(0, 63));
  cmd->add_flag("--no-stable", f->no_stable,
                "Control loop: every re-plan is the best plan (planner.stable off; cruxd's "
                "default is stable re-planning)");
  cmd->add_option("--reoptimize-interval-s", f->reoptimize_interval_s,
                  "Control loop, stable mode: re-plan from scratch this often (default 600, as "
                  "cruxd's reoptimize_interval_ms; 0 = never)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--reoptimize-min-gain", f->reoptimize_min_gain,
                  "Control loop, stable mode: a re-optimisation replaces the plan in force only "
                  "if it lowers the contention cost by this fraction or raises the cut fraction "
                  "by this much (default 0.01, as cruxd's reoptimize_min_gain; 0 = always)")
      ->check(CLI::Range(0.0, 0.999999));
  cmd->add_flag("--impact", f->impact,
                "Control loop: predict every job's iteration under each plan and under ECMP "
                "(cruxd's shadow accounting, docs/impact.md) and report the prediction against "
                "the simulated iterations (summary.json: impact, jobs[].predicted_iteration_s)");
  cmd->add_flag("--no-plots", f->no_plots, "Skip the gnuplot PNGs");
  cmd->add_flag("--quiet", f->quiet, "No progress on stderr");
  cmd->add_option("--out", f->out, "Output directory")->required();
}

std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Everything a run needs, loaded and checked.
struct Prepared {
  core::Topology topo;
  std::vector<sim::SimJob> jobs;
  std::vector<sim::LinkEvent> link_events;
  std::vector<std::string> policies;
  sim::SimOptions options;
  RunInfo info;
};

std::optional<Failure> Prepare(const RunFlags& f, bool compare, Prepared* p, std::ostream& err) {
  wl::Scenario sc;
  if (!f.scenario.empty()) {
    core::Result<wl::Scenario> s = wl::LoadScenarioFile(f.scenario);
    if (!s.ok()) return Failure{kExitUsage, s.status().message()};
    sc = *s;
  }
  const std::string topo_path = !f.topology.empty() ? f.topology : sc.topology_path;
  if (topo_path.empty()) return Failure{kExitUsage, "--topology: required (or --scenario)"};
  const int flag_sources = static_cast<int>(!f.jobs.empty()) + static_cast<int>(!f.trace.empty());
  if (flag_sources > 1) return Failure{kExitUsage, "--jobs and --trace: give only one"};
  std::string jobs_path = f.jobs;
  std::string trace_path = f.trace;
  std::optional<wl::GeneratorOptions> generate;
  if (flag_sources == 0) {
    jobs_path = sc.jobs_path;
    trace_path = sc.trace_path;
    generate = sc.generate;
  }
  if (jobs_path.empty() && trace_path.empty() && !generate) {
    return Failure{kExitUsage, "--jobs or --trace: one is required (or --scenario)"};
  }
  if (f.load && !generate) return Failure{kExitUsage, "--load: needs a scenario that generates"};
  if (f.days && !generate) return Failure{kExitUsage, "--days: needs a scenario that generates"};
  if (f.days) generate->days = *f.days;
  if (f.overlap_start && !jobs_path.empty()) {
    return Failure{kExitUsage, "--overlap-start: only for traces (a jobs file has no models)"};
  }
  // Policies: every name given (flag or scenario) must be known, even those a run ignores.
  const bool policies_from_flag = !f.policies.empty();
  const std::string policy_source =
      policies_from_flag ? (compare ? "--policies" : "--policy") : "scenario.policies";
  std::vector<std::string> policies = SplitCommas(f.policies);
  if (policies_from_flag && policies.empty()) {
    return Failure{kExitUsage, policy_source + ": give at least one policy name"};
  }
  if (policies.empty()) policies = sc.policies;
  if (policies.empty()) policies = {"crux"};
  const std::vector<std::string>& known = core::PolicyNames();
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string& name = policies[i];
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      return Failure{kExitUsage, policy_source + ": unknown policy '" +
                                     core::EscapeForTerminal(name) + "' (valid: " + list + ")"};
    }
    if (std::find(policies.begin(), policies.begin() + static_cast<std::ptrdiff_t>(i), name) !=
        policies.begin() + static_cast<std::ptrdiff_t>(i)) {
      return Failure{kExitUsage, policy_source + ": policy '" + name + "' is listed twice"};
    }
  }
  if (!compare && policies.size() > 1) {
    if (policies_from_flag) return Failure{kExitUsage, "--policy: give one policy (use compare)"};
    policies.resize(1);  // run takes the scenario's first policy.
  }
  p->policies = policies;

  core::Result<core::Topology> topo = spec::LoadTopologyFile(topo_path);
  if (!topo.ok()) return Failure{kExitUsage, topo.status().message()};
  p->topo = std::move(*topo);
  const int gpus_per_host = f.gpus_per_host.value_or(sc.gpus_per_host.value_or(8));

  std::string workload_name;
  if (!jobs_path.empty()) {
    core::Result<std::vector<sim::SimJob>> jobs = wl::LoadJobsWorkload(jobs_path, p->topo);
    if (!jobs.ok()) return Failure{kExitUsage, jobs.status().message()};
    core::Status fits = wl::CheckHostCapacity(*jobs, p->topo, gpus_per_host);
    if (!fits.ok()) return Failure{kExitUsage, fits.WithContext(jobs_path).message()};
    p->jobs = std::move(*jobs);
    workload_name = jobs_path;
  } else {
    std::string models_path = f.models;
    if (models_path.empty()) models_path = sc.models_path;
    if (models_path.empty()) models_path = DefaultModelsPath();
    core::Result<wl::ModelCatalog> models = wl::LoadModelsFile(models_path);
    if (!models.ok()) return Failure{kExitUsage, models.status().message()};
    if (f.overlap_start) {
      std::vector<wl::ModelProfile> changed = models->models();
      for (wl::ModelProfile& m : changed) m.overlap_start = *f.overlap_start;
      *models = wl::ModelCatalog(std::move(changed));
    }
    std::vector<wl::TraceJob> trace;
    if (!trace_path.empty()) {
      core::Result<std::vector<wl::TraceJob>> t = wl::LoadTraceFile(trace_path);
      if (!t.ok()) return Failure{kExitUsage, t.status().message()};
      trace = std::move(*t);
      workload_name = trace_path;
    } else {
      std::optional<wl::Placer> placer;
      if (sc.generate_place) {
        core::Result<wl::Placer> pl = wl::Placer::Create(p->topo, gpus_per_host);
        if (!pl.ok()) return Failure{kExitUsage, pl.status().message()};
        placer = std::move(*pl);
      }
      const std::optional<double> load = f.load ? f.load : sc.generate_load;
      if (load) {
        if (!placer) return Failure{kExitUsage, "--load: needs a generated trace with place: true"};
        core::Result<double> gap =
            wl::MeanInterarrivalForLoad(*generate, placer->total_gpus(), *load);
        if (!gap.ok()) return Failure{kExitUsage, "--" + gap.status().message()};
        generate->mean_interarrival_s = *gap;
      }
      core::Result<std::vector<wl::TraceJob>> t =
          wl::GenerateTrace(*generate, *models, &p->topo, placer ? &*placer : nullptr);
      if (!t.ok()) return Failure{kExitUsage, "generate: " + t.status().message()};
      trace = std::move(*t);
      workload_name = "generated(seed=" + std::to_string(generate->seed) +
                      ", days=" + std::to_string(generate->days) + ")";
      // Keep the generated trace with the results.
      std::error_code ec;
      std::filesystem::create_directories(f.out, ec);
      core::Status w =
          wl::WriteTraceFile((std::filesystem::path(f.out) / "trace.csv").string(), trace);
      if (!w.ok()) return Failure{kExitSimulation, w.message()};
    }
    core::Result<std::vector<sim::SimJob>> jobs =
        wl::TraceToSimJobs(trace, *models, p->topo, gpus_per_host);
    if (!jobs.ok()) return Failure{kExitUsage, jobs.status().message()};
    p->jobs = std::move(*jobs);
  }

  const std::string events_path = !f.link_events.empty() ? f.link_events : sc.link_events_path;
  if (!events_path.empty()) {
    core::Result<std::vector<sim::LinkEvent>> ev = wl::LoadLinkEventsFile(events_path, p->topo);
    if (!ev.ok()) return Failure{kExitUsage, ev.status().message()};
    p->link_events = std::move(*ev);
  }

  // Options.
  sim::SimOptions& o = p->options;
  o.policy.planner.levels = f.levels.value_or(sc.levels.value_or(8));
  o.policy.planner.seed = f.seed.value_or(sc.seed.value_or(1));
  o.policy.planner.resolve_ports = false;
  o.control.oracle = f.oracle || sc.oracle.value_or(false);
  if (o.control.oracle && (f.debounce_ms || f.min_replan_interval_ms || f.replan_threshold_pct ||
                           f.no_stable || f.reoptimize_interval_s || f.reoptimize_min_gain)) {
    return Failure{kExitUsage,
                   "--debounce-ms, --min-replan-interval-ms, --replan-threshold-pct, --no-stable, "
                   "--reoptimize-interval-s, --reoptimize-min-gain: control loop options; the "
                   "oracle has no control loop"};
  }
  if (o.control.oracle && f.impact) {
    return Failure{kExitUsage, "--impact: the oracle has no control loop to account for"};
  }
  if (f.impact) {
    core::ImpactOptions io;
    io.ecmp_seed = o.policy.planner.seed;
    io.ports = o.policy.planner.ports;
    o.control.loop.impact = io;
  }
  if (f.no_stable && (f.reoptimize_interval_s || f.reoptimize_min_gain)) {
    return Failure{kExitUsage,
                   "--reoptimize-interval-s, --reoptimize-min-gain: only with stable re-planning "
                   "(drop --no-stable)"};
  }
  // cruxd's defaults (sim::ControlOptions: planner.stable true, reoptimize_interval_ms 600000):
  // between re-optimisations an event re-plans only the jobs it touches, the others keep their
  // paths and levels. Only `crux` has a stable mode; the oracle plans every job from scratch at
  // every event, the best plan.
  o.control.stable = !o.control.oracle && !f.no_stable;
  if (f.reoptimize_interval_s) {
    o.control.loop.reoptimize_interval = core::Duration::Seconds(*f.reoptimize_interval_s);
  }
  if (f.reoptimize_min_gain) o.control.loop.reoptimize_min_gain = *f.reoptimize_min_gain;
  // cruxd keeps level 0 for profiling newcomers (configs/cruxd.yaml: reserved_high_levels 1);
  // the oracle has no newcomers.
  const int default_reserved = !o.control.oracle && o.policy.planner.levels > 1 ? 1 : 0;
  o.policy.planner.reserved_high_levels = f.reserved_high_levels.value_or(default_reserved);
  if (f.debounce_ms) o.control.loop.debounce = core::Duration::Seconds(*f.debounce_ms / 1e3);
  if (f.min_replan_interval_ms) {
    o.control.loop.min_replan_interval = core::Duration::Seconds(*f.min_replan_interval_ms / 1e3);
  }
  if (f.replan_threshold_pct) o.control.loop.replan_threshold_pct = *f.replan_threshold_pct;
  core::Status valid = core::ValidatePlannerOptions(o.policy.planner);
  if (!valid.ok()) return Failure{kExitUsage, "options: " + valid.message()};
  double horizon = 0;
  std::string horizon_source = "--horizon-s";
  if (f.horizon_s) {
    horizon = *f.horizon_s;
  } else if (sc.horizon_s) {
    horizon = *sc.horizon_s;
    horizon_source = "scenario.horizon_s";
  } else {
    horizon = 3600;
    for (const sim::SimJob& j : p->jobs) {
      const double end = j.arrival.ToSeconds() + (j.duration ? j.duration->ToSeconds() : 3600.0);
      horizon = std::max(horizon, end);
    }
    if (!(horizon <= sim::kMaxSimSeconds)) {
      return Failure{kExitUsage, "--horizon-s: the default horizon (the end of the last job, " +
                                     FormatNumber(horizon) + " s) exceeds the longest horizon " +
                                     FormatNumber(sim::kMaxSimSeconds) +
                                     " s (about 31.7 years); give a shorter --horizon-s"};
    }
  }
  if (!std::isfinite(horizon) || !(horizon > 0) || horizon > sim::kMaxSimSeconds) {
    return Failure{kExitUsage, horizon_source +
                                   ": must be > 0 and <= " + FormatNumber(sim::kMaxSimSeconds) +
                                   " s (about 31.7 years; got " + FormatNumber(horizon) + ")"};
  }
  if (f.sample_interval_s) {
    const double samples = std::ceil(horizon / *f.sample_interval_s);
    if (!(samples <= static_cast<double>(sim::kMaxSamples))) {
      return Failure{kExitUsage, "--sample-interval-s: " + FormatNumber(*f.sample_interval_s) +
                                     " s gives more than " + std::to_string(sim::kMaxSamples) +
                                     " samples over the " + FormatNumber(horizon) +
                                     " s horizon (use at least " +
                                     FormatNumber(horizon / static_cast<double>(sim::kMaxSamples)) +
                                     " s)"};
    }
  }
  o.horizon = core::Duration::Seconds(horizon);
  o.fast_forward = f.no_fast_forward ? false : sc.fast_forward.value_or(true);
  o.single_overlap = f.single_overlap;
  o.spray = f.spray || sc.spray.value_or(false);
  o.spray_max_paths = f.spray_max_paths.value_or(0);
  o.gpus_per_host = gpus_per_host;
  o.sample_interval =
      core::Duration::Seconds(f.sample_interval_s.value_or(std::max(1.0, horizon / 500.0)));
  if (!f.quiet) {
    o.progress = [&err](const sim::Progress& pr) {
      const double sim_s = pr.simulated.ToSeconds();
      const double total = pr.horizon.ToSeconds();
      const double rate = pr.wall_s > 0 ? static_cast<double>(pr.events) / pr.wall_s : 0;
      const double eta = sim_s > 0 ? pr.wall_s * (total - sim_s) / sim_s : 0;
      char line[256];
      std::snprintf(line, sizeof(line),
                    "%s: simulated %.2f h / %.2f h (%.1f%%), %llu events, %.0f events/s, "
                    "ETA %.0f s\n",
                    kProgram, sim_s / 3600, total / 3600, total > 0 ? 100 * sim_s / total : 0,
                    static_cast<unsigned long long>(pr.events), rate, eta);
      err << line << std::flush;
    };
  }
  p->info.topology = topo_path;
  p->info.workload = workload_name;
  p->info.levels = o.policy.planner.levels;
  p->info.reserved_high_levels = o.policy.planner.reserved_high_levels;
  p->info.oracle = o.control.oracle;
  p->info.debounce_ms = o.control.loop.debounce.ToSeconds() * 1e3;
  p->info.min_replan_interval_ms = o.control.loop.min_replan_interval.ToSeconds() * 1e3;
  p->info.replan_threshold_pct = o.control.loop.replan_threshold_pct;
  p->info.stable = o.control.stable;
  p->info.reoptimize_interval_s =
      o.control.stable ? o.control.loop.reoptimize_interval.ToSeconds() : 0.0;
  p->info.reoptimize_min_gain = o.control.stable ? o.control.loop.reoptimize_min_gain : 0.0;
  p->info.seed = o.policy.planner.seed;
  p->info.horizon_s = horizon;
  return std::nullopt;
}

std::optional<Failure> SimulateOne(const Prepared& p, const std::string& policy,
                                   sim::SimResult* result, std::ostream& err, bool quiet) {
  if (!quiet) err << kProgram << ": running policy '" << policy << "'\n";
  core::Result<sim::SimResult> r = sim::Simulate(p.topo, policy, p.jobs, p.link_events, p.options);
  if (!r.ok()) {
    return Failure{ExitCodeFor(r.status()),
                   r.status().WithContext("simulation (" + policy + ")").message()};
  }
  *result = std::move(*r);
  if (result->policy.empty()) result->policy = policy;
  return std::nullopt;
}

int Fail(std::ostream& err, const Failure& f) {
  err << kProgram << ": error: " << f.message << "\n";
  return f.code;
}

int DoRun(const RunFlags& f, std::ostream& out, std::ostream& err) {
  Prepared p;
  if (auto e = Prepare(f, /*compare=*/false, &p, err)) return Fail(err, *e);
  sim::SimResult r;
  if (auto e = SimulateOne(p, p.policies[0], &r, err, f.quiet)) return Fail(err, *e);
  core::Status w = WriteRunOutputs(r, p.info, f.out, !f.no_plots);
  if (!w.ok()) return Fail(err, {kExitSimulation, w.message()});
  char line[512];
  std::snprintf(line, sizeof(line),
                "policy %s: gpu_utilization %.4f, work_utilization %.4f, cluster_utilization %.4f, "
                "%zu jobs, mean JCT %.1f s, mean slowdown %.4f, mean profiling %.2f s, %llu "
                "events, %.2f s wall, "
                "%s\n",
                r.policy.c_str(), r.gpu_utilization, r.work_utilization, r.cluster_utilization,
                r.jobs.size(), MeanJct(r), MeanSlowdown(r), MeanProfiling(r),
                static_cast<unsigned long long>(r.events), r.wall_s,
                r.oracle ? "oracle" : "control loop");
  out << line;
  return kExitOk;
}

int DoCompare(const RunFlags& f, std::ostream& out, std::ostream& err) {
  Prepared p;
  if (auto e = Prepare(f, /*compare=*/true, &p, err)) return Fail(err, *e);
  std::vector<sim::SimResult> results;
  for (const std::string& policy : p.policies) {
    sim::SimResult r;
    if (auto e = SimulateOne(p, policy, &r, err, f.quiet)) return Fail(err, *e);
    core::Status w =
        WriteRunOutputs(r, p.info, (std::filesystem::path(f.out) / policy).string(), !f.no_plots);
    if (!w.ok()) return Fail(err, {kExitSimulation, w.message()});
    results.push_back(std::move(r));
  }
  core::Status w = WriteCompareOutputs(results, p.info, f.out, !f.no_plots);
  if (!w.ok()) return Fail(err, {kExitSimulation, w.message()});
  out << CompareTable(results);
  return kExitOk;
}

int DoFaults(RunFlags f, FaultFlags ff, std::ostream& out, std::ostream& err) {
  if (ff.after_reroute_s) {
    if (!ff.file.empty()) {
      return Fail(err, {kExitUsage, "--after-reroute-s: not with --faults-file"});
    }
    ff.count = 1;
    ff.link_down = 1;
    ff.link_gray = ff.tor_down = ff.link_lossy = 0;
    ff.uniform = false;
    ff.min_duration_s = ff.max_duration_s = *ff.after_reroute_s;
    ff.spacing_s = *ff.after_reroute_s + 1;  // The horizon: the fault plus as long again.
  }
  // The horizon covers every fault slot (or the file's last fault) and one more slot.
  if (!f.horizon_s) {
    f.horizon_s = ff.start_s + (static_cast<double>(ff.count) + 1) * ff.spacing_s;
  }
  for (const std::string& mode : SplitCommas(ff.modes)) {
    if (mode != "none" && mode != "manual" && mode != "auto" && mode != "tomography" &&
        mode != "tomography1") {
      return Fail(err, {kExitUsage, "--modes: unknown mode '" + core::EscapeForTerminal(mode) +
                                        "' (none, manual, auto, tomography, tomography1)"});
    }
  }
  Prepared p;
  if (auto e = Prepare(f, /*compare=*/false, &p, err)) return Fail(err, *e);
  if (p.options.control.oracle) {
    return Fail(err, {kExitUsage, "--oracle: fault injection needs the control loop"});
  }
  std::vector<sim::InjectedFault> faults;
  const uint64_t fault_seed = ff.fault_seed.value_or(p.options.policy.planner.seed);
  if (!ff.file.empty()) {
    core::Result<std::string> text = textio::ReadTextFile(ff.file);
    if (!text.ok()) return Fail(err, {kExitUsage, text.status().message()});
    core::Result<std::vector<sim::InjectedFault>> fs = sim::ParseFaultsCsv(*text, p.topo);
    if (!fs.ok()) return Fail(err, {kExitUsage, fs.status().WithContext(ff.file).message()});
    faults = std::move(*fs);
  } else {
    sim::FaultGenOptions g;
    g.count = ff.count;
    g.seed = fault_seed;
    g.start = core::Duration::Seconds(ff.start_s);
    g.spacing = core::Duration::Seconds(ff.spacing_s);
    g.min_duration = core::Duration::Seconds(ff.min_duration_s);
    g.max_duration = core::Duration::Seconds(ff.max_duration_s);
    g.link_down = ff.link_down;
    g.link_gray = ff.link_gray;
    g.tor_down = ff.tor_down;
    g.link_lossy = ff.link_lossy;
    g.gray_min = ff.gray_min;
    g.gray_max = ff.gray_max;
    g.busy_targets = !ff.uniform;
    g.busy_fabric = ff.after_reroute_s.has_value();
    core::Result<std::vector<sim::InjectedFault>> fs = sim::GenerateFaults(p.topo, g);
    if (!fs.ok()) return Fail(err, {kExitUsage, "faults: " + fs.status().message()});
    faults = std::move(*fs);
  }
  sim::FaultSimOptions base;
  base.flow_reports = true;
  base.report_interval = core::Duration::Seconds(ff.report_interval_ms / 1e3);
  base.stall_timeout = core::Duration::Seconds(ff.stall_timeout_ms / 1e3);
  base.switch_delay = core::Duration::Seconds(ff.switch_delay_ms / 1e3);
  base.nic_signals = !ff.no_nic_signals;
  base.seed = fault_seed;
  const core::Duration grace = core::Duration::Seconds(ff.grace_s);
  std::vector<FaultModeRun> runs;
  for (const std::string& mode : SplitCommas(ff.modes)) {
    FaultModeRun r;
    r.mode = mode;
    sim::SimOptions o = p.options;
    o.faults = base;
    o.control.loop.faults.expectation = ff.expectation == "own_best"
                                            ? core::FlowExpectation::kOwnBest
                                            : core::FlowExpectation::kPlanShare;
    o.control.loop.faults.min_jobs = ff.min_jobs;
    o.control.loop.faults.probes.enabled = ff.probes;
    if (mode == "none") {
      r.description = "no faults (flow reports on: every decision is a false positive)";
    } else if (mode == "manual") {
      r.description = "faults, faults.automatic=false (suspects shown, nothing re-routed)";
      o.faults.faults = faults;
      o.control.loop.faults.automatic = false;
    } else if (mode == "auto") {
      r.description = "faults, automatic handling, switch port state + flow tomography";
      o.faults.faults = faults;
    } else if (mode == "tomography") {
      r.description = "faults, automatic handling, flow tomography only (no switch or NIC signals)";
      o.faults.faults = faults;
      o.faults.switch_signals = false;
      o.faults.nic_signals = false;
    } else {
      r.description =
          "faults, automatic handling, flow tomography only, localisation.min_flows = 1";
      o.faults.faults = faults;
      o.faults.switch_signals = false;
      o.faults.nic_signals = false;
      o.control.loop.faults.localisation.min_flows = 1;
    }
    r.faults = !o.faults.faults.empty();
    r.switch_signals = o.faults.switch_signals && r.faults;
    if (!f.quiet) err << kProgram << ": faults mode '" << mode << "'\n";
    core::Result<sim::SimResult> res =
        sim::Simulate(p.topo, p.policies[0], p.jobs, p.link_events, o);
    if (!res.ok()) {
      return Fail(err, {ExitCodeFor(res.status()),
                        res.status().WithContext("simulation (" + mode + ")").message()});
    }
    r.result = std::move(*res);
    // Busy targets are picked when each fault starts, from the pinned paths of that run; the
    // first run with faults fixes them, and every later mode gets the same faults (resolved
    // targets; faults that found no target are left out).
    if (r.faults && std::any_of(faults.begin(), faults.end(),
                                [](const sim::InjectedFault& x) { return x.busy; })) {
      std::vector<sim::InjectedFault> resolved;
      for (const sim::FaultRecord& fr : r.result.fault_records) {
        if (!fr.injected) continue;
        sim::InjectedFault x = fr.fault;
        x.busy = false;
        resolved.push_back(x);
      }
      faults = std::move(resolved);
    }
    r.score = sim::ScoreFaults(
        r.result.fault_records, r.result.link_decisions, r.switch_signals, grace,
        static_cast<uint32_t>(std::max(1, o.control.loop.faults.localisation.min_flows)));
    runs.push_back(std::move(r));
  }
  nlohmann::json setup;
  setup["topology"] = p.info.topology;
  setup["workload"] = p.info.workload;
  setup["policy"] = p.policies[0];
  setup["seed"] = p.info.seed;
  setup["fault_seed"] = fault_seed;
  setup["horizon_s"] = p.info.horizon_s;
  setup["faults"] = faults.size();
  setup["faults_file"] = ff.file;
  setup["expectation"] = ff.expectation;
  setup["min_jobs"] = ff.min_jobs;
  setup["probes"] = ff.probes;
  setup["targets"] = ff.file.empty() ? (ff.uniform ? "uniform" : "busy") : "file";
  setup["start_s"] = ff.start_s;
  setup["spacing_s"] = ff.spacing_s;
  setup["duration_s"] = {ff.min_duration_s, ff.max_duration_s};
  setup["mix"] = {{"link_down", ff.link_down},
                  {"link_gray", ff.link_gray},
                  {"tor_down", ff.tor_down},
                  {"link_lossy", ff.link_lossy}};
  setup["gray_fraction"] = {ff.gray_min, ff.gray_max};
  setup["report_interval_ms"] = ff.report_interval_ms;
  setup["stall_timeout_ms"] = ff.stall_timeout_ms;
  setup["switch_delay_ms"] = ff.switch_delay_ms;
  setup["grace_s"] = ff.grace_s;
  core::Status w = WriteFaultReport(f.out, p.topo, runs, setup);
  if (!w.ok()) return Fail(err, {kExitSimulation, w.message()});
  out << FaultReportTable(runs);
  return kExitOk;
}

int DoGenTrace(const GenFlags& f, std::ostream& out, std::ostream& err) {
  wl::GeneratorOptions g;
  g.seed = f.seed;
  g.days = f.days;
  g.mean_interarrival_s = f.mean_interarrival_s;
  g.scatter_probability = f.scatter;
  g.spill_probability = f.spill;
  g.share_probability = f.share;
  if (!f.mix.empty()) g.mix = f.mix;
  core::Status valid = wl::ValidateGeneratorOptions(g);
  if (!valid.ok()) return Fail(err, {kExitUsage, "--" + valid.message()});
  if (f.topology.empty()) {
    std::string placing;  // The flags given that place jobs.
    for (const auto& [given, flag] : {std::pair{f.load.has_value(), "--load"},
                                      {f.scatter > 0, "--scatter"},
                                      {f.spill > 0, "--spill"},
                                      {f.share > 0, "--share"}}) {
      if (given) placing += (placing.empty() ? "" : "/") + std::string(flag);
    }
    if (!placing.empty()) {
      return Fail(err, {kExitUsage, placing + ": need --topology to place on"});
    }
  }
  core::Result<wl::ModelCatalog> models =
      wl::LoadModelsFile(f.models.empty() ? DefaultModelsPath() : f.models);
  if (!models.ok()) return Fail(err, {kExitUsage, models.status().message()});
  std::optional<core::Topology> topo;
  std::optional<wl::Placer> placer;
  if (!f.topology.empty()) {
    core::Result<core::Topology> t = spec::LoadTopologyFile(f.topology);
    if (!t.ok()) return Fail(err, {kExitUsage, t.status().message()});
    topo = std::move(*t);
    core::Result<wl::Placer> pl = wl::Placer::Create(*topo, f.gpus_per_host);
    if (!pl.ok()) return Fail(err, {kExitUsage, pl.status().message()});
    placer = std::move(*pl);
    if (f.load) {
      core::Result<double> gap = wl::MeanInterarrivalForLoad(g, placer->total_gpus(), *f.load);
      if (!gap.ok()) return Fail(err, {kExitUsage, "--" + gap.status().message()});
      g.mean_interarrival_s = *gap;
    }
  }
  core::Result<std::vector<wl::TraceJob>> trace =
      wl::GenerateTrace(g, *models, topo ? &*topo : nullptr, placer ? &*placer : nullptr);
  if (!trace.ok()) return Fail(err, {kExitUsage, trace.status().message()});
  core::Status w = wl::WriteTraceFile(f.out, *trace);
  if (!w.ok()) return Fail(err, {kExitSimulation, w.message()});
  const wl::TraceStats s = wl::ComputeTraceStats(*trace);
  nlohmann::json j;
  j["trace"] = f.out;
  j["jobs"] = s.jobs;
  j["share_ge_128_gpus"] = s.share_ge_128;
  j["max_gpus"] = s.max_gpus;
  j["span_s"] = s.span_s;
  j["peak_concurrent_jobs"] = s.peak_jobs;
  j["peak_gpus"] = s.peak_gpus;
  j["peak_jobs_on_1000_gpus"] = s.peak_jobs_on_1000_gpus;
  j["mean_interarrival_s"] = g.mean_interarrival_s;
  if (placer) {
    const double span = g.days * 86400.0;
    j["cluster_gpus"] = placer->total_gpus();
    j["offered_load"] = wl::ExpectedGpuSecondsPerJob(g) /
                        (g.mean_interarrival_s * static_cast<double>(placer->total_gpus()));
    j["mean_gpu_occupancy"] = wl::MeanGpuOccupancy(*trace, placer->total_gpus(), span);
    const wl::ContentionStats c = wl::ComputeContentionStats(*trace, [&](const std::string& host) {
      core::Result<core::NodeId> id = topo->FindNode(host);
      return id.ok() ? placer->tor_group(*id) : -1;
    });
    j["share_jobs_cross_tor"] = c.share_jobs_cross_tor;
    j["share_jobs_may_contend"] = c.share_jobs_may_contend;
    j["share_gpus_may_contend"] = c.share_gpus_may_contend;
  }
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& [g2, n] : s.size_counts) sizes[std::to_string(g2)] = n;
  j["size_counts"] = sizes;
  out << j.dump(2) << "\n";
  return kExitOk;
}

}  // namespace

int RunSimCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    CLI::App app("crux-sim: trace-driven flow-level simulator of multi-tenant GPU clusters",
                 kProgram);
    app.require_subcommand(1);
    RunFlags run_flags;
    RunFlags compare_flags;
    GenFlags gen;
    CLI::App* run = app.add_subcommand("run", "Simulate one policy");
    AddRunFlags(run, &run_flags, false);
    CLI::App* compare = app.add_subcommand("compare", "Simulate several policies side by side");
    AddRunFlags(compare, &compare_flags, true);
    RunFlags fault_run;
    FaultFlags ff;
    CLI::App* fc = app.add_subcommand(
        "faults", "Inject hidden faults; score the control loop's detection (report.json/md)");
    AddRunFlags(fc, &fault_run, false);
    fc->add_option("--faults", ff.count, "Random faults to inject (default 200)");
    fc->add_option("--fault-seed", ff.fault_seed, "Seed of the faults (default --seed)");
    fc->add_option("--faults-file", ff.file,
                   "Faults CSV (time_s,kind,target,fraction,duration_s) instead of random ones");
    fc->add_option("--fault-start-s", ff.start_s, "First fault slot (default 3600)");
    fc->add_option("--fault-spacing-s", ff.spacing_s, "One fault per slot of this length (60)")
        ->check(CLI::PositiveNumber);
    fc->add_option("--fault-min-duration-s", ff.min_duration_s, "Shortest fault (15)");
    fc->add_option("--fault-max-duration-s", ff.max_duration_s, "Longest fault (40)");
    fc->add_option("--mix", ff.link_down, "Weight of link_down (0.4)");
    fc->add_option("--mix-gray", ff.link_gray, "Weight of link_gray (0.4)");
    fc->add_option("--mix-tor", ff.tor_down, "Weight of tor_down (0.2)");
    fc->add_option("--mix-lossy", ff.link_lossy,
                   "Weight of link_lossy: gray with port error counters (0)");
    fc->add_option("--gray-min", ff.gray_min, "Least gray capacity fraction (0.1)");
    fc->add_option("--gray-max", ff.gray_max, "Largest gray capacity fraction (0.7)");
    fc->add_flag("--uniform", ff.uniform,
                 "Targets uniformly among all switch cables / ToRs (default: among the busy "
                 "ones at the fault's start)");
    fc->add_option("--switch-delay-ms", ff.switch_delay_ms, "Port state delay (250)");
    fc->add_option("--report-interval-ms", ff.report_interval_ms, "Heartbeat period (1000)")
        ->check(CLI::PositiveNumber);
    fc->add_option("--stall-timeout-ms", ff.stall_timeout_ms,
                   "No progress this long = a transport error (1000)")
        ->check(CLI::PositiveNumber);
    fc->add_option("--grace-s", ff.grace_s, "A decision this long after a fault ends counts (5)");
    fc->add_option("--modes", ff.modes,
                   "Runs: none,manual,auto,tomography,tomography1 (default: the first four)");
    fc->add_option("--expectation", ff.expectation,
                   "What a flow is measured against: plan_share (default) or own_best")
        ->check(CLI::IsMember({"plan_share", "own_best"}));
    fc->add_option("--min-jobs", ff.min_jobs,
                   "Jobs behind a flows-only suspicion before it changes a link (default 2)")
        ->check(CLI::Range(1, 1000));
    fc->add_option("--after-reroute-s", ff.after_reroute_s,
                   "The re-route scenario: one busy switch-to-switch cable goes down at "
                   "--fault-start-s for this long, then the run goes on as long again; every "
                   "decision on another link is a false positive (e.g. 600)")
        ->check(CLI::Range(1.0, 1e6));
    fc->add_flag("--no-nic-signals", ff.no_nic_signals,
                 "No host agents' NIC loss/congestion counters (default: on in manual and auto)");
    fc->add_flag("--probes", ff.probes,
                 "faults.probes on in every mode: the plans carry probes over uncovered and "
                 "suspect links, which the host agents measure and report (default: off)");
    CLI::App* gt = app.add_subcommand("gen-trace", "Generate a Lingjun-calibrated trace CSV");
    gt->add_option("--seed", gen.seed, "Seed");
    gt->add_option("--days", gen.days, "Trace span in days")->check(CLI::PositiveNumber);
    gt->add_option("--mean-interarrival-s", gen.mean_interarrival_s, "Mean arrival gap")
        ->check(CLI::PositiveNumber);
    gt->add_option("--load", gen.load,
                   "Offered load as a fraction of --topology's GPUs (sets the arrival gap)");
    gt->add_option("--scatter", gen.scatter,
                   "Probability a multi-host job is placed on random free hosts (0..1)")
        ->check(CLI::Range(0.0, 1.0));
    gt->add_option("--spill", gen.spill,
                   "Probability a packed multi-host job is placed pack-then-spill across tiers "
                   "(0..1; docs/sim-workloads.md calibrates 0.6)")
        ->check(CLI::Range(0.0, 1.0));
    gt->add_option("--share", gen.share,
                   "Probability a packed multi-host job (single-pattern profile) takes half of "
                   "each of twice as many hosts, beside another job (0..1)")
        ->check(CLI::Range(0.0, 1.0));
    gt->add_option("--mix", gen.mix, "Job mix: lingjun-2023 (default) or llm-2025");
    gt->add_option("--models", gen.models, "Model profiles YAML (default: shipped)");
    gt->add_option("--topology", gen.topology, "Place jobs on this topology's hosts");
    gt->add_option("--gpus-per-host", gen.gpus_per_host, "GPUs per host for placement")
        ->check(CLI::Range(1, 1024));
    gt->add_option("--out", gen.out, "Trace CSV to write")->required();
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (e.get_exit_code() == 0) return app.exit(e, out, err);
      std::ostringstream msg;
      app.exit(e, msg, msg);
      err << kProgram << ": error: " << msg.str();
      return kExitUsage;
    }
    if (run->parsed()) return DoRun(run_flags, out, err);
    if (compare->parsed()) return DoCompare(compare_flags, out, err);
    if (fc->parsed()) return DoFaults(fault_run, ff, out, err);
    return DoGenTrace(gen, out, err);
  } catch (const std::bad_alloc&) {
    // Memory is short: what the failed run held is freed by now, but writing the message may
    // still fail; then fall back to stdio, which needs no allocation here.
    try {
      err << kProgram
          << ": error: out of memory (the workload, horizon or sampling need more memory than "
             "is available)\n";
    } catch (...) {
      std::fputs("crux-sim: error: out of memory\n", stderr);
    }
    return kExitSimulation;
  } catch (const std::exception& e) {
    err << kProgram << ": error: internal error: " << core::EscapeForTerminal(e.what()) << "\n";
    return kExitSimulation;
  } catch (...) {
    err << kProgram << ": error: internal error: unknown exception\n";
    return kExitSimulation;
  }
}

}  // namespace crux::simcli
