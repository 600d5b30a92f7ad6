#include "event_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace crux::client::internal {
namespace {

TEST(EventRingTest, FifoAndCapacity) {
  EventRing ring(5);  // Rounded up to 8.
  EXPECT_EQ(ring.capacity(), 8u);
  Event e;
  EXPECT_FALSE(ring.TryPop(&e));
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(ring.TryPush({i, 0, static_cast<uint64_t>(i), 0, EventKind::kCommStart}));
  }
  EXPECT_FALSE(ring.TryPush({99, 0, 0, 0, EventKind::kCommStart}));  // Full: refused.
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(ring.TryPop(&e));
    EXPECT_EQ(e.t_ns, i);
    EXPECT_EQ(e.bytes, static_cast<uint64_t>(i));
  }
  EXPECT_FALSE(ring.TryPop(&e));
  // Wraps around.
  for (int round = 0; round < 100; ++round) {
    ASSERT_TRUE(ring.TryPush({round, 0, 0, 0, EventKind::kIterationBegin}));
    ASSERT_TRUE(ring.TryPop(&e));
    EXPECT_EQ(e.t_ns, round);
  }
}

TEST(EventRingTest, ManyProducersOneConsumerLoseNothing) {
  EventRing ring(1024);
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 20000;
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        Event e{i, 0, 0, static_cast<uint32_t>(p), EventKind::kCommStart};
        while (!ring.TryPush(e)) std::this_thread::yield();
      }
      done.fetch_add(1);
    });
  }
  std::vector<int> next(kProducers, 0);
  int received = 0;
  Event e;
  while (received < kProducers * kPerProducer) {
    if (ring.TryPop(&e)) {
      // Per producer, events arrive in order and exactly once.
      ASSERT_EQ(e.t_ns, next[e.peer]);
      ++next[e.peer];
      ++received;
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(done.load(), kProducers);
  EXPECT_FALSE(ring.TryPop(&e));
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

}  // namespace
}  // namespace crux::client::internal
