#include "crux/loadgen/flow_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "crux/core/topology/link_name.h"

namespace crux::loadgen {
namespace {

core::Result<double> Number(std::string_view text, const std::string& what) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) {
    return core::InvalidArgumentError(what + ": '" + std::string(text) + "' is not a number");
  }
  return v;
}

}  // namespace

core::Result<JobLie> ParseJobLie(std::string_view spec) {
  const std::string where = "--lie '" + std::string(spec) + "'";
  const size_t colon = spec.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return core::InvalidArgumentError(where + ": expected JOB:FRACTION[@AFTER_S]");
  }
  JobLie lie;
  lie.job_id = std::string(spec.substr(0, colon));
  std::string_view fraction = spec.substr(colon + 1);
  std::string_view after;
  if (size_t at = fraction.find('@'); at != std::string_view::npos) {
    after = fraction.substr(at + 1);
    fraction = fraction.substr(0, at);
  }
  CRUX_ASSIGN_OR_RETURN(lie.rate_fraction, Number(fraction, where + ": FRACTION"));
  if (!(lie.rate_fraction >= 0 && lie.rate_fraction < 1)) {
    return core::InvalidArgumentError(where + ": FRACTION must be in [0, 1) (0 = no progress)");
  }
  if (!after.empty()) {
    CRUX_ASSIGN_OR_RETURN(double s, Number(after, where + ": AFTER_S"));
    if (!(s >= 0 && s <= 1e7)) return core::InvalidArgumentError(where + ": AFTER_S must be >= 0");
    lie.after = core::Duration::Seconds(s);
  }
  return lie;
}

double LieFactor(const std::string& job_id, const std::vector<JobLie>& lies,
                 core::Duration since_start) {
  double factor = 1;
  for (const JobLie& l : lies) {
    if (l.job_id == job_id && since_start >= l.after) factor = std::min(factor, l.rate_fraction);
  }
  return factor;
}

core::Result<LinkFault> ParseLinkFault(std::string_view spec, const core::Topology& topo) {
  const std::string where = "--fault '" + std::string(spec) + "'";
  LinkFault f;
  const size_t colon = spec.rfind(':');
  if (colon == std::string_view::npos) {
    return core::InvalidArgumentError(where + ": expected LINK:FRACTION[@AFTER_S[+DURATION_S]]");
  }
  const std::string_view link = spec.substr(0, colon);
  std::string_view rest = spec.substr(colon + 1);
  std::string_view fraction = rest;
  std::string_view after;
  std::string_view duration;
  bool has_duration = false;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    fraction = rest.substr(0, at);
    after = rest.substr(at + 1);
    if (size_t plus = after.find('+'); plus != std::string_view::npos) {
      duration = after.substr(plus + 1);
      after = after.substr(0, plus);
      has_duration = true;
    }
  }
  CRUX_ASSIGN_OR_RETURN(f.rate_fraction, Number(fraction, where + ": FRACTION"));
  if (!(f.rate_fraction >= 0 && f.rate_fraction < 1)) {
    return core::InvalidArgumentError(where + ": FRACTION must be in [0, 1) (0 = cut)");
  }
  if (!after.empty()) {
    CRUX_ASSIGN_OR_RETURN(double s, Number(after, where + ": AFTER_S"));
    if (s < 0 || s > 1e7) return core::InvalidArgumentError(where + ": AFTER_S must be >= 0");
    f.after = core::Duration::Seconds(s);
  }
  if (has_duration) {
    CRUX_ASSIGN_OR_RETURN(double s, Number(duration, where + ": DURATION_S"));
    if (s <= 0 || s > 1e7) return core::InvalidArgumentError(where + ": DURATION_S must be > 0");
    f.duration = core::Duration::Seconds(s);
  }
  core::Result<core::LinkName> name = core::ParseLinkName(topo, link);
  if (!name.ok()) {
    return core::InvalidArgumentError(where +
                                      ": LINK must be 'a->b' or 'a-b' of two adjacent "
                                      "nodes of the topology (" +
                                      name.status().message() + ")");
  }
  f.from = name->from;
  f.to = name->to;
  f.both = name->both;
  return f;
}

