// FluidNetwork: the rate-allocation and flow-completion core of the simulator.
//
// A set of resources (directed links, or private copies of links) with capacities in bits per
// second, and flows that each cross a fixed list of resources at one priority level. Rates are
// allocated per resource with strict priority between levels (0 = highest) and max-min
// fairness within a level: the allocation progressive filling (water-filling) computes level by
// level, from the highest down, on the capacity the higher levels left over. A flow drains its
// bytes at its rate; its finish time is the next instant (rounded up to the nanosecond) at which
// its remaining bytes reach zero.
//
// Incrementality (docs/simulator.md, section 1): adding, removing or re-routing a flow and
// changing a capacity only record the change. The next call to NextFinishTime() brings the
// allocation up to date once for every change made since the previous call (all the flows a
// collective starts at one instant cost one recomputation). It does not re-rate the whole
// connected component of the change. Per level, from the highest changed level down, it
// re-runs water-filling on a set S of flows whose rates may change (the new flows, then flows a
// check found out of place) with the rates of every other flow held fixed, and checks the
// result against the characterisation of the max-min allocation (Bertsekas and Gallager): it is
// feasible and every flow has a bottleneck, a saturated resource on which no flow of its level
// gets more. Only resources S touches or a change touched are checked; each check is O(1) with
// per-resource, per-level bookkeeping (load, flows whose bottleneck it is, their common rate, an
// upper bound of the rates on it), and a resource's flows are scanned only when a check needs
// them. Flows that fail a check join S and water-filling runs again; when the checks pass the
// allocation is the max-min one (it is unique), up to a tolerance of 1e-10 of a resource's
// capacity that bounds the error and does not accumulate. Levels below a changed one are checked
// on the resources whose higher-level load changed. A small component (up to ~200 flows) is
// recomputed whole instead, which is cheaper there. set_full_recompute(true) re-rates the whole
// connected component of every change (the reference the tests compare against).
//
// Bundles (the group clock of docs/simulator.md, section 1): flows with the same resources and
// level always get the same max-min rate (the allocation is unique and symmetric in them), so
// they are one entry of the allocation, a bundle with a weight (its number of flows). A bundle
// has one clock: the bytes each of its flows has been served since the bundle began, advanced
// at its rate; a flow joins with a due (that clock plus its bytes) and finishes when the clock
// reaches its due. A rate change therefore costs one bundle, not its flows, and the bundle has
// one entry in the finish-event heap (its first flow to finish). Collective phases start many
// flows on one NIC pair's pinned path at once, so bundles are what the allocation sees (the
// first 30 min of llm2025_clos2_os4 at phase level: 1,800-263,000 flows in flight on 22-271
// bundles).
// set_bundling(false) gives every flow a bundle of its own (the reference the tests compare
// against).
//
// Finish events live in an indexed heap, one entry per bundle with a finite finish time: a
// bundle whose rate or first flow changes moves its entry. Bundles whose new rate is within
// 1e-12 (relative) of the old one keep their rate and finish time.
//
// Times are core::Duration since the start of the caller's clock; `now` arguments must never
// decrease between calls (ShiftFlows moves bundles' clocks, on resources no other flow uses).
// Bytes and rates are fluid quantities (double bytes, double bits per second).
//
// Determinism: identical call sequences give identical results (ties in finish time are broken
// by the order in which flows were added).
//
// Thread-safety: none (one simulation, one thread).
#ifndef CRUX_SIM_FLUID_NETWORK_H_
#define CRUX_SIM_FLUID_NETWORK_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "crux/core/base/units.h"

namespace crux::sim {

class FluidNetwork {
 public:
  using ResourceId = int32_t;
  using FlowId = uint32_t;  // A slot; reused after the flow finishes or is removed.
  using Duration = core::Duration;

  // Statistics for benchmarks and tests.
  struct Stats {
    uint64_t recomputations = 0;  // NextFinishTime calls that had changes to apply.
    uint64_t flows_visited = 0;   // Bundles re-rated by water-filling, summed over every solve.
    uint64_t rates_changed = 0;   // Bundles whose rate actually changed (new finish event).
    uint64_t finished = 0;        // Flows that finished.
    uint64_t solves = 0;          // Water-filling runs (a level may need more than one).
    uint64_t scans = 0;           // Resources whose flow list a check had to walk.
  };

