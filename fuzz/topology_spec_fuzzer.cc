// Fuzz target: a topology spec YAML document, through the planner's public loader
// spec::ParseTopology (what crux-plan, crux-sim and cruxd call for `topology` files). Relative
// lingjun `path`s resolve against the shipped configs/topologies/ (so the seeds' lingjun/topo.csv
// is found). Seeds: configs/topologies/*.yaml. Dictionary: fuzz/dict/topology_spec.dict.
#include <cstddef>
#include <cstdint>
#include <string>

#include "crux/spec/topology_spec.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kBaseDir = std::string(CRUX_SOURCE_DIR) + "/configs/topologies";
  auto topo = crux::spec::ParseTopology(crux::fuzz::AsText(data, size), kBaseDir);
  if (!topo.ok()) {
    crux::fuzz::CheckError(topo.status(), "ParseTopology");
    return 0;
  }
  if (topo->num_nodes() == 0) crux::fuzz::Violated("ParseTopology accepted an empty topology");
  return 0;
}
