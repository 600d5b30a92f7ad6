// cruxctl's output: admin replies (proto/crux/v1/admin.proto) -> human tables or JSON.
//
// JSON contract (stable; scripts may rely on it, new keys may be added, none renamed):
//   * Every key is the snake_case field name of the admin.proto message it renders.
//   * Numbers are JSON numbers (uint64 too: epochs and millisecond stamps stay below 2^53),
//     except status.state_id (see there).
//   * Enums are lower-case words: JobState -> "registered" | "profiling" | "scheduled" | "gone" |
//     "unspecified"; LinkHealth -> "up" | "degraded" | "down" | "unspecified".
//   * Top-level shapes, one object per command:
//       status     {version, uptime_ms, epoch, jobs, jobs_by_state{state: n}, clients, switches,
//                   hosts, links, links_not_up, levels, dry_run, replans, last_replan_ms,
//                   topology, state_path, store_ok, store_error, state_id, refusals{reason: n}}
//                   state_id is a decimal *string* (a random 64-bit id does not survive JSON
//                   readers that hold numbers as doubles; protobuf's JSON mapping does the same);
//                   store_ok false with an empty store_error: the daemon does not report store
//                   health (an older cruxd).
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
//                   last_seen_ms, dscp_colours_shared, in_sync, drift_repairs, last_drift_ms,
//                   last_drifted_fields, highest_term, stale_term_refused, capabilities:
//                   {queues, strict_priority, dwrr, pbr_redirect, backends: [name]},
//                   enforcement: {status, detail, maps_checked, queues_checked,
//                   checked_unix_ms, epoch}}]}  enforcement.status: "match" | "mismatch" |
//                   "unknown"; detail: the first difference (mismatch) or why (unknown)
//   Units are the ones admin.proto names: intensity in FLOP/s, *_bps bits per second, *_ms
//   milliseconds, last_seen_ms and last_drift_ms Unix milliseconds (0: never).
//   DumpJson prints a document as printable ASCII: strings are JSON-escaped (control characters
//   as \u00XX, every non-ASCII character as \uXXXX, invalid UTF-8 as U+FFFD), so the output is
//   valid JSON and safe on a terminal whatever the daemon sent.
//
// Untrusted text: cruxctl does not trust the daemon's strings (job ids, tenants, models, link,
// switch and host names, error messages, explanations). Every one of them reaches a human
// rendering through core::EscapeForTerminal (crux/core/text.h): control characters, ESC, DEL, C1
// controls, bidi overrides and invalid UTF-8 are shown as "\xHH", a backslash as "\\", so a
// field can neither drive the terminal nor start a forged line. Table cells are escaped by
// Table::AddRow (pass raw text); the text renderings escape each field they print.
//
// Tables: one header row, columns separated by two spaces, numbers right-aligned, human units
// (e.g. "100G" for 1e11 b/s). Every table ends with a newline; an empty list prints the header
// and a "(none)" line. New columns are added before a table's free-text last column (LAST
// ERROR); existing columns keep their titles and order. `job ID` lists at most 6 shared links
// per contending job (with the count; --json has every link).
//
// Thread-safety: pure functions of their arguments.
#ifndef CRUX_TOOLS_CRUXCTL_RENDER_H_
#define CRUX_TOOLS_CRUXCTL_RENDER_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crux/core/topology/link_name.h"
#include "crux/v1/admin.pb.h"
#include "crux/v1/common.pb.h"

namespace crux::cruxctl {

// A plain text table. Columns flagged `numeric` are right-aligned. AddRow escapes every cell
// with core::EscapeForTerminal (cells are raw text, never pre-escaped); widths count code points.
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

// A link's planned load over its capacity, for the LINKS table: "80.0%"; above
// kMaxShownUtilization ">1000%" (a capacity far below the load: nothing more to read from the
// digits); "-" when not a number or negative (a daemon bug, never shown as a percentage). JSON
// keeps the value (null when not finite or negative).
inline constexpr double kMaxShownUtilization = 10;
std::string FormatUtilization(double fraction);

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
nlohmann::json ToJson(const v1::FaultEvent& event);
nlohmann::json ToJson(const v1::ListFaultsReply& reply);
nlohmann::json ToJson(const v1::ImpactReply& reply);
// The printed form of a JSON document (see the contract above); no trailing newline.
std::string DumpJson(const nlohmann::json& doc);

// Human renderings.
std::string RenderStatusText(const v1::StatusReply& reply);
std::string RenderJobsTable(const v1::ListJobsReply& reply);
std::string RenderJobDetailText(const v1::JobDetail& detail);
std::string RenderLinksTable(const v1::ListLinksReply& reply);
std::string RenderSetLinkText(const v1::SetLinkReply& reply);
std::string RenderPlanDryRunText(const v1::PlanDryRunReply& reply);
std::string RenderSwitchesTable(const v1::ListSwitchesReply& reply);
// cruxctl faults: the links (state, since, automatic or admin, score, reason, evidence) and the
// recent changes.
std::string RenderFaultsText(const v1::ListFaultsReply& reply);
// cruxctl impact: the cluster gain against ECMP, the prediction error, and the jobs that gain,
// lose and are mispredicted most (docs/impact.md).
std::string RenderImpactText(const v1::ImpactReply& reply);

}  // namespace crux::cruxctl

#endif  // CRUX_TOOLS_CRUXCTL_RENDER_H_
