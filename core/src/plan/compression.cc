#include "crux/core/plan/compression.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/random.h"

namespace crux::core {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
// Work budget (edge visits + DP cells) per component above max_exact_nodes: fewer random orders
// are tried when one order costs more than kCoarseWorkPerComponent / topo_orders (compression.h).
constexpr double kCoarseWorkPerComponent = 1e8;
// BuildContentionDag reserves its pair-count bound directly (no counting pass) up to this many
// edges (16 MB).
constexpr double kEdgesReservedWithoutCounting = 1 << 20;

// True iff job a is strictly higher priority than job b (lower rank; index breaks ties so that
// the result stays acyclic even if `rank` is not a permutation).
bool Higher(const std::vector<int>& rank, int a, int b) {
  const int ra = rank[static_cast<size_t>(a)];
  const int rb = rank[static_cast<size_t>(b)];
  return ra != rb ? ra < rb : a < b;
}

// Checks the options and every edge (endpoints in range, no self-loop, finite weight >= 0).
Status ValidateEdges(const ContentionDag& dag) {
  if (dag.num_nodes < 0) return InvalidArgumentError("num_nodes must be >= 0");
  for (size_t e = 0; e < dag.edges.size(); ++e) {
    const DagEdge& edge = dag.edges[e];
    const auto error = [e](const std::string& what) {
      return InvalidArgumentError("edges[" + std::to_string(e) + "]: " + what);
    };
    if (edge.from < 0 || edge.from >= dag.num_nodes || edge.to < 0 || edge.to >= dag.num_nodes) {
      return error("endpoint out of range [0, " + std::to_string(dag.num_nodes) + ")");
    }
    if (edge.from == edge.to) return error("self-loop");
    if (!std::isfinite(edge.weight) || edge.weight < 0) {
      return error("weight must be finite and >= 0");
    }
  }
  return Status::Ok();
}

// Out-adjacency of the whole DAG: the out-edges of node v are dag.edges[edge(k)] for k in
// [start[v], start[v + 1]), where edge(k) = k when the edges are sorted by `from` (as
// BuildContentionDag produces them; no copy) and perm[k] otherwise.
struct OutCsr {
  std::vector<int64_t> start;
  std::vector<int64_t> perm;  // Empty when the edges are already grouped by `from`.
  int64_t edge(int64_t k) const { return perm.empty() ? k : perm[static_cast<size_t>(k)]; }
};

// REQUIRES: edges validated.
OutCsr BuildOutCsr(const ContentionDag& dag) {
  const size_t n = static_cast<size_t>(dag.num_nodes);
  OutCsr csr;
  csr.start.assign(n + 1, 0);
  bool grouped = true;
  for (size_t e = 0; e < dag.edges.size(); ++e) {
    ++csr.start[static_cast<size_t>(dag.edges[e].from) + 1];
    if (e > 0 && dag.edges[e].from < dag.edges[e - 1].from) grouped = false;
  }
  std::partial_sum(csr.start.begin(), csr.start.end(), csr.start.begin());
  if (!grouped) {
    csr.perm.resize(dag.edges.size());
    std::vector<int64_t> fill(csr.start.begin(), csr.start.end() - 1);
    for (size_t e = 0; e < dag.edges.size(); ++e) {
      csr.perm[static_cast<size_t>(fill[static_cast<size_t>(dag.edges[e].from)]++)] =
          static_cast<int64_t>(e);
    }
  }
  return csr;
}

// Deterministic Kahn's algorithm over the whole graph. REQUIRES: edges validated.
bool IsAcyclic(const ContentionDag& dag, const OutCsr& csr) {
  const size_t n = static_cast<size_t>(dag.num_nodes);
  std::vector<int> indegree(n, 0);
  for (const DagEdge& e : dag.edges) ++indegree[static_cast<size_t>(e.to)];
  std::vector<int> stack;
  for (size_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) stack.push_back(static_cast<int>(v));
  }
  size_t visited = 0;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    ++visited;
    for (int64_t k = csr.start[static_cast<size_t>(v)]; k < csr.start[static_cast<size_t>(v) + 1];
         ++k) {
      const int w = dag.edges[static_cast<size_t>(csr.edge(k))].to;
      if (--indegree[static_cast<size_t>(w)] == 0) stack.push_back(w);
    }
  }
  return visited == n;
}

int FindRoot(std::vector<int>& parent, int v) {
  while (parent[static_cast<size_t>(v)] != v) {
    parent[static_cast<size_t>(v)] = parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
    v = parent[static_cast<size_t>(v)];
  }
  return v;
}

// One weakly connected component with local node ids 0..n-1, in CSR form.
struct Component {
  int n = 0;
  std::vector<int> global;     // Local id -> global id.
  std::vector<int> out_start;  // Out-edges of local node v: out[out_start[v] .. out_start[v+1]).
  std::vector<int> out;
  std::vector<int> in_start;  // In-edges of v: (in_from[k], in_weight[k]) for k in its range.
  std::vector<int> in_from;
  std::vector<double> in_weight;
};

