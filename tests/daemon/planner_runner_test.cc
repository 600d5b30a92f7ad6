// PlannerRunner with a hand-driven executor: one run in flight at a time, requests arriving
// during a run are not lost (one more run follows), and JobSpec building.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "crux/daemon/config.h"
#include "crux/daemon/planner_runner.h"
#include "crux/spec/topology_spec.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using namespace crux::daemon::testing;  // NOLINT(build/namespaces)

constexpr core::Duration kDebounce = core::Duration::Millis(20);

class PlannerRunnerTest : public ::testing::Test {
 protected:
  PlannerRunnerTest()
      : topo_(spec::ParseTopology(EmbeddedTopologyYaml(), "").value(), "embedded"),
        tracker_(&topo_.nominal(),
                 JobTracker::Options{
                     {10, 12}, 5, core::Duration::Millis(1000), core::Duration::Millis(5000)}),
        runner_(
            &loop_, &topo_, &tracker_, ToPlannerOptions(PlannerConfig()), kDebounce,
            [this](PlanResult r) { results_.push_back(std::move(r)); },
            [this](std::function<void()> work) { work_.push_back(std::move(work)); }) {}

  void Register(const std::string& id, std::vector<std::string> hosts) {
    bool known = false;
    Refusal r = tracker_.Register(testing::Register(id, hosts).register_job(), "p", "", loop_.Now(),
                                  0, &known);
    ASSERT_FALSE(Refused(r)) << r.message;
  }
  void RunWork() {
    auto work = std::move(work_);
    work_.clear();
    for (auto& w : work) w();
    loop_.RunUntilIdle();
  }

  ManualEventLoop loop_;
  TopologyManager topo_;
  JobTracker tracker_;
  std::vector<PlanResult> results_;
  std::vector<std::function<void()>> work_;
  PlannerRunner runner_;
};

TEST_F(PlannerRunnerTest, OneRunInFlightAndNoEventLost) {
  Register("a", {"host0", "host4"});
  runner_.Request("a");
  loop_.Advance(kDebounce);
  ASSERT_EQ(work_.size(), 1u);
  EXPECT_TRUE(runner_.in_flight());
  // Meanwhile b registers: its debounce fires while the first run is still going.
  Register("b", {"host1", "host5"});
  runner_.Request("b");
  loop_.Advance(kDebounce);
  EXPECT_EQ(work_.size(), 1u) << "never two runs at once";
  RunWork();  // The first run completes: its result (a only) arrives, a second run is armed.
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].desired.size(), 1u);
  EXPECT_EQ(results_[0].reason, "a");
  EXPECT_FALSE(runner_.in_flight());
  loop_.Advance(kDebounce);
  ASSERT_EQ(work_.size(), 1u);
  RunWork();
  ASSERT_EQ(results_.size(), 2u);
  EXPECT_EQ(results_[1].desired.size(), 2u) << "b's event was not lost";
  EXPECT_EQ(results_[1].reason, "b");
  EXPECT_EQ(runner_.runs(), 2u);
  EXPECT_TRUE(results_[1].ok);
  EXPECT_GT(results_[1].plan.dag.edges.size(), 0u);  // a and b share tor0/tor1 uplinks.
}

TEST_F(PlannerRunnerTest, JobsWithoutTrafficAreNotPlannedButGetTheTopLevel) {
  Register("a", {"host0", "host4"});
  v1::RegisterJob quiet = testing::Register("q", {"host1", "host5"}, 0).register_job();
  bool known = false;
  ASSERT_FALSE(Refused(tracker_.Register(quiet, "p", "", loop_.Now(), 0, &known)));
  PlanResult r = runner_.Compute("now");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.plan_jobs, std::vector<std::string>{"a"});
  ASSERT_EQ(r.desired.count("q"), 1u);
  EXPECT_EQ(r.desired["q"].level(), 0u);
  EXPECT_EQ(r.desired["q"].flows_size(), 0);
  EXPECT_EQ(runner_.runs(), 0u) << "Compute has no side effects";
}

