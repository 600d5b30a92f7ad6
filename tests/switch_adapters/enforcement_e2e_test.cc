// Enforcement verification end to end (issue #29): a real redis-server as the switch's local
// Redis, CONFIG_DB written by the sonic adapter, and the rows orchagent and syncd would write for
// it planted by FakeSonic below (ASIC_DB db 1, COUNTERS_DB db 2, shaped as sonic-swss and
// sonic-sairedis write them; docs/switch-adapters.md lists the keys and their sources).
//
//   * the sonic verifier: MATCH on a switch whose ASIC holds the plan; MISMATCH with the first
//     difference on a planted wrong ASIC_DB entry (CONFIG_DB still right: sonic-buildimage
//     #27310's shape); MISMATCH on traffic in a queue the plan leaves unused; malformed rows give
//     clear errors and lose nothing; a port orchagent has not created is UNKNOWN;
//   * the agent: the check runs on reconciles and reaches a stand-in cruxd in SwitchApplied
//     (when the verdict changes) and in every hello; a backend without a verifier says why.
//
// No sleeps: the agent's timers run on a FakeClock, waits poll with a deadline.
#if defined(CRUX_HAVE_SWITCH_AGENT) && defined(CRUX_WITH_SONIC)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "asic_rows.h"
#include "crux/core/base/clock.h"
#include "crux/core/topology/topology.h"
#include "crux/protocol/convert.h"
#include "crux/switch_adapters/builtin_backends.h"
#include "crux/switch_adapters/file_adapter.h"
#include "crux/switch_adapters/sonic_adapter.h"
#include "crux/switch_adapters/sonic_verifier.h"
#include "fake_daemon.h"
#include "redis_server.h"
#include "switch_agent.h"

namespace crux::switch_adapters {
namespace {

using core::Duration;
using core::EnforcementStatus;
using testing::FakeDaemon;
using ::testing::HasSubstr;
using testing::RedisServer;

constexpr int kAsicDb = 1;
constexpr int kCountersDb = 2;
constexpr int kQueues = 8;  // Unicast queues per port; as many multicast ones follow.
const char* const kDscpMapVid = "oid:0x14000000000615";
const char* const kQueueMapVid = "oid:0x14000000000616";
const char* const kPgMapVid = "oid:0x14000000000617";  // A foreign (AZURE) map: never checked.

// What orchagent (portsorch, qosorch, the flex counters) and syncd write for a switch whose
// CONFIG_DB holds Crux's tables:
//   COUNTERS_DB  COUNTERS_PORT_NAME_MAP, COUNTERS_QUEUE_NAME_MAP (<port>:0-7 unicast, :8-15
//                multicast), COUNTERS_QUEUE_INDEX_MAP, COUNTERS_QUEUE_TYPE_MAP,
//                COUNTERS:<queue vid> SAI_QUEUE_STAT_PACKETS / _BYTES
//   ASIC_DB      ASIC_STATE:SAI_OBJECT_TYPE_PORT:<vid> with the map attributes,
//                ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:<vid> per CONFIG_DB map, VIDTORID/RIDTOVID
class FakeSonic {
 public:
  FakeSonic(const RedisServer& redis, std::vector<std::string> ports)
      : redis_(redis), ports_(std::move(ports)) {}

  static std::string PortVid(size_t i) { return "oid:0x100000000000" + std::to_string(2 + i); }
  static std::string QueueVid(size_t port, int position) {
    return "oid:0x150000000" + std::to_string(100 + port) + std::to_string(10 + position);
  }