// True when `c` is too large for the exact DP (CompressionOptions::max_exact_nodes, 0 = none
// is): SolveCoarse solves it on the whole DAG's CSR.
bool IsCoarse(const Component& c, int max_exact_nodes) {
  return max_exact_nodes > 0 && c.n > max_exact_nodes;
}

// The weakly connected components of the DAG's nodes with at least one edge (union-find),
// numbered by their smallest node; comp_edges[c] receives component c's edge count. Only the
// components that are not IsCoarse get their local CSR. REQUIRES: edges validated, `csr` =
// BuildOutCsr(dag).
std::vector<Component> SplitComponents(const ContentionDag& dag, const OutCsr& csr,
                                       int max_exact_nodes, std::vector<int64_t>& comp_edges) {
  const size_t n = static_cast<size_t>(dag.num_nodes);
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  // Walked per `from` node so that its root is looked up once, not once per edge.
  std::vector<int> has_edge(n, 0);
  for (size_t v = 0; v < n; ++v) {
    if (csr.start[v] == csr.start[v + 1]) continue;
    has_edge[v] = 1;
    int ra = FindRoot(parent, static_cast<int>(v));
    for (int64_t k = csr.start[v]; k < csr.start[v + 1]; ++k) {
      const int to = dag.edges[static_cast<size_t>(csr.edge(k))].to;
      has_edge[static_cast<size_t>(to)] = 1;
      const int rb = FindRoot(parent, to);
      if (ra != rb) {
        parent[static_cast<size_t>(std::max(ra, rb))] = std::min(ra, rb);
        ra = std::min(ra, rb);
      }
    }
  }
  std::vector<int> comp_of(n, -1);
  std::vector<int> local_id(n, -1);
  std::vector<Component> comps;
  for (size_t v = 0; v < n; ++v) {
    if (!has_edge[v]) continue;  // Isolated: in no component (it stays at level 0).
    const size_t root = static_cast<size_t>(FindRoot(parent, static_cast<int>(v)));
    if (comp_of[root] < 0) {
      comp_of[root] = static_cast<int>(comps.size());
      comps.emplace_back();
    }
    comp_of[v] = comp_of[root];
    Component& c = comps[static_cast<size_t>(comp_of[v])];
    local_id[v] = c.n++;
    c.global.push_back(static_cast<int>(v));
  }
  // Components above the bound are solved by SolveCoarse on the global CSR; only the others get
  // their own local CSR.
  comp_edges.assign(comps.size(), 0);
  for (Component& c : comps) {
    if (IsCoarse(c, max_exact_nodes)) continue;
    c.out_start.assign(static_cast<size_t>(c.n) + 1, 0);
    c.in_start.assign(static_cast<size_t>(c.n) + 1, 0);
  }
  for (const DagEdge& e : dag.edges) {
    const size_t ci = static_cast<size_t>(comp_of[static_cast<size_t>(e.from)]);
    ++comp_edges[ci];
    Component& c = comps[ci];
    if (IsCoarse(c, max_exact_nodes)) continue;
    ++c.out_start[static_cast<size_t>(local_id[static_cast<size_t>(e.from)]) + 1];
    ++c.in_start[static_cast<size_t>(local_id[static_cast<size_t>(e.to)]) + 1];
  }
  std::vector<std::vector<int>> out_fill(comps.size());
  std::vector<std::vector<int>> in_fill(comps.size());
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    Component& c = comps[ci];
    if (IsCoarse(c, max_exact_nodes)) continue;
    std::partial_sum(c.out_start.begin(), c.out_start.end(), c.out_start.begin());
    std::partial_sum(c.in_start.begin(), c.in_start.end(), c.in_start.begin());
    c.out.resize(static_cast<size_t>(c.out_start.back()));
    c.in_from.resize(static_cast<size_t>(c.in_start.back()));
    c.in_weight.resize(static_cast<size_t>(c.in_start.back()));
    out_fill[ci].assign(c.out_start.begin(), c.out_start.end() - 1);
    in_fill[ci].assign(c.in_start.begin(), c.in_start.end() - 1);
  }
  for (const DagEdge& e : dag.edges) {
    const size_t ci = static_cast<size_t>(comp_of[static_cast<size_t>(e.from)]);
    Component& c = comps[ci];
    if (IsCoarse(c, max_exact_nodes)) continue;
    const int lf = local_id[static_cast<size_t>(e.from)];
    const int lt = local_id[static_cast<size_t>(e.to)];
    c.out[static_cast<size_t>(out_fill[ci][static_cast<size_t>(lf)]++)] = lt;
    const size_t k = static_cast<size_t>(in_fill[ci][static_cast<size_t>(lt)]++);
    c.in_from[k] = lf;
    c.in_weight[k] = e.weight;
  }

  return comps;
}

