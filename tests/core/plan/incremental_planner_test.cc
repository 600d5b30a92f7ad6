// Incremental re-planning (PlannerOptions::incremental, docs/algorithms.md §8).
//
// The central property: after any sequence of arrivals, departures and spec changes, the plan
// of an incremental Planner equals the plan a fresh, non-incremental Planner computes for the
// same job list: the same reference, k_j, P_j, ranks, levels, flows, paths, path indices, UDP
// source ports, DAG edges, cut weight and total edge weight (compared exactly, not within a
// tolerance). The randomised test checks it after every event on several fabrics and option
// sets, and also checks that the incremental planner really reused work (fewer paths searched
// and components compressed than a full re-plan). The focused tests pin the subtle cases: a
// departure that moves a job of ANOTHER contention component (path selection reads links a job
// does not use), components merging and splitting, a new reference job, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/random.h"
#include "crux/core/plan/compression.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/builders.h"
#include "crux/testing/random_jobs.h"
#include "crux/testing/test_topologies.h"

namespace crux::core {
namespace {

using testing::Fabric;
using testing::Fabrics;
using testing::JobGenerator;
using testing::MakeClos2Small;
using testing::Must;
using testing::PlanDiff;

struct Totals {
  int runs = 0;
  int jobs = 0;
  int searched = 0;
  int components = 0;
  int compressed = 0;
  int reference_changes = 0;
  int order_fallbacks = 0;
  int moved = 0;
};

// Applies `events` random events to a random cluster on `fabric`, planning incrementally after
// each, and compares every plan with a fresh full re-plan.
void RunRandomSequence(const Fabric& fabric, PlannerOptions options, uint64_t seed, int events,
                       Totals& totals) {
  SCOPED_TRACE(fabric.name + " seed " + std::to_string(seed));
  FakeClock clock;
  PlannerOptions inc_options = options;
  inc_options.incremental = true;
  Planner incremental(fabric.topo, inc_options, &clock);
  JobGenerator gen(fabric.topo, seed);
  Rng& rng = gen.rng();
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(gen.NewJob());
  for (int e = 0; e <= events; ++e) {
    std::string what = "initial";
    if (e > 0) {
      const uint64_t u = rng.Uniform(100);
      if (u < 35 || jobs.size() < 3) {  // Arrival, at a random position.
        what = "arrival";
        const size_t at = rng.Uniform(jobs.size() + 1);
        jobs.insert(jobs.begin() + static_cast<std::ptrdiff_t>(at), gen.NewJob());
      } else if (u < 65) {
        what = "departure";
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(jobs.size())));
      } else if (u < 90) {
        what = "profile change";
        gen.Change(jobs[rng.Uniform(jobs.size())]);
      } else if (u < 94) {
        what = "arrival + departure + change";
        jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(jobs.size())));
        gen.Change(jobs[rng.Uniform(jobs.size())]);
        jobs.push_back(gen.NewJob());
      } else if (u < 97) {
        what = "no change";
      } else {
        what = "reordered input";
        const size_t a = rng.Uniform(jobs.size());
        const size_t b = rng.Uniform(jobs.size());
        std::swap(jobs[a], jobs[b]);
      }
    }
    SCOPED_TRACE("event " + std::to_string(e) + ": " + what + ", " + std::to_string(jobs.size()) +
                 " jobs");
    Planner fresh(fabric.topo, options, &clock);
    const Result<Plan> want = fresh.Run(jobs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Result<Plan> got = incremental.Run(jobs);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(PlanDiff(*got, *want), "");
    const ReplanStats& s = incremental.last_replan();
    EXPECT_EQ(s.jobs, static_cast<int>(jobs.size()));
    EXPECT_LE(s.paths_searched, s.jobs);
    EXPECT_LE(s.components_compressed, s.components);
    if (e > 0) {
      totals.runs += 1;
      totals.jobs += s.jobs;
      totals.searched += s.paths_searched;
      totals.components += s.components;
      totals.compressed += s.components_compressed;
      totals.reference_changes += s.reference_changed ? 1 : 0;
      totals.order_fallbacks += s.full_replan == "input order of kept jobs changed" ? 1 : 0;
      totals.moved += s.paths_changed;
    }
  }
}

