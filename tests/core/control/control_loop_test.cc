#include "crux/core/control/control_loop.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/plan/plan_quality.h"
#include "crux/core/policies/policy.h"
#include "crux/testing/clos.h"

namespace crux::core {
namespace {

constexpr Duration kDebounce = Duration::Millis(30);

class ControlLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topo_ = std::make_unique<Topology>(testing::Clos2(4, 2, 4));
    PolicyOptions po;
    po.resolve_ports = true;
    auto policy = MakePolicy("crux", *topo_, po, &clock_);
    ASSERT_TRUE(policy.ok());
    policy_ = std::move(policy).value();
    options_.debounce = kDebounce;
    options_.profiling_samples = 10;
    loop_ = std::make_unique<ControlLoop>(&clock_, topo_.get(), options_);
  }

  JobDemand Demand(const std::string& id, std::vector<int> hosts, int64_t bytes = 1'000'000'000) {
    JobDemand d;
    d.id = id;
    for (int h : hosts) d.placement.push_back({topo_->hosts()[h], 8, {}});
    d.bytes_per_iteration = Bytes::Of(bytes);
    return d;
  }
  JobProfile Profile(int64_t compute_ms, uint32_t samples, bool converged = false) {
    JobProfile p;
    p.compute_time = Duration::Millis(compute_ms);
    p.iteration_period = Duration::Millis(compute_ms * 2);
    p.samples = samples;
    p.converged = converged;
    return p;
  }
  // Runs every due plan up to now + d, committing each batch; returns the
  // batches.
  std::vector<ApplyBatch> Advance(Duration d) {
    std::vector<ApplyBatch> out;
    const Duration end = clock_.Now() + d;
    while (true) {
      std::optional<Duration> due = loop_->due();
      if (!due || *due > end) break;
      if (*due > clock_.Now()) clock_.Set(*due);
      auto snap = loop_->StartPlan();
      if (!snap) break;
      PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
      EXPECT_TRUE(o.status.ok()) << o.status.ToString();
      ApplyBatch b = loop_->FinishPlan(*snap, o);
      if (fail_commits_ > 0) {
        --fail_commits_;
        loop_->CommitFailed();
      } else {
        loop_->Commit(b);
        out.push_back(b);
      }
    }
    clock_.Set(end);
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<Topology> topo_;
  std::unique_ptr<SchedulingPolicy> policy_;
  ControlLoopOptions options_;
  std::unique_ptr<ControlLoop> loop_;
  int fail_commits_ = 0;
};

TEST_F(ControlLoopTest, ABurstIsOnePlanAfterTheDebounceAndNewcomersSitOnTheTopLevel) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  clock_.Advance(Duration::Millis(10));
  loop_->AddJob(Demand("b", {1, 5}), 12);
  ASSERT_TRUE(loop_->due().has_value());
  EXPECT_EQ(*loop_->due(), kDebounce) << "debounce counts from the first request of a burst";
  EXPECT_EQ(loop_->StartPlan(), nullptr) << "not due yet";
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].epoch, 1u);
  ASSERT_EQ(batches[0].changed.size(), 2u);
  for (const auto& a : batches[0].changed) {
    EXPECT_EQ(a->assignment.level, 0);
    EXPECT_EQ(a->assignment.phase, JobPhase::kRegistered);
    EXPECT_EQ(a->epoch, 1u);
    EXPECT_FALSE(a->assignment.flows.empty());
    EXPECT_EQ(a->assignment.traffic_class, a->assignment.dscp << 2);
  }
  EXPECT_EQ(loop_->epoch(), 1u);
  EXPECT_FALSE(loop_->due().has_value());
}

TEST_F(ControlLoopTest, ProfilesMoveThePhaseAndHysteresisFiltersJitter) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  Advance(kDebounce);
  ReportVerdict v = loop_->ReportProfile("a", Profile(100, 3));
  EXPECT_EQ(v.phase, JobPhase::kProfiling);
  EXPECT_TRUE(v.phase_changed && v.plan_changed);
  Advance(kDebounce);
  v = loop_->ReportProfile("a", Profile(100, 10));
  EXPECT_EQ(v.phase, JobPhase::kScheduled);
  EXPECT_TRUE(v.phase_changed);
  Advance(kDebounce);
  const uint64_t epoch = loop_->epoch();
  // 5 % jitter: below the 10 % threshold, no plan.
  v = loop_->ReportProfile("a", Profile(105, 11));
  EXPECT_FALSE(v.plan_changed);
  EXPECT_FALSE(loop_->due().has_value());
  EXPECT_EQ(loop_->Find("a")->planned->compute_time, Duration::Millis(100));
  EXPECT_EQ(loop_->Find("a")->profile->compute_time, Duration::Millis(105));
  // 30 %: a plan.
  v = loop_->ReportProfile("a", Profile(130, 12));
  EXPECT_TRUE(v.plan_changed);
  EXPECT_TRUE(loop_->due().has_value());
  Advance(kDebounce);
  EXPECT_GE(loop_->epoch(), epoch);
}