// Solves Algorithm 1 on one component. Scratch buffers are reused across orders and components.
class ComponentSolver {
 public:
  // Writes the best block index (0 = highest) of every local node to `block`. Splits are
  // searched at `buckets` evenly spaced boundaries of each order; CompressPriorities passes
  // comp.n (every boundary: the exact Algorithm 1 DP) and uses SolveCoarse for components above
  // the bound. REQUIRES: 1 <= buckets <= comp.n.
  void Solve(const Component& comp, int levels, int topo_orders, int buckets, uint64_t comp_seed,
             std::vector<int>& block) {
    const int n = comp.n;
    const int g = buckets;
    const int num_blocks = std::min(levels, g);
    block.assign(static_cast<size_t>(n), 0);
    if (num_blocks <= 1) return;  // One block: every order gives the same (zero) cut.

    const size_t un = static_cast<size_t>(n);
    const size_t ug = static_cast<size_t>(g);
    order_.resize(un);
    pos_.resize(un);
    // Bucket b holds positions [bucket_begin_[b], bucket_begin_[b + 1]); with g == n, bucket b
    // is position b and everything below is the plain per-position DP.
    SetBuckets(un, ug);
    diff_.assign(ug + 1, 0.0);
    cost_.resize(ug * (ug + 1) / 2 + ug + 1);
    f_.resize(static_cast<size_t>(num_blocks + 1) * (ug + 1));

    indegree_.resize(un);
    const auto for_each_out = [&comp](int v, auto&& fn) {
      for (int k = comp.out_start[static_cast<size_t>(v)];
           k < comp.out_start[static_cast<size_t>(v) + 1]; ++k) {
        fn(comp.out[static_cast<size_t>(k)]);
      }
    };

    // Local ids 0..n-1 as a vector: clang 14 cannot use libstdc++ 12's std::views::iota.
    local_ids_.resize(un);
    std::iota(local_ids_.begin(), local_ids_.end(), 0);
    double best = kNegInf;
    for (int t = 0; t < topo_orders; ++t) {
      Rng rng(Mix64(comp_seed + static_cast<uint64_t>(t)));
      RandomTopologicalOrder(local_ids_, for_each_out, rng);
      BuildCost(comp, g);
      const double value = SplitDp(g, num_blocks);
      if (value > best) {  // Strict: ties keep the first order found.
        best = value;
        RecoverBlocks(g, num_blocks, block);
      }
    }
  }

  // The bounded variant for one component too large for the exact DP (compression.h), on
  // global node ids straight from the DAG (no per-component edge copy). `nodes` are the
  // component's nodes ascending; writes the block of each of them to level[node]. Block
  // boundaries fall at `buckets` evenly spaced positions of each order. REQUIRES: 1 <= buckets
  // <= nodes.size(), level.size() == dag.num_nodes.
  void SolveCoarse(const ContentionDag& dag, const OutCsr& csr, const std::vector<int>& nodes,
                   int levels, int topo_orders, int buckets, uint64_t comp_seed,
                   std::vector<int>& level) {
    const size_t un = nodes.size();
    const size_t ug = static_cast<size_t>(buckets);
    const int num_blocks = std::min(levels, buckets);
    for (int v : nodes) level[static_cast<size_t>(v)] = 0;
    if (num_blocks <= 1) return;
    order_.resize(un);
    pos_.resize(static_cast<size_t>(dag.num_nodes));  // Global node -> position.
    indegree_.resize(static_cast<size_t>(dag.num_nodes));
    SetBuckets(un, ug);
    cost_.resize(ug * (ug + 1) / 2 + ug + 1);
    f_.resize(static_cast<size_t>(num_blocks + 1) * (ug + 1));

    const auto for_each_out = [&dag, &csr](int v, auto&& fn) {
      for (int64_t k = csr.start[static_cast<size_t>(v)]; k < csr.start[static_cast<size_t>(v) + 1];
           ++k) {
        fn(dag.edges[static_cast<size_t>(csr.edge(k))].to);
      }
    };

    double best = kNegInf;
    for (int t = 0; t < topo_orders; ++t) {
      Rng rng(Mix64(comp_seed + static_cast<uint64_t>(t)));
      RandomTopologicalOrder(nodes, for_each_out, rng);
      BuildCoarseCost(dag, csr, nodes, ug);
      const double value = SplitDp(buckets, num_blocks);
      if (value > best) {  // Strict: ties keep the first order found.
        best = value;
        RecoverBlocks(buckets, num_blocks, level);
      }
    }
  }

 private:
  // Offset of column i of the triangular cost matrix: C(j, i) for j = 0..i is contiguous.
  static size_t ColumnOffset(size_t i) { return i * (i + 1) / 2; }

  // Bucket b = positions [floor(b n / g), floor((b + 1) n / g)) of an order of n nodes.
  void SetBuckets(size_t n, size_t g) {
    bucket_begin_.resize(g + 1);
    bucket_of_pos_.resize(n);
    for (size_t b = 0; b <= g; ++b) bucket_begin_[b] = static_cast<int>(b * n / g);
    for (size_t b = 0; b < g; ++b) {
      for (int p = bucket_begin_[b]; p < bucket_begin_[b + 1]; ++p) {
        bucket_of_pos_[static_cast<size_t>(p)] = static_cast<int>(b);
      }
    }
  }

