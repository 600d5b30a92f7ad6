// crux-switch-agent logic against a real ZeroMQ ROUTER standing in for cruxd and a real
// redis-server as the switch's CONFIG_DB. Timers run on a FakeClock; real time only bounds the
// waits for messages and for the device thread.
#if defined(CRUX_HAVE_SWITCH_AGENT) && defined(CRUX_WITH_SONIC)

#include "switch_agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/control/qos.h"
#include "crux/core/topology/topology.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"
#include "crux/protocol/server.h"
#include "crux/protocol/term_file.h"
#include "crux/switch_adapters/config_db_schema.h"
#include "crux/switch_adapters/sonic_adapter.h"
#include "fake_daemon.h"
#include "redis_server.h"

namespace crux::switch_adapters {
namespace {

using core::Duration;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using testing::RedisServer;

core::SwitchQosState MakeState(const std::string& name, int level) {
  core::Topology topo;
  core::NodeId sw = *topo.AddNode(name, core::NodeKind::kTor);
  std::vector<core::QosJob> jobs = {{"train", 10, level, {sw}}};
  return core::ComputeDesiredQos(core::QosConfig{}, topo, jobs)->at(name);
}

v1::SwitchQosState Wire(const core::SwitchQosState& s, uint64_t epoch, uint64_t state_id = 7) {
  v1::SwitchQosState p = protocol::SwitchQosStateToProto(s, epoch);
  p.set_state_id(state_id);
  return p;
}

class SwitchAgentTest : public ::testing::Test {
 protected:
  SwitchAgentTest() : endpoint_("ipc://" + redis_.dir() + "/cruxd.sock") {
    adapter_ = MakeAdapter(Duration::Millis(300));
    options_.switch_name = "tor0";
    options_.client.endpoint = endpoint_;
    options_.client.reconnect_ivl = Duration::Millis(20);
    options_.client.reconnect_ivl_max = Duration::Millis(100);
    options_.call_timeout = Duration::Millis(300);
    options_.hello_interval = Duration::Millis(1000);
    options_.daemon_backoff = {Duration::Millis(100), Duration::Millis(1000), 2, 0};
    options_.device_backoff = {Duration::Millis(100), Duration::Millis(400), 2, 0};
    options_.reconcile_period = Duration::Millis(5000);
    options_.poll = Duration::Millis(20);
  }

  std::unique_ptr<SonicAdapter> MakeAdapter(Duration timeout, int queues = 8) {
    SonicOptions so;
    so.switch_name = "tor0";
    so.unix_socket = redis_.socket();
    so.ports = {"Ethernet0"};
    so.connect_timeout = timeout;
    so.command_timeout = timeout;
    so.queues = queues;
    return std::move(SonicAdapter::Create(so)).value();
  }

  // RunOnce until `done` (real time bound 10 s); every step must succeed.
  bool RunUntil(SwitchAgent& agent, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      core::Status s = agent.RunOnce();
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (!s.ok()) return false;
      if (done()) return true;
    }
    return false;
  }

  // Starts the agent and waits for its first acked hello.
  void Connect(SwitchAgent& agent) {
    ASSERT_TRUE(agent.Start().ok());
    ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  }