  // Adds a resource of `capacity_bps` (>= 0; 0 = down: its flows get rate 0 and wait).
  ResourceId AddResource(double capacity_bps);
  size_t num_resources() const { return resources_.size(); }
  double capacity(ResourceId r) const { return resources_[r].capacity; }
  // Changes a capacity at time `now`.
  void SetCapacity(ResourceId r, double capacity_bps);

  // Starts a flow of `bytes` (> 0) over `resources` (non-empty, valid ids, no duplicates) at
  // `level` (>= 0, 0 = highest) at time `now`. `tag` is returned when it finishes. It joins the
  // bundle of its resources and level if there is one.
  FlowId AddFlow(std::span<const ResourceId> resources, int level, double bytes, Duration now,
                 uint64_t tag);
  // Removes a flow before it finishes. Returns the bytes it transmitted (integrated rate x time).
  double RemoveFlow(FlowId f, Duration now);
  // Moves a flow to other resources (it keeps its remaining bytes and level).
  void Reroute(FlowId f, std::span<const ResourceId> resources, Duration now);

  // Recomputes dirty rates (as of `now`: the time of the last change) and returns the earliest
  // finish time of any flow (Duration::Infinite() if none can finish: no flows or all at
  // rate 0).
  Duration NextFinishTime(Duration now);

  // Finishes every flow whose finish time is <= `now`, in (finish time, add order) order, calling
  // `done(tag, transmitted_bytes)` for each. Call NextFinishTime first.
  template <typename Fn>
  void PopFinished(Duration now, Fn&& done) {
    while (true) {
      const FlowId f = PopNextFinished(now);
      if (f == kNoFlow) break;
      const double transmitted = members_[f].sent;
      const uint64_t tag = members_[f].tag;
      Release(f);
      done(tag, transmitted);
    }
  }

  // Remaining bytes of an active flow at `now` (>= the time of its last rate change).
  double Remaining(FlowId f, Duration now) const;
  // Bits per second (-1: not computed yet).
  double Rate(FlowId f) const { return bundles_[members_[f].bundle].rate; }
  int Level(FlowId f) const { return bundles_[members_[f].bundle].level; }
  uint64_t Tag(FlowId f) const { return members_[f].tag; }
  bool IsActive(FlowId f) const { return f < members_.size() && members_[f].active; }
  std::span<const ResourceId> Resources(FlowId f) const {
    return bundles_[members_[f].bundle].resources.span();
  }
  size_t active_flows() const { return active_; }
  // Bundles with at least one flow (statistics).
  size_t active_bundles() const { return active_bundles_; }

  // Moves the clocks and pending finish events of `flows` `delta` later (`delta` may be
  // negative): a fast-forward group falls asleep or wakes (docs/simulator.md section 6). Their
  // rates are kept, so nothing else may share their resources meanwhile.
  // REQUIRES: every flow active and listed once, every flow of their bundles listed (flows on
  // the same resources at the same level move together), no pending change (call
  // NextFinishTime first).
  void ShiftFlows(std::span<const FlowId> flows, Duration delta);

  // Reference mode for tests and benchmarks: every recomputation re-rates the whole connected
  // component (per level) of the changes, as the simulator did before issue #13.
  void set_full_recompute(bool on) { full_recompute_ = on; }
  // Connected components of at most this many flows (plus four per new or re-routed flow) are
  // recomputed whole, without the local checks (cheaper when small). 0 makes every
  // recomputation local (tests).
  void set_small_component(size_t flows) { small_component_ = flows; }
  // Off: every flow is a bundle of its own (the reference the tests compare bundles against).
  // REQUIRES: no flow added yet.
  void set_bundling(bool on) { bundling_ = on; }

  const Stats& stats() const { return stats_; }

