#include "crux/core/model/host_parts.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "crux/core/model/traffic_model.h"

namespace crux::core {
namespace {

// Sums never wrap: each entry is bounded (2^50 on the wire, 2^62 after conversion), but a job may
// have millions of them.
Bytes SaturatingAdd(Bytes a, Bytes b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (b.count() > 0 && a.count() > kMax - b.count()) return Bytes::Of(kMax);
  return a + b;
}

// The upper median (v[n / 2] of the sorted values). REQUIRES: !v.empty().
template <typename T>
T UpperMedian(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// (communicator, rank).
struct RankKey {
  uint64_t comm = 0;
  uint32_t rank = 0;
  friend bool operator==(const RankKey&, const RankKey&) = default;
};
struct RankKeyHash {
  size_t operator()(const RankKey& k) const {
    return std::hash<uint64_t>()(k.comm * 0x9E3779B97F4A7C15ull ^ k.rank);
  }
};

constexpr size_t kConflict = std::numeric_limits<size_t>::max();
struct Owner {
  size_t part = 0;  // Index into the sorted parts; kConflict: claimed by two parts.
  NodeId nic;
};

}  // namespace

std::vector<NodeId> PartNics(const Topology& topo, const PlacementHost& p) {
  if (!p.nics.empty()) return p.nics;
  const std::vector<NodeId>& all = topo.NicsOf(p.host);
  if (!all.empty()) return all;
  return {p.host};
}

Status CheckLocalSlots(const HostPartReport& r, uint32_t host_gpus) {
  for (size_t i = 0; i < r.comms.size(); ++i) {
    const CommTraffic& c = r.comms[i];
    const std::string field = "comms[" + std::to_string(i) + "].local_slots";
    if (!c.local_slots.empty() && c.local_slots.size() != c.local_ranks.size()) {
      return InvalidArgumentError(field + ": " + std::to_string(c.local_slots.size()) +
                                  " slots for " + std::to_string(c.local_ranks.size()) +
                                  " local_ranks (must be as many, or none)");
    }
    for (size_t k = 0; k < c.local_slots.size(); ++k) {
      if (host_gpus > 0 && c.local_slots[k] >= host_gpus) {
        return InvalidArgumentError(
            field + "[" + std::to_string(k) + "]: " + std::to_string(c.local_slots[k]) +
            " is not a GPU of the host (" + std::to_string(host_gpus) + " GPUs)");
      }
    }
  }
  return Status::Ok();
}

HostPartMerge MergeHostParts(const std::vector<HostPartInput>& unordered) {
  HostPartMerge out;
  HostPartMergeStats& st = out.stats;
  std::vector<const HostPartInput*> parts;
  parts.reserve(unordered.size());
  for (const HostPartInput& p : unordered) parts.push_back(&p);
  std::sort(parts.begin(), parts.end(),
            [](const HostPartInput* a, const HostPartInput* b) { return a->host < b->host; });
  st.parts = static_cast<uint32_t>(parts.size());
  for (const HostPartInput* p : parts) {
    st.hosts_expected = std::max(st.hosts_expected, p->hosts_expected);
    if (p->report != nullptr) ++st.parts_reporting;
  }
  st.complete = st.parts > 0 && st.parts_reporting == st.parts && st.parts >= st.hosts_expected;
  if (st.parts_reporting == 0) return out;

  // Rank -> (part index, NIC). A rank claimed twice belongs to nobody (kConflict).
  size_t ranks = 0;
  for (const HostPartInput* p : parts) {
    if (p->report == nullptr) continue;
    for (const CommTraffic& c : p->report->comms) {
      ranks += c.local_ranks.size();
      st.entries += c.local_ranks.size() + c.bytes.size();
    }
  }
  std::unordered_map<RankKey, Owner, RankKeyHash> owner;
  owner.reserve(ranks);
  std::vector<uint32_t> local;  // Reused: one communicator's sorted local ranks.
  for (size_t i = 0; i < parts.size(); ++i) {
    const HostPartInput& p = *parts[i];
    if (p.report == nullptr || p.nics.empty()) continue;
    auto claim = [&](uint64_t comm, uint32_t rank, NodeId nic) {
      auto [it, added] = owner.try_emplace(RankKey{comm, rank}, Owner{i, nic});
      if (!added && it->second.part != i && it->second.part != kConflict) {
        it->second.part = kConflict;
        ++st.conflicting_ranks;
      }
    };
    for (const CommTraffic& c : p.report->comms) {
      // Slots (checked by CheckLocalSlots; a report that fails it falls back): the rail rule.
      const bool slotted = p.gpus > 0 && !c.local_slots.empty() &&
                           c.local_slots.size() == c.local_ranks.size() &&
                           std::all_of(c.local_slots.begin(), c.local_slots.end(),
                                       [&p](uint32_t s) { return s < p.gpus; });
      if (slotted) {
        for (size_t k = 0; k < c.local_ranks.size(); ++k) {
          claim(c.comm_hash, c.local_ranks[k],
                p.nics[GpuNicIndex(c.local_slots[k], p.gpus, p.nics.size())]);
        }
        continue;
      }
      local.assign(c.local_ranks.begin(), c.local_ranks.end());
      std::sort(local.begin(), local.end());
      local.erase(std::unique(local.begin(), local.end()), local.end());
      for (size_t k = 0; k < local.size(); ++k) {
        claim(c.comm_hash, local[k], p.nics[k * p.nics.size() / local.size()]);
      }
    }
  }
  auto owner_of = [&owner](uint64_t comm, uint32_t rank) -> const Owner* {
    auto it = owner.find(RankKey{comm, rank});
    return it == owner.end() || it->second.part == kConflict ? nullptr : &it->second;
  };

  // NIC pair -> bytes, keyed (local << 32 | remote).
  std::unordered_map<uint64_t, Bytes> pairs;
  auto add_pair = [&](NodeId from, NodeId to, Bytes b) {
    Bytes& slot = pairs[(uint64_t{from.value()} << 32) | to.value()];
    slot = SaturatingAdd(slot, b);
    st.cross_host = SaturatingAdd(st.cross_host, b);
  };
  std::vector<Duration> compute, period;
  std::vector<double> overlap;
  uint32_t samples = std::numeric_limits<uint32_t>::max();
  bool converged = true;
  bool all_flops = true;
  double flops = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const HostPartInput& p = *parts[i];
    if (p.report == nullptr) continue;
    const JobProfile& prof = p.report->profile;
    compute.push_back(prof.compute_time);
    period.push_back(prof.iteration_period);
    if (std::isfinite(prof.overlap_start)) overlap.push_back(prof.overlap_start);  // NaN: no order.
    samples = std::min(samples, prof.samples);
    converged = converged && prof.converged;
    if (prof.flops_per_iteration && std::isfinite(prof.flops_per_iteration->value()) &&
        prof.flops_per_iteration->value() >= 0) {
      flops += prof.flops_per_iteration->value();
    } else {
      all_flops = false;
    }
    for (const PeerTraffic& pt : prof.peers) {
      if (pt.bytes.count() > 0) add_pair(pt.local_nic, pt.remote_nic, pt.bytes);
    }
    for (const CommTraffic& c : p.report->comms) {
      for (const RankPeerBytes& b : c.bytes) {
        if (b.bytes.count() <= 0) continue;
        const Owner* src = owner_of(c.comm_hash, b.rank);
        if (src == nullptr || src->part != i) {
          st.unattributed = SaturatingAdd(st.unattributed, b.bytes);
          continue;
        }
        if (b.peer_rank < 0) {
          st.unsplit = SaturatingAdd(st.unsplit, b.bytes);
          continue;
        }
        const Owner* dst = owner_of(c.comm_hash, static_cast<uint32_t>(b.peer_rank));
        if (dst == nullptr) {
          st.unattributed = SaturatingAdd(st.unattributed, b.bytes);
        } else if (dst->part == i) {
          st.same_host = SaturatingAdd(st.same_host, b.bytes);
        } else {
          add_pair(src->nic, dst->nic, b.bytes);
        }
      }
    }
  }