// A sprayed fabric (PlannerOptions::spray, cruxd's planner.spray): assignments carry levels only.
// The same jobs on the same policy options otherwise (cruxd's: ports resolved, stable) get a
// UDP source port on every inter-host pin; with spray, none, and their levels are the same.
TEST_F(ControlLoopTest, SprayedFabricAssignmentsCarryLevelsAndNoPorts) {
  std::map<std::string, std::pair<int, bool>> levels_ports[2];  // [spray]: id -> (level, port).
  for (const bool spray : {false, true}) {
    SCOPED_TRACE(spray ? "spray" : "pinned");
    PolicyOptions po;
    po.resolve_ports = true;
    po.stable = true;
    po.planner.spray = spray;
    auto policy = MakePolicy("crux", *topo_, po, &clock_);
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    policy_ = std::move(policy).value();
    loop_ = std::make_unique<ControlLoop>(&clock_, topo_.get(), options_);
    loop_->AddJob(Demand("a", {0, 4}), 10);
    loop_->AddJob(Demand("b", {0, 5}, 4'000'000'000), 12);  // Shares host0 with a.
    Advance(kDebounce);
    loop_->ReportProfile("a", Profile(100, 10, true));
    loop_->ReportProfile("b", Profile(40, 10, true));
    Advance(kDebounce);
    ASSERT_EQ(loop_->applied().size(), 2u);
    for (const auto& [id, entry] : loop_->applied()) {
      const Assignment& a = entry->assignment;
      EXPECT_EQ(a.phase, JobPhase::kScheduled) << id;
      ASSERT_FALSE(a.flows.empty()) << id;
      bool any_port = false;
      for (const FlowPin& f : a.flows) {
        EXPECT_FALSE(f.path.empty()) << id;  // The planner's model of the load, for QoS.
        if (f.udp_sport != 0) any_port = true;
        if (spray) {
          EXPECT_EQ(f.udp_sport, 0) << id;
        }
      }
      levels_ports[spray ? 1 : 0][id] = {a.level, any_port};
    }
  }
  for (const auto& [id, lp] : levels_ports[0]) {
    EXPECT_TRUE(lp.second) << id << ": pinned assignments have ports";
    EXPECT_EQ(levels_ports[1].at(id).first, lp.first) << id << ": same level sprayed";
  }
  EXPECT_NE(levels_ports[0].at("a").first, levels_ports[0].at("b").first);
}

// A multi-host job's host part leaves (core/host_parts.h): the registration shrinks, peers to the
// host that left disappear from both profiles, the job keeps its phase and is planned again.
TEST_F(ControlLoopTest, UpdateDemandDropsPeersOffTheJobsHostsAndReplans) {
  loop_->AddJob(Demand("a", {0, 4, 8}), 10);
  JobProfile p = Profile(100, 10, true);
  const NodeId n0 = topo_->NicsOf(topo_->hosts()[0]).front();
  const NodeId n4 = topo_->NicsOf(topo_->hosts()[4]).front();
  const NodeId n8 = topo_->NicsOf(topo_->hosts()[8]).front();
  p.peers = {{n0, n4, Bytes::Of(100)}, {n4, n8, Bytes::Of(200)}, {n8, n0, Bytes::Of(300)}};
  loop_->ReportProfile("a", p);
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].changed.size(), 1u);
  EXPECT_EQ(batches[0].changed[0]->assignment.flows.size(), 3u);

  loop_->UpdateDemand(Demand("a", {0, 4}));
  const LoopJob* j = loop_->Find("a");
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->demand.placement.size(), 2u);
  EXPECT_EQ(j->phase, JobPhase::kScheduled);
  ASSERT_TRUE(j->profile && j->planned);
  EXPECT_EQ(j->profile->peers, (std::vector<PeerTraffic>{{n0, n4, Bytes::Of(100)}}));
  EXPECT_EQ(j->planned->peers, j->profile->peers);
  ASSERT_TRUE(loop_->due().has_value()) << "the new placement asks for a plan";
  batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].changed.size(), 1u);
  ASSERT_EQ(batches[0].changed[0]->assignment.flows.size(), 1u);
  EXPECT_EQ(batches[0].changed[0]->assignment.flows[0].src_nic, n0);

  loop_->UpdateDemand(Demand("unknown", {0}));  // Ignored.
  EXPECT_EQ(loop_->Find("unknown"), nullptr);
}

