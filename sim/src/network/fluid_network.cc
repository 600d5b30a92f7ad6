#include "crux/sim/fluid_network.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

namespace crux::sim {
namespace {

constexpr double kNanosPerSec = 1e9;
// Rates closer than this (relative) are the same rate: the flow keeps its finish event. Keeps
// re-computations of an unchanged allocation from churning events through rounding noise.
constexpr double kSameRate = 1e-12;
// The checks of the max-min conditions accept this much (relative to the resource's capacity,
// plus an absolute floor in bits/s): far above the rounding noise of a sum of rates, far below
// any rate difference that matters. A flow's rate is within 2x this of its max-min rate.
constexpr double kTolerance = 1e-10;
constexpr double kAbsTolerance = 1e-6;
// Water-filling runs per level and recomputation before S becomes the whole connected
// component (which always passes the checks): bounds the cost of a long chain of small
// expansions.
constexpr int kMaxRounds = 16;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Flows ahead whose cache line a walk over a flow list requests early (the lists are in no
// memory order; a flow is one cache line, Flow is aligned to it).
constexpr size_t kPrefetch = 8;
// Water-filling rounds that find the smallest fair share by a scan of S's resources before a
// heap is built for the rest (a scan costs what building the heap does).
constexpr int kScanRounds = 2;

// A new generation of a visit marker: `stamp` advances; when it wraps around, every item's
// marker is cleared once.
template <typename Item>
void NextStamp(uint32_t& stamp, std::vector<Item>& items, uint32_t Item::*marker) {
  if (++stamp == 0) {
    for (Item& item : items) item.*marker = 0;
    stamp = 1;
  }
}

// The slot last freed, else a new one at the end of `items`.
template <typename Id, typename Item>
Id TakeSlot(std::vector<Id>& free, std::vector<Item>& items) {
  if (free.empty()) {
    items.emplace_back();
    return static_cast<Id>(items.size() - 1);
  }
  const Id id = free.back();
  free.pop_back();
  return id;
}

}  // namespace

FluidNetwork::ResourceId FluidNetwork::AddResource(double capacity_bps) {
  Resource r;
  r.capacity = std::max(0.0, capacity_bps);
  resources_.push_back(std::move(r));
  marks_.emplace_back();
  return static_cast<ResourceId>(resources_.size() - 1);
}

FluidNetwork::LevelInfo* FluidNetwork::Info(ResourceId r, int level) {
  for (LevelInfo& li : resources_[r].levels) {
    if (li.level == level) return &li;
    if (li.level > level) break;
  }
  return nullptr;
}

FluidNetwork::LevelInfo& FluidNetwork::AddInfo(ResourceId r, int level) {
  std::vector<LevelInfo>& levels = resources_[r].levels;
  size_t i = 0;
  while (i < levels.size() && levels[i].level < level) ++i;  // A handful of entries.
  if (i < levels.size() && levels[i].level == level) return levels[i];
  LevelInfo li;
  li.level = level;
  return *levels.insert(levels.begin() + static_cast<std::ptrdiff_t>(i), li);
}

double FluidNetwork::CapacityAt(const Resource& res, int level) const {
  double cap = res.capacity;
  for (const LevelInfo& li : res.levels) {
    if (li.level >= level) break;
    cap -= li.load;
  }
  return cap;
}

double FluidNetwork::Tolerance(const Resource& res) const {
  return kTolerance * res.capacity + kAbsTolerance;
}

FluidNetwork::LevelWork& FluidNetwork::Work(int level) {
  LevelWork* spare = nullptr;
  for (LevelWork& w : work_) {
    if (w.level == level) return w;
    if (spare == nullptr && w.empty()) spare = &w;
  }
  if (spare != nullptr) {
    spare->level = level;
    return *spare;
  }
  work_.emplace_back();
  work_.back().level = level;
  return work_.back();
}

void FluidNetwork::MarkResource(int level, ResourceId r) {
  if (last_work_ >= work_.size() || work_[last_work_].level != level) {
    last_work_ = static_cast<size_t>(&Work(level) - work_.data());
  }
  work_[last_work_].resources.push_back(r);
  pending_ = true;
}

void FluidNetwork::MarkFromLevel(int level, ResourceId r) {
  for (const LevelInfo& li : resources_[r].levels) {
    if (li.level >= level && !li.members.empty()) MarkResource(li.level, r);
  }
}

void FluidNetwork::SetCapacity(ResourceId r, double capacity_bps) {
  resources_[r].capacity = std::max(0.0, capacity_bps);
  MarkFromLevel(0, r);  // Every level on it may change.
}

void FluidNetwork::Attach(BundleId b) {
  Bundle& flow = bundles_[b];
  flow.positions.resize(flow.resources.size());
  for (uint32_t i = 0; i < flow.resources.size(); ++i) {
    LevelInfo& li = AddInfo(flow.resources[i], flow.level);
    flow.positions[i] = static_cast<uint32_t>(li.members.size());
    li.members.push_back(b);
  }
  flow.bottleneck = kNoResource;
  Work(flow.level).flows.push_back(b);
  pending_ = true;
}

void FluidNetwork::Detach(BundleId b) {
  Bundle& flow = bundles_[b];
  const double old_load = flow.weight * std::max(0.0, flow.rate);
  for (uint32_t i = 0; i < flow.resources.size(); ++i) {
    const ResourceId r = flow.resources[i];
    Resource& res = resources_[r];
    LevelInfo* li = Info(r, flow.level);
    assert(li != nullptr);
    const uint32_t pos = flow.positions[i];
    const BundleId moved = li->members.back();
    li->members[pos] = moved;
    li->members.pop_back();
    if (moved != b) {
      Bundle& other = bundles_[moved];
      for (uint32_t k = 0; k < other.resources.size(); ++k) {
        if (other.resources[k] == r) {
          other.positions[k] = pos;
          break;
        }
      }
    }
    li->load -= old_load;
    if (flow.bottleneck == r) --li->bottlenecked;
    if (li->members.empty()) {  // The entry stays (the level comes back with the next phase).
      li->load = 0;
      li->max_rate_ub = 0;
    }
    // The resource has more room for this level and the lower ones: only flows bottlenecked
    // here can gain (elsewhere neither feasibility nor any bottleneck changes).
    for (const LevelInfo& x : res.levels) {
      if (x.level >= flow.level && x.bottlenecked > 0) MarkResource(x.level, r);
    }
  }
  flow.bottleneck = kNoResource;
}

void FluidNetwork::ChangeWeight(BundleId b, int delta) {
  Bundle& bundle = bundles_[b];
  bundle.weight = static_cast<uint32_t>(static_cast<int>(bundle.weight) + delta);
  if (bundle.rate < 0) return;  // Not rated yet: it is pending work already, with no load.
  // Its load on every resource moves by `delta` flows at its rate; the level is re-solved with
  // it in S (its own rate moves too), and the lower levels are checked there.
  const double load = delta * bundle.rate;
  for (ResourceId r : bundle.resources) {
    if (load != 0) Info(r, bundle.level)->load += load;
    MarkFromLevel(bundle.level, r);
  }
  Work(bundle.level).flows.push_back(b);
  pending_ = true;
}

namespace {

// FNV-1a over a bundle's level and resources.
uint64_t BundleKey(std::span<const FluidNetwork::ResourceId> resources, int level) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (16 * i)) & 0xffff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(level));
  for (FluidNetwork::ResourceId r : resources) mix(static_cast<uint64_t>(r));
  return h;
}

}  // namespace

