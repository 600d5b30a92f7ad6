#include "crux/protocol/convert.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string_view>

#include "crux/core/base/text.h"

namespace crux::protocol {

std::string JobStateName(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_REGISTERED:
      return "registered";
    case v1::JOB_STATE_PROFILING:
      return "profiling";
    case v1::JOB_STATE_SCHEDULED:
      return "scheduled";
    case v1::JOB_STATE_GONE:
      return "gone";
    default:
      return "unspecified";
  }
}

v1::SwitchQosState SwitchQosStateToProto(const core::SwitchQosState& state, uint64_t epoch) {
  v1::SwitchQosState p;
  p.set_switch_name(state.switch_name);
  p.set_epoch(epoch);
  for (const auto& [dscp, tc] : state.dscp_to_tc) {
    (*p.mutable_dscp_to_tc())[static_cast<uint32_t>(dscp)] = static_cast<uint32_t>(tc);
  }
  for (const auto& [tc, queue] : state.tc_to_queue) {
    (*p.mutable_tc_to_queue())[static_cast<uint32_t>(tc)] = static_cast<uint32_t>(queue);
  }
  for (const core::QueueScheduler& q : state.schedulers) {
    v1::QueueScheduler* o = p.add_schedulers();
    o->set_queue(static_cast<uint32_t>(q.queue));
    o->set_type(std::string(core::SchedulerTypeName(q.type)));
    o->set_weight(static_cast<uint32_t>(q.weight));
  }
  for (int tc : state.pfc_enable) p.add_pfc_enable(static_cast<uint32_t>(tc));
  return p;
}

core::Result<core::SwitchQosState> SwitchQosStateFromProto(const v1::SwitchQosState& p) {
  core::SwitchQosState s;
  s.switch_name = p.switch_name();
  // Out-of-range values are clamped to a value validation rejects, never wrapped into range.
  auto to_int = [](uint32_t v) { return v > 1000 ? 1000 : static_cast<int>(v); };
  for (const auto& [dscp, tc] : p.dscp_to_tc()) s.dscp_to_tc[to_int(dscp)] = to_int(tc);
  for (const auto& [tc, queue] : p.tc_to_queue()) s.tc_to_queue[to_int(tc)] = to_int(queue);
  for (int i = 0; i < p.schedulers_size(); ++i) {
    const v1::QueueScheduler& q = p.schedulers(i);
    auto type = core::ParseSchedulerType(q.type());
    if (!type.ok()) {
      return core::InvalidArgumentError("switch_state.schedulers[" + std::to_string(i) +
                                        "].type: " + type.status().message());
    }
    s.schedulers.push_back({to_int(q.queue()), *type, to_int(q.weight())});
  }
  std::sort(s.schedulers.begin(), s.schedulers.end(),
            [](const auto& a, const auto& b) { return a.queue < b.queue; });
  for (uint32_t tc : p.pfc_enable()) s.pfc_enable.push_back(to_int(tc));
  std::sort(s.pfc_enable.begin(), s.pfc_enable.end());
  core::Status v = core::ValidateSwitchQosState(s);
  if (!v.ok()) return v.WithContext("switch_state");
  return s;
}

v1::EnforcementCheck EnforcementCheckToProto(const core::EnforcementCheck& check) {
  v1::EnforcementCheck p;
  switch (check.status) {
    case core::EnforcementStatus::kMatch:
      p.set_status(v1::ENFORCEMENT_STATUS_MATCH);
      break;
    case core::EnforcementStatus::kMismatch:
      p.set_status(v1::ENFORCEMENT_STATUS_MISMATCH);
      break;
    case core::EnforcementStatus::kUnknown:
      p.set_status(v1::ENFORCEMENT_STATUS_UNKNOWN);
      break;
  }
  // Printable text of a sendable length is kept as it is (so a detail that went through here once
  // is not escaped or cut again on the next hop); anything else is cut and escaped.
  const std::string_view detail = check.detail;
  if (core::IsPrintableText(detail) && detail.size() <= kMaxEnforcementDetailSent) {
    p.set_detail(check.detail);
  } else {
    const bool cut = detail.size() > kMaxEnforcementDetail;
    p.set_detail(core::EscapeForTerminal(detail.substr(0, kMaxEnforcementDetail)) +
                 (cut ? " ..." : ""));
  }
  p.set_maps_checked(check.maps_checked);
  p.set_queues_checked(check.queues_checked);
  p.set_checked_unix_ms(check.checked_unix_ms > 0 ? static_cast<uint64_t>(check.checked_unix_ms)
                                                  : 0);
  p.set_epoch(check.epoch);
  return p;
}

