// The daemon's modules together on a fake-clock loop (no sockets): job lifecycle, lease expiry,
// debounce, diff and epochs, persistence across a restart, refusals and admin replies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "crux/daemon/app/daemon.h"
#include "crux/spec/topology_spec.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace crux::daemon::testing;  // NOLINT(build/namespaces)

using DaemonTest = DaemonFixture;

TEST_F(DaemonTest, BurstIsOneReplanNewcomersGetTheTopLevelThenTheirOwn) {
  RegisterThree();
  EXPECT_EQ(daemon_->plans().runs(), 0u);  // Debounced: nothing yet.
  EXPECT_TRUE(pushes_.empty());
  Advance(kDebounce);
  EXPECT_EQ(daemon_->plans().runs(), 1u);  // Three registrations, one re-plan.
  EXPECT_EQ(daemon_->epoch(), 1u);
  std::set<uint32_t> colours;
  for (const char* id : {"a", "b", "c"}) {
    v1::Assignment a = LastAssignment(std::string("peer-") + id);
    EXPECT_EQ(a.job_id(), id);
    EXPECT_EQ(a.epoch(), 1u);
    EXPECT_EQ(a.level(), 0u) << "newcomers hold the temporary top level";
    EXPECT_EQ(a.state(), v1::JOB_STATE_REGISTERED);
    EXPECT_EQ(a.traffic_class(), a.dscp() << 2);
    EXPECT_EQ(a.nccl_env().at("NCCL_IB_TC"), std::to_string(a.dscp() << 2));
    EXPECT_EQ(a.flows_size(), 4);  // 2 hosts x 2 rails.
    for (const auto& f : a.flows()) {
      EXPECT_GE(f.udp_sport(), 0xC000u);
      EXPECT_GE(f.path_size(), 5);  // nic, tor, agg, tor, nic.
      EXPECT_EQ(f.path(0), f.src_nic());
    }
    colours.insert(a.dscp());
  }
  EXPECT_EQ(colours.size(), 3u) << "distinct colours while the pool lasts";

  // Profiles converge: the jobs get their computed levels (below the reserved level 0).
  uint64_t rid = 10;
  for (const auto& [id, ms] : std::map<std::string, uint64_t>{{"a", 50}, {"b", 400}, {"c", 200}}) {
    v1::Envelope r = Client("peer-" + id, Profile(id, ms, 20, false, rid++));
    EXPECT_TRUE(r.has_ack()) << r.DebugString();
  }
  Advance(kDebounce);
  EXPECT_EQ(daemon_->plans().runs(), 2u);
  EXPECT_EQ(daemon_->epoch(), 2u);
  std::set<uint32_t> levels;
  for (const char* id : {"a", "b", "c"}) {
    v1::Assignment a = LastAssignment(std::string("peer-") + id);
    EXPECT_EQ(a.epoch(), 2u);
    EXPECT_EQ(a.state(), v1::JOB_STATE_SCHEDULED);
    EXPECT_GE(a.level(), 1u);
    levels.insert(a.level());
  }
  EXPECT_GT(levels.size(), 1u) << "contending jobs are separated";
  // The least compute per byte (a: 50 ms) has the lowest intensity: lowest level of the three.
  EXPECT_GT(LastAssignment("peer-a").level(), LastAssignment("peer-b").level());
}

TEST_F(DaemonTest, DebounceCoalescesEventsWithinTheWindowOnly) {
  Client("peer-a", Register("a", {"host0", "host4"}));
  Advance(core::Duration::Millis(10));
  Client("peer-b", Register("b", {"host1", "host5"}));  // Same window: same re-plan.
  EXPECT_EQ(daemon_->plans().runs(), 0u);
  Advance(core::Duration::Millis(10));
  EXPECT_EQ(daemon_->plans().runs(), 1u);
  EXPECT_EQ(daemon_->epoch(), 1u);
  EXPECT_EQ(LastAssignment("peer-b").epoch(), 1u);
  Advance(core::Duration::Millis(5));
  Client("peer-c", Register("c", {"host2", "host6"}));  // After the window: a new one.
  Advance(kDebounce - core::Duration::Millis(1));
  EXPECT_EQ(daemon_->plans().runs(), 1u);
  Advance(core::Duration::Millis(1));
  EXPECT_EQ(daemon_->plans().runs(), 2u);
  EXPECT_EQ(daemon_->epoch(), 2u);
  EXPECT_EQ(LastAssignment("peer-c").epoch(), 2u);
}

TEST_F(DaemonTest, MinReplanIntervalSpacesRunsOut) {
  DaemonConfig c = config_;
  c.min_replan_interval_ms = 100;
  daemon_->Reload(c);
  Advance(kDebounce);  // The reload's own re-plan (t = 20 ms).
  ASSERT_EQ(daemon_->plans().runs(), 1u);
  Client("peer-a", Register("a", {"host0", "host4"}));  // t = 20 ms.
  Advance(kDebounce);                                   // t = 40 ms.
  EXPECT_EQ(daemon_->plans().runs(), 1u) << "debounce alone would have run at 40 ms";
  Advance(core::Duration::Millis(79));  // t = 119 ms.
  EXPECT_EQ(daemon_->plans().runs(), 1u);
  Advance(core::Duration::Millis(1));  // t = 120 ms = first start + 100 ms.
  EXPECT_EQ(daemon_->plans().runs(), 2u);
  EXPECT_EQ(LastAssignment("peer-a").epoch(), daemon_->epoch());
}

TEST_F(DaemonTest, MeasuredPeerBytesBecomeTheJobsFlows) {
  Client("peer-a", Register("a", {"host0", "host4", "host8"}));
  v1::Envelope p = Profile("a", 200, 30, true);
  for (const auto& [src, dst] : std::vector<std::pair<std::string, std::string>>{
           {"host0/nic0", "host4/nic0"}, {"host4/nic1", "host8/nic1"}}) {
    v1::PeerBytes* pb = p.mutable_profile_report()->add_peers();
    pb->set_local_nic(src);
    pb->set_remote_nic(dst);
    pb->set_bytes(500000000);
  }
  ASSERT_TRUE(Client("peer-a", p).has_ack());
  Advance(kDebounce);
  v1::Assignment a = LastAssignment("peer-a");
  ASSERT_EQ(a.flows_size(), 2);
  EXPECT_EQ(a.flows(0).src_nic(), "host0/nic0");
  EXPECT_EQ(a.flows(0).dst_nic(), "host4/nic0");
  EXPECT_EQ(a.flows(1).src_nic(), "host4/nic1");
  EXPECT_EQ(a.state(), v1::JOB_STATE_SCHEDULED);
  EXPECT_EQ(a.level(), 1u);  // Alone: the first job level under the reserved one.
}