  // portsorch + syncd: the ports (and their queues, unless `queues` is false: portsorch writes
  // the queue maps later, when the QUEUE counters are set up) exist, no Crux map bound yet.
  void CreatePorts(bool queues = true) const {
    for (size_t i = 0; i < ports_.size(); ++i) {
      const std::string& port = ports_[i];
      const std::string vid = PortVid(i);
      redis_.Cmd({"HSET", "COUNTERS_PORT_NAME_MAP", port, vid}, kCountersDb);
      redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_PORT:" + vid, "SAI_PORT_ATTR_ADMIN_STATE",
                  "true", "SAI_PORT_ATTR_MTU", "9122", "SAI_PORT_ATTR_SPEED", "100000",
                  "SAI_PORT_ATTR_QOS_TC_TO_PRIORITY_GROUP_MAP", kPgMapVid},
                 kAsicDb);
      redis_.Cmd({"HSET", "VIDTORID", vid, "oid:0x" + std::to_string(1000 + i)}, kAsicDb);
      redis_.Cmd({"HSET", "RIDTOVID", "oid:0x" + std::to_string(1000 + i), vid}, kAsicDb);
      if (queues) CreateQueues(i);
    }
    redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:" + std::string(kPgMapVid),
                "SAI_QOS_MAP_ATTR_TYPE", "SAI_QOS_MAP_TYPE_TC_TO_PRIORITY_GROUP",
                "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST", testing::QosMapList("tc", "pg", {{3, 3}})},
               kAsicDb);
  }

  // The queues of port `i` (unicast 0-7, multicast 8-15): counters, then the maps.
  void CreateQueues(size_t i) const {
    for (int n = 0; n < 2 * kQueues; ++n) {
      const std::string q = QueueVid(i, n);
      SetQueuePackets(i, n, 0);
      redis_.Cmd({"HSET", "COUNTERS_QUEUE_INDEX_MAP", q, std::to_string(n % kQueues)}, kCountersDb);
      redis_.Cmd({"HSET", "COUNTERS_QUEUE_TYPE_MAP", q,
                  n < kQueues ? "SAI_QUEUE_TYPE_UNICAST" : "SAI_QUEUE_TYPE_MULTICAST"},
                 kCountersDb);
      redis_.Cmd({"HSET", "COUNTERS_QUEUE_NAME_MAP", ports_[i] + ":" + std::to_string(n), q},
                 kCountersDb);
    }
  }

  // qosorch: one QOS_MAP object per CONFIG_DB map (created, or its list updated in place), bound
  // to every port of PORT_QOS_MAP|<port> that names it.
  void SyncQosFromConfigDb() const {
    auto ints = [](const std::map<std::string, std::string>& h) {
      std::map<int, int> out;
      for (const auto& [k, v] : h) out[std::stoi(k)] = std::stoi(v);
      return out;
    };
    WriteMap(kDscpMapVid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC",
             testing::DscpToTcList(ints(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX"))));
    WriteMap(kQueueMapVid, "SAI_QOS_MAP_TYPE_TC_TO_QUEUE",
             testing::TcToQueueList(ints(redis_.HGetAll("TC_TO_QUEUE_MAP|CRUX"))));
    for (size_t i = 0; i < ports_.size(); ++i) {
      const auto pqm = redis_.HGetAll("PORT_QOS_MAP|" + ports_[i]);
      ASSERT_EQ(pqm.at("dscp_to_tc_map"), "CRUX");
      redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_PORT:" + PortVid(i),
                  "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP", kDscpMapVid,
                  "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP", kQueueMapVid},
                 kAsicDb);
    }
  }

  void WriteMap(const std::string& vid, const std::string& type, const std::string& list) const {
    redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:" + vid, "SAI_QOS_MAP_ATTR_TYPE", type,
                "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST", list},
               kAsicDb);
  }

  // The flex counter group QUEUE: cumulative packets (and bytes, 1 KB each) of a queue.
  void SetQueuePackets(size_t port, int position, uint64_t packets) const {
    redis_.Cmd({"HSET", "COUNTERS:" + QueueVid(port, position), "SAI_QUEUE_STAT_PACKETS",
                std::to_string(packets), "SAI_QUEUE_STAT_BYTES", std::to_string(packets * 1024)},
               kCountersDb);
  }

 private:
  const RedisServer& redis_;
  std::vector<std::string> ports_;
};

// One job (colour 10, level 0 -> TC 5) crosses the switch (default QosConfig).
core::SwitchQosState MakeState(int level = 0) {
  core::Topology topo;
  core::NodeId sw = *topo.AddNode("tor0", core::NodeKind::kTor);
  std::vector<core::QosJob> jobs = {{"train", 10, level, {sw}}};
  return core::ComputeDesiredQos(core::QosConfig{}, topo, jobs)->at("tor0");
}

EnforcementPlan MakePlan(int level = 0) {
  return EnforcementPlan{MakeState(level), {2, 3, 4, 5}, 1};
}

