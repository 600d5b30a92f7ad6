// SonicAdapter against a real redis-server: one attempt per call, transactions, ownership, drift
// repair by re-apply, faults (killed / stalled Redis, concurrent edits). The pure schema is tested
// without Redis in config_db_schema_test.cc.
#include "crux/switch_adapters/sonic_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/control/qos.h"
#include "crux/core/topology/topology.h"
#include "redis_server.h"

#ifdef CRUX_WITH_SONIC

namespace crux::switch_adapters {
namespace {

using core::Duration;
using core::QosConfig;
using core::QosJob;
using core::SwitchQosState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RedisServer;

// The desired state of switch "tor0" under `cfg` with one job per (dscp, level) crossing it.
SwitchQosState MakeState(const QosConfig& cfg, const std::vector<std::pair<int, int>>& jobs) {
  core::Topology topo;
  core::NodeId tor = *topo.AddNode("tor0", core::NodeKind::kTor);
  std::vector<QosJob> qj;
  for (const auto& [dscp, level] : jobs) {
    qj.push_back({"job" + std::to_string(dscp) + "_" + std::to_string(level), dscp, level, {tor}});
  }
  auto states = core::ComputeDesiredQos(cfg, topo, qj);
  EXPECT_TRUE(states.ok()) << states.status().ToString();
  return states->at("tor0");
}

class SonicAdapterTest : public ::testing::Test {
 protected:
  SonicOptions Options() {
    SonicOptions o;
    o.switch_name = "tor0";
    o.unix_socket = redis_.socket();
    o.ports = {"Ethernet0", "Ethernet4"};
    o.connect_timeout = Duration::Millis(500);
    o.command_timeout = Duration::Millis(500);
    return o;
  }
  std::unique_ptr<SonicAdapter> Make(SonicOptions o) {
    auto a = SonicAdapter::Create(std::move(o));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return std::move(a).value();
  }

  RedisServer redis_;
  QosConfig cfg_;
};

TEST_F(SonicAdapterTest, ApplyWritesConfigDbTablesAndReadsBack) {
  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Health().ok());
  EXPECT_EQ(adapter->ReadBack().status().code(), core::StatusCode::kNotFound);
  const SwitchQosState want = MakeState(cfg_, {{10, 0}, {12, 2}});
  auto r = adapter->Apply(want);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->deletes, 0);
  // 64 DSCPs + 7 TCs + 7 schedulers (type, 2 DWRR weights) + 2 ports x (7 queues + 3 map fields).
  EXPECT_EQ(r->writes, 64 + 7 + 7 + 2 + 2 * (7 + 3));

  auto dscp = redis_.HGetAll("DSCP_TO_TC_MAP|CRUX");
  EXPECT_EQ(dscp.size(), 64u);
  EXPECT_EQ(dscp["10"], "5");  // Level 0.
  EXPECT_EQ(dscp["12"], "3");  // Level 2.
  EXPECT_EQ(dscp["48"], "6");  // CNP.
  EXPECT_EQ(dscp["8"], "1");   // Storage.
  EXPECT_EQ(dscp["14"], "0");  // Unused colour.
  EXPECT_EQ(redis_.HGetAll("TC_TO_QUEUE_MAP|CRUX")["6"], "6");
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q5"),
            (std::map<std::string, std::string>{{"type", "STRICT"}}));
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q1"),
            (std::map<std::string, std::string>{{"type", "DWRR"}, {"weight", "40"}}));
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet4|1")["scheduler"], "crux_q1");
  EXPECT_EQ(
      redis_.HGetAll("PORT_QOS_MAP|Ethernet0"),
      (std::map<std::string, std::string>{
          {"dscp_to_tc_map", "CRUX"}, {"tc_to_queue_map", "CRUX"}, {"pfc_enable", "2,3,4,5"}}));
  EXPECT_TRUE(redis_.HGetAll("QUEUE|Ethernet0|7").empty());  // TC 7 unused.

  auto back = adapter->ReadBack();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->SameDeviceState(want));
}

