#include "crux/core/plan/incremental_planner.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "crux/core/plan/compression.h"
#include "crux/core/plan/path_selection.h"
#include "crux/core/plan/priority.h"

namespace crux::core {
namespace {

// Stable mode's stage 4 (PlannerOptions::stable): gives each job that is not kept (in rank
// order, highest first) a level in [lo, hi], lo = the lowest level of its higher-priority DAG
// neighbours placed so far, hi = the highest of its lower-priority ones, maximising the weight of
// its edges cut (endpoints on different levels); ties go to the highest level (smallest block),
// as compression aligns blocks to the top. Jobs without edges get block 0. A job with lo > hi
// (a higher-priority neighbour sits below a lower-priority one: legal while they do not share a
// link, but no level between them is left) is repaired with as few moves as possible: either it
// takes `lo` and the lower-priority jobs above it are pushed down to it (transitively along the
// DAG), or it takes `hi` and the higher-priority ones below it are pushed up; the option moving
// fewer placed jobs wins (both keep every edge monotone; levels stay in [0, levels)).
//
// Levels are counted from the first job level ("blocks"). The references given to the
// constructor must outlive the inserter; scratch buffers are reused across the jobs of a run.
class LevelInserter {
 public:
  // `block` holds the kept jobs' blocks on Run's entry and every job's on its return (jobs of
  // skipped components keep theirs); `stats` counts the insertions (levels_inserted,
  // insertions_repaired, levels_moved). REQUIRES: rank and comp_of (-1: no edges) cover the
  // DAG's nodes, levels >= 1.
  LevelInserter(const ContentionDag& dag, const std::vector<int>& rank,
                const std::vector<int>& comp_of, int levels, std::vector<int>& block,
                ReplanStats& stats)
      : dag_(dag), rank_(rank), comp_of_(comp_of), levels_(levels), block_(block), stats_(stats) {}

  // Places every job v with !kept[v]. Components c with comp_state[c] == 1 (compressed exactly
  // afterwards anyway) are skipped. REQUIRES: kept.size() == dag.num_nodes.
  void Run(const std::vector<uint8_t>& kept, const std::vector<uint8_t>& comp_state) {
    const size_t n = kept.size();
    slot_.assign(n, -1);
    fresh_.clear();
    for (size_t v = 0; v < n; ++v) {
      if (kept[v]) continue;
      slot_[v] = static_cast<int>(fresh_.size());
      fresh_.push_back(static_cast<int>(v));
    }
    if (fresh_.empty()) return;
    CollectNeighbours();
    std::sort(fresh_.begin(), fresh_.end(), [this](int a, int b) {
      return rank_[static_cast<size_t>(a)] < rank_[static_cast<size_t>(b)];
    });
    placed_.assign(kept.begin(), kept.end());
    above_.assign(static_cast<size_t>(levels_), 0);
    below_.assign(static_cast<size_t>(levels_), 0);
    for (int v : fresh_) {
      const size_t vi = static_cast<size_t>(v);
      const int c = comp_of_[vi];
      if (c < 0) {  // No edges: the top level, as compression places isolated jobs.
        block_[vi] = 0;
        placed_[vi] = 1;
        ++stats_.levels_inserted;
        continue;
      }
      if (comp_state[static_cast<size_t>(c)] == 1) continue;  // Compressed exactly anyway.
      const auto [lo, hi] = Range(adj_[static_cast<size_t>(slot_[vi])]);
      if (lo > hi) {
        Repair(v, lo, hi);
        ++stats_.insertions_repaired;
      } else {
        block_[vi] = BestLevel(lo, hi);
      }
      placed_[vi] = 1;
      ++stats_.levels_inserted;
    }
  }

 private:
  struct Adjacent {
    std::vector<std::pair<int, double>> up;    // Higher-priority neighbours (edge into v).
    std::vector<std::pair<int, double>> down;  // Lower-priority neighbours (edge out of v).
  };

  // adj_ of each job to insert, with the edge weights.
  void CollectNeighbours() {
    adj_.assign(fresh_.size(), Adjacent{});
    for (const DagEdge& e : dag_.edges) {
      if (const int s = slot_[static_cast<size_t>(e.to)]; s >= 0) {
        adj_[static_cast<size_t>(s)].up.emplace_back(e.from, e.weight);
      }
      if (const int s = slot_[static_cast<size_t>(e.from)]; s >= 0) {
        adj_[static_cast<size_t>(s)].down.emplace_back(e.to, e.weight);
      }
    }
  }

  // The levels a job with neighbours `a` may take, [lo, hi] (lo > hi when none is left), given
  // the placed neighbours. Sets above_[b] (below_[b]) to the weight of the edges from placed
  // up-neighbours (to placed down-neighbours) on level b.
  std::pair<int, int> Range(const Adjacent& a) {
    int lo = 0;
    int hi = levels_ - 1;
    std::fill(above_.begin(), above_.end(), 0.0);
    std::fill(below_.begin(), below_.end(), 0.0);
    for (const auto& [u, w] : a.up) {
      if (!placed_[static_cast<size_t>(u)]) continue;
      const int b = block_[static_cast<size_t>(u)];
      lo = std::max(lo, b);
      above_[static_cast<size_t>(b)] += w;
    }
    for (const auto& [d, w] : a.down) {
      if (!placed_[static_cast<size_t>(d)]) continue;
      const int b = block_[static_cast<size_t>(d)];
      hi = std::min(hi, b);
      below_[static_cast<size_t>(b)] += w;
    }
    return {lo, hi};
  }

  // The level in [lo, hi] that cuts the most weight, the highest on ties; cut(b) = weight of
  // up-neighbours on levels < b + weight of down-neighbours on levels > b. REQUIRES: lo <= hi,
  // above_ and below_ set by Range.
  int BestLevel(int lo, int hi) const {
    double up_before = 0;  // Sum of above_[0..b).
    double down_after = 0;
    for (int b = lo + 1; b < levels_; ++b) down_after += below_[static_cast<size_t>(b)];
    for (int b = 0; b < lo; ++b) up_before += above_[static_cast<size_t>(b)];
    int best = lo;
    double best_cut = -1;
    for (int b = lo; b <= hi; ++b) {
      const double cut = up_before + down_after;
      if (cut > best_cut) {
        best_cut = cut;
        best = b;
      }
      up_before += above_[static_cast<size_t>(b)];
      if (b + 1 < levels_) down_after -= below_[static_cast<size_t>(b + 1)];
    }
    return best;
  }