  // Some flow of some level is bottlenecked at resource `r`: the resource limits its rate (a
  // lower capacity there would slow it). As of the last recomputation (NextFinishTime).
  bool LimitsAFlow(ResourceId r) const;

 private:
  // A bundle: the allocation's unit (one slot per bundle, reused once it is empty).
  using BundleId = uint32_t;
  static constexpr FlowId kNoFlow = std::numeric_limits<FlowId>::max();
  static constexpr BundleId kNoBundle = std::numeric_limits<BundleId>::max();
  static constexpr ResourceId kNoResource = -1;
  static constexpr uint32_t kNotInHeap = std::numeric_limits<uint32_t>::max();

  // A short list kept inline (paths have a handful of hops); longer ones on the heap.
  template <typename T>
  class InlineList {
   public:
    static constexpr uint32_t kInline = 8;
    void assign(std::span<const T> v) {
      size_ = static_cast<uint32_t>(v.size());
      if (size_ > kInline) heap_.assign(v.begin(), v.end());
      std::copy(v.begin(), v.end(), data());
    }
    void resize(uint32_t n) {
      size_ = n;
      if (n > kInline) heap_.resize(n);
    }
    uint32_t size() const { return size_; }
    T* data() { return size_ > kInline ? heap_.data() : inline_; }
    const T* data() const { return size_ > kInline ? heap_.data() : inline_; }
    T& operator[](uint32_t i) { return data()[i]; }
    const T& operator[](uint32_t i) const { return data()[i]; }
    const T* begin() const { return data(); }
    const T* end() const { return data() + size_; }
    std::span<const T> span() const { return {data(), size_}; }

   private:
    uint32_t size_ = 0;
    T inline_[kInline] = {};
    std::vector<T> heap_;
  };