struct OptionCase {
  std::string name;
  PlannerOptions options;
};

std::vector<OptionCase> OptionCases() {
  std::vector<OptionCase> out;
  out.push_back({"defaults", PlannerOptions{}});
  {
    PlannerOptions o;
    o.levels = 3;
    o.reserved_high_levels = 1;
    o.path_order = PathOrder::kPriority;
    o.seed = 99;
    out.push_back({"priority-order", o});
  }
  {
    PlannerOptions o;
    o.levels = 4;
    o.max_exact_component = 3;  // The coarse compression of large components.
    o.dag_edges_per_job = 2;    // A bounded Plan::dag.
    o.topo_orders = 3;
    out.push_back({"coarse-bounded-dag", o});
  }
  return out;
}

TEST(IncrementalPlannerTest, RandomEventSequencesGiveTheFullReplanExactly) {
  const std::vector<Fabric> fabrics = Fabrics();
  Totals totals;
  for (const OptionCase& oc : OptionCases()) {
    SCOPED_TRACE(oc.name);
    for (const Fabric& fabric : fabrics) {
      for (uint64_t seed = 1; seed <= 8; ++seed) {
        RunRandomSequence(fabric, oc.options, seed * 1000 + fabric.topo.num_links(), 60, totals);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  // The sequences exercised every path, and the incremental planner reused work: fewer jobs
  // searched than planned, fewer components compressed than present.
  EXPECT_GT(totals.reference_changes, 0);
  EXPECT_GT(totals.order_fallbacks, 0);
  EXPECT_GT(totals.moved, 0);
  EXPECT_LT(totals.searched, totals.jobs / 2);
  EXPECT_LT(totals.compressed, totals.components);
  std::printf(
      "incremental: %d runs, %d of %d jobs searched, %d of %d components compressed, %d "
      "reference changes, %d order fallbacks, %d jobs moved\n",
      totals.runs, totals.searched, totals.jobs, totals.compressed, totals.components,
      totals.reference_changes, totals.order_fallbacks, totals.moved);
}

// The bug the randomised test first found: CompressPriorities seeds each component's random
// topological orders from its position among the DAG's components, so compressing only some
// components as a sub-DAG gave them other orders, hence (sometimes) other levels, than the
// whole DAG's compression in a full re-plan. With CompressionOptions::component_index (their
// positions in the whole DAG) a sub-DAG of whole components gets exactly the whole DAG's levels.
TEST(IncrementalPlannerTest, SubDagOfWholeComponentsGetsTheWholeDagsLevels) {
  Rng rng(17);
  int differ_without_index = 0;
  for (int round = 0; round < 40; ++round) {
    // 6 components of 5-8 nodes, sparse random edges from lower to higher node id (a DAG),
    // the components' nodes interleaved so that sub-DAG node ids differ from the whole DAG's.
    const int comps = 6;
    std::vector<std::vector<int>> members(comps);
    std::vector<int> comp_of_node;
    for (int c = 0; c < comps; ++c) {
      const int size = 5 + static_cast<int>(rng.Uniform(4));
      for (int i = 0; i < size; ++i) comp_of_node.push_back(c);
    }
    for (size_t i = comp_of_node.size(); i > 1; --i) {
      std::swap(comp_of_node[i - 1], comp_of_node[rng.Uniform(i)]);
    }
    ContentionDag dag;
    dag.num_nodes = static_cast<int>(comp_of_node.size());
    for (int v = 0; v < dag.num_nodes; ++v) {
      members[static_cast<size_t>(comp_of_node[static_cast<size_t>(v)])].push_back(v);
    }
    for (const std::vector<int>& m : members) {
      for (size_t i = 1; i < m.size(); ++i) {  // A chain keeps the component connected ...
        const size_t from = rng.Uniform(i);
        dag.edges.push_back(DagEdge{m[from], m[i], 1.0 + static_cast<double>(rng.Uniform(4))});
        for (size_t k = 0; k < i; ++k) {  // ... plus a few more edges.
          if (k != from && rng.Uniform(4) == 0) {
            dag.edges.push_back(DagEdge{m[k], m[i], 1.0 + static_cast<double>(rng.Uniform(4))});
          }
        }
      }
    }
    std::sort(dag.edges.begin(), dag.edges.end(), [](const DagEdge& a, const DagEdge& b) {
      return a.from != b.from ? a.from < b.from : a.to < b.to;
    });
    CompressionOptions o;
    o.levels = 2 + static_cast<int>(rng.Uniform(2));
    o.topo_orders = 2;
    o.seed = 1 + rng.Uniform(1000);
    const Result<Compression> whole = CompressPriorities(dag, o);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    // Whole-DAG positions: components numbered by their smallest node.
    std::vector<int> position(comps, -1);
    int next = 0;
    for (int v = 0; v < dag.num_nodes; ++v) {
      int& p = position[static_cast<size_t>(comp_of_node[static_cast<size_t>(v)])];
      if (p < 0) p = next++;
    }
    // Every non-empty subset of the components, as a sub-DAG.
    for (uint32_t subset = 1; subset < (1u << comps); ++subset) {
      std::vector<int> local(static_cast<size_t>(dag.num_nodes), -1);
      ContentionDag sub;
      CompressionOptions so = o;
      for (int v = 0; v < dag.num_nodes; ++v) {
        const int c = comp_of_node[static_cast<size_t>(v)];
        if ((subset >> c & 1u) == 0) continue;
        local[static_cast<size_t>(v)] = sub.num_nodes++;
        so.component_index.push_back(position[static_cast<size_t>(c)]);
      }
      for (const DagEdge& e : dag.edges) {
        const int from = local[static_cast<size_t>(e.from)];
        if (from >= 0)
          sub.edges.push_back(DagEdge{from, local[static_cast<size_t>(e.to)], e.weight});
      }
      const Result<Compression> part = CompressPriorities(sub, so);
      ASSERT_TRUE(part.ok()) << part.status().ToString();
      so.component_index.clear();
      const Result<Compression> unindexed = CompressPriorities(sub, so);
      ASSERT_TRUE(unindexed.ok()) << unindexed.status().ToString();
      bool same_unindexed = true;
      for (int v = 0; v < dag.num_nodes; ++v) {
        const int l = local[static_cast<size_t>(v)];
        if (l < 0) continue;
        ASSERT_EQ(part->level[static_cast<size_t>(l)], whole->level[static_cast<size_t>(v)])
            << "round " << round << " subset " << subset << " node " << v;
        same_unindexed = same_unindexed && unindexed->level[static_cast<size_t>(l)] ==
                                               whole->level[static_cast<size_t>(v)];
      }
      differ_without_index += same_unindexed ? 0 : 1;
    }
  }
  // The positions matter: without them some sub-DAGs get other levels (the original defect).
  EXPECT_GT(differ_without_index, 0);
}

TEST(IncrementalPlannerTest, ComponentIndexMustBeOnePerNodeAndEqualWithinAComponent) {
  ContentionDag dag;
  dag.num_nodes = 3;
  dag.edges = {DagEdge{0, 1, 1.0}, DagEdge{1, 2, 1.0}};
  CompressionOptions o;
  o.component_index = {4, 4};
  const Result<Compression> short_list = CompressPriorities(dag, o);
  ASSERT_FALSE(short_list.ok());
  EXPECT_NE(short_list.status().message().find("component_index: 2 indices for 3 nodes"),
            std::string::npos);
  o.component_index = {4, 4, 5};
  const Result<Compression> mixed = CompressPriorities(dag, o);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("must be equal"), std::string::npos);
  o.component_index = {4, 4, 4};
  EXPECT_TRUE(CompressPriorities(dag, o).ok());
}

// ---- Focused cases ----

JobSpec Flow(const std::string& id, NodeId src_host, NodeId src, NodeId dst_host, NodeId dst,
             int64_t mib, int64_t compute_ms, double tflops) {
  JobSpec spec;
  spec.id = id;
  spec.hosts = {src_host, dst_host};
  spec.gpus_per_host = 1;
  spec.compute_time = Duration::Millis(compute_ms);
  spec.flops_per_iteration = Flops::Tera(tflops);
  spec.pattern = TrafficPattern::kExplicit;
  spec.flows = {FlowDemand{src, dst, Bytes::MiB(mib)}};
  return spec;
}

PlannerOptions Incremental() {
  PlannerOptions o;
  o.incremental = true;
  return o;
}

TEST(IncrementalPlannerTest, DepartureMovesAJobOfAnotherComponent) {
  // "x" (most intensive) takes agg0 between tor0 and tor1; "y" (tor0 -> tor1 too, from other
  // hosts) avoids it and takes agg1: they share no link, so they are different contention
  // components. When x leaves, a full re-plan puts y on agg0 (idle, lowest index): the
  // incremental planner must move y too although y's component did not change. Path selection
  // reads the links a job could use, not only those it uses.
  const testing::Clos2Small c = MakeClos2Small();
  const JobSpec x = Flow("x", c.host[0], c.nic[0][0], c.host[2], c.nic[2][0], 100, 1000, 1000);
  const JobSpec y = Flow("y", c.host[1], c.nic[1][0], c.host[3], c.nic[3][0], 100, 1000, 10);
  FakeClock clock;
  Planner planner(c.topo, Incremental(), &clock);
  const Result<Plan> both = planner.Run({x, y});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->jobs[0].flows[0].path_index, 0u);
  EXPECT_EQ(both->jobs[1].flows[0].path_index, 1u);
  EXPECT_TRUE(both->dag.edges.empty());  // No shared link: two components of one job.
  const Result<Plan> alone = planner.Run({y});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->jobs[0].flows[0].path_index, 0u);
  EXPECT_EQ(planner.last_replan().removed, 1);
  EXPECT_EQ(planner.last_replan().paths_changed, 1);
  Planner fresh(c.topo, PlannerOptions{}, &clock);
  EXPECT_EQ(PlanDiff(*alone, *fresh.Run({y})), "");
}