  RedisServer redis_;
  std::string endpoint_;
  std::unique_ptr<SonicAdapter> adapter_;
  AgentOptions options_;
  protocol::TransportContext ctx_;
  core::FakeClock clock_;
};

TEST(SwitchAgentProtoTest, ConvertsBothWaysAndValidates) {
  core::SwitchQosState s = MakeState("tor0", 1);
  s.jobs.clear();  // Not on the wire.
  auto back = protocol::SwitchQosStateFromProto(protocol::SwitchQosStateToProto(s, 7));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  v1::SwitchQosState p = protocol::SwitchQosStateToProto(s, 7);
  p.mutable_schedulers(0)->set_type("WRR");
  EXPECT_THAT(protocol::SwitchQosStateFromProto(p).status().message(),
              HasSubstr("switch_state.schedulers[0].type"));
  p = protocol::SwitchQosStateToProto(s, 7);
  (*p.mutable_dscp_to_tc())[99] = 1;
  EXPECT_THAT(protocol::SwitchQosStateFromProto(p).status().message(), HasSubstr("dscp_to_tc[99]"));
  AgentOptions o;
  EXPECT_THAT(ValidateAgentOptions(o).message(), HasSubstr("agent.switch_name"));
  o.switch_name = "tor0";
  o.client.endpoint = "ipc:///x";
  o.device_backoff.max = Duration::Millis(1);
  EXPECT_THAT(ValidateAgentOptions(o).message(), HasSubstr("agent.device_backoff.max"));
  o.device_backoff = {};
  o.reconcile_period = Duration::Zero();
  EXPECT_THAT(ValidateAgentOptions(o).message(), HasSubstr("agent.reconcile_period"));
}

TEST_F(SwitchAgentTest, HelloApplyReportAndSurviveDaemonRestart) {
  auto daemon = std::make_unique<FakeDaemon>(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  auto hellos = daemon->Hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].switch_name(), "tor0");
  EXPECT_EQ(hellos[0].applied_epoch(), 0u);
  EXPECT_EQ(hellos[0].applied_state_id(), 0u);
  EXPECT_EQ(hellos[0].capabilities().queues(), 8u);
  EXPECT_TRUE(hellos[0].capabilities().strict_priority());
  EXPECT_TRUE(hellos[0].capabilities().dwrr());
  EXPECT_EQ(hellos[0].capabilities().backends(0), "sonic");
  // The routing id is random, not derived from the switch name.
  ASSERT_FALSE(daemon->Peers().empty());
  EXPECT_EQ(daemon->Peers()[0].find("tor0"), std::string::npos) << daemon->Peers()[0];

  // Push epoch 1: applied to CONFIG_DB, reported with the state read back.
  daemon->Push(Wire(MakeState("tor0", 0), 1));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon->Applied().size() == 1; }));
  v1::SwitchApplied a = daemon->Applied()[0];
  EXPECT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a.epoch(), 1u);
  EXPECT_FALSE(a.reconcile());
  EXPECT_EQ(a.drifted_fields(), 0u);
  EXPECT_EQ(a.state().dscp_to_tc().at(10), 5u);
  EXPECT_EQ(a.state().state_id(), 7u);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(agent.applied_epoch(), 1u);
  EXPECT_EQ(agent.applied_state_id(), 7u);

  // A push for another switch is refused without touching the device.
  daemon->Push(Wire(MakeState("tor9", 3), 2));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon->Applied().size() == 2; }));
  EXPECT_FALSE(daemon->Applied()[1].ok());
  EXPECT_THAT(daemon->Applied()[1].error(), HasSubstr("switch_state.switch_name: 'tor9'"));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");

  // The daemon goes away: the next hello times out, the device keeps its state.
  daemon.reset();
  clock_.Advance(options_.hello_interval);
  ASSERT_TRUE(RunUntil(agent, [&] { return !agent.daemon_connected(); }));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(agent.applied_epoch(), 1u);

  // It comes back on the same endpoint: after the backoff the agent says hello again, with the
  // epoch and state id it has applied.
  daemon = std::make_unique<FakeDaemon>(ctx_, endpoint_);
  clock_.Advance(Duration::Millis(1000));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  hellos = daemon->Hellos();
  ASSERT_GE(hellos.size(), 1u);
  EXPECT_EQ(hellos.back().applied_epoch(), 1u);
  EXPECT_EQ(hellos.back().applied_state_id(), 7u);
  EXPECT_EQ(agent.counters().reconnects, 2u);
}

// Issue #31 item 6: with every HA instance's endpoint, the agent follows a new leader as soon as
// it binds: the (fake) clock stands still, so neither the hello interval nor the backoff can be
// what sends the hello to the new daemon - only the new connection can.
TEST_F(SwitchAgentTest, FollowsTheNextLeaderAsSoonAsItBindsWithoutWaitingForATimer) {
  const std::string a = "ipc://" + redis_.dir() + "/cruxd_a.sock";
  const std::string b = "ipc://" + redis_.dir() + "/cruxd_b.sock";
  options_.client.endpoint = a + "," + b;
  auto leader = std::make_unique<FakeDaemon>(ctx_, a);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  ASSERT_EQ(leader->Hellos().size(), 1u);
  leader->Push(Wire(MakeState("tor0", 0), 1));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.applied_epoch() == 1; }));

  leader.reset();  // Killed: the agent notices the lost connection (no timer involved).
  ASSERT_TRUE(RunUntil(agent, [&] { return !agent.daemon_connected(); }));
  FakeDaemon next(ctx_, b);
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  auto hellos = next.Hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].applied_epoch(), 1u);
  EXPECT_EQ(agent.counters().reconnects, 2u);
  next.Push(Wire(MakeState("tor0", 1), 2));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.applied_epoch() == 2; }));
}

