// The policies of policy.h. Every baseline runs the planner's own stages 0-1 (traffic
// expansion and standalone profiling, planner.h) so that I_j, t_j and periods are identical
// across policies; they differ only in paths, ranks, levels and time shifts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/plan/compression.h"
#include "crux/core/plan/path_selection.h"
#include "crux/core/plan/planner.h"
#include "crux/core/plan/priority.h"
#include "crux/core/policies/policies.h"

namespace crux::core::policies {

int HeadDistinctLevel(int rank, int levels) { return std::min(rank, levels - 1); }

uint16_t EcmpSourcePort(uint64_t seed, std::string_view job_id, size_t flow_index,
                        PortRange range) {
  const uint64_t h =
      Mix64(Mix64(seed ^ 0x5eed'ec3b'0000'0000ULL) ^ StableHash(job_id.data(), job_id.size()) ^
            Mix64(static_cast<uint64_t>(flow_index) + 1));
  const uint64_t span = static_cast<uint64_t>(range.max) - range.min + 1;
  return static_cast<uint16_t>(range.min + h % span);
}

std::vector<LinkShare> JobLinkShares(const Topology& topo, const JobRouting& routing) {
  std::unordered_map<uint32_t, LinkShare> by_link;
  for (size_t f = 0; f < routing.flows.size(); ++f) {
    const double bits = routing.flows[f].bytes.ToDouble() * 8.0;
    routing.paths[f]->ForEachLink(routing.choice[f], [&](LinkId l) {
      LinkShare& s = by_link[l.value()];
      s.link = l.value();
      s.seconds += bits / topo.link(l).capacity.ToBitsPerSec();
      ++s.flows;
    });
  }
  std::vector<LinkShare> out;
  out.reserve(by_link.size());
  for (const auto& [l, share] : by_link) out.push_back(share);
  std::sort(out.begin(), out.end(),
            [](const LinkShare& x, const LinkShare& y) { return x.link < y.link; });
  return out;
}

Duration RoutedCommTime(const Topology& topo, const JobRouting& routing) {
  double t = 0;
  for (const LinkShare& s : JobLinkShares(topo, routing)) t = std::max(t, s.seconds);
  return Duration::Seconds(t);
}

double CommBudgetSeconds(const PairJob& timing) {
  const double c = std::max(0.0, timing.compute.ToSeconds());
  const double o = std::clamp(timing.overlap_start, 0.0, 1.0);
  return std::max((1 - o) * c, std::max(0.0, timing.comm.ToSeconds()));
}

bool PriorityCannotHelp(const std::vector<LinkShare>& u, double budget_u_s,
                        const std::vector<LinkShare>& v) {
  size_t i = 0;
  size_t k = 0;
  while (i < u.size() && k < v.size()) {
    if (u[i].link < v[k].link) {
      ++i;
    } else if (v[k].link < u[i].link) {
      ++k;
    } else {
      const LinkShare& a = u[i];
      const double nu = std::max(1, a.flows);
      const double nv = std::max(0, v[k].flows);
      if (a.seconds * (nu + nv) / nu > budget_u_s) return false;
      ++i;
      ++k;
    }
  }
  return true;
}

PairOutcome SimulatePairFair(const PairJob& a, const PairJob& b, const PairSimOptions& options) {
  struct Timing {
    double c = 0, ready = 0, t = 0, p = 0;
  };
  const auto timing = [](const PairJob& j) {
    Timing x;
    x.c = std::max(0.0, j.compute.ToSeconds());
    x.t = std::max(0.0, j.comm.ToSeconds());
    const double o = std::isfinite(j.overlap_start) ? std::clamp(j.overlap_start, 0.0, 1.0) : 1.0;
    x.ready = o * x.c;
    x.p = std::max(x.c, x.ready + x.t);
    return x;
  };
  const Timing tm[2] = {timing(a), timing(b)};
  PairOutcome out;
  const double slow = std::max(tm[0].p, tm[1].p);
  const double ws = std::max(0, options.warmup_periods) * slow;
  const double we = ws + std::max(0, options.measure_periods) * slow;
  if (!(slow > 0) || !(we > ws)) return out;
  struct State {
    double start = 0;      // Of the current iteration.
    double rem = 0;        // Seconds of exclusive link time still to send.
    bool started = false;  // Communication ready.
    bool done = false;     // Communication sent.
  };
  State st[2];
  double compute[2] = {0, 0};
  double sent[2] = {0, 0};
  const auto begin = [&](int i, double now) {
    st[i] = State{now, tm[i].t, false, false};
    compute[i] += std::max(0.0, std::min(now + tm[i].c, we) - std::max(now, ws));
  };
  begin(0, 0.0);
  begin(1, 0.0);
  double now = 0;
  constexpr double kEps = 1e-12;
  int events = 0;
  while (now < we && events < options.max_events) {
    ++events;
    for (int i = 0; i < 2; ++i) {  // Settle every change at `now` (ready, sent, next iteration).
      for (int guard = 0; guard < 4; ++guard) {
        State& x = st[i];
        if (!x.started && now >= x.start + tm[i].ready - kEps) {
          x.started = true;
          if (!(x.rem > kEps)) x.done = true;
        }
        if (x.started && !x.done && !(x.rem > kEps)) x.done = true;
        if (x.done && now >= x.start + tm[i].c - kEps && now > x.start) {
          begin(i, now);
          continue;
        }
        break;
      }
    }
    const bool active[2] = {st[0].started && !st[0].done, st[1].started && !st[1].done};
    const double rate = active[0] && active[1] ? 0.5 : 1.0;
    double next = we;
    for (int i = 0; i < 2; ++i) {
      const State& x = st[i];
      if (!x.started) {
        next = std::min(next, x.start + tm[i].ready);
      } else if (!x.done) {
        next = std::min(next, now + x.rem / rate);
      } else {
        next = std::min(next, std::max(now, x.start + tm[i].c));
      }
    }
    if (!(next > now)) next = now + kEps;  // Below the resolution of `now`: step on.
    const double lo = std::max(now, ws);
    const double hi = std::min(next, we);
    for (int i = 0; i < 2; ++i) {
      if (!active[i]) continue;
      st[i].rem -= rate * (next - now);
      if (hi > lo) sent[i] += rate * (hi - lo);
    }
    now = next;
  }
  const double end = std::min(now, we);
  if (!(end > ws)) return out;
  out.window_s = end - ws;
  // Compute was booked per iteration up to `we`; scale down when the event cap stopped early.
  const double scale = end < we ? out.window_s / (we - ws) : 1.0;
  out.compute_a_s = compute[0] * scale;
  out.compute_b_s = compute[1] * scale;
  out.transmit_a_s = sent[0];
  out.transmit_b_s = sent[1];
  return out;
}

bool StrictOrderPays(const PairJob& u, int gpus_u, const PairJob& v, int gpus_v,
                     const PairSimOptions& options) {
  const auto value = [&](const PairOutcome& o) {
    if (!(o.window_s > 0)) return 0.0;
    return (std::max(0, gpus_u) * o.compute_a_s + std::max(0, gpus_v) * o.compute_b_s) / o.window_s;
  };
  const double strict = value(SimulatePair(u, v, /*a_first=*/true, options));
  const double fair = value(SimulatePairFair(u, v, options));
  return strict > fair * (1 + 1e-9);
}

void LiftGuardedLevels(const ContentionDag& dag, const std::vector<uint8_t>& guarded,
                       const std::vector<int>& rank, std::vector<int>& level) {
  const size_t n = static_cast<size_t>(dag.num_nodes);
  std::vector<std::vector<size_t>> in(n);  // Edge indices into each node.
  for (size_t e = 0; e < dag.edges.size(); ++e) in[dag.edges[e].to].push_back(e);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return rank[a] < rank[b]; });
  for (int v : order) {
    int target = 0;
    for (size_t e : in[v]) {
      const int x = dag.edges[e].from;
      const bool keep_cut = !guarded[e] && level[x] < level[v];
      target = std::max(target, keep_cut ? level[x] + 1 : level[x]);
    }
    level[v] = std::min(level[v], target);
  }
}

