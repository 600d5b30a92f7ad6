#include "crux/sim/workload/workload.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>

#include "crux/sim/workload/placement.h"

namespace crux::sim::workload {

using core::Duration;
using core::Result;
using core::Status;

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
  // Place in arrival order (stable for ties), releasing GPUs at departures.
  std::vector<size_t> order(trace.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return trace[a].arrival_s < trace[b].arrival_s; });
  using Running = std::pair<double, size_t>;
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running;
  std::vector<Placement> placements(trace.size());
  std::vector<bool> reserved(trace.size(), false);
  for (size_t i : order) {
    const TraceJob& t = trace[i];
    while (!running.empty() && running.top().first <= t.arrival_s) {
      if (reserved[running.top().second]) placer.Release(placements[running.top().second]);
      running.pop();
    }
    Placement p;
    if (!t.placement.empty()) {
      for (const std::string& h : t.placement) p.hosts.push_back(*topo.FindNode(h));
      p.gpus_per_host = t.gpus / static_cast<int>(t.placement.size());
      // Explicit placements are the trace's; they may overlap (then nothing is reserved).
      reserved[i] = placer.Reserve(p).ok();
    } else {
      Result<Placement> placed = placer.Place(t.gpus);
      if (!placed.ok()) return placed.status().WithContext(where(t) + ": placement");
      p = *placed;
      reserved[i] = true;
    }
    double end = 1e300;
    if (t.duration_s) {
      end = t.arrival_s + *t.duration_s;
    } else if (t.iterations) {
      end = t.arrival_s + static_cast<double>(*t.iterations) * profile[i]->compute_time.ToSeconds();
    }
    running.emplace(end, i);
    SimJob& j = out[i];
    j.spec = MakeJobSpec(*profile[i], t.id, p.hosts, p.gpus_per_host);
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
