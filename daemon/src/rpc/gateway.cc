#include "crux/daemon/rpc/gateway.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::daemon {
namespace {

// "ERROR_CODE_UNKNOWN_HOST" -> "unknown_host".
std::string MetricKind(v1::ErrorCode code) {
  std::string s(protocol::ErrorCodeName(code));
  if (s.rfind("ERROR_CODE_", 0) == 0) s = s.substr(11);
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

// The one mapping of the modules' refusals to wire errors.
protocol::ProtocolError ToWire(const Refusal& r) {
  v1::ErrorCode code = v1::ERROR_CODE_INTERNAL;
  switch (r.code) {
    case RefusalCode::kNone:
      code = v1::ERROR_CODE_UNSPECIFIED;
      break;
    case RefusalCode::kInvalidArgument:
      code = v1::ERROR_CODE_INVALID_ARGUMENT;
      break;
    case RefusalCode::kNotFound:
      code = v1::ERROR_CODE_NOT_FOUND;
      break;
    case RefusalCode::kUnknownJob:
      code = v1::ERROR_CODE_UNKNOWN_JOB;
      break;
    case RefusalCode::kConflict:
      code = v1::ERROR_CODE_CONFLICT;
      break;
    case RefusalCode::kPermissionDenied:
      code = v1::ERROR_CODE_PERMISSION_DENIED;
      break;
    case RefusalCode::kResourceExhausted:
      code = v1::ERROR_CODE_RESOURCE_EXHAUSTED;
      break;
    case RefusalCode::kUnsupported:
      code = v1::ERROR_CODE_UNSUPPORTED;
      break;
  }
  return {code, r.message, r.reason};
}

v1::Envelope Gateway::Refuse(const std::string& endpoint, uint64_t request_id, const Refusal& r) {
  return Refuse(endpoint, request_id, ToWire(r));
}

v1::Envelope Gateway::Refuse(const std::string& endpoint, uint64_t request_id,
                             const protocol::ProtocolError& r) {
  if (metrics_) metrics_->AddError(endpoint, MetricKind(r.code));
  if (!r.reason.empty()) refusals_->Count(r.reason);
  spdlog::debug("{} request {} refused: {} {}", endpoint, request_id,
                protocol::ErrorCodeName(r.code), r.message);
  return protocol::MakeError(request_id, r);
}

void Gateway::Process(const protocol::Inbound& in) {
  HandleOne(in);
  EndBatch();
}

void Gateway::ProcessBatch(const std::vector<protocol::Inbound>& batch) {
  for (const protocol::Inbound& in : batch) HandleOne(in);
  EndBatch();
}

void Gateway::Reply(const std::string& peer, uint64_t request_id, const v1::Envelope& reply) {
  // request_id 0 is only allowed on an Ack answering a push (the transport refuses it on every
  // other request): a reply would look like a push, so none is sent.
  if (client_sender_ && request_id != 0) {
    if (core::Status s = client_sender_(peer, reply); !s.ok()) {
      spdlog::warn("client reply not sent: {}", s.ToString());
    }
  }
}

void Gateway::HandleOne(const protocol::Inbound& in) {
  if (metrics_) metrics_->AddMessage("client", protocol::BodyName(in.msg));
  // Only registrations of distinct jobs are grouped; anything else sees the committed state.
  if (!held_.empty() &&
      (!in.msg.has_register_job() || held_ids_.count(in.msg.register_job().job_id()) != 0)) {
    CommitRegistrations();
  }
  std::optional<v1::Envelope> reply = Handle(in);
  // A quiet request (validated: a report or telemetry) is answered only when it is refused.
  if (reply && in.msg.quiet() && reply->has_ack() && reply->ack().ok()) return;
  if (reply) Reply(in.peer, in.msg.request_id(), *reply);
}

void Gateway::EndBatch() {
  CommitRegistrations();
  MergeDue();
  SendDeferred();
}

void Gateway::SendDeferred() {
  auto assignments = std::move(deferred_assignments_);
  deferred_assignments_.clear();
  for (const auto& [peer, id] : assignments) {
    const core::AppliedAssignment* a = control_->loop().Applied(id);
    if (a == nullptr) continue;
    // A host part gets its host's cut of the assignment (PartAssignment).
    const core::NodeId host = tracker_->PartOf(id, peer);
    if (host.valid()) {
      enforcer_->Push(peer, PartAssignment(*a, topo_->nominal(), host));
    } else {
      enforcer_->Push(peer, *a);
    }
  }
  auto deferred = std::move(deferred_);
  deferred_.clear();
  for (auto& [peer, msg] : deferred) {
    if (client_sender_) (void)client_sender_(peer, msg);
  }
}

void Gateway::CommitRegistrations() {
  if (held_.empty()) return;
  auto held = std::make_shared<std::vector<HeldRegistration>>(std::move(held_));
  held_.clear();
  held_ids_.clear();
  // Answered when the rows are durable (the writer's thread; inline in tests, before
  // StoreRegistrations returns).
  committing_ = true;
  journal_->StoreRegistrations(
      std::exchange(held_rows_, {}), std::exchange(held_part_rows_, {}), [this, held](bool stored) {
        for (HeldRegistration& h : *held) {
          if (!stored) {
            // Undo: a registration that is not persisted is not acknowledged.
            if (!h.known) {
              tracker_->Remove(h.job_id);
            } else if (h.part.new_part) {
              (void)tracker_->RemovePart(h.job_id, h.part_host);
            }
            Reply(h.peer, h.request_id,
                  Refuse("client", h.request_id,
                         protocol::ProtocolError{v1::ERROR_CODE_UNAVAILABLE,
                                                 "register_job: state could not be persisted"}));
            continue;
          }
          if (h.part_host.valid()) {
            PartRegistered(h);
          } else if (h.known) {
            DeferAssignment(h.peer, h.job_id);
          } else if (const JobSession* j = tracker_->Find(h.job_id)) {
            control_->AddJob(j->demand, j->dscp);
            spdlog::info("job {} registered ({} hosts, dscp {})", h.job_id, h.placement, j->dscp);
          }
          Reply(h.peer, h.request_id, h.reply);
        }
        if (!committing_) {  // Inline, the caller (EndBatch) does the rest.
          MergeDue();
          SendDeferred();
        }
      });
  committing_ = false;
}

void Gateway::DeferAssignment(const std::string& peer, const std::string& job_id) {
  if (config_->dry_run) return;
  if (control_->loop().Applied(job_id) == nullptr) return;
  deferred_assignments_.emplace_back(peer, job_id);
}

protocol::ProtocolError Gateway::Authorise(const protocol::Inbound& in) const {
  if (!grants_) return {};
  const v1::Envelope& m = in.msg;
  auto it = grants_->find(in.user_id);
  if (it == grants_->end()) {
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            "envelope: this CURVE key is no longer authorised (removed from "
            "curve.authorized_keys_dir)",
            "unauthorised_key"};
  }
  const protocol::KeyGrant& g = it->second;
  if (m.has_host_telemetry()) {
    // NIC counters are a non-tenant fault signal: only the host's own agent may send them.
    const std::string& host = m.host_telemetry().host();
    if (g.role != protocol::KeyRole::kHost) {
      return {v1::ERROR_CODE_PERMISSION_DENIED,
              std::string("host_telemetry: this CURVE key is ") +
                  (g.role == protocol::KeyRole::kJob ? "a job key" : "a switch key") + " (" +
                  g.name + "); host agents need a host key (hosts/" + host +
                  ".pub in the authorised-keys directory)",
              "role"};
    }
    if (!std::binary_search(g.hosts.begin(), g.hosts.end(), host)) {
      return {v1::ERROR_CODE_PERMISSION_DENIED,
              "host_telemetry.host: this CURVE key may not speak for host '" + host +
                  "' (it is authorised for " + std::to_string(g.hosts.size()) +
                  " other host(s); add hosts/" + host + ".pub to authorise it)",
              "role"};
    }
    return {};
  }
  const bool switch_message =
      m.has_switch_hello() || m.has_switch_applied() || m.has_switch_telemetry();
  if (!switch_message) {
    // Job messages: job keys, and host keys (crux-hostd speaks for the jobs of its host). Who
    // may speak for which job is the tracker's rule (the key and connection that registered it).
    if (g.role == protocol::KeyRole::kJob || g.role == protocol::KeyRole::kHost) return {};
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            std::string(protocol::BodyName(m)) + ": this CURVE key is a switch key (" + g.name +
                "); jobs need a job key (a *.pub directly in the authorised-keys directory) "
                "or a host key (hosts/<host>.pub)",
            "role"};
  }
  const std::string& name = m.has_switch_hello()       ? m.switch_hello().switch_name()
                            : m.has_switch_telemetry() ? m.switch_telemetry().switch_name()
                                                       : m.switch_applied().switch_name();
  const std::string field = m.has_switch_hello()       ? "switch_hello"
                            : m.has_switch_telemetry() ? "switch_telemetry"
                                                       : "switch_applied";
  if (g.role != protocol::KeyRole::kSwitch) {
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            field + ": this CURVE key is " +
                (g.role == protocol::KeyRole::kJob ? "a job key" : "a host key") + " (" + g.name +
                "); switch agents need a switch key (switches/" + name +
                ".pub in the authorised-keys directory)",
            "role"};
  }
  if (!std::binary_search(g.switches.begin(), g.switches.end(), name)) {
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            field + ".switch_name: this CURVE key may not speak for switch '" + name +
                "' (it is authorised for " + std::to_string(g.switches.size()) +
                " other switch(es); add switches/" + name + ".pub to authorise it)",
            "role"};
  }
  return {};
}

