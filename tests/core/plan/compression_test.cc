#include "crux/core/plan/compression.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/random.h"
#include "crux/core/base/status.h"

namespace crux::core {
namespace {

using ::testing::Test;

std::vector<LinkId> Links(std::initializer_list<uint32_t> ids) {
  std::vector<LinkId> out;
  for (uint32_t id : ids) out.push_back(LinkId(id));
  return out;
}

ContentionDag MakeDag(int n, std::vector<DagEdge> edges) {
  ContentionDag dag;
  dag.num_nodes = n;
  dag.edges = std::move(edges);
  std::sort(dag.edges.begin(), dag.edges.end(), [](const DagEdge& a, const DagEdge& b) {
    return std::pair(a.from, a.to) < std::pair(b.from, b.to);
  });
  return dag;
}

double TotalWeight(const ContentionDag& dag) {
  double total = 0;
  for (const DagEdge& e : dag.edges) total += e.weight;
  return total;
}

CompressionOptions Options(int levels, int orders = 10, uint64_t seed = 1,
                           int max_exact_nodes = 1024) {
  CompressionOptions options;
  options.levels = levels;
  options.topo_orders = orders;
  options.seed = seed;
  options.max_exact_nodes = max_exact_nodes;
  return options;
}

// A random DAG consistent with a random total order: each pair gets an edge with probability p.
ContentionDag RandomDag(Rng& rng, int n, double p) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  rng.Shuffle(order);
  std::vector<DagEdge> edges;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (rng.UniformDouble() < p) {
        edges.push_back(DagEdge{order[static_cast<size_t>(a)], order[static_cast<size_t>(b)],
                                0.1 + 9.9 * rng.UniformDouble()});
      }
    }
  }
  return MakeDag(n, std::move(edges));
}

// Reference DAG construction straight from the definition.
ContentionDag NaiveDag(const std::vector<std::vector<LinkId>>& job_links,
                       const std::vector<int>& rank, const std::vector<Intensity>& intensity) {
  const int n = static_cast<int>(job_links.size());
  std::vector<DagEdge> edges;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b || rank[static_cast<size_t>(a)] > rank[static_cast<size_t>(b)]) continue;
      bool share = false;
      for (LinkId la : job_links[static_cast<size_t>(a)]) {
        for (LinkId lb : job_links[static_cast<size_t>(b)]) share = share || la == lb;
      }
      if (share) edges.push_back(DagEdge{a, b, intensity[static_cast<size_t>(a)]});
    }
  }
  return MakeDag(n, std::move(edges));
}

void ExpectSameDag(const ContentionDag& actual, const ContentionDag& expected) {
  ASSERT_EQ(actual.num_nodes, expected.num_nodes);
  ASSERT_EQ(actual.edges.size(), expected.edges.size());
  for (size_t e = 0; e < actual.edges.size(); ++e) {
    EXPECT_EQ(actual.edges[e].from, expected.edges[e].from) << "edge " << e;
    EXPECT_EQ(actual.edges[e].to, expected.edges[e].to) << "edge " << e;
    EXPECT_EQ(actual.edges[e].weight, expected.edges[e].weight) << "edge " << e;
  }
}

// --- BuildContentionDag ---------------------------------------------------------------------

TEST(CompressionDagTest, JobsSharingALinkGetOneEdgeFromHigherToLowerPriority) {
  // Job 0 has rank 1, job 1 rank 0: job 1 is higher priority, so the edge is 1 -> 0 with I_1.
  const ContentionDag dag =
      BuildContentionDag({Links({3, 5}), Links({5, 7})}, {1, 0}, {10.0, 20.0}, 8);
  EXPECT_EQ(dag.num_nodes, 2);
  ASSERT_EQ(dag.edges.size(), 1u);
  EXPECT_EQ(dag.edges[0].from, 1);
  EXPECT_EQ(dag.edges[0].to, 0);
  EXPECT_EQ(dag.edges[0].weight, 20.0);
}

TEST(CompressionDagTest, JobsOnDisjointLinksGetNoEdge) {
  const ContentionDag dag =
      BuildContentionDag({Links({0, 1}), Links({2, 3}), {}}, {0, 1, 2}, {1.0, 2.0, 3.0}, 4);
  EXPECT_EQ(dag.num_nodes, 3);
  EXPECT_TRUE(dag.edges.empty());
}

