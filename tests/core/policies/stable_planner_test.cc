// Stable re-planning (PlannerOptions::stable, docs/algorithms.md §9).
//
// What a stable planner promises, checked after every event of random sequences of arrivals,
// departures and profile changes on several fabrics and option sets:
//   * every plan is valid: one JobPlan per job, levels in the job band, every flow on a path
//     of its source and destination, levels that respect the contention DAG (no edge from a
//     lower level to a higher one), cut weight = the cut of those levels;
//   * jobs whose spec did not change keep their paths and source ports, and their levels unless
//     an insertion found no valid level (then only that component is compressed again);
//   * a run that recomputes everything (first plan, reference changed, path order changed) and a
//     run after ResetIncrementalState return exactly the full re-plan.
// How far its plans drift from the full re-plan's is a measurement (printed here, reported by
// bench/stable_replan_bench.cc), not an assertion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/plan/compression.h"
#include "crux/core/plan/planner.h"
#include "crux/core/policies/policy.h"
#include "crux/testing/random_jobs.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using testing::Fabric;
using testing::Fabrics;
using testing::JobGenerator;
using testing::PlanDiff;

PlannerOptions Stable(PlannerOptions o = {}) {
  o.incremental = true;
  o.stable = true;
  return o;
}

// The checks every plan must pass. `jobs` is the input.
void ExpectValid(const Topology& topo, const std::vector<JobSpec>& jobs, const Plan& plan) {
  ASSERT_EQ(plan.jobs.size(), jobs.size());
  std::vector<int> block(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    const JobPlan& jp = plan.jobs[j];
    ASSERT_EQ(jp.id, jobs[j].id);
    ASSERT_GE(jp.level, plan.first_job_level) << jp.id;
    ASSERT_LT(jp.level, plan.first_job_level + plan.usable_levels) << jp.id;
    block[j] = jp.level - plan.first_job_level;
    for (const FlowPlan& f : jp.flows) {
      ASSERT_FALSE(f.path.empty()) << jp.id;
      ASSERT_LT(f.path_index, f.num_paths) << jp.id;
      ASSERT_EQ(topo.link(f.path.front()).src, f.src) << jp.id;
      ASSERT_EQ(topo.link(f.path.back()).dst, f.dst) << jp.id;
      for (size_t h = 1; h < f.path.size(); ++h) {
        ASSERT_EQ(topo.link(f.path[h - 1]).dst, topo.link(f.path[h]).src) << jp.id;
      }
    }
  }
  for (const DagEdge& e : plan.dag.edges) {
    ASSERT_LE(block[static_cast<size_t>(e.from)], block[static_cast<size_t>(e.to)])
        << plan.jobs[static_cast<size_t>(e.from)].id << " -> "
        << plan.jobs[static_cast<size_t>(e.to)].id;
  }
  if (plan.dag.edges_omitted == 0) {
    EXPECT_DOUBLE_EQ(plan.cut_weight, CutWeight(plan.dag, block));
    // The DAG (patched from the previous one in stable runs) is the DAG of the plan's paths.
    std::vector<std::vector<LinkId>> links(jobs.size());
    std::vector<int> rank(jobs.size());
    std::vector<Intensity> intensity(jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) {
      for (const FlowPlan& f : plan.jobs[j].flows) {
        links[j].insert(links[j].end(), f.path.begin(), f.path.end());
      }
      rank[j] = plan.jobs[j].rank;
      intensity[j] = plan.jobs[j].intensity;
    }
    EXPECT_TRUE(plan.dag == BuildContentionDag(links, rank, intensity, topo.num_links()))
        << "the plan's DAG is not the DAG of its paths";
  }
}

struct Drift {
  int runs = 0;
  int stable_runs = 0;
  int full_runs = 0;
  int refused = 0;
  int inserted = 0;
  int kept_jobs = 0;
  int kept_moved_stable = 0;  // Kept jobs whose paths or level changed in a stable run (0).
  int kept_moved_exact = 0;   // The same jobs' changes in the full re-plan.
  double cut_stable = 0;
  double cut_full = 0;
};