// An irregular fabric (100 Gbps everywhere, one NIC per host) where a flow's two candidate
// paths touch different sets of other jobs' candidates:
//   A -> D via m1 or m2;  A -> E via m1 only;  B -> D via m2 only;  C -> D via m1 only;
//   Z -> D via m1 or m3.  Hosts: a1, a2 under A; b under B; c under C; z under Z;
//   d1, d2, d3 under D; e under E.
struct Irregular {
  Topology topo;
  NodeId host[10];
  NodeId nic[10];
  enum { kA1, kA2, kB, kC, kZ, kD1, kD2, kD3, kE };
};

Irregular MakeIrregular() {
  using testing::AddHost;
  using testing::AddNic;
  using testing::AddSwitch;
  using testing::Connect;
  Irregular g;
  Topology& t = g.topo;
  const NodeId a = AddSwitch(t, "A", NodeKind::kTor);
  const NodeId b = AddSwitch(t, "B", NodeKind::kTor);
  const NodeId c = AddSwitch(t, "C", NodeKind::kTor);
  const NodeId z = AddSwitch(t, "Z", NodeKind::kTor);
  const NodeId d = AddSwitch(t, "D", NodeKind::kTor);
  const NodeId e = AddSwitch(t, "E", NodeKind::kTor);
  const NodeId m1 = AddSwitch(t, "m1", NodeKind::kAgg);
  const NodeId m2 = AddSwitch(t, "m2", NodeKind::kAgg);
  const NodeId m3 = AddSwitch(t, "m3", NodeKind::kAgg);
  // Path indices follow LinkId order: the m1 paths come first.
  Connect(t, a, m1, 100);
  Connect(t, a, m2, 100);
  Connect(t, m1, d, 100);
  Connect(t, m2, d, 100);
  Connect(t, m1, e, 100);
  Connect(t, b, m2, 100);
  Connect(t, c, m1, 100);
  Connect(t, z, m1, 100);
  Connect(t, z, m3, 100);
  Connect(t, m3, d, 100);
  const char* names[9] = {"a1", "a2", "b", "c", "z", "d1", "d2", "d3", "e"};
  const NodeId tor[9] = {a, a, b, c, z, d, d, d, e};
  for (int h = 0; h < 9; ++h) {
    g.host[h] = AddHost(t, names[h]);
    g.nic[h] = AddNic(t, g.host[h], 0);
    Connect(t, g.nic[h], tor[h], 100);
  }
  return g;
}