TEST(CompressionDagTest, SeveralSharedAndRepeatedLinksGiveASingleEdge) {
  const ContentionDag dag =
      BuildContentionDag({Links({1, 2, 2, 3, 1}), Links({3, 2, 1, 1})}, {0, 1}, {4.5, 1.0}, 4);
  ASSERT_EQ(dag.edges.size(), 1u);
  EXPECT_EQ(dag.edges[0].from, 0);
  EXPECT_EQ(dag.edges[0].to, 1);
  EXPECT_EQ(dag.edges[0].weight, 4.5);
}

TEST(CompressionDagTest, EdgesAreSortedAndWeightedByTheHigherPriorityJob) {
  // Priority order: job 2 > job 0 > job 3 > job 1. All jobs share link 0.
  const std::vector<int> rank = {1, 3, 0, 2};
  const std::vector<Intensity> intensity = {1.0, 2.0, 3.0, 4.0};
  const ContentionDag dag =
      BuildContentionDag({Links({0}), Links({0}), Links({0}), Links({0})}, rank, intensity, 1);
  const ContentionDag expected =
      MakeDag(4, {{0, 1, 1.0}, {0, 3, 1.0}, {2, 0, 3.0}, {2, 1, 3.0}, {2, 3, 3.0}, {3, 1, 4.0}});
  ExpectSameDag(dag, expected);
}

TEST(CompressionDagTest, MatchesTheDefinitionOnRandomJobs) {
  Rng rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng.Uniform(30));
    const uint32_t num_links = 1 + static_cast<uint32_t>(rng.Uniform(40));
    std::vector<std::vector<LinkId>> job_links(static_cast<size_t>(n));
    for (auto& links : job_links) {
      const int count = static_cast<int>(rng.Uniform(6));
      for (int k = 0; k < count; ++k) {
        links.push_back(LinkId(static_cast<uint32_t>(rng.Uniform(num_links))));
      }
    }
    std::vector<int> rank(static_cast<size_t>(n));
    std::iota(rank.begin(), rank.end(), 0);
    rng.Shuffle(rank);
    std::vector<Intensity> intensity(static_cast<size_t>(n));
    for (auto& value : intensity) value = rng.UniformDouble();
    SCOPED_TRACE(trial);
    ExpectSameDag(BuildContentionDag(job_links, rank, intensity, num_links),
                  NaiveDag(job_links, rank, intensity));
  }
}

TEST(CompressionDagTest, MatchesTheDefinitionOnDenseSharing) {
  // Few links, many jobs: most jobs contend with most others, so the per-job edge groups are
  // large (written by scanning the stamp array instead of sorting) next to small ones.
  Rng rng(11);
  for (int trial = 0; trial < 5; ++trial) {
    const int n = 150 + static_cast<int>(rng.Uniform(150));
    const uint32_t num_links = 3 + static_cast<uint32_t>(rng.Uniform(6));
    std::vector<std::vector<LinkId>> job_links(static_cast<size_t>(n));
    for (auto& links : job_links) {
      const int count = static_cast<int>(rng.Uniform(4));
      for (int k = 0; k < count; ++k) {
        links.push_back(LinkId(static_cast<uint32_t>(rng.Uniform(num_links))));
      }
    }
    std::vector<int> rank(static_cast<size_t>(n));
    std::iota(rank.begin(), rank.end(), 0);
    rng.Shuffle(rank);
    std::vector<Intensity> intensity(static_cast<size_t>(n));
    for (auto& value : intensity) value = rng.UniformDouble();
    SCOPED_TRACE(trial);
    const ContentionDag dag = BuildContentionDag(job_links, rank, intensity, num_links);
    EXPECT_GT(dag.edges.size(), static_cast<size_t>(n) * 10);
    ExpectSameDag(dag, NaiveDag(job_links, rank, intensity));
  }
}

// --- Paper examples -------------------------------------------------------------------------

