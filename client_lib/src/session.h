// Session: the client's protocol logic with cruxd, sans I/O. It never reads a clock, never
// sleeps and never touches a socket. Inputs: the current (monotonic) time, the daemon's replies
// and pushes, transport failures, new profiles, Close. Outputs: the envelopes to send
// (TakeOutgoing), the assignments to apply (returned by OnMessage) and the time by which Tick()
// must run next (NextWakeup). The background thread of Client (client.cc) drives it with the
// steady clock and one DealerClient; the unit tests drive it with scripted time and replies.
//
// Protocol (docs/client.md):
//  * Registration: RegisterJob at Start(); one request in flight at a time; a request without a
//    reply within `call_timeout` fails. A failed or refused registration (any Error, e.g.
//    RESOURCE_EXHAUSTED from a job quota, UNKNOWN_HOST) is retried after the next delay of the
//    ExponentialBackoff (core/backoff.h); the error goes to stats().last_error.
//  * Keep-alive: a Heartbeat (applied epoch and state id) every granted lease / 3 (default lease
//    15 s when the reply grants 0); an accepted ProfileReport renews the lease too.
//  * Failure: a heartbeat or report without reply marks the session down (registered = false)
//    and re-registers after the next backoff delay. The applied assignment stays (fail-static).
//    The backoff restarts from its initial delay once a heartbeat or report is accepted (the
//    session is proven to work), not on a bare registration reply.
//  * UNKNOWN_JOB (the daemon lost the job) and PERMISSION_DENIED (cruxd bound the job to another
//    connection) on a heartbeat or report: re-register (idempotent) from this connection, then
//    resume. At once if a request was accepted since the last registration, else after the next
//    backoff delay (so a daemon that keeps refusing does not get a request storm).
//  * Following cruxd (HA leader changes, restarts; issue #31 item 6): the driver passes on the
//    transport's connection changes (protocol::DealerClient::TakeConnectionChange). Lost: the
//    request in flight can get no reply and is abandoned at once (a pending profile stays
//    pending; a registration in flight is sent again; the session stays registered: cruxd keeps
//    the job's lease). Connected (a new leader bound its endpoint, cruxd restarted): the backoff
//    restarts from its initial delay and the session speaks at once, not at its next heartbeat:
//    a heartbeat (or the pending report) when registered - cruxd binds the job to the new
//    connection, or answers UNKNOWN_JOB / PERMISSION_DENIED and the session re-registers - and
//    a registration when not (counted in stats().reconnects after a lost connection).
//  * Profiles: SetProfile() makes a profile pending; it is sent when registered and idle and
//    stays pending until acknowledged: across timeouts, reconnects and re-registrations. Another
//    refusal (e.g. INVALID_ARGUMENT) drops it. A registration the daemon answers with
//    already_known = false (it lost the job: state reset, lease expired) makes the last
//    acknowledged profile pending again, since the daemon lost it too.
//  * Assignments (pushes, request id 0): applied when none is applied yet, or when the epoch is
//    greater than the applied one, or when the state_id differs from the applied one's (cruxd's
//    state was reset, the epochs restart; counted in stats().state_resets). Every push is acked:
//    stale ones with ok = true (nothing to do), other jobs' ones with ok = false.
//  * Terms (high availability): a push whose term is below the highest term seen comes from a
//    deposed cruxd leader and is refused (Ack ok = false, stats().stale_term_refused); terms
//    never make a push newer by themselves (the epoch carries the term in its high bits).
//  * Close: EndJob when end_job_on_close and the job is (or may be) registered, abandoning any
//    request in flight; Done() once EndJob is answered or timed out.
//
// Thread-safety: none; one owner thread. Times passed in must not decrease.
#ifndef CRUX_CLIENT_SRC_SESSION_H_
#define CRUX_CLIENT_SRC_SESSION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "crux/client/client.h"
#include "crux/core/base/backoff.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/v1/envelope.pb.h"

namespace crux::client::internal {

struct SessionOptions {
  std::string job_id;
  v1::RegisterJob registration;  // Sent by every (re-)registration.
  core::Duration call_timeout = core::Duration::Millis(2000);
  core::BackoffOptions backoff;                                  // Re-registration schedule.
  core::Duration default_lease = core::Duration::Millis(15000);  // When the reply grants 0.
  bool end_job_on_close = true;
  // crux-hostd: the session speaks for one host's part of the job; added to every Heartbeat,
  // ProfileReport and EndJob (the registration carries it in `registration`).
  std::optional<v1::HostPart> host_part;
  // High availability (crux-hostd, issue #31): the highest leader term known before this session
  // (a term file's, or another job's session), and a hook that records a higher term durably
  // before the assignment carrying it is accepted. When the hook fails the assignment is refused
  // (nacked with the error, never applied) and the term is not raised.
  uint64_t initial_term = 0;
  std::function<core::Status(uint64_t term)> record_term;
};

// The session options of a client: registration from the options, backoff from
// reconnect_min_ms .. reconnect_max_ms doubling with 20 % jitter seeded by `seed`.
SessionOptions SessionOptionsFor(const ClientOptions& o, uint64_t seed);

class Session {
 public:
  explicit Session(SessionOptions options);

  // --- Inputs. `now` is monotonic time from any fixed origin.

