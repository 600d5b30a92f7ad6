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
// `num_links` bounds the link ids. Cost O(sum |job_links| + edges log edges).
ContentionDag BuildContentionDag(const std::vector<std::vector<LinkId>>& job_links,
                                 const std::vector<int>& rank,
                                 const std::vector<Intensity>& intensity, size_t num_links);

struct CompressionOptions {
  int levels = 8;        // K >= 1.
  int topo_orders = 10;  // m >= 1.
  uint64_t seed = 1;
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
