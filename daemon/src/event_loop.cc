#include "crux/daemon/event_loop.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <thread>

namespace crux::daemon {

int ManualEventLoop::RunUntilIdle() {
  int ran = 0;
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
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
  std::mutex mu;
  std::condition_variable cv;
  std::condition_variable idle_cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  bool busy = false;
  std::thread thread;

  static void Loop(std::shared_ptr<Impl> self) {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(self->mu);
        self->cv.wait(lock, [&] { return self->stop || !self->queue.empty(); });
        if (self->stop) return;
        fn = std::move(self->queue.front());
        self->queue.pop_front();
        self->busy = true;
      }
      fn();
      {
        std::lock_guard<std::mutex> lock(self->mu);
        self->busy = false;
      }
      self->idle_cv.notify_all();
    }
  }
};

WorkerThread::WorkerThread(core::Duration shutdown_wait)
    : impl_(std::make_shared<Impl>()), shutdown_wait_(shutdown_wait) {
  impl_->thread = std::thread(&Impl::Loop, impl_);
}

WorkerThread::~WorkerThread() {
  bool idle = false;
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->stop = true;
    impl_->queue.clear();
    idle = impl_->idle_cv.wait_for(lock, std::chrono::nanoseconds(shutdown_wait_.nanos()),
                                   [this] { return !impl_->busy; });
  }
  impl_->cv.notify_all();
  if (idle) {
    impl_->thread.join();
  } else {
    impl_->thread.detach();  // Still running a long item; it exits when that is done.
  }
}

void WorkerThread::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->queue.push_back(std::move(fn));
  }
  impl_->cv.notify_one();
}

}  // namespace crux::daemon