class EnforcementE2eTest : public ::testing::Test {
 protected:
  EnforcementE2eTest() : sonic_(redis_, {"Ethernet0", "Ethernet4"}) {
    config_.switch_name = "tor0";
    config_.params = {{"redis-socket", redis_.socket()},
                      {"redis-timeout-ms", "300"},
                      {"ports", "Ethernet0,Ethernet4"}};
    queues_.min_interval = Duration::Millis(1000);
  }

  std::unique_ptr<SwitchAdapter> Adapter() {
    return std::move(BuiltinBackends().Create("sonic", config_)).value();
  }
  std::unique_ptr<EnforcementVerifier> Verifier() {
    auto v = BuiltinBackends().CreateVerifier("sonic", config_, queues_);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return std::move(v).value();
  }

  RedisServer redis_;
  FakeSonic sonic_;
  BackendConfig config_;
  QueueCheckOptions queues_;
};

TEST_F(EnforcementE2eTest, VerifierMatchesThenFindsAWrongAsicEntryAndAnUnexpectedQueue) {
  auto adapter = Adapter();
  auto verifier = Verifier();
  const EnforcementPlan plan = MakePlan();
  ASSERT_TRUE(adapter->Apply(plan.state).ok());

  // Orchagent has not created the ports yet: UNKNOWN, saying which.
  auto check = verifier->Verify(plan, Duration::Zero());
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kUnknown);
  EXPECT_THAT(check->detail, HasSubstr("Ethernet0 is not in COUNTERS_DB COUNTERS_PORT_NAME_MAP"));

  // The ports exist but no Crux map is bound yet (orchagent has not caught up): MISMATCH.
  sonic_.CreatePorts();
  check = verifier->Verify(plan, Duration::Zero());
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kMismatch);
  EXPECT_EQ(check->detail,
            "Ethernet0: no DSCP_TO_TC map is bound in the ASIC; the plan maps 64 entries");

  // The ASIC holds what CONFIG_DB says: MATCH, 2 maps x 2 ports; the first counter reading is a
  // baseline (no queue judged yet).
  sonic_.SyncQosFromConfigDb();
  check = verifier->Verify(plan, Duration::Millis(1000));
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kMatch) << check->detail;
  EXPECT_EQ(check->detail, "");
  EXPECT_EQ(check->maps_checked, 4u);
  EXPECT_EQ(check->queues_checked, 0u);

  // Traffic where the plan puts it (best effort in 0, the job in 5, control in 6) and in a
  // multicast queue (position 15, index 7: not steered by TC_TO_QUEUE, never judged).
  sonic_.SetQueuePackets(0, 0, 500000);
  sonic_.SetQueuePackets(0, 5, 900000);
  sonic_.SetQueuePackets(1, 6, 300);
  sonic_.SetQueuePackets(1, 15, 800000);
  check = verifier->Verify(plan, Duration::Millis(11000));
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kMatch) << check->detail;
  EXPECT_EQ(check->queues_checked, 16u);  // 8 unicast queues x 2 ports.

  // sonic-buildimage #27310's shape: CONFIG_DB holds the plan, the ASIC another map.
  std::map<int, int> wrong = plan.state.dscp_to_tc;
  wrong[10] = 0;
  sonic_.WriteMap(kDscpMapVid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC", testing::DscpToTcList(wrong));
  EXPECT_EQ(redis_.HGetAll("DSCP_TO_TC_MAP|CRUX")["10"], "5");
  EXPECT_EQ(adapter->Apply(plan.state)->differing(), 0);  // Nothing to repair in CONFIG_DB.
  check = verifier->Verify(plan, Duration::Millis(12000));
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kMismatch);
  EXPECT_EQ(check->detail,
            "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14000000000615): dscp 10 -> tc 0, the plan "
            "says tc 5");

  // A port bound to a map of another type, or to a map ASIC_DB does not hold.
  sonic_.SyncQosFromConfigDb();  // Ethernet0 right again.
  redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_PORT:" + FakeSonic::PortVid(1),
              "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP", kPgMapVid},
             kAsicDb);
  check = verifier->Verify(plan, Duration::Millis(13000));
  EXPECT_EQ(check->detail,
            "Ethernet4: SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP names oid:0x14000000000617, a "
            "SAI_QOS_MAP_TYPE_TC_TO_PRIORITY_GROUP map, not a SAI_QOS_MAP_TYPE_TC_TO_QUEUE map");
  redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_PORT:" + FakeSonic::PortVid(1),
              "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP", "oid:0x14000000000999"},
             kAsicDb);
  check = verifier->Verify(plan, Duration::Millis(14000));
  EXPECT_THAT(check->detail, HasSubstr("Ethernet4: SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP names "
                                       "oid:0x14000000000999, which is not in ASIC_DB"));
  sonic_.SyncQosFromConfigDb();

  // Traffic in a queue the plan leaves unused (no DSCP maps to queue 7): MISMATCH.
  check = verifier->Verify(plan, Duration::Millis(20000));
  ASSERT_EQ(check->status, EnforcementStatus::kMatch) << check->detail;
  sonic_.SetQueuePackets(1, 7, 250000);
  check = verifier->Verify(plan, Duration::Millis(30000));
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kMismatch);
  EXPECT_EQ(check->detail,
            "traffic in a queue the plan leaves unused: Ethernet4 queue 7 carried 250000 packets "
            "in 10.0 s (25000 pkt/s, more than 100); the plan maps no DSCP to it (queues in use: "
            "0, 1, 5, 6)");
  EXPECT_EQ(check->maps_checked, 4u);
  EXPECT_EQ(check->queues_checked, 16u);
  // Quiet again: MATCH.
  check = verifier->Verify(plan, Duration::Millis(40000));
  EXPECT_EQ(check->status, EnforcementStatus::kMatch) << check->detail;
}