  // Kahn's algorithm whose next node is drawn uniformly from the ready set, over the nodes of
  // `nodes` (a range of node ids; the first ready set is taken in its order): writes order_
  // (position -> node) and pos_ (node -> position). for_each_out(v, fn) calls fn(w) for every
  // out-neighbour w of v, in a fixed order. Both solvers draw their orders here, so that one
  // seed gives one order however the component is stored. REQUIRES: indegree_ and pos_ cover
  // every node id, order_ has room for every node; the caller checked acyclicity, so every node
  // is placed.
  template <typename Nodes, typename ForEachOut>
  void RandomTopologicalOrder(const Nodes& nodes, const ForEachOut& for_each_out, Rng& rng) {
    for (int v : nodes) indegree_[static_cast<size_t>(v)] = 0;
    for (int v : nodes) for_each_out(v, [this](int w) { ++indegree_[static_cast<size_t>(w)]; });
    ready_.clear();
    for (int v : nodes) {
      if (indegree_[static_cast<size_t>(v)] == 0) ready_.push_back(v);
    }
    size_t next = 0;
    while (!ready_.empty()) {
      const size_t pick = static_cast<size_t>(rng.Uniform(ready_.size()));
      std::swap(ready_[pick], ready_.back());
      const int v = ready_.back();
      ready_.pop_back();
      pos_[static_cast<size_t>(v)] = static_cast<int>(next);
      order_[next++] = v;
      for_each_out(v, [this](int w) {
        if (--indegree_[static_cast<size_t>(w)] == 0) ready_.push_back(w);
      });
    }
  }

  // Over bucket boundaries 0..g: C(j, i) = weight of edges from buckets [0, j) to buckets
  // [j, i), 0 <= j <= i <= g. Column i extends column i-1 by the in-edges of the nodes of bucket
  // i-1: an in-edge from bucket q < i-1 adds its weight to C(j, i) for q < j <= i-1, i.e. a
  // difference array at q+1 followed by a prefix sum over j; an edge inside bucket i-1 is never
  // cut and is skipped. O(g^2 + n + edges) per order.
  void BuildCost(const Component& comp, int g_int) {
    const size_t g = static_cast<size_t>(g_int);
    cost_[0] = 0.0;
    for (size_t i = 1; i <= g; ++i) {
      for (int p = bucket_begin_[i - 1]; p < bucket_begin_[i]; ++p) {
        const int v = order_[static_cast<size_t>(p)];
        for (int k = comp.in_start[static_cast<size_t>(v)];
             k < comp.in_start[static_cast<size_t>(v) + 1]; ++k) {
          const size_t q = static_cast<size_t>(
              bucket_of_pos_[static_cast<size_t>(pos_[static_cast<size_t>(comp.in_from[k])])]);
          if (q + 1 < i) diff_[q + 1] += comp.in_weight[static_cast<size_t>(k)];
        }
      }
      const double* prev_col = &cost_[ColumnOffset(i - 1)];
      double* col = &cost_[ColumnOffset(i)];
      double acc = 0.0;
      for (size_t j = 0; j < i; ++j) {
        acc += diff_[j];
        diff_[j] = 0.0;
        col[j] = prev_col[j] + acc;
      }
      col[i] = 0.0;
    }
  }

  // BuildCost for SolveCoarse, on global node ids over the whole DAG's CSR, `nodes` the
  // component's. Column i + 1 first collects the weight W(q, i) of edges from bucket q < i into
  // bucket i at its row q; the sweep then turns it in place into C(j, i + 1) = C(j, i) +
  // sum_{q < j} W(q, i). O(E_c + g^2) per order.
  void BuildCoarseCost(const ContentionDag& dag, const OutCsr& csr, const std::vector<int>& nodes,
                       size_t ug) {
    std::fill(cost_.begin(), cost_.begin() + static_cast<std::ptrdiff_t>(ColumnOffset(ug) + ug + 1),
              0.0);
    for (int v : nodes) {
      const size_t from_bucket =
          static_cast<size_t>(bucket_of_pos_[static_cast<size_t>(pos_[static_cast<size_t>(v)])]);
      for (int64_t k = csr.start[static_cast<size_t>(v)]; k < csr.start[static_cast<size_t>(v) + 1];
           ++k) {
        const DagEdge& e = dag.edges[static_cast<size_t>(csr.edge(k))];
        const size_t to_bucket = static_cast<size_t>(
            bucket_of_pos_[static_cast<size_t>(pos_[static_cast<size_t>(e.to)])]);
        if (from_bucket < to_bucket) cost_[ColumnOffset(to_bucket + 1) + from_bucket] += e.weight;
      }
    }
    for (size_t i = 1; i <= ug; ++i) {
      const double* prev_col = &cost_[ColumnOffset(i - 1)];
      double* col = &cost_[ColumnOffset(i)];
      double acc = 0.0;
      for (size_t j = 0; j < i; ++j) {
        const double w = col[j];
        col[j] = prev_col[j] + acc;
        acc += w;
      }
      col[i] = 0.0;
    }
  }

