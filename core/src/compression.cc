#include "crux/core/compression.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/random.h"

namespace crux::core {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

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

// Deterministic Kahn's algorithm over the whole graph. REQUIRES: edges validated.
bool IsAcyclic(const ContentionDag& dag) {
  const size_t n = static_cast<size_t>(dag.num_nodes);
  std::vector<int> indegree(n, 0);
  std::vector<int> out_start(n + 1, 0);
  for (const DagEdge& e : dag.edges) {
    ++indegree[static_cast<size_t>(e.to)];
    ++out_start[static_cast<size_t>(e.from) + 1];
  }
  std::partial_sum(out_start.begin(), out_start.end(), out_start.begin());
  std::vector<int> out(dag.edges.size());
  std::vector<int> fill(out_start.begin(), out_start.end() - 1);
  for (const DagEdge& e : dag.edges) out[static_cast<size_t>(fill[e.from]++)] = e.to;
  std::vector<int> stack;
  for (size_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) stack.push_back(static_cast<int>(v));
  }
  size_t visited = 0;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    ++visited;
    for (int k = out_start[v]; k < out_start[v + 1]; ++k) {
      if (--indegree[static_cast<size_t>(out[static_cast<size_t>(k)])] == 0) {
        stack.push_back(out[static_cast<size_t>(k)]);
      }
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

// Solves Algorithm 1 on one component. Scratch buffers are reused across orders and components.
class ComponentSolver {
 public:
  // Writes the best block index (0 = highest) of every local node to `block`.
  void Solve(const Component& comp, int levels, int topo_orders, uint64_t comp_seed,
             std::vector<int>& block) {
    const int n = comp.n;
    const int num_blocks = std::min(levels, n);
    block.assign(static_cast<size_t>(n), 0);
    if (num_blocks <= 1) return;  // One block: every order gives the same (zero) cut.

    const size_t un = static_cast<size_t>(n);
    order_.resize(un);
    pos_.resize(un);
    diff_.assign(un + 1, 0.0);
    cost_.resize(un * (un + 1) / 2 + un + 1);
    f_.resize(static_cast<size_t>(num_blocks + 1) * (un + 1));

    double best = kNegInf;
    for (int t = 0; t < topo_orders; ++t) {
      Rng rng(Mix64(comp_seed + static_cast<uint64_t>(t)));
      RandomTopologicalOrder(comp, rng);
      BuildCost(comp);
      const double value = SplitDp(n, num_blocks);
      if (value > best) {  // Strict: ties keep the first order found.
        best = value;
        RecoverBlocks(n, num_blocks, block);
      }
    }
  }

 private:
  // Offset of column i of the triangular cost matrix: C(j, i) for j = 0..i is contiguous.
  static size_t ColumnOffset(size_t i) { return i * (i + 1) / 2; }

  // Kahn's algorithm whose next node is drawn uniformly from the ready set.
  void RandomTopologicalOrder(const Component& comp, Rng& rng) {
    const size_t n = static_cast<size_t>(comp.n);
    indegree_.assign(n, 0);
    for (int to : comp.out) ++indegree_[static_cast<size_t>(to)];
    ready_.clear();
    for (size_t v = 0; v < n; ++v) {
      if (indegree_[v] == 0) ready_.push_back(static_cast<int>(v));
    }
    size_t next = 0;
    while (!ready_.empty()) {
      const size_t pick = static_cast<size_t>(rng.Uniform(ready_.size()));
      std::swap(ready_[pick], ready_.back());
      const int v = ready_.back();
      ready_.pop_back();
      pos_[static_cast<size_t>(v)] = static_cast<int>(next);
      order_[next++] = v;
      for (int k = comp.out_start[static_cast<size_t>(v)];
           k < comp.out_start[static_cast<size_t>(v) + 1]; ++k) {
        const int w = comp.out[static_cast<size_t>(k)];
        if (--indegree_[static_cast<size_t>(w)] == 0) ready_.push_back(w);
      }
    }
    // The caller checked acyclicity, so every node was placed (next == n).
  }

  // C(j, i) = weight of edges from positions [0, j) to positions [j, i), 0 <= j <= i <= n.
  // Column i extends column i-1 by the in-edges of the node at position i-1: an in-edge from
  // position p adds its weight to C(j, i) for p < j <= i-1, i.e. a difference array at p+1
  // followed by a prefix sum over j. O(n^2 + edges) per order.
  void BuildCost(const Component& comp) {
    const size_t n = static_cast<size_t>(comp.n);
    cost_[0] = 0.0;
    for (size_t i = 1; i <= n; ++i) {
      const int v = order_[i - 1];
      for (int k = comp.in_start[static_cast<size_t>(v)];
           k < comp.in_start[static_cast<size_t>(v) + 1]; ++k) {
        const size_t p = static_cast<size_t>(pos_[static_cast<size_t>(comp.in_from[k])]);
        diff_[p + 1] += comp.in_weight[static_cast<size_t>(k)];
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
  // Writes the block (0-based) of each local node to `block`. O(L n).
  void RecoverBlocks(int n_int, int num_blocks, std::vector<int>& block) {
    const size_t n = static_cast<size_t>(n_int);
    size_t end = n;
    for (size_t k = static_cast<size_t>(num_blocks); k >= 2; --k) {
      const double* prev = FRow(k - 1, n);
      const double* col = &cost_[ColumnOffset(end)];
      const double target = FRow(k, n)[end];
      size_t start = k - 1;
      while (start + 1 < end && !(prev[start] + col[start] == target)) ++start;
      for (size_t p = start; p < end; ++p) {
        block[static_cast<size_t>(order_[p])] = static_cast<int>(k - 1);
      }
      end = start;
    }
    for (size_t p = 0; p < end; ++p) block[static_cast<size_t>(order_[p])] = 0;
  }

  std::vector<int> order_;  // Position -> local node.
  std::vector<int> pos_;    // Local node -> position.
  std::vector<int> indegree_;
  std::vector<int> ready_;
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

// Complexity: O(num_links + sum |job_links| + sum_l |B_l|^2 + E log E), where B_l is the set of
// jobs on link l and E the number of edges; memory O(num_links + sum |job_links| + E + n).
// Jobs are bucketed per link (CSR). Then, for each job a in index order, the buckets of a's
// links are scanned; every co-job b of lower priority that was not yet seen for a (a per-job
// stamp array, instead of materialising and sorting all pairs) yields the edge a -> b. Edges are
// therefore produced grouped by `from` ascending and only each group is sorted by `to`.
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

  // Pairs per link, deduplicated with a stamp per co-job.
  std::vector<int> job_stamp(n, -1);
  std::fill(link_stamp.begin(), link_stamp.end(), -1);
  for (size_t a = 0; a < n; ++a) {
    const int ia = static_cast<int>(a);
    const size_t group_begin = dag.edges.size();
    for (LinkId l : job_links[a]) {
      if (!usable(l) || link_stamp[l.value()] == ia) continue;
      link_stamp[l.value()] = ia;
      for (size_t k = start[l.value()]; k < start[l.value() + 1]; ++k) {
        const int b = members[k];
        if (b == ia || job_stamp[static_cast<size_t>(b)] == ia || !Higher(rank, ia, b)) continue;
        job_stamp[static_cast<size_t>(b)] = ia;
        dag.edges.push_back(DagEdge{ia, b, intensity[a]});
      }
    }
    std::sort(dag.edges.begin() + static_cast<std::ptrdiff_t>(group_begin), dag.edges.end(),
              [](const DagEdge& x, const DagEdge& y) { return x.to < y.to; });
  }
  return dag;
}

// Complexity: O(n + E) for validation and components, then per component with n_c nodes and
// L = min(K, n_c) blocks, m * O(n_c + E_c + n_c^2 + L n_c^2 / 2) time and O(n_c^2 / 2) memory.
Result<Compression> CompressPriorities(const ContentionDag& dag,
                                       const CompressionOptions& options) {
  if (options.levels < 1) return InvalidArgumentError("levels must be >= 1");
  if (options.topo_orders < 1) return InvalidArgumentError("topo_orders must be >= 1");
  CRUX_RETURN_IF_ERROR(ValidateEdges(dag));
  if (!IsAcyclic(dag)) return InvalidArgumentError("contention graph has a cycle");

  const size_t n = static_cast<size_t>(dag.num_nodes);
  Compression result;
  result.level.assign(n, 0);

  // Weakly connected components (union-find), numbered by their smallest node.
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (const DagEdge& e : dag.edges) {
    const int ra = FindRoot(parent, e.from);
    const int rb = FindRoot(parent, e.to);
    if (ra != rb) parent[static_cast<size_t>(std::max(ra, rb))] = std::min(ra, rb);
  }
  std::vector<int> has_edge(n, 0);
  for (const DagEdge& e : dag.edges) {
    has_edge[static_cast<size_t>(e.from)] = 1;
    has_edge[static_cast<size_t>(e.to)] = 1;
  }
  std::vector<int> comp_of(n, -1);
  std::vector<int> local_id(n, -1);
  std::vector<Component> comps;
  for (size_t v = 0; v < n; ++v) {
    if (!has_edge[v]) continue;  // Isolated jobs stay at level 0.
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
  for (Component& c : comps) {
    c.out_start.assign(static_cast<size_t>(c.n) + 1, 0);
    c.in_start.assign(static_cast<size_t>(c.n) + 1, 0);
  }
  for (const DagEdge& e : dag.edges) {
    Component& c = comps[static_cast<size_t>(comp_of[static_cast<size_t>(e.from)])];
    ++c.out_start[static_cast<size_t>(local_id[static_cast<size_t>(e.from)]) + 1];
    ++c.in_start[static_cast<size_t>(local_id[static_cast<size_t>(e.to)]) + 1];
  }
  std::vector<std::vector<int>> out_fill(comps.size());
  std::vector<std::vector<int>> in_fill(comps.size());
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    Component& c = comps[ci];
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
    const int lf = local_id[static_cast<size_t>(e.from)];
    const int lt = local_id[static_cast<size_t>(e.to)];
    c.out[static_cast<size_t>(out_fill[ci][static_cast<size_t>(lf)]++)] = lt;
    const size_t k = static_cast<size_t>(in_fill[ci][static_cast<size_t>(lt)]++);
    c.in_from[k] = lf;
    c.in_weight[k] = e.weight;
  }

  ComponentSolver solver;
  std::vector<int> block;
  for (size_t ci = 0; ci < comps.size(); ++ci) {
    const Component& c = comps[ci];
    const uint64_t comp_seed = Mix64(options.seed ^ Mix64(static_cast<uint64_t>(ci)));
    solver.Solve(c, options.levels, options.topo_orders, comp_seed, block);
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

}  // namespace crux::core
