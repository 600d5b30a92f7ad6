#include "crux/sim/workload/placement.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace crux::sim::workload {

using core::NodeId;
using core::Result;
using core::Status;

namespace {

// Network switches directly attached to endpoint-side nodes of `host`.
std::set<uint32_t> TorsOf(const core::Topology& topo, NodeId host) {
  std::set<uint32_t> tors;
  std::vector<NodeId> ends = topo.NicsOf(host);
  ends.push_back(host);
  for (NodeId e : ends) {
    for (core::LinkId l : topo.OutLinks(e)) {
      const NodeId dst = topo.link(l).dst;
      if (core::IsNetworkSwitch(topo.node(dst).kind)) tors.insert(dst.value());
    }
  }
  return tors;
}

}  // namespace

Result<Placer> Placer::Create(const core::Topology& topo, int gpus_per_host) {
  if (gpus_per_host < 1) {
    return core::InvalidArgumentError("gpus_per_host: must be >= 1 (got " +
                                      std::to_string(gpus_per_host) + ")");
  }
  if (topo.hosts().empty()) return core::InvalidArgumentError("topology: has no hosts");
  Placer p;
  p.gpus_per_host_ = gpus_per_host;
  p.hosts_ = topo.hosts();
  p.index_of_node_.assign(topo.num_nodes(), -1);
  p.free_.assign(p.hosts_.size(), gpus_per_host);
  p.free_total_ = gpus_per_host * static_cast<int>(p.hosts_.size());

  // Switches that serve hosts directly are "ToR-level".
  std::vector<std::set<uint32_t>> tor_sets(p.hosts_.size());
  std::set<uint32_t> tor_level;
  for (size_t i = 0; i < p.hosts_.size(); ++i) {
    p.index_of_node_[p.hosts_[i].value()] = static_cast<int>(i);
    tor_sets[i] = TorsOf(topo, p.hosts_[i]);
    tor_level.insert(tor_sets[i].begin(), tor_sets[i].end());
  }
  std::map<std::set<uint32_t>, int> tor_group_ids;
  std::map<std::set<uint32_t>, int> agg_group_ids;
  p.tor_of_.resize(p.hosts_.size());
  for (size_t i = 0; i < p.hosts_.size(); ++i) {
    auto [it, inserted] = tor_group_ids.emplace(tor_sets[i], static_cast<int>(p.tor_hosts_.size()));
    if (inserted) {
      p.tor_hosts_.emplace_back();
      std::set<uint32_t> aggs;
      for (uint32_t t : tor_sets[i]) {
        for (core::LinkId l : topo.OutLinks(NodeId(t))) {
          const NodeId dst = topo.link(l).dst;
          if (core::IsNetworkSwitch(topo.node(dst).kind) && tor_level.count(dst.value()) == 0) {
            aggs.insert(dst.value());
          }
        }
      }
      auto [ait, ainserted] = agg_group_ids.emplace(aggs, static_cast<int>(agg_group_ids.size()));
      p.agg_of_tor_.push_back(ait->second);
      (void)ainserted;
    }
    p.tor_of_[i] = it->second;
    p.tor_hosts_[static_cast<size_t>(it->second)].push_back(static_cast<int>(i));
  }
  p.num_agg_groups_ = static_cast<int>(agg_group_ids.size());
  return p;
}

int Placer::free_gpus(NodeId host) const {
  if (!host.valid() || host.value() >= index_of_node_.size()) return 0;
  const int i = index_of_node_[host.value()];
  return i < 0 ? 0 : free_[static_cast<size_t>(i)];
}

int Placer::tor_group(NodeId host) const {
  const int i = index_of_node_.at(host.value());
  return i < 0 ? -1 : tor_of_[static_cast<size_t>(i)];
}

int Placer::agg_group(NodeId host) const {
  const int t = tor_group(host);
  return t < 0 ? -1 : agg_of_tor_[static_cast<size_t>(t)];
}

std::vector<NodeId> Placer::TakeWholeHosts(const std::vector<int>& host_indices, int n) const {
  std::vector<NodeId> out;
  for (int h : host_indices) {
    if (static_cast<int>(out.size()) == n) break;
    if (free_[static_cast<size_t>(h)] == gpus_per_host_)
      out.push_back(hosts_[static_cast<size_t>(h)]);
  }
  return out;
}

Result<Placement> Placer::PlaceScattered(int gpus, core::Rng& rng) {
  const int g = gpus_per_host_;
  if (gpus <= g || gpus % g != 0) return Place(gpus);  // One host, or Place's own error.
  const int n = gpus / g;
  std::vector<int> whole;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (free_[i] == g) whole.push_back(static_cast<int>(i));
  }
  if (static_cast<int>(whole.size()) < n) {
    return core::FailedPreconditionError("not enough whole free hosts for " + std::to_string(gpus) +
                                         " GPUs (need " + std::to_string(n) + ", " +
                                         std::to_string(whole.size()) + " free)");
  }
  // Partial Fisher-Yates: the first n entries become a uniform random n-subset.
  for (int i = 0; i < n; ++i) {
    const size_t j = static_cast<size_t>(i) + rng.Uniform(whole.size() - static_cast<size_t>(i));
    std::swap(whole[static_cast<size_t>(i)], whole[j]);
  }
  whole.resize(static_cast<size_t>(n));
  std::sort(whole.begin(), whole.end());
  return ReserveWholeHosts(whole);
}

