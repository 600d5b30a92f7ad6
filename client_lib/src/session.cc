#include "session.h"

#include <algorithm>
#include <utility>

#include "crux/protocol/codec.h"
#include "wire.h"

namespace crux::client::internal {

SessionOptions SessionOptionsFor(const ClientOptions& o, uint64_t seed) {
  SessionOptions s;
  s.job_id = o.job_id;
  s.registration = MakeRegisterJob(o);
  s.call_timeout = core::Duration::Millis(o.call_timeout_ms);
  s.backoff.initial = core::Duration::Millis(o.reconnect_min_ms);
  s.backoff.max = core::Duration::Millis(o.reconnect_max_ms);
  s.backoff.multiplier = 2;
  s.backoff.jitter = 0.2;
  s.backoff.seed = seed;
  s.end_job_on_close = o.end_job_on_close;
  return s;
}

Session::Session(SessionOptions options)
    : options_(std::move(options)), backoff_(options_.backoff), lease_(options_.default_lease) {
  stats_.highest_term = options_.initial_term;
}

const char* Session::KindName(Kind k) {
  switch (k) {
    case Kind::kRegister:
      return "register_job";
    case Kind::kHeartbeat:
      return "heartbeat";
    case Kind::kReport:
      return "profile_report";
    case Kind::kEndJob:
      return "end_job";
  }
  return "request";
}

core::Duration Session::HeartbeatInterval() const {
  return std::max(core::Duration::Millis(1), core::Duration::Nanos(lease_.nanos() / 3));
}

void Session::SetError(std::string e) {
  stats_.last_error = std::move(e);
  Changed();
}

void Session::SetDown() {
  if (registered_ || stats_.registered) Changed();
  registered_ = false;
  stats_.registered = false;
}

void Session::Finish() {
  done_ = true;
  in_flight_.reset();
  SetDown();
}

void Session::Start(core::Duration now) {
  if (started_) return;
  started_ = true;
  next_register_at_ = now;
  Pump(now);
}

void Session::Tick(core::Duration now) {
  if (in_flight_ && now >= in_flight_->deadline) {
    InFlight f = std::move(*in_flight_);
    in_flight_.reset();
    RequestFailed(now, f,
                  std::string(KindName(f.kind)) + ": no reply within " +
                      std::to_string(options_.call_timeout.nanos() / 1'000'000) + " ms");
  }
  Pump(now);
}

void Session::RequestFailed(core::Duration now, const InFlight& f, const std::string& why) {
  SetError(why);
  if (f.kind == Kind::kEndJob) {
    Finish();
    return;
  }
  // The daemon is away (or too slow): down until a re-registration succeeds. A pending profile
  // stays pending; the applied assignment stays in force.
  if (f.kind == Kind::kRegister) ++stats_.register_failures;
  SetDown();
  next_register_at_ = now + backoff_.Next();
}

Session::InFlight& Session::Send(core::Duration now, Kind kind, v1::Envelope msg) {
  InFlight f;
  f.id = ++last_request_id_;
  f.kind = kind;
  f.sent_at = now;
  f.deadline = now + options_.call_timeout;
  msg.set_request_id(f.id);
  outgoing_.push_back(std::move(msg));
  in_flight_ = std::move(f);
  return *in_flight_;
}

void Session::SendRegister(core::Duration now) {
  v1::Envelope req = protocol::NewEnvelope();
  *req.mutable_register_job() = options_.registration;
  Send(now, Kind::kRegister, std::move(req));
}

void Session::SendHeartbeat(core::Duration now) {
  v1::Envelope req = protocol::NewEnvelope();
  auto* hb = req.mutable_heartbeat();
  hb->set_job_id(options_.job_id);
  hb->set_seq(++heartbeat_seq_);
  hb->set_applied_epoch(current_ ? applied_epoch_ : 0);
  hb->set_applied_state_id(current_ ? applied_state_id_ : 0);
  if (options_.host_part) *hb->mutable_host_part() = *options_.host_part;
  // The schedule counts from the send, so a slow reply does not stretch it.
  next_heartbeat_at_ = now + HeartbeatInterval();
  Send(now, Kind::kHeartbeat, std::move(req));
}

void Session::SendReport(core::Duration now) {
  v1::Envelope req = protocol::NewEnvelope();
  v1::ProfileReport* r = req.mutable_profile_report();
  *r = MakeProfileReport(options_.job_id, *pending_);
  r->MergeFrom(report_extra_);
  if (options_.host_part) *r->mutable_host_part() = *options_.host_part;
  InFlight& f = Send(now, Kind::kReport, std::move(req));
  f.profile_generation = pending_generation_;
  f.profile = *pending_;
}

void Session::SendEndJob(core::Duration now) {
  v1::Envelope req = protocol::NewEnvelope();
  req.mutable_end_job()->set_job_id(options_.job_id);
  req.mutable_end_job()->set_reason("client closed");
  if (options_.host_part) *req.mutable_end_job()->mutable_host_part() = *options_.host_part;
  Send(now, Kind::kEndJob, std::move(req));
}

void Session::Pump(core::Duration now) {
  if (!started_ || closing_ || done_ || in_flight_) return;
  if (!registered_) {
    if (now >= next_register_at_) SendRegister(now);
    return;
  }
  if (pending_) {
    SendReport(now);
  } else if (now >= next_heartbeat_at_) {
    SendHeartbeat(now);
  }
}

core::Duration Session::NextWakeup() const {
  if (!started_ || done_) return core::Duration::Infinite();
  if (in_flight_) return in_flight_->deadline;
  if (closing_) return core::Duration::Infinite();
  if (!registered_) return next_register_at_;
  return next_heartbeat_at_;
}

std::vector<v1::Envelope> Session::TakeOutgoing() {
  std::vector<v1::Envelope> out;
  out.swap(outgoing_);
  return out;
}

void Session::SetProfile(core::Duration now, Profile profile, v1::ProfileReport extra) {
  pending_ = std::move(profile);
  report_extra_ = std::move(extra);
  ++pending_generation_;
  Pump(now);
}

void Session::Close(core::Duration now) {
  if (closing_ || done_) return;
  closing_ = true;
  // A registration in flight may have been accepted already: end the job too (EndJob of an
  // unknown job is harmless). The request in flight is abandoned (its reply will be late).
  const bool maybe_registered = registered_ || (in_flight_ && in_flight_->kind == Kind::kRegister);
  in_flight_.reset();
  pending_ack_.reset();
  if (options_.end_job_on_close && started_ && maybe_registered) {
    SendEndJob(now);
  } else {
    Finish();
  }
}

void Session::OnSendFailed(core::Duration now, const v1::Envelope& msg, const core::Status& error) {
  if (in_flight_ && msg.request_id() != 0 && msg.request_id() == in_flight_->id) {
    InFlight f = std::move(*in_flight_);
    in_flight_.reset();
    RequestFailed(now, f, std::string(KindName(f.kind)) + ": " + error.ToString());
    return;
  }
  SetError((msg.has_ack() ? "ack: " : "send: ") + error.ToString());
}

void Session::OnTransportError(const core::Status& error) {
  SetError("transport: " + error.ToString());
}

void Session::OnConnectionChange(core::Duration now, bool lost, bool connected) {
  if (!started_ || done_) return;
  if (lost) {
    lost_connection_ = true;
    if (in_flight_) {
      const InFlight f = std::move(*in_flight_);
      in_flight_.reset();
      if (f.kind == Kind::kEndJob) {
        Finish();  // Closing: nobody is left to end the job with (its lease will expire).
        return;
      }
      // No reply can come. A registration is tried again (at once on the next connection);
      // a heartbeat or report leaves the session registered (cruxd keeps the lease), and the
      // report stays pending.
      SetError(std::string(KindName(f.kind)) + ": connection to cruxd lost");
      if (f.kind == Kind::kRegister) next_register_at_ = now + backoff_.Next();
    }
  }
  if (!connected) return;
  if (lost_connection_) {
    ++stats_.reconnects;
    Changed();
  }
  lost_connection_ = false;
  backoff_.Reset();
  if (closing_ || in_flight_) return;  // What is in flight goes out on the new connection.
  if (registered_) {
    next_heartbeat_at_ = now;
  } else {
    next_register_at_ = now;
  }
  Pump(now);
}

std::optional<Assignment> Session::OnMessage(core::Duration now, const v1::Envelope& msg,
                                             int64_t unix_now_ns) {
  if (msg.request_id() == 0) {
    if (msg.has_assignment()) return HandleAssignment(msg.assignment(), unix_now_ns);
    if (msg.has_error()) {
      SetError("daemon: " + protocol::StatusFromError(msg.error()).ToString());
    }
    return std::nullopt;  // Other pushes are not for jobs.
  }
  if (!in_flight_ || msg.request_id() != in_flight_->id) {
    ++late_replies_;
    return std::nullopt;
  }
  InFlight f = std::move(*in_flight_);
  in_flight_.reset();
  HandleReply(now, f, msg);
  Pump(now);
  return std::nullopt;
}

void Session::HandleReply(core::Duration now, const InFlight& f, const v1::Envelope& msg) {
  switch (f.kind) {
    case Kind::kRegister:
      HandleRegisterReply(now, msg);
      return;
    case Kind::kEndJob:
      if (msg.has_error()) {
        SetError("end_job: " + protocol::StatusFromError(msg.error()).ToString());
      }
      Finish();
      return;
    case Kind::kHeartbeat:
    case Kind::kReport:
      break;
  }
  if (msg.has_error()) {
    const bool reregister = JobRequestRefused(now, f.kind, msg.error());
    if (f.kind == Kind::kReport && !reregister && pending_generation_ == f.profile_generation) {
      pending_.reset();  // Refused as it is: resending it would be refused again.
    }
    return;
  }
  if (f.kind == Kind::kHeartbeat) {
    ++stats_.heartbeats_sent;
  } else {
    ++stats_.reports_sent;
    last_reported_ = f.profile;
    if (pending_generation_ == f.profile_generation) pending_.reset();  // Not replaced since.
  }
  Accepted(f);
}

void Session::Accepted(const InFlight& f) {
  // Any accepted request renews the lease; the session works: the backoff starts over.
  next_heartbeat_at_ = std::max(next_heartbeat_at_, f.sent_at + HeartbeatInterval());
  accepted_since_register_ = true;
  backoff_.Reset();
  Changed();
}

void Session::HandleRegisterReply(core::Duration now, const v1::Envelope& msg) {
  if (msg.has_register_job_reply()) {
    const auto& r = msg.register_job_reply();
    registered_ = true;
    accepted_since_register_ = false;
    lease_ = r.lease_ms() > 0 ? core::Duration::Millis(static_cast<int64_t>(r.lease_ms()))
                              : options_.default_lease;
    next_heartbeat_at_ = now + HeartbeatInterval();
    ++stats_.registrations;
    stats_.registered = true;
    stats_.lease_ms = static_cast<uint64_t>(lease_.nanos() / 1'000'000);
    // The daemon does not know the job (its state was reset, or the lease expired): it lost the
    // profile too, and the profiler reports again only on a significant change, so resend the
    // last acknowledged one.
    if (!r.already_known() && last_reported_ && !pending_) {
      pending_ = *last_reported_;
      ++pending_generation_;
    }
    Changed();
    return;
  }
  ++stats_.register_failures;
  if (msg.has_error()) {
    // A refusal (a job quota, an unknown host, a conflicting placement, ...): retried with
    // backoff; the daemon's reason is in last_error.
    if (msg.error().code() == v1::ERROR_CODE_RESOURCE_EXHAUSTED) ++stats_.quota_refusals;
    SetError("register_job: " + protocol::StatusFromError(msg.error()).ToString());
  } else {
    SetError("register_job: unexpected reply " + std::string(protocol::BodyName(msg)));
  }
  next_register_at_ = now + backoff_.Next();
}

bool Session::JobRequestRefused(core::Duration now, Kind kind, const v1::Error& e) {
  SetError(std::string(KindName(kind)) + ": " + protocol::StatusFromError(e).ToString());
  if (e.code() != v1::ERROR_CODE_UNKNOWN_JOB && e.code() != v1::ERROR_CODE_PERMISSION_DENIED) {
    return false;
  }
  // UNKNOWN_JOB: the daemon lost the job (state reset, lease expired). PERMISSION_DENIED: cruxd
  // bound the job to another connection (the one that registered it last). Either way register
  // again, idempotently, from this connection.
  if (e.code() == v1::ERROR_CODE_PERMISSION_DENIED) ++stats_.rebinds;
  SetDown();
  next_register_at_ = accepted_since_register_ ? now : now + backoff_.Next();
  return true;
}

std::optional<Assignment> Session::HandleAssignment(const v1::Assignment& a, int64_t unix_now_ns) {
  v1::Envelope ack = protocol::NewEnvelope(0);
  auto* body = ack.mutable_ack();
  body->set_job_id(options_.job_id);
  body->set_epoch(a.epoch());
  body->set_ok(true);
  if (a.job_id() != options_.job_id) {
    body->set_ok(false);
    body->set_error("assignment.job_id: \"" + a.job_id() + "\" is not this client's job");
    outgoing_.push_back(std::move(ack));
    return std::nullopt;
  }
  // High availability: a push from a lower leader term than one already seen comes from a
  // deposed cruxd leader; refuse it (nacked, counted, in last_error), whatever its epoch.
  if (a.term() != 0 && a.term() < stats_.highest_term) {
    ++stats_.stale_term_refused;
    const std::string why = "refused the assignment of epoch " + std::to_string(a.epoch()) +
                            " from cruxd term " + std::to_string(a.term()) + ": term " +
                            std::to_string(stats_.highest_term) +
                            " has been seen (a deposed leader)";
    SetError(why);
    body->set_ok(false);
    body->set_error(why);
    outgoing_.push_back(std::move(ack));
    return std::nullopt;
  }
  if (a.term() > stats_.highest_term) {
    if (options_.record_term) {
      if (core::Status s = options_.record_term(a.term()); !s.ok()) {
        const std::string why = "refused the assignment of epoch " + std::to_string(a.epoch()) +
                                ": cannot record cruxd leader term " + std::to_string(a.term()) +
                                ": " + s.ToString();
        SetError(why);
        body->set_ok(false);
        body->set_error(why);
        outgoing_.push_back(std::move(ack));
        return std::nullopt;
      }
    }
    stats_.highest_term = a.term();
    Changed();
  }
  const bool reset = current_ && a.state_id() != applied_state_id_;
  if (current_ && !reset && a.epoch() <= applied_epoch_) {
    ++stats_.assignments_stale;
    Changed();
    outgoing_.push_back(std::move(ack));
    return std::nullopt;
  }
  // A new epoch sequence after an operator reset cruxd's state: the daemon's current decision
  // wins even though its epoch is lower.
  if (reset) ++stats_.state_resets;
  applied_epoch_ = a.epoch();
  applied_state_id_ = a.state_id();
  current_ = FromWire(a, unix_now_ns);
  ++stats_.assignments_applied;
  Changed();
  pending_ack_ = std::move(ack);
  return current_;
}

void Session::FinishApply(const core::Status& enforcement) {
  if (!pending_ack_) return;
  v1::Envelope ack = std::move(*pending_ack_);
  pending_ack_.reset();
  if (!enforcement.ok()) {
    ack.mutable_ack()->set_ok(false);
    ack.mutable_ack()->set_error(enforcement.ToString().substr(0, 4000));
    SetError("enforcement: " + enforcement.ToString());
  }
  outgoing_.push_back(std::move(ack));
}

}  // namespace crux::client::internal