std::optional<v1::Envelope> Gateway::Handle(const protocol::Inbound& in) {
  const v1::Envelope& m = in.msg;
  if (protocol::ProtocolError bad = Authorise(in); protocol::Failed(bad)) {
    return Refuse("client", m.request_id(), bad);
  }
  switch (m.body_case()) {
    case v1::Envelope::kRegisterJob:
      return OnRegister(in);
    case v1::Envelope::kProfileReport:
      return OnProfile(in);
    case v1::Envelope::kHeartbeat:
      return OnHeartbeat(in);
    case v1::Envelope::kEndJob:
      return OnEndJob(in);
    case v1::Envelope::kAck:
      return OnAck(in);
    case v1::Envelope::kAckBatch:
      OnAckBatch(in);
      return std::nullopt;  // request_id 0: never answered.
    case v1::Envelope::kSwitchHello:
      return OnSwitchHello(in);
    case v1::Envelope::kSwitchApplied:
      return OnSwitchApplied(in);
    case v1::Envelope::kSwitchTelemetry:
      return OnSwitchTelemetry(in);
    case v1::Envelope::kHostTelemetry:
      return OnHostTelemetry(in);
    default:
      return Refuse("client", m.request_id(),
                    {v1::ERROR_CODE_INVALID_ARGUMENT,
                     "envelope.body: '" + std::string(protocol::BodyName(m)) +
                         "' is not a request the client endpoint accepts"});
  }
}