FluidNetwork::BundleId FluidNetwork::BundleFor(std::span<const ResourceId> resources, int level,
                                               Duration now) {
  uint64_t key = 0;
  bool keyed = false;
  if (bundling_) {
    key = BundleKey(resources, level);
    const BundleId have_b = FindKey(key);
    if (have_b == kNoBundle) {
      keyed = true;
    } else {
      const Bundle& found = bundles_[have_b];
      const std::span<const ResourceId> have = found.resources.span();
      if (found.level == level &&
          std::equal(have.begin(), have.end(), resources.begin(), resources.end())) {
        return have_b;
      }
      // Another key hashes the same: this one goes without a bundle of shared flows.
    }
  }
  const BundleId b = TakeSlot(free_bundles_, bundles_);
  if (heap_pos_.size() < bundles_.size()) heap_pos_.push_back(kNotInHeap);
  Bundle& bundle = bundles_[b];
  bundle.resources.assign(resources);
  bundle.level = level;
  bundle.rate = -1;  // "Unknown": the next recomputation always schedules it.
  bundle.weight = 0;
  bundle.served = 0;
  bundle.last = now;
  bundle.finish = Duration::Infinite();
  bundle.in_set = 0;
  bundle.key = key;
  bundle.keyed = keyed;
  bundle.queue.clear();
  bundle.head = 0;
  bundle.stale = 0;
  bundle.first_due = kInf;
  if (keyed) InsertKey(key, b);
  ++active_bundles_;
  Attach(b);
  return b;
}

namespace {

// The home slot of a key (the FNV hash mixed once more: its low bits index the table).
size_t KeyHome(uint64_t key, size_t mask) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return static_cast<size_t>(key) & mask;
}

}  // namespace

FluidNetwork::BundleId FluidNetwork::FindKey(uint64_t key) const {
  if (key_slots_.empty()) return kNoBundle;
  const size_t mask = key_slots_.size() - 1;
  for (size_t i = KeyHome(key, mask);; i = (i + 1) & mask) {
    const KeySlot& slot = key_slots_[i];
    if (slot.bundle == kNoBundle) return kNoBundle;
    if (slot.key == key) return slot.bundle;
  }
}