PriorityInput RetimedPriorityInput(const PriorityInput& standalone, Flops work, Duration comm) {
  const double t = comm.ToSeconds();
  if (!(t > 0) || !standalone.has_traffic) return standalone;
  PriorityInput in = standalone;
  in.timing.comm = comm;
  const double c = in.timing.compute.ToSeconds();
  const double period = std::max(c, in.timing.overlap_start * c + t);
  in.bytes_per_sec = period > 0 ? in.bytes_per_iteration / period : 0.0;
  in.intensity = work.value() / t;
  return in;
}

namespace {

// Everything a policy decides on, after stages 0-1.
struct Work {
  const std::vector<JobSpec>& specs;
  Plan& plan;
  std::vector<JobRouting>& routing;  // Standalone paths on entry.
  std::vector<PriorityInput>& prio_in;
};

// Shared skeleton: validation, stages 0-1, the policy's Decide, flows, timings.
class BasePolicy : public SchedulingPolicy {
 public:
  BasePolicy(std::string name, const Topology& topo, const PolicyOptions& options,
             const Clock* clock)
      : name_(std::move(name)),
        topo_(topo),
        options_(options),
        clock_(clock),
        finder_(topo),
        hash_model_(0) {}

  std::string_view name() const override { return name_; }

  Result<Plan> Schedule(const std::vector<JobSpec>& specs) final {
    const PlannerOptions& o = options_.planner;
    CRUX_RETURN_IF_ERROR(ValidatePlannerOptions(o));
    sports_.clear();
    const Duration t0 = clock_->Now();
    Plan plan;
    plan.levels = o.levels;
    plan.first_job_level = o.reserved_high_levels;
    plan.usable_levels = o.levels - o.reserved_high_levels - o.reserved_low_levels;
    CRUX_ASSIGN_OR_RETURN(std::vector<JobRouting> routing, ExpandJobs(topo_, specs));
    const Duration t1 = clock_->Now();
    std::vector<PriorityInput> prio_in;
    CRUX_RETURN_IF_ERROR(ProfileJobs(topo_, finder_, specs, o, routing, plan.jobs, prio_in));
    const Duration t2 = clock_->Now();
    // Defaults: input order, top job level, standalone k = 1, P = 0.
    for (size_t j = 0; j < plan.jobs.size(); ++j) {
      plan.jobs[j].rank = static_cast<int>(j);
      plan.jobs[j].level = plan.first_job_level;
    }
    Work w{specs, plan, routing, prio_in};
    CRUX_RETURN_IF_ERROR(Decide(w));
    const Duration t3 = clock_->Now();
    for (size_t j = 0; j < plan.jobs.size(); ++j) {
      std::vector<FlowPlan> flows = MakeFlowPlans(routing[j]);
      if (!sports_.empty()) {
        for (size_t f = 0; f < flows.size(); ++f) flows[f].udp_sport = sports_[j][f];
      }
      plan.jobs[j].flows = std::move(flows);
    }
    sports_.clear();
    const Duration t4 = clock_->Now();
    plan.timing.traffic = t1 - t0;
    plan.timing.profile = t2 - t1;
    plan.timing.path_selection = t3 - t2;  // The policy's own decisions (paths, order, levels).
    plan.timing.ports = t4 - t3;
    plan.timing.total = t4 - t0;
    return plan;
  }

