// The control loop's link-health rules end to end in core: signals -> EvaluateFaults -> the host
// applies the decisions to its topology and plans with a fresh stable policy seeded from the plan
// in force (as cruxd's ControlHost does per topology version) -> only the jobs whose pinned flows
// crossed the changed link move.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crux/core/control/control_loop.h"
#include "crux/core/faults/planned_share.h"
#include "crux/core/policies/policy.h"
#include "crux/testing/clos.h"

namespace crux::core {
namespace {

constexpr Duration kDebounce = Duration::Millis(30);

class ControlLoopFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nominal_ = std::make_unique<Topology>(testing::Clos2(4, 2, 4));
    current_ = std::make_unique<Topology>(*nominal_);
    NewPolicy();
    options_.debounce = kDebounce;
    options_.profiling_samples = 1;
    loop_ = std::make_unique<ControlLoop>(&clock_, nominal_.get(), options_);
  }

  void NewPolicy() {
    PolicyOptions po;
    po.resolve_ports = true;
    po.stable = true;
    policy_ = MakePolicy("crux", *current_, po, &clock_).value();
  }

  // What cruxd's fault service and plan host do with the loop's decisions.
  void Apply(const std::vector<LinkDecision>& decisions) {
    for (const LinkDecision& d : decisions) {
      current_->SetLinkUp(d.link, d.health != LinkHealth::kDown);
      const double cap = nominal_->link(d.link).capacity.ToBitsPerSec() * d.capacity_fraction;
      ASSERT_TRUE(
          current_->SetLinkCapacity(d.link, Bandwidth::BitsPerSec(static_cast<int64_t>(cap))).ok());
    }
    if (!decisions.empty()) NewPolicy();  // A new topology version: a new (seeded) policy.
  }

  void Plan() {
    clock_.Advance(kDebounce);
    while (auto snap = loop_->StartPlan()) {
      PlanOutcome o = RunPlan(*policy_, *current_, *snap, clock_);
      ASSERT_TRUE(o.status.ok()) << o.status.ToString();
      loop_->Commit(loop_->FinishPlan(*snap, o));
    }
  }

