// cruxctl's output: admin replies (proto/crux/v1/admin.proto) -> human tables or JSON.
//
// JSON contract (stable; scripts may rely on it, new keys may be added, none renamed):
//   * Every key is the snake_case field name of the admin.proto message it renders.
//   * Numbers are JSON numbers (uint64 too: epochs and millisecond stamps stay below 2^53).
//   * Enums are lower-case words: JobState -> "registered" | "profiling" | "scheduled" | "gone" |
//     "unspecified"; LinkHealth -> "up" | "degraded" | "down" | "unspecified".
//   * Top-level shapes, one object per command:
//       status     {version, uptime_ms, epoch, jobs, jobs_by_state{state: n}, clients, switches,
//                   hosts, links, links_not_up, levels, dry_run, replans, last_replan_ms,
//                   topology, state_path}
//       jobs       {"jobs": [JobSummary]}  JobSummary = {job_id, tenant, state, gpus, hosts,
//                   intensity, k, priority, rank, level, dscp, epoch, period_ms, samples,
//                   last_seen_ms}
//       job ID     {"summary": JobSummary, hosts: [name], work_flops, comm_time_ms, bottleneck,
//                   reference, model, explanation, flows: [{src_nic, dst_nic, bytes, udp_sport,
//                   path: [node], num_paths}], contends_with: [{other_job, links: [link],
//                   weight, above}]}
//       links      {"links": [LinkInfo]}  LinkInfo = {name, health, capacity_bps, nominal_bps,
//                   load_bps, utilization, jobs}
//       set-link   {"changed": [LinkInfo]}
//       plan       {"changes": [{job_id, old_level, new_level, flows_repinned}], replan_ms}
//       switches   {"switches": [{name, connected, desired_epoch, applied_epoch, last_error,
//                   last_seen_ms, dscp_colours_shared}]}
//   Units are the ones admin.proto names: intensity in FLOP/s, *_bps bits per second, *_ms
//   milliseconds, last_seen_ms Unix milliseconds.
//
// Tables: one header row, columns separated by two spaces, numbers right-aligned, human units
// (e.g. "100G" for 1e11 b/s). Every table ends with a newline; an empty list prints the header
// and a "(none)" line. `job ID` lists at most 6 shared links per contending job (with the count;
// --json has every link).
//
// Thread-safety: pure functions of their arguments.
#ifndef CRUX_TOOLS_CRUXCTL_RENDER_H_
#define CRUX_TOOLS_CRUXCTL_RENDER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crux/v1/admin.pb.h"
#include "crux/v1/common.pb.h"

namespace crux::cruxctl {

// A plain text table. Columns flagged `numeric` are right-aligned.
class Table {
 public:
  struct Column {
    std::string title;
    bool numeric = false;
  };
  explicit Table(std::vector<Column> columns);

  // REQUIRES: cells.size() == number of columns.
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string LinkHealthName(v1::LinkHealth health);

// Human number with an SI prefix and `unit`: FormatSi(1.5e14, "FLOP/s") == "150T FLOP/s",
// FormatSi(1e11, "b/s") == "100G b/s"; 3 significant digits; values of 1e21 and above print in
// scientific notation ("3.57e+22 FLOP/s"); non-finite values print as is.
std::string FormatSi(double value, const std::string& unit);
// Milliseconds as "12.3ms" / "4.56s" / "1h02m".
std::string FormatMillis(double ms);

// JSON renderings (see the contract above).
nlohmann::json ToJson(const v1::StatusReply& reply);
nlohmann::json ToJson(const v1::JobSummary& job);
nlohmann::json ToJson(const v1::ListJobsReply& reply);
nlohmann::json ToJson(const v1::JobDetail& detail);
nlohmann::json ToJson(const v1::LinkInfo& link);
nlohmann::json ToJson(const v1::ListLinksReply& reply);
nlohmann::json ToJson(const v1::SetLinkReply& reply);
nlohmann::json ToJson(const v1::PlanDryRunReply& reply);
nlohmann::json ToJson(const v1::ListSwitchesReply& reply);

// Human renderings.
std::string RenderStatusText(const v1::StatusReply& reply);
std::string RenderJobsTable(const v1::ListJobsReply& reply);
std::string RenderJobDetailText(const v1::JobDetail& detail);
std::string RenderLinksTable(const v1::ListLinksReply& reply);
std::string RenderSetLinkText(const v1::SetLinkReply& reply);
std::string RenderPlanDryRunText(const v1::PlanDryRunReply& reply);
std::string RenderSwitchesTable(const v1::ListSwitchesReply& reply);

}  // namespace crux::cruxctl

#endif  // CRUX_TOOLS_CRUXCTL_RENDER_H_
