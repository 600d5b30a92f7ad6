#include "crux/core/control/impact.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "crux/core/policies/policies.h"
#include "crux/core/topology/path_finder.h"

namespace crux::core {
namespace {

// A job's bits per iteration on each link it crosses, sorted by link.
struct LinkBits {
  uint32_t link = 0;
  double bits = 0;
};

std::vector<LinkBits> Aggregate(const PredictJob& job) {
  std::vector<LinkBits> out;
  for (const PredictJob::Flow& f : job.flows) {
    const double bits = f.bytes.ToDouble() * 8.0;
    if (!(bits > 0)) continue;
    for (LinkId l : f.path) out.push_back({l.value(), bits});
  }
  std::sort(out.begin(), out.end(),
            [](const LinkBits& a, const LinkBits& b) { return a.link < b.link; });
  size_t w = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (w > 0 && out[w - 1].link == out[i].link) {
      out[w - 1].bits += out[i].bits;
    } else {
      out[w++] = out[i];
    }
  }
  out.resize(w);
  return out;
}

double IterationOf(const PredictJob& job, double comm_s) {
  const double c = job.compute.ToSeconds();
  return std::max(c, job.overlap_start * c + comm_s);
}

}  // namespace

std::vector<Duration> PredictIterations(const Topology& topo, std::span<const PredictJob> jobs,
                                        const PredictOptions& options, std::stop_token stop,
                                        PredictReport* report) {
  const size_t n = jobs.size();
  std::vector<std::vector<LinkBits>> bits(n);
  int levels = 1;
  for (size_t j = 0; j < n; ++j) {
    bits[j] = Aggregate(jobs[j]);
    levels = std::max(levels, std::max(0, jobs[j].level) + 1);
  }
  // Per link touched: its capacity, and per level the load and the number of jobs on it.
  std::vector<int32_t> slot(topo.num_links(), -1);
  std::vector<double> capacity;
  for (size_t j = 0; j < n; ++j) {
    for (LinkBits& lb : bits[j]) {
      if (slot[lb.link] < 0) {
        slot[lb.link] = static_cast<int32_t>(capacity.size());
        capacity.push_back(topo.link(LinkId(lb.link)).capacity.ToBitsPerSec());
      }
      lb.link = static_cast<uint32_t>(slot[lb.link]);  // From here on: the slot.
    }
  }
  const size_t m = capacity.size();
  const size_t lv = static_cast<size_t>(levels);
  std::vector<int> count(m * lv, 0);
  for (size_t j = 0; j < n; ++j) {
    const size_t level = static_cast<size_t>(std::max(0, jobs[j].level));
    for (const LinkBits& lb : bits[j]) ++count[lb.link * lv + level];
  }

  // Standalone: every job alone at line rate.
  const double floor_fraction = std::clamp(options.min_rate_fraction, 1e-9, 1.0);
  std::vector<double> period(n);
  for (size_t j = 0; j < n; ++j) {
    double t = 0;
    for (const LinkBits& lb : bits[j]) {
      const double r = std::max(capacity[lb.link], 1.0);
      t = std::max(t, lb.bits / r);
    }
    period[j] = IterationOf(jobs[j], t);
  }
  // below[e * lv + l]: the load of levels < l on link e; load[e * lv + l]: the load of level l.
  std::vector<double> load(m * lv), below(m * lv);
  std::vector<double> next(n);
  // Per job: the fraction of the way to its target a round moves it, and the sign of its last
  // step (a change of sign - an overshoot - halves the fraction).
  constexpr double kMinStep = 1.0 / 64;
  std::vector<double> step(n, 0.5);
  std::vector<int8_t> last_sign(n, 0);
  PredictReport result;
  for (int round = 0; round < std::max(1, options.max_iterations); ++round) {
    std::fill(load.begin(), load.end(), 0.0);
    for (size_t j = 0; j < n; ++j) {
      const size_t level = static_cast<size_t>(std::max(0, jobs[j].level));
      if (!(period[j] > 0)) continue;
      for (const LinkBits& lb : bits[j]) load[lb.link * lv + level] += lb.bits / period[j];
    }
    for (size_t e = 0; e < m; ++e) {
      double acc = 0;
      for (size_t l = 0; l < lv; ++l) {
        below[e * lv + l] = acc;
        acc += load[e * lv + l];
      }
    }
    double moved = 0;
    for (size_t j = 0; j < n; ++j) {
      const size_t level = static_cast<size_t>(std::max(0, jobs[j].level));
      double t = 0;
      for (const LinkBits& lb : bits[j]) {
        const size_t e = lb.link;
        const double cap = capacity[e];
        const double floor = std::max(cap * floor_fraction, 1.0);
        const double left = std::max(cap - below[e * lv + level], floor);
        const double own = period[j] > 0 ? lb.bits / period[j] : 0.0;
        const double same = std::max(0.0, load[e * lv + level] - own);
        const double fair = left / std::max(1, count[e * lv + level]);
        const double r = std::max({left - same, fair, floor});
        t = std::max(t, lb.bits / r);
      }
      const double target = IterationOf(jobs[j], t);
      // Damped: the loads of the others respond to this job's period and back.
      const int8_t sign = target > period[j] ? 1 : (target < period[j] ? -1 : 0);
      if (options.adaptive_step && sign != 0 && last_sign[j] != 0) {
        // An overshoot halves the step; two steps the same way let it grow back (to 1/2).
        step[j] =
            sign != last_sign[j] ? std::max(step[j] * 0.5, kMinStep) : std::min(step[j] * 1.5, 0.5);
      }
      if (sign != 0) last_sign[j] = sign;
      next[j] = (1 - step[j]) * period[j] + step[j] * target;
      if (period[j] > 0) moved = std::max(moved, std::abs(next[j] - period[j]) / period[j]);
    }
    period.swap(next);
    result.rounds = round + 1;
    result.moved = moved;
    result.converged = moved <= options.tolerance;
    if (result.converged || stop.stop_requested()) break;
  }
  if (report != nullptr) *report = result;
  std::vector<Duration> out(n);
  for (size_t j = 0; j < n; ++j) out[j] = Duration::Seconds(period[j]);
  return out;
}

