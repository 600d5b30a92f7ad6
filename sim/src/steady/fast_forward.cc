#include "steady/fast_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>
#include <utility>

namespace crux::sim::internal {
namespace {

using core::Duration;

// Snapshots kept per group for steady-state detection (exact matches up to kMaxSnapshots - 1
// anchor iterations back), and anchor iterations skipped once a group is formed.
constexpr size_t kMaxSnapshots = 64;
constexpr int64_t kWarmupIterations = 2;
// Windows (in anchor iterations) over which approximate steadiness is checked, largest first.
// Shorter windows let beats of quasi-periodic contention through (fast-forward then drifts
// from the full simulation by a few percent: tests/sim/simulator_test.cc).
constexpr size_t kSteadyWindows[] = {64, 32};

}  // namespace

SteadyStateDetector::SteadyStateDetector(const SimOptions& options, const engine::SimClock& clock,
                                         JobModel& jobs, Fabric& fabric, Metrics& metrics,
                                         SimResult& result, CatchUp catch_up)
    : options_(options),
      clock_(clock),
      catch_up_(std::move(catch_up)),
      jobs_(jobs),
      fabric_(fabric),
      metrics_(metrics),
      result_(result) {}

void SteadyStateDetector::BeginRegroup() {
  WakeChanged();
  jobs_.NewEpoch();
  // EndRegroup carries the steady state of unchanged groups over.
  previous_groups_ = std::move(groups_);
  groups_.clear();
  check_ = false;
  asleep_ = 0;
  next_wake_ = Duration::Infinite();
}

void SteadyStateDetector::EndRegroup() {
  BuildGroups();
  previous_groups_.clear();
  fabric_changed_ = false;
}

void SteadyStateDetector::BuildGroups() {
  std::vector<JobState>& js = jobs_.jobs();
  groups_.clear();
  for (JobState& s : js) s.group = -1;
  if (!options_.fast_forward) return;
  // Union-find over running jobs through the resources of their planned flows.
  const std::vector<uint32_t>& running = jobs_.running();
  std::vector<size_t> parent(running.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto find = [&parent](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  resource_owner_.assign(fabric_.net().num_resources(), -1);
  for (size_t i = 0; i < running.size(); ++i) {
    for (const std::vector<ResourceId>& path : js[running[i]].plan_resources) {
      for (ResourceId r : path) {
        if (resource_owner_[r] < 0) {
          resource_owner_[r] = static_cast<int>(i);
        } else {
          const size_t a = find(i), b = find(static_cast<size_t>(resource_owner_[r]));
          if (a != b) parent[std::max(a, b)] = std::min(a, b);
        }
      }
    }
  }
  std::vector<int> group_of_root(running.size(), -1);
  for (size_t i = 0; i < running.size(); ++i) {
    const size_t root = find(i);
    if (group_of_root[root] < 0) {
      group_of_root[root] = static_cast<int>(groups_.size());
      groups_.emplace_back();
      groups_.back().anchor = running[i];
    }
    Group& g = groups_[group_of_root[root]];
    g.jobs.push_back(running[i]);
    js[running[i]].group = group_of_root[root];
  }
  // Anchor: the job of the group with the longest standalone period (fewest snapshots).
  for (Group& g : groups_) {
    for (uint32_t j : g.jobs) {
      if (js[j].period > js[g.anchor].period) g.anchor = j;
    }
  }
  // A group with the same jobs on the same plans as before the re-plan has the same dynamics
  // (groups never influence each other): it keeps what was learnt about it. The others start
  // over, and so do their jobs' profiler windows.
  std::unordered_map<uint32_t, size_t> previous_of;  // Smallest job -> previous group.
  for (size_t k = 0; k < previous_groups_.size(); ++k) {
    previous_of.emplace(previous_groups_[k].jobs.front(), k);
  }
  std::vector<uint64_t> fingerprint(js.size(), 0);
  for (Group& g : groups_) {
    bool unchanged = !fabric_changed_;
    for (uint32_t j : g.jobs) {
      fingerprint[j] = PlanFingerprint(j);
      unchanged = unchanged && fingerprint[j] == js[j].plan_fingerprint;
    }
    auto it = previous_of.find(g.jobs.front());
    if (unchanged && it != previous_of.end() && previous_groups_[it->second].jobs == g.jobs) {
      Group& old = previous_groups_[it->second];
      g.anchor = old.anchor;
      g.anchor_iterations = old.anchor_iterations;
      g.known = old.known;
      g.period = old.period;
      g.snaps = std::move(old.snaps);
      if (old.asleep) {  // Sleeps on (WakeChanged left it: nothing of it changed).
        g.asleep = true;
        g.slept_from = old.slept_from;
        g.wake_at = old.wake_at;
        old.asleep = false;
        ++asleep_;
      }
      if (g.known) ++result_.fast_forward_carried;
      continue;
    }
    for (uint32_t j : g.jobs) {
      js[j].epoch_iterations = 0;
      js[j].cycle_iterations = 0;
    }
  }
  for (Group& g : groups_) {
    for (uint32_t j : g.jobs) js[j].plan_fingerprint = fingerprint[j];
  }
  // WakeChanged mirrors the carry-over rule above, so every sleeping group was carried; one that
  // was not would be woken here, late (after the arrived jobs' first flows started).
  for (Group& old : previous_groups_) {
    if (!old.asleep) continue;
    ++result_.late_wakes;
    ++asleep_;
    Wake(old);
  }
  UpdateNextWake();
  // Groups that stayed steady take no new snapshot: they may fall asleep again right away.
  for (const Group& g : groups_) check_ = check_ || g.known;
}

// What determines a job's dynamics besides the other jobs of its group: level, flows (paths
// and bytes) and time shift.
uint64_t SteadyStateDetector::PlanFingerprint(uint32_t j) const {
  const JobState& s = jobs_.jobs()[j];
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 1099511628211ull;
  };
  mix(static_cast<uint64_t>(s.level));
  mix(static_cast<uint64_t>(s.pending_shift.nanos()));
  mix(static_cast<uint64_t>(s.applied_shift.nanos()));
  mix(s.plan_resources.size());
  for (size_t f = 0; f < s.plan_resources.size(); ++f) {
    mix(static_cast<uint64_t>(s.plan_flows[f].bytes.count()));
    for (ResourceId r : s.plan_resources[f]) mix(static_cast<uint64_t>(r));
  }
  return h;
}

void SteadyStateDetector::OnIterationStart(uint32_t j) {
  const JobState& s = jobs_.jobs()[j];
  if (s.group < 0 || groups_[s.group].anchor != j) return;
  Group& g = groups_[s.group];
  if (!g.known) {
    if (++g.anchor_iterations > kWarmupIterations) {
      g.pending = true;
      check_ = true;
    }
  } else if (!g.asleep) {
    check_ = true;  // Steady and awake: its sleep had to wait.
  }
}

void SteadyStateDetector::OnOldFlowsDone() {
  for (const Group& g : groups_) check_ = check_ || (g.known && !g.asleep);
}

SteadyStateDetector::Snapshot SteadyStateDetector::TakeSnapshot(const Group& g) const {
  const Duration now = clock_.Now();
  const FluidNetwork& net = fabric_.net();
  Snapshot snap;
  snap.t = now;
  for (uint32_t j : g.jobs) {
    const JobState& s = jobs_.jobs()[j];
    JobSnap js;
    js.phase = now - s.iter_start;
    js.computing = s.computing;
    js.compute_left = s.computing ? s.compute_end - now : Duration::Zero();
    js.comm_started = s.comm_started;
    js.comm_start_left = s.comm_started ? Duration::Zero() : s.comm_start - now;
    js.comm_done = s.comm_done;
    js.pending_shift = s.pending_shift;
    auto add_flow = [&](const FlowRun& run) {
      js.flow_status.push_back(static_cast<uint8_t>(run.status));
      js.flow_size.push_back(run.size);
      if (run.status == FlowStatus::kInNetwork) {
        js.flow_value.push_back(net.Remaining(run.id, now));
      } else if (run.status == FlowStatus::kDelivering) {
        js.flow_value.push_back(static_cast<double>((run.deliver_at - now).nanos()));
      } else {
        js.flow_value.push_back(0);
      }
    };
    if (s.phases) {
      const PhaseRun& r = s.phase_run;
      js.compute_left = r.running >= 0 ? r.seg_end - now : Duration::Zero();
      js.comm_start_left = r.held ? s.comm_start - now : Duration::Zero();
      js.comm_done = r.ended;
      js.phase_state = {r.running, r.last_ended};
      for (const PhaseRun::Op& o : r.ops) {
        js.phase_state.insert(js.phase_state.end(),
                              {o.released, o.completed, o.deferred, o.issued, o.done});
      }
      std::vector<std::pair<uint64_t, uint32_t>> live;
      for (uint32_t f = 0; f < s.flows.size(); ++f) {
        if (s.flows[f].status != FlowStatus::kDone) live.emplace_back(s.flows[f].key, f);
      }
      std::sort(live.begin(), live.end());
      for (const auto& [key, f] : live) {
        js.flow_key.push_back(key);
        add_flow(s.flows[f]);
      }
    } else {
      for (const FlowRun& run : s.flows) add_flow(run);
    }
    js.iterations = s.iterations;
    js.progress = static_cast<double>(s.iterations);
    if (s.iterations > 0 && s.iteration_time_sum > Duration::Zero()) {
      const double mean =
          static_cast<double>(s.iteration_time_sum.nanos()) / static_cast<double>(s.iterations);
      js.progress += std::min(1.0, static_cast<double>((now - s.iter_start).nanos()) / mean);
    }
    js.iteration_time_sum = s.iteration_time_sum;
    // The compute phase under way counts up to now (compute_busy grows only when a phase
    // ends, which would quantise the rates of approximately steady groups).
    const Duration compute_from = s.phases ? s.phase_run.seg_start : s.iter_start;
    js.compute_busy = s.compute_busy + (s.computing ? now - compute_from : Duration::Zero());
    js.bytes_sent = s.bytes_sent;
    js.class_bits = s.class_bits;
    snap.snaps.push_back(std::move(js));
  }
  return snap;
}

bool SteadyStateDetector::Matches(const Group& g, const Snapshot& a, const Snapshot& b,
                                  Duration period) const {
  const int64_t tol_ns = std::max<int64_t>(10, period.nanos() / 1'000'000);
  auto close = [tol_ns](Duration x, Duration y) { return std::llabs((x - y).nanos()) <= tol_ns; };
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    const JobSnap& x = a.snaps[k];
    const JobSnap& y = b.snaps[k];
    if (x.computing != y.computing || x.comm_started != y.comm_started ||
        x.comm_done != y.comm_done || x.flow_status != y.flow_status || x.flow_key != y.flow_key ||
        x.phase_state != y.phase_state) {
      return false;
    }
    if (!close(x.phase, y.phase) || !close(x.compute_left, y.compute_left) ||
        !close(x.comm_start_left, y.comm_start_left) || !close(x.pending_shift, y.pending_shift)) {
      return false;
    }
    for (size_t f = 0; f < x.flow_value.size(); ++f) {
      if (x.flow_status[f] == static_cast<uint8_t>(FlowStatus::kInNetwork)) {
        const double bytes = x.flow_size[f];
        if (std::abs(x.flow_value[f] - y.flow_value[f]) > std::max(1.0, 1e-6 * bytes)) {
          return false;
        }
      } else if (x.flow_status[f] == static_cast<uint8_t>(FlowStatus::kDelivering)) {
        if (!close(Duration::Nanos(static_cast<int64_t>(x.flow_value[f])),
                   Duration::Nanos(static_cast<int64_t>(y.flow_value[f])))) {
          return false;
        }
      }
    }
  }
  return true;
}

// Snapshot of a group at its anchor's iteration start; a match with an earlier snapshot means
// the group's state repeats with that period: its rates are then known until it changes.
void SteadyStateDetector::CheckGroup(Group& g) {
  g.pending = false;
  if (g.known || jobs_.jobs()[g.anchor].iter_start != clock_.Now() || jobs_.old_in_flight() > 0) {
    return;
  }
  Snapshot snap = TakeSnapshot(g);
  const Snapshot* match = nullptr;
  for (auto it = g.snaps.rbegin(); it != g.snaps.rend(); ++it) {
    if (snap.t > it->t && Matches(g, *it, snap, snap.t - it->t)) {
      match = &*it;
      break;
    }
  }
  if (match != nullptr) {
    SetRates(g, *match, snap, snap.t - match->t, /*exact=*/true);
    return;
  }
  if (g.snaps.size() >= kMaxSnapshots) g.snaps.erase(g.snaps.begin());
  g.snaps.push_back(std::move(snap));
  if (options_.fast_forward_tolerance <= 0) return;
  // Not exactly periodic (contending jobs with incommensurate periods): steady if the rates of
  // the two halves of the last k anchor iterations agree, for the largest such window.
  const size_t n = g.snaps.size();
  for (size_t k : kSteadyWindows) {
    if (n < k) continue;
    const Snapshot& first = g.snaps[n - k];
    if (RatesAgree(g, first, g.snaps[n - k / 2], g.snaps.back())) {
      SetRates(g, first, g.snaps.back(),
               Duration::Nanos((g.snaps.back().t - first.t).nanos() / static_cast<int64_t>(k - 1)),
               /*exact=*/false);
      ++result_.fast_forward_approximate;
      return;
    }
  }
}

// Rates of each job of `g` over [a.t, b.t] and over [b.t, c.t] agree: compute (continuous, see
// TakeSnapshot) within the tolerance; iterations and bytes, which advance in steps of one
// iteration, within the tolerance plus one step per half.
bool SteadyStateDetector::RatesAgree(const Group& g, const Snapshot& a, const Snapshot& b,
                                     const Snapshot& c) const {
  const double tol = options_.fast_forward_tolerance;
  const double d1 = static_cast<double>((b.t - a.t).nanos());
  const double d2 = static_cast<double>((c.t - b.t).nanos());
  if (d1 <= 0 || d2 <= 0) return false;
  auto agree = [tol](double x, double y, double slack) {
    return std::abs(x - y) <= tol * std::max(std::abs(x), std::abs(y)) + slack + 1e-15;
  };
  const double step = 1 / d1 + 1 / d2;
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    const JobSnap& x = a.snaps[k];
    const JobSnap& y = b.snaps[k];
    const JobSnap& z = c.snaps[k];
    double iteration_bytes = 0;
    for (const core::FlowPlan& fp : jobs_.jobs()[g.jobs[k]].plan_flows) {
      iteration_bytes += fp.bytes.ToDouble();
    }
    if (!agree(static_cast<double>((y.compute_busy - x.compute_busy).nanos()) / d1,
               static_cast<double>((z.compute_busy - y.compute_busy).nanos()) / d2, 0) ||
        !agree((y.progress - x.progress) / d1, (z.progress - y.progress) / d2, step) ||
        !agree((y.bytes_sent - x.bytes_sent) / d1, (z.bytes_sent - y.bytes_sent) / d2,
               step * iteration_bytes)) {
      return false;
    }
  }
  return true;
}