TEST_F(SwitchAgentTest, FailedApplyIsReportedAndRetriedWithBackoffUntilRedisIsBack) {
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  redis_.Kill();
  daemon.Push(Wire(MakeState("tor0", 2), 3));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  EXPECT_FALSE(daemon.Applied()[0].ok());
  EXPECT_THAT(daemon.Applied()[0].error(), HasSubstr("CONFIG_DB"));
  EXPECT_EQ(agent.applied_epoch(), 0u);

  // Retries follow the device backoff (100 ms, 200 ms, then capped at 400 ms), one report each.
  clock_.Advance(Duration::Millis(100));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  EXPECT_FALSE(daemon.Applied()[1].ok());
  EXPECT_EQ(agent.counters().applies_failed, 2u);

  redis_.Start();
  clock_.Advance(Duration::Millis(199));  // Not due yet.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(agent.RunOnce().ok());
  EXPECT_EQ(daemon.Applied().size(), 2u);
  clock_.Advance(Duration::Millis(1));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 3; }));
  EXPECT_TRUE(daemon.Applied()[2].ok()) << daemon.Applied()[2].error();
  EXPECT_EQ(daemon.Applied()[2].epoch(), 3u);
  EXPECT_FALSE(daemon.Applied()[2].reconcile());
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
  EXPECT_EQ(agent.counters().applies_failed, 2u);
  EXPECT_EQ(agent.counters().applies_ok, 1u);
  EXPECT_EQ(agent.applied_epoch(), 3u);
}

TEST_F(SwitchAgentTest, ReconcileWritesNothingInSyncAndRepairsAHandEdit) {
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  daemon.Push(Wire(MakeState("tor0", 0), 1));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));

  // In sync: the reconcile reads, writes nothing, and reports nothing.
  redis_.Cmd({"CONFIG", "RESETSTAT"});
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.counters().reconciles == 1; }));
  for (const char* cmd : {"hset", "hdel", "del", "multi", "exec"}) {
    EXPECT_EQ(redis_.Calls(cmd), 0) << cmd;
  }
  EXPECT_GT(redis_.Calls("hgetall"), 0);
  EXPECT_EQ(daemon.Applied().size(), 1u);
  std::cout << "in-sync reconcile: " << redis_.Calls("hgetall") << " HGETALL, "
            << redis_.Calls("hset") + redis_.Calls("hdel") + redis_.Calls("del") << " writes\n";

  // Someone edits the map by hand: the next reconcile puts it back and reports the drift.
  redis_.Cmd({"HSET", "DSCP_TO_TC_MAP|CRUX", "10", "0"});
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  const v1::SwitchApplied a = daemon.Applied()[1];
  EXPECT_TRUE(a.ok()) << a.error();
  EXPECT_TRUE(a.reconcile());
  EXPECT_EQ(a.drifted_fields(), 1u);
  EXPECT_EQ(a.epoch(), 1u);
  EXPECT_EQ(a.state().dscp_to_tc().at(10), 5u);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(agent.counters().drift_repairs, 1u);
  EXPECT_EQ(agent.counters().drifted_fields, 1u);
  EXPECT_EQ(agent.applied_epoch(), 1u);
}

TEST_F(SwitchAgentTest, FlushdbIsRepairedWithinOneReconcilePeriod) {
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  const core::SwitchQosState state = MakeState("tor0", 1);
  daemon.Push(Wire(state, 4));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  const auto keys_before = redis_.Cmd({"KEYS", "*"});

  redis_.Cmd({"FLUSHDB"});
  ASSERT_TRUE(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX").empty());
  clock_.Advance(options_.reconcile_period);  // One period.
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  const v1::SwitchApplied a = daemon.Applied()[1];
  EXPECT_TRUE(a.ok()) << a.error();
  EXPECT_TRUE(a.reconcile());
  ConfigDbLayout layout;
  layout.ports = {"Ethernet0"};
  EXPECT_EQ(a.drifted_fields(), ConfigDbSchema(layout).Diff({}, state).size());
  auto keys_after = redis_.Cmd({"KEYS", "*"});
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(keys_after), sorted(keys_before));
  auto back = adapter_->ReadBack();  // Safe here: the agent's device thread is idle.
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->SameDeviceState(state));
}