 protected:
  // Sets paths (routing[j].choice), ranks, levels and time shifts.
  virtual Status Decide(Work& w) = 0;

  const PlannerOptions& popts() const { return options_.planner; }
  const Topology& topo() const { return topo_; }

  // Least-congested joint routing (planner stage 3) of every job in `order`.
  Status RouteJointly(Work& w, const std::vector<size_t>& order) {
    LinkLoad load(topo_);
    return SelectPaths(finder_, order, w.routing, load);
  }

  // Crux's path order: decreasing I_j, ties more GPUs (planner.h, PathOrder::kIntensity), or
  // the given ranks for PathOrder::kPriority.
  std::vector<size_t> CruxPathOrder(const Work& w, const std::vector<int>* rank) const {
    const size_t n = w.plan.jobs.size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    if (popts().path_order == PathOrder::kPriority && rank != nullptr) {
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return (*rank)[a] < (*rank)[b]; });
    } else {
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const JobPlan& x = w.plan.jobs[a];
        const JobPlan& y = w.plan.jobs[b];
        if (x.intensity != y.intensity) return x.intensity > y.intensity;
        return x.gpus > y.gpus;
      });
    }
    return order;
  }

  // Hash-based ECMP: each flow's path is the one HashEcmpModel (fabric hash seed 0, the
  // planner's default model) routes its source port EcmpSourcePort(seed, job, flow) to. The
  // ports are reported in FlowPlan::udp_sport.
  Status RouteEcmp(Work& w) {
    const size_t n = w.plan.jobs.size();
    sports_.assign(n, {});
    for (size_t j = 0; j < n; ++j) {
      JobRouting& r = w.routing[j];
      sports_[j].resize(r.flows.size());
      for (size_t f = 0; f < r.flows.size(); ++f) {
        const FlowDemand& d = r.flows[f];
        const uint16_t sport = EcmpSourcePort(popts().seed, w.plan.jobs[j].id, f, popts().ports);
        sports_[j][f] = sport;
        if (r.paths[f]->size() <= 1) {
          r.choice[f] = 0;
          continue;
        }
        const RouteKey key{d.src.value(), d.dst.value(), sport};
        auto it = route_cache_.find(key);
        if (it == route_cache_.end()) {
          auto idx = hash_model_.Route(finder_, d.src, d.dst, sport);
          if (!idx.ok()) return idx.status().WithContext("job '" + w.plan.jobs[j].id + "'");
          if (route_cache_.size() >= kMaxCachedRoutes) route_cache_.clear();
          it = route_cache_.emplace(key, idx.value()).first;
        }
        r.choice[f] = it->second;
      }
    }
    return Status::Ok();
  }

  // Crux's priorities (planner stage 2): k_j, P_j, rank, reference.
  PriorityAssignment CruxPriorities(Work& w) const {
    PriorityAssignment prio = AssignPriorities(w.prio_in, popts().pair_sim);
    w.plan.reference_job = prio.reference;
    for (size_t j = 0; j < w.plan.jobs.size(); ++j) {
      JobPlan& jp = w.plan.jobs[j];
      jp.k = prio.k[j];
      jp.pair_gain = prio.correction[j].gain_job;
      jp.pair_loss = prio.correction[j].loss_reference;
      jp.priority = prio.priority[j];
      jp.rank = prio.rank[j];
      jp.reference = static_cast<int>(j) == prio.reference;
    }
    return prio;
  }

  // Every job's priority input with its communication timed on its current paths (the
  // guarded variants, policies.h).
  std::vector<PriorityInput> RoutedInputs(const Work& w) const {
    std::vector<PriorityInput> in(w.prio_in.size());
    for (size_t j = 0; j < in.size(); ++j) {
      in[j] = RetimedPriorityInput(w.prio_in[j], w.plan.jobs[j].work,
                                   RoutedCommTime(topo_, w.routing[j]));
    }
    return in;
  }

  // Contention DAG over the current paths and ranks, Algorithm 1 onto the usable levels
  // (planner stage 4).
  Status Compress(Work& w) const { return Compress(w, nullptr); }

  // With `routed` (the guarded variants, policies.h): edges on which strict priority is not
  // predicted to pay (StrictOrderPays, PriorityCannotHelp on the routed timings) weigh 0 in the
  // compression, and LiftGuardedLevels lifts their lower job afterwards.
  Status Compress(Work& w, const std::vector<PriorityInput>* routed) const {
    const size_t n = w.plan.jobs.size();
    std::vector<std::vector<LinkId>> job_links(n);
    std::vector<Intensity> intensity(n);
    std::vector<int> rank(n);
    for (size_t j = 0; j < n; ++j) {
      job_links[j] = RoutedLinks(w.routing[j]);
      intensity[j] = w.plan.jobs[j].intensity;
      rank[j] = w.plan.jobs[j].rank;
    }
    w.plan.dag = BuildContentionDag(job_links, rank, intensity, topo_.num_links());
    CompressionOptions copt;
    copt.levels = w.plan.usable_levels;
    copt.topo_orders = popts().topo_orders;
    copt.seed = popts().seed;
    copt.max_exact_nodes = popts().max_exact_component;
    std::vector<uint8_t> guarded;
    if (routed != nullptr) {
      std::vector<std::vector<LinkShare>> shares(n);
      for (size_t j = 0; j < n; ++j) shares[j] = JobLinkShares(topo_, w.routing[j]);
      guarded.resize(w.plan.dag.edges.size());
      for (size_t e = 0; e < guarded.size(); ++e) {
        DagEdge& edge = w.plan.dag.edges[e];
        const auto u = static_cast<size_t>(edge.from);
        const auto v = static_cast<size_t>(edge.to);
        const PriorityInput& ru = (*routed)[u];
        const PriorityInput& rv = (*routed)[v];
        const bool pays = !PriorityCannotHelp(shares[u], CommBudgetSeconds(ru.timing), shares[v]) &&
                          StrictOrderPays(ru.timing, ru.gpus, rv.timing, rv.gpus, popts().pair_sim);
        guarded[e] = pays ? 0 : 1;
        if (guarded[e]) edge.weight = 0;
      }
    }
    CRUX_ASSIGN_OR_RETURN(Compression comp, CompressPriorities(w.plan.dag, copt));
    if (routed != nullptr) {
      LiftGuardedLevels(w.plan.dag, guarded, rank, comp.level);
      comp.cut_weight = CutWeight(w.plan.dag, comp.level);
    }
    w.plan.cut_weight = comp.cut_weight;
    w.plan.total_edge_weight = 0;
    for (const DagEdge& e : w.plan.dag.edges) w.plan.total_edge_weight += e.weight;
    for (size_t j = 0; j < n; ++j) w.plan.jobs[j].level = w.plan.first_job_level + comp.level[j];
    LimitOutEdges(w.plan.dag, rank, popts().dag_edges_per_job);
    return Status::Ok();
  }

  // rank[j] from an order (order[r] = job index).
  static void RanksFromOrder(Work& w, const std::vector<size_t>& order) {
    for (size_t r = 0; r < order.size(); ++r) w.plan.jobs[order[r]].rank = static_cast<int>(r);
  }

  // level = first_job_level + min(rank, U - 1).
  static void HeadDistinctLevels(Work& w) {
    for (JobPlan& jp : w.plan.jobs) {
      jp.level = w.plan.first_job_level + HeadDistinctLevel(jp.rank, w.plan.usable_levels);
    }
  }

  PathFinder& finder() { return finder_; }

 private:
  struct RouteKey {
    uint32_t src;
    uint32_t dst;
    uint16_t sport;
    friend bool operator==(const RouteKey& a, const RouteKey& b) {
      return a.src == b.src && a.dst == b.dst && a.sport == b.sport;
    }
  };
  struct RouteKeyHash {
    size_t operator()(const RouteKey& k) const {
      return static_cast<size_t>(
          Mix64((static_cast<uint64_t>(k.src) << 32 | k.dst) ^ (uint64_t{k.sport} << 17)));
    }
  };
  static constexpr size_t kMaxCachedRoutes = 1 << 20;

  std::string name_;
  const Topology& topo_;
  PolicyOptions options_;
  const Clock* clock_;
  PathFinder finder_;
  HashEcmpModel hash_model_;
  // Per job and flow, the ECMP source port of the plan being built (empty: none).
  std::vector<std::vector<uint16_t>> sports_;
  // (src, dst, sport) -> path index under the hash model; kept across Schedule calls.
  std::unordered_map<RouteKey, size_t, RouteKeyHash> route_cache_;
};

