#include "crux/sim/workload/link_events.h"

#include <string>
#include <string_view>
#include <vector>

#include "crux/sim/sim_types.h"
#include "crux/sim/workload/file_io.h"
#include "crux/textio/csv.h"
#include "crux/textio/number.h"
#include "text_checks.h"

namespace crux::sim::workload {

using core::Result;
using core::Status;
using internal::Shown;

namespace {

constexpr std::string_view kColumns[] = {"time_s", "a", "b", "gbps"};
// core::Bandwidth holds int64 bit/s: the builders' limit (core/builders.h) keeps a capacity
// representable (found by fuzz/link_events_csv: 1e10 Gbit/s became a negative capacity).
constexpr double kMaxGbps = 1e9;

// A real of the one number grammar (crux/textio/number.h); always finite.
bool ParseDouble(std::string_view s, double* out) {
  return textio::ParseReal(s, out) == textio::NumberStatus::kOk;
}

}  // namespace

Result<std::vector<LinkEvent>> ParseLinkEventsCsv(std::string_view text,
                                                  const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(const std::vector<textio::CsvRow> rows, textio::ReadCsv(text, kColumns));
  std::vector<LinkEvent> out;
  for (const textio::CsvRow& row : rows) {
    const std::vector<std::string_view>& f = row.fields;
    auto error = [&](size_t col, const std::string& msg) {
      return textio::CsvFieldError(row, col, kColumns, msg);
    };
    double t = 0;
    if (!ParseDouble(f[0], &t) || t < 0 || t > kMaxSimSeconds) {
      return error(0, "must be a finite number >= 0 and <= " + textio::FormatReal(kMaxSimSeconds) +
                          " (got " + Shown(f[0]) + ")");
    }
    for (size_t col : {size_t{1}, size_t{2}}) {
      if (std::string p = internal::NameProblem(f[col]); !p.empty()) return error(col, p);
    }
    Result<core::NodeId> a = topo.FindNode(f[1]);
    if (!a.ok()) return error(1, "unknown node " + Shown(f[1]));
    Result<core::NodeId> b = topo.FindNode(f[2]);
    if (!b.ok()) return error(2, "unknown node " + Shown(f[2]));
    Result<core::LinkId> link = topo.FindLink(*a, *b);
    if (!link.ok()) return error(2, "no link between " + Shown(f[1]) + " and " + Shown(f[2]));
    double gbps = 0;
    if (!ParseDouble(f[3], &gbps) || gbps < 0 || gbps > kMaxGbps) {
      return error(3, "must be a finite number >= 0 and <= 1e+09 (got " + Shown(f[3]) + ")");
    }
    out.push_back(LinkEvent{core::Duration::Seconds(t), *link, core::Bandwidth::Gbps(gbps)});
  }
  return out;
}

Result<std::vector<LinkEvent>> LoadLinkEventsFile(const std::string& path,
                                                  const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  Result<std::vector<LinkEvent>> r = ParseLinkEventsCsv(text, topo);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace crux::sim::workload