core::EnforcementCheck EnforcementCheckFromProto(const v1::EnforcementCheck& p) {
  core::EnforcementCheck c;
  switch (p.status()) {
    case v1::ENFORCEMENT_STATUS_MATCH:
      c.status = core::EnforcementStatus::kMatch;
      break;
    case v1::ENFORCEMENT_STATUS_MISMATCH:
      c.status = core::EnforcementStatus::kMismatch;
      break;
    default:
      c.status = core::EnforcementStatus::kUnknown;
      break;
  }
  c.detail = p.detail();
  c.maps_checked = p.maps_checked();
  c.queues_checked = p.queues_checked();
  constexpr uint64_t kMaxMs = uint64_t{1} << 62;
  c.checked_unix_ms = static_cast<int64_t>(std::min(p.checked_unix_ms(), kMaxMs));
  c.epoch = p.epoch();
  return c;
}

namespace {

ProtocolError Refuse(v1::ErrorCode code, std::string message) { return {code, std::move(message)}; }

std::string NameOf(const core::Topology& topo, core::NodeId id) {
  return id.valid() && id.value() < topo.num_nodes() ? topo.node(id).name : std::string("?");
}

}  // namespace

ProtocolError DemandFromProto(const v1::RegisterJob& r, const core::Topology& topo,
                              core::JobDemand* out) {
  core::JobDemand d;
  d.id = r.job_id();
  d.tenant = r.tenant();
  d.model = r.model();
  for (int i = 0; i < r.placement_size(); ++i) {
    const v1::HostPlacement& p = r.placement(i);
    // Built only on refusal (the accepted path allocates no field names).
    auto field_name = [i] { return "register_job.placement[" + std::to_string(i) + "]"; };
    core::Result<core::NodeId> host = topo.FindNode(p.host());
    if (!host.ok() || topo.node(*host).kind != core::NodeKind::kHost) {
      return Refuse(v1::ERROR_CODE_UNKNOWN_HOST,
                    field_name() + ".host: '" + p.host() + "' is not a host of the topology");
    }
    for (const core::PlacementHost& seen : d.placement) {
      if (seen.host == *host) {
        return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                      field_name() + ".host: '" + p.host() + "' appears twice in the placement");
      }
    }
    core::PlacementHost h;
    h.host = *host;
    h.gpus = p.gpus();
    const int capacity = topo.host_gpus(*host);
    if (capacity > 0 && p.gpus() > static_cast<uint32_t>(capacity)) {
      return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                    field_name() + ".gpus: " + std::to_string(p.gpus()) + " GPUs, but host '" +
                        p.host() + "' has " + std::to_string(capacity));
    }
    for (int n = 0; n < p.nics_size(); ++n) {
      core::Result<core::NodeId> nic = topo.FindNode(p.nics(n).name());
      if (!nic.ok() || topo.node(*nic).kind != core::NodeKind::kNic ||
          topo.node(*nic).host != *host) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, field_name() + ".nics[" + std::to_string(n) +
                                                       "].name: '" + p.nics(n).name() +
                                                       "' is not a NIC of " + p.host());
      }
      h.nics.push_back(*nic);
    }
    d.placement.push_back(std::move(h));
  }
  for (int i = 0; i < r.qps_size(); ++i) {
    for (const auto& [name, key] : {std::pair{r.qps(i).local_nic(), "local_nic"},
                                    std::pair{r.qps(i).remote_nic(), "remote_nic"}}) {
      core::Result<core::NodeId> nic = topo.FindNode(name);
      if (!nic.ok() || topo.node(*nic).kind != core::NodeKind::kNic) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, "register_job.qps[" + std::to_string(i) + "]." +
                                                       key + ": '" + name +
                                                       "' is not a NIC of the topology");
      }
    }
  }
  if (!r.pattern().empty() && r.pattern() != "ring_allreduce" && r.pattern() != "all_to_all" &&
      r.pattern() != "pipeline") {
    return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                  "register_job.pattern: must be ring_allreduce, all_to_all or pipeline (got '" +
                      r.pattern() + "')");
  }
  core::Result<core::TrafficPattern> pattern =
      core::ParseTrafficPattern(r.pattern().empty() ? "ring_allreduce" : r.pattern());
  if (!pattern.ok()) {
    return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                  "register_job.pattern: " + std::string(pattern.status().message()));
  }
  d.pattern = *pattern;
  d.bytes_per_iteration = core::Bytes::Of(
      static_cast<int64_t>(std::min<uint64_t>(r.bytes_per_iteration(), uint64_t{1} << 62)));
  if (r.flops_per_iteration() > 0) {
    d.flops_per_iteration = core::Flops::Of(static_cast<double>(r.flops_per_iteration()));
  }
  d.lease = core::Duration::Millis(r.lease_ms());
  *out = std::move(d);
  return {};
}