TEST_F(SwitchAgentTest, StalledRedisDoesNotBlockHellosOrPushes) {
  // A long command timeout: while Redis is stopped the device call cannot finish, so everything
  // the loop does meanwhile happens with the device call in progress.
  adapter_ = MakeAdapter(Duration::Millis(60000));
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  struct Resume {  // Destroyed before the agent: never join a worker stuck on a stopped Redis.
    RedisServer& r;
    ~Resume() { r.Continue(); }
  };
  Connect(agent);
  Resume resume{redis_};
  daemon.Push(Wire(MakeState("tor0", 0), 1));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));

  redis_.Stop();  // SIGSTOP.
  daemon.Push(Wire(MakeState("tor0", 1), 2));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.device_busy(); }));
  double slowest_ms = 0;
  auto timed_run_until = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_TRUE(agent.RunOnce().ok());
      slowest_ms = std::max(
          slowest_ms,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (done()) return true;
    }
    return false;
  };
  for (int i = 0; i < 3; ++i) {
    const uint64_t acked = agent.counters().hellos_acked;
    clock_.Advance(options_.hello_interval);
    ASSERT_TRUE(timed_run_until([&] { return agent.counters().hellos_acked == acked + 1; }));
    EXPECT_TRUE(agent.device_busy());  // Still stuck in Redis: the hello did not wait for it.
  }
  // A newer push is received and accepted meanwhile.
  daemon.Push(Wire(MakeState("tor0", 2), 3));
  ASSERT_TRUE(timed_run_until([&] { return agent.counters().pushes == 3; }));
  EXPECT_TRUE(agent.device_busy());
  EXPECT_TRUE(agent.daemon_connected());
  EXPECT_EQ(daemon.Applied().size(), 1u);
  std::cout << "with Redis stopped: 3 hellos acked and a push received while the device call "
               "was in progress; slowest RunOnce "
            << slowest_ms << " ms (poll " << options_.poll.nanos() / 1000000 << " ms)\n";

  redis_.Continue();
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.applied_epoch() == 3; }));
  auto applied = daemon.Applied();
  ASSERT_EQ(applied.size(), 3u);
  EXPECT_TRUE(applied[1].ok()) << applied[1].error();
  EXPECT_EQ(applied[1].epoch(), 2u);  // The stalled apply finished, then the newer state.
  EXPECT_TRUE(applied[2].ok()) << applied[2].error();
  EXPECT_EQ(applied[2].epoch(), 3u);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
}

TEST_F(SwitchAgentTest, NewStateIdIsAppliedEvenWithALowerEpoch) {
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  daemon.Push(Wire(MakeState("tor0", 0), 5, /*state_id=*/111));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");

  // Same daemon state, older epoch: stale, ignored (no device call, no report).
  daemon.Push(Wire(MakeState("tor0", 2), 3, 111));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.counters().stale_pushes == 1; }));
  // Same epoch again: a duplicate, ignored too.
  daemon.Push(Wire(MakeState("tor0", 0), 5, 111));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.counters().stale_pushes == 2; }));
  EXPECT_FALSE(agent.device_busy());
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");

  // cruxd's state was reset: a new state id with epochs starting again at 1. Applied.
  daemon.Push(Wire(MakeState("tor0", 2), 1, 222));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  EXPECT_TRUE(daemon.Applied()[1].ok()) << daemon.Applied()[1].error();
  EXPECT_EQ(daemon.Applied()[1].epoch(), 1u);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
  EXPECT_EQ(agent.applied_epoch(), 1u);
  EXPECT_EQ(agent.applied_state_id(), 222u);
  EXPECT_EQ(daemon.Applied().size(), 2u);

  // The next hello says so.
  clock_.Advance(options_.hello_interval);
  const size_t hellos = daemon.Hellos().size();
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Hellos().size() == hellos + 1; }));
  EXPECT_EQ(daemon.Hellos().back().applied_epoch(), 1u);
  EXPECT_EQ(daemon.Hellos().back().applied_state_id(), 222u);
}

