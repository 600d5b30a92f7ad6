// Small hand-built topologies for the core unit tests. They use only the Topology API (never
// builders.cc), so path, ECMP, job and planner tests do not depend on the builders.
//
// Construction order is part of the contract the tests rely on: within each topology the
// ToR <-> Agg links are added first, in (ToR, Agg) order, so the equal-cost paths between two
// ToRs come out ordered by Agg index (PathFinder orders switch paths by LinkId).
#ifndef CRUX_TESTING_TEST_TOPOLOGIES_H_
#define CRUX_TESTING_TEST_TOPOLOGIES_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/topology/topology.h"

namespace crux::core::testing {

// Unwraps a Result, aborting the test binary with the error if it is not OK. Only for fixture
// construction, where a failure means the test itself is broken.
template <typename T>
T Must(Result<T> r, const char* what = "fixture") {
  if (!r.ok()) {
    std::fprintf(stderr, "test fixture: %s failed: %s\n", what, r.status().ToString().c_str());
    std::abort();
  }
  return std::move(r).value();
}

inline NodeId AddHost(Topology& t, const std::string& name) {
  return Must(t.AddNode(name, NodeKind::kHost), "AddNode(host)");
}
// Adds NIC `index` of `host`, named "<host>/nic<index>", with a PCIe link to the host.
inline NodeId AddNic(Topology& t, NodeId host, int index, double pcie_gbps = 400) {
  const NodeId nic =
      Must(t.AddNode(t.node(host).name + "/nic" + std::to_string(index), NodeKind::kNic, host),
           "AddNode(nic)");
  Must(t.AddLink(host, nic, Bandwidth::Gbps(pcie_gbps)), "AddLink(pcie)");
  return nic;
}
inline NodeId AddSwitch(Topology& t, const std::string& name, NodeKind kind = NodeKind::kSwitch) {
  return Must(t.AddNode(name, kind), "AddNode(switch)");
}
inline LinkId Connect(Topology& t, NodeId a, NodeId b, double gbps) {
  return Must(t.AddLink(a, b, Bandwidth::Gbps(gbps)), "AddLink");
}

// A 2-tier Clos: tor0, tor1; agg0..agg2 (full mesh, 100 Gbps); four hosts:
//   host0: nic0, nic1 -> tor0      host2: nic0, nic1 -> tor1
//   host1: nic0       -> tor0      host3: nic0       -> tor1
// NIC <-> ToR 100 Gbps, NIC <-> host (PCIe) 400 Gbps.
struct Clos2Small {
  Topology topo;
  NodeId tor[2];
  NodeId agg[3];
  NodeId host[4];
  std::vector<NodeId> nic[4];
  LinkId tor_agg[2][3];  // tor[t] -> agg[a].
};

inline Clos2Small MakeClos2Small(double nic_gbps = 100, double uplink_gbps = 100) {
  Clos2Small c;
  Topology& t = c.topo;
  for (int i = 0; i < 2; ++i) c.tor[i] = AddSwitch(t, "tor" + std::to_string(i), NodeKind::kTor);
  for (int i = 0; i < 3; ++i) c.agg[i] = AddSwitch(t, "agg" + std::to_string(i), NodeKind::kAgg);
  for (int i = 0; i < 2; ++i) {
    for (int a = 0; a < 3; ++a) c.tor_agg[i][a] = Connect(t, c.tor[i], c.agg[a], uplink_gbps);
  }
  const int nics[4] = {2, 1, 2, 1};
  for (int h = 0; h < 4; ++h) {
    c.host[h] = AddHost(t, "host" + std::to_string(h));
    for (int r = 0; r < nics[h]; ++r) {
      const NodeId nic = AddNic(t, c.host[h], r);
      Connect(t, nic, c.tor[h / 2], nic_gbps);
      c.nic[h].push_back(nic);
    }
  }
  return c;
}

// A mini dual-plane HPN pod: two planes that never meet. Plane p has ToRs p<p>tor0, p<p>tor1
// and Aggs p<p>agg0, p<p>agg1 (full mesh). Hosts (one NIC each):
//   host0/nic0: dual-port, -> p0tor0 and p1tor0
//   host1/nic0: dual-port, -> p0tor1 and p1tor1
//   host2/nic0: single port -> p0tor1 (plane 0 only)
//   host3/nic0: single port -> p1tor1 (plane 1 only)
struct DualPlane {
  Topology topo;
  NodeId tor[2][2];  // [plane][index].
  NodeId agg[2][2];  // [plane][index].
  NodeId host[4];
  NodeId nic[4];
};

inline DualPlane MakeDualPlane() {
  DualPlane d;
  Topology& t = d.topo;
  for (int p = 0; p < 2; ++p) {
    const std::string plane = "p" + std::to_string(p);
    for (int i = 0; i < 2; ++i) {
      d.tor[p][i] = AddSwitch(t, plane + "tor" + std::to_string(i), NodeKind::kTor);
    }
    for (int i = 0; i < 2; ++i) {
      d.agg[p][i] = AddSwitch(t, plane + "agg" + std::to_string(i), NodeKind::kAgg);
    }
    for (int i = 0; i < 2; ++i) {
      for (int a = 0; a < 2; ++a) Connect(t, d.tor[p][i], d.agg[p][a], 400);
    }
  }
  for (int h = 0; h < 4; ++h) {
    d.host[h] = AddHost(t, "host" + std::to_string(h));
    d.nic[h] = AddNic(t, d.host[h], 0);
  }
  Connect(t, d.nic[0], d.tor[0][0], 200);
  Connect(t, d.nic[0], d.tor[1][0], 200);
  Connect(t, d.nic[1], d.tor[0][1], 200);
  Connect(t, d.nic[1], d.tor[1][1], 200);
  Connect(t, d.nic[2], d.tor[0][1], 200);
  Connect(t, d.nic[3], d.tor[1][1], 200);
  return d;
}

// An explicit-style topology without NIC nodes: hosts cable straight into switches.
//   h1, h2 -> s1;  h3 -> s2;  s1 <-> s2.  All links `gbps`.
struct ExplicitStar {
  Topology topo;
  NodeId h1, h2, h3;
  NodeId s1, s2;
};

inline ExplicitStar MakeExplicitStar(double gbps = 100) {
  ExplicitStar e;
  Topology& t = e.topo;
  e.h1 = AddHost(t, "h1");
  e.h2 = AddHost(t, "h2");
  e.h3 = AddHost(t, "h3");
  e.s1 = AddSwitch(t, "s1");
  e.s2 = AddSwitch(t, "s2");
  Connect(t, e.h1, e.s1, gbps);
  Connect(t, e.h2, e.s1, gbps);
  Connect(t, e.h3, e.s2, gbps);
  Connect(t, e.s1, e.s2, gbps);
  return e;
}

// N hosts "host<i>" with nics[i] NICs each ("host<i>/nic<r>"), every NIC cabled to one switch
// "sw0" (100 Gbps). Used where only the endpoints matter (traffic expansion).
struct Star {
  Topology topo;
  NodeId sw;
  std::vector<NodeId> hosts;
  std::vector<std::vector<NodeId>> nics;
};

inline Star MakeStar(const std::vector<int>& nics) {
  Star s;
  s.sw = AddSwitch(s.topo, "sw0");
  for (size_t h = 0; h < nics.size(); ++h) {
    const NodeId host = AddHost(s.topo, "host" + std::to_string(h));
    s.hosts.push_back(host);
    s.nics.emplace_back();
    for (int r = 0; r < nics[h]; ++r) {
      const NodeId nic = AddNic(s.topo, host, r);
      Connect(s.topo, nic, s.sw, 100);
      s.nics.back().push_back(nic);
    }
  }
  return s;
}

}  // namespace crux::core::testing

#endif  // CRUX_TESTING_TEST_TOPOLOGIES_H_
