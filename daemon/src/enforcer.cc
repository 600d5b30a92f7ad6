#include "crux/daemon/enforcer.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "crux/protocol/codec.h"

namespace crux::daemon {

v1::SwitchQosState ComputeSwitchState(const std::string& name, uint64_t epoch, uint32_t queues,
                                      const std::map<std::string, v1::Assignment>& applied) {
  queues = std::clamp<uint32_t>(queues, 1, 8);
  v1::SwitchQosState s;
  s.set_switch_name(name);
  s.set_epoch(epoch);
  std::map<uint32_t, uint32_t> best_level;  // DSCP -> highest (smallest) level using it.
  for (const auto& [id, a] : applied) {
    auto it = best_level.find(a.dscp());
    if (it == best_level.end() || a.level() < it->second) best_level[a.dscp()] = a.level();
  }
  for (const auto& [dscp, level] : best_level) {
    (*s.mutable_dscp_to_tc())[dscp] = queues - 1 - std::min(level, queues - 1);
  }
  for (uint32_t q = 0; q < queues; ++q) {
    (*s.mutable_tc_to_queue())[q] = q;
    v1::QueueScheduler* sch = s.add_schedulers();
    sch->set_queue(q);
    sch->set_type("STRICT");
  }
  return s;
}

bool Enforcer::Push(const std::string& peer, const v1::Assignment& a) {
  if (peer.empty() || !sender_) {
    ++push_failures_;
    if (metrics_) metrics_->AddPushes(0, 1);
    return false;
  }
  v1::Envelope env = protocol::NewEnvelope(0);
  *env.mutable_assignment() = a;
  core::Status s = sender_(peer, env);
  if (!s.ok()) {
    ++push_failures_;
    if (metrics_) metrics_->AddPushes(0, 1);
    spdlog::warn("push of epoch {} to job {} failed: {}", a.epoch(), a.job_id(), s.ToString());
    return false;
  }
  ++pushes_;
  if (metrics_) metrics_->AddPushes(1, 0);
  return true;
}

void Enforcer::OnHello(const v1::SwitchHello& h, const std::string& peer, int64_t unix_ms) {
  SwitchEntry& e = switches_[h.switch_name()];
  e.name = h.switch_name();
  e.peer = peer;
  e.capabilities = h.capabilities();
  e.applied_epoch = h.applied_epoch();
  e.last_seen_ms = unix_ms;
  e.connected = true;
  if (metrics_) metrics_->SetSwitches(static_cast<int64_t>(switches_.size()));
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
  if (a.ok()) {
    e.applied_epoch = std::max(e.applied_epoch, a.epoch());
    e.last_error.clear();
  } else {
    e.last_error = a.error();
  }
  return {};
}

void Enforcer::PushSwitchState(const std::string& name, uint64_t epoch,
                               const std::map<std::string, v1::Assignment>& applied) {
  auto it = switches_.find(name);
  if (it == switches_.end() || !sender_) return;
  SwitchEntry& e = it->second;
  v1::Envelope env = protocol::NewEnvelope(0);
  *env.mutable_switch_state() = ComputeSwitchState(
      name, epoch, e.capabilities.queues() ? e.capabilities.queues() : 8, applied);
  if (sender_(e.peer, env).ok()) {
    e.desired_epoch = epoch;
  } else {
    e.connected = false;
  }
}

void Enforcer::PushSwitchStates(uint64_t epoch,
                                const std::map<std::string, v1::Assignment>& applied) {
  for (auto& [name, e] : switches_) PushSwitchState(name, epoch, applied);
}

std::vector<v1::SwitchInfo> Enforcer::Switches(uint32_t shared_colours) const {
  std::vector<v1::SwitchInfo> out;
  for (const auto& [name, e] : switches_) {
    v1::SwitchInfo i;
    i.set_name(name);
    i.set_connected(e.connected);
    i.set_desired_epoch(e.desired_epoch);
    i.set_applied_epoch(e.applied_epoch);
    i.set_last_error(e.last_error);
    i.set_last_seen_ms(static_cast<uint64_t>(e.last_seen_ms));
    i.set_dscp_colours_shared(shared_colours);
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace crux::daemon
