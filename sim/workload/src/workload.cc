#include "crux/sim/workload/workload.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <queue>

#include "crux/core/base/ids.h"
#include "crux/sim/workload/placement.h"

namespace crux::sim::workload {

using core::Duration;
using core::Result;
using core::Status;

namespace {

// End time of a job that runs until the horizon.
constexpr double kForever = 1e300;

std::string FormatSeconds(double s) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

}  // namespace

std::vector<SimJob> FromJobEntries(const std::vector<spec::JobEntry>& entries) {
  std::vector<SimJob> out;
  out.reserve(entries.size());
  for (const spec::JobEntry& e : entries) {
    SimJob j;
    j.spec = e.spec;
    if (e.fixed_rank) j.spec.fixed_rank = e.fixed_rank;
    j.arrival = Duration::Seconds(e.arrival_s.value_or(0));
    if (e.duration_s) j.duration = Duration::Seconds(*e.duration_s);
    j.iterations = e.iterations;
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<SimJob>> LoadJobsWorkload(const std::string& path, const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(const std::vector<spec::JobEntry> entries, spec::LoadJobsFile(path, topo));
  return FromJobEntries(entries);
}

Status CheckHostCapacity(const std::vector<SimJob>& jobs, const core::Topology& topo,
                         int gpus_per_host) {
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs[a].arrival < jobs[b].arrival; });
  std::vector<double> ends(jobs.size(), kForever);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const SimJob& j = jobs[i];
    const double a = j.arrival.ToSeconds();
    if (j.duration) {
      ends[i] = a + j.duration->ToSeconds();
    } else if (j.iterations) {
      ends[i] = a + static_cast<double>(*j.iterations) * j.spec.compute_time.ToSeconds();
    }
  }
  auto name = [](const SimJob& j) { return "job " + core::QuoteName(j.spec.id); };
  std::vector<int> used(topo.num_nodes(), 0);
  std::vector<std::vector<size_t>> holders(topo.num_nodes());
  using Running = std::pair<double, size_t>;
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
  for (size_t i : order) {
    const SimJob& j = jobs[i];
    const double t = j.arrival.ToSeconds();
    while (!running.empty() && running.top().first <= t) {
      const size_t done = running.top().second;
      running.pop();
      for (core::NodeId h : jobs[done].spec.hosts) {
        used[h.value()] -= jobs[done].spec.gpus_per_host;
        std::vector<size_t>& hs = holders[h.value()];
        hs.erase(std::find(hs.begin(), hs.end(), done));
      }
    }
    const int g = j.spec.gpus_per_host;
    if (g > gpus_per_host) {
      return core::InvalidArgumentError(name(j) + ": gpus_per_host: " + std::to_string(g) +
                                        " GPUs per host, but a host has " +
                                        std::to_string(gpus_per_host) + " (--gpus-per-host)");
    }
    for (core::NodeId h : j.spec.hosts) {
      if (!h.valid() || h.value() >= used.size()) {
        return core::InvalidArgumentError(name(j) + ": hosts: not a node of the topology");
      }
      if (used[h.value()] + g <= gpus_per_host) continue;
      std::string by;
      for (size_t k : holders[h.value()]) {
        by += (by.empty() ? "" : ", ") + name(jobs[k]) + " (" +
              std::to_string(jobs[k].spec.gpus_per_host) + " GPUs, " +
              (ends[k] >= kForever ? std::string("to the horizon")
                                   : "until t=" + FormatSeconds(ends[k])) +
              ")";
      }
      return core::FailedPreconditionError(
          name(j) + ": host '" + topo.node(h).name + "' has " +
          std::to_string(gpus_per_host - used[h.value()]) + " of " + std::to_string(gpus_per_host) +
          " GPUs free at t=" + FormatSeconds(t) + ", the job needs " + std::to_string(g) +
          "; held by " + by + " (jobs may not share a host's GPUs)");
    }
    for (core::NodeId h : j.spec.hosts) {
      used[h.value()] += g;
      holders[h.value()].push_back(i);
    }
    running.emplace(ends[i], i);
  }
  return Status::Ok();
}

