// What the planner and today's single-overlap job model see of a multi-phase iteration
// (traffic_model.h builds it, iteration_timing.h times it): the per-job summary (W_j, c, t_j,
// overlap_start), the iteration's bytes mapped onto the NICs of a topology, and the JobSpec
// that carries both to today's planner and engine.
//
// Thread-safety: pure functions; the types are values.
#ifndef CRUX_CORE_MODEL_ITERATION_SUMMARY_H_
#define CRUX_CORE_MODEL_ITERATION_SUMMARY_H_

#include <string>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/iteration_timing.h"
#include "crux/core/model/job.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// What Crux's planner and today's single-overlap job model see of the iteration:
//   work: W_j.
//   compute: c = busy + idle (the single-overlap model has no idle compute; the bubble is
//     counted as compute, so the engine's busy time includes it).
//   comm: t on the job's busiest NIC = its bytes per iteration / NIC bandwidth (with rails
//     that are not the bottleneck, the planner's t_j = max_e M_{j,e} / B_e equals it).
//   overlap_start: o such that the single-overlap iteration max(c, o c + t) equals the phase
//     model's standalone iteration when communication is exposed; when it is hidden, o leaves
//     the same slack to a uniform slow-down of communication as the phases do
//     (o = 1 - stretch_slack t / c).
//   stretch_slack: the largest factor s >= 1 by which every transfer can slow down before the
//     phase model's iteration grows (1 when communication is already exposed).
//   iteration: the phase model's standalone iteration.
//   nic_bytes: bytes per iteration on the busiest NIC.
struct IterationSummary {
  Flops work;
  Duration compute;
  Duration comm;
  double overlap_start = 1.0;
  double stretch_slack = 1.0;
  Duration iteration;
  Duration busy;
  Duration exposed;
  Bytes nic_bytes;

  friend bool operator==(const IterationSummary&, const IterationSummary&) = default;
};

Result<IterationSummary> SummarizeIteration(const IterationModel& m, const HostNetwork& net);

// The single-overlap iteration time at bandwidth_scale s: max(c, o c + t / s). Comparing it
// with TimeIteration(m, net, s).iteration shows what the single-overlap formula loses.
Duration SingleOverlapIteration(const IterationSummary& s, double bandwidth_scale);

// Maps the rail flows of every op (all instances) onto `hosts` (the job's hosts, in rank
// order) of `topo`: GPU g of a host -> NIC g * N / G of its N NICs (the host itself when it
// has none), summed per (src NIC, dst NIC) pair, in a deterministic order. These are the
// per-iteration bytes the planner routes (bytes per link follow from its paths).
// Errors: hosts.size() != the layout's hosts, a node that is not a host.
Result<std::vector<FlowDemand>> IterationFlows(const Topology& topo,
                                               const std::vector<NodeId>& hosts,
                                               const IterationModel& m);

// The JobSpec today's planner and engine consume: explicit flows (IterationFlows), compute
// time, overlap_start and W_j from SummarizeIteration with the NICs of `topo` (NIC bandwidth:
// the first host's first NIC link). Errors: those of IterationFlows and SummarizeIteration.
Result<JobSpec> SingleOverlapJobSpec(const Topology& topo, std::string id,
                                     const std::vector<NodeId>& hosts, const IterationModel& m);

}  // namespace crux::core

#endif  // CRUX_CORE_MODEL_ITERATION_SUMMARY_H_