TEST_F(SonicAdapterTest, TcpConnectionWorksToo) {
  // A free loopback port: bind port 0, read it, release it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  RedisServer tcp_redis(port);
  SonicOptions o = Options();
  o.unix_socket.clear();
  o.host = "127.0.0.1";
  o.port = port;
  auto adapter = Make(o);
  EXPECT_EQ(adapter->address(), "tcp:127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(adapter->Apply(MakeState(cfg_, {{10, 1}})).ok());
  EXPECT_EQ(tcp_redis.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "4");
}

TEST_F(SonicAdapterTest, ReapplyWritesNothing) {
  auto adapter = Make(Options());
  const SwitchQosState want = MakeState(cfg_, {{10, 0}});
  ASSERT_TRUE(adapter->Apply(want).ok());
  redis_.Cmd({"CONFIG", "RESETSTAT"});
  auto again = adapter->Apply(want);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->writes, 0);
  EXPECT_EQ(again->deletes, 0);
  EXPECT_FALSE(again->changed());
  // Measured on the server, not only as reported: no write command and no transaction.
  for (const char* cmd : {"hset", "hdel", "del", "multi", "exec"}) {
    EXPECT_EQ(redis_.Calls(cmd), 0) << cmd;
  }
  EXPECT_GT(redis_.Calls("hgetall"), 0);
}

TEST_F(SonicAdapterTest, PriorityChangeRemapsOnlyTheJobColour) {
  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Apply(MakeState(cfg_, {{10, 0}, {12, 1}})).ok());
  redis_.Cmd({"CONFIG", "RESETSTAT"});
  // Job with colour 10 drops from level 0 to level 2: one map field, in one transaction.
  auto r = adapter->Apply(MakeState(cfg_, {{10, 2}, {12, 1}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->writes, 1);
  EXPECT_THAT(r->operations, ElementsAre("HSET DSCP_TO_TC_MAP|CRUX 10 3"));
  EXPECT_EQ(redis_.Calls("multi"), 1);
  EXPECT_EQ(redis_.Calls("exec"), 1);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["12"], "4");
}

TEST_F(SonicAdapterTest, ExhaustedPoolSharesColourByLevel) {
  QosConfig cfg = cfg_;
  cfg.dscp_pool = {10, 12};
  auto pool = *core::DscpPool::Create(cfg.dscp_pool);
  ASSERT_EQ(*pool.Acquire("a", 0), 10);
  ASSERT_EQ(*pool.Acquire("b", 3), 12);
  ASSERT_EQ(*pool.Acquire("c", 2), 12);  // Exhausted: shares with the closest level (b).
  EXPECT_EQ(pool.SharedJobs(), 2u);
  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Apply(MakeState(cfg, {{10, 0}, {12, 3}, {12, 2}})).ok());
  auto dscp = redis_.HGetAll("DSCP_TO_TC_MAP|CRUX");
  EXPECT_EQ(dscp["10"], "5");
  EXPECT_EQ(dscp["12"], "3");  // The shared colour gets its best member's level (2 -> TC 3).
}