TEST_F(PlannerRunnerTest, JobSpecFollowsTheProfile) {
  Register("a", {"host0", "host4"});
  const JobEntry& j = *tracker_.Find("a");
  auto spec = BuildJobSpec(topo_.current(), j);
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(spec->has_value());
  EXPECT_EQ((*spec)->pattern, core::TrafficPattern::kRingAllReduce);
  EXPECT_EQ((*spec)->pattern_bytes, core::Bytes::Of(1000000000));
  EXPECT_EQ((*spec)->gpus_per_host, 8);
  v1::ProfileReport p = Profile("a", 250, 3, false, 1, 5000).profile_report();
  p.set_flops_per_iteration(1e15);
  p.set_overlap_start(0.25);
  bool changed = false;
  ASSERT_FALSE(Refused(tracker_.Report(p, "p", "", loop_.Now(), 0, &changed)));
  EXPECT_TRUE(changed);
  spec = BuildJobSpec(topo_.current(), *tracker_.Find("a"));
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ((*spec)->compute_time, core::Duration::Millis(250));
  EXPECT_EQ((*spec)->pattern_bytes, core::Bytes::Of(5000));
  EXPECT_DOUBLE_EQ((*spec)->flops_per_iteration->value(), 1e15);
  EXPECT_DOUBLE_EQ((*spec)->overlap_start, 0.25);
  EXPECT_EQ(tracker_.Find("a")->state, v1::JOB_STATE_PROFILING);  // 3 < 5 samples.
}

TEST(SignificantChangeTest, ThresholdPerFigure) {
  v1::ProfileReport a = Profile("a", 100, 10, true, 1, 1000000).profile_report();
  auto* peer = a.add_peers();
  peer->set_local_nic("host0-nic0");
  peer->set_remote_nic("host4-nic0");
  peer->set_bytes(1000);
  v1::ProfileReport b = a;
  EXPECT_FALSE(SignificantChange(a, b, 10));
  b.set_compute_time_ns(a.compute_time_ns() * 109 / 100);  // +9%.
  b.set_bytes_per_iteration(a.bytes_per_iteration() * 95 / 100);
  b.mutable_peers(0)->set_bytes(1080);
  b.set_overlap_start(a.overlap_start() - 0.05);
  b.set_samples(99);  // Not a planning figure.
  EXPECT_FALSE(SignificantChange(a, b, 10));
  EXPECT_TRUE(SignificantChange(a, b, 0)) << "0 = every report counts";
  EXPECT_TRUE(SignificantChange(a, b, 4));
  v1::ProfileReport c = a;
  c.set_iteration_period_ns(a.iteration_period_ns() * 2);
  EXPECT_TRUE(SignificantChange(a, c, 10));
  c = a;
  c.set_flops_per_iteration(1e12);  // 0 -> something.
  EXPECT_TRUE(SignificantChange(a, c, 10));
  c = a;
  c.mutable_peers(0)->set_bytes(1200);
  EXPECT_TRUE(SignificantChange(a, c, 10));
  c = a;
  c.mutable_peers(0)->set_remote_nic("host5-nic0");
  EXPECT_TRUE(SignificantChange(a, c, 50)) << "another peer";
  c = a;
  c.add_peers()->CopyFrom(a.peers(0));
  EXPECT_TRUE(SignificantChange(a, c, 50));
  c = a;
  c.set_overlap_start(a.overlap_start() - 0.2);
  EXPECT_TRUE(SignificantChange(a, c, 10));
}

