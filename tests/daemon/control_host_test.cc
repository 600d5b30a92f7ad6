// ControlHost on a ManualEventLoop with the planner inline: every event arms the timer it moves
// (no caller kicks), a commit lets the next run start, a pinned link reaches the decisions
// callback from the faults timer, and a dry run leaves no trace.
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

}  // namespace
}  // namespace crux::daemon