TEST_F(EnforcementE2eTest, MalformedRowsGiveClearErrorsAndLoseNothing) {
  auto adapter = Adapter();
  auto verifier = Verifier();
  const EnforcementPlan plan = MakePlan();
  ASSERT_TRUE(adapter->Apply(plan.state).ok());
  sonic_.CreatePorts();
  sonic_.SyncQosFromConfigDb();
  ASSERT_EQ(verifier->Verify(plan, Duration::Zero())->status, EnforcementStatus::kMatch);

  // A garbled map list: an error naming the key and field, no crash.
  sonic_.WriteMap(kDscpMapVid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC", "{\"count\":64,\"list\":[{\"key\"");
  auto check = verifier->Verify(plan, Duration::Millis(1000));
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(check.status().message(),
              HasSubstr("ASIC_DB ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:oid:0x14000000000615: "
                        "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST: not JSON"));
  // ... but a definite difference on another map still wins (MISMATCH is not hidden).
  std::map<int, int> queues = plan.state.tc_to_queue;
  queues[5] = 0;
  sonic_.WriteMap(kQueueMapVid, "SAI_QOS_MAP_TYPE_TC_TO_QUEUE", testing::TcToQueueList(queues));
  check = verifier->Verify(plan, Duration::Millis(1000));
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->detail,
            "Ethernet0 TC_TO_QUEUE (ASIC_DB oid:0x14000000000616): tc 5 -> queue 0, the plan "
            "says queue 5");
  // A port attribute that is not an object id.
  sonic_.SyncQosFromConfigDb();
  redis_.Cmd({"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_PORT:" + FakeSonic::PortVid(0),
              "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP", "CRUX"},
             kAsicDb);
  EXPECT_THAT(verifier->Verify(plan, Duration::Millis(1000)).status().message(),
              HasSubstr("SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP: 'CRUX' is not an object id"));
  sonic_.SyncQosFromConfigDb();

  // A garbled queue counter: UNKNOWN, the maps' result kept in the message and count.
  redis_.Cmd({"HSET", "COUNTERS:" + FakeSonic::QueueVid(0, 3), "SAI_QUEUE_STAT_PACKETS", "x1"},
             kCountersDb);
  check = verifier->Verify(plan, Duration::Millis(2000));
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_EQ(check->status, EnforcementStatus::kUnknown);
  EXPECT_EQ(check->maps_checked, 4u);
  EXPECT_THAT(check->detail, HasSubstr("the maps match, but the queue counters cannot be judged: "
                                       "COUNTERS_DB COUNTERS:" +
                                       FakeSonic::QueueVid(0, 3) +
                                       " SAI_QUEUE_STAT_PACKETS: 'x1' is not a counter"));
  // Fixed: the judge's baseline from before is still there, so the next check judges queues.
  sonic_.SetQueuePackets(0, 3, 0);
  check = verifier->Verify(plan, Duration::Millis(3000));
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->status, EnforcementStatus::kMatch) << check->detail;
  EXPECT_EQ(check->queues_checked, 16u);

  // Redis gone: one attempt, kUnavailable naming the database.
  redis_.Kill();
  check = verifier->Verify(plan, Duration::Millis(4000));
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.status().code(), core::StatusCode::kUnavailable);
  EXPECT_THAT(check.status().message(), HasSubstr("_DB at unix:"));
}

