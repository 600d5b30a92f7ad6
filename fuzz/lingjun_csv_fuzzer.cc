// Fuzz target: the Lingjun topology CSV (configs/topologies/lingjun/topo.csv format, columns
// ip,DSW,PSW,ASW), through spec::BuildLingjunFromCsv (textio's CSV dialect, then
// core::BuildLingjun on the parsed rows) - what spec::ParseTopology calls with the file's content
// for `kind: lingjun`. The last input byte picks the ToR grouping and the number of
// ToR-PSW cables; the rest is the CSV. Seeds: slices of the shipped topo.csv and malformed lines.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "crux/core/topology/builders.h"
#include "crux/spec/lingjun_csv.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  crux::core::LingjunParams params;
  const uint8_t knobs = fdp.ConsumeIntegral<uint8_t>();
  params.grouping = (knobs & 1) != 0 ? crux::core::LingjunTorGrouping::kPswAsw
                                     : crux::core::LingjunTorGrouping::kAswLabel;
  params.tor_psw_links = 1 + ((knobs >> 1) & 3);
  params.host.nics_per_host = 1 + ((knobs >> 3) & 1);
  const std::string csv = fdp.ConsumeRemainingBytesAsString();
  auto topo = crux::spec::BuildLingjunFromCsv(csv, params);
  if (!topo.ok()) {
    crux::fuzz::CheckError(topo.status(), "BuildLingjunFromCsv");
    return 0;
  }
  if (topo->num_nodes() == 0)
    crux::fuzz::Violated("BuildLingjunFromCsv accepted an empty topology");
  return 0;
}