bool SameFlows(const JobPlan& a, const JobPlan& b) {
  if (a.flows.size() != b.flows.size()) return false;
  for (size_t f = 0; f < a.flows.size(); ++f) {
    if (a.flows[f].path != b.flows[f].path || a.flows[f].udp_sport != b.flows[f].udp_sport) {
      return false;
    }
  }
  return true;
}

void RunStableSequence(const Fabric& fabric, const PlannerOptions& options, uint64_t seed,
                       int events, Drift& drift) {
  SCOPED_TRACE(fabric.name + " seed " + std::to_string(seed));
  FakeClock clock;
  Planner stable(fabric.topo, Stable(options), &clock);
  JobGenerator gen(fabric.topo, seed);
  Rng& rng = gen.rng();
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(gen.NewJob());
  std::map<std::string, JobSpec> last_spec;
  std::map<std::string, JobPlan> last_plan;  // The stable planner's previous plan, by id.
  std::map<std::string, JobPlan> last_full;
  for (int e = 0; e <= events; ++e) {
    std::string what = "initial";
    if (e > 0) {
      const uint64_t u = rng.Uniform(100);
      if (u < 40 || jobs.size() < 3) {
        what = "arrival";
        jobs.insert(jobs.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(jobs.size() + 1)),
                    gen.NewJob());
      } else if (u < 65) {
        what = "departure";
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(jobs.size())));
      } else if (u < 92) {
        what = "profile change";
        gen.Change(jobs[rng.Uniform(jobs.size())]);
      } else if (u < 96) {
        what = "re-optimisation";
        stable.ResetIncrementalState();
      } else {
        what = "no change";
      }
    }
    SCOPED_TRACE("event " + std::to_string(e) + ": " + what);
    Planner fresh(fabric.topo, options, &clock);
    const Result<Plan> full = fresh.Run(jobs);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    const Result<Plan> got = stable.Run(jobs);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectValid(fabric.topo, jobs, *got);
    if (::testing::Test::HasFatalFailure()) return;
    const ReplanStats& s = stable.last_replan();
    if (!s.full_replan.empty()) {
      ASSERT_EQ(PlanDiff(*got, *full), "") << "full_replan: " << s.full_replan;
      ++drift.full_runs;
    } else {
      ++drift.stable_runs;
      drift.refused += s.insertions_repaired;
      drift.inserted += s.levels_inserted;
      for (size_t j = 0; j < jobs.size(); ++j) {
        const JobSpec& spec = jobs[j];
        auto ls = last_spec.find(spec.id);
        if (ls == last_spec.end()) continue;
        // Unchanged spec: a kept job.
        const bool same =
            ls->second.hosts == spec.hosts && ls->second.compute_time == spec.compute_time &&
            ls->second.pattern_bytes == spec.pattern_bytes && ls->second.pattern == spec.pattern &&
            ls->second.overlap_start == spec.overlap_start &&
            ls->second.gpus_per_host == spec.gpus_per_host &&
            ls->second.flops_per_iteration == spec.flops_per_iteration &&
            ls->second.flows.size() == spec.flows.size();
        if (!same) continue;
        ++drift.kept_jobs;
        const JobPlan& before = last_plan.at(spec.id);
        const JobPlan& now = got->jobs[j];
        EXPECT_TRUE(SameFlows(before, now)) << spec.id << " moved in a stable run";
        if (s.insertions_repaired == 0) {
          EXPECT_EQ(before.level, now.level) << spec.id << " changed level in a stable run";
        }
        if (!SameFlows(before, now) || before.level != now.level) ++drift.kept_moved_stable;
        const auto lf = last_full.find(spec.id);
        if (lf != last_full.end() &&
            (!SameFlows(lf->second, full->jobs[j]) || lf->second.level != full->jobs[j].level)) {
          ++drift.kept_moved_exact;
        }
      }
    }
    ++drift.runs;
    drift.cut_stable += got->total_edge_weight > 0 ? got->cut_weight / got->total_edge_weight : 1;
    drift.cut_full += full->total_edge_weight > 0 ? full->cut_weight / full->total_edge_weight : 1;
    last_spec.clear();
    last_plan.clear();
    last_full.clear();
    for (size_t j = 0; j < jobs.size(); ++j) {
      last_spec[jobs[j].id] = jobs[j];
      last_plan[jobs[j].id] = got->jobs[j];
      last_full[jobs[j].id] = full->jobs[j];
    }
  }
}

