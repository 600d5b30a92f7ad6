// The client's sans-I/O session (client_lib/src/session.h) driven with scripted time and daemon
// replies: no sockets, no threads, no clock, no sleeps. Each test plays one protocol scenario
// and checks exactly what the session sends and when it wants to run next.
#include "session.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crux/protocol/codec.h"
#include "wire.h"

namespace crux::client::internal {
namespace {

using core::Duration;

Duration Ms(int64_t ms) { return Duration::Millis(ms); }

constexpr uint64_t kStateA = 0xA11CE;
constexpr uint64_t kStateB = 0xB0B;

ClientOptions JobOptions() {
  ClientOptions o;
  o.endpoint = "tcp://127.0.0.1:1";
  o.job_id = "job-a";
  o.placement = {{"host0", 2, {}}, {"host1", 2, {}}};
  o.call_timeout_ms = 1000;
  o.reconnect_min_ms = 100;
  o.reconnect_max_ms = 800;
  return o;
}

SessionOptions Options() {
  SessionOptions s = SessionOptionsFor(JobOptions(), 7);
  s.backoff.jitter = 0;  // Exact delays: 100, 200, 400, 800, 800, ... ms.
  return s;
}

v1::Envelope RegisterReply(uint64_t request_id, uint64_t lease_ms) {
  v1::Envelope e = protocol::NewEnvelope(request_id);
  e.mutable_register_job_reply()->set_job_id("job-a");
  e.mutable_register_job_reply()->set_lease_ms(lease_ms);
  return e;
}

v1::Envelope Ack(uint64_t request_id) { return protocol::MakeAck(request_id, "job-a"); }

v1::Envelope Refusal(uint64_t request_id, v1::ErrorCode code, const std::string& message) {
  return protocol::MakeError(request_id, code, message);
}

v1::Envelope Push(uint64_t epoch, uint64_t state_id, uint32_t dscp = 26,
                  const std::string& job = "job-a") {
  v1::Envelope e = protocol::NewEnvelope(0);
  auto* a = e.mutable_assignment();
  a->set_job_id(job);
  a->set_epoch(epoch);
  a->set_state_id(state_id);
  a->set_level(1);
  a->set_dscp(dscp);
  a->set_traffic_class(dscp << 2);
  a->set_state(v1::JOB_STATE_SCHEDULED);
  return e;
}

Profile SomeProfile(int64_t period_ms) {
  Profile p;
  p.iteration_period_ns = period_ms * 1'000'000;
  p.compute_time_ns = period_ms * 800'000;
  p.bytes_per_iteration = 4096;
  p.peers = {{"host0/nic0", "host1/nic0", 4096}};
  p.samples = 3;
  p.converged = true;
  return p;
}

// A session plus the scripted clock; Sent() returns what the session queued since last time.
class Harness {
 public:
  explicit Harness(SessionOptions o = Options()) : s(std::move(o)) {}

  std::vector<v1::Envelope> Sent() { return s.TakeOutgoing(); }
  // Exactly one envelope was queued; returns it.
  v1::Envelope One() {
    auto out = Sent();
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? v1::Envelope() : out.front();
  }
  void At(int64_t ms) { now = Ms(ms); }
  void Tick(int64_t ms) {
    At(ms);
    s.Tick(now);
  }
  std::optional<Assignment> Receive(const v1::Envelope& msg) {
    return s.OnMessage(now, msg, /*unix_now_ns=*/1'700'000'000'000'000'000);
  }
  // Starts at t = 0 and completes the registration with `lease_ms`.
  void Register(uint64_t lease_ms = 300) {
    s.Start(now);
    v1::Envelope reg = One();
    EXPECT_TRUE(reg.has_register_job());
    Receive(RegisterReply(reg.request_id(), lease_ms));
    EXPECT_TRUE(s.registered());
  }
  // Applies a push with an OK enforcement; returns the Ack sent.
  v1::Ack Apply(const v1::Envelope& push) {
    auto a = Receive(push);
    EXPECT_TRUE(a.has_value());
    s.FinishApply(core::Status::Ok());
    v1::Envelope ack = One();
    EXPECT_TRUE(ack.has_ack());
    EXPECT_EQ(ack.request_id(), 0u);
    return ack.ack();
  }