TEST_F(SonicAdapterTest, StorageQueueDwrrWeights) {
  QosConfig cfg = cfg_;
  cfg.jobs_strict = false;
  cfg.level_weights = {40, 20, 10, 5};
  cfg.reserved[1].weight = 25;
  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Apply(MakeState(cfg, {{10, 0}})).ok());
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q1"),
            (std::map<std::string, std::string>{{"type", "DWRR"}, {"weight", "25"}}));
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q5")["weight"], "40");
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q6"),
            (std::map<std::string, std::string>{{"type", "STRICT"}}));  // Control stays strict.
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet0|1")["scheduler"], "crux_q1");
  // Raising the storage share is one field.
  cfg.reserved[1].weight = 35;
  auto r = adapter->Apply(MakeState(cfg, {{10, 0}}));
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->operations, ElementsAre("HSET SCHEDULER|crux_q1 weight 35"));
  // Back to strict job levels: the weights Crux set are removed from its own schedulers.
  auto s = adapter->Apply(MakeState(cfg_, {{10, 0}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q5"),
            (std::map<std::string, std::string>{{"type", "STRICT"}}));
}

TEST_F(SonicAdapterTest, ForeignKeysAndFieldsAreNeverTouched) {
  // What SONiC's own templates put there.
  redis_.Cmd({"HSET", "DSCP_TO_TC_MAP|AZURE", "3", "3", "46", "5", "48", "6"});
  redis_.Cmd({"HSET", "SCHEDULER|scheduler.0", "type", "DWRR", "weight", "14"});
  redis_.Cmd(
      {"HSET", "QUEUE|Ethernet0|3", "scheduler", "scheduler.0", "wred_profile", "AZURE_LOSSLESS"});
  redis_.Cmd({"HSET", "QUEUE|Ethernet0|2", "wred_profile", "AZURE_LOSSLESS"});
  redis_.Cmd({"HSET", "PORT_QOS_MAP|Ethernet0", "dscp_to_tc_map", "AZURE", "tc_to_pg_map", "AZURE",
              "pfcwd_sw_enable", "3,4"});
  redis_.Cmd({"HSET", "PORT|Ethernet0", "speed", "400000"});
  const auto azure = redis_.HGetAll("DSCP_TO_TC_MAP|AZURE");

  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Apply(MakeState(cfg_, {{10, 0}})).ok());
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet0|3"),
            (std::map<std::string, std::string>{{"scheduler", "crux_q3"},
                                                {"wred_profile", "AZURE_LOSSLESS"}}));
  auto pqm = redis_.HGetAll("PORT_QOS_MAP|Ethernet0");
  EXPECT_EQ(pqm["dscp_to_tc_map"], "CRUX");
  EXPECT_EQ(pqm["tc_to_pg_map"], "AZURE");
  EXPECT_EQ(pqm["pfcwd_sw_enable"], "3,4");

  // Shrink to two job levels (TCs 5, 4): Crux removes its schedulers of queues 2 and 3 and its
  // scheduler field on those queues, nothing else.
  QosConfig small = cfg_;
  small.level_tcs = {5, 4};
  auto r = adapter->Apply(MakeState(small, {{10, 0}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->deletes, 2 + 2 * 2 + 2);  // 2 scheduler keys, 2 queue fields x 2 ports, 2 TC
                                         // fields of TC_TO_QUEUE_MAP|CRUX.
  EXPECT_TRUE(redis_.HGetAll("SCHEDULER|crux_q3").empty());
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet0|3"),
            (std::map<std::string, std::string>{{"wred_profile", "AZURE_LOSSLESS"}}));
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet0|2"),
            (std::map<std::string, std::string>{{"wred_profile", "AZURE_LOSSLESS"}}));
  EXPECT_TRUE(redis_.HGetAll("QUEUE|Ethernet4|3").empty());  // Only Crux's field was there.
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|AZURE"), azure);
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|scheduler.0"),
            (std::map<std::string, std::string>{{"type", "DWRR"}, {"weight", "14"}}));
  EXPECT_EQ(redis_.HGetAll("PORT|Ethernet0")["speed"], "400000");
  // A foreign scheduler attached to a queue Crux no longer uses is left alone.
  redis_.Cmd({"HSET", "QUEUE|Ethernet0|7", "scheduler", "scheduler.0"});
  ASSERT_TRUE(adapter->Apply(MakeState(small, {{10, 0}})).ok());
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet0|7")["scheduler"], "scheduler.0");
}

TEST_F(SonicAdapterTest, RedisKilledMidApplyLeavesOldStateWhole) {
  auto adapter = Make(Options());
  const SwitchQosState old_state = MakeState(cfg_, {{10, 0}, {12, 1}});
  ASSERT_TRUE(adapter->Apply(old_state).ok());
  const auto old_dscp = redis_.HGetAll("DSCP_TO_TC_MAP|CRUX");

  SonicOptions o = Options();
  bool killed = false;
  o.before_exec = [&] {
    if (!killed) redis_.Kill();  // The whole transaction is queued, EXEC not yet sent.
    killed = true;
  };
  auto faulty = Make(o);
  QosConfig small = cfg_;
  small.level_tcs = {5, 4};  // A big change: maps, schedulers, queues.
  auto r = faulty->Apply(MakeState(small, {{10, 3}, {12, 0}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("CONFIG_DB at unix:" + redis_.socket()));
  EXPECT_THAT(r.status().message(), HasSubstr("EXEC"));
  EXPECT_FALSE(faulty->Health().ok());

  redis_.Start();  // Same data directory: Redis reloads what it acknowledged.
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX"), old_dscp);
  auto back = adapter->ReadBack();  // The old adapter reconnects by itself.
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->SameDeviceState(old_state));
  EXPECT_EQ(redis_.HGetAll("SCHEDULER|crux_q3")["type"], "STRICT");
}

TEST_F(SonicAdapterTest, OneAttemptPerCallRetriesAreTheCallersJob) {
  redis_.Kill();
  auto adapter = Make(Options());
  // Redis is down: one connect attempt, a clear kUnavailable naming the address, no waiting.
  auto down = adapter->Apply(MakeState(cfg_, {{10, 0}}));
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), core::StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr("CONFIG_DB at unix:" + redis_.socket()));
  EXPECT_THAT(down.status().message(), HasSubstr("connect"));
  EXPECT_EQ(adapter->Health().code(), core::StatusCode::kUnavailable);

  // Back: the caller's next attempt succeeds on the same adapter.
  redis_.Start();
  auto back = adapter->Apply(MakeState(cfg_, {{10, 0}}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");

  // Restarted while the adapter was idle: the kept connection is stale. It is replaced once, at
  // once, for the read that starts the apply (a new server never saw the old connection's
  // commands), so the caller sees no error.
  redis_.Kill();
  redis_.Start();
  auto after_restart = adapter->Apply(MakeState(cfg_, {{10, 1}}));
  ASSERT_TRUE(after_restart.ok()) << after_restart.status().ToString();
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "4");
}

