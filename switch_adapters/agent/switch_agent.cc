#include "switch_agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::switch_adapters {

using core::Duration;
using core::Result;
using core::Status;

namespace {

std::string Ms(Duration d) { return std::to_string(d.nanos() / 1000000) + " ms"; }

// The first few operations of an apply, for the log.
std::string Summary(const std::vector<std::string>& ops) {
  constexpr size_t kShown = 4;
  std::string out;
  for (size_t i = 0; i < ops.size() && i < kShown; ++i) out += (i ? "; " : "") + ops[i];
  if (ops.size() > kShown) out += "; ... (" + std::to_string(ops.size() - kShown) + " more)";
  return out;
}

}  // namespace

Status ValidateAgentOptions(const AgentOptions& o) {
  if (o.switch_name.empty()) return core::InvalidArgumentError("agent.switch_name: required");
  if (o.client.endpoint.empty()) return core::InvalidArgumentError("agent.daemon: required");
  if (o.call_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError("agent.call_timeout: must be > 0");
  }
  if (o.hello_interval <= Duration::Zero()) {
    return core::InvalidArgumentError("agent.hello_interval: must be > 0");
  }
  if (o.reconcile_period <= Duration::Zero()) {
    return core::InvalidArgumentError("agent.reconcile_period: must be > 0");
  }
  if (o.poll <= Duration::Zero()) return core::InvalidArgumentError("agent.poll: must be > 0");
  for (const auto& [name, b] :
       {std::pair<const char*, const core::BackoffOptions&>{"daemon_", o.daemon_backoff},
        {"device_", o.device_backoff}}) {
    if (Status s = core::ValidateBackoffOptions(b); !s.ok()) {
      return Status(s.code(), std::string("agent.") + name + s.message());
    }
  }
  return Status::Ok();
}

SwitchAgent::SwitchAgent(AgentOptions options, protocol::TransportContext& ctx,
                         SwitchAdapter& adapter, const core::Clock& clock)
    : options_(std::move(options)),
      ctx_(ctx),
      adapter_(adapter),
      clock_(clock),
      daemon_backoff_(options_.daemon_backoff),
      device_backoff_(options_.device_backoff) {}

SwitchAgent::~SwitchAgent() = default;

void SwitchAgent::SetEnforcementVerifier(Result<std::unique_ptr<EnforcementVerifier>> verifier) {
  enforcement_ = {};
  if (verifier.ok()) {
    verifier_ = std::move(verifier).value();
    enforcement_.detail = "not checked yet (checks run on reconciles that find the device in sync)";
  } else {
    verifier_.reset();
    enforcement_.detail = verifier.status().message();
  }
}

Status SwitchAgent::Start() {
  CRUX_RETURN_IF_ERROR(ValidateAgentOptions(options_));
  if (!options_.term_file.empty()) {
    CRUX_ASSIGN_OR_RETURN(protocol::TermFile file,
                          protocol::TermFile::Open(options_.term_file, options_.switch_name));
    highest_term_ = std::max(highest_term_, file.term());
    spdlog::info("highest cruxd leader term accepted so far: {} ({})", file.term(), file.path());
    term_file_ = std::move(file);
  }
  caps_ = adapter_.capabilities();
  CRUX_ASSIGN_OR_RETURN(client_, protocol::DealerClient::Connect(ctx_, options_.client));
  if (!verifier_ && enforcement_.detail.empty()) {
    enforcement_.detail =
        "no enforcement verifier was set up for the " + caps_.backend + " backend";
  }
  worker_ = std::make_unique<DeviceWorker>(adapter_, verifier_.get());
  if (options_.watch_ports) {
    if (!monitor_) {
      return core::FailedPreconditionError("agent.watch_ports: the backend has no port monitor");
    }
    watcher_ = std::make_unique<PortWatcher>(std::move(monitor_), *options_.watch_ports);
  }
  next_hello_ = clock_.Now();
  return Status::Ok();
}

void SwitchAgent::MarkAway(const std::string& why) {
  const Duration wait = daemon_backoff_.Next();
  if (connected_) {
    spdlog::warn("cruxd at {} is away: {} (hello again in {})", options_.client.endpoint, why,
                 Ms(wait));
  } else if (counters_.hellos_acked == 0 && counters_.hellos_sent == 1) {
    spdlog::warn("cruxd at {} not answering yet ({}); retrying with backoff",
                 options_.client.endpoint, why);
  }
  connected_ = false;
  next_hello_ = clock_.Now() + wait;
}