void FluidNetwork::InsertKey(uint64_t key, BundleId b) {
  if (2 * (keys_ + 1) > key_slots_.size()) {
    std::vector<KeySlot> old;
    old.swap(key_slots_);
    key_slots_.assign(std::max<size_t>(64, 2 * old.size()), KeySlot{});
    keys_ = 0;
    for (const KeySlot& slot : old) {
      if (slot.bundle != kNoBundle) InsertKey(slot.key, slot.bundle);
    }
  }
  const size_t mask = key_slots_.size() - 1;
  size_t i = KeyHome(key, mask);
  while (key_slots_[i].bundle != kNoBundle) i = (i + 1) & mask;
  key_slots_[i] = KeySlot{key, b};
  ++keys_;
}

void FluidNetwork::EraseKey(uint64_t key) {
  const size_t mask = key_slots_.size() - 1;
  size_t i = KeyHome(key, mask);
  while (key_slots_[i].bundle == kNoBundle || key_slots_[i].key != key) {
    assert(key_slots_[i].bundle != kNoBundle);
    i = (i + 1) & mask;
  }
  // Backward shift: every later entry of the probe run whose home is not cyclically within
  // (hole, entry] moves into the hole.
  for (size_t j = (i + 1) & mask; key_slots_[j].bundle != kNoBundle; j = (j + 1) & mask) {
    const size_t home = KeyHome(key_slots_[j].key, mask);
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    key_slots_[i] = key_slots_[j];
    i = j;
  }
  key_slots_[i] = KeySlot{};
  --keys_;
}

namespace {

bool DueBefore(double due_a, uint64_t order_a, double due_b, uint64_t order_b) {
  return due_a != due_b ? due_a < due_b : order_a < order_b;
}

}  // namespace

void FluidNetwork::PopFront(Bundle& bundle) {
  std::vector<QueueEntry>& q = bundle.queue;
  if (++bundle.head == q.size()) {
    q.clear();
    bundle.head = 0;
  } else if (bundle.head >= 256 && 2 * bundle.head >= q.size()) {
    q.erase(q.begin(), q.begin() + bundle.head);  // Amortised: half the vector is dead.
    bundle.head = 0;
  }
}

void FluidNetwork::CleanQueue(Bundle& bundle) {
  std::vector<QueueEntry>& q = bundle.queue;
  while (bundle.stale > 0 && bundle.head < q.size()) {
    const QueueEntry& top = q[bundle.head];
    if (members_[top.flow].join == top.join) break;  // Live (a flow that left has join 0).
    --bundle.stale;
    PopFront(bundle);
  }
  const bool empty = bundle.head == q.size();
  bundle.first_due = empty ? kInf : q[bundle.head].due;
  bundle.first_order = empty ? 0 : q[bundle.head].order;
}

void FluidNetwork::Join(FlowId f, BundleId b, double bytes, Duration now) {
  Bundle& bundle = bundles_[b];
  Settle(bundle, now);
  // The clock is rebased now and then so that a long-lived bundle's dues keep their precision
  // (every due and join mark moves by the same amount; the order of the queue is kept).
  if (bundle.served > 0x1p40) {
    const double base = bundle.served;
    for (size_t i = bundle.head; i < bundle.queue.size(); ++i) {
      QueueEntry& e = bundle.queue[i];
      e.due -= base;
      Member& m = members_[e.flow];
      if (m.join == e.join) {
        m.due -= base;
        m.joined -= base;
      }
    }
    bundle.served = 0;
  }
  Member& m = members_[f];
  m.bundle = b;
  m.join = ++next_join_;
  m.joined = bundle.served;
  m.due = bundle.served + bytes;
  // The queue is kept sorted: the flows of a collective join with the same bytes one after
  // the other, so a new due is nearly always the last (an append); otherwise it is inserted.
  std::vector<QueueEntry>& q = bundle.queue;
  const QueueEntry entry{m.due, m.order, f, m.join};
  if (bundle.head == q.size() || !DueBefore(m.due, m.order, q.back().due, q.back().order)) {
    q.push_back(entry);
  } else {
    const auto at = std::upper_bound(q.begin() + bundle.head, q.end(), entry,
                                     [](const QueueEntry& x, const QueueEntry& y) {
                                       return DueBefore(x.due, x.order, y.due, y.order);
                                     });
    q.insert(at, entry);
  }
  CleanQueue(bundle);
  ChangeWeight(b, +1);
  Schedule(b, now);
}

void FluidNetwork::Leave(FlowId f, Duration now) {
  Member& m = members_[f];
  const BundleId b = m.bundle;
  Bundle& bundle = bundles_[b];
  if (m.join != 0) ++bundle.stale;  // Its queue entry is still there: stale from now on.
  m.join = 0;
  if (bundle.weight == 1) {
    Detach(b);
    EventErase(b);
    bundle.weight = 0;  // Its queue is reset when the slot is taken again (BundleFor).
    if (bundle.keyed) EraseKey(bundle.key);
    bundle.keyed = false;
    free_bundles_.push_back(b);
    --active_bundles_;
    return;
  }
  ChangeWeight(b, -1);
  CleanQueue(bundle);
  Schedule(b, now);
}

