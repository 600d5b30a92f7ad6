#include "crux/daemon/store/store_writer.h"

#include <pthread.h>

#include <deque>
#include <thread>
#include <utility>

#include "crux/sync/thread_annotations.h"

namespace crux::daemon {

struct StoreWriter::Impl {
  struct Item {
    Write write;
    Done done;
  };
  EventLoop* loop = nullptr;
  Store* store = nullptr;
  mutable Mutex mu;
  CondVar cv;
  std::deque<Item> queue CRUX_GUARDED_BY(mu);
  size_t running CRUX_GUARDED_BY(mu) = 0;
  bool stopping CRUX_GUARDED_BY(mu) = false;
  bool alive CRUX_GUARDED_BY(mu) = true;  // False once the writer is destroyed: no more `done`.
  std::thread thread;

  void Run(std::shared_ptr<Impl> self) {
    while (true) {
      Item item;
      {
        MutexLock lock(&mu);
        cv.Wait(&mu, [this]() CRUX_REQUIRES(mu) { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // Stopping, everything written.
        item = std::move(queue.front());
        queue.pop_front();
        running = 1;
      }
      core::Status s = item.write(*store);
      {
        MutexLock lock(&mu);
        running = 0;
        if (!alive || !item.done) continue;
      }
      loop->Post([self, done = std::move(item.done), s = std::move(s)]() mutable {
        bool alive_now = false;
        {
          MutexLock lock(&self->mu);
          alive_now = self->alive;
        }
        if (alive_now) done(std::move(s));
      });
    }
  }
};

StoreWriter::StoreWriter(Store* store, EventLoop* loop, bool threaded) : store_(store) {
  if (!threaded) return;
  impl_ = std::make_shared<Impl>();
  impl_->loop = loop;
  impl_->store = store;
  impl_->thread = std::thread([impl = impl_] {
    pthread_setname_np(pthread_self(), "crux-store");
    impl->Run(impl);
  });
}

StoreWriter::~StoreWriter() {
  if (!impl_) return;
  {
    MutexLock lock(&impl_->mu);
    impl_->stopping = true;
    impl_->alive = false;
  }
  impl_->cv.NotifyAll();
  impl_->thread.join();  // After every submitted write has run.
}

void StoreWriter::Submit(Write write, Done done) {
  if (!write) return;
  if (!impl_) {
    core::Status s = write(*store_);
    if (done) done(std::move(s));
    return;
  }
  {
    MutexLock lock(&impl_->mu);
    impl_->queue.push_back({std::move(write), std::move(done)});
  }
  impl_->cv.NotifyOne();
}

size_t StoreWriter::pending() const {
  if (!impl_) return 0;
  MutexLock lock(&impl_->mu);
  return impl_->queue.size() + impl_->running;
}

}  // namespace crux::daemon