void SwitchAgent::SendHello() {
  v1::Envelope env = protocol::NewEnvelope();
  v1::SwitchHello* h = env.mutable_switch_hello();
  h->set_switch_name(options_.switch_name);
  h->set_agent_version(options_.agent_version);
  h->set_applied_epoch(applied_epoch_);
  h->set_applied_state_id(applied_state_id_);
  h->set_highest_term(highest_term_);
  h->set_stale_term_refused(counters_.stale_term_refused);
  *h->mutable_enforcement() = protocol::EnforcementCheckToProto(enforcement_);
  v1::SwitchCapabilities* c = h->mutable_capabilities();
  c->set_queues(static_cast<uint32_t>(caps_.queues));
  c->set_strict_priority(caps_.strict_priority);
  c->set_dwrr(caps_.dwrr);
  c->set_pfc(caps_.pfc);
  c->set_pbr_redirect(caps_.pbr_redirect);
  c->add_backends(caps_.backend);
  ++counters_.hellos_sent;
  Result<v1::Envelope> reply = client_->Call(env, options_.call_timeout);
  if (!reply.ok()) {
    MarkAway(reply.status().message());
    return;
  }
  if (reply->has_error()) {
    const v1::ErrorCode code = reply->error().code();
    last_error_ = "hello refused: " + protocol::StatusFromError(reply->error()).ToString();
    if (code == v1::ERROR_CODE_UNKNOWN_HOST || code == v1::ERROR_CODE_PERMISSION_DENIED ||
        code == v1::ERROR_CODE_UNSUPPORTED) {
      // Configuration, not a transient state: retrying would loop forever without a word.
      fatal_ = core::FailedPreconditionError(
          "cruxd at " + options_.client.endpoint + " refused switch '" + options_.switch_name +
          "' (" + std::string(protocol::ErrorCodeName(code)) + "): " + reply->error().message() +
          (code == v1::ERROR_CODE_UNKNOWN_HOST ? " -- check --switch-name against cruxd's topology"
           : code == v1::ERROR_CODE_UNSUPPORTED
               ? " -- the switch cannot hold cruxd's qos configuration (see the message)"
               : " -- check that this agent's key may speak for the switch"));
      spdlog::critical("{}; not retrying", fatal_->message());
      return;
    }
    // The daemon is there but refuses for now (e.g. shutting down): keep trying with backoff.
    spdlog::error("{}", last_error_);
    MarkAway(last_error_);
    return;
  }
  ++counters_.hellos_acked;
  telemetry_off_ = false;
  if (!connected_) {
    ++counters_.reconnects;
    spdlog::info("connected to cruxd at {} as switch {} (applied epoch {}, state id {})",
                 options_.client.endpoint, options_.switch_name, applied_epoch_, applied_state_id_);
  }
  connected_ = true;
  daemon_backoff_.Reset();
  next_hello_ = clock_.Now() + options_.hello_interval;
}

void SwitchAgent::Report(v1::Envelope env) {
  Result<v1::Envelope> reply = client_->Call(env, options_.call_timeout);
  if (!reply.ok()) {
    MarkAway(reply.status().message());
    return;
  }
  if (reply->has_error()) {
    spdlog::warn("cruxd refused our SwitchApplied: {}",
                 protocol::StatusFromError(reply->error()).ToString());
    // A restarted cruxd that has not seen our hello yet: introduce ourselves now.
    if (reply->error().code() == v1::ERROR_CODE_NOT_FOUND) next_hello_ = clock_.Now();
  }
}

void SwitchAgent::Refuse(const v1::SwitchQosState& push, const std::string& error) {
  ++counters_.bad_pushes;
  spdlog::error("rejected push of epoch {}: {}", push.epoch(), error);
  v1::Envelope env = protocol::NewEnvelope();
  v1::SwitchApplied* a = env.mutable_switch_applied();
  a->set_switch_name(options_.switch_name);
  a->set_epoch(push.epoch());
  a->set_ok(false);
  a->set_error(error);
  Report(std::move(env));
}