// Sets the group's per-job rates from the progress between two of its snapshots; `period` is
// the granularity of sleeps (the exact period, or the mean anchor iteration).
void SteadyStateDetector::SetRates(Group& g, const Snapshot& from, const Snapshot& to,
                                   Duration period, bool exact) {
  const double p = static_cast<double>((to.t - from.t).nanos());
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    JobState& s = jobs_.job(g.jobs[k]);
    const JobSnap& a = from.snaps[k];
    const JobSnap& b = to.snaps[k];
    const int64_t d_iter = b.iterations - a.iterations;
    s.rate_iteration_ns =
        d_iter > 0
            ? static_cast<double>((b.iteration_time_sum - a.iteration_time_sum).nanos()) / d_iter
            : 0;
    s.rate_class_bits.assign(b.class_bits.size(), 0.0);
    for (size_t c = 0; c < b.class_bits.size(); ++c) {
      s.rate_class_bits[c] =
          (b.class_bits[c] - (c < a.class_bits.size() ? a.class_bits[c] : 0)) / p;
    }
    s.cycle_iterations = exact ? std::max<int64_t>(0, d_iter) : 0;
    if (exact) {  // Both ends at the same phase: every difference is whole iterations.
      s.rate_iterations = static_cast<double>(d_iter) / p;
      s.rate_busy = static_cast<double>((b.compute_busy - a.compute_busy).nanos()) / p;
      s.rate_bytes = (b.bytes_sent - a.bytes_sent) / p;
      continue;
    }
    // A window of anchor iterations ends at arbitrary phases of the other jobs: a job's compute
    // and bytes over it are biased by up to one compute phase or one communication phase. Its
    // continuous progress is not, and every iteration computes compute_time and sends the same
    // bytes, so the rates derive from the rate of iterations.
    s.rate_iterations = std::max(0.0, b.progress - a.progress) / p;
    s.rate_busy = s.rate_iterations * static_cast<double>(s.compute.nanos());
    double iteration_bytes = 0;
    for (size_t f = 0; f < s.plan_flows.size(); ++f) {
      if (!s.plan_resources[f].empty()) iteration_bytes += s.plan_flows[f].bytes.ToDouble();
    }
    s.rate_bytes = s.rate_iterations * iteration_bytes;
  }
  g.known = true;
  g.period = std::max(period, Duration::Nanos(1));
  g.snaps.clear();
}

