#include "crux/daemon/runtime/event_loop.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <thread>

namespace crux::daemon {

int ManualEventLoop::RunUntilIdle() {
  int ran = 0;
  for (;;) {
    std::function<void()> fn;
    {
      MutexLock lock(&mu_);
      if (posted_.empty()) return ran;
      fn = std::move(posted_.front());
      posted_.pop_front();
    }
    fn();
    ++ran;
  }
}

void ManualEventLoop::Advance(core::Duration d) {
  const core::Duration end = now_ + d;
  RunUntilIdle();
  while (!timers_.empty() && timers_.begin()->first.first <= end) {
    auto it = timers_.begin();
    now_ = it->first.first;
    auto fn = std::move(it->second);
    timers_.erase(it);
    fn();
    RunUntilIdle();
  }
  now_ = end;
  RunUntilIdle();
}

struct AsioEventLoop::Impl {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
};

AsioEventLoop::AsioEventLoop() : impl_(std::make_unique<Impl>()) {}
AsioEventLoop::~AsioEventLoop() = default;

core::Duration AsioEventLoop::Now() const {
  return core::Duration::Nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

int64_t AsioEventLoop::UnixMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void AsioEventLoop::Post(std::function<void()> fn) { boost::asio::post(impl_->io, std::move(fn)); }

void AsioEventLoop::RunAfter(core::Duration delay, std::function<void()> fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(
      impl_->io, std::chrono::nanoseconds(std::max<int64_t>(0, delay.nanos())));
  timer->async_wait([timer, f = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) f();
  });
}

void AsioEventLoop::Run() { impl_->io.run(); }

void AsioEventLoop::Stop() {
  impl_->guard.reset();
  impl_->io.stop();
}

void* AsioEventLoop::io_context() { return &impl_->io; }

struct WorkerThread::Impl {
  Mutex mu;
  CondVar cv;  // Work queued, stop requested, or the thread exited.
  std::deque<CancellableWork> queue CRUX_GUARDED_BY(mu);
  bool stop CRUX_GUARDED_BY(mu) = false;
  bool exited CRUX_GUARDED_BY(mu) = false;
  std::stop_source cancel;  // Thread-safe; requested by the destructor.
  std::thread thread;       // Started by the constructor, joined by the destructor.

  void Loop() CRUX_EXCLUDES(mu) {
    pthread_setname_np(pthread_self(), "crux-worker");  // For top -H, perf, gdb.
    const CancellationToken token = cancel.get_token();
    for (;;) {
      CancellableWork fn;
      {
        MutexLock lock(&mu);
        cv.Wait(&mu, [this]() CRUX_REQUIRES(mu) { return stop || !queue.empty(); });
        if (stop) break;
        fn = std::move(queue.front());
        queue.pop_front();
      }
      fn(token);
    }
    MutexLock lock(&mu);
    exited = true;
    cv.NotifyAll();
  }
};

WorkerThread::WorkerThread(core::Duration shutdown_wait, SlowShutdownHook on_slow_shutdown)
    : impl_(std::make_unique<Impl>()),
      shutdown_wait_(shutdown_wait),
      on_slow_shutdown_(std::move(on_slow_shutdown)) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->Loop(); });
}

WorkerThread::~WorkerThread() {
  std::deque<CancellableWork> dropped;
  {
    MutexLock lock(&impl_->mu);
    impl_->stop = true;
    dropped.swap(impl_->queue);
  }
  dropped.clear();  // Their captures are destroyed here, without the lock held.
  impl_->cancel.request_stop();
  impl_->cv.NotifyAll();
  const auto asked = std::chrono::steady_clock::now();
  bool exited;
  {
    MutexLock lock(&impl_->mu);
    // At most a day per wait (a huge shutdown_wait would overflow the deadline).
    const int64_t wait_ns = std::clamp<int64_t>(shutdown_wait_.nanos(), 0, 86400'000'000'000);
    exited = impl_->cv.WaitFor(&impl_->mu, std::chrono::nanoseconds(wait_ns),
                               [this]() CRUX_REQUIRES(impl_->mu) { return impl_->exited; });
  }
  if (!exited) {
    const core::Duration waited =
        core::Duration::Nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - asked)
                                  .count());
    if (on_slow_shutdown_) {
      on_slow_shutdown_(waited);
    } else {
      spdlog::warn(
          "shutdown: the background item in progress (a re-plan) has not ended {} ms after "
          "cancellation was requested; waiting for it to finish",
          waited.nanos() / 1000000);
    }
  }
  impl_->thread.join();
}

void WorkerThread::Post(Work fn) {
  if (!fn) return;
  Post(CancellableWork([f = std::move(fn)](const CancellationToken&) { f(); }));
}

void WorkerThread::Post(CancellableWork fn) {
  if (!fn) return;
  {
    MutexLock lock(&impl_->mu);
    if (impl_->stop) return;  // Shutting down: dropped (destroyed below, without the lock).
    impl_->queue.push_back(std::move(fn));
  }
  impl_->cv.NotifyAll();
}

}  // namespace crux::daemon
