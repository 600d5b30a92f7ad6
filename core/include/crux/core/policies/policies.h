// Internal header of the scheduling policies behind policy.h: the factory MakePolicy delegates
// to, and the policy-specific algorithms exposed for unit tests (BSSI, the CASSINI circle
// method, level mappings, ECMP source ports). docs/policies.md explains every model choice.
//
// Thread-safety: pure functions, except the policies themselves (see policy.h).
#ifndef CRUX_CORE_POLICIES_POLICIES_H_
#define CRUX_CORE_POLICIES_POLICIES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/plan/compression.h"
#include "crux/core/plan/path_selection.h"
#include "crux/core/plan/priority.h"
#include "crux/core/policies/policy.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/topology.h"

namespace crux::core::policies {

// Makes the policy `name`. REQUIRES: `name` is one of PolicyNames(), options validated,
// clock non-null. Unknown names get kInvalidArgument listing the valid ones.
Result<std::unique_ptr<SchedulingPolicy>> Make(std::string_view name, const Topology& topo,
                                               const PolicyOptions& options, const Clock* clock);

// ---- Level mappings (level 0 = highest; `levels` = usable levels U >= 1) ----

// Sincronia's implementation maps rank r to hardware priority max(U - 1 - r, 0) where U - 1 is
// the highest; in Crux's convention (0 = highest) that is min(r, U - 1): the first U - 1 ranks
// get distinct levels and every later rank shares the lowest one. Also used by `fixed`.
// REQUIRES: rank >= 0, levels >= 1.
int HeadDistinctLevel(int rank, int levels);

// ---- Sincronia: BSSI (Bottleneck-Select-Scale-Iterate) ----

// D[p][c] entries of one coflow: processing time (seconds) of coflow c on port p.
struct PortDemand {
  uint32_t port = 0;
  double time = 0;  // > 0.
};

// Orders coflows with BSSI (docs/policies.md): repeatedly take the port with the largest total
// remaining processing time (ties: lowest port id), put LAST the coflow with the smallest
// w_c / D[b][c] among those using it (equivalently the largest D[b][c] / w_c; ties: the highest
// index goes last), scale the other coflows' weights w_c -= w_last * D[b][c] / D[b][last]
// (clamped at 0), remove it, repeat. Coflows with no demand at all go after every other, in
// index order. Returns the order, first (highest priority) to last.
// REQUIRES: weights.size() == demand.size(), weights > 0.
std::vector<int> BssiOrder(const std::vector<std::vector<PortDemand>>& demand,
                           std::vector<double> weights);

// ---- CASSINI: circle / affinity-graph time shifts ----

// One job's periodic demand, as CASSINI's circle sees it: every `period_s` the job transmits
// for `comm_s` seconds starting `comm_start_s` after its iteration starts, at `bps` on each
// link in `links` (one rate per link, same order).
struct CassiniJob {
  double period_s = 0;      // > 0.
  double comm_start_s = 0;  // In [0, period_s).
  double comm_s = 0;        // In [0, period_s].
  std::vector<uint32_t> links;
  std::vector<double> bps;
};

struct CassiniOptions {
  int shift_candidates = 72;    // Candidate shifts per job and link: period * i / 72 (5 degrees).
  int samples = 360;            // Points at which a link's unified circle is evaluated.
  int max_period_multiple = 8;  // The unified circle is LCM(periods) (periods quantised to
                                // 1/100 of the shortest), capped at this many longest periods.
};

// Time shift (seconds, in [0, period_s)) per job. Links carried by two or more jobs are the
// affinity graph's link nodes. BFS over that graph from the job with the largest summed demand
// (ties: lowest index), shift 0; reaching a link with unplaced jobs, their shifts are chosen one
// at a time (largest demand first) to minimise, over the link's unified circle, the excess
// demand over capacity and then the overlap with the jobs already placed there, which stay
// fixed. Jobs sharing no link with anyone get 0. `capacity_bps[l]` is link l's capacity.
std::vector<double> CassiniShifts(const std::vector<CassiniJob>& jobs,
                                  const std::vector<double>& capacity_bps,
                                  const CassiniOptions& options = {});

// ---- The guarded variants `crux-guard` and `crux-pa-guard` (docs/policies.md) ----
//
// Crux's own priorities (k_j, P_j, the order), and levels only where strict priority is
// predicted to pay. For a contention edge u -> v (u ranked above v) the compression may put v
// below u only if both tests below say strict priority can help; otherwise the edge is
// "guarded": it weighs 0 in the compression and LiftGuardedLevels puts v on u's level wherever
// the other edges allow (fair sharing between the two). Both tests use each job's timing on the
// paths it is given (RoutedCommTime): on ECMP paths a job's own flows can collide and its
// transmission takes longer than on its standalone paths.
//  1. StrictOrderPays: the pair simulation of u and v on their routed timings gives more
//     GPU-weighted computation with u first (SimulatePair) than on one level (SimulatePairFair).
//  2. !PriorityCannotHelp: on some link u shares with v, u's share of the link under max-min
//     with v's flows would not let it send its bits within its budget (the pair simulation
//     assumes the shared link carries each job's whole t_j; a job whose bottleneck is another
//     link gains nothing from priority on this one).

// What one job sends over one directed link per iteration.
struct LinkShare {
  uint32_t link = 0;
  double seconds = 0;  // Bits of the job's flows over the link / capacity.
  int flows = 0;       // The job's flows over the link.
  friend bool operator==(const LinkShare&, const LinkShare&) = default;
};

// Per link the job's routed flows use, sorted by link id. REQUIRES: routing.paths/choice set.
std::vector<LinkShare> JobLinkShares(const Topology& topo, const JobRouting& routing);

// Seconds the job's communication of one iteration needs on its routed paths when it runs
// alone on them: the largest LinkShare::seconds. On the standalone paths this is the profiled
// t_j; on ECMP paths whose flows collide it is larger. REQUIRES: routing.paths/choice filled.
Duration RoutedCommTime(const Topology& topo, const JobRouting& routing);

// The priority input of a job whose communication needs `comm` per iteration (instead of the
// standalone t_j): timing.comm = comm, bytes per second over the period max(c, o*c + comm),
// I_j = work / comm. A job with comm <= 0 keeps its input (no traffic stays no traffic).
PriorityInput RetimedPriorityInput(const PriorityInput& standalone, Flops work, Duration comm);

// Budget of a job's communication: from the moment it is ready (o * c into the iteration) to the
// end of the iteration, max((1 - o) * c, comm) with the timing's comm. Sending within it costs
// the job nothing.
double CommBudgetSeconds(const PairJob& timing);

// True if strict priority of u over v cannot shorten u's iterations: on every link both use,
// u's share of the link under max-min with v's flows, at least n_u / (n_u + n_v) of it, lets u
// send its bits within `budget_u_s`: seconds_u * (n_u + n_v) / n_u <= budget_u_s. (Pairwise: a
// third job on the link is not counted.) Links used by one of them only are ignored; no shared
// link -> true. Both lists sorted by link.
bool PriorityCannotHelp(const std::vector<LinkShare>& u, double budget_u_s,
                        const std::vector<LinkShare>& v);

// The pair of SimulatePair on one link shared max-min fairly instead of by strict priority:
// while both transmit each gets half the link, otherwise the one transmitting gets all of it.
// Same iteration model, windows and PairOutcome fields (a = first argument); an event is one
// change of state of either job, and options.max_events caps them (the window then ends where
// the simulation stopped). Deterministic.
PairOutcome SimulatePairFair(const PairJob& a, const PairJob& b,
                             const PairSimOptions& options = {});

// True if strict priority of u over v yields more GPU-weighted computation than sharing one
// level (max-min) in the pair simulations: gpus_u * compute_u + gpus_v * compute_v per second
// of the measurement window, SimulatePair(u first) against SimulatePairFair, by more than a
// relative 1e-9 (a tie is no gain).
bool StrictOrderPays(const PairJob& u, int gpus_u, const PairJob& v, int gpus_v,
                     const PairSimOptions& options = {});

// Post-pass of a compression (levels relative to the first job level, valid for `dag`): every
// node v moves up to the highest level that keeps every in-edge valid and every unguarded
// in-edge that was cut still cut: the max over in-edges x -> v of level[x] (guarded, or
// unguarded and not cut) or level[x] + 1 (unguarded and cut); 0 without in-edges. Nodes are
// visited in rank order (the DAG's topological order), so the result is valid, no unguarded edge
// loses its cut, and a guarded edge stays cut only where an unguarded path forces it. (The
// compression is indifferent to how deep a node goes below its cut in-edges; this pass keeps
// every node as high as those allow, so guarded successors can join it.)
// REQUIRES: guarded.size() == dag.edges.size(), rank a permutation, level valid for dag.
void LiftGuardedLevels(const ContentionDag& dag, const std::vector<uint8_t>& guarded,
                       const std::vector<int>& rank, std::vector<int>& level);

// ---- ECMP ----

// The RoCEv2 UDP source port flow `flow_index` of job `job_id` uses under hash-based ECMP
// (what a NIC driver would pick per QP, pseudo-random but stable): a function of the seed,
// the job id and the flow index, uniform over `range`.
uint16_t EcmpSourcePort(uint64_t seed, std::string_view job_id, size_t flow_index, PortRange range);

}  // namespace crux::core::policies

#endif  // CRUX_CORE_POLICIES_POLICIES_H_
