// Random clusters and job events for the planner's re-planning tests (incremental and stable):
// a few small fabrics with different contention shapes, a job generator with arrivals and profile
// changes as the daemon sees them, and a plan comparison that names the first difference.
#ifndef CRUX_TESTING_RANDOM_JOBS_H_
#define CRUX_TESTING_RANDOM_JOBS_H_

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/plan/planner.h"
#include "crux/core/topology/builders.h"
#include "crux/testing/test_topologies.h"

namespace crux::core::testing {

// The first difference between two plans ("" when equal). Timings are not compared (they come
// from the clock).
inline std::string PlanDiff(const Plan& a, const Plan& b) {
  std::ostringstream d;
  if (a.levels != b.levels || a.first_job_level != b.first_job_level ||
      a.usable_levels != b.usable_levels) {
    return "level band";
  }
  if (a.reference_job != b.reference_job) {
    d << "reference " << a.reference_job << " vs " << b.reference_job;
    return d.str();
  }
  if (a.cut_weight != b.cut_weight || a.total_edge_weight != b.total_edge_weight) {
    d.precision(17);
    d << "cut " << a.cut_weight << "/" << a.total_edge_weight << " vs " << b.cut_weight << "/"
      << b.total_edge_weight;
    return d.str();
  }
  if (a.unpinned_flows != b.unpinned_flows) return "unpinned_flows";
  if (!(a.dag == b.dag)) {
    d << "dag: " << a.dag.edges.size() << " vs " << b.dag.edges.size() << " edges";
    return d.str();
  }
  if (a.jobs.size() != b.jobs.size()) return "number of jobs";
  for (size_t j = 0; j < a.jobs.size(); ++j) {
    const JobPlan& x = a.jobs[j];
    const JobPlan& y = b.jobs[j];
    d << "job " << j << " (" << x.id << "): ";
    if (x.id != y.id) return d.str() + "id";
    if (x.gpus != y.gpus || x.work != y.work || x.comm_time != y.comm_time ||
        x.bottleneck != y.bottleneck || x.period != y.period ||
        x.bytes_per_sec != y.bytes_per_sec || x.intensity != y.intensity) {
      return d.str() + "profile";
    }
    if (x.k != y.k) return d.str() + "k " + std::to_string(x.k) + " vs " + std::to_string(y.k);
    if (x.priority != y.priority) return d.str() + "priority";
    if (x.rank != y.rank) return d.str() + "rank";
    if (x.level != y.level) {
      return d.str() + "level " + std::to_string(x.level) + " vs " + std::to_string(y.level);
    }
    if (x.reference != y.reference) return d.str() + "reference flag";
    if (x.time_shift != y.time_shift) return d.str() + "time shift";
    if (x.flows.size() != y.flows.size()) return d.str() + "number of flows";
    for (size_t f = 0; f < x.flows.size(); ++f) {
      const FlowPlan& p = x.flows[f];
      const FlowPlan& q = y.flows[f];
      if (p.src != q.src || p.dst != q.dst || p.bytes != q.bytes || p.path != q.path ||
          p.path_index != q.path_index || p.num_paths != q.num_paths ||
          p.udp_sport != q.udp_sport) {
        return d.str() + "flow " + std::to_string(f) + " (path index " +
               std::to_string(p.path_index) + " vs " + std::to_string(q.path_index) + ")";
      }
    }
    d.str("");
  }
  return "";
}

// ---- Random clusters and events ----

struct Fabric {
  std::string name;
  Topology topo;
};

inline std::vector<Fabric> Fabrics() {
  std::vector<Fabric> out;
  {  // Oversubscribed 2-tier Clos (like configs/topologies/example_clos2.yaml): big components.
    Clos2Params p;
    p.host.nics_per_host = 2;
    p.host.nic_gbps = 200;
    p.tors = 4;
    p.aggs = 2;
    p.hosts_per_tor = 4;
    p.uplink_gbps = 400;
    out.push_back({"clos2-4x2", Must(BuildClos2(p), "BuildClos2")});
  }
  {  // Wider Clos, more equal-cost paths and fewer collisions: many small components.
    Clos2Params p;
    p.host.nics_per_host = 1;
    p.tors = 8;
    p.aggs = 4;
    p.hosts_per_tor = 2;
    p.uplink_gbps = 200;
    out.push_back({"clos2-8x4", Must(BuildClos2(p), "BuildClos2")});
  }
  {  // A small HPN pod: dual-plane, rail-optimised segments.
    HpnParams p;
    p.segments = 3;
    p.hosts_per_segment = 4;
    p.rails = 2;
    p.planes = 2;
    p.aggs_per_plane = 3;
    out.push_back({"hpn-small", Must(BuildHpn(p), "BuildHpn")});
  }
  {  // 3-tier fat tree (k = 4): switch paths share links.
    FatTreeParams p;
    p.k = 4;
    out.push_back({"fattree-4", Must(BuildFatTree(p), "BuildFatTree")});
  }
  return out;
}

class JobGenerator {
 public:
  JobGenerator(const Topology& topo, uint64_t seed) : topo_(topo), rng_(seed) {}

