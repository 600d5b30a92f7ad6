// ControlHost on a ManualEventLoop with the planner inline: every event arms the timer it moves
// (no caller kicks), a commit lets the next run start, a pinned link reaches the decisions
// callback from the faults timer, a dry run leaves no trace, and a re-optimisation runs beside
// the runs (its worker held by the test) and reaches the jobs through the next run.
#include "crux/daemon/control/control_host.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "crux/protocol/convert.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

class ControlHostTest : public ::testing::Test {
 protected:
  ControlHostTest() : topo_(spec::ParseTopology(EmbeddedTopologyYaml(), "").value(), "embedded") {
    core::ControlLoopOptions o;
    o.debounce = core::Duration::Millis(20);
    host_ = std::make_unique<ControlHost>(
        &loop_, &topo_, o, ToPlannerOptions(PlannerConfig{}),
        [this](PlanRun run) { runs_.push_back(std::move(run)); },
        [this](const std::vector<core::LinkDecision>& d) {
          decisions_.insert(decisions_.end(), d.begin(), d.end());
        },
        ControlHost::Executor());
  }

  core::JobDemand Demand(const std::string& id) {
    core::JobDemand d;
    EXPECT_FALSE(protocol::Failed(protocol::DemandFromProto(
        testing::Register(id, {"host0", "host4"}).register_job(), topo_.nominal(), &d)));
    return d;
  }
  // Commits the last run handed over, as the PlanApplier does after the store write.
  void CommitLast() {
    ASSERT_FALSE(runs_.empty());
    const PlanRun& run = runs_.back();
    host_->Commit(host_->FinishPlan(*run.snapshot, *run.outcome));
  }

  ManualEventLoop loop_;
  TopologyManager topo_;
  std::vector<PlanRun> runs_;
  std::vector<core::LinkDecision> decisions_;
  std::unique_ptr<ControlHost> host_;
};

TEST_F(ControlHostTest, EventsArmThePlanTimerThemselves) {
  host_->AddJob(Demand("a"), 10);
  host_->AddJob(Demand("b"), 12);
  loop_.Advance(core::Duration::Millis(19));
  EXPECT_TRUE(runs_.empty()) << "debounced";
  loop_.Advance(core::Duration::Millis(1));
  ASSERT_EQ(runs_.size(), 1u);
  EXPECT_EQ(runs_[0].snapshot->jobs.size(), 2u);
  // While the run is in flight an event waits for the commit, which re-arms the timer.
  host_->RemoveJob("b", "ended");
  loop_.Advance(core::Duration::Millis(100));
  EXPECT_EQ(runs_.size(), 1u);
  CommitLast();
  EXPECT_EQ(host_->loop().epoch(), 1u);
  loop_.Advance(core::Duration::Millis(20));
  ASSERT_EQ(runs_.size(), 2u);
  EXPECT_EQ(runs_[1].snapshot->jobs.size(), 1u);
}

TEST_F(ControlHostTest, AnAdminPinReachesTheDecisionsAndAsksForAPlan) {
  host_->Invalidate("start");
  loop_.Advance(core::Duration::Millis(20));
  CommitLast();
  const core::LinkId link = topo_.Resolve("tor0->agg0").value().front();
  host_->SetLinkAdmin(link, {core::LinkHealth::kDown, 1});
  const std::vector<core::LinkDecision> now = host_->EvaluateFaults();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].link, link);
  loop_.Advance(core::Duration::Millis(20));
  EXPECT_EQ(runs_.size(), 2u) << "the decision asked for a plan and armed the timer";
  // Handed back: the faults timer evaluates on its own and hands the decision over.
  host_->ClearLinkAdmin(link);
  loop_.Advance(core::Duration::Millis(1));
  ASSERT_EQ(decisions_.size(), 1u);
  EXPECT_EQ(decisions_[0].health, core::LinkHealth::kUp);
}

TEST_F(ControlHostTest, DryRunStartsNothing) {
  host_->AddJob(Demand("a"), 10);
  bool replied = false;
  host_->DryRun([&](PlanRun run) {
    replied = true;
    EXPECT_TRUE(run.outcome->status.ok());
    EXPECT_EQ(run.snapshot->run, 0u);
    EXPECT_TRUE(run.rows.empty());
  });
  EXPECT_TRUE(replied);
  EXPECT_EQ(host_->runs(), 0u);
  loop_.Advance(core::Duration::Millis(20));
  EXPECT_EQ(runs_.size(), 1u);
}

