#include "profiler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "period_detector.h"

namespace crux::client::internal {
namespace {

// The median of `v` (the mean of the two middle values for an even count); reorders `v`.
template <typename T>
T MedianOf(std::vector<T>& v) {
  if (v.empty()) return T{};
  const size_t n = v.size();
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (n % 2 == 1) return *mid;
  const T below = *std::max_element(v.begin(), mid);  // The middle value below: sorted v[n/2 - 1].
  return static_cast<T>((below + *mid) / 2);
}

template <typename T>
bool Stable(const std::vector<T>& v, double spread) {
  std::vector<T> copy = v;
  T med = MedianOf(copy);
  double m = static_cast<double>(med);
  for (T x : v) {
    double d = std::abs(static_cast<double>(x) - m);
    if (d > spread * m) return false;
  }
  return true;
}

bool RelChanged(double now, double before, double threshold) {
  if (before <= 0) return now > 0;
  return std::abs(now - before) > threshold * before;
}

constexpr int64_t kDetectEveryNs = 100'000'000;  // 100 ms.

// Timestamps the profiler accepts (steady_clock readings: 0 to ~73 years). Caller-given transfer
// times (RecordComm) outside this range are dropped, so that no difference of two timestamps and
// no sum of two durations overflows int64.
constexpr int64_t kMaxEventNs = int64_t{1} << 61;
bool InEventRange(int64_t t) { return t >= 0 && t <= kMaxEventNs; }
// Communication time accumulated in an iteration, saturating at kMaxEventNs.
int64_t AddDuration(int64_t total, int64_t d) { return std::min(kMaxEventNs, total + d); }
// Bytes accumulated per iteration (total and per peer) saturate at the protocol's limit (1 PiB,
// what ValidateProfileReport accepts), so that caller-given byte counts never wrap a sum or make
// the library send a report the daemon refuses (found by fuzz/client_profiler).
constexpr uint64_t kMaxIterationBytes = uint64_t{1} << 50;
uint64_t AddBytes(uint64_t total, uint64_t b) {
  return b >= kMaxIterationBytes - std::min(total, kMaxIterationBytes) ? kMaxIterationBytes
                                                                       : total + b;
}

}  // namespace

Profiler::Profiler(ProfilerOptions options, double flops_per_iteration, double peak_flops_total)
    : options_(options), flops_(flops_per_iteration), peak_total_(peak_flops_total) {}

int64_t Profiler::UnionSoFar(int64_t t) const {
  return union_ns_ + (active_ > 0 ? std::max<int64_t>(0, t - union_start_) : 0);
}

void Profiler::CloseUnion(int64_t t) {
  if (active_ > 0) {
    union_ns_ = AddDuration(union_ns_, std::max<int64_t>(0, t - union_start_));
    union_start_ = t;
  }
}

void Profiler::Consume(const Event& e) {
  if (e.kind == EventKind::kComm && !(InEventRange(e.t_ns) && InEventRange(e.t2_ns))) return;
  switch (e.kind) {
    case EventKind::kIterationBegin:
      if (in_iteration_) FinishIteration(e.t_ns);  // A missing EndIteration.
      marked_ = true;
      in_iteration_ = true;
      begin_ns_ = e.t_ns;
      compute_end_ns_ = -1;
      first_comm_ns_ = -1;
      union_ns_ = 0;
      if (active_ > 0) union_start_ = e.t_ns;
      return;
    case EventKind::kIterationEnd:
      if (in_iteration_) FinishIteration(e.t_ns);
      return;
    case EventKind::kComputeEnd:
      if (in_iteration_) {
        compute_end_ns_ = e.t_ns;
        union_at_compute_end_ = UnionSoFar(e.t_ns);
      }
      return;
    case EventKind::kCommStart:
    case EventKind::kComm: {
      if (in_iteration_ && first_comm_ns_ < 0) first_comm_ns_ = e.t_ns;
      bytes_ = AddBytes(bytes_, e.bytes);
      if (e.peer >= peer_bytes_.size()) peer_bytes_.resize(e.peer + 1, 0);
      peer_bytes_[e.peer] = AddBytes(peer_bytes_[e.peer], e.bytes);
      if (e.kind == EventKind::kComm) {
        int64_t end = std::max(e.t_ns, e.t2_ns);
        if (active_ == 0) union_ns_ = AddDuration(union_ns_, end - e.t_ns);
        transfers_.push_back({e.t_ns, end, e.bytes, e.peer});
        ++transfers_since_detect_;
        while (transfers_.size() > options_.detect_events) transfers_.pop_front();
        MaybeDetect(e.t_ns);
        return;
      } else {
        if (active_ == 0) union_start_ = e.t_ns;
        ++active_;
        if (e.peer >= open_.size()) open_.resize(e.peer + 1);
        open_[e.peer].emplace_back(e.t_ns, e.bytes);
      }
      break;
    }
    case EventKind::kCommEnd: {
      if (active_ > 0) {
        --active_;
        if (active_ == 0) {
          union_ns_ = AddDuration(union_ns_, std::max<int64_t>(0, e.t_ns - union_start_));
        }
      }
      if (e.peer < open_.size() && !open_[e.peer].empty()) {
        auto [start, bytes] = open_[e.peer].front();
        open_[e.peer].pop_front();
        transfers_.push_back({start, std::max(start, e.t_ns), bytes, e.peer});
        ++transfers_since_detect_;
        while (transfers_.size() > options_.detect_events) transfers_.pop_front();
        MaybeDetect(start);
      }
      break;
    }
  }
  while (transfers_.size() > options_.detect_events) transfers_.pop_front();
}

void Profiler::MaybeDetect(int64_t start_ns) {
  if (marked_ || transfers_since_detect_ == 0) return;
  if (last_detect_ns_ >= 0 && start_ns - last_detect_ns_ < kDetectEveryNs) return;
  last_detect_ns_ = start_ns;
  transfers_since_detect_ = 0;
  ++detections_;
  std::vector<PeerId> index;
  auto candidate = DetectedProfile(&index);
  if (!candidate) return;
  auto due = Decide(std::move(*candidate));
  if (!due) return;
  detected_due_ = std::move(due);  // The newest due profile replaces an untaken older one.
  detected_index_ = std::move(index);
}

void Profiler::FinishIteration(int64_t end_ns) {
  CloseUnion(end_ns);
  IterationSample s;
  s.begin_ns = begin_ns_;
  s.duration_ns = std::max<int64_t>(1, end_ns - begin_ns_);
  s.period_ns =
      prev_begin_ns_ >= 0 ? std::max<int64_t>(1, begin_ns_ - prev_begin_ns_) : s.duration_ns;
  s.comm_ns = std::min(union_ns_, s.duration_ns);
  if (compute_end_ns_ >= 0) {
    s.compute_ns = compute_end_ns_ - begin_ns_;
  } else {
    s.compute_ns = s.duration_ns - s.comm_ns;
  }
  s.compute_ns = std::max<int64_t>(1, s.compute_ns);
  if (first_comm_ns_ >= 0) {
    double f = static_cast<double>(first_comm_ns_ - begin_ns_) / static_cast<double>(s.compute_ns);
    s.overlap_start = std::clamp(f, 0.0, 1.0);
  }
  s.bytes = bytes_;
  // The sample that leaves the window lends its per-peer vector (no allocation per iteration).
  const size_t cap = std::max<uint32_t>(options_.window, 3);
  while (window_.size() >= cap) {
    s.peer_bytes = std::move(window_.front().peer_bytes);
    window_.pop_front();
  }
  s.peer_bytes.assign(peer_bytes_.begin(), peer_bytes_.end());
  bytes_ = 0;
  std::fill(peer_bytes_.begin(), peer_bytes_.end(), 0);
  union_ns_ = 0;
  prev_begin_ns_ = begin_ns_;
  in_iteration_ = false;
  ++iterations_;
  window_.push_back(std::move(s));
  new_sample_ = true;
}

void Profiler::ReplaySample(size_t back) {
  IterationSample s = window_[window_.size() - back];
  const size_t cap = std::max<uint32_t>(options_.window, 3);
  while (window_.size() >= cap) window_.pop_front();
  ++iterations_;
  window_.push_back(std::move(s));
  new_sample_ = true;
}

template <typename T>
T Profiler::WindowMedian(T IterationSample::*field, std::vector<T>& scratch) const {
  scratch.clear();
  for (const IterationSample& s : window_) scratch.push_back(s.*field);
  return MedianOf(scratch);
}

void Profiler::FillFlops(Profile* p) const {
  if (flops_ > 0) {
    p->flops_per_iteration = flops_;
  } else if (peak_total_ > 0) {
    p->flops_per_iteration = static_cast<double>(p->compute_time_ns) * 1e-9 * peak_total_;
  } else {
    p->flops_per_iteration = 0;
  }
}

Profile Profiler::MedianProfile(std::vector<PeerId>* peer_index) const {
  std::vector<int64_t> period, compute, comm;
  std::vector<double> overlap;
  std::vector<uint64_t> bytes;
  for (auto* v : {&period, &compute, &comm}) v->reserve(window_.size());
  overlap.reserve(window_.size());
  bytes.reserve(window_.size());
  size_t peers = 0;
  for (const auto& s : window_) {
    period.push_back(s.period_ns);
    compute.push_back(s.compute_ns);
    comm.push_back(s.comm_ns);
    overlap.push_back(s.overlap_start);
    bytes.push_back(s.bytes);
    peers = std::max(peers, s.peer_bytes.size());
  }
  Profile p;
  p.iteration_period_ns = MedianOf(period);
  p.compute_time_ns = MedianOf(compute);
  p.comm_time_ns = MedianOf(comm);
  p.overlap_start = MedianOf(overlap);
  p.bytes_per_iteration = MedianOf(bytes);
  p.samples = static_cast<uint32_t>(window_.size());
  peer_index->clear();
  std::vector<uint64_t> b;  // Reused per peer.
  b.reserve(window_.size());
  for (size_t i = 0; i < peers; ++i) {
    b.clear();
    for (const auto& s : window_) b.push_back(i < s.peer_bytes.size() ? s.peer_bytes[i] : 0);
    uint64_t med = MedianOf(b);
    if (med == 0) continue;
    peer_index->push_back(static_cast<PeerId>(i));
    p.peers.push_back({"", "", med});
  }
  FillFlops(&p);
  return p;
}

bool Profiler::Changed(const Profile& p) const {
  const double t = options_.change_threshold;
  return RelChanged(static_cast<double>(p.iteration_period_ns),
                    static_cast<double>(last_reported_.iteration_period_ns), t) ||
         RelChanged(static_cast<double>(p.compute_time_ns),
                    static_cast<double>(last_reported_.compute_time_ns), t) ||
         RelChanged(static_cast<double>(p.bytes_per_iteration),
                    static_cast<double>(last_reported_.bytes_per_iteration), t);
}

std::optional<Profile> Profiler::DetectedProfile(std::vector<PeerId>* peer_index) {
  std::vector<Transfer> ts(transfers_.begin(), transfers_.end());
  std::sort(ts.begin(), ts.end(),
            [](const Transfer& a, const Transfer& b) { return a.start_ns < b.start_ns; });
  std::vector<int64_t> starts;
  starts.reserve(ts.size());
  for (const auto& t : ts) starts.push_back(t.start_ns);
  PeriodDetectorOptions dopt;
  dopt.min_bursts = std::max<uint32_t>(3, options_.detect_min_bursts);
  auto est = DetectPeriod(starts, dopt);
  if (!est.ok()) return std::nullopt;
  const int64_t first = est->burst_starts_ns.front();
  const int64_t last = est->burst_starts_ns.back();
  const double k = std::max(
      1.0, std::round(static_cast<double>(last - first) / static_cast<double>(est->period_ns)));
  uint64_t bytes = 0;
  std::vector<uint64_t> per_peer;
  int64_t union_ns = 0, cur_start = -1, cur_end = -1;
  for (const auto& t : ts) {
    if (t.start_ns < first || t.start_ns >= last) continue;
    bytes = AddBytes(bytes, t.bytes);
    if (t.peer >= per_peer.size()) per_peer.resize(t.peer + 1, 0);
    per_peer[t.peer] = AddBytes(per_peer[t.peer], t.bytes);
    if (cur_start < 0 || t.start_ns > cur_end) {
      if (cur_start >= 0) union_ns += cur_end - cur_start;
      cur_start = t.start_ns;
      cur_end = t.end_ns;
    } else {
      cur_end = std::max(cur_end, t.end_ns);
    }
  }
  if (cur_start >= 0) union_ns += cur_end - cur_start;
  Profile p;
  p.detected = true;
  p.iteration_period_ns = est->period_ns;
  p.comm_time_ns = static_cast<int64_t>(static_cast<double>(union_ns) / k);
  p.compute_time_ns = std::max<int64_t>(1, p.iteration_period_ns - p.comm_time_ns);
  p.overlap_start = 1;
  p.bytes_per_iteration = static_cast<uint64_t>(static_cast<double>(bytes) / k);
  p.samples = static_cast<uint32_t>(k);
  peer_index->clear();
  for (size_t i = 0; i < per_peer.size(); ++i) {
    if (per_peer[i] == 0) continue;
    peer_index->push_back(static_cast<PeerId>(i));
    p.peers.push_back({"", "", static_cast<uint64_t>(static_cast<double>(per_peer[i]) / k)});
  }
  FillFlops(&p);
  iterations_ = std::max<uint64_t>(iterations_, static_cast<uint64_t>(k));
  // A first estimate on little data can be wrong (e.g. one burst looks like a series of
  // iterations): the first report needs two consecutive detections that agree.
  const double prev = static_cast<double>(prev_detected_period_ns_);
  const bool agrees = prev > 0 && std::abs(static_cast<double>(est->period_ns) - prev) <=
                                      options_.stable_spread * prev;
  prev_detected_period_ns_ = est->period_ns;
  if (!reported_) {
    if (!agrees) return std::nullopt;
    bool ready = (k >= options_.converge_max_iterations && est->confidence >= 0.5) ||
                 (k >= options_.converge_min_iterations && est->confidence >= 0.9);
    if (!ready) return std::nullopt;
  }
  return p;
}

std::optional<Profile> Profiler::TakeReport(std::vector<PeerId>* peer_index) {
  if (!marked_) {
    if (!detected_due_) return std::nullopt;
    std::optional<Profile> out = std::move(detected_due_);
    detected_due_.reset();
    *peer_index = std::move(detected_index_);
    detected_index_.clear();
    return out;
  }
  if (!new_sample_) return std::nullopt;
  new_sample_ = false;
  if (reported_) {
    // After the first report Decide() only looks at the medians of period, compute and bytes
    // to see that nothing changed, which is the common case on every iteration: take those
    // three first and build the full profile (overlap, per-peer medians) only for a change.
    Profile scalars;
    scalars.iteration_period_ns = WindowMedian(&IterationSample::period_ns, scratch_i64_);
    scalars.compute_time_ns = WindowMedian(&IterationSample::compute_ns, scratch_i64_);
    scalars.bytes_per_iteration = WindowMedian(&IterationSample::bytes, scratch_u64_);
    if (!Changed(scalars)) {
      changed_run_ = 0;
      return std::nullopt;
    }
  } else {
    const uint64_t n = iterations_;
    bool due = n >= options_.converge_max_iterations;
    if (!due && n >= std::max<uint32_t>(2, options_.converge_min_iterations)) {
      std::vector<int64_t> period, compute;
      std::vector<uint64_t> bytes;
      for (const auto& s : window_) {
        period.push_back(s.period_ns);
        compute.push_back(s.compute_ns);
        bytes.push_back(s.bytes);
      }
      due = Stable(period, options_.stable_spread) && Stable(compute, options_.stable_spread) &&
            Stable(bytes, options_.stable_spread);
    }
    if (!due) return std::nullopt;
  }
  return Decide(MedianProfile(peer_index));
}

std::optional<Profile> Profiler::Decide(Profile candidate) {
  candidate.converged = true;
  if (reported_) {
    if (!Changed(candidate)) {
      changed_run_ = 0;
      return std::nullopt;
    }
    if (++changed_run_ < std::max<uint32_t>(1, options_.change_persistence)) return std::nullopt;
  }
  changed_run_ = 0;
  reported_ = true;
  last_reported_ = candidate;
  return candidate;
}

}  // namespace crux::client::internal