FluidNetwork::FlowId FluidNetwork::AddFlow(std::span<const ResourceId> resources, int level,
                                           double bytes, Duration now, uint64_t tag) {
  assert(!resources.empty() && bytes > 0 && level >= 0);
  const FlowId f = TakeSlot(free_, members_);
  Member& m = members_[f];
  m.active = true;
  m.sent = 0;
  m.order = next_order_++;
  m.tag = tag;
  ++active_;
  Join(f, BundleFor(resources, level, now), bytes, now);
  return f;
}

void FluidNetwork::Settle(Bundle& bundle, Duration now) {
  if (now > bundle.last && bundle.rate > 0) {
    bundle.served +=
        bundle.rate * static_cast<double>((now - bundle.last).nanos()) / 8.0 / kNanosPerSec;
  }
  if (now > bundle.last) bundle.last = now;
}

bool FluidNetwork::LimitsAFlow(ResourceId r) const {
  for (const LevelInfo& li : resources_[r].levels) {
    if (li.bottlenecked > 0) return true;
  }
  return false;
}

double FluidNetwork::Remaining(FlowId f, Duration now) const {
  const Member& m = members_[f];
  const Bundle& bundle = bundles_[m.bundle];
  double served = bundle.served;
  if (now > bundle.last && bundle.rate > 0) {
    served += bundle.rate * static_cast<double>((now - bundle.last).nanos()) / 8.0 / kNanosPerSec;
  }
  return std::max(0.0, m.due - served);
}

double FluidNetwork::RemoveFlow(FlowId f, Duration now) {
  Member& m = members_[f];
  Settle(bundles_[m.bundle], now);
  const double served = bundles_[m.bundle].served;
  const double transmitted = m.sent + std::clamp(served - m.joined, 0.0, m.due - m.joined);
  Leave(f, now);
  m.active = false;
  free_.push_back(f);
  --active_;
  return transmitted;
}

void FluidNetwork::Reroute(FlowId f, std::span<const ResourceId> resources, Duration now) {
  Member& m = members_[f];
  Bundle& old = bundles_[m.bundle];
  Settle(old, now);
  const double left = std::max(0.0, m.due - old.served);
  const int level = old.level;
  m.sent += std::clamp(old.served - m.joined, 0.0, m.due - m.joined);
  Leave(f, now);
  Join(f, BundleFor(resources, level, now), left, now);
}

void FluidNetwork::EventPlace(uint32_t pos, const Event& e) {
  events_[pos] = e;
  heap_pos_[e.bundle] = pos;
}

// A 4-ary heap: half the depth of a binary one, so a pop moves half as many entries (each
// move also updates the moved bundle's heap_pos_).
void FluidNetwork::EventUp(uint32_t pos) {
  const Event e = events_[pos];
  while (pos > 0) {
    const uint32_t parent = (pos - 1) / 4;
    if (!EventBefore(e, events_[parent])) break;
    EventPlace(pos, events_[parent]);
    pos = parent;
  }
  EventPlace(pos, e);
}

void FluidNetwork::EventDown(uint32_t pos) {
  const Event e = events_[pos];
  const uint32_t n = static_cast<uint32_t>(events_.size());
  while (true) {
    const uint32_t first = 4 * pos + 1;
    if (first >= n) break;
    uint32_t best = first;
    const uint32_t last = std::min(first + 4, n);
    for (uint32_t c = first + 1; c < last; ++c) {
      if (EventBefore(events_[c], events_[best])) best = c;
    }
    if (!EventBefore(events_[best], e)) break;
    EventPlace(pos, events_[best]);
    pos = best;
  }
  EventPlace(pos, e);
}

void FluidNetwork::EventFix(uint32_t pos) {
  if (pos > 0 && EventBefore(events_[pos], events_[(pos - 1) / 4])) {
    EventUp(pos);
  } else {
    EventDown(pos);
  }
}

void FluidNetwork::EventErase(BundleId b) {
  const uint32_t pos = heap_pos_[b];
  if (pos == kNotInHeap) return;
  heap_pos_[b] = kNotInHeap;
  const Event moved = events_.back();
  events_.pop_back();
  if (pos == events_.size()) return;  // It was the last entry.
  EventPlace(pos, moved);
  EventFix(pos);
}

// From the bundle's clock (`last`: `now`, or later while its group sleeps).
// REQUIRES: the bundle settled at `now`, its queue's top live.
void FluidNetwork::Schedule(BundleId b, Duration now) {
  Bundle& bundle = bundles_[b];
  const double left = std::max(0.0, bundle.first_due - bundle.served);
  const double dt = bundle.rate > 0 ? std::ceil(left * 8.0 * kNanosPerSec / bundle.rate) : kInf;
  if (!(dt < 4e18)) {
    bundle.finish = Duration::Infinite();
    EventErase(b);
    return;
  }
  bundle.finish = std::max(now, bundle.last) + Duration::Nanos(static_cast<int64_t>(dt));
  const Event e{bundle.finish, bundle.first_order, b};
  const uint32_t pos = heap_pos_[b];
  if (pos == kNotInHeap) {
    heap_pos_[b] = static_cast<uint32_t>(events_.size());
    events_.push_back(e);
    EventUp(heap_pos_[b]);
    return;
  }
  // Up or down as the key moved (no look at the parent when it moved later).
  const bool earlier = EventBefore(e, events_[pos]);
  events_[pos] = e;
  if (earlier) {
    EventUp(pos);
  } else {
    EventDown(pos);
  }
}

