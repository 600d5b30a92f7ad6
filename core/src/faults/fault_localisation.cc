#include "crux/core/faults/fault_localisation.h"

#include <algorithm>
#include <cmath>
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
  std::map<LinkId, uint32_t> var_of;         // Link -> its variable.
  // The least-squares terms: per row, its variables less those it excuses (PathObservation::
  // excused; none for a row with floors only), and per variable the rows that blame it.
  std::vector<std::vector<uint32_t>> lsq_vars;
  std::vector<std::vector<uint32_t>> lsq_cover;
};

// A healthy row with floors bounds its links and takes no least-squares term.
bool FloorsOnly(const PathObservation& o, const LocalisationOptions& options) {
  return !o.floors.empty() && o.floors.size() == o.links.size() && IsHealthy(o, options);
}

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
  // Column of each variable link: the observations crossing it that say something about it (a
  // healthy row with a floor of 0 on a link proves nothing there: it neither bounds the link nor
  // tells it apart from the links the slow rows share with it).
  std::map<LinkId, std::vector<uint32_t>> column;
  for (uint32_t i = 0; i < obs.size(); ++i) {
    const bool floors_only = FloorsOnly(obs[i], options);
    for (size_t k = 0; k < obs[i].links.size(); ++k) {
      const LinkId l = obs[i].links[k];
      if (vars.count(l) && (!floors_only || obs[i].floors[k] > 0)) column[l].push_back(i);
    }
  }
  std::map<std::vector<uint32_t>, uint32_t> group_of;  // Column -> variable.
  std::map<LinkId, uint32_t>& var_of = sp.var_of;
  for (const auto& [l, col] : column) {
    auto [it, fresh] = group_of.emplace(col, static_cast<uint32_t>(sp.groups.size()));
    if (fresh) sp.groups.emplace_back();
    sp.groups[it->second].push_back(l);
    var_of[l] = it->second;
  }
  sp.cover.resize(sp.groups.size());
  sp.lsq_cover.resize(sp.groups.size());
  for (uint32_t i = 0; i < obs.size(); ++i) {
    const PathObservation& o = obs[i];
    std::vector<uint32_t> row;
    std::vector<uint32_t> lsq;
    const bool floors_only = FloorsOnly(o, options);
    const bool excuses = !IsHealthy(o, options) && o.excused.size() == o.links.size();
    for (size_t k = 0; k < o.links.size(); ++k) {
      auto it = var_of.find(o.links[k]);
      if (it == var_of.end() || std::find(row.begin(), row.end(), it->second) != row.end() ||
          (floors_only && !(o.floors[k] > 0))) {
        continue;
      }
      row.push_back(it->second);
      if (!floors_only && !(excuses && o.excused[k])) lsq.push_back(it->second);
    }
    if (row.empty()) continue;
    const auto r = static_cast<uint32_t>(sp.rows.size());
    for (uint32_t v : row) sp.cover[v].push_back(r);
    for (uint32_t v : lsq) sp.lsq_cover[v].push_back(r);
    sp.rows.push_back(i);
    sp.vars.push_back(std::move(row));
    sp.lsq_vars.push_back(std::move(lsq));
  }
  return sp;
}

double Target(const PathObservation& o) {
  return o.failed ? 0.0 : std::clamp(o.rate_ratio, 0.0, 1.0);
}

// Coordinate descent on the merged variables (see the header).
std::vector<double> Solve(std::span<const PathObservation> obs, const Subproblem& sp,
                          const LocalisationOptions& options) {
  std::vector<double> x(sp.groups.size(), 1.0);
  const double lambda = options.lambda;
  // Per variable: the floor its healthy rows prove.
  std::vector<double> floor(x.size(), 0.0);
  for (uint32_t r = 0; r < sp.rows.size(); ++r) {
    const PathObservation& o = obs[sp.rows[r]];
    if (!FloorsOnly(o, options)) continue;
    for (size_t k = 0; k < o.links.size(); ++k) {
      auto it = sp.var_of.find(o.links[k]);
      if (it == sp.var_of.end() || !std::isfinite(o.floors[k])) continue;
      floor[it->second] = std::max(floor[it->second], std::clamp(o.floors[k], 0.0, 1.0));
    }
  }
  // Sweep order: the variables most unhealthy observations blame first, then the least vouched
  // for (lowest floor), then by link id, so that the link explaining most of the evidence takes
  // the blame before the links that share only part of it (parsimony, as the regulariser; with a
  // plain id order a host link whose few flows all cross a degraded uplink could take the blame
  // first and converge slowly). A variable no least-squares row blames stays whole.
  std::vector<uint32_t> order;
  std::vector<uint32_t> unhealthy(x.size(), 0);
  for (uint32_t v = 0; v < x.size(); ++v) {
    if (!sp.lsq_cover[v].empty()) order.push_back(v);
    for (uint32_t r : sp.lsq_cover[v]) {
      unhealthy[v] += IsHealthy(obs[sp.rows[r]], options) ? 0 : 1;
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (unhealthy[a] != unhealthy[b]) return unhealthy[a] > unhealthy[b];
    return floor[a] < floor[b];
  });
  for (int sweep = 0; sweep < options.iterations; ++sweep) {
    double moved = 0;
    for (uint32_t v : order) {
      double a = -lambda;
      double b = -lambda / 2;
      for (uint32_t r : sp.lsq_cover[v]) {
        const PathObservation& o = obs[sp.rows[r]];
        double p = 1;
        for (uint32_t w : sp.lsq_vars[r]) {
          if (w != v) p *= x[w];
        }
        const double w = std::isfinite(o.weight) ? std::clamp(o.weight, 1e-6, 1.0) : 1.0;
        a += w * p * p;
        b += w * Target(o) * p;
      }
      double next;
      if (a > 1e-15) {
        next = std::clamp(b / a, 0.0, 1.0);
      } else {
        // Concave: the better end point; with no evidence either way (a tie) the link stays whole.
        next = (a - 2 * b <= 0) ? 1.0 : 0.0;
      }
      next = std::max(next, floor[v]);
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