  JobProfile merged;
  merged.compute_time = UpperMedian(compute);
  merged.iteration_period = UpperMedian(period);
  merged.overlap_start = overlap.empty() ? 0.0 : UpperMedian(overlap);
  merged.compression_ratio = 1.0;
  if (all_flops && std::isfinite(flops)) merged.flops_per_iteration = Flops::Of(flops);
  std::vector<std::pair<uint64_t, Bytes>> sorted(pairs.begin(), pairs.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });  // (local, remote).
  Bytes total;
  merged.peers.reserve(sorted.size());
  for (const auto& [ends, bytes] : sorted) {
    merged.peers.push_back({NodeId(static_cast<uint32_t>(ends >> 32)),
                            NodeId(static_cast<uint32_t>(ends & 0xffffffffu)), bytes});
    total = SaturatingAdd(total, bytes);
  }
  merged.bytes_per_iteration = total;
  merged.samples = st.complete ? samples : 0;
  merged.converged = st.complete && converged;
  out.profile = std::move(merged);
  return out;
}

std::map<NodeId, Assignment> SplitAssignmentByHost(const Assignment& a, const Topology& topo,
                                                   const std::vector<NodeId>& hosts) {
  std::map<NodeId, Assignment> out;
  for (NodeId h : hosts) {
    auto [it, added] = out.try_emplace(h);
    if (added) static_cast<AssignmentHeader&>(it->second) = a;
  }
  // Consecutive flows mostly leave the same host: remember the last lookup.
  NodeId last_host;
  Assignment* last = nullptr;
  for (const FlowPin& f : a.flows) {
    if (!f.src_nic.valid() || f.src_nic.value() >= topo.num_nodes()) continue;
    const NodeId host = topo.node(f.src_nic).host;
    if (last == nullptr || host != last_host) {
      auto it = out.find(host);
      last_host = host;
      last = it == out.end() ? nullptr : &it->second;
      if (last == nullptr) continue;
    }
    last->flows.push_back(f);
  }
  // Probes (fault_probes.h) go to the host that sends them, like flows.
  for (const FlowPin& p : a.probes) {
    if (!p.src_nic.valid() || p.src_nic.value() >= topo.num_nodes()) continue;
    auto it = out.find(topo.node(p.src_nic).host);
    if (it != out.end()) it->second.probes.push_back(p);
  }
  return out;
}

}  // namespace crux::core