JobSpec Between(const Irregular& g, const std::string& id, int from, int to, int64_t mib,
                double tflops, double overlap_start) {
  JobSpec spec = Flow(id, g.host[from], g.nic[from], g.host[to], g.nic[to], mib, 100, tflops);
  spec.overlap_start = overlap_start;
  return spec;
}

// "e": the most intensive job (its tiny communication hides behind compute, so it does not
// become the reference); it loads A -> m1, which pushes "a" from m1 to m2.
JobSpec Pusher(const Irregular& g) {
  return Between(g, "e", Irregular::kA2, Irregular::kE, 1, 1e6, 0);
}

TEST(IncrementalPlannerTest, TheLinksAMovedFlowLeavesAreReexaminedForLaterJobs) {
  // z (least intensive) can use m1 -> D or m3 -> D; with "a" on m1 -> D it takes m3. When e
  // pushes a to m2, m1 -> D is idle again and a full re-plan puts z back on m1 (lower index).
  // Nothing z reads is on e's links or on a's new path: only a's OLD path tells that z must be
  // searched again.
  const Irregular g = MakeIrregular();
  std::vector<JobSpec> jobs = {Between(g, "a", Irregular::kA1, Irregular::kD1, 100, 1000, 1),
                               Between(g, "z", Irregular::kZ, Irregular::kD3, 100, 10, 1)};
  FakeClock clock;
  Planner planner(g.topo, Incremental(), &clock);
  const Result<Plan> before = planner.Run(jobs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(before->jobs[0].flows[0].path_index, 0u);  // a on m1.
  ASSERT_EQ(before->jobs[1].flows[0].path_index, 1u);  // z on m3.
  jobs.push_back(Pusher(g));
  const Result<Plan> after = planner.Run(jobs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->jobs[0].flows[0].path_index, 1u);  // a on m2.
  EXPECT_EQ(after->jobs[1].flows[0].path_index, 0u);  // z back on m1.
  EXPECT_EQ(planner.last_replan().paths_changed, 2);
  Planner fresh(g.topo, PlannerOptions{}, &clock);
  EXPECT_EQ(PlanDiff(*after, *fresh.Run(jobs)), "");
}

TEST(IncrementalPlannerTest, AComponentWithTheSameJobsButAMovedOneIsRecompressed) {
  // {a, b, c} is one component before and after e arrives, in the same rank order, but a moves
  // from m1 (shared with c) to m2 (shared with b): the DAG a -> c -> b becomes a -> b <- c, and
  // with two levels the best split changes. Reusing the component's levels would be wrong.
  const Irregular g = MakeIrregular();
  PlannerOptions o = Incremental();
  o.levels = 2;
  std::vector<JobSpec> jobs = {Between(g, "a", Irregular::kA1, Irregular::kD1, 100, 1000, 1),
                               Between(g, "c", Irregular::kC, Irregular::kD2, 100, 100, 1),
                               Between(g, "b", Irregular::kB, Irregular::kD2, 100, 10, 1)};
  FakeClock clock;
  Planner planner(g.topo, o, &clock);
  const Result<Plan> before = planner.Run(jobs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(planner.last_replan().components, 1);
  jobs.push_back(Pusher(g));
  const Result<Plan> after = planner.Run(jobs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_FALSE(planner.last_replan().reference_changed);
  ASSERT_EQ(after->jobs[0].flows[0].path_index, 1u);  // a moved to m2.
  EXPECT_EQ(planner.last_replan().components, 1);     // e shares nothing.
  EXPECT_EQ(planner.last_replan().components_compressed, 1);
  for (size_t i = 0; i < 3; ++i) {  // Same relative rank order (e sits somewhere among them).
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(after->jobs[i].rank < after->jobs[k].rank,
                before->jobs[i].rank < before->jobs[k].rank);
    }
  }
  EXPECT_NE(after->jobs[1].level, before->jobs[1].level);  // c's level changes.
  PlannerOptions full = o;
  full.incremental = false;
  Planner fresh(g.topo, full, &clock);
  EXPECT_EQ(PlanDiff(*after, *fresh.Run(jobs)), "");
}

TEST(IncrementalPlannerTest, UnchangedJobsAreNotRecomputed) {
  const Fabric fabric = std::move(Fabrics()[1]);
  JobGenerator gen(fabric.topo, 5);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 12; ++i) jobs.push_back(gen.NewJob());
  FakeClock clock;
  PlannerOptions o = Incremental();
  Planner planner(fabric.topo, o, &clock);
  const Result<Plan> first = planner.Run(jobs);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(planner.last_replan().full_replan, "first plan");
  EXPECT_EQ(planner.last_replan().profiled, 12);
  const Result<Plan> again = planner.Run(jobs);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  const ReplanStats& s = planner.last_replan();
  EXPECT_EQ(s.full_replan, "");
  EXPECT_EQ(s.added + s.removed + s.changed, 0);
  EXPECT_EQ(s.profiled, 0);
  EXPECT_EQ(s.corrections, 0);
  EXPECT_FALSE(s.reference_changed);
  EXPECT_EQ(s.paths_searched, 0);
  EXPECT_EQ(s.components_compressed, 0);
  EXPECT_EQ(PlanDiff(*again, *first), "");
  // A fixed_rank change is not a change for Crux (only the `fixed` policy reads it).
  jobs[3].fixed_rank = 7;
  ASSERT_TRUE(planner.Run(jobs).ok());
  EXPECT_EQ(planner.last_replan().changed, 0);
}

TEST(IncrementalPlannerTest, NewJobJoiningTwoComponentsRecompressesTheMerge) {
  // a: host0 -> host2 and b: host1 -> host3 are routed apart (two components of one job each
  // would have no edge: here each component has two jobs so that they have levels). Then "m"
  // shares a link with both: one component.
  const testing::Clos2Small c = MakeClos2Small();
  std::vector<JobSpec> jobs = {
      Flow("a1", c.host[0], c.nic[0][0], c.host[2], c.nic[2][0], 100, 1000, 900),
      Flow("a2", c.host[0], c.nic[0][0], c.host[2], c.nic[2][1], 100, 1000, 800),
      Flow("b1", c.host[1], c.nic[1][0], c.host[3], c.nic[3][0], 100, 1000, 700),
      Flow("b2", c.host[1], c.nic[1][0], c.host[3], c.nic[3][0], 50, 1000, 600),
  };
  FakeClock clock;
  Planner planner(c.topo, Incremental(), &clock);
  ASSERT_TRUE(planner.Run(jobs).ok());
  const int before = planner.last_replan().components;
  ASSERT_EQ(before, 2);
  // m: host0 nic0 -> host3 nic0 shares host0's access link (a's) and host3's (b's).
  jobs.push_back(Flow("m", c.host[0], c.nic[0][0], c.host[3], c.nic[3][0], 100, 1000, 5));
  const Result<Plan> merged = planner.Run(jobs);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(planner.last_replan().components, 1);
  EXPECT_EQ(planner.last_replan().components_compressed, 1);
  EXPECT_EQ(planner.last_replan().jobs_compressed, 5);
  Planner fresh(c.topo, PlannerOptions{}, &clock);
  EXPECT_EQ(PlanDiff(*merged, *fresh.Run(jobs)), "");
  // And apart again: both halves are recompressed (their old component is gone).
  jobs.pop_back();
  const Result<Plan> split = planner.Run(jobs);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ(planner.last_replan().components, 2);
  EXPECT_EQ(planner.last_replan().components_compressed, 2);
  Planner fresh2(c.topo, PlannerOptions{}, &clock);
  EXPECT_EQ(PlanDiff(*split, *fresh2.Run(jobs)), "");
}

TEST(IncrementalPlannerTest, ANewReferenceJobRecomputesEveryCorrection) {
  const Fabric fabric = std::move(Fabrics()[0]);
  JobGenerator gen(fabric.topo, 11);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 8; ++i) jobs.push_back(gen.NewJob());
  FakeClock clock;
  Planner planner(fabric.topo, Incremental(), &clock);
  const Result<Plan> first = planner.Run(jobs);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_GE(first->reference_job, 0);
  // A newcomer with far more traffic than anyone, communication exposed: the new reference.
  JobSpec big = gen.NewJob();
  big.pattern = TrafficPattern::kRingAllReduce;
  big.flows.clear();
  big.hosts = {fabric.topo.hosts()[0], fabric.topo.hosts()[5], fabric.topo.hosts()[10]};
  big.pattern_bytes = Bytes::FromDouble(5e10);
  big.overlap_start = 1;
  jobs.push_back(big);
  const Result<Plan> second = planner.Run(jobs);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->reference_job, 8);
  const ReplanStats& s = planner.last_replan();
  EXPECT_TRUE(s.reference_changed);
  int with_traffic = 0;
  for (const JobPlan& jp : second->jobs) with_traffic += jp.intensity > 0 ? 1 : 0;
  EXPECT_EQ(s.corrections, with_traffic - 1);  // Everyone but the reference.
  Planner fresh(fabric.topo, PlannerOptions{}, &clock);
  EXPECT_EQ(PlanDiff(*second, *fresh.Run(jobs)), "");
}

