#include "crux/daemon/state/enforcer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::daemon {

Refusal CheckSwitchCapabilities(const v1::SwitchCapabilities& caps, const core::QosConfig& qos,
                                const std::string& switch_name) {
  if (caps.queues() == 0) return {};  // Not declared: nothing to check against.
  int top_queue = qos.default_tc;
  for (int tc : qos.level_tcs) top_queue = std::max(top_queue, tc);
  bool needs_dwrr = !qos.jobs_strict || qos.default_weight > 0;
  for (const core::ReservedClass& rc : qos.reserved) {
    top_queue = std::max(top_queue, rc.tc);
    if (rc.scheduler == core::SchedulerType::kDwrr) needs_dwrr = true;
  }
  const std::string field = "switch_hello.capabilities";
  if (static_cast<int>(caps.queues()) <= top_queue) {
    return {RefusalCode::kUnsupported,
            field + ".queues: switch '" + switch_name + "' has " + std::to_string(caps.queues()) +
                " queues per port, but the qos configuration uses queue " +
                std::to_string(top_queue) + " (needs " + std::to_string(top_queue + 1) +
                "); give cruxd a qos block that fits the smallest switch"};
  }
  if (qos.jobs_strict && !caps.strict_priority()) {
    return {RefusalCode::kUnsupported,
            field + ".strict_priority: switch '" + switch_name +
                "' has no strict-priority scheduling, which qos.jobs_strict needs"};
  }
  if (needs_dwrr && !caps.dwrr()) {
    return {RefusalCode::kUnsupported, field + ".dwrr: switch '" + switch_name +
                                           "' has no DWRR scheduling, which the qos "
                                           "configuration's weighted classes need"};
  }
  return {};
}

Enforcer::Enforcer(Metrics* metrics, const core::Topology* topo, std::function<int64_t()> wall_ns)
    : metrics_(metrics), topo_(topo), wall_ns_(std::move(wall_ns)) {}

bool Enforcer::Push(const std::string& peer, const core::AppliedAssignment& a) {
  if (peer.empty() || !sender_) {
    ++push_failures_;
    if (metrics_) metrics_->AddPushes(0, 1);
    return false;
  }
  v1::Envelope env = protocol::NewEnvelope(0);
  *env.mutable_assignment() = Stamped(a, static_cast<uint64_t>(wall_ns_ ? wall_ns_() : 0));
  return Counted(sender_(peer, env), a);
}

v1::Assignment Enforcer::Stamped(const core::AppliedAssignment& a, uint64_t sent_unix_ns) const {
  v1::Assignment p = protocol::AssignmentToProto(a, *topo_);
  p.set_state_id(state_id_);
  p.set_term(term_);
  p.set_sent_unix_ns(sent_unix_ns);
  return p;
}

bool Enforcer::Counted(const core::Status& s, const core::AppliedAssignment& a) {
  if (!s.ok()) {
    ++push_failures_;
    if (metrics_) metrics_->AddPushes(0, 1);
    spdlog::warn("push of epoch {} to job {} failed: {}", a.epoch, a.assignment.job_id,
                 s.ToString());
    return false;
  }
  ++pushes_;
  if (metrics_) metrics_->AddPushes(1, 0);
  return true;
}

bool Enforcer::Push(const std::string& peer, const core::AppliedAssignment& a,
                    const std::string& serialized) {
  if (serialized.empty() || !encoded_sender_ || peer.empty()) return Push(peer, a);
  return Counted(
      encoded_sender_(peer, protocol::EncodeAssignmentPush(
                                serialized, state_id_,
                                static_cast<uint64_t>(wall_ns_ ? wall_ns_() : 0), term_)),
      a);
}

