// Enforcement verification (issue #29), the pure halves: reading SONiC's ASIC_DB QoS map rows
// (asic_db_schema.h) including malformed ones, the COUNTERS_DB name maps (counters_db.h), the map
// comparison and the queue traffic rules (enforcement.h). No Redis (enforcement_e2e_test.cc has
// the verifier and the agent against a real redis-server).
#include "crux/switch_adapters/enforcement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "asic_rows.h"
#include "crux/core/topology/topology.h"
#include "crux/switch_adapters/asic_db_schema.h"
#include "crux/switch_adapters/builtin_backends.h"

namespace crux::switch_adapters {
namespace {

using core::Duration;
using ::testing::HasSubstr;

// A switch one job (colour 10, level 0 -> TC 5) crosses, under the default QosConfig: DSCP 10 ->
// TC 5, 48 -> 6 (control), 8 -> 1 (storage), the rest -> 0; tc_to_queue identity for 0-6.
EnforcementPlan Plan(int level = 0) {
  core::Topology topo;
  core::NodeId sw = *topo.AddNode("tor0", core::NodeKind::kTor);
  std::vector<core::QosJob> jobs = {{"train", 10, level, {sw}}};
  EnforcementPlan p;
  p.state = core::ComputeDesiredQos(core::QosConfig{}, topo, jobs)->at("tor0");
  p.job_tcs = {2, 3, 4, 5};  // qos.level_tcs.
  p.epoch = 3;
  return p;
}

// A map row verbatim in the shape of a sonic-sairedis ASIC_DB dump (saiasiccmp/dump1.json: an
// image without "fc" and "mpls_exp"), two entries.
const char* const kOldImageRow =
    R"({"count":2,"list":[{"key":{"color":"SAI_PACKET_COLOR_GREEN","dot1p":0,"dscp":56,"pg":0,)"
    R"("prio":0,"qidx":0,"tc":0},"value":{"color":"SAI_PACKET_COLOR_GREEN","dot1p":0,"dscp":0,)"
    R"("pg":0,"prio":0,"qidx":0,"tc":1}},{"key":{"color":"SAI_PACKET_COLOR_GREEN","dot1p":0,)"
    R"("dscp":48,"pg":0,"prio":0,"qidx":0,"tc":0},"value":{"color":"SAI_PACKET_COLOR_GREEN",)"
    R"("dot1p":0,"dscp":0,"pg":0,"prio":0,"qidx":0,"tc":6}}]})";

TEST(AsicDbSchemaTest, ParsesSairedisQosMapListsOfOldAndNewImages) {
  auto old_items = ParseQosMapList(kOldImageRow);
  ASSERT_TRUE(old_items.ok()) << old_items.status().ToString();
  ASSERT_EQ(old_items->size(), 2u);
  EXPECT_EQ((*old_items)[0].key.dscp, 56);
  EXPECT_EQ((*old_items)[0].value.tc, 1);
  EXPECT_EQ((*old_items)[0].key.fc, std::nullopt);  // Older images: no "fc", no "mpls_exp".
  EXPECT_EQ((*old_items)[1].value.color, "SAI_PACKET_COLOR_GREEN");

  const std::string row = testing::DscpToTcList({{10, 5}, {48, 6}, {0, 0}});
  EXPECT_EQ(row.rfind(R"({"count":3,"list":[{"key":{"color":"SAI_PACKET_COLOR_GREEN","dot1p":0,)"
                      R"("dscp":0,"fc":0,"mpls_exp":0,"pg":0,"prio":0,"qidx":0,"tc":0},)",
                      0),
            0u)
      << row;
  AsicQosMap map;
  map.type = "SAI_QOS_MAP_TYPE_DSCP_TO_TC";
  map.items = *ParseQosMapList(row);
  auto entries = QosMapEntries(map, QosMapKind::kDscpToTc, "K");
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(*entries, (std::map<int, int>{{0, 0}, {10, 5}, {48, 6}}));
  map.items = *ParseQosMapList(testing::TcToQueueList({{5, 5}, {6, 6}}));
  EXPECT_EQ(*QosMapEntries(map, QosMapKind::kTcToQueue, "K"), (std::map<int, int>{{5, 5}, {6, 6}}));
  // A count-only serialisation of an empty list is a valid empty map.
  EXPECT_TRUE(ParseQosMapList(R"({"count":0,"list":[]})")->empty());
}

TEST(AsicDbSchemaTest, MalformedRowsAreClearErrorsNeverCrashes) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not JSON"},
      {"{\"count\":1,\"list\":[", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"list":[]})", "no \"count\""},
      {R"({"count":-1,"list":[]})", "count: -1 is not a count"},
      {R"({"count":1})", "no \"list\""},
      {R"({"count":2,"list":null})", "list is null"},
      {R"({"count":1,"list":{}})", "list is not an array"},
      {R"({"count":3,"list":[]})", "count is 3 but the list has 0 items"},
      {R"({"count":1,"list":[7]})", "list[0]: not an object"},
      {R"({"count":1,"list":[{"value":{}}]})", "list[0]: no \"key\" object"},
      {R"({"count":1,"list":[{"key":{}}]})", "list[0]: no \"value\" object"},
      {R"({"count":1,"list":[{"key":[],"value":{}}]})", "list[0].key: not an object"},
      {R"({"count":1,"list":[{"key":{"dscp":300},"value":{"tc":1}}]})",
       "list[0].key.dscp: 300 is not an integer 0..255"},
      {R"({"count":1,"list":[{"key":{"dscp":-2},"value":{"tc":1}}]})", "list[0].key.dscp: -2"},
      {R"({"count":1,"list":[{"key":{"dscp":1.5},"value":{"tc":1}}]})", "list[0].key.dscp: 1.5"},
      {R"({"count":1,"list":[{"key":{"dscp":"7"},"value":{"tc":1}}]})", "list[0].key.dscp: \"7\""},
      {R"({"count":1,"list":[{"key":{"dscp":1},"value":{"color":5}}]})",
       "list[0].value.color: 5 is not a string"},
  };
  for (const auto& [text, message] : cases) {
    auto r = ParseQosMapList(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), core::StatusCode::kFailedPrecondition) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(message)) << text;
  }
  // Deeply nested garbage and embedded NULs are errors too.
  EXPECT_FALSE(ParseQosMapList(std::string(100000, '[')).ok());
  EXPECT_FALSE(ParseQosMapList(std::string("{\"count\":0,\0\"list\":[]}", 22)).ok());

  // Object level: the key and the field are named.
  const std::string key = "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:oid:0x14000000000615";
  EXPECT_THAT(ParseQosMapObject({}, key).status().message(),
              HasSubstr("ASIC_DB " + key + ": SAI_QOS_MAP_ATTR_TYPE missing"));
  EXPECT_THAT(ParseQosMapObject({{"SAI_QOS_MAP_ATTR_TYPE", "SAI_QOS_MAP_TYPE_DSCP_TO_TC"}}, key)
                  .status()
                  .message(),
              HasSubstr("SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST missing"));
  EXPECT_THAT(ParseQosMapObject({{"SAI_QOS_MAP_ATTR_TYPE", "SAI_QOS_MAP_TYPE_DSCP_TO_TC"},
                                 {"SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST", "{oops"}},
                                key)
                  .status()
                  .message(),
              HasSubstr(key + ": SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST: not JSON"));
  // Entries: the field the kind needs, and each key once.
  AsicQosMap map;
  map.items = *ParseQosMapList(R"({"count":1,"list":[{"key":{"tc":3},"value":{"tc":1}}]})");
  EXPECT_THAT(QosMapEntries(map, QosMapKind::kDscpToTc, key).status().message(),
              HasSubstr("list[0].key.dscp missing"));
  map.items = *ParseQosMapList(testing::DscpToTcList({{10, 5}}));
  map.items.push_back(map.items[0]);
  EXPECT_THAT(QosMapEntries(map, QosMapKind::kDscpToTc, key).status().message(),
              HasSubstr("list[1]: dscp 10 is listed twice"));
}