  void Jobs(int n = 12) {
    // n two-host jobs across ToRs.
    ASSERT_EQ(nominal_->hosts().size(), 16u);
    for (int j = 0; j < n; ++j) {
      JobDemand d;
      d.id = "job" + std::to_string(10 + j);
      d.placement.push_back({nominal_->hosts()[static_cast<size_t>(j)], 8, {}});
      d.placement.push_back({nominal_->hosts()[static_cast<size_t>((j + 5) % 16)], 8, {}});
      d.bytes_per_iteration = Bytes::Of(2'000'000'000LL + 100'000'000LL * j);
      loop_->AddJob(d, 10);
    }
    Plan();
    for (const auto& [id, j] : loop_->jobs()) {
      JobProfile p;
      p.compute_time = Duration::Millis(100);
      p.iteration_period = Duration::Millis(200);
      p.samples = 5;
      p.converged = true;
      loop_->ReportProfile(id, p);
    }
    Plan();
  }

  std::set<std::string> Crossing(LinkId l) const {
    std::set<std::string> out;
    for (const auto& [id, a] : loop_->applied()) {
      for (const FlowPin& f : a->assignment.flows) {
        if (std::find(f.path.begin(), f.path.end(), l) != f.path.end()) out.insert(id);
      }
    }
    return out;
  }
  // The busiest switch-to-switch link.
  LinkId BusiestUplink() const {
    LinkId best;
    size_t n = 0;
    for (uint32_t i = 0; i < nominal_->num_links(); ++i) {
      const Link& l = nominal_->link(LinkId(i));
      if (!IsNetworkSwitch(nominal_->node(l.src).kind) ||
          !IsNetworkSwitch(nominal_->node(l.dst).kind)) {
        continue;
      }
      if (Crossing(LinkId(i)).size() > n) {
        n = Crossing(LinkId(i)).size();
        best = LinkId(i);
      }
    }
    return best;
  }
  // The switch-to-switch link crossed by the most flows the plan gives a share (planned_share.h:
  // a flow the higher levels starve is no evidence when slow), among those whose set of such
  // flows no other link has (so the flows can single it out).
  LinkId SinglableUplink() const {
    std::vector<const FlowPin*> pins;
    std::vector<ShareFlow> flows;
    for (const auto& [id, a] : loop_->applied()) {
      for (const FlowPin& p : a->assignment.flows) {
        pins.push_back(&p);
        flows.push_back({p.path, a->assignment.level});
      }
    }
    const std::vector<double> share = PlannedShares(flows, *nominal_);
    std::map<LinkId, std::set<const FlowPin*>> on;
    for (size_t i = 0; i < pins.size(); ++i) {
      if (share[i] <= 0) continue;
      for (LinkId l : pins[i]->path) on[l].insert(pins[i]);
    }
    LinkId best;
    size_t n = 0;
    for (const auto& [l, set] : on) {
      const Link& link = nominal_->link(l);
      if (!IsNetworkSwitch(nominal_->node(link.src).kind) ||
          !IsNetworkSwitch(nominal_->node(link.dst).kind) || set.size() <= n) {
        continue;
      }
      bool unique = true;
      for (const auto& [other, oset] : on) unique = unique && (other == l || !(oset == set));
      if (unique) {
        n = set.size();
        best = l;
      }
    }
    return best;
  }
  std::map<std::string, Assignment> Snapshot() const {
    std::map<std::string, Assignment> out;
    for (const auto& [id, a] : loop_->applied()) out[id] = a->assignment;
    return out;
  }
  std::set<std::string> Moved(const std::map<std::string, Assignment>& before) const {
    std::set<std::string> out;
    for (const auto& [id, a] : loop_->applied()) {
      if (!(before.at(id).flows == a->assignment.flows)) out.insert(id);
    }
    return out;
  }
  // Every pinned flow (and probe) reports what a fluid fabric gives it with every flow active at
  // once (its planned share, planned_share.h), at most `gbps` (a flow that model starves: `gbps`);
  // those crossing `slow` get slow_gbps / gbps of that (a link at that fraction of its capacity).
  // `host_probes`: the probes are measured and reported by the host agents (ObserveHostProbes),
  // not by the jobs.
  void ReportFlows(LinkId slow, double gbps, double slow_gbps, bool host_probes = false) {
    std::vector<const FlowPin*> pins;
    std::vector<ShareFlow> flows;
    for (const auto& [id, a] : loop_->applied()) {
      for (const bool probe : {false, true}) {
        for (const FlowPin& p : probe ? a->assignment.probes : a->assignment.flows) {
          pins.push_back(&p);
          flows.push_back({p.path, a->assignment.level, /*newcomer=*/probe});
        }
      }
    }
    const std::vector<double> share = PlannedShares(flows, *nominal_);
    std::map<const FlowPin*, double> rate;
    // A flow the higher levels starve in that model runs in their gaps: `gbps`.
    for (size_t i = 0; i < pins.size(); ++i) {
      rate[pins[i]] = share[i] > 0 ? std::min(gbps * 1e9, share[i]) : gbps * 1e9;
    }
    for (const auto& [id, a] : loop_->applied()) {
      std::vector<FlowSample> samples;
      std::vector<FlowSample> probes;
      for (const bool probe : {false, true}) {
        for (const FlowPin& p : probe ? a->assignment.probes : a->assignment.flows) {
          const bool crosses = std::find(p.path.begin(), p.path.end(), slow) != p.path.end();
          FlowSample s;
          s.src_nic = p.src_nic;
          s.dst_nic = p.dst_nic;
          s.udp_sport = p.udp_sport;
          s.probe = probe;
          s.transfer_time = Duration::Millis(50);
          const double bps = rate[&p] * (crosses ? slow_gbps / gbps : 1.0);
          s.bytes = Bytes::Of(static_cast<int64_t>(bps / 8 * 0.05));
          if (probe && host_probes) {
            // A host probe measures its path's capacity: the smallest nominal one, at
            // slow_gbps / gbps of it over `slow`.
            double cap = std::numeric_limits<double>::infinity();
            for (LinkId l : p.path) cap = std::min(cap, nominal_->link(l).capacity.ToBitsPerSec());
            s.bytes = Bytes::Of(
                static_cast<int64_t>(cap * (crosses ? slow_gbps / gbps : 1.0) / 8 * 0.05));
          }
          (probe && host_probes ? probes : samples).push_back(s);
        }
      }
      loop_->ObserveFlows(id, samples);
      if (!probes.empty()) loop_->ObserveHostProbes(id, probes);
    }
  }
  // Degrade(link) applied and planned around (committed), then healthy flows until the link
  // comes back: the decisions of the evaluation that brought it back (empty: it never did).
  std::vector<LinkDecision> DegradeThenRecover(LinkId link) {
    const LinkDecision d = Degrade(link);
    if (HasFailure()) return {};
    Apply({d});
    clock_.Advance(kDebounce);
    std::shared_ptr<const PlanningSnapshot> snap = loop_->StartPlan();
    EXPECT_NE(snap, nullptr);
    if (snap == nullptr) return {};
    EXPECT_FALSE(snap->reoptimize) << snap->reason;  // The fault: only its jobs are unseated.
    loop_->Commit(loop_->FinishPlan(*snap, RunPlan(*policy_, *current_, *snap, clock_)));
    std::vector<LinkDecision> up;
    for (int round = 0; round < 10 && up.empty(); ++round) {
      clock_.Advance(Duration::Millis(1000));
      ReportFlows(link, 100, 100);
      up = loop_->EvaluateFaults();
    }
    return up;
  }
  // Baselines at 100 Gb/s, then the flows and probes crossing `link` at 25 Gb/s: the one
  // decision that follows (degraded).
  LinkDecision Degrade(LinkId link) {
    ReportFlows(link, 100, 100);
    EXPECT_TRUE(loop_->EvaluateFaults().empty());
    clock_.Advance(Duration::Millis(1000));
    ReportFlows(link, 100, 25);
    EXPECT_TRUE(loop_->EvaluateFaults().empty());  // A suspect, confirmed at the next round.
    clock_.Advance(Duration::Millis(1000));
    ReportFlows(link, 100, 25);
    const std::vector<LinkDecision> d = loop_->EvaluateFaults();
    EXPECT_EQ(d.size(), 1u);
    if (d.empty()) return {};
    EXPECT_EQ(d[0].link, link);
    EXPECT_EQ(d[0].health, LinkHealth::kDegraded);
    return d[0];
  }
  bool CrossedByProbe(LinkId l) const {
    for (const auto& [id, a] : loop_->applied()) {
      for (const FlowPin& p : a->assignment.probes) {
        if (std::find(p.path.begin(), p.path.end(), l) != p.path.end()) return true;
      }
    }
    return false;
  }

  FakeClock clock_;
  std::unique_ptr<Topology> nominal_;
  std::unique_ptr<Topology> current_;
  std::unique_ptr<SchedulingPolicy> policy_;
  ControlLoopOptions options_;
  std::unique_ptr<ControlLoop> loop_;
};

TEST_F(ControlLoopFaultsTest, PortDownReplansOnlyTheJobsCrossingTheLink) {
  Jobs();
  const LinkId link = BusiestUplink();
  ASSERT_TRUE(link.valid());
  const std::set<std::string> crossing = Crossing(link);
  ASSERT_GE(crossing.size(), 2u);
  const auto before = Snapshot();
  const Link& l = nominal_->link(link);
  loop_->ObserveLinkState({link, false, "test"});
  loop_->ObserveLinkState({l.reverse, false, "test"});
  ASSERT_EQ(loop_->faults_due(), Duration::Zero());
  const std::vector<LinkDecision> d = loop_->EvaluateFaults();
  ASSERT_EQ(d.size(), 2u);
  Apply(d);
  Plan();
  EXPECT_TRUE(Crossing(link).empty());
  const std::set<std::string> moved = Moved(before);
  for (const std::string& id : moved) EXPECT_TRUE(crossing.count(id)) << id << " moved";
  // Jobs crossing the reverse direction move too; the ones on `link` all moved.
  for (const std::string& id : crossing) EXPECT_TRUE(moved.count(id)) << id << " stayed";
}

TEST_F(ControlLoopFaultsTest, GrayLinkIsLocalisedDegradedAndOnlyItsJobsAreReplanned) {
  Jobs();
  const LinkId link = SinglableUplink();
  ASSERT_TRUE(link.valid());
  const std::set<std::string> crossing = Crossing(link);
  ASSERT_GE(crossing.size(), 2u);
  const LinkDecision d = Degrade(link);
  ASSERT_FALSE(HasFailure());
  EXPECT_NEAR(d.capacity_fraction, 0.25, 0.05);
  const auto before = Snapshot();
  Apply({d});
  Plan();
  const std::set<std::string> moved = Moved(before);
  EXPECT_FALSE(moved.empty());
  for (const std::string& id : moved) EXPECT_TRUE(crossing.count(id)) << id << " moved";
  // Without the unseat rule the seeded policy would have kept every path across the link.
  EXPECT_LT(Crossing(link).size(), crossing.size());
}

// A link that comes back is crossed by no job (they were all moved off it), so unseating the
// jobs of changed links would never bring one back: the first plan after the recovery plans from
// scratch (a re-optimisation), the plans before it do not.
TEST_F(ControlLoopFaultsTest, TheFirstPlanAfterALinkComesBackIsAReoptimisation) {
  Jobs();
  const LinkId link = SinglableUplink();
  ASSERT_TRUE(link.valid());
  // Healthy everywhere for longer than the hold after the fault: the link comes back.
  const std::vector<LinkDecision> up = DegradeThenRecover(link);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].health, LinkHealth::kUp);
  Apply(up);
  clock_.Advance(kDebounce);
  std::shared_ptr<const PlanningSnapshot> snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_TRUE(snap->reoptimize);
  EXPECT_NE(snap->reason.find("a link came back"), std::string::npos) << snap->reason;
  loop_->Commit(loop_->FinishPlan(*snap, RunPlan(*policy_, *current_, *snap, clock_)));
  loop_->Invalidate("test");
  clock_.Advance(kDebounce);
  snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(snap->reoptimize) << snap->reason;  // Once.
}

