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
// Guards: negative deltas (numerical noise) are clamped to 0; both 0 -> k_j = 1 (the jobs do
// not interact); otherwise k_j is bounded to [1 / kMaxCorrection, kMaxCorrection].
//
// The bounds are findings, not numbers: k_j = kMaxCorrection means the pair comparison found
// that j gains link time when it goes first while r loses nothing (or less than 1/kMaxCorrection
// of j's gain) when it yields -- typically because r's communication hides under its compute.
// The single-reference rule then says j beats r whatever the intensities (the ratio is
// infinite), so such a job ranks above every job whose k_j is an ordinary ratio; symmetrically
// k_j = 1 / kMaxCorrection (j gains nothing by going first, r does) ranks below them. This is
// the order the former unbounded guard (k = 1e6, an arbitrary large number) approximated: it
// gave the same ranks whenever the intensities of the jobs compared differ by less than
// kMaxCorrection, and it printed priorities such as 1.6e23 next to 5.3e17. CorrectionTier names
// the three tiers; DescribeCorrection says in words what the pair comparison found.
//
// The total order (rank 0 = highest priority): tier descending, then P descending, then I
// descending, then GPUs descending, then input index ascending. Jobs without network traffic
// (t_j = 0) have I_j = 0, k_j = 1, P_j = 0 and rank after every job with traffic: they contend
// with nobody.
//
// Thread-safety: pure functions.
#ifndef CRUX_CORE_PLAN_PRIORITY_H_
#define CRUX_CORE_PLAN_PRIORITY_H_

#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/units.h"

namespace crux::core {

// Bound of k_j (file comment). A job at the bound ranks in its own tier.
inline constexpr double kMaxCorrection = 1e3;

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

// What the pair comparison of a job j with the reference r found (file comment).
enum class PairFinding {
  kNoInteraction,  // Neither job gains link time by going first: k_j = 1.
  kRatio,          // Both gain: k_j = dS_j / dS_r inside the bounds.
  kOnlyJobGains,   // r loses nothing (or < 1/kMaxCorrection of j's gain): k_j = kMaxCorrection.
  kOnlyRefGains,   // j gains nothing (or < 1/kMaxCorrection of r's gain): k_j = 1/kMaxCorrection.
};
std::string_view PairFindingName(PairFinding f);

struct Correction {
  double k = 1;  // In [1 / kMaxCorrection, kMaxCorrection].
  PairFinding finding = PairFinding::kNoInteraction;
  double gain_job = 0;        // dS_j: seconds of link time j gains per second by going first.
  double loss_reference = 0;  // dS_r: seconds of link time r loses per second by yielding.

  friend bool operator==(const Correction&, const Correction&) = default;
};

// k_j relative to the reference r, with what the comparison found (file comment).
Correction CompareWithReference(const PairJob& j, const PairJob& r,
                                const PairSimOptions& options = {});
// CompareWithReference(j, r, options).k.
double CorrectionFactor(const PairJob& j, const PairJob& r, const PairSimOptions& options = {});

// The tier a correction factor puts a job in (file comment): +1 at kMaxCorrection (above every
// ordinary ratio), -1 at 1 / kMaxCorrection (below), 0 otherwise (also for non-finite k).
int CorrectionTier(double k);

// One line for operators (cruxctl, the daemon's explanations) saying what k_j means, from k_j
// alone: "1.5: going first gains this job 1.5 s of link time per second the reference job
// loses", "reference job", or, at the bounds, which side gains nothing and where that ranks
// the job. `is_reference` selects the reference wording.
std::string DescribeCorrection(double k, bool is_reference = false);

struct PriorityInput {
  Intensity intensity = 0;  // I_j (0 when the job has no network traffic).
  PairJob timing;
  double bytes_per_sec = 0;  // Traffic rate when alone (reference-job selection).
  double bytes_per_iteration = 0;
  int gpus = 0;
  bool has_traffic = false;
};

struct PriorityAssignment {
  int reference = -1;                  // Index of the reference job; -1 if no job has traffic.
  std::vector<double> k;               // Per job.
  std::vector<Correction> correction;  // Per job: what the pair comparison found (k = .k).
  std::vector<double> priority;        // P_j, per job.
  std::vector<int> rank;               // Per job; a permutation of 0..n-1.
  std::vector<int> order;              // order[rank] = job index.
};

PriorityAssignment AssignPriorities(const std::vector<PriorityInput>& jobs,
                                    const PairSimOptions& options = {});

// ---- The steps of AssignPriorities, for callers that cache k_j (incremental re-planning) ----
// AssignPriorities(jobs) == {r = SelectReference(jobs); k_j = CorrectionFactor(j, r) for every
// job with traffic but r (1 otherwise); P_j = PriorityValue(j, k_j); RankByPriority(jobs, k,
// P)}.

// The reference job (file comment); -1 if no job has traffic. Depends on every job (ties go to
// the lower index), so a caller caching k_j must recompute them all when it changes.
int SelectReference(const std::vector<PriorityInput>& jobs);

// P_j = k * I_j, sanitised (non-finite or negative -> 0); 0 for a job without traffic.
double PriorityValue(const PriorityInput& job, double k);

// The strict total order for the given k and P values (file comment): rank[j] and
// order[rank] = j. REQUIRES: k.size() == priority.size() == jobs.size().
void RankByPriority(const std::vector<PriorityInput>& jobs, const std::vector<double>& k,
                    const std::vector<double>& priority, std::vector<int>& rank,
                    std::vector<int>& order);

}  // namespace crux::core

#endif  // CRUX_CORE_PLAN_PRIORITY_H_