// `crux`: the planner, unchanged. With PolicyOptions::incremental (the default) the planner
// keeps its per-job state across Schedule calls and recomputes only what the event touched; the
// plans are exactly those of a full re-plan (planner.h, docs/algorithms.md §8).
class CruxPolicy final : public SchedulingPolicy {
 public:
  CruxPolicy(const Topology& topo, const PolicyOptions& options, const Clock* clock)
      : planner_(topo, CruxOptions(options), clock) {}
  std::string_view name() const override { return "crux"; }
  Result<Plan> Schedule(const std::vector<JobSpec>& jobs) override { return planner_.Run(jobs); }
  void Reoptimize() override { planner_.ResetIncrementalState(); }
  bool WantsSeed() const override { return planner_.WantsSeed(); }
  void Seed(std::vector<PlanSeed> seeds) override { planner_.Seed(std::move(seeds)); }
  const ReplanStats* last_replan() const override { return &planner_.last_replan(); }

 private:
  static PlannerOptions CruxOptions(const PolicyOptions& options) {
    PlannerOptions o = options.planner;
    o.resolve_ports = options.resolve_ports;
    o.incremental = options.incremental;
    o.stable = options.stable;
    return o;
  }
  Planner planner_;
};

// `crux-ps-pa`: Crux paths and priorities, no compression: level = first_job_level + rank.
class CruxPsPaPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    const PriorityAssignment prio = CruxPriorities(w);
    CRUX_RETURN_IF_ERROR(RouteJointly(w, CruxPathOrder(w, &prio.rank)));
    for (JobPlan& jp : w.plan.jobs) jp.level = w.plan.first_job_level + jp.rank;
    return Status::Ok();
  }
};