TEST_F(EnforcementE2eTest, QueueMapsThatAppearAfterThePortsAreFoundWithinFiveChecks) {
  auto adapter = Adapter();
  auto verifier = Verifier();
  const EnforcementPlan plan = MakePlan();
  ASSERT_TRUE(adapter->Apply(plan.state).ok());
  sonic_.CreatePorts(/*queues=*/false);
  sonic_.SyncQosFromConfigDb();
  auto check = verifier->Verify(plan, Duration::Zero());
  ASSERT_EQ(check->status, EnforcementStatus::kMatch) << check->detail;
  EXPECT_EQ(check->queues_checked, 0u);  // No queue counters yet: traffic not judged.
  sonic_.CreateQueues(0);
  sonic_.CreateQueues(1);
  uint32_t judged = 0;
  for (int i = 1; i <= 6 && judged == 0; ++i) {
    check = verifier->Verify(plan, Duration::Millis(1000 * i));
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    judged = check->queues_checked;
  }
  EXPECT_EQ(judged, 16u);
}

// The agent against a stand-in cruxd: the check runs on reconciles and is reported.
class EnforcementAgentTest : public EnforcementE2eTest {
 protected:
  EnforcementAgentTest() : endpoint_("ipc://" + redis_.dir() + "/cruxd.sock") {
    options_.switch_name = "tor0";
    options_.client.endpoint = endpoint_;
    options_.client.reconnect_ivl = Duration::Millis(20);
    options_.client.reconnect_ivl_max = Duration::Millis(100);
    options_.call_timeout = Duration::Millis(300);
    options_.hello_interval = Duration::Millis(60000);
    options_.daemon_backoff = {Duration::Millis(100), Duration::Millis(1000), 2, 0};
    options_.device_backoff = {Duration::Millis(100), Duration::Millis(400), 2, 0};
    options_.reconcile_period = Duration::Millis(5000);
    options_.poll = Duration::Millis(20);
  }

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

  std::string endpoint_;
  AgentOptions options_;
  protocol::TransportContext ctx_;
  core::FakeClock clock_;
};

