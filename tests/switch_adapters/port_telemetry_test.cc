// Port telemetry (issue #14): the sonic port monitor against a real redis-server holding SONiC's
// keys (APPL_DB PORT_TABLE, COUNTERS_DB name maps and counters, CONFIG_DB DEVICE_NEIGHBOR), the
// pure PortTracker, and the agent sending SwitchTelemetry to a stand-in cruxd when a port goes
// down in APPL_DB.
#if defined(CRUX_HAVE_SWITCH_AGENT) && defined(CRUX_WITH_SONIC)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "crux/switch_adapters/builtin_backends.h"
#include "crux/switch_adapters/sonic_adapter.h"
#include "crux/switch_adapters/sonic_port_monitor.h"
#include "fake_daemon.h"
#include "port_watcher.h"
#include "redis_server.h"
#include "switch_agent.h"

namespace crux::switch_adapters {
namespace {

using core::Duration;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using testing::RedisServer;

std::unique_ptr<SonicPortMonitor> Monitor(const RedisServer& r, std::vector<std::string> ports) {
  SonicMonitorOptions o;
  o.endpoint.unix_socket = r.socket();
  o.endpoint.command_timeout = Duration::Millis(300);
  o.endpoint.connect_timeout = Duration::Millis(300);
  o.ports = std::move(ports);
  return std::move(SonicPortMonitor::Create(o)).value();
}

TEST(SonicPortMonitorTest, ReadsStatesCountersQueuesAndNeighbours) {
  RedisServer redis;
  redis.SetPortOperStatus("Ethernet0", "up");
  redis.SetPortOperStatus("Ethernet4", "down");
  redis.MapPortCounters("Ethernet0", "oid:0x1000000000002");
  redis.MapQueueCounters("Ethernet0", 3, "oid:0x15000000000010");
  redis.MapQueueCounters("Ethernet0", 4, "oid:0x15000000000011");
  redis.SetCounters("oid:0x1000000000002", {{"SAI_PORT_STAT_IF_IN_ERRORS", 12},
                                            {"SAI_PORT_STAT_IF_IN_DISCARDS", 3},
                                            {"SAI_PORT_STAT_IF_OUT_ERRORS", 1},
                                            {"SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES", 5},
                                            {"SAI_PORT_STAT_PFC_3_RX_PKTS", 7},
                                            {"SAI_PORT_STAT_PFC_4_RX_PKTS", 2},
                                            {"SAI_PORT_STAT_PFC_3_TX_PKTS", 9},
                                            {"SAI_PORT_STAT_IF_IN_UCAST_PKTS", 1000}});
  redis.SetCounters("oid:0x15000000000010", {{"SAI_QUEUE_STAT_DROPPED_PACKETS", 4},
                                             {"SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", 40}});
  redis.SetCounters("oid:0x15000000000011", {{"SAI_QUEUE_STAT_DROPPED_PACKETS", 6}});
  redis.SetNeighbor("Ethernet0", "agg0");
  redis.Cmd({"HSET", "PORT_TABLE:Ethernet0", "speed", "100000"}, 0);
  redis.Cmd({"HSET", "PORT_TABLE:Ethernet4", "speed", "fast"}, 0);
  auto m = Monitor(redis, {"Ethernet0", "Ethernet4", "Ethernet8"});

  auto states = m->ReadPorts(false);
  ASSERT_TRUE(states.ok()) << states.status().ToString();
  ASSERT_EQ(states->size(), 3u);
  EXPECT_EQ((*states)[0].oper_up, true);
  EXPECT_EQ((*states)[1].oper_up, false);
  EXPECT_EQ((*states)[2].oper_up, std::nullopt);              // Not in PORT_TABLE.
  EXPECT_EQ((*states)[0].speed, core::Bandwidth::Gbps(100));  // PORT_TABLE speed, Mbit/s.
  EXPECT_EQ((*states)[1].speed, std::nullopt);                // Not a number: unknown.
  EXPECT_FALSE((*states)[0].counters.has_value());

  auto full = m->ReadPorts(true);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  ASSERT_TRUE((*full)[0].counters.has_value());
  const PortCounterValues& c = *(*full)[0].counters;
  EXPECT_EQ(c.in_errors, 12u);
  EXPECT_EQ(c.in_discards, 3u);
  EXPECT_EQ(c.out_errors, 1u);
  EXPECT_EQ(c.fec_uncorrectable, 5u);
  EXPECT_EQ(c.pfc_rx_pause, 9u);  // Priorities 3 and 4.
  EXPECT_EQ(c.pfc_tx_pause, 9u);
  EXPECT_EQ(c.queue_drops, 10u);  // Both queues.
  EXPECT_EQ(c.ecn_marked, 40u);
  EXPECT_EQ(c.in_packets, 1000u);
  EXPECT_FALSE((*full)[1].counters.has_value());  // No name-map entry.

  auto nb = m->Neighbors();
  ASSERT_TRUE(nb.ok());
  EXPECT_EQ(*nb, (std::map<std::string, std::string>{{"Ethernet0", "agg0"}}));

  // A counter that is not a number is an error naming the key and field.
  redis.SetCounters("oid:0x1000000000002", {});
  redis.Cmd({"HSET", "COUNTERS:oid:0x1000000000002", "SAI_PORT_STAT_IF_IN_ERRORS", "x"}, 2);
  auto bad = m->ReadPorts(true);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("COUNTERS:oid:0x1000000000002 SAI_PORT_STAT_IF_IN_ERRORS"));
  // Redis gone: one attempt, kUnavailable.
  redis.Kill();
  EXPECT_EQ(m->ReadPorts(false).status().code(), core::StatusCode::kUnavailable);
}

TEST(PortTrackerTest, ReportsFirstReadingStateChangesAndCounterDeltas) {
  PortTracker t(std::map<std::string, std::string>{{"Ethernet4", "tor9"}});
  t.SetDeviceNeighbors({{"Ethernet0", "agg0"}, {"Ethernet4", "wrong"}});
  PortCounterValues c1;
  c1.in_errors = 10;
  c1.out_discards = 5;
  std::vector<PortReading> r = {{"Ethernet0", true, c1}, {"Ethernet4", true, std::nullopt}};
  auto first = t.Observe(r, Duration::Millis(1000));
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->state_changed);
  EXPECT_EQ(first->ports[0].neighbor, "agg0");
  EXPECT_EQ(first->ports[1].neighbor, "tor9");      // --neighbors wins.
  EXPECT_FALSE(first->ports[0].delta.has_value());  // No previous counters.
  // The same state without counters: nothing to report.
  EXPECT_FALSE(t.Observe({{"Ethernet0", true, {}}, {"Ethernet4", true, {}}}, Duration::Millis(1250))
                   .has_value());
  // A port goes down: reported at once.
  auto down =
      t.Observe({{"Ethernet0", true, {}}, {"Ethernet4", false, {}}}, Duration::Millis(1500));
  ASSERT_TRUE(down.has_value());
  EXPECT_TRUE(down->state_changed);
  EXPECT_EQ(down->ports[1].oper_up, false);
  // Counters: the delta since the previous counter reading (a reset gives none: next test).
  PortCounterValues c2 = c1;
  c2.in_errors = 25;
  auto counters =
      t.Observe({{"Ethernet0", true, c2}, {"Ethernet4", false, {}}}, Duration::Millis(2000));
  ASSERT_TRUE(counters.has_value());
  EXPECT_FALSE(counters->state_changed);
  ASSERT_TRUE(counters->ports[0].delta.has_value());
  EXPECT_EQ(counters->ports[0].delta->in_errors, 15u);
  EXPECT_EQ(counters->ports[0].delta->out_discards, 0u);
  EXPECT_EQ(counters->ports[0].interval, Duration::Millis(1000));
}