  // Places v when no level is left (lo > hi): on `lo`, pushing placed lower-priority jobs down,
  // or on `hi`, pushing placed higher-priority jobs up, whichever moves fewer (down on ties).
  void Repair(int v, int lo, int hi) {
    if (out_start_.empty()) BuildAdjacency();
    Push(v, lo, /*down=*/true);
    const size_t down_moves = moves_.size();
    Undo();
    Push(v, hi, /*down=*/false);
    if (moves_.size() > down_moves) {
      Undo();
      Push(v, lo, /*down=*/true);
      block_[static_cast<size_t>(v)] = lo;
    } else {
      block_[static_cast<size_t>(v)] = hi;
    }
    stats_.levels_moved += static_cast<int>(moves_.size());
  }

  // The whole DAG's adjacency (CSR, both directions), for repairs; built at the first one.
  void BuildAdjacency() {
    const size_t n = placed_.size();
    out_start_.assign(n + 1, 0);
    in_start_.assign(n + 1, 0);
    for (const DagEdge& e : dag_.edges) {
      ++out_start_[static_cast<size_t>(e.from) + 1];
      ++in_start_[static_cast<size_t>(e.to) + 1];
    }
    for (size_t v = 0; v < n; ++v) {
      out_start_[v + 1] += out_start_[v];
      in_start_[v + 1] += in_start_[v];
    }
    out_to_.resize(dag_.edges.size());
    in_from_.resize(dag_.edges.size());
    std::vector<size_t> o(out_start_.begin(), out_start_.end() - 1);
    std::vector<size_t> i(in_start_.begin(), in_start_.end() - 1);
    for (const DagEdge& e : dag_.edges) {
      out_to_[o[static_cast<size_t>(e.from)]++] = e.to;
      in_from_[i[static_cast<size_t>(e.to)]++] = e.from;
    }
  }

  // Moves placed jobs reachable from `v` (down: along out-edges, their blocks raised to at least
  // `b`; up: along in-edges, lowered to at most `b`) so that v can take block b. moves_ receives
  // the moved jobs with their old blocks (Undo restores them).
  void Push(int v, int b, bool down) {
    moves_.clear();
    queue_.clear();
    queue_.emplace_back(v, b);
    while (!queue_.empty()) {
      const auto [x, bx] = queue_.back();
      queue_.pop_back();
      const size_t xi = static_cast<size_t>(x);
      const auto& start = down ? out_start_ : in_start_;
      const auto& next = down ? out_to_ : in_from_;
      for (size_t k = start[xi]; k < start[xi + 1]; ++k) {
        const int y = next[k];
        const size_t yi = static_cast<size_t>(y);
        if (!placed_[yi] || y == v) continue;
        const bool violates = down ? block_[yi] < bx : block_[yi] > bx;
        if (!violates) continue;
        moves_.emplace_back(y, block_[yi]);
        block_[yi] = bx;
        queue_.emplace_back(y, bx);
      }
    }
  }

  // Reverts the last Push, in reverse order.
  void Undo() {
    for (auto it = moves_.rbegin(); it != moves_.rend(); ++it) {
      block_[static_cast<size_t>(it->first)] = it->second;
    }
  }

  const ContentionDag& dag_;
  const std::vector<int>& rank_;
  const std::vector<int>& comp_of_;
  const int levels_;
  std::vector<int>& block_;
  ReplanStats& stats_;

