#include "crux/sim/workload/link_events.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "crux/sim/simulator.h"
#include "crux/sim/workload/file_io.h"
#include "text_checks.h"

namespace crux::sim::workload {

using core::InvalidArgumentError;
using core::Result;
using core::Status;
using internal::Shown;

namespace {

constexpr std::string_view kNames[] = {"time_s", "a", "b", "gbps"};
// Largest link speed, the topology builders' limit (core/src/builders.cc): 1e18 bit/s, so the
// capacity fits core::Bandwidth's int64 bits per second.
constexpr double kMaxGbps = 1e9;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

Status FieldError(int line, size_t col, const std::string& msg) {
  return InvalidArgumentError("line " + std::to_string(line) + ", column " +
                              std::to_string(col + 1) + " (" + std::string(kNames[col]) +
                              "): " + msg);
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(*out);
}

}  // namespace

Result<std::vector<LinkEvent>> ParseLinkEventsCsv(std::string_view text,
                                                  const core::Topology& topo) {
  std::vector<LinkEvent> out;
  bool header_seen = false;
  int line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = Trim(text.substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    if (!header_seen) {
      if (line != kLinkEventsHeader) {
        return InvalidArgumentError("line " + std::to_string(line_no) + ": expected the header '" +
                                    std::string(kLinkEventsHeader) + "' (got " + Shown(line) + ")");
      }
      header_seen = true;
      continue;
    }
    std::vector<std::string_view> f;
    size_t pos = 0;
    while (true) {
      const size_t comma = line.find(',', pos);
      f.push_back(Trim(
          line.substr(pos, comma == std::string_view::npos ? line.size() - pos : comma - pos)));
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    if (f.size() != 4) {
      return InvalidArgumentError("line " + std::to_string(line_no) +
                                  ": expected 4 comma-separated fields (got " +
                                  std::to_string(f.size()) + ")");
    }
    double t = 0;
    if (!ParseDouble(f[0], &t) || t < 0 || t > kMaxSimSeconds) {
      return FieldError(line_no, 0,
                        "must be a finite number >= 0 and <= 1e+09 (got " + Shown(f[0]) + ")");
    }
    for (size_t col : {size_t{1}, size_t{2}}) {
      if (std::string p = internal::NameProblem(f[col]); !p.empty()) {
        return FieldError(line_no, col, p);
      }
    }
    Result<core::NodeId> a = topo.FindNode(f[1]);
    if (!a.ok()) return FieldError(line_no, 1, "unknown node " + Shown(f[1]));
    Result<core::NodeId> b = topo.FindNode(f[2]);
    if (!b.ok()) return FieldError(line_no, 2, "unknown node " + Shown(f[2]));
    Result<core::LinkId> link = topo.FindLink(*a, *b);
    if (!link.ok()) {
      return FieldError(line_no, 2, "no link between " + Shown(f[1]) + " and " + Shown(f[2]));
    }
    double gbps = 0;
    if (!ParseDouble(f[3], &gbps) || gbps < 0 || gbps > kMaxGbps) {
      return FieldError(line_no, 3,
                        "must be a finite number >= 0 and <= 1e+09 (got " + Shown(f[3]) + ")");
    }
    out.push_back(LinkEvent{core::Duration::Seconds(t), *link, core::Bandwidth::Gbps(gbps)});
    if (end == text.size()) break;
  }
  if (!header_seen) {
    return InvalidArgumentError("line 1: missing the header '" + std::string(kLinkEventsHeader) +
                                "'");
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