void FluidNetwork::Recompute(Duration now) {
  if (!pending_) return;
  pending_ = false;
  ++stats_.recomputations;
  while (true) {
    // The highest pending level (lowest number) first: its result is the capacity the lower
    // levels share. Processing a level only adds work to lower ones.
    LevelWork* next = nullptr;
    for (LevelWork& w : work_) {
      if (!w.empty() && (next == nullptr || w.level < next->level)) next = &w;
    }
    if (next == nullptr) break;
    scratch_work_.level = next->level;
    scratch_work_.resources.swap(next->resources);
    scratch_work_.flows.swap(next->flows);
    ProcessLevel(scratch_work_, now);
    scratch_work_.resources.clear();
    scratch_work_.flows.clear();
  }
}

void FluidNetwork::JoinSet(BundleId f, int level) {
  Bundle& flow = bundles_[f];
  flow.in_set = set_stamp_;
  set_.push_back(f);
  if (flow.bottleneck != kNoResource) {
    LevelInfo* li = Info(flow.bottleneck, level);
    if (li != nullptr) --li->bottlenecked;
    flow.bottleneck = kNoResource;
  }
}

void FluidNetwork::ProcessLevel(LevelWork& work, Duration now) {
  const int level = work.level;
  NextStamp(set_stamp_, bundles_, &Bundle::in_set);
  NextStamp(dirty_stamp_, marks_, &Marks::dirty_stamp);
  set_.clear();
  for (BundleId f : work.flows) {
    const Bundle& flow = bundles_[f];
    if (flow.weight > 0 && flow.level == level && flow.in_set != set_stamp_) JoinSet(f, level);
  }
  changed_.clear();
  for (ResourceId r : work.resources) {
    Marks& m = marks_[r];
    if (m.dirty_stamp == dirty_stamp_) continue;
    m.dirty_stamp = dirty_stamp_;
    changed_.push_back(r);
  }
  if (full_recompute_) {
    for (ResourceId r : changed_) {
      const LevelInfo* li = Info(r, level);
      if (li == nullptr) continue;
      for (BundleId f : li->members) {
        if (bundles_[f].in_set != set_stamp_) JoinSet(f, level);
      }
    }
    ExpandToComponent(level);
    Solve(level);
    Apply(level, now);
    return;
  }
  // A small connected component is recomputed whole: one water-filling, exact without checks
  // (the local rounds pay off on large components only).
  // After a search that found a large component, the next ones are skipped for a while
  // (doubling up to 64 recomputations): in one giant component they would never succeed.
  if (small_component_ > 0 && skip_small_ == 0) {
    if (SmallComponent(level, 4 * set_.size() + small_component_)) {
      small_backoff_ = 0;
      for (BundleId g : component_) {
        if (bundles_[g].in_set != set_stamp_) JoinSet(g, level);
      }
      Solve(level);
      Apply(level, now);
      return;
    }
    small_backoff_ = std::min<uint32_t>(64, std::max<uint32_t>(1, 2 * small_backoff_));
    skip_small_ = small_backoff_;
  } else if (skip_small_ > 0) {
    --skip_small_;
  }
  int rounds = 0;
  while (true) {
    Solve(level);
    if (!Check(level)) break;
    if (++rounds >= kMaxRounds) ExpandToComponent(level);
  }
  Apply(level, now);
}

// S becomes every flow of the level connected to it through shared resources.
void FluidNetwork::ExpandToComponent(int level) {
  NextStamp(solve_stamp_, marks_, &Marks::solve_stamp);
  for (size_t i = 0; i < set_.size(); ++i) {
    const BundleId f = set_[i];
    for (ResourceId r : bundles_[f].resources) {
      Marks& m = marks_[r];
      if (m.solve_stamp == solve_stamp_) continue;
      m.solve_stamp = solve_stamp_;
      const LevelInfo* li = Info(r, level);
      if (li == nullptr) continue;
      for (BundleId g : li->members) {
        if (bundles_[g].in_set != set_stamp_) JoinSet(g, level);
      }
    }
  }
}

// The flows of the level connected (through resources) to S or to a changed resource, into
// component_, if there are at most `limit` of them; false as soon as there are more.
bool FluidNetwork::SmallComponent(int level, size_t limit) {
  NextStamp(visit_stamp_, bundles_, &Bundle::visit);
  NextStamp(solve_stamp_, marks_, &Marks::solve_stamp);
  component_.clear();
  auto reach = [&](BundleId g) {
    Bundle& flow = bundles_[g];
    if (flow.level != level || flow.visit == visit_stamp_) return true;
    flow.visit = visit_stamp_;
    component_.push_back(g);
    return component_.size() <= limit;
  };
  auto scan = [&](ResourceId r) {
    Marks& m = marks_[r];
    if (m.solve_stamp == solve_stamp_) return true;
    m.solve_stamp = solve_stamp_;
    const LevelInfo* li = Info(r, level);
    if (li == nullptr) return true;
    if (li->members.size() > limit) return false;
    for (BundleId g : li->members) {
      if (!reach(g)) return false;
    }
    return true;
  };
  for (BundleId f : set_) {
    if (!reach(f)) return false;
  }
  for (ResourceId r : changed_) {
    if (!scan(r)) return false;
  }
  for (size_t i = 0; i < component_.size(); ++i) {
    for (ResourceId r : bundles_[component_[i]].resources) {
      if (!scan(r)) return false;
    }
  }
  return true;
}