TEST_F(SonicAdapterTest, ReapplyRepairsHandEditsAndFlushdbCountingTheDrift) {
  auto adapter = Make(Options());
  const SwitchQosState want = MakeState(cfg_, {{10, 0}, {12, 1}});
  auto first = adapter->Apply(want);
  ASSERT_TRUE(first.ok());
  const int all_fields = first->differing();
  // A hand edit of the map and of a queue attachment on the second port.
  redis_.Cmd({"HSET", "DSCP_TO_TC_MAP|CRUX", "10", "0"});
  redis_.Cmd({"HDEL", "QUEUE|Ethernet4|3", "scheduler"});
  redis_.Cmd({"CONFIG", "RESETSTAT"});
  auto repair = adapter->Apply(want);
  ASSERT_TRUE(repair.ok()) << repair.status().ToString();
  EXPECT_EQ(repair->differing(), 2);
  EXPECT_THAT(repair->operations, ElementsAre("HSET DSCP_TO_TC_MAP|CRUX 10 5",
                                              "HSET QUEUE|Ethernet4|3 scheduler crux_q3"));
  EXPECT_EQ(redis_.Calls("multi"), 1);
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(redis_.HGetAll("QUEUE|Ethernet4|3")["scheduler"], "crux_q3");

  // FLUSHDB: every field is drift, and one apply puts them all back.
  redis_.Cmd({"FLUSHDB"});
  auto flushed = adapter->Apply(want);
  ASSERT_TRUE(flushed.ok()) << flushed.status().ToString();
  EXPECT_EQ(flushed->differing(), all_fields);
  auto back = adapter->ReadBack();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->SameDeviceState(want));
}

TEST_F(SonicAdapterTest, StalledRedisTimesOutInsteadOfHanging) {
  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Apply(MakeState(cfg_, {{10, 0}})).ok());
  redis_.Stop();  // SIGSTOP: connections are accepted by the kernel, nothing answers.
  SonicOptions o = Options();
  o.command_timeout = Duration::Millis(200);
  o.connect_timeout = Duration::Millis(200);
  auto stalled = Make(o);
  auto r = stalled->Apply(MakeState(cfg_, {{10, 2}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("timed out after 200 ms (server stalled?)"));
  // The connected adapter times out too (same connection, mid-stream).
  auto h = adapter->Health();
  EXPECT_EQ(h.code(), core::StatusCode::kUnavailable);
  redis_.Continue();
  EXPECT_TRUE(stalled->Health().ok());
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");  // Nothing half-applied.
  ASSERT_TRUE(stalled->Apply(MakeState(cfg_, {{10, 2}})).ok());
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "3");
}

