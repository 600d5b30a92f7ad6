#include "crux/sim/workload/generator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <queue>
#include <string>

#include "crux/core/base/random.h"

namespace crux::sim::workload {

using core::InvalidArgumentError;
using core::Result;
using core::Status;

namespace {

bool Finite(double v) { return std::isfinite(v); }

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

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

// The classes of the options' mix (lingjun-2023: one class per size_mix entry).
std::vector<MixClass> ClassesOf(const GeneratorOptions& o) {
  if (o.mix == kLlm2025Mix) return Llm2025Classes();
  std::vector<MixClass> out;
  for (const auto& [g, w] : o.size_mix) out.push_back(MixClass{"", w, {g}, {}});
  return out;
}

}  // namespace

std::vector<std::string> MixNames() {
  return {std::string(kLingjun2023Mix), std::string(kLlm2025Mix)};
}

std::vector<MixClass> Llm2025Classes() {
  return {
      {"legacy-1", 0.555, {1}, {}},
      {"legacy-2-4", 0.10, {2, 4}, {}},
      {"legacy-8", 0.28, {8}, {}},
      {"legacy-16-64", 0.025, {16, 32, 64}, {}},
      {"dense-mid", 0.025, {64, 128, 256}, {"llama3_8b_fsdp_h100", "llama3_70b_h100"}},
      {"dense-large", 0.010, {256, 512}, {"llama31_405b_mbridge_h100", "llama3_405b_h100"}},
      {"moe-cross-host", 0.005, {1024}, {"deepseek_v3_h800"}},
  };
}

Status ValidateGeneratorOptions(const GeneratorOptions& o) {
  const std::vector<std::string> mixes = MixNames();
  if (std::find(mixes.begin(), mixes.end(), o.mix) == mixes.end()) {
    return InvalidArgumentError("mix: unknown mix '" + o.mix +
                                "' (known: " + std::string(kLingjun2023Mix) + ", " +
                                std::string(kLlm2025Mix) + ")");
  }
  if (!Finite(o.days) || !(o.days > 0) || o.days > kMaxGeneratorDays) {
    return InvalidArgumentError("days: must be > 0 and <= " + Num(kMaxGeneratorDays));
  }
  if (!Finite(o.mean_interarrival_s) || !(o.mean_interarrival_s > 0)) {
    return InvalidArgumentError("mean_interarrival_s: must be > 0");
  }
  if (o.days * 86400.0 / o.mean_interarrival_s > static_cast<double>(kMaxGeneratedJobs)) {
    return InvalidArgumentError(
        "mean_interarrival_s: days / mean_interarrival_s gives more than " +
        std::to_string(kMaxGeneratedJobs) + " jobs on average (use at least " +
        Num(o.days * 86400.0 / static_cast<double>(kMaxGeneratedJobs)) + " s)");
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
  if (!Finite(o.scatter_probability) || o.scatter_probability < 0 || o.scatter_probability > 1) {
    return InvalidArgumentError("scatter_probability: must be in [0, 1]");
  }
  if (!Finite(o.spill_probability) || o.spill_probability < 0 || o.spill_probability > 1) {
    return InvalidArgumentError("spill_probability: must be in [0, 1]");
  }
  if (!Finite(o.share_probability) || o.share_probability < 0 || o.share_probability > 1) {
    return InvalidArgumentError("share_probability: must be in [0, 1]");
  }
  if (!Finite(o.min_duration_s) || !(o.min_duration_s > 0) || !Finite(o.max_duration_s) ||
      o.max_duration_s < o.min_duration_s) {
    return InvalidArgumentError("min_duration_s/max_duration_s: need 0 < min <= max");
  }
  return Status::Ok();
}

double ExpectedGpuSecondsPerJob(const GeneratorOptions& o) {
  // Midpoint rule on z in [-8, 8]; the tails beyond carry < 1e-14 of the mass and the clamp
  // bounds the integrand.
  constexpr int kSteps = 8000;
  constexpr double kLo = -8.0;
  constexpr double kHi = 8.0;
  const double dz = (kHi - kLo) / kSteps;
  // Per size: the class weight spread uniformly over the class's sizes.
  std::vector<std::pair<int, double>> sizes;
  for (const MixClass& c : ClassesOf(o)) {
    for (int g : c.gpus) sizes.emplace_back(g, c.weight / static_cast<double>(c.gpus.size()));
  }
  double weight_sum = 0;
  for (const auto& [g, w] : sizes) weight_sum += w;
  double total = 0;
  for (const auto& [g, w] : sizes) {
    if (w <= 0) continue;
    const double factor = 1.0 + o.size_duration_slope * std::log2(static_cast<double>(g));
    double mean_d = 0;
    for (int i = 0; i < kSteps; ++i) {
      const double z = kLo + (i + 0.5) * dz;
      const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
      double d = o.median_duration_s * std::exp(o.duration_sigma * z) * factor;
      d = std::clamp(d, o.min_duration_s, o.max_duration_s);
      mean_d += pdf * d * dz;
    }
    total += (w / weight_sum) * g * mean_d;
  }
  return total;
}

Result<double> MeanInterarrivalForLoad(const GeneratorOptions& o, int cluster_gpus, double load) {
  CRUX_RETURN_IF_ERROR(ValidateGeneratorOptions(o));
  if (cluster_gpus < 1) return InvalidArgumentError("load: the cluster has no GPUs");
  if (!Finite(load) || !(load > 0) || load > 4) {
    return InvalidArgumentError("load: must be in (0, 4] (fraction of the cluster's GPUs)");
  }
  return ExpectedGpuSecondsPerJob(o) / (load * static_cast<double>(cluster_gpus));
}

Result<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& options,
                                            const ModelCatalog& models, const core::Topology* topo,
                                            Placer* placer) {
  CRUX_RETURN_IF_ERROR(ValidateGeneratorOptions(options));
  if (placer != nullptr && topo == nullptr) {
    return InvalidArgumentError("generator: a placer needs its topology");
  }
  // Models per class and size.
  const std::vector<MixClass> classes = ClassesOf(options);
  std::vector<std::map<int, std::vector<const ModelProfile*>>> eligible(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) {
    const MixClass& mc = classes[c];
    for (const std::string& name : mc.models) {
      if (models.Find(name) == nullptr) {
        return InvalidArgumentError("mix " + options.mix + ": class " + mc.name + ": model '" +
                                    name + "' is not in the catalog");
      }
    }
    for (int g : mc.gpus) {
      std::vector<const ModelProfile*>& list = eligible[c][g];
      if (mc.models.empty()) {
        for (const ModelProfile& m : models.models()) {
          if (!m.hybrid && m.AcceptsGpus(g)) list.push_back(&m);
        }
      } else {
        for (const std::string& name : mc.models) {
          const ModelProfile* m = models.Find(name);
          if (m->AcceptsGpus(g)) list.push_back(m);
        }
      }
      if (list.empty() && mc.weight > 0) {
        return InvalidArgumentError("models: no model accepts " + std::to_string(g) +
                                    " GPUs (min_gpus/max_gpus)" +
                                    (mc.name.empty() ? "" : " in class " + mc.name));
      }
      if (placer != nullptr && g > placer->total_gpus() && mc.weight > 0) {
        return InvalidArgumentError("size_mix: " + std::to_string(g) +
                                    "-GPU jobs do not fit the topology (" +
                                    std::to_string(placer->total_gpus()) + " GPUs)");
      }
    }
  }
  double weight_sum = 0;
  for (const MixClass& c : classes) weight_sum += c.weight;

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
    size_t cls = classes.size() - 1;
    for (size_t c = 0; c < classes.size(); ++c) {
      if (pick < classes[c].weight) {
        cls = c;
        break;
      }
      pick -= classes[c].weight;
    }
    const std::vector<int>& sizes = classes[cls].gpus;
    // One size: no draw, so that the lingjun-2023 mix draws exactly as before the mixes.
    j.gpus = sizes.size() == 1 ? sizes[0] : sizes[rng.Uniform(sizes.size())];
    const double z = Normal(rng);
    double d = options.median_duration_s * std::exp(options.duration_sigma * z) *
               (1.0 + options.size_duration_slope * std::log2(static_cast<double>(j.gpus)));
    d = std::clamp(d, options.min_duration_s, options.max_duration_s);
    j.duration_s = std::round(d);
    const std::vector<const ModelProfile*>& list = eligible[cls][j.gpus];
    j.model = list[rng.Uniform(list.size())]->name;
    jobs.push_back(std::move(j));
  }

