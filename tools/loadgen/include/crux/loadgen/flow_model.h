// crux-loadgen's per-flow measurements and fault mode (issue #14, docs/faults.md).
//
// With --flow-stats every heartbeat of a job carries one FlowStats per pinned flow of its applied
// assignment (a peer connection: local NIC -> remote NIC with its source port and path), and one
// per probe of the assignment (probe set; one --probe-bytes message per window), over the window
// since the previous heartbeat:
//   * bytes demanded = the job's per-peer bytes per iteration x window / period;
//   * rate = --flow-gbps (the flow's line rate, a stand-in for a measured one) x the fault factor,
//     +- a small jitter; delivered = min(demanded, rate x window), transfer time = delivered /
//     rate (so the achieved rate is the rate);
//   * a cut flow (factor 0) delivers nothing and reports transport errors.
// Faults (--fault, repeatable) slow or cut exactly the flows whose pinned path crosses a named
// link, from a time after the start of the run and for a duration:
//   --fault tor0->agg0:0.3@10      the direction tor0->agg0 at 30 % from 10 s on
//   --fault tor0-agg0:0@5+20       both directions cut from 5 s for 20 s
// so the whole chain (cruxd, its localisation and decisions, the re-plan that moves the flows)
// can be exercised end to end with real processes. A lying tenant (--lie, repeatable) reports
// every flow of one job at a fraction of what it got, whatever its paths cross:
//   --lie lg-2:0.1@5               job lg-2 reports 10 % of its rate from 5 s on. A re-routed flow
//   (a new pinned path that no
// longer crosses the link) is healthy again.
//
// Thread-safety: pure functions (the Rng is the caller's).
#ifndef CRUX_LOADGEN_FLOW_MODEL_H_
#define CRUX_LOADGEN_FLOW_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/topology/topology.h"
#include "crux/loadgen/workload.h"
#include "crux/v1/client.pb.h"

namespace crux::loadgen {

struct LinkFault {
  std::string from;  // The directed link from -> to (topology node names).
  std::string to;
  bool both = false;         // Both directions ("a-b").
  double rate_fraction = 0;  // [0, 1): 0 = cut.
  core::Duration after;      // From the start of the run.
  core::Duration duration;   // 0: until the end of the run.

  friend bool operator==(const LinkFault&, const LinkFault&) = default;
};

// "LINK:FRACTION[@AFTER_S[+DURATION_S]]" with LINK "a->b" or "a-b" (two adjacent nodes of
// `topo`). Errors name the part ("--fault 'x': ...").
core::Result<LinkFault> ParseLinkFault(std::string_view spec, const core::Topology& topo);
// "tor0->agg0 at 30% from 10 s for 20 s".
std::string DescribeFault(const LinkFault& f);

struct JobLie {
  std::string job_id;
  double rate_fraction = 0;  // [0, 1): what it reports of its rate (0: no progress).
  core::Duration after;      // From the start of the run.

  friend bool operator==(const JobLie&, const JobLie&) = default;
};

// "JOB:FRACTION[@AFTER_S]". Errors name the part ("--lie 'x': ...").
core::Result<JobLie> ParseJobLie(std::string_view spec);
// The fraction job `job_id` reports of its rate `since_start` after the run began (1: honest).
double LieFactor(const std::string& job_id, const std::vector<JobLie>& lies,
                 core::Duration since_start);

struct PinnedFlow {
  std::string src;
  std::string dst;
  uint32_t udp_sport = 0;
  std::vector<std::string> path;     // Node names src..dst.
  uint64_t bytes_per_iteration = 0;  // The job's demand to that peer (a probe: per message).
  bool probe = false;                // One of the assignment's probes.

  friend bool operator==(const PinnedFlow&, const PinnedFlow&) = default;
};

// The assignment's flows with the job's per-peer demand (flows without demand are left out).
std::vector<PinnedFlow> PinnedFlows(const v1::Assignment& a, const SimJob& job);
// The assignment's probes (Assignment.probes, docs/faults.md "Probes"): each sends one message of
// `probe_bytes` per heartbeat window and is reported with probe set, through the same fault
// model as the flows.
std::vector<PinnedFlow> PinnedProbes(const v1::Assignment& a, uint64_t probe_bytes);

// Whether the flow's pinned path crosses the fault's link (in its direction(s)).
bool Crosses(const PinnedFlow& f, const LinkFault& fault);
// Whether the fault is in force `since_start` after the run began.
bool Active(const LinkFault& fault, core::Duration since_start);
// The fraction of its rate the flow gets: the smallest fraction of the active faults it crosses
// (1: none).
double FaultFactor(const PinnedFlow& f, const std::vector<LinkFault>& faults,
                   core::Duration since_start);

// The flow's measurement over `window` (see the file comment). `jitter` in [0, 0.5].
v1::FlowStats FlowStatsFor(const PinnedFlow& f, core::Duration window, core::Duration period,
                           double line_gbps, double factor, core::Rng& rng, double jitter);

}  // namespace crux::loadgen

#endif  // CRUX_LOADGEN_FLOW_MODEL_H_
