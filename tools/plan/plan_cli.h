// crux-plan's logic: flags -> topology + jobs -> core::Planner -> JSON or table on stdout.
//
//   crux-plan --topology T.yaml --jobs J.yaml [--levels K] [--seed S] [--format json|table]
//             [--reserved-high N] [--reserved-low N] [--topo-orders M]
//             [--gpu-peak-tflops F] [--path-order intensity|priority] [--no-ports]
//
// Contract: on success the whole output (pretty JSON with 2-space indent, or the table of
// crux/spec/plan_output.h) is written to `out` and 0 is returned. On any error nothing at all is
// written to `out`; one message naming the offending flag or YAML key goes to `err`, and the
// exit code is kExitUsage (bad flags, unreadable or invalid YAML, unknown hosts, bad numbers,
// invalid planner options) or kExitPlanning (the planner failed, e.g. a flow has no path).
// `--help` prints the usage to `out` and returns 0.
//
// Thread-safety: RunPlanCli has no shared state; concurrent calls are safe.
#ifndef CRUX_TOOLS_PLAN_PLAN_CLI_H_
#define CRUX_TOOLS_PLAN_PLAN_CLI_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "crux/core/planner.h"
#include "crux/core/status.h"

namespace crux::plan {

inline constexpr int kExitOk = 0;
inline constexpr int kExitPlanning = 1;
inline constexpr int kExitUsage = 2;

enum class OutputFormat { kJson, kTable };

// Parsed command line.
struct PlanCliOptions {
  std::string topology_path;
  std::string jobs_path;
  OutputFormat format = OutputFormat::kJson;
  core::PlannerOptions planner;
};

// Loads both files, plans, and renders. On error returns the exit code and sets *error.
// REQUIRES: error != nullptr.
int RunPlan(const PlanCliOptions& options, std::string* output, std::string* error);

// The whole CLI: parses argv, runs RunPlan, writes to out / err (see the contract above).
int RunPlanCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace crux::plan

#endif  // CRUX_TOOLS_PLAN_PLAN_CLI_H_
