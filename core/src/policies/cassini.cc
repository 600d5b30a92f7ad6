// CASSINI's time shifts: per-link circles and a BFS over the job/link affinity graph
// (policies.h, docs/policies.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "crux/core/policies/policies.h"

namespace crux::core::policies {
namespace {

struct LinkUser {
  int job;
  double bps;
};

// Calls f(first, last) for every run of samples [first, last) whose centre (s + 0.5) * dt lies
// in one of the job's Up phases [comm_start + shift + m * period, ... + comm), m integer.
template <typename F>
void ForEachActiveRun(const CassiniJob& c, double shift, double dt, int samples, F&& f) {
  const double horizon = dt * samples;
  const double a0 = c.comm_start_s + shift;
  const long first_m = static_cast<long>(std::floor(-(a0 + c.comm_s) / c.period_s));
  const long last_m = static_cast<long>(std::ceil((horizon - a0) / c.period_s));
  for (long m = first_m; m <= last_m; ++m) {
    const double a = a0 + static_cast<double>(m) * c.period_s;
    // Samples with a <= (s + 0.5) dt < a + comm.
    const long lo = std::max(0L, static_cast<long>(std::ceil(a / dt - 0.5)));
    const long hi = std::min(static_cast<long>(samples),
                             static_cast<long>(std::ceil((a + c.comm_s) / dt - 0.5)));
    if (lo < hi) f(static_cast<int>(lo), static_cast<int>(hi));
  }
}

// Length of the unified circle for jobs with these periods: LCM of the periods quantised to
// 1/100 of the shortest, capped at max_multiple * the longest.
double UnifiedPeriod(const std::vector<double>& periods, int max_multiple) {
  const double tmin = *std::min_element(periods.begin(), periods.end());
  const double tmax = *std::max_element(periods.begin(), periods.end());
  const double cap = tmax * max_multiple;
  const double q = tmin / 100.0;
  uint64_t l = 1;
  for (double p : periods) {
    const uint64_t k = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(p / q)));
    l = l / std::gcd(l, k) * k;
    if (static_cast<double>(l) * q > cap) return cap;
  }
  return std::min(cap, static_cast<double>(l) * q);
}

}  // namespace