  // A flow of a bundle in its bundle's queue: it finishes when the bundle's clock reaches
  // `due` (ties: add order).
  struct QueueEntry {
    double due = 0;
    uint64_t order = 0;
    FlowId flow = 0;
    uint64_t join = 0;  // == the flow's `join`, else a stale entry (the flow left: its join is
                        // 0, or a later join's number).
  };
  // Aligned to a cache line, with the fields water-filling and the checks read (rate, stamps,
  // level, bottleneck, weight, the first resources) in its first 64 bytes: a scan of a
  // resource's bundles touches one line per bundle.
  struct alignas(64) Bundle {
    double rate = 0;      // Bits per second of each of its flows; -1 = not computed yet (new).
    uint32_t in_set = 0;  // == set_stamp_: member of S of the level being processed.
    uint32_t visit = 0;   // == visit_stamp_: reached by SmallComponent.
    int level = 0;
    ResourceId bottleneck = kNoResource;  // Where water-filling froze it.
    uint32_t weight = 0;                  // Its flows (0: a free slot).
    bool keyed = false;                   // Its key maps to it (FindKey).
    InlineList<ResourceId> resources;
    InlineList<uint32_t> positions;  // Index of this bundle in its level's `members` on each.
    double served = 0;               // Bytes served to each of its flows, up to `last`.
    Duration last;                   // Time of the last settle.
    Duration finish = Duration::Infinite();  // Of the first flow in `queue`.
    double first_due = 0;      // The top of `queue` (infinite when empty), kept here so that a
    uint64_t first_order = 0;  // rate change does not touch the queue.
    uint64_t key = 0;
    // Sorted on (due, order) from `head` on; the entry at `head` is live. `stale` entries (of
    // flows that left before their due) are dropped when they reach the head.
    std::vector<QueueEntry> queue;
    uint32_t head = 0;
    uint32_t stale = 0;
  };
  struct Member {
    BundleId bundle = 0;
    bool active = false;
    uint64_t join = 0;   // Sequence number of its latest join (stale queue entries differ).
    double due = 0;      // The bundle clock at which it finishes.
    double joined = 0;   // The bundle clock when it joined.
    double sent = 0;     // Bytes sent before it joined this bundle (re-routes); at its
                         // finish, every byte it sent.
    uint64_t order = 0;  // Add order (tie-break).
    uint64_t tag = 0;
  };
  // Bookkeeping of the flows of one level on one resource.
  struct LevelInfo {
    int level = 0;
    int bottlenecked = 0;    // Of `members`, those whose bottleneck is this resource.
    double load = 0;         // Sum of their rates.
    double share = 0;        // The rate of every flow bottlenecked here.
    double max_rate_ub = 0;  // >= the rate of every flow of the level on the resource.
    // The bundles of the level on the resource: what the checks and the component searches
    // walk, which only ever look at one level.
    std::vector<BundleId> members;
    int size() const { return static_cast<int>(members.size()); }
  };
  struct Resource {
    double capacity = 0;
    // Sorted by level; one entry per level that had flows here (kept when they leave: the
    // same levels come back every iteration).
    std::vector<LevelInfo> levels;
  };
  // Markers of the level being processed, apart from Resource (a small, dense array that the
  // solve's inner loops touch instead of the resources themselves).
  struct Marks {
    uint32_t solve_stamp = 0;
    uint32_t solve_index = 0;  // Index in solve_resources_ when solve_stamp matches.
    uint32_t check_stamp = 0;
    uint32_t dirty_stamp = 0;
  };
  // Water-filling works on dense copies of S and of the resources S touches (cache locality:
  // the flows and resources of a solve are scattered over the whole network).
  struct SolveFlow {  // A bundle of S (40 bytes).
    BundleId id;
    uint32_t begin;  // Its resources: solve_flow_res_[begin, end) (indexes of solve_resources_).
    uint32_t end;
    uint32_t bottleneck = 0;  // Index of the resource it froze at.
    double old_rate = 0;      // max(0, rate).
    double new_rate = 0;
    uint32_t weight = 0;  // Its flows.
    bool frozen = false;
  };
  struct SolveResource {
    ResourceId id = 0;
    int info = 0;   // Index of the level's LevelInfo in the resource's `levels`.
    int count = 0;  // S bundles on it.
    int unfrozen = 0;
    double unfrozen_weight = 0;  // Flows of its unfrozen S bundles.
    uint32_t begin = 0;          // Its S flows: solve_res_flows_[begin, begin + count).
    uint32_t fill = 0;
    double capacity = 0;  // What the higher levels leave.
    double residual = 0;
    double set_old = 0;  // Sum of the old rates of its S flows.
    double set_new = 0;  // Sum of their new rates.
    double set_max = 0;  // Largest new rate of its S flows.
    double froze = -1;   // Share at which S flows froze here (-1: none).
  };
  // An entry of the finish-event heap: one per bundle with a finite finish time (the bundle
  // knows its position, so a rate change moves its entry instead of adding a stale one). `order`
  // is that of the bundle's first flow to finish.
  struct Event {
    Duration time;
    uint64_t order;
    BundleId bundle;
  };
  struct ShareEntry {
    double share;
    uint32_t r;  // Index in solve_resources_.
  };
  struct ShareAfter {
    bool operator()(const ShareEntry& a, const ShareEntry& b) const {
      return a.share != b.share ? a.share > b.share : a.r > b.r;
    }
  };
  // Pending work of one level: resources whose state changed, flows to (re)compute.
  struct LevelWork {
    int level = 0;
    std::vector<ResourceId> resources;
    std::vector<BundleId> flows;  // Bundles.
    bool empty() const { return resources.empty() && flows.empty(); }
  };