TEST_F(DaemonTest, UnchangedPlanKeepsTheEpochAndPushesNothing) {
  RegisterThree();
  Advance(kDebounce);
  ASSERT_EQ(daemon_->epoch(), 1u);
  pushes_.clear();
  // The same profile-less state again: a re-plan runs but nothing changed.
  Client("peer-a", Heartbeat("a", 1));
  v1::Envelope r = Client("peer-a", Profile("a", 100, 2, false));  // REGISTERED -> PROFILING.
  ASSERT_TRUE(r.has_ack());
  Advance(kDebounce);
  EXPECT_EQ(daemon_->epoch(), 2u);  // State change is a change.
  EXPECT_EQ(pushes_["peer-a"].size(), 1u);
  EXPECT_TRUE(pushes_["peer-b"].empty()) << "only what changed is pushed";
  pushes_.clear();
  Client("peer-a", Profile("a", 101, 3, false));  // Same figures within 10%: no re-plan.
  Advance(kDebounce);
  EXPECT_EQ(daemon_->plans().runs(), 2u);
  // -40 %: re-plans. a keeps the most traffic, so it stays the planner's reference job (the flag
  // its assignment carries); same level, same paths: nothing to push.
  Client("peer-a", Profile("a", 60, 4, false));
  Advance(kDebounce);
  EXPECT_EQ(daemon_->plans().runs(), 3u);
  EXPECT_EQ(daemon_->epoch(), 2u);
  EXPECT_TRUE(pushes_.empty());
}

TEST_F(DaemonTest, JitteryReportsNeitherReplanNorPushButAreStoredInBatches) {
  RegisterThree();
  for (const char* id : {"a", "b", "c"}) {
    Client(std::string("peer-") + id, Profile(id, 100, 20, true, 2, 1000000000));
  }
  Advance(kDebounce);
  const uint64_t runs = daemon_->plans().runs();
  const uint64_t epoch = daemon_->epoch();
  pushes_.clear();
  // 2% jitter (crux-loadgen's default) on every figure, many reports: nothing to plan.
  for (int i = 0; i < 50; ++i) {
    for (const char* id : {"a", "b", "c"}) {
      const uint64_t ms = (i % 2) ? 102 : 98;
      v1::Envelope p = Profile(id, ms, 21 + static_cast<uint32_t>(i), true, 10 + i,
                               (i % 2) ? 980000000 : 1020000000);
      ASSERT_TRUE(Client(std::string("peer-") + id, p).has_ack());
    }
    Advance(core::Duration::Millis(5));
  }
  EXPECT_EQ(daemon_->plans().runs(), runs);
  EXPECT_EQ(daemon_->epoch(), epoch);
  EXPECT_TRUE(pushes_.empty());
  // The latest reports reach the store with the next flush (once a second, or now).
  daemon_->FlushProfiles();
  auto jobs = sqlite_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  for (const StoredJob& j : *jobs) {
    v1::ProfileReport p;
    ASSERT_TRUE(p.ParseFromString(j.profile)) << j.job_id;
    EXPECT_EQ(p.samples(), 21u + 49u) << j.job_id;
  }
  // A lease expiry after unflushed reports does not resurrect the profile row.
  Client("peer-a", Profile("a", 100, 99, true, 500, 1000000000));
  Advance(core::Duration::Millis(500));
  Client("peer-b", Heartbeat("b", 0));
  Client("peer-c", Heartbeat("c", 0));
  Advance(core::Duration::Millis(800));  // a: silent 1.3 s > lease 1 s (+ sweep period).
  EXPECT_EQ(daemon_->tracker().Find("a"), nullptr);
  daemon_->FlushProfiles();
  jobs = sqlite_->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->size(), 2u);
}

TEST_F(DaemonTest, HeartbeatWithStaleEpochGetsTheAssignmentAgain) {
  RegisterThree();
  Advance(kDebounce);
  pushes_.clear();
  v1::Envelope ack = Client("peer-a", Heartbeat("a", 0));
  ASSERT_TRUE(ack.has_ack());
  EXPECT_EQ(ack.ack().epoch(), 1u);
  ASSERT_EQ(pushes_["peer-a"].size(), 1u);
  EXPECT_EQ(pushes_["peer-a"][0].assignment().epoch(), 1u);
  pushes_.clear();
  Client("peer-a", Heartbeat("a", 1));
  EXPECT_TRUE(pushes_["peer-a"].empty());
}

TEST_F(DaemonTest, LeaseExpiryRemovesSilentJobsOnly) {
  RegisterThree();
  Advance(kDebounce);
  Advance(core::Duration::Millis(600));
  Client("peer-a", Heartbeat("a", 1));   // Only a keeps its lease.
  Advance(core::Duration::Millis(600));  // b and c: 1220 ms of silence > 1000 ms lease.
  EXPECT_NE(daemon_->tracker().Find("a"), nullptr);
  EXPECT_EQ(daemon_->tracker().Find("b"), nullptr);
  EXPECT_EQ(daemon_->tracker().Find("c"), nullptr);
  EXPECT_EQ(daemon_->applied().count("b"), 0u);
  auto stored = sqlite_->LoadJobs().value();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].job_id, "a");
  v1::Envelope r = Client("peer-b", Heartbeat("b", 1));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_UNKNOWN_JOB);
  auto audit = sqlite_->RecentAudit(10).value();
  ASSERT_FALSE(audit.empty());
  EXPECT_THAT(audit[0].reason, HasSubstr("lease expired"));
}

TEST_F(DaemonTest, EndJobRemovesTheJob) {
  RegisterThree();
  Advance(kDebounce);
  v1::Envelope e = protocol::NewEnvelope(9);
  e.mutable_end_job()->set_job_id("b");
  e.mutable_end_job()->set_reason("done");
  EXPECT_TRUE(Client("peer-b", e).has_ack());
  EXPECT_EQ(daemon_->tracker().Find("b"), nullptr);
  v1::Envelope again = Client("peer-b", e);
  ASSERT_TRUE(again.has_error());
  EXPECT_EQ(again.error().code(), v1::ERROR_CODE_UNKNOWN_JOB);
}