TEST(StablePlannerTest, RandomEventSequencesKeepKeptJobsAndStayValid) {
  const std::vector<Fabric> fabrics = Fabrics();
  std::vector<PlannerOptions> cases(3);
  cases[1].levels = 3;
  cases[1].reserved_high_levels = 1;
  cases[1].seed = 99;
  cases[2].levels = 4;
  cases[2].max_exact_component = 3;
  cases[2].topo_orders = 3;
  Drift drift;
  for (const PlannerOptions& o : cases) {
    for (const Fabric& fabric : fabrics) {
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        RunStableSequence(fabric, o, seed * 7 + fabric.topo.num_links(), 50, drift);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  // Every kind of run happened: stable ones with insertions, full ones, and at least one
  // insertion that found no valid level (a component compressed again).
  EXPECT_GT(drift.stable_runs, drift.full_runs);
  EXPECT_GT(drift.full_runs, 0);
  EXPECT_GT(drift.inserted, 0);
  EXPECT_GT(drift.refused, 0);
  std::printf(
      "stable: %d runs (%d stable, %d full), %d levels inserted, %d insertions repaired; kept "
      "jobs %d: %d moved (stable) vs %d in the full re-plans; mean cut fraction %.4f stable vs "
      "%.4f full\n",
      drift.runs, drift.stable_runs, drift.full_runs, drift.inserted, drift.refused,
      drift.kept_jobs, drift.kept_moved_stable, drift.kept_moved_exact,
      drift.cut_stable / drift.runs, drift.cut_full / drift.runs);
}

TEST(StablePlannerTest, StableRequiresIncremental) {
  PlannerOptions o;
  o.stable = true;
  o.incremental = false;
  const Status s = ValidatePlannerOptions(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("stable"), std::string::npos) << s.message();
}

TEST(StablePlannerTest, AnArrivalTouchesOnlyTheNewcomer) {
  const std::vector<Fabric> fabrics = Fabrics();
  const Fabric& clos = fabrics[0];  // Oversubscribed: one big contention component.
  FakeClock clock;
  Planner stable(clos.topo, Stable(), &clock);
  JobGenerator gen(clos.topo, 5);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 40; ++i) jobs.push_back(gen.NewJob());
  const Result<Plan> before = stable.Run(jobs);
  ASSERT_TRUE(before.ok());
  jobs.push_back(gen.NewJob());
  const Result<Plan> after = stable.Run(jobs);
  ASSERT_TRUE(after.ok());
  const ReplanStats& s = stable.last_replan();
  ASSERT_EQ(s.full_replan, "") << "this seed's arrival must not change the reference";
  EXPECT_EQ(s.added, 1);
  EXPECT_EQ(s.paths_searched, 1);
  EXPECT_EQ(s.profiled, 1);
  for (size_t j = 0; j + 1 < jobs.size(); ++j) {
    EXPECT_TRUE(SameFlows(before->jobs[j], after->jobs[j])) << jobs[j].id;
    if (s.insertions_repaired == 0) {
      EXPECT_EQ(before->jobs[j].level, after->jobs[j].level);
    }
  }
  ExpectValid(clos.topo, jobs, *after);
}

TEST(StablePlannerTest, ResetReoptimisesToTheFullPlan) {
  const std::vector<Fabric> fabrics = Fabrics();
  const Fabric& clos = fabrics[0];
  FakeClock clock;
  Planner stable(clos.topo, Stable(), &clock);
  JobGenerator gen(clos.topo, 11);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 12; ++i) jobs.push_back(gen.NewJob());
  ASSERT_TRUE(stable.Run(jobs).ok());
  for (int i = 0; i < 10; ++i) {
    jobs.push_back(gen.NewJob());
    gen.Change(jobs[static_cast<size_t>(i)]);
    ASSERT_TRUE(stable.Run(jobs).ok());
  }
  stable.ResetIncrementalState();
  const Result<Plan> got = stable.Run(jobs);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(stable.last_replan().full_replan, "first plan");
  Planner fresh(clos.topo, PlannerOptions{}, &clock);
  const Result<Plan> want = fresh.Run(jobs);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(PlanDiff(*got, *want), "");
}

