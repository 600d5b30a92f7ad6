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
#ifndef CRUX_CORE_COMPRESSION_H_
#define CRUX_CORE_COMPRESSION_H_

#include <cstdint>
#include <vector>

#include "crux/core/ids.h"
#include "crux/core/status.h"
#include "crux/core/units.h"

namespace crux::core {

struct DagEdge {
  int from = 0;       // Higher-priority job (index).
  int to = 0;         // Lower-priority job.
  double weight = 0;  // I_from.
};

struct ContentionDag {
  int num_nodes = 0;
  std::vector<DagEdge> edges;  // Sorted by (from, to); no duplicates.
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

}  // namespace crux::core

#endif  // CRUX_CORE_COMPRESSION_H_