ProtocolError ProfileFromProto(const v1::ProfileReport& p, const core::Topology& topo,
                               const core::JobDemand& demand, core::JobProfile* out,
                               PeerNameCache* cache) {
  core::JobProfile prof;
  // Field names are only built on refusal: the accepted path (every report) allocates little.
  auto field = [](int i, const char* key) {
    return "profile_report.peers[" + std::to_string(i) + "]." + key;
  };
  auto on_job_host = [&demand](core::NodeId host) {
    for (const core::PlacementHost& h : demand.placement) {
      if (h.host == host) return true;
    }
    return false;
  };
  prof.peers.reserve(static_cast<size_t>(p.peers_size()));
  bool cache_hit =
      cache != nullptr && cache->names.size() == 2 * static_cast<size_t>(p.peers_size());
  for (int i = 0; i < p.peers_size(); ++i) {
    const v1::PeerBytes& pb = p.peers(i);
    core::NodeId ends[2];
    for (int side = 0; side < 2; ++side) {
      const std::string& name = side == 0 ? pb.local_nic() : pb.remote_nic();
      const size_t slot = 2 * static_cast<size_t>(i) + static_cast<size_t>(side);
      if (cache_hit && cache->names[slot] == name) {
        ends[side] = cache->ids[slot];
        continue;
      }
      cache_hit = false;
      const char* key = side == 0 ? "local_nic" : "remote_nic";
      core::Result<core::NodeId> nic = topo.FindNode(name);
      if (!nic.ok()) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST,
                      field(i, key) + ": '" + name + "' is not a node of the topology");
      }
      const core::Node& node = topo.node(*nic);
      if (node.kind != core::NodeKind::kNic && node.kind != core::NodeKind::kHost) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, field(i, key) + ": '" + name + "' is not a NIC");
      }
      if (!on_job_host(node.host)) {
        return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                      field(i, key) + ": '" + name + "' is not on one of the job's hosts");
      }
      ends[side] = *nic;
    }
    if (ends[0] == ends[1]) {
      return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                    "profile_report.peers[" + std::to_string(i) + "]: local_nic == remote_nic");
    }
    prof.peers.push_back(
        {ends[0], ends[1],
         core::Bytes::Of(static_cast<int64_t>(std::min<uint64_t>(pb.bytes(), uint64_t{1} << 62)))});
  }
  if (cache != nullptr && !cache_hit) {
    cache->names.clear();
    cache->ids.clear();
    for (int i = 0; i < p.peers_size(); ++i) {
      cache->names.push_back(p.peers(i).local_nic());
      cache->names.push_back(p.peers(i).remote_nic());
      cache->ids.push_back(prof.peers[static_cast<size_t>(i)].local_nic);
      cache->ids.push_back(prof.peers[static_cast<size_t>(i)].remote_nic);
    }
  }
  prof.compute_time = core::Duration::Nanos(static_cast<int64_t>(p.compute_time_ns()));
  if (p.flops_per_iteration() > 0) {
    prof.flops_per_iteration = core::Flops::Of(p.flops_per_iteration());
  }
  prof.iteration_period = core::Duration::Nanos(static_cast<int64_t>(p.iteration_period_ns()));
  prof.overlap_start = p.overlap_start();
  prof.compression_ratio = p.compression_ratio() > 0 ? p.compression_ratio() : 1.0;
  prof.samples = p.samples();
  prof.converged = p.converged();
  prof.bytes_per_iteration = core::Bytes::Of(
      static_cast<int64_t>(std::min<uint64_t>(p.bytes_per_iteration(), uint64_t{1} << 62)));
  *out = std::move(prof);
  return {};
}

