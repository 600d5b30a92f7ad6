// Two-tier Clos fabrics from core's builders (crux/core/topology/builders.h), for the tests above
// the topology layer: the control loop and the simulator. (test_topologies.h builds its fabrics
// by hand, for the tests of the topology layer itself.)
#ifndef CRUX_TESTING_CLOS_H_
#define CRUX_TESTING_CLOS_H_

#include "crux/core/topology/builders.h"
#include "crux/core/topology/topology.h"
#include "crux/testing/test_topologies.h"

namespace crux::core::testing {

// `tors` ToRs, `aggs` Aggs, `hosts_per_tor` hosts per ToR with one NIC each; "host<i>" is on ToR
// i / hosts_per_tor. NICs and uplinks at the builders' default speeds, or every one at `gbps`
// when it is given.
inline Topology Clos2(int tors, int aggs, int hosts_per_tor, double gbps = 0) {
  Clos2Params p;
  p.tors = tors;
  p.aggs = aggs;
  p.hosts_per_tor = hosts_per_tor;
  p.host.nics_per_host = 1;
  if (gbps > 0) {
    p.host.nic_gbps = gbps;
    p.uplink_gbps = gbps;
  }
  return Must(BuildClos2(p), "BuildClos2");
}

}  // namespace crux::core::testing

#endif  // CRUX_TESTING_CLOS_H_