TEST(CompressionTest, Figure13PutsJobsOneAndThreeHighAndTwoAndFourLow) {
  // Jobs 1..4 (indices 0..3) with priorities 1 > 2 > 3 > 4; jobs 1-2 share link 0 and jobs 3-4
  // share link 1; two levels.
  const std::vector<Intensity> intensity = {4.0, 3.0, 2.0, 1.0};
  const ContentionDag dag = BuildContentionDag({Links({0}), Links({0}), Links({1}), Links({1})},
                                               {0, 1, 2, 3}, intensity, 2);
  ASSERT_EQ(dag.edges.size(), 2u);

  const Result<Compression> result = CompressPriorities(dag, Options(2));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->level, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_DOUBLE_EQ(result->cut_weight, 4.0 + 2.0);

  // Sincronia's {1} high, {2, 3, 4} low only separates jobs 1 and 2.
  const std::vector<int> sincronia = {0, 1, 1, 1};
  ASSERT_TRUE(IsValidCompression(dag, sincronia, 2));
  EXPECT_LT(CutWeight(dag, sincronia), result->cut_weight);

  const Result<Compression> optimum = BruteForceCompress(dag, 2);
  ASSERT_TRUE(optimum.ok());
  EXPECT_DOUBLE_EQ(result->cut_weight, optimum->cut_weight);
}

TEST(CompressionTest, Figure14LikeDagCutsEveryEdgeWithThreeLevels) {
  // Jobs 1..5 (indices 0..4): 1 -> 2, 1 -> 5, 2 -> 3, 2 -> 4, 5 -> 4. The only assignment that
  // cuts every edge is 1 high, {2, 5} medium, {3, 4} low.
  const ContentionDag dag =
      MakeDag(5, {{0, 1, 5.0}, {0, 4, 5.0}, {1, 2, 3.0}, {1, 3, 3.0}, {4, 3, 2.0}});
  const Result<Compression> result = CompressPriorities(dag, Options(3));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->level, (std::vector<int>{0, 1, 2, 2, 1}));
  EXPECT_DOUBLE_EQ(result->cut_weight, TotalWeight(dag));
}

TEST(CompressionTest, ChainKeepsTheHeaviestBoundaries) {
  // Chain 0 -> 1 -> 2 -> 3 -> 4 with weights 1, 5, 2, 4: three blocks cut the 5 and the 4.
  const ContentionDag dag = MakeDag(5, {{0, 1, 1.0}, {1, 2, 5.0}, {2, 3, 2.0}, {3, 4, 4.0}});
  const Result<Compression> result = CompressPriorities(dag, Options(3));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->level, (std::vector<int>{0, 0, 1, 1, 2}));
  EXPECT_DOUBLE_EQ(result->cut_weight, 9.0);
}

// --- Algorithm 1 properties ------------------------------------------------------------------

TEST(CompressionTest, MatchesBruteForceOnRandomSmallDags) {
  Rng rng(2024);
  constexpr int kCases = 400;
  double ratio_sum = 0;
  double ratio_min = std::numeric_limits<double>::infinity();
  int suboptimal = 0;
  for (int trial = 0; trial < kCases; ++trial) {
    const int n = 2 + static_cast<int>(rng.Uniform(7));       // 2..8
    const int levels = 1 + static_cast<int>(rng.Uniform(4));  // 1..4
    const double p = 0.2 + 0.6 * rng.UniformDouble();
    const ContentionDag dag = RandomDag(rng, n, p);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " K " << levels);

    const Result<Compression> approx = CompressPriorities(dag, Options(levels, 10, trial));
    ASSERT_TRUE(approx.ok()) << approx.status().ToString();
    ASSERT_TRUE(IsValidCompression(dag, approx->level, levels));
    EXPECT_DOUBLE_EQ(approx->cut_weight, CutWeight(dag, approx->level));

    const Result<Compression> exact = BruteForceCompress(dag, levels);
    ASSERT_TRUE(exact.ok()) << exact.status().ToString();
    ASSERT_TRUE(IsValidCompression(dag, exact->level, levels));
    EXPECT_LE(approx->cut_weight, exact->cut_weight + 1e-9);

    const double ratio = exact->cut_weight > 0 ? approx->cut_weight / exact->cut_weight : 1.0;
    if (ratio < 1.0 - 1e-12) ++suboptimal;
    ratio_sum += ratio;
    ratio_min = std::min(ratio_min, ratio);
  }
  const double ratio_mean = ratio_sum / kCases;
  std::printf("[ quality  ] %d cases: mean cut/optimum %.6f, min %.6f, %d below optimum\n", kCases,
              ratio_mean, ratio_min, suboptimal);
  Test::RecordProperty("ratio_mean", std::to_string(ratio_mean));
  Test::RecordProperty("ratio_min", std::to_string(ratio_min));
  EXPECT_GE(ratio_mean, 0.99);
}

