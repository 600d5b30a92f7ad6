// Priority assignment (Crux §4.2); see priority.h for the contract.
//
// SimulatePair exploits one property of strict preemptive priority: the higher-priority job H
// never waits for the lower one, so H runs exactly as it would alone. Its iterations start at
// k * p_H (p = max(c, o*c + t)) and it holds the link during [k*p_H + o_H*c_H, ... + t_H]. The
// lower-priority job L transmits in exactly the free time of that periodic pattern between the
// moment its communication becomes ready and the moment it has accumulated t_L seconds of link
// time. Both the free time in an interval and its inverse ("when has L received t_L seconds?")
// have closed forms, so each of L's iterations is one O(1) step. While L cannot meet one of H's
// transmissions, it runs alone and a whole run of its iterations is skipped in one step as well.
// The result is exact (the same schedule as a classic event-driven simulation, verified against
// one in the tests) and costs O(number of H periods + number of L iterations in the horizon)
// steps, without any per-event search.
//
// An "event" for PairSimOptions::max_events is one such step. When the cap stops the simulation
// at time T before the end of the window, the outcome covers [window start, T] only and window_s
// is the length of that covered part (0 if the cap hit during warm-up).
#include "crux/core/plan/priority.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace crux::core {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Relative tolerance for "mathematically equal" priorities.
constexpr double kPriorityRelEps = 1e-12;
// Transmission-rate differences below this (seconds per second of window) are rounding noise.
constexpr double kRateNoise = 1e-11;

// Non-negative finite seconds from a Duration (Infinite() stays large but finite).
double Seconds(Duration d) {
  const double s = d.ToSeconds();
  return s > 0 && std::isfinite(s) ? s : 0.0;
}

// A job's timing in double seconds.
struct Timing {
  double c = 0;  // compute
  double t = 0;  // comm
  double a = 0;  // comm ready offset = overlap_start * compute
  double p = 0;  // standalone period = max(c, a + t)
};

Timing ToTiming(const PairJob& job) {
  Timing x;
  x.c = Seconds(job.compute);
  x.t = Seconds(job.comm);
  double o = job.overlap_start;
  if (!(o >= 0)) o = (o < 0) ? 0.0 : 1.0;  // NaN -> 1 (no overlap), negative -> 0
  o = std::min(o, 1.0);
  x.a = o * x.c;
  x.p = std::max(x.c, x.a + x.t);
  return x;
}

// Intervals [origin + k*period + offset, origin + k*period + offset + length] for k >= 0, with
// offset + length <= period.
struct Pattern {
  double period = 0;
  double offset = 0;
  double length = 0;
};

// Measure of the pattern (origin 0) inside [0, z].
double Cumulative(const Pattern& p, double z) {
  if (!(z > 0) || !(p.length > 0) || !(p.period > 0)) return 0.0;
  double k = std::floor(z / p.period);
  double u = z - k * p.period;
  if (u < 0) {
    k -= 1;
    u += p.period;
  } else if (u >= p.period) {
    k += 1;
    u -= p.period;
  }
  return k * p.length + std::clamp(u - p.offset, 0.0, p.length);
}

// Measure of the pattern with the given origin inside [x, y].
double MeasureIn(const Pattern& p, double origin, double x, double y) {
  if (!(y > x)) return 0.0;
  return std::max(0.0, Cumulative(p, y - origin) - Cumulative(p, x - origin));
}

// The link as seen by the lower-priority job: busy with H's periodic transmissions.
class Link {
 public:
  explicit Link(const Timing& h) : busy_{h.p, h.a, h.t}, used_(h.t > 0 && h.p > 0) {}

  bool used() const { return used_; }

  // Free link time inside [0, z].
  double Free(double z) const { return z - Cumulative(busy_, z); }

  // Free link time inside [x, y].
  double FreeIn(double x, double y) const {
    if (!(y > x)) return 0.0;
    if (!used_) return y - x;
    return std::clamp(Free(y) - Free(x), 0.0, y - x);
  }

  // Start of the busy interval that contains x or, if none does, the next one after x.
  double BusyStartAtOrAfter(double x) const {
    if (!used_) return kInf;
    const double start = BusyIndex(x) * busy_.period + busy_.offset;
    if (x < start + busy_.length) return start;
    return start + busy_.period;
  }

