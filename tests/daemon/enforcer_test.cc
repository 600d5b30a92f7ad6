// Enforcer on its own (issue #12 items 3 and 6): switch capabilities, assignment pushes stamped
// with the state id and send time, the switch registry (hello, applied, returning agents) and
// what a commit pushes. The sender is a recording function; time is passed in.
#include "crux/daemon/state/enforcer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/topology/builders.h"
#include "crux/daemon/runtime/metrics.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;

v1::SwitchCapabilities Caps(uint32_t queues, bool strict, bool dwrr, bool pfc) {
  v1::SwitchCapabilities c;
  c.set_queues(queues);
  c.set_strict_priority(strict);
  c.set_dwrr(dwrr);
  c.set_pfc(pfc);
  return c;
}

TEST(SwitchCapabilitiesTest, TheQosConfigMustFitTheSwitch) {
  const core::QosConfig qos;  // Uses queues 0..6, strict job levels and DWRR classes.
  EXPECT_FALSE(Refused(CheckSwitchCapabilities(Caps(8, true, true, true), qos, "tor0")));
  // Undeclared (queues 0): accepted, nothing to check against.
  EXPECT_FALSE(Refused(CheckSwitchCapabilities(Caps(0, false, false, false), qos, "tor0")));

  Refusal r = CheckSwitchCapabilities(Caps(4, true, true, true), qos, "tor0");
  EXPECT_EQ(r.code, RefusalCode::kUnsupported);
  EXPECT_THAT(r.message, HasSubstr("switch_hello.capabilities.queues: switch 'tor0' has 4 queues"));
  EXPECT_THAT(r.message, HasSubstr("uses queue 6 (needs 7)"));
  r = CheckSwitchCapabilities(Caps(7, true, true, true), qos, "tor0");
  EXPECT_FALSE(Refused(r)) << r.message;  // Exactly enough.

  r = CheckSwitchCapabilities(Caps(8, false, true, true), qos, "tor1");
  EXPECT_EQ(r.code, RefusalCode::kUnsupported);
  EXPECT_THAT(r.message, HasSubstr(".strict_priority: switch 'tor1'"));

  r = CheckSwitchCapabilities(Caps(8, true, false, true), qos, "tor1");
  EXPECT_EQ(r.code, RefusalCode::kUnsupported);
  EXPECT_THAT(r.message, HasSubstr(".dwrr"));

  // A configuration without weighted classes does not need DWRR.
  core::QosConfig strict_only;
  strict_only.reserved = {};
  strict_only.default_weight = 0;
  EXPECT_FALSE(Refused(CheckSwitchCapabilities(Caps(8, true, false, true), strict_only, "tor1")));
}

struct Sent {
  std::string peer;
  v1::Envelope env;
};

class EnforcerTest : public ::testing::Test {
 protected:
  EnforcerTest() : topo_(*core::BuildClos2(core::Clos2Params{})) {
    enforcer_ = std::make_unique<Enforcer>(nullptr, &topo_, [this] { return wall_ns_; });
    enforcer_->SetSender([this](const std::string& peer, const v1::Envelope& env) {
      if (fail_sends_) return core::UnavailableError("send queue full");
      if (env.has_assignment_batch() &&
          env.assignment_batch().assignments_size() > max_batch_entries_) {
        return core::OutOfRangeError("frame too large");  // As RouterServer::Send says it.
      }
      sent_.push_back({peer, env});
      return core::Status::Ok();
    });
    enforcer_->SetStateId(77);
  }

  static v1::SwitchHello Hello(const std::string& name, uint64_t applied_epoch,
                               uint64_t applied_state_id = 0, bool pfc = true) {
    v1::SwitchHello h;
    h.set_switch_name(name);
    *h.mutable_capabilities() = Caps(8, true, true, pfc);
    h.set_applied_epoch(applied_epoch);
    h.set_applied_state_id(applied_state_id);
    return h;
  }