// `crux-ps`: Crux's path selection alone (paths chosen jointly in decreasing I_j, as the
// planner), every job on the default level (first_job_level): the ablation that isolates what
// the priorities add.
class CruxPsPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    const PriorityAssignment prio = CruxPriorities(w);
    return RouteJointly(w, CruxPathOrder(w, &prio.rank));
  }
};

// `crux-pa`: Crux priorities and compression over ECMP hash paths.
class CruxPaPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    CruxPriorities(w);
    CRUX_RETURN_IF_ERROR(RouteEcmp(w));
    return Compress(w);
  }
};

// `crux-guard`: Crux's priorities and paths (chosen jointly in decreasing I_j, or by rank with
// PathOrder::kPriority, as the planner), then the guarded compression (policies.h).
class CruxGuardPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    const PriorityAssignment prio = CruxPriorities(w);
    CRUX_RETURN_IF_ERROR(RouteJointly(w, CruxPathOrder(w, &prio.rank)));
    const std::vector<PriorityInput> routed = RoutedInputs(w);
    return Compress(w, &routed);
  }
};

// `crux-pa-guard`: Crux's priorities, ECMP hash paths, then the guarded compression.
class CruxPaGuardPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    CruxPriorities(w);
    CRUX_RETURN_IF_ERROR(RouteEcmp(w));
    const std::vector<PriorityInput> routed = RoutedInputs(w);
    return Compress(w, &routed);
  }
};

