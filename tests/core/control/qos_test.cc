#include "crux/core/control/qos.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crux/core/plan/planner.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using ::crux::core::testing::MakeClos2Small;
using ::crux::core::testing::Must;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The QoS jobs of `plan`'s coloured jobs, each with the network switches its flows cross (cruxd
// builds the same from the assignments in force: QosJobsOf in control_loop.cc).
std::vector<QosJob> QosJobsOfPlan(const Topology& topo, const Plan& plan, const DscpPool& pool) {
  std::vector<QosJob> out;
  for (const JobPlan& j : plan.jobs) {
    std::optional<int> dscp = pool.ColourOf(j.id);
    if (!dscp) continue;
    std::set<NodeId> switches;
    for (const FlowPlan& f : j.flows) {
      for (LinkId l : f.path) {
        for (NodeId n : {topo.link(l).src, topo.link(l).dst}) {
          if (IsNetworkSwitch(topo.node(n).kind)) switches.insert(n);
        }
      }
    }
    out.push_back(QosJob{j.id, *dscp, j.level, {switches.begin(), switches.end()}});
  }
  return out;
}

// ---- Config validation ----

TEST(QosConfigTest, DefaultIsValid) { EXPECT_TRUE(ValidateQosConfig(QosConfig{}).ok()); }

TEST(QosConfigTest, ErrorsNameTheKey) {
  struct Case {
    void (*mutate)(QosConfig&);
    const char* key;
  };
  const Case cases[] = {
      {[](QosConfig& c) { c.dscp_pool = {}; }, "qos.dscp_pool"},
      {[](QosConfig& c) {
         c.dscp_pool = {10, 64};
       },
       "qos.dscp_pool[1]: 64 out of range 0..63"},
      {[](QosConfig& c) {
         c.dscp_pool = {10, 12, 10};
       },
       "qos.dscp_pool[2]: DSCP 10 already"},
      {[](QosConfig& c) {
         c.dscp_pool = {10, 48};
       },
       "qos.reserved[0].dscps[0]: DSCP 48"},
      {[](QosConfig& c) {
         c.level_tcs = {5, 9};
       },
       "qos.level_tcs[1]: 9 out of range 0..7"},
      {[](QosConfig& c) {
         c.level_tcs = {5, 5};
       },
       "qos.level_tcs[1]: TC 5 already used"},
      {[](QosConfig& c) { c.level_tcs = {}; }, "qos.level_tcs: must not be empty"},
      {[](QosConfig& c) { c.num_tcs = 9; }, "qos.num_tcs: 9 out of range 1..8"},
      {[](QosConfig& c) { c.num_tcs = 6; }, "qos.reserved[0].tc: 6 out of range 0..5"},
      {[](QosConfig& c) { c.reserved[1].tc = 5; },
       "qos.reserved[1].tc: TC 5 already used by "
       "qos.level_tcs[0]"},
      {[](QosConfig& c) { c.reserved[1].weight = 0; }, "qos.reserved[1].weight: 0 out of range"},
      {[](QosConfig& c) { c.reserved[0].weight = 5; }, "qos.reserved[0].weight: must be 0"},
      {[](QosConfig& c) { c.reserved[1].name = "control"; }, "qos.reserved[1].name: duplicate"},
      {[](QosConfig& c) { c.reserved[1].name = "Bad Name"; }, "qos.reserved[1].name: 'Bad Name'"},
      {[](QosConfig& c) { c.default_tc = 6; }, "qos.default_tc: TC 6 already used"},
      {[](QosConfig& c) { c.default_weight = 101; }, "qos.default_weight: 101 out of range"},
      {[](QosConfig& c) {
         c.level_weights = {1, 2, 3, 4};
       },
       "qos.level_weights: only allowed"},
      {[](QosConfig& c) { c.jobs_strict = false; }, "qos.level_weights: needs one weight"},
  };
  for (const Case& c : cases) {
    QosConfig cfg;
    c.mutate(cfg);
    Status s = ValidateQosConfig(cfg);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(s.message(), HasSubstr(c.key));
  }
}