std::vector<double> CassiniShifts(const std::vector<CassiniJob>& jobs,
                                  const std::vector<double>& capacity_bps,
                                  const CassiniOptions& options) {
  const int n = static_cast<int>(jobs.size());
  std::vector<double> shift(n, 0.0);
  std::vector<char> placed(n, 0);
  // Link -> users; only links carried by >= 2 jobs with traffic matter.
  std::unordered_map<uint32_t, std::vector<LinkUser>> users;
  for (int j = 0; j < n; ++j) {
    const CassiniJob& c = jobs[j];
    if (c.comm_s <= 0 || c.period_s <= 0) continue;
    for (size_t i = 0; i < c.links.size(); ++i) {
      if (c.bps[i] > 0) users[c.links[i]].push_back(LinkUser{j, c.bps[i]});
    }
  }
  std::vector<std::vector<uint32_t>> shared(n);  // Per job: its shared links.
  std::vector<double> weight(n, 0.0);            // Summed demand on shared links.
  for (const auto& [l, u] : users) {
    if (u.size() < 2) continue;
    for (const LinkUser& x : u) {
      shared[x.job].push_back(l);
      weight[x.job] += x.bps;
    }
  }
  // Link rank inside a job's visit: n_jobs * average demand, descending; ties by link id.
  auto link_score = [&](uint32_t l) {
    const auto& u = users.at(l);
    double sum = 0;
    for (const LinkUser& x : u) sum += x.bps;
    return sum;  // n_jobs * average == sum.
  };
  for (int j = 0; j < n; ++j) {
    std::sort(shared[j].begin(), shared[j].end(), [&](uint32_t a, uint32_t b) {
      const double sa = link_score(a);
      const double sb = link_score(b);
      if (sa != sb) return sa > sb;
      return a < b;
    });
  }

  std::unordered_map<uint32_t, char> done_link;
  std::vector<double> fixed;
  const int samples = std::max(8, options.samples);
  const int candidates = std::max(1, options.shift_candidates);

  // Places the unplaced users of link l, the placed ones held at their shifts.
  auto optimise_link = [&](uint32_t l, std::deque<int>& queue) {
    const std::vector<LinkUser>& u = users.at(l);
    std::vector<double> periods;
    for (const LinkUser& x : u) periods.push_back(jobs[x.job].period_s);
    const double horizon = UnifiedPeriod(periods, std::max(1, options.max_period_multiple));
    const double dt = horizon / samples;
    const double cap = l < capacity_bps.size() ? capacity_bps[l] : 0.0;
    fixed.assign(samples, 0.0);
    std::vector<LinkUser> todo;
    for (const LinkUser& x : u) {
      if (placed[x.job]) {
        ForEachActiveRun(jobs[x.job], shift[x.job], dt, samples, [&](int lo, int hi) {
          for (int s = lo; s < hi; ++s) fixed[s] += x.bps;
        });
      } else {
        todo.push_back(x);
      }
    }
    std::stable_sort(todo.begin(), todo.end(), [](const LinkUser& a, const LinkUser& b) {
      if (a.bps != b.bps) return a.bps > b.bps;
      return a.job < b.job;
    });
    std::vector<double> excess_prefix(samples + 1);
    std::vector<double> overlap_prefix(samples + 1);
    for (const LinkUser& x : todo) {
      const CassiniJob& c = jobs[x.job];
      // Per sample, the excess over capacity and the overlap this job would add if active
      // there; prefix sums make each candidate shift cost O(Up phases on the circle).
      for (int s = 0; s < samples; ++s) {
        excess_prefix[s + 1] = excess_prefix[s] + std::max(0.0, fixed[s] + x.bps - cap);
        overlap_prefix[s + 1] = overlap_prefix[s] + std::min(fixed[s], x.bps);
      }
      double best_excess = 0;
      double best_overlap = 0;
      double best_shift = 0;
      bool have = false;
      const double tol = 1e-9 * (cap + x.bps) * samples;
      for (int k = 0; k < candidates; ++k) {
        const double s_k = c.period_s * k / candidates;
        double excess = 0;
        double overlap = 0;
        ForEachActiveRun(c, s_k, dt, samples, [&](int lo, int hi) {
          excess += excess_prefix[hi] - excess_prefix[lo];
          overlap += overlap_prefix[hi] - overlap_prefix[lo];
        });
        if (!have || excess < best_excess - tol ||
            (excess <= best_excess + tol && overlap < best_overlap - tol)) {
          have = true;
          best_excess = excess;
          best_overlap = overlap;
          best_shift = s_k;
        }
      }
      shift[x.job] = best_shift;
      placed[x.job] = 1;
      queue.push_back(x.job);
      ForEachActiveRun(c, best_shift, dt, samples, [&](int lo, int hi) {
        for (int s = lo; s < hi; ++s) fixed[s] += x.bps;
      });
    }
  };

  while (true) {
    // BFS root: the unplaced job with shared links and the largest summed demand.
    int root = -1;
    for (int j = 0; j < n; ++j) {
      if (placed[j] || shared[j].empty()) continue;
      if (root < 0 || weight[j] > weight[root]) root = j;
    }
    if (root < 0) break;
    placed[root] = 1;
    shift[root] = 0;
    std::deque<int> queue{root};
    while (!queue.empty()) {
      const int j = queue.front();
      queue.pop_front();
      for (uint32_t l : shared[j]) {
        if (done_link[l]) continue;
        done_link[l] = 1;
        bool any_unplaced = false;
        for (const LinkUser& x : users.at(l)) any_unplaced = any_unplaced || !placed[x.job];
        if (any_unplaced) optimise_link(l, queue);
      }
    }
  }
  return shift;
}

}  // namespace crux::core::policies