  // max over j in [lo, hi) of a[j] + b[j]; REQUIRES lo < hi. Four independent accumulators
  // break the dependency chain so the compiler can keep several adds/maxes in flight.
  static double MaxSum(const double* a, const double* b, size_t lo, size_t hi) {
    double m0 = kNegInf, m1 = kNegInf, m2 = kNegInf, m3 = kNegInf;
    size_t j = lo;
    for (; j + 4 <= hi; j += 4) {
      const double v0 = a[j] + b[j];
      const double v1 = a[j + 1] + b[j + 1];
      const double v2 = a[j + 2] + b[j + 2];
      const double v3 = a[j + 3] + b[j + 3];
      m0 = v0 > m0 ? v0 : m0;
      m1 = v1 > m1 ? v1 : m1;
      m2 = v2 > m2 ? v2 : m2;
      m3 = v3 > m3 ? v3 : m3;
    }
    for (; j < hi; ++j) {
      const double v = a[j] + b[j];
      m0 = v > m0 ? v : m0;
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    return m2 > m0 ? m2 : m0;
  }

  // f(i, k) lives at f_[k * (n + 1) + i].
  double* FRow(size_t k, size_t n) { return &f_[k * (n + 1)]; }

  // Exact DP: f(i, k) = max over k-1 <= j < i of f(j, k-1) + C(j, i), f(i, 1) = 0, for a split
  // of positions [0, i) into exactly k non-empty consecutive blocks (weights are >= 0, so using
  // all L blocks never lowers the cut). Only the states that can still reach (n, L) are
  // computed. O(L n^2 / 2) with a contiguous inner loop over j; the argmax is not tracked here
  // but recovered by RecoverBlocks for the (few) orders that improve the best cut. Returns
  // f(n, L).
  double SplitDp(int n_int, int num_blocks) {
    const size_t n = static_cast<size_t>(n_int);
    const size_t num_k = static_cast<size_t>(num_blocks);
    double* f1 = FRow(1, n);
    f1[0] = kNegInf;
    for (size_t i = 1; i <= n; ++i) f1[i] = 0.0;
    for (size_t k = 2; k <= num_k; ++k) {
      // Block k ends at i; blocks k+1..L still need (L - k) positions after it.
      const size_t i_hi = n - (num_k - k);
      const size_t i_lo = k == num_k ? n : k;
      const double* prev = FRow(k - 1, n);
      double* cur = FRow(k, n);
      for (size_t i = i_lo; i <= i_hi; ++i) {
        cur[i] = MaxSum(prev, &cost_[ColumnOffset(i)], k - 1, i);
      }
    }
    return FRow(num_k, n)[n];
  }

  // Backtracks the DP of the current order: the split point of state (i, k) is the first j
  // whose candidate equals f(i, k) (the same arithmetic as in SplitDp, so equality is exact).
  // i and j count buckets. Writes the block (0-based) of each local node to `block`. O(L g + n).
  void RecoverBlocks(int g_int, int num_blocks, std::vector<int>& block) {
    const size_t g = static_cast<size_t>(g_int);
    const auto assign = [&](size_t first_bucket, size_t end_bucket, int b) {
      for (int p = bucket_begin_[first_bucket]; p < bucket_begin_[end_bucket]; ++p) {
        block[static_cast<size_t>(order_[static_cast<size_t>(p)])] = b;
      }
    };
    size_t end = g;
    for (size_t k = static_cast<size_t>(num_blocks); k >= 2; --k) {
      const double* prev = FRow(k - 1, g);
      const double* col = &cost_[ColumnOffset(end)];
      const double target = FRow(k, g)[end];
      size_t start = k - 1;
      while (start + 1 < end && !(prev[start] + col[start] == target)) ++start;
      assign(start, end, static_cast<int>(k - 1));
      end = start;
    }
    assign(0, end, 0);
  }

  std::vector<int> order_;  // Position -> local node.
  std::vector<int> pos_;    // Local node -> position.
  std::vector<int> indegree_;
  std::vector<int> ready_;
  std::vector<int> local_ids_;      // 0..n-1 for the exact solver's component.
  std::vector<int> bucket_begin_;   // Bucket -> first position (g + 1 entries).
  std::vector<int> bucket_of_pos_;  // Position -> bucket.
  std::vector<double> diff_;
  std::vector<double> cost_;  // Triangular, column-major (see ColumnOffset).
  std::vector<double> f_;     // DP table, see FRow.
};

// Depth-first enumeration for BruteForceCompress: nodes in index order, levels ascending, so
// leaves appear in lexicographic order of the level vector (node 0 most significant).
class BruteForce {
 public:
  BruteForce(const ContentionDag& dag, int levels) : dag_(dag), levels_(levels) {
    const size_t n = static_cast<size_t>(dag.num_nodes);
    back_.resize(n);
    remaining_.assign(n + 1, 0.0);
    double total = 0.0;
    for (const DagEdge& e : dag.edges) {
      const int later = std::max(e.from, e.to);
      back_[static_cast<size_t>(later)].push_back(&e);
      remaining_[static_cast<size_t>(later)] += e.weight;
      total += e.weight;
    }
    // remaining_[i] = weight of edges whose later endpoint is >= i (still undecided at node i).
    for (size_t i = n; i-- > 0;) remaining_[i] += remaining_[i + 1];
    slack_ = 1e-9 * total + 1e-300;
    level_.assign(n, 0);
  }

