// crux-switch-agent logic against a real ZeroMQ ROUTER standing in for cruxd and a real
// redis-server as the switch's CONFIG_DB.
#ifdef CRUX_HAVE_SWITCH_AGENT

#include "switch_agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "crux/core/clock.h"
#include "crux/core/qos.h"
#include "crux/core/topology.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"
#include "crux/protocol/server.h"
#include "crux/switch_adapters/sonic_adapter.h"
#include "redis_server.h"

namespace crux::switch_adapters {
namespace {

using core::Duration;
using ::testing::HasSubstr;
using testing::RedisServer;

core::SwitchQosState MakeState(const std::string& name, int level) {
  core::Topology topo;
  core::NodeId sw = *topo.AddNode(name, core::NodeKind::kTor);
  std::vector<core::QosJob> jobs = {{"train", 10, level, {sw}}};
  return core::ComputeDesiredQos(core::QosConfig{}, topo, jobs)->at(name);
}

// A minimal cruxd: acks hellos and SwitchApplied, records everything, pushes on demand.
class FakeDaemon {
 public:
  FakeDaemon(protocol::TransportContext& ctx, const std::string& endpoint) {
    protocol::ServerOptions o;
    o.endpoint = endpoint;
    auto s = protocol::RouterServer::Start(ctx, o, [this](protocol::Inbound in) {
      std::lock_guard<std::mutex> lock(mu_);
      if (in.msg.has_switch_hello() || in.msg.has_switch_applied()) {
        peer_ = in.peer;
        (void)server_->Send(in.peer, protocol::MakeAck(in.msg.request_id()));
      }
      inbound_.push_back(std::move(in.msg));
    });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  void Push(const v1::SwitchQosState& state) {
    v1::Envelope env = protocol::NewEnvelope(0);
    *env.mutable_switch_state() = state;
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_TRUE(server_->Send(peer_, env).ok());
  }
  std::vector<v1::Envelope> Received() {
    std::lock_guard<std::mutex> lock(mu_);
    return inbound_;
  }
  std::vector<v1::SwitchApplied> Applied() {
    std::vector<v1::SwitchApplied> out;
    for (const auto& e : Received()) {
      if (e.has_switch_applied()) out.push_back(e.switch_applied());
    }
    return out;
  }
  std::vector<v1::SwitchHello> Hellos() {
    std::vector<v1::SwitchHello> out;
    for (const auto& e : Received()) {
      if (e.has_switch_hello()) out.push_back(e.switch_hello());
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::string peer_;
  std::vector<v1::Envelope> inbound_;
  std::unique_ptr<protocol::RouterServer> server_;
};

class SwitchAgentTest : public ::testing::Test {
 protected:
  SwitchAgentTest() : endpoint_("ipc://" + redis_.dir() + "/cruxd.sock") {
    SonicOptions so;
    so.switch_name = "tor0";
    so.unix_socket = redis_.socket();
    so.ports = {"Ethernet0"};
    so.max_attempts = 1;
    so.connect_timeout = Duration::Millis(300);
    so.command_timeout = Duration::Millis(300);
    adapter_ = std::move(SonicAdapter::Create(so)).value();
    options_.switch_name = "tor0";
    options_.client.endpoint = endpoint_;
    options_.client.routing_id = "switch:tor0";
    options_.client.reconnect_ivl = Duration::Millis(20);
    options_.client.reconnect_ivl_max = Duration::Millis(100);
    options_.call_timeout = Duration::Millis(300);
    options_.hello_interval = Duration::Millis(1000);
    options_.initial_backoff = Duration::Millis(100);
    options_.poll = Duration::Millis(20);
  }

  // RunOnce until `done` (real time bound 5 s).
  bool RunUntil(SwitchAgent& agent, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(agent.RunOnce().ok());
      if (done()) return true;
    }
    return false;
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
}

TEST_F(SwitchAgentTest, HelloApplyReportAndSurviveDaemonRestart) {
  auto daemon = std::make_unique<FakeDaemon>(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  auto hellos = daemon->Hellos();
  ASSERT_EQ(hellos.size(), 1u);
  EXPECT_EQ(hellos[0].switch_name(), "tor0");
  EXPECT_EQ(hellos[0].applied_epoch(), 0u);
  EXPECT_EQ(hellos[0].capabilities().queues(), 8u);
  EXPECT_EQ(hellos[0].capabilities().backends(0), "sonic");

  // Push epoch 1: applied to CONFIG_DB, reported with the state read back.
  daemon->Push(protocol::SwitchQosStateToProto(MakeState("tor0", 0), 1));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon->Applied().size() == 1; }));
  v1::SwitchApplied a = daemon->Applied()[0];
  EXPECT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a.epoch(), 1u);
  EXPECT_EQ(a.state().dscp_to_tc().at(10), 5u);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(agent.applied_epoch(), 1u);

  // A push for another switch is refused without touching the device.
  daemon->Push(protocol::SwitchQosStateToProto(MakeState("tor9", 3), 2));
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
  // epoch it has applied.
  daemon = std::make_unique<FakeDaemon>(ctx_, endpoint_);
  clock_.Advance(Duration::Millis(1000));
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  hellos = daemon->Hellos();
  ASSERT_GE(hellos.size(), 1u);
  EXPECT_EQ(hellos.back().applied_epoch(), 1u);
  EXPECT_EQ(agent.counters().reconnects, 2u);
}

TEST_F(SwitchAgentTest, FailedApplyIsReportedAndRetriedUntilRedisIsBack) {
  FakeDaemon daemon(ctx_, endpoint_);
  SwitchAgent agent(options_, ctx_, *adapter_, clock_);
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  redis_.Kill();
  daemon.Push(protocol::SwitchQosStateToProto(MakeState("tor0", 2), 3));
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  EXPECT_FALSE(daemon.Applied()[0].ok());
  EXPECT_THAT(daemon.Applied()[0].error(), HasSubstr("CONFIG_DB"));
  EXPECT_EQ(agent.applied_epoch(), 0u);

  redis_.Start();
  clock_.Advance(options_.hello_interval);  // Next tick retries the pending state.
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  EXPECT_TRUE(daemon.Applied()[1].ok()) << daemon.Applied()[1].error();
  EXPECT_EQ(daemon.Applied()[1].epoch(), 3u);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
  EXPECT_EQ(agent.counters().applies_failed, 1u);
  EXPECT_EQ(agent.counters().applies_ok, 1u);
}

}  // namespace
}  // namespace crux::switch_adapters

#endif  // CRUX_HAVE_SWITCH_AGENT
