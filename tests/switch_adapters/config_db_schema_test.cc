// The pure CONFIG_DB schema (no Redis): desired state <-> hash fields, diff, reconstruction,
// commands and JSON Patch, on in-memory snapshots. The same behaviour against a real
// redis-server is in sonic_adapter_test.cc.
#include "crux/switch_adapters/config_db_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/control/qos.h"
#include "crux/core/topology/topology.h"

namespace crux::switch_adapters {
namespace {

using core::QosConfig;
using core::SwitchQosState;
using Kind = ConfigDbChange::Kind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

SwitchQosState MakeState(const QosConfig& cfg, const std::vector<std::pair<int, int>>& jobs) {
  core::Topology topo;
  core::NodeId tor = *topo.AddNode("tor0", core::NodeKind::kTor);
  std::vector<core::QosJob> qj;
  for (const auto& [dscp, level] : jobs) {
    qj.push_back({"job" + std::to_string(dscp) + "_" + std::to_string(level), dscp, level, {tor}});
  }
  auto states = core::ComputeDesiredQos(cfg, topo, qj);
  EXPECT_TRUE(states.ok()) << states.status().ToString();
  return states->at("tor0");
}

ConfigDbLayout TwoPorts() {
  ConfigDbLayout l;
  l.ports = {"Ethernet0", "Ethernet4"};
  return l;
}

// The snapshot after applying `state` to `start` through the schema's own changes.
ConfigDbSnapshot Applied(const ConfigDbSchema& schema, const SwitchQosState& state,
                         ConfigDbSnapshot start = {}) {
  ConfigDbSchema::ApplyChanges(schema.Diff(start, state), start);
  return start;
}

std::vector<std::string> Strings(const std::vector<ConfigDbChange>& changes) {
  std::vector<std::string> out;
  for (const ConfigDbChange& c : changes) out.push_back(c.ToString());
  return out;
}

TEST(ConfigDbSchemaTest, DesiredStateBecomesTheSonicTablesAndComesBack) {
  const ConfigDbSchema schema(TwoPorts());
  const QosConfig cfg;
  const SwitchQosState want = MakeState(cfg, {{10, 0}, {12, 2}});
  const std::vector<ConfigDbChange> changes = schema.Diff({}, want);
  // 64 DSCPs + 7 TCs + 7 schedulers (type, 2 DWRR weights) + 2 ports x (7 queues + 3 map fields).
  EXPECT_EQ(changes.size(), 64u + 7 + 7 + 2 + 2 * (7 + 3));
  EXPECT_TRUE(std::all_of(changes.begin(), changes.end(),
                          [](const ConfigDbChange& c) { return c.kind == Kind::kSet; }));

  ConfigDbSnapshot snap = Applied(schema, want);
  EXPECT_EQ(snap["DSCP_TO_TC_MAP|CRUX"].size(), 64u);
  EXPECT_EQ(snap["DSCP_TO_TC_MAP|CRUX"]["10"], "5");  // Level 0.
  EXPECT_EQ(snap["DSCP_TO_TC_MAP|CRUX"]["12"], "3");  // Level 2.
  EXPECT_EQ(snap["DSCP_TO_TC_MAP|CRUX"]["48"], "6");  // CNP.
  EXPECT_EQ(snap["SCHEDULER|crux_q5"], (ConfigDbFields{{"type", "STRICT"}}));
  EXPECT_EQ(snap["SCHEDULER|crux_q1"], (ConfigDbFields{{"type", "DWRR"}, {"weight", "40"}}));
  EXPECT_EQ(snap["QUEUE|Ethernet4|1"], (ConfigDbFields{{"scheduler", "crux_q1"}}));
  EXPECT_EQ(snap["PORT_QOS_MAP|Ethernet0"], (ConfigDbFields{{"dscp_to_tc_map", "CRUX"},
                                                            {"tc_to_queue_map", "CRUX"},
                                                            {"pfc_enable", "2,3,4,5"}}));
  EXPECT_FALSE(snap.count("QUEUE|Ethernet0|7"));  // TC 7 unused.

  auto back = schema.Reconstruct(snap, "tor0");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->SameDeviceState(want));
  // In sync: nothing to do (the reconcile of an undrifted switch writes nothing).
  EXPECT_TRUE(schema.Diff(snap, want).empty());
}

TEST(ConfigDbSchemaTest, EveryKeyItReadsIsListedOnce) {
  const ConfigDbSchema schema(TwoPorts());
  const std::vector<std::string>& keys = schema.Keys();
  // 2 maps + 8 schedulers + 2 ports x (8 queues + PORT_QOS_MAP).
  EXPECT_EQ(keys.size(), 2u + 8 + 2 * 9);
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  // Every key a diff touches is one the schema reads (and the adapter WATCHes).
  const ConfigDbSnapshot snap = Applied(schema, MakeState(QosConfig{}, {{10, 0}}));
  for (const auto& [key, fields] : snap) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  }
}