  if (placer != nullptr) {
    // FIFO admission: a job starts at max(arrival, previous start) once it fits.
    using Running = std::pair<double, size_t>;  // (end time, job index)
    std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
    std::vector<Placement> placements(jobs.size());
    core::Rng scatter_rng(core::Mix64(options.seed ^ 0x5363617474657231ULL));
    core::Rng spill_rng(core::Mix64(options.seed ^ 0x5370696c6c526e67ULL));
    core::Rng share_rng(core::Mix64(options.seed ^ 0x5368617265486f73ULL));
    double clock = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      TraceJob& j = jobs[i];
      clock = std::max(clock, j.arrival_s);
      const bool scatter = options.scatter_probability > 0 && j.gpus > placer->gpus_per_host() &&
                           scatter_rng.UniformDouble() < options.scatter_probability;
      const bool spill = !scatter && options.spill_probability > 0 &&
                         j.gpus > placer->gpus_per_host() &&
                         spill_rng.UniformDouble() < options.spill_probability;
      // Hybrid profiles fix their GPUs per host (8): only single-pattern jobs share hosts.
      const bool share = !scatter && !spill && options.share_probability > 0 &&
                         j.gpus > placer->gpus_per_host() && !models.Find(j.model)->hybrid &&
                         share_rng.UniformDouble() < options.share_probability;
      while (true) {
        while (!running.empty() && running.top().first <= clock) {
          placer->Release(placements[running.top().second]);
          running.pop();
        }
        Result<Placement> p = scatter ? placer->PlaceScattered(j.gpus, scatter_rng)
                              : spill ? placer->PlaceSpilled(j.gpus)
                              : share ? placer->PlaceShared(j.gpus)
                                      : placer->Place(j.gpus);
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

ContentionStats ComputeContentionStats(const std::vector<TraceJob>& jobs,
                                       const std::function<int(const std::string&)>& tor_group) {
  ContentionStats s;
  if (jobs.empty()) return s;
  struct Info {
    double start;
    double end;
    std::vector<int> tors;  // Sorted, distinct.
  };
  std::vector<Info> info;
  info.reserve(jobs.size());
  double total_gpus = 0;
  for (const TraceJob& j : jobs) {
    Info x{j.arrival_s, j.duration_s ? j.arrival_s + *j.duration_s : 1e300, {}};
    for (const std::string& h : j.placement) {
      const int t = tor_group(h);
      if (t >= 0) x.tors.push_back(t);
    }
    std::sort(x.tors.begin(), x.tors.end());
    x.tors.erase(std::unique(x.tors.begin(), x.tors.end()), x.tors.end());
    info.push_back(std::move(x));
    total_gpus += j.gpus;
  }
  size_t cross = 0;
  size_t contend = 0;
  double contend_gpus = 0;
  for (size_t i = 0; i < info.size(); ++i) {
    if (info[i].tors.size() < 2) continue;
    ++cross;
    for (size_t k = 0; k < info.size(); ++k) {
      if (k == i || info[k].tors.size() < 2) continue;
      if (!(info[k].start < info[i].end && info[i].start < info[k].end)) continue;
      std::vector<int> common;
      std::set_intersection(info[i].tors.begin(), info[i].tors.end(), info[k].tors.begin(),
                            info[k].tors.end(), std::back_inserter(common));
      if (!common.empty()) {
        ++contend;
        contend_gpus += jobs[i].gpus;
        break;
      }
    }
  }
  const double n = static_cast<double>(jobs.size());
  s.share_jobs_cross_tor = static_cast<double>(cross) / n;
  s.share_jobs_may_contend = static_cast<double>(contend) / n;
  s.share_gpus_may_contend = total_gpus > 0 ? contend_gpus / total_gpus : 0;
  return s;
}

double MeanGpuOccupancy(const std::vector<TraceJob>& jobs, int cluster_gpus, double span_s) {
  if (!(span_s > 0) || cluster_gpus < 1) return 0;
  double gpu_s = 0;
  for (const TraceJob& j : jobs) {
    if (!j.duration_s) continue;
    const double a = std::clamp(j.arrival_s, 0.0, span_s);
    const double b = std::clamp(j.arrival_s + *j.duration_s, 0.0, span_s);
    gpu_s += j.gpus * (b - a);
  }
  return gpu_s / (span_s * static_cast<double>(cluster_gpus));
}

}  // namespace crux::sim::workload