// `ecmp`: hash paths, input-order ranks, one level.
class EcmpPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override { return RouteEcmp(w); }
};

// `sincronia`: ECMP paths, BSSI order over links-as-ports, head-distinct levels.
class SincroniaPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    CRUX_RETURN_IF_ERROR(RouteEcmp(w));
    const size_t n = w.plan.jobs.size();
    // D[l][j] = bits of job j per iteration over link l / B_l (one coflow = one iteration).
    std::vector<std::vector<PortDemand>> demand(n);
    std::unordered_map<uint32_t, double> per_link;
    for (size_t j = 0; j < n; ++j) {
      per_link.clear();
      const JobRouting& r = w.routing[j];
      for (size_t f = 0; f < r.flows.size(); ++f) {
        const double bits = r.flows[f].bytes.ToDouble() * 8.0;
        r.paths[f]->ForEachLink(r.choice[f], [&](LinkId l) {
          per_link[l.value()] += bits / topo().link(l).capacity.ToBitsPerSec();
        });
      }
      demand[j].reserve(per_link.size());
      for (const auto& [l, t] : per_link) {
        if (t > 0) demand[j].push_back(PortDemand{l, t});
      }
      std::sort(demand[j].begin(), demand[j].end(),
                [](const PortDemand& a, const PortDemand& b) { return a.port < b.port; });
    }
    const std::vector<int> order = BssiOrder(demand, std::vector<double>(n, 1.0));
    std::vector<size_t> ord(order.begin(), order.end());
    RanksFromOrder(w, ord);
    HeadDistinctLevels(w);
    return Status::Ok();
  }
};