TEST(QosConfigTest, LevelTcClampsToLowestJobClass) {
  QosConfig c;
  EXPECT_EQ(LevelTc(c, 0), 5);
  EXPECT_EQ(LevelTc(c, 3), 2);
  EXPECT_EQ(LevelTc(c, 7), 2);
}

TEST(QosConfigTest, SchedulerTypeNames) {
  EXPECT_EQ(SchedulerTypeName(SchedulerType::kStrict), "STRICT");
  EXPECT_EQ(*ParseSchedulerType("DWRR"), SchedulerType::kDwrr);
  EXPECT_FALSE(ParseSchedulerType("wrr").ok());
}

// ---- DSCP pool ----

TEST(DscpPoolTest, RejectsBadPools) {
  EXPECT_THAT(DscpPool::Create({}).status().message(), HasSubstr("qos.dscp_pool"));
  EXPECT_THAT(DscpPool::Create({1, 70}).status().message(), HasSubstr("qos.dscp_pool[1]"));
  EXPECT_THAT(DscpPool::Create({1, 1}).status().message(), HasSubstr("duplicate DSCP 1"));
}

TEST(DscpPoolTest, StableColoursReleasedAndReused) {
  DscpPool pool = Must(DscpPool::Create({10, 12, 14}), "pool");
  EXPECT_EQ(*pool.Acquire("a", 0), 10);
  EXPECT_EQ(*pool.Acquire("b", 1), 12);
  // Idempotent: re-registering keeps the colour; a level change never re-colours.
  EXPECT_EQ(*pool.Acquire("a", 2), 10);
  ASSERT_TRUE(pool.SetLevel("a", 0).ok());
  EXPECT_EQ(pool.ColourOf("a"), 10);
  EXPECT_EQ(pool.LevelOf("a"), 0);
  EXPECT_EQ(pool.free_colours(), 1u);
  pool.Release("a");
  pool.Release("a");  // Idempotent.
  EXPECT_FALSE(pool.ColourOf("a").has_value());
  EXPECT_EQ(pool.free_colours(), 2u);
  EXPECT_EQ(*pool.Acquire("c", 0), 10);  // First free colour in pool order.
  EXPECT_EQ(pool.SharedJobs(), 0u);
  EXPECT_EQ(pool.SetLevel("zz", 1).code(), StatusCode::kNotFound);
  EXPECT_FALSE(pool.Acquire("", 0).ok());
  EXPECT_FALSE(pool.Acquire("d", -1).ok());
}

TEST(DscpPoolTest, ExhaustedPoolSharesByLevel) {
  DscpPool pool = Must(DscpPool::Create({10, 12, 14}), "pool");
  ASSERT_EQ(*pool.Acquire("hi", 0), 10);
  ASSERT_EQ(*pool.Acquire("mid", 2), 12);
  ASSERT_EQ(*pool.Acquire("lo", 5), 14);
  EXPECT_EQ(pool.free_colours(), 0u);
  // Exhausted: a level-2 job shares the colour of the level-2 job, a level-6 job the level-5 one.
  EXPECT_EQ(*pool.Acquire("mid2", 2), 12);
  EXPECT_EQ(*pool.Acquire("lo2", 6), 14);
  EXPECT_EQ(pool.SharedJobs(), 4u);
  EXPECT_THAT(pool.MembersOf(12), ElementsAre("mid", "mid2"));
  // Equal distance (level 1: colour 10 at 0 and colour 12 at 2): fewer members wins.
  EXPECT_EQ(*pool.Acquire("one", 1), 10);
  EXPECT_EQ(pool.SharedJobs(), 6u);
  // Leaving un-shares; the last member frees the colour.
  pool.Release("mid2");
  EXPECT_EQ(pool.SharedJobs(), 4u);
  pool.Release("mid");
  EXPECT_EQ(pool.free_colours(), 1u);
  EXPECT_EQ(*pool.Acquire("new", 7), 12);  // A free colour beats sharing.
}

