// Issue #10 regressions at the daemon level (in process, fake clock, real SQLite): key roles,
// job ownership and connection binding, quotas, request id 0, state ids, store failures made
// visible, and stored jobs kept (quarantined) when the topology does not fit them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "crux/protocol/curve.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;
using namespace crux::daemon::testing;  // NOLINT(build/namespaces)

constexpr const char* kJobKey = "job-key-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
constexpr const char* kOtherJobKey = "job-key-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
constexpr const char* kTor1Key = "switch-key-tor1-ccccccccccccccccccccccccc";
constexpr const char* kHost3Key = "host-key-host3-eeeeeeeeeeeeeeeeeeeeeeeeee";
constexpr const char* kHost5Key = "host-key-host5-fffffffffffffffffffffffffff";

v1::Envelope Hello(const std::string& name, uint64_t rid = 40, uint64_t applied_state_id = 0) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_switch_hello()->set_switch_name(name);
  e.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
  e.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(true);
  e.mutable_switch_hello()->mutable_capabilities()->set_dwrr(true);
  e.mutable_switch_hello()->set_applied_state_id(applied_state_id);
  return e;
}

v1::Envelope Applied(const std::string& name, bool ok, const std::string& error = "",
                     uint64_t rid = 41) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_switch_applied()->set_switch_name(name);
  e.mutable_switch_applied()->set_epoch(1);
  e.mutable_switch_applied()->set_ok(ok);
  e.mutable_switch_applied()->set_error(error);
  return e;
}

class SecurityTest : public DaemonFixture {
 protected:
  void Grant() {
    protocol::KeyGrants g;
    g[kJobKey] = {protocol::KeyRole::kJob, "job-a", {}, {}};
    g[kOtherJobKey] = {protocol::KeyRole::kJob, "job-b", {}, {}};
    g[kTor1Key] = {protocol::KeyRole::kSwitch, "tor1", {"tor1"}, {}};
    g[kHost3Key] = {protocol::KeyRole::kHost, "host3", {}, {"host3"}};
    g[kHost5Key] = {protocol::KeyRole::kHost, "host5", {}, {"host5"}};
    daemon_->SetKeyGrants(g);
  }
  uint64_t Refused(const std::string& reason) {
    daemon_->RefreshMetrics();
    auto it = daemon_->refusals().find(reason);
    return it == daemon_->refusals().end() ? 0 : it->second;
  }
};

TEST_F(SecurityTest, AJobKeyCannotActAsASwitchAgentNorASwitchKeyForAnotherSwitch) {
  RegisterThree();  // Before the grants: insecure mode, no key.
  Grant();
  // A job key sending SwitchHello for tor1 gets nothing, and its forged failure report for tor0
  // never shows up in `cruxctl switches`.
  v1::Envelope r = Client("attacker", Hello("tor1"), kJobKey);
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("job key"));
  EXPECT_TRUE(pushes_["attacker"].empty());
  r = Client("attacker", Applied("tor0", false, "forged"), kJobKey);
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  // tor1's key may speak for tor1 only.
  r = Client("agent", Hello("tor0"), kTor1Key);
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("'tor0'"));
  EXPECT_TRUE(Client("agent", Hello("tor1"), kTor1Key).has_ack());
  // ...and may not register jobs.
  r = Client("agent", Register("sw-job", {"host3"}), kTor1Key);
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("switch key"));
  // A key that is no longer authorised (removed, then SIGHUP) is refused on open connections.
  r = Client("gone", Register("g", {"host3"}), "removed-key-ddddddddddddddddddddddddddddd");
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_EQ(Refused("role"), 4u);
  EXPECT_EQ(Refused("unauthorised_key"), 1u);
  v1::Envelope list = protocol::NewEnvelope(6);
  list.mutable_list_switches_request();
  const v1::Envelope switches = Admin(list);
  for (const auto& sw : switches.list_switches_reply().switches()) {
    EXPECT_NE(sw.name(), "tor0");
    EXPECT_TRUE(sw.last_error().empty()) << sw.name();
  }
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("crux_auth_refused_total{reason=\"role\"} 4"));
  EXPECT_EQ(Status().refusals().at("role"), 4u);
}