TEST(CompressionTest, UniqueTopologicalOrderGivesTheExactOptimum) {
  // With the whole chain of the total order present there is one topological order, every
  // valid compression is a split of it (Theorem 3), so the exact DP must reach the optimum.
  Rng rng(31);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 2 + static_cast<int>(rng.Uniform(9));       // 2..10
    const int levels = 1 + static_cast<int>(rng.Uniform(5));  // 1..5
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    rng.Shuffle(order);
    std::vector<DagEdge> edges;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (b == a + 1 || rng.UniformDouble() < 0.4) {
          edges.push_back(DagEdge{order[static_cast<size_t>(a)], order[static_cast<size_t>(b)],
                                  0.1 + 9.9 * rng.UniformDouble()});
        }
      }
    }
    const ContentionDag dag = MakeDag(n, std::move(edges));

    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " K " << levels);
    const Result<Compression> approx = CompressPriorities(dag, Options(levels, 1, trial));
    const Result<Compression> exact = BruteForceCompress(dag, levels);
    ASSERT_TRUE(approx.ok()) << approx.status().ToString();
    ASSERT_TRUE(exact.ok()) << exact.status().ToString();
    EXPECT_NEAR(approx->cut_weight, exact->cut_weight, 1e-9);
  }
}

TEST(CompressionTest, FewerJobsThanLevelsCutsEveryEdge) {
  Rng rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 2 + static_cast<int>(rng.Uniform(7));
    const ContentionDag dag = RandomDag(rng, n, 0.5);
    const int levels = n + static_cast<int>(rng.Uniform(3));
    const Result<Compression> result = CompressPriorities(dag, Options(levels, 1, trial));
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    ASSERT_TRUE(IsValidCompression(dag, result->level, levels));
    EXPECT_DOUBLE_EQ(result->cut_weight, TotalWeight(dag));
  }
}

TEST(CompressionTest, IsolatedJobsGetTheHighestLevel) {
  // Nodes 0, 3 and 5 have no edge; the chain 4 -> 1 -> 2 fills three levels.
  const ContentionDag dag = MakeDag(6, {{4, 1, 1.0}, {1, 2, 1.0}});
  const Result<Compression> result = CompressPriorities(dag, Options(3));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->level, (std::vector<int>{0, 1, 2, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(result->cut_weight, 2.0);
}

TEST(CompressionTest, EmptyDagAndSingleLevelGiveLevelZero) {
  const Result<Compression> empty = CompressPriorities(MakeDag(0, {}), Options(8));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->level.empty());
  EXPECT_EQ(empty->cut_weight, 0.0);

  const ContentionDag dag = MakeDag(3, {{0, 1, 1.0}, {1, 2, 1.0}});
  const Result<Compression> one = CompressPriorities(dag, Options(1));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->level, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(one->cut_weight, 0.0);
}

TEST(CompressionTest, ComponentsAreSolvedIndependentlyAndTopAligned) {
  // Two chains of three plus a pair, two levels: each component uses levels 0 and 1.
  const ContentionDag dag =
      MakeDag(8, {{0, 1, 1.0}, {1, 2, 3.0}, {3, 4, 2.0}, {4, 5, 1.0}, {7, 6, 1.0}});
  const Result<Compression> result = CompressPriorities(dag, Options(2));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->level, (std::vector<int>{0, 0, 1, 0, 1, 1, 1, 0}));
  EXPECT_DOUBLE_EQ(result->cut_weight, 3.0 + 2.0 + 1.0);
}

