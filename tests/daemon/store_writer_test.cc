// StoreWriter: the daemon's store writes on a thread of their own, in order, outcomes back on
// the loop. Real SQLite files; the loop is a ManualEventLoop pumped by the test thread (its Post
// is thread-safe), so the writer thread is real and the checks stay deterministic.
#include "crux/daemon/store/store_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/store/store.h"
#include "faulty_store.h"

namespace crux::daemon {
namespace {

namespace fs = std::filesystem;

class StoreWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("crux_store_writer_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    auto s = OpenSqliteStore((dir_ / "cruxd.sqlite").string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  // Runs posted work until `done` callbacks have run, or 10 s pass.
  void PumpUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      if (loop_.RunUntilIdle() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  fs::path dir_;
  std::unique_ptr<Store> store_;
  ManualEventLoop loop_;
};

TEST_F(StoreWriterTest, WritesRunInOrderOffTheLoopAndReportBackOnTheLoop) {
  StoreWriter writer(store_.get(), &loop_, /*threaded=*/true);
  ASSERT_TRUE(writer.threaded());
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::thread::id writer_thread;
  writer.Submit([open, &writer_thread](Store& s) {
    writer_thread = std::this_thread::get_id();
    open.wait();  // The loop must not wait for this.
    return s.PutMeta("k0", "v0");
  });
  std::vector<int> order;
  std::vector<std::thread::id> done_threads;
  for (int i = 1; i <= 100; ++i) {
    writer.Submit(
        [i](Store& s) { return s.PutMeta("k" + std::to_string(i), "v" + std::to_string(i)); },
        [i, &order, &done_threads](core::Status st) {
          EXPECT_TRUE(st.ok()) << st.ToString();
          order.push_back(i);
          done_threads.push_back(std::this_thread::get_id());
        });
  }
  EXPECT_EQ(writer.pending(), 101u) << "every Submit returned while the first write was held";
  EXPECT_TRUE(order.empty());
  gate.set_value();
  PumpUntil([&] { return order.size() == 100; });
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i + 1);
  for (const auto& id : done_threads) EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_NE(writer_thread, std::this_thread::get_id());
  EXPECT_EQ(writer.pending(), 0u);
  auto v = store_->GetMeta("k100");
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ(**v, "v100");
}

TEST_F(StoreWriterTest, AFailedWriteComesBackAsItsStatusAndTheNextOnesStillRun) {
  testing::FaultyStore faulty(store_.get());
  faulty.fail_method = "PutMeta";
  StoreWriter writer(&faulty, &loop_, /*threaded=*/true);
  std::vector<core::Status> results;
  writer.Submit([](Store& s) { return s.PutMeta("a", "1"); },
                [&](core::Status st) { results.push_back(st); });
  writer.Submit(
      [](Store& s) {
        return s.PutLinkOverride({"x->y", 3, 0, 1});
      },
      [&](core::Status st) { results.push_back(st); });
  PumpUntil([&] { return results.size() == 2; });
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].code(), core::StatusCode::kInternal);
  EXPECT_NE(results[0].message().find("injected"), std::string::npos);
  EXPECT_TRUE(results[1].ok()) << results[1].ToString();
}

TEST_F(StoreWriterTest, DestructionRunsEverySubmittedWriteAndDropsLateOutcomes) {
  std::atomic<int> written = 0;
  int reported = 0;
  {
    StoreWriter writer(store_.get(), &loop_, /*threaded=*/true);
    for (int i = 0; i < 200; ++i) {
      writer.Submit(
          [i, &written](Store& s) {
            ++written;
            return s.PutMeta("d" + std::to_string(i), "x");
          },
          [&reported](core::Status) { ++reported; });
    }
  }  // Joins after the 200 writes.
  EXPECT_EQ(written.load(), 200);
  loop_.RunUntilIdle();
  EXPECT_EQ(reported, 0) << "outcomes posted after the writer is gone are dropped";
  auto v = store_->GetMeta("d199");
  ASSERT_TRUE(v.ok() && v->has_value());
}

TEST_F(StoreWriterTest, InlineModeRunsTheWriteAndItsOutcomeAtOnce) {
  StoreWriter writer(store_.get(), &loop_, /*threaded=*/false);
  EXPECT_FALSE(writer.threaded());
  bool done = false;
  writer.Submit([](Store& s) { return s.PutMeta("i", "1"); },
                [&done](core::Status st) { done = st.ok(); });
  EXPECT_TRUE(done);
  EXPECT_EQ(writer.pending(), 0u);
  writer.Submit({});  // An empty write is ignored.
}

}  // namespace
}  // namespace crux::daemon