  std::vector<int> slot_;          // Per job, its index in fresh_ and adj_; -1 when kept.
  std::vector<int> fresh_;         // The jobs to insert, in rank order once sorted.
  std::vector<Adjacent> adj_;      // Per job to insert.
  std::vector<uint8_t> placed_;    // Per job: kept or inserted so far.
  std::vector<double> above_;      // Per level: weight from placed up-neighbours there.
  std::vector<double> below_;      // Per level: weight to placed down-neighbours there.
  std::vector<size_t> out_start_;  // BuildAdjacency: out-edges of v are out_to_[out_start_[v]..).
  std::vector<size_t> in_start_;   // In-edges of v are in_from_[in_start_[v]..).
  std::vector<int> out_to_;
  std::vector<int> in_from_;
  std::vector<std::pair<int, int>> moves_;  // Push: (job, old block).
  std::vector<std::pair<int, int>> queue_;  // Push: (job, block it must respect).
};

// Per link, the positions of the jobs whose routed links use it (each job once per link).
std::vector<std::vector<int>> LinkMembers(const std::vector<std::vector<LinkId>>& links,
                                          size_t num_links) {
  std::vector<std::vector<int>> members(num_links);
  for (size_t j = 0; j < links.size(); ++j) {
    for (LinkId l : links[j]) {
      std::vector<int>& m = members[l.value()];
      if (m.empty() || m.back() != static_cast<int>(j)) m.push_back(static_cast<int>(j));
    }
  }
  return members;
}

// Stable runs' stage 4 input (PlannerOptions::stable): the contention DAG of the new job list,
// patched from the previous one instead of rebuilt (BuildContentionDag visits every pair of jobs
// on every shared link: ~0.5 s for the 1.7M edges of 10,000 jobs on an HPN pod). Kept jobs keep
// their links and their relative rank in a stable run, so the edges between them carry over,
// renumbered (new_of_old is monotone: kept jobs keep their relative input order); the edges of
// the other jobs are found through the per-link member lists. Equal to BuildContentionDag on the
// new list (tests/core/policies/stable_planner_test.cc checks it). `members` (the previous
// positions, LinkMembers of the previous list) is updated to the new ones.
ContentionDag PatchContentionDag(ContentionDag old_dag, const std::vector<int>& new_of_old,
                                 const std::vector<uint8_t>& kept,
                                 const std::vector<std::vector<LinkId>>& links,
                                 const std::vector<int>& rank,
                                 const std::vector<Intensity>& intensity,
                                 std::vector<std::vector<int>>& members) {
  const size_t n = kept.size();
  // Jobs before the first one gone keep their numbers (an arrival is appended: all of them).
  size_t first_change = 0;
  while (first_change < new_of_old.size() &&
         new_of_old[first_change] == static_cast<int>(first_change)) {
    ++first_change;
  }
  if (first_change < new_of_old.size()) {
    const int unchanged = static_cast<int>(first_change);
    for (std::vector<int>& m : members) {  // Renumber; drop jobs that are gone. Sorted.
      if (m.empty() || m.back() < unchanged) continue;
      auto w = std::lower_bound(m.begin(), m.end(), unchanged);
      for (auto r = w; r != m.end(); ++r) {
        const int now = new_of_old[static_cast<size_t>(*r)];
        if (now >= 0) *w++ = now;
      }
      m.erase(w, m.end());
    }
  }
  std::vector<uint8_t> touched(members.size(), 0);
  for (size_t j = 0; j < n; ++j) {
    if (kept[j]) continue;
    for (LinkId l : links[j]) {
      std::vector<int>& m = members[l.value()];
      if (!m.empty() && m.back() == static_cast<int>(j)) continue;
      m.push_back(static_cast<int>(j));
      touched[l.value()] = 1;
    }
  }
  for (size_t l = 0; l < members.size(); ++l) {
    if (touched[l]) std::sort(members[l].begin(), members[l].end());
  }
  ContentionDag dag;
  dag.num_nodes = static_cast<int>(n);
  std::vector<DagEdge> carried;
  if (first_change == new_of_old.size()) {
    carried = std::move(old_dag.edges);  // Every edge, numbered as before.
  } else {
    carried.reserve(old_dag.edges.size());
    for (const DagEdge& e : old_dag.edges) {
      const int a = new_of_old[static_cast<size_t>(e.from)];
      const int b = new_of_old[static_cast<size_t>(e.to)];
      if (a >= 0 && b >= 0) carried.push_back(DagEdge{a, b, e.weight});
    }
  }
  std::vector<DagEdge> added;
  std::vector<int> stamp(n, -1);
  std::vector<int> link_seen(members.size(), -1);
  for (size_t v = 0; v < n; ++v) {
    if (kept[v]) continue;
    const int iv = static_cast<int>(v);
    for (LinkId l : links[v]) {
      if (link_seen[l.value()] == iv) continue;  // links[v] repeats a link once per flow hop.
      link_seen[l.value()] = iv;
      for (int u : members[l.value()]) {
        const size_t ui = static_cast<size_t>(u);
        // A pair of two new jobs is found from the first of them.
        if (u == iv || stamp[ui] == iv || (!kept[ui] && u < iv)) continue;
        stamp[ui] = iv;
        if (rank[ui] < rank[v]) {
          added.push_back(DagEdge{u, iv, intensity[ui]});
        } else {
          added.push_back(DagEdge{iv, u, intensity[v]});
        }
      }
    }
  }
  const auto by_ends = [](const DagEdge& x, const DagEdge& y) {
    return x.from != y.from ? x.from < y.from : x.to < y.to;
  };
  std::sort(added.begin(), added.end(), by_ends);
  if (added.empty()) {
    dag.edges = std::move(carried);
    return dag;
  }
  dag.edges.resize(carried.size() + added.size());
  std::merge(carried.begin(), carried.end(), added.begin(), added.end(), dag.edges.begin(),
             by_ends);
  return dag;
}

}  // namespace

// What is kept across runs: the previous plan, and what path selection reads of it.
struct IncrementalPlanner::State {
  explicit State(const Topology& topo)
      : load(topo), link_groups(topo.num_links()), link_stamp(topo.num_links(), 0) {}

  struct Job {
    JobSpec spec;
    JobRouting routing;              // Flows, path sets, and the last plan's joint choice.
    std::vector<size_t> flow_order;  // FlowRoutingOrder(routing).
    // Every link path selection reads for this job, as head/tail links and switch-path groups
    // (one group per SwitchPaths), each sorted and unique: the job's choice depends only on
    // the load of these links when its turn comes.
    std::vector<uint32_t> access;
    std::vector<int> groups;
    PriorityInput prio;
    JobPlan plan;        // The last plan's entry (k, rank, level, flows with ports, ...).
    int unpinned = 0;    // Unpinned flows of plan.flows.
    int path_pos = -1;   // Position in the last stage-3 order.
    int rank = 0;        // Last rank.
    int component = -1;  // Last DAG component (index into component_size), -1 without edges.
    int block = 0;       // Last level - first_job_level.
  };

  // ---- The previous plan ----
  bool valid = false;  // False: no previous plan (everything is new).
  // Stable mode only: the previous plan's whole contention DAG and LinkMembers of `links`.
  ContentionDag dag;
  std::vector<std::vector<int>> link_members;
  std::vector<Job> jobs;                       // In the previous input order.
  std::vector<std::vector<LinkId>> links;      // RoutedLinks of each job (the DAG's input).
  std::unordered_map<std::string, int> index;  // Job id -> position in `jobs`.
  int reference = -1;                          // Position of the reference job.
  std::vector<size_t> component_size;          // Per previous DAG component.

  // ---- Stage-3 dirty tracking (topology-level, kept across runs) ----
  // A link is dirty when its load at some job's turn may differ from the previous run's at that
  // job's turn; a group is dirty when one of its links is. Stamps equal to `epoch` mean dirty in
  // the current run, so nothing is cleared between runs.
  LinkLoad load;
  std::unordered_map<const SwitchPaths*, int> group_id;
  std::vector<std::vector<int>> link_groups;    // Per link, the groups containing it.
  std::vector<const SwitchPaths*> group_paths;  // Per group id (GroupOf).
  std::vector<uint32_t> group_stamp;
  std::vector<uint32_t> link_stamp;
  uint32_t epoch = 0;

  int GroupOf(const SwitchPaths* sp) {
    const auto [it, inserted] = group_id.emplace(sp, static_cast<int>(group_stamp.size()));
    if (inserted) {
      group_stamp.push_back(0);
      group_paths.push_back(sp);
      for (LinkId l : sp->links) {
        std::vector<int>& groups = link_groups[l.value()];
        if (groups.empty() || groups.back() != it->second) groups.push_back(it->second);
      }
    }
    return it->second;
  }

  // Fills job.access and job.groups from its path sets.
  void Describe(Job& job) {
    job.access.clear();
    job.groups.clear();
    for (const PathSet* ps : job.routing.paths) {
      for (const PathSet::Segment& seg : ps->segments()) {
        for (LinkId l : seg.head) job.access.push_back(l.value());
        for (LinkId l : seg.tail) job.access.push_back(l.value());
        if (seg.mid != nullptr && seg.mid->hops > 0) job.groups.push_back(GroupOf(seg.mid));
      }
    }
    std::sort(job.access.begin(), job.access.end());
    job.access.erase(std::unique(job.access.begin(), job.access.end()), job.access.end());
    std::sort(job.groups.begin(), job.groups.end());
    job.groups.erase(std::unique(job.groups.begin(), job.groups.end()), job.groups.end());
  }

