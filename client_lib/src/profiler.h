// Profiler: turns the hot-path event stream into per-iteration samples and decides when a
// profile is due for the daemon. Pure logic (no clock, no I/O): the background thread feeds it
// events in arrival order and asks for a report on every tick. Everything it decides depends
// only on the events and their timestamps, never on when it is asked.
//
// Per marked iteration [BeginIteration, EndIteration]:
//   period   = begin - previous begin (the duration for the first iteration)
//   comm     = length of the union of communication intervals
//   compute  = ComputeEnd - begin when ComputeEnd was marked, else duration - comm (all
//              communication is assumed exposed: a lower bound on compute)
//   overlap  = (first comm start - begin) / compute, clamped to [0, 1]; 1 without comm
//   bytes    = bytes of the transfers started since the previous EndIteration, per peer
// The profile is the median of the last `window` samples. It is first reported when the window
// is stable (every sample within stable_spread of the median, after converge_min_iterations)
// or at converge_max_iterations at the latest; afterwards only when period, compute or bytes
// move by more than change_threshold in change_persistence consecutive samples.
//
// Without marks (no BeginIteration ever seen) the profiler keeps the last detect_events
// transfers and detects the period from their start times (period_detector.h); per-iteration
// bytes and communication time are the totals of the analysed bursts divided by the number of
// periods they span; compute = period - comm; overlap_start = 1. Detection runs inside Consume
// whenever the transfers' start times have advanced by 100 ms since the previous detection (so
// at most once per 100 ms of traffic, whichever way the events are batched). The first detected
// profile is reported once two consecutive detections agree within stable_spread.
//
// Thread-safety: none (owned by the background thread).
#ifndef CRUX_CLIENT_SRC_PROFILER_H_
#define CRUX_CLIENT_SRC_PROFILER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "crux/client/client.h"
#include "event_ring.h"

namespace crux::client::internal {

struct IterationSample {
  int64_t begin_ns = 0;
  int64_t period_ns = 0;
  int64_t duration_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  double overlap_start = 1;
  uint64_t bytes = 0;
  std::vector<uint64_t> peer_bytes;  // Indexed by PeerId.
};

class Profiler {
 public:
  // `flops_per_iteration` > 0: W_j as given. Else `peak_flops_total` > 0 (GPUs x peak per GPU):
  // W_j = compute x peak. Else W_j is reported as 0 (the daemon estimates).
  Profiler(ProfilerOptions options, double flops_per_iteration, double peak_flops_total);

  // REQUIRES: e.peer < the client's max_peers (Client drops other peer events), since per-peer
  // tables are indexed by peer id. kComm events (caller-given times) with a timestamp outside
  // [0, 2^61] are ignored; accumulated communication time saturates there.
  void Consume(const Event& e);

  // A profile due for reporting, or nullopt. Peer names are filled in by the caller (indexes
  // into its peer table are kept in peer_index, parallel to Profile::peers).
  std::optional<Profile> TakeReport(std::vector<PeerId>* peer_index);

  // Period detections run so far (detection mode).
  uint64_t detections() const { return detections_; }

  uint64_t iterations() const { return iterations_; }
  bool marked_mode() const { return marked_; }
  // No report can be half-way: the first one was taken and no change is being confirmed (the
  // simulator's fast-forward waits for this before skipping iterations).
  bool settled() const { return reported_ && changed_run_ == 0; }
  const std::deque<IterationSample>& window() const { return window_; }
  // Marked mode, for the simulator's fast-forward (iterations it skips because they repeat):
  // appends a copy of the sample `back` places from the end of the window (1 = the last one)
  // as if an iteration had just ended with it. The timing of the next real iteration (its
  // period from the previous begin) is untouched. REQUIRES: 1 <= back <= window().size().
  void ReplaySample(size_t back);

 private:
  void CloseUnion(int64_t t);
  int64_t UnionSoFar(int64_t t) const;
  void FinishIteration(int64_t end_ns);
  Profile MedianProfile(std::vector<PeerId>* peer_index) const;
  // The median of one field over the window, gathered in `scratch` (reused, no allocation).
  template <typename T>
  T WindowMedian(T IterationSample::*field, std::vector<T>& scratch) const;
  std::optional<Profile> DetectedProfile(std::vector<PeerId>* peer_index);
  bool Changed(const Profile& p) const;
  // Applies the reporting rules (first report, change persistence) to a candidate.
  std::optional<Profile> Decide(Profile candidate);
  void MaybeDetect(int64_t start_ns);
  void FillFlops(Profile* p) const;

  ProfilerOptions options_;
  double flops_;
  double peak_total_;

  // Marked mode.
  bool marked_ = false;
  bool in_iteration_ = false;
  int64_t begin_ns_ = 0;
  int64_t prev_begin_ns_ = -1;
  int64_t compute_end_ns_ = -1;
  int64_t union_at_compute_end_ = 0;
  int64_t first_comm_ns_ = -1;
  int active_ = 0;
  int64_t union_start_ = 0;
  int64_t union_ns_ = 0;
  uint64_t bytes_ = 0;
  std::vector<uint64_t> peer_bytes_;
  std::deque<IterationSample> window_;
  uint64_t iterations_ = 0;

  // Reporting.
  bool reported_ = false;
  Profile last_reported_;
  uint32_t changed_run_ = 0;
  bool new_sample_ = false;
  // Reused by TakeReport's unchanged-profile check (no allocation per iteration).
  std::vector<int64_t> scratch_i64_;
  std::vector<uint64_t> scratch_u64_;

  // Detection mode.
  struct Transfer {
    int64_t start_ns;
    int64_t end_ns;
    uint64_t bytes;
    PeerId peer;
  };
  std::deque<Transfer> transfers_;
  std::vector<std::deque<std::pair<int64_t, uint64_t>>> open_;  // Per peer: (start, bytes).
  uint64_t transfers_since_detect_ = 0;
  int64_t last_detect_ns_ = -1;  // Newest transfer start at the previous detection.
  int64_t prev_detected_period_ns_ = 0;
  uint64_t detections_ = 0;
  std::optional<Profile> detected_due_;
  std::vector<PeerId> detected_index_;
};

}  // namespace crux::client::internal

#endif  // CRUX_CLIENT_SRC_PROFILER_H_
