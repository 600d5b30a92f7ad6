// Priority assignment (Crux §4.2): P_j = k_j * I_j with a DLT-aware correction factor k_j.
//
// The reference job r is the job with the highest traffic rate (bytes per second on the wire
// when running alone; digest Q5) among the jobs whose communication is exposed, i.e. not fully
// hidden behind compute (overlap_start * compute + comm > compute); only if no job is exposed
// are all jobs candidates. Ties go to more bytes per iteration, then the lower input index.
// k_r = 1. Why exposed first: a reference whose communication hides behind its compute loses
// nothing when it yields (dS_r = 0), so every k_j would hit the kMaxCorrection guard and the
// yardstick would measure nothing.
// For every other job j, the pair (j, r) is simulated on one link under both
// strict priority orders (SimulatePair) and
//     dS_j = S_j(j first) - S_j(r first),   dS_r = S_r(r first) - S_r(j first),
//     k_j  = dS_j / dS_r,
// where S_x(y first) is the time x transmits in the measurement window when y has priority.
// Prioritising j beats prioritising r exactly when I_j * dS_j > I_r * dS_r, i.e. P_j > P_r.
// Guards: dS_r == 0 and dS_j > 0 -> k_j = kMaxCorrection; both 0 -> k_j = 1 (the jobs do not
// interact); negative deltas (numerical noise) are clamped to 0; k_j is clamped to
// [1 / kMaxCorrection, kMaxCorrection].
//
// The total order (rank 0 = highest priority): P descending, then I descending, then GPUs
// descending, then input index ascending. Jobs without network traffic (t_j = 0) have I_j = 0,
// k_j = 1, P_j = 0 and rank after every job with traffic: they contend with nobody.
//
// Thread-safety: pure functions.
#ifndef CRUX_CORE_PRIORITY_H_
#define CRUX_CORE_PRIORITY_H_

#include <string>
#include <vector>

#include "crux/core/units.h"

namespace crux::core {

inline constexpr double kMaxCorrection = 1e6;

// One job's standalone timing on the shared link.
struct PairJob {
  Duration compute;            // Per-iteration computation time, > 0.
  Duration comm;               // Per-iteration transmission time on the link when alone, >= 0.
  double overlap_start = 1.0;  // Communication may start after this fraction of compute.
};

struct PairSimOptions {
  int warmup_periods = 3;    // Periods of the slower job simulated before measuring.
  int measure_periods = 60;  // Periods of the slower job in the measurement window.
  int max_events = 200000;   // Hard cap per simulation (bounds very unequal pairs).

  friend bool operator==(const PairSimOptions&, const PairSimOptions&) = default;
};

// Transmission time and completed computation of each job inside the measurement window.
struct PairOutcome {
  double transmit_a_s = 0;  // Seconds job a held the link.
  double transmit_b_s = 0;
  double compute_a_s = 0;  // Seconds job a's GPUs computed.
  double compute_b_s = 0;
  double window_s = 0;  // Length of the measurement window.
};

// Simulates jobs a and b iterating on one link with strict preemptive priority (a has priority
// iff a_first). Iteration model, per job: compute for `compute`; communication of the iteration
// becomes ready after overlap_start * compute and needs `comm` of exclusive link time; the next
// iteration starts when both compute and communication of the current one are done. Both jobs
// start their first iteration at t = 0. Deterministic.
PairOutcome SimulatePair(const PairJob& a, const PairJob& b, bool a_first,
                         const PairSimOptions& options = {});

// k_j relative to the reference r (see the file comment).
double CorrectionFactor(const PairJob& j, const PairJob& r, const PairSimOptions& options = {});

struct PriorityInput {
  Intensity intensity = 0;  // I_j (0 when the job has no network traffic).
  PairJob timing;
  double bytes_per_sec = 0;  // Traffic rate when alone (reference-job selection).
  double bytes_per_iteration = 0;
  int gpus = 0;
  bool has_traffic = false;
};

struct PriorityAssignment {
  int reference = -1;            // Index of the reference job; -1 if no job has traffic.
  std::vector<double> k;         // Per job.
  std::vector<double> priority;  // P_j, per job.
  std::vector<int> rank;         // Per job; a permutation of 0..n-1.
  std::vector<int> order;        // order[rank] = job index.
};

PriorityAssignment AssignPriorities(const std::vector<PriorityInput>& jobs,
                                    const PairSimOptions& options = {});

// ---- The steps of AssignPriorities, for callers that cache k_j (incremental re-planning) ----
// AssignPriorities(jobs) == {r = SelectReference(jobs); k_j = CorrectionFactor(j, r) for every
// job with traffic but r (1 otherwise); P_j = PriorityValue(j, k_j); RankByPriority(jobs, P)}.

// The reference job (file comment); -1 if no job has traffic. Depends on every job (ties go to
// the lower index), so a caller caching k_j must recompute them all when it changes.
int SelectReference(const std::vector<PriorityInput>& jobs);

// P_j = k * I_j, sanitised (non-finite or negative -> 0); 0 for a job without traffic.
double PriorityValue(const PriorityInput& job, double k);

// The strict total order for the given P values (file comment): rank[j] and order[rank] = j.
// REQUIRES: priority.size() == jobs.size().
void RankByPriority(const std::vector<PriorityInput>& jobs, const std::vector<double>& priority,
                    std::vector<int>& rank, std::vector<int>& order);

}  // namespace crux::core

#endif  // CRUX_CORE_PRIORITY_H_