v1::RegisterJob DemandToProto(const core::JobDemand& d, const core::Topology& topo) {
  v1::RegisterJob r;
  r.set_job_id(d.id);
  r.set_tenant(d.tenant);
  r.set_model(d.model);
  for (const core::PlacementHost& h : d.placement) {
    v1::HostPlacement* p = r.add_placement();
    p->set_host(NameOf(topo, h.host));
    p->set_gpus(h.gpus);
    for (core::NodeId nic : h.nics) p->add_nics()->set_name(NameOf(topo, nic));
  }
  r.set_pattern(std::string(core::TrafficPatternName(d.pattern)));
  r.set_bytes_per_iteration(
      static_cast<uint64_t>(std::max<int64_t>(0, d.bytes_per_iteration.count())));
  if (d.flops_per_iteration) {
    r.set_flops_per_iteration(static_cast<uint64_t>(std::max(0.0, d.flops_per_iteration->value())));
  }
  r.set_lease_ms(static_cast<uint32_t>(std::max<int64_t>(0, d.lease.nanos() / 1000000)));
  return r;
}

v1::ProfileReport ProfileToProto(const std::string& job_id, const core::JobProfile& p,
                                 const core::Topology& topo) {
  v1::ProfileReport r;
  r.set_job_id(job_id);
  r.set_compute_time_ns(static_cast<uint64_t>(std::max<int64_t>(0, p.compute_time.nanos())));
  if (p.flops_per_iteration) r.set_flops_per_iteration(p.flops_per_iteration->value());
  for (const core::PeerTraffic& t : p.peers) {
    v1::PeerBytes* pb = r.add_peers();
    pb->set_local_nic(NameOf(topo, t.local_nic));
    pb->set_remote_nic(NameOf(topo, t.remote_nic));
    pb->set_bytes(static_cast<uint64_t>(std::max<int64_t>(0, t.bytes.count())));
  }
  r.set_iteration_period_ns(
      static_cast<uint64_t>(std::max<int64_t>(0, p.iteration_period.nanos())));
  r.set_overlap_start(p.overlap_start);
  r.set_compression_ratio(p.compression_ratio);
  r.set_samples(p.samples);
  r.set_converged(p.converged);
  r.set_bytes_per_iteration(
      static_cast<uint64_t>(std::max<int64_t>(0, p.bytes_per_iteration.count())));
  return r;
}

ProtocolError PartReportFromProto(const v1::ProfileReport& p, const core::Topology& topo,
                                  const core::JobDemand& demand, core::NodeId part_host,
                                  core::HostPartReport* out) {
  core::HostPartReport r;
  if (ProtocolError bad = ProfileFromProto(p, topo, demand, &r.profile); Failed(bad)) return bad;
  for (size_t i = 0; i < r.profile.peers.size(); ++i) {
    const core::NodeId nic = r.profile.peers[i].local_nic;
    if (topo.node(nic).host != part_host) {
      return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT, "profile_report.peers[" + std::to_string(i) +
                                                         "].local_nic: '" + topo.node(nic).name +
                                                         "' is not on the part's host '" +
                                                         NameOf(topo, part_host) + "'");
    }
  }
  r.comms.reserve(static_cast<size_t>(p.comms_size()));
  for (const v1::CommTraffic& c : p.comms()) {
    core::CommTraffic t;
    t.comm_hash = c.comm_hash();
    t.nranks = c.nranks();
    t.nnodes = c.nnodes();
    t.local_ranks.assign(c.local_ranks().begin(), c.local_ranks().end());
    t.local_slots.assign(c.local_slots().begin(), c.local_slots().end());
    t.bytes.reserve(static_cast<size_t>(c.bytes_size()));
    for (const v1::RankPeerBytes& b : c.bytes()) {
      t.bytes.push_back({b.rank(), b.peer_rank(),
                         core::Bytes::Of(static_cast<int64_t>(
                             std::min<uint64_t>(b.bytes(), uint64_t{1} << 62)))});
    }
    r.comms.push_back(std::move(t));
  }
  if (core::Status bad = core::CheckLocalSlots(r, static_cast<uint32_t>(topo.host_gpus(part_host)));
      !bad.ok()) {
    return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT, "profile_report." + bad.message());
  }
  *out = std::move(r);
  return {};
}