std::string DescribeFault(const LinkFault& f) {
  char frac[32];
  std::snprintf(frac, sizeof(frac), "%.0f%%", f.rate_fraction * 100);
  std::string out = f.from + (f.both ? "<->" : "->") + f.to + " " +
                    (f.rate_fraction == 0 ? std::string("cut") : std::string("at ") + frac) +
                    " from " + std::to_string(f.after.nanos() / 1000000) + " ms";
  if (f.duration > core::Duration::Zero()) {
    out += " for " + std::to_string(f.duration.nanos() / 1000000) + " ms";
  }
  return out;
}

std::vector<PinnedFlow> PinnedFlows(const v1::Assignment& a, const SimJob& job) {
  std::map<std::pair<std::string, std::string>, uint64_t> demand;
  for (const PeerDemand& p : job.peers) demand[{p.local_nic, p.remote_nic}] += p.bytes;
  std::vector<PinnedFlow> out;
  for (const v1::FlowAssignment& fl : a.flows()) {
    auto it = demand.find({fl.src_nic(), fl.dst_nic()});
    if (it == demand.end() || it->second == 0) continue;
    PinnedFlow f;
    f.src = fl.src_nic();
    f.dst = fl.dst_nic();
    f.udp_sport = fl.udp_sport();
    f.path.assign(fl.path().begin(), fl.path().end());
    f.bytes_per_iteration = it->second;
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<PinnedFlow> PinnedProbes(const v1::Assignment& a, uint64_t probe_bytes) {
  std::vector<PinnedFlow> out;
  for (const v1::ProbeTarget& p : a.probes()) {
    PinnedFlow f;
    f.src = p.src_nic();
    f.dst = p.dst_nic();
    f.udp_sport = p.udp_sport();
    f.path.assign(p.path().begin(), p.path().end());
    f.bytes_per_iteration = probe_bytes;
    f.probe = true;
    out.push_back(std::move(f));
  }
  return out;
}

bool Crosses(const PinnedFlow& f, const LinkFault& fault) {
  for (size_t i = 0; i + 1 < f.path.size(); ++i) {
    const std::string& a = f.path[i];
    const std::string& b = f.path[i + 1];
    if (a == fault.from && b == fault.to) return true;
    if (fault.both && a == fault.to && b == fault.from) return true;
  }
  return false;
}

bool Active(const LinkFault& fault, core::Duration since_start) {
  if (since_start < fault.after) return false;
  return fault.duration <= core::Duration::Zero() || since_start < fault.after + fault.duration;
}

double FaultFactor(const PinnedFlow& f, const std::vector<LinkFault>& faults,
                   core::Duration since_start) {
  double factor = 1;
  for (const LinkFault& fault : faults) {
    if (Active(fault, since_start) && Crosses(f, fault)) {
      factor = std::min(factor, fault.rate_fraction);
    }
  }
  return factor;
}

v1::FlowStats FlowStatsFor(const PinnedFlow& f, core::Duration window, core::Duration period,
                           double line_gbps, double factor, core::Rng& rng, double jitter) {
  v1::FlowStats s;
  s.set_src_nic(f.src);
  s.set_dst_nic(f.dst);
  s.set_udp_sport(f.udp_sport);
  s.set_probe(f.probe);
  if (f.probe) period = window;  // One message per window.
  const int64_t window_ns = std::max<int64_t>(1, window.nanos());
  s.set_window_ns(static_cast<uint64_t>(window_ns));
  const double iterations = period > core::Duration::Zero() ? window / period : 1.0;
  const double demanded = static_cast<double>(f.bytes_per_iteration) * iterations;
  if (factor <= 0) {
    // Cut: nothing gets through; the transport times out and retries.
    s.set_errors(static_cast<uint64_t>(std::max(1.0, std::ceil(iterations))));
    return s;
  }
  const double j = std::clamp(jitter, 0.0, 0.5);
  const double rate = line_gbps * 1e9 / 8 * factor * (1 - j + 2 * j * rng.UniformDouble());
  const double delivered = std::min(demanded, rate * window.ToSeconds());
  if (delivered < 1) return s;  // Nothing to send in this window (idle).
  s.set_bytes(static_cast<uint64_t>(delivered));
  const double seconds = static_cast<double>(s.bytes()) / rate;
  s.set_transfer_time_ns(
      static_cast<uint64_t>(std::clamp<double>(seconds * 1e9, 1, static_cast<double>(window_ns))));
  return s;
}

}  // namespace crux::loadgen
