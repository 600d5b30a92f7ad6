// What iteration_summary.cc shares with iteration_timing.cc, and nothing else sees. The summary
// times one model many times on one network (its search for the stretch slack), so it computes
// every op's NIC work once and reuses it; and it counts the iteration's bytes per NIC by the
// same rule as the timing.
#ifndef CRUX_CORE_SRC_MODEL_ITERATION_TIMING_INTERNAL_H_
#define CRUX_CORE_SRC_MODEL_ITERATION_TIMING_INTERNAL_H_

#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/model/iteration_timing.h"
#include "crux/core/model/traffic_model.h"

namespace crux::core::timing_internal {

// OK, or an error naming the bad field of `net` (see HostNetwork).
Status ValidateNetwork(const HostNetwork& net);

// Seconds of exclusive NIC time per instance of every op, in op order (InstanceWork).
// REQUIRES: net valid.
std::vector<double> OpWork(const IterationModel& m, const HostNetwork& net);

// TimeIteration with every op's NIC work given (OpWork of the same network) and every segment's
// duration multiplied by compute_scale, so that calibration can try many computes without
// copying the model. REQUIRES: work.size() == m.ops.size(), bandwidth_scale > 0.
Result<IterationTiming> TimeWithWork(const IterationModel& m, const std::vector<double>& work,
                                     double bandwidth_scale, double compute_scale = 1.0);

// Bytes per iteration (every op, every instance) through the job's busiest NIC, in whichever
// direction carries more. REQUIRES: net valid.
double BusiestNicBytes(const IterationModel& m, const HostNetwork& net);

}  // namespace crux::core::timing_internal

#endif  // CRUX_CORE_SRC_MODEL_ITERATION_TIMING_INTERNAL_H_
