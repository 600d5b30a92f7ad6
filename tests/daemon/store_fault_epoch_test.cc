// The switch-only epoch failure path (issue #12 item 6): a re-plan in which no job's assignment
// changes but the QoS state of switches does (here: a reloaded `qos` block) advances the epoch for
// the switches alone. When the store cannot record that epoch, nothing may be pushed with it: the
// epoch stays, the switch agents keep the old state (a new agent gets the old state too), the run
// is retried with backoff, and the first retry after the store works applies it once.
//
// A whole Daemon on a ManualEventLoop over a real SQLite file, through a FaultyStore.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "crux/daemon/app/daemon.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;
using namespace crux::daemon::testing;  // NOLINT(build/namespaces)

v1::Envelope SwitchHello(const std::string& name, uint64_t applied_epoch, uint64_t rid = 4) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_switch_hello()->set_switch_name(name);
  e.mutable_switch_hello()->set_applied_epoch(applied_epoch);
  e.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
  e.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(true);
  e.mutable_switch_hello()->mutable_capabilities()->set_dwrr(true);
  return e;
}

v1::Envelope SwitchApplied(const std::string& name, uint64_t epoch, uint64_t rid = 5) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_switch_applied()->set_switch_name(name);
  e.mutable_switch_applied()->set_epoch(epoch);
  e.mutable_switch_applied()->set_ok(true);
  return e;
}

std::vector<v1::SwitchQosState> States(const std::vector<v1::Envelope>& pushes) {
  std::vector<v1::SwitchQosState> out;
  for (const auto& m : pushes) {
    if (m.has_switch_state()) out.push_back(m.switch_state());
  }
  return out;
}

// The stored plan rows as comparable tuples (PlanRow has no operator==).
using RowKey = std::tuple<std::string, int, uint32_t, uint64_t, std::string>;
std::vector<RowKey> Keys(const std::vector<PlanRow>& rows) {
  std::vector<RowKey> out;
  for (const PlanRow& r : rows) out.emplace_back(r.job_id, r.level, r.dscp, r.epoch, r.assignment);
  return out;
}

// The DWRR weight of queue 1 (the default config's "storage" class) in a pushed state; -1: none.
int StorageWeight(const v1::SwitchQosState& st) {
  for (const auto& q : st.schedulers()) {
    if (q.queue() == 1) return static_cast<int>(q.weight());
  }
  return -1;
}

class StoreFaultEpochTest : public DaemonFixture {
 protected:
  // DaemonFixture::SetUp with leases long enough that no job expires while the test lets the
  // backoff run (the fixture's 1 s lease would turn the switch-only plan into one that removes
  // jobs). Not Close() and Open() again: the closed daemon's timers stay on loop_.
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    config_ = BuiltinDefaults();
    config_.state_dir = dir_.string();
    config_.lease_ms = config_.max_lease_ms;
    config_.debounce_ms = kDebounce.nanos() / 1000000;
    config_.min_replan_interval_ms = 0;
    config_.profiling_samples = 10;
    Open();
  }
  // Three planned jobs (on tor0/tor1) and two agents that hold the current state: tor0 (crossed
  // by the jobs) and tor2 (crossed by none).
  void SetUpPlanAndAgents() {
    RegisterThree();
    Advance(kDebounce);
    ASSERT_GT(daemon_->epoch(), 0u);
    for (const char* sw : {"tor0", "tor2"}) {
      const std::string peer = std::string("agent-") + sw;
      ASSERT_TRUE(Client(peer, SwitchHello(sw, 0)).has_ack());
      ASSERT_EQ(States(pushes_[peer]).size(), 1u) << sw;
      const uint64_t e = States(pushes_[peer])[0].epoch();
      ASSERT_TRUE(Client(peer, SwitchApplied(sw, e)).has_ack());
      ASSERT_EQ(StorageWeight(States(pushes_[peer])[0]), kOldWeight);
    }
    pushes_.clear();
  }
  // Reloads the config with another storage weight: every switch's state changes, no job's
  // assignment does.
  void ReloadStorageWeight(int weight) {
    DaemonConfig c = config_;
    c.qos.reserved[1].weight = weight;
    EXPECT_TRUE(daemon_->Reload(c).empty());
  }
  size_t AssignmentPushes() {
    size_t n = 0;
    for (const auto& [peer, msgs] : pushes_) {
      for (const auto& m : msgs) n += m.has_assignment() ? 1 : 0;
    }
    return n;
  }
  size_t StatePushes() {
    size_t n = 0;
    for (const auto& [peer, msgs] : pushes_) n += States(msgs).size();
    return n;
  }
  uint64_t StoredEpoch() { return sqlite_->LoadEpoch().value(); }
  std::vector<RowKey> StoredPlan() { return Keys(sqlite_->LoadPlan().value()); }
  size_t StoredAudit() { return sqlite_->RecentAudit(1000).value().size(); }

  static constexpr int kOldWeight = 40;  // configs' default storage weight.
  static constexpr int kNewWeight = 20;
};