TEST_F(SwitchAgentTest, APushFromALowerLeaderTermNeverReachesTheSwitch) {
  // HA cruxd: a deposed leader (lower term) must not change the switch, whatever its epoch.
  auto from_term = [](v1::SwitchQosState p, uint64_t term) {
    p.set_term(term);
    return p;
  };
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  daemon.Push(from_term(Wire(MakeState("tor0", 0), (7ull << 32) + 1), 7));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(agent.highest_term(), 7u);

  daemon.Push(from_term(Wire(MakeState("tor0", 2), (7ull << 32) + 5), 5));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.counters().stale_term_refused == 1; }));
  EXPECT_FALSE(agent.device_busy());
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5") << "the switch is unchanged";
  EXPECT_EQ(daemon.Applied().size(), 1u) << "nothing reported to anyone";
  EXPECT_NE(agent.last_error().find("deposed"), std::string::npos);

  // The hello tells cruxd (and `cruxctl switches`).
  clock_.Advance(options_.hello_interval);
  const size_t hellos = daemon.Hellos().size();
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Hellos().size() == hellos + 1; }));
  EXPECT_EQ(daemon.Hellos().back().highest_term(), 7u);
  EXPECT_EQ(daemon.Hellos().back().stale_term_refused(), 1u);

  // A higher term is applied.
  daemon.Push(from_term(Wire(MakeState("tor0", 2), (9ull << 32) + 1), 9));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
}

// Issue #31 item 5: the highest accepted term is kept in a file, so a restarted agent (a new
// agent over the same file) still refuses the deposed leader's push.
TEST_F(SwitchAgentTest, TheHighestTermSurvivesARestartAndALowerTermIsRefusedAfterIt) {
  auto from_term = [](v1::SwitchQosState p, uint64_t term) {
    p.set_term(term);
    return p;
  };
  options_.term_file = redis_.dir() + "/agent-state/tor0.term";  // Made by the first write.
  FakeDaemon daemon(ctx_, endpoint_);
  {
    SwitchAgent agent(options_, ctx_, *adapter_, clock_);
    Connect(agent);
    EXPECT_EQ(agent.highest_term(), 0u);  // First start: no file yet.
    daemon.Push(from_term(Wire(MakeState("tor0", 0), (5ull << 32) + 1), 5));
    ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
    ASSERT_TRUE(daemon.Applied().back().ok());
    EXPECT_EQ(agent.highest_term(), 5u);
  }
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  auto file = protocol::TermFile::Open(options_.term_file, "tor0");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->term(), 5u);

  // The restarted agent knows term 5 before any push, and says so in its first hello.
  SwitchAgent restarted(options_, ctx_, *adapter_, clock_);
  const size_t hellos = daemon.Hellos().size();
  Connect(restarted);
  EXPECT_EQ(restarted.highest_term(), 5u);
  ASSERT_GT(daemon.Hellos().size(), hellos);
  EXPECT_EQ(daemon.Hellos().back().highest_term(), 5u);
  // Term 4 (a deposed leader), even with a higher epoch and another state id: refused.
  daemon.Push(from_term(Wire(MakeState("tor0", 2), (4ull << 32) + 9, /*state_id=*/8), 4));
  ASSERT_TRUE(RunUntil(restarted, [&] { return restarted.counters().stale_term_refused == 1; }));
  EXPECT_FALSE(restarted.device_busy());
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5") << "the switch is unchanged";
  EXPECT_EQ(daemon.Applied().size(), 1u);
  // The current leader's term 6 is recorded and applied.
  daemon.Push(from_term(Wire(MakeState("tor0", 2), (6ull << 32) + 1), 6));
  ASSERT_TRUE(RunUntil(restarted, [&] { return daemon.Applied().size() == 2; }));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
  EXPECT_EQ(protocol::TermFile::Open(options_.term_file, "tor0")->term(), 6u);
}