// Water-filling of S on what the fixed flows (every other flow of the level) and the higher
// levels leave: the new rate and bottleneck of every S flow, and per touched resource the sums
// the checks need.
void FluidNetwork::Solve(int level) {
  NextStamp(solve_stamp_, marks_, &Marks::solve_stamp);
  solve_flows_.clear();
  solve_resources_.clear();
  solve_flow_res_.clear();
  if (set_.empty()) return;
  ++stats_.solves;
  stats_.flows_visited += set_.size();
  for (size_t i = 0; i < set_.size(); ++i) {
    if (i + kPrefetch < set_.size()) __builtin_prefetch(&bundles_[set_[i + kPrefetch]]);
    const BundleId f = set_[i];
    const Bundle& flow = bundles_[f];
    SolveFlow sf;
    sf.id = f;
    sf.weight = flow.weight;
    sf.old_rate = std::max(0.0, flow.rate);
    sf.begin = static_cast<uint32_t>(solve_flow_res_.size());
    for (ResourceId r : flow.resources) {
      Marks& m = marks_[r];
      if (m.solve_stamp != solve_stamp_) {
        m.solve_stamp = solve_stamp_;
        m.solve_index = static_cast<uint32_t>(solve_resources_.size());
        SolveResource& fresh = solve_resources_.emplace_back();
        fresh.id = r;
      }
      SolveResource& sr = solve_resources_[m.solve_index];
      ++sr.count;
      sr.unfrozen_weight += sf.weight;
      sr.set_old += sf.weight * sf.old_rate;
      solve_flow_res_.push_back(m.solve_index);
    }
    sf.end = static_cast<uint32_t>(solve_flow_res_.size());
    solve_flows_.push_back(sf);
  }
  uint32_t offset = 0;
  for (uint32_t d = 0; d < solve_resources_.size(); ++d) {
    SolveResource& sr = solve_resources_[d];
    sr.begin = offset;
    offset += static_cast<uint32_t>(sr.count);
    const Resource& res = resources_[sr.id];
    // One pass over the levels: the capacity the higher ones leave, and this level's entry
    // (every S flow is on the resource: it exists).
    double cap = res.capacity;
    const LevelInfo* li = res.levels.data();
    while (li->level < level) {
      cap -= li->load;
      ++li;
    }
    sr.info = static_cast<int>(li - res.levels.data());
    sr.capacity = cap;
    // With every bundle of the level here in S, nothing is fixed (exactly; no drift).
    const double fixed_load = sr.count == li->size() ? 0.0 : li->load - sr.set_old;
    sr.residual = cap - fixed_load;
    sr.unfrozen = sr.count;
  }
  solve_res_flows_.resize(offset);
  for (uint32_t i = 0; i < solve_flows_.size(); ++i) {
    const SolveFlow& sf = solve_flows_[i];
    for (uint32_t k = sf.begin; k < sf.end; ++k) {
      SolveResource& sr = solve_resources_[solve_flow_res_[k]];
      solve_res_flows_[sr.begin + sr.fill++] = i;
    }
  }
  size_t unfrozen = solve_flows_.size();
  // Every unfrozen flow of resource d freezes at `share`, d's current fair share (the minimum).
  auto freeze = [&](uint32_t d, double share) {
    SolveResource& sr = solve_resources_[d];
    sr.froze = share;
    const uint32_t end = sr.begin + static_cast<uint32_t>(sr.count);
    for (uint32_t k = sr.begin; k < end; ++k) {
      SolveFlow& sf = solve_flows_[solve_res_flows_[k]];
      if (sf.frozen) continue;
      sf.frozen = true;
      --unfrozen;
      sf.new_rate = share;
      sf.bottleneck = d;
      const double load = sf.weight * share;
      for (uint32_t j = sf.begin; j < sf.end; ++j) {
        SolveResource& sr2 = solve_resources_[solve_flow_res_[j]];
        sr2.residual -= load;
        --sr2.unfrozen;
        sr2.unfrozen_weight -= sf.weight;
        sr2.set_new += load;
        sr2.set_max = std::max(sr2.set_max, share);
      }
    }
  };
  // Each round freezes the flows of the resource with the smallest fair share (ties: the first
  // in solve_resources_). The first rounds find it by a scan: S usually shares one bottleneck
  // (the resource a finish freed), which one round settles without building a heap.
  for (int round = 0; unfrozen > 0 && round < kScanRounds; ++round) {
    uint32_t best = 0;
    double best_share = kInf;
    for (uint32_t d = 0; d < solve_resources_.size(); ++d) {
      const SolveResource& sr = solve_resources_[d];
      if (sr.unfrozen <= 0) continue;
      const double share = std::max(0.0, sr.residual) / sr.unfrozen_weight;
      if (share < best_share) {
        best_share = share;
        best = d;
      }
    }
    if (best_share == kInf) break;
    freeze(best, best_share);
  }
  if (unfrozen == 0) return;
  // Then a heap of the fair shares, in the same order.
  heap_.clear();
  for (uint32_t d = 0; d < solve_resources_.size(); ++d) {
    const SolveResource& sr = solve_resources_[d];
    if (sr.unfrozen > 0) {
      heap_.push_back(ShareEntry{std::max(0.0, sr.residual) / sr.unfrozen_weight, d});
    }
  }
  std::make_heap(heap_.begin(), heap_.end(), ShareAfter());
  while (unfrozen > 0 && !heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), ShareAfter());
    const ShareEntry e = heap_.back();
    heap_.pop_back();
    SolveResource& sr = solve_resources_[e.r];
    if (sr.unfrozen <= 0) continue;
    const double share = std::max(0.0, sr.residual) / sr.unfrozen_weight;
    // Freezing a flow at the current minimum share never lowers another resource's share, so
    // an entry is never above its resource's share: a stale entry is re-queued with the
    // current share, and an up-to-date one at the top is the true minimum.
    if (share > e.share) {
      heap_.push_back(ShareEntry{share, e.r});
      std::push_heap(heap_.begin(), heap_.end(), ShareAfter());
      continue;
    }
    freeze(e.r, share);
  }
}