TEST(AsicDbSchemaTest, KeysAndObjectIds) {
  EXPECT_EQ(AsicPortKey("oid:0x1000000000002"),
            "ASIC_STATE:SAI_OBJECT_TYPE_PORT:oid:0x1000000000002");
  EXPECT_EQ(AsicQosMapKey("oid:0x14"), "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:oid:0x14");
  EXPECT_TRUE(IsObjectId("oid:0x1400000000061f"));
  EXPECT_TRUE(IsObjectId("oid:0xABCDEF"));
  EXPECT_FALSE(IsObjectId("oid:0x"));
  EXPECT_FALSE(IsObjectId("oid:0x12g"));
  EXPECT_FALSE(IsObjectId("0x1234"));
  EXPECT_FALSE(IsObjectId("oid:0x12345678901234567"));  // 17 digits.
  EXPECT_TRUE(IsNullObjectId("oid:0x0"));
  EXPECT_FALSE(IsNullObjectId("oid:0x10"));
  EXPECT_EQ(PortMapAttr(QosMapKind::kTcToQueue), "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP");
  EXPECT_EQ(QosMapTypeName(QosMapKind::kDscpToTc), "SAI_QOS_MAP_TYPE_DSCP_TO_TC");
}

TEST(EnforcementTest, FirstMapDifferenceNamesPortMapAndEntry) {
  const EnforcementPlan plan = Plan();
  AppliedPortMaps applied;
  applied.port = "Ethernet0";
  applied.dscp_to_tc = plan.state.dscp_to_tc;
  applied.tc_to_queue = plan.state.tc_to_queue;
  applied.dscp_to_tc_object = "ASIC_DB oid:0x1400000000061f";
  EXPECT_EQ(FirstMapDifference(plan.state, applied), "");

  AppliedPortMaps wrong = applied;
  (*wrong.dscp_to_tc)[10] = 0;  // The job colour lands in best effort.
  (*wrong.dscp_to_tc)[12] = 3;  // A later difference is not the first.
  EXPECT_EQ(FirstMapDifference(plan.state, wrong),
            "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x1400000000061f): dscp 10 -> tc 0, the plan "
            "says tc 5");
  wrong = applied;
  wrong.dscp_to_tc->erase(8);
  EXPECT_EQ(FirstMapDifference(plan.state, wrong),
            "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x1400000000061f): dscp 8 missing, the plan says "
            "tc 1");
  wrong = applied;
  (*wrong.tc_to_queue)[7] = 7;
  EXPECT_EQ(FirstMapDifference(plan.state, wrong),
            "Ethernet0 TC_TO_QUEUE: tc 7 -> queue 7 is not in the plan");
  wrong = applied;
  wrong.dscp_to_tc.reset();
  EXPECT_EQ(FirstMapDifference(plan.state, wrong),
            "Ethernet0: no DSCP_TO_TC map is bound in the ASIC; the plan maps 64 entries");
}