TEST(CompressionTest, SameSeedGivesSameResult) {
  Rng rng(5);
  const ContentionDag dag = RandomDag(rng, 200, 0.05);
  const Result<Compression> a = CompressPriorities(dag, Options(8, 10, 99));
  const Result<Compression> b = CompressPriorities(dag, Options(8, 10, 99));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->level, b->level);
  EXPECT_EQ(a->cut_weight, b->cut_weight);
  EXPECT_TRUE(IsValidCompression(dag, a->level, 8));
  EXPECT_DOUBLE_EQ(a->cut_weight, CutWeight(dag, a->level));
  // Every level is used by a connected graph with more nodes than levels.
  EXPECT_EQ(std::set<int>(a->level.begin(), a->level.end()).size(), 8u);
}

TEST(CompressionTest, MoreOrdersNeverLowerTheCut) {
  // The first m orders of a run with 2m orders are the same, so the best can only improve.
  Rng rng(17);
  for (int trial = 0; trial < 20; ++trial) {
    const ContentionDag dag = RandomDag(rng, 40, 0.1);
    const Result<Compression> few = CompressPriorities(dag, Options(4, 3, trial));
    const Result<Compression> many = CompressPriorities(dag, Options(4, 6, trial));
    ASSERT_TRUE(few.ok());
    ASSERT_TRUE(many.ok());
    EXPECT_GE(many->cut_weight, few->cut_weight - 1e-9);
  }
}

// --- Bound for huge components (max_exact_nodes) ----------------------------------------------

TEST(CompressionBoundTest, ComponentsUpToTheBoundAreSolvedExactly) {
  Rng rng(23);
  const ContentionDag dag = RandomDag(rng, 120, 0.08);
  const Result<Compression> unbounded = CompressPriorities(dag, Options(8, 10, 3, 0));
  const Result<Compression> at_bound = CompressPriorities(dag, Options(8, 10, 3, 120));
  ASSERT_TRUE(unbounded.ok());
  ASSERT_TRUE(at_bound.ok());
  EXPECT_EQ(at_bound->level, unbounded->level);
  EXPECT_EQ(at_bound->cut_weight, unbounded->cut_weight);
}

TEST(CompressionBoundTest, CoarseSplitsAreValidNeverBeatTheExactOnesAndStayClose) {
  // Same seed -> the same random topological orders (small graphs get all m orders), and every
  // split at bucket boundaries is also a split of the exact DP, so the bounded cut can only be
  // lower; with 32 boundaries for 150-300 jobs it stays close.
  Rng rng(31);
  for (int trial = 0; trial < 8; ++trial) {
    const int n = 150 + static_cast<int>(rng.Uniform(150));
    const ContentionDag dag = RandomDag(rng, n, 0.05);
    const Result<Compression> exact = CompressPriorities(dag, Options(8, 5, trial, 0));
    const Result<Compression> coarse = CompressPriorities(dag, Options(8, 5, trial, 32));
    ASSERT_TRUE(exact.ok());
    ASSERT_TRUE(coarse.ok());
    SCOPED_TRACE(trial);
    EXPECT_TRUE(IsValidCompression(dag, coarse->level, 8));
    EXPECT_DOUBLE_EQ(coarse->cut_weight, CutWeight(dag, coarse->level));
    EXPECT_LE(coarse->cut_weight, exact->cut_weight + 1e-9);
    EXPECT_GE(coarse->cut_weight, 0.95 * exact->cut_weight);
    // Every level is used.
    EXPECT_EQ(std::set<int>(coarse->level.begin(), coarse->level.end()).size(), 8u);
  }
}

TEST(CompressionBoundTest, BoundBelowTheLevelCountStillUsesEveryLevel) {
  // g = max(max_exact_nodes, K): with a bound of 1 there are still K boundaries.
  const ContentionDag chain = MakeDag(10, {{0, 1, 1},
                                           {1, 2, 2},
                                           {2, 3, 3},
                                           {3, 4, 4},
                                           {4, 5, 5},
                                           {5, 6, 6},
                                           {6, 7, 7},
                                           {7, 8, 8},
                                           {8, 9, 9}});
  const Result<Compression> result = CompressPriorities(chain, Options(4, 1, 1, 1));
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(IsValidCompression(chain, result->level, 4));
  EXPECT_EQ(std::set<int>(result->level.begin(), result->level.end()).size(), 4u);
  EXPECT_GT(result->cut_weight, 0.0);
}

