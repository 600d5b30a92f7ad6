// crux-plan's logic: flags -> topology + jobs -> core::Planner -> JSON or table on stdout.
//
//   crux-plan --topology T.yaml --jobs J.yaml [--levels K] [--seed S] [--format json|table]
//             [--reserved-high N] [--reserved-low N] [--topo-orders M]
//             [--gpu-peak-tflops F] [--path-order intensity|priority] [--no-ports]
//             [--max-edges-per-job N]
//
// Contract: on success the whole output (pretty JSON with 2-space indent, or the table of
// crux/spec/plan_output.h) is written to `out` and 0 is returned. On any error nothing at all is
// written to `out`; one message naming the offending flag or YAML key goes to `err` (passed
// through core::EscapeForTerminal unless it is printable text already (core/text.h): no control
// character from the input reaches the terminal),
// and the exit code is
//   kExitUsage (2)       bad flags, unreadable or invalid YAML, unknown hosts, bad numbers or
//                        names, invalid planner options;
//   kExitPlanning (1)    the planner failed (e.g. a flow has no path), the output could not be
//                        written, or an unexpected internal error (an exception other than
//                        std::bad_alloc; the message says "internal error");
//   kExitOutOfMemory (3) memory ran out (std::bad_alloc anywhere: loading, planning,
//                        rendering); the message says so and suggests a smaller input.
// No exception escapes RunPlanCli, and crux-plan never aborts on allocation failure: the JSON is
// rendered one job at a time (spec::PlanToJsonText), so no destructor of a huge DOM can need
// memory while an exception unwinds (nlohmann::json's destructor allocates, and an exception
// thrown there is std::terminate). Memory is O(jobs x (flows + max_edges_per_job)) for the
// output plus the planner's own (core::Plan::dag holds every contention edge).
// `--help` prints the usage to `out` and returns 0.
//
// Thread-safety: RunPlanCli has no shared state; concurrent calls are safe.
#ifndef CRUX_TOOLS_PLAN_PLAN_CLI_H_
#define CRUX_TOOLS_PLAN_PLAN_CLI_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "crux/core/base/status.h"
#include "crux/core/plan/planner.h"
#include "crux/spec/plan_output.h"

namespace crux::plan {

inline constexpr int kExitOk = 0;
inline constexpr int kExitPlanning = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOutOfMemory = 3;

enum class OutputFormat { kJson, kTable };

// Parsed command line.
struct PlanCliOptions {
  std::string topology_path;
  std::string jobs_path;
  OutputFormat format = OutputFormat::kJson;
  core::PlannerOptions planner;
  std::string policy = "crux";  // --policy: a core::PolicyNames() entry; crux = the Planner.
  spec::PlanJsonOptions json;   // --max-edges-per-job.
};

// Loads both files, plans, and renders. On error returns the exit code and sets *error.
// REQUIRES: error != nullptr.
int RunPlan(const PlanCliOptions& options, std::string* output, std::string* error);

// The whole CLI: parses argv, runs RunPlan, writes to out / err (see the contract above).
int RunPlanCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace crux::plan

#endif  // CRUX_TOOLS_PLAN_PLAN_CLI_H_
