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
#ifndef CRUX_DAEMON_EVENT_LOOP_H_
#define CRUX_DAEMON_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "crux/core/units.h"

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

// A typed, counted queue onto a loop: Push() from any thread, the handler runs on the loop
// thread in push order. depth() is the number of items pushed but not yet handled.
template <typename T>
class TypedQueue {
 public:
  TypedQueue(std::string name, EventLoop* loop, std::function<void(T)> handler)
      : name_(std::move(name)), loop_(loop), handler_(std::move(handler)) {}

  void Push(T item) {
    depth_.fetch_add(1, std::memory_order_relaxed);
    auto shared = std::make_shared<T>(std::move(item));
    loop_->Post([this, shared] {
      depth_.fetch_sub(1, std::memory_order_relaxed);
      handler_(std::move(*shared));
    });
  }
  int64_t depth() const { return depth_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  EventLoop* loop_;
  std::function<void(T)> handler_;
  std::atomic<int64_t> depth_{0};
};

// Tests: single-threaded fake time. Post() is thread-safe (the transport threads may post).
class ManualEventLoop final : public EventLoop {
 public:
  explicit ManualEventLoop(int64_t unix_base_ms = 1700000000000) : unix_base_ms_(unix_base_ms) {}
  core::Duration Now() const override { return now_; }
  int64_t UnixMs() const override { return unix_base_ms_ + now_.nanos() / 1000000; }
  void Post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
  }
  void RunAfter(core::Duration delay, std::function<void()> fn) override {
    timers_.emplace(std::make_pair(now_ + delay, seq_++), std::move(fn));
  }
  // Runs posted work until none is left (timers are not advanced). Returns items run.
  int RunUntilIdle();
  // Moves time forward by `d`, running due timers in time order and posted work in between.
  void Advance(core::Duration d);
  size_t pending_timers() const { return timers_.size(); }

 private:
  int64_t unix_base_ms_;
  core::Duration now_;
  std::mutex mu_;
  std::deque<std::function<void()>> posted_;
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

// One background thread running posted work in order (the planner's re-plans, so the loop keeps
// serving messages meanwhile). Post() is thread-safe. The destructor drops queued items and waits
// up to `shutdown_wait` for the one in progress; if that is still running (a huge re-plan) the
// thread is detached so that shutdown stays bounded - posted work must therefore own (share)
// everything it touches.
class WorkerThread {
 public:
  explicit WorkerThread(core::Duration shutdown_wait = core::Duration::Millis(2000));
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;
  void Post(std::function<void()> fn);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // Shared with the thread (which may outlive a detach).
  core::Duration shutdown_wait_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_EVENT_LOOP_H_