// Issue #31: a counter that went backwards is a reset (no delta, never a 2^64 wrap), and a
// delta beyond the port's line rate is dropped; either way the next delta starts from the new
// reading.
TEST(PortTrackerTest, ResetsAndDeltasBeyondLineRateGiveNoDeltaAndRebaseline) {
  PortTracker t;
  const core::Bandwidth k100g = core::Bandwidth::Gbps(100);
  PortCounterValues c;
  c.in_errors = 7;
  c.in_packets = 1'000'000;
  ASSERT_TRUE(t.Observe({{"Ethernet0", true, c, k100g}}, Duration::Millis(1000)).has_value());
  // sonic-clear counters: everything back near 0.
  PortCounterValues cleared;
  cleared.in_packets = 10;
  auto reset = t.Observe({{"Ethernet0", true, cleared, k100g}}, Duration::Millis(2000));
  ASSERT_TRUE(reset.has_value());
  EXPECT_FALSE(reset->ports[0].delta.has_value());
  ASSERT_EQ(reset->resets.size(), 1u);
  EXPECT_THAT(reset->resets[0], HasSubstr("went backwards"));
  // The next delta counts from the cleared values.
  PortCounterValues after = cleared;
  after.in_errors = 2;
  after.in_packets = 1010;
  auto next = t.Observe({{"Ethernet0", true, after, k100g}}, Duration::Millis(3000));
  ASSERT_TRUE(next.has_value() && next->ports[0].delta.has_value());
  EXPECT_EQ(next->ports[0].delta->in_errors, 2u);
  EXPECT_EQ(next->ports[0].delta->in_packets, 1000u);
  // 100 Gb/s for 1 s (+1 s of counter lag) carries at most ~2.98e8 frames: 1e9 errors are not a
  // measurement.
  PortCounterValues garbled = after;
  garbled.in_errors += 1'000'000'000;
  auto bad = t.Observe({{"Ethernet0", true, garbled, k100g}}, Duration::Millis(4000));
  ASSERT_TRUE(bad.has_value());
  EXPECT_FALSE(bad->ports[0].delta.has_value());
  ASSERT_EQ(bad->implausible.size(), 1u);
  EXPECT_THAT(bad->implausible[0], HasSubstr("Ethernet0: in_errors grew by 1000000000"));
  // The same traffic is plausible on a port of unknown speed (1.6 Tb/s assumed)...
  EXPECT_EQ(JudgeCounters(after, garbled, std::nullopt, Duration::Millis(1000)).verdict,
            CounterVerdict::kOk);
  // ...but 2^64-1 is not, at any speed.
  PortCounterValues max = after;
  max.in_errors = UINT64_MAX;
  EXPECT_EQ(JudgeCounters(after, max, std::nullopt, Duration::Millis(1000)).verdict,
            CounterVerdict::kImplausible);
  // Heavy but real traffic passes: a full 100 Gb/s of 1500-byte frames, PFC on every priority,
  // egress drops from a 32-port incast.
  PortCounterValues busy = after;
  busy.in_packets += 8'333'333;
  busy.pfc_rx_pause += 8 * 100'000;
  busy.queue_drops += 31 * 8'333'333;
  EXPECT_EQ(JudgeCounters(after, busy, k100g, Duration::Millis(1000)).verdict, CounterVerdict::kOk);
}

