#include "crux/core/faults/planned_share.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <vector>

namespace crux::core {

namespace {

// Progressive filling of one level over `residual` (bits/s left per link by the levels above):
// the link whose fair share (residual / unfrozen flows) is smallest fixes the rate of its flows,
// which then leave every link they cross.
class LevelFilling {
 public:
  // `frozen` and `rate` are per flow of `flows`.
  LevelFilling(std::span<const ShareFlow> flows, std::vector<double>& residual,
               std::vector<double>& rate, std::vector<bool>& frozen)
      : flows_(flows), residual_(residual), rate_(rate), frozen_(frozen) {}

  void Run(const std::vector<size_t>& members) {
    BuildIndex(members);
    for (size_t k = 0; k < links_.size(); ++k) Push(k);
    // Bounded demands, smallest first: a flow whose demand is below every fair share on its
    // links freezes at its demand and leaves the rest to the others.
    std::vector<std::pair<double, size_t>> demands;
    for (size_t f : members) {
      if (std::isfinite(flows_[f].demand)) demands.emplace_back(std::max(0.0, flows_[f].demand), f);
    }
    std::sort(demands.begin(), demands.end());
    size_t next = 0;
    while (true) {
      while (!heap_.empty() && (std::get<2>(heap_.top()) != version_[std::get<1>(heap_.top())] ||
                                count_[std::get<1>(heap_.top())] == 0)) {
        heap_.pop();
      }
      while (next < demands.size() && frozen_[demands[next].second]) ++next;
      if (heap_.empty()) break;  // Every member is frozen (each crosses a link of the heap).
      const double fair = std::get<0>(heap_.top());
      const size_t k = std::get<1>(heap_.top());
      if (next < demands.size() && demands[next].first <= fair) {
        Freeze(demands[next].second, demands[next].first);
        ++next;
        continue;
      }
      heap_.pop();
      const double r = std::max(0.0, fair);
      for (size_t e = start_[k]; e < start_[k + 1]; ++e) {
        const size_t f = on_link_[e];
        if (frozen_[f]) continue;
        Freeze(f, r);
      }
    }
  }

 private:
  using Entry = std::tuple<double, size_t, uint32_t>;  // Fair share, local link, version.

  // Local link index per touched link, and the flows on each (CSR).
  void BuildIndex(const std::vector<size_t>& members) {
    std::vector<std::pair<uint32_t, size_t>> pairs;  // (link id, flow)
    for (size_t f : members) {
      for (LinkId l : flows_[f].path) pairs.emplace_back(l.value(), f);
    }
    std::sort(pairs.begin(), pairs.end());
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (i == 0 || pairs[i].first != pairs[i - 1].first) {
        links_.push_back(pairs[i].first);
        start_.push_back(i);
      }
      on_link_.push_back(pairs[i].second);
    }
    start_.push_back(pairs.size());
    count_.resize(links_.size());
    version_.assign(links_.size(), 0);
    for (size_t k = 0; k < links_.size(); ++k) count_[k] = start_[k + 1] - start_[k];
  }

  size_t LocalLink(uint32_t link) const {
    return static_cast<size_t>(std::lower_bound(links_.begin(), links_.end(), link) -
                               links_.begin());
  }

  void Push(size_t k) {
    if (count_[k] == 0) return;
    heap_.emplace(residual_[links_[k]] / static_cast<double>(count_[k]), k, ++version_[k]);
  }

  void Freeze(size_t f, double r) {
    frozen_[f] = true;
    rate_[f] = r;
    for (LinkId l : flows_[f].path) {
      const size_t k = LocalLink(l.value());
      residual_[l.value()] = std::max(0.0, residual_[l.value()] - r);
      --count_[k];
      Push(k);
    }
  }

  std::span<const ShareFlow> flows_;
  std::vector<double>& residual_;
  std::vector<double>& rate_;
  std::vector<uint32_t> links_;  // Sorted link ids this level touches.
  std::vector<size_t> start_;    // CSR offsets into on_link_.
  std::vector<size_t> on_link_;
  std::vector<size_t> count_;  // Unfrozen flows per local link.
  std::vector<uint32_t> version_;
  std::vector<bool>& frozen_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

// The newcomers' rates (see ShareFlow::newcomer) under the others' `rate`.
void NewcomerRates(std::span<const ShareFlow> flows, const std::vector<size_t>& others,
                   const std::vector<size_t>& newcomers, const Topology& topo,
                   std::vector<double>& rate) {
  // Per link a newcomer crosses: the (level, rate) of every other flow on it.
  std::vector<int> slot(topo.num_links(), -1);
  std::vector<std::vector<std::pair<int, double>>> on;
  for (size_t f : newcomers) {
    for (LinkId l : flows[f].path) {
      if (slot[l.value()] < 0) {
        slot[l.value()] = static_cast<int>(on.size());
        on.emplace_back();
      }
    }
  }
  for (size_t f : others) {
    for (LinkId l : flows[f].path) {
      if (slot[l.value()] >= 0) on[slot[l.value()]].emplace_back(flows[f].level, rate[f]);
    }
  }
  std::vector<double> same;
  for (size_t f : newcomers) {
    double r = std::numeric_limits<double>::infinity();
    for (LinkId l : flows[f].path) {
      double cap = topo.link(l).capacity.ToBitsPerSec();
      same.clear();
      for (const auto& [level, x] : on[slot[l.value()]]) {
        if (level < flows[f].level) cap -= x;
        if (level == flows[f].level) same.push_back(x);
      }
      std::sort(same.begin(), same.end());
      // The k slowest keep their rates; the rest and the newcomer share what is left.
      double kept = 0;
      double x = 0;
      for (size_t k = 0; k <= same.size(); ++k) {
        x = (cap - kept) / static_cast<double>(same.size() - k + 1);
        if (k == same.size() || x <= same[k]) break;
        kept += same[k];
      }
      r = std::min(r, std::max(0.0, x));
    }
    rate[f] = std::isfinite(r) ? r : 0.0;
  }
}

}  // namespace

std::vector<double> PlannedShares(std::span<const ShareFlow> flows, const Topology& topo) {
  std::vector<double> rate(flows.size(), 0.0);
  std::vector<size_t> order;
  std::vector<size_t> newcomers;
  for (size_t f = 0; f < flows.size(); ++f) {
    if (flows[f].path.empty()) continue;
    (flows[f].newcomer ? newcomers : order).push_back(f);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return flows[a].level < flows[b].level; });
  std::vector<bool> frozen(flows.size(), false);
  std::vector<double> residual(topo.num_links());
  for (size_t l = 0; l < residual.size(); ++l) {
    residual[l] = topo.link(LinkId(static_cast<uint32_t>(l))).capacity.ToBitsPerSec();
  }
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    std::vector<size_t> members;
    while (j < order.size() && flows[order[j]].level == flows[order[i]].level) {
      members.push_back(order[j++]);
    }
    LevelFilling(flows, residual, rate, frozen).Run(members);
    i = j;
  }
  if (!newcomers.empty()) NewcomerRates(flows, order, newcomers, topo, rate);
  return rate;
}

}  // namespace crux::core
