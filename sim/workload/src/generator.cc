#include "crux/sim/workload/generator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <string>

#include "crux/core/random.h"

namespace crux::sim::workload {

using core::InvalidArgumentError;
using core::Result;
using core::Status;

namespace {

bool Finite(double v) { return std::isfinite(v); }

// Standard normal deviate (Box-Muller), from two uniform draws.
double Normal(core::Rng& rng) {
  double u1 = rng.UniformDouble();
  while (u1 <= 0) u1 = rng.UniformDouble();
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::string JobId(size_t i) {
  std::string n = std::to_string(i);
  while (n.size() < 5) n = "0" + n;
  return "j" + n;
}

}  // namespace

Status ValidateGeneratorOptions(const GeneratorOptions& o) {
  if (!Finite(o.days) || !(o.days > 0)) return InvalidArgumentError("days: must be > 0");
  if (!Finite(o.mean_interarrival_s) || !(o.mean_interarrival_s > 0)) {
    return InvalidArgumentError("mean_interarrival_s: must be > 0");
  }
  if (o.size_mix.empty()) return InvalidArgumentError("size_mix: must not be empty");
  double sum = 0;
  for (const auto& [g, w] : o.size_mix) {
    if (g < 1) return InvalidArgumentError("size_mix: GPU counts must be >= 1");
    if (!Finite(w) || w < 0) return InvalidArgumentError("size_mix: weights must be >= 0");
    sum += w;
  }
  if (!(sum > 0)) return InvalidArgumentError("size_mix: weights must have a positive sum");
  if (!Finite(o.median_duration_s) || !(o.median_duration_s > 0)) {
    return InvalidArgumentError("median_duration_s: must be > 0");
  }
  if (!Finite(o.duration_sigma) || o.duration_sigma < 0) {
    return InvalidArgumentError("duration_sigma: must be >= 0");
  }
  if (!Finite(o.size_duration_slope) || o.size_duration_slope < 0) {
    return InvalidArgumentError("size_duration_slope: must be >= 0");
  }
  if (!Finite(o.min_duration_s) || !(o.min_duration_s > 0) || !Finite(o.max_duration_s) ||
      o.max_duration_s < o.min_duration_s) {
    return InvalidArgumentError("min_duration_s/max_duration_s: need 0 < min <= max");
  }
  return Status::Ok();
}

Result<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& options,
                                            const ModelCatalog& models, const core::Topology* topo,
                                            Placer* placer) {
  CRUX_RETURN_IF_ERROR(ValidateGeneratorOptions(options));
  if (placer != nullptr && topo == nullptr) {
    return InvalidArgumentError("generator: a placer needs its topology");
  }
  // Models per size.
  std::map<int, std::vector<const ModelProfile*>> eligible;
  for (const auto& [g, w] : options.size_mix) {
    std::vector<const ModelProfile*>& list = eligible[g];
    for (const ModelProfile& m : models.models()) {
      if (m.min_gpus <= g && g <= m.max_gpus) list.push_back(&m);
    }
    if (list.empty() && w > 0) {
      return InvalidArgumentError("models: no model accepts " + std::to_string(g) +
                                  " GPUs (min_gpus/max_gpus)");
    }
    if (placer != nullptr && g > placer->total_gpus() && w > 0) {
      return InvalidArgumentError("size_mix: " + std::to_string(g) +
                                  "-GPU jobs do not fit the topology (" +
                                  std::to_string(placer->total_gpus()) + " GPUs)");
    }
  }
  double weight_sum = 0;
  for (const auto& [g, w] : options.size_mix) weight_sum += w;

  core::Rng rng(core::Mix64(options.seed ^ 0x7261636547656e31ULL));
  const double span = options.days * 86400.0;
  std::vector<TraceJob> jobs;
  double t = 0;
  while (true) {
    double u = rng.UniformDouble();
    while (u <= 0) u = rng.UniformDouble();
    t += -std::log(u) * options.mean_interarrival_s;
    if (t >= span) break;
    TraceJob j;
    j.id = JobId(jobs.size() + 1);
    j.arrival_s = std::round(t * 1000.0) / 1000.0;  // Millisecond resolution.
    double pick = rng.UniformDouble() * weight_sum;
    j.gpus = options.size_mix.back().first;
    for (const auto& [g, w] : options.size_mix) {
      if (pick < w) {
        j.gpus = g;
        break;
      }
      pick -= w;
    }
    const double z = Normal(rng);
    double d = options.median_duration_s * std::exp(options.duration_sigma * z) *
               (1.0 + options.size_duration_slope * std::log2(static_cast<double>(j.gpus)));
    d = std::clamp(d, options.min_duration_s, options.max_duration_s);
    j.duration_s = std::round(d);
    const std::vector<const ModelProfile*>& list = eligible[j.gpus];
    j.model = list[rng.Uniform(list.size())]->name;
    jobs.push_back(std::move(j));
  }

  if (placer != nullptr) {
    // FIFO admission: a job starts at max(arrival, previous start) once it fits.
    using Running = std::pair<double, size_t>;  // (end time, job index)
    std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
    std::vector<Placement> placements(jobs.size());
    double clock = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      TraceJob& j = jobs[i];
      clock = std::max(clock, j.arrival_s);
      while (true) {
        while (!running.empty() && running.top().first <= clock) {
          placer->Release(placements[running.top().second]);
          running.pop();
        }
        Result<Placement> p = placer->Place(j.gpus);
        if (p.ok()) {
          placements[i] = *p;
          break;
        }
        if (p.status().code() != core::StatusCode::kFailedPrecondition || running.empty()) {
          return p.status().WithContext("job " + j.id);
        }
        clock = running.top().first;  // Wait for the next departure.
      }
      j.arrival_s = clock;
      running.emplace(clock + *j.duration_s, i);
      for (core::NodeId h : placements[i].hosts) j.placement.push_back(topo->node(h).name);
    }
    while (!running.empty()) {
      placer->Release(placements[running.top().second]);
      running.pop();
    }
  }
  return jobs;
}