TEST(CompressionBoundTest, EdgeOrderOfTheInputDoesNotMatter) {
  // The coarse solver reads the DAG's edges in place when they are sorted by `from` and through
  // a (stable) permutation otherwise: listing the groups in another order, each group's edges
  // in the same order, gives the same answer.
  Rng rng(41);
  const ContentionDag sorted = RandomDag(rng, 200, 0.05);
  ContentionDag shuffled = sorted;
  std::stable_sort(shuffled.edges.begin(), shuffled.edges.end(),
                   [](const DagEdge& x, const DagEdge& y) { return x.from > y.from; });
  ASSERT_NE(shuffled.edges.front().from, sorted.edges.front().from);
  const Result<Compression> a = CompressPriorities(sorted, Options(6, 4, 9, 50));
  const Result<Compression> b = CompressPriorities(shuffled, Options(6, 4, 9, 50));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(IsValidCompression(sorted, a->level, 6));
  EXPECT_EQ(a->cut_weight, CutWeight(sorted, a->level));
  EXPECT_EQ(a->level, b->level);
}

TEST(CompressionBoundTest, OnlyComponentsAboveTheBoundAreCoarse) {
  // A 12-node component next to a 200-node one, bound 50: the small component is solved exactly
  // (same levels as without any bound), the large one validly.
  Rng rng(43);
  const ContentionDag big = RandomDag(rng, 200, 0.05);
  const ContentionDag small = RandomDag(rng, 12, 0.4);
  std::vector<DagEdge> edges = big.edges;
  for (DagEdge e : small.edges) edges.push_back(DagEdge{e.from + 200, e.to + 200, e.weight});
  const ContentionDag both = MakeDag(212, edges);
  const Result<Compression> bounded = CompressPriorities(both, Options(4, 5, 2, 50));
  const Result<Compression> exact = CompressPriorities(both, Options(4, 5, 2, 0));
  ASSERT_TRUE(bounded.ok());
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(IsValidCompression(both, bounded->level, 4));
  for (size_t v = 200; v < 212; ++v) EXPECT_EQ(bounded->level[v], exact->level[v]) << v;
  EXPECT_LE(bounded->cut_weight, exact->cut_weight + 1e-9);
}

TEST(CompressionBoundTest, NegativeBoundIsRejected) {
  const ContentionDag dag = MakeDag(2, {{0, 1, 1}});
  const Result<Compression> result = CompressPriorities(dag, Options(2, 1, 1, -1));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("max_exact_nodes"), std::string::npos);
}

TEST(CompressionTest, CycleIsRejected) {
  ContentionDag dag;
  dag.num_nodes = 3;
  dag.edges = {{0, 1, 1.0}, {1, 2, 1.0}, {2, 0, 1.0}};
  const Result<Compression> result = CompressPriorities(dag, Options(2));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
}