void SwitchAgent::HandlePush(const v1::SwitchQosState& push) {
  ++counters_.pushes;
  if (push.term() != 0 && push.term() < highest_term_) {
    ++counters_.stale_term_refused;
    last_error_ = "refused the state of epoch " + std::to_string(push.epoch()) +
                  " from cruxd term " + std::to_string(push.term()) + ": term " +
                  std::to_string(highest_term_) + " has been seen (a deposed leader)";
    spdlog::warn("{}", last_error_);
    return;
  }
  if (push.term() > highest_term_) {
    // Recorded before the push is accepted: after a restart the agent still knows this term.
    if (term_file_) {
      if (Status s = term_file_->Raise(push.term()); !s.ok()) {
        ++counters_.term_write_failed;
        return Refuse(push, "cannot record cruxd leader term " + std::to_string(push.term()) +
                                " (so the push is not applied): " + s.ToString());
      }
    }
    if (highest_term_ != 0) {
      spdlog::info("cruxd leader term {} -> {}", highest_term_, push.term());
    }
    highest_term_ = push.term();
  }
  Result<core::SwitchQosState> state = protocol::SwitchQosStateFromProto(push);
  if (!state.ok()) return Refuse(push, state.status().ToString());
  if (state->switch_name != options_.switch_name) {
    return Refuse(push, "switch_state.switch_name: '" + state->switch_name +
                            "' is not this switch ('" + options_.switch_name + "')");
  }
  if (Status s = CheckCapabilities(caps_, *state); !s.ok()) return Refuse(push, s.ToString());
  // Accept when newer, or from another daemon state (a reset starts a new epoch sequence).
  if (desired_ && push.epoch() <= desired_->epoch && push.state_id() == desired_->state_id) {
    ++counters_.stale_pushes;
    spdlog::debug("ignoring push of epoch {} (state id {}): already have epoch {}", push.epoch(),
                  push.state_id(), desired_->epoch);
    return;
  }
  if (desired_ && push.state_id() != desired_->state_id) {
    spdlog::info("cruxd state id changed ({} -> {}): accepting epoch {} after epoch {}",
                 desired_->state_id, push.state_id(), push.epoch(), desired_->epoch);
  }
  desired_ = Desired{*std::move(state), push.epoch(), push.state_id(), false,
                     std::set<int>(push.job_tcs().begin(), push.job_tcs().end())};
  dirty_ = true;
  device_failed_ = false;
  device_backoff_.Reset();
}

void SwitchAgent::MaybeStartDeviceWork() {
  if (!desired_ || in_flight_ || fatal_) return;
  if (!dirty_ && clock_.Now() < next_device_) return;
  InFlight f{desired_->epoch, desired_->state_id, desired_->applied_once};
  DeviceWorker::Job job;
  job.id = ++next_job_id_;
  job.state = desired_->state;
  // A push's report carries the state read back; a reconcile needs it only when it repaired.
  job.read_back =
      f.reconcile ? DeviceWorker::ReadBackWhen::kIfChanged : DeviceWorker::ReadBackWhen::kAlways;
  if (f.reconcile && verifier_) {
    job.verify = EnforcementPlan{desired_->state, desired_->job_tcs, desired_->epoch};
    job.verify_at = clock_.Now();
  }
  worker_->Submit(std::move(job));
  in_flight_ = f;
  dirty_ = false;
}