TraceStats ComputeTraceStats(const std::vector<TraceJob>& jobs) {
  TraceStats s;
  s.jobs = jobs.size();
  if (jobs.empty()) return s;
  std::map<int, size_t> sizes;
  double first = jobs.front().arrival_s;
  double last = first;
  double last_event = 0;
  size_t big = 0;
  for (const TraceJob& j : jobs) {
    ++sizes[j.gpus];
    s.max_gpus = std::max(s.max_gpus, j.gpus);
    if (j.gpus >= 128) ++big;
    first = std::min(first, j.arrival_s);
    last = std::max(last, j.arrival_s);
    last_event = std::max(last_event, j.arrival_s + j.duration_s.value_or(0));
  }
  s.share_ge_128 = static_cast<double>(big) / static_cast<double>(jobs.size());
  s.span_s = last - first;
  s.size_counts.assign(sizes.begin(), sizes.end());
  // Sweep: (time, +1/-1 job, +/-gpus); departures before arrivals at equal times.
  struct Ev {
    double t;
    int dj;
    int dg;
  };
  std::vector<Ev> ev;
  ev.reserve(jobs.size() * 2);
  for (const TraceJob& j : jobs) {
    ev.push_back({j.arrival_s, 1, j.gpus});
    const double end = j.duration_s ? j.arrival_s + *j.duration_s : last_event;
    ev.push_back({end, -1, -j.gpus});
  }
  std::sort(ev.begin(), ev.end(), [](const Ev& a, const Ev& b) {
    if (a.t != b.t) return a.t < b.t;
    return a.dj < b.dj;
  });
  int jobs_now = 0;
  int gpus_now = 0;
  for (const Ev& e : ev) {
    jobs_now += e.dj;
    gpus_now += e.dg;
    s.peak_jobs = std::max(s.peak_jobs, jobs_now);
    s.peak_gpus = std::max(s.peak_gpus, gpus_now);
    if (gpus_now >= 1000) s.peak_jobs_on_1000_gpus = std::max(s.peak_jobs_on_1000_gpus, jobs_now);
  }
  return s;
}

}  // namespace crux::sim::workload
