// StoreWriter: the daemon's store writes, off the event loop. Every write after start-up goes
// through it, so the Store (one SQLite connection) is used by one thread: writes run in
// submission order on a thread of their own, and each one's outcome comes back to the loop
// (`done`, posted). A plan's 10,000-row transaction (~0.4-0.6 s at 10,000 jobs) or a burst of
// profile writes no longer stops the loop: messages keep flowing while the store works.
//
// Ordering: FIFO, one write at a time, so a job's row is written before a plan row that names
// it and deleted after. The loop must not depend on a write having happened before its `done`
// (a plan run stays in flight until its store write is done: PlanApplier).
//
// Inline mode (threaded = false: tests on a ManualEventLoop, deterministic): Submit runs the write
// and its `done` at once, on the caller's thread.
//
// Shutdown: the destructor runs every write already submitted, then joins; `done` callbacks that
// would reach the loop after the writer is gone are dropped (the daemon is gone with it).
//
// Thread-safety: Submit, pending() from the loop thread; the writes run on the writer thread
// (inline: the caller's). Store reads at start-up (Daemon::Restore) happen before the first
// Submit, on the loop thread.
#ifndef CRUX_DAEMON_STORE_STORE_WRITER_H_
#define CRUX_DAEMON_STORE_STORE_WRITER_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "crux/core/base/status.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/store/store.h"

namespace crux::daemon {

class StoreWriter {
 public:
  using Write = std::function<core::Status(Store&)>;
  using Done = std::function<void(core::Status)>;  // On the loop thread.

  // `store` and `loop` must outlive the writer.
  StoreWriter(Store* store, EventLoop* loop, bool threaded);
  ~StoreWriter();
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // Queues `write`; `done` (may be empty) gets its status on the loop thread.
  void Submit(Write write, Done done = {});
  // Writes submitted and not yet done (running included).
  size_t pending() const;
  bool threaded() const { return impl_ != nullptr; }

 private:
  struct Impl;
  Store* store_;
  std::shared_ptr<Impl> impl_;  // Null inline.
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STORE_STORE_WRITER_H_