  // Earliest y >= x such that the link is free for `need` seconds inside [x, y]; +inf if the
  // link is never free. Works locally around x (not through Free(x)), so a `need` far below
  // the resolution of x still never lands inside a busy interval.
  double FinishTime(double x, double need) const {
    if (!(need > 0)) return x;
    if (!used_) return x + need;
    const double gap = busy_.period - busy_.length;  // Free time between two busy intervals.
    if (!(gap > 0)) return kInf;
    // Busy interval i is [i*period + offset, i*period + offset + length]; the free interval
    // after it ends where busy interval i + 1 starts.
    const double i = BusyIndex(x);
    const double busy_end = i * busy_.period + busy_.offset + busy_.length;
    const double from = std::max(x, busy_end);  // Inside a busy interval: wait for its end.
    const double free_end = (i + 1) * busy_.period + busy_.offset;
    if (from + need <= free_end) return from + need;
    double rest = need - std::max(0.0, free_end - from);
    double m = std::floor(rest / gap);  // Whole free intervals after busy interval i + 1.
    double tail = rest - m * gap;
    if (tail <= 0 && m >= 1) {  // Completes exactly at the end of a free interval.
      m -= 1;
      tail += gap;
    } else if (tail > gap) {
      m += 1;
      tail -= gap;
    }
    const double y = (i + 1 + m) * busy_.period + busy_.offset + busy_.length + tail;
    return std::max(y, free_end);
  }

 private:
  // Index of the last busy interval starting at or before x (-1 before the first one).
  double BusyIndex(double x) const {
    double i = std::floor((x - busy_.offset) / busy_.period);
    if (i * busy_.period + busy_.offset > x) i -= 1;  // Rounding guard.
    return i;
  }

  Pattern busy_;
  bool used_;
};

// Length of [x, y] inside [lo, hi].
double Overlap(double x, double y, double lo, double hi) {
  return std::max(0.0, std::min(y, hi) - std::max(x, lo));
}

struct JobTally {
  double transmit = 0;
  double compute = 0;
};

}  // namespace

PairOutcome SimulatePair(const PairJob& a, const PairJob& b, bool a_first,
                         const PairSimOptions& options) {
  const Timing ta = ToTiming(a);
  const Timing tb = ToTiming(b);
  const Timing& h = a_first ? ta : tb;
  const Timing& l = a_first ? tb : ta;

  PairOutcome out;
  const double slow = std::max(ta.p, tb.p);
  const double warmup = std::max(0, options.warmup_periods);
  const double measure = std::max(0, options.measure_periods);
  if (!(slow > 0) || !(measure > 0)) return out;
  const double ws = warmup * slow;
  const double we = ws + measure * slow;

  const Link link(h);
  JobTally lt;
  double end = we;  // Simulated horizon (shorter when max_events stops the loop).

  if (l.p > 0) {
    const Pattern l_compute{l.p, 0.0, l.c};
    const Pattern l_comm{l.p, l.a, l.t};
    double s = 0;  // Start of L's current iteration.
    int64_t steps = 0;
    while (s < we) {
      if (steps >= options.max_events) {
        end = s;
        break;
      }
      ++steps;
      if (!(l.t > 0)) {  // L never uses the link: it computes back to back.
        lt.compute += Overlap(s, we, ws, we);
        break;
      }
      // Run of standalone iterations whose communication ends before H's next transmission.
      const double room = link.BusyStartAtOrAfter(s) - s - l.a - l.t;
      if (room >= 0) {
        const double to_end = std::ceil((we - s) / l.p);
        const double m = std::max(1.0, std::min(std::floor(room / l.p) + 1, to_end));
        const double next = s + m * l.p;
        if (s >= ws && next <= we) {
          lt.compute += m * l.c;
          lt.transmit += m * l.t;
        } else {
          const double lo = std::max(s, ws);
          const double hi = std::min(next, we);
          lt.compute += MeasureIn(l_compute, s, lo, hi);
          lt.transmit += MeasureIn(l_comm, s, lo, hi);
        }
        if (!(next > s)) {  // Below the resolution of s: no progress possible.
          end = s;
          break;
        }
        s = next;
        continue;
      }
      // One contended iteration: L transmits in all free link time of [ready, done].
      const double ready = s + l.a;
      const double done = link.FinishTime(ready, l.t);
      lt.compute += Overlap(s, s + l.c, ws, we);
      if (ready >= ws && done <= we) {
        lt.transmit += l.t;
      } else {
        lt.transmit += link.FreeIn(std::max(ready, ws), std::min(done, we));
      }
      if (!std::isfinite(done)) break;  // Starved: the link is never free again.
      const double next = std::max(s + l.c, done);
      if (!(next > s)) {
        end = s;
        break;
      }
      s = next;
    }
  }

  JobTally ht;
  end = std::min(end, we);
  if (end > ws) {
    if (h.p > 0) {
      ht.compute = MeasureIn(Pattern{h.p, 0.0, h.c}, 0.0, ws, end);
      ht.transmit = MeasureIn(Pattern{h.p, h.a, h.t}, 0.0, ws, end);
    }
    out.window_s = end - ws;
  } else {
    lt = JobTally{};
  }
  const JobTally& at = a_first ? ht : lt;
  const JobTally& bt = a_first ? lt : ht;
  out.transmit_a_s = at.transmit;
  out.transmit_b_s = bt.transmit;
  out.compute_a_s = at.compute;
  out.compute_b_s = bt.compute;
  return out;
}

