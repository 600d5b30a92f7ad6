#include "crux/sim/workload/trace.h"

#include <set>
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

namespace {

constexpr std::string_view kColumns[] = {"job_id", "arrival_s", "duration_s", "iterations",
                                         "gpus",   "placement", "model"};

std::vector<std::string_view> SplitHosts(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(';', start);
    std::string_view h =
        s.substr(start, pos == std::string_view::npos ? s.size() - start : pos - start);
    while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
    while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
    out.push_back(h);
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

std::string Quote(std::string_view s) { return internal::Shown(s); }

// A real of the one number grammar (crux/textio/number.h).
bool ParseDouble(std::string_view s, double* out) {
  return textio::ParseReal(s, out) == textio::NumberStatus::kOk;
}

bool ParseInt(std::string_view s, int64_t* out) {
  return textio::ParseInteger(s, out) == textio::NumberStatus::kOk;
}

}  // namespace

Result<std::vector<TraceJob>> ParseTraceCsv(std::string_view text) {
  CRUX_ASSIGN_OR_RETURN(const std::vector<textio::CsvRow> rows, textio::ReadCsv(text, kColumns));
  std::vector<TraceJob> jobs;
  std::set<std::string> ids;
  for (const textio::CsvRow& row : rows) {
    const std::vector<std::string_view>& f = row.fields;
    auto error = [&](size_t col, const std::string& msg) {
      return textio::CsvFieldError(row, col, kColumns, msg);
    };
    TraceJob j;
    j.line = row.line;
    if (f[0].empty()) return error(0, "must not be empty");
    if (std::string p = internal::NameProblem(f[0]); !p.empty()) return error(0, p);
    j.id = std::string(f[0]);
    if (!ids.insert(j.id).second) return error(0, "duplicate job id " + Quote(j.id));
    if (!ParseDouble(f[1], &j.arrival_s) || j.arrival_s < 0 || j.arrival_s > kMaxSimSeconds) {
      return error(1, "must be a finite number >= 0 and <= " + textio::FormatReal(kMaxSimSeconds) +
                          " (got " + Quote(f[1]) + ")");
    }
    if (!f[2].empty()) {
      double d = 0;
      if (!ParseDouble(f[2], &d) || !(d > 0) || d > kMaxSimSeconds) {
        return error(2, "must be a finite number > 0 and <= " + textio::FormatReal(kMaxSimSeconds) +
                            " or empty (got " + Quote(f[2]) + ")");
      }
      j.duration_s = d;
    }
    if (!f[3].empty()) {
      int64_t it = 0;
      if (!ParseInt(f[3], &it) || it < 1) {
        return error(3, "must be an integer >= 1 or empty (got " + Quote(f[3]) + ")");
      }
      if (j.duration_s) return error(3, "give duration_s or iterations, not both");
      j.iterations = it;
    }
    int64_t gpus = 0;
    if (!ParseInt(f[4], &gpus) || gpus < 1 || gpus > (1 << 24)) {
      return error(4, "must be an integer in [1, 2^24] (got " + Quote(f[4]) + ")");
    }
    j.gpus = static_cast<int>(gpus);
    if (!f[5].empty()) {
      std::set<std::string_view> seen;
      for (std::string_view h : SplitHosts(f[5])) {
        if (h.empty()) return error(5, "empty host name in " + Quote(f[5]));
        if (std::string p = internal::NameProblem(h); !p.empty()) return error(5, "host name " + p);
        if (!seen.insert(h).second) return error(5, "duplicate host " + Quote(h));
        j.placement.emplace_back(h);
      }
      if (j.gpus % static_cast<int>(j.placement.size()) != 0) {
        return error(5, std::to_string(j.placement.size()) + " hosts do not divide " +
                            std::to_string(j.gpus) + " GPUs evenly");
      }
    }
    if (f[6].empty()) return error(6, "must not be empty");
    if (std::string p = internal::NameProblem(f[6]); !p.empty()) return error(6, p);
    j.model = std::string(f[6]);
    jobs.push_back(std::move(j));
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
    out += j.id + "," + textio::FormatReal(j.arrival_s) + ",";
    if (j.duration_s) out += textio::FormatReal(*j.duration_s);
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
