// The trace CSV: one training job per line.
//
//   job_id,arrival_s,duration_s,iterations,gpus,placement,model
//   gpt-17,3600,7200,,128,host0;host1;...;host15,gpt3_6.7b
//   bert-3,3650.5,,500,16,,bert_large
//
// * The header line is required and must be exactly the one above. Blank lines and lines whose
//   first character is '#' are ignored. CRLF line ends are accepted. Fields are not quoted, so
//   no field may contain a comma; surrounding spaces are trimmed.
// * job_id: non-empty, unique. arrival_s: seconds from the start of the trace, in
//   [0, sim::kMaxSimSeconds = 1e9].
// * duration_s (> 0 and <= 1e9) or iterations (integer >= 1): at most one of them; both empty =
//   the job runs until the simulation horizon.
// * job_id, the host names of placement and model follow Crux's name rule (crux/core/ids.h,
//   core::IsValidName: 1-128 characters of [A-Za-z0-9._:/-]), so they carry no control
//   characters, escape sequences, spaces or non-ASCII bytes.
// Errors name the line, the column (1-based field number) and the field:
//   "line 4, column 2 (arrival_s): must be a finite number >= 0 (got '-3')".
//
// Thread-safety: pure functions (the file helpers touch only their file).
#ifndef CRUX_SIM_WORKLOAD_TRACE_H_
#define CRUX_SIM_WORKLOAD_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::sim::workload {

inline constexpr std::string_view kTraceHeader =
    "job_id,arrival_s,duration_s,iterations,gpus,placement,model";

struct TraceJob {
  std::string id;
  double arrival_s = 0;
  std::optional<double> duration_s;
  std::optional<int64_t> iterations;
  int gpus = 1;
  std::vector<std::string> placement;  // Empty: to be placed.
  std::string model;
  int line = 0;  // Line in the file it came from (0 when built in memory).
};

core::Result<std::vector<TraceJob>> ParseTraceCsv(std::string_view text);
// Errors carry the path as context.
core::Result<std::vector<TraceJob>> LoadTraceFile(const std::string& path);

// The CSV text of `jobs` (header first; numbers printed so that they parse back exactly).
// REQUIRES: the jobs satisfy the rules above.
std::string FormatTraceCsv(const std::vector<TraceJob>& jobs);
core::Status WriteTraceFile(const std::string& path, const std::vector<TraceJob>& jobs);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_TRACE_H_