  Compression Run() {
    Recurse(0, 0.0);
    Compression result;
    result.level = best_level_;
    result.cut_weight = CutWeight(dag_, best_level_);
    return result;
  }

 private:
  void Recurse(int i, double partial) {
    const size_t ui = static_cast<size_t>(i);
    if (ui == level_.size()) {
      if (partial < best_ - slack_) return;
      const double value = CutWeight(dag_, level_);
      if (value > best_) {  // Strict: the first assignment in enumeration order wins ties.
        best_ = value;
        best_level_ = level_;
      }
      return;
    }
    // Conservative bound (slack covers rounding): only prune branches that cannot even tie.
    if (partial + remaining_[ui] < best_ - slack_) return;
    for (int l = 0; l < levels_; ++l) {
      level_[ui] = l;
      bool valid = true;
      double gained = 0.0;
      for (const DagEdge* e : back_[ui]) {
        const int lf = level_[static_cast<size_t>(e->from)];
        const int lt = level_[static_cast<size_t>(e->to)];
        if (lf > lt) {
          valid = false;
          break;
        }
        if (lf != lt) gained += e->weight;
      }
      if (valid) Recurse(i + 1, partial + gained);
    }
  }

  const ContentionDag& dag_;
  int levels_;
  std::vector<std::vector<const DagEdge*>> back_;  // Edges whose later endpoint is the node.
  std::vector<double> remaining_;
  double slack_ = 0.0;
  std::vector<int> level_;
  double best_ = kNegInf;
  std::vector<int> best_level_;
};

}  // namespace

// Complexity: O(num_links + sum |job_links| log + sum_l |B_l|^2 / 2 + E log(E / n)), where
// B_l is the set of jobs on link l and E the number of edges; memory O(num_links +
// sum |job_links| + n) besides the E edges, which are allocated once at their exact size.
// Jobs are bucketed per link (CSR), each bucket sorted by priority. For each job a in index
// order, the lower-priority suffix of the buckets of a's links is scanned; every co-job b not
// yet seen for a (a per-job stamp array, instead of materialising and sorting all pairs) yields
// the edge a -> b. A first pass only counts a's edges (exact allocation: a 10,000-job clique has
// 50M edges, and vector growth would double the peak); the second writes them, grouped by
// `from` ascending, each group sorted by `to` (a sort for small groups, a scan of the stamp
// array for groups above n / 16 jobs).
ContentionDag BuildContentionDag(const std::vector<std::vector<LinkId>>& job_links,
                                 const std::vector<int>& rank,
                                 const std::vector<Intensity>& intensity, size_t num_links) {
  const size_t n = job_links.size();
  ContentionDag dag;
  dag.num_nodes = static_cast<int>(n);
  const auto usable = [num_links](LinkId l) { return l.valid() && l.value() < num_links; };

  // Bucket jobs per link; a job appears at most once per bucket.
  std::vector<int> link_stamp(num_links, -1);
  std::vector<size_t> start(num_links + 1, 0);
  for (size_t a = 0; a < n; ++a) {
    for (LinkId l : job_links[a]) {
      if (!usable(l) || link_stamp[l.value()] == static_cast<int>(a)) continue;
      link_stamp[l.value()] = static_cast<int>(a);
      ++start[l.value() + 1];
    }
  }
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int> members(start[num_links]);
  std::vector<size_t> fill(start.begin(), start.end() - 1);
  std::fill(link_stamp.begin(), link_stamp.end(), -1);
  for (size_t a = 0; a < n; ++a) {
    for (LinkId l : job_links[a]) {
      if (!usable(l) || link_stamp[l.value()] == static_cast<int>(a)) continue;
      link_stamp[l.value()] = static_cast<int>(a);
      members[fill[l.value()]++] = static_cast<int>(a);
    }
  }
  const auto higher = [&rank](int x, int y) { return Higher(rank, x, y); };
  for (size_t l = 0; l < num_links; ++l) {
    if (start[l + 1] - start[l] > 1) {
      std::sort(members.begin() + static_cast<std::ptrdiff_t>(start[l]),
                members.begin() + static_cast<std::ptrdiff_t>(start[l + 1]), higher);
    }
  }

  // Calls fn(b) once for every job b of lower priority than a sharing a link with a; afterwards
  // job_stamp[b] == a exactly for those b. REQUIRES: job_stamp[*] != a, link_stamp[*] != a.
  std::vector<int> job_stamp(n, -1);
  const auto for_each_lower = [&](int ia, auto&& fn) {
    for (LinkId l : job_links[static_cast<size_t>(ia)]) {
      if (!usable(l) || link_stamp[l.value()] == ia) continue;
      link_stamp[l.value()] = ia;
      const int* first = members.data() + start[l.value()];
      const int* last = members.data() + start[l.value() + 1];
      for (const int* it = std::upper_bound(first, last, ia, higher); it != last; ++it) {
        const int b = *it;
        if (job_stamp[static_cast<size_t>(b)] == ia) continue;
        job_stamp[static_cast<size_t>(b)] = ia;
        fn(b);
      }
    }
  };

  // Pass 1: count, unless the number of pairs is small anyway (then reserve that bound).
  double pair_bound = 0;
  for (size_t l = 0; l < num_links; ++l) {
    const double size = static_cast<double>(start[l + 1] - start[l]);
    pair_bound += size * (size - 1) / 2;
  }
  const double n_d = static_cast<double>(n);
  pair_bound = std::min(pair_bound, n_d * (n_d - 1) / 2);
  if (pair_bound <= kEdgesReservedWithoutCounting) {
    dag.edges.reserve(static_cast<size_t>(pair_bound));
  } else {
    size_t total = 0;
    for (size_t a = 0; a < n; ++a) {
      for_each_lower(static_cast<int>(a), [&total](int) { ++total; });
    }
    dag.edges.reserve(total);
    std::fill(link_stamp.begin(), link_stamp.end(), -1);
    std::fill(job_stamp.begin(), job_stamp.end(), -1);
  }

  // Pass 2: write, each group sorted by `to`.
  std::vector<int> targets;
  for (size_t a = 0; a < n; ++a) {
    const int ia = static_cast<int>(a);
    targets.clear();
    for_each_lower(ia, [&targets](int b) { targets.push_back(b); });
    if (targets.size() * 16 > n) {
      for (size_t b = 0; b < n; ++b) {
        if (job_stamp[b] == ia) dag.edges.push_back(DagEdge{ia, static_cast<int>(b), intensity[a]});
      }
    } else {
      std::sort(targets.begin(), targets.end());
      for (int b : targets) dag.edges.push_back(DagEdge{ia, b, intensity[a]});
    }
  }
  return dag;
}

