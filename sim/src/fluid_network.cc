#include "crux/sim/fluid_network.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace crux::sim {
namespace {

constexpr double kNanosPerSec = 1e9;
// Rates closer than this (relative) are the same rate: the flow keeps its finish event. Keeps
// re-computations of an unchanged allocation from churning events through rounding noise.
constexpr double kSameRate = 1e-12;

}  // namespace

FluidNetwork::ResourceId FluidNetwork::AddResource(double capacity_bps) {
  Resource r;
  r.capacity = std::max(0.0, capacity_bps);
  resources_.push_back(std::move(r));
  return static_cast<ResourceId>(resources_.size() - 1);
}

void FluidNetwork::SetCapacity(ResourceId r, double capacity_bps) {
  resources_[r].capacity = std::max(0.0, capacity_bps);
  NoteChange(0, 0.0);  // Every level on it may change.
  MarkDirty(r);
}

void FluidNetwork::MarkDirty(ResourceId r) {
  Resource& res = resources_[r];
  if (!res.dirty) {
    res.dirty = true;
    dirty_.push_back(r);
  }
}

void FluidNetwork::NoteChange(int level, double removed_rate) {
  if (level < dirty_level_) {
    dirty_level_ = level;
    dirty_threshold_ = removed_rate;
  } else if (level == dirty_level_) {
    dirty_threshold_ = std::min(dirty_threshold_, removed_rate);
  }
}

void FluidNetwork::Attach(FlowId f) {
  Flow& flow = flows_[f];
  NoteChange(flow.level, 0.0);
  flow.positions.resize(flow.resources.size());
  for (size_t i = 0; i < flow.resources.size(); ++i) {
    Resource& res = resources_[flow.resources[i]];
    flow.positions[i] = static_cast<uint32_t>(res.flows.size());
    res.flows.push_back(f);
    MarkDirty(flow.resources[i]);
  }
}

void FluidNetwork::Detach(FlowId f) {
  Flow& flow = flows_[f];
  NoteChange(flow.level, std::max(0.0, flow.rate));
  for (size_t i = 0; i < flow.resources.size(); ++i) {
    const ResourceId r = flow.resources[i];
    Resource& res = resources_[r];
    const uint32_t pos = flow.positions[i];
    const FlowId moved = res.flows.back();
    res.flows[pos] = moved;
    res.flows.pop_back();
    if (moved != f) {
      Flow& other = flows_[moved];
      for (size_t k = 0; k < other.resources.size(); ++k) {
        if (other.resources[k] == r) {
          other.positions[k] = pos;
          break;
        }
      }
    }
    MarkDirty(r);
  }
}

FluidNetwork::FlowId FluidNetwork::AddFlow(std::span<const ResourceId> resources, int level,
                                           double bytes, int64_t now, uint64_t tag) {
  assert(!resources.empty() && bytes > 0 && level >= 0);
  FlowId f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  }
  Flow& flow = flows_[f];
  flow.resources.assign(resources.begin(), resources.end());
  flow.remaining = bytes;
  flow.transmitted = 0;
  flow.rate = -1;  // "Unknown": the next recomputation always schedules it.
  flow.last = now;
  flow.finish = kNever;
  flow.order = next_order_++;
  flow.tag = tag;
  ++flow.version;
  flow.stamp = 0;
  flow.level = level;
  flow.active = true;
  ++active_;
  Attach(f);
  return f;
}

void FluidNetwork::Settle(Flow& flow, int64_t now) {
  if (now > flow.last && flow.rate > 0) {
    const double sent = std::min(
        flow.remaining, flow.rate * static_cast<double>(now - flow.last) / 8.0 / kNanosPerSec);
    flow.remaining -= sent;
    flow.transmitted += sent;
  }
  if (now > flow.last) flow.last = now;
}

double FluidNetwork::Remaining(FlowId f, int64_t now) const {
  const Flow& flow = flows_[f];
  if (now <= flow.last || flow.rate <= 0) return flow.remaining;
  const double sent = flow.rate * static_cast<double>(now - flow.last) / 8.0 / kNanosPerSec;
  return std::max(0.0, flow.remaining - sent);
}

double FluidNetwork::RemoveFlow(FlowId f, int64_t now) {
  Flow& flow = flows_[f];
  Settle(flow, now);
  const double transmitted = flow.transmitted;
  Detach(f);
  flow.active = false;
  ++flow.version;
  free_.push_back(f);
  --active_;
  return transmitted;
}

