#include "crux/daemon/enforcer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::daemon {

Enforcer::Enforcer(Metrics* metrics, const core::Topology* topo, core::QosConfig qos)
    : metrics_(metrics), topo_(topo), qos_(std::move(qos)) {}

bool Enforcer::Push(const std::string& peer, v1::Assignment a) {
  if (peer.empty() || !sender_) {
    ++push_failures_;
    if (metrics_) metrics_->AddPushes(0, 1);
    return false;
  }
  v1::Envelope env = protocol::NewEnvelope(0);
  a.set_state_id(state_id_);
  a.set_sent_unix_ns(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count()));
  *env.mutable_assignment() = std::move(a);
  core::Status s = sender_(peer, env);
  if (!s.ok()) {
    ++push_failures_;
    if (metrics_) metrics_->AddPushes(0, 1);
    spdlog::warn("push of epoch {} to job {} failed: {}", env.assignment().epoch(),
                 env.assignment().job_id(), s.ToString());
    return false;
  }
  ++pushes_;
  if (metrics_) metrics_->AddPushes(1, 0);
  return true;
}

uint64_t Enforcer::desired_epoch(const std::string& name) const {
  auto it = desired_epoch_.find(name);
  return it == desired_epoch_.end() ? 0 : it->second;
}

v1::Envelope Enforcer::StateEnvelope(const std::string& name) const {
  v1::Envelope env = protocol::NewEnvelope(0);
  *env.mutable_switch_state() =
      protocol::SwitchQosStateToProto(desired_.at(name), desired_epoch(name));
  env.mutable_switch_state()->set_state_id(state_id_);
  return env;
}

std::optional<v1::Envelope> Enforcer::OnHello(const v1::SwitchHello& h, const std::string& peer,
                                              int64_t unix_ms, bool* returning) {
  auto [it, added] = switches_.try_emplace(h.switch_name());
  SwitchEntry& e = it->second;
  *returning = added || !e.connected || e.peer != peer ||
               unix_ms - e.last_seen_ms > kAgentStaleMs || h.applied_epoch() < e.applied_epoch ||
               (h.applied_state_id() != 0 && h.applied_state_id() != state_id_);
  e.name = h.switch_name();
  e.peer = peer;
  e.capabilities = h.capabilities();
  // An epoch applied under another state id says nothing about this state's epochs.
  const bool foreign = h.applied_state_id() != 0 && h.applied_state_id() != state_id_;
  e.applied_epoch = foreign ? 0 : h.applied_epoch();
  e.last_seen_ms = unix_ms;
  e.connected = true;
  if (metrics_) metrics_->SetSwitches(static_cast<int64_t>(switches_.size()));
  if (!ready_ || !desired_.count(e.name)) return std::nullopt;
  const bool stale = h.applied_epoch() < desired_epoch(e.name) && e.last_error.empty();
  if (!*returning && !stale) return std::nullopt;
  ++switch_pushes_;
  return StateEnvelope(e.name);
}

Refusal Enforcer::OnApplied(const v1::SwitchApplied& a, const std::string& peer, int64_t unix_ms) {
  auto it = switches_.find(a.switch_name());
  if (it == switches_.end()) {
    return {v1::ERROR_CODE_NOT_FOUND,
            "switch_applied.switch_name: '" + a.switch_name() + "' has not sent a SwitchHello"};
  }
  SwitchEntry& e = it->second;
  e.peer = peer;
  e.last_seen_ms = unix_ms;
  e.connected = true;
  if (a.drifted_fields() > 0) {
    e.last_drift_ms = unix_ms;
    e.last_drifted_fields = a.drifted_fields();
    if (a.ok()) ++e.drift_repairs;
    spdlog::warn("switch {}: {} CONFIG_DB fields had drifted from the desired state{}", e.name,
                 a.drifted_fields(), a.ok() ? "; repaired" : "; repair failed");
  }
  if (a.ok()) {
    if (!e.last_error.empty()) {
      spdlog::info("switch {} applied epoch {} (recovered from: {})", e.name, a.epoch(),
                   e.last_error);
    }
    e.applied_epoch = std::max(e.applied_epoch, a.epoch());
    e.last_error.clear();
  } else {
    const std::string error = a.error().empty() ? "apply failed (no reason given)" : a.error();
    if (error != e.last_error) {
      spdlog::warn("switch {} could not apply epoch {}: {}", e.name, a.epoch(), error);
    }
    e.last_error = error;
  }
  return {};
}

void Enforcer::PushState(SwitchEntry& e) {
  if (!sender_ || !e.connected || e.peer.empty()) return;
  if (core::Status s = sender_(e.peer, StateEnvelope(e.name)); s.ok()) {
    ++switch_pushes_;
  } else {
    spdlog::warn("push to switch agent {} failed: {}", e.name, s.ToString());
    e.connected = false;
  }
}

core::Result<Enforcer::PendingState> Enforcer::ComputeDesired(
    const std::vector<core::QosJob>& jobs) const {
  PendingState p;
  CRUX_ASSIGN_OR_RETURN(p.next, core::ComputeDesiredQos(qos_, *topo_, jobs));
  if (ready_) {
    p.changed = core::ChangedSwitches(desired_, p.next);
  } else {
    for (const auto& [name, s] : p.next) p.changed.push_back(name);
  }
  return p;
}

std::vector<std::string> Enforcer::Commit(uint64_t epoch, PendingState p) {
  desired_ = std::move(p.next);
  // Informational `jobs` lists may change without a device change; they are kept current.
  for (const std::string& name : p.changed) desired_epoch_[name] = epoch;
  ready_ = true;
  for (const std::string& name : p.changed) {
    auto it = switches_.find(name);
    if (it != switches_.end()) PushState(it->second);
  }
  return std::move(p.changed);
}

core::Result<std::vector<std::string>> Enforcer::UpdateDesired(
    uint64_t epoch, const std::vector<core::QosJob>& jobs, bool push) {
  CRUX_ASSIGN_OR_RETURN(PendingState p, ComputeDesired(jobs));
  if (!push) return std::move(p.changed);
  return Commit(epoch, std::move(p));
}

std::vector<v1::SwitchInfo> Enforcer::Switches(uint32_t shared_jobs, int64_t now_ms) const {
  std::vector<v1::SwitchInfo> out;
  for (const auto& [name, e] : switches_) {
    v1::SwitchInfo i;
    i.set_name(name);
    i.set_connected(e.connected && now_ms - e.last_seen_ms <= kAgentStaleMs);
    i.set_desired_epoch(desired_epoch(name));
    i.set_applied_epoch(e.applied_epoch);
    i.set_last_error(e.last_error);
    i.set_last_seen_ms(static_cast<uint64_t>(e.last_seen_ms));
    i.set_dscp_colours_shared(shared_jobs);
    i.set_in_sync(i.connected() && e.last_error.empty() && e.applied_epoch >= desired_epoch(name));
    i.set_drift_repairs(e.drift_repairs);
    i.set_last_drift_ms(static_cast<uint64_t>(e.last_drift_ms));
    i.set_last_drifted_fields(e.last_drifted_fields);
    *i.mutable_capabilities() = e.capabilities;
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace crux::daemon
