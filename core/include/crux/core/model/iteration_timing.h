// Standalone timing of a multi-phase iteration (traffic_model.h builds it): how long one
// iteration takes alone on the job's NICs, and the compute that makes it take a given time.
//
// TimeIteration runs the segments in order; a segment starts when the previous one ended and
// every op it waits for has completed. An op may start once the segment it is issued after has
// ended and the op it is chained after (after_op) has completed; a paced op of n instances
// releases instance i when i / n of its window's compute has run. The job's transfers share its
// NICs fairly (processor sharing): each transfer needs its busiest NIC's bytes / NIC bandwidth
// of exclusive time, scaled by `bandwidth_scale`. What this leaves out: per-layer blocking of
// CP and TP (one block has the same standalone cost), intra-host (NVLink) time, latency
// (alpha) per transfer, and the other pipeline stages (stage 0 stands for all of them: its
// timing sets the iteration; the bytes of every stage are in the flows).
//
// Thread-safety: pure functions; the types are values.
#ifndef CRUX_CORE_MODEL_ITERATION_TIMING_H_
#define CRUX_CORE_MODEL_ITERATION_TIMING_H_

#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/traffic_model.h"

namespace crux::core {

// The NICs of every host of the job: an iteration's inter-host bytes leave and enter through
// them (GPU g of a host on NIC GpuNicIndex(g, G, nics_per_host)).
struct HostNetwork {
  int nics_per_host = 8;                           // >= 1.
  Bandwidth nic_bandwidth = Bandwidth::Gbps(400);  // Per NIC, > 0.

  friend bool operator==(const HostNetwork&, const HostNetwork&) = default;
};

// Seconds of exclusive NIC time one instance of `op` needs at line rate: the bytes of its
// busiest NIC / NIC bandwidth. REQUIRES: net valid.
Duration InstanceWork(const IterationModel& m, const CommOp& op, const HostNetwork& net);

struct OpSpan {
  Duration first_release;  // When its first instance was released.
  Duration end;            // When its last instance completed.

  friend bool operator==(const OpSpan&, const OpSpan&) = default;
};

struct IterationTiming {
  Duration iteration;  // Standalone iteration time.
  Duration busy;       // Sum of busy segments.
  Duration idle;       // Sum of idle (bubble) segments.
  Duration exposed;    // iteration - busy - idle: time the GPUs wait for communication.
  Duration network;    // Seconds of exclusive NIC time all transfers need (at scale 1).
  std::vector<Duration> segment_start;
  std::vector<OpSpan> ops;

  friend bool operator==(const IterationTiming&, const IterationTiming&) = default;
};

// One iteration alone on a fabric that gives the job bandwidth_scale x its NICs' line rate
// (1: standalone; 0.5: every transfer takes twice as long). Deterministic.
// Errors: bad network or scale (<= 0 or not finite), an op referring to a bad segment or op.
Result<IterationTiming> TimeIteration(const IterationModel& m, const HostNetwork& net,
                                      double bandwidth_scale = 1.0);

// The busy compute C at which the standalone iteration of `recipe` (its compute ignored) takes
// `target` on `net`: how a measured or derived iteration time becomes the model's compute.
// Errors: the communication and bubble alone exceed the target (the profile is inconsistent
// with that network), or an invalid recipe.
Result<Duration> CalibrateCompute(const TrainingRecipe& recipe, const HostNetwork& net,
                                  Duration target);

}  // namespace crux::core

#endif  // CRUX_CORE_MODEL_ITERATION_TIMING_H_
