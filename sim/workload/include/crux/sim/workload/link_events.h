// Scheduled link failures, degradations and recoveries for the simulator (sim::LinkEvent), as
// a CSV file:
//
//   time_s,a,b,gbps
//   3600,tor3,agg1,0        # tor3 <-> agg1 fails an hour in (both directions)
//   5400,tor3,agg1,400      # and comes back at 400 Gbps
//   7200,host5/nic0,tor1,100  # a NIC link degraded to 100 Gbps
//
// * The header line is required and must be exactly "time_s,a,b,gbps". Blank lines and lines
//   starting with '#' are ignored; CRLF is accepted; spaces around fields are trimmed.
// * time_s: finite, in [0, 1e9] (sim::kMaxSimSeconds). a, b: node names (core::IsValidName) of
//   the topology joined by a link (with parallel cables, the first a -> b cable). gbps: finite,
//   in [0, 1e9] (0 = failed; 1e9 Gbps is the topology builders' limit too).
// * The engine applies each event to the a -> b link and its reverse and re-plans.
// Errors: "line 3, column 3 (b): no link between 'tor3' and 'agg9'".
//
// Thread-safety: pure functions.
#ifndef CRUX_SIM_WORKLOAD_LINK_EVENTS_H_
#define CRUX_SIM_WORKLOAD_LINK_EVENTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/sim_types.h"

namespace crux::sim::workload {

inline constexpr std::string_view kLinkEventsHeader = "time_s,a,b,gbps";

core::Result<std::vector<LinkEvent>> ParseLinkEventsCsv(std::string_view text,
                                                        const core::Topology& topo);
// Errors carry the path as context.
core::Result<std::vector<LinkEvent>> LoadLinkEventsFile(const std::string& path,
                                                        const core::Topology& topo);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_LINK_EVENTS_H_
