#include "switch_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::switch_adapters {

using core::Duration;
using core::Result;
using core::Status;

Status ValidateAgentOptions(const AgentOptions& o) {
  if (o.switch_name.empty()) return core::InvalidArgumentError("agent.switch_name: required");
  if (o.client.endpoint.empty()) return core::InvalidArgumentError("agent.daemon: required");
  if (o.call_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError("agent.call_timeout: must be > 0");
  }
  if (o.hello_interval <= Duration::Zero()) {
    return core::InvalidArgumentError("agent.hello_interval: must be > 0");
  }
  if (o.initial_backoff <= Duration::Zero() || o.max_backoff < o.initial_backoff) {
    return core::InvalidArgumentError(
        "agent.initial_backoff/max_backoff: need 0 < initial_backoff <= max_backoff");
  }
  if (o.poll <= Duration::Zero()) return core::InvalidArgumentError("agent.poll: must be > 0");
  return Status::Ok();
}

SwitchAgent::SwitchAgent(AgentOptions options, protocol::TransportContext& ctx,
                         SwitchAdapter& adapter, const core::Clock& clock)
    : options_(std::move(options)),
      ctx_(ctx),
      adapter_(adapter),
      clock_(clock),
      backoff_(options_.initial_backoff) {}

SwitchAgent::~SwitchAgent() = default;

Status SwitchAgent::Start() {
  CRUX_RETURN_IF_ERROR(ValidateAgentOptions(options_));
  CRUX_ASSIGN_OR_RETURN(client_, protocol::DealerClient::Connect(ctx_, options_.client));
  next_hello_ = clock_.Now();
  return Status::Ok();
}

void SwitchAgent::MarkAway(const std::string& why) {
  if (connected_) {
    spdlog::warn("cruxd at {} is away: {}", options_.client.endpoint, why);
  } else if (counters_.hellos_acked == 0 && counters_.hellos_sent == 1) {
    spdlog::warn("cruxd at {} not answering yet ({}); retrying with backoff",
                 options_.client.endpoint, why);
  }
  connected_ = false;
  next_hello_ = clock_.Now() + backoff_;
  backoff_ = std::min(options_.max_backoff, backoff_ + backoff_);
}

void SwitchAgent::SendHello() {
  v1::Envelope env = protocol::NewEnvelope();
  v1::SwitchHello* h = env.mutable_switch_hello();
  h->set_switch_name(options_.switch_name);
  h->set_agent_version(options_.agent_version);
  h->set_applied_epoch(applied_epoch_);
  const Capabilities caps = adapter_.capabilities();
  v1::SwitchCapabilities* c = h->mutable_capabilities();
  c->set_queues(static_cast<uint32_t>(caps.queues));
  c->set_strict_priority(caps.strict_priority);
  c->set_dwrr(caps.dwrr);
  c->set_pbr_redirect(caps.pbr_redirect);
  c->add_backends(caps.backend);
  ++counters_.hellos_sent;
  Result<v1::Envelope> reply = client_->Call(env, options_.call_timeout);
  if (!reply.ok()) {
    MarkAway(reply.status().message());
    return;
  }
  if (reply->has_error()) {
    // The daemon is there but refuses us (unknown switch name): keep trying slowly and say why.
    last_error_ = "hello refused: " + protocol::StatusFromError(reply->error()).ToString();
    spdlog::error("{}", last_error_);
    MarkAway(last_error_);
    return;
  }
  ++counters_.hellos_acked;
  if (!connected_) {
    ++counters_.reconnects;
    spdlog::info("connected to cruxd at {} as switch {} (applied epoch {})",
                 options_.client.endpoint, options_.switch_name, applied_epoch_);
  }
  connected_ = true;
  backoff_ = options_.initial_backoff;
  next_hello_ = clock_.Now() + options_.hello_interval;
}

void SwitchAgent::ApplyAndReport(const core::SwitchQosState& state, uint64_t epoch) {
  v1::Envelope env = protocol::NewEnvelope();
  v1::SwitchApplied* a = env.mutable_switch_applied();
  a->set_switch_name(options_.switch_name);
  a->set_epoch(epoch);
  Result<ApplyResult> r = adapter_.Apply(state);
  if (r.ok()) {
    ++counters_.applies_ok;
    applied_epoch_ = std::max(applied_epoch_, epoch);
    pending_.reset();
    last_error_.clear();
    a->set_ok(true);
    Result<core::SwitchQosState> back = adapter_.ReadBack();
    *a->mutable_state() = protocol::SwitchQosStateToProto(back.ok() ? *back : state, epoch);
    spdlog::info("applied epoch {} ({} writes, {} deletes, {} attempts)", epoch, r->writes,
                 r->deletes, r->attempts);
  } else {
    ++counters_.applies_failed;
    last_error_ = r.status().ToString();
    pending_ = std::make_pair(state, epoch);
    a->set_ok(false);
    a->set_error(last_error_);
    spdlog::error("apply of epoch {} failed (will retry): {}", epoch, last_error_);
  }
  Result<v1::Envelope> reply = client_->Call(env, options_.call_timeout);
  if (!reply.ok()) MarkAway(reply.status().message());
}

void SwitchAgent::HandlePush(const v1::SwitchQosState& push) {
  ++counters_.pushes;
  Result<core::SwitchQosState> state = protocol::SwitchQosStateFromProto(push);
  std::string error;
  if (!state.ok()) {
    error = state.status().ToString();
  } else if (state->switch_name != options_.switch_name) {
    error = "switch_state.switch_name: '" + state->switch_name + "' is not this switch ('" +
            options_.switch_name + "')";
  } else if (push.epoch() != 0 && push.epoch() < applied_epoch_) {
    spdlog::info("ignoring stale push of epoch {} (applied {})", push.epoch(), applied_epoch_);
    return;
  }
  if (!error.empty()) {
    ++counters_.bad_pushes;
    last_error_ = error;
    spdlog::error("rejected push of epoch {}: {}", push.epoch(), error);
    v1::Envelope env = protocol::NewEnvelope();
    v1::SwitchApplied* a = env.mutable_switch_applied();
    a->set_switch_name(options_.switch_name);
    a->set_epoch(push.epoch());
    a->set_ok(false);
    a->set_error(error);
    Result<v1::Envelope> reply = client_->Call(env, options_.call_timeout);
    if (!reply.ok()) MarkAway(reply.status().message());
    return;
  }
  ApplyAndReport(*state, push.epoch());
}

Status SwitchAgent::RunOnce() {
  if (!client_) return core::FailedPreconditionError("SwitchAgent::RunOnce before Start");
  if (clock_.Now() >= next_hello_) {
    SendHello();
    if (connected_ && pending_) {
      auto [state, epoch] = *pending_;
      ApplyAndReport(state, epoch);
    }
  }
  Result<std::optional<v1::Envelope>> msg = client_->Receive(options_.poll);
  if (!msg.ok()) {
    MarkAway(msg.status().message());
    return Status::Ok();
  }
  if (!msg->has_value()) return Status::Ok();
  const v1::Envelope& env = **msg;
  if (env.has_switch_state()) {
    HandlePush(env.switch_state());
  }
  // Late replies (acks of earlier calls) and other bodies are ignored.
  return Status::Ok();
}

Status SwitchAgent::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) CRUX_RETURN_IF_ERROR(RunOnce());
  return Status::Ok();
}

}  // namespace crux::switch_adapters