TEST(CompressionTest, InvalidOptionsAndEdgesAreRejected) {
  const ContentionDag dag = MakeDag(2, {{0, 1, 1.0}});
  EXPECT_EQ(CompressPriorities(dag, Options(0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CompressPriorities(dag, Options(2, 0)).status().code(), StatusCode::kInvalidArgument);

  const std::vector<std::vector<DagEdge>> bad_edges = {
      {{0, 2, 1.0}},                                       // Endpoint out of range.
      {{-1, 1, 1.0}},                                      // Negative endpoint.
      {{1, 1, 1.0}},                                       // Self-loop.
      {{0, 1, -1.0}},                                      // Negative weight.
      {{0, 1, std::numeric_limits<double>::quiet_NaN()}},  // NaN weight.
  };
  for (const auto& edges : bad_edges) {
    ContentionDag bad;
    bad.num_nodes = 2;
    bad.edges = edges;
    EXPECT_EQ(CompressPriorities(bad, Options(2)).status().code(), StatusCode::kInvalidArgument);
  }
}

// --- BruteForceCompress, IsValidCompression, CutWeight ---------------------------------------

TEST(CompressionBruteForceTest, FindsTheOptimumAndBreaksTiesByEnumerationOrder) {
  // Chain with equal weights and two levels: three optimal splits of weight 1; the first in
  // lexicographic order puts only the last node low.
  const ContentionDag dag = MakeDag(4, {{0, 1, 1.0}, {1, 2, 1.0}, {2, 3, 1.0}});
  const Result<Compression> result = BruteForceCompress(dag, 2);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->level, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(result->cut_weight, 1.0);
}

TEST(CompressionBruteForceTest, MatchesPlainEnumerationIncludingTieBreak) {
  // Plain K^n odometer (node 0 most significant); integer weights make ties frequent.
  Rng rng(23);
  for (int trial = 0; trial < 150; ++trial) {
    const int n = 1 + static_cast<int>(rng.Uniform(7));       // 1..7
    const int levels = 1 + static_cast<int>(rng.Uniform(5));  // 1..5, often > n
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    rng.Shuffle(order);
    std::vector<DagEdge> edges;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng.Uniform(2) == 0) {
          edges.push_back(DagEdge{order[static_cast<size_t>(a)], order[static_cast<size_t>(b)],
                                  static_cast<double>(1 + rng.Uniform(3))});
        }
      }
    }
    const ContentionDag dag = MakeDag(n, std::move(edges));

    std::vector<int> level(static_cast<size_t>(n), 0);
    std::vector<int> best_level;
    double best = -1;
    while (true) {
      if (IsValidCompression(dag, level, levels) && CutWeight(dag, level) > best) {
        best = CutWeight(dag, level);
        best_level = level;
      }
      int digit = n - 1;
      while (digit >= 0 && ++level[static_cast<size_t>(digit)] == levels) {
        level[static_cast<size_t>(digit--)] = 0;
      }
      if (digit < 0) break;
    }

    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " K " << levels);
    const Result<Compression> result = BruteForceCompress(dag, levels);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->level, best_level);
    EXPECT_EQ(result->cut_weight, best);
  }
}

TEST(CompressionBruteForceTest, RejectsMoreThanTwelveNodes) {
  EXPECT_TRUE(BruteForceCompress(MakeDag(12, {}), 2).ok());
  const Result<Compression> result = BruteForceCompress(MakeDag(13, {}), 2);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange);
}

TEST(CompressionBruteForceTest, HandlesTwelveNodesWithManyLevels) {
  Rng rng(3);
  const ContentionDag dag = RandomDag(rng, 12, 0.3);
  const Result<Compression> exact = BruteForceCompress(dag, 8);
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(IsValidCompression(dag, exact->level, 8));
  const Result<Compression> approx = CompressPriorities(dag, Options(8));
  ASSERT_TRUE(approx.ok());
  EXPECT_LE(approx->cut_weight, exact->cut_weight + 1e-9);
}

TEST(CompressionValidityTest, ChecksRangeSizeAndEdgeDirection) {
  const ContentionDag dag = MakeDag(3, {{0, 1, 1.0}, {0, 2, 2.0}});
  EXPECT_TRUE(IsValidCompression(dag, {0, 1, 1}, 2));
  EXPECT_TRUE(IsValidCompression(dag, {0, 0, 0}, 1));
  EXPECT_FALSE(IsValidCompression(dag, {1, 0, 1}, 2));  // Edge 0 -> 1 goes upwards.
  EXPECT_FALSE(IsValidCompression(dag, {0, 2, 1}, 2));  // Level out of range.
  EXPECT_FALSE(IsValidCompression(dag, {0, -1, 1}, 2));
  EXPECT_FALSE(IsValidCompression(dag, {0, 1}, 2));  // Wrong size.
  EXPECT_FALSE(IsValidCompression(dag, {0, 0, 0}, 0));
}

TEST(CompressionCutWeightTest, SumsEdgesBetweenDifferentLevels) {
  const ContentionDag dag = MakeDag(3, {{0, 1, 1.0}, {0, 2, 2.0}, {1, 2, 4.0}});
  EXPECT_DOUBLE_EQ(CutWeight(dag, {0, 0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(CutWeight(dag, {0, 1, 1}), 3.0);
  EXPECT_DOUBLE_EQ(CutWeight(dag, {0, 0, 1}), 6.0);
  EXPECT_DOUBLE_EQ(CutWeight(dag, {0, 1, 2}), 7.0);
}

}  // namespace
}  // namespace crux::core