v1::ProfileReport PartReportToProto(const std::string& job_id, core::NodeId part_host,
                                    const core::HostPartReport& r, const core::Topology& topo) {
  v1::ProfileReport p = ProfileToProto(job_id, r.profile, topo);
  p.mutable_host_part()->set_host(NameOf(topo, part_host));
  for (const core::CommTraffic& t : r.comms) {
    v1::CommTraffic* c = p.add_comms();
    c->set_comm_hash(t.comm_hash);
    c->set_nranks(t.nranks);
    c->set_nnodes(t.nnodes);
    for (uint32_t rank : t.local_ranks) c->add_local_ranks(rank);
    for (uint32_t slot : t.local_slots) c->add_local_slots(slot);
    for (const core::RankPeerBytes& b : t.bytes) {
      v1::RankPeerBytes* o = c->add_bytes();
      o->set_rank(b.rank);
      o->set_peer_rank(b.peer_rank);
      o->set_bytes(static_cast<uint64_t>(std::max<int64_t>(0, b.bytes.count())));
    }
  }
  return p;
}

v1::RegisterJob PartRegistrationToProto(const core::JobDemand& job, const core::PlacementHost& part,
                                        const core::HostPartInfo& info,
                                        const core::Topology& topo) {
  core::JobDemand d = job;
  d.placement = {part};
  v1::RegisterJob r = DemandToProto(d, topo);
  v1::HostPart* h = r.mutable_host_part();
  h->set_host(NameOf(topo, part.host));
  h->set_hosts_expected(info.hosts_expected);
  h->set_local_ranks(info.local_ranks);
  return r;
}

core::HostPartInfo HostPartInfoFromProto(const v1::HostPart& h) {
  return {h.hosts_expected(), h.local_ranks()};
}