void SteadyStateDetector::Check(Duration limit, const std::function<bool(uint32_t)>& settled) {
  check_ = false;
  for (Group& g : groups_) {
    if (g.pending) CheckGroup(g);
  }
  // Flows started under an earlier plan still in flight may cross another group's resources
  // (groups are built from the plans in force): not yet the steady state the rates describe.
  if (jobs_.old_in_flight() > 0) return;
  for (Group& g : groups_) {
    if (!g.known || g.asleep) continue;
    if (!std::all_of(g.jobs.begin(), g.jobs.end(), settled)) continue;
    const Duration wake = WakeTime(g, limit);
    // Too close to the limit (or to a job's last iterations): checked again at the next anchor
    // iteration start.
    if (wake > clock_.Now()) Sleep(g, wake);
  }
}

Duration SteadyStateDetector::WakeTime(const Group& g, Duration limit) const {
  const Duration now = clock_.Now();
  const int64_t period = g.period.nanos();
  // Wake strictly before the limit.
  int64_t span = (limit - now).nanos() - 1;
  for (uint32_t j : g.jobs) {
    const JobState& s = jobs_.jobs()[j];
    if (!s.iteration_limit || s.rate_iterations <= 0) continue;
    // Leave a couple of group periods' worth of iterations to be simulated.
    const double left = static_cast<double>(*s.iteration_limit - s.iterations) -
                        s.iteration_credit - 2.0 * s.rate_iterations * static_cast<double>(period) -
                        1.0;
    span = std::min(span, static_cast<int64_t>(left / s.rate_iterations));
  }
  // Whole periods of the group: its state on waking is the one it fell asleep in.
  span = period > 0 && span > 0 ? span / period * period : 0;
  return now + Duration::Nanos(span);
}