TEST(EnforcementTest, AVerdictIsTheStatusAndTheDetailNumbersAside) {
  core::EnforcementCheck a;
  a.status = core::EnforcementStatus::kMismatch;
  a.detail = "Ethernet4 queue 7 carried 250000 packets in 10.0 s (25000 pkt/s, more than 100)";
  core::EnforcementCheck b = a;
  b.detail = "Ethernet4 queue 7 carried 90000 packets in 5.0 s (18000 pkt/s, more than 100)";
  b.queues_checked = 16;
  b.checked_unix_ms = 5;
  EXPECT_TRUE(a.SameVerdict(b));  // Rates change with every check: the same finding.
  b.detail = "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14): dscp 10 -> tc 0, the plan says tc 5";
  EXPECT_FALSE(a.SameVerdict(b));
  b = a;
  b.status = core::EnforcementStatus::kUnknown;
  EXPECT_FALSE(a.SameVerdict(b));
  EXPECT_TRUE(core::EnforcementCheck{}.SameVerdict(core::EnforcementCheck{}));
  static_assert(core::EnforcementCheck::EqualNumbersAside("q 7 at 12.5", "q 70 at 1.25"));
  static_assert(!core::EnforcementCheck::EqualNumbersAside("q 7", "q 7 x"));
  static_assert(!core::EnforcementCheck::EqualNumbersAside("q 7", "q x"));
}

TEST(EnforcementTest, PlannedAndJobQueues) {
  const EnforcementPlan plan = Plan();
  EXPECT_EQ(PlannedQueues(plan.state), (std::set<int>{0, 1, 5, 6}));
  EXPECT_EQ(JobQueues(plan), (std::set<int>{5}));
  EnforcementPlan old = plan;
  old.job_tcs.clear();  // An older cruxd: no job queues known.
  EXPECT_TRUE(JobQueues(old).empty());
  EXPECT_EQ(QueueOfTc(plan.state, 7), 7);  // Not mapped: the TC itself.
}