TEST(DscpPoolTest, RestoreAfterDaemonRestart) {
  DscpPool pool = Must(DscpPool::Create({10, 12, 14}), "pool");
  ASSERT_TRUE(pool.Restore("b", 12, 1).ok());
  ASSERT_TRUE(pool.Restore("c", 12, 1).ok());  // Was sharing before the restart.
  EXPECT_EQ(pool.SharedJobs(), 2u);
  EXPECT_EQ(*pool.Acquire("new", 0), 10);  // Restored colours are not handed out again.
  EXPECT_EQ(*pool.Acquire("new2", 0), 14);
  EXPECT_TRUE(pool.Restore("b", 12, 3).ok());
  EXPECT_EQ(pool.LevelOf("b"), 3);
  EXPECT_EQ(pool.Restore("b", 10, 3).code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(pool.Restore("d", 11, 0).message(), HasSubstr("job 'd' dscp: 11"));
  EXPECT_FALSE(pool.Restore("d", 10, -2).ok());
}

// ---- Desired state ----

class DesiredQosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = MakeClos2Small();
    // "local": host0 <-> host1 under tor0 only. "cross": host0 <-> host2 across the aggs.
    JobSpec local;
    local.id = "local";
    local.hosts = {c_.host[0], c_.host[1]};
    local.compute_time = Duration::Millis(100);
    local.pattern_bytes = Bytes::MiB(256);
    JobSpec cross = local;
    cross.id = "cross";
    cross.hosts = {c_.host[0], c_.host[2]};
    cross.pattern_bytes = Bytes::MiB(512);
    specs_ = {local, cross};
  }

  Plan RunPlan() {
    PlannerOptions o;
    o.levels = 4;
    o.resolve_ports = false;
    Planner planner(c_.topo, o);
    return Must(planner.Run(specs_), "plan");
  }

  testing::Clos2Small c_;
  std::vector<JobSpec> specs_;
  QosConfig config_;
};

TEST_F(DesiredQosTest, StaticPartOnEverySwitch) {
  auto states = Must(ComputeDesiredQos(config_, c_.topo, {}), "qos");
  ASSERT_EQ(states.size(), 5u);  // tor0, tor1, agg0..2; no hosts or NICs.
  const SwitchQosState& s = states.at("agg1");
  EXPECT_EQ(s.switch_name, "agg1");
  ASSERT_EQ(s.dscp_to_tc.size(), 64u);
  EXPECT_EQ(s.dscp_to_tc.at(48), 6);  // Control/CNP.
  EXPECT_EQ(s.dscp_to_tc.at(8), 1);   // Storage.
  EXPECT_EQ(s.dscp_to_tc.at(10), 0);  // An unused colour: best effort.
  EXPECT_EQ(s.dscp_to_tc.at(0), 0);
  EXPECT_EQ(s.tc_to_queue,
            (std::map<int, int>{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}));
  EXPECT_EQ(s.schedulers, (std::vector<QueueScheduler>{{0, SchedulerType::kDwrr, 10},
                                                       {1, SchedulerType::kDwrr, 40},
                                                       {2, SchedulerType::kStrict, 0},
                                                       {3, SchedulerType::kStrict, 0},
                                                       {4, SchedulerType::kStrict, 0},
                                                       {5, SchedulerType::kStrict, 0},
                                                       {6, SchedulerType::kStrict, 0}}));
  EXPECT_THAT(s.pfc_enable, ElementsAre(2, 3, 4, 5));
  EXPECT_TRUE(s.jobs.empty());
  EXPECT_TRUE(ValidateSwitchQosState(s).ok());
  // Every switch has the same static state apart from the name.
  SwitchQosState t = states.at("tor0");
  t.switch_name = "agg1";
  EXPECT_EQ(s, t);
}