TEST_F(EnforcementAgentTest, ChecksOnReconcilesAndReportsMatchAndMismatchToCruxd) {
  FakeDaemon daemon(ctx_, endpoint_);
  auto adapter = Adapter();
  SwitchAgent agent(options_, ctx_, *adapter, clock_);
  agent.SetEnforcementVerifier(Verifier());
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  ASSERT_GE(daemon.Hellos().size(), 1u);
  EXPECT_EQ(daemon.Hellos()[0].enforcement().status(), v1::ENFORCEMENT_STATUS_UNKNOWN);
  EXPECT_THAT(daemon.Hellos()[0].enforcement().detail(), HasSubstr("not checked yet"));

  // cruxd pushes the plan with the levels' TCs; the adapter writes CONFIG_DB, orchagent follows.
  v1::SwitchQosState push = protocol::SwitchQosStateToProto(MakeState(), 1);
  push.set_state_id(7);
  for (int tc : {2, 3, 4, 5}) push.add_job_tcs(static_cast<uint32_t>(tc));
  daemon.Push(push);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 1; }));
  sonic_.CreatePorts();
  sonic_.SyncQosFromConfigDb();

  // The first reconcile finds CONFIG_DB in sync and checks: MATCH, reported at once.
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 2; }));
  v1::SwitchApplied a = daemon.Applied()[1];
  EXPECT_TRUE(a.ok()) << a.error();
  EXPECT_TRUE(a.reconcile());
  EXPECT_EQ(a.drifted_fields(), 0u);
  EXPECT_EQ(a.enforcement().status(), v1::ENFORCEMENT_STATUS_MATCH) << a.enforcement().detail();
  EXPECT_EQ(a.enforcement().maps_checked(), 4u);
  EXPECT_EQ(a.enforcement().epoch(), 1u);
  EXPECT_GT(a.enforcement().checked_unix_ms(), 0u);
  // Another in-sync reconcile with the same verdict reports nothing.
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.counters().enforcement_checks == 2; }));
  EXPECT_EQ(daemon.Applied().size(), 2u);
  EXPECT_EQ(agent.enforcement().queues_checked, 16u);

  // A wrong ASIC_DB entry under a right CONFIG_DB: MISMATCH with the first difference.
  std::map<int, int> wrong = MakeState().dscp_to_tc;
  wrong[10] = 0;
  sonic_.WriteMap(kDscpMapVid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC", testing::DscpToTcList(wrong));
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 3; }));
  a = daemon.Applied()[2];
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(a.drifted_fields(), 0u);  // CONFIG_DB did not drift: the ASIC did.
  EXPECT_EQ(a.enforcement().status(), v1::ENFORCEMENT_STATUS_MISMATCH);
  EXPECT_EQ(a.enforcement().detail(),
            "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14000000000615): dscp 10 -> tc 0, the plan "
            "says tc 5");
  EXPECT_EQ(agent.counters().enforcement_mismatches, 1u);

  // Repaired by hand: MATCH again.
  sonic_.SyncQosFromConfigDb();
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 4; }));
  EXPECT_EQ(daemon.Applied()[3].enforcement().status(), v1::ENFORCEMENT_STATUS_MATCH);

  // Traffic in a queue the plan leaves unused: MISMATCH.
  sonic_.SetQueuePackets(0, 7, 90000);
  clock_.Advance(options_.reconcile_period);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Applied().size() == 5; }));
  a = daemon.Applied()[4];
  EXPECT_EQ(a.enforcement().status(), v1::ENFORCEMENT_STATUS_MISMATCH);
  EXPECT_EQ(a.enforcement().detail(),
            "traffic in a queue the plan leaves unused: Ethernet0 queue 7 carried 90000 packets "
            "in 5.0 s (18000 pkt/s, more than 100); the plan maps no DSCP to it (queues in use: "
            "0, 1, 5, 6)");

  // The next hello carries the latest check too (a restarted cruxd learns it there). (The agent
  // may have said hello twice at its start: once at once, once when the handshake completed.)
  const size_t hellos = daemon.Hellos().size();
  clock_.Advance(options_.hello_interval);
  ASSERT_TRUE(RunUntil(agent, [&] { return daemon.Hellos().size() > hellos; }));
  EXPECT_EQ(daemon.Hellos().back().enforcement().status(), v1::ENFORCEMENT_STATUS_MISMATCH);
  EXPECT_THAT(daemon.Hellos().back().enforcement().detail(), HasSubstr("Ethernet0 queue 7"));
}

TEST_F(EnforcementAgentTest, ABackendWithoutAVerifierReportsUnknownWithTheReason) {
  FakeDaemon daemon(ctx_, endpoint_);
  FileOptions fo;
  fo.directory = redis_.dir();
  fo.switch_name = "tor0";
  auto adapter = std::move(FileAdapter::Create(fo)).value();
  SwitchAgent agent(options_, ctx_, *adapter, clock_);
  BackendConfig c;
  c.switch_name = "tor0";
  c.params["state-dir"] = redis_.dir();
  agent.SetEnforcementVerifier(BuiltinBackends().CreateVerifier("file", c, queues_));
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(RunUntil(agent, [&] { return agent.daemon_connected(); }));
  ASSERT_GE(daemon.Hellos().size(), 1u);
  EXPECT_EQ(daemon.Hellos()[0].enforcement().status(), v1::ENFORCEMENT_STATUS_UNKNOWN);
  EXPECT_EQ(daemon.Hellos()[0].enforcement().detail(),
            "the file backend cannot verify enforcement");
}

}  // namespace
}  // namespace crux::switch_adapters

#endif  // CRUX_HAVE_SWITCH_AGENT && CRUX_WITH_SONIC
