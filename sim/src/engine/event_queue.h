// The engine's event queues.
//
//   EventQueue<T>   events scheduled while the run goes on, popped in (time, scheduling order)
//                   order; events that became stale are the caller's to recognise (e.g. by a
//                   generation number in the payload).
//   ClusterEvents   the events known before the run starts (job arrivals and departures, link
//                   events), in (time, kind, index) order: departures, then link events, then
//                   arrivals at the same instant, so that an arriving job is planned without the
//                   jobs leaving then and on the updated fabric.
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_ENGINE_EVENT_QUEUE_H_
#define CRUX_SIM_SRC_ENGINE_EVENT_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "crux/core/base/units.h"

namespace crux::sim::engine {

template <typename T>
class EventQueue {
 public:
  void Push(core::Duration at, T payload) {
    heap_.push_back(Entry{at, seq_++, std::move(payload)});
    std::push_heap(heap_.begin(), heap_.end(), After());
  }
  bool empty() const { return heap_.empty(); }
  // Time of the next event; Infinite() when there is none.
  core::Duration next_time() const {
    return heap_.empty() ? core::Duration::Infinite() : heap_.front().at;
  }
  // REQUIRES: !empty().
  T Pop() {
    std::pop_heap(heap_.begin(), heap_.end(), After());
    T payload = std::move(heap_.back().payload);
    heap_.pop_back();
    return payload;
  }
  // Every event whose payload satisfies `pred` `d` later (`d` may be negative: a fast-forward
  // group's sleep and wake); O(events). Ties keep their push order.
  template <typename Pred>
  void ShiftIf(const Pred& pred, core::Duration d) {
    bool any = false;
    for (Entry& e : heap_) {
      if (pred(e.payload)) {
        e.at += d;
        any = true;
      }
    }
    if (any) std::make_heap(heap_.begin(), heap_.end(), After());
  }

 private:
  struct Entry {
    core::Duration at;
    uint64_t seq;
    T payload;
  };
  struct After {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  std::vector<Entry> heap_;
  uint64_t seq_ = 0;
};

enum class ClusterKind : uint8_t { kDeparture = 0, kLink = 1, kArrival = 2 };

struct ClusterEvent {
  core::Duration at;
  ClusterKind kind = ClusterKind::kArrival;
  uint32_t index = 0;  // Job or link-event index.
};

class ClusterEvents {
 public:
  // Before Seal() only.
  void Add(ClusterEvent e) { events_.push_back(e); }
  void Seal() {
    std::stable_sort(events_.begin(), events_.end(),
                     [](const ClusterEvent& a, const ClusterEvent& b) {
                       if (a.at != b.at) return a.at < b.at;
                       if (a.kind != b.kind) return a.kind < b.kind;
                       return a.index < b.index;
                     });
  }
  core::Duration next_time() const {
    return next_ < events_.size() ? events_[next_].at : core::Duration::Infinite();
  }
  // REQUIRES: next_time() is finite.
  ClusterEvent Pop() { return events_[next_++]; }

 private:
  std::vector<ClusterEvent> events_;
  size_t next_ = 0;
};

}  // namespace crux::sim::engine

#endif  // CRUX_SIM_SRC_ENGINE_EVENT_QUEUE_H_