// Checks the max-min conditions of the tentative allocation (S at its new rates, every other
// flow of the level at its old rate) on the resources S touched and the resources a change
// touched; elsewhere nothing changed. Every fixed flow that breaks one joins S. Returns whether
// any did (then water-filling runs again).
//  1. Feasible: the level's load fits the capacity the higher levels leave.
//  2. A fixed flow bottlenecked here still has its bottleneck: the resource is still saturated
//     and no S flow gets more (S flows that froze here froze at the same share).
//  3. An S flow that froze here gets at least as much as every fixed flow on it.
bool FluidNetwork::Check(int level) {
  NextStamp(check_stamp_, marks_, &Marks::check_stamp);
  bool added = false;
  // `sr`: the resource's solve data, or null when S does not touch it.
  auto check = [&](ResourceId r, const SolveResource* sr) {
    LevelInfo* li = sr != nullptr ? &resources_[r].levels[sr->info] : Info(r, level);
    if (li == nullptr) return;
    if (li->size() <= (sr != nullptr ? sr->count : 0)) return;  // No fixed flow of the level.
    const double cap = sr != nullptr ? sr->capacity : CapacityAt(resources_[r], level);
    const double tol = Tolerance(resources_[r]);
    const double load = li->load + (sr != nullptr ? sr->set_new - sr->set_old : 0.0);
    const double set_max = sr != nullptr ? sr->set_max : 0.0;
    const double froze = sr != nullptr ? sr->froze : -1.0;
    const bool over = load > cap + tol;
    const bool unseat = li->bottlenecked > 0 && (load < cap - tol || set_max > li->share + tol ||
                                                 (froze >= 0 && std::abs(froze - li->share) > tol));
    const double above = froze >= 0 && li->max_rate_ub > froze + tol ? froze + tol : kInf;
    if (!over && !unseat && above == kInf) return;
    ++stats_.scans;
    double exact_load = 0;
    double fixed_max = 0;
    const std::vector<BundleId>& members = li->members;
    for (size_t i = 0; i < members.size(); ++i) {
      if (i + kPrefetch < members.size()) __builtin_prefetch(&bundles_[members[i + kPrefetch]]);
      const BundleId g = members[i];
      const Bundle& other = bundles_[g];
      const double rate = std::max(0.0, other.rate);
      exact_load += other.weight * rate;
      if (other.in_set == set_stamp_) continue;
      if ((over && rate > 0) || (unseat && other.bottleneck == r) || rate > above) {
        JoinSet(g, level);
        added = true;
        continue;
      }
      fixed_max = std::max(fixed_max, rate);
    }
    // The walk refreshes the bookkeeping: the exact load (no drift from incremental updates)
    // and the bound of the fixed flows' rates (S flows add theirs when applied).
    li->load = exact_load;
    li->max_rate_ub = fixed_max;
  };
  for (const SolveResource& sr : solve_resources_) {
    marks_[sr.id].check_stamp = check_stamp_;
    check(sr.id, &sr);
  }
  for (ResourceId r : changed_) {
    Marks& m = marks_[r];
    if (m.check_stamp == check_stamp_) continue;
    m.check_stamp = check_stamp_;
    check(r, nullptr);
  }
  return added;
}