TEST_F(DaemonTest, RestartRestoresStateAndReRegistrationIsIdempotent) {
  RegisterThree();
  Client("peer-a", Profile("a", 100, 20, true));
  Advance(kDebounce);
  const uint64_t epoch = daemon_->epoch();
  const auto applied = daemon_->applied();
  ASSERT_EQ(applied.size(), 3u);
  Close();  // Like kill -9: nothing is flushed on the way out (every change is already stored).
  Open();
  EXPECT_EQ(daemon_->epoch(), epoch);
  EXPECT_EQ(daemon_->tracker().jobs().size(), 3u);
  EXPECT_EQ(daemon_->control().Find("a")->phase, core::JobPhase::kScheduled);
  ASSERT_EQ(daemon_->applied().size(), 3u);
  for (const auto& [id, a] : applied) {
    EXPECT_EQ(daemon_->applied().at(id)->assignment, a->assignment) << id;
    EXPECT_EQ(daemon_->applied().at(id)->epoch, a->epoch);
  }
  pushes_.clear();
  v1::Envelope r = Client("peer-a2", Register("a", {"host0", "host4"}));
  ASSERT_TRUE(r.has_register_job_reply());
  EXPECT_TRUE(r.register_job_reply().already_known());
  EXPECT_EQ(r.register_job_reply().dscp(), applied.at("a")->assignment.dscp);
  ASSERT_EQ(pushes_["peer-a2"].size(), 1u) << "the re-registered client gets its assignment";
  EXPECT_EQ(pushes_["peer-a2"][0].assignment().epoch(), applied.at("a")->epoch);
  // A different placement under the same id is a conflict and changes nothing.
  v1::Envelope c = Client("peer-x", Register("a", {"host0", "host8"}));
  ASSERT_TRUE(c.has_error());
  EXPECT_EQ(c.error().code(), v1::ERROR_CODE_CONFLICT);
  // The restart re-plan finds nothing to change: same epoch.
  Advance(kDebounce);
  EXPECT_EQ(daemon_->epoch(), epoch);
}

