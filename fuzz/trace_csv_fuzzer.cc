// Fuzz target: the simulator's trace CSV, through sim::workload::ParseTraceCsv. Round trip:
// every accepted trace formats (FormatTraceCsv) to text that parses back to the same jobs
// ("numbers printed so that they parse back exactly", trace.h). Seeds: traces from
// tests/sim/workload/data and malformed lines.
#include <cstddef>
#include <cstdint>
#include <string>

#include "crux/sim/workload/trace.h"
#include "fuzz_util.h"

namespace {

using crux::sim::workload::TraceJob;

bool Same(const TraceJob& a, const TraceJob& b) {
  return a.id == b.id && a.arrival_s == b.arrival_s && a.duration_s == b.duration_s &&
         a.iterations == b.iterations && a.gpus == b.gpus && a.placement == b.placement &&
         a.model == b.model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto jobs = crux::sim::workload::ParseTraceCsv(crux::fuzz::AsText(data, size));
  if (!jobs.ok()) {
    crux::fuzz::CheckError(jobs.status(), "ParseTraceCsv");
    return 0;
  }
  const std::string text = crux::sim::workload::FormatTraceCsv(*jobs);
  auto again = crux::sim::workload::ParseTraceCsv(text);
  if (!again.ok()) {
    crux::fuzz::Violated("ParseTraceCsv(FormatTraceCsv(jobs)) failed:", again.status().ToString());
  }
  if (again->size() != jobs->size()) crux::fuzz::Violated("trace round trip lost jobs");
  for (size_t i = 0; i < jobs->size(); ++i) {
    if (!Same((*jobs)[i], (*again)[i])) {
      crux::fuzz::Violated("trace round trip changed job", (*jobs)[i].id);
    }
  }
  return 0;
}