// The same with re-optimisations beside the runs (cruxd): the plan the recovery asks for is an
// ordinary run, and a re-optimisation is due at once instead.
TEST_F(ControlLoopFaultsTest, InTheBackgroundALinkThatComesBackMakesAReoptimisationDueAtOnce) {
  options_.reoptimize_in_background = true;
  loop_ = std::make_unique<ControlLoop>(&clock_, nominal_.get(), options_);
  Jobs();
  const LinkId link = SinglableUplink();
  ASSERT_TRUE(link.valid());
  const std::vector<LinkDecision> up = DegradeThenRecover(link);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(up.size(), 1u);
  Apply(up);
  ASSERT_TRUE(loop_->reoptimize_due().has_value());
  EXPECT_EQ(*loop_->reoptimize_due(), clock_.Now());
  clock_.Advance(kDebounce);
  std::shared_ptr<const PlanningSnapshot> snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_FALSE(snap->reoptimize) << snap->reason;
  std::shared_ptr<const PlanningSnapshot> re = loop_->StartReoptimization();
  ASSERT_NE(re, nullptr);
  EXPECT_TRUE(re->reoptimize);
  EXPECT_NE(re->reason.find("a link came back"), std::string::npos) << re->reason;
  EXPECT_FALSE(loop_->reoptimize_due().has_value()) << "one in flight";
  loop_->FinishReoptimization(false);
  EXPECT_FALSE(loop_->reoptimize_due().has_value()) << "once (no interval set)";
}