TEST(PortMonitorRegistryTest, OnlyBackendsWithAMonitorCanWatchPorts) {
  BackendConfig c;
  c.switch_name = "tor0";
  c.params = {{"state-dir", "/tmp"}};
  EXPECT_THAT(BuiltinBackends().CreateMonitor("file", c).status().message(),
              HasSubstr("backend 'file' cannot watch ports"));
  c.params = {{"ports", "Ethernet0"}, {"redis-socket", "/nonexistent"}, {"appl-db", "16"}};
  EXPECT_THAT(BuiltinBackends().CreateMonitor("sonic", c).status().message(),
              HasSubstr("--appl-db"));
  c.params = {{"ports", "Ethernet0"}, {"redis-socket", "/nonexistent"}};
  EXPECT_TRUE(BuiltinBackends().CreateMonitor("sonic", c).ok());
}

// The agent with a sonic backend and its monitor on one Redis, against a stand-in cruxd: the first
// telemetry carries every port's state and neighbour; a port set down in APPL_DB is reported; then
// counter deltas follow.
TEST(AgentTelemetryTest, PortDownInApplDbReachesCruxdAsSwitchTelemetry) {
  RedisServer redis;
  redis.SetPortOperStatus("Ethernet0", "up");
  redis.SetPortOperStatus("Ethernet4", "up");
  redis.SetNeighbor("Ethernet0", "agg0");
  redis.MapPortCounters("Ethernet0", "oid:0x1");
  redis.SetCounters("oid:0x1", {{"SAI_PORT_STAT_IF_IN_ERRORS", 0}});
  protocol::TransportContext ctx;
  const std::string endpoint = "ipc://" + redis.dir() + "/cruxd.sock";
  FakeDaemon daemon(ctx, endpoint);
  SonicOptions so;
  so.switch_name = "tor0";
  so.unix_socket = redis.socket();
  so.ports = {"Ethernet0", "Ethernet4"};
  auto adapter = std::move(SonicAdapter::Create(so)).value();
  AgentOptions o;
  o.switch_name = "tor0";
  o.client.endpoint = endpoint;
  o.call_timeout = Duration::Millis(1000);
  o.poll = Duration::Millis(20);
  PortWatcher::Options w;
  w.state_poll = Duration::Millis(20);
  w.counter_poll = Duration::Millis(100);
  w.neighbors = {{"Ethernet4", "host1/nic0"}};
  o.watch_ports = w;
  SwitchAgent agent(o, ctx, *adapter);
  agent.SetPortMonitor(Monitor(redis, {"Ethernet0", "Ethernet4"}));
  ASSERT_TRUE(agent.Start().ok());
  auto run_until = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(agent.RunOnce().ok());
      if (done()) return true;
    }
    return false;
  };
  auto port = [](const v1::SwitchTelemetry& t, const std::string& name) {
    for (const v1::PortStatus& p : t.ports()) {
      if (p.port() == name) return p;
    }
    return v1::PortStatus();
  };
  ASSERT_TRUE(run_until([&] { return !daemon.Telemetry().empty(); }));
  const v1::SwitchTelemetry first = daemon.Telemetry().front();
  EXPECT_EQ(first.switch_name(), "tor0");
  EXPECT_EQ(port(first, "Ethernet0").oper_status(), v1::PORT_OPER_STATUS_UP);
  EXPECT_EQ(port(first, "Ethernet0").neighbor(), "agg0");        // DEVICE_NEIGHBOR.
  EXPECT_EQ(port(first, "Ethernet4").neighbor(), "host1/nic0");  // --neighbors.

  redis.SetPortOperStatus("Ethernet0", "down");
  ASSERT_TRUE(run_until([&] {
    for (const auto& t : daemon.Telemetry()) {
      if (port(t, "Ethernet0").oper_status() == v1::PORT_OPER_STATUS_DOWN) return true;
    }
    return false;
  }));
  redis.SetCounters("oid:0x1", {{"SAI_PORT_STAT_IF_IN_ERRORS", 500}});
  ASSERT_TRUE(run_until([&] {
    for (const auto& t : daemon.Telemetry()) {
      if (port(t, "Ethernet0").counters().in_errors() == 500) return true;
    }
    return false;
  }));
  EXPECT_GT(agent.counters().telemetry_sent, 2u);
  EXPECT_EQ(agent.counters().telemetry_refused, 0u);
}