void SwitchAgent::TakeDeviceOutcome() {
  if (!in_flight_) return;
  std::optional<DeviceWorker::Done> done = worker_->TakeDone();
  if (!done) return;
  const InFlight f = *in_flight_;
  in_flight_.reset();
  // Whether the outcome is about the state still desired (no newer push meanwhile).
  const bool current = desired_ && desired_->epoch == f.epoch && desired_->state_id == f.state_id;
  const bool was_failed = device_failed_;
  const bool verdict_changed = TakeEnforcement(*done, f.epoch);

  v1::Envelope env = protocol::NewEnvelope();
  v1::SwitchApplied* a = env.mutable_switch_applied();
  a->set_switch_name(options_.switch_name);
  a->set_epoch(f.epoch);
  a->set_reconcile(f.reconcile);
  *a->mutable_enforcement() = protocol::EnforcementCheckToProto(enforcement_);

  if (!done->applied.ok()) {
    last_error_ = done->applied.status().ToString();
    ++(f.reconcile ? counters_.reconciles_failed : counters_.applies_failed);
    std::string next = "replaced by a newer push";
    if (current) {
      device_failed_ = true;
      const Duration wait = device_backoff_.Next();
      next_device_ = clock_.Now() + wait;
      next = "retry " + std::to_string(device_backoff_.attempts()) + " in " + Ms(wait);
    }
    spdlog::error("{} of epoch {} failed ({}): {}", f.reconcile ? "reconcile" : "apply", f.epoch,
                  next, last_error_);
    a->set_ok(false);
    a->set_error(last_error_);
    Report(std::move(env));
    return;
  }

  const ApplyResult& r = *done->applied;
  if (current) {
    device_failed_ = false;
    device_backoff_.Reset();
    next_device_ = clock_.Now() + options_.reconcile_period;
    desired_->applied_once = true;
    last_error_.clear();
  }
  if (f.reconcile) {
    ++counters_.reconciles;
    if (r.changed()) {
      ++counters_.drift_repairs;
      counters_.drifted_fields += static_cast<uint64_t>(r.differing());
      spdlog::warn("reconcile: {} field(s) of switch {} had drifted from epoch {}; repaired: {}",
                   r.differing(), options_.switch_name, f.epoch, Summary(r.operations));
    } else if (!was_failed && !verdict_changed) {
      return;  // In sync, same enforcement verdict: nothing to report.
    }
    a->set_drifted_fields(static_cast<uint32_t>(r.differing()));
  } else {
    ++counters_.applies_ok;
    applied_epoch_ = f.epoch;
    applied_state_id_ = f.state_id;
    spdlog::info("applied epoch {} ({} writes, {} deletes)", f.epoch, r.writes, r.deletes);
  }
  a->set_ok(true);
  const core::SwitchQosState* shown = nullptr;
  if (done->read_back && done->read_back->ok()) shown = &done->read_back->value();
  if (shown == nullptr && desired_ && current) shown = &desired_->state;
  if (shown != nullptr) {
    *a->mutable_state() = protocol::SwitchQosStateToProto(*shown, f.epoch);
    a->mutable_state()->set_state_id(f.state_id);
  }
  Report(std::move(env));
}

bool SwitchAgent::TakeEnforcement(const DeviceWorker::Done& done, uint64_t epoch) {
  if (!done.verified) return false;
  ++counters_.enforcement_checks;
  core::EnforcementCheck check;
  if (done.verified->ok()) {
    check = done.verified->value();
  } else {
    check.detail = done.verified->status().ToString();
  }
  check.epoch = epoch;
  check.checked_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  if (check.status == core::EnforcementStatus::kMismatch) ++counters_.enforcement_mismatches;
  const bool changed = !check.SameVerdict(enforcement_);
  if (changed) {
    const std::string_view name = core::EnforcementStatusName(check.status);
    if (check.status == core::EnforcementStatus::kMismatch) {
      spdlog::error("enforcement check of switch {} (epoch {}): {}: {}", options_.switch_name,
                    epoch, name, check.detail);
    } else if (check.status == core::EnforcementStatus::kMatch) {
      spdlog::info("enforcement check of switch {} (epoch {}): {} ({} maps, {} queues checked)",
                   options_.switch_name, epoch, name, check.maps_checked, check.queues_checked);
    } else {
      spdlog::warn("enforcement check of switch {} (epoch {}): {}: {}", options_.switch_name, epoch,
                   name, check.detail);
    }
  }
  enforcement_ = std::move(check);
  return changed;
}

Status SwitchAgent::RunOnce() {
  if (!client_) return core::FailedPreconditionError("SwitchAgent::RunOnce before Start");
  if (fatal_) return *fatal_;
  FollowDaemon();
  if (clock_.Now() >= next_hello_) {
    SendHello();
    if (fatal_) return *fatal_;
  }
  TakeDeviceOutcome();
  MaybeStartDeviceWork();
  SendTelemetry();
  // Wait for a message, but not past the next hello or device timer (a device call in progress is
  // picked up at the next poll).
  const Duration now = clock_.Now();
  Duration wait = options_.poll;
  auto until = [&](Duration due) { wait = std::min(wait, std::max(Duration::Zero(), due - now)); };
  until(next_hello_);
  if (desired_ && !in_flight_) until(next_device_);
  Result<std::optional<v1::Envelope>> msg = client_->Receive(wait);
  if (!msg.ok()) {
    MarkAway(msg.status().message());
    return Status::Ok();
  }
  if (msg->has_value() && (*msg)->has_switch_state()) {
    HandlePush((*msg)->switch_state());
    MaybeStartDeviceWork();  // A new push goes to the device at once.
  }
  // Late replies (acks of earlier calls) and other bodies are ignored.
  return Status::Ok();
}