void SteadyStateDetector::Sleep(Group& g, Duration wake_at) {
  const Duration now = clock_.Now();
  g.asleep = true;
  g.slept_from = now;
  g.wake_at = wake_at;
  jobs_.ShiftJobs(g.jobs, wake_at - now);
  for (uint32_t j : g.jobs) jobs_.job(j).asleep = true;
  ++asleep_;
  ++result_.fast_forward_jumps;
  next_wake_ = std::min(next_wake_, wake_at);
}

void SteadyStateDetector::Wake(Group& g) {
  const Duration now = clock_.Now();
  for (uint32_t j : g.jobs) jobs_.job(j).asleep = false;
  g.asleep = false;
  --asleep_;
  check_ = true;  // It may fall asleep again (another limit, or right after a control run).
  if (now >= g.wake_at) {  // On time: whole periods.
    Credit(g, g.slept_from, now - g.slept_from);
    return;
  }
  // Woken early: its timeline moves back to the last whole period, where its state is the one
  // it fell asleep in, and the rest is simulated. Only its events lie before now: every other
  // group's are at now or later.
  ++result_.early_wakes;
  const int64_t period = std::max<int64_t>(1, g.period.nanos());
  const Duration landed =
      g.slept_from + Duration::Nanos((now - g.slept_from).nanos() / period * period);
  jobs_.ShiftJobs(g.jobs, landed - g.wake_at);
  Credit(g, g.slept_from, landed - g.slept_from);
  if (landed < now) catch_up_(now);
}