// The seeds of a plan: every job's level and flow paths (spans into `plan`, which must outlive
// the next Run).
std::vector<PlanSeed> SeedsOf(const Plan& plan, bool levels = true) {
  std::vector<PlanSeed> seeds;
  for (const JobPlan& jp : plan.jobs) {
    PlanSeed seed;
    seed.id = jp.id;
    if (levels) seed.level = jp.level;
    seed.reference = jp.reference;
    for (const FlowPlan& f : jp.flows) seed.flows.push_back({f.src, f.dst, f.path});
    seeds.push_back(std::move(seed));
  }
  return seeds;
}

// A restarted daemon: a new stable planner seeded with the plan in force returns that plan
// (same paths, ports, levels, DAG), not a re-optimised one.
TEST(StablePlannerTest, ASeededPlannerContinuesThePlanInForce) {
  const std::vector<Fabric> fabrics = Fabrics();
  for (const Fabric& fabric : fabrics) {
    SCOPED_TRACE(fabric.name);
    FakeClock clock;
    Planner first(fabric.topo, Stable(), &clock);
    JobGenerator gen(fabric.topo, 21);
    std::vector<JobSpec> jobs;
    for (int i = 0; i < 16; ++i) jobs.push_back(gen.NewJob());
    Result<Plan> in_force = first.Run(jobs);
    ASSERT_TRUE(in_force.ok());
    for (int e = 0; e < 12; ++e) {  // Let the stable plan drift from the full one.
      jobs.push_back(gen.NewJob());
      in_force = first.Run(jobs);
      ASSERT_TRUE(in_force.ok());
    }
    Planner restarted(fabric.topo, Stable(), &clock);
    ASSERT_TRUE(restarted.WantsSeed());
    restarted.Seed(SeedsOf(*in_force));
    const Result<Plan> got = restarted.Run(jobs);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(PlanDiff(*got, *in_force), "");
    EXPECT_EQ(restarted.last_replan().seeded_paths, static_cast<int>(jobs.size()));
    EXPECT_EQ(restarted.last_replan().seeded_levels, static_cast<int>(jobs.size()));
    EXPECT_FALSE(restarted.WantsSeed());
    // Without the seed the restart would re-optimise (and, on these fabrics, move jobs).
    Planner cold(fabric.topo, Stable(), &clock);
    const Result<Plan> reoptimised = cold.Run(jobs);
    ASSERT_TRUE(reoptimised.ok());
    std::printf("%s: a cold restart differs from the plan in force at: %s\n", fabric.name.c_str(),
                PlanDiff(*reoptimised, *in_force).c_str());
  }
}