// Cumulative packets of Ethernet0's queues (and Ethernet4's when given).
std::vector<QueueCounterReading> Packets(std::map<int, uint64_t> e0,
                                         std::map<int, uint64_t> e4 = {}) {
  std::vector<QueueCounterReading> out = {{"Ethernet0", std::move(e0)}};
  if (!e4.empty()) out.push_back({"Ethernet4", std::move(e4)});
  return out;
}

QueueCheckOptions FastOptions() {
  QueueCheckOptions o;
  o.min_interval = Duration::Millis(1000);
  o.queue0_intervals = 2;
  return o;
}

TEST(QueueTrafficJudgeTest, UnusedQueueCarryingTrafficIsAMismatchQueueZeroNever) {
  QueueTrafficJudge judge(FastOptions());
  const EnforcementPlan plan = Plan();
  // First reading: a baseline, nothing judged.
  auto v = judge.Observe(plan, Packets({{0, 0}, {5, 0}, {7, 0}}), Duration::Millis(0));
  EXPECT_EQ(v.queues_checked, 0u);
  EXPECT_EQ(v.difference, "");
  // Heavy best effort in queue 0, job traffic in 5, 50 pkt/s in queue 7 (below 100: silent).
  v = judge.Observe(plan, Packets({{0, 900000}, {5, 500000}, {7, 50}}), Duration::Millis(1000));
  EXPECT_EQ(v.queues_checked, 3u);
  EXPECT_EQ(v.difference, "");
  // Before min_interval: the last verdict again, nothing judged, the baseline kept.
  v = judge.Observe(plan, Packets({{0, 900000}, {5, 500000}, {7, 100000}}), Duration::Millis(1500));
  EXPECT_EQ(v.difference, "");
  EXPECT_EQ(v.queues_checked, 3u);
  // Queue 7 (no DSCP maps to it) carried 99950 packets in 1 s.
  v = judge.Observe(plan, Packets({{0, 900000}, {5, 500000}, {7, 100000}}), Duration::Millis(2000));
  EXPECT_EQ(v.difference,
            "traffic in a queue the plan leaves unused: Ethernet0 queue 7 carried 99950 packets "
            "in 1.0 s (99950 pkt/s, more than 100); the plan maps no DSCP to it (queues in use: "
            "0, 1, 5, 6)");
  // Still reported between judged intervals; cleared once the queue is quiet again.
  EXPECT_EQ(judge.Observe(plan, Packets({{0, 0}, {5, 0}, {7, 100000}}), Duration::Millis(2500))
                .difference,
            v.difference);
  v = judge.Observe(plan, Packets({{0, 900001}, {5, 500001}, {7, 100000}}), Duration::Millis(3000));
  EXPECT_EQ(v.difference, "");
}

TEST(QueueTrafficJudgeTest, JobTrafficOnlyInQueueZeroIsFlaggedSwitchWideAfterAStreak) {
  QueueTrafficJudge judge(FastOptions());
  const EnforcementPlan plan = Plan();
  uint64_t q0 = 0;
  uint64_t job = 0;
  Duration t = Duration::Zero();
  auto step = [&](uint64_t q0_add, uint64_t job_add_e4) {
    q0 += q0_add;
    job += job_add_e4;
    t += Duration::Millis(1000);
    return judge.Observe(plan, Packets({{0, q0}, {5, 0}}, {{0, 0}, {5, job}}), t);
  };
  judge.Observe(plan, Packets({{0, 0}, {5, 0}}, {{0, 0}, {5, 0}}), t);
  // Queue 0 busy on Ethernet0, but job traffic reaches queue 5 on Ethernet4: normal (a port no
  // job crosses carries best effort).
  EXPECT_EQ(step(50000, 40000).difference, "");
  EXPECT_EQ(step(50000, 40000).difference, "");
  EXPECT_EQ(step(50000, 40000).difference, "");
  // No job queue carries anything anywhere while queue 0 runs at 50000 pkt/s: once is an idle
  // phase, twice in a row (queue0_intervals) contradicts the plan.
  EXPECT_EQ(step(50000, 0).difference, "");
  EXPECT_EQ(step(50000, 0).difference,
            "job traffic in queue 0: Ethernet0 queue 0 carried 50000 pkt/s (at least 10000) for 2 "
            "intervals in a row while the queues of the job colours crossing this switch (queues "
            "5; DSCP 10) stayed silent on every port");
  // Light queue-0 traffic with idle jobs is not a mismatch.
  EXPECT_EQ(step(500, 0).difference, "");

  // Without job_tcs (an older cruxd) the rule is skipped.
  QueueTrafficJudge old_judge(FastOptions());
  EnforcementPlan old = plan;
  old.job_tcs.clear();
  old_judge.Observe(old, Packets({{0, 0}, {5, 0}}), Duration::Zero());
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(old_judge
                  .Observe(old, Packets({{0, 50000u * static_cast<uint64_t>(i)}, {5, 0}}),
                           Duration::Millis(1000 * i))
                  .difference,
              "");
  }
}