// The converged allocation of the level takes effect: rates, finish events, bottlenecks and
// loads; lower levels are checked where this level's load changed.
void FluidNetwork::Apply(int level, Duration now) {
  // A resource with fixed bottlenecked flows keeps their share (the S flows that froze there
  // are within the tolerance of it); otherwise its share is the one S froze at. Deltas of load
  // and the rate bound are gathered per resource, then applied once.
  for (SolveResource& sr : solve_resources_) {
    LevelInfo& li = resources_[sr.id].levels[sr.info];
    if (sr.froze >= 0 && li.bottlenecked == 0) li.share = sr.froze;
    sr.set_new = 0;  // Reused: the load delta.
    sr.set_max = 0;  // Reused: the largest rate.
    sr.fill = 0;     // Reused: flows that now have it as bottleneck.
  }
  for (size_t i = 0; i < solve_flows_.size(); ++i) {
    if (i + kPrefetch < solve_flows_.size()) {
      __builtin_prefetch(&bundles_[solve_flows_[i + kPrefetch].id]);
    }
    SolveFlow& sf = solve_flows_[i];
    Bundle& flow = bundles_[sf.id];
    SolveResource& bn = solve_resources_[sf.bottleneck];
    ++bn.fill;
    flow.bottleneck = bn.id;
    const double old_rate = flow.rate;
    const bool keep = old_rate >= 0 && std::abs(sf.new_rate - old_rate) <=
                                           kSameRate * std::max(old_rate, sf.new_rate);
    const double delta = keep ? 0.0 : sf.weight * (sf.new_rate - sf.old_rate);
    const double rate = keep ? old_rate : sf.new_rate;
    for (uint32_t j = sf.begin; j < sf.end; ++j) {
      SolveResource& sr = solve_resources_[solve_flow_res_[j]];
      sr.set_new += delta;
      sr.set_max = std::max(sr.set_max, rate);
    }
    if (!keep) {
      Settle(flow, now);
      flow.rate = sf.new_rate;
      ++stats_.rates_changed;
      Schedule(sf.id, now);
    }
  }
  for (const SolveResource& sr : solve_resources_) {
    Resource& res = resources_[sr.id];
    LevelInfo& li = res.levels[sr.info];
    li.bottlenecked += static_cast<int>(sr.fill);
    li.load += sr.set_new;
    li.max_rate_ub = std::max(li.max_rate_ub, sr.set_max);
    if (sr.set_new == 0) continue;
    // The lower levels see a new capacity here. Only where Check would act on it (with no S
    // flow of theirs here: infeasible, or bottlenecked flows no longer saturated) is there
    // anything to do; a lower level that gets S flows here checks the resource anyway.
    const double tol = Tolerance(res);
    double cap = res.capacity;
    for (const LevelInfo& lower : res.levels) {
      if (lower.level > level &&
          (lower.load > cap + tol || (lower.bottlenecked > 0 && lower.load < cap - tol))) {
        MarkResource(lower.level, sr.id);
      }
      cap -= lower.load;
    }
  }
}

core::Duration FluidNetwork::NextFinishTime(Duration now) {
  Recompute(now);
  return events_.empty() ? Duration::Infinite() : events_.front().time;
}

FluidNetwork::FlowId FluidNetwork::PopNextFinished(Duration now) {
  if (events_.empty() || events_.front().time > now) return kNoFlow;
  const BundleId b = events_.front().bundle;
  Bundle& bundle = bundles_[b];
  // The bundle's clock at the finish: the first flow's due exactly (the finish time was rounded
  // up to the nanosecond, so the integrated clock is at or a hair past it).
  Settle(bundle, bundle.finish);
  const QueueEntry first = bundle.queue[bundle.head];
  bundle.served = std::max(bundle.served, first.due);
  PopFront(bundle);
  Member& m = members_[first.flow];
  m.sent += m.due - m.joined;
  m.join = 0;  // Its entry is gone.
  return first.flow;
}

// REQUIRES: `f` was just popped (its queue entry is gone, its bundle settled at its finish).
void FluidNetwork::Release(FlowId f) {
  Member& m = members_[f];
  Leave(f, bundles_[m.bundle].last);
  m.active = false;
  free_.push_back(f);
  --active_;
  ++stats_.finished;
}

void FluidNetwork::ShiftFlows(std::span<const FlowId> flows, Duration delta) {
#ifndef NDEBUG
  std::unordered_map<BundleId, uint32_t> listed;
  for (FlowId f : flows) ++listed[members_[f].bundle];
  for (const auto& [b, n] : listed) assert(n == bundles_[b].weight);
#endif
  NextStamp(visit_stamp_, bundles_, &Bundle::visit);
  for (FlowId f : flows) {
    const BundleId b = members_[f].bundle;
    Bundle& bundle = bundles_[b];
    if (bundle.visit == visit_stamp_) continue;
    bundle.visit = visit_stamp_;
    bundle.last += delta;
    if (bundle.finish.IsInfinite()) continue;
    bundle.finish += delta;
    const uint32_t pos = heap_pos_[b];
    if (pos == kNotInHeap) continue;
    events_[pos].time = bundle.finish;
    EventFix(pos);
  }
}

}  // namespace crux::sim