TEST(ConfigDbSchemaTest, DriftIsExactlyTheFieldsThatDiffer) {
  const ConfigDbSchema schema(TwoPorts());
  const SwitchQosState want = MakeState(QosConfig{}, {{10, 0}});
  ConfigDbSnapshot snap = Applied(schema, want);
  // A hand edit of one map entry, a foreign field in an owned map, a detached queue on the second
  // port, a changed pfc_enable.
  snap["DSCP_TO_TC_MAP|CRUX"]["10"] = "0";
  snap["DSCP_TO_TC_MAP|CRUX"]["99"] = "1";
  snap["QUEUE|Ethernet4|3"].erase("scheduler");
  snap["PORT_QOS_MAP|Ethernet0"]["pfc_enable"] = "3,4";
  EXPECT_THAT(
      Strings(schema.Diff(snap, want)),
      ElementsAre("HSET DSCP_TO_TC_MAP|CRUX 10 5", "HSET PORT_QOS_MAP|Ethernet0 pfc_enable 2,3,4,5",
                  "HSET QUEUE|Ethernet4|3 scheduler crux_q3", "HDEL DSCP_TO_TC_MAP|CRUX 99"));
  ConfigDbSchema::ApplyChanges(schema.Diff(snap, want), snap);
  EXPECT_TRUE(schema.Diff(snap, want).empty());

  // A flushed database is drift of every field.
  EXPECT_EQ(schema.Diff(ConfigDbSnapshot{}, want).size(), 64u + 7 + 7 + 2 + 2 * (7 + 3));
}

TEST(ConfigDbSchemaTest, ForeignKeysAndFieldsAreLeftAlone) {
  const ConfigDbSchema schema(TwoPorts());
  ConfigDbSnapshot snap;
  snap["DSCP_TO_TC_MAP|AZURE"] = {{"3", "3"}, {"46", "5"}};
  snap["SCHEDULER|scheduler.0"] = {{"type", "DWRR"}, {"weight", "14"}};
  snap["QUEUE|Ethernet0|3"] = {{"scheduler", "scheduler.0"}, {"wred_profile", "AZURE_LOSSLESS"}};
  snap["QUEUE|Ethernet0|7"] = {{"scheduler", "scheduler.0"}};
  snap["PORT_QOS_MAP|Ethernet0"] = {{"dscp_to_tc_map", "AZURE"}, {"tc_to_pg_map", "AZURE"}};
  const ConfigDbSnapshot before = snap;
  snap = Applied(schema, MakeState(QosConfig{}, {{10, 0}}), snap);
  EXPECT_EQ(snap["DSCP_TO_TC_MAP|AZURE"], before.at("DSCP_TO_TC_MAP|AZURE"));
  EXPECT_EQ(snap["SCHEDULER|scheduler.0"], before.at("SCHEDULER|scheduler.0"));
  EXPECT_EQ(snap["QUEUE|Ethernet0|3"],
            (ConfigDbFields{{"scheduler", "crux_q3"}, {"wred_profile", "AZURE_LOSSLESS"}}));
  EXPECT_EQ(snap["QUEUE|Ethernet0|7"]["scheduler"], "scheduler.0");  // Queue Crux does not use.
  EXPECT_EQ(snap["PORT_QOS_MAP|Ethernet0"]["tc_to_pg_map"], "AZURE");

  // Shrinking to two levels removes only Crux's schedulers and scheduler fields, after the
  // objects and attachments (referenced objects first, removals last).
  QosConfig small;
  small.level_tcs = {5, 4};
  const std::vector<ConfigDbChange> shrink = schema.Diff(snap, MakeState(small, {{10, 0}}));
  std::vector<std::string> ops = Strings(shrink);
  EXPECT_THAT(ops, ::testing::Contains("DEL SCHEDULER|crux_q3"));
  EXPECT_THAT(ops, ::testing::Contains("HDEL QUEUE|Ethernet0|3 scheduler"));
  EXPECT_THAT(ops, ::testing::Not(::testing::Contains(HasSubstr("AZURE"))));
  EXPECT_THAT(ops, ::testing::Not(::testing::Contains(HasSubstr("scheduler.0"))));
  bool removing = false;
  for (const ConfigDbChange& c : shrink) {
    if (c.kind != Kind::kSet) removing = true;
    EXPECT_FALSE(removing && c.kind == Kind::kSet) << c.ToString() << " after a removal";
  }
  ConfigDbSchema::ApplyChanges(shrink, snap);
  EXPECT_EQ(snap["QUEUE|Ethernet0|3"], (ConfigDbFields{{"wred_profile", "AZURE_LOSSLESS"}}));
  EXPECT_FALSE(snap.count("QUEUE|Ethernet4|3"));  // Only Crux's field was there.
}