Result<Placement> Placer::PlaceShared(int gpus) {
  const int g = gpus_per_host_;
  if (gpus <= g || gpus % g != 0 || g % 2 != 0) return Place(gpus);  // As Place (or its error).
  const int half = g / 2;
  const size_t n = static_cast<size_t>(gpus / half);
  std::vector<int> chosen;
  for (size_t i = 0; i < hosts_.size() && chosen.size() < n; ++i) {
    if (free_[i] == half) chosen.push_back(static_cast<int>(i));
  }
  for (size_t i = 0; i < hosts_.size() && chosen.size() < n; ++i) {
    if (free_[i] == g) chosen.push_back(static_cast<int>(i));
  }
  if (chosen.size() < n) {
    return core::FailedPreconditionError("not enough half-free hosts for " + std::to_string(gpus) +
                                         " GPUs on shared hosts (need " + std::to_string(n) +
                                         " hosts with " + std::to_string(half) + " free GPUs, " +
                                         std::to_string(chosen.size()) + " have them)");
  }
  return ReserveHosts(chosen, half);
}

Result<Placement> Placer::ReserveHosts(const std::vector<int>& host_indices, int per_host) {
  Placement out;
  out.gpus_per_host = per_host;
  bool one_tor = true;
  bool one_agg = true;
  const int first = host_indices.front();
  for (int h : host_indices) {
    out.hosts.push_back(hosts_[static_cast<size_t>(h)]);
    one_tor = one_tor && tor_of_[static_cast<size_t>(h)] == tor_of_[static_cast<size_t>(first)];
    one_agg = one_agg && agg_of_tor_[static_cast<size_t>(tor_of_[static_cast<size_t>(h)])] ==
                             agg_of_tor_[static_cast<size_t>(tor_of_[static_cast<size_t>(first)])];
  }
  out.level = one_tor   ? PlacementLevel::kSameTor
              : one_agg ? PlacementLevel::kSameAgg
                        : PlacementLevel::kAnywhere;
  CRUX_RETURN_IF_ERROR(Reserve(out));
  return out;
}

Result<Placement> Placer::PlaceSpilled(int gpus) {
  const int g = gpus_per_host_;
  if (gpus <= g || gpus % g != 0) return Place(gpus);  // One host, or Place's own error.
  const int n = gpus / g;
  std::vector<int> tor_free(tor_hosts_.size(), 0);
  std::vector<int> agg_free(static_cast<size_t>(num_agg_groups_), 0);
  int total = 0;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (free_[i] != g) continue;
    ++tor_free[static_cast<size_t>(tor_of_[i])];
    ++agg_free[static_cast<size_t>(agg_of_tor_[static_cast<size_t>(tor_of_[i])])];
    ++total;
  }
  if (total < n) {
    return core::FailedPreconditionError("not enough whole free hosts for " + std::to_string(gpus) +
                                         " GPUs (need " + std::to_string(n) + ", " +
                                         std::to_string(total) + " free)");
  }
  // Fullest Agg group first, inside it the fullest ToR group first (fewest whole free hosts,
  // ties in group order); hosts in host order.
  std::vector<int> tors;
  for (size_t t = 0; t < tor_free.size(); ++t) {
    if (tor_free[t] > 0) tors.push_back(static_cast<int>(t));
  }
  std::stable_sort(tors.begin(), tors.end(), [&](int a, int b) {
    const int ga = agg_of_tor_[static_cast<size_t>(a)];
    const int gb = agg_of_tor_[static_cast<size_t>(b)];
    const int fa = agg_free[static_cast<size_t>(ga)];
    const int fb = agg_free[static_cast<size_t>(gb)];
    if (fa != fb) return fa < fb;
    if (ga != gb) return ga < gb;
    return tor_free[static_cast<size_t>(a)] < tor_free[static_cast<size_t>(b)];
  });
  std::vector<int> order;
  for (int t : tors) {
    const std::vector<int>& hs = tor_hosts_[static_cast<size_t>(t)];
    order.insert(order.end(), hs.begin(), hs.end());
  }
  std::vector<NodeId> chosen = TakeWholeHosts(order, n);
  std::vector<int> indices;
  for (NodeId h : chosen) indices.push_back(index_of_node_[h.value()]);
  return ReserveWholeHosts(indices);
}

