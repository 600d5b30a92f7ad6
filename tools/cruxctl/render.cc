#include "render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "crux/core/base/text.h"
#include "crux/core/plan/priority.h"
#include "crux/protocol/convert.h"

namespace crux::cruxctl {
namespace {

// Every string that came from the daemon goes through this before it reaches a terminal.
std::string E(std::string_view text) { return core::EscapeForTerminal(text); }

// Display width of escaped (hence valid UTF-8) text: code points, not bytes.
size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (const char c : text) width += (static_cast<unsigned char>(c) & 0xc0) != 0x80 ? 1 : 0;
  return width;
}

std::string Printf(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

std::string JoinNames(const google::protobuf::RepeatedPtrField<std::string>& items,
                      const std::string& separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

nlohmann::json StringArray(const google::protobuf::RepeatedPtrField<std::string>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& item : items) out.push_back(item);
  return out;
}

// Unix milliseconds -> "2026-11-30T05:31:02Z"; 0 -> "-".
std::string FormatUnixMillis(uint64_t unix_ms) {
  if (unix_ms == 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  if (gmtime_r(&seconds, &tm) == nullptr) return std::to_string(unix_ms);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Shared links listed per contending job in the text view (JSON has all of them).
constexpr int kMaxLinksShown = 6;

std::string FormatLevel(int32_t level) { return level < 0 ? "-" : std::to_string(level); }

std::string FormatNumber(double value) {
  if (!std::isfinite(value)) return Printf("%g", value);
  return Printf("%.3g", value);
}

// k_j for the jobs table: the number, or "max"/"min" at the bounds, where it is a finding of the
// pair comparison rather than a ratio (core/priority.h; explained under the table).
std::string FormatCorrection(double k) {
  switch (core::CorrectionTier(k)) {
    case 1:
      return "max";
    case -1:
      return "min";
    default:
      return FormatNumber(k);
  }
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return Printf("%g", fraction);
  return Printf("%.1f%%", fraction * 100.0);
}

}  // namespace

std::string FormatUtilization(double fraction) {
  if (!std::isfinite(fraction) || fraction < 0) return "-";
  if (fraction > kMaxShownUtilization) return Printf(">%.0f%%", kMaxShownUtilization * 100.0);
  return FormatPercent(fraction);
}

namespace {

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + "B";
  return Printf("%.3g", v) + kUnits[unit];
}

// StatusReply.refusals sorted by reason (deterministic output).
std::map<std::string, uint64_t> SortedRefusals(const v1::StatusReply& r) {
  return std::map<std::string, uint64_t>(r.refusals().begin(), r.refusals().end());
}

// "8q strict dwrr pbr sonic+file"; "-" when the agent declared nothing.
// An enforcement status as a JSON word ("match", "mismatch", "unknown") and as the ENFORCED
// column of `cruxctl switches` ("ENFORCED", "MISMATCH", "UNKNOWN").
std::string EnforcementWord(v1::EnforcementStatus s) {
  switch (s) {
    case v1::ENFORCEMENT_STATUS_MATCH:
      return "match";
    case v1::ENFORCEMENT_STATUS_MISMATCH:
      return "mismatch";
    default:
      return "unknown";
  }
}
std::string EnforcedColumn(v1::EnforcementStatus s) {
  switch (s) {
    case v1::ENFORCEMENT_STATUS_MATCH:
      return "ENFORCED";
    case v1::ENFORCEMENT_STATUS_MISMATCH:
      return "MISMATCH";
    default:
      return "UNKNOWN";
  }
}

std::string CapabilitiesSummary(const v1::SwitchCapabilities& c) {
  std::vector<std::string> parts;
  if (c.queues() > 0) parts.push_back(std::to_string(c.queues()) + "q");
  if (c.strict_priority()) parts.push_back("strict");
  if (c.dwrr()) parts.push_back("dwrr");
  if (c.pbr_redirect()) parts.push_back("pbr");
  if (!c.backends().empty()) parts.push_back(JoinNames(c.backends(), "+"));
  if (parts.empty()) return "-";
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells) cell = E(cell);
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) widths[c] = DisplayWidth(columns_[c].title);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cells[c];
      const size_t pad = widths[c] - DisplayWidth(cell);
      const bool last = c + 1 == columns_.size();
      if (c > 0) line += "  ";
      if (columns_[c].numeric) {
        line.append(pad, ' ');
        line += cell;
      } else {
        line += cell;
        if (!last) line.append(pad, ' ');
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  std::vector<std::string> header;
  for (const Column& column : columns_) header.push_back(column.title);
  emit(header);
  if (rows_.empty()) out += "(none)\n";
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string LinkHealthName(v1::LinkHealth health) {
  switch (health) {
    case v1::LINK_HEALTH_UP:
      return "up";
    case v1::LINK_HEALTH_DEGRADED:
      return "degraded";
    case v1::LINK_HEALTH_DOWN:
      return "down";
    default:
      return "unspecified";
  }
}

std::string FormatSi(double value, const std::string& unit) {
  const std::string suffix = unit.empty() ? "" : " " + unit;
  if (!std::isfinite(value)) return Printf("%g", value) + suffix;
  static constexpr struct {
    double scale;
    const char* prefix;
  } kPrefixes[] = {{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  const double magnitude = std::fabs(value);
  // Beyond the largest prefix: plain scientific notation ("3.57e+22 FLOP/s").
  if (magnitude >= 1e21 * 0.9995) return Printf("%.3g", value) + suffix;
  for (const auto& p : kPrefixes) {
    // Round first so that 999.96e9 prints as "1T", not "1e+03G".
    if (magnitude >= p.scale * 0.9995) {
      return Printf("%.3g", value / p.scale) + p.prefix + suffix;
    }
  }
  return Printf("%.3g", value) + suffix;
}

std::string FormatMillis(double ms) {
  if (!std::isfinite(ms)) return Printf("%g", ms) + "ms";
  if (std::fabs(ms) < 1000.0) return Printf("%.3g", ms) + "ms";
  const double s = ms / 1000.0;
  if (std::fabs(s) < 3600.0) return Printf("%.3g", s) + "s";
  const long long minutes = std::llround(s / 60.0);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lldh%02lldm", minutes / 60, minutes % 60);
  return buf;
}

nlohmann::json ToJson(const v1::StatusReply& r) {
  nlohmann::json by_state = nlohmann::json::object();
  // std::map: sorted keys, so the output is deterministic.
  for (const auto& [state, count] :
       std::map<std::string, uint32_t>(r.jobs_by_state().begin(), r.jobs_by_state().end())) {
    by_state[state] = count;
  }
  nlohmann::json refusals = nlohmann::json::object();
  for (const auto& [reason, count] : SortedRefusals(r)) refusals[reason] = count;
  nlohmann::json out = {
      {"version", r.version()},
      {"uptime_ms", r.uptime_ms()},
      {"epoch", r.epoch()},
      {"jobs", r.jobs()},
      {"jobs_by_state", by_state},
      {"clients", r.clients()},
      {"switches", r.switches()},
      {"hosts", r.hosts()},
      {"links", r.links()},
      {"links_not_up", r.links_not_up()},
      {"levels", r.levels()},
      {"dry_run", r.dry_run()},
      {"replans", r.replans()},
      {"last_replan_ms", r.last_replan_ms()},
      {"topology", r.topology()},
      {"state_path", r.state_path()},
      {"store_ok", r.store_ok()},
      {"store_error", r.store_error()},
      // A random 64-bit id: a decimal string, as in protobuf's JSON mapping of uint64, since
      // JSON readers that hold numbers as doubles (jq) would round it.
      {"state_id", std::to_string(r.state_id())},
      {"refusals", refusals},
      {"quarantined_jobs", r.quarantined_jobs()},
      {"loop_lag_p99_ms", r.loop_lag_p99_ms()},
      {"loop_lag_max_ms", r.loop_lag_max_ms()}};
  if (r.has_ha()) {
    const v1::HaStatus& h = r.ha();
    nlohmann::json members = nlohmann::json::array();
    for (const v1::HaMember& m : h.members()) {
      members.push_back({{"instance", m.instance()},
                         {"role", m.role()},
                         {"revision", m.revision()},
                         {"client_endpoint", m.client_endpoint()},
                         {"admin_endpoint", m.admin_endpoint()}});
    }
    out["ha"] = {{"instance", h.instance()},
                 {"role", h.role()},
                 {"term", h.term()},
                 {"leader", h.leader()},
                 {"leader_endpoint", h.leader_endpoint()},
                 {"lease_ttl_s", h.lease_ttl_s()},
                 {"etcd_error", h.etcd_error()},
                 {"members", members}};
  }
  return out;
}

nlohmann::json ToJson(const v1::JobSummary& j) {
  return {{"job_id", j.job_id()},
          {"tenant", j.tenant()},
          {"state", protocol::JobStateName(j.state())},
          {"gpus", j.gpus()},
          {"hosts", j.hosts()},
          {"intensity", j.intensity()},
          {"k", j.k()},
          {"priority", j.priority()},
          {"rank", j.rank()},
          {"level", j.level()},
          {"dscp", j.dscp()},
          {"epoch", j.epoch()},
          {"period_ms", j.period_ms()},
          {"samples", j.samples()},
          {"last_seen_ms", j.last_seen_ms()},
          {"predicted_ms", j.has_prediction() ? nlohmann::json(j.predicted_ms()) : nullptr},
          {"ecmp_ms", j.has_prediction() ? nlohmann::json(j.ecmp_ms()) : nullptr},
          {"observed_ms", j.observed_ms() > 0 ? nlohmann::json(j.observed_ms()) : nullptr},
          {"gain", j.has_prediction() ? nlohmann::json(j.gain()) : nullptr}};
}

nlohmann::json ToJson(const v1::ImpactReply& r) {
  auto list = [](const auto& jobs) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::JobSummary& j : jobs) out.push_back(ToJson(j));
    return out;
  };
  return {{"available", r.available()},
          {"error", r.error()},
          {"epoch", r.epoch()},
          {"jobs", r.jobs()},
          {"gpus", r.gpus()},
          {"gpus_recovered", r.gpus_recovered()},
          {"observed", r.observed()},
          {"error_p50", r.error_p50()},
          {"error_p90", r.error_p90()},
          {"error_threshold", r.error_threshold()},
          {"plan_converged", r.plan_converged()},
          {"plan_rounds", r.plan_rounds()},
          {"ecmp_converged", r.ecmp_converged()},
          {"ecmp_rounds", r.ecmp_rounds()},
          {"gainers", list(r.gainers())},
          {"losers", list(r.losers())},
          {"mispredicted", list(r.mispredicted())}};
}

nlohmann::json ToJson(const v1::ListJobsReply& reply) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const v1::JobSummary& job : reply.jobs()) jobs.push_back(ToJson(job));
  return {{"jobs", jobs}};
}

namespace {

// A multi-host job's parts and merge (JobDetail.parts / .merge).
void AddPartsJson(const v1::JobDetail& d, nlohmann::json* out) {
  nlohmann::json parts = nlohmann::json::array();
  for (const v1::JobPart& p : d.parts()) {
    parts.push_back({{"host", p.host()},
                     {"gpus", p.gpus()},
                     {"local_ranks", p.local_ranks()},
                     {"hosts_expected", p.hosts_expected()},
                     {"connected", p.connected()},
                     {"last_seen_ms", p.last_seen_ms()},
                     {"acked_epoch", p.acked_epoch()},
                     {"last_report_ms", p.last_report_ms()},
                     {"samples", p.samples()},
                     {"period_ms", p.period_ms()},
                     {"converged", p.converged()},
                     {"comms", p.comms()}});
  }
  (*out)["parts"] = parts;
  const v1::JobMerge& m = d.merge();
  (*out)["merge"] = {{"parts", m.parts()},
                     {"parts_reporting", m.parts_reporting()},
                     {"hosts_expected", m.hosts_expected()},
                     {"complete", m.complete()},
                     {"cross_host_bytes", m.cross_host_bytes()},
                     {"same_host_bytes", m.same_host_bytes()},
                     {"unsplit_bytes", m.unsplit_bytes()},
                     {"unattributed_bytes", m.unattributed_bytes()},
                     {"conflicting_ranks", m.conflicting_ranks()}};
}

}  // namespace

nlohmann::json ToJson(const v1::JobDetail& d) {
  nlohmann::json flows = nlohmann::json::array();
  for (const v1::FlowDetail& f : d.flows()) {
    flows.push_back({{"src_nic", f.src_nic()},
                     {"dst_nic", f.dst_nic()},
                     {"bytes", f.bytes()},
                     {"udp_sport", f.udp_sport()},
                     {"path", StringArray(f.path())},
                     {"num_paths", f.num_paths()}});
  }
  nlohmann::json contends = nlohmann::json::array();
  for (const v1::Contention& c : d.contends_with()) {
    contends.push_back({{"other_job", c.other_job()},
                        {"links", StringArray(c.links())},
                        {"weight", c.weight()},
                        {"above", c.above()}});
  }
  nlohmann::json faults = nlohmann::json::array();
  for (const v1::FaultEvent& e : d.faults()) faults.push_back(ToJson(e));
  nlohmann::json out = {{"summary", ToJson(d.summary())},
                        {"faults", faults},
                        {"hosts", StringArray(d.hosts())},
                        {"work_flops", d.work_flops()},
                        {"comm_time_ms", d.comm_time_ms()},
                        {"bottleneck", d.bottleneck()},
                        {"reference", d.reference()},
                        {"model", d.model()},
                        {"pair_gain", d.pair_gain()},
                        {"pair_loss", d.pair_loss()},
                        {"reference_job", d.reference_job()},
                        {"explanation", d.explanation()},
                        {"flows", flows},
                        {"contends_with", contends}};
  if (d.parts_size() > 0) AddPartsJson(d, &out);
  return out;
}

nlohmann::json ToJson(const v1::LinkInfo& l) {
  return {{"name", l.name()},
          {"health", LinkHealthName(l.health())},
          {"capacity_bps", l.capacity_bps()},
          {"nominal_bps", l.nominal_bps()},
          {"load_bps", l.load_bps()},
          {"utilization", std::isfinite(l.utilization()) && l.utilization() >= 0
                              ? nlohmann::json(l.utilization())
                              : nlohmann::json()},
          {"jobs", l.jobs()},
          {"admin", l.admin()},
          {"reason", l.reason()}};
}

nlohmann::json ToJson(const v1::FaultEvent& e) {
  return {{"at_unix_ms", e.at_unix_ms()},
          {"link", e.link()},
          {"from", LinkHealthName(e.from())},
          {"to", LinkHealthName(e.to())},
          {"capacity_bps", e.capacity_bps()},
          {"automatic", e.automatic()},
          {"reason", e.reason()},
          {"evidence", StringArray(e.evidence())},
          {"jobs", StringArray(e.jobs())}};
}

nlohmann::json ToJson(const v1::ListFaultsReply& reply) {
  nlohmann::json links = nlohmann::json::array();
  for (const v1::FaultInfo& f : reply.links()) {
    links.push_back({{"link", f.link()},
                     {"health", LinkHealthName(f.health())},
                     {"capacity_bps", f.capacity_bps()},
                     {"automatic_health", LinkHealthName(f.automatic())},
                     {"admin", f.admin()},
                     {"suspect", f.suspect()},
                     {"ambiguous", f.ambiguous()},
                     {"score", f.score()},
                     {"reason", f.reason()},
                     {"evidence", StringArray(f.evidence())},
                     {"since_unix_ms", f.since_unix_ms()},
                     {"port_down", f.port_down()},
                     {"hold_s", f.hold_s()},
                     {"downtime_s", f.downtime_s()},
                     {"changes", f.changes()}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const v1::FaultEvent& e : reply.events()) events.push_back(ToJson(e));
  nlohmann::json contradicted = nlohmann::json::array();
  for (const v1::ContradictedJob& c : reply.contradicted_jobs()) {
    contradicted.push_back({{"job_id", c.job_id()},
                            {"since_unix_ms", c.since_unix_ms()},
                            {"slow_flows", c.slow_flows()},
                            {"evaluations", c.evaluations()},
                            {"example", c.example()}});
  }
  return {{"automatic", reply.automatic()},
          {"evaluations", reply.evaluations()},
          {"coverage",
           {{"watched_links", reply.watched_links()},
            {"flow_covered", reply.flow_covered()},
            {"probe_covered", reply.probe_covered()},
            {"probes", reply.probes()},
            {"probing", reply.probing()},
            {"unwatched", StringArray(reply.unwatched())},
            {"unwatched_total", reply.unwatched_total()}}},
          {"links", links},
          {"events", events},
          {"contradicted_jobs", contradicted},
          {"disbelieved_reports", reply.disbelieved_reports()}};
}

nlohmann::json ToJson(const v1::ListLinksReply& reply) {
  nlohmann::json links = nlohmann::json::array();
  for (const v1::LinkInfo& link : reply.links()) links.push_back(ToJson(link));
  return {{"links", links}};
}

nlohmann::json ToJson(const v1::SetLinkReply& reply) {
  nlohmann::json links = nlohmann::json::array();
  for (const v1::LinkInfo& link : reply.changed()) links.push_back(ToJson(link));
  return {{"changed", links}};
}

nlohmann::json ToJson(const v1::PlanDryRunReply& reply) {
  nlohmann::json changes = nlohmann::json::array();
  for (const v1::PlanChange& c : reply.changes()) {
    changes.push_back({{"job_id", c.job_id()},
                       {"old_level", c.old_level()},
                       {"new_level", c.new_level()},
                       {"flows_repinned", c.flows_repinned()}});
  }
  return {{"changes", changes}, {"replan_ms", reply.replan_ms()}};
}

nlohmann::json ToJson(const v1::ListSwitchesReply& reply) {
  nlohmann::json switches = nlohmann::json::array();
  for (const v1::SwitchInfo& s : reply.switches()) {
    const v1::SwitchCapabilities& caps = s.capabilities();
    switches.push_back({{"name", s.name()},
                        {"connected", s.connected()},
                        {"desired_epoch", s.desired_epoch()},
                        {"applied_epoch", s.applied_epoch()},
                        {"last_error", s.last_error()},
                        {"last_seen_ms", s.last_seen_ms()},
                        {"dscp_colours_shared", s.dscp_colours_shared()},
                        {"in_sync", s.in_sync()},
                        {"drift_repairs", s.drift_repairs()},
                        {"last_drift_ms", s.last_drift_ms()},
                        {"last_drifted_fields", s.last_drifted_fields()},
                        {"highest_term", s.highest_term()},
                        {"stale_term_refused", s.stale_term_refused()},
                        {"capabilities",
                         {{"queues", caps.queues()},
                          {"strict_priority", caps.strict_priority()},
                          {"dwrr", caps.dwrr()},
                          {"pbr_redirect", caps.pbr_redirect()},
                          {"backends", StringArray(caps.backends())}}},
                        {"enforcement",
                         {{"status", EnforcementWord(s.enforcement().status())},
                          {"detail", s.enforcement().detail()},
                          {"maps_checked", s.enforcement().maps_checked()},
                          {"queues_checked", s.enforcement().queues_checked()},
                          {"checked_unix_ms", s.enforcement().checked_unix_ms()},
                          {"epoch", s.enforcement().epoch()}}}});
  }
  return {{"switches", switches}};
}

std::string DumpJson(const nlohmann::json& doc) {
  // ensure_ascii: every non-ASCII character (C1 controls included) becomes \uXXXX, control
  // characters are escaped by JSON itself; replace: invalid UTF-8 becomes U+FFFD instead of an
  // exception. The result is printable ASCII plus newlines, and valid JSON.
  return doc.dump(2, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

std::string RenderStatusText(const v1::StatusReply& r) {
  std::ostringstream out;
  out << "cruxd " << (r.version().empty() ? "(unknown version)" : E(r.version())) << ", up "
      << FormatMillis(static_cast<double>(r.uptime_ms())) << (r.dry_run() ? ", DRY RUN" : "")
      << "\n";
  if (r.has_ha()) {
    const v1::HaStatus& h = r.ha();
    out << "  ha           " << E(h.instance()) << " is " << E(h.role()) << "; leader "
        << (h.leader().empty() ? "unknown" : E(h.leader())) << ", term " << h.term()
        << ", lease TTL " << h.lease_ttl_s() << " s\n";
    for (const v1::HaMember& m : h.members()) {
      out << "               " << E(m.role()) << " " << E(m.instance()) << " (revision "
          << m.revision() << ", client " << E(m.client_endpoint()) << ", admin "
          << E(m.admin_endpoint()) << ")\n";
    }
    if (!h.etcd_error().empty()) out << "  etcd error   " << E(h.etcd_error()) << "\n";
    if (h.role() != "leader") {
      out << "  (a standby serves no job; for the leader's figures: cruxctl --socket <the "
          << "leader's admin endpoint>)\n";
    }
  }
  out << "  epoch        " << r.epoch() << "\n";
  out << "  jobs         " << r.jobs();
  if (!r.jobs_by_state().empty()) {
    out << " (";
    bool first = true;
    for (const auto& [state, count] :
         std::map<std::string, uint32_t>(r.jobs_by_state().begin(), r.jobs_by_state().end())) {
      out << (first ? "" : ", ") << E(state) << " " << count;
      first = false;
    }
    out << ")";
  }
  if (r.quarantined_jobs() > 0) {
    out << ", " << r.quarantined_jobs() << " quarantined (stored, do not fit the topology)";
  }
  out << "\n";
  out << "  clients      " << r.clients() << "\n";
  out << "  switches     " << r.switches() << "\n";
  out << "  topology     " << E(r.topology()) << " (" << r.hosts() << " hosts, " << r.links()
      << " links, " << r.links_not_up() << " not up)\n";
  out << "  levels       " << r.levels() << "\n";
  out << "  re-plans     " << r.replans() << " (last " << FormatMillis(r.last_replan_ms()) << ")\n";
  // Time from posting work to the event loop to running it, over the last minute (0 from a
  // cruxd that does not measure it, or before the first sample).
  out << "  loop lag     p99 " << FormatMillis(r.loop_lag_p99_ms()) << ", max "
      << FormatMillis(r.loop_lag_max_ms()) << "\n";
  out << "  state        " << (r.state_path().empty() ? "-" : E(r.state_path())) << "\n";
  out << "  state id     " << (r.state_id() == 0 ? "-" : std::to_string(r.state_id())) << "\n";
  out << "  store        ";
  if (r.store_ok()) {
    out << "ok";
  } else if (!r.store_error().empty()) {
    out << "FAILED (re-plans are not applied): " << E(r.store_error());
  } else {
    out << "unknown (this cruxd does not report store health)";
  }
  out << "\n";
  const auto refusals = SortedRefusals(r);
  uint64_t total = 0;
  for (const auto& [reason, count] : refusals) total += count;
  out << "  refusals     " << total;
  if (!refusals.empty()) {
    out << " (";
    bool first = true;
    for (const auto& [reason, count] : refusals) {
      out << (first ? "" : ", ") << E(reason) << " " << count;
      first = false;
    }
    out << ")";
  }
  out << "\n";
  return out.str();
}

namespace {

// "+12.3%" / "-4.0%" / "0.0%": the share of its iteration a job saves against ECMP.
std::string FormatGain(double gain) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", gain * 100);
  if (std::abs(gain) < 5e-4) std::snprintf(buf, sizeof(buf), "0.0%%");
  return buf;
}

}  // namespace

std::string RenderJobsTable(const v1::ListJobsReply& reply) {
  Table table({{"JOB"},
               {"TENANT"},
               {"STATE"},
               {"GPUS", true},
               {"HOSTS", true},
               {"INTENSITY", true},
               {"K", true},
               {"PRIORITY", true},
               {"RANK", true},
               {"LEVEL", true},
               {"DSCP", true},
               {"EPOCH", true},
               {"PERIOD", true},
               {"PRED", true},
               {"OBS", true},
               {"GAIN", true}});
  bool at_max = false;
  bool at_min = false;
  for (const v1::JobSummary& j : reply.jobs()) {
    const int tier = j.rank() < 0 ? 0 : core::CorrectionTier(j.k());
    at_max = at_max || tier > 0;
    at_min = at_min || tier < 0;
    table.AddRow({j.job_id(), j.tenant().empty() ? "-" : j.tenant(),
                  protocol::JobStateName(j.state()), std::to_string(j.gpus()),
                  std::to_string(j.hosts()), FormatSi(j.intensity(), "FLOP/s"),
                  FormatCorrection(j.k()), FormatSi(j.priority(), ""),
                  j.rank() < 0 ? "-" : std::to_string(j.rank()), FormatLevel(j.level()),
                  std::to_string(j.dscp()), std::to_string(j.epoch()),
                  j.period_ms() > 0 ? FormatMillis(j.period_ms()) : "-",
                  j.has_prediction() ? FormatMillis(j.predicted_ms()) : "-",
                  j.observed_ms() > 0 ? FormatMillis(j.observed_ms()) : "-",
                  j.has_prediction() ? FormatGain(j.gain()) : "-"});
  }
  std::string out = table.Render();
  // What the bounds mean (core/priority.h): the order is by tier, then by P.
  if (at_max) {
    out +=
        "K max: going first gains the job link time while the reference job loses none "
        "(pair comparison); it ranks above every job with a numeric K, whatever P says.\n";
  }
  if (at_min) {
    out +=
        "K min: going first gains the job no link time while the reference job would lose "
        "some; it ranks below every job with a numeric K, whatever P says.\n";
  }
  return out;
}

namespace {

// A multi-host job's parts: one row per host, and how the profile was merged.
std::string RenderParts(const v1::JobDetail& d) {
  std::ostringstream out;
  const v1::JobMerge& m = d.merge();
  out << "\nHost parts (" << d.parts_size() << " of " << m.hosts_expected() << " hosts expected; "
      << m.parts_reporting() << " reporting; merge " << (m.complete() ? "complete" : "incomplete")
      << "):\n";
  Table parts({{"HOST"},
               {"RANKS", true},
               {"CONNECTION"},
               {"LAST SEEN"},
               {"ACKED", true},
               {"LAST REPORT"},
               {"PERIOD", true},
               {"SAMPLES", true}});
  for (const v1::JobPart& p : d.parts()) {
    parts.AddRow(
        {p.host(), std::to_string(p.local_ranks()), p.connected() ? "connected" : "not connected",
         FormatUnixMillis(p.last_seen_ms()), std::to_string(p.acked_epoch()),
         p.last_report_ms() > 0 ? FormatUnixMillis(p.last_report_ms())
                                : (p.samples() > 0 ? "restored" : "none"),
         p.samples() > 0 ? FormatMillis(p.period_ms()) : "-", std::to_string(p.samples())});
  }
  out << parts.Render();
  out << "  bytes/iter     " << FormatBytes(m.cross_host_bytes()) << " between hosts (the flows), "
      << FormatBytes(m.same_host_bytes()) << " within hosts (dropped)\n"
      << "                 " << FormatBytes(m.unsplit_bytes()) << " not split over peers yet, "
      << FormatBytes(m.unattributed_bytes()) << " to ranks of no reporting part";
  if (m.conflicting_ranks() > 0) {
    out << "; " << m.conflicting_ranks() << " ranks claimed by two parts (ignored)";
  }
  out << "\n";
  return out.str();
}

}  // namespace

std::string RenderJobDetailText(const v1::JobDetail& d) {
  const v1::JobSummary& s = d.summary();
  std::ostringstream out;
  out << "Job " << E(s.job_id());
  if (!s.tenant().empty()) out << " (tenant " << E(s.tenant()) << ")";
  out << ": " << protocol::JobStateName(s.state());
  if (!d.model().empty()) out << ", model " << E(d.model());
  out << "\n";
  out << "  placement      " << s.gpus() << " GPUs on " << s.hosts() << " hosts";
  if (!d.hosts().empty()) out << ": " << E(JoinNames(d.hosts(), ", "));
  out << "\n";
  out << "  intensity I_j  " << FormatSi(s.intensity(), "FLOP/s") << " = W_j "
      << FormatSi(d.work_flops(), "FLOP") << " / t_j " << FormatMillis(d.comm_time_ms());
  if (!d.bottleneck().empty()) out << " (bottleneck " << E(d.bottleneck()) << ")";
  out << "\n";
  out << "  k_j            " << core::DescribeCorrection(s.k(), d.reference()) << "\n";
  if (!d.reference() && !d.reference_job().empty() && s.rank() >= 0) {
    // The numbers behind k_j (core/priority.h): link time per second of the pair simulation.
    out << "  pair vs " << E(d.reference_job()) << "  going first: this job gains "
        << FormatMillis(d.pair_gain() * 1e3) << "/s of link time, the reference loses "
        << FormatMillis(d.pair_loss() * 1e3) << "/s\n";
  }
  out << "  priority P_j   " << FormatSi(s.priority(), "") << " = k_j * I_j"
      << (d.reference() ? " (reference job)" : "") << "\n";
  out << "  rank / level   " << (s.rank() < 0 ? "-" : std::to_string(s.rank())) << " / "
      << FormatLevel(s.level()) << " (0 = highest), DSCP " << s.dscp() << ", epoch " << s.epoch()
      << "\n";
  out << "  profile        ";
  if (s.samples() > 0) {
    out << "period " << FormatMillis(s.period_ms()) << " over " << s.samples() << " samples";
  } else {
    out << "none yet";
  }
  out << ", last seen " << FormatUnixMillis(s.last_seen_ms()) << "\n";
  if (!d.explanation().empty()) {
    out << "\nWhy level " << FormatLevel(s.level()) << ":\n  " << E(d.explanation()) << "\n";
  }

  if (d.parts_size() > 0) out << RenderParts(d);

  out << "\nFlows (" << d.flows_size() << "):\n";
  Table flows({{"SRC"}, {"DST"}, {"BYTES", true}, {"SPORT", true}, {"PATHS", true}, {"PATH"}});
  for (const v1::FlowDetail& f : d.flows()) {
    flows.AddRow({f.src_nic(), f.dst_nic(), FormatBytes(f.bytes()),
                  f.udp_sport() == 0 ? "-" : std::to_string(f.udp_sport()),
                  std::to_string(f.num_paths()), JoinNames(f.path(), " > ")});
  }
  out << flows.Render();

  out << "\nContends with (" << d.contends_with_size() << "):\n";
  Table contention({{"JOB"}, {"ORDER"}, {"WEIGHT", true}, {"LINKS", true}, {"SHARED LINKS"}});
  for (const v1::Contention& c : d.contends_with()) {
    std::string links;
    const int shown = std::min(c.links_size(), kMaxLinksShown);
    for (int i = 0; i < shown; ++i) links += (i > 0 ? ", " : "") + c.links(i);
    if (c.links_size() > shown) {
      links += ", ... (+" + std::to_string(c.links_size() - shown) + " more, see --json)";
    }
    contention.AddRow({c.other_job(), c.above() ? "above" : "below", FormatNumber(c.weight()),
                       std::to_string(c.links_size()), links});
  }
  out << contention.Render();
  if (d.faults_size() > 0) {
    out << "\nLink changes that re-routed it (" << d.faults_size() << ", newest first):\n";
    for (const v1::FaultEvent& e : d.faults()) {
      out << "  " << FormatUnixMillis(e.at_unix_ms()) << "  " << E(e.link()) << " "
          << LinkHealthName(e.from()) << " -> " << LinkHealthName(e.to())
          << (e.automatic() ? " (automatic)" : " (admin)") << "\n    " << E(e.reason()) << "\n";
    }
  }
  return out.str();
}

namespace {

Table LinksTable() {
  return Table({{"LINK"},
                {"HEALTH"},
                {"BY"},
                {"CAPACITY", true},
                {"NOMINAL", true},
                {"LOAD", true},
                {"UTIL", true},
                {"JOBS", true}});
}

void AddLinkRow(Table& table, const v1::LinkInfo& l) {
  const std::string by = l.admin() ? "admin" : (l.health() == v1::LINK_HEALTH_UP ? "-" : "auto");
  table.AddRow({l.name(), LinkHealthName(l.health()), by, FormatSi(l.capacity_bps(), "b/s"),
                FormatSi(l.nominal_bps(), "b/s"), FormatSi(l.load_bps(), "b/s"),
                FormatUtilization(l.utilization()), std::to_string(l.jobs())});
}

}  // namespace

std::string RenderLinksTable(const v1::ListLinksReply& reply) {
  Table table = LinksTable();
  for (const v1::LinkInfo& link : reply.links()) AddLinkRow(table, link);
  return table.Render();
}

std::string RenderSetLinkText(const v1::SetLinkReply& reply) {
  Table table = LinksTable();
  for (const v1::LinkInfo& link : reply.changed()) AddLinkRow(table, link);
  return "Changed " + std::to_string(reply.changed_size()) + " link(s):\n" + table.Render();
}

std::string RenderPlanDryRunText(const v1::PlanDryRunReply& reply) {
  std::string out = "Dry run: re-planning took " + FormatMillis(reply.replan_ms()) + "; " +
                    std::to_string(reply.changes_size()) + " job(s) would change.\n";
  Table table({{"JOB"}, {"OLD LEVEL", true}, {"NEW LEVEL", true}, {"FLOWS REPINNED", true}});
  for (const v1::PlanChange& c : reply.changes()) {
    table.AddRow({c.job_id(), FormatLevel(c.old_level()), FormatLevel(c.new_level()),
                  std::to_string(c.flows_repinned())});
  }
  return out + table.Render();
}

std::string RenderSwitchesTable(const v1::ListSwitchesReply& reply) {
  Table table({{"SWITCH"},
               {"CONNECTED"},
               {"DESIRED", true},
               {"APPLIED", true},
               {"SHARED DSCP", true},
               {"LAST SEEN"},
               {"IN SYNC"},
               {"DRIFT REPAIRS", true},
               {"LAST DRIFT"},
               {"DRIFTED", true},
               {"CAPABILITIES"},
               {"TERM", true},
               {"STALE TERM", true},
               {"ENFORCED"},
               {"LAST ERROR"}});
  std::string details;
  for (const v1::SwitchInfo& s : reply.switches()) {
    table.AddRow({s.name(), s.connected() ? "yes" : "no", std::to_string(s.desired_epoch()),
                  std::to_string(s.applied_epoch()), std::to_string(s.dscp_colours_shared()),
                  FormatUnixMillis(s.last_seen_ms()), s.in_sync() ? "yes" : "no",
                  std::to_string(s.drift_repairs()), FormatUnixMillis(s.last_drift_ms()),
                  s.last_drift_ms() == 0 ? "-" : std::to_string(s.last_drifted_fields()),
                  CapabilitiesSummary(s.capabilities()),
                  s.highest_term() == 0 ? "-" : std::to_string(s.highest_term()),
                  std::to_string(s.stale_term_refused()), EnforcedColumn(s.enforcement().status()),
                  s.last_error().empty() ? "-" : s.last_error()});
    // The first difference (MISMATCH) or the reason (UNKNOWN), one line per switch below.
    const v1::EnforcementCheck& en = s.enforcement();
    if (!en.detail().empty()) {
      details += E(s.name()) + ": " + EnforcedColumn(en.status());
      if (en.checked_unix_ms() > 0) {
        details += " (epoch " + std::to_string(en.epoch()) + ", checked " +
                   FormatUnixMillis(en.checked_unix_ms()) + ")";
      }
      details += ": " + E(en.detail()) + "\n";
    }
  }
  return table.Render() + details;
}

std::string RenderFaultsText(const v1::ListFaultsReply& reply) {
  std::ostringstream out;
  out << "Automatic fault handling: " << (reply.automatic() ? "on" : "off (suspects only)") << ", "
      << reply.evaluations() << " evaluations.\n"
      << "Watched links: " << reply.watched_links() << " (" << reply.flow_covered()
      << " crossed by flows, " << reply.probe_covered() << " by probes only, "
      << reply.unwatched_total() << " by neither); " << reply.probes() << " probes"
      << (reply.probing() ? "" : " (probing off)") << ".\n";
  if (reply.unwatched_total() > 0) {
    out << "Not watched:";
    constexpr int kShown = 8;
    for (int i = 0; i < reply.unwatched_size() && i < kShown; ++i) {
      out << " " << E(reply.unwatched(i));
    }
    if (reply.unwatched_total() > kShown) {
      out << " ... (+" << reply.unwatched_total() - kShown << ", see --json)";
    }
    out << "\n";
  }
  Table table({{"LINK"},
               {"HEALTH"},
               {"BY"},
               {"SINCE"},
               {"CAPACITY", true},
               {"AUTO"},
               {"SUSPECT"},
               {"SCORE", true},
               {"HOLD", true},
               {"DOWNTIME", true},
               {"CHANGES", true}});
  for (const v1::FaultInfo& f : reply.links()) {
    const std::string by =
        f.admin() ? "admin" : (f.health() == v1::LINK_HEALTH_UP ? "-" : "automatic");
    table.AddRow({f.link(), LinkHealthName(f.health()), by, FormatUnixMillis(f.since_unix_ms()),
                  FormatSi(f.capacity_bps(), "b/s"), LinkHealthName(f.automatic()),
                  f.suspect() ? (f.ambiguous() ? "ambiguous" : "yes") : "no",
                  f.suspect() ? FormatNumber(f.score()) : "-", FormatMillis(f.hold_s() * 1000),
                  FormatMillis(f.downtime_s() * 1000), std::to_string(f.changes())});
  }
  out << (reply.links_size() == 0 ? "No suspect, no pinned or unhealthy link.\n" : table.Render());
  for (const v1::FaultInfo& f : reply.links()) {
    if (f.reason().empty() && f.evidence_size() == 0) continue;
    out << "\n" << E(f.link()) << ": " << E(f.reason()) << "\n";
    for (const std::string& e : f.evidence()) out << "    " << E(e) << "\n";
  }
  if (reply.contradicted_jobs_size() > 0) {
    out << "\nNot believed (their reports contradict every other source; "
        << reply.disbelieved_reports() << " reports left out so far):\n";
    for (const v1::ContradictedJob& c : reply.contradicted_jobs()) {
      out << "  job " << E(c.job_id()) << " since " << FormatUnixMillis(c.since_unix_ms()) << ", "
          << c.slow_flows() << " slow flows, " << c.evaluations() << " evaluations\n    "
          << E(c.example()) << "\n";
    }
  }
  if (reply.events_size() > 0) {
    out << "\nRecent changes (newest first):\n";
    constexpr int kShown = 20;
    for (int i = 0; i < reply.events_size() && i < kShown; ++i) {
      const v1::FaultEvent& e = reply.events(i);
      out << "  " << FormatUnixMillis(e.at_unix_ms()) << "  " << E(e.link()) << " "
          << LinkHealthName(e.from()) << " -> " << LinkHealthName(e.to())
          << (e.automatic() ? " (automatic)" : " (admin)") << ", " << e.jobs_size()
          << " job(s) crossed it\n    " << E(e.reason()) << "\n";
    }
    if (reply.events_size() > kShown) {
      out << "  ... " << reply.events_size() - kShown << " more (see --json)\n";
    }
  }
  return out.str();
}

}  // namespace crux::cruxctl

namespace crux::cruxctl {

std::string RenderImpactText(const v1::ImpactReply& r) {
  std::ostringstream out;
  if (!r.available()) {
    out << "no prediction yet";
    if (!r.error().empty()) out << ": " << r.error();
    out << " (impact.enabled and impact.interval_ms in cruxd.yaml; docs/impact.md)\n";
    return out.str();
  }
  char line[256];
  std::snprintf(line, sizeof(line),
                "epoch %llu: %u jobs, %u GPUs; against ECMP the plan recovers %.1f GPU-hours per "
                "hour (%.1f%% of the GPUs)\n",
                static_cast<unsigned long long>(r.epoch()), r.jobs(), r.gpus(), r.gpus_recovered(),
                r.gpus() > 0 ? 100.0 * r.gpus_recovered() / r.gpus() : 0.0);
  out << line;
  for (const auto& [name, converged, rounds] :
       {std::tuple{"plan", r.plan_converged(), r.plan_rounds()},
        std::tuple{"ECMP", r.ecmp_converged(), r.ecmp_rounds()}}) {
    if (converged) continue;
    std::snprintf(line, sizeof(line),
                  "warning: the model did not settle under the %s within %u rounds: its figures "
                  "are not its fixed point (heavy contention; docs/impact.md)\n",
                  name, rounds);
    out << line;
  }
  if (r.observed() > 0) {
    std::snprintf(line, sizeof(line),
                  "prediction error over %u scheduled jobs that report: median %.1f%%, p90 "
                  "%.1f%%\n",
                  r.observed(), 100 * r.error_p50(), 100 * r.error_p90());
    out << line;
  } else {
    out << "no scheduled job has reported an iteration period yet\n";
  }
  auto section = [&](const char* title, const auto& jobs) {
    out << "\n" << title << "\n";
    if (jobs.empty()) {
      out << "  (none)\n";
      return;
    }
    Table table({{"JOB"},
                 {"GPUS", true},
                 {"LEVEL", true},
                 {"ALONE", true},
                 {"PRED", true},
                 {"ECMP", true},
                 {"OBS", true},
                 {"GAIN", true}});
    for (const v1::JobSummary& j : jobs) {
      table.AddRow({j.job_id(), std::to_string(j.gpus()), FormatLevel(j.level()),
                    j.period_ms() > 0 ? FormatMillis(j.period_ms()) : "-",
                    FormatMillis(j.predicted_ms()), FormatMillis(j.ecmp_ms()),
                    j.observed_ms() > 0 ? FormatMillis(j.observed_ms()) : "-",
                    FormatGain(j.gain())});
    }
    std::istringstream lines(table.Render());
    for (std::string l; std::getline(lines, l);) out << "  " << l << "\n";
  };
  section("gain most (GPUs x gain):", r.gainers());
  section("lose most against ECMP:", r.losers());
  std::snprintf(
      line, sizeof(line),
      "predicted off by more than %.0f%% (the model, or the network):", 100 * r.error_threshold());
  section(line, r.mispredicted());
  return out.str();
}

}  // namespace crux::cruxctl
