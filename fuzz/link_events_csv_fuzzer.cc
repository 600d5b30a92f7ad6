// Fuzz target: the simulator's link-event CSV (time_s,a,b,gbps), through
// sim::workload::ParseLinkEventsCsv, against the example two-tier Clos (tor0..3, agg0..1,
// host0..15 with host<k>/nic0-1). Seeds: small event files and malformed lines.
#include <cstddef>
#include <cstdint>

#include "crux/sim/workload/link_events.h"
#include "crux/spec/topology_spec.h"
#include "fuzz_util.h"

namespace {

const crux::core::Topology& Topo() {
  static const crux::core::Topology* topo = [] {
    auto t = crux::spec::ParseTopology(crux::fuzz::kExampleClos2Yaml, "");
    if (!t.ok()) crux::fuzz::Violated("example topology:", t.status().ToString());
    return new crux::core::Topology(std::move(*t));
  }();
  return *topo;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const crux::core::Topology& topo = Topo();
  auto events = crux::sim::workload::ParseLinkEventsCsv(crux::fuzz::AsText(data, size), topo);
  if (!events.ok()) {
    crux::fuzz::CheckError(events.status(), "ParseLinkEventsCsv");
    return 0;
  }
  for (const auto& e : *events) {
    if (!e.link.valid() || e.link.value() >= topo.num_links())
      crux::fuzz::Violated("link event names a link out of range");
    if (e.capacity.bits_per_sec() < 0) crux::fuzz::Violated("negative link capacity");
  }
  return 0;
}