Result<Placement> Placer::Place(int gpus) {
  const int g = gpus_per_host_;
  if (gpus < 1) {
    return core::InvalidArgumentError("gpus: must be >= 1 (got " + std::to_string(gpus) + ")");
  }
  Placement out;
  if (gpus <= g) {
    int best = -1;
    for (size_t i = 0; i < hosts_.size(); ++i) {
      if (free_[i] >= gpus && (best < 0 || free_[i] < free_[static_cast<size_t>(best)])) {
        best = static_cast<int>(i);
      }
    }
    if (best < 0) {
      return core::FailedPreconditionError("no host has " + std::to_string(gpus) + " free GPUs (" +
                                           std::to_string(free_total_) + " free in all)");
    }
    out.hosts = {hosts_[static_cast<size_t>(best)]};
    out.gpus_per_host = gpus;
    out.level = PlacementLevel::kSameHost;
  } else {
    if (gpus % g != 0) {
      return core::InvalidArgumentError("gpus: a job larger than one host (" + std::to_string(g) +
                                        " GPUs) must use a multiple of " + std::to_string(g) +
                                        " GPUs (got " + std::to_string(gpus) + ")");
    }
    const int n = gpus / g;
    // Whole free hosts per ToR group and per Agg group.
    std::vector<int> tor_free(tor_hosts_.size(), 0);
    std::vector<int> agg_free(static_cast<size_t>(num_agg_groups_), 0);
    for (size_t i = 0; i < hosts_.size(); ++i) {
      if (free_[i] == g) {
        ++tor_free[static_cast<size_t>(tor_of_[i])];
        ++agg_free[static_cast<size_t>(agg_of_tor_[static_cast<size_t>(tor_of_[i])])];
      }
    }
    int total_free_hosts = 0;
    for (int f : tor_free) total_free_hosts += f;
    if (total_free_hosts < n) {
      return core::FailedPreconditionError(
          "not enough whole free hosts for " + std::to_string(gpus) + " GPUs (need " +
          std::to_string(n) + ", " + std::to_string(total_free_hosts) + " free)");
    }
    // 2. Same ToR group, best fit.
    int best_tor = -1;
    for (size_t t = 0; t < tor_free.size(); ++t) {
      if (tor_free[t] >= n &&
          (best_tor < 0 || tor_free[t] < tor_free[static_cast<size_t>(best_tor)])) {
        best_tor = static_cast<int>(t);
      }
    }
    // Orders ToR groups (of one Agg group, or all) by free hosts, most first.
    auto fill = [&](int agg) {
      std::vector<int> tors;
      for (size_t t = 0; t < tor_free.size(); ++t) {
        if (agg < 0 || agg_of_tor_[t] == agg) tors.push_back(static_cast<int>(t));
      }
      std::stable_sort(tors.begin(), tors.end(), [&](int a, int b) {
        const int fa = agg_free[static_cast<size_t>(agg_of_tor_[static_cast<size_t>(a)])];
        const int fb = agg_free[static_cast<size_t>(agg_of_tor_[static_cast<size_t>(b)])];
        if (agg < 0 && fa != fb) return fa > fb;
        return tor_free[static_cast<size_t>(a)] > tor_free[static_cast<size_t>(b)];
      });
      std::vector<int> order;
      for (int t : tors) {
        const std::vector<int>& hs = tor_hosts_[static_cast<size_t>(t)];
        order.insert(order.end(), hs.begin(), hs.end());
      }
      return TakeWholeHosts(order, n);
    };
    if (best_tor >= 0) {
      out.hosts = TakeWholeHosts(tor_hosts_[static_cast<size_t>(best_tor)], n);
      out.level = PlacementLevel::kSameTor;
    } else {
      int best_agg = -1;
      for (size_t a = 0; a < agg_free.size(); ++a) {
        if (agg_free[a] >= n &&
            (best_agg < 0 || agg_free[a] < agg_free[static_cast<size_t>(best_agg)])) {
          best_agg = static_cast<int>(a);
        }
      }
      if (best_agg >= 0 && num_agg_groups_ > 1) {
        out.hosts = fill(best_agg);
        out.level = PlacementLevel::kSameAgg;
      } else {
        out.hosts = fill(-1);
        out.level = num_agg_groups_ > 1 ? PlacementLevel::kAnywhere : PlacementLevel::kSameAgg;
      }
    }
    out.gpus_per_host = g;
  }
  CRUX_RETURN_IF_ERROR(Reserve(out));
  return out;
}

Status Placer::Reserve(const Placement& p) {
  for (NodeId h : p.hosts) {
    if (!h.valid() || h.value() >= index_of_node_.size() || index_of_node_[h.value()] < 0) {
      return core::InvalidArgumentError("placement: node is not a host");
    }
    if (free_gpus(h) < p.gpus_per_host) {
      return core::FailedPreconditionError("placement: host has " + std::to_string(free_gpus(h)) +
                                           " free GPUs, job needs " +
                                           std::to_string(p.gpus_per_host));
    }
  }
  for (NodeId h : p.hosts) {
    free_[static_cast<size_t>(index_of_node_[h.value()])] -= p.gpus_per_host;
    free_total_ -= p.gpus_per_host;
  }
  return Status::Ok();
}

void Placer::Release(const Placement& p) {
  for (NodeId h : p.hosts) {
    const int i = index_of_node_[h.value()];
    free_[static_cast<size_t>(i)] += p.gpus_per_host;
    free_total_ += p.gpus_per_host;
  }
}

}  // namespace crux::sim::workload