Result<std::vector<SimJob>> TraceToSimJobs(const std::vector<TraceJob>& trace,
                                           const ModelCatalog& models, const core::Topology& topo,
                                           int gpus_per_host) {
  CRUX_ASSIGN_OR_RETURN(Placer placer, Placer::Create(topo, gpus_per_host));
  std::vector<SimJob> out(trace.size());
  auto where = [&](const TraceJob& t) {
    return (t.line > 0 ? "line " + std::to_string(t.line) + ": " : std::string()) + "job " + t.id;
  };
  // Resolve models and explicit hosts first (in file order, so the first bad row is reported).
  std::vector<const ModelProfile*> profile(trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceJob& t = trace[i];
    profile[i] = models.Find(t.model);
    if (profile[i] == nullptr) {
      return core::InvalidArgumentError(where(t) + ": unknown model '" + t.model +
                                        "' (known: " + models.Names() + ")");
    }
    for (const std::string& h : t.placement) {
      Result<core::NodeId> id = topo.FindNode(h);
      if (!id.ok() || topo.node(*id).kind != core::NodeKind::kHost) {
        return core::InvalidArgumentError(where(t) + ": placement: '" + h +
                                          "' is not a host of the topology");
      }
    }
  }
  // Place in arrival order (stable for ties), releasing GPUs at departures. Every job, with
  // or without an explicit placement, holds its hosts' GPUs from arrival to its end; a host can
  // never run more GPUs than it has.
  std::vector<size_t> order(trace.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return trace[a].arrival_s < trace[b].arrival_s; });
  using Running = std::pair<double, size_t>;  // (end time, trace index)
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
  std::vector<Placement> placements(trace.size());
  std::map<std::pair<const ModelProfile*, int>, std::shared_ptr<const core::IterationModel>>
      iterations;
  std::vector<double> ends(trace.size(), kForever);
  std::vector<bool> holding(trace.size(), false);
  for (size_t i : order) {
    const TraceJob& t = trace[i];
    while (!running.empty() && running.top().first <= t.arrival_s) {
      const size_t done = running.top().second;
      running.pop();
      placer.Release(placements[done]);
      holding[done] = false;
    }
    Placement p;
    if (!t.placement.empty()) {
      for (const std::string& h : t.placement) p.hosts.push_back(*topo.FindNode(h));
      p.gpus_per_host = t.gpus / static_cast<int>(t.placement.size());
      if (p.gpus_per_host > gpus_per_host) {
        return core::InvalidArgumentError(
            where(t) + ": placement: " + std::to_string(t.gpus) + " GPUs on " +
            std::to_string(t.placement.size()) + " hosts is " + std::to_string(p.gpus_per_host) +
            " GPUs per host, but a host has " + std::to_string(gpus_per_host) + " (gpus_per_host)");
      }
      for (core::NodeId h : p.hosts) {
        if (placer.free_gpus(h) >= p.gpus_per_host) continue;
        // Name the jobs holding the host.
        std::string holders;
        for (size_t k = 0; k < trace.size(); ++k) {
          if (!holding[k]) continue;
          const std::vector<core::NodeId>& hs = placements[k].hosts;
          if (std::find(hs.begin(), hs.end(), h) == hs.end()) continue;
          holders += (holders.empty() ? "" : ", ") + where(trace[k]) + " (" +
                     std::to_string(placements[k].gpus_per_host) + " GPUs, " +
                     (ends[k] >= kForever ? std::string("to the horizon")
                                          : "until t=" + FormatSeconds(ends[k])) +
                     ")";
        }
        return core::FailedPreconditionError(
            where(t) + ": placement: host '" + topo.node(h).name + "' has " +
            std::to_string(placer.free_gpus(h)) + " of " + std::to_string(gpus_per_host) +
            " GPUs free at t=" + FormatSeconds(t.arrival_s) + ", the job needs " +
            std::to_string(p.gpus_per_host) + "; held by " + holders +
            " (jobs may not share a host's GPUs; the simulator does not queue jobs)");
      }
      CRUX_RETURN_IF_ERROR(placer.Reserve(p).WithContext(where(t) + ": placement"));
    } else {
      Result<Placement> placed = placer.Place(t.gpus);
      if (!placed.ok()) return placed.status().WithContext(where(t) + ": placement");
      p = *placed;
    }
    if (t.duration_s) {
      ends[i] = t.arrival_s + *t.duration_s;
    } else if (t.iterations) {
      ends[i] =
          t.arrival_s + static_cast<double>(*t.iterations) * profile[i]->compute_time.ToSeconds();
    }
    placements[i] = p;
    holding[i] = true;
    running.emplace(ends[i], i);
    SimJob& j = out[i];
    Result<core::JobSpec> spec = MakeJobSpecOn(topo, *profile[i], t.id, p.hosts, p.gpus_per_host);
    if (!spec.ok()) return spec.status().WithContext(where(t));
    j.spec = *std::move(spec);
    if (profile[i]->hybrid) {
      // The phases the engine runs (the spec is their single-overlap summary); one model per
      // profile and size, shared by the jobs that run it.
      const int gpus = p.gpus_per_host * static_cast<int>(p.hosts.size());
      std::shared_ptr<const core::IterationModel>& model = iterations[{profile[i], gpus}];
      if (model == nullptr) {
        Result<core::IterationModel> it = HybridIteration(*profile[i], gpus);
        if (!it.ok()) return it.status().WithContext(where(t));
        model = std::make_shared<const core::IterationModel>(*std::move(it));
      }
      j.iteration = model;
    }
    j.arrival = Duration::Seconds(t.arrival_s);
    if (t.duration_s) j.duration = Duration::Seconds(*t.duration_s);
    j.iterations = t.iterations;
    j.model = t.model;
    Status valid = core::ValidateJob(topo, j.spec);
    if (!valid.ok()) return valid.WithContext(where(t));
  }
  return out;
}

}  // namespace crux::sim::workload