// `taccl`: least-congested paths per job in input (arrival) order; longer paths first.
class TacclPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    const size_t n = w.plan.jobs.size();
    std::vector<size_t> arrival(n);
    std::iota(arrival.begin(), arrival.end(), size_t{0});
    CRUX_RETURN_IF_ERROR(RouteJointly(w, arrival));
    // Distance of a job = the most hops any of its flows travels.
    std::vector<int> hops(n, 0);
    for (size_t j = 0; j < n; ++j) {
      for (const PathSet* p : w.routing[j].paths) hops[j] = std::max(hops[j], p->hops());
    }
    std::vector<size_t> order = arrival;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return hops[a] > hops[b]; });
    RanksFromOrder(w, order);
    // Distance classes (equal hop counts share a level), longest first, clamped to U levels.
    int cls = -1;
    int prev_hops = -1;
    for (size_t idx : order) {
      if (hops[idx] != prev_hops) {
        ++cls;
        prev_hops = hops[idx];
      }
      w.plan.jobs[idx].level = w.plan.first_job_level + std::min(cls, w.plan.usable_levels - 1);
    }
    return Status::Ok();
  }
};

// `cassini`: ECMP paths, one level, circle / affinity-graph time shifts.
class CassiniPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    CRUX_RETURN_IF_ERROR(RouteEcmp(w));
    const size_t n = w.plan.jobs.size();
    std::vector<CassiniJob> cj(n);
    std::unordered_map<uint32_t, double> per_link;
    for (size_t j = 0; j < n; ++j) {
      const JobPlan& jp = w.plan.jobs[j];
      const JobSpec& spec = w.specs[j];
      CassiniJob& c = cj[j];
      c.period_s = jp.period.ToSeconds();
      c.comm_s = jp.comm_time.ToSeconds();
      c.comm_start_s = spec.overlap_start * spec.compute_time.ToSeconds();
      if (c.comm_start_s >= c.period_s) c.comm_start_s = 0;
      if (c.comm_s <= 0) continue;
      per_link.clear();
      const JobRouting& r = w.routing[j];
      for (size_t f = 0; f < r.flows.size(); ++f) {
        const double bits = r.flows[f].bytes.ToDouble() * 8.0;
        r.paths[f]->ForEachLink(r.choice[f], [&](LinkId l) { per_link[l.value()] += bits; });
      }
      std::vector<std::pair<uint32_t, double>> sorted(per_link.begin(), per_link.end());
      std::sort(sorted.begin(), sorted.end());
      for (const auto& [l, bits] : sorted) {
        c.links.push_back(l);
        c.bps.push_back(bits / c.comm_s);  // Up-phase rate: the iteration's bits over t_j.
      }
    }
    if (capacity_.size() != topo().num_links()) {
      capacity_.clear();
      for (const Link& l : topo().links()) capacity_.push_back(l.capacity.ToBitsPerSec());
    }
    const std::vector<double> shifts = CassiniShifts(cj, capacity_);
    for (size_t j = 0; j < n; ++j) {
      Duration s = Duration::Seconds(shifts[j]);
      if (s >= w.plan.jobs[j].period) s = Duration::Zero();
      w.plan.jobs[j].time_shift = s;
    }
    return Status::Ok();
  }

 private:
  std::vector<double> capacity_;
};

