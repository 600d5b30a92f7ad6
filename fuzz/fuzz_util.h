// Small helpers shared by the fuzz targets.
#ifndef CRUX_FUZZ_FUZZ_UTIL_H_
#define CRUX_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "crux/core/base/status.h"

namespace crux::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A property every loader promises: a failure says what is wrong.
inline void CheckError(const core::Status& status, const char* what) {
  if (!status.ok() && status.message().empty()) {
    std::fprintf(stderr, "crux fuzz: %s failed without a message\n", what);
    std::abort();
  }
}

[[noreturn]] inline void Violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "crux fuzz: property violated: %s %s\n", what, detail.c_str());
  std::abort();
}

// The example two-tier Clos (configs/topologies/example_clos2.yaml: host0..host15 with
// host<k>/nic0-1, tor0..tor3, agg0..agg1) that the jobs and link-event seeds refer to.
inline constexpr std::string_view kExampleClos2Yaml =
    "topology:\n"
    "  kind: clos2\n"
    "  tors: 4\n"
    "  aggs: 2\n"
    "  hosts_per_tor: 4\n"
    "  nics_per_host: 2\n"
    "  gpus_per_host: 8\n";

}  // namespace crux::fuzz

#endif  // CRUX_FUZZ_FUZZ_UTIL_H_