TEST(IncrementalPlannerTest, AFailedRunKeepsThePreviousState) {
  const Fabric fabric = std::move(Fabrics()[2]);
  JobGenerator gen(fabric.topo, 3);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(gen.NewJob());
  FakeClock clock;
  Planner planner(fabric.topo, Incremental(), &clock);
  const Result<Plan> first = planner.Run(jobs);
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  std::vector<JobSpec> bad = jobs;
  bad.push_back(gen.NewJob());
  bad.back().compute_time = Duration::Zero();
  const Result<Plan> refused = planner.Run(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(bad.back().id), std::string::npos);
  std::vector<JobSpec> dup = jobs;
  dup.push_back(jobs[0]);
  EXPECT_EQ(planner.Run(dup).status().code(), StatusCode::kAlreadyExists);

  const Result<Plan> again = planner.Run(jobs);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(planner.last_replan().full_replan, "");
  EXPECT_EQ(planner.last_replan().profiled, 0);
  EXPECT_EQ(planner.last_replan().paths_searched, 0);
  EXPECT_EQ(PlanDiff(*again, *first), "");
}

TEST(IncrementalPlannerTest, ReorderedInputFallsBackToAFullReplanOfStagesThreeAndFour) {
  const Fabric fabric = std::move(Fabrics()[0]);
  JobGenerator gen(fabric.topo, 8);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(gen.NewJob());
  FakeClock clock;
  Planner planner(fabric.topo, Incremental(), &clock);
  ASSERT_TRUE(planner.Run(jobs).ok());
  std::reverse(jobs.begin(), jobs.end());
  const Result<Plan> reversed = planner.Run(jobs);
  ASSERT_TRUE(reversed.ok()) << reversed.status().ToString();
  const ReplanStats& s = planner.last_replan();
  EXPECT_EQ(s.full_replan, "input order of kept jobs changed");
  EXPECT_EQ(s.profiled, 0);  // Profiles do not depend on the order.
  EXPECT_EQ(s.paths_searched, 10);
  EXPECT_EQ(s.components_compressed, s.components);
  Planner fresh(fabric.topo, PlannerOptions{}, &clock);
  EXPECT_EQ(PlanDiff(*reversed, *fresh.Run(jobs)), "");
}

