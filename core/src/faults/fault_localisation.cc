#include "crux/core/faults/fault_localisation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

namespace crux::core {

bool IsHealthy(const PathObservation& o, const LocalisationOptions& options) {
  return !o.failed && o.rate_ratio >= options.gray_ratio;
}

std::vector<Suspect> VoteHardFaults(std::span<const PathObservation> obs,
                                    const LocalisationOptions& options) {
  std::set<LinkId> exonerated;
  std::vector<uint32_t> remaining;
  for (uint32_t i = 0; i < obs.size(); ++i) {
    if (obs[i].failed) {
      remaining.push_back(i);
    } else if (IsHealthy(obs[i], options)) {
      exonerated.insert(obs[i].links.begin(), obs[i].links.end());
    }
  }
  std::vector<Suspect> out;
  const size_t min_flows = static_cast<size_t>(std::max(1, options.min_flows));
  while (!remaining.empty()) {
    std::map<LinkId, double> votes;
    std::map<LinkId, std::vector<uint32_t>> explains;
    for (uint32_t f : remaining) {
      const double share = 1.0 / static_cast<double>(obs[f].links.size());
      for (LinkId l : obs[f].links) {
        if (exonerated.count(l)) continue;
        votes[l] += share;
        explains[l].push_back(f);
      }
    }
    if (votes.empty()) break;
    auto best = votes.begin();
    for (auto it = votes.begin(); it != votes.end(); ++it) {
      if (it->second > best->second + 1e-12) best = it;  // Ties: the lower link id (map order).
    }
    const std::vector<uint32_t>& explained = explains[best->first];
    if (explained.size() < min_flows) break;
    std::vector<LinkId> group;
    for (const auto& [l, v] : votes) {
      if (std::fabs(v - best->second) <= 1e-12 && explains[l] == explained) group.push_back(l);
    }
    for (LinkId l : group) {
      Suspect s;
      s.link = l;
      s.kind = SuspectKind::kHard;
      s.score = best->second;
      s.estimate = 0;
      s.evidence = explained;
      s.ambiguous = group.size() > 1;
      out.push_back(std::move(s));
    }
    const std::set<uint32_t> gone(explained.begin(), explained.end());
    std::erase_if(remaining, [&](uint32_t f) { return gone.count(f) > 0; });
  }
  return out;
}

namespace {

// The unhealthy part of the matrix, with identical columns merged: `groups[v]` are the links of
// variable v (links crossed by exactly the same observations cannot be told apart), `rows` the
// observations that cross a variable and, per row, its variables.
struct Subproblem {
  std::vector<std::vector<LinkId>> groups;
  std::vector<uint32_t> rows;                // Observation indices.
  std::vector<std::vector<uint32_t>> vars;   // Per row: its variables.
  std::vector<std::vector<uint32_t>> cover;  // Per variable: its rows (indices into rows).
};

Subproblem BuildSubproblem(std::span<const PathObservation> obs,
                           const LocalisationOptions& options) {
  Subproblem sp;
  std::set<LinkId> suspicious;
  for (const PathObservation& o : obs) {
    if (!IsHealthy(o, options)) suspicious.insert(o.links.begin(), o.links.end());
  }
  if (suspicious.empty()) return sp;
  std::set<LinkId> vars;
  for (const PathObservation& o : obs) {
    if (std::any_of(o.links.begin(), o.links.end(),
                    [&](LinkId l) { return suspicious.count(l) > 0; })) {
      vars.insert(o.links.begin(), o.links.end());
    }
  }
  // Column of each variable link: the observations crossing it.
  std::map<LinkId, std::vector<uint32_t>> column;
  for (uint32_t i = 0; i < obs.size(); ++i) {
    for (LinkId l : obs[i].links) {
      if (vars.count(l)) column[l].push_back(i);
    }
  }
  std::map<std::vector<uint32_t>, uint32_t> group_of;  // Column -> variable.
  std::map<LinkId, uint32_t> var_of;
  for (const auto& [l, col] : column) {
    auto [it, fresh] = group_of.emplace(col, static_cast<uint32_t>(sp.groups.size()));
    if (fresh) sp.groups.emplace_back();
    sp.groups[it->second].push_back(l);
    var_of[l] = it->second;
  }
  sp.cover.resize(sp.groups.size());
  for (uint32_t i = 0; i < obs.size(); ++i) {
    std::vector<uint32_t> row;
    for (LinkId l : obs[i].links) {
      auto it = var_of.find(l);
      if (it != var_of.end() && std::find(row.begin(), row.end(), it->second) == row.end()) {
        row.push_back(it->second);
      }
    }
    if (row.empty()) continue;
    for (uint32_t v : row) sp.cover[v].push_back(static_cast<uint32_t>(sp.rows.size()));
    sp.rows.push_back(i);
    sp.vars.push_back(std::move(row));
  }
  return sp;
}

double Target(const PathObservation& o) {
  return o.failed ? 0.0 : std::clamp(o.rate_ratio, 0.0, 1.0);
}

// A healthy row that only bounds its path's product from below (PathObservation::at_least).
bool IsBound(const PathObservation& o, const LocalisationOptions& options) {
  return o.at_least >= 0 && std::isfinite(o.at_least) && IsHealthy(o, options);
}

// One one-sided term of a coordinate x, (t - p x)^2 while x < threshold = t / p, as the
// coefficients of p^2 x^2 - 2 t p x + t^2.
struct Bound {
  double threshold;
  double p2;  // p^2
  double tp;  // t p
  double t2;  // t^2
};

// argmin over [0, 1] of a x^2 - 2 b x + the sum of the `bounds` active at x (x < threshold):
// piecewise quadratic and continuous (a term is 0 at its threshold), so
// the best of each piece's minimum. Reorders `bounds`.
double Minimise(double a, double b, std::vector<Bound>& bounds) {
  auto piece = [](double qa, double qb, double lo, double hi) {
    if (qa > 1e-15) return std::clamp(qb / qa, lo, hi);
    return (qa * lo * lo - 2 * qb * lo) <= (qa * hi * hi - 2 * qb * hi) ? lo : hi;
  };
  const double plain = piece(a, b, 0.0, 1.0);
  double highest = 0;
  for (const Bound& t : bounds) highest = std::max(highest, t.threshold);
  // No bound is active at the plain minimum, and bounds only add: it is the minimum.
  if (plain >= highest) return plain;
  std::sort(bounds.begin(), bounds.end(),
            [](const Bound& l, const Bound& r) { return l.threshold > r.threshold; });
  double qa = a;
  double qb = b;
  double qc = 0;
  size_t i = 0;
  for (; i < bounds.size() && bounds[i].threshold >= 1; ++i) {
    qa += bounds[i].p2;
    qb += bounds[i].tp;
    qc += bounds[i].t2;
  }
  double best_x = 1;
  double best_f = std::numeric_limits<double>::infinity();
  double hi = 1;
  while (true) {
    const double lo = i < bounds.size() ? std::max(0.0, bounds[i].threshold) : 0.0;
    const double x = piece(qa, qb, lo, hi);
    const double f = qa * x * x - 2 * qb * x + qc;
    if (f < best_f) {
      best_f = f;
      best_x = x;
    }
    if (lo <= 0) break;
    for (; i < bounds.size() && bounds[i].threshold >= lo; ++i) {
      qa += bounds[i].p2;
      qb += bounds[i].tp;
      qc += bounds[i].t2;
    }
    hi = lo;
  }
  return best_x;
}

// Coordinate descent on the merged variables (see the header).
std::vector<double> Solve(std::span<const PathObservation> obs, const Subproblem& sp,
                          const LocalisationOptions& options) {
  std::vector<double> x(sp.groups.size(), 1.0);
  const double lambda = options.lambda;
  // Sweep order: the variables most unhealthy observations cross first, so that the link
  // explaining most of the evidence takes the blame before the links that share only part of it
  // (parsimony, as the regulariser; with a plain id order a host link whose few flows all cross a
  // degraded uplink could take the blame first and converge slowly). Among those, the one that
  // healthy rows vouch for least first (the sum of their lower bounds, at_least; a row counted
  // both ways vouches 1): two links that the same slow flows cross, one under a small healthy
  // flow and one under a big one, are otherwise a tie that the link id would decide.
  std::vector<uint32_t> order(x.size());
  std::vector<uint32_t> unhealthy(x.size(), 0);
  std::vector<double> vouched(x.size(), 0.0);
  for (uint32_t v = 0; v < x.size(); ++v) {
    order[v] = v;
    for (uint32_t r : sp.cover[v]) {
      const PathObservation& o = obs[sp.rows[r]];
      if (!IsHealthy(o, options)) {
        ++unhealthy[v];
      } else {
        vouched[v] += IsBound(o, options) ? std::min(o.at_least, 1.0) : 1.0;
      }
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (unhealthy[a] != unhealthy[b]) return unhealthy[a] > unhealthy[b];
    return vouched[a] < vouched[b];
  });
  std::vector<Bound> bounds;
  for (int sweep = 0; sweep < options.iterations; ++sweep) {
    double moved = 0;
    for (uint32_t v : order) {
      double a = -lambda;
      double b = -lambda / 2;
      bounds.clear();
      for (uint32_t r : sp.cover[v]) {
        double p = 1;
        for (uint32_t w : sp.vars[r]) {
          if (w != v) p *= x[w];
        }
        const PathObservation& o = obs[sp.rows[r]];
        if (IsBound(o, options)) {
          // Active below x = at_least / p; with p = 0 the term does not depend on x.
          const double t = std::min(o.at_least, 1.0);
          if (p > 0 && t > 0) bounds.push_back({t / p, p * p, t * p, t * t});
          continue;
        }
        a += p * p;
        b += Target(o) * p;
      }
      const double next = Minimise(a, b, bounds);
      moved = std::max(moved, std::fabs(next - x[v]));
      x[v] = next;
    }
    if (moved < 1e-9) break;
  }
  return x;
}

}  // namespace

std::map<LinkId, double> EstimateLinkRates(std::span<const PathObservation> obs,
                                           const LocalisationOptions& options) {
  const Subproblem sp = BuildSubproblem(obs, options);
  const std::vector<double> x = Solve(obs, sp, options);
  std::map<LinkId, double> out;
  for (uint32_t v = 0; v < sp.groups.size(); ++v) {
    for (LinkId l : sp.groups[v]) out[l] = x[v];
  }
  return out;
}

std::vector<Suspect> GrayFaults(std::span<const PathObservation> obs,
                                const LocalisationOptions& options) {
  const Subproblem sp = BuildSubproblem(obs, options);
  const std::vector<double> x = Solve(obs, sp, options);
  std::vector<Suspect> out;
  const size_t min_flows = static_cast<size_t>(std::max(1, options.min_flows));
  for (uint32_t v = 0; v < sp.groups.size(); ++v) {
    if (x[v] >= options.gray_ratio) continue;
    std::vector<uint32_t> bad;
    uint32_t healthy = 0;
    for (uint32_t r : sp.cover[v]) {
      const uint32_t i = sp.rows[r];
      if (IsHealthy(obs[i], options)) {
        ++healthy;
      } else {
        bad.push_back(i);
      }
    }
    if (bad.size() < min_flows) continue;
    for (LinkId l : sp.groups[v]) {
      Suspect s;
      s.link = l;
      s.kind = SuspectKind::kGray;
      s.estimate = x[v];
      s.score = 1 - x[v];
      s.evidence = bad;
      s.healthy = healthy;
      s.ambiguous = sp.groups[v].size() > 1;
      out.push_back(std::move(s));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Suspect& a, const Suspect& b) {
    if (a.estimate != b.estimate) return a.estimate < b.estimate;
    return a.link < b.link;
  });
  return out;
}

}  // namespace crux::core
