// The daemon's event loop and the typed queues its modules talk through.
//
// Every module of cruxd runs on one loop thread; nothing in a module is locked. Other threads
// (the ZeroMQ I/O threads of the RouterServers, signal handling) hand work over only through
// Post() / TypedQueue::Push(), which are thread-safe.
//
// Two loops: AsioEventLoop (Boost.Asio io_context + steady timers; what cruxd runs) and
// ManualEventLoop (tests: a fake clock advanced by hand, posted work and due timers run by
// RunUntilIdle/Advance on the calling thread), so lease expiry and debouncing are tested
// without sleeping.
#ifndef CRUX_DAEMON_RUNTIME_EVENT_LOOP_H_
#define CRUX_DAEMON_RUNTIME_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/sync/thread_annotations.h"

namespace crux::daemon {

class EventLoop {
 public:
  virtual ~EventLoop() = default;
  // Monotonic time (loop thread).
  virtual core::Duration Now() const = 0;
  // Wall-clock Unix time in ms (for persisted timestamps and `last_seen_ms`).
  virtual int64_t UnixMs() const = 0;
  // Thread-safe: runs `fn` on the loop thread soon.
  virtual void Post(std::function<void()> fn) = 0;
  // Loop thread: runs `fn` on the loop thread after `delay` (>= 0). No cancellation: callers
  // keep a generation number when they need to ignore a stale timer.
  virtual void RunAfter(core::Duration delay, std::function<void()> fn) = 0;
};

// A typed, counted queue onto a loop: Push() / PushBatch() from any thread, the handler runs on
// the loop thread in push order. PushBatch() hands the items the transport read in one wake-up
// over as one posted task (one hand-off, not one per item). The handler takes one item (a batch
// is handed to it item by item) or a batch (Push(item) is a batch of one). depth() is the number
// of items pushed but not yet handled.
template <typename T>
class TypedQueue {
 public:
  using ItemHandler = std::function<void(T)>;
  using BatchHandler = std::function<void(std::vector<T>)>;

  TypedQueue(std::string name, EventLoop* loop, ItemHandler handler)
      : TypedQueue(std::move(name), loop, BatchHandler([h = std::move(handler)](std::vector<T> v) {
                     for (T& item : v) h(std::move(item));
                   })) {}
  TypedQueue(std::string name, EventLoop* loop, BatchHandler handler)
      : name_(std::move(name)), loop_(loop), handler_(std::move(handler)) {}

  void Push(T item) {
    std::vector<T> one;
    one.push_back(std::move(item));
    PushBatch(std::move(one));
  }
  void PushBatch(std::vector<T> items) {
    if (items.empty()) return;
    const int64_t n = static_cast<int64_t>(items.size());
    depth_.fetch_add(n, std::memory_order_relaxed);
    auto shared = std::make_shared<std::vector<T>>(std::move(items));
    loop_->Post([this, shared, n] {
      depth_.fetch_sub(n, std::memory_order_relaxed);
      handler_(std::move(*shared));
    });
  }
  int64_t depth() const { return depth_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  EventLoop* loop_;
  BatchHandler handler_;
  std::atomic<int64_t> depth_{0};
};

// Tests: single-threaded fake time. Post() is thread-safe (the transport threads may post).
class ManualEventLoop final : public EventLoop {
 public:
  explicit ManualEventLoop(int64_t unix_base_ms = 1700000000000) : unix_base_ms_(unix_base_ms) {}
  core::Duration Now() const override { return now_; }
  int64_t UnixMs() const override { return unix_base_ms_ + now_.nanos() / 1000000; }
  void Post(std::function<void()> fn) override CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    posted_.push_back(std::move(fn));
  }
  void RunAfter(core::Duration delay, std::function<void()> fn) override {
    timers_.emplace(std::make_pair(now_ + delay, seq_++), std::move(fn));
  }
  // Runs posted work until none is left (timers are not advanced). Returns items run.
  int RunUntilIdle() CRUX_EXCLUDES(mu_);
  // Moves time forward by `d`, running due timers in time order and posted work in between.
  void Advance(core::Duration d) CRUX_EXCLUDES(mu_);
  size_t pending_timers() const { return timers_.size(); }

 private:
  int64_t unix_base_ms_;
  core::Duration now_;  // Loop thread (the test's thread) only, like timers_ and seq_.
  Mutex mu_;
  std::deque<std::function<void()>> posted_ CRUX_GUARDED_BY(mu_);
  std::multimap<std::pair<core::Duration, uint64_t>, std::function<void()>> timers_;
  uint64_t seq_ = 0;
};

// cruxd: Boost.Asio. Run() blocks the calling thread (the loop thread) until Stop().
class AsioEventLoop final : public EventLoop {
 public:
  AsioEventLoop();
  ~AsioEventLoop() override;
  core::Duration Now() const override;
  int64_t UnixMs() const override;
  void Post(std::function<void()> fn) override;
  void RunAfter(core::Duration delay, std::function<void()> fn) override;
  void Run();
  void Stop();  // Thread-safe.
  // The io_context, for signal sets (type-erased to keep Asio out of this header).
  void* io_context();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What cancellable work posted to a WorkerThread receives: C++20's std::stop_token, so that code
// below the daemon (core's planner stages included) can take it without depending on daemon/.
// Thread-safe; stop_requested() is one atomic load (cheap enough to check in inner loops).
using CancellationToken = std::stop_token;

// One background thread running posted work in order (the planner's re-plans, so the loop keeps
// serving messages meanwhile).
//
// Cancellation contract (work posted with Post(CancellableWork)): the work receives a
// CancellationToken and must check token.stop_requested() between its stages - for a re-plan:
// before each planner stage and before delivering its result - and, once it is true, return as
// soon as it can without delivering a result (and without side effects outside what it owns).
// Cancellation is requested only when the WorkerThread is destroyed.
//
// Shutdown (the destructor): items queued but not started are dropped (never run; their
// captures are destroyed), cancellation is requested, and the destructor JOINS the thread: no
// posted work runs after the destructor returns, so work may use anything that outlives the
// WorkerThread (declare the WorkerThread after what its work touches). The wait is bounded by
// the item in progress: for cancellable work, by the longest stretch between two token checks;
// for work posted without a token (Post(Work), which cannot be cancelled), by all of its
// remaining run time. When the item has not ended `shutdown_wait` after the cancellation request,
// `on_slow_shutdown` is called once (default: a spdlog warning) and the destructor keeps waiting.
//
// Thread-safety: Post() from any thread, including from posted work; Post() after the destructor
// started drops the item. The destructor must not run on the worker thread (from posted work).
class WorkerThread {
 public:
  using Work = std::function<void()>;
  using CancellableWork = std::function<void(CancellationToken)>;
  // Called on the destructor's thread with the time waited so far (see the class comment).
  using SlowShutdownHook = std::function<void(core::Duration waited)>;

  explicit WorkerThread(core::Duration shutdown_wait = core::Duration::Millis(2000),
                        SlowShutdownHook on_slow_shutdown = nullptr);
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Runs `fn` after the items posted before it. A null `fn` is ignored.
  void Post(Work fn);
  void Post(CancellableWork fn);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  core::Duration shutdown_wait_;
  SlowShutdownHook on_slow_shutdown_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_RUNTIME_EVENT_LOOP_H_