  static std::shared_ptr<const core::AppliedQos> Qos(uint64_t epoch) {
    auto q = std::make_shared<core::AppliedQos>();
    for (const char* name : {"tor0", "tor1"}) {
      core::SwitchQosState s;
      s.switch_name = name;
      s.dscp_to_tc = {{0, 0}, {10, 5}};
      s.tc_to_queue = {{0, 0}, {5, 5}};
      s.pfc_enable = {5};
      q->states[name] = s;
      q->epochs[name] = epoch;
    }
    return q;
  }

  core::Topology topo_;
  int64_t wall_ns_ = 123456789;
  bool fail_sends_ = false;
  int max_batch_entries_ = 1 << 20;  // Larger batches are refused as too large.
  std::vector<Sent> sent_;
  std::unique_ptr<Enforcer> enforcer_;
};

TEST_F(EnforcerTest, PushesCarryTheStateIdAndTheSendTimeAndFailuresAreCounted) {
  core::AppliedAssignment a;
  a.assignment.job_id = "j1";
  a.assignment.level = 2;
  a.epoch = 9;
  ASSERT_TRUE(enforcer_->Push("peer1", a));
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].peer, "peer1");
  ASSERT_TRUE(sent_[0].env.has_assignment());
  EXPECT_EQ(sent_[0].env.assignment().job_id(), "j1");
  EXPECT_EQ(sent_[0].env.assignment().epoch(), 9u);
  EXPECT_EQ(sent_[0].env.assignment().state_id(), 77u);
  EXPECT_EQ(sent_[0].env.assignment().sent_unix_ns(), 123456789u);
  EXPECT_EQ(enforcer_->pushes(), 1u);

  EXPECT_FALSE(enforcer_->Push("", a));  // A restored job without a connection yet.
  fail_sends_ = true;
  EXPECT_FALSE(enforcer_->Push("peer1", a));
  EXPECT_EQ(enforcer_->push_failures(), 2u);
  EXPECT_EQ(sent_.size(), 1u);
}

// Issue #28: a batch goes in one frame, each entry stamped as a single push; a batch the
// transport refuses as too large goes out as single pushes; pushes() counts assignments.
TEST_F(EnforcerTest, ABatchIsOneFrameUnlessTooLargeThenSinglePushes) {
  std::vector<core::AppliedAssignment> as(3);
  std::vector<const core::AppliedAssignment*> batch;
  for (size_t i = 0; i < as.size(); ++i) {
    as[i].assignment.job_id = "j" + std::to_string(i);
    as[i].epoch = 9;
    batch.push_back(&as[i]);
  }
  EXPECT_EQ(enforcer_->PushBatch("agent", batch), 3u);
  ASSERT_EQ(sent_.size(), 1u);
  ASSERT_TRUE(sent_[0].env.has_assignment_batch());
  EXPECT_EQ(sent_[0].env.request_id(), 0u);
  ASSERT_EQ(sent_[0].env.assignment_batch().assignments_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const v1::Assignment& a = sent_[0].env.assignment_batch().assignments(i);
    EXPECT_EQ(a.job_id(), "j" + std::to_string(i));
    EXPECT_EQ(a.epoch(), 9u);
    EXPECT_EQ(a.state_id(), 77u);
    EXPECT_EQ(a.sent_unix_ns(), 123456789u);
  }
  EXPECT_EQ(enforcer_->pushes(), 3u);
  EXPECT_EQ(enforcer_->batch_frames(), 1u);

  sent_.clear();
  max_batch_entries_ = 2;
  EXPECT_EQ(enforcer_->PushBatch("agent", batch), 3u);
  ASSERT_EQ(sent_.size(), 3u);
  for (const Sent& s : sent_) EXPECT_TRUE(s.env.has_assignment()) << s.env.DebugString();
  EXPECT_EQ(enforcer_->pushes(), 6u);
  EXPECT_EQ(enforcer_->batch_frames(), 1u);
  EXPECT_EQ(enforcer_->push_failures(), 0u);

  sent_.clear();
  fail_sends_ = true;  // Any other refusal: every assignment of the batch failed.
  EXPECT_EQ(enforcer_->PushBatch("agent", batch), 0u);
  EXPECT_EQ(enforcer_->push_failures(), 3u);
  EXPECT_TRUE(sent_.empty());
}

