#include "crux/daemon/control/impact_report.h"

#include <algorithm>

namespace crux::daemon {
namespace {

double Quantile(std::vector<double> xs, double q) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const size_t i = std::min(xs.size() - 1, static_cast<size_t>(q * (xs.size() - 1) + 0.5));
  return xs[i];
}

}  // namespace

ImpactReport BuildImpactReport(const ImpactState* state, const core::ControlLoop& loop) {
  ImpactReport r;
  if (state == nullptr) return r;
  r.epoch = state->epoch;
  if (state->impact == nullptr) {
    r.error = state->error;
    return r;
  }
  const core::PlanImpact& impact = *state->impact;
  r.available = true;
  r.plan_report = impact.plan_report;
  r.ecmp_report = impact.ecmp_report;
  r.gpus = impact.gpus;
  r.gpus_recovered = impact.gpus_recovered;
  r.rows.reserve(impact.jobs.size());
  std::vector<double> errors;
  for (const core::JobImpact& j : impact.jobs) {
    ImpactRow row;
    row.id = j.id;
    row.gpus = j.gpus;
    row.standalone = j.standalone;
    row.predicted = j.predicted;
    row.ecmp = j.ecmp;
    row.gain = j.Gain();
    if (const core::LoopJob* lj = loop.Find(j.id); lj != nullptr && lj->profile) {
      if (lj->profile->iteration_period > core::Duration::Zero()) {
        row.observed = lj->profile->iteration_period;
        if (lj->phase == core::JobPhase::kScheduled) {
          row.error = core::PredictionError(*row.observed, row.predicted);
          errors.push_back(*row.error);
        }
      }
    }
    r.rows.push_back(std::move(row));
  }
  r.observed = static_cast<int>(errors.size());
  r.error_p50 = Quantile(errors, 0.5);
  r.error_p90 = Quantile(errors, 0.9);
  return r;
}

}  // namespace crux::daemon