TEST_F(ControlLoopFaultsTest, ProbesCoverTheUplinksNoFlowCrossesAndLocaliseAFaultThere) {
  options_.faults.probes.enabled = true;
  // One job (host0 under tor0, host5 under tor1): its two flows take one Agg each way, so the
  // other Agg's uplinks are reachable by its pairs but crossed by no flow: one probe each way
  // (the pair has one path through that Agg; min_flows 1 so that one probe may accuse).
  options_.faults.localisation.min_flows = 1;
  loop_ = std::make_unique<ControlLoop>(&clock_, nominal_.get(), options_);
  Jobs(1);
  std::vector<LinkId> probed_only;  // Uplinks only probes watch.
  for (uint32_t i = 0; i < nominal_->num_links(); ++i) {
    const Link& l = nominal_->link(LinkId(i));
    if (IsNetworkSwitch(nominal_->node(l.src).kind) &&
        IsNetworkSwitch(nominal_->node(l.dst).kind) && Crossing(LinkId(i)).empty() &&
        CrossedByProbe(LinkId(i))) {
      probed_only.push_back(LinkId(i));
    }
  }
  size_t probes = 0;
  for (const auto& [id, a] : loop_->applied()) {
    EXPECT_LE(a->assignment.probes.size(), 4u) << id;
    probes += a->assignment.probes.size();
    for (const FlowPin& p : a->assignment.probes) {
      EXPECT_NE(p.udp_sport, 0);
      EXPECT_FALSE(p.path.empty());
    }
  }
  ASSERT_GT(probes, 0u);
  ASSERT_FALSE(probed_only.empty());
  // A gray fault there: the probe is the only observation crossing the link, and it crosses
  // the other uncovered uplink of its path too, so tomography alone cannot tell the two apart
  // (ambiguous: shown, nothing changes) ...
  const LinkId link = probed_only.front();
  ReportFlows(link, 100, 100);  // Baselines.
  EXPECT_TRUE(loop_->EvaluateFaults().empty());
  for (int round = 0; round < 2; ++round) {
    clock_.Advance(Duration::Millis(1000));
    ReportFlows(link, 100, 25);
    EXPECT_TRUE(loop_->EvaluateFaults().empty());
  }
  bool shown = false;
  for (const LinkFaultView& v : loop_->faults().Links()) {
    if (v.link != link) continue;
    shown = v.suspect && v.ambiguous;
    bool by_probe = false;
    for (const std::string& e : v.evidence) {
      by_probe = by_probe || e.find("probe of job") != std::string::npos;
    }
    EXPECT_TRUE(by_probe) << v.reason;
  }
  EXPECT_TRUE(shown);
  // ... until the switch's counters single it out: two agreeing signals, down.
  clock_.Advance(Duration::Millis(1000));
  ReportFlows(link, 100, 25);
  loop_->ObserveCounters({link, Duration::Millis(1000), 100, 0, 0, 0, 0, "switch port"});
  const std::vector<LinkDecision> d = loop_->EvaluateFaults();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].link, link);
  EXPECT_EQ(d[0].health, LinkHealth::kDown);
  EXPECT_NE(d[0].reason.find("two agreeing signals"), std::string::npos) << d[0].reason;
}