TEST_F(DaemonTest, RefusalsAreCountedAndDoNotDisturbOthers) {
  RegisterThree();
  v1::Envelope bad = Client("peer-bad", Register("x", {"host0", "host99"}));
  ASSERT_TRUE(bad.has_error());
  EXPECT_EQ(bad.error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  EXPECT_THAT(bad.error().message(), HasSubstr("placement[1].host"));
  v1::Envelope nic = Register("y", {"host0", "host1"});
  nic.mutable_register_job()->mutable_placement(0)->add_nics()->set_name("host1/nic0");
  EXPECT_EQ(Client("peer-bad", nic).error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  v1::Envelope sw = Register("z", {"host0", "tor0"});
  EXPECT_EQ(Client("peer-bad", sw).error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  v1::Envelope prof = Profile("a", 100, 1, false);
  v1::PeerBytes* pb = prof.mutable_profile_report()->add_peers();
  pb->set_local_nic("host0/nic0");
  pb->set_remote_nic("host9/nic0");  // Exists, but not one of a's hosts.
  pb->set_bytes(10);
  EXPECT_EQ(Client("peer-a", prof).error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  pb->set_remote_nic("host77/nic0");
  EXPECT_EQ(Client("peer-a", prof).error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  EXPECT_EQ(Client("peer-q", Profile("nobody", 1, 1, false)).error().code(),
            v1::ERROR_CODE_UNKNOWN_JOB);
  v1::Envelope ack = protocol::NewEnvelope(4);
  ack.mutable_ack()->set_job_id("nobody");
  EXPECT_EQ(Client("peer-q", ack).error().code(), v1::ERROR_CODE_UNKNOWN_JOB);
  v1::Envelope push = protocol::NewEnvelope(4);
  push.mutable_assignment()->set_job_id("a");
  EXPECT_EQ(Client("peer-q", push).error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  v1::Envelope hello = protocol::NewEnvelope(4);
  hello.mutable_switch_hello()->set_switch_name("host3");
  EXPECT_EQ(Client("peer-q", hello).error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  v1::Envelope applied = protocol::NewEnvelope(4);
  applied.mutable_switch_applied()->set_switch_name("tor0");
  EXPECT_EQ(Client("peer-q", applied).error().code(), v1::ERROR_CODE_NOT_FOUND);
  // An admin request on the client endpoint is refused, and vice versa.
  v1::Envelope status = protocol::NewEnvelope(4);
  status.mutable_status_request();
  EXPECT_EQ(Client("peer-q", status).error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(Admin(Register("x", {"host0"})).error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);

  // Everyone else is unaffected; the next good message works.
  Advance(kDebounce);
  EXPECT_EQ(daemon_->tracker().jobs().size(), 3u);
  EXPECT_TRUE(Client("peer-bad", Register("x", {"host0", "host8"})).has_register_job_reply());
  const std::string text = metrics_.Serialize();
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"unknown_host\"} 5"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"client\",kind=\"unknown_job\"} 2"));
  EXPECT_THAT(text, HasSubstr("crux_errors_total{endpoint=\"admin\",kind=\"invalid_argument\"} 1"));
}

TEST_F(DaemonTest, SwitchAgentsRegisterAndGetDesiredState) {
  RegisterThree();
  Advance(kDebounce);
  v1::Envelope hello = protocol::NewEnvelope(4);
  hello.mutable_switch_hello()->set_switch_name("tor0");
  hello.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
  hello.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(true);
  hello.mutable_switch_hello()->mutable_capabilities()->set_dwrr(true);
  EXPECT_TRUE(Client("agent-tor0", hello).has_ack());
  ASSERT_EQ(pushes_["agent-tor0"].size(), 1u);
  const v1::SwitchQosState& st = pushes_["agent-tor0"][0].switch_state();
  EXPECT_EQ(st.epoch(), daemon_->epoch());
  EXPECT_EQ(st.dscp_to_tc_size(), 64);  // Every DSCP is mapped.
  // The three newcomers (colours 10, 12, 14, all crossing tor0) sit on level 0 -> TC 5;
  // control (48) -> TC 6, storage (8) -> TC 1, the rest best effort (TC 0).
  for (const auto& [dscp, tc] : st.dscp_to_tc()) {
    const uint32_t want = (dscp == 10 || dscp == 12 || dscp == 14) ? 5u
                          : dscp == 48                             ? 6u
                          : dscp == 8                              ? 1u
                                                                   : 0u;
    EXPECT_EQ(tc, want) << "dscp " << dscp;
  }
  v1::Envelope applied = protocol::NewEnvelope(5);
  applied.mutable_switch_applied()->set_switch_name("tor0");
  applied.mutable_switch_applied()->set_epoch(st.epoch());
  applied.mutable_switch_applied()->set_ok(true);
  EXPECT_TRUE(Client("agent-tor0", applied).has_ack());
  v1::Envelope list = protocol::NewEnvelope(6);
  list.mutable_list_switches_request();
  v1::Envelope r = Admin(list);
  ASSERT_EQ(r.list_switches_reply().switches_size(), 1);
  EXPECT_EQ(r.list_switches_reply().switches(0).name(), "tor0");
  EXPECT_EQ(r.list_switches_reply().switches(0).applied_epoch(), st.epoch());
}

TEST_F(DaemonTest, DryRunComputesButNeitherPushesNorAdvancesTheEpoch) {
  DaemonConfig c = config_;
  c.dry_run = true;
  EXPECT_TRUE(daemon_->Reload(c).empty());
  RegisterThree();
  Advance(kDebounce * 2);
  EXPECT_GE(daemon_->plans().runs(), 1u);
  EXPECT_EQ(daemon_->epoch(), 0u);
  EXPECT_TRUE(pushes_.empty());
  c.dry_run = false;
  c.client_endpoint = "tcp://127.0.0.1:1";
  EXPECT_THAT(daemon_->Reload(c), ::testing::ElementsAre("client_endpoint"));
  EXPECT_EQ(daemon_->config().client_endpoint, config_.client_endpoint);  // Restart-only.
  Advance(kDebounce);
  EXPECT_EQ(daemon_->epoch(), 1u);
  EXPECT_EQ(pushes_.size(), 3u);
}

TEST_F(DaemonTest, AdminStatusJobsExplainLinksAndDryRun) {
  RegisterThree();
  for (const char* id : {"a", "b", "c"}) {
    Client(std::string("peer-") + id, Profile(id, std::string(id) == "a" ? 50 : 400, 20, true));
  }
  Advance(kDebounce);
  v1::Envelope req = protocol::NewEnvelope(7);
  req.mutable_status_request();
  v1::Envelope st = Admin(req);
  ASSERT_TRUE(st.has_status_reply()) << st.DebugString();
  EXPECT_EQ(st.request_id(), 7u);
  EXPECT_EQ(st.status_reply().jobs(), 3u);
  EXPECT_EQ(st.status_reply().jobs_by_state().at("scheduled"), 3u);
  EXPECT_EQ(st.status_reply().epoch(), daemon_->epoch());
  EXPECT_EQ(st.status_reply().hosts(), 16u);
  EXPECT_EQ(st.status_reply().clients(), 3u);

  req = protocol::NewEnvelope(8);
  req.mutable_list_jobs_request();
  v1::Envelope jobs = Admin(req);
  ASSERT_EQ(jobs.list_jobs_reply().jobs_size(), 3);
  for (const auto& j : jobs.list_jobs_reply().jobs()) {
    EXPECT_GT(j.intensity(), 0);
    EXPECT_GE(j.rank(), 0);
    EXPECT_GE(j.level(), 1);
    EXPECT_EQ(j.gpus(), 16u);
  }

  req = protocol::NewEnvelope(9);
  req.mutable_job_request()->set_job_id("a");
  v1::Envelope detail = Admin(req);
  ASSERT_TRUE(detail.has_job_detail()) << detail.DebugString();
  const v1::JobDetail& d = detail.job_detail();
  EXPECT_EQ(d.hosts_size(), 2);
  EXPECT_EQ(d.flows_size(), 4);
  EXPECT_GT(d.comm_time_ms(), 0);
  EXPECT_FALSE(d.bottleneck().empty());
  ASSERT_GE(d.contends_with_size(), 1);
  for (const auto& c : d.contends_with()) {
    EXPECT_TRUE(c.other_job() == "b" || c.other_job() == "c");
    EXPECT_GE(c.links_size(), 1);
    EXPECT_THAT(c.links(0), HasSubstr("->"));
  }
  EXPECT_THAT(d.explanation(), HasSubstr("level"));
  EXPECT_THAT(d.explanation(), HasSubstr("P_j"));
  req.mutable_job_request()->set_job_id("nope");
  EXPECT_EQ(Admin(req).error().code(), v1::ERROR_CODE_NOT_FOUND);

  req = protocol::NewEnvelope(10);
  req.mutable_list_links_request()->set_all(false);
  v1::Envelope links = Admin(req);
  ASSERT_GT(links.list_links_reply().links_size(), 0);
  for (const auto& l : links.list_links_reply().links()) {
    EXPECT_GT(l.load_bps(), 0);
    EXPECT_GE(l.jobs(), 1u);
  }
  req.mutable_list_links_request()->set_all(true);
  EXPECT_EQ(Admin(req).list_links_reply().links_size(), 144);

  // Take tor0's uplink to agg0 down: a re-plan moves flows off it.
  req = protocol::NewEnvelope(11);
  req.mutable_set_link_request()->set_link("tor0-agg0");
  req.mutable_set_link_request()->set_health(v1::LINK_HEALTH_DOWN);
  v1::Envelope set = Admin(req);
  ASSERT_TRUE(set.has_set_link_reply()) << set.DebugString();
  EXPECT_EQ(set.set_link_reply().changed_size(), 2);
  const uint64_t before = daemon_->epoch();
  Advance(kDebounce);
  EXPECT_GT(daemon_->epoch(), before);
  const core::Topology& topo = daemon_->topology().nominal();
  const core::LinkId down = topo.FindLink(*topo.FindNode("tor0"), *topo.FindNode("agg0")).value();
  for (const auto& [id, a] : daemon_->applied()) {
    for (const auto& f : a->assignment.flows) {
      for (core::LinkId l : f.path) EXPECT_NE(l, down) << id;
    }
  }
  EXPECT_EQ(sqlite_->LoadLinkOverrides().value().size(), 2u);
  req.mutable_set_link_request()->set_link("tor0->nothing");
  EXPECT_EQ(Admin(req).error().code(), v1::ERROR_CODE_NOT_FOUND);
  req.mutable_set_link_request()->set_link("tor0->agg1");
  req.mutable_set_link_request()->set_health(v1::LINK_HEALTH_DEGRADED);
  req.mutable_set_link_request()->set_capacity_bps(1e15);
  EXPECT_EQ(Admin(req).error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  // Issue #31: below the floor of 1 % of nominal (faults.min_capacity_fraction, the automatic
  // path's floor) is refused with the range; nothing changes. `cruxctl set-link ... degraded
  // --capacity-gbps 1e-9` sends 1 b/s.
  const double nominal_bps =
      topo.link(topo.FindLink(*topo.FindNode("tor0"), *topo.FindNode("agg1")).value())
          .capacity.ToBitsPerSec();
  const uint64_t links_version = daemon_->topology().version();
  for (double tiny : {1.0, 0.0099 * nominal_bps}) {
    req.mutable_set_link_request()->set_capacity_bps(tiny);
    const v1::Envelope refused = Admin(req);
    ASSERT_TRUE(refused.has_error()) << tiny;
    EXPECT_EQ(refused.error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
    EXPECT_THAT(refused.error().message(), HasSubstr("1% of nominal, faults.min_capacity_fraction"))
        << refused.error().message();
  }
  EXPECT_EQ(daemon_->topology().version(), links_version);
  // At the floor: accepted, and cruxctl's utilisation stays a number a person can read.
  req.mutable_set_link_request()->set_capacity_bps(0.01 * nominal_bps);
  ASSERT_TRUE(Admin(req).has_set_link_reply());
  req.mutable_set_link_request()->set_health(v1::LINK_HEALTH_UP);
  req.mutable_set_link_request()->set_capacity_bps(0);
  ASSERT_TRUE(Admin(req).has_set_link_reply());

  // Dry run: bringing the link back would change something, but nothing is applied.
  req.mutable_set_link_request()->set_link("tor0-agg0");
  req.mutable_set_link_request()->set_health(v1::LINK_HEALTH_UP);
  ASSERT_TRUE(Admin(req).has_set_link_reply());
  const uint64_t at = daemon_->epoch();
  v1::Envelope dry = protocol::NewEnvelope(12);
  dry.mutable_plan_dry_run_request();
  v1::Envelope changes = Admin(dry);
  ASSERT_TRUE(changes.has_plan_dry_run_reply()) << changes.DebugString();
  EXPECT_GT(changes.plan_dry_run_reply().replan_ms(), 0);
  EXPECT_EQ(daemon_->epoch(), at);
}

// What a daemon has in force, per job: its level and each flow's source port and path.
std::map<std::string, std::string> InForce(const Daemon& d) {
  std::map<std::string, std::string> out;
  for (const auto& [id, a] : d.applied()) {
    std::string s = "level " + std::to_string(a->assignment.level) + ";";
    for (const auto& f : a->assignment.flows) {
      s += " " + std::to_string(f.udp_sport) + ":";
      for (core::LinkId l : f.path) s += std::to_string(l.value()) + ",";
    }
    out[id] = s;
  }
  return out;
}

// Two jobs arrive one after the other (converged at once) and are planned in one run, on a
// daemon of its own (its own clock and state file); with `dry_run`, cruxctl asks for a dry run
// between the two arrivals. Returns what the run put in force.
std::map<std::string, std::string> PlanTwoArrivals(const DaemonConfig& base, bool dry_run) {
  const std::filesystem::path dir = TempDir(dry_run ? "arrivals_dry" : "arrivals");
  std::map<std::string, std::string> in_force;
  {
    DaemonConfig config = base;
    config.state_dir = dir.string();
    auto store = OpenSqliteStore(DatabasePath(config));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    auto topo = spec::ParseTopology(EmbeddedTopologyYaml(), "");
    EXPECT_TRUE(topo.ok()) << topo.status().ToString();
    ManualEventLoop loop;
    Metrics metrics;
    Capture client;
    Capture admin;
    auto d = Daemon::Create(config, std::move(topo).value(), "embedded:example_clos2", store->get(),
                            &loop, &metrics);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    Daemon& daemon = **d;
    daemon.SetClientSender(
        [&](const std::string& p, const v1::Envelope& m) { return client.Send(p, m); });
    daemon.SetAdminSender(
        [&](const std::string& p, const v1::Envelope& m) { return admin.Send(p, m); });
    daemon.Start();
    loop.Advance(kDebounce);  // The start run (no job yet).
    daemon.ProcessClient(In("peer-x", Register("x", {"host2", "host4"}, 4000000000, 1)));
    daemon.ProcessClient(In("peer-x", Profile("x", 87, 20, true, 2)));
    if (dry_run) {
      v1::Envelope dry = protocol::NewEnvelope(3);
      dry.mutable_plan_dry_run_request();
      daemon.ProcessAdmin(In("admin", dry));
      auto replies = admin.Take();
      EXPECT_EQ(replies.size(), 1u);
      EXPECT_TRUE(!replies.empty() && replies[0].second.has_plan_dry_run_reply());
    }
    daemon.ProcessClient(In("peer-y", Register("y", {"host9", "host7"}, 4000000000, 4)));
    daemon.ProcessClient(In("peer-y", Profile("y", 348, 20, true, 5)));
    loop.Advance(kDebounce);
    EXPECT_EQ(daemon.epoch(), 1u);
    in_force = InForce(daemon);
  }
  std::filesystem::remove_all(dir);
  return in_force;
}

// A dry run only looks: the next real run is the one it would have been without it. The stable
// planner continues the plan its last Schedule made; had the dry run planned on the engine the
// real runs use, x would have kept the level the dry run gave it alone, where the real run
// levels x and y together.
TEST_F(DaemonTest, ShadowAccountingIsShownInJobsImpactAndMetrics) {
  RegisterThree();
  for (const char* id : {"a", "b", "c"}) {
    Client(std::string("peer-") + id, Profile(id, std::string(id) == "a" ? 50 : 400, 20, true));
  }
  Advance(kDebounce);
  v1::Envelope req = protocol::NewEnvelope(7);
  req.mutable_list_jobs_request();
  const v1::Envelope jobs = Admin(req);
  ASSERT_EQ(jobs.list_jobs_reply().jobs_size(), 3);
  for (const v1::JobSummary& j : jobs.list_jobs_reply().jobs()) {
    EXPECT_TRUE(j.has_prediction()) << j.job_id();
    // Nobody is predicted faster than alone; ECMP is the counterfactual of the same flows.
    EXPECT_GE(j.predicted_ms(), j.period_ms() * (1 - 1e-3)) << j.job_id();
    EXPECT_GE(j.ecmp_ms(), j.period_ms() * (1 - 1e-3)) << j.job_id();
    EXPECT_NEAR(j.gain(), 1 - j.predicted_ms() / j.ecmp_ms(), 1e-9) << j.job_id();
    // The reported period (Profile: 2 x compute).
    EXPECT_DOUBLE_EQ(j.observed_ms(), j.job_id() == "a" ? 100 : 800) << j.job_id();
  }

  req = protocol::NewEnvelope(8);
  req.mutable_impact_request()->set_error_threshold(1e-9);
  v1::Envelope impact = Admin(req);
  ASSERT_TRUE(impact.has_impact_reply()) << impact.DebugString();
  const v1::ImpactReply& r = impact.impact_reply();
  EXPECT_TRUE(r.available());
  EXPECT_EQ(r.jobs(), 3u);
  EXPECT_EQ(r.gpus(), 48u);
  EXPECT_EQ(r.observed(), 3u);  // All three scheduled, all reporting.
  EXPECT_EQ(r.epoch(), daemon_->epoch());
  EXPECT_DOUBLE_EQ(r.error_threshold(), 1e-9);
  // Every job is off by more than 1e-9: the profile's period is not the model's.
  ASSERT_EQ(r.mispredicted_size(), 3);
  for (const v1::JobSummary& j : r.mispredicted()) {
    // Each carries its report and prediction, off by more than the threshold.
    EXPECT_DOUBLE_EQ(j.observed_ms(), j.job_id() == "a" ? 100 : 800) << j.job_id();
    EXPECT_GT(std::abs(j.observed_ms() - j.predicted_ms()) / j.observed_ms(), 1e-9) << j.job_id();
  }
  EXPECT_LE(r.gainers_size() + r.losers_size(), 3);
  req.mutable_impact_request()->set_error_threshold(10);
  EXPECT_EQ(Admin(req).impact_reply().mispredicted_size(), 0);
  // The daemon's default threshold when the request leaves it 0.
  req.mutable_impact_request()->set_error_threshold(0);
  EXPECT_DOUBLE_EQ(Admin(req).impact_reply().error_threshold(), config_.impact.error_threshold);

  const std::string text = metrics_.Serialize();
  EXPECT_THAT(text, HasSubstr("crux_impact_gpus_recovered "));
  EXPECT_THAT(text, HasSubstr("crux_impact_planned_gpus 48"));
  EXPECT_THAT(text, HasSubstr("crux_impact_prediction_error_count 3"));
  EXPECT_THAT(text, HasSubstr("crux_job_iteration_seconds{job=\"a\",kind=\"observed\"} 0.1"));
  EXPECT_THAT(text, HasSubstr("crux_job_iteration_seconds{job=\"c\",kind=\"ecmp\"}"));
}

// The estimate is off the plan's path and rate-limited (impact.interval_ms): a plan published
// within the interval of the previous estimate is estimated when the interval has passed (the
// newest plan waiting), and until then cruxctl shows the earlier plan's epoch.
TEST_F(DaemonTest, ShadowAccountingFollowsPlansAtMostEveryInterval) {
  Close();
  config_.impact.interval_ms = 500;
  Open();
  RegisterThree();
  Advance(kDebounce);
  auto impact = [this] {
    v1::Envelope req = protocol::NewEnvelope(8);
    req.mutable_impact_request();
    return Admin(req).impact_reply();
  };
  const uint64_t first = daemon_->epoch();
  ASSERT_GT(first, 0u);
  EXPECT_TRUE(impact().available());
  EXPECT_EQ(impact().epoch(), first);
  EXPECT_EQ(impact().jobs(), 3u);
  // A fourth job: a new plan at once, its estimate only 0.5 s after the first one started (the
  // lease is 1 s here).
  ASSERT_TRUE(Client("peer-d", Register("d", {"host3", "host7"})).has_register_job_reply());
  Advance(kDebounce);
  const uint64_t second = daemon_->epoch();
  ASSERT_GT(second, first);
  EXPECT_EQ(impact().epoch(), first);
  EXPECT_EQ(impact().jobs(), 3u);
  v1::Envelope req = protocol::NewEnvelope(9);
  req.mutable_list_jobs_request();
  const v1::Envelope jobs = Admin(req);
  ASSERT_EQ(jobs.list_jobs_reply().jobs_size(), 4);
  for (const v1::JobSummary& j : jobs.list_jobs_reply().jobs()) {
    EXPECT_EQ(j.has_prediction(), j.job_id() != "d") << j.job_id();  // Not estimated yet.
  }
  Advance(core::Duration::Millis(500));
  ASSERT_EQ(daemon_->epoch(), second);  // No other plan meanwhile.
  EXPECT_EQ(impact().epoch(), second);
  EXPECT_EQ(impact().jobs(), 4u);
  EXPECT_THAT(metrics_.Serialize(), HasSubstr("crux_impact_planned_gpus 64"));
}

TEST_F(DaemonTest, WithoutShadowAccountingNothingIsPredicted) {
  Close();
  config_.impact.enabled = false;
  Open();
  RegisterThree();
  Advance(kDebounce);
  v1::Envelope req = protocol::NewEnvelope(8);
  req.mutable_impact_request();
  const v1::ImpactReply r = Admin(req).impact_reply();
  EXPECT_FALSE(r.available());
  EXPECT_EQ(r.jobs(), 0u);
  req = protocol::NewEnvelope(9);
  req.mutable_list_jobs_request();
  const v1::Envelope jobs = Admin(req);
  ASSERT_EQ(jobs.list_jobs_reply().jobs_size(), 3);
  for (const v1::JobSummary& j : jobs.list_jobs_reply().jobs()) {
    EXPECT_FALSE(j.has_prediction()) << j.job_id();
  }
  EXPECT_THAT(metrics_.Serialize(), Not(HasSubstr("crux_job_iteration_seconds{")));
}

TEST_F(DaemonTest, DryRunDoesNotChangeTheNextRealPlan) {
  ASSERT_TRUE(config_.planner.stable);
  const std::map<std::string, std::string> without = PlanTwoArrivals(config_, false);
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(PlanTwoArrivals(config_, true), without);
}

// Test helpers for the switch tests.
v1::Envelope Hello(const std::string& name, uint64_t applied_epoch, uint64_t rid = 4) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_switch_hello()->set_switch_name(name);
  e.mutable_switch_hello()->set_applied_epoch(applied_epoch);
  e.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
  e.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(true);
  e.mutable_switch_hello()->mutable_capabilities()->set_dwrr(true);
  return e;
}

v1::Envelope Applied(const std::string& name, uint64_t epoch, bool ok, const std::string& error,
                     uint64_t rid = 5) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_switch_applied()->set_switch_name(name);
  e.mutable_switch_applied()->set_epoch(epoch);
  e.mutable_switch_applied()->set_ok(ok);
  e.mutable_switch_applied()->set_error(error);
  return e;
}

std::vector<v1::SwitchQosState> States(const std::vector<v1::Envelope>& pushes) {
  std::vector<v1::SwitchQosState> out;
  for (const auto& m : pushes) {
    if (m.has_switch_state()) out.push_back(m.switch_state());
  }
  return out;
}

TEST_F(DaemonTest, OnlySwitchesWhoseStateChangesGetAPushAndMapsFollowLevels) {
  RegisterThree();  // a, b, c: host0..2 (tor0) with host4..6 (tor1).
  Advance(kDebounce);
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", 0)).has_ack());
  EXPECT_TRUE(Client("agent-tor3", Hello("tor3", 0)).has_ack());
  ASSERT_EQ(States(pushes_["agent-tor0"]).size(), 1u);  // New agents get their full state.
  ASSERT_EQ(States(pushes_["agent-tor3"]).size(), 1u);
  const uint32_t da = daemon_->tracker().Find("a")->dscp;
  EXPECT_EQ(States(pushes_["agent-tor0"])[0].dscp_to_tc().at(da), 5u);  // Level 0 -> TC 5.
  // No job crosses tor3: job colours are best effort there, the static part is the same.
  const v1::SwitchQosState tor3 = States(pushes_["agent-tor3"])[0];
  EXPECT_EQ(tor3.dscp_to_tc().at(da), 0u);
  EXPECT_EQ(tor3.dscp_to_tc().at(48), 6u);
  EXPECT_EQ(tor3.dscp_to_tc().at(8), 1u);
  ASSERT_EQ(tor3.schedulers_size(), 7);  // default, storage, control, 4 job TCs.
  for (const auto& q : tor3.schedulers()) {
    if (q.queue() == 1) {
      EXPECT_EQ(q.type(), "DWRR");
      EXPECT_EQ(q.weight(), 40u);
    }
    if (q.queue() >= 2 && q.queue() <= 6) {
      EXPECT_EQ(q.type(), "STRICT");
    }
  }
  EXPECT_TRUE(Client("agent-tor0", Applied("tor0", daemon_->epoch(), true, "")).has_ack());

  // Job a's profile converges: it leaves the newcomer level, so its colour is re-mapped on the
  // switches its flows cross (tor0, tor1, the aggs) and on no other.
  const uint64_t before = daemon_->epoch();
  const uint64_t tor3_epoch = daemon_->enforcer().desired_epoch("tor3");
  EXPECT_TRUE(Client("peer-a", Profile("a", 100, 30, true)).has_ack());
  Advance(kDebounce);
  ASSERT_GT(daemon_->epoch(), before);
  const uint32_t level = static_cast<uint32_t>(daemon_->applied().at("a")->assignment.level);
  ASSERT_GE(level, 1u);
  auto tor0 = States(pushes_["agent-tor0"]);
  ASSERT_EQ(tor0.size(), 2u);
  EXPECT_EQ(tor0[1].epoch(), daemon_->epoch());
  EXPECT_EQ(tor0[1].dscp_to_tc().at(da),
            static_cast<uint32_t>(core::LevelTc(config_.qos, static_cast<int>(level))));
  EXPECT_EQ(tor0[1].dscp_to_tc().at(daemon_->tracker().Find("b")->dscp), 5u);
  EXPECT_EQ(States(pushes_["agent-tor3"]).size(), 1u);  // Unchanged: no push.
  EXPECT_EQ(daemon_->enforcer().desired_epoch("tor3"), tor3_epoch);
  EXPECT_EQ(daemon_->enforcer().desired_epoch("tor0"), daemon_->epoch());

  // A periodic hello that is up to date gets nothing; one behind its switch's desired epoch
  // (a lost push) gets the full state again.
  EXPECT_TRUE(Client("agent-tor3", Hello("tor3", before)).has_ack());
  EXPECT_EQ(States(pushes_["agent-tor3"]).size(), 1u);
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", before)).has_ack());
  ASSERT_EQ(States(pushes_["agent-tor0"]).size(), 3u);
  EXPECT_EQ(States(pushes_["agent-tor0"])[2].epoch(), daemon_->epoch());
}

TEST_F(DaemonTest, FailedSwitchApplyIsShownUntilItSucceeds) {
  RegisterThree();
  Advance(kDebounce);
  EXPECT_TRUE(Client("agent-tor1", Hello("tor1", 0)).has_ack());
  const uint64_t e = States(pushes_["agent-tor1"]).at(0).epoch();
  v1::Envelope list = protocol::NewEnvelope(6);
  list.mutable_list_switches_request();
  EXPECT_TRUE(
      Client("agent-tor1", Applied("tor1", e, false, "UNAVAILABLE: redis: connection refused"))
          .has_ack());
  v1::Envelope r = Admin(list);
  ASSERT_EQ(r.list_switches_reply().switches_size(), 1);
  EXPECT_EQ(r.list_switches_reply().switches(0).last_error(),
            "UNAVAILABLE: redis: connection refused");
  EXPECT_EQ(r.list_switches_reply().switches(0).applied_epoch(), 0u);
  EXPECT_EQ(r.list_switches_reply().switches(0).desired_epoch(), e);
  // While the agent retries on its own, its hellos do not trigger more pushes.
  EXPECT_TRUE(Client("agent-tor1", Hello("tor1", 0)).has_ack());
  EXPECT_EQ(States(pushes_["agent-tor1"]).size(), 1u);
  EXPECT_TRUE(Client("agent-tor1", Applied("tor1", e, true, "")).has_ack());
  r = Admin(list);
  EXPECT_EQ(r.list_switches_reply().switches(0).last_error(), "");
  EXPECT_EQ(r.list_switches_reply().switches(0).applied_epoch(), e);
  EXPECT_TRUE(r.list_switches_reply().switches(0).connected());
}

TEST_F(DaemonTest, ColoursAreStableAcrossARestartWithoutDuplicates) {
  RegisterThree();
  Advance(kDebounce);
  std::map<std::string, uint32_t> colours;
  for (const auto& [id, j] : daemon_->tracker().jobs()) colours[id] = j.dscp;
  EXPECT_EQ((std::set<uint32_t>{colours["a"], colours["b"], colours["c"]}).size(), 3u);
  Close();
  Open();
  for (const auto& [id, dscp] : colours) {
    ASSERT_NE(daemon_->tracker().Find(id), nullptr) << id;
    EXPECT_EQ(daemon_->tracker().Find(id)->dscp, dscp) << id;
    EXPECT_EQ(daemon_->tracker().pool().ColourOf(id), static_cast<int>(dscp)) << id;
  }
  // A re-registration keeps the colour; a new job gets a free one.
  v1::Envelope again = Client("peer-a2", Register("a", {"host0", "host4"}));
  EXPECT_TRUE(again.register_job_reply().already_known());
  EXPECT_EQ(again.register_job_reply().dscp(), colours["a"]);
  v1::Envelope d = Client("peer-d", Register("d", {"host3", "host7"}));
  ASSERT_TRUE(d.has_register_job_reply());
  for (const auto& [id, dscp] : colours) EXPECT_NE(d.register_job_reply().dscp(), dscp) << id;
  EXPECT_EQ(daemon_->tracker().SharedColours(), 0u);
  // Before the first plan after the restart there is no state to push; the plan pushes it.
  EXPECT_FALSE(daemon_->enforcer().qos_ready());
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", 0)).has_ack());
  EXPECT_TRUE(States(pushes_["agent-tor0"]).empty());
  Advance(kDebounce);
  ASSERT_EQ(States(pushes_["agent-tor0"]).size(), 1u);
  EXPECT_EQ(States(pushes_["agent-tor0"])[0].dscp_to_tc().at(colours["a"]), 5u);
}

TEST_F(DaemonTest, ExhaustedPoolSharesColoursAndCruxctlSeesIt) {
  Close();
  config_.qos.dscp_pool = {10, 12};
  Open();
  RegisterThree();
  Advance(kDebounce);
  std::map<uint32_t, int> use;
  for (const auto& [id, j] : daemon_->tracker().jobs()) ++use[j.dscp];
  EXPECT_EQ(use.size(), 2u);
  EXPECT_EQ(daemon_->tracker().SharedColours(), 2u);
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", 0)).has_ack());
  v1::Envelope list = protocol::NewEnvelope(6);
  list.mutable_list_switches_request();
  v1::Envelope r = Admin(list);
  ASSERT_EQ(r.list_switches_reply().switches_size(), 1);
  EXPECT_EQ(r.list_switches_reply().switches(0).dscp_colours_shared(), 2u);
  // A job ending frees its share; no one shares any more.
  v1::Envelope end = protocol::NewEnvelope(9);
  end.mutable_end_job()->set_job_id("c");
  EXPECT_TRUE(Client("peer-c", end).has_ack());
  EXPECT_EQ(daemon_->tracker().SharedColours(), 0u);
}

TEST_F(DaemonTest, AssignmentPushesCarryTheirSendTime) {
  // The wall clock is injected: a push carries what it says when the push is sent.
  uint64_t wall = 1'700'000'000'000'000'000;
  daemon_->SetWallClock([&wall] { return static_cast<int64_t>(wall); });
  RegisterThree();
  wall += 5;
  Advance(kDebounce);
  const v1::Assignment a = LastAssignment("peer-a");
  EXPECT_EQ(a.sent_unix_ns(), wall);
  EXPECT_EQ(a.state_id(), daemon_->state_id());
}

TEST_F(DaemonTest, ReloadedQosPushesTheNewSchedulerWeightWithANewEpoch) {
  RegisterThree();
  Advance(kDebounce);
  EXPECT_TRUE(Client("agent-tor2", Hello("tor2", 0)).has_ack());
  ASSERT_EQ(States(pushes_["agent-tor2"]).size(), 1u);
  const uint64_t before = daemon_->epoch();
  DaemonConfig c = config_;
  c.qos.reserved[1].weight = 20;  // storage
  c.qos.dscp_pool = {1, 2};       // Restart-only: reported and ignored.
  EXPECT_THAT(daemon_->Reload(c), ::testing::ElementsAre("qos.dscp_pool"));
  Advance(kDebounce);
  EXPECT_EQ(daemon_->epoch(), before + 1);
  auto st = States(pushes_["agent-tor2"]);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[1].epoch(), before + 1);
  bool seen = false;
  for (const auto& q : st[1].schedulers()) {
    if (q.queue() == 1) {
      EXPECT_EQ(q.weight(), 20u);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(daemon_->tracker().pool().num_colours(), 12u);
}

TEST_F(DaemonTest, AgentsAreNewOrReturningOnlyWhenTheyReallyAre) {
  // No jobs: the first plan after start (one debounce) establishes the static state.
  EXPECT_FALSE(daemon_->enforcer().qos_ready());
  Advance(kDebounce);
  EXPECT_TRUE(daemon_->enforcer().qos_ready());
  EXPECT_EQ(daemon_->epoch(), 0u) << "establishing the switch state needs no epoch";
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", 0)).has_ack());
  ASSERT_EQ(States(pushes_["agent-tor0"]).size(), 1u);  // New.
  EXPECT_EQ(States(pushes_["agent-tor0"])[0].dscp_to_tc_size(), 64);
  EXPECT_TRUE(Client("agent-tor0", Applied("tor0", 0, true, "")).has_ack());
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", 0)).has_ack());
  EXPECT_EQ(States(pushes_["agent-tor0"]).size(), 1u);  // Periodic hello: nothing.
  // Silent for longer than kAgentStaleMs: shown disconnected; its next hello is a return.
  Advance(core::Duration::Millis(kAgentStaleMs + 1000));
  v1::Envelope list = protocol::NewEnvelope(6);
  list.mutable_list_switches_request();
  EXPECT_FALSE(Admin(list).list_switches_reply().switches(0).connected());
  EXPECT_TRUE(Client("agent-tor0", Hello("tor0", 0)).has_ack());
  EXPECT_EQ(States(pushes_["agent-tor0"]).size(), 2u);
  EXPECT_TRUE(Admin(list).list_switches_reply().switches(0).connected());
  // Another peer speaking for the switch (agent moved / restarted with a new identity).
  EXPECT_TRUE(Client("agent-tor0-b", Hello("tor0", 0)).has_ack());
  EXPECT_EQ(States(pushes_["agent-tor0-b"]).size(), 1u);
}

TEST_F(DaemonTest, StoredColourOutsideANewPoolIsReplacedAndPersisted) {
  RegisterThree();
  Advance(kDebounce);
  Close();
  config_.qos.dscp_pool = {20, 10};  // 12 and 14 are gone; 10 stays.
  Open();
  EXPECT_EQ(daemon_->tracker().Find("a")->dscp, 10u);
  for (const char* id : {"b", "c"}) {
    const uint32_t d = daemon_->tracker().Find(id)->dscp;
    EXPECT_TRUE(d == 20u || d == 10u) << id << " " << d;
  }
  EXPECT_EQ(daemon_->tracker().SharedColours(), 2u);  // Three jobs, two colours.
  std::map<std::string, uint32_t> colours;
  for (const auto& [id, j] : daemon_->tracker().jobs()) colours[id] = j.dscp;
  Close();
  Open();  // The replacement colours were persisted.
  for (const auto& [id, d] : colours) EXPECT_EQ(daemon_->tracker().Find(id)->dscp, d) << id;
}

// The transport's send-queue waits become crux_transport_send_queue_seconds{endpoint}: each
// refresh adds what the counters gained since the last one.
TEST_F(DaemonTest, SendQueueWaitsAreExportedAsAHistogramPerEndpoint) {
  protocol::ServerCounters c;
  daemon_->AddTransportCounters("client", [&c] { return c; });
  c.send_queue_buckets[0] = 3;                                    // <= 0.1 ms.
  c.send_queue_buckets[protocol::kSendQueueBoundsMs.size()] = 1;  // Over 500 ms.
  c.send_queue_wait_ns = 600'000'000;
  Advance(core::Duration::Millis(1000));
  std::string text = metrics_.Serialize();
  const std::string name = "crux_transport_send_queue_seconds";
  EXPECT_THAT(text, HasSubstr(name + "_count{endpoint=\"client\"} 4"));
  EXPECT_THAT(text, HasSubstr(name + "_sum{endpoint=\"client\"} 0.6"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{endpoint=\"client\",le=\"0.0001\"} 3"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{endpoint=\"client\",le=\"0.5\"} 3"));
  c.send_queue_buckets[5] = 2;  // Two more, <= 10 ms.
  c.send_queue_wait_ns += 10'000'000;
  Advance(core::Duration::Millis(1000));
  text = metrics_.Serialize();
  EXPECT_THAT(text, HasSubstr(name + "_count{endpoint=\"client\"} 6"));
  EXPECT_THAT(text, HasSubstr(name + "_bucket{endpoint=\"client\",le=\"0.01\"} 5"));
}

}  // namespace
}  // namespace crux::daemon