size_t Enforcer::PushBatch(const std::string& peer,
                           const std::vector<const core::AppliedAssignment*>& batch) {
  if (batch.size() == 1) return Push(peer, *batch.front()) ? 1 : 0;
  if (batch.empty() || peer.empty() || !sender_) {
    for (const core::AppliedAssignment* a : batch) Push(peer, *a);  // Counted as failures.
    return 0;
  }
  v1::Envelope env = protocol::NewEnvelope(0);
  v1::AssignmentBatch* b = env.mutable_assignment_batch();
  const uint64_t sent_ns = static_cast<uint64_t>(wall_ns_ ? wall_ns_() : 0);
  for (const core::AppliedAssignment* a : batch) *b->add_assignments() = Stamped(*a, sent_ns);
  const core::Status s = sender_(peer, env);
  if (s.code() == core::StatusCode::kOutOfRange) {
    size_t sent = 0;
    for (const core::AppliedAssignment* a : batch) sent += Push(peer, *a) ? 1 : 0;
    return sent;
  }
  size_t sent = 0;
  for (const core::AppliedAssignment* a : batch) sent += Counted(s, *a) ? 1 : 0;
  if (s.ok()) ++batch_frames_;
  return sent;
}

uint64_t Enforcer::desired_epoch(const std::string& name) const {
  if (!qos_) return 0;
  auto it = qos_->epochs.find(name);
  return it == qos_->epochs.end() ? 0 : it->second;
}

v1::Envelope Enforcer::StateEnvelope(const std::string& name) const {
  v1::Envelope env = protocol::NewEnvelope(0);
  *env.mutable_switch_state() =
      protocol::SwitchQosStateToProto(qos_->states.at(name), desired_epoch(name));
  env.mutable_switch_state()->set_state_id(state_id_);
  env.mutable_switch_state()->set_term(term_);
  // The plan levels' TCs: a DSCP mapping to one of them is the colour of a job crossing the
  // switch (the agent's enforcement check tells job traffic from best effort with them).
  std::set<int> job_tcs(qos_config_.level_tcs.begin(), qos_config_.level_tcs.end());
  for (int tc : job_tcs) env.mutable_switch_state()->add_job_tcs(static_cast<uint32_t>(tc));
  auto it = switches_.find(name);
  if (it != switches_.end() && it->second.capabilities.queues() > 0 &&
      !it->second.capabilities.pfc()) {
    env.mutable_switch_state()->clear_pfc_enable();  // The switch cannot do PFC: leave it alone.
  }
  return env;
}

Refusal Enforcer::OnHello(const v1::SwitchHello& h, const std::string& peer, int64_t unix_ms,
                          bool* returning, std::optional<v1::Envelope>* push) {
  *returning = false;
  push->reset();
  if (Refusal bad = CheckSwitchCapabilities(h.capabilities(), qos_config_, h.switch_name());
      Refused(bad)) {
    return bad;
  }
  auto [it, added] = switches_.try_emplace(h.switch_name());
  SwitchEntry& e = it->second;
  // An epoch applied under another state id says nothing about this state's epochs.
  const bool foreign = h.applied_state_id() != 0 && h.applied_state_id() != state_id_;
  *returning = added || !e.connected || e.peer != peer ||
               unix_ms - e.last_seen_ms > kAgentStaleMs || h.applied_epoch() < e.applied_epoch ||
               foreign;
  e.name = h.switch_name();
  e.peer = peer;
  e.capabilities = h.capabilities();
  e.applied_epoch = foreign ? 0 : h.applied_epoch();
  e.highest_term = h.highest_term();
  e.stale_term_refused = h.stale_term_refused();
  e.last_seen_ms = unix_ms;
  e.connected = true;
  if (metrics_) metrics_->SetSwitches(static_cast<int64_t>(switches_.size()));
  if (h.has_enforcement()) {
    RecordEnforcement(e, protocol::EnforcementCheckFromProto(h.enforcement()), unix_ms);
  } else {
    core::EnforcementCheck none;
    none.detail = "the agent sends no enforcement check (an older crux-switch-agent?)";
    RecordEnforcement(e, std::move(none), unix_ms);
  }
  if (!qos_ || !qos_->states.count(e.name)) return {};
  const bool stale = h.applied_epoch() < desired_epoch(e.name) && e.last_error.empty();
  if (!*returning && !stale) return {};
  ++switch_pushes_;
  *push = StateEnvelope(e.name);
  return {};
}