TEST_F(SecurityTest, OnlyAHostKeyForTheHostMaySendItsNicCounters) {
  Grant();
  // A tenant's job key cannot forge NIC counters (a non-tenant fault signal) for any host.
  v1::Envelope r = Client("tenant", NicReport("host3"), kJobKey);
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("host_telemetry: this CURVE key is a job key"));
  EXPECT_THAT(r.error().message(), HasSubstr("hosts/host3.pub"));
  // host3's agent may not speak for host5...
  r = Client("hostd-3", NicReport("host5"), kHost3Key);
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("host_telemetry.host"));
  EXPECT_THAT(r.error().message(), HasSubstr("'host5'"));
  EXPECT_THAT(r.error().message(), HasSubstr("add hosts/host5.pub"));
  // ...nor a switch key for any host.
  r = Client("agent", NicReport("host3"), kTor1Key);
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("switch key"));
  EXPECT_EQ(Refused("role"), 3u);
  // Each host's own agent is heard.
  EXPECT_TRUE(Client("hostd-3", NicReport("host3"), kHost3Key).has_ack());
  EXPECT_TRUE(Client("hostd-5", NicReport("host5"), kHost5Key).has_ack());
  EXPECT_EQ(Refused("role"), 3u);
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("crux_auth_refused_total{reason=\"role\"} 3"));
}

TEST_F(SecurityTest, AHostKeySpeaksForItsHostsJobsButNotAsASwitch) {
  Grant();
  // crux-hostd registers and keeps alive the jobs of its host over the same connection.
  v1::Envelope r = Client("hostd-3", Register("h", {"host3"}), kHost3Key);
  ASSERT_TRUE(r.has_register_job_reply()) << r.DebugString();
  EXPECT_TRUE(Client("hostd-3", Heartbeat("h", 0), kHost3Key).has_ack());
  EXPECT_TRUE(Client("hostd-3", Profile("h", 100, 20, true), kHost3Key).has_ack());
  EXPECT_TRUE(Client("hostd-3", NicReport("host3"), kHost3Key).has_ack());
  EXPECT_EQ(daemon_->tracker().Find("h")->peer, "hostd-3");
  // The job belongs to the host key that registered it: another host's key or a job key may
  // not speak for it.
  for (const char* key : {kHost5Key, kJobKey}) {
    r = Client("other", Heartbeat("h", 0), key);
    ASSERT_TRUE(r.has_error()) << key;
    EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
    EXPECT_THAT(r.error().message(), HasSubstr("another CURVE key"));
  }
  EXPECT_EQ(Refused("job_owner"), 2u);
  // A host key is not a switch key.
  r = Client("hostd-3", Hello("tor1"), kHost3Key);
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("switch_hello: this CURVE key is a host key"));
  for (const v1::Envelope& m : pushes_["hostd-3"]) EXPECT_FALSE(m.has_switch_state());
  EXPECT_EQ(Refused("role"), 1u);
  v1::Envelope end = protocol::NewEnvelope(8);
  end.mutable_end_job()->set_job_id("h");
  EXPECT_TRUE(Client("hostd-3", end, kHost3Key).has_ack());
  EXPECT_EQ(daemon_->tracker().Find("h"), nullptr);
}

TEST_F(SecurityTest, WithoutCurveAnyConnectionMaySendNicCounters) {
  // Insecure mode (no grants): roles are not checked.
  EXPECT_TRUE(Client("anyone", NicReport("host3")).has_ack());
  EXPECT_EQ(Refused("role"), 0u);
}

TEST_F(SecurityTest, AnotherKeyCannotSpeakForAJob) {
  Grant();
  ASSERT_TRUE(
      Client("victim", Register("v", {"host0", "host4"}), kJobKey).has_register_job_reply());
  for (const v1::Envelope& m :
       {Register("v", {"host0", "host4"}), Heartbeat("v", 0), Profile("v", 100, 20, true)}) {
    v1::Envelope r = Client("attacker", m, kOtherJobKey);
    ASSERT_TRUE(r.has_error()) << protocol::BodyName(m);
    EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  }
  EXPECT_EQ(Refused("job_owner"), 3u);
  EXPECT_EQ(daemon_->tracker().Find("v")->peer, "victim");
}

