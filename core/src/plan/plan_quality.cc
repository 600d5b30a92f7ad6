#include "crux/core/plan/plan_quality.h"

#include <algorithm>
#include <vector>

namespace crux::core {

PlanQuality MeasurePlan(const Topology& topo, const Plan& plan) {
  std::vector<double> load(topo.num_links(), 0.0);  // Bits per second.
  for (const JobPlan& jp : plan.jobs) {
    const double period_s = jp.period.ToSeconds();
    if (!(period_s > 0)) continue;
    for (const FlowPlan& f : jp.flows) {
      const double bps = f.bytes.ToDouble() * 8 / period_s;
      for (LinkId l : f.path) load[l.value()] += bps;
    }
  }
  PlanQuality q;
  for (const JobPlan& jp : plan.jobs) {
    double worst = 0;
    for (const FlowPlan& f : jp.flows) {
      for (LinkId l : f.path) {
        const double cap = topo.link(l).capacity.ToBitsPerSec();
        if (cap > 0) worst = std::max(worst, load[l.value()] / cap);
      }
    }
    q.contention_cost += jp.work.value() * worst;
  }
  q.cut_fraction = plan.total_edge_weight > 0 ? plan.cut_weight / plan.total_edge_weight : 1.0;
  return q;
}

bool ImprovesBy(const PlanQuality& fresh, const PlanQuality& current, double min_gain) {
  return fresh.contention_cost <= current.contention_cost * (1 - min_gain) ||
         fresh.cut_fraction >= current.cut_fraction + min_gain;
}

}  // namespace crux::core
