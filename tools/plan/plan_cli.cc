#include "plan_cli.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "crux/core/base/text.h"
#include "crux/core/policies/policy.h"
#include "crux/spec/jobs_spec.h"
#include "crux/spec/plan_output.h"
#include "crux/spec/topology_spec.h"
#include "crux/textio/cli.h"

namespace crux::plan {
namespace {

constexpr const char* kProgram = "crux-plan";

// Accepts a decimal integer in [0, 2^64) (CLI11 alone would wrap "-1" into a uint64).
const CLI::Validator kUnsigned(
    [](std::string& text) -> std::string {
      uint64_t v = 0;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
          ec != std::errc() || ptr != text.data() + text.size()) {
        return "must be an integer in [0, 2^64) (got " + text + ")";
      }
      return "";
    },
    "UINT");

// `text` safe for the terminal: kept when it is printable text (messages quote names with
// core::QuoteName, already escaped), else escaped whole.
std::string Shown(std::string_view text) {
  return core::IsPrintableText(text) ? std::string(text) : core::EscapeForTerminal(text);
}

// Shown() applied to every line of `text`, keeping its line breaks.
std::string ShownLines(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool has_newline = end != std::string::npos;
    if (!has_newline) end = text.size();
    out += Shown(std::string_view(text).substr(pos, end - pos));
    if (has_newline) out += '\n';
    pos = end + 1;
  }
  return out;
}

// CLI11's --help / --help-all exceptions, and every parse error, are reported through
// App::exit; everything else is ours.
int ParseFlags(int argc, const char* const* argv, PlanCliOptions* options, std::ostream& out,
               std::ostream& err, bool* done) {
  *done = false;
  CLI::App app(
      "Crux offline planner: GPU-intensity-aware priorities, paths and levels for a set "
      "of training jobs on a topology.",
      kProgram);
  app.option_defaults()->always_capture_default();

  core::PlannerOptions& p = options->planner;
  std::string format = "json";
  std::string path_order = "intensity";
  double peak_tflops = p.gpu_peak_flops / 1e12;
  bool no_ports = false;

  app.add_option("--topology", options->topology_path, "Topology YAML file")->required();
  app.add_option("--jobs", options->jobs_path, "Jobs YAML file")->required();
  app.add_option("--levels", p.levels, "Hardware priority levels K")->check(CLI::Range(1, 64));
  app.add_option("--seed", p.seed, "Seed for the random topological orders")->check(kUnsigned);
  app.add_option("--format", format, "Output format")->check(CLI::IsMember({"json", "table"}));
  app.add_option("--reserved-high", p.reserved_high_levels,
                 "Levels kept above every job (control traffic, newcomers)")
      ->check(CLI::Range(0, 64));
  app.add_option("--reserved-low", p.reserved_low_levels,
                 "Levels kept below every job (best-effort traffic)")
      ->check(CLI::Range(0, 64));
  app.add_option("--topo-orders", p.topo_orders, "Random topological orders m in Algorithm 1")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--gpu-peak-tflops", peak_tflops,
                 "Per-GPU peak TFLOP/s, for jobs without flops_per_iteration")
      ->check(textio::FinitePositiveReal());
  app.add_option("--path-order", path_order, "Order in which jobs pick their paths")
      ->check(CLI::IsMember({"intensity", "priority"}));
  app.add_option("--policy", options->policy,
                 "Scheduling policy (core registry, docs/policies.md); crux is the planner")
      ->check(CLI::IsMember(core::PolicyNames()));
  app.add_flag("--no-ports", no_ports, "Skip the UDP source-port search (all flows unpinned)");
  app.add_option("--max-edges-per-job", options->json.max_edges_per_job,
                 "Contention edges listed in the JSON dag.edges per higher-priority job (the "
                 "rest are counted in dag.edges_omitted); 0 = all, n(n-1)/2 for n jobs that "
                 "all contend")
      ->check(CLI::Range(0, 1 << 30));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *done = true;
    if (e.get_exit_code() == 0) return app.exit(e, out, err);  // --help.
    std::ostringstream msg;
    app.exit(e, msg, msg);
    err << kProgram << ": error: " << ShownLines(msg.str());
    return kExitUsage;
  }
  options->format = format == "table" ? OutputFormat::kTable : OutputFormat::kJson;
  p.path_order =
      path_order == "priority" ? core::PathOrder::kPriority : core::PathOrder::kIntensity;
  p.gpu_peak_flops = peak_tflops * 1e12;
  p.resolve_ports = !no_ports;
  return kExitOk;
}