// Complexity: O(n + E) for validation and components, then per component with n_c nodes and
// L = min(K, n_c) blocks, m * O(n_c + E_c + n_c^2 + L n_c^2 / 2) time and O(n_c^2 / 2) memory;
// a component above max_exact_nodes costs m' * O(n_c + E_c + L g^2 / 2) time (m' <= m, see
// kCoarseWorkPerComponent) and O(n + g^2 / 2) memory with g = max(max_exact_nodes, K).
Result<Compression> CompressPriorities(const ContentionDag& dag,
                                       const CompressionOptions& options) {
  if (options.levels < 1) return InvalidArgumentError("levels must be >= 1");
  if (options.topo_orders < 1) return InvalidArgumentError("topo_orders must be >= 1");
  if (options.max_exact_nodes < 0) return InvalidArgumentError("max_exact_nodes must be >= 0");
  CRUX_RETURN_IF_ERROR(ValidateEdges(dag));
  if (!options.component_index.empty() &&
      options.component_index.size() != static_cast<size_t>(dag.num_nodes)) {
    return InvalidArgumentError(
        "component_index: " + std::to_string(options.component_index.size()) + " indices for " +
        std::to_string(dag.num_nodes) + " nodes");
  }
  const OutCsr csr = BuildOutCsr(dag);
  if (!IsAcyclic(dag, csr)) return InvalidArgumentError("contention graph has a cycle");

  const size_t n = static_cast<size_t>(dag.num_nodes);
  Compression result;
  result.level.assign(n, 0);

  std::vector<int64_t> comp_edges;
  const std::vector<Component> comps =
      SplitComponents(dag, csr, options.max_exact_nodes, comp_edges);

  ComponentSolver solver;
  std::vector<int> block;
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    const Component& c = comps[ci];
    // The component's position (in the larger DAG when this is a sub-DAG of it).
    uint64_t position = static_cast<uint64_t>(ci);
    if (!options.component_index.empty()) {
      const int index = options.component_index[static_cast<size_t>(c.global[0])];
      for (int v : c.global) {
        if (options.component_index[static_cast<size_t>(v)] != index || index < 0) {
          return InvalidArgumentError(
              "component_index: nodes " + std::to_string(c.global[0]) + " and " +
              std::to_string(v) + " of one component have indices " + std::to_string(index) +
              " and " + std::to_string(options.component_index[static_cast<size_t>(v)]) +
              " (must be equal and >= 0)");
        }
      }
      position = static_cast<uint64_t>(index);
    }
    const uint64_t comp_seed = Mix64(options.seed ^ Mix64(position));
    if (IsCoarse(c, options.max_exact_nodes)) {
      const int g = std::min(c.n, std::max(options.max_exact_nodes, options.levels));
      const double blocks = std::min(options.levels, g);
      const double per_order =
          static_cast<double>(c.n) + static_cast<double>(comp_edges[ci]) +
          static_cast<double>(g) * (static_cast<double>(g) + 1) * (blocks + 2) / 2;
      const int orders =
          static_cast<int>(std::clamp(std::floor(kCoarseWorkPerComponent / per_order), 1.0,
                                      static_cast<double>(options.topo_orders)));
      solver.SolveCoarse(dag, csr, c.global, options.levels, orders, g, comp_seed, result.level);
      continue;
    }
    solver.Solve(c, options.levels, options.topo_orders, c.n, comp_seed, block);
    for (size_t v = 0; v < static_cast<size_t>(c.n); ++v) {
      result.level[static_cast<size_t>(c.global[v])] = block[v];
    }
  }
  result.cut_weight = CutWeight(dag, result.level);
  return result;
}

