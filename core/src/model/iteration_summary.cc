// The planner's view of a multi-phase iteration; see iteration_summary.h.
#include "crux/core/model/iteration_summary.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "iteration_timing_internal.h"

namespace crux::core {

using timing_internal::BusiestNicBytes;
using timing_internal::OpWork;
using timing_internal::TimeWithWork;
using timing_internal::ValidateNetwork;

// ---- Summary ----

Result<IterationSummary> SummarizeIteration(const IterationModel& m, const HostNetwork& net) {
  CRUX_RETURN_IF_ERROR(ValidateNetwork(net));
  const std::vector<double> work = OpWork(m, net);
  CRUX_ASSIGN_OR_RETURN(const IterationTiming base, TimeWithWork(m, work, 1.0));
  IterationSummary s;
  s.work = m.work;
  s.busy = base.busy;
  s.compute = base.busy + base.idle;
  s.iteration = base.iteration;
  s.exposed = base.exposed;
  const double nic_bytes = BusiestNicBytes(m, net);
  s.nic_bytes = Bytes::FromDouble(nic_bytes);
  const double t = nic_bytes * 8.0 / net.nic_bandwidth.ToBitsPerSec();
  s.comm = Duration::Seconds(t);
  const double c = s.compute.ToSeconds();
  const double it = s.iteration.ToSeconds();
  if (!(c > 0)) {
    s.overlap_start = 0;
    return s;
  }
  if (it > c * (1 + 1e-9) + 1e-9 || !(t > 0)) {
    s.stretch_slack = 1;
    s.overlap_start = std::clamp((it - t) / c, 0.0, 1.0);
    if (!(t > 0)) s.overlap_start = 1.0;
    return s;
  }
  // Hidden: the largest uniform slow-down that keeps the iteration at c. At slow-down x the
  // network needs x t seconds, so x <= c / t.
  double lo = 1;
  double hi = std::max(1.0, c / t);
  for (int i = 0; i < 40 && hi - lo > 1e-6 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    CRUX_ASSIGN_OR_RETURN(const IterationTiming x, TimeWithWork(m, work, 1.0 / mid));
    (x.iteration.ToSeconds() <= it * (1 + 1e-9) + 1e-9 ? lo : hi) = mid;
  }
  s.stretch_slack = lo;
  s.overlap_start = std::clamp(1.0 - lo * t / c, 0.0, 1.0);
  return s;
}

Duration SingleOverlapIteration(const IterationSummary& s, double bandwidth_scale) {
  const double c = s.compute.ToSeconds();
  const double t = bandwidth_scale > 0 ? s.comm.ToSeconds() / bandwidth_scale : 0;
  return Duration::Seconds(std::max(c, s.overlap_start * c + t));
}

// ---- Topology mapping ----

namespace {

Result<NodeId> EndpointOf(const Topology& topo, NodeId host, int gpu, int gpus_per_host) {
  const std::vector<NodeId>& nics = topo.NicsOf(host);
  if (nics.empty()) return host;
  return nics[GpuNicIndex(static_cast<uint32_t>(gpu), static_cast<uint32_t>(gpus_per_host),
                          nics.size())];
}

}  // namespace

Result<std::vector<FlowDemand>> IterationFlows(const Topology& topo,
                                               const std::vector<NodeId>& hosts,
                                               const IterationModel& m) {
  if (static_cast<int>(hosts.size()) != m.layout.hosts()) {
    return InvalidArgumentError("hosts: the layout needs " + std::to_string(m.layout.hosts()) +
                                " hosts (got " + std::to_string(hosts.size()) + ")");
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (!hosts[i].valid() || hosts[i].value() >= topo.num_nodes() ||
        topo.node(hosts[i]).kind != NodeKind::kHost) {
      return InvalidArgumentError("hosts[" + std::to_string(i) + "]: not a host of the topology");
    }
  }
  std::map<std::pair<uint32_t, uint32_t>, double> sum;
  for (const CommOp& op : m.ops) {
    for (const RailFlow& f : op.flows) {
      CRUX_ASSIGN_OR_RETURN(const NodeId src,
                            EndpointOf(topo, hosts[static_cast<size_t>(f.src_host)], f.src_gpu,
                                       m.layout.gpus_per_host));
      CRUX_ASSIGN_OR_RETURN(const NodeId dst,
                            EndpointOf(topo, hosts[static_cast<size_t>(f.dst_host)], f.dst_gpu,
                                       m.layout.gpus_per_host));
      sum[{src.value(), dst.value()}] += f.bytes.ToDouble() * op.instances;
    }
  }
  std::vector<FlowDemand> out;
  out.reserve(sum.size());
  for (const auto& [key, bytes] : sum) {
    const Bytes b = Bytes::FromDouble(bytes);
    if (b.count() > 0) out.push_back(FlowDemand{NodeId(key.first), NodeId(key.second), b});
  }
  return out;
}

Result<JobSpec> SingleOverlapJobSpec(const Topology& topo, std::string id,
                                     const std::vector<NodeId>& hosts, const IterationModel& m) {
  CRUX_ASSIGN_OR_RETURN(std::vector<FlowDemand> flows, IterationFlows(topo, hosts, m));
  HostNetwork net;
  net.nics_per_host = 1;
  net.nic_bandwidth = Bandwidth::Gbps(400);
  if (!hosts.empty()) {
    const std::vector<NodeId>& nics = topo.NicsOf(hosts[0]);
    const NodeId end = nics.empty() ? hosts[0] : nics[0];
    int64_t bps = 0;
    for (LinkId l : topo.OutLinks(end)) {
      if (IsNetworkSwitch(topo.node(topo.link(l).dst).kind))
        bps += topo.link(l).capacity.bits_per_sec();
    }
    net.nics_per_host = std::max<int>(1, static_cast<int>(nics.size()));
    if (bps > 0) net.nic_bandwidth = Bandwidth::BitsPerSec(bps);
  }
  CRUX_ASSIGN_OR_RETURN(const IterationSummary s, SummarizeIteration(m, net));
  JobSpec j;
  j.id = std::move(id);
  j.hosts = hosts;
  j.gpus_per_host = std::min(m.layout.gpus_per_host, m.layout.gpus());
  j.compute_time = s.compute;
  j.flops_per_iteration = s.work;
  j.overlap_start = s.overlap_start;
  j.pattern = TrafficPattern::kExplicit;
  j.flows = std::move(flows);
  return j;
}

}  // namespace crux::core