TEST_F(PlannerRunnerTest, JitterBelowTheThresholdKeepsThePlannedProfile) {
  Register("a", {"host0", "host4"});
  bool state = false, plan = false;
  // 5 samples: SCHEDULED at once (profiling_samples 5).
  v1::ProfileReport p = Profile("a", 200, 5, false, 1, 5000000).profile_report();
  ASSERT_FALSE(Refused(tracker_.Report(p, "p", "", loop_.Now(), 0, &state, &plan)));
  EXPECT_TRUE(state);
  EXPECT_TRUE(plan) << "first profile";
  for (int i = 0; i < 20; ++i) {
    v1::ProfileReport q = p;
    const double jitter = 1.0 + ((i % 2) ? 0.02 : -0.02) * (i % 5);  // Up to +-8%.
    q.set_compute_time_ns(static_cast<uint64_t>(static_cast<double>(p.compute_time_ns()) * jitter));
    q.set_bytes_per_iteration(
        static_cast<uint64_t>(static_cast<double>(p.bytes_per_iteration()) / jitter));
    q.set_samples(6 + static_cast<uint32_t>(i));
    ASSERT_FALSE(Refused(tracker_.Report(q, "p", "", loop_.Now(), 0, &state, &plan)));
    EXPECT_FALSE(state);
    EXPECT_FALSE(plan) << "report " << i;
    EXPECT_EQ(tracker_.Find("a")->profile->samples(), q.samples()) << "latest is kept";
  }
  auto spec = BuildJobSpec(topo_.current(), *tracker_.Find("a"));
  ASSERT_TRUE(spec.ok() && spec->has_value());
  EXPECT_EQ((*spec)->compute_time, core::Duration::Millis(200)) << "planned figure, not jitter";
  EXPECT_EQ((*spec)->pattern_bytes, core::Bytes::Of(5000000));
  // A real change (+50% compute) counts and becomes the planned figure.
  v1::ProfileReport big = p;
  big.set_compute_time_ns(p.compute_time_ns() * 3 / 2);
  ASSERT_FALSE(Refused(tracker_.Report(big, "p", "", loop_.Now(), 0, &state, &plan)));
  EXPECT_TRUE(plan);
  spec = BuildJobSpec(topo_.current(), *tracker_.Find("a"));
  EXPECT_EQ((*spec)->compute_time, core::Duration::Millis(300));
  // Threshold 0: every report counts (the old behaviour).
  JobTracker::Options o = tracker_.options();
  o.replan_threshold_pct = 0;
  tracker_.SetOptions(o);
  v1::ProfileReport tiny = big;
  tiny.set_compute_time_ns(big.compute_time_ns() + 1);
  ASSERT_FALSE(Refused(tracker_.Report(tiny, "p", "", loop_.Now(), 0, &state, &plan)));
  EXPECT_TRUE(plan);
}

}  // namespace
}  // namespace crux::daemon

namespace crux::daemon {
namespace {

TEST(WorkerThreadTest, RunsInOrderAndShutdownIsBoundedByALongItem) {
  auto log = std::make_shared<std::vector<int>>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto gate = std::make_shared<std::promise<void>>();
  std::shared_future<void> open = gate->get_future().share();
  {
    WorkerThread w;
    std::promise<void> both;
    auto both_done = both.get_future();
    w.Post([log] { log->push_back(1); });
    w.Post([log, p = std::make_shared<std::promise<void>>(std::move(both))] {
      log->push_back(2);
      p->set_value();
    });
    both_done.wait();
  }
  EXPECT_EQ(*log, (std::vector<int>{1, 2}));
  const auto start = std::chrono::steady_clock::now();
  {
    WorkerThread w(core::Duration::Millis(50));
    std::promise<void> started;
    auto running = started.get_future();
    w.Post([open, done, p = std::make_shared<std::promise<void>>(std::move(started))] {
      p->set_value();
      open.wait();  // A "huge re-plan": blocks until the test opens the gate.
      done->store(true);
    });
    running.wait();
  }  // Must not wait for the item.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(done->load());
  gate->set_value();  // The detached item finishes on its own, touching only what it owns.
  for (int i = 0; i < 200 && !done->load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(done->load());
}

}  // namespace
}  // namespace crux::daemon