// Issue #31 item 3: one garbled COUNTERS_DB sample (an error counter jumping to 2^64-1, as a
// broken syncd write or a torn read can leave it) must never reach cruxd as errors: the agent
// drops the implausible sample and carries on from it. The test keeps the port's packet counter
// moving until a report with a plausible packet delta shows the agent has read past the garbled
// sample; no report may carry an error count.
TEST(AgentTelemetryTest, GarbledErrorCounterIsDroppedNotReportedAsErrors) {
  RedisServer redis;
  redis.SetPortOperStatus("Ethernet0", "up");
  redis.SetNeighbor("Ethernet0", "agg0");
  redis.MapPortCounters("Ethernet0", "oid:0x1");
  redis.SetCounters("oid:0x1",
                    {{"SAI_PORT_STAT_IF_IN_ERRORS", 0}, {"SAI_PORT_STAT_IF_IN_UCAST_PKTS", 0}});
  protocol::TransportContext ctx;
  const std::string endpoint = "ipc://" + redis.dir() + "/cruxd.sock";
  FakeDaemon daemon(ctx, endpoint);
  SonicOptions so;
  so.switch_name = "tor0";
  so.unix_socket = redis.socket();
  so.ports = {"Ethernet0"};
  auto adapter = std::move(SonicAdapter::Create(so)).value();
  AgentOptions o;
  o.switch_name = "tor0";
  o.client.endpoint = endpoint;
  o.call_timeout = Duration::Millis(1000);
  o.poll = Duration::Millis(20);
  PortWatcher::Options w;
  w.state_poll = Duration::Millis(20);
  w.counter_poll = Duration::Millis(50);
  o.watch_ports = w;
  SwitchAgent agent(o, ctx, *adapter);
  agent.SetPortMonitor(Monitor(redis, {"Ethernet0"}));
  ASSERT_TRUE(agent.Start().ok());
  auto counters_of = [&](const v1::SwitchTelemetry& t) -> std::optional<v1::PortCounters> {
    for (const v1::PortStatus& p : t.ports()) {
      if (p.port() == "Ethernet0" && p.has_counters()) return p.counters();
    }
    return std::nullopt;
  };
  auto run_until = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      EXPECT_TRUE(agent.RunOnce().ok());
      if (done()) return true;
    }
    return false;
  };
  // A first delta: the agent has its baseline.
  ASSERT_TRUE(run_until([&] {
    for (const auto& t : daemon.Telemetry()) {
      if (counters_of(t)) return true;
    }
    return false;
  }));
  const size_t before = daemon.Telemetry().size();
  // The garbled sample, in one write with a packet count that moved.
  redis.Cmd({"HSET", "COUNTERS:oid:0x1", "SAI_PORT_STAT_IF_IN_ERRORS", "18446744073709551615",
             "SAI_PORT_STAT_IF_IN_UCAST_PKTS", "1000"},
            2);
  uint64_t packets = 1000;
  ASSERT_TRUE(run_until([&] {
    packets += 100;
    redis.Cmd(
        {"HSET", "COUNTERS:oid:0x1", "SAI_PORT_STAT_IF_IN_UCAST_PKTS", std::to_string(packets)}, 2);
    const auto all = daemon.Telemetry();
    for (size_t i = before; i < all.size(); ++i) {
      // A packet delta below the garbled sample's 1000: a delta taken after it.
      if (auto c = counters_of(all[i]); c && c->in_packets() > 0 && c->in_packets() < 1000) {
        return true;
      }
    }
    return false;
  }));
  for (const auto& t : daemon.Telemetry()) {
    if (auto c = counters_of(t)) {
      EXPECT_EQ(c->in_errors(), 0u) << "an error signal reached cruxd: seq " << t.seq();
    }
  }
  // Dropped and counted (the garbled sample), not reported.
  ASSERT_TRUE(agent.port_watcher_counters().has_value());
  EXPECT_EQ(agent.port_watcher_counters()->implausible_samples, 1u);
}

}  // namespace
}  // namespace crux::switch_adapters

#endif  // CRUX_HAVE_SWITCH_AGENT && CRUX_WITH_SONIC