TEST_F(DesiredQosTest, DwrrJobLevelsAndStorageWeights) {
  config_.jobs_strict = false;
  config_.level_weights = {50, 25, 15, 10};
  config_.reserved[1].weight = 30;
  config_.jobs_lossless = false;
  auto states = Must(ComputeDesiredQos(config_, c_.topo, {}), "qos");
  const auto& sch = states.at("tor0").schedulers;
  EXPECT_EQ(sch[1], (QueueScheduler{1, SchedulerType::kDwrr, 30}));  // Storage min share.
  EXPECT_EQ(sch[5], (QueueScheduler{5, SchedulerType::kDwrr, 50}));  // Level 0.
  EXPECT_EQ(sch[2], (QueueScheduler{2, SchedulerType::kDwrr, 10}));  // Level 3.
  EXPECT_TRUE(states.at("tor0").pfc_enable.empty());
}

TEST_F(DesiredQosTest, JobColoursOnlyOnSwitchesOnTheirPaths) {
  Plan plan = RunPlan();
  DscpPool pool = Must(DscpPool::Create(config_.dscp_pool), "pool");
  ASSERT_EQ(*pool.Acquire("local", 0), 10);
  ASSERT_EQ(*pool.Acquire("cross", 0), 12);
  std::vector<QosJob> jobs = QosJobsOfPlan(c_.topo, plan, pool);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_THAT(jobs[0].switches, ElementsAre(c_.tor[0]));
  auto states = Must(ComputeDesiredQos(config_, c_.topo, jobs), "qos");

  const int local_tc = LevelTc(config_, plan.jobs[0].level);
  const int cross_tc = LevelTc(config_, plan.jobs[1].level);
  EXPECT_EQ(states.at("tor0").dscp_to_tc.at(10), local_tc);
  EXPECT_EQ(states.at("tor0").dscp_to_tc.at(12), cross_tc);
  EXPECT_THAT(states.at("tor0").jobs, ElementsAre("cross", "local"));
  EXPECT_EQ(states.at("tor1").dscp_to_tc.at(10), 0);  // "local" never reaches tor1.
  EXPECT_EQ(states.at("tor1").dscp_to_tc.at(12), cross_tc);
  // Exactly one agg carries "cross" (one path per flow direction may use different aggs).
  int aggs_with_cross = 0;
  for (const char* a : {"agg0", "agg1", "agg2"}) {
    const auto& s = states.at(a);
    EXPECT_EQ(s.dscp_to_tc.at(10), 0);
    if (s.dscp_to_tc.at(12) == cross_tc) ++aggs_with_cross;
  }
  EXPECT_GE(aggs_with_cross, 1);
}

TEST_F(DesiredQosTest, PriorityChangeRemapsOnlyAndDiffNamesSwitches) {
  DscpPool pool = Must(DscpPool::Create(config_.dscp_pool), "pool");
  ASSERT_TRUE(pool.Acquire("local", 0).ok());
  ASSERT_TRUE(pool.Acquire("cross", 1).ok());
  const int local_dscp = *pool.ColourOf("local");
  std::vector<QosJob> jobs = {
      {"local", local_dscp, 0, {c_.tor[0]}},
      {"cross", *pool.ColourOf("cross"), 1, {c_.tor[0], c_.agg[1], c_.tor[1]}}};
  auto before = Must(ComputeDesiredQos(config_, c_.topo, jobs), "before");
  EXPECT_TRUE(ChangedSwitches(before, before).empty());

  // "local" drops to level 2: only its colour's map entry on tor0 changes; its DSCP stays.
  ASSERT_TRUE(pool.SetLevel("local", 2).ok());
  jobs[0].level = *pool.LevelOf("local");
  jobs[0].dscp = *pool.ColourOf("local");
  EXPECT_EQ(jobs[0].dscp, local_dscp);
  auto after = Must(ComputeDesiredQos(config_, c_.topo, jobs), "after");
  EXPECT_THAT(ChangedSwitches(before, after), ElementsAre("tor0"));
  EXPECT_EQ(before.at("tor0").dscp_to_tc.at(local_dscp), 5);
  EXPECT_EQ(after.at("tor0").dscp_to_tc.at(local_dscp), 3);
  SwitchQosState b = before.at("tor0");
  b.dscp_to_tc[local_dscp] = 3;
  EXPECT_TRUE(b.SameDeviceState(after.at("tor0")));  // Nothing else moved.

  // "cross" leaves: its three switches change back to the static map.
  jobs.pop_back();
  auto gone = Must(ComputeDesiredQos(config_, c_.topo, jobs), "gone");
  EXPECT_THAT(ChangedSwitches(after, gone), ElementsAre("agg1", "tor0", "tor1"));
  // A switch that disappears counts as changed.
  auto fewer = gone;
  fewer.erase("agg2");
  EXPECT_THAT(ChangedSwitches(gone, fewer), ElementsAre("agg2"));
}

