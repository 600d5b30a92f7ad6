// A simulated job's profiler: the client library's own Profiler (client_lib/src/profiler.h),
// fed with the job's iteration events as the client's hot path records them in marked mode
// (BeginIteration, CommStart per flow, ComputeEnd, CommEnd per flow, EndIteration), and its
// reports converted to core::JobProfile the way cruxd's gateway converts a ProfileReport
// (client_lib/src/wire.cc MakeProfileReport, proto/src/convert.cc ProfileFromProto). So the
// simulator runs, and tests, the rule real jobs report by: median of the last `window`
// iterations, first reported when stable (or at converge_max_iterations), then only on lasting
// changes.
//
// Differences from a real job, by design: one report decision per iteration (the client takes
// one per tick of its background thread, which normally sees every iteration); no wire latency
// (the report reaches the loop at the iteration's end); the clock the profiler sees does not
// include the time fast-forward skipped for its job (a sleep skips whole iterations, replayed
// into the window for an exactly periodic job; the profiler sees the iterations around it back
// to back).
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_JOBS_CLIENT_PROFILER_H_
#define CRUX_SIM_SRC_JOBS_CLIENT_PROFILER_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/control_types.h"
#include "crux/sim/sim_types.h"
#include "profiler.h"  // client_lib/src (crux_client_profiler).

namespace crux::sim::internal {

// kInvalidArgument naming the field ("control.profiler.window: must be >= 3").
core::Status ValidateClientProfilerOptions(const ClientProfilerOptions& o);

class ClientProfiler {
 public:
  // `peers`: the job's (local NIC, remote NIC) pairs; peer i is the client's PeerId i. `flops`:
  // W_j when the job knows it (else the daemon estimates it from the compute time).
  ClientProfiler(const ClientProfilerOptions& options,
                 std::vector<std::pair<core::NodeId, core::NodeId>> peers,
                 std::optional<core::Flops> flops);

  // Events of one iteration, at the times the job's client would record them.
  void BeginIteration(core::Duration t);
  void CommStart(core::Duration t, uint32_t peer, int64_t bytes);
  void ComputeEnd(core::Duration t);
  void CommEnd(core::Duration t, uint32_t peer);
  void EndIteration(core::Duration t);

  // The profile due for reporting after the last iteration, if any.
  std::optional<core::JobProfile> TakeReport();
  // No report can be half-way (reported, no change being confirmed).
  bool settled() const { return profiler_.settled(); }
  // Settled, and every sample in the profiler's window (period, compute time, bytes) is within
  // `margin` x change_threshold of the last report: as long as the job's iterations stay like
  // these, no window median can move far enough for another report.
  bool Quiet(double margin) const;

  // Fast-forward of an exactly periodic job whose iterations repeat with a cycle of `cycle`
  // iterations (its last `cycle` samples are the cycle's): whether the next `n` iterations, each
  // repeating the sample `cycle` back, would leave it settled with no report due (checked on a
  // copy), and the replay itself (the iterations a sleep skipped). REQUIRES: settled(),
  // 1 <= cycle <= the samples in the window.
  bool QuietThrough(int64_t n, size_t cycle) const;
  void Replay(int64_t n, size_t cycle);
  size_t samples() const { return profiler_.window().size(); }

 private:
  void Consume(client::internal::EventKind kind, core::Duration t, uint32_t peer = 0,
               uint64_t bytes = 0);

  client::internal::Profiler profiler_;
  std::vector<std::pair<core::NodeId, core::NodeId>> peers_;
  double change_threshold_;
  std::optional<client::Profile> last_report_;
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_JOBS_CLIENT_PROFILER_H_