// A link only one job's flows cross: its slow flows alone move nothing (the tenant rule), but
// the link becomes a probe target, the loop asks for a plan, the plan carries host probes over it
// and, once the host agents report them slow as well, the link is degraded.
TEST_F(ControlLoopFaultsTest, AOneJobSuspectIsProbedAndTheHostsProbesSettleIt) {
  options_.faults.probes.enabled = true;
  loop_ = std::make_unique<ControlLoop>(&clock_, nominal_.get(), options_);
  Jobs(4);
  LinkId link;
  for (uint32_t i = 0; i < nominal_->num_links() && !link.valid(); ++i) {
    const Link& l = nominal_->link(LinkId(i));
    if (IsNetworkSwitch(nominal_->node(l.src).kind) &&
        IsNetworkSwitch(nominal_->node(l.dst).kind) && Crossing(LinkId(i)).size() == 1) {
      link = LinkId(i);
    }
  }
  ASSERT_TRUE(link.valid());
  ReportFlows(link, 100, 100, /*host_probes=*/true);
  EXPECT_TRUE(loop_->EvaluateFaults().empty());
  for (int round = 0; round < 2; ++round) {
    clock_.Advance(Duration::Millis(1000));
    ReportFlows(link, 100, 25, /*host_probes=*/true);
    EXPECT_TRUE(loop_->EvaluateFaults().empty());
  }
  const std::vector<LinkId>& targets = loop_->faults().probe_targets();
  ASSERT_TRUE(std::find(targets.begin(), targets.end(), link) != targets.end());
  // The loop asked for a plan: it carries the targets and designs probes over the link.
  ASSERT_TRUE(loop_->due().has_value());
  clock_.Advance(kDebounce);
  auto snap = loop_->StartPlan();
  ASSERT_NE(snap, nullptr);
  EXPECT_TRUE(std::find(snap->probe_suspects.begin(), snap->probe_suspects.end(), link) !=
              snap->probe_suspects.end());
  PlanOutcome o = RunPlan(*policy_, *current_, *snap, clock_);
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  loop_->Commit(loop_->FinishPlan(*snap, o));
  ASSERT_TRUE(CrossedByProbe(link));
  std::vector<LinkDecision> d;
  for (int round = 0; round < 3 && d.empty(); ++round) {
    clock_.Advance(Duration::Millis(1000));
    ReportFlows(link, 100, 25, /*host_probes=*/true);
    d = loop_->EvaluateFaults();
  }
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].link, link);
  EXPECT_EQ(d[0].health, LinkHealth::kDegraded);
  EXPECT_NE(d[0].reason.find("host agent probes agree"), std::string::npos) << d[0].reason;
}

}  // namespace
}  // namespace crux::core