TEST(IncrementalPlannerTest, ResetDropsTheState) {
  const testing::Clos2Small c = MakeClos2Small();
  const std::vector<JobSpec> jobs = {
      Flow("a", c.host[0], c.nic[0][0], c.host[2], c.nic[2][0], 100, 1000, 900)};
  FakeClock clock;
  Planner planner(c.topo, Incremental(), &clock);
  ASSERT_TRUE(planner.Run(jobs).ok());
  planner.ResetIncrementalState();
  ASSERT_TRUE(planner.Run(jobs).ok());
  EXPECT_EQ(planner.last_replan().full_replan, "first plan");
  Planner full(c.topo, PlannerOptions{}, &clock);
  ASSERT_TRUE(full.Run(jobs).ok());
  EXPECT_EQ(full.last_replan().full_replan, "incremental off");
  EXPECT_EQ(full.last_replan().paths_searched, 1);
}

TEST(IncrementalPlannerTest, BoundedDagKeepsLevelsCutAndWholeDagCounts) {
  const Fabric fabric = std::move(Fabrics()[0]);
  JobGenerator gen(fabric.topo, 2);
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 30; ++i) jobs.push_back(gen.NewJob());
  FakeClock clock;
  Planner all(fabric.topo, PlannerOptions{}, &clock);
  PlannerOptions o;
  o.dag_edges_per_job = 3;
  Planner bounded(fabric.topo, o, &clock);
  const Result<Plan> a = all.Run(jobs);
  const Result<Plan> b = bounded.Run(jobs);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_GT(a->dag.edges.size(), b->dag.edges.size());
  EXPECT_EQ(a->cut_weight, b->cut_weight);
  EXPECT_EQ(a->total_edge_weight, b->total_edge_weight);
  for (size_t j = 0; j < jobs.size(); ++j) EXPECT_EQ(a->jobs[j].level, b->jobs[j].level);
  EXPECT_EQ(b->dag.edges.size() + static_cast<size_t>(b->dag.edges_omitted), a->dag.edges.size());
  std::vector<int32_t> out(jobs.size(), 0);
  std::vector<int32_t> in(jobs.size(), 0);
  for (const DagEdge& e : a->dag.edges) {
    ++out[static_cast<size_t>(e.from)];
    ++in[static_cast<size_t>(e.to)];
  }
  EXPECT_EQ(b->dag.out_degree, out);
  EXPECT_EQ(b->dag.in_degree, in);
  EXPECT_EQ(a->dag.edges_omitted, 0);
  EXPECT_TRUE(a->dag.out_degree.empty());
}

TEST(IncrementalPlannerTest, NegativeDagBoundOtherThanMinusOneIsRejected) {
  const testing::Clos2Small c = MakeClos2Small();
  PlannerOptions o;
  o.dag_edges_per_job = -2;
  Planner planner(c.topo, o);
  const Result<Plan> r = planner.Run({});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dag_edges_per_job"), std::string::npos);
}

}  // namespace
}  // namespace crux::core