  void NewEpoch() {
    if (++epoch == 0) {  // Wrapped: clear every stamp once.
      std::fill(link_stamp.begin(), link_stamp.end(), 0);
      std::fill(group_stamp.begin(), group_stamp.end(), 0);
      epoch = 1;
    }
  }
  void MarkDirty(LinkId l) {
    if (link_stamp[l.value()] == epoch) return;
    link_stamp[l.value()] = epoch;
    for (int g : link_groups[l.value()]) group_stamp[static_cast<size_t>(g)] = epoch;
  }
  void MarkPathDirty(const PathSet& ps, size_t path) {
    ps.ForEachLink(path, [this](LinkId l) { MarkDirty(l); });
  }
  bool Dirty(const Job& job) const {
    for (uint32_t l : job.access) {
      if (link_stamp[l] == epoch) return true;
    }
    for (int g : job.groups) {
      if (group_stamp[static_cast<size_t>(g)] == epoch) return true;
    }
    return false;
  }
};

// What one run's stages share (the sizes are the number of jobs, n, unless noted).
struct IncrementalPlanner::RunState {
  using Job = State::Job;

  explicit RunState(const std::vector<JobSpec>& job_specs)
      : specs(job_specs), n(job_specs.size()) {}

  const std::vector<JobSpec>& specs;
  const size_t n;
  size_t old_n = 0;  // Jobs of the previous plan; 0 without one.
  StageMarks t;
  ReplanStats stats;

  // A stable first plan may start from the plan in force (Seed): the seeds, by job id.
  std::vector<PlanSeed> seeds;
  std::unordered_map<std::string_view, const PlanSeed*> seed_of;
  const std::string* seed_reference = nullptr;  // The id of the seed marked reference, if any.

  // ---- Stages 0-1: jobs matched with the previous plan ----
  std::vector<int> prev;  // Position in State::jobs of the same, unchanged job; -1 for the rest.
  std::vector<size_t> fresh;  // The rest (new and changed jobs), ascending.
  // Per fresh job: its traffic and standalone paths, profile and priority input.
  std::vector<JobRouting> fresh_routing;
  std::vector<JobPlan> fresh_plan;
  std::vector<PriorityInput> fresh_prio;

  // ---- The new job list ----
  std::vector<uint8_t> claimed;  // Per previous job (old_n): still in the list, unchanged.
  std::vector<uint8_t> kept;     // The unchanged jobs.
  // Stages 3-4 for everyone: no previous plan, or kept jobs in another relative order (ties in
  // every stage are broken by input position).
  bool redo_all = false;
  std::vector<Job> next;                        // Becomes State::jobs at the commit.
  std::vector<std::vector<LinkId>> next_links;  // RoutedLinks of each job.

  // ---- Stable mode: the jobs that keep their paths and their levels (kept jobs in a stable
  // run, seeded jobs in a seeded first plan), and those levels as blocks ----
  std::vector<uint8_t> keep_paths;
  std::vector<uint8_t> keep_level;
  std::vector<int> kept_block;
  bool seeded_run = false;  // Some seed was used.

  // ---- Stage 2 ----
  int ref = -1;           // The reference job.
  bool same_ref = false;  // The previous plan's reference job, unchanged.
  std::vector<int> rank;

  // ---- Stage 3 ----
  bool search_all = false;     // Every job's paths are searched.
  bool stable_run = false;     // keep_paths and keep_level apply.
  bool all_dirty = false;      // Every component is compressed.
  std::vector<uint8_t> moved;  // Kept jobs whose chosen paths changed.