TEST_F(DesiredQosTest, SharedColourTakesHighestPriorityMemberPerSwitch) {
  QosConfig cfg = config_;
  cfg.dscp_pool = {10};
  DscpPool pool = Must(DscpPool::Create(cfg.dscp_pool), "pool");
  ASSERT_EQ(*pool.Acquire("a", 3), 10);
  ASSERT_EQ(*pool.Acquire("b", 0), 10);
  EXPECT_EQ(pool.SharedJobs(), 2u);
  std::vector<QosJob> jobs = {{"a", 10, 3, {c_.tor[0], c_.tor[1]}}, {"b", 10, 0, {c_.tor[0]}}};
  auto states = Must(ComputeDesiredQos(cfg, c_.topo, jobs), "qos");
  EXPECT_EQ(states.at("tor0").dscp_to_tc.at(10), 5);  // b (level 0) wins where both cross.
  EXPECT_EQ(states.at("tor1").dscp_to_tc.at(10), 2);  // Only a (level 3) crosses tor1.
}

TEST_F(DesiredQosTest, BadJobsNameTheJob) {
  std::vector<QosJob> jobs = {{"j1", 11, 0, {c_.tor[0]}}};
  EXPECT_THAT(ComputeDesiredQos(config_, c_.topo, jobs).status().message(),
              HasSubstr("job 'j1' dscp: 11 is not in qos.dscp_pool"));
  jobs = {{"j2", 10, -1, {}}};
  EXPECT_THAT(ComputeDesiredQos(config_, c_.topo, jobs).status().message(),
              HasSubstr("job 'j2' level"));
  jobs = {{"j3", 10, 0, {c_.host[0]}}};
  EXPECT_THAT(ComputeDesiredQos(config_, c_.topo, jobs).status().message(),
              HasSubstr("job 'j3' switches"));
  config_.default_tc = 5;
  EXPECT_THAT(ComputeDesiredQos(config_, c_.topo, {}).status().message(),
              HasSubstr("qos.default_tc"));
}

TEST(SwitchQosStateTest, ValidationNamesField) {
  SwitchQosState s;
  EXPECT_THAT(ValidateSwitchQosState(s).message(), HasSubstr("switch_name"));
  s.switch_name = "tor0";
  s.dscp_to_tc = {{10, 8}};
  EXPECT_THAT(ValidateSwitchQosState(s).message(), HasSubstr("dscp_to_tc[10]"));
  s.dscp_to_tc = {{10, 3}};
  s.schedulers = {{3, SchedulerType::kDwrr, 0}};
  EXPECT_THAT(ValidateSwitchQosState(s).message(), HasSubstr("schedulers[0].weight"));
  s.schedulers = {{3, SchedulerType::kStrict, 0}, {3, SchedulerType::kStrict, 0}};
  EXPECT_THAT(ValidateSwitchQosState(s).message(), HasSubstr("schedulers[1].queue"));
  s.schedulers.pop_back();
  EXPECT_TRUE(ValidateSwitchQosState(s).ok());
}

}  // namespace
}  // namespace crux::core