  // The first registration is due at `now`.
  void Start(core::Duration now);
  // Fails the request in flight when its deadline has passed; sends what is due.
  void Tick(core::Duration now);
  // A message from the daemon. Replies are matched to the request in flight by request id
  // (others are late and ignored). For an Assignment push that is to be applied, it is already
  // the current one when this returns it (with received_unix_ns = unix_now_ns): the caller runs
  // its enforcer and then MUST call FinishApply before any other input (that queues the Ack).
  std::optional<Assignment> OnMessage(core::Duration now, const v1::Envelope& msg,
                                      int64_t unix_now_ns);
  // The enforcement outcome of the assignment OnMessage returned: Ack ok, or ok = false with the
  // error (also in last_error).
  void FinishApply(const core::Status& enforcement);
  // The transport refused to send `msg` (an envelope from TakeOutgoing): a request fails like a
  // timeout; a failed Ack is only recorded in last_error.
  void OnSendFailed(core::Duration now, const v1::Envelope& msg, const core::Status& error);
  // A transport error that is not tied to one message (e.g. receiving failed): last_error.
  void OnTransportError(const core::Status& error);
  // The transport's connection changed (see "Following cruxd" above): `lost` (a connection
  // dropped) is handled before `connected` (one is up now) when both are set.
  void OnConnectionChange(core::Duration now, bool lost, bool connected);
  // A profile due for the daemon; replaces a pending one that was not acknowledged yet.
  // `extra` (crux-hostd: the per-communicator traffic) is merged into this and every later
  // report until the next SetProfile.
  void SetProfile(core::Duration now, Profile profile, v1::ProfileReport extra = {});
  // Starts closing (see the file comment). Idempotent.
  void Close(core::Duration now);

  // --- Outputs.

  // Envelopes to send, in order (request ids set; 0 for Acks). Empties the queue.
  std::vector<v1::Envelope> TakeOutgoing();
  // Tick() must run at this time at the latest (Infinite when nothing is scheduled).
  core::Duration NextWakeup() const;
  // Closed and nothing more to send.
  bool Done() const { return done_; }

  // --- State.

  // Counters and state (events_dropped and iterations are the driver's and stay 0 here).
  const ClientStats& stats() const { return stats_; }
  const std::optional<Assignment>& current() const { return current_; }
  const std::optional<Profile>& last_reported() const { return last_reported_; }
  const std::optional<Profile>& pending_profile() const { return pending_; }
  bool registered() const { return registered_; }
  core::Duration lease() const { return lease_; }
  // Increases whenever stats(), current() or last_reported() change (for publishing).
  uint64_t version() const { return version_; }
  // Replies that matched no request in flight (late, after a timeout or Close).
  uint64_t late_replies() const { return late_replies_; }

 private:
  enum class Kind { kRegister, kHeartbeat, kReport, kEndJob };
  struct InFlight {
    uint64_t id = 0;
    Kind kind = Kind::kRegister;
    core::Duration sent_at;
    core::Duration deadline;
    uint64_t profile_generation = 0;  // kReport: which pending profile was sent.
    Profile profile;                  // kReport.
  };

  static const char* KindName(Kind k);
  void Pump(core::Duration now);
  InFlight& Send(core::Duration now, Kind kind, v1::Envelope msg);
  void SendRegister(core::Duration now);
  void SendHeartbeat(core::Duration now);
  void SendReport(core::Duration now);
  void SendEndJob(core::Duration now);
  void RequestFailed(core::Duration now, const InFlight& f, const std::string& why);
  void HandleReply(core::Duration now, const InFlight& f, const v1::Envelope& msg);
  void HandleRegisterReply(core::Duration now, const v1::Envelope& msg);
  // Error reply to a heartbeat or report. Returns true when the job must re-register (the
  // report, if any, stays pending).
  bool JobRequestRefused(core::Duration now, Kind kind, const v1::Error& e);
  void Accepted(const InFlight& f);
  void SetDown();
  void SetError(std::string e);
  void Finish();
  std::optional<Assignment> HandleAssignment(const v1::Assignment& a, int64_t unix_now_ns);
  core::Duration HeartbeatInterval() const;
  void Changed() { ++version_; }

  const SessionOptions options_;
  core::ExponentialBackoff backoff_;

  bool started_ = false;
  bool closing_ = false;
  bool done_ = false;
  bool registered_ = false;
  bool accepted_since_register_ = false;
  bool lost_connection_ = false;  // A connection dropped and none is known to be up since.
  core::Duration lease_;
  core::Duration next_register_at_;
  core::Duration next_heartbeat_at_;
  std::optional<InFlight> in_flight_;
  uint64_t last_request_id_ = 0;
  uint64_t heartbeat_seq_ = 0;

  std::optional<Profile> pending_;
  v1::ProfileReport report_extra_;
  uint64_t pending_generation_ = 0;
  std::optional<Profile> last_reported_;

  std::optional<Assignment> current_;
  uint64_t applied_epoch_ = 0;
  uint64_t applied_state_id_ = 0;
  std::optional<v1::Envelope> pending_ack_;  // Between OnMessage and FinishApply.

  std::vector<v1::Envelope> outgoing_;
  ClientStats stats_;
  uint64_t version_ = 0;
  uint64_t late_replies_ = 0;
};

}  // namespace crux::client::internal

#endif  // CRUX_CLIENT_SRC_SESSION_H_