// `fixed`: Crux paths, ranks from JobSpec::fixed_rank.
class FixedPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;

 protected:
  Status Decide(Work& w) override {
    const size_t n = w.plan.jobs.size();
    for (size_t j = 0; j < n; ++j) {
      const auto& fr = w.specs[j].fixed_rank;
      if (fr.has_value() && *fr < 0) {
        return InvalidArgumentError("job '" + w.specs[j].id + "': fixed_rank: must be >= 0 (got " +
                                    std::to_string(*fr) + ")");
      }
    }
    CRUX_RETURN_IF_ERROR(RouteJointly(w, CruxPathOrder(w, nullptr)));
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto& x = w.specs[a].fixed_rank;
      const auto& y = w.specs[b].fixed_rank;
      if (x.has_value() != y.has_value()) return x.has_value();
      return x.has_value() && *x < *y;
    });
    RanksFromOrder(w, order);
    HeadDistinctLevels(w);
    return Status::Ok();
  }
};

// `ideal`: every job on its standalone paths, one level, isolated.
class IdealPolicy final : public BasePolicy {
 public:
  using BasePolicy::BasePolicy;
  bool isolates_jobs() const override { return true; }

 protected:
  Status Decide(Work&) override { return Status::Ok(); }  // Stage 1 left the standalone paths.
};

}  // namespace

Result<std::unique_ptr<SchedulingPolicy>> Make(std::string_view name, const Topology& topo,
                                               const PolicyOptions& options, const Clock* clock) {
  const std::string n(name);
  if (n == "crux") return std::unique_ptr<SchedulingPolicy>(new CruxPolicy(topo, options, clock));
  std::unique_ptr<SchedulingPolicy> p;
  if (n == "crux-ps-pa") p = std::make_unique<CruxPsPaPolicy>(n, topo, options, clock);
  if (n == "crux-ps") p = std::make_unique<CruxPsPolicy>(n, topo, options, clock);
  if (n == "crux-pa") p = std::make_unique<CruxPaPolicy>(n, topo, options, clock);
  if (n == "crux-guard") p = std::make_unique<CruxGuardPolicy>(n, topo, options, clock);
  if (n == "crux-pa-guard") p = std::make_unique<CruxPaGuardPolicy>(n, topo, options, clock);
  if (n == "ecmp") p = std::make_unique<EcmpPolicy>(n, topo, options, clock);
  if (n == "sincronia") p = std::make_unique<SincroniaPolicy>(n, topo, options, clock);
  if (n == "taccl") p = std::make_unique<TacclPolicy>(n, topo, options, clock);
  if (n == "cassini") p = std::make_unique<CassiniPolicy>(n, topo, options, clock);
  if (n == "fixed") p = std::make_unique<FixedPolicy>(n, topo, options, clock);
  if (n == "ideal") p = std::make_unique<IdealPolicy>(n, topo, options, clock);
  if (p == nullptr) {
    std::string valid;
    for (const std::string& v : PolicyNames()) valid += (valid.empty() ? "" : ", ") + v;
    return InvalidArgumentError("policy: unknown policy '" + n + "' (valid: " + valid + ")");
  }
  return p;
}

}  // namespace crux::core::policies
