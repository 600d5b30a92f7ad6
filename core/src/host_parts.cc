#include "crux/core/host_parts.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace crux::core {
namespace {

// Sums never wrap: each figure is bounded on the wire (2^50 per entry), but there may be many.
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
using RankKey = std::pair<uint64_t, uint32_t>;

}  // namespace

std::vector<NodeId> PartNics(const Topology& topo, const PlacementHost& p) {
  if (!p.nics.empty()) return p.nics;
  const std::vector<NodeId>& all = topo.NicsOf(p.host);
  if (!all.empty()) return all;
  return {p.host};
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

  // Rank -> (part index, NIC). A rank claimed twice belongs to nobody.
  struct Owner {
    size_t part = 0;
    NodeId nic;
  };
  std::map<RankKey, Owner> owner;
  std::set<RankKey> conflicting;
  for (size_t i = 0; i < parts.size(); ++i) {
    const HostPartInput& p = *parts[i];
    if (p.report == nullptr || p.nics.empty()) continue;
    for (const CommTraffic& c : p.report->comms) {
      std::vector<uint32_t> local = c.local_ranks;
      std::sort(local.begin(), local.end());
      local.erase(std::unique(local.begin(), local.end()), local.end());
      for (size_t k = 0; k < local.size(); ++k) {
        const RankKey key{c.comm_hash, local[k]};
        if (conflicting.count(key)) continue;
        auto [it, added] =
            owner.try_emplace(key, Owner{i, p.nics[k * p.nics.size() / local.size()]});
        if (!added && it->second.part != i) {
          conflicting.insert(key);
          owner.erase(it);
        }
      }
    }
  }
  st.conflicting_ranks = static_cast<uint32_t>(conflicting.size());

  std::map<std::pair<NodeId, NodeId>, Bytes> pairs;
  auto add_pair = [&](NodeId from, NodeId to, Bytes b) {
    Bytes& slot = pairs[{from, to}];
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
    overlap.push_back(prof.overlap_start);
    samples = std::min(samples, prof.samples);
    converged = converged && prof.converged;
    if (prof.flops_per_iteration) {
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
        auto src = owner.find({c.comm_hash, b.rank});
        if (src == owner.end() || src->second.part != i) {
          st.unattributed = SaturatingAdd(st.unattributed, b.bytes);
          continue;
        }
        if (b.peer_rank < 0) {
          st.unsplit = SaturatingAdd(st.unsplit, b.bytes);
          continue;
        }
        auto dst = owner.find({c.comm_hash, static_cast<uint32_t>(b.peer_rank)});
        if (dst == owner.end()) {
          st.unattributed = SaturatingAdd(st.unattributed, b.bytes);
        } else if (dst->second.part == i) {
          st.same_host = SaturatingAdd(st.same_host, b.bytes);
        } else {
          add_pair(src->second.nic, dst->second.nic, b.bytes);
        }
      }
    }
  }

  JobProfile merged;
  merged.compute_time = UpperMedian(compute);
  merged.iteration_period = UpperMedian(period);
  merged.overlap_start = UpperMedian(overlap);
  merged.compression_ratio = 1.0;
  if (all_flops) merged.flops_per_iteration = Flops::Of(flops);
  Bytes total;
  for (const auto& [ends, bytes] : pairs) {  // Sorted by (local, remote).
    merged.peers.push_back({ends.first, ends.second, bytes});
    total = SaturatingAdd(total, bytes);
  }
  merged.bytes_per_iteration = total;
  merged.samples = st.complete ? samples : 0;
  merged.converged = st.complete && converged;
  out.profile = std::move(merged);
  return out;
}

}  // namespace crux::core