void SteadyStateDetector::WakeDue() {
  const Duration now = clock_.Now();
  for (Group& g : groups_) {
    if (g.asleep && g.wake_at <= now) Wake(g);
  }
  UpdateNextWake();
}

void SteadyStateDetector::WakeAll() {
  if (asleep_ == 0) return;
  for (Group& g : groups_) {
    if (g.asleep) Wake(g);
  }
  next_wake_ = Duration::Infinite();
}

void SteadyStateDetector::WakeGroupOf(uint32_t j) {
  const int k = jobs_.job(j).group;
  if (k < 0 || static_cast<size_t>(k) >= groups_.size() || !groups_[k].asleep) return;
  Wake(groups_[k]);
  UpdateNextWake();
}

void SteadyStateDetector::WakeChanged() {
  if (asleep_ == 0) return;
  if (fabric_changed_) {
    WakeAll();
    return;
  }
  std::vector<JobState>& js = jobs_.jobs();
  // Which sleeping group each resource belongs to; then any other running job planning to use
  // one of them wakes that group. Sleeping groups never share a resource with one another.
  resource_owner_.assign(fabric_.net().num_resources(), -1);
  std::vector<bool> wake(groups_.size(), false);
  for (size_t k = 0; k < groups_.size(); ++k) {
    const Group& g = groups_[k];
    if (!g.asleep) continue;
    for (uint32_t j : g.jobs) {
      const JobState& s = js[j];
      // A job that left, or whose plan changed without WakeGroupOf: not carried over.
      if (s.status != JobStatus::kRunning || PlanFingerprint(j) != s.plan_fingerprint) {
        wake[k] = true;
      }
      for (const std::vector<ResourceId>& path : s.plan_resources) {
        for (ResourceId r : path) resource_owner_[r] = static_cast<int>(k);
      }
    }
  }
  for (uint32_t j : jobs_.running()) {
    const JobState& s = js[j];
    if (s.asleep) continue;
    for (const std::vector<ResourceId>& path : s.plan_resources) {
      for (ResourceId r : path) {
        if (resource_owner_[r] >= 0) wake[resource_owner_[r]] = true;
      }
    }
  }
  for (size_t k = 0; k < groups_.size(); ++k) {
    if (wake[k] && groups_[k].asleep) Wake(groups_[k]);
  }
  UpdateNextWake();
}