TEST_F(SonicAdapterTest, ConcurrentChangeAbortsTheTransactionWhole) {
  auto adapter = Make(Options());
  ASSERT_TRUE(adapter->Apply(MakeState(cfg_, {{10, 0}})).ok());
  SonicOptions o = Options();
  int calls = 0;
  o.before_exec = [&] {
    // Someone else edits a watched key between our read and our EXEC (first apply only).
    if (calls++ == 0) redis_.Cmd({"HSET", "PORT_QOS_MAP|Ethernet0", "pfc_enable", "3,4"});
  };
  auto racing = Make(o);
  auto r = racing->Apply(MakeState(cfg_, {{10, 1}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kUnavailable);  // Retryable.
  EXPECT_THAT(r.status().message(), HasSubstr("a watched key changed during the apply"));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");  // Nothing of ours applied.
  // The caller's retry re-reads the keys and repairs the field it owns as well.
  auto retry = racing->Apply(MakeState(cfg_, {{10, 1}}));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_THAT(retry->operations, ElementsAre("HSET DSCP_TO_TC_MAP|CRUX 10 4",
                                             "HSET PORT_QOS_MAP|Ethernet0 pfc_enable 2,3,4,5"));
  EXPECT_EQ(redis_.HGetAll("PORT_QOS_MAP|Ethernet0")["pfc_enable"], "2,3,4,5");
}

TEST_F(SonicAdapterTest, StatesBeyondThePlatformQueuesAreRefusedBeforeAnyWrite) {
  SonicOptions o = Options();
  o.queues = 4;
  auto adapter = Make(o);
  EXPECT_EQ(adapter->capabilities().queues, 4);
  auto r = adapter->Apply(MakeState(cfg_, {{10, 0}}));  // Uses queues 0..6.
  EXPECT_EQ(r.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("beyond the 4 queues per port of the sonic backend"));
  EXPECT_EQ(redis_.Calls("multi"), 0);
  EXPECT_EQ(redis_.Calls("hgetall"), 0);
}

TEST_F(SonicAdapterTest, EmitsEquivalentApplyPatch) {
  using nlohmann::json;
  redis_.Cmd({"HSET", "PORT_QOS_MAP|Ethernet0", "tc_to_pg_map", "AZURE"});
  auto adapter = Make(Options());
  const SwitchQosState want = MakeState(cfg_, {{10, 0}});
  auto first = adapter->ApplyPatchJson(want);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  json p = json::parse(*first);
  ASSERT_TRUE(p.is_array());
  // New tables are added whole; an existing key gets field operations.
  json dscp_add;
  bool port_field = false;
  for (const json& op : p) {
    if (op["path"] == "/DSCP_TO_TC_MAP") dscp_add = op;
    if (op["path"] == "/PORT_QOS_MAP/Ethernet0/dscp_to_tc_map") {
      port_field = op["op"] == "add" && op["value"] == "CRUX";
    }
  }
  ASSERT_FALSE(dscp_add.is_null()) << *first;
  EXPECT_EQ(dscp_add["op"], "add");
  EXPECT_EQ(dscp_add["value"]["CRUX"]["10"], "5");
  EXPECT_EQ(dscp_add["value"]["CRUX"].size(), 64u);
  EXPECT_TRUE(port_field) << *first;
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX").size(), 0u);  // Emitting writes nothing.

  ASSERT_TRUE(adapter->Apply(want).ok());
  EXPECT_EQ(json::parse(*adapter->ApplyPatchJson(want)), json::array());
  auto change = adapter->ApplyPatchJson(MakeState(cfg_, {{10, 2}}));
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(json::parse(*change),
            json::parse(R"([{"op":"add","path":"/DSCP_TO_TC_MAP/CRUX/10","value":"3"}])"));
  QosConfig small = cfg_;
  small.level_tcs = {5, 4, 3};
  json shrink = json::parse(*adapter->ApplyPatchJson(MakeState(small, {{10, 0}})));
  EXPECT_TRUE(std::find(shrink.begin(), shrink.end(),
                        json{{"op", "remove"}, {"path", "/SCHEDULER/crux_q2"}}) != shrink.end())
      << shrink.dump();
  EXPECT_TRUE(std::find(shrink.begin(), shrink.end(),
                        json{{"op", "remove"}, {"path", "/QUEUE/Ethernet0|2/scheduler"}}) !=
              shrink.end())
      << shrink.dump();
}

TEST_F(SonicAdapterTest, RejectsBadOptionsAndStates) {
  SonicOptions o = Options();
  o.ports.clear();
  EXPECT_THAT(SonicAdapter::Create(o).status().message(), HasSubstr("sonic.ports"));
  o = Options();
  o.scheduler_prefix = "sched";
  EXPECT_THAT(SonicAdapter::Create(o).status().message(), HasSubstr("sonic.scheduler_prefix"));
  o = Options();
  o.switch_name.clear();
  EXPECT_THAT(SonicAdapter::Create(o).status().message(), HasSubstr("sonic.switch_name"));
  o = Options();
  o.unix_socket.clear();
  o.port = 70000;
  EXPECT_THAT(SonicAdapter::Create(o).status().message(), HasSubstr("sonic.port"));
  o = Options();
  o.queues = 0;
  EXPECT_THAT(SonicAdapter::Create(o).status().message(), HasSubstr("sonic.queues"));

  auto adapter = Make(Options());
  SwitchQosState bad = MakeState(cfg_, {});
  bad.dscp_to_tc[70] = 1;
  auto r = adapter->Apply(bad);
  EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("dscp_to_tc[70]"));
  EXPECT_EQ(redis_.Calls("multi"), 0);

  // A key of the wrong type is a clear, non-retried error.
  redis_.Cmd({"SET", "DSCP_TO_TC_MAP|CRUX", "oops"});
  auto wrong = adapter->Apply(MakeState(cfg_, {}));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.status().message(), HasSubstr("DSCP_TO_TC_MAP|CRUX"));

  o = Options();
  o.unix_socket = redis_.dir() + "/missing.sock";
  auto h = Make(o)->Health();
  EXPECT_EQ(h.code(), core::StatusCode::kUnavailable);
  EXPECT_THAT(h.message(), HasSubstr("missing.sock"));
  EXPECT_TRUE(Make(Options())->capabilities().transactional);
}

}  // namespace
}  // namespace crux::switch_adapters

#endif  // CRUX_WITH_SONIC
