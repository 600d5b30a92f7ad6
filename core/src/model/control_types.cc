#include "crux/core/model/control_types.h"

#include <cmath>

namespace crux::core {
namespace {

// |b - a| > pct% of |a| (a == 0: any change counts).
bool Moved(double a, double b, double pct) {
  if (a == b) return false;
  if (a == 0) return true;
  return std::fabs(b - a) > std::fabs(a) * pct / 100.0;
}

double FlopsOr0(const std::optional<Flops>& f) { return f ? f->value() : 0.0; }

}  // namespace

std::string_view JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kRegistered:
      return "registered";
    case JobPhase::kProfiling:
      return "profiling";
    case JobPhase::kScheduled:
      return "scheduled";
  }
  return "unknown";
}

bool SignificantChange(const JobProfile& planned, const JobProfile& next, double threshold_pct) {
  if (threshold_pct <= 0) return true;
  const double t = threshold_pct;
  if (Moved(planned.compute_time.ToSeconds(), next.compute_time.ToSeconds(), t) ||
      Moved(planned.iteration_period.ToSeconds(), next.iteration_period.ToSeconds(), t) ||
      Moved(FlopsOr0(planned.flops_per_iteration), FlopsOr0(next.flops_per_iteration), t) ||
      Moved(static_cast<double>(planned.bytes_per_iteration.count()),
            static_cast<double>(next.bytes_per_iteration.count()), t) ||
      Moved(planned.compression_ratio, next.compression_ratio, t) ||
      std::fabs(next.overlap_start - planned.overlap_start) > t / 100.0) {
    return true;
  }
  if (planned.peers.size() != next.peers.size()) return true;
  for (size_t i = 0; i < next.peers.size(); ++i) {
    const PeerTraffic& a = planned.peers[i];
    const PeerTraffic& b = next.peers[i];
    if (a.local_nic != b.local_nic || a.remote_nic != b.remote_nic ||
        Moved(static_cast<double>(a.bytes.count()), static_cast<double>(b.bytes.count()), t)) {
      return true;
    }
  }
  return false;
}

uint32_t TrafficClassFor(uint32_t dscp) { return dscp << 2; }

std::map<std::string, std::string> NcclEnvFor(uint32_t dscp) {
  return {{"NCCL_IB_TC", std::to_string(TrafficClassFor(dscp))}};
}

}  // namespace crux::core