TEST(QueueTrafficJudgeTest, ResetsAndImplausibleDeltasAreDroppedPlanChangesRestart) {
  QueueTrafficJudge judge(FastOptions());
  const EnforcementPlan plan = Plan();
  judge.Observe(plan, Packets({{0, 1000}, {7, 5000000}}), Duration::Zero());
  // Queue 7 went backwards (sonic-clear counters, orchagent restart): no delta, no finding.
  auto v = judge.Observe(plan, Packets({{0, 2000}, {7, 10}}), Duration::Millis(1000));
  EXPECT_EQ(v.difference, "");
  EXPECT_EQ(v.queues_checked, 1u);
  ASSERT_EQ(v.dropped.size(), 1u);
  EXPECT_THAT(v.dropped[0], HasSubstr("Ethernet0 queue 7: SAI_QUEUE_STAT_PACKETS went backwards "
                                      "(5000000 -> 10): counters were reset"));
  // A garbled counter (2^64-1) is beyond what any port counts: dropped, not a mismatch.
  v = judge.Observe(plan, Packets({{0, 3000}, {7, UINT64_MAX}}), Duration::Millis(2000));
  EXPECT_EQ(v.difference, "");
  ASSERT_EQ(v.dropped.size(), 1u);
  EXPECT_THAT(v.dropped[0], HasSubstr("more than any port can count"));
  // A plan change restarts: the interval spanning it is not judged.
  const EnforcementPlan next = Plan(1);  // Colour 10 -> TC 4 now.
  v = judge.Observe(next, Packets({{0, 4000}, {5, 0}}), Duration::Millis(3000));
  EXPECT_EQ(v.queues_checked, 0u);
  EXPECT_EQ(v.difference, "");
  // Queue 5 carrying traffic under the new plan (colour 10 -> queue 4): unused now.
  v = judge.Observe(next, Packets({{0, 4000}, {5, 20000}}), Duration::Millis(4000));
  EXPECT_THAT(v.difference, HasSubstr("Ethernet0 queue 5 carried 20000 packets"));
}

TEST(QueueTrafficJudgeTest, OptionsAreValidatedNamingTheFlag) {
  QueueCheckOptions o;
  EXPECT_TRUE(ValidateQueueCheckOptions(o).ok());
  o.silent_max_pps = -1;
  EXPECT_THAT(ValidateQueueCheckOptions(o).message(), HasSubstr("--verify-silent-pps"));
  o = {};
  o.queue0_min_pps = 50;
  EXPECT_THAT(ValidateQueueCheckOptions(o).message(), HasSubstr("--verify-queue0-pps"));
  o = {};
  o.queue0_intervals = 0;
  EXPECT_THAT(ValidateQueueCheckOptions(o).message(), HasSubstr("--verify-queue0-intervals"));
  o = {};
  o.min_interval = Duration::Zero();
  EXPECT_THAT(ValidateQueueCheckOptions(o).message(), HasSubstr("--verify-interval-ms"));
}

TEST(EnforcementTest, BackendsWithoutAVerifierSaySo) {
  BackendConfig c;
  c.switch_name = "tor0";
  c.params["state-dir"] = "/tmp";
  auto v = BuiltinBackends().CreateVerifier("file", c, {});
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_EQ(v.status().message(), "the file backend cannot verify enforcement");
  c.params.clear();
  EXPECT_EQ(BuiltinBackends().CreateVerifier("log", c, {}).status().message(),
            "the log backend cannot verify enforcement");
}

}  // namespace
}  // namespace crux::switch_adapters