  // ---- Stage 4 ----
  Plan plan;
  std::vector<std::vector<int>> link_members;  // Stable mode: LinkMembers(next_links).
  std::vector<int> comp_of;                    // DagComponents of the whole DAG.
  std::vector<std::vector<int>> comps;
  // Per component: 0 keeps its levels, 1 is compressed, 2 has levels inserted (stable runs).
  std::vector<uint8_t> dirty;
  std::vector<int> block;   // Per job: level - first_job_level.
  ContentionDag whole_dag;  // Stable mode keeps it for the next run's patch.
};

IncrementalPlanner::IncrementalPlanner(const Topology& topo, const PlannerOptions& options,
                                       const Clock& clock, PathFinder& finder,
                                       SourcePortCache& ports)
    : topo_(topo), options_(options), clock_(clock), finder_(finder), ports_(ports) {}

IncrementalPlanner::~IncrementalPlanner() = default;

void IncrementalPlanner::Reset() {
  state_.reset();
  seeds_.clear();
}

void IncrementalPlanner::Seed(std::vector<PlanSeed> seeds) { seeds_ = std::move(seeds); }

bool IncrementalPlanner::HasPlan() const { return state_ != nullptr && state_->valid; }

Result<Plan> IncrementalPlanner::Run(const std::vector<JobSpec>& specs, ReplanStats& stats) {
  RunState run(specs);
  run.t.start = clock_.Now();
  if (state_ == nullptr) state_ = std::make_unique<State>(topo_);
  run.old_n = state_->valid ? state_->jobs.size() : 0;
  run.stats.jobs = static_cast<int>(run.n);
  if (!state_->valid) run.stats.full_replan = "first plan";
  TakeSeeds(run);
  CRUX_RETURN_IF_ERROR(MatchPrevious(run));
  CRUX_RETURN_IF_ERROR(Profile(run));
  // Nothing below fails on valid input; should it anyway, the state is dropped (next run full):
  // AssembleJobs has moved the kept jobs out of it.
  AssembleJobs(run);
  KeepSeededPaths(run);
  Prioritise(run);
  if (Status s = ReplayPaths(run); !s.ok()) {
    state_.reset();
    return s;
  }
  if (Status s = RecompressChanged(run); !s.ok()) {
    state_.reset();
    return s;
  }
  EmitFlows(run);
  Commit(run);
  stats = std::move(run.stats);
  run.plan.timing = run.t.Timings();
  return std::move(run.plan);
}

void IncrementalPlanner::TakeSeeds(RunState& run) {
  run.seeds = std::move(seeds_);
  seeds_.clear();
  if (options_.stable && !state_->valid) {
    for (const PlanSeed& seed : run.seeds) {
      run.seed_of.emplace(seed.id, &seed);
      if (seed.reference) run.seed_reference = &seed.id;
    }
  }
}

// ---- 0. match with the previous plan; expand the traffic of new and changed jobs ----
Status IncrementalPlanner::MatchPrevious(RunState& run) {
  const State& st = *state_;
  run.prev.assign(run.n, -1);
  std::unordered_set<std::string_view> ids;
  ids.reserve(run.n);
  for (size_t j = 0; j < run.n; ++j) {
    const JobSpec& spec = run.specs[j];
    if (!ids.insert(spec.id).second) {
      return AlreadyExistsError("duplicate job id '" + spec.id + "'");
    }
    bool known = false;
    if (st.valid) {
      const auto it = st.index.find(spec.id);
      if (it != st.index.end()) {
        known = true;
        if (SamePlanningSpec(st.jobs[static_cast<size_t>(it->second)].spec, spec)) {
          run.prev[j] = it->second;
          continue;
        }
      }
    }
    ++(known ? run.stats.changed : run.stats.added);
    auto flows = ExpandTraffic(topo_, spec);
    if (!flows.ok()) return flows.status().WithContext("job '" + spec.id + "'");
    run.fresh.push_back(j);
    run.fresh_routing.emplace_back().flows = std::move(flows).value();
  }
  run.t.traffic = clock_.Now();
  return Status::Ok();
}

// ---- 1. profile the new and changed jobs ----
Status IncrementalPlanner::Profile(RunState& run) {
  run.fresh_plan.resize(run.fresh.size());
  run.fresh_prio.resize(run.fresh.size());
  std::vector<size_t> scratch;
  for (size_t i = 0; i < run.fresh.size(); ++i) {
    CRUX_RETURN_IF_ERROR(ProfileJob(topo_, finder_, run.specs[run.fresh[i]], options_,
                                    run.fresh_routing[i], run.fresh_plan[i], run.fresh_prio[i],
                                    state_->load, scratch));
  }
  run.stats.profiled = static_cast<int>(run.fresh.size());
  run.t.profile = clock_.Now();
  return Status::Ok();
}

// The new job list: kept entries are moved out of State::jobs, whose unclaimed entries (removed
// jobs and the old versions of changed ones) stay readable until the commit.
void IncrementalPlanner::AssembleJobs(RunState& run) {
  State& st = *state_;
  const size_t n = run.n;
  run.claimed.assign(run.old_n, 0);
  run.kept.assign(n, 0);
  bool order_kept = true;
  {
    int last = -1;
    size_t num_kept = 0;
    for (size_t j = 0; j < n; ++j) {
      if (run.prev[j] < 0) continue;
      run.kept[j] = 1;
      run.claimed[static_cast<size_t>(run.prev[j])] = 1;
      if (run.prev[j] < last) order_kept = false;
      last = run.prev[j];
      ++num_kept;
    }
    run.stats.removed = static_cast<int>(run.old_n - num_kept) - run.stats.changed;
  }
  if (st.valid && !order_kept) run.stats.full_replan = "input order of kept jobs changed";
  run.redo_all = !run.stats.full_replan.empty();

  run.next.resize(n);
  run.next_links.resize(n);
  for (size_t j = 0, i = 0; j < n; ++j) {
    RunState::Job& job = run.next[j];
    if (run.kept[j]) {
      job = std::move(st.jobs[static_cast<size_t>(run.prev[j])]);
      run.next_links[j] = std::move(st.links[static_cast<size_t>(run.prev[j])]);
      continue;
    }
    job.spec = run.specs[j];
    job.routing = std::move(run.fresh_routing[i]);
    job.prio = run.fresh_prio[i];
    job.plan = std::move(run.fresh_plan[i]);
    st.Describe(job);
    ++i;
  }
}

// A seeded first plan: the jobs whose seeded flows match theirs and whose seeded paths are still
// among their equal-cost paths keep those paths, and the seeded level when it is a job level.
void IncrementalPlanner::KeepSeededPaths(RunState& run) {
  const size_t n = run.n;
  run.keep_paths.assign(n, 0);
  run.keep_level.assign(n, 0);
  run.kept_block.assign(n, 0);
  const int usable_levels = UsableLevels(options_);
  for (size_t j = 0; !run.seed_of.empty() && j < n; ++j) {
    const auto it = run.seed_of.find(run.next[j].spec.id);
    if (it == run.seed_of.end()) continue;
    const PlanSeed& seed = *it->second;
    JobRouting& r = run.next[j].routing;
    if (seed.flows.size() != r.flows.size()) continue;
    std::vector<size_t> choice(r.flows.size());
    bool ok = true;
    for (size_t f = 0; ok && f < r.flows.size(); ++f) {
      const PlanSeed::Flow& sf = seed.flows[f];
      ok = sf.src == r.flows[f].src && sf.dst == r.flows[f].dst;
      std::optional<size_t> index;
      if (ok) index = r.paths[f]->IndexOf(sf.path);
      ok = ok && index.has_value();
      if (ok) choice[f] = *index;
    }
    if (!ok) continue;
    r.choice = std::move(choice);
    FlowRoutingOrder(r, run.next[j].flow_order);
    run.keep_paths[j] = 1;
    ++run.stats.seeded_paths;
    if (seed.level.has_value()) {
      const int b = *seed.level - options_.reserved_high_levels;
      if (b >= 0 && b < usable_levels) {
        run.keep_level[j] = 1;
        run.kept_block[j] = b;
        ++run.stats.seeded_levels;
      }
    }
  }
  run.seeded_run = run.stats.seeded_paths > 0;
  if (run.seeded_run) run.stats.full_replan = "first plan (seeded)";
}

// ---- 2. priority ----
void IncrementalPlanner::Prioritise(RunState& run) {
  const State& st = *state_;
  const size_t n = run.n;
  std::vector<PriorityInput> prio(n);
  for (size_t j = 0; j < n; ++j) prio[j] = run.next[j].prio;
  int ref = SelectReference(prio);
  // Stable mode keeps the reference job while it is planned unchanged, even when another job now
  // carries more traffic (near-ties at the top flip with every batch of reports): a new
  // reference changes every k_j, hence the rank order, and re-plans every job - at 10,000 jobs
  // nearly every run did. A seeded first plan takes the seeds' reference (the plan in force's).
  // The job's own changed profile (every k_j changes anyway: the full re-plan, whose reference
  // is SelectReference's), its departure or a re-optimisation (Reset) choose again.
  if (options_.stable && (st.valid ? st.reference >= 0 : run.seed_reference != nullptr)) {
    for (size_t j = 0; j < run.n; ++j) {
      const bool kept =
          st.valid ? run.prev[j] == st.reference : run.next[j].spec.id == *run.seed_reference;
      if (!kept) continue;
      if (prio[j].has_traffic) ref = static_cast<int>(j);
      break;
    }
  }
  run.ref = ref;
  run.same_ref = st.valid && (ref < 0 ? st.reference < 0
                                      : run.prev[static_cast<size_t>(ref)] >= 0 &&
                                            run.prev[static_cast<size_t>(ref)] == st.reference);
  run.stats.reference_changed = st.valid && !run.same_ref;
  std::vector<double> priority(n);
  std::vector<double> k_values(n);
  for (size_t j = 0; j < n; ++j) {
    RunState::Job& job = run.next[j];
    if (!run.kept[j] || !run.same_ref) {
      Correction c;
      if (job.prio.has_traffic && static_cast<int>(j) != ref) {
        c = CompareWithReference(job.prio.timing, prio[static_cast<size_t>(ref)].timing,
                                 options_.pair_sim);
        ++run.stats.corrections;
      }
      job.plan.k = c.k;
      job.plan.pair_gain = c.gain_job;
      job.plan.pair_loss = c.loss_reference;
    }
    k_values[j] = job.plan.k;
    priority[j] = PriorityValue(job.prio, job.plan.k);
  }
  std::vector<int> rank_order;
  RankByPriority(prio, k_values, priority, run.rank, rank_order);
  for (size_t j = 0; j < n; ++j) {
    JobPlan& jp = run.next[j].plan;
    jp.priority = priority[j];
    jp.rank = run.rank[j];
    jp.reference = static_cast<int>(j) == ref;
  }
  run.t.priority = clock_.Now();
}

// ---- 3. path selection: replay ----
Status IncrementalPlanner::ReplayPaths(RunState& run) {
  State& st = *state_;
  const size_t n = run.n;
  const std::vector<size_t> order = ChooseReplay(run);
  // Jobs of the previous plan that are gone (or changed), by their old turn.
  std::vector<std::pair<int, size_t>> gone;
  for (size_t o = 0; o < run.old_n; ++o) {
    if (!run.claimed[o]) gone.emplace_back(st.jobs[o].path_pos, o);
  }
  std::sort(gone.begin(), gone.end());
  st.NewEpoch();
  run.moved.assign(n, 0);
  std::vector<size_t> old_choice;
  size_t next_gone = 0;
  // Stable runs search only the jobs that do not keep their paths, and every one of them sees
  // the load of every job that keeps its paths, before or after it in the order: the full plan's
  // greedy rule ignores the jobs ranked below because they will route around the searched one,
  // but a kept job stays where it is, so a searched job that ignored it would share its links
  // until the next re-optimisation (docs/algorithms.md section 9). The kept loads are committed
  // first, in path order; those of kept jobs that cross no link a searched job reads are not
  // committed at all (KeptLoadsRead; empty: commit them all), nor any when no job is searched.
  bool any_searched = false;
  for (size_t j = 0; j < n; ++j) {
    run.next[j].routing.iterations_per_sec = 1.0 / run.next[j].plan.period.ToSeconds();
    any_searched |= run.stable_run && run.keep_paths[j] == 0;
  }
  if (any_searched) {
    const std::vector<uint8_t> read = KeptLoadsRead(run);
    for (size_t j : order) {
      if (run.keep_paths[j] && (read.empty() || read[j])) {
        CommitJobPaths(run.next[j].routing, run.next[j].flow_order, st.load);
      }
    }
  }
  for (size_t p = 0; p < n; ++p) {
    const size_t j = order[p];
    RunState::Job& job = run.next[j];
    if (run.stable_run && run.keep_paths[j]) {  // Keeps its paths; its load is committed.
      job.path_pos = static_cast<int>(p);
      continue;
    }
    if (!run.search_all && run.kept[j]) {
      // Loads of jobs that came before this one in the previous run and are gone now.
      for (; next_gone < gone.size() && gone[next_gone].first < job.path_pos; ++next_gone) {
        for (LinkId l : st.links[gone[next_gone].second]) st.MarkDirty(l);
      }
    }
    if (run.search_all || !run.kept[j] || st.Dirty(job)) {
      if (Status s = SearchPaths(run, j, old_choice); !s.ok()) {
        st.load.Reset();
        return s;
      }
    } else {
      CommitJobPaths(job.routing, job.flow_order, st.load);
    }
    job.path_pos = static_cast<int>(p);
  }
  st.load.Reset();
  for (size_t j = 0; j < n; ++j) {
    if (!run.kept[j] || run.moved[j]) run.next_links[j] = RoutedLinks(run.next[j].routing);
  }
  run.t.paths = clock_.Now();
  return Status::Ok();
}

// A stable run (not a seeded first plan) over the previous plan's link members: per job, 1 for the
// kept jobs that cross a link some searched job reads (its head and tail links and the links of
// its switch-path groups: State::Job::access and groups). A searched job's choice depends only
// on those links' loads, and the load of a link is the sum over the jobs crossing it, added in
// path order: committing only these kept jobs (in the same order) gives every such link the very
// same load, bit for bit, at every searched job's turn. The searched jobs' own loads are
// committed by their search. Empty when there are no link members to consult (commit all).
std::vector<uint8_t> IncrementalPlanner::KeptLoadsRead(const RunState& run) const {
  const State& st = *state_;
  if (run.seeded_run || !st.valid || st.link_members.size() != topo_.num_links()) return {};
  const size_t n = run.n;
  std::vector<int> new_of_old(run.old_n, -1);
  for (size_t j = 0; j < n; ++j) {
    if (run.keep_paths[j] && run.kept[j]) {
      new_of_old[static_cast<size_t>(run.prev[j])] = static_cast<int>(j);
    }
  }
  std::vector<uint8_t> read(n, 0);
  std::vector<uint8_t> seen_link(topo_.num_links(), 0);
  std::vector<uint8_t> seen_group(st.group_paths.size(), 0);
  const auto visit = [&](uint32_t l) {
    if (seen_link[l]) return;
    seen_link[l] = 1;
    for (int o : st.link_members[l]) {
      const int j = new_of_old[static_cast<size_t>(o)];
      if (j >= 0) read[static_cast<size_t>(j)] = 1;
    }
  };
  for (size_t j = 0; j < n; ++j) {
    if (run.keep_paths[j]) continue;
    const RunState::Job& job = run.next[j];
    for (uint32_t l : job.access) visit(l);
    for (int g : job.groups) {
      if (seen_group[static_cast<size_t>(g)]) continue;
      seen_group[static_cast<size_t>(g)] = 1;
      for (LinkId l : st.group_paths[static_cast<size_t>(g)]->links) visit(l.value());
    }
  }
  return read;
}

// Stage 3's order, and how much of the previous choices it can reuse: sets search_all,
// stable_run and all_dirty (and, when it starts a stable run, what keeps its paths and levels).
std::vector<size_t> IncrementalPlanner::ChooseReplay(RunState& run) {
  const size_t n = run.n;
  std::vector<JobPlan> order_keys;  // PathSelectionOrder reads intensity and GPUs only.
  order_keys.resize(n);
  for (size_t j = 0; j < n; ++j) {
    order_keys[j].intensity = run.next[j].plan.intensity;
    order_keys[j].gpus = run.next[j].plan.gpus;
  }
  std::vector<size_t> order = PathSelectionOrder(order_keys, run.rank, options_.path_order);
  run.search_all = run.redo_all;
  if (!run.search_all) {  // Kept jobs must keep their relative order (PathOrder::kPriority may
                          // not).
    int last = -1;
    for (size_t j : order) {
      if (!run.kept[j]) continue;
      if (run.next[j].path_pos < last) {
        run.search_all = true;
        break;
      }
      last = run.next[j].path_pos;
    }
  }
  // Stable mode: kept jobs keep paths and levels, unless the reference changed (every k_j, so
  // the rank order of kept jobs may change) or kept jobs' path order changed: then stages 3-4
  // are redone for everyone, from scratch (the previous choices and levels are not those of a
  // full re-plan, so nothing of them can be reused exactly).
  run.stable_run = run.seeded_run;
  run.all_dirty = run.redo_all;
  if (options_.stable && !run.redo_all) {
    if (run.same_ref && !run.search_all) {
      run.stable_run = true;
      for (size_t j = 0; j < n; ++j) {
        run.keep_paths[j] = run.keep_level[j] = run.kept[j];
        run.kept_block[j] = run.next[j].block;
      }
    } else {
      run.stats.full_replan =
          run.same_ref ? "path order of kept jobs changed" : "reference changed";
      run.search_all = true;
      run.all_dirty = true;
    }
  }
  return order;
}

// Searches job j's paths again (its turn in the replay) and marks the links whose load changed
// with it dirty. `old_choice` is scratch. Errors name the job.
Status IncrementalPlanner::SearchPaths(RunState& run, size_t j, std::vector<size_t>& old_choice) {
  State& st = *state_;
  RunState::Job& job = run.next[j];
  const bool kept = run.kept[j] != 0;
  ++run.stats.paths_searched;
  if (kept) old_choice = job.routing.choice;
  const Status s = SelectJobPaths(finder_, job.routing, st.load, job.flow_order);
  if (!s.ok()) return s.WithContext("job '" + job.spec.id + "'");
  const std::vector<size_t>& choice = job.routing.choice;
  for (size_t f = 0; f < choice.size(); ++f) {
    if (kept && old_choice[f] == choice[f]) continue;
    if (kept) run.moved[j] = 1;
    if (run.search_all) continue;
    if (kept) st.MarkPathDirty(*job.routing.paths[f], old_choice[f]);
    st.MarkPathDirty(*job.routing.paths[f], choice[f]);
  }
  if (run.moved[j]) ++run.stats.paths_changed;
  return Status::Ok();
}

// ---- 4. contention DAG + compression of the components that changed ----
Status IncrementalPlanner::RecompressChanged(RunState& run) {
  Plan& plan = run.plan;
  plan = EmptyPlan(options_);
  plan.reference_job = run.ref;
  BuildDag(run);
  run.comps = DagComponents(plan.dag, run.comp_of);
  run.stats.components = static_cast<int>(run.comps.size());
  FindChangedComponents(run);
  run.block.assign(run.n, 0);
  if (run.stable_run) InsertStableLevels(run);
  CRUX_RETURN_IF_ERROR(CompressChanged(run));
  plan.cut_weight = CutWeight(plan.dag, run.block);  // What CompressPriorities reports for it.
  for (const DagEdge& e : plan.dag.edges) plan.total_edge_weight += e.weight;
  if (options_.stable) run.whole_dag = plan.dag;
  LimitOutEdges(plan.dag, run.rank, options_.dag_edges_per_job);
  run.t.compression = clock_.Now();
  return Status::Ok();
}

// The whole contention DAG: patched from the previous one in a stable run with few new jobs,
// built afresh otherwise.
void IncrementalPlanner::BuildDag(RunState& run) {
  const size_t n = run.n;
  std::vector<Intensity> intensity(n);
  for (size_t j = 0; j < n; ++j) intensity[j] = run.next[j].plan.intensity;
  // Patching costs what the new jobs' edges cost; past a quarter of the jobs new, rebuilding is
  // as cheap.
  size_t num_fresh = 0;
  for (size_t j = 0; j < n; ++j) num_fresh += run.kept[j] ? 0 : 1;
  if (run.stable_run && !run.seeded_run && num_fresh * 4 <= n) {
    std::vector<int> new_of_old(run.old_n, -1);
    for (size_t j = 0; j < n; ++j) {
      if (run.kept[j]) new_of_old[static_cast<size_t>(run.prev[j])] = static_cast<int>(j);
    }
    run.link_members = std::move(state_->link_members);
    // The previous DAG is replaced at the commit (or dropped with the state if the run fails).
    run.plan.dag = PatchContentionDag(std::move(state_->dag), new_of_old, run.kept, run.next_links,
                                      run.rank, intensity, run.link_members);
  } else {
    run.plan.dag = BuildContentionDag(run.next_links, run.rank, intensity, topo_.num_links());
    if (options_.stable) run.link_members = LinkMembers(run.next_links, topo_.num_links());
  }
}

// Sets run.dirty: in a stable run, 2 for the components with a job whose level is not kept;
// otherwise 1 for those that must be compressed again, 0 for those whose levels carry over.
void IncrementalPlanner::FindChangedComponents(RunState& run) {
  const State& st = *state_;
  run.dirty.assign(run.comps.size(), 0);
  std::vector<int> by_rank;
  for (size_t c = 0; c < run.comps.size(); ++c) {
    const std::vector<int>& members = run.comps[c];
    if (run.stable_run) {  // Kept levels stay; the others are inserted below.
      for (int v : members) {
        if (!run.keep_level[static_cast<size_t>(v)]) run.dirty[c] = 2;
      }
      continue;
    }
    bool clean = !run.all_dirty;
    // The same members as one previous component, none new or moved, at the same position
    // among the components (the position seeds the component's random orders).
    const int old_comp = clean ? run.next[static_cast<size_t>(members[0])].component : -1;
    clean = clean && old_comp == static_cast<int>(c) &&
            st.component_size[static_cast<size_t>(old_comp)] == members.size();
    for (size_t i = 0; clean && i < members.size(); ++i) {
      const size_t v = static_cast<size_t>(members[i]);
      clean = run.kept[v] && !run.moved[v] && run.next[v].component == old_comp;
    }
    if (clean) {  // ... in the same relative rank order.
      const std::vector<int>& rank = run.rank;
      by_rank.assign(members.begin(), members.end());
      std::sort(by_rank.begin(), by_rank.end(), [&rank](int a, int b) {
        return rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
      });
      for (size_t i = 1; clean && i < by_rank.size(); ++i) {
        clean = run.next[static_cast<size_t>(by_rank[i - 1])].rank <
                run.next[static_cast<size_t>(by_rank[i])].rank;
      }
    }
    run.dirty[c] = !clean;
  }
}

// A stable run's levels: kept levels stay, even for jobs without edges now (no churn). Between
// two kept jobs an edge is unchanged in a stable run (same paths, same relative rank), but not
// always after a seed (the ranks are new): a component where kept levels contradict the DAG is
// compressed again (dirty 1). The other jobs are inserted.
void IncrementalPlanner::InsertStableLevels(RunState& run) {
  const ContentionDag& dag = run.plan.dag;
  for (size_t v = 0; v < run.n; ++v) {
    if (run.keep_level[v]) run.block[v] = run.kept_block[v];
  }
  for (const DagEdge& e : dag.edges) {
    const size_t a = static_cast<size_t>(e.from);
    const size_t b = static_cast<size_t>(e.to);
    if (run.keep_level[a] && run.keep_level[b] && run.block[a] > run.block[b]) {
      run.dirty[static_cast<size_t>(run.comp_of[a])] = 1;
    }
  }
  LevelInserter(dag, run.rank, run.comp_of, run.plan.usable_levels, run.block, run.stats)
      .Run(run.keep_level, run.dirty);
}

// Compresses the components marked 1 together, as one sub-DAG, each with its position in the
// whole DAG; outside stable runs the components marked 0 take their previous levels.
Status IncrementalPlanner::CompressChanged(RunState& run) {
  const size_t n = run.n;
  const ContentionDag& dag = run.plan.dag;
  std::vector<int> local(n, -1);
  ContentionDag sub;
  CompressionOptions copt = MakeCompressionOptions(options_, run.plan.usable_levels);
  for (size_t v = 0; v < n; ++v) {
    const int c = run.comp_of[v];
    if (c < 0) continue;
    if (run.dirty[static_cast<size_t>(c)] != 1) {
      if (!run.stable_run) run.block[v] = run.next[v].block;
      continue;
    }
    local[v] = sub.num_nodes++;
    copt.component_index.push_back(c);
  }
  for (size_t c = 0; c < run.comps.size(); ++c) {
    if (run.dirty[c] != 1) continue;
    ++run.stats.components_compressed;
    run.stats.jobs_compressed += static_cast<int>(run.comps[c].size());
  }
  if (sub.num_nodes == 0) return Status::Ok();
  for (const DagEdge& e : dag.edges) {  // Sorted by (from, to); `local` is monotone.
    const int from = local[static_cast<size_t>(e.from)];
    if (from >= 0) sub.edges.push_back(DagEdge{from, local[static_cast<size_t>(e.to)], e.weight});
  }
  CRUX_ASSIGN_OR_RETURN(const Compression comp, CompressPriorities(sub, copt));
  for (size_t v = 0; v < n; ++v) {
    if (local[v] >= 0) run.block[v] = comp.level[static_cast<size_t>(local[v])];
  }
  return Status::Ok();
}

// ---- 5. flows, paths and source ports ----
void IncrementalPlanner::EmitFlows(RunState& run) {
  Plan& plan = run.plan;
  plan.jobs.resize(run.n);
  for (size_t j = 0; j < run.n; ++j) {
    RunState::Job& job = run.next[j];
    job.plan.level = plan.first_job_level + run.block[j];
    if (!run.kept[j] || run.moved[j]) {
      job.unpinned = 0;
      job.plan.flows = ports_.FlowPlans(job.routing, job.unpinned);
    }
    plan.unpinned_flows += job.unpinned;
    plan.jobs[j] = job.plan;
  }
  run.t.end = clock_.Now();
}

// ---- commit: this run's jobs become the state the next run starts from ----
void IncrementalPlanner::Commit(RunState& run) {
  State& st = *state_;
  const size_t n = run.n;
  for (size_t j = 0; j < n; ++j) {
    run.next[j].rank = run.rank[j];
    run.next[j].component = run.comp_of[j];
    run.next[j].block = run.block[j];
  }
  st.jobs = std::move(run.next);
  st.links = std::move(run.next_links);
  st.dag = std::move(run.whole_dag);
  st.link_members = std::move(run.link_members);
  st.index.clear();
  st.index.reserve(n);
  for (size_t j = 0; j < n; ++j) st.index.emplace(st.jobs[j].spec.id, static_cast<int>(j));
  st.reference = run.ref;
  st.component_size.resize(run.comps.size());
  for (size_t c = 0; c < run.comps.size(); ++c) st.component_size[c] = run.comps[c].size();
  st.valid = true;
}

}  // namespace crux::core
