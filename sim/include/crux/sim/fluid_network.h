// FluidNetwork: the rate-allocation and flow-completion core of the simulator.
//
// A set of resources (directed links, or private copies of links) with capacities in bits per
// second, and flows that each cross a fixed list of resources at one priority level. Rates are
// allocated per resource with strict priority between levels (0 = highest) and max-min
// fairness within a level: progressive filling (water-filling) level by level, from the highest
// down, on the capacity the higher levels left over. A flow drains its bytes at its rate; its
// finish time is the next instant (rounded up to the nanosecond) at which its remaining bytes
// reach zero.
//
// Incrementality: adding, removing or re-routing a flow and changing a capacity only mark the
// resources involved dirty. The next call to NextFinishTime() recomputes the rates of the
// connected component (flows that transitively share a resource) of the dirty resources, once
// for every change made since the previous call; flows outside it keep their rates and their
// scheduled finish. Finish events are lazy: a flow whose rate changes gets a new event and a
// new version; stale events are skipped when popped.
//
// Times are int64 nanoseconds on the caller's clock; `now` arguments must never decrease between
// calls (except through ShiftTime, which moves every flow's clock at once).
//
// Determinism: identical call sequences give identical results (ties in finish time are broken
// by the order in which flows were added).
//
// Thread-safety: none (one simulation, one thread).
#ifndef CRUX_SIM_FLUID_NETWORK_H_
#define CRUX_SIM_FLUID_NETWORK_H_

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace crux::sim {

class FluidNetwork {
 public:
  using ResourceId = int32_t;
  using FlowId = uint32_t;  // A slot; reused after the flow finishes or is removed.
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  // Statistics for benchmarks and tests.
  struct Stats {
    uint64_t recomputations = 0;  // Component recomputations (one per NextFinishTime with work).
    uint64_t flows_visited = 0;   // Flows whose rate was recomputed, summed over them.
    uint64_t rates_changed = 0;   // Flows whose rate actually changed (new finish event).
    uint64_t finished = 0;        // Flows that finished.
  };

  // Adds a resource of `capacity_bps` (>= 0; 0 = down: its flows get rate 0 and wait).
  ResourceId AddResource(double capacity_bps);
  size_t num_resources() const { return resources_.size(); }
  double capacity(ResourceId r) const { return resources_[r].capacity; }
  // Changes a capacity at time `now`.
  void SetCapacity(ResourceId r, double capacity_bps);

  // Starts a flow of `bytes` (> 0) over `resources` (non-empty, valid ids, no duplicates) at
  // `level` (>= 0, 0 = highest) at time `now`. `tag` is returned when it finishes.
  FlowId AddFlow(std::span<const ResourceId> resources, int level, double bytes, int64_t now,
                 uint64_t tag);
  // Removes a flow before it finishes. Returns the bytes it transmitted (integrated rate x time).
  double RemoveFlow(FlowId f, int64_t now);
  // Moves a flow to other resources (it keeps its remaining bytes and level).
  void Reroute(FlowId f, std::span<const ResourceId> resources, int64_t now);

  // Recomputes dirty rates (as of `now`: the time of the last change) and returns the earliest
  // finish time of any flow (kNever if none can finish: no flows or all at rate 0).
  int64_t NextFinishTime(int64_t now);

  // Finishes every flow whose finish time is <= `now`, in (finish time, add order) order, calling
  // `done(tag, transmitted_bytes)` for each. Call NextFinishTime first.
  template <typename Fn>
  void PopFinished(int64_t now, Fn&& done) {
    while (true) {
      const FlowId f = PopNextFinished(now);
      if (f == kNoFlow) break;
      const double transmitted = flows_[f].transmitted;
      const uint64_t tag = flows_[f].tag;
      Release(f);
      done(tag, transmitted);
    }
  }

  // Remaining bytes of an active flow at `now` (>= the time of its last rate change).
  double Remaining(FlowId f, int64_t now) const;
  double Rate(FlowId f) const { return flows_[f].rate; }
  int Level(FlowId f) const { return flows_[f].level; }
  uint64_t Tag(FlowId f) const { return flows_[f].tag; }
  bool IsActive(FlowId f) const { return f < flows_.size() && flows_[f].active; }
  std::span<const ResourceId> Resources(FlowId f) const { return flows_[f].resources; }
  size_t active_flows() const { return active_; }

  // Moves the clock of every flow and pending finish event `delta` ns later (fast-forward).
  // REQUIRES: no dirty state (call NextFinishTime first).
  void ShiftTime(int64_t delta);

  const Stats& stats() const { return stats_; }

 private:
  static constexpr FlowId kNoFlow = std::numeric_limits<FlowId>::max();

  struct Flow {
    // Hot fields (component search and water-filling) first, to share cache lines.
    std::vector<ResourceId> resources;
    double rate = 0;      // Bits per second.
    double new_rate = 0;  // Scratch for the recomputation.
    uint32_t stamp = 0;   // Component visit marker.
    int level = 0;
    bool active = false;
    bool frozen = false;  // Scratch for water-filling.
    uint32_t version = 0;
    std::vector<uint32_t> positions;  // Index of this flow in resources_[r].flows.
    double remaining = 0;             // Bytes left at `last`.
    double transmitted = 0;           // Bytes sent up to `last`.
    int64_t last = 0;                 // Time of the last settle.
    int64_t finish = kNever;
    uint64_t order = 0;  // Add order (tie-break).
    uint64_t tag = 0;
  };
  struct Resource {
    double capacity = 0;
    std::vector<FlowId> flows;
    double residual = 0;  // Scratch.
    int count = 0;        // Scratch: unfrozen flows of the current level.
    uint32_t stamp = 0;   // Component visit marker.
    uint32_t level_stamp = 0;
    bool dirty = false;
  };
  struct Event {
    int64_t time;
    uint64_t order;
    FlowId flow;
    uint32_t version;
  };
  struct EventAfter {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.order > b.order;
    }
  };
  struct ShareEntry {
    double share;
    ResourceId r;
  };
  struct ShareAfter {
    bool operator()(const ShareEntry& a, const ShareEntry& b) const {
      return a.share != b.share ? a.share > b.share : a.r > b.r;
    }
  };

  void MarkDirty(ResourceId r);
  void NoteChange(int level, double removed_rate);
  void Attach(FlowId f);
  void Detach(FlowId f);
  void Settle(Flow& flow, int64_t now);
  void Schedule(FlowId f, int64_t now);
  void Recompute(int64_t now);
  FlowId PopNextFinished(int64_t now);
  void Release(FlowId f);
  void MaybeCompactEvents();

  std::vector<Resource> resources_;
  std::vector<Flow> flows_;
  std::vector<FlowId> free_;
  std::vector<Event> events_;  // Min-heap on (time, order) via EventAfter.
  std::vector<ResourceId> dirty_;
  int dirty_level_ = std::numeric_limits<int>::max();  // Highest level (lowest number) changed.
  double dirty_threshold_ = 0;  // Smallest rate removed at dirty_level_ (0 after any addition).
  size_t active_ = 0;
  uint64_t next_order_ = 0;
  uint32_t stamp_ = 0;
  uint32_t level_stamp_ = 0;
  // Scratch buffers reused across recomputations.
  std::vector<FlowId> comp_flows_;
  std::vector<ResourceId> comp_resources_;
  std::vector<ResourceId> level_resources_;
  std::vector<ShareEntry> heap_;
  std::vector<uint32_t> level_count_;
  std::vector<FlowId> sorted_;
  Stats stats_;
};

}  // namespace crux::sim

#endif  // CRUX_SIM_FLUID_NETWORK_H_
