// Fuzz target: a simulator scenario YAML (configs/scenarios/*.yaml), through
// sim::workload::ParseScenario (what `crux-sim run|compare --scenario` reads). Relative paths
// resolve against configs/scenarios (nothing is opened: the scenario only names files).
// Seeds: configs/scenarios/*.yaml. Dictionary: fuzz/dict/scenario.dict.
#include <cstddef>
#include <cstdint>
#include <string>

#include "crux/sim/workload/scenario.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kBaseDir = std::string(CRUX_SOURCE_DIR) + "/configs/scenarios";
  auto scenario = crux::sim::workload::ParseScenario(crux::fuzz::AsText(data, size), kBaseDir);
  if (!scenario.ok()) {
    crux::fuzz::CheckError(scenario.status(), "ParseScenario");
    return 0;
  }
  // Documented: exactly one of jobs | trace | generate.
  const int sources = (scenario->jobs_path.empty() ? 0 : 1) +
                      (scenario->trace_path.empty() ? 0 : 1) +
                      (scenario->generate.has_value() ? 1 : 0);
  if (sources != 1)
    crux::fuzz::Violated("ParseScenario accepted a scenario without exactly one workload");
  if (scenario->topology_path.empty()) crux::fuzz::Violated("ParseScenario: no topology");
  return 0;
}