TEST_F(ControlLoopTest, AnUnchangedPlanKeepsTheEpoch) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  loop_->AddJob(Demand("b", {1, 5}), 12);
  Advance(kDebounce);
  loop_->Invalidate("nothing really");
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].empty());
  EXPECT_EQ(loop_->epoch(), 1u);
}

TEST_F(ControlLoopTest, MinReplanIntervalSpacesRunsAndRequestsDuringARunMakeOneMore) {
  options_.min_replan_interval = Duration::Millis(500);
  loop_->SetOptions(options_);
  loop_->AddJob(Demand("a", {0, 4}), 10);
  Advance(kDebounce);
  const Duration first = clock_.Now();  // The first run started here.
  loop_->AddJob(Demand("b", {1, 5}), 12);
  EXPECT_EQ(loop_->StartPlan(), nullptr) << "min_replan_interval not over";
  ASSERT_TRUE(loop_->due().has_value());
  EXPECT_EQ(*loop_->due(), first + Duration::Millis(500));
  clock_.Set(first + Duration::Millis(500));
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  // A request while the run is in flight waits for it, then makes exactly one
  // more run.
  loop_->AddJob(Demand("c", {2, 6}), 14);
  EXPECT_FALSE(loop_->due().has_value());
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  loop_->Commit(loop_->FinishPlan(*snap, o));
  ASSERT_TRUE(loop_->due().has_value());
  EXPECT_EQ(*loop_->due(), clock_.Now() + Duration::Millis(500));
}

TEST_F(ControlLoopTest, AFailedCommitIsRetriedWithBackoffAndChangesNothing) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  fail_commits_ = 1;
  Advance(kDebounce);
  EXPECT_EQ(loop_->epoch(), 0u);
  EXPECT_TRUE(loop_->applied().empty());
  ASSERT_TRUE(loop_->due().has_value());
  EXPECT_EQ(*loop_->due(), clock_.Now() + Duration::Millis(1000));
  auto batches = Advance(Duration::Millis(1000));
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(loop_->epoch(), 1u);
  EXPECT_EQ(loop_->applied().size(), 1u);
}

TEST_F(ControlLoopTest, JobsThatLeaveDuringARunAreNotAppliedAgain) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  loop_->AddJob(Demand("b", {1, 5}), 12);
  Advance(kDebounce);
  loop_->Invalidate("link down");
  clock_.Advance(kDebounce);
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  // b leaves while the run is in flight.
  EXPECT_NE(loop_->RemoveJob("b", "ended"), nullptr);
  ApplyBatch b = loop_->FinishPlan(*snap, o);
  for (const auto& a : b.changed) EXPECT_NE(a->assignment.job_id, "b");
  loop_->Commit(b);
  EXPECT_FALSE(loop_->applied().count("b"));
  EXPECT_TRUE(loop_->due().has_value()) << "the departure asked for a plan";
}

TEST_F(ControlLoopTest, ARestartFromTheSameInputsChangesNothing) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  loop_->AddJob(Demand("b", {1, 5}), 12);
  loop_->AddJob(Demand("c", {2, 6}, 3'000'000'000), 14);
  Advance(kDebounce);
  loop_->ReportProfile("a", Profile(100, 10, true));
  loop_->ReportProfile("b", Profile(40, 10, true));
  loop_->ReportProfile("c", Profile(300, 10, true));
  Advance(kDebounce);
  loop_->ReportProfile("b", Profile(42, 11, true));  // Jitter: latest != planned.
  Advance(kDebounce);
  const AppliedPlan applied = loop_->applied();
  const uint64_t epoch = loop_->epoch();
  // A new loop restored from what a store would hold (latest and planned
  // profiles).
  ControlLoop again(&clock_, topo_.get(), options_);
  for (const auto& [id, j] : loop_->jobs())
    again.RestoreJob(j.demand, j.dscp, j.profile, j.planned);
  again.RestoreApplied(applied, epoch);
  again.Invalidate("restart");
  loop_ = std::make_unique<ControlLoop>(std::move(again));
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].empty()) << "the restart plan must reproduce the applied plan";
  EXPECT_EQ(loop_->epoch(), epoch);
}