// Re-optimisations beside the runs: the test holds the re-optimisation worker's work, so the
// order is explicit. An event while one is in flight is planned at once; an adopted fresh plan is
// planned on by the next run (its policy's state is the fresh plan: the job that arrived
// meanwhile is new to it); one made for a topology version no longer in force is discarded.
class ControlHostReoptimizeTest : public ControlHostTest {
 protected:
  ControlHostReoptimizeTest() {
    core::ControlLoopOptions o;
    o.debounce = core::Duration::Millis(20);
    o.reoptimize_interval = core::Duration::Seconds(1);
    o.reoptimize_min_gain = 0;
    o.reoptimize_in_background = true;
    PlannerConfig planner;
    planner.stable = true;
    host_ = std::make_unique<ControlHost>(
        &loop_, &topo_, o, ToPlannerOptions(planner),
        [this](PlanRun run) { runs_.push_back(std::move(run)); },
        [](const std::vector<core::LinkDecision>&) {}, ControlHost::Executor());
    host_->SetReoptimizeExecutor(
        [this](WorkerThread::CancellableWork work) { held_.push_back(std::move(work)); });
  }
  // Runs the held re-optimisation, then the loop work it posted.
  void RunHeld() {
    ASSERT_EQ(held_.size(), 1u);
    WorkerThread::CancellableWork work = std::move(held_.front());
    held_.clear();
    work(std::stop_token());
    loop_.RunUntilIdle();
  }
  std::vector<WorkerThread::CancellableWork> held_;
};

TEST_F(ControlHostReoptimizeTest, EventsDoNotWaitAndAnAdoptedPlanReachesTheNextRun) {
  host_->AddJob(Demand("a"), 10);
  host_->AddJob(Demand("b"), 12);
  loop_.Advance(core::Duration::Millis(20));
  CommitLast();
  loop_.Advance(core::Duration::Seconds(1));
  ASSERT_EQ(held_.size(), 1u) << "the re-optimisation went to its worker";
  EXPECT_EQ(runs_.size(), 1u) << "and is not a run";
  EXPECT_TRUE(host_->loop().reoptimizing());
  // An event while it is in flight: planned at once.
  host_->AddJob(Demand("c"), 14);
  loop_.Advance(core::Duration::Millis(20));
  ASSERT_EQ(runs_.size(), 2u);
  CommitLast();
  ASSERT_TRUE(runs_[1].outcome->replan.has_value());
  EXPECT_EQ(runs_[1].outcome->replan->added, 1);
  RunHeld();
  EXPECT_EQ(host_->reoptimize_stats().adopted, 1u);
  EXPECT_FALSE(host_->loop().reoptimizing());
  loop_.Advance(core::Duration::Millis(20));
  ASSERT_EQ(runs_.size(), 3u);
  EXPECT_NE(runs_[2].snapshot->reason.find("re-optimisation adopted"), std::string::npos)
      << runs_[2].snapshot->reason;
  ASSERT_TRUE(runs_[2].outcome->status.ok()) << runs_[2].outcome->status.ToString();
  ASSERT_TRUE(runs_[2].outcome->replan.has_value());
  // The adopted policy planned a and b afresh; c arrived after its snapshot.
  EXPECT_EQ(runs_[2].outcome->replan->added, 1);
  EXPECT_EQ(runs_[2].outcome->replan->jobs, 3);
  CommitLast();
  // The runs' policy is the adopted one from now on: nothing changed, nothing to add.
  host_->Invalidate("again");
  loop_.Advance(core::Duration::Millis(20));
  ASSERT_EQ(runs_.size(), 4u);
  EXPECT_EQ(runs_[3].outcome->replan->added, 0);
  EXPECT_TRUE(runs_[3].outcome->changed.empty());
}

TEST_F(ControlHostReoptimizeTest, APlanForAnOlderTopologyIsDiscarded) {
  host_->AddJob(Demand("a"), 10);
  loop_.Advance(core::Duration::Millis(20));
  CommitLast();
  loop_.Advance(core::Duration::Seconds(1));
  ASSERT_EQ(held_.size(), 1u);
  const core::LinkId link = topo_.Resolve("tor0->agg0").value().front();
  ASSERT_TRUE(topo_.SetEffective(link, core::LinkHealth::kDown, 0));
  RunHeld();
  EXPECT_EQ(host_->reoptimize_stats().discarded, 1u);
  EXPECT_EQ(host_->reoptimize_stats().adopted, 0u);
  loop_.Advance(core::Duration::Millis(20));
  EXPECT_EQ(runs_.size(), 1u) << "no run for a discarded plan";
  // The next one tries again, a second later.
  loop_.Advance(core::Duration::Seconds(1));
  EXPECT_EQ(held_.size(), 1u);
}

}  // namespace
}  // namespace crux::daemon