v1::JobState JobPhaseToProto(core::JobPhase p) {
  switch (p) {
    case core::JobPhase::kRegistered:
      return v1::JOB_STATE_REGISTERED;
    case core::JobPhase::kProfiling:
      return v1::JOB_STATE_PROFILING;
    case core::JobPhase::kScheduled:
      return v1::JOB_STATE_SCHEDULED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

v1::LinkHealth LinkHealthToProto(core::LinkHealth h) {
  switch (h) {
    case core::LinkHealth::kUp:
      return v1::LINK_HEALTH_UP;
    case core::LinkHealth::kDegraded:
      return v1::LINK_HEALTH_DEGRADED;
    case core::LinkHealth::kDown:
      return v1::LINK_HEALTH_DOWN;
  }
  return v1::LINK_HEALTH_UNSPECIFIED;
}

core::Result<core::LinkHealth> LinkHealthFromProto(v1::LinkHealth h) {
  switch (h) {
    case v1::LINK_HEALTH_UP:
      return core::LinkHealth::kUp;
    case v1::LINK_HEALTH_DEGRADED:
      return core::LinkHealth::kDegraded;
    case v1::LINK_HEALTH_DOWN:
      return core::LinkHealth::kDown;
    default:
      return core::InvalidArgumentError("link health: must be UP, DEGRADED or DOWN");
  }
}

namespace {

// A pinned flow or probe (v1::FlowAssignment, v1::ProbeTarget: the same fields) on the wire.
template <typename P>
void PinToProto(const core::FlowPin& f, const core::Topology& topo, P* out) {
  out->set_src_nic(NameOf(topo, f.src_nic));
  out->set_dst_nic(NameOf(topo, f.dst_nic));
  out->set_udp_sport(f.udp_sport);
  if (f.path.empty() || f.path.front().value() >= topo.num_links()) return;
  out->add_path(NameOf(topo, topo.link(f.path.front()).src));
  for (core::LinkId l : f.path) {
    out->add_path(l.value() < topo.num_links() ? NameOf(topo, topo.link(l).dst) : "?");
  }
}

template <typename P>
core::Result<core::FlowPin> PinFromProto(const P& f, const core::Topology& topo,
                                         const std::string& field) {
  core::FlowPin pin;
  CRUX_ASSIGN_OR_RETURN(pin.src_nic, topo.FindNode(f.src_nic()));
  CRUX_ASSIGN_OR_RETURN(pin.dst_nic, topo.FindNode(f.dst_nic()));
  pin.udp_sport = static_cast<uint16_t>(f.udp_sport());
  for (int h = 1; h < f.path_size(); ++h) {
    core::Result<core::NodeId> from = topo.FindNode(f.path(h - 1));
    core::Result<core::NodeId> to = topo.FindNode(f.path(h));
    if (!from.ok() || !to.ok()) {
      return core::NotFoundError(field + ".path: hop '" + f.path(h) + "' is not in the topology");
    }
    core::Result<core::LinkId> link = topo.FindLink(*from, *to);
    if (!link.ok()) {
      return core::NotFoundError(field + ".path: no link " + f.path(h - 1) + "->" + f.path(h));
    }
    pin.path.push_back(*link);
  }
  return pin;
}

}  // namespace

v1::Assignment AssignmentToProto(const core::AppliedAssignment& applied,
                                 const core::Topology& topo) {
  const core::Assignment& a = applied.assignment;
  v1::Assignment p;
  p.set_job_id(a.job_id);
  p.set_epoch(applied.epoch);
  p.set_level(static_cast<uint32_t>(std::max(0, a.level)));
  p.set_dscp(a.dscp);
  p.set_traffic_class(a.traffic_class);
  p.set_state(JobPhaseToProto(a.phase));
  p.set_reference_job(a.reference_job);
  for (const auto& [k, v] : a.nccl_env) (*p.mutable_nccl_env())[k] = v;
  p.mutable_flows()->Reserve(static_cast<int>(a.flows.size()));
  for (const core::FlowPin& f : a.flows) PinToProto(f, topo, p.add_flows());
  for (const core::FlowPin& f : a.probes) PinToProto(f, topo, p.add_probes());
  return p;
}

core::Result<core::AppliedAssignment> AssignmentFromProto(const v1::Assignment& p,
                                                          const core::Topology& topo) {
  core::AppliedAssignment out;
  core::Assignment& a = out.assignment;
  out.epoch = p.epoch();
  a.job_id = p.job_id();
  a.level = static_cast<int>(p.level());
  a.dscp = p.dscp();
  a.traffic_class = p.traffic_class();
  a.reference_job = p.reference_job();
  switch (p.state()) {
    case v1::JOB_STATE_PROFILING:
      a.phase = core::JobPhase::kProfiling;
      break;
    case v1::JOB_STATE_SCHEDULED:
      a.phase = core::JobPhase::kScheduled;
      break;
    default:
      a.phase = core::JobPhase::kRegistered;
  }
  for (const auto& [k, v] : p.nccl_env()) a.nccl_env[k] = v;
  for (int i = 0; i < p.flows_size(); ++i) {
    CRUX_ASSIGN_OR_RETURN(
        core::FlowPin pin,
        PinFromProto(p.flows(i), topo, "assignment.flows[" + std::to_string(i) + "]"));
    a.flows.push_back(std::move(pin));
  }
  for (int i = 0; i < p.probes_size(); ++i) {
    CRUX_ASSIGN_OR_RETURN(
        core::FlowPin pin,
        PinFromProto(p.probes(i), topo, "assignment.probes[" + std::to_string(i) + "]"));
    a.probes.push_back(std::move(pin));
  }
  return out;
}

// ---- faults ----

ProtocolError TelemetryFromProto(const v1::SwitchTelemetry& t, const core::Topology& topo,
                                 TelemetrySignals* out) {
  core::Result<core::NodeId> sw = topo.FindNode(t.switch_name());
  if (!sw.ok() || !core::IsNetworkSwitch(topo.node(*sw).kind)) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, "switch_telemetry.switch_name: '" + t.switch_name() +
                                                   "' is not a switch of the topology");
  }
  TelemetrySignals sig;
  for (const v1::PortStatus& p : t.ports()) {
    if (p.neighbor().empty()) {
      sig.ignored.push_back(p.port() +
                            ": no neighbour (set the agent's --neighbors or CONFIG_DB "
                            "DEVICE_NEIGHBOR|" +
                            p.port() + ")");
      continue;
    }
    core::Result<core::NodeId> nb = topo.FindNode(p.neighbor());
    if (!nb.ok()) {
      sig.ignored.push_back(p.port() + ": neighbour '" + p.neighbor() +
                            "' is not a node of the topology");
      continue;
    }
    core::Result<core::LinkId> out_link = topo.FindLink(*sw, *nb);
    if (!out_link.ok()) {
      sig.ignored.push_back(p.port() + ": neighbour '" + p.neighbor() + "' is not adjacent to " +
                            t.switch_name());
      continue;
    }
    const core::LinkId egress = *out_link;                   // switch -> neighbour.
    const core::LinkId ingress = topo.link(egress).reverse;  // neighbour -> switch.
    const std::string source =
        "switch " + t.switch_name() + " port " + p.port() + " (to " + p.neighbor() + ")";
    if (p.oper_status() != v1::PORT_OPER_STATUS_UNSPECIFIED) {
      const bool up = p.oper_status() == v1::PORT_OPER_STATUS_UP;
      sig.states.push_back({egress, up, source});
      sig.states.push_back({ingress, up, source});
    }
    if (p.has_counters() && p.counters().interval_ns() > 0) {
      const v1::PortCounters& c = p.counters();
      const core::Duration interval = core::Duration::Nanos(
          static_cast<int64_t>(std::min<uint64_t>(c.interval_ns(), 1ULL << 62)));
      core::CounterSignal in;
      in.link = ingress;
      in.interval = interval;
      in.errors = c.in_errors() + c.fec_uncorrectable();
      in.discards = c.in_discards();
      in.pfc_pause = c.pfc_tx_pause();
      in.source = source + " rx";
      core::CounterSignal eg;
      eg.link = egress;
      eg.interval = interval;
      eg.errors = c.out_errors();
      eg.discards = c.out_discards();
      eg.pfc_pause = c.pfc_rx_pause();
      eg.queue_drops = c.queue_drops();
      eg.ecn_marks = c.ecn_marked();
      eg.source = source + " tx";
      sig.counters.push_back(std::move(in));
      sig.counters.push_back(std::move(eg));
    }
  }
  *out = std::move(sig);
  return {};
}