TEST_F(EnforcerTest, HellosBeforeTheFirstPlanAreRecordedAndTheFirstCommitPushesToThem) {
  bool returning = false;
  std::optional<v1::Envelope> push;
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 0), "a0", 1000, &returning, &push)));
  EXPECT_TRUE(returning);
  EXPECT_FALSE(push.has_value());  // No desired state yet.
  EXPECT_FALSE(enforcer_->qos_ready());
  EXPECT_EQ(enforcer_->switch_count(), 1u);

  enforcer_->Commit(Qos(4), {"tor0", "tor1"});  // tor1 has no agent: nothing sent to it.
  EXPECT_TRUE(enforcer_->qos_ready());
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].peer, "a0");
  ASSERT_TRUE(sent_[0].env.has_switch_state());
  EXPECT_EQ(sent_[0].env.switch_state().state_id(), 77u);
  EXPECT_EQ(enforcer_->desired_epoch("tor0"), 4u);
  EXPECT_EQ(enforcer_->desired_epoch("nope"), 0u);

  // Not in sync until the agent reports epoch 4 applied.
  std::vector<v1::SwitchInfo> rows = enforcer_->Switches(0, 1500);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].in_sync());
  v1::SwitchApplied ok;
  ok.set_switch_name("tor0");
  ok.set_epoch(4);
  ok.set_ok(true);
  ASSERT_FALSE(Refused(enforcer_->OnApplied(ok, "a0", 1600)));
  rows = enforcer_->Switches(0, 1700);
  EXPECT_TRUE(rows[0].in_sync());
  EXPECT_EQ(rows[0].applied_epoch(), 4u);
}

TEST_F(EnforcerTest, ReturningOrStaleAgentsGetTheirFullStateAndOthersDoNot) {
  enforcer_->Commit(Qos(4), {});
  bool returning = false;
  std::optional<v1::Envelope> push;
  // A new agent: full state.
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 0), "a0", 1000, &returning, &push)));
  EXPECT_TRUE(returning);
  ASSERT_TRUE(push.has_value());
  EXPECT_EQ(push->switch_state().epoch(), 4u);
  // A periodic hello, up to date: nothing.
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 4, 77), "a0", 2000, &returning, &push)));
  EXPECT_FALSE(returning);
  EXPECT_FALSE(push.has_value());
  // A lost push (older applied epoch than desired, no failure pending): full state.
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 3, 77), "a0", 3000, &returning, &push)));
  EXPECT_TRUE(push.has_value());
  // Another connection (the agent restarted): returning.
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 4, 77), "a1", 4000, &returning, &push)));
  EXPECT_TRUE(returning);
  EXPECT_TRUE(push.has_value());
  // Silent for longer than kAgentStaleMs: returning.
  ASSERT_FALSE(Refused(
      enforcer_->OnHello(Hello("tor0", 4, 77), "a1", 4000 + kAgentStaleMs + 1, &returning, &push)));
  EXPECT_TRUE(returning);
  // Epoch applied under another state id (the daemon's state was reset): full state.
  ASSERT_FALSE(Refused(
      enforcer_->OnHello(Hello("tor0", 9, 5), "a1", 4000 + kAgentStaleMs + 2, &returning, &push)));
  EXPECT_TRUE(returning);
  EXPECT_TRUE(push.has_value());
}