// A newcomer that carries more traffic than anyone becomes the exact planner's reference job,
// which changes every k_j and re-plans every job; the stable planner keeps its reference (only
// the newcomer is planned), a planner seeded with the plan in force keeps it too (a restart), and
// a re-optimisation takes the new one.
TEST(StablePlannerTest, ANewcomerWithMoreTrafficDoesNotReplaceTheReference) {
  const std::vector<Fabric> fabrics = Fabrics();
  const Fabric& clos = fabrics[0];
  FakeClock clock;
  Planner stable(clos.topo, Stable(), &clock);
  JobGenerator gen(clos.topo, 11);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(gen.NewJob());
  const Result<Plan> before = stable.Run(jobs);
  ASSERT_TRUE(before.ok());
  const int reference = before->reference_job;
  ASSERT_GE(reference, 0);
  // Communication exposed, far more bytes than anyone: SelectReference's choice.
  JobSpec big = gen.NewJob();
  big.pattern = TrafficPattern::kRingAllReduce;
  big.flows.clear();
  big.hosts = {clos.topo.hosts()[0], clos.topo.hosts()[5], clos.topo.hosts()[10]};
  big.pattern_bytes = Bytes::FromDouble(5e10);
  big.overlap_start = 1;
  jobs.push_back(big);
  Planner exact(clos.topo, PlannerOptions{}, &clock);
  const Result<Plan> full = exact.Run(jobs);
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->reference_job, 8) << "the newcomer is the full plan's reference";
  const Result<Plan> after = stable.Run(jobs);
  ASSERT_TRUE(after.ok());
  const ReplanStats& s = stable.last_replan();
  EXPECT_EQ(s.full_replan, "");
  EXPECT_FALSE(s.reference_changed);
  EXPECT_EQ(after->reference_job, reference);
  EXPECT_TRUE(after->jobs[static_cast<size_t>(reference)].reference);
  EXPECT_EQ(s.corrections, 1) << "only the newcomer is compared with the reference";
  EXPECT_EQ(s.paths_searched, 1);
  for (size_t j = 0; j + 1 < jobs.size(); ++j) {
    EXPECT_TRUE(SameFlows(before->jobs[j], after->jobs[j])) << jobs[j].id;
    EXPECT_EQ(before->jobs[j].k, after->jobs[j].k) << jobs[j].id;
  }
  ExpectValid(clos.topo, jobs, *after);
  // A restart seeded with this plan keeps the same reference and returns the same plan.
  Planner restarted(clos.topo, Stable(), &clock);
  restarted.Seed(SeedsOf(*after));
  const Result<Plan> again = restarted.Run(jobs);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(PlanDiff(*again, *after), "");
  // A re-optimisation chooses again: the full plan.
  stable.ResetIncrementalState();
  const Result<Plan> reoptimised = stable.Run(jobs);
  ASSERT_TRUE(reoptimised.ok());
  EXPECT_EQ(PlanDiff(*reoptimised, *full), "");
}

// A stable run commits only the loads of the kept jobs that cross a link the searched jobs read
// (IncrementalPlanner::KeptLoadsRead). A seeded first plan commits every kept job's load; seeded
// with the plan in force, it must search the same events' jobs over the very same loads: the
// same paths and ports, bit for bit, for arrivals and profile changes on every fabric.
TEST(StablePlannerTest, SearchedJobsSeeTheLoadsOfEveryKeptJob) {
  const std::vector<Fabric> fabrics = Fabrics();
  int compared = 0;
  for (const Fabric& fabric : fabrics) {
    SCOPED_TRACE(fabric.name);
    FakeClock clock;
    Planner stable(fabric.topo, Stable(), &clock);
    JobGenerator gen(fabric.topo, 77);
    std::vector<JobSpec> jobs;
    for (int i = 0; i < 24; ++i) jobs.push_back(gen.NewJob());
    Result<Plan> in_force = stable.Run(jobs);
    ASSERT_TRUE(in_force.ok());
    for (int e = 0; e < 16; ++e) {
      std::vector<JobSpec> next = jobs;
      size_t touched = next.size();
      if (e % 2 == 0) {
        next.push_back(gen.NewJob());
      } else {
        touched = static_cast<size_t>(e) % next.size();
        gen.Change(next[touched]);
      }
      const Result<Plan> got = stable.Run(next);
      ASSERT_TRUE(got.ok());
      if (stable.last_replan().full_replan.empty()) {
        Planner seeded(fabric.topo, Stable(), &clock);
        std::vector<PlanSeed> seeds = SeedsOf(*in_force);
        if (touched < jobs.size())
          seeds.erase(seeds.begin() + static_cast<std::ptrdiff_t>(touched));
        seeded.Seed(std::move(seeds));
        const Result<Plan> want = seeded.Run(next);
        ASSERT_TRUE(want.ok());
        const size_t j = std::min(touched, next.size() - 1);
        EXPECT_TRUE(SameFlows(got->jobs[j], want->jobs[j])) << "event " << e << ": " << next[j].id;
        ++compared;
      }
      jobs = std::move(next);
      in_force = got;
    }
  }
  EXPECT_GT(compared, 10);
}

