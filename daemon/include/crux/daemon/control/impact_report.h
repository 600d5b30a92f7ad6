// What cruxd shows of its shadow accounting (docs/impact.md): the predictions of the newest
// estimated plan (PlanApplier's ImpactState, estimated off the plan's path) joined with the
// iteration periods the jobs report now. Read by cruxctl (jobs, impact) and exported on /metrics
// at each estimate.
//
// A job's prediction error is |observed - predicted| / observed, for scheduled jobs only: a
// newcomer runs on the top level whatever its plan says, so its plan prediction does not apply.
//
// Thread-safety: a pure function of its arguments (call it on the loop thread, which owns the
// control loop it reads).
#ifndef CRUX_DAEMON_CONTROL_IMPACT_REPORT_H_
#define CRUX_DAEMON_CONTROL_IMPACT_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/core/control/control_loop.h"
#include "crux/daemon/control/plan_applier.h"

namespace crux::daemon {

struct ImpactRow {
  std::string id;
  int gpus = 0;
  core::Duration standalone;
  core::Duration predicted;                // Under the plan in force.
  core::Duration ecmp;                     // Under ECMP hashing (the counterfactual).
  double gain = 0;                         // 1 - predicted / ecmp.
  std::optional<core::Duration> observed;  // The job's last reported iteration period.
  std::optional<double> error;             // Scheduled jobs with an observation.

  friend bool operator==(const ImpactRow&, const ImpactRow&) = default;
};

struct ImpactReport {
  bool available = false;  // An estimate exists.
  std::string error;       // Why not, when the estimate failed ("" otherwise).
  uint64_t epoch = 0;      // The epoch of the plan it describes.
  int gpus = 0;
  double gpus_recovered = 0;    // core::PlanImpact::gpus_recovered.
  std::vector<ImpactRow> rows;  // In plan order.
  // Over the rows with an error: how many, and their median and 90th percentile (0 when none).
  int observed = 0;
  double error_p50 = 0;
  double error_p90 = 0;
  core::PredictReport plan_report;  // The estimate's fixed points (core::PlanImpact).
  core::PredictReport ecmp_report;

  friend bool operator==(const ImpactReport&, const ImpactReport&) = default;
};

// `state` may be null (no estimate yet, or accounting off) or carry no impact (failed).
ImpactReport BuildImpactReport(const ImpactState* state, const core::ControlLoop& loop);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_IMPACT_REPORT_H_
