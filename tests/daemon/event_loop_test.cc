// The daemon's threading pieces: WorkerThread (order, cancellation, joined shutdown) and the
// thread-safe Post of ManualEventLoop / TypedQueue. Run under ThreadSanitizer by the tsan preset
// (./test.sh), which is what checks the hand-overs below for races.
#include "crux/daemon/runtime/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace crux::daemon {
namespace {

TEST(WorkerThreadTest, RunsPostedWorkInOrderWithAndWithoutAToken) {
  auto log = std::make_shared<std::vector<int>>();
  std::promise<void> all;
  std::future<void> all_done = all.get_future();
  {
    WorkerThread w;
    w.Post([log] { log->push_back(1); });
    w.Post(WorkerThread::Work());  // Ignored.
    w.Post([log](CancellationToken token) { log->push_back(token.stop_requested() ? -2 : 2); });
    w.Post([log, p = std::make_shared<std::promise<void>>(std::move(all))] {
      log->push_back(3);
      p->set_value();
    });
    all_done.wait();
  }
  EXPECT_EQ(*log, (std::vector<int>{1, 2, 3}));
}

// A long item in stages that checks its token between stages (as a re-plan does between planner
// stages): the destructor requests cancellation, the item stops at its next check without
// delivering, and the destructor returns only after it ended (joined, never detached).
TEST(WorkerThreadTest, ShutdownCancelsALongItemThatChecksItsTokenAndJoinsIt) {
  struct State {
    std::atomic<bool> cancelled_at_start{true};
    std::atomic<bool> saw_cancel{false};
    std::atomic<bool> delivered{false};
    std::atomic<bool> finished{false};
  };
  auto state = std::make_shared<State>();
  std::promise<void> started;
  std::future<void> running = started.get_future();
  {
    WorkerThread w;
    w.Post([state,
            p = std::make_shared<std::promise<void>>(std::move(started))](CancellationToken token) {
      state->cancelled_at_start = token.stop_requested();
      p->set_value();
      while (true) {  // Stages without end: only cancellation stops this item.
        if (token.stop_requested()) {
          state->saw_cancel = true;
          break;
        }
        std::this_thread::yield();  // One "planner stage".
      }
      if (!token.stop_requested()) state->delivered = true;
      state->finished = true;
    });
    running.wait();
  }                                         // ~WorkerThread: cancel, then join.
  EXPECT_FALSE(state->cancelled_at_start);  // Cancellation comes only from the destructor.
  EXPECT_TRUE(state->saw_cancel);
  EXPECT_TRUE(state->finished);  // Joined: the item ended before the destructor returned.
  EXPECT_FALSE(state->delivered);
}

// Items queued behind the running one never start, their captures are destroyed by the
// destructor, and work posted while it shuts down (here: by the cancelled item itself) is
// dropped too: nothing runs after the destructor returns.
TEST(WorkerThreadTest, QueuedWorkIsDroppedAndWorkPostedDuringShutdownNeverRuns) {
  auto ran_queued = std::make_shared<std::atomic<bool>>(false);
  auto ran_late = std::make_shared<std::atomic<bool>>(false);
  auto capture = std::make_shared<int>(7);
  std::promise<void> started;
  std::future<void> running = started.get_future();
  {
    WorkerThread w;
    WorkerThread* self = &w;
    w.Post([self, ran_late,
            p = std::make_shared<std::promise<void>>(std::move(started))](CancellationToken token) {
      p->set_value();
      // Waits (without spinning) until cancellation is requested.
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, token, [] { return false; });
      self->Post([ran_late] { *ran_late = true; });  // The destructor is running: dropped.
    });
    w.Post([ran_queued, capture] { *ran_queued = true; });
    running.wait();
  }
  EXPECT_FALSE(*ran_queued);
  EXPECT_FALSE(*ran_late);
  EXPECT_EQ(capture.use_count(), 1);  // The dropped item's copy is gone.
}

// Work posted without a token cannot be cancelled: the destructor waits for all of it. The bound
// is that item's remaining run time; after shutdown_wait (here 0) the slow-shutdown hook is called
// once - which is what lets this item finish - and the destructor keeps waiting, then joins.
TEST(WorkerThreadTest, ShutdownWaitsForAnItemThatNeverChecksTheToken) {
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> open = gate->get_future().share();
  int hook_calls = 0;
  std::promise<void> started;
  std::future<void> running = started.get_future();
  {
    WorkerThread w(core::Duration::Zero(), [&](core::Duration waited) {
      EXPECT_GE(waited, core::Duration::Zero());
      ++hook_calls;
      gate->set_value();  // Only now can the item end: it cannot have ended before.
    });
    w.Post([open, finished, p = std::make_shared<std::promise<void>>(std::move(started))] {
      p->set_value();
      open.wait();  // A "huge re-plan" that never looks at a token.
      *finished = true;
    });
    running.wait();
  }
  EXPECT_EQ(hook_calls, 1);
  EXPECT_TRUE(*finished);  // Waited for, not detached.
}

TEST(WorkerThreadTest, DestroyingAnIdleWorkerCallsNoHook) {
  int hook_calls = 0;
  {
    WorkerThread w(core::Duration::Millis(60000), [&](core::Duration) { ++hook_calls; });
  }
  EXPECT_EQ(hook_calls, 0);
}

// ManualEventLoop::Post and TypedQueue::Push are the hand-over from the transport threads.
TEST(ManualEventLoopTest, WorkPostedFromOtherThreadsRunsOnTheLoopThreadInPushOrder) {
  ManualEventLoop loop;
  constexpr int kPerThread = 500;
  std::vector<int> seen_a;
  std::vector<int> seen_b;
  TypedQueue<int> queue("test", &loop, [&](int v) { seen_a.push_back(v); });
  std::thread a([&] {
    for (int i = 0; i < kPerThread; ++i) queue.Push(i);
  });
  std::thread b([&] {
    for (int i = 0; i < kPerThread; ++i) loop.Post([&seen_b, i] { seen_b.push_back(-1 - i); });
  });
  int ran = 0;
  while (ran < 2 * kPerThread) {
    ran += loop.RunUntilIdle();
    std::this_thread::yield();
  }
  a.join();
  b.join();
  EXPECT_EQ(loop.RunUntilIdle(), 0);
  EXPECT_EQ(queue.depth(), 0);
  ASSERT_EQ(seen_a.size(), static_cast<size_t>(kPerThread));
  for (int i = 0; i < kPerThread; ++i) EXPECT_EQ(seen_a[i], i);
  ASSERT_EQ(seen_b.size(), static_cast<size_t>(kPerThread));
  for (int i = 0; i < kPerThread; ++i) EXPECT_EQ(seen_b[i], -1 - i);
}

}  // namespace
}  // namespace crux::daemon