Status ValidateImpactOptions(const ImpactOptions& o) {
  if (o.predict.max_iterations < 1) {
    return InvalidArgumentError("impact.max_iterations: must be >= 1");
  }
  if (!(o.predict.tolerance > 0 && o.predict.tolerance < 1)) {
    return InvalidArgumentError("impact.tolerance: must be in (0, 1)");
  }
  if (!(o.predict.min_rate_fraction > 0 && o.predict.min_rate_fraction <= 1)) {
    return InvalidArgumentError("impact.min_rate_fraction: must be in (0, 1]");
  }
  if (o.ports.min > o.ports.max) return InvalidArgumentError("impact.ports: min > max");
  return Status::Ok();
}

double JobImpact::Gain() const {
  if (ecmp <= Duration::Zero()) return 0;
  return 1.0 - predicted.ToSeconds() / ecmp.ToSeconds();
}

double PredictionError(Duration observed, Duration predicted) {
  if (observed <= Duration::Zero()) return 0;
  return std::abs(observed.ToSeconds() - predicted.ToSeconds()) / observed.ToSeconds();
}

Result<PlanImpact> EstimateImpact(const Topology& topo, std::span<const JobSpec* const> specs,
                                  const Plan& plan, const ImpactOptions& options,
                                  std::stop_token stop) {
  const auto cancelled = [] { return UnavailableError("impact: cancelled"); };
  const size_t n = plan.jobs.size();
  if (specs.size() != n) {
    return InvalidArgumentError("impact: " + std::to_string(specs.size()) + " specs for " +
                                std::to_string(n) + " planned jobs");
  }
  std::vector<PredictJob> planned(n), hashed(n);
  // ECMP paths, kept alive for the spans of `hashed`.
  std::vector<std::vector<std::vector<LinkId>>> ecmp_paths(n);
  PathFinder finder(topo);
  const HashEcmpModel hash(0);  // As the policies route (policies.cc: hash_model_(0)).
  for (size_t j = 0; j < n; ++j) {
    if (j % 256 == 0 && stop.stop_requested()) return cancelled();
    const JobSpec* spec = specs[j];
    const JobPlan& jp = plan.jobs[j];
    if (spec == nullptr) return InvalidArgumentError("impact: no spec for job '" + jp.id + "'");
    if (spec->id != jp.id) {
      return InvalidArgumentError("impact: spec '" + spec->id + "' for planned job '" + jp.id +
                                  "'");
    }
    PredictJob base;
    base.compute = spec->compute_time;
    base.overlap_start = std::clamp(spec->overlap_start, 0.0, 1.0);
    planned[j] = base;
    planned[j].level = std::max(0, jp.level);
    hashed[j] = base;
    hashed[j].level = 0;
    ecmp_paths[j].resize(jp.flows.size());
    for (size_t f = 0; f < jp.flows.size(); ++f) {
      const FlowPlan& fp = jp.flows[f];
      planned[j].flows.push_back({fp.path, fp.bytes});
      auto paths = finder.Paths(fp.src, fp.dst);
      if (!paths.ok()) return paths.status().WithContext("impact: job '" + jp.id + "'");
      const PathSet& set = *paths.value();
      size_t choice = 0;
      if (set.size() > 1) {
        const uint16_t sport = policies::EcmpSourcePort(options.ecmp_seed, jp.id, f, options.ports);
        auto idx = hash.Route(finder, fp.src, fp.dst, sport);
        if (!idx.ok()) return idx.status().WithContext("impact: job '" + jp.id + "'");
        choice = idx.value();
      }
      if (!set.empty()) set.ForEachLink(choice, [&](LinkId l) { ecmp_paths[j][f].push_back(l); });
      hashed[j].flows.push_back({ecmp_paths[j][f], fp.bytes});
    }
  }
  PlanImpact out;
  const std::vector<Duration> with_plan =
      PredictIterations(topo, planned, options.predict, stop, &out.plan_report);
  if (stop.stop_requested()) return cancelled();
  const std::vector<Duration> with_ecmp =
      PredictIterations(topo, hashed, options.predict, stop, &out.ecmp_report);
  if (stop.stop_requested()) return cancelled();
  out.jobs.reserve(n);
  for (size_t j = 0; j < n; ++j) {
    JobImpact ji;
    ji.id = plan.jobs[j].id;
    ji.gpus = specs[j]->gpus();
    ji.standalone = plan.jobs[j].period;
    ji.predicted = with_plan[j];
    ji.ecmp = with_ecmp[j];
    out.gpus += ji.gpus;
    out.gpus_recovered += ji.gpus * ji.Gain();
    out.jobs.push_back(std::move(ji));
  }
  return out;
}

}  // namespace crux::core