TEST_F(SecurityTest, AJobIsTiedToTheConnectionThatRegisteredIt) {
  RegisterThree();
  Advance(kDebounce);
  // Insecure mode: a heartbeat from another connection does not move a's pushes there.
  v1::Envelope r = Client("intruder", Heartbeat("a", 0));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(r.error().message(), HasSubstr("another connection"));
  EXPECT_EQ(Client("intruder", Profile("a", 100, 20, true)).error().code(),
            v1::ERROR_CODE_PERMISSION_DENIED);
  v1::Envelope end = protocol::NewEnvelope(7);
  end.mutable_end_job()->set_job_id("a");
  EXPECT_EQ(Client("intruder", end).error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_EQ(daemon_->tracker().Find("a")->peer, "peer-a");
  EXPECT_TRUE(pushes_["intruder"].empty());
  EXPECT_EQ(Refused("connection"), 3u);
  // The owner keeps working; an explicit re-registration moves the job (a restarted client).
  EXPECT_TRUE(Client("peer-a", Heartbeat("a", 0)).has_ack());
  EXPECT_TRUE(Client("peer-a-new", Register("a", {"host0", "host4"})).has_register_job_reply());
  EXPECT_EQ(daemon_->tracker().Find("a")->peer, "peer-a-new");
  EXPECT_EQ(Client("peer-a", Heartbeat("a", 0)).error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
}

TEST_F(SecurityTest, RestoredJobsAreBoundByTheirFirstMessage) {
  RegisterThree();
  Advance(kDebounce);
  Close();
  Open();
  EXPECT_TRUE(daemon_->tracker().Find("b")->peer.empty());
  EXPECT_TRUE(Client("peer-b-again", Heartbeat("b", 0)).has_ack());
  EXPECT_EQ(daemon_->tracker().Find("b")->peer, "peer-b-again");
  EXPECT_EQ(Client("someone-else", Heartbeat("b", 0)).error().code(),
            v1::ERROR_CODE_PERMISSION_DENIED);
}

TEST_F(SecurityTest, QuotasRefuseRegistrationsWithATypedError) {
  Close();
  config_.limits.max_jobs_per_connection = 2;
  config_.limits.max_jobs_per_key = 3;
  config_.limits.max_jobs = 5;
  Open();
  Grant();
  EXPECT_TRUE(Client("c1", Register("j1", {"host0"}), kJobKey).has_register_job_reply());
  EXPECT_TRUE(Client("c1", Register("j2", {"host1"}), kJobKey).has_register_job_reply());
  v1::Envelope r = Client("c1", Register("j3", {"host2"}), kJobKey);
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.error().message(), HasSubstr("limits.max_jobs_per_connection"));
  // Re-registering a job the connection already has is not a new job.
  EXPECT_TRUE(Client("c1", Register("j1", {"host0"}), kJobKey).has_register_job_reply());
  EXPECT_TRUE(Client("c2", Register("j3", {"host2"}), kJobKey).has_register_job_reply());
  r = Client("c3", Register("j4", {"host3"}), kJobKey);
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.error().message(), HasSubstr("limits.max_jobs_per_key"));
  EXPECT_TRUE(Client("c3", Register("j4", {"host3"}), kOtherJobKey).has_register_job_reply());
  EXPECT_TRUE(Client("c4", Register("j5", {"host5"}), kOtherJobKey).has_register_job_reply());
  r = Client("c5", Register("j6", {"host6"}), kOtherJobKey);
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.error().message(), HasSubstr("limits.max_jobs)"));
  EXPECT_EQ(Refused("quota"), 3u);
  // Ending a job frees its place.
  v1::Envelope end = protocol::NewEnvelope(7);
  end.mutable_end_job()->set_job_id("j1");
  EXPECT_TRUE(Client("c1", end, kJobKey).has_ack());
  EXPECT_TRUE(Client("c5", Register("j6", {"host6"}), kOtherJobKey).has_register_job_reply());
  EXPECT_EQ(daemon_->tracker().jobs().size(), 5u);
}

TEST_F(SecurityTest, AnAckAnsweringAPushGetsNoReply) {
  RegisterThree();
  Advance(kDebounce);
  client_.Take();
  v1::Envelope ack = protocol::NewEnvelope(0);
  ack.mutable_ack()->set_job_id("a");
  ack.mutable_ack()->set_epoch(daemon_->epoch());
  ack.mutable_ack()->set_ok(true);
  daemon_->ProcessClient(In("peer-a", ack));
  EXPECT_TRUE(client_.Take().empty()) << "a reply with request_id 0 would look like a push";
  EXPECT_EQ(daemon_->tracker().Find("a")->acked_epoch, daemon_->epoch());
}

TEST_F(SecurityTest, PushesCarryTheStateIdAndAnotherStatesClientIsBroughtBack) {
  RegisterThree();
  Advance(kDebounce);
  const uint64_t state = daemon_->state_id();
  ASSERT_NE(state, 0u);
  EXPECT_EQ(Status().state_id(), state);
  const v1::Assignment a = LastAssignment("peer-a");
  EXPECT_EQ(a.state_id(), state);
  // A client holding an assignment of another state (cruxd's state was reset) gets the current
  // one again even though its epoch is higher.
  pushes_.clear();
  v1::Envelope hb = Heartbeat("a", a.epoch() + 50);
  hb.mutable_heartbeat()->set_applied_state_id(state + 1);
  EXPECT_TRUE(Client("peer-a", hb).has_ack());
  EXPECT_EQ(LastAssignment("peer-a").epoch(), a.epoch());
  // Same for a switch agent: full state, and its old applied epoch no longer counts.
  Client("agent", Hello("tor0", 40, state + 1));
  ASSERT_FALSE(pushes_["agent"].empty());
  EXPECT_EQ(pushes_["agent"].back().switch_state().state_id(), state);
  // The state id survives restarts.
  Close();
  Open();
  EXPECT_EQ(daemon_->state_id(), state);
}