  Session s;
  Duration now;
};

TEST(SessionTest, RegistersAtStartThenHeartbeatsEveryThirdOfTheGrantedLease) {
  Harness h;
  EXPECT_EQ(h.s.NextWakeup(), Duration::Infinite());  // Nothing before Start.
  h.s.Start(h.now);
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  EXPECT_EQ(reg.register_job().job_id(), "job-a");
  ASSERT_EQ(reg.register_job().placement_size(), 2);
  EXPECT_EQ(reg.register_job().placement(1).host(), "host1");
  EXPECT_NE(reg.request_id(), 0u);
  EXPECT_EQ(h.s.NextWakeup(), Ms(1000));  // The call timeout of the registration.
  h.Tick(999);
  EXPECT_TRUE(h.Sent().empty());  // One request in flight at a time; not timed out yet.

  h.At(10);
  h.Receive(RegisterReply(reg.request_id(), 300));
  EXPECT_TRUE(h.s.registered());
  EXPECT_TRUE(h.s.stats().registered);
  EXPECT_EQ(h.s.stats().registrations, 1u);
  EXPECT_EQ(h.s.stats().lease_ms, 300u);
  EXPECT_EQ(h.s.NextWakeup(), Ms(110));  // Lease / 3 after the reply.
  h.Tick(109);
  EXPECT_TRUE(h.Sent().empty());
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    const int64_t due = 10 + 100 * static_cast<int64_t>(seq);
    EXPECT_EQ(h.s.NextWakeup(), Ms(due));
    h.Tick(due);
    v1::Envelope hb = h.One();
    ASSERT_TRUE(hb.has_heartbeat());
    EXPECT_EQ(hb.heartbeat().job_id(), "job-a");
    EXPECT_EQ(hb.heartbeat().seq(), seq);
    EXPECT_EQ(hb.heartbeat().applied_epoch(), 0u);  // Nothing applied yet.
    EXPECT_EQ(hb.heartbeat().applied_state_id(), 0u);
    EXPECT_EQ(h.s.NextWakeup(), Ms(due + 1000));  // Its reply deadline.
    h.At(due + 40);                               // A slow reply does not shift the schedule.
    h.Receive(Ack(hb.request_id()));
    EXPECT_EQ(h.s.stats().heartbeats_sent, seq);
  }
}

TEST(SessionTest, LeaseZeroMeansTheDefaultLease) {
  Harness h;
  h.Register(/*lease_ms=*/0);
  EXPECT_EQ(h.s.stats().lease_ms, 15000u);
  EXPECT_EQ(h.s.NextWakeup(), Ms(5000));
}

TEST(SessionTest, AnAcceptedReportRenewsTheLease) {
  Harness h;
  h.Register(300);  // Heartbeat due at 100 ms.
  h.At(50);
  h.s.SetProfile(h.now, SomeProfile(40));
  v1::Envelope rep = h.One();  // Sent at once: registered and idle.
  ASSERT_TRUE(rep.has_profile_report());
  EXPECT_EQ(rep.profile_report().iteration_period_ns(), 40'000'000u);
  ASSERT_EQ(rep.profile_report().peers_size(), 1);
  EXPECT_EQ(rep.profile_report().peers(0).remote_nic(), "host1/nic0");
  h.At(60);
  h.Receive(Ack(rep.request_id()));
  EXPECT_EQ(h.s.stats().reports_sent, 1u);
  ASSERT_TRUE(h.s.last_reported().has_value());
  EXPECT_EQ(h.s.last_reported()->iteration_period_ns, 40'000'000);
  EXPECT_FALSE(h.s.pending_profile().has_value());
  EXPECT_EQ(h.s.NextWakeup(), Ms(150));  // 50 ms (report sent) + lease / 3.
  h.Tick(100);
  EXPECT_TRUE(h.Sent().empty());
}

TEST(SessionTest, FailStaticKeepsTheAssignmentAndReRegistersWithExponentialBackoff) {
  Harness h;
  h.Register(300);
  v1::Ack ack = h.Apply(Push(3, kStateA));
  EXPECT_TRUE(ack.ok());
  EXPECT_EQ(ack.epoch(), 3u);

  h.Tick(100);
  v1::Envelope hb = h.One();
  ASSERT_TRUE(hb.has_heartbeat());
  EXPECT_EQ(hb.heartbeat().applied_epoch(), 3u);
  EXPECT_EQ(hb.heartbeat().applied_state_id(), kStateA);
  // The daemon is gone: no reply.
  h.Tick(1099);
  EXPECT_TRUE(h.s.registered());
  h.Tick(1100);
  EXPECT_FALSE(h.s.registered());
  EXPECT_FALSE(h.s.stats().registered);
  EXPECT_EQ(h.s.stats().last_error, "heartbeat: no reply within 1000 ms");
  // Fail-static: the last assignment stays in force.
  ASSERT_TRUE(h.s.current().has_value());
  EXPECT_EQ(h.s.current()->epoch, 3u);
  EXPECT_EQ(h.s.current()->dscp, 26u);

  // Re-registration attempts after 100, 200, 400, 800, 800 ms (each waits 1 s for its reply).
  int64_t t = 1100;
  for (int64_t delay : {100, 200, 400, 800, 800}) {
    EXPECT_EQ(h.s.NextWakeup(), Ms(t + delay));
    h.Tick(t + delay - 1);
    EXPECT_TRUE(h.Sent().empty());
    h.Tick(t + delay);
    v1::Envelope reg = h.One();
    ASSERT_TRUE(reg.has_register_job());
    t += delay + 1000;
    h.Tick(t);  // Timed out.
  }
  EXPECT_EQ(h.s.stats().register_failures, 5u);
  EXPECT_EQ(h.s.stats().last_error, "register_job: no reply within 1000 ms");
  EXPECT_EQ(h.s.current()->epoch, 3u);

  // The daemon is back; its late answer to the old heartbeat changes nothing.
  h.Receive(Ack(hb.request_id()));
  EXPECT_EQ(h.s.late_replies(), 1u);
  EXPECT_EQ(h.s.stats().heartbeats_sent, 0u);
  h.Tick(t + 800);
  v1::Envelope reg = h.One();
  h.Receive(RegisterReply(reg.request_id(), 300));
  EXPECT_TRUE(h.s.registered());
  EXPECT_EQ(h.s.stats().registrations, 2u);
  // The heartbeat after re-registration carries the assignment kept during the outage.
  h.Tick(t + 900);
  hb = h.One();
  EXPECT_EQ(hb.heartbeat().applied_epoch(), 3u);
  h.Receive(Ack(hb.request_id()));
  // Accepted: the backoff starts over at 100 ms for the next outage.
  t += 900;
  h.Tick(t + 100);
  hb = h.One();
  h.Tick(t + 1100);
  EXPECT_FALSE(h.s.registered());
  EXPECT_EQ(h.s.NextWakeup(), Ms(t + 1200));
}

TEST(SessionTest, UnknownJobReRegistersAtOnceThenBacksOffIfItPersists) {
  Harness h;
  h.Register(300);
  h.Tick(100);
  h.Receive(Ack(h.One().request_id()));  // The session worked.
  h.Tick(200);
  v1::Envelope hb = h.One();
  h.Receive(Refusal(hb.request_id(), v1::ERROR_CODE_UNKNOWN_JOB, "heartbeat.job_id: unknown job"));
  EXPECT_FALSE(h.s.registered());
  EXPECT_NE(h.s.stats().last_error.find("UNKNOWN_JOB"), std::string::npos);
  // At once: the RegisterJob is already queued (same input).
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  h.Receive(RegisterReply(reg.request_id(), 300));

  // The daemon keeps losing the job: without an accepted request in between, each further
  // re-registration waits for the backoff (100, 200 ms): no request storm.
  int64_t t = 200;
  for (int64_t delay : {100, 200}) {
    t += 100;
    h.Tick(t);
    hb = h.One();
    ASSERT_TRUE(hb.has_heartbeat());
    h.Receive(Refusal(hb.request_id(), v1::ERROR_CODE_UNKNOWN_JOB, "unknown job"));
    EXPECT_TRUE(h.Sent().empty());
    EXPECT_EQ(h.s.NextWakeup(), Ms(t + delay));
    t += delay;
    h.Tick(t);
    reg = h.One();
    ASSERT_TRUE(reg.has_register_job());
    h.Receive(RegisterReply(reg.request_id(), 300));
  }
  EXPECT_EQ(h.s.stats().registrations, 4u);
  EXPECT_EQ(h.s.stats().register_failures, 0u);
}

TEST(SessionTest, ProfileStaysPendingAcrossTimeoutAndReRegistration) {
  Harness h;
  h.Register(300);
  h.At(20);
  h.s.SetProfile(h.now, SomeProfile(40));
  v1::Envelope rep = h.One();
  ASSERT_TRUE(rep.has_profile_report());
  h.Tick(1020);  // No reply: down.
  EXPECT_FALSE(h.s.registered());
  ASSERT_TRUE(h.s.pending_profile().has_value());
  EXPECT_FALSE(h.s.last_reported().has_value());
  h.Tick(1120);
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  h.Receive(RegisterReply(reg.request_id(), 300));
  // Re-registered: the pending report goes out right away, unchanged.
  v1::Envelope again = h.One();
  ASSERT_TRUE(again.has_profile_report());
  EXPECT_EQ(again.profile_report().SerializeAsString(), rep.profile_report().SerializeAsString());
  EXPECT_NE(again.request_id(), rep.request_id());
  // Refused with UNKNOWN_JOB (the daemon lost the job meanwhile): still pending, re-register.
  h.Receive(Refusal(again.request_id(), v1::ERROR_CODE_UNKNOWN_JOB, "unknown job"));
  ASSERT_TRUE(h.s.pending_profile().has_value());
  EXPECT_FALSE(h.s.registered());
  h.Tick(1320);  // No request accepted since the last registration: after the backoff (200 ms).
  reg = h.One();
  h.Receive(RegisterReply(reg.request_id(), 300));
  again = h.One();
  ASSERT_TRUE(again.has_profile_report());
  // A newer profile arrives while the old one is in flight: the ack of the old one does not
  // drop the new one, which is sent next.
  h.s.SetProfile(h.now, SomeProfile(60));
  EXPECT_TRUE(h.Sent().empty());
  h.Receive(Ack(again.request_id()));
  EXPECT_EQ(h.s.last_reported()->iteration_period_ns, 40'000'000);
  v1::Envelope newer = h.One();
  ASSERT_TRUE(newer.has_profile_report());
  EXPECT_EQ(newer.profile_report().iteration_period_ns(), 60'000'000u);
  h.Receive(Ack(newer.request_id()));
  EXPECT_EQ(h.s.stats().reports_sent, 2u);
  EXPECT_FALSE(h.s.pending_profile().has_value());
}

TEST(SessionTest, AReportRefusedAsInvalidIsDropped) {
  Harness h;
  h.Register(300);
  h.s.SetProfile(h.now, SomeProfile(40));
  v1::Envelope rep = h.One();
  h.Receive(Refusal(rep.request_id(), v1::ERROR_CODE_INVALID_ARGUMENT,
                    "profile.compute_time_ns: must be > 0"));
  EXPECT_FALSE(h.s.pending_profile().has_value());
  EXPECT_TRUE(h.s.registered());
  EXPECT_NE(h.s.stats().last_error.find("profile.compute_time_ns"), std::string::npos);
  EXPECT_TRUE(h.Sent().empty());  // Not resent.
}

TEST(SessionTest, AssignmentsApplyByEpochWithinAStateAndAcrossAStateReset) {
  Harness h;
  h.Register(300);
  EXPECT_EQ(h.Apply(Push(5, kStateA)).epoch(), 5u);
  EXPECT_EQ(h.s.current()->state_id, kStateA);
  EXPECT_EQ(h.s.current()->received_unix_ns, 1'700'000'000'000'000'000);

  // Older or equal epochs of the same state: acked (ok), not applied.
  for (uint64_t epoch : {4u, 5u}) {
    EXPECT_FALSE(h.Receive(Push(epoch, kStateA, 10)).has_value());
    v1::Envelope ack = h.One();
    EXPECT_TRUE(ack.ack().ok());
    EXPECT_EQ(ack.ack().epoch(), epoch);
  }
  EXPECT_EQ(h.s.stats().assignments_stale, 2u);
  EXPECT_EQ(h.s.current()->dscp, 26u);
  h.Apply(Push(6, kStateA, 12));
  EXPECT_EQ(h.s.current()->dscp, 12u);

  // An operator reset cruxd's state: epochs restart at 1 under a new state id. Applied.
  auto reset = h.Receive(Push(1, kStateB, 14));
  ASSERT_TRUE(reset.has_value());
  EXPECT_EQ(reset->epoch, 1u);
  EXPECT_EQ(reset->state_id, kStateB);
  h.s.FinishApply(core::Status::Ok());
  EXPECT_TRUE(h.One().ack().ok());
  EXPECT_EQ(h.s.stats().state_resets, 1u);
  EXPECT_EQ(h.s.current()->dscp, 14u);
  // Epoch order holds again within the new state.
  EXPECT_FALSE(h.Receive(Push(1, kStateB)).has_value());
  h.One();
  h.Apply(Push(2, kStateB, 16));
  EXPECT_EQ(h.s.stats().assignments_applied, 4u);
  EXPECT_EQ(h.s.stats().state_resets, 1u);
  // Heartbeats report the applied pair.
  h.Tick(100);
  v1::Envelope hb = h.One();
  EXPECT_EQ(hb.heartbeat().applied_epoch(), 2u);
  EXPECT_EQ(hb.heartbeat().applied_state_id(), kStateB);
}

TEST(SessionTest, APushFromALowerLeaderTermIsRefusedWhateverItsEpoch) {
  // HA cruxd: term = the leader's etcd election revision; epochs carry it in their high bits.
  auto from_term = [](uint64_t term, uint64_t epoch, uint32_t dscp) {
    v1::Envelope e = Push(epoch, kStateA, dscp);
    e.mutable_assignment()->set_term(term);
    return e;
  };
  Harness h;
  h.Register(300);
  h.Apply(from_term(7, (7ull << 32) + 1, 26));
  EXPECT_EQ(h.s.stats().highest_term, 7u);
  EXPECT_EQ(h.s.current()->term, 7u);
  // A deposed leader (term 5) wakes up and pushes, even with a higher epoch: refused.
  EXPECT_FALSE(h.Receive(from_term(5, (7ull << 32) + 9, 10)).has_value());
  v1::Envelope nack = h.One();
  EXPECT_FALSE(nack.ack().ok());
  EXPECT_NE(nack.ack().error().find("term 5"), std::string::npos) << nack.ack().error();
  EXPECT_EQ(h.s.stats().stale_term_refused, 1u);
  EXPECT_NE(h.s.stats().last_error.find("deposed"), std::string::npos);
  EXPECT_EQ(h.s.current()->dscp, 26u);
  EXPECT_EQ(h.s.current()->term, 7u);
  // The next leader's push (higher term, higher epoch) is applied.
  h.Apply(from_term(9, (9ull << 32) + 1, 12));
  EXPECT_EQ(h.s.current()->dscp, 12u);
  EXPECT_EQ(h.s.stats().highest_term, 9u);
  // Without a term (a single cruxd) nothing changes: epochs decide.
  h.Apply(Push((9ull << 32) + 2, kStateA, 14));
  EXPECT_EQ(h.s.current()->dscp, 14u);
}

TEST(SessionTest, AnotherJobsAssignmentIsRefusedInTheAck) {
  Harness h;
  h.Register(300);
  EXPECT_FALSE(h.Receive(Push(1, kStateA, 26, "job-b")).has_value());
  v1::Envelope ack = h.One();
  EXPECT_FALSE(ack.ack().ok());
  EXPECT_NE(ack.ack().error().find("job-b"), std::string::npos);
  EXPECT_FALSE(h.s.current().has_value());
}

TEST(SessionTest, EnforcementFailureGoesIntoTheAckAndTheAssignmentStaysCurrent) {
  Harness h;
  h.Register(300);
  ASSERT_TRUE(h.Receive(Push(9, kStateA)).has_value());
  h.s.FinishApply(core::FailedPreconditionError("qp 0x11: cannot set traffic class 104"));
  v1::Envelope ack = h.One();
  EXPECT_FALSE(ack.ack().ok());
  EXPECT_EQ(ack.ack().epoch(), 9u);
  EXPECT_NE(ack.ack().error().find("cannot set traffic class 104"), std::string::npos);
  EXPECT_NE(h.s.stats().last_error.find("enforcement: "), std::string::npos);
  EXPECT_EQ(h.s.current()->epoch, 9u);
}

TEST(SessionTest, PermissionDeniedReRegistersFromThisConnectionAndResumes) {
  Harness h;
  h.Register(300);
  h.Tick(100);
  h.Receive(Ack(h.One().request_id()));
  // Another connection registered the job meanwhile; cruxd refuses this one's report.
  h.At(150);
  h.s.SetProfile(h.now, SomeProfile(40));
  v1::Envelope rep = h.One();
  h.Receive(Refusal(rep.request_id(), v1::ERROR_CODE_PERMISSION_DENIED,
                    "profile_report: job \"job-a\" is bound to another connection"));
  EXPECT_EQ(h.s.stats().rebinds, 1u);
  EXPECT_FALSE(h.s.registered());
  EXPECT_NE(h.s.stats().last_error.find("bound to another connection"), std::string::npos);
  ASSERT_TRUE(h.s.pending_profile().has_value());
  // At once (the session had worked): the same idempotent RegisterJob, from this connection.
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  EXPECT_EQ(reg.register_job().job_id(), "job-a");
  v1::Envelope reply = RegisterReply(reg.request_id(), 300);
  reply.mutable_register_job_reply()->set_already_known(true);
  h.Receive(reply);
  EXPECT_TRUE(h.s.registered());
  // Resumed: the refused report is resent and accepted, heartbeats continue.
  v1::Envelope again = h.One();
  ASSERT_TRUE(again.has_profile_report());
  h.Receive(Ack(again.request_id()));
  EXPECT_EQ(h.s.stats().reports_sent, 1u);
  h.Tick(250);
  v1::Envelope hb = h.One();
  ASSERT_TRUE(hb.has_heartbeat());
  // A denied heartbeat is answered the same way.
  h.Receive(Refusal(hb.request_id(), v1::ERROR_CODE_PERMISSION_DENIED,
                    "heartbeat: job \"job-a\" is bound to another connection"));
  EXPECT_EQ(h.s.stats().rebinds, 2u);
  reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  reply = RegisterReply(reg.request_id(), 300);
  reply.mutable_register_job_reply()->set_already_known(true);
  h.Receive(reply);
  EXPECT_TRUE(h.s.registered());
  EXPECT_EQ(h.s.stats().registrations, 3u);
  EXPECT_TRUE(h.Sent().empty());  // The daemon still has the profile: nothing to resend.
}

// Issue #31 item 6: the transport reports a lost connection and a new one (an HA leader change);
// the session abandons what was in flight and speaks at once on the new connection, not at its
// next heartbeat (10 s away here).
TEST(SessionTest, FollowsANewLeaderAtOnceAfterALostConnection) {
  Harness h;
  h.Register(30000);  // Heartbeats every 10 s.
  h.Apply(Push(3, kStateA));
  h.Tick(10000);
  v1::Envelope hb = h.One();
  ASSERT_TRUE(hb.has_heartbeat());
  // The leader dies with the heartbeat in flight: abandoned at once (no reply can come), the
  // session stays registered (cruxd keeps the lease) and waits for a connection.
  h.At(10100);
  h.s.OnConnectionChange(h.now, /*lost=*/true, /*connected=*/false);
  EXPECT_TRUE(h.s.registered());
  EXPECT_TRUE(h.Sent().empty());
  EXPECT_EQ(h.s.NextWakeup(), Ms(20000));
  EXPECT_NE(h.s.stats().last_error.find("connection to cruxd lost"), std::string::npos);
  h.Receive(Ack(hb.request_id()));  // A reply that still arrives is late: ignored.
  EXPECT_EQ(h.s.late_replies(), 1u);
  // The next leader binds its endpoint: a heartbeat at once, with the applied epoch.
  h.At(13000);
  h.s.OnConnectionChange(h.now, /*lost=*/false, /*connected=*/true);
  EXPECT_EQ(h.s.stats().reconnects, 1u);
  v1::Envelope again = h.One();
  ASSERT_TRUE(again.has_heartbeat());
  EXPECT_EQ(again.heartbeat().applied_epoch(), 3u);
  EXPECT_EQ(again.heartbeat().seq(), hb.heartbeat().seq() + 1);
  // A new leader that restored the job binds it to this connection with the heartbeat. One that
  // lost it answers UNKNOWN_JOB: registered after the initial backoff delay (the backoff
  // started over with the new connection).
  h.At(13010);
  h.Receive(Refusal(again.request_id(), v1::ERROR_CODE_UNKNOWN_JOB, "unknown job"));
  EXPECT_EQ(h.s.NextWakeup(), Ms(13110));
  h.Tick(13110);
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  h.Receive(RegisterReply(reg.request_id(), 30000));
  EXPECT_TRUE(h.s.registered());
  // Its push of a higher term is applied.
  v1::Envelope push = Push((uint64_t{9} << 32) + 1, kStateA);
  push.mutable_assignment()->set_term(9);
  EXPECT_TRUE(h.Apply(push).ok());
  EXPECT_EQ(h.s.stats().highest_term, 9u);
}

TEST(SessionTest, ARegistrationLostWithTheConnectionIsSentAgainOnTheNextOne) {
  Harness h;
  h.s.Start(h.now);
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  // The first connection comes up with the registration already queued: nothing more to send.
  h.At(5);
  h.s.OnConnectionChange(h.now, /*lost=*/false, /*connected=*/true);
  EXPECT_TRUE(h.Sent().empty());
  EXPECT_EQ(h.s.stats().reconnects, 0u) << "the first connection is no reconnect";
  // It drops before the reply: retried after the backoff unless a connection comes first.
  h.At(10);
  h.s.OnConnectionChange(h.now, /*lost=*/true, /*connected=*/false);
  EXPECT_EQ(h.s.NextWakeup(), Ms(110));
  h.At(50);
  h.s.OnConnectionChange(h.now, /*lost=*/false, /*connected=*/true);
  v1::Envelope again = h.One();
  ASSERT_TRUE(again.has_register_job());
  EXPECT_NE(again.request_id(), reg.request_id());
  EXPECT_EQ(h.s.stats().reconnects, 1u);
  // Lost and connected in one report (a drop and the next leader's handshake read together).
  h.At(60);
  h.s.OnConnectionChange(h.now, /*lost=*/true, /*connected=*/true);
  v1::Envelope third = h.One();
  ASSERT_TRUE(third.has_register_job());
  h.Receive(RegisterReply(third.request_id(), 300));
  EXPECT_TRUE(h.s.registered());
  EXPECT_EQ(h.s.stats().reconnects, 2u);
}

TEST(SessionTest, TheBackoffStartsOverOnANewConnection) {
  Harness h;
  h.s.Start(h.now);
  // Three refused registrations: the next attempt is 400 ms away.
  for (int64_t at : {0, 100, 300}) {
    h.Tick(at);
    v1::Envelope reg = h.One();
    h.Receive(Refusal(reg.request_id(), v1::ERROR_CODE_UNAVAILABLE, "shutting down"));
  }
  EXPECT_EQ(h.s.NextWakeup(), Ms(700));
  // A new connection (the next leader): registered at once, and a refusal there is retried
  // after the initial delay again.
  h.At(350);
  h.s.OnConnectionChange(h.now, /*lost=*/true, /*connected=*/true);
  v1::Envelope reg = h.One();
  ASSERT_TRUE(reg.has_register_job());
  h.Receive(Refusal(reg.request_id(), v1::ERROR_CODE_UNAVAILABLE, "not ready"));
  EXPECT_EQ(h.s.NextWakeup(), Ms(450));
}

TEST(SessionTest, TheLastProfileIsResentWhenTheDaemonNoLongerKnowsTheJob) {
  Harness h;
  h.Register(300);
  h.s.SetProfile(h.now, SomeProfile(40));
  v1::Envelope rep = h.One();
  h.Receive(Ack(rep.request_id()));
  // An operator reset cruxd's state: the job is unknown.
  h.Tick(100);
  h.Receive(Refusal(h.One().request_id(), v1::ERROR_CODE_UNKNOWN_JOB, "unknown job"));
  v1::Envelope reg = h.One();
  h.Receive(RegisterReply(reg.request_id(), 300));  // already_known = false.
  v1::Envelope again = h.One();
  ASSERT_TRUE(again.has_profile_report());
  EXPECT_EQ(again.profile_report().SerializeAsString(), rep.profile_report().SerializeAsString());
  h.Receive(Ack(again.request_id()));
  EXPECT_EQ(h.s.stats().reports_sent, 2u);
  EXPECT_FALSE(h.s.pending_profile().has_value());
}

TEST(SessionTest, QuotaRefusalIsRetriedWithBackoffAndShownInStats) {
  Harness h;
  h.s.Start(h.now);
  int64_t t = 0;
  for (int64_t delay : {100, 200, 400}) {
    v1::Envelope reg = h.One();
    ASSERT_TRUE(reg.has_register_job());
    h.Receive(Refusal(reg.request_id(), v1::ERROR_CODE_RESOURCE_EXHAUSTED,
                      "register_job: connection quota reached (64 jobs)"));
    EXPECT_FALSE(h.s.registered());
    EXPECT_EQ(h.s.NextWakeup(), Ms(t + delay));
    h.Tick(t + delay - 1);
    EXPECT_TRUE(h.Sent().empty());
    t += delay;
    h.Tick(t);
  }
  EXPECT_EQ(h.s.stats().quota_refusals, 3u);
  EXPECT_EQ(h.s.stats().register_failures, 3u);
  EXPECT_NE(h.s.stats().last_error.find("RESOURCE_EXHAUSTED"), std::string::npos);
  EXPECT_NE(h.s.stats().last_error.find("connection quota reached (64 jobs)"), std::string::npos);
  // A slot freed up: the fourth attempt is accepted.
  v1::Envelope reg = h.One();
  h.Receive(RegisterReply(reg.request_id(), 300));
  EXPECT_TRUE(h.s.registered());
  EXPECT_EQ(h.s.stats().registrations, 1u);
}

TEST(SessionTest, OtherRegistrationRefusalsAreRetriedToo) {
  Harness h;
  h.s.Start(h.now);
  v1::Envelope reg = h.One();
  h.Receive(Refusal(reg.request_id(), v1::ERROR_CODE_UNKNOWN_HOST,
                    "register_job.placement[1].host: unknown host \"host1\""));
  EXPECT_EQ(h.s.stats().quota_refusals, 0u);
  EXPECT_EQ(h.s.stats().register_failures, 1u);
  EXPECT_EQ(h.s.NextWakeup(), Ms(100));
  // An unexpected body is a failure as well.
  h.Tick(100);
  reg = h.One();
  h.Receive(Ack(reg.request_id()));
  EXPECT_FALSE(h.s.registered());
  EXPECT_EQ(h.s.stats().last_error, "register_job: unexpected reply ack");
  EXPECT_EQ(h.s.NextWakeup(), Ms(300));
}

TEST(SessionTest, BackoffJitterStaysWithinTwentyPercentBelowTheSchedule) {
  SessionOptions o = SessionOptionsFor(JobOptions(), 12345);
  EXPECT_DOUBLE_EQ(o.backoff.jitter, 0.2);
  Harness h(o);
  h.s.Start(h.now);
  int64_t t = 0;
  std::vector<int64_t> delays;
  for (int64_t nominal : {100, 200, 400, 800, 800, 800}) {
    (void)h.One();
    t += 1000;
    h.Tick(t);  // Timed out.
    const Duration delay = h.s.NextWakeup() - h.now;
    EXPECT_LE(delay, Ms(nominal));
    EXPECT_GE(delay, Ms(nominal) * 0.8);
    delays.push_back(delay.nanos());
    t = (h.s.NextWakeup().nanos()) / 1'000'000 + 1;
    h.Tick(t);
  }
  // Jittered: the capped attempts are not all equal.
  EXPECT_FALSE(delays[3] == delays[4] && delays[4] == delays[5]);
}

TEST(SessionTest, CloseEndsTheJobAbandoningTheRequestInFlight) {
  Harness h;
  h.Register(300);
  h.Tick(100);
  v1::Envelope hb = h.One();  // In flight.
  h.At(110);
  h.s.Close(h.now);
  v1::Envelope end = h.One();
  ASSERT_TRUE(end.has_end_job());
  EXPECT_EQ(end.end_job().job_id(), "job-a");
  EXPECT_FALSE(h.s.Done());
  h.Receive(Ack(hb.request_id()));  // Late now.
  EXPECT_EQ(h.s.late_replies(), 1u);
  EXPECT_FALSE(h.s.Done());
  h.Receive(Ack(end.request_id()));
  EXPECT_TRUE(h.s.Done());
  EXPECT_FALSE(h.s.stats().registered);
  EXPECT_EQ(h.s.NextWakeup(), Duration::Infinite());
  h.Tick(5000);
  EXPECT_TRUE(h.Sent().empty());  // Nothing after Done.
}

TEST(SessionTest, CloseWaitsAtMostOneCallTimeoutForEndJob) {
  Harness h;
  h.Register(300);
  h.s.Close(h.now);
  ASSERT_TRUE(h.One().has_end_job());
  EXPECT_EQ(h.s.NextWakeup(), Ms(1000));
  h.Tick(1000);
  EXPECT_TRUE(h.s.Done());
}

TEST(SessionTest, CloseEndsAJobWhoseRegistrationIsInFlight) {
  Harness h;
  h.s.Start(h.now);
  ASSERT_TRUE(h.One().has_register_job());
  h.s.Close(h.now);
  ASSERT_TRUE(h.One().has_end_job());  // The daemon may have accepted it already.
}

TEST(SessionTest, CloseWithoutRegistrationOrWithoutEndJobIsImmediate) {
  {
    Harness h;
    h.s.Start(h.now);
    h.One();
    h.Tick(1000);  // Registration timed out; next attempt at 1100 ms.
    h.s.Close(h.now);
    EXPECT_TRUE(h.s.Done());
    EXPECT_TRUE(h.Sent().empty());
  }
  {
    SessionOptions o = Options();
    o.end_job_on_close = false;
    Harness h(o);
    h.Register(300);
    h.s.Close(h.now);
    EXPECT_TRUE(h.s.Done());
    EXPECT_TRUE(h.Sent().empty());
  }
}

TEST(SessionTest, SendFailuresFailRequestsAndAreRecordedForAcks) {
  Harness h;
  h.s.Start(h.now);
  v1::Envelope reg = h.One();
  h.s.OnSendFailed(h.now, reg, core::UnavailableError("send: pipe full"));
  EXPECT_EQ(h.s.stats().register_failures, 1u);
  EXPECT_NE(h.s.stats().last_error.find("pipe full"), std::string::npos);
  EXPECT_EQ(h.s.NextWakeup(), Ms(100));
  h.Tick(100);
  h.Receive(RegisterReply(h.One().request_id(), 300));
  ASSERT_TRUE(h.Receive(Push(1, kStateA)).has_value());
  h.s.FinishApply(core::Status::Ok());
  v1::Envelope ack = h.One();
  h.s.OnSendFailed(h.now, ack, core::UnavailableError("pipe full"));
  EXPECT_TRUE(h.s.registered());  // An Ack is not a request: nothing else changes.
  EXPECT_EQ(h.s.stats().last_error.rfind("ack: ", 0), 0u);
}

TEST(SessionTest, VersionChangesWithVisibleState) {
  Harness h;
  const uint64_t v0 = h.s.version();
  h.Register(300);
  const uint64_t v1 = h.s.version();
  EXPECT_GT(v1, v0);
  h.Tick(50);  // Nothing due.
  EXPECT_EQ(h.s.version(), v1);
  h.Apply(Push(1, kStateA));
  EXPECT_GT(h.s.version(), v1);
}

}  // namespace
}  // namespace crux::client::internal