// Rewrites a core option error ("levels: ...") to name the flag that sets the option
// ("--levels: ..."); messages that start with no known option name get "options: ".
std::string NameTheFlag(const std::string& message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"reserved levels", "--reserved-high/--reserved-low"},
      {"reserved_high_levels", "--reserved-high"},
      {"reserved_low_levels", "--reserved-low"},
      {"topo_orders", "--topo-orders"},
      {"gpu_peak_flops", "--gpu-peak-tflops"},
      {"levels", "--levels"},
      {"seed", "--seed"}};
  for (const auto& [field, flag] : kFlags) {
    const std::string prefix = std::string(field) + ":";
    if (message.rfind(prefix, 0) == 0) return flag + message.substr(std::string(field).size());
  }
  return "options: " + message;
}

}  // namespace

int RunPlan(const PlanCliOptions& options, std::string* output, std::string* error) {
  core::Status valid = core::ValidatePlannerOptions(options.planner);
  if (!valid.ok()) {
    *error = NameTheFlag(valid.message());
    return kExitUsage;
  }
  core::Result<core::Topology> topo = spec::LoadTopologyFile(options.topology_path);
  if (!topo.ok()) {
    *error = topo.status().message();
    return kExitUsage;
  }
  core::Result<std::vector<spec::JobEntry>> jobs = spec::LoadJobsFile(options.jobs_path, *topo);
  if (!jobs.ok()) {
    *error = jobs.status().message();
    return kExitUsage;
  }
  core::Result<core::Plan> plan = core::InternalError("no plan");
  if (options.policy == "crux") {
    core::Planner planner(*topo, options.planner);
    plan = planner.Run(spec::JobSpecs(*jobs));
  } else {
    core::PolicyOptions po;
    po.planner = options.planner;
    po.resolve_ports = options.planner.resolve_ports;
    core::Result<std::unique_ptr<core::SchedulingPolicy>> policy =
        core::MakePolicy(options.policy, *topo, po);
    if (!policy.ok()) {
      *error = "--policy: " + policy.status().message();
      return kExitUsage;
    }
    plan = (*policy)->Schedule(spec::JobSpecs(*jobs));
  }
  if (!plan.ok()) {
    *error = plan.status().WithContext("planning failed").message();
    return kExitPlanning;
  }
  if (options.format == OutputFormat::kTable) {
    *output = spec::PlanToTable(*plan, *topo);
  } else {
    // One job at a time: no DOM of the whole plan (see plan_cli.h).
    *output = spec::PlanToJsonText(*plan, *topo, options.json);
  }
  return kExitOk;
}

int RunPlanCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  try {
    PlanCliOptions options;
    bool done = false;
    int code = ParseFlags(argc, argv, &options, out, err, &done);
    if (done || code != kExitOk) return code;
    std::string output;
    std::string error;
    code = RunPlan(options, &output, &error);
    if (code != kExitOk) {
      err << kProgram << ": error: " << Shown(error) << "\n";
      return code;
    }
    out << output;
    out.flush();
    if (!out) {
      err << kProgram << ": error: could not write the output\n";
      return kExitPlanning;
    }
    return kExitOk;
  } catch (const std::bad_alloc&) {
    // Whatever held the memory has been released by the unwinding; this message needs none.
    err << kProgram
        << ": error: out of memory (the plan needs more memory than is available; use fewer "
           "jobs, or a lower --max-edges-per-job)\n";
    return kExitOutOfMemory;
  } catch (const std::exception& e) {
    err << kProgram << ": internal error: " << Shown(e.what()) << "\n";
    return kExitPlanning;
  } catch (...) {
    err << kProgram << ": internal error: unknown exception\n";
    return kExitPlanning;
  }
}

}  // namespace crux::plan