// A term file that cannot be trusted stops the agent at Start (fail closed), naming the file.
TEST_F(SwitchAgentTest, ACorruptOrForeignTermFileFailsStart) {
  const std::string path = redis_.dir() + "/tor0.term";
  options_.term_file = path;
  for (const std::string& content :
       {std::string("garbage\n"), std::string("crux-leader-term 1\nowner tor0\nterm x\n"),
        std::string("crux-leader-term 1\nowner tor9\nterm 5\n"), std::string()}) {
    {
      std::ofstream out(path, std::ios::trunc);
      out << content;
    }
    SwitchAgent agent(options_, ctx_, *adapter_, clock_);
    core::Status s = agent.Start();
    EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition) << content;
    EXPECT_THAT(s.message(), HasSubstr(path));
    EXPECT_THAT(s.message(), HasSubstr("refusing to start"));
  }
}

// A push whose higher term cannot be recorded is refused (reported) and never applied.
TEST_F(SwitchAgentTest, APushWhoseTermCannotBeRecordedIsRefused) {
  const std::string dir = redis_.dir() + "/gone";
  options_.term_file = dir + "/tor0.term";
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  std::ofstream(dir) << "not a directory\n";  // The state directory cannot be made.
  v1::SwitchQosState push = Wire(MakeState("tor0", 0), (3ull << 32) + 1);
  push.set_term(3);
  daemon.Push(push);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  EXPECT_FALSE(daemon.Applied().back().ok());
  EXPECT_THAT(daemon.Applied().back().error(), HasSubstr("cannot record cruxd leader term 3"));
  EXPECT_EQ(agent.counters().term_write_failed, 1u);
  EXPECT_EQ(agent.highest_term(), 0u);
  EXPECT_TRUE(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX").empty()) << "never applied";
}

TEST_F(SwitchAgentTest, PushBeyondTheBackendsQueuesIsRefusedAndHelloSaysWhy) {
  adapter_ = MakeAdapter(Duration::Millis(300), /*queues=*/4);
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  Connect(agent);
  EXPECT_EQ(daemon.Hellos().at(0).capabilities().queues(), 4u);
  daemon.Push(Wire(MakeState("tor0", 0), 1));  // Uses queues 0..6.
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  EXPECT_FALSE(daemon.Applied()[0].ok());
  EXPECT_THAT(daemon.Applied()[0].error(), HasSubstr("beyond the 4 queues per port"));
  EXPECT_EQ(agent.counters().bad_pushes, 1u);
  EXPECT_TRUE(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX").empty());
  EXPECT_EQ(redis_.Calls("multi"), 0);
}

class RefusedHelloTest : public SwitchAgentTest,
                         public ::testing::WithParamInterface<v1::ErrorCode> {};

TEST_P(RefusedHelloTest, IsAFatalConfigurationErrorNotARetryLoop) {
  FakeDaemon daemon(ctx_, endpoint_, GetParam());
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  ASSERT_TRUE(agent.Start().ok());
  core::Status s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s.ok() && std::chrono::steady_clock::now() < deadline) s = agent.RunOnce();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(agent.fatal().has_value());
  EXPECT_THAT(agent.fatal()->message(), HasSubstr("refused switch 'tor0'"));
  EXPECT_THAT(agent.fatal()->message(),
              HasSubstr(std::string(protocol::ErrorCodeName(GetParam()))));
  // No retry, however long we wait; Run() returns at once with the same error.
  clock_.Advance(Duration::Millis(60000));
  EXPECT_EQ(agent.RunOnce(), s);
  std::atomic<bool> stop{false};
  EXPECT_EQ(agent.Run(stop), s);
  EXPECT_EQ(daemon.Hellos().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Codes, RefusedHelloTest,
                         ::testing::Values(v1::ERROR_CODE_UNKNOWN_HOST,
                                           v1::ERROR_CODE_PERMISSION_DENIED));

TEST_F(SwitchAgentTest, TransientHelloRefusalIsRetriedWithBackoff) {
  FakeDaemon daemon(ctx_, endpoint_, v1::ERROR_CODE_UNAVAILABLE);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Hellos().size() == 1; }));
  EXPECT_FALSE(agent.fatal().has_value());
  clock_.Advance(options_.daemon_backoff.initial);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Hellos().size() == 2; }));
  EXPECT_FALSE(agent.daemon_connected());
}

}  // namespace
}  // namespace crux::switch_adapters

#endif  // CRUX_HAVE_SWITCH_AGENT && CRUX_WITH_SONIC