void FluidNetwork::Reroute(FlowId f, std::span<const ResourceId> resources, int64_t now) {
  Settle(flows_[f], now);
  Detach(f);
  Flow& flow = flows_[f];
  flow.resources.assign(resources.begin(), resources.end());
  flow.rate = -1;
  flow.finish = kNever;
  ++flow.version;
  Attach(f);
}

void FluidNetwork::Schedule(FlowId f, int64_t now) {
  Flow& flow = flows_[f];
  ++flow.version;
  if (flow.rate <= 0) {
    flow.finish = kNever;
    return;
  }
  const double dt = std::ceil(flow.remaining * 8.0 * kNanosPerSec / flow.rate);
  if (!(dt < 4e18)) {
    flow.finish = kNever;
    return;
  }
  flow.finish = now + static_cast<int64_t>(dt);
  events_.push_back(Event{flow.finish, flow.order, f, flow.version});
  std::push_heap(events_.begin(), events_.end(), EventAfter());
}

void FluidNetwork::Recompute(int64_t now) {
  if (dirty_.empty()) return;
  if (++stamp_ == 0) {  // Wrapped: clear every marker once.
    for (Flow& fl : flows_) fl.stamp = 0;
    for (Resource& r : resources_) r.stamp = 0;
    stamp_ = 1;
  }
  comp_flows_.clear();
  comp_resources_.clear();
  for (ResourceId r : dirty_) {
    resources_[r].dirty = false;
    if (resources_[r].stamp != stamp_) {
      resources_[r].stamp = stamp_;
      comp_resources_.push_back(r);
    }
  }
  dirty_.clear();
  // Flows that provably keep their rates are "fixed": they are not re-rated, the component does
  // not grow through them, and their rates are subtracted from the capacities. Two rules:
  //  * strict priority: flows above the highest level that changed never see lower levels;
  //  * at that level, when the only changes were removals: in progressive filling every
  //    saturation below the smallest removed rate happens exactly as before the removal (a
  //    removed flow's links saturate no earlier than its rate), so flows frozen below it keep
  //    their rates.
  const int changed_level = dirty_level_;
  const double threshold = dirty_threshold_ * (1 - 1e-9);
  dirty_level_ = std::numeric_limits<int>::max();
  dirty_threshold_ = 0;
  // The connected component of the dirty resources (flows sharing resources, transitively).
  for (size_t i = 0; i < comp_resources_.size(); ++i) {
    const Resource& res = resources_[comp_resources_[i]];
    for (FlowId f : res.flows) {
      Flow& flow = flows_[f];
      if (flow.stamp == stamp_ || flow.level < changed_level) continue;
      if (flow.level == changed_level && flow.rate >= 0 && flow.rate < threshold) continue;
      flow.stamp = stamp_;
      comp_flows_.push_back(f);
      for (ResourceId r2 : flow.resources) {
        if (resources_[r2].stamp != stamp_) {
          resources_[r2].stamp = stamp_;
          comp_resources_.push_back(r2);
        }
      }
    }
  }
  if (comp_flows_.empty()) return;
  ++stats_.recomputations;
  stats_.flows_visited += comp_flows_.size();

  // Group by level (stable: discovery order inside a level, which is deterministic). Counting
  // sort when the level range is small, as it is with hardware levels.
  int min_level = flows_[comp_flows_[0]].level;
  int max_level = min_level;
  for (FlowId f : comp_flows_) {
    min_level = std::min(min_level, flows_[f].level);
    max_level = std::max(max_level, flows_[f].level);
  }
  if (min_level != max_level) {
    const size_t range = static_cast<size_t>(max_level - min_level) + 1;
    if (range <= 4 * comp_flows_.size() + 64) {
      level_count_.assign(range + 1, 0);
      for (FlowId f : comp_flows_) ++level_count_[flows_[f].level - min_level + 1];
      for (size_t l = 1; l <= range; ++l) level_count_[l] += level_count_[l - 1];
      sorted_.resize(comp_flows_.size());
      for (FlowId f : comp_flows_) sorted_[level_count_[flows_[f].level - min_level]++] = f;
      comp_flows_.swap(sorted_);
    } else {
      std::stable_sort(comp_flows_.begin(), comp_flows_.end(),
                       [this](FlowId a, FlowId b) { return flows_[a].level < flows_[b].level; });
    }
  }
  for (ResourceId r : comp_resources_) {
    Resource& res = resources_[r];
    res.residual = res.capacity;
    for (FlowId f : res.flows) {
      if (flows_[f].stamp != stamp_) res.residual -= std::max(0.0, flows_[f].rate);  // Fixed.
    }
  }
  for (FlowId f : comp_flows_) {
    flows_[f].frozen = false;
    flows_[f].new_rate = 0;
  }

  // Level by level, highest first: progressive filling on what the higher levels left.
  size_t i = 0;
  while (i < comp_flows_.size()) {
    const int level = flows_[comp_flows_[i]].level;
    size_t j = i;
    if (++level_stamp_ == 0) {
      for (Resource& r : resources_) r.level_stamp = 0;
      level_stamp_ = 1;
    }
    level_resources_.clear();
    while (j < comp_flows_.size() && flows_[comp_flows_[j]].level == level) {
      for (ResourceId r : flows_[comp_flows_[j]].resources) {
        Resource& res = resources_[r];
        if (res.level_stamp != level_stamp_) {
          res.level_stamp = level_stamp_;
          res.count = 0;
          level_resources_.push_back(r);
        }
        ++res.count;
      }
      ++j;
    }
    heap_.clear();
    for (ResourceId r : level_resources_) {
      const Resource& res = resources_[r];
      heap_.push_back(ShareEntry{std::max(0.0, res.residual) / res.count, r});
    }
    std::make_heap(heap_.begin(), heap_.end(), ShareAfter());
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), ShareAfter());
      const ShareEntry e = heap_.back();
      heap_.pop_back();
      Resource& res = resources_[e.r];
      if (res.count <= 0) continue;
      const double share = std::max(0.0, res.residual) / res.count;
      // Freezing a flow at the current minimum share never lowers another resource's share, so
      // an entry is never above its resource's share: a stale entry is re-queued with the
      // current share, and an up-to-date one at the top is the true minimum.
      if (share > e.share) {
        heap_.push_back(ShareEntry{share, e.r});
        std::push_heap(heap_.begin(), heap_.end(), ShareAfter());
        continue;
      }
      for (FlowId f : res.flows) {
        Flow& flow = flows_[f];
        if (flow.level != level || flow.frozen) continue;
        flow.frozen = true;
        flow.new_rate = share;
        for (ResourceId r2 : flow.resources) {
          Resource& res2 = resources_[r2];
          res2.residual -= share;
          --res2.count;
        }
      }
    }
    i = j;
  }

  for (FlowId f : comp_flows_) {
    Flow& flow = flows_[f];
    const double old_rate = flow.rate;
    const double new_rate = flow.new_rate;
    if (old_rate >= 0 &&
        std::abs(new_rate - old_rate) <= kSameRate * std::max(old_rate, new_rate)) {
      continue;
    }
    Settle(flow, now);
    flow.rate = new_rate;
    ++stats_.rates_changed;
    Schedule(f, now);
  }
  MaybeCompactEvents();
}