TEST_F(ControlLoopTest, InvalidJobsAreExcludedWithTheirReasonAndTheRestIsPlanned) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  loop_->AddJob(Demand("b", {1, 1}), 12);  // The same host twice: ValidateJob refuses it.
  clock_.Advance(kDebounce);
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.planned, std::vector<std::string>{"a"});
  ASSERT_EQ(o.excluded.count("b"), 1u);
  EXPECT_FALSE(o.excluded.at("b").empty());
  ASSERT_EQ(o.changed.size(), 2u);  // Both new; b gets an assignment without flows.
  EXPECT_EQ(o.changed[1]->assignment.job_id, "b");
  EXPECT_TRUE(o.changed[1]->assignment.flows.empty());
}

TEST_F(ControlLoopTest, BuildJobSpecUsesThePlannedProfile) {
  LoopJob j;
  j.demand = Demand("a", {0, 4});
  auto s = BuildJobSpec(*topo_, j, Duration::Millis(100));
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->compute_time, Duration::Millis(100));
  EXPECT_EQ((*s)->pattern_bytes, Bytes::Of(1'000'000'000));
  j.planned = Profile(77, 10, true);
  j.planned->peers.push_back({topo_->hosts()[0], topo_->hosts()[4], Bytes::Of(500)});
  j.profile = Profile(99, 11, true);
  s = BuildJobSpec(*topo_, j, Duration::Millis(100));
  ASSERT_TRUE(s.ok() && s->has_value());
  EXPECT_EQ((*s)->compute_time, Duration::Millis(77));
  EXPECT_EQ((*s)->pattern, TrafficPattern::kExplicit);
  ASSERT_EQ((*s)->flows.size(), 1u);
  LoopJob one;
  one.demand = Demand("s", {0});
  s = BuildJobSpec(*topo_, one, Duration::Millis(100));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->has_value()) << "one host and no peers: nothing to plan";
}

TEST_F(ControlLoopTest, SwitchStatesAreDecidedByTheLoopWithTheirOwnEpochs) {
  options_.qos = QosConfig();
  loop_ = std::make_unique<ControlLoop>(&clock_, topo_.get(), options_);
  loop_->AddJob(Demand("a", {0, 4}), 10);
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_NE(loop_->qos(), nullptr);
  // The first state covers every switch; it does not need an epoch of its own.
  EXPECT_EQ(batches[0].qos_changed.size(), loop_->qos()->states.size());
  EXPECT_EQ(loop_->epoch(), 1u) << "one epoch, for the new assignment";
  const SwitchQosState tor0 = loop_->qos()->states.at("tor0");
  EXPECT_EQ(tor0.dscp_to_tc.at(10), LevelTc(*options_.qos, 0)) << "a newcomer sits on level 0";
  // A pure QoS change (another storage weight): a new epoch for the switches only.
  options_.qos->reserved[1].weight = 20;
  loop_->SetOptions(options_);
  batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].changed.empty());
  EXPECT_FALSE(batches[0].qos_changed.empty());
  EXPECT_TRUE(batches[0].advances_epoch);
  EXPECT_EQ(loop_->epoch(), 2u);
  for (const std::string& name : batches[0].qos_changed) {
    EXPECT_EQ(loop_->qos()->epochs.at(name), 2u) << name;
  }
  // Nothing changes: no epoch.
  loop_->Invalidate("again");
  batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].empty());
  EXPECT_EQ(loop_->epoch(), 2u);
}