TEST_F(StoreFaultEpochTest, ASwitchOnlyEpochThatCannotBeStoredIsNotPushedAndIsRetried) {
  SetUpPlanAndAgents();
  const uint64_t epoch = daemon_->epoch();
  const uint64_t tor0_epoch = daemon_->enforcer().desired_epoch("tor0");
  const uint64_t tor2_epoch = daemon_->enforcer().desired_epoch("tor2");
  const uint64_t tor3_epoch = daemon_->enforcer().desired_epoch("tor3");
  ASSERT_EQ(StoredEpoch(), epoch);
  const std::vector<RowKey> plan = StoredPlan();
  ASSERT_EQ(plan.size(), 3u);
  const size_t audit = StoredAudit();
  const uint64_t runs = daemon_->plans().runs();
  const uint64_t stores = faulty_->calls_of["ApplyPlan"];  // The first plan's.

  faulty_->fail_method = "ApplyPlan";
  ReloadStorageWeight(kNewWeight);
  Advance(kDebounce);
  // The re-plan ran and tried to store the switch-only epoch; the store refused it.
  EXPECT_EQ(daemon_->plans().runs(), runs + 1);
  EXPECT_EQ(faulty_->calls_of["ApplyPlan"], stores + 1) << "a switch-only epoch is stored first";
  EXPECT_EQ(faulty_->failures, 1u);
  // Not applied: the epoch stays, no switch agent got the new state, no job got anything.
  EXPECT_EQ(daemon_->epoch(), epoch);
  EXPECT_EQ(StatePushes(), 0u) << "a switch state pushed with an epoch that is not durable";
  EXPECT_EQ(AssignmentPushes(), 0u);
  EXPECT_EQ(daemon_->enforcer().desired_epoch("tor0"), tor0_epoch);
  EXPECT_EQ(daemon_->enforcer().desired_epoch("tor2"), tor2_epoch);
  EXPECT_EQ(StoredEpoch(), epoch);
  EXPECT_EQ(StoredPlan(), plan);
  EXPECT_EQ(StoredAudit(), audit);
  v1::StatusReply st = Status();
  EXPECT_FALSE(st.store_ok());
  EXPECT_THAT(st.store_error(), HasSubstr("injected: ApplyPlan"));
  EXPECT_EQ(st.epoch(), epoch);
  // While it fails: an up-to-date agent's periodic hello gets nothing, and a new agent gets the
  // state that is applied (old weight, old epoch), not the one that could not be stored.
  EXPECT_TRUE(Client("agent-tor2", SwitchHello("tor2", tor2_epoch)).has_ack());
  EXPECT_TRUE(States(pushes_["agent-tor2"]).empty());
  EXPECT_TRUE(Client("agent-tor3", SwitchHello("tor3", 0)).has_ack());
  ASSERT_EQ(States(pushes_["agent-tor3"]).size(), 1u);
  EXPECT_EQ(States(pushes_["agent-tor3"])[0].epoch(), tor3_epoch);
  EXPECT_EQ(StorageWeight(States(pushes_["agent-tor3"])[0]), kOldWeight);
  ASSERT_TRUE(Client("agent-tor3", SwitchApplied("tor3", tor3_epoch)).has_ack());
  pushes_.clear();

  // Retried with backoff: after 1 s (fails again), then 2 s later (the delay doubled).
  Advance(core::Duration::Millis(1000));
  EXPECT_EQ(faulty_->calls_of["ApplyPlan"], stores + 2) << "the first retry comes after 1 s";
  EXPECT_EQ(daemon_->epoch(), epoch);
  EXPECT_EQ(StatePushes(), 0u);
  Advance(core::Duration::Millis(1999));
  EXPECT_EQ(faulty_->calls_of["ApplyPlan"], stores + 2) << "the second retry waits 2 s";

  // The store works again: the next retry applies the switch-only epoch, once.
  faulty_->fail_method.clear();
  Advance(core::Duration::Millis(1));
  EXPECT_EQ(faulty_->calls_of["ApplyPlan"], stores + 3);
  EXPECT_EQ(daemon_->epoch(), epoch + 1);
  EXPECT_EQ(StoredEpoch(), epoch + 1);
  EXPECT_EQ(StoredPlan(), plan) << "no job's row changes in a switch-only epoch";
  EXPECT_EQ(StoredAudit(), audit);
  EXPECT_TRUE(Status().store_ok());
  EXPECT_EQ(Status().epoch(), epoch + 1);
  EXPECT_EQ(AssignmentPushes(), 0u);
  for (const char* sw : {"tor0", "tor2", "tor3"}) {
    const std::string peer = std::string("agent-") + sw;
    const auto states = States(pushes_[peer]);
    ASSERT_EQ(states.size(), 1u) << sw;
    EXPECT_EQ(states[0].epoch(), epoch + 1) << sw;
    EXPECT_EQ(states[0].state_id(), daemon_->state_id()) << sw;
    EXPECT_EQ(StorageWeight(states[0]), kNewWeight) << sw;
    EXPECT_EQ(daemon_->enforcer().desired_epoch(sw), epoch + 1) << sw;
  }

  // Applied: no more retries, no more pushes.
  pushes_.clear();
  const uint64_t runs_after = daemon_->plans().runs();
  Advance(core::Duration::Millis(60000));
  EXPECT_EQ(daemon_->plans().runs(), runs_after);
  EXPECT_EQ(faulty_->calls_of["ApplyPlan"], stores + 3);
  EXPECT_EQ(daemon_->epoch(), epoch + 1);
  EXPECT_EQ(StatePushes(), 0u);

  // The epoch was durable: a restart keeps it (and the new weight is what is planned).
  Close();
  config_.qos.reserved[1].weight = kNewWeight;
  Open();
  EXPECT_EQ(daemon_->epoch(), epoch + 1);
}

TEST_F(StoreFaultEpochTest, ASwitchChangeRevertedWhileTheStoreFailsCostsNoEpoch) {
  SetUpPlanAndAgents();
  const uint64_t epoch = daemon_->epoch();
  const uint64_t stores = faulty_->calls_of["ApplyPlan"];
  faulty_->fail_method = "ApplyPlan";
  ReloadStorageWeight(kNewWeight);
  Advance(kDebounce);
  ASSERT_EQ(faulty_->calls_of["ApplyPlan"], stores + 1);
  ASSERT_EQ(daemon_->epoch(), epoch);
  // The operator reverts the qos block before the store comes back. The state that failed to be
  // stored was never applied, so the next plan finds nothing to change.
  ReloadStorageWeight(kOldWeight);
  faulty_->fail_method.clear();
  Advance(core::Duration::Millis(2000));
  EXPECT_EQ(daemon_->epoch(), epoch);
  EXPECT_EQ(StoredEpoch(), epoch);
  EXPECT_EQ(faulty_->calls_of["ApplyPlan"], stores + 1) << "nothing to store";
  EXPECT_EQ(StatePushes(), 0u);
  EXPECT_EQ(AssignmentPushes(), 0u);
}

}  // namespace
}  // namespace crux::daemon
