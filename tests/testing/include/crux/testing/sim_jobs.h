// Fabrics, jobs, options and a runner shared by the simulator's tests (tests/sim): the digest's
// Example 1 fabric (two hosts, one 1 Gbps cable) with its pair jobs, a small Clos with a workload
// of ring jobs that contend on the uplinks and arrive and leave at different times, and the
// engine's options under the oracle.
#ifndef CRUX_TESTING_SIM_JOBS_H_
#define CRUX_TESTING_SIM_JOBS_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/topology/builders.h"
#include "crux/sim/simulator.h"
#include "crux/testing/clos.h"
#include "crux/testing/test_topologies.h"

namespace crux::sim::testing {

// Two hosts joined by one 1 Gbps cable (the digest's Example 1 fabric).
inline core::Topology TwoHosts() {
  core::ExplicitParams p;
  p.nodes = {{"h0", true}, {"h1", true}};
  p.links = {{"h0", "h1", 1.0, 0.0}};
  return core::testing::Must(core::BuildExplicit(p), "BuildExplicit");
}

// On TwoHosts: a job of 10 GPUs sending `comm_s` seconds worth of bytes (at 1 Gbps) from h0 to h1
// per iteration.
inline SimJob PairJob(const core::Topology& topo, const std::string& id, double compute_s,
                      double comm_s, double overlap = 1.0) {
  SimJob j;
  j.spec.id = id;
  const core::NodeId h0 = core::testing::Must(topo.FindNode("h0"));
  const core::NodeId h1 = core::testing::Must(topo.FindNode("h1"));
  j.spec.hosts = {h0, h1};
  j.spec.gpus_per_host = 5;
  j.spec.compute_time = core::Duration::Seconds(compute_s);
  j.spec.overlap_start = overlap;
  j.spec.pattern = core::TrafficPattern::kExplicit;
  j.spec.flows = {{h0, h1, core::Bytes::FromDouble(comm_s * 1e9 / 8.0)}};
  return j;
}

// Two ToRs, two Aggs, four hosts per ToR (host0-3 on tor0, host4-7 on tor1), 100 Gbps NICs and
// uplinks.
inline core::Topology SmallClos() { return core::testing::Clos2(2, 2, 4, /*gbps=*/100); }

// A ring all-reduce of `mbytes` MB per iteration over "host<h>" for each h of `hosts`, 8 GPUs per
// host.
inline SimJob RingJob(const core::Topology& topo, const std::string& id, std::vector<int> hosts,
                      double compute_s, double mbytes, double overlap = 0.5) {
  SimJob j;
  j.spec.id = id;
  for (int h : hosts) {
    j.spec.hosts.push_back(core::testing::Must(topo.FindNode("host" + std::to_string(h))));
  }
  j.spec.gpus_per_host = 8;
  j.spec.compute_time = core::Duration::Seconds(compute_s);
  j.spec.overlap_start = overlap;
  j.spec.pattern = core::TrafficPattern::kRingAllReduce;
  j.spec.pattern_bytes = core::Bytes::FromDouble(mbytes * 1e6);
  return j;
}

// On SmallClos: cross-ToR rings that contend on the uplinks, arriving at 0, 5, 12 and 40 s; one
// leaves after 30 s, one after 150 iterations. Jobs carry fixed ranks 0-3 in this order, for the
// `fixed` policy (every other policy ignores them).
inline std::vector<SimJob> ClosWorkload(const core::Topology& topo) {
  std::vector<SimJob> jobs = {
      RingJob(topo, "gpt", {0, 1, 4, 5}, 0.30, 2400),
      RingJob(topo, "bert", {2, 6}, 0.12, 900, 0.3),
      RingJob(topo, "resnet", {3, 7}, 0.08, 400, 0.8),
      RingJob(topo, "late", {1, 2, 5, 6}, 0.2, 1500),
  };
  jobs[1].arrival = core::Duration::Seconds(5);
  jobs[2].arrival = core::Duration::Seconds(12);
  jobs[2].duration = core::Duration::Seconds(30);
  jobs[3].arrival = core::Duration::Seconds(40);
  jobs[3].iterations = 150;
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].spec.fixed_rank = static_cast<int>(i);
  return jobs;
}

// The engine under the oracle (every job planned from its true spec at once, no control loop), for
// tests of the network and job model against closed-form figures: no per-hop latency, four
// levels, ten samples over the horizon.
inline SimOptions OracleOptions(double horizon_s) {
  SimOptions o;
  o.control.oracle = true;
  o.horizon = core::Duration::Seconds(horizon_s);
  o.per_hop_latency = core::Duration::Zero();
  o.sample_interval = core::Duration::Seconds(horizon_s / 10);
  o.policy.planner.levels = 4;
  return o;
}

// Simulate, failing the test (and returning an empty result) when the simulator refuses.
inline SimResult RunSim(const core::Topology& topo, const std::string& policy,
                        const std::vector<SimJob>& jobs, const SimOptions& options,
                        const std::vector<LinkEvent>& events = {}) {
  core::Result<SimResult> r = Simulate(topo, policy, jobs, events, options);
  EXPECT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
  if (!r.ok()) return SimResult{};
  return std::move(r).value();
}

// The same run with fast-forward off (`full`) and on (`fast`), for comparing the two.
struct FullAndFast {
  SimResult full;
  SimResult fast;
};
inline FullAndFast RunFullAndFast(const core::Topology& topo, const std::string& policy,
                                  const std::vector<SimJob>& jobs, SimOptions options) {
  FullAndFast r;
  options.fast_forward = false;
  r.full = RunSim(topo, policy, jobs, options);
  options.fast_forward = true;
  r.fast = RunSim(topo, policy, jobs, options);
  return r;
}

}  // namespace crux::sim::testing

#endif  // CRUX_TESTING_SIM_JOBS_H_