  JobSpec NewJob() {
    JobSpec spec;
    spec.id = "job" + std::to_string(next_id_++);
    Place(spec);
    Profile(spec);
    return spec;
  }

  // A profile change as the daemon sees it (compute time, bytes, overlap); sometimes also
  // the placement or the traffic pattern.
  void Change(JobSpec& spec) {
    switch (rng_.Uniform(4)) {
      case 0:
        Place(spec);
        break;
      case 1:
        spec.pattern_bytes =
            Bytes::FromDouble(spec.pattern_bytes.ToDouble() * (0.5 + rng_.UniformDouble()));
        break;
      default:
        Profile(spec);
        break;
    }
  }

  Rng& rng() { return rng_; }

 private:
  void Place(JobSpec& spec) {
    std::vector<NodeId> pool = topo_.hosts();
    const size_t size = 1 + rng_.Uniform(std::min<size_t>(4, pool.size()));
    spec.hosts.clear();
    for (size_t i = 0; i < size; ++i) {
      const size_t k = i + rng_.Uniform(pool.size() - i);
      std::swap(pool[i], pool[k]);
      spec.hosts.push_back(pool[i]);
    }
    const uint64_t kind = rng_.Uniform(10);
    spec.flows.clear();
    if (kind < 5) {
      spec.pattern = TrafficPattern::kRingAllReduce;
    } else if (kind < 7) {
      spec.pattern = TrafficPattern::kAllToAll;
    } else if (kind < 9) {
      spec.pattern = TrafficPattern::kPipeline;
    } else {
      spec.pattern = TrafficPattern::kExplicit;
      const int flows = 1 + static_cast<int>(rng_.Uniform(3));
      for (int f = 0; f < flows && spec.hosts.size() > 1; ++f) {
        const NodeId a = spec.hosts[rng_.Uniform(spec.hosts.size())];
        NodeId b = a;
        while (b == a) b = spec.hosts[rng_.Uniform(spec.hosts.size())];
        const auto& na = topo_.NicsOf(a);
        const auto& nb = topo_.NicsOf(b);
        spec.flows.push_back(FlowDemand{na[rng_.Uniform(na.size())], nb[rng_.Uniform(nb.size())],
                                        Bytes::FromDouble(1e6 + 1e9 * rng_.UniformDouble())});
      }
      if (spec.flows.empty()) spec.pattern = TrafficPattern::kRingAllReduce;
    }
  }

  void Profile(JobSpec& spec) {
    spec.gpus_per_host = 1 + static_cast<int>(rng_.Uniform(8));
    // Coarse values so that exact ties (equal I_j, equal P_j) happen now and then.
    spec.compute_time = Duration::Millis(50 * static_cast<int64_t>(1 + rng_.Uniform(10)));
    spec.pattern_bytes = Bytes::FromDouble(1e8 * static_cast<double>(1 + rng_.Uniform(20)));
    spec.overlap_start = static_cast<double>(rng_.Uniform(5)) / 4.0;
    spec.flops_per_iteration.reset();
    if (rng_.Uniform(4) == 0) spec.flops_per_iteration = Flops::Tera(100.0 * (1 + rng_.Uniform(5)));
  }

  const Topology& topo_;
  Rng rng_;
  int next_id_ = 0;
};

}  // namespace crux::core::testing

#endif  // CRUX_TESTING_RANDOM_JOBS_H_