// Enumerates level vectors in lexicographic order (node 0 most significant) with levels in
// [0, min(K, n)): any valid assignment can be renumbered to use consecutive levels from 0 without
// changing validity or cut, and that renumbering is componentwise <= (so lexicographically
// earlier), hence the first optimum over all K^n assignments lies in this range. Invalid
// prefixes and prefixes that cannot reach the best cut found so far are pruned.
Result<Compression> BruteForceCompress(const ContentionDag& dag, int levels) {
  if (levels < 1) return InvalidArgumentError("levels must be >= 1");
  if (dag.num_nodes > 12) {
    return OutOfRangeError("brute force supports at most 12 nodes, got " +
                           std::to_string(dag.num_nodes));
  }
  CRUX_RETURN_IF_ERROR(ValidateEdges(dag));
  BruteForce search(dag, std::min(levels, std::max(dag.num_nodes, 1)));
  return search.Run();
}

bool IsValidCompression(const ContentionDag& dag, const std::vector<int>& level, int levels) {
  if (levels < 1 || dag.num_nodes < 0) return false;
  if (level.size() != static_cast<size_t>(dag.num_nodes)) return false;
  for (int l : level) {
    if (l < 0 || l >= levels) return false;
  }
  for (const DagEdge& e : dag.edges) {
    if (e.from < 0 || e.from >= dag.num_nodes || e.to < 0 || e.to >= dag.num_nodes) return false;
    if (level[static_cast<size_t>(e.from)] > level[static_cast<size_t>(e.to)]) return false;
  }
  return true;
}

double CutWeight(const ContentionDag& dag, const std::vector<int>& level) {
  double cut = 0.0;
  for (const DagEdge& e : dag.edges) {
    if (e.from < 0 || e.to < 0 || static_cast<size_t>(e.from) >= level.size() ||
        static_cast<size_t>(e.to) >= level.size()) {
      continue;  // Out-of-range edges never count.
    }
    if (level[static_cast<size_t>(e.from)] != level[static_cast<size_t>(e.to)]) cut += e.weight;
  }
  return cut;
}

void LimitOutEdges(ContentionDag& dag, const std::vector<int>& rank, int max_out_edges) {
  if (max_out_edges < 0 || dag.edges_omitted != 0 || !dag.out_degree.empty()) return;
  const size_t cap = static_cast<size_t>(max_out_edges);
  const std::vector<DagEdge>& edges = dag.edges;
  // Nothing to drop unless some run of equal `from` is longer than the cap.
  bool drops = false;
  for (size_t b = 0; b < edges.size() && !drops;) {
    size_t e = b + 1;
    while (e < edges.size() && edges[e].from == edges[b].from) ++e;
    drops = e - b > cap;
    b = e;
  }
  if (!drops) return;
  const size_t n = static_cast<size_t>(dag.num_nodes);
  std::vector<int32_t> out_degree(n, 0);
  std::vector<int32_t> in_degree(n, 0);
  size_t kept = 0;
  for (size_t b = 0; b < edges.size();) {
    size_t e = b + 1;
    while (e < edges.size() && edges[e].from == edges[b].from) ++e;
    kept += std::min(e - b, cap);
    b = e;
  }
  std::vector<DagEdge> out;
  out.reserve(kept);
  std::vector<size_t> run;
  const auto rank_of = [&rank](int v) {
    return v >= 0 && static_cast<size_t>(v) < rank.size() ? rank[static_cast<size_t>(v)]
                                                          : std::numeric_limits<int>::max();
  };
  for (size_t b = 0; b < edges.size();) {
    size_t e = b + 1;
    while (e < edges.size() && edges[e].from == edges[b].from) ++e;
    for (size_t i = b; i < e; ++i) {
      ++out_degree[static_cast<size_t>(edges[i].from)];
      ++in_degree[static_cast<size_t>(edges[i].to)];
    }
    if (e - b <= cap) {
      out.insert(out.end(), edges.begin() + static_cast<std::ptrdiff_t>(b),
                 edges.begin() + static_cast<std::ptrdiff_t>(e));
    } else if (cap > 0) {
      run.clear();
      for (size_t i = b; i < e; ++i) run.push_back(i);
      const auto closer = [&](size_t x, size_t y) {
        const int rx = rank_of(edges[x].to);
        const int ry = rank_of(edges[y].to);
        return rx != ry ? rx < ry : x < y;
      };
      std::nth_element(run.begin(), run.begin() + static_cast<std::ptrdiff_t>(cap), run.end(),
                       closer);
      run.resize(cap);
      std::sort(run.begin(), run.end());
      for (size_t i : run) out.push_back(edges[i]);
    }
    b = e;
  }
  dag.edges_omitted = static_cast<int64_t>(edges.size() - out.size());
  dag.edges = std::move(out);  // Frees the full list.
  dag.out_degree = std::move(out_degree);
  dag.in_degree = std::move(in_degree);
}

}  // namespace crux::core