std::string_view PairFindingName(PairFinding f) {
  switch (f) {
    case PairFinding::kNoInteraction:
      return "no_interaction";
    case PairFinding::kRatio:
      return "ratio";
    case PairFinding::kOnlyJobGains:
      return "only_job_gains";
    case PairFinding::kOnlyRefGains:
      return "only_reference_gains";
  }
  return "no_interaction";
}

Correction CompareWithReference(const PairJob& j, const PairJob& r, const PairSimOptions& options) {
  Correction c;
  const PairOutcome j_first = SimulatePair(j, r, /*a_first=*/true, options);
  const PairOutcome r_first = SimulatePair(j, r, /*a_first=*/false, options);
  if (!(j_first.window_s > 0) || !(r_first.window_s > 0)) return c;
  // Rates (seconds of transmission per second of window) so that a capped, shorter window
  // still compares like with like; with equal windows this is the header's formula scaled.
  double ds_j = j_first.transmit_a_s / j_first.window_s - r_first.transmit_a_s / r_first.window_s;
  double ds_r = r_first.transmit_b_s / r_first.window_s - j_first.transmit_b_s / j_first.window_s;
  if (!(ds_j > kRateNoise)) ds_j = 0;  // Also maps NaN to 0.
  if (!(ds_r > kRateNoise)) ds_r = 0;
  c.gain_job = ds_j;
  c.loss_reference = ds_r;
  if (ds_j == 0 && ds_r == 0) return c;
  // A side whose change is below 1/kMaxCorrection of the other's counts as gaining nothing:
  // the ratio would leave the bounds.
  if (ds_r * kMaxCorrection <= ds_j) {
    c.k = kMaxCorrection;
    c.finding = PairFinding::kOnlyJobGains;
  } else if (ds_j * kMaxCorrection <= ds_r) {
    c.k = 1.0 / kMaxCorrection;
    c.finding = PairFinding::kOnlyRefGains;
  } else {
    c.k = ds_j / ds_r;
    c.finding = PairFinding::kRatio;
  }
  return c;
}

double CorrectionFactor(const PairJob& j, const PairJob& r, const PairSimOptions& options) {
  return CompareWithReference(j, r, options).k;
}

int CorrectionTier(double k) {
  if (!std::isfinite(k)) return 0;
  if (k >= kMaxCorrection) return 1;
  if (k <= 1.0 / kMaxCorrection) return -1;
  return 0;
}

std::string DescribeCorrection(double k, bool is_reference) {
  if (is_reference) return "reference job (k = 1 by definition)";
  if (!std::isfinite(k) || !(k > 0)) return "unknown";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", k);
  switch (CorrectionTier(k)) {
    case 1:
      return std::string(buf) +
             " (bound): going first gains this job link time while the reference job loses "
             "none, so it ranks above every job with an ordinary k";
    case -1:
      return std::string(buf) +
             " (bound): going first gains this job no link time while the reference job would "
             "lose some, so it ranks below every job with an ordinary k";
    default:
      break;
  }
  if (k == 1.0) {
    return std::string(buf) +
           ": neither order changes the link time of this job or the reference job, or both "
           "change equally";
  }
  return std::string(buf) + ": going first gains this job " + buf +
         " s of link time per second the reference job loses";
}

namespace {

// Sanitised ranking keys: non-finite or negative inputs must not poison the order.
double FiniteNonNeg(double v) {
  if (!(v >= 0)) return 0.0;
  return std::min(v, std::numeric_limits<double>::max());
}

double SanitisedIntensity(const PriorityInput& job) {
  return job.has_traffic ? FiniteNonNeg(job.intensity) : 0.0;
}

}  // namespace