Refusal Enforcer::OnApplied(const v1::SwitchApplied& a, const std::string& peer, int64_t unix_ms) {
  auto it = switches_.find(a.switch_name());
  if (it == switches_.end()) {
    return {RefusalCode::kNotFound,
            "switch_applied.switch_name: '" + a.switch_name() + "' has not sent a SwitchHello"};
  }
  SwitchEntry& e = it->second;
  e.peer = peer;
  e.last_seen_ms = unix_ms;
  e.connected = true;
  if (a.has_enforcement()) {
    RecordEnforcement(e, protocol::EnforcementCheckFromProto(a.enforcement()), unix_ms);
  }
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

void Enforcer::RecordEnforcement(SwitchEntry& e, core::EnforcementCheck check, int64_t unix_ms) {
  const bool status_changed = check.status != e.enforcement.status;
  if (!check.SameVerdict(e.enforcement)) {
    const std::string_view name = core::EnforcementStatusName(check.status);
    if (check.status == core::EnforcementStatus::kMismatch) {
      spdlog::warn("switch {} does not enforce its plan (epoch {}): {}", e.name, check.epoch,
                   check.detail);
    } else if (check.status == core::EnforcementStatus::kMatch) {
      spdlog::info("switch {} enforces its plan (epoch {}; {} maps, {} queues checked)", e.name,
                   check.epoch, check.maps_checked, check.queues_checked);
    } else if (e.enforcement.status != core::EnforcementStatus::kUnknown) {
      spdlog::info("switch {}: enforcement {} -> {}: {}", e.name,
                   core::EnforcementStatusName(e.enforcement.status), name, check.detail);
    }
  }
  e.enforcement = std::move(check);
  // Every hello brings a check: recount on a changed status, else at most once a second (the
  // count walks every switch).
  if (status_changed || unix_ms - last_enforcement_count_ms_ >= 1000) CountEnforcement(unix_ms);
}

void Enforcer::CountEnforcement(int64_t now_ms) const {
  if (!metrics_) return;
  last_enforcement_count_ms_ = now_ms;
  int64_t match = 0, mismatch = 0, unknown = 0;
  for (const auto& [name, e] : switches_) {
    const bool live = e.connected && now_ms - e.last_seen_ms <= kAgentStaleMs;
    const core::EnforcementStatus s =
        live ? e.enforcement.status : core::EnforcementStatus::kUnknown;
    (s == core::EnforcementStatus::kMatch      ? match
     : s == core::EnforcementStatus::kMismatch ? mismatch
                                               : unknown)++;
  }
  metrics_->SetSwitchEnforcement(match, mismatch, unknown);
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

void Enforcer::Commit(std::shared_ptr<const core::AppliedQos> qos,
                      const std::vector<std::string>& changed) {
  if (!qos) return;
  qos_ = std::move(qos);
  for (const std::string& name : changed) {
    auto it = switches_.find(name);
    if (it != switches_.end() && qos_->states.count(name)) PushState(it->second);
  }
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
    i.set_highest_term(e.highest_term);
    i.set_stale_term_refused(e.stale_term_refused);
    i.set_last_drift_ms(static_cast<uint64_t>(e.last_drift_ms));
    i.set_last_drifted_fields(e.last_drifted_fields);
    *i.mutable_capabilities() = e.capabilities;
    *i.mutable_enforcement() = protocol::EnforcementCheckToProto(e.enforcement);
    out.push_back(std::move(i));
  }
  CountEnforcement(now_ms);  // Agents that went silent count as unknown from now on.
  return out;
}

}  // namespace crux::daemon
