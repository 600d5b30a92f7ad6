// Shadow accounting (issue #29 item 1): what the plan in force should give each job, what plain
// ECMP hashing of the same flows on one level would give it (the counterfactual), and what the
// cluster gains by the difference. cruxd computes it on the worker with every plan (RunPlan,
// PlanOutcome::impact) and compares it with the iteration times jobs report; crux-sim computes it
// from the same code and compares it with the iteration times it simulates (docs/impact.md).
//
// The contention model (PredictIterations) is the single-overlap job model the planner and the
// simulator use: an iteration takes max(c, o c + t), c the compute time, o the overlap start and
// t the communication time, here under contention. A job's traffic on a link is the bits its
// flows put on it per iteration (b_je); t_j = max over its links of b_je / r_je, where r_je is
// the rate left to j on link e by the others' *average* load (their bits per iteration over their
// own predicted iteration time):
//   higher levels (strict priority) take their average load off the capacity:
//     A_je = C_e - sum over k above j of b_ke / T_k;
//   the same level shares what is left as processor sharing would on average, and never below
//   the max-min share all of them would get if they sent at once:
//     r_je = max(A_je - sum over k != j at j's level of b_ke / T_k,  A_je / n_e(level_j));
//   a floor keeps r_je >= min_rate_fraction x C_e (a starved job is predicted very slow, not
//   infinitely slow).
// T depends on everyone's T, so it is a fixed point: started at the standalone period and
// iterated (damped) until no job moves by more than `tolerance`. What the model leaves out: the
// phase alignment of periodic jobs (two jobs of the same period may interleave perfectly or
// collide every iteration; the model takes their average), the phase-level structure of an
// iteration (iteration_timing.h), latency (alpha) and NVLink time. It is an expectation to
// compare with what is observed, not a schedule.
//
// Thread-safety: pure functions; the types are values.
#ifndef CRUX_CORE_CONTROL_IMPACT_H_
#define CRUX_CORE_CONTROL_IMPACT_H_

#include <cstdint>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/job.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/ecmp.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

struct PredictOptions {
  int max_iterations = 60;          // Fixed-point rounds, >= 1.
  double tolerance = 1e-4;          // Stop when no T_j moves by more than this fraction.
  double min_rate_fraction = 1e-3;  // Floor of r_je as a fraction of C_e, in (0, 1].
  // Halve a job's step when its target crosses its period again (PredictIterations). false: a
  // fixed half step, the model before issue #28, which can oscillate forever under heavy
  // contention (kept to show it: tests).
  bool adaptive_step = true;

  friend bool operator==(const PredictOptions&, const PredictOptions&) = default;
};

// One job as the contention model sees it.
struct PredictJob {
  Duration compute;          // c, > 0.
  double overlap_start = 1;  // o, in [0, 1].
  int level = 0;             // 0 = highest priority, >= 0.
  struct Flow {
    std::span<const LinkId> path;  // Directed links, each < topo.num_links().
    Bytes bytes;                   // Per iteration, on the wire.
  };
  std::vector<Flow> flows;
};

// How a PredictIterations call ended.
struct PredictReport {
  int rounds = 0;          // Fixed-point rounds run.
  bool converged = false;  // No period moved by more than options.tolerance in the last one.
  double moved = 0;        // The largest relative move of the last round.

  friend bool operator==(const PredictReport&, const PredictReport&) = default;
};

// Each job's predicted iteration time, in the order of `jobs`, over the links' capacities in
// `topo` (a link of capacity 0 counts as starved: the floor applies). Jobs without flows get c.
// The fixed point is damped per job: a job's period moves half-way to its target, and its step
// halves (down to 1/64) each time the target crosses its period again, so heavily contended
// jobs that would oscillate between two values settle instead. `report` (optional) says whether
// it converged within options.max_iterations.
// REQUIRES: every link id of every path < topo.num_links(). Deterministic. Once `stop` is
// requested it returns after the round in progress (the result is then not the fixed point).
std::vector<Duration> PredictIterations(const Topology& topo, std::span<const PredictJob> jobs,
                                        const PredictOptions& options = {},
                                        std::stop_token stop = {}, PredictReport* report = nullptr);

struct ImpactOptions {
  PredictOptions predict;
  // The ECMP counterfactual: each flow's source port as a NIC driver would draw it
  // (policies::EcmpSourcePort with this seed, the planner's seed by default) routed by the hash
  // ECMP model; every job on one level. The `ecmp` baseline of crux-sim with the same seed and
  // port range routes exactly these paths.
  uint64_t ecmp_seed = 1;
  PortRange ports;

  friend bool operator==(const ImpactOptions&, const ImpactOptions&) = default;
};

struct JobImpact {
  std::string id;
  int gpus = 0;
  Duration standalone;  // Alone on the fabric: max(c, o c + t_j) (the planner's period).
  Duration predicted;   // Under the plan (its paths and levels), with every planned job.
  Duration ecmp;        // Under ECMP hashing of the same flows, one level, every planned job.

  // 1 - predicted / ecmp: the fraction of the job's iteration time the plan saves against ECMP
  // (negative: the plan costs it time). 0 when ecmp is 0.
  double Gain() const;

  friend bool operator==(const JobImpact&, const JobImpact&) = default;
};

struct PlanImpact {
  std::vector<JobImpact> jobs;  // Parallel to plan.jobs.
  int gpus = 0;                 // Sum over jobs.
  // "GPU-hours recovered per hour": sum over jobs of gpus x Gain(), i.e. how many GPUs' worth of
  // iteration time the plan saves against ECMP at this moment.
  double gpus_recovered = 0;
  // The two predictions' fixed points (PredictIterations): a prediction that did not converge
  // is the model's best within its rounds, not its fixed point (shown as such by cruxctl).
  PredictReport plan_report;
  PredictReport ecmp_report;

  friend bool operator==(const PlanImpact&, const PlanImpact&) = default;
};

// kInvalidArgument naming the field ("impact.tolerance: must be > 0").
Status ValidateImpactOptions(const ImpactOptions& o);

// The impact of `plan` (planned by a policy over `topo`) for the jobs `specs`, where specs[i]
// is the spec of plan.jobs[i] (its compute time, overlap start and GPUs). Errors: sizes differ,
// a null spec, an id that differs, a flow endpoint the topology cannot route (ECMP);
// kUnavailable ("impact: cancelled") once `stop` is requested (checked between jobs and rounds).
Result<PlanImpact> EstimateImpact(const Topology& topo, std::span<const JobSpec* const> specs,
                                  const Plan& plan, const ImpactOptions& options = {},
                                  std::stop_token stop = {});

// |observed - predicted| / observed (0 when observed is 0): the prediction error of a job.
double PredictionError(Duration observed, Duration predicted);

}  // namespace crux::core

#endif  // CRUX_CORE_CONTROL_IMPACT_H_