namespace {

uint64_t SaturatingSum(std::initializer_list<uint64_t> values) {
  uint64_t sum = 0;
  for (uint64_t v : values) {
    sum = (v > std::numeric_limits<uint64_t>::max() - sum) ? std::numeric_limits<uint64_t>::max()
                                                           : sum + v;
  }
  return sum;
}

}  // namespace

ProtocolError NicSignalsFromProto(const v1::HostTelemetry& t, const core::Topology& topo,
                                  NicSignals* out) {
  core::Result<core::NodeId> host = topo.FindNode(t.host());
  if (!host.ok() || topo.node(*host).kind != core::NodeKind::kHost) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_HOST,
                  "host_telemetry.host: '" + t.host() + "' is not a host of the topology");
  }
  NicSignals sig;
  for (int i = 0; i < t.nics_size(); ++i) {
    const v1::NicCounters& n = t.nics(i);
    core::Result<core::NodeId> nic = topo.FindNode(n.nic());
    if (!nic.ok() || topo.node(*nic).kind != core::NodeKind::kNic) {
      sig.ignored.push_back(n.nic() + ": not a NIC of the topology");
      continue;
    }
    if (topo.node(*nic).host != *host) {
      const core::NodeId owner = topo.node(*nic).host;
      return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                    "host_telemetry.nics[" + std::to_string(i) + "].nic: '" + n.nic() +
                        "' is a NIC of " +
                        (owner.valid() ? "'" + topo.node(owner).name + "'" : "no host") +
                        ", not of '" + t.host() + "' (a host reports only its own NICs)");
    }
    core::NicCounterSignal s;
    s.nic = *nic;
    s.interval = core::Duration::Nanos(
        static_cast<int64_t>(std::clamp<uint64_t>(n.interval_ns(), 1, uint64_t{1} << 62)));
    s.loss = SaturatingSum({n.packet_seq_err(), n.out_of_sequence(), n.local_ack_timeout_err(),
                            n.roce_adp_retrans(), n.roce_adp_retrans_to()});
    s.congestion =
        SaturatingSum({n.np_cnp_sent(), n.rp_cnp_handled(), n.np_ecn_marked_roce_packets()});
    s.source = t.host() + " " + (n.device().empty() ? n.nic() : n.device()) + " port " +
               std::to_string(n.port());
    sig.nics.push_back(std::move(s));
  }
  *out = std::move(sig);
  return {};
}