// The full plan's greedy path search lets a job ignore the jobs ranked below it: they search
// after it and route around it. In a stable run a kept job does not search again, so a newcomer
// ranked above it must see its load: with a free uplink available, the newcomer does not share
// the kept job's links. (Without that rule it took the first path whose links looked idle, the
// kept job's, and both shared it until a re-optimisation.)
TEST(StablePlannerTest, ANewcomerAvoidsTheLinksOfKeptJobsRankedBelowIt) {
  const testing::Clos2Small c = testing::MakeClos2Small();
  FakeClock clock;
  Planner stable(c.topo, Stable(), &clock);
  auto ring = [&](const std::string& id, int a, int b, double compute_s, double mbytes) {
    JobSpec j;
    j.id = id;
    j.hosts = {c.host[a], c.host[b]};
    j.gpus_per_host = 8;
    j.compute_time = Duration::Seconds(compute_s);
    j.pattern = TrafficPattern::kRingAllReduce;
    j.pattern_bytes = Bytes::FromDouble(mbytes * 1e6);
    return j;
  };
  // low: one NIC per host, little compute per byte; high: two NICs per host, far more.
  std::vector<JobSpec> jobs = {ring("low", 1, 3, 0.05, 1000)};
  const Result<Plan> before = stable.Run(jobs);
  ASSERT_TRUE(before.ok());
  jobs.push_back(ring("high", 0, 2, 1.0, 100));
  const Result<Plan> after = stable.Run(jobs);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(stable.last_replan().full_replan, "");
  ASSERT_EQ(stable.last_replan().paths_searched, 1);
  const JobPlan& low = after->jobs[0];
  const JobPlan& high = after->jobs[1];
  ASSERT_GT(high.intensity, low.intensity) << "high searches first in a full plan";
  EXPECT_TRUE(SameFlows(before->jobs[0], low));
  std::vector<LinkId> low_links;
  for (const FlowPlan& f : low.flows)
    low_links.insert(low_links.end(), f.path.begin(), f.path.end());
  for (const FlowPlan& f : high.flows) {
    for (LinkId l : f.path) {
      EXPECT_EQ(std::count(low_links.begin(), low_links.end(), l), 0)
          << "high shares " << c.topo.LinkName(l) << " with the kept job";
    }
  }
  ExpectValid(c.topo, jobs, *after);
}

