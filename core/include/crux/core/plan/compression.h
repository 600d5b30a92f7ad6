// Priority compression (Crux §4.3): map the strict priority order onto K hardware levels.
//
// Contention DAG: one node per job; for two jobs that share at least one directed link, an edge
// from the higher-priority job (lower rank) to the lower one, weighted by the GPU intensity I of
// the higher one. A compression assigns each job a level in [0, K) (0 = highest) such that no
// edge goes from a lower level to a higher one (level[from] <= level[to]); its cut weight is the
// total weight of edges whose endpoints get different levels. We maximise the cut (Max K-Cut).
//
// CompressPriorities implements Algorithm 1: m random topological orders (Kahn's algorithm
// with a seeded random ready queue), and for each an exact O(K n^2) dynamic programme that
// splits the order into at most K consecutive blocks maximising the cut; the best order wins.
// The objective decomposes over weakly connected components (no constraint or weight links two
// components), so each component is solved on its own with all K levels, then its blocks are
// placed top-aligned (block b -> level b). Jobs without any edge get level 0.
//
// Bound for huge components (`max_exact_nodes`, default 1024): the exact DP costs
// O(m (n_c^2 + L n_c^2 / 2)) time and n_c^2 / 2 doubles of memory per component of n_c jobs
// (10,000 contending jobs: 400 MB and seconds). A component larger than the bound is solved on
// the same random topological orders, but block boundaries may only fall at g =
// max(max_exact_nodes, K) evenly spaced positions of each order (boundary b after
// floor(b * n_c / g) nodes): the DP is exact over those boundaries, costs O(g^2) memory and
// O(m' (n_c + E_c + L g^2 / 2)) time, and its cut is never above the unbounded one for the same
// orders (every coarse split is also a fine one). m' = m unless one order costs more than
// 1e8 / m edge visits plus DP cells; then m' = max(1, 1e8 / cost of one order), the first m'
// of the m orders (e.g. 2 orders for a 10,000-job clique with 43M edges). Components up to the
// bound are solved exactly as before, so results on them do not change. 0 disables the bound.
//
// BruteForceCompress enumerates every valid assignment (for tests; n <= 12).
//
// Thread-safety: pure functions.
#ifndef CRUX_CORE_PLAN_COMPRESSION_H_
#define CRUX_CORE_PLAN_COMPRESSION_H_

#include <cstdint>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

namespace crux::core {

struct DagEdge {
  int from = 0;       // Higher-priority job (index).
  int to = 0;         // Lower-priority job.
  double weight = 0;  // I_from.
  friend bool operator==(const DagEdge&, const DagEdge&) = default;
};

struct ContentionDag {
  int num_nodes = 0;
  std::vector<DagEdge> edges;  // Sorted by (from, to); no duplicates.
  // Set by LimitOutEdges (PlannerOptions::dag_edges_per_job) when it dropped edges; then `edges`
  // is a subset of the DAG's edges (still sorted, no duplicates) and these describe the whole
  // DAG. All zero / empty when `edges` is the whole DAG (then the degrees follow from it).
  int64_t edges_omitted = 0;        // Edges of the DAG not in `edges`.
  std::vector<int32_t> out_degree;  // Per node, out-edges in the whole DAG (empty: none dropped).
  std::vector<int32_t> in_degree;   // Per node, in-edges in the whole DAG (empty: none dropped).
  friend bool operator==(const ContentionDag&, const ContentionDag&) = default;
};

// Builds the DAG. job_links[j] are the directed links job j's flows use (any order, duplicates
// allowed); rank[j] is j's position in the priority order (a permutation); intensity[j] is I_j.
// `num_links` bounds the link ids. Cost O(num_links + sum |job_links| log + sum over links of
// (jobs on the link)^2 / 2 + edges log); the edges are allocated once at their exact size.
ContentionDag BuildContentionDag(const std::vector<std::vector<LinkId>>& job_links,
                                 const std::vector<int>& rank,
                                 const std::vector<Intensity>& intensity, size_t num_links);

struct CompressionOptions {
  int levels = 8;        // K >= 1.
  int topo_orders = 10;  // m >= 1.
  uint64_t seed = 1;
  // Largest component solved with every split boundary (see above); >= 0, 0 = no bound.
  int max_exact_nodes = 1024;
  // Optional, empty or one per node: compressing a sub-DAG made of whole components of a larger
  // DAG (node ids kept in the same relative order, edges kept with their weights), the index of
  // each node's component among the larger DAG's components (numbered from 0 by their smallest
  // node, as here). A component's random orders are seeded from `seed` and its position among
  // the components; with these indices each component gets the position, hence the orders and
  // the levels, it has in the larger DAG, so the sub-DAG's levels are exactly the larger DAG's
  // for its nodes. Incremental re-planning (planner.h) compresses only the components that
  // changed this way. Every node of a component must carry the same index >= 0 (nodes without
  // edges are ignored). Empty: each component's own position in this DAG.
  std::vector<int> component_index;
};

struct Compression {
  std::vector<int> level;  // Per node, in [0, K).
  double cut_weight = 0;
};

// Algorithm 1 (see above). Errors: kInvalidArgument for K < 1, m < 1, a bad edge, or a cycle.
Result<Compression> CompressPriorities(const ContentionDag& dag, const CompressionOptions& options);

// Exact optimum by enumeration. Errors: kOutOfRange when num_nodes > 12.
Result<Compression> BruteForceCompress(const ContentionDag& dag, int levels);

// True iff every level is in [0, levels) and no edge goes from a lower to a higher level.
bool IsValidCompression(const ContentionDag& dag, const std::vector<int>& level, int levels);

// Total weight of edges whose endpoints have different levels.
double CutWeight(const ContentionDag& dag, const std::vector<int>& level);

// Bounds the DAG's edge list after compression (the compression needs every edge; the readers
// of Plan::dag, e.g. cruxd's admin "contends_with" and crux-plan's output, do not): keeps, for
// every node, at most `max_out_edges` of its out-edges, those to the closest-ranked lower nodes
// (smallest rank[to]; ties by edge position), in (from, to) order; the same rule as crux-plan's
// --max-edges-per-job, so that crux-plan with a cap <= max_out_edges lists the same edges. When
// an edge is dropped, fills edges_omitted, out_degree and in_degree (whole-DAG counts) and
// releases the memory of the dropped edges; otherwise leaves `dag` unchanged. O(E) time.
// max_out_edges < 0 keeps every edge; a DAG already limited is left unchanged.
// REQUIRES: rank.size() == dag.num_nodes, edges valid.
void LimitOutEdges(ContentionDag& dag, const std::vector<int>& rank, int max_out_edges);

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_COMPRESSION_H_