ProtocolError HostProbesFromProto(const v1::HostTelemetry& t, const core::Topology& topo,
                                  HostProbeSamples* out) {
  core::Result<core::NodeId> host = topo.FindNode(t.host());
  if (!host.ok() || topo.node(*host).kind != core::NodeKind::kHost) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_HOST,
                  "host_telemetry.host: '" + t.host() + "' is not a host of the topology");
  }
  HostProbeSamples result;
  for (int i = 0; i < t.probes_size(); ++i) {
    const v1::HostProbeResult& p = t.probes(i);
    const std::string field = "host_telemetry.probes[" + std::to_string(i) + "]";
    core::Result<core::NodeId> src = topo.FindNode(p.src_nic());
    if (!src.ok() || topo.node(*src).kind != core::NodeKind::kNic) {
      result.rejected.push_back(
          Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                 field + ".src_nic: '" + p.src_nic() + "' is not a NIC of the topology"));
      continue;
    }
    if (topo.node(*src).host != *host) {
      result.rejected.push_back(
          Refuse(v1::ERROR_CODE_PERMISSION_DENIED,
                 field + ".src_nic: '" + p.src_nic() + "' is not a NIC of '" + t.host() +
                     "' (a host reports only the probes leaving its own NICs)"));
      continue;
    }
    core::Result<core::NodeId> dst = topo.FindNode(p.dst_nic());
    if (!dst.ok() || topo.node(*dst).kind != core::NodeKind::kNic) {
      result.rejected.push_back(
          Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                 field + ".dst_nic: '" + p.dst_nic() + "' is not a NIC of the topology"));
      continue;
    }
    HostProbeSample s;
    s.index = i;
    s.job_id = p.job_id();
    s.sender_limited = p.sender_limited();
    s.sample.src_nic = *src;
    s.sample.dst_nic = *dst;
    s.sample.udp_sport = static_cast<uint16_t>(p.udp_sport());
    s.sample.probe = true;
    if (p.lost()) {
      s.sample.errors = 1;
    } else {
      s.sample.bytes = core::Bytes::Of(static_cast<int64_t>(p.bytes()));
      s.sample.transfer_time = core::Duration::Nanos(static_cast<int64_t>(p.transfer_time_ns()));
    }
    result.probes.push_back(std::move(s));
  }
  *out = std::move(result);
  return {};
}

std::vector<core::FlowSample> FlowSamplesFromProto(const v1::Heartbeat& h,
                                                   const core::Topology& topo,
                                                   const core::JobDemand& demand, size_t* skipped) {
  std::vector<core::FlowSample> out;
  size_t bad = 0;
  auto on_job_host = [&demand](core::NodeId host) {
    for (const core::PlacementHost& p : demand.placement) {
      if (p.host == host) return true;
    }
    return false;
  };
  auto nic = [&topo](const std::string& name) -> std::optional<core::NodeId> {
    core::Result<core::NodeId> n = topo.FindNode(name);
    if (!n.ok()) return std::nullopt;
    const core::NodeKind k = topo.node(*n).kind;
    if (k != core::NodeKind::kNic && k != core::NodeKind::kHost) return std::nullopt;
    return *n;
  };
  out.reserve(static_cast<size_t>(h.flows_size()));
  for (const v1::FlowStats& f : h.flows()) {
    const std::optional<core::NodeId> src = nic(f.src_nic());
    const std::optional<core::NodeId> dst = nic(f.dst_nic());
    if (!src || !dst || *src == *dst || !on_job_host(topo.node(*src).host)) {
      ++bad;
      continue;
    }
    core::FlowSample s;
    s.src_nic = *src;
    s.dst_nic = *dst;
    s.udp_sport = static_cast<uint16_t>(f.udp_sport());
    s.bytes = core::Bytes::Of(static_cast<int64_t>(std::min<uint64_t>(f.bytes(), 1ULL << 62)));
    s.transfer_time = core::Duration::Nanos(
        static_cast<int64_t>(std::min<uint64_t>(f.transfer_time_ns(), 1ULL << 62)));
    s.errors = f.errors();
    s.probe = f.probe();
    out.push_back(s);
  }
  if (skipped != nullptr) *skipped = bad;
  return out;
}

v1::FlowStats FlowStatsToProto(const core::FlowSample& s, core::Duration window,
                               const core::Topology& topo) {
  v1::FlowStats f;
  f.set_src_nic(topo.node(s.src_nic).name);
  f.set_dst_nic(topo.node(s.dst_nic).name);
  f.set_udp_sport(s.udp_sport);
  f.set_bytes(static_cast<uint64_t>(std::max<int64_t>(0, s.bytes.count())));
  f.set_transfer_time_ns(static_cast<uint64_t>(std::max<int64_t>(0, s.transfer_time.nanos())));
  f.set_errors(s.errors);
  f.set_window_ns(static_cast<uint64_t>(std::max<int64_t>(1, window.nanos())));
  f.set_probe(s.probe);
  return f;
}

}  // namespace crux::protocol