TEST(ConfigDbSchemaTest, PfcIsReplacedNeverDeletedAndCanBeLeftAlone) {
  QosConfig no_pfc;
  no_pfc.pfc = false;
  const ConfigDbSchema schema(TwoPorts());
  ConfigDbSnapshot snap = Applied(schema, MakeState(QosConfig{}, {{10, 0}}));
  // A state without lossless TCs leaves pfc_enable as it is.
  EXPECT_TRUE(Strings(schema.Diff(snap, MakeState(no_pfc, {{10, 0}}))).empty());
  ConfigDbLayout unmanaged = TwoPorts();
  unmanaged.manage_pfc = false;
  const ConfigDbSchema leave(unmanaged);
  snap["PORT_QOS_MAP|Ethernet0"]["pfc_enable"] = "3,4";
  EXPECT_TRUE(leave.Diff(snap, MakeState(QosConfig{}, {{10, 0}})).empty());
  auto back = leave.Reconstruct(snap, "tor0");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->pfc_enable.empty());
}

TEST(ConfigDbSchemaTest, ReconstructNamesTheKeyItCannotRead) {
  const ConfigDbSchema schema(TwoPorts());
  EXPECT_EQ(schema.Reconstruct({}, "tor0").status().code(), core::StatusCode::kNotFound);
  ConfigDbSnapshot snap = Applied(schema, MakeState(QosConfig{}, {{10, 0}}));
  ConfigDbSnapshot bad = snap;
  bad["DSCP_TO_TC_MAP|CRUX"]["10"] = "five";
  auto r = schema.Reconstruct(bad, "tor0");
  EXPECT_EQ(r.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("DSCP_TO_TC_MAP|CRUX[10]: 'five'"));
  bad = snap;
  bad.erase("SCHEDULER|crux_q5");
  EXPECT_THAT(schema.Reconstruct(bad, "tor0").status().message(),
              HasSubstr("QUEUE|Ethernet0|5.scheduler: names missing scheduler crux_q5"));
  bad = snap;
  bad["SCHEDULER|crux_q1"]["type"] = "WRR";
  EXPECT_THAT(schema.Reconstruct(bad, "tor0").status().message(),
              HasSubstr("SCHEDULER|crux_q1.type"));
  bad = snap;
  bad["PORT_QOS_MAP|Ethernet0"]["pfc_enable"] = "2,x";
  EXPECT_THAT(schema.Reconstruct(bad, "tor0").status().message(),
              HasSubstr("PORT_QOS_MAP|Ethernet0.pfc_enable"));
}

TEST(ConfigDbSchemaTest, CommandsGroupTheSetsOfOneKey) {
  const std::vector<ConfigDbChange> changes = {
      {Kind::kSet, "DSCP_TO_TC_MAP", "CRUX", "10", "5", true},
      {Kind::kSet, "DSCP_TO_TC_MAP", "CRUX", "12", "4", true},
      {Kind::kSet, "SCHEDULER", "crux_q1", "weight", "35", true},
      {Kind::kDeleteField, "QUEUE", "Ethernet0|2", "scheduler", "", true},
      {Kind::kDeleteKey, "SCHEDULER", "crux_q2", "", "", true},
  };
  using V = std::vector<std::string>;
  EXPECT_THAT(
      ConfigDbSchema::Commands(changes),
      ElementsAre(V{"HSET", "DSCP_TO_TC_MAP|CRUX", "10", "5", "12", "4"},
                  V{"HSET", "SCHEDULER|crux_q1", "weight", "35"},
                  V{"HDEL", "QUEUE|Ethernet0|2", "scheduler"}, V{"DEL", "SCHEDULER|crux_q2"}));
  EXPECT_TRUE(ConfigDbSchema::Commands({}).empty());
}