void SwitchAgent::FollowDaemon() {
  Result<protocol::ConnectionChange> change = client_->TakeConnectionChange();
  if (!change.ok()) {
    MarkAway(change.status().message());
    return;
  }
  if (change->lost && connected_) MarkAway("connection lost");
  if (change->connected && !connected_) {
    // A connection is up (the next HA leader bound its endpoint, cruxd restarted; with a fresh
    // routing id): cruxd pushes to the id of the switch's last hello, so say hello from this
    // one now, and retry on the short end of the backoff. (Still connected_: a hello was
    // answered since, on this connection - the first one, at the start - and nothing was lost.)
    daemon_backoff_.Reset();
    next_hello_ = clock_.Now();
  }
}

void SwitchAgent::SendTelemetry() {
  if (!watcher_) return;
  std::vector<TelemetryReport> reports = watcher_->Take();
  if (reports.empty() || telemetry_off_ || fatal_) return;
  // While cruxd is away only the newest report matters (every report has every port's state).
  if (!connected_) reports.erase(reports.begin(), reports.end() - 1);
  for (const TelemetryReport& r : reports) {
    v1::Envelope env = protocol::NewEnvelope();
    v1::SwitchTelemetry* t = env.mutable_switch_telemetry();
    t->set_switch_name(options_.switch_name);
    t->set_seq(++telemetry_seq_);
    for (const PortReport& p : r.ports) {
      v1::PortStatus* ps = t->add_ports();
      ps->set_port(p.port);
      ps->set_neighbor(p.neighbor);
      ps->set_oper_status(!p.oper_up   ? v1::PORT_OPER_STATUS_UNSPECIFIED
                          : *p.oper_up ? v1::PORT_OPER_STATUS_UP
                                       : v1::PORT_OPER_STATUS_DOWN);
      if (p.delta && p.interval > Duration::Zero()) {
        v1::PortCounters* c = ps->mutable_counters();
        c->set_interval_ns(static_cast<uint64_t>(p.interval.nanos()));
        c->set_in_errors(p.delta->in_errors);
        c->set_in_discards(p.delta->in_discards);
        c->set_out_errors(p.delta->out_errors);
        c->set_out_discards(p.delta->out_discards);
        c->set_fec_uncorrectable(p.delta->fec_uncorrectable);
        c->set_pfc_rx_pause(p.delta->pfc_rx_pause);
        c->set_pfc_tx_pause(p.delta->pfc_tx_pause);
        c->set_queue_drops(p.delta->queue_drops);
        c->set_ecn_marked(p.delta->ecn_marked);
        c->set_in_packets(p.delta->in_packets);
        c->set_out_packets(p.delta->out_packets);
      }
    }
    Result<v1::Envelope> reply = client_->Call(env, options_.call_timeout);
    if (!reply.ok()) {
      MarkAway(reply.status().message());
      return;
    }
    if (reply->has_error()) {
      ++counters_.telemetry_refused;
      const v1::ErrorCode code = reply->error().code();
      spdlog::warn(
          "cruxd refused port telemetry: {}{}",
          protocol::StatusFromError(reply->error()).ToString(),
          code == v1::ERROR_CODE_MALFORMED ? " (an older cruxd?) - none until the next hello" : "");
      if (code == v1::ERROR_CODE_MALFORMED) telemetry_off_ = true;
      if (code == v1::ERROR_CODE_NOT_FOUND) next_hello_ = clock_.Now();
      return;
    }
    ++counters_.telemetry_sent;
    if (r.state_changed) {
      std::string states;
      for (const PortReport& p : r.ports) {
        states += (states.empty() ? "" : ", ") + p.port + " " +
                  (!p.oper_up ? "?" : (*p.oper_up ? "up" : "down"));
      }
      spdlog::info("port state reported: {}", states);
    }
  }
}

std::optional<PortWatcher::Counters> SwitchAgent::port_watcher_counters() const {
  if (!watcher_) return std::nullopt;
  return watcher_->counters();
}

Status SwitchAgent::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) CRUX_RETURN_IF_ERROR(RunOnce());
  return Status::Ok();
}

}  // namespace crux::switch_adapters