// A link goes down (a new Planner on the new topology, as cruxd builds one per topology
// version): jobs whose paths avoid the link keep them; the others get new ones; the plan is
// valid on the new topology.
TEST(StablePlannerTest, ASeedAfterALinkFailureMovesOnlyTheJobsThatCrossedIt) {
  const std::vector<Fabric> fabrics = Fabrics();
  const Fabric& fabric = fabrics[1];  // clos2-8x4: several paths per pair.
  FakeClock clock;
  Planner before(fabric.topo, Stable(), &clock);
  JobGenerator gen(fabric.topo, 3);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 24; ++i) jobs.push_back(gen.NewJob());
  const Result<Plan> in_force = before.Run(jobs);
  ASSERT_TRUE(in_force.ok());
  // The most used ToR -> Agg link of the plan goes down.
  std::map<uint32_t, int> use;
  for (const JobPlan& jp : in_force->jobs) {
    for (const FlowPlan& f : jp.flows) {
      for (LinkId l : f.path) {
        const Link& link = fabric.topo.link(l);
        if (IsNetworkSwitch(fabric.topo.node(link.src).kind) &&
            IsNetworkSwitch(fabric.topo.node(link.dst).kind)) {
          ++use[l.value()];
        }
      }
    }
  }
  ASSERT_FALSE(use.empty());
  LinkId down;
  int most = 0;
  for (const auto& [l, count] : use) {
    if (count > most) {
      most = count;
      down = LinkId(l);
    }
  }
  Topology degraded = fabric.topo;
  degraded.SetLinkUp(down, false);
  Planner after(degraded, Stable(), &clock);
  after.Seed(SeedsOf(*in_force));
  const Result<Plan> got = after.Run(jobs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectValid(degraded, jobs, *got);
  int crossed = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const JobPlan& old_plan = in_force->jobs[j];
    bool crosses = false;
    for (const FlowPlan& f : old_plan.flows) {
      crosses = crosses || std::find(f.path.begin(), f.path.end(), down) != f.path.end();
    }
    for (const FlowPlan& f : got->jobs[j].flows) {
      EXPECT_EQ(std::find(f.path.begin(), f.path.end(), down), f.path.end()) << jobs[j].id;
    }
    if (crosses) {
      ++crossed;
      continue;
    }
    // The same paths. Their source ports may change: the ECMP groups that contained the link
    // shrank, so the hash model maps ports to paths anew (as switches without resilient hashing
    // do).
    ASSERT_EQ(old_plan.flows.size(), got->jobs[j].flows.size());
    for (size_t f = 0; f < old_plan.flows.size(); ++f) {
      EXPECT_EQ(old_plan.flows[f].path, got->jobs[j].flows[f].path)
          << jobs[j].id << " did not cross the link";
    }
  }
  EXPECT_EQ(after.last_replan().seeded_paths, static_cast<int>(jobs.size()) - crossed);
  EXPECT_GT(crossed, 0);
}

// Seeds are for a first plan only: a planner with state, or one that is not stable, ignores them.
TEST(StablePlannerTest, SeedsAreIgnoredWithStateOrWithoutStableMode) {
  const std::vector<Fabric> fabrics = Fabrics();
  const Fabric& fabric = fabrics[0];
  FakeClock clock;
  JobGenerator gen(fabric.topo, 8);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(gen.NewJob());
  PlannerOptions exact;
  exact.incremental = true;
  Planner incremental(fabric.topo, exact, &clock);
  EXPECT_FALSE(incremental.WantsSeed());
  Planner stable(fabric.topo, Stable(), &clock);
  const Result<Plan> first = stable.Run(jobs);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(stable.WantsSeed());
  stable.ResetIncrementalState();
  EXPECT_TRUE(stable.WantsSeed());
}

// The crux policy plans incrementally unless told not to, with the schedules of a full re-plan.
TEST(IncrementalPlannerTest, CruxPolicyIsIncrementalByDefaultWithTheSameSchedules) {
  const Fabric fabric = std::move(Fabrics()[2]);
  JobGenerator gen(fabric.topo, 21);
  PolicyOptions inc;
  inc.resolve_ports = true;
  PolicyOptions full = inc;
  full.incremental = false;
  EXPECT_TRUE(inc.incremental);
  FakeClock clock;
  auto a = MakePolicy("crux", fabric.topo, inc, &clock);
  auto b = MakePolicy("crux", fabric.topo, full, &clock);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<JobSpec> jobs;
  for (int e = 0; e < 15; ++e) {
    if (e % 3 == 2 && !jobs.empty()) {
      jobs.erase(jobs.begin());
    } else {
      jobs.push_back(gen.NewJob());
    }
    const Result<Plan> x = (*a)->Schedule(jobs);
    const Result<Plan> y = (*b)->Schedule(jobs);
    ASSERT_TRUE(x.ok() && y.ok());
    ASSERT_EQ(PlanDiff(*x, *y), "") << "event " << e;
  }
}

}  // namespace
}  // namespace crux::core