// A stable policy: the loop's re-optimisation timer and the restart seed.
class StableControlLoopTest : public ControlLoopTest {
 protected:
  void SetUp() override {
    ControlLoopTest::SetUp();
    policy_ = MakeStable();
    options_.reoptimize_interval = Duration::Seconds(600);
    loop_ = std::make_unique<ControlLoop>(&clock_, topo_.get(), options_);
  }
  std::unique_ptr<SchedulingPolicy> MakeStable() {
    PolicyOptions po;
    po.resolve_ports = true;
    po.stable = true;
    auto policy = MakePolicy("crux", *topo_, po, &clock_);
    EXPECT_TRUE(policy.ok()) << policy.status().ToString();
    return std::move(policy).value();
  }
  // Two ToRs joined by two aggregation switches, every link at the NICs' 200 Gbps (two jobs on
  // one ToR-Agg link make it their most loaded link). "heavy" and "light" are planned while agg1
  // is down, so both take agg0; then agg1 is back and a new stable policy for the full topology
  // continues that plan (seeded). Rebuilds topo_, loop_ (with options_) and policy_.
  void PlanBothOverAgg0() {
    loop_.reset();
    topo_ = std::make_unique<Topology>(testing::Clos2(2, 2, 2, /*gbps=*/200));
    Topology degraded = *topo_;
    const NodeId agg1 = topo_->FindNode("agg1").value();
    for (size_t l = 0; l < degraded.num_links(); ++l) {
      const LinkId id(static_cast<uint32_t>(l));
      if (degraded.link(id).src == agg1 || degraded.link(id).dst == agg1) {
        degraded.SetLinkUp(id, false);
      }
    }
    PolicyOptions po;
    po.resolve_ports = true;
    po.stable = true;
    loop_ = std::make_unique<ControlLoop>(&clock_, topo_.get(), options_);
    auto on_degraded = MakePolicy("crux", degraded, po, &clock_);
    ASSERT_TRUE(on_degraded.ok()) << on_degraded.status().ToString();
    policy_ = std::move(on_degraded).value();
    clock_.Set(Duration::Zero());
    loop_->AddJob(Demand("heavy", {0, 2}), 10);
    loop_->AddJob(Demand("light", {1, 3}), 12);
    Advance(kDebounce);
    loop_->ReportProfile("heavy", Profile(300, 10, true));
    loop_->ReportProfile("light", Profile(20, 10, true));
    Advance(kDebounce);
    policy_ = MakeStable();
    loop_->Invalidate("link up");
    Advance(kDebounce);
  }
  void Converge() {
    loop_->AddJob(Demand("a", {0, 4}), 10);
    loop_->AddJob(Demand("b", {1, 5}), 12);
    loop_->AddJob(Demand("c", {2, 6}, 3'000'000'000), 14);
    Advance(kDebounce);
    loop_->ReportProfile("a", Profile(100, 10, true));
    loop_->ReportProfile("b", Profile(40, 10, true));
    loop_->ReportProfile("c", Profile(300, 10, true));
    Advance(kDebounce);
  }
};

TEST_F(StableControlLoopTest, TheLoopReoptimisesEveryIntervalCountedFromTheFirstRun) {
  Converge();  // First run at t = 30 ms starts the interval.
  ASSERT_TRUE(loop_->due().has_value());
  EXPECT_EQ(*loop_->due(), kDebounce + Duration::Seconds(600));
  EXPECT_EQ(loop_->StartPlan(), nullptr);
  clock_.Set(*loop_->due());
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_TRUE(snap->reoptimize);
  EXPECT_NE(snap->reason.find("re-optimisation"), std::string::npos) << snap->reason;
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  ASSERT_TRUE(o.status.ok());
  EXPECT_TRUE(o.reoptimized);
  ASSERT_TRUE(o.replan.has_value());
  EXPECT_EQ(o.replan->full_replan, "first plan") << "a re-optimisation plans from scratch";
  loop_->Commit(loop_->FinishPlan(*snap, o));
  EXPECT_EQ(*loop_->due(), clock_.Now() + Duration::Seconds(600));
  // Ordinary runs in between are not re-optimisations.
  loop_->ReportProfile("a", Profile(200, 20, true));
  clock_.Advance(kDebounce);
  snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(snap->reoptimize);
}

TEST_F(StableControlLoopTest, NoJobsNoReoptimisationAndZeroIsNever) {
  EXPECT_FALSE(loop_->due().has_value());
  options_.reoptimize_interval = Duration::Zero();
  loop_->SetOptions(options_);
  Converge();
  EXPECT_FALSE(loop_->due().has_value());
  options_.reoptimize_interval = Duration::Millis(-1);
  EXPECT_NE(ValidateControlLoopOptions(options_).message().find("reoptimize_interval"),
            std::string::npos);
}

TEST_F(StableControlLoopTest, ANewPolicyIsSeededWithThePlanInForceAndChangesNothing) {
  Converge();
  loop_->AddJob(Demand("d", {3, 7}), 18);
  loop_->ReportProfile("d", Profile(80, 10, true));
  Advance(kDebounce);
  const uint64_t epoch = loop_->epoch();
  policy_ = MakeStable();  // A restart, or a new topology version: no state of its own.
  loop_->Invalidate("restart");
  clock_.Advance(kDebounce);
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  ASSERT_TRUE(o.status.ok());
  EXPECT_TRUE(o.seeded);
  ASSERT_TRUE(o.replan.has_value());
  EXPECT_EQ(o.replan->seeded_paths, 4);
  EXPECT_TRUE(o.changed.empty()) << "the seeded plan is the plan in force";
  ApplyBatch b = loop_->FinishPlan(*snap, o);
  EXPECT_TRUE(b.empty());
  loop_->Commit(b);
  EXPECT_EQ(loop_->epoch(), epoch);
}

// The re-optimisation's adoption rule (reoptimize_min_gain): a fresh plan that gains less than
// the minimum leaves the plan in force (no job moves); one that gains enough replaces it.
TEST_F(StableControlLoopTest, AReoptimisationThatGainsNothingKeepsThePlanInForce) {
  options_.reoptimize_min_gain = 0.01;
  loop_->SetOptions(options_);
  Converge();
  const uint64_t epoch = loop_->epoch();
  clock_.Set(*loop_->due());
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  ASSERT_TRUE(snap->reoptimize);
  EXPECT_EQ(snap->reoptimize_min_gain, 0.01);
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_TRUE(o.reoptimized);
  ASSERT_TRUE(o.reoptimize_verdict.has_value());
  // Nothing changed since the last plan: the fresh plan is no better than the plan in force.
  EXPECT_FALSE(o.reoptimize_verdict->adopted);
  EXPECT_EQ(o.reoptimize_verdict->fresh, o.reoptimize_verdict->in_force);
  EXPECT_TRUE(o.changed.empty()) << "the plan in force stays";
  loop_->Commit(loop_->FinishPlan(*snap, o));
  EXPECT_EQ(loop_->epoch(), epoch);
  // The policy continues the plan in force: the next ordinary run is seeded, not from scratch,
  // and moves only the job that changed.
  loop_->ReportProfile("a", Profile(200, 20, true));
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  for (const auto& a : batches[0].changed) EXPECT_EQ(a->assignment.job_id, "a");
}

TEST_F(StableControlLoopTest, AReoptimisationThatGainsEnoughReplacesThePlanInForce) {
  for (double min_gain : {0.99, 0.01}) {
    SCOPED_TRACE(min_gain);
    options_.reoptimize_min_gain = min_gain;
    PlanBothOverAgg0();
    if (HasFatalFailure()) return;
    const auto heavy_before = loop_->applied().at("heavy");
    const auto light_before = loop_->applied().at("light");
    clock_.Set(*loop_->due());
    auto snap = loop_->StartPlan();
    ASSERT_NE(snap, nullptr);
    ASSERT_TRUE(snap->reoptimize);
    PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
    ASSERT_TRUE(o.status.ok()) << o.status.ToString();
    ASSERT_TRUE(o.reoptimize_verdict.has_value());
    const PlanOutcome::ReoptimizeVerdict& v = *o.reoptimize_verdict;
    // Spread over both aggregation switches, no ToR-Agg link carries two jobs: the W_j-weighted
    // load of the most loaded links falls (each job's worst link is its own NIC's).
    EXPECT_LT(v.fresh.contention_cost, v.in_force.contention_cost * 0.99);
    EXPECT_EQ(v.adopted, min_gain < 0.5)
        << v.fresh.contention_cost << " vs " << v.in_force.contention_cost;
    EXPECT_EQ(v.adopted, ImprovesBy(v.fresh, v.in_force, min_gain));
    EXPECT_EQ(MeasurePlan(*topo_, o.plan), v.adopted ? v.fresh : v.in_force);
    loop_->Commit(loop_->FinishPlan(*snap, o));
    const bool moved = loop_->applied().at("heavy") != heavy_before ||
                       loop_->applied().at("light") != light_before;
    EXPECT_EQ(moved, v.adopted);
  }
}

// Re-optimisations beside the runs (cruxd): the re-optimisation timer is not a run's, runs start
// and commit while one is in flight, and its verdict decides whether a run follows.
TEST_F(StableControlLoopTest, InTheBackgroundAReoptimisationIsNoRunAndRunsGoOnMeanwhile) {
  options_.reoptimize_in_background = true;
  loop_->SetOptions(options_);
  Converge();  // First run at t = 30 ms starts the interval.
  EXPECT_FALSE(loop_->due().has_value()) << "the timer is not a run's";
  ASSERT_TRUE(loop_->reoptimize_due().has_value());
  EXPECT_EQ(*loop_->reoptimize_due(), kDebounce + Duration::Seconds(600));
  EXPECT_EQ(loop_->StartReoptimization(), nullptr) << "not due yet";
  clock_.Set(*loop_->reoptimize_due());
  const Duration started = clock_.Now();
  std::shared_ptr<const PlanningSnapshot> re = loop_->StartReoptimization();
  ASSERT_NE(re, nullptr);
  EXPECT_TRUE(re->reoptimize);
  EXPECT_EQ(re->run, 0u) << "not a run";
  EXPECT_TRUE(loop_->reoptimizing());
  EXPECT_FALSE(loop_->reoptimize_due().has_value()) << "one at a time";
  const uint64_t runs = loop_->runs();
  // An event meanwhile is planned at once, by an ordinary run.
  loop_->ReportProfile("a", Profile(200, 20, true));
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(loop_->runs(), runs + 1);
  EXPECT_TRUE(loop_->reoptimizing());
  // The re-optimisation (on a policy of its own) plans the snapshot's jobs afresh.
  auto fresh = MakeStable();
  ReoptimizeOutcome o = RunReoptimization(*fresh, *topo_, *re);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  EXPECT_EQ(o.jobs, 3u);
  EXPECT_TRUE(o.adopt) << "min gain 0: the fresh plan is taken";
  EXPECT_FALSE(o.verdict.has_value());
  // Kept: no run follows; adopted: one does. Either way the interval restarted at its start.
  loop_->FinishReoptimization(false);
  EXPECT_FALSE(loop_->due().has_value());
  EXPECT_EQ(*loop_->reoptimize_due(), started + Duration::Seconds(600));
  clock_.Set(*loop_->reoptimize_due());
  re = loop_->StartReoptimization();
  ASSERT_NE(re, nullptr);
  loop_->FinishReoptimization(true);
  ASSERT_TRUE(loop_->due().has_value());
  EXPECT_EQ(*loop_->due(), clock_.Now() + kDebounce);
  EXPECT_EQ(loop_->pending_reasons(), std::vector<std::string>{"re-optimisation adopted"});
  EXPECT_EQ(loop_->reoptimizations(), 2u);
}

// RunReoptimization weighs the fresh plan against the plan in force (continued by a policy of
// its own), and the host that adopts it plans the next run with that policy: the jobs move, and
// a job that arrived while it ran is planned on top.
TEST_F(StableControlLoopTest, AnAdoptedReoptimisationReachesTheJobsThroughTheNextRun) {
  options_.reoptimize_in_background = true;
  for (double min_gain : {0.99, 0.01}) {
    SCOPED_TRACE(min_gain);
    options_.reoptimize_min_gain = min_gain;
    PlanBothOverAgg0();
    if (HasFatalFailure()) return;
    const auto heavy_before = loop_->applied().at("heavy");
    const auto light_before = loop_->applied().at("light");
    clock_.Set(*loop_->reoptimize_due());
    std::shared_ptr<const PlanningSnapshot> re = loop_->StartReoptimization();
    ASSERT_NE(re, nullptr);
    std::unique_ptr<SchedulingPolicy> fresh = MakeStable();
    ReoptimizeOutcome o = RunReoptimization(*fresh, *topo_, *re);
    ASSERT_TRUE(o.status.ok()) << o.status.ToString();
    ASSERT_TRUE(o.verdict.has_value());
    EXPECT_LT(o.verdict->fresh.contention_cost, o.verdict->in_force.contention_cost * 0.99);
    EXPECT_EQ(o.adopt, min_gain < 0.5);
    EXPECT_EQ(o.verdict->adopted, o.adopt);
    // A job arrives while it runs: an ordinary run on the runs' policy plans it.
    loop_->AddJob(Demand("late", {0, 3}), 14);
    Advance(kDebounce);
    ASSERT_TRUE(loop_->applied().contains("late"));
    EXPECT_EQ(loop_->applied().at("heavy"), heavy_before) << "the runs moved nothing";
    if (o.adopt) policy_ = std::move(fresh);  // What ControlHost does for the next run.
    loop_->FinishReoptimization(o.adopt);
    auto batches = Advance(kDebounce);
    EXPECT_EQ(batches.size(), o.adopt ? 1u : 0u);
    const bool moved = loop_->applied().at("heavy") != heavy_before ||
                       loop_->applied().at("light") != light_before;
    EXPECT_EQ(moved, o.adopt);
    EXPECT_TRUE(loop_->applied().contains("late"));
  }
}

TEST_F(StableControlLoopTest, AReoptimisationBesideTheRunsNeedsANewStablePolicy) {
  options_.reoptimize_in_background = true;
  loop_->SetOptions(options_);
  Converge();
  clock_.Set(*loop_->reoptimize_due());
  std::shared_ptr<const PlanningSnapshot> re = loop_->StartReoptimization();
  ASSERT_NE(re, nullptr);
  PolicyOptions exact_options;
  exact_options.resolve_ports = true;  // Not stable: exact incremental re-planning.
  auto exact = MakePolicy("crux", *topo_, exact_options, &clock_);
  ASSERT_TRUE(exact.ok());
  ReoptimizeOutcome o = RunReoptimization(**exact, *topo_, *re);
  EXPECT_EQ(o.status.code(), StatusCode::kFailedPrecondition) << o.status.ToString();
  EXPECT_FALSE(o.adopt);
  // A policy that already holds a plan is not new either (policy_ planned the runs).
  o = RunReoptimization(*policy_, *topo_, *re);
  EXPECT_EQ(o.status.code(), StatusCode::kFailedPrecondition) << o.status.ToString();
}

TEST_F(ControlLoopTest, AnAppliedAssignmentThatIsStillPlannedIsReusedNotRebuilt) {
  // a carries the most traffic throughout: the planner's reference job (a flag its assignment
  // carries, so a change of reference would change it).
  loop_->AddJob(Demand("a", {0, 4}, 8'000'000'000), 10);
  loop_->AddJob(Demand("b", {1, 5}), 12);
  Advance(kDebounce);
  EXPECT_TRUE(loop_->applied().at("a")->assignment.reference_job);
  EXPECT_FALSE(loop_->applied().at("b")->assignment.reference_job);
  const auto before_a = loop_->applied().at("a");
  const auto before_b = loop_->applied().at("b");
  loop_->ReportProfile("b", Profile(40, 10, true));  // b moves to its own level.
  auto batches = Advance(kDebounce);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(loop_->applied().at("a"), before_a) << "same entry, not a copy";
  EXPECT_NE(loop_->applied().at("b"), before_b);
  EXPECT_EQ(loop_->applied().at("b")->epoch, loop_->epoch());
  // IsAssignmentOf is the comparison the reuse rests on: any field that differs breaks it.
  PlanningJob job{"a", 10, JobPhase::kRegistered, nullptr, ""};
  const Assignment none = MakeAssignment(job, nullptr);
  EXPECT_TRUE(IsAssignmentOf(none, job, nullptr));
  Assignment other = none;
  other.nccl_env["X"] = "1";
  EXPECT_FALSE(IsAssignmentOf(other, job, nullptr));
  other = none;
  other.flows.push_back({});
  EXPECT_FALSE(IsAssignmentOf(other, job, nullptr));
}

TEST_F(ControlLoopTest, OptionsAreValidatedWithTheFieldName) {
  ControlLoopOptions o;
  o.debounce = Duration::Millis(-1);
  EXPECT_NE(ValidateControlLoopOptions(o).message().find("control.debounce"), std::string::npos);
  o = {};
  o.profiling_samples = 0;
  EXPECT_NE(ValidateControlLoopOptions(o).message().find("profiling_samples"), std::string::npos);
  o = {};
  o.reoptimize_min_gain = 1;
  EXPECT_NE(ValidateControlLoopOptions(o).message().find("reoptimize_min_gain"), std::string::npos);
  o.reoptimize_min_gain = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(ValidateControlLoopOptions(o).ok());
  EXPECT_TRUE(ValidateControlLoopOptions({}).ok());
  o = {};
  o.impact = ImpactOptions{};
  EXPECT_TRUE(ValidateControlLoopOptions(o).ok());
  o.impact->predict.tolerance = 0;
  EXPECT_NE(ValidateControlLoopOptions(o).message().find("impact.tolerance"), std::string::npos);
}

TEST_F(ControlLoopTest, WithImpactEveryRunPredictsThePlannedJobsAgainstEcmp) {
  loop_->AddJob(Demand("a", {0, 4}), 10);
  loop_->AddJob(Demand("b", {1, 1}), 12);  // Refused by ValidateJob: not planned, no figure.
  loop_->AddJob(Demand("c", {2, 6}), 14);
  clock_.Advance(kDebounce);
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(snap->impact.has_value()) << "off by default";
  PlanOutcome off = RunPlan(*policy_, *topo_, *snap, clock_);
  EXPECT_EQ(off.impact, nullptr);
  loop_->Commit(loop_->FinishPlan(*snap, off));

  options_.impact = ImpactOptions{};
  loop_->SetOptions(options_);
  loop_->Invalidate("impact on");
  clock_.Advance(kDebounce);
  snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  ASSERT_TRUE(snap->impact.has_value());
  PlanOutcome o = RunPlan(*policy_, *topo_, *snap, clock_);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  ASSERT_NE(o.impact, nullptr) << o.impact_error;
  ASSERT_EQ(o.impact->jobs.size(), o.plan.jobs.size());
  ASSERT_EQ(o.impact->jobs.size(), 2u);
  for (size_t i = 0; i < o.plan.jobs.size(); ++i) {
    const JobImpact& j = o.impact->jobs[i];
    EXPECT_EQ(j.id, o.plan.jobs[i].id);
    EXPECT_EQ(j.gpus, 16);
    EXPECT_EQ(j.standalone, o.plan.jobs[i].period);
    EXPECT_GT(j.predicted, Duration::Zero());
    EXPECT_GT(j.ecmp, Duration::Zero());
  }
}

}  // namespace
}  // namespace crux::core