void FluidNetwork::MaybeCompactEvents() {
  if (events_.size() <= 4 * active_ + 4096) return;
  std::erase_if(events_, [this](const Event& e) {
    const Flow& flow = flows_[e.flow];
    return !flow.active || flow.version != e.version;
  });
  std::make_heap(events_.begin(), events_.end(), EventAfter());
}

int64_t FluidNetwork::NextFinishTime(int64_t now) {
  Recompute(now);
  while (!events_.empty()) {
    const Event& top = events_.front();
    const Flow& flow = flows_[top.flow];
    if (flow.active && flow.version == top.version) return top.time;
    std::pop_heap(events_.begin(), events_.end(), EventAfter());
    events_.pop_back();
  }
  return kNever;
}

FluidNetwork::FlowId FluidNetwork::PopNextFinished(int64_t now) {
  while (!events_.empty()) {
    const Event top = events_.front();
    Flow& flow = flows_[top.flow];
    const bool valid = flow.active && flow.version == top.version;
    if (valid && top.time > now) return kNoFlow;
    std::pop_heap(events_.begin(), events_.end(), EventAfter());
    events_.pop_back();
    if (!valid) continue;
    flow.transmitted += flow.remaining;
    flow.remaining = 0;
    flow.last = top.time;
    return top.flow;
  }
  return kNoFlow;
}

void FluidNetwork::Release(FlowId f) {
  Detach(f);
  Flow& flow = flows_[f];
  flow.active = false;
  ++flow.version;
  free_.push_back(f);
  --active_;
  ++stats_.finished;
}

void FluidNetwork::ShiftTime(int64_t delta) {
  for (Flow& flow : flows_) {
    if (!flow.active) continue;
    flow.last += delta;
    if (flow.finish != kNever) flow.finish += delta;
  }
  for (Event& e : events_) e.time += delta;  // A uniform shift keeps the heap order.
}

}  // namespace crux::sim