TEST_F(SecurityTest, AFailingStoreIsVisibleAndThePlanIsRetriedUntilItWorks) {
  std::vector<std::string> health;
  daemon_->SetStoreHealthListener([&](const std::string& e) { health.push_back(e); });
  RegisterThree();
  Advance(kDebounce);
  const uint64_t epoch = daemon_->epoch();
  faulty_->fail_method = "ApplyPlan";
  Client("peer-a", Profile("a", 100, 20, true));
  Advance(kDebounce);
  EXPECT_EQ(daemon_->epoch(), epoch) << "a plan that cannot be stored is not applied";
  v1::StatusReply st = Status();
  EXPECT_FALSE(st.store_ok());
  EXPECT_THAT(st.store_error(), HasSubstr("injected: ApplyPlan"));
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("crux_store_healthy 0"));
  ASSERT_EQ(health.size(), 1u);
  EXPECT_THAT(health[0], HasSubstr("apply_plan"));
  // The store comes back: the retry (backoff, first after 1 s) applies the plan.
  faulty_->fail_method.clear();
  Advance(core::Duration::Millis(1000) + kDebounce);
  EXPECT_GT(daemon_->epoch(), epoch);
  EXPECT_TRUE(Status().store_ok());
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("crux_store_healthy 1"));
  ASSERT_EQ(health.size(), 2u);
  EXPECT_EQ(health[1], "");
}

TEST_F(SecurityTest, ARegistrationThatCannotBeStoredIsUndone) {
  faulty_->fail_method = "UpsertJob";
  v1::Envelope r = Client("p", Register("u", {"host0"}));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(daemon_->tracker().Find("u"), nullptr);
  EXPECT_FALSE(Status().store_ok());
  faulty_->fail_method.clear();
  EXPECT_TRUE(Client("p", Register("u", {"host0"})).has_register_job_reply());
  EXPECT_TRUE(Status().store_ok());
}

TEST_F(SecurityTest, JobsThatDoNotFitAWrongTopologyAreKeptNotDeleted) {
  RegisterThree();
  Advance(kDebounce);
  Close();
  // One start with a topology that lacks host4..host6 (here: a 4-host Clos).
  const std::string small =
      "topology:\n  kind: clos2\n  tors: 1\n  aggs: 1\n  hosts_per_tor: 4\n  nics_per_host: 2\n"
      "  nic_gbps: 200\n  uplink_gbps: 400\n";
  Open(small);
  EXPECT_EQ(daemon_->tracker().jobs().size(), 0u);
  EXPECT_EQ(daemon_->quarantined_jobs(), 3u);
  EXPECT_EQ(Status().quarantined_jobs(), 3u);
  EXPECT_EQ(sqlite_->LoadJobs().value().size(), 3u) << "stored jobs must not be deleted";
  Close();
  Open();  // The right topology again: everything is back.
  EXPECT_EQ(daemon_->tracker().jobs().size(), 3u);
  EXPECT_EQ(daemon_->quarantined_jobs(), 0u);
}

TEST_F(SecurityTest, SwitchesThatCannotHoldTheQosConfigAreRefusedAtHello) {
  v1::Envelope h = Hello("tor0");
  h.mutable_switch_hello()->mutable_capabilities()->set_queues(4);  // The config uses queue 6.
  v1::Envelope r = Client("agent", h);
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_UNSUPPORTED);
  EXPECT_THAT(r.error().message(), HasSubstr("capabilities.queues"));
  h = Hello("tor0");
  h.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(false);
  EXPECT_EQ(Client("agent", h).error().code(), v1::ERROR_CODE_UNSUPPORTED);
  EXPECT_EQ(daemon_->enforcer().switch_count(), 0u) << "a refused hello records nothing";
  EXPECT_TRUE(Client("agent", Hello("tor0")).has_ack());
}

TEST_F(SecurityTest, APlacementWithMoreGpusThanTheHostHasIsRefused) {
  v1::Envelope reg = Register("g", {"host0", "host4"});
  reg.mutable_register_job()->mutable_placement(1)->set_gpus(9);  // The example hosts have 8.
  v1::Envelope r = Client("p", reg);
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(r.error().message(), HasSubstr("placement[1].gpus"));
  EXPECT_EQ(daemon_->tracker().Find("g"), nullptr);
}

}  // namespace
}  // namespace crux::daemon