TEST(ConfigDbSchemaTest, JsonPatchAddsNewTablesWholeAndFieldsOtherwise) {
  using nlohmann::json;
  const ConfigDbSchema schema(TwoPorts());
  const SwitchQosState want = MakeState(QosConfig{}, {{10, 0}});
  ConfigDbSnapshot snap;
  snap["PORT_QOS_MAP|Ethernet0"] = {{"tc_to_pg_map", "AZURE"}};
  snap["QUEUE|Ethernet8|0"] = {{"wred_profile", "X"}};  // QUEUE exists, not the keys Crux adds.
  const auto changes = schema.Diff(snap, want);
  EXPECT_THAT(
      ConfigDbSchema::TablesGettingNewKeys(changes),
      ElementsAre("DSCP_TO_TC_MAP", "PORT_QOS_MAP", "QUEUE", "SCHEDULER", "TC_TO_QUEUE_MAP"));
  const json p = json::parse(ConfigDbSchema::ApplyPatchJson(changes, {"QUEUE", "PORT_QOS_MAP"}));
  ASSERT_TRUE(p.is_array());
  json dscp_add, queue_key_add;
  bool port_field = false;
  for (const json& op : p) {
    if (op["path"] == "/DSCP_TO_TC_MAP") dscp_add = op;
    if (op["path"] == "/QUEUE/Ethernet0|3") queue_key_add = op;
    if (op["path"] == "/PORT_QOS_MAP/Ethernet0/dscp_to_tc_map") {
      port_field = op["op"] == "add" && op["value"] == "CRUX";
    }
  }
  EXPECT_EQ(dscp_add["op"], "add") << p.dump();
  EXPECT_EQ(dscp_add["value"]["CRUX"].size(), 64u);
  EXPECT_EQ(queue_key_add["value"], (json{{"scheduler", "crux_q3"}})) << p.dump();
  EXPECT_TRUE(port_field) << p.dump();
  EXPECT_EQ(p[0]["path"], "/DSCP_TO_TC_MAP");  // New objects first.

  // Removals, escaping, and nothing to do.
  const std::vector<ConfigDbChange> removals = {
      {Kind::kDeleteKey, "SCHEDULER", "crux_q2", "", "", true},
      {Kind::kDeleteField, "QUEUE", "Ethernet0|2", "scheduler", "", true},
      {Kind::kSet, "X", "a/b~c", "f", "v", true}};
  EXPECT_EQ(json::parse(ConfigDbSchema::ApplyPatchJson(removals, {})),
            json::parse(R"([{"op":"remove","path":"/SCHEDULER/crux_q2"},
                            {"op":"remove","path":"/QUEUE/Ethernet0|2/scheduler"},
                            {"op":"add","path":"/X/a~1b~0c/f","value":"v"}])"));
  EXPECT_EQ(ConfigDbSchema::ApplyPatchJson({}, {}), "[]\n");
}

TEST(ConfigDbSchemaTest, LayoutErrorsNameTheField) {
  ConfigDbLayout l;
  EXPECT_THAT(ValidateConfigDbLayout(l).message(), HasSubstr("sonic.ports"));
  l.ports = {"Ethernet0", "Ethernet0"};
  EXPECT_THAT(ValidateConfigDbLayout(l).message(),
              HasSubstr("sonic.ports[1]: 'Ethernet0' given twice"));
  l.ports = {"Ethernet0|1"};
  EXPECT_THAT(ValidateConfigDbLayout(l).message(), HasSubstr("sonic.ports[0]"));
  l.ports = {"Ethernet0"};
  l.scheduler_prefix = "sched";
  EXPECT_THAT(ValidateConfigDbLayout(l).message(), HasSubstr("sonic.scheduler_prefix"));
  l.scheduler_prefix = "crux_q";
  l.profile = "";
  EXPECT_THAT(ValidateConfigDbLayout(l).message(), HasSubstr("sonic.profile"));
  l.profile = "CRUX";
  EXPECT_TRUE(ValidateConfigDbLayout(l).ok());
}

}  // namespace
}  // namespace crux::switch_adapters
