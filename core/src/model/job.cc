#include "crux/core/model/job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_set>

namespace crux::core {
namespace {

std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// The endpoint a job uses on host h for rail r: NIC r, or the host itself when it has no NIC
// nodes (explicit topologies, where a host's links are its NICs).
NodeId RailEndpoint(const Topology& topo, NodeId h, int r) {
  const std::vector<NodeId>& nics = topo.NicsOf(h);
  if (nics.empty()) return h;
  return nics[static_cast<size_t>(r)];
}

int Rails(const Topology& topo, const JobSpec& job) {
  int rails = job.gpus_per_host;
  for (NodeId h : job.hosts) {
    const int nics = static_cast<int>(topo.NicsOf(h).size());
    rails = std::min(rails, std::max(nics, 1));
  }
  return std::max(rails, 1);
}

}  // namespace

std::string_view TrafficPatternName(TrafficPattern p) {
  switch (p) {
    case TrafficPattern::kExplicit:
      return "explicit";
    case TrafficPattern::kRingAllReduce:
      return "ring_allreduce";
    case TrafficPattern::kAllToAll:
      return "all_to_all";
    case TrafficPattern::kPipeline:
      return "pipeline";
  }
  return "unknown";
}

Result<TrafficPattern> ParseTrafficPattern(std::string_view name) {
  for (TrafficPattern p : {TrafficPattern::kExplicit, TrafficPattern::kRingAllReduce,
                           TrafficPattern::kAllToAll, TrafficPattern::kPipeline}) {
    if (TrafficPatternName(p) == name) return p;
  }
  return InvalidArgumentError("unknown traffic pattern '" + std::string(name) +
                              "' (expected ring_allreduce, all_to_all, pipeline or explicit)");
}

Status ValidateJob(const Topology& topo, const JobSpec& job) {
  if (job.id.empty()) return InvalidArgumentError("id: must not be empty");
  if (job.hosts.empty()) return InvalidArgumentError("hosts: must list at least one host");
  std::unordered_set<uint32_t> seen;
  for (size_t i = 0; i < job.hosts.size(); ++i) {
    const NodeId h = job.hosts[i];
    const std::string key = "hosts[" + std::to_string(i) + "]";
    if (!h.valid() || h.value() >= topo.num_nodes()) {
      return InvalidArgumentError(key + ": not a node of the topology");
    }
    if (topo.node(h).kind != NodeKind::kHost) {
      return InvalidArgumentError(key + ": '" + topo.node(h).name + "' is not a host");
    }
    if (!seen.insert(h.value()).second) {
      return InvalidArgumentError(key + ": host '" + topo.node(h).name + "' listed twice");
    }
  }
  if (job.gpus_per_host < 1) {
    return InvalidArgumentError("gpus_per_host: must be >= 1 (got " +
                                std::to_string(job.gpus_per_host) + ")");
  }
  if (job.compute_time <= Duration::Zero() || job.compute_time.IsInfinite()) {
    return InvalidArgumentError("compute_time_s: must be > 0 and finite (got " +
                                Num(job.compute_time.ToSeconds()) + ")");
  }
  if (job.flops_per_iteration.has_value()) {
    const double w = job.flops_per_iteration->value();
    if (!std::isfinite(w) || w <= 0) {
      return InvalidArgumentError("flops_per_iteration: must be > 0 and finite (got " + Num(w) +
                                  ")");
    }
  }
  if (!(job.overlap_start >= 0.0 && job.overlap_start <= 1.0)) {
    return InvalidArgumentError("overlap_start: must be in [0, 1] (got " + Num(job.overlap_start) +
                                ")");
  }
  if (!(job.compression_ratio > 0.0 && job.compression_ratio <= 1e3)) {
    return InvalidArgumentError("compression_ratio: must be in (0, 1000] (got " +
                                Num(job.compression_ratio) + ")");
  }
  if (job.pattern == TrafficPattern::kExplicit) {
    for (size_t i = 0; i < job.flows.size(); ++i) {
      const FlowDemand& f = job.flows[i];
      const std::string key = "flows[" + std::to_string(i) + "]";
      for (NodeId n : {f.src, f.dst}) {
        if (!n.valid() || n.value() >= topo.num_nodes()) {
          return InvalidArgumentError(key + ": endpoint is not a node of the topology");
        }
        if (IsNetworkSwitch(topo.node(n).kind)) {
          return InvalidArgumentError(key + ": '" + topo.node(n).name +
                                      "' is a switch; flows run between hosts or NICs");
        }
      }
      if (f.src == f.dst) {
        return InvalidArgumentError(key + ": src and dst are the same node '" +
                                    topo.node(f.src).name + "'");
      }
      if (f.bytes <= Bytes::Of(0)) {
        return InvalidArgumentError(key + ".bytes: must be > 0 (got " +
                                    std::to_string(f.bytes.count()) + ")");
      }
    }
  } else if (job.pattern_bytes <= Bytes::Of(0)) {
    return InvalidArgumentError("traffic.bytes: must be > 0 (got " +
                                std::to_string(job.pattern_bytes.count()) + ")");
  }
  return Status::Ok();
}

Result<std::vector<FlowDemand>> ExpandTraffic(const Topology& topo, const JobSpec& job) {
  CRUX_RETURN_IF_ERROR(ValidateJob(topo, job));
  std::vector<FlowDemand> flows;
  const double c = job.compression_ratio;
  const double s = job.pattern_bytes.ToDouble();
  const int h = static_cast<int>(job.hosts.size());
  const int g = job.gpus_per_host;
  const double p = static_cast<double>(h) * g;
  const int rails = Rails(topo, job);
  auto add = [&](NodeId a, NodeId b, double bytes) {
    const Bytes on_wire = Bytes::FromDouble(bytes * c);
    if (on_wire > Bytes::Of(0)) flows.push_back(FlowDemand{a, b, on_wire});
  };
  switch (job.pattern) {
    case TrafficPattern::kExplicit:
      for (const FlowDemand& f : job.flows) add(f.src, f.dst, f.bytes.ToDouble());
      break;
    case TrafficPattern::kRingAllReduce:
      if (h < 2) break;
      for (int r = 0; r < rails; ++r) {
        for (int i = 0; i < h; ++i) {
          add(RailEndpoint(topo, job.hosts[static_cast<size_t>(i)], r),
              RailEndpoint(topo, job.hosts[static_cast<size_t>((i + 1) % h)], r),
              2.0 * (p - 1.0) / p * s / rails);
        }
      }
      break;
    case TrafficPattern::kAllToAll:
      for (int a = 0; a < h; ++a) {
        for (int b = 0; b < h; ++b) {
          if (a == b) continue;
          for (int r = 0; r < rails; ++r) {
            add(RailEndpoint(topo, job.hosts[static_cast<size_t>(a)], r),
                RailEndpoint(topo, job.hosts[static_cast<size_t>(b)], r),
                static_cast<double>(g) * g * s / p / rails);
          }
        }
      }
      break;
    case TrafficPattern::kPipeline:
      for (int i = 0; i + 1 < h; ++i) {
        const NodeId a = job.hosts[static_cast<size_t>(i)];
        const NodeId b = job.hosts[static_cast<size_t>(i + 1)];
        for (int r = 0; r < rails; ++r) {
          add(RailEndpoint(topo, a, r), RailEndpoint(topo, b, r), s / rails);
          add(RailEndpoint(topo, b, r), RailEndpoint(topo, a, r), s / rails);
        }
      }
      break;
  }
  return flows;
}

Flops WorkPerIteration(const JobSpec& job, double peak_flops_per_gpu) {
  if (job.flops_per_iteration.has_value()) return *job.flops_per_iteration;
  return Flops::Of(static_cast<double>(job.gpus()) * job.compute_time.ToSeconds() *
                   peak_flops_per_gpu);
}

}  // namespace crux::core