std::optional<v1::Envelope> Gateway::OnRegister(const protocol::Inbound& in) {
  const v1::RegisterJob& r = in.msg.register_job();
  if (r.has_host_part()) return OnRegisterPart(in);
  core::JobDemand demand;
  if (protocol::ProtocolError bad = protocol::DemandFromProto(r, topo_->nominal(), &demand);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  bool known = false;
  Refusal bad =
      tracker_->Register(demand, in.peer, in.user_id, loop_->Now(), loop_->UnixMs(), &known);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  const JobSession& j = *tracker_->Find(r.job_id());
  peer_names_.erase(r.job_id());  // The placement may have changed.
  HeldRegistration h;
  h.peer = in.peer;
  h.request_id = in.msg.request_id();
  h.job_id = r.job_id();
  h.known = known;
  h.placement = static_cast<size_t>(r.placement_size());
  h.reply = protocol::NewEnvelope(in.msg.request_id());
  v1::RegisterJobReply* rr = h.reply.mutable_register_job_reply();
  rr->set_job_id(r.job_id());
  rr->set_lease_ms(static_cast<uint64_t>(j.lease.nanos() / 1000000));
  rr->set_already_known(known);
  rr->set_dscp(j.dscp);
  held_rows_.push_back(rows_->JobOf(j));
  held_ids_.insert(h.job_id);
  held_.push_back(std::move(h));
  return std::nullopt;  // Answered by CommitRegistrations.
}

v1::Envelope Gateway::OnProfile(const protocol::Inbound& in) {
  const v1::ProfileReport& p = in.msg.profile_report();
  if (p.has_host_part()) {
    if (std::optional<v1::Envelope> reply = OnPartProfile(in)) return *std::move(reply);
  }
  Refusal bad = tracker_->Touch(p.job_id(), in.peer, in.user_id, "profile_report.job_id",
                                loop_->Now(), loop_->UnixMs());
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  const JobSession& j = *tracker_->Find(p.job_id());
  core::JobProfile profile;
  if (protocol::ProtocolError bad_profile = protocol::ProfileFromProto(
          p, topo_->nominal(), j.demand, &profile, &peer_names_[p.job_id()]);
      protocol::Failed(bad_profile)) {
    return Refuse("client", in.msg.request_id(), bad_profile);
  }
  Reported(p.job_id(), profile);
  return protocol::MakeAck(in.msg.request_id(), p.job_id());
}

void Gateway::Reported(const std::string& id, const core::JobProfile& profile) {
  const core::ReportVerdict v = control_->ReportProfile(id, profile);
  // Stored by the journal's next flush (about a second, or before the next plan's write for a
  // planned profile or a phase), never one write per report.
  journal_->Reported(id, v);
  if (v.phase_changed) spdlog::debug("job {} is now {}", id, core::JobPhaseName(v.phase));
}

protocol::ProtocolError Gateway::TouchJob(const protocol::Inbound& in, const std::string& job_id,
                                          const v1::HostPart* part, const std::string& field,
                                          core::NodeId* part_host) {
  *part_host = core::NodeId();
  Refusal bad;
  if (part != nullptr) {
    core::Result<core::NodeId> host = topo_->nominal().FindNode(part->host());
    if (!host.ok() || topo_->nominal().node(*host).kind != core::NodeKind::kHost) {
      return {v1::ERROR_CODE_UNKNOWN_HOST,
              field + ": host_part.host '" + part->host() + "' is not a host of the topology"};
    }
    bad = tracker_->TouchPart(job_id, *host, in.peer, in.user_id, field, loop_->Now(),
                              loop_->UnixMs());
  } else {
    bad = tracker_->Touch(job_id, in.peer, in.user_id, field, loop_->Now(), loop_->UnixMs());
  }
  if (Refused(bad)) return ToWire(bad);
  *part_host = tracker_->PartOf(job_id, in.peer);
  return {};
}

v1::Envelope Gateway::OnHeartbeat(const protocol::Inbound& in) {
  const v1::Heartbeat& h = in.msg.heartbeat();
  core::NodeId part;
  if (protocol::ProtocolError bad = TouchJob(
          in, h.job_id(), h.has_host_part() ? &h.host_part() : nullptr, "heartbeat.job_id", &part);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  if (part.valid()) {
    tracker_->AckedPart(h.job_id(), part, h.applied_epoch());
  } else {
    tracker_->Acked(h.job_id(), h.applied_epoch());
  }
  if (h.flows_size() > 0) ObserveFlows(h);
  uint64_t epoch = 0;
  if (const core::AppliedAssignment* a = control_->loop().Applied(h.job_id())) {
    epoch = a->epoch;
    const bool other_state =
        h.applied_state_id() != 0 && h.applied_state_id() != enforcer_->state_id();
    if (h.applied_epoch() < epoch || other_state) DeferAssignment(in.peer, h.job_id());
  }
  return protocol::MakeAck(in.msg.request_id(), h.job_id(), epoch);
}

v1::Envelope Gateway::OnEndJob(const protocol::Inbound& in) {
  const v1::EndJob& e = in.msg.end_job();
  core::NodeId part;
  if (protocol::ProtocolError bad = TouchJob(
          in, e.job_id(), e.has_host_part() ? &e.host_part() : nullptr, "end_job.job_id", &part);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  const std::string reason = e.reason().empty() ? "ended" : "ended: " + e.reason();
  if (part.valid()) {
    EndPart(e.job_id(), part, reason);
  } else {
    JobGone(e.job_id(), reason);
  }
  return protocol::MakeAck(in.msg.request_id(), e.job_id());
}

v1::Envelope Gateway::OnAck(const protocol::Inbound& in) {
  const v1::Ack& a = in.msg.ack();
  if (protocol::ProtocolError bad = ApplyAck(in, a, "ack.job_id"); protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  return protocol::MakeAck(in.msg.request_id(), a.job_id(), a.epoch());
}

void Gateway::OnAckBatch(const protocol::Inbound& in) {
  const v1::AckBatch& b = in.msg.ack_batch();
  for (int i = 0; i < b.acks_size(); ++i) {
    // One ack refused (a job that ended meanwhile, another connection's job) costs only itself.
    if (protocol::ProtocolError bad =
            ApplyAck(in, b.acks(i), "ack_batch.acks[" + std::to_string(i) + "].job_id");
        protocol::Failed(bad)) {
      (void)Refuse("client", 0, bad);  // Counted and logged; nothing is sent for request_id 0.
    }
  }
}

protocol::ProtocolError Gateway::ApplyAck(const protocol::Inbound& in, const v1::Ack& a,
                                          const std::string& field) {
  core::NodeId part;
  if (protocol::ProtocolError bad = TouchJob(in, a.job_id(), nullptr, field, &part);
      protocol::Failed(bad)) {
    return bad;
  }
  if (a.ok() && part.valid()) {
    tracker_->AckedPart(a.job_id(), part, a.epoch());
  } else if (a.ok()) {
    tracker_->Acked(a.job_id(), a.epoch());
  }
  if (metrics_) metrics_->AddAck(a.ok());
  if (!a.ok()) {
    spdlog::warn("job {} could not apply epoch {}: {}", a.job_id(), a.epoch(), a.error());
  }
  return {};
}

v1::Envelope Gateway::OnSwitchHello(const protocol::Inbound& in) {
  const v1::SwitchHello& h = in.msg.switch_hello();
  auto node = topo_->nominal().FindNode(h.switch_name());
  if (!node.ok() || !core::IsNetworkSwitch(topo_->nominal().node(*node).kind)) {
    return Refuse("client", in.msg.request_id(),
                  {v1::ERROR_CODE_UNKNOWN_HOST, "switch_hello.switch_name: '" + h.switch_name() +
                                                    "' is not a switch of the topology"});
  }
  bool returning = false;
  std::optional<v1::Envelope> push;
  Refusal bad = enforcer_->OnHello(h, in.peer, loop_->UnixMs(), &returning, &push);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  if (returning) {
    spdlog::info("switch agent {} connected (applied epoch {}, desired {})", h.switch_name(),
                 h.applied_epoch(), enforcer_->desired_epoch(h.switch_name()));
  }
  if (push && !config_->dry_run) deferred_.emplace_back(in.peer, *std::move(push));
  return protocol::MakeAck(in.msg.request_id(), "", control_->loop().epoch());
}

v1::Envelope Gateway::OnSwitchApplied(const protocol::Inbound& in) {
  Refusal bad = enforcer_->OnApplied(in.msg.switch_applied(), in.peer, loop_->UnixMs());
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  return protocol::MakeAck(in.msg.request_id(), "", in.msg.switch_applied().epoch());
}

void Gateway::ObserveFlows(const v1::Heartbeat& h) {
  const JobSession* j = tracker_->Find(h.job_id());
  if (j == nullptr) return;
  size_t skipped = 0;
  std::vector<core::FlowSample> samples =
      protocol::FlowSamplesFromProto(h, topo_->nominal(), j->demand, &skipped);
  if (skipped > 0) {
    // The heartbeat still counts (it is the job's keep-alive); the flows are dropped.
    if (metrics_) metrics_->AddError("client", "flow_stats", skipped);
    spdlog::debug("job {}: {} flow stats name NICs outside the job or the topology; ignored",
                  h.job_id(), skipped);
  }
  if (samples.empty()) return;
  control_->ObserveFlows(h.job_id(), samples);
}

v1::Envelope Gateway::OnSwitchTelemetry(const protocol::Inbound& in) {
  const v1::SwitchTelemetry& t = in.msg.switch_telemetry();
  protocol::TelemetrySignals signals;
  if (protocol::ProtocolError bad = protocol::TelemetryFromProto(t, topo_->nominal(), &signals);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  for (const std::string& why : signals.ignored) {
    // Once per switch and port (a misconfigured agent sends the same every second).
    if (ignored_ports_.insert(t.switch_name() + "/" + why).second) {
      spdlog::warn("switch {}: telemetry for port {} ignored", t.switch_name(), why);
    }
  }
  for (const core::LinkStateSignal& s : signals.states) control_->ObserveLinkState(s);
  for (const core::CounterSignal& c : signals.counters) control_->ObserveCounters(c);
  return protocol::MakeAck(in.msg.request_id(), "", control_->loop().epoch());
}

v1::Envelope Gateway::OnHostTelemetry(const protocol::Inbound& in) {
  const v1::HostTelemetry& t = in.msg.host_telemetry();
  protocol::NicSignals signals;
  if (protocol::ProtocolError bad = protocol::NicSignalsFromProto(t, topo_->nominal(), &signals);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  for (const std::string& why : signals.ignored) {
    // Once per host and NIC (a misconfigured agent sends the same every second).
    if (ignored_nics_.insert(t.host() + " " + why).second) {
      spdlog::warn("host {}: NIC counters ignored: {}", t.host(), why);
    }
  }
  for (const core::NicCounterSignal& s : signals.nics) control_->ObserveNicCounters(s);
  if (t.probes_size() > 0) {
    if (protocol::ProtocolError bad = ObserveHostProbes(in); protocol::Failed(bad)) {
      return Refuse("client", in.msg.request_id(), bad);
    }
  }
  return protocol::MakeAck(in.msg.request_id(), "", control_->loop().epoch());
}

protocol::ProtocolError Gateway::ObserveHostProbes(const protocol::Inbound& in) {
  const v1::HostTelemetry& t = in.msg.host_telemetry();
  const core::Topology& nominal = topo_->nominal();
  protocol::HostProbeSamples got;
  if (protocol::ProtocolError bad = protocol::HostProbesFromProto(t, nominal, &got);
      protocol::Failed(bad)) {
    return bad;
  }
  std::vector<protocol::ProtocolError> rejected = std::move(got.rejected);
  const HostProbeCounters before = host_probe_counters_;
  const core::NodeId host = *nominal.FindNode(t.host());  // HostProbesFromProto checked it.
  const double gray = control_->loop().options().faults.localisation.gray_ratio;
  std::map<std::string, std::vector<core::FlowSample>> by_job;
  size_t taken = 0;  // Accepted, stale or sender-limited: not rejected.
  for (const protocol::HostProbeSample& p : got.probes) {
    const std::string field = "host_telemetry.probes[" + std::to_string(p.index) + "].job_id";
    const JobSession* j = tracker_->Find(p.job_id);
    if (j == nullptr) {
      rejected.push_back({v1::ERROR_CODE_UNKNOWN_JOB, field + ": unknown job '" + p.job_id + "'"});
      continue;
    }
    auto part = j->parts.find(host);
    if (part == j->parts.end()) {
      rejected.push_back({v1::ERROR_CODE_PERMISSION_DENIED,
                          field + ": job '" + p.job_id + "' has no part on host '" + t.host() +
                              "' (a host agent reports probes only for the jobs it has parts of)",
                          "ownership"});
      continue;
    }
    if (grants_ && part->second.user_id != in.user_id) {
      rejected.push_back({v1::ERROR_CODE_PERMISSION_DENIED,
                          field + ": the part of job '" + p.job_id + "' on host '" + t.host() +
                              "' was registered with another CURVE key",
                          "ownership"});
      continue;
    }
    if (!grants_ && !part->second.peer.empty() && part->second.peer != in.peer) {
      // Without CURVE the connection is the only identity: the one that speaks for the part.
      rejected.push_back({v1::ERROR_CODE_PERMISSION_DENIED,
                          field + ": the part of job '" + p.job_id + "' on host '" + t.host() +
                              "' is spoken for by another connection",
                          "connection"});
      continue;
    }
    ++taken;
    // The probe's path: the job's assignment in force must carry it (a result of an older plan's
    // probe describes another path: skipped, not an error).
    const core::AppliedAssignment* a = control_->loop().Applied(p.job_id);
    const core::FlowPin* pin = nullptr;
    if (a != nullptr) {
      for (const core::FlowPin& f : a->assignment.probes) {
        if (f.src_nic == p.sample.src_nic && f.dst_nic == p.sample.dst_nic &&
            f.udp_sport == p.sample.udp_sport) {
          pin = &f;
          break;
        }
      }
    }
    if (pin == nullptr || pin->path.empty()) {
      ++host_probe_counters_.stale;
      continue;
    }
    if (p.sender_limited) {
      // At least this fast: evidence of health only, when that reaches the gray ratio of the
      // path's smallest nominal capacity.
      double nominal_bps = std::numeric_limits<double>::infinity();
      for (core::LinkId l : pin->path) {
        if (l.valid() && l.value() < nominal.num_links()) {
          nominal_bps = std::min(nominal_bps, nominal.link(l).capacity.ToBitsPerSec());
        }
      }
      const double seconds = p.sample.transfer_time.ToSeconds();
      const double rate = seconds > 0 ? p.sample.bytes.ToBits() / seconds : 0;
      if (!std::isfinite(nominal_bps) || rate < gray * nominal_bps) {
        ++host_probe_counters_.sender_limited;
        continue;
      }
    }
    ++host_probe_counters_.accepted;
    by_job[p.job_id].push_back(p.sample);
  }
  for (const auto& [job, samples] : by_job) control_->ObserveHostProbes(job, samples);
  if (metrics_) {
    const HostProbeCounters& c = host_probe_counters_;
    metrics_->AddHostProbes("accepted", c.accepted - before.accepted);
    metrics_->AddHostProbes("stale", c.stale - before.stale);
    metrics_->AddHostProbes("sender_limited", c.sender_limited - before.sender_limited);
    metrics_->AddHostProbes("rejected", rejected.size());
  }
  if (rejected.empty()) return {};
  if (metrics_) metrics_->AddError("client", "host_probe", rejected.size());
  for (const protocol::ProtocolError& r : rejected) {
    // Logged: the first ten, then every hundredth (a broken agent reports every interval).
    const uint64_t n = ++host_probe_counters_.rejected;
    if (n <= 10 || n % 100 == 0) {
      spdlog::warn("host {}: probe result rejected ({} so far): {}", t.host(), n, r.message);
    }
  }
  if (taken == 0) return rejected.front();
  return {};
}

void Gateway::JobGone(const std::string& id, const std::string& reason) {
  spdlog::info("job {} gone: {}", id, reason);
  peer_names_.erase(id);
  parts_->EraseJob(id);
  merge_due_.erase(id);
  next_merge_.erase(id);
  tracker_->Remove(id);
  std::shared_ptr<const core::AppliedAssignment> was = control_->RemoveJob(id, reason);
  std::optional<AuditRow> audit;
  if (was) {
    AuditRow a;
    a.ts_ms = loop_->UnixMs();
    a.epoch = control_->loop().epoch();
    a.job_id = id;
    a.old_level = was->assignment.level;
    a.new_level = -1;
    a.reason = reason.substr(0, 1000);
    audit = std::move(a);
  }
  journal_->Delete(id, std::move(audit));
}

}  // namespace crux::daemon