TEST_F(EnforcerTest, AFailedApplyIsKeptUntilASuccessAndBlocksNoPush) {
  enforcer_->Commit(Qos(4), {});
  bool returning = false;
  std::optional<v1::Envelope> push;
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 0), "a0", 1000, &returning, &push)));
  v1::SwitchApplied bad;
  bad.set_switch_name("tor0");
  bad.set_epoch(4);
  bad.set_ok(false);
  bad.set_error("redis: connection refused");
  ASSERT_FALSE(Refused(enforcer_->OnApplied(bad, "a0", 1100)));
  EXPECT_EQ(enforcer_->Switches(0, 1200)[0].last_error(), "redis: connection refused");
  // The agent retries on its own: its hello with an old epoch gets no second push.
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 0, 77), "a0", 1300, &returning, &push)));
  EXPECT_FALSE(push.has_value());
  bad.set_error("");
  ASSERT_FALSE(Refused(enforcer_->OnApplied(bad, "a0", 1400)));
  EXPECT_EQ(enforcer_->Switches(0, 1500)[0].last_error(), "apply failed (no reason given)");

  v1::SwitchApplied ok = bad;
  ok.set_ok(true);
  ok.set_drifted_fields(3);  // A reconcile that repaired a hand edit.
  ASSERT_FALSE(Refused(enforcer_->OnApplied(ok, "a0", 1600)));
  const v1::SwitchInfo row = enforcer_->Switches(2, 1700)[0];
  EXPECT_EQ(row.last_error(), "");
  EXPECT_EQ(row.drift_repairs(), 1u);
  EXPECT_EQ(row.last_drifted_fields(), 3u);
  EXPECT_EQ(row.last_drift_ms(), 1600u);
  EXPECT_EQ(row.dscp_colours_shared(), 2u);

  v1::SwitchApplied stranger = ok;
  stranger.set_switch_name("tor9");
  EXPECT_EQ(enforcer_->OnApplied(stranger, "a9", 1800).code, RefusalCode::kNotFound);
}

TEST_F(EnforcerTest, CapabilitiesAreCheckedAtHelloAndPfcIsLeftAloneWithoutIt) {
  enforcer_->Commit(Qos(4), {});
  bool returning = false;
  std::optional<v1::Envelope> push;
  v1::SwitchHello small = Hello("tor1", 0);
  small.mutable_capabilities()->set_queues(4);
  const Refusal r = enforcer_->OnHello(small, "a1", 1000, &returning, &push);
  EXPECT_EQ(r.code, RefusalCode::kUnsupported);
  EXPECT_EQ(enforcer_->switch_count(), 0u);  // A refusal records nothing.
  EXPECT_FALSE(push.has_value());

  ASSERT_FALSE(Refused(
      enforcer_->OnHello(Hello("tor1", 0, 0, /*pfc=*/false), "a1", 1000, &returning, &push)));
  ASSERT_TRUE(push.has_value());
  EXPECT_EQ(push->switch_state().pfc_enable_size(), 0);
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 0), "a0", 1000, &returning, &push)));
  ASSERT_TRUE(push.has_value());
  EXPECT_EQ(push->switch_state().pfc_enable_size(), 1);
}

TEST_F(EnforcerTest, AnAgentWhosePushFailsShowsAsDisconnectedUntilItsNextHello) {
  enforcer_->Commit(Qos(4), {});
  bool returning = false;
  std::optional<v1::Envelope> push;
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 4, 77), "a0", 1000, &returning, &push)));
  fail_sends_ = true;
  enforcer_->Commit(Qos(5), {"tor0"});
  EXPECT_FALSE(enforcer_->Switches(0, 1001)[0].connected());
  fail_sends_ = false;
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 4, 77), "a0", 1100, &returning, &push)));
  EXPECT_TRUE(returning);
  ASSERT_TRUE(push.has_value());
  EXPECT_EQ(push->switch_state().epoch(), 5u);
  EXPECT_TRUE(enforcer_->Switches(0, 1101)[0].connected());
}

