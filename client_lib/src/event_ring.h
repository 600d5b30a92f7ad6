// BoundedQueue<T>: a bounded multi-producer queue of hot-path records (Vyukov's bounded MPMC
// array queue). Storage is allocated once at construction; TryPush/TryPop never allocate, never
// block and never take a lock (one CAS per operation in the uncontended case). T must be
// trivially copyable.
//
// EventRing is the client's queue of hot-path events; the NCCL profiler plugin
// (nccl_profiler/) queues its own records in a BoundedQueue.
//
// Thread-safety: any number of producers and consumers. The client uses many producers (the
// training threads, DDP hook threads) and one consumer (the background thread).
#ifndef CRUX_CLIENT_SRC_EVENT_RING_H_
#define CRUX_CLIENT_SRC_EVENT_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace crux::client::internal {

enum class EventKind : uint8_t {
  kIterationBegin,
  kIterationEnd,
  kComputeEnd,
  kCommStart,
  kCommEnd,
  kComm,  // A complete transfer: t_ns = start, t2_ns = end.
};

struct Event {
  int64_t t_ns = 0;   // steady_clock ns.
  int64_t t2_ns = 0;  // kComm only: end time.
  uint64_t bytes = 0;
  uint32_t peer = 0;
  EventKind kind = EventKind::kIterationBegin;
};

template <typename T>
class BoundedQueue {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  // `capacity` is rounded up to a power of two, at least 2.
  explicit BoundedQueue(size_t capacity);
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // False when full (the record is not stored).
  bool TryPush(const T& e) {
    size_t pos = enqueue_pos_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.seq.load(std::memory_order_acquire);
      intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          cell.event = e;
          cell.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // Full.
      } else {
        pos = enqueue_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  // False when empty.
  bool TryPop(T* out) {
    size_t pos = dequeue_pos_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& cell = cells_[pos & mask_];
      size_t seq = cell.seq.load(std::memory_order_acquire);
      intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
      if (diff == 0) {
        if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          *out = cell.event;
          cell.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // Empty.
      } else {
        pos = dequeue_pos_.load(std::memory_order_relaxed);
      }
    }
  }

  size_t capacity() const { return mask_ + 1; }

 private:
  struct Cell {
    std::atomic<size_t> seq;
    T event;
  };
  size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<size_t> enqueue_pos_{0};
  alignas(64) std::atomic<size_t> dequeue_pos_{0};
};

template <typename T>
BoundedQueue<T>::BoundedQueue(size_t capacity) {
  size_t c = 2;
  while (c < capacity) c <<= 1;
  mask_ = c - 1;
  cells_ = std::make_unique<Cell[]>(c);
  for (size_t i = 0; i < c; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
}

using EventRing = BoundedQueue<Event>;

}  // namespace crux::client::internal

#endif  // CRUX_CLIENT_SRC_EVENT_RING_H_