int SelectReference(const std::vector<PriorityInput>& jobs) {
  const int n = static_cast<int>(jobs.size());
  // Prefer jobs whose communication is exposed (not hidden behind compute), then max bytes/sec,
  // then max bytes/iteration, then lower index.
  auto exposed = [&](int i) {
    const PairJob& t = jobs[i].timing;
    return t.overlap_start * t.compute.ToSeconds() + t.comm.ToSeconds() >
           t.compute.ToSeconds() * (1 + 1e-9);
  };
  int ref = -1;
  for (int i = 0; i < n; ++i) {
    if (!jobs[i].has_traffic) continue;
    if (ref < 0) {
      ref = i;
      continue;
    }
    if (exposed(i) != exposed(ref)) {
      if (exposed(i)) ref = i;
      continue;
    }
    const double bs = FiniteNonNeg(jobs[i].bytes_per_sec);
    const double rbs = FiniteNonNeg(jobs[ref].bytes_per_sec);
    const double bi = FiniteNonNeg(jobs[i].bytes_per_iteration);
    const double rbi = FiniteNonNeg(jobs[ref].bytes_per_iteration);
    if (bs > rbs || (bs == rbs && bi > rbi)) ref = i;
  }
  return ref;
}

double PriorityValue(const PriorityInput& job, double k) {
  if (!job.has_traffic) return 0.0;
  return FiniteNonNeg(k * SanitisedIntensity(job));
}

void RankByPriority(const std::vector<PriorityInput>& jobs, const std::vector<double>& k,
                    const std::vector<double>& priority, std::vector<int>& rank,
                    std::vector<int>& order) {
  const int n = static_cast<int>(jobs.size());
  rank.assign(n, 0);
  order.resize(n);
  std::vector<double> intensity(n, 0.0);
  std::vector<int> tier(n, 0);
  for (int i = 0; i < n; ++i) {
    intensity[i] = SanitisedIntensity(jobs[i]);
    tier[i] = jobs[i].has_traffic ? CorrectionTier(k[i]) : 0;
  }

  // Total order. Jobs with traffic first; tier descending; P descending, where P values within
  // a relative 1e-12 of their sorted neighbour (in the same tier) form one tie group (grouping a
  // sorted sequence keeps the comparator a strict weak ordering); inside a group I desc, GPUs
  // desc, index asc.
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    if (jobs[x].has_traffic != jobs[y].has_traffic) return jobs[x].has_traffic;
    if (tier[x] != tier[y]) return tier[x] > tier[y];
    if (priority[x] != priority[y]) return priority[x] > priority[y];
    return x < y;
  });
  auto tie_less = [&](int x, int y) {
    if (intensity[x] != intensity[y]) return intensity[x] > intensity[y];
    if (jobs[x].gpus != jobs[y].gpus) return jobs[x].gpus > jobs[y].gpus;
    return x < y;
  };
  for (int begin = 0; begin < n;) {
    int stop = begin + 1;
    while (stop < n) {
      const int prev = order[stop - 1];
      const int cur = order[stop];
      if (jobs[prev].has_traffic != jobs[cur].has_traffic) break;
      if (tier[prev] != tier[cur]) break;
      const double p = priority[prev];
      const double q = priority[cur];
      if (p - q > kPriorityRelEps * std::max(std::abs(p), std::abs(q))) break;
      ++stop;
    }
    std::sort(order.begin() + begin, order.begin() + stop, tie_less);
    begin = stop;
  }
  for (int r = 0; r < n; ++r) rank[order[r]] = r;
}

PriorityAssignment AssignPriorities(const std::vector<PriorityInput>& jobs,
                                    const PairSimOptions& options) {
  const int n = static_cast<int>(jobs.size());
  PriorityAssignment out;
  out.k.assign(n, 1.0);
  out.correction.assign(n, Correction{});
  out.priority.assign(n, 0.0);
  const int ref = SelectReference(jobs);
  out.reference = ref;
  for (int i = 0; i < n; ++i) {
    if (!jobs[i].has_traffic) continue;
    if (i != ref) {
      out.correction[i] = CompareWithReference(jobs[i].timing, jobs[ref].timing, options);
      out.k[i] = out.correction[i].k;
    }
    out.priority[i] = PriorityValue(jobs[i], out.k[i]);
  }
  RankByPriority(jobs, out.k, out.priority, out.rank, out.order);
  return out;
}

}  // namespace crux::core