  LevelInfo* Info(ResourceId r, int level);
  LevelInfo& AddInfo(ResourceId r, int level);
  double CapacityAt(const Resource& res, int level) const;
  double Tolerance(const Resource& res) const;
  LevelWork& Work(int level);
  void MarkResource(int level, ResourceId r);
  void MarkFromLevel(int level, ResourceId r);  // `level` and every lower level on r.
  void Attach(BundleId b);
  void Detach(BundleId b);
  // The bundle of `resources` at `level` (a new one when there is none or bundling is off).
  BundleId BundleFor(std::span<const ResourceId> resources, int level, Duration now);
  // Flow `f` joins bundle `b` at `now` with `bytes` left.
  void Join(FlowId f, BundleId b, double bytes, Duration now);
  // Flow `f` leaves its bundle at `now` (settled); an emptied bundle is freed.
  void Leave(FlowId f, Duration now);
  // `delta` flows more (or fewer) in a bundle that stays: loads and pending work follow.
  void ChangeWeight(BundleId b, int delta);
  // The bundle of a key (kNoBundle: none); adds one (the key must be absent); erases one.
  BundleId FindKey(uint64_t key) const;
  void InsertKey(uint64_t key, BundleId b);
  void EraseKey(uint64_t key);
  // Drops the entry at the head of the bundle's queue.
  void PopFront(Bundle& bundle);
  // Drops stale entries from the head of the bundle's queue and notes its first due.
  void CleanQueue(Bundle& bundle);
  void Settle(Bundle& bundle, Duration now);
  void Schedule(BundleId b, Duration now);
  void Recompute(Duration now);
  void ProcessLevel(LevelWork& work, Duration now);
  void JoinSet(BundleId b, int level);
  void ExpandToComponent(int level);
  bool SmallComponent(int level, size_t limit);
  void Solve(int level);
  bool Check(int level);
  void Apply(int level, Duration now);
  FlowId PopNextFinished(Duration now);
  void Release(FlowId f);
  // The indexed min-heap of finish events on (time, order).
  bool EventBefore(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time < b.time : a.order < b.order;
  }
  void EventPlace(uint32_t pos, const Event& e);
  void EventUp(uint32_t pos);
  void EventDown(uint32_t pos);
  void EventFix(uint32_t pos);
  void EventErase(BundleId b);

  std::vector<Resource> resources_;
  std::vector<Marks> marks_;  // Parallel to resources_.
  std::vector<Bundle> bundles_;
  std::vector<BundleId> free_bundles_;
  std::vector<Member> members_;
  std::vector<FlowId> free_;
  // Bundle of each (level, resources) hash; a bundle whose hash is taken by another key stays
  // out of it (it is a bundle of its own). Open addressing with linear probing and
  // backward-shift deletion (every flow of a bundle of its own inserts and erases a key: no
  // allocation per flow), a power-of-two size at most half full.
  struct KeySlot {
    uint64_t key = 0;
    BundleId bundle = kNoBundle;
  };
  std::vector<KeySlot> key_slots_;
  size_t keys_ = 0;
  std::vector<Event> events_;       // Indexed min-heap on (time, order).
  std::vector<uint32_t> heap_pos_;  // Per bundle slot: its index in events_ (or kNotInHeap).
  std::vector<LevelWork> work_;
  size_t last_work_ = 0;  // Hint: the entry MarkResource used last.
  bool pending_ = false;
  bool full_recompute_ = false;
  bool bundling_ = true;
  size_t small_component_ = 192;
  uint32_t small_backoff_ = 0;  // Component searches to skip after the next failure.
  uint32_t skip_small_ = 0;     // Component searches left to skip.
  size_t active_ = 0;
  size_t active_bundles_ = 0;
  uint64_t next_order_ = 0;
  uint64_t next_join_ = 0;
  uint32_t set_stamp_ = 0;
  uint32_t visit_stamp_ = 0;
  uint32_t solve_stamp_ = 0;
  uint32_t check_stamp_ = 0;
  uint32_t dirty_stamp_ = 0;
  // Scratch buffers reused across recomputations.
  std::vector<BundleId> set_;        // S of the level being processed.
  std::vector<BundleId> component_;  // SmallComponent's result.
  std::vector<ResourceId> changed_;  // Resources of the level's pending work.
  std::vector<SolveFlow> solve_flows_;
  std::vector<SolveResource> solve_resources_;
  std::vector<uint32_t> solve_flow_res_;
  std::vector<uint32_t> solve_res_flows_;
  std::vector<ShareEntry> heap_;
  LevelWork scratch_work_;
  Stats stats_;
};

}  // namespace crux::sim

#endif  // CRUX_SIM_FLUID_NETWORK_H_
