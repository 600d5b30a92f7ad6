#include "crux/sim/workload/trace.h"

#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

#include "crux/sim/simulator.h"
#include "crux/sim/workload/file_io.h"
#include "text_checks.h"

namespace crux::sim::workload {

using core::InvalidArgumentError;
using core::Result;
using core::Status;

namespace {

constexpr std::string_view kNames[] = {"job_id", "arrival_s", "duration_s", "iterations",
                                       "gpus",   "placement", "model"};
constexpr size_t kNumColumns = 7;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(Trim(s.substr(start)));
      return out;
    }
    out.push_back(Trim(s.substr(start, pos - start)));
    start = pos + 1;
  }
}

Status FieldError(int line, size_t col, const std::string& msg) {
  return InvalidArgumentError("line " + std::to_string(line) + ", column " +
                              std::to_string(col + 1) + " (" + std::string(kNames[col]) +
                              "): " + msg);
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::string Quote(std::string_view s) { return internal::Shown(s); }

std::string FormatDouble(double v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec != std::errc()) return "0";
  return std::string(buf, ptr);
}

}  // namespace

Result<std::vector<TraceJob>> ParseTraceCsv(std::string_view text) {
  std::vector<TraceJob> jobs;
  std::set<std::string> ids;
  bool header_seen = false;
  int line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    const std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#') {
      if (end == text.size()) break;
      continue;
    }
    if (!header_seen) {
      if (line != kTraceHeader) {
        return InvalidArgumentError("line " + std::to_string(line_no) + ": expected the header '" +
                                    std::string(kTraceHeader) + "' (got " + Quote(line) + ")");
      }
      header_seen = true;
      if (end == text.size()) break;
      continue;
    }
    const std::vector<std::string_view> f = Split(line, ',');
    if (f.size() != kNumColumns) {
      return InvalidArgumentError("line " + std::to_string(line_no) + ": expected " +
                                  std::to_string(kNumColumns) + " comma-separated fields (got " +
                                  std::to_string(f.size()) + ")");
    }
    TraceJob j;
    j.line = line_no;
    if (f[0].empty()) return FieldError(line_no, 0, "must not be empty");
    if (std::string p = internal::NameProblem(f[0]); !p.empty()) {
      return FieldError(line_no, 0, p);
    }
    j.id = std::string(f[0]);
    if (!ids.insert(j.id).second) {
      return FieldError(line_no, 0, "duplicate job id " + Quote(j.id));
    }
    if (!ParseDouble(f[1], &j.arrival_s) || !std::isfinite(j.arrival_s) || j.arrival_s < 0 ||
        j.arrival_s > kMaxSimSeconds) {
      return FieldError(line_no, 1,
                        "must be a finite number >= 0 and <= " + FormatDouble(kMaxSimSeconds) +
                            " (got " + Quote(f[1]) + ")");
    }
    if (!f[2].empty()) {
      double d = 0;
      if (!ParseDouble(f[2], &d) || !std::isfinite(d) || !(d > 0) || d > kMaxSimSeconds) {
        return FieldError(line_no, 2,
                          "must be a finite number > 0 and <= " + FormatDouble(kMaxSimSeconds) +
                              " or empty (got " + Quote(f[2]) + ")");
      }
      j.duration_s = d;
    }
    if (!f[3].empty()) {
      int64_t it = 0;
      if (!ParseInt(f[3], &it) || it < 1) {
        return FieldError(line_no, 3, "must be an integer >= 1 or empty (got " + Quote(f[3]) + ")");
      }
      if (j.duration_s) {
        return FieldError(line_no, 3, "give duration_s or iterations, not both");
      }
      j.iterations = it;
    }
    int64_t gpus = 0;
    if (!ParseInt(f[4], &gpus) || gpus < 1 || gpus > (1 << 24)) {
      return FieldError(line_no, 4, "must be an integer in [1, 2^24] (got " + Quote(f[4]) + ")");
    }
    j.gpus = static_cast<int>(gpus);
    if (!f[5].empty()) {
      std::set<std::string_view> seen;
      for (std::string_view h : Split(f[5], ';')) {
        if (h.empty()) return FieldError(line_no, 5, "empty host name in " + Quote(f[5]));
        if (std::string p = internal::NameProblem(h); !p.empty()) {
          return FieldError(line_no, 5, "host name " + p);
        }
        if (!seen.insert(h).second) return FieldError(line_no, 5, "duplicate host " + Quote(h));
        j.placement.emplace_back(h);
      }
      if (j.gpus % static_cast<int>(j.placement.size()) != 0) {
        return FieldError(line_no, 5,
                          std::to_string(j.placement.size()) + " hosts do not divide " +
                              std::to_string(j.gpus) + " GPUs evenly");
      }
    }
    if (f[6].empty()) return FieldError(line_no, 6, "must not be empty");
    if (std::string p = internal::NameProblem(f[6]); !p.empty()) {
      return FieldError(line_no, 6, p);
    }
    j.model = std::string(f[6]);
    jobs.push_back(std::move(j));
    if (end == text.size()) break;
  }
  if (!header_seen) {
    return InvalidArgumentError("line 1: missing the header '" + std::string(kTraceHeader) + "'");
  }
  return jobs;
}

Result<std::vector<TraceJob>> LoadTraceFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  Result<std::vector<TraceJob>> r = ParseTraceCsv(text);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

std::string FormatTraceCsv(const std::vector<TraceJob>& jobs) {
  std::string out(kTraceHeader);
  out += "\n";
  for (const TraceJob& j : jobs) {
    out += j.id + "," + FormatDouble(j.arrival_s) + ",";
    if (j.duration_s) out += FormatDouble(*j.duration_s);
    out += ",";
    if (j.iterations) out += std::to_string(*j.iterations);
    out += "," + std::to_string(j.gpus) + ",";
    for (size_t i = 0; i < j.placement.size(); ++i) {
      out += (i ? ";" : "") + j.placement[i];
    }
    out += "," + j.model + "\n";
  }
  return out;
}

Status WriteTraceFile(const std::string& path, const std::vector<TraceJob>& jobs) {
  return WriteTextFile(path, FormatTraceCsv(jobs));
}

}  // namespace crux::sim::workload
