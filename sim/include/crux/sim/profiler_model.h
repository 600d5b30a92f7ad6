// ProfilerModel: the simulator's stand-in for the client library's profiler
// (client_lib/src/profiler.h, docs/client.md), so that a simulated job reports its profile to the
// control loop when, and as, a real job using the client library would.
//
// The simulated job feeds it one sample per completed iteration (marked mode of the client:
// every iteration is delimited, the compute end is known):
//   period   = iteration end - iteration start (the next iteration starts when one ends, so
//              this is also begin - previous begin, as the client measures it)
//   compute  = the compute phase (compute end - begin)
//   overlap  = (first communication start - begin) / compute, clamped to [0, 1]; 1 without
//              network traffic
//   bytes    = bytes of the flows started in the iteration, per peer (local NIC, remote NIC)
// The candidate profile is the median of the last `window` samples (integer medians as the
// client computes them: the mean of the two middle values, truncated). It is reported
//   * the first time, when at least converge_min_iterations samples exist and every sample of
//     the window is within stable_spread of the window median (period, compute and bytes), or at
//     converge_max_iterations iterations at the latest; that report is converged;
//   * afterwards only when period, compute time or total bytes move by more than
//     change_threshold (relative) from the last reported profile in change_persistence
//     consecutive candidates.
// Every report has converged = true (as the client's), samples = the iterations completed so
// far, compression_ratio 1 (measured bytes are on the wire) and the job's W_j if the job knows
// it (else absent: the planner estimates it from the compute time, as cruxd does for a client
// without FLOPs).
//
// Differences from the client, by design: one candidate per iteration (the client takes one
// per tick of its background thread, which normally sees every iteration); no period detection
// mode (simulated jobs always mark their iterations); no wire latency (the report reaches the
// loop at the instant the iteration ends).
//
// Thread-safety: none (owned by the engine's job state).
#ifndef CRUX_SIM_PROFILER_MODEL_H_
#define CRUX_SIM_PROFILER_MODEL_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "crux/core/control_types.h"
#include "crux/core/ids.h"
#include "crux/core/status.h"
#include "crux/core/units.h"

namespace crux::sim {

// The client's ProfilerOptions (crux/client/client.h), with its defaults.
struct ProfilerModelOptions {
  uint32_t window = 10;                   // Samples the profile is the median of, >= 3.
  uint32_t converge_min_iterations = 3;   // Earliest first report, >= 2.
  uint32_t converge_max_iterations = 10;  // First report at this count at the latest, >= 1.
  double stable_spread = 0.10;            // Early convergence: every sample within this.
  double change_threshold = 0.20;         // Re-report when period/compute/bytes move by more...
  uint32_t change_persistence = 3;        // ... in this many consecutive candidates, >= 1.

  friend bool operator==(const ProfilerModelOptions&, const ProfilerModelOptions&) = default;
};

// kInvalidArgument naming the field ("control.profiler.window: must be >= 3").
core::Status ValidateProfilerModelOptions(const ProfilerModelOptions& o);

// One completed iteration.
struct IterationSample {
  int64_t period_ns = 0;   // > 0.
  int64_t compute_ns = 0;  // > 0.
  double overlap_start = 1;
  std::vector<int64_t> peer_bytes;  // Parallel to the model's peers.
};

class ProfilerModel {
 public:
  // `peers`: the job's (local NIC, remote NIC) pairs, in a fixed order (reports list them in
  // that order). `flops`: W_j if the job knows it.
  ProfilerModel(ProfilerModelOptions options,
                std::vector<std::pair<core::NodeId, core::NodeId>> peers,
                std::optional<core::Flops> flops);

  // Adds the sample of an iteration; returns the profile to report now, if one is due.
  // `iterations` is the number of iterations the job has completed (reported as `samples`).
  std::optional<core::JobProfile> AddIteration(const IterationSample& s, uint32_t iterations);

  bool reported() const { return reported_; }
  // No report can be half-way: the first one is out and no change is being confirmed.
  bool settled() const { return reported_ && changed_run_ == 0; }
  const core::JobProfile& last_reported() const { return last_reported_; }

 private:
  core::JobProfile Median(uint32_t iterations) const;
  bool Changed(const core::JobProfile& p) const;

  ProfilerModelOptions options_;
  std::vector<std::pair<core::NodeId, core::NodeId>> peers_;
  std::optional<core::Flops> flops_;
  std::deque<IterationSample> window_;
  uint64_t count_ = 0;
  bool reported_ = false;
  core::JobProfile last_reported_;
  uint32_t changed_run_ = 0;
};

}  // namespace crux::sim

#endif  // CRUX_SIM_PROFILER_MODEL_H_