// Enforcement verification (issue #29): the agents' checks are kept per switch, shown in
// ListSwitches, logged on a changed verdict and counted on /metrics; pushes carry job_tcs.
TEST_F(EnforcerTest, AgentsEnforcementChecksAreShownAndCountedAndPushesCarryTheJobTcs) {
  Metrics metrics;
  enforcer_ = std::make_unique<Enforcer>(&metrics, &topo_, [this] { return wall_ns_; });
  enforcer_->SetSender([this](const std::string& peer, const v1::Envelope& env) {
    sent_.push_back({peer, env});
    return core::Status::Ok();
  });
  enforcer_->SetQosConfig(core::QosConfig{});  // level_tcs 5 4 3 2.
  enforcer_->Commit(Qos(4), {});
  bool returning = false;
  std::optional<v1::Envelope> push;

  // An agent that sends no check (older): UNKNOWN, saying so.
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor0", 0), "a0", 1000, &returning, &push)));
  ASSERT_TRUE(push.has_value());
  EXPECT_THAT(push->switch_state().job_tcs(), ::testing::ElementsAre(2u, 3u, 4u, 5u));
  std::vector<v1::SwitchInfo> rows = enforcer_->Switches(0, 1000);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].enforcement().status(), v1::ENFORCEMENT_STATUS_UNKNOWN);
  EXPECT_THAT(rows[0].enforcement().detail(), HasSubstr("an older crux-switch-agent"));

  // tor0 verified MATCH (hello); tor1 reports MISMATCH in a SwitchApplied.
  v1::SwitchHello h0 = Hello("tor0", 4, 77);
  h0.mutable_enforcement()->set_status(v1::ENFORCEMENT_STATUS_MATCH);
  h0.mutable_enforcement()->set_maps_checked(4);
  h0.mutable_enforcement()->set_queues_checked(16);
  h0.mutable_enforcement()->set_checked_unix_ms(1900);
  h0.mutable_enforcement()->set_epoch(4);
  ASSERT_FALSE(Refused(enforcer_->OnHello(h0, "a0", 2000, &returning, &push)));
  ASSERT_FALSE(Refused(enforcer_->OnHello(Hello("tor1", 4, 77), "a1", 2000, &returning, &push)));
  v1::SwitchApplied a1;
  a1.set_switch_name("tor1");
  a1.set_epoch(4);
  a1.set_ok(true);
  a1.set_reconcile(true);
  a1.mutable_enforcement()->set_status(v1::ENFORCEMENT_STATUS_MISMATCH);
  a1.mutable_enforcement()->set_detail(
      "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14000000000615): dscp 10 -> tc 0, the plan says tc 5");
  a1.mutable_enforcement()->set_epoch(4);
  ASSERT_FALSE(Refused(enforcer_->OnApplied(a1, "a1", 2100)));
  rows = enforcer_->Switches(0, 2200);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].enforcement().status(), v1::ENFORCEMENT_STATUS_MATCH);
  EXPECT_EQ(rows[0].enforcement().maps_checked(), 4u);
  EXPECT_EQ(rows[0].enforcement().queues_checked(), 16u);
  EXPECT_EQ(rows[0].enforcement().checked_unix_ms(), 1900u);
  EXPECT_EQ(rows[1].enforcement().status(), v1::ENFORCEMENT_STATUS_MISMATCH);
  EXPECT_THAT(rows[1].enforcement().detail(), HasSubstr("dscp 10 -> tc 0, the plan says tc 5"));
  EXPECT_TRUE(rows[1].in_sync());  // CONFIG_DB is in sync; the ASIC is not: both are shown.
  std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crux_switch_enforcement{state=\"match\"} 1"));
  EXPECT_THAT(text, HasSubstr("crux_switch_enforcement{state=\"mismatch\"} 1"));
  EXPECT_THAT(text, HasSubstr("crux_switch_enforcement{state=\"unknown\"} 0"));

  // A SwitchApplied without a check (an older agent's) keeps the last one.
  a1.clear_enforcement();
  ASSERT_FALSE(Refused(enforcer_->OnApplied(a1, "a1", 2300)));
  EXPECT_EQ(enforcer_->Switches(0, 2400)[1].enforcement().status(),
            v1::ENFORCEMENT_STATUS_MISMATCH);

  // An agent that went silent counts as unknown (its last check is still shown).
  rows = enforcer_->Switches(0, 2300 + kAgentStaleMs + 1);
  EXPECT_FALSE(rows[1].connected());
  EXPECT_EQ(rows[1].enforcement().status(), v1::ENFORCEMENT_STATUS_MISMATCH);
  text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crux_switch_enforcement{state=\"mismatch\"} 0"));
  EXPECT_THAT(text, HasSubstr("crux_switch_enforcement{state=\"unknown\"} 2"));
}

}  // namespace
}  // namespace crux::daemon