void SteadyStateDetector::UpdateNextWake() {
  next_wake_ = Duration::Infinite();
  if (asleep_ == 0) return;
  for (const Group& g : groups_) {
    if (g.asleep) next_wake_ = std::min(next_wake_, g.wake_at);
  }
}

void SteadyStateDetector::Credit(const Group& g, Duration from, Duration d) {
  if (d <= Duration::Zero()) return;
  const double jd = static_cast<double>(d.nanos());
  for (uint32_t j : g.jobs) {
    JobState& s = jobs_.jobs()[j];
    const double x = jd * s.rate_iterations + s.iteration_credit;
    const double n = std::floor(x + 1e-9);  // k periods x m iterations is an integer.
    s.iteration_credit = x - n;
    s.iterations += static_cast<int64_t>(n);
    s.epoch_iterations += static_cast<int64_t>(n);
    // The profiler of an exactly periodic job sees the skipped iterations' samples (its cycle
    // repeated; a full window at most), as the full simulation's would.
    if (s.profiler && s.cycle_iterations > 0 &&
        static_cast<size_t>(s.cycle_iterations) <= s.profiler->samples()) {
      const int64_t window = std::max<int64_t>(options_.control.profiler.window, 3);
      s.profiler->Replay(std::min(static_cast<int64_t>(n), window),
                         static_cast<size_t>(s.cycle_iterations));
    }
    s.iteration_time_sum += Duration::Nanos(std::llround(n * s.rate_iteration_ns));
    s.compute_busy += Duration::Nanos(std::llround(jd * s.rate_busy));
    metrics_.AddBusy(from, from + d, s.gpus * s.rate_busy);
    metrics_.Sent(jd * s.rate_bytes);
    metrics_.Delivered(jd * s.rate_bytes);
    s.bytes_sent += jd * s.rate_bytes;
    s.class_bits.resize(metrics_.num_classes(), 0.0);
    for (size_t c = 0; c < s.rate_class_bits.size(); ++c) {
      metrics_.AddClassBits(static_cast<int>(c), jd * s.rate_class_bits[c]);
      s.class_bits[c] += jd * s.rate_class_bits[c];
    }
  }
  result_.group_slept += d;
}

}  // namespace crux::sim::internal
