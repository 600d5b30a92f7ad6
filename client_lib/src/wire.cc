#include "wire.h"

#include <cmath>
#include <set>

#include "crux/protocol/validate.h"

namespace crux::client::internal {

core::Status ValidateOptions(const ClientOptions& o) {
  if (o.endpoint.empty()) return core::InvalidArgumentError("options.endpoint: missing");
  if (!protocol::IsValidId(o.job_id)) {
    return core::InvalidArgumentError("options.job_id: invalid id \"" + o.job_id +
                                      "\" (allowed: 1-128 chars of [A-Za-z0-9._:/-])");
  }
  if (!o.tenant.empty() && !protocol::IsValidId(o.tenant)) {
    return core::InvalidArgumentError("options.tenant: invalid id \"" + o.tenant + "\"");
  }
  if (o.placement.empty()) return core::InvalidArgumentError("options.placement: empty");
  std::set<std::string> hosts;
  for (size_t i = 0; i < o.placement.size(); ++i) {
    const auto& h = o.placement[i];
    const std::string f = "options.placement[" + std::to_string(i) + "]";
    if (!protocol::IsValidId(h.host)) {
      return core::InvalidArgumentError(f + ".host: invalid name \"" + h.host + "\"");
    }
    if (!hosts.insert(h.host).second) {
      return core::InvalidArgumentError(f + ".host: duplicate \"" + h.host + "\"");
    }
    if (h.gpus < 1) return core::InvalidArgumentError(f + ".gpus: must be >= 1");
    for (size_t n = 0; n < h.nics.size(); ++n) {
      if (!protocol::IsValidId(h.nics[n])) {
        return core::InvalidArgumentError(f + ".nics[" + std::to_string(n) + "]: invalid name \"" +
                                          h.nics[n] + "\"");
      }
    }
  }
  if (!o.pattern.empty() && o.pattern != "ring_allreduce" && o.pattern != "all_to_all" &&
      o.pattern != "pipeline") {
    return core::InvalidArgumentError("options.pattern: unknown \"" + o.pattern +
                                      "\" (ring_allreduce, all_to_all, pipeline)");
  }
  if (!std::isfinite(o.flops_per_iteration) || o.flops_per_iteration < 0) {
    return core::InvalidArgumentError("options.flops_per_iteration: must be finite and >= 0");
  }
  if (!std::isfinite(o.gpu_peak_flops) || o.gpu_peak_flops < 0) {
    return core::InvalidArgumentError("options.gpu_peak_flops: must be finite and >= 0");
  }
  if (o.lease_ms != 0 &&
      (o.lease_ms < protocol::kMinLeaseMs || o.lease_ms > protocol::kMaxLeaseMs)) {
    return core::InvalidArgumentError("options.lease_ms: must be 0 or in [100, 86400000]");
  }
  if (o.call_timeout_ms < 1)
    return core::InvalidArgumentError("options.call_timeout_ms: must be >= 1");
  if (o.reconnect_min_ms < 1 || o.reconnect_max_ms < o.reconnect_min_ms) {
    return core::InvalidArgumentError(
        "options.reconnect_min_ms: must be >= 1 and <= options.reconnect_max_ms");
  }
  if (o.poll_interval_ms < 1 || o.poll_interval_ms > 1000) {
    return core::InvalidArgumentError("options.poll_interval_ms: must be in [1, 1000]");
  }
  if (o.ring_capacity < 16)
    return core::InvalidArgumentError("options.ring_capacity: must be >= 16");
  if (o.max_peers < 1) return core::InvalidArgumentError("options.max_peers: must be >= 1");
  const auto& p = o.profiler;
  if (p.window < 3) return core::InvalidArgumentError("options.profiler.window: must be >= 3");
  if (p.converge_min_iterations < 2 || p.converge_max_iterations < p.converge_min_iterations) {
    return core::InvalidArgumentError(
        "options.profiler.converge_min_iterations: must be >= 2 and <= converge_max_iterations");
  }
  if (!(p.stable_spread > 0) || !(p.change_threshold > 0)) {
    return core::InvalidArgumentError(
        "options.profiler.stable_spread/change_threshold: must be > 0");
  }
  bool any_key =
      !o.server_public_key.empty() || !o.client_public_key.empty() || !o.client_secret_key.empty();
  bool all_keys =
      !o.server_public_key.empty() && !o.client_public_key.empty() && !o.client_secret_key.empty();
  if (any_key && !all_keys) {
    return core::InvalidArgumentError(
        "options.server_public_key/client_public_key/client_secret_key: give all three or none");
  }
  return core::Status::Ok();
}

uint32_t TotalGpus(const ClientOptions& o) {
  uint32_t g = 0;
  for (const auto& h : o.placement) g += h.gpus;
  return g;
}

v1::RegisterJob MakeRegisterJob(const ClientOptions& o) {
  v1::RegisterJob r;
  r.set_job_id(o.job_id);
  r.set_tenant(o.tenant);
  for (const auto& h : o.placement) {
    auto* hp = r.add_placement();
    hp->set_host(h.host);
    hp->set_gpus(h.gpus);
    for (const auto& n : h.nics) hp->add_nics()->set_name(n);
  }
  r.set_pattern(o.pattern);
  r.set_bytes_per_iteration(o.bytes_per_iteration);
  // RegisterJob carries FLOPs as uint64; larger values (> 1.8e19) go only in ProfileReports.
  if (o.flops_per_iteration > 0 && o.flops_per_iteration < 1.8e19) {
    r.set_flops_per_iteration(static_cast<uint64_t>(std::llround(o.flops_per_iteration)));
  }
  r.set_lease_ms(o.lease_ms);
  r.set_model(o.model);
  return r;
}

v1::ProfileReport MakeProfileReport(const std::string& job_id, const Profile& p) {
  v1::ProfileReport r;
  r.set_job_id(job_id);
  r.set_compute_time_ns(static_cast<uint64_t>(std::max<int64_t>(1, p.compute_time_ns)));
  r.set_flops_per_iteration(p.flops_per_iteration);
  for (const auto& peer : p.peers) {
    auto* pb = r.add_peers();
    pb->set_local_nic(peer.local_nic);
    pb->set_remote_nic(peer.remote_nic);
    pb->set_bytes(peer.bytes);
  }
  r.set_iteration_period_ns(static_cast<uint64_t>(std::max<int64_t>(1, p.iteration_period_ns)));
  r.set_overlap_start(p.overlap_start);
  r.set_samples(std::max<uint32_t>(1, p.samples));
  r.set_converged(p.converged);
  r.set_bytes_per_iteration(p.bytes_per_iteration);
  return r;
}

std::string JobStateName(int state) {
  switch (state) {
    case v1::JOB_STATE_REGISTERED:
      return "REGISTERED";
    case v1::JOB_STATE_PROFILING:
      return "PROFILING";
    case v1::JOB_STATE_SCHEDULED:
      return "SCHEDULED";
    case v1::JOB_STATE_GONE:
      return "GONE";
    default:
      return "UNSPECIFIED";
  }
}

Assignment FromWire(const v1::Assignment& a, int64_t received_unix_ns) {
  Assignment out;
  out.epoch = a.epoch();
  out.level = a.level();
  out.dscp = a.dscp();
  out.traffic_class = a.traffic_class();
  out.state = JobStateName(a.state());
  for (const auto& f : a.flows()) {
    FlowPin pin;
    pin.src_nic = f.src_nic();
    pin.dst_nic = f.dst_nic();
    pin.udp_sport = static_cast<uint16_t>(f.udp_sport());
    pin.path.assign(f.path().begin(), f.path().end());
    out.flows.push_back(std::move(pin));
  }
  for (const auto& [k, v] : a.nccl_env()) out.nccl_env[k] = v;
  out.sent_unix_ns = static_cast<int64_t>(a.sent_unix_ns());
  out.state_id = a.state_id();
  out.term = a.term();
  out.received_unix_ns = received_unix_ns;
  return out;
}

}  // namespace crux::client::internal
