// cruxd with multi-host jobs (issue #17 item 4): crux-hostd agents register, report, keep alive
// and end one host's part each; cruxd merges the parts into one job and one profile, pushes the
// assignment to every part, and restores the parts after a restart. A whole Daemon on a
// ManualEventLoop over real SQLite (DaemonFixture).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "crux/protocol/validate.h"
#include "daemon_test_util.h"

namespace crux::daemon::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kComm = 0x5eed;
constexpr uint64_t kMB = 1000000;

v1::HostPart HostPartOf(const std::string& host, uint32_t expected = 2, uint32_t ranks = 2) {
  v1::HostPart h;
  h.set_host(host);
  h.set_hosts_expected(expected);
  h.set_local_ranks(ranks);
  return h;
}

// crux-hostd's registration of its host's part: the host, its ranks as GPUs, its first NIC.
v1::Envelope RegisterPart(const std::string& id, const std::string& host, uint64_t rid = 1,
                          uint32_t gpus = 2) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::RegisterJob* r = e.mutable_register_job();
  r->set_job_id(id);
  r->set_model("nccl");
  v1::HostPlacement* p = r->add_placement();
  p->set_host(host);
  p->set_gpus(gpus);
  p->add_nics()->set_name(host + "/nic0");
  *r->mutable_host_part() = HostPartOf(host);
  return e;
}

// A part's report: the host's median figures and one communicator of `nranks` ranks, `local`
// of them here, with (rank, peer rank, MB) entries.
v1::Envelope PartReport(const std::string& id, const std::string& host, uint64_t compute_ms,
                        std::vector<uint32_t> local,
                        std::vector<std::tuple<uint32_t, int32_t, uint64_t>> bytes,
                        uint64_t rid = 2, uint32_t samples = 5) {
  v1::Envelope e = Profile(id, compute_ms, samples, true, rid);
  v1::ProfileReport* p = e.mutable_profile_report();
  *p->mutable_host_part() = HostPartOf(host);
  v1::CommTraffic* c = p->add_comms();
  c->set_comm_hash(kComm);
  c->set_nranks(4);
  c->set_nnodes(2);
  for (uint32_t r : local) c->add_local_ranks(r);
  for (const auto& [rank, peer, mb] : bytes) {
    v1::RankPeerBytes* b = c->add_bytes();
    b->set_rank(rank);
    b->set_peer_rank(peer);
    b->set_bytes(mb * kMB);
  }
  return e;
}

v1::Envelope PartHeartbeat(const std::string& id, const std::string& host, uint64_t epoch,
                           uint64_t rid = 3) {
  v1::Envelope e = Heartbeat(id, epoch, rid);
  *e.mutable_heartbeat()->mutable_host_part() = HostPartOf(host);
  return e;
}

v1::Envelope PartEnd(const std::string& id, const std::string& host, uint64_t rid = 4) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_end_job()->set_job_id(id);
  *e.mutable_end_job()->mutable_host_part() = HostPartOf(host);
  return e;
}

v1::Envelope AckOf(const std::string& id, uint64_t epoch) {
  v1::Envelope e = protocol::NewEnvelope(0);
  e.mutable_ack()->set_job_id(id);
  e.mutable_ack()->set_epoch(epoch);
  e.mutable_ack()->set_ok(true);
  return e;
}

class MultiHostTest : public DaemonFixture {
 protected:
  v1::JobDetail Detail(const std::string& id) {
    v1::Envelope req = protocol::NewEnvelope(91);
    req.mutable_job_request()->set_job_id(id);
    return Admin(req).job_detail();
  }
  // A 4-rank ring, ranks 0, 1 on host0 and 2, 3 on host4 (another ToR): 1 -> 2 and 3 -> 0 cross
  // (150 MB each), 0 -> 1 and 2 -> 3 stay on their host (100 MB each).
  void RegisterRing() {
    v1::Envelope r0 = Client("agent0", RegisterPart("ring", "host0"));
    ASSERT_TRUE(r0.has_register_job_reply()) << r0.DebugString();
    EXPECT_TRUE(r0.register_job_reply().merges_host_parts());
    EXPECT_FALSE(r0.register_job_reply().already_known());
    v1::Envelope r4 = Client("agent4", RegisterPart("ring", "host4"));
    ASSERT_TRUE(r4.has_register_job_reply()) << r4.DebugString();
    EXPECT_FALSE(r4.register_job_reply().already_known()) << "a new part of a known job";
    EXPECT_EQ(r4.register_job_reply().dscp(), r0.register_job_reply().dscp());
  }
  void ReportRing() {
    ASSERT_TRUE(
        Client("agent0", PartReport("ring", "host0", 40, {0, 1}, {{0, 1, 100}, {1, 2, 150}}))
            .has_ack());
    ASSERT_TRUE(
        Client("agent4", PartReport("ring", "host4", 60, {2, 3}, {{2, 3, 100}, {3, 0, 150}}))
            .has_ack());
  }
};

TEST_F(MultiHostTest, PartsMergeIntoOneJobAndEveryPartGetsTheAssignment) {
  RegisterRing();
  ASSERT_EQ(daemon_->tracker().jobs().size(), 1u);
  const JobSession& j = daemon_->tracker().jobs().at("ring");
  ASSERT_EQ(j.demand.placement.size(), 2u);
  ReportRing();
  Advance(kDebounce);

  const core::LoopJob* lj = daemon_->control().Find("ring");
  ASSERT_NE(lj, nullptr);
  EXPECT_EQ(lj->phase, core::JobPhase::kScheduled);
  ASSERT_TRUE(lj->profile.has_value());
  EXPECT_EQ(lj->profile->compute_time, core::Duration::Millis(60));  // Upper median of 40, 60.
  EXPECT_EQ(lj->profile->bytes_per_iteration, core::Bytes::Of(300 * kMB));

  const v1::JobDetail d = Detail("ring");
  EXPECT_EQ(d.summary().gpus(), 4u);
  EXPECT_EQ(std::vector<std::string>(d.hosts().begin(), d.hosts().end()),
            (std::vector<std::string>{"host0", "host4"}));
  ASSERT_EQ(d.flows_size(), 2) << d.DebugString();
  std::map<std::pair<std::string, std::string>, uint64_t> flows;
  for (const v1::FlowDetail& f : d.flows()) {
    flows[{f.src_nic(), f.dst_nic()}] = f.bytes();
    EXPECT_NE(f.udp_sport(), 0u) << "cross-ToR flows are pinned";
  }
  EXPECT_EQ(flows[std::make_pair(std::string("host0/nic0"), std::string("host4/nic0"))], 150 * kMB);
  EXPECT_EQ(flows[std::make_pair(std::string("host4/nic0"), std::string("host0/nic0"))], 150 * kMB);
  ASSERT_EQ(d.parts_size(), 2);
  EXPECT_EQ(d.parts(0).host(), "host0");
  EXPECT_TRUE(d.parts(0).connected());
  EXPECT_EQ(d.parts(0).local_ranks(), 2u);
  EXPECT_EQ(d.parts(0).comms(), 1u);
  EXPECT_TRUE(d.merge().complete());
  EXPECT_EQ(d.merge().cross_host_bytes(), 300 * kMB);
  EXPECT_EQ(d.merge().same_host_bytes(), 200 * kMB);

  // Each agent got the job's assignment cut to its host: the same header (epoch, level, colour,
  // NCCL settings) and only the flow that leaves its own NIC, with the port cruxd picked.
  v1::Assignment a0 = LastAssignment("agent0");
  v1::Assignment a4 = LastAssignment("agent4");
  EXPECT_EQ(a0.epoch(), daemon_->epoch());
  EXPECT_EQ(a0.state(), v1::JOB_STATE_SCHEDULED);
  ASSERT_EQ(a0.flows_size(), 1) << a0.DebugString();
  ASSERT_EQ(a4.flows_size(), 1) << a4.DebugString();
  EXPECT_EQ(a0.flows(0).src_nic(), "host0/nic0");
  EXPECT_EQ(a0.flows(0).dst_nic(), "host4/nic0");
  EXPECT_EQ(a4.flows(0).src_nic(), "host4/nic0");
  EXPECT_EQ(a4.flows(0).dst_nic(), "host0/nic0");
  for (const v1::FlowDetail& f : d.flows()) {
    const v1::FlowAssignment& mine = f.src_nic() == "host0/nic0" ? a0.flows(0) : a4.flows(0);
    EXPECT_EQ(mine.udp_sport(), f.udp_sport()) << f.src_nic();
  }
  a0.clear_sent_unix_ns();
  a4.clear_sent_unix_ns();
  a0.clear_flows();
  a4.clear_flows();
  EXPECT_EQ(a0.SerializeAsString(), a4.SerializeAsString());

  // Acks and heartbeats count per part; a part behind gets the assignment again, alone.
  daemon_->ProcessClient(In("agent0", AckOf("ring", a0.epoch())));
  EXPECT_TRUE(client_.Take().empty()) << "an ack gets no reply";
  pushes_.clear();
  v1::Envelope hb = Client("agent4", PartHeartbeat("ring", "host4", a0.epoch() - 1));
  ASSERT_TRUE(hb.has_ack()) << hb.DebugString();
  ASSERT_EQ(pushes_["agent4"].size(), 1u);
  EXPECT_TRUE(pushes_["agent0"].empty());
  const v1::Assignment again = pushes_["agent4"][0].assignment();
  ASSERT_EQ(again.flows_size(), 1) << "the resend is the part's cut too";
  EXPECT_EQ(again.flows(0).src_nic(), "host4/nic0");
  const JobSession& after = daemon_->tracker().jobs().at("ring");
  EXPECT_EQ(after.parts.begin()->second.acked_epoch, a0.epoch());                 // host0.
  EXPECT_EQ(std::next(after.parts.begin())->second.acked_epoch, a0.epoch() - 1);  // host4.
}

TEST_F(MultiHostTest, AJobWaitsForItsHostsBeforeItIsScheduled) {
  ASSERT_TRUE(Client("agent0", RegisterPart("ring", "host0")).has_register_job_reply());
  ASSERT_TRUE(Client("agent0", PartReport("ring", "host0", 40, {0, 1}, {{0, 1, 100}, {1, 2, 150}}))
                  .has_ack());
  Advance(kDebounce);
  // One of two expected hosts: profiling, nothing attributed (rank 2's host is unknown).
  EXPECT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kProfiling);
  v1::JobDetail d = Detail("ring");
  EXPECT_FALSE(d.merge().complete());
  EXPECT_EQ(d.merge().unattributed_bytes(), 150 * kMB);
  EXPECT_EQ(d.flows_size(), 0);
  EXPECT_EQ(LastAssignment("agent0").level(), 0u);

  // The second host's agent joins: it gets the assignment in force at once, and once it
  // reports the job is complete, scheduled and has its flows.
  pushes_.clear();
  ASSERT_TRUE(Client("agent4", RegisterPart("ring", "host4")).has_register_job_reply());
  EXPECT_EQ(pushes_["agent4"].size(), 1u) << "the assignment in force, before any re-plan";
  ASSERT_TRUE(Client("agent4", PartReport("ring", "host4", 60, {2, 3}, {{2, 3, 100}, {3, 0, 150}}))
                  .has_ack());
  Advance(kDebounce);
  EXPECT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kScheduled);
  d = Detail("ring");
  EXPECT_TRUE(d.merge().complete());
  EXPECT_EQ(d.flows_size(), 2);
  EXPECT_EQ(LastAssignment("agent0").epoch(), LastAssignment("agent4").epoch());
}

TEST_F(MultiHostTest, APartSpeaksOnlyForItselfAndBadPartsDisturbNobody) {
  RegisterRing();
  ASSERT_TRUE(Client("other", Register("other", {"host1", "host5"})).has_register_job_reply());
  // agent4 reporting as host0's part.
  v1::Envelope r = Client("agent4", PartReport("ring", "host0", 40, {0, 1}, {}));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
  // A part never registered (host8) must register first.
  r = Client("agent8", PartReport("ring", "host8", 40, {0, 1}, {}));
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_UNKNOWN_JOB);
  // A host part naming a host that does not exist.
  r = Client("agent0", PartReport("ring", "host99", 40, {0, 1}, {}));
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_UNKNOWN_HOST);
  // Explicit NIC-level peers must leave the part's own host.
  v1::Envelope foreign = PartReport("ring", "host0", 40, {0, 1}, {});
  v1::PeerBytes* pb = foreign.mutable_profile_report()->add_peers();
  pb->set_local_nic("host4/nic0");
  pb->set_remote_nic("host0/nic0");
  pb->set_bytes(1);
  r = Client("agent0", foreign);
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(r.error().message(), HasSubstr("not on the part's host"));
  // A whole-job registration of a job made of parts, and a part of a whole job.
  r = Client("client", Register("ring", {"host0", "host4"}));
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_CONFLICT);
  r = Client("agent1", RegisterPart("other", "host1"));
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_CONFLICT);
  // Nothing of that changed the jobs.
  EXPECT_EQ(daemon_->tracker().jobs().at("ring").parts.size(), 2u);
  EXPECT_FALSE(daemon_->tracker().jobs().at("other").parted());
  EXPECT_EQ(daemon_->control().Find("ring")->profile, std::nullopt);
  ReportRing();  // The good parts still work.
  Advance(kDebounce);
  EXPECT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kScheduled);
}

TEST_F(MultiHostTest, ARailRankLandsOnTheNicOfItsGpuAndABadSlotIsRefused) {
  // A rail communicator of one rank per host (tensor parallelism 8 inside the host): rank 0 on
  // GPU 5 of host0, rank 1 on GPU 6 of host4. Hosts of the embedded Clos: 8 GPUs, 2 NICs, so
  // GPU g uses NIC g * 2 / 8: both ranks on nic1 (today's rank-order rule would say nic0).
  for (const auto& [agent, host] : {std::pair{"agent0", "host0"}, std::pair{"agent4", "host4"}}) {
    v1::Envelope reg = RegisterPart("rail", host);
    reg.mutable_register_job()->mutable_placement(0)->clear_nics();  // All of the host's NICs.
    ASSERT_TRUE(Client(agent, reg).has_register_job_reply());
  }
  auto report = [](const std::string& host, uint32_t rank, uint32_t slot) {
    v1::Envelope e = PartReport("rail", host, 40, {rank}, {{rank, 1 - rank, 150}});
    e.mutable_profile_report()->mutable_comms(0)->set_nranks(2);
    e.mutable_profile_report()->mutable_comms(0)->add_local_slots(slot);
    return e;
  };
  ASSERT_TRUE(Client("agent0", report("host0", 0, 5)).has_ack());
  ASSERT_TRUE(Client("agent4", report("host4", 1, 6)).has_ack());
  Advance(kDebounce);
  const v1::JobDetail d = Detail("rail");
  std::map<std::pair<std::string, std::string>, uint64_t> flows;
  for (const v1::FlowDetail& f : d.flows()) flows[{f.src_nic(), f.dst_nic()}] = f.bytes();
  EXPECT_EQ(flows, (std::map<std::pair<std::string, std::string>, uint64_t>{
                       {{"host0/nic1", "host4/nic1"}, 150 * kMB},
                       {{"host4/nic1", "host0/nic1"}, 150 * kMB}}))
      << d.DebugString();
  EXPECT_EQ(LastAssignment("agent0").flows(0).src_nic(), "host0/nic1");

  // GPU 8 of an 8-GPU host: refused naming the field; the part's previous report stays.
  v1::Envelope r = Client("agent0", report("host0", 0, 8));
  ASSERT_TRUE(r.has_error()) << r.DebugString();
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_INVALID_ARGUMENT);
  EXPECT_THAT(r.error().message(),
              HasSubstr("profile_report.comms[0].local_slots[0]: 8 is not a GPU of the host "
                        "(8 GPUs)"));
  Advance(kDebounce);
  EXPECT_EQ(Detail("rail").flows_size(), 2);
  EXPECT_EQ(Detail("rail").flows(0).src_nic(), "host0/nic1");
}

TEST_F(MultiHostTest, AnEndedPartLeavesAndTheJobEndsWithItsLast) {
  RegisterRing();
  ReportRing();
  Advance(kDebounce);
  const uint64_t epoch = daemon_->epoch();
  pushes_.clear();
  ASSERT_TRUE(Client("agent4", PartEnd("ring", "host4")).has_ack());
  ASSERT_NE(daemon_->tracker().Find("ring"), nullptr);
  EXPECT_EQ(daemon_->control().Find("ring")->demand.placement.size(), 1u);
  Advance(kDebounce);
  // host0 alone: its rank 1's bytes have no destination host; no flows; a new epoch for it.
  EXPECT_GT(daemon_->epoch(), epoch);
  EXPECT_EQ(LastAssignment("agent0").flows_size(), 0);
  EXPECT_TRUE(pushes_["agent4"].empty()) << "the part that left gets nothing";
  const v1::JobDetail d = Detail("ring");
  ASSERT_EQ(d.parts_size(), 1);
  EXPECT_EQ(d.merge().unattributed_bytes(), 150 * kMB);
  auto stored = sqlite_->LoadJobParts();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].host, "host0");

  ASSERT_TRUE(Client("agent0", PartEnd("ring", "host0")).has_ack());
  EXPECT_EQ(daemon_->tracker().Find("ring"), nullptr);
  EXPECT_EQ(daemon_->control().Find("ring"), nullptr);
  EXPECT_TRUE(sqlite_->LoadJobParts()->empty());
}

TEST_F(MultiHostTest, ASilentPartExpiresAloneAndTheJobWithItsLast) {
  RegisterRing();
  ReportRing();
  // host0's agent keeps heartbeating; host4's goes silent (lease 1 s).
  for (int i = 0; i < 6; ++i) {
    Advance(core::Duration::Millis(300));
    ASSERT_TRUE(Client("agent0", PartHeartbeat("ring", "host0", 0, 10 + i)).has_ack());
  }
  const JobSession* j = daemon_->tracker().Find("ring");
  ASSERT_NE(j, nullptr);
  ASSERT_EQ(j->parts.size(), 1u);
  EXPECT_EQ(daemon_->control().Find("ring")->demand.placement.size(), 1u);
  Advance(core::Duration::Millis(1500));
  EXPECT_EQ(daemon_->tracker().Find("ring"), nullptr);
  EXPECT_EQ(daemon_->control().Find("ring"), nullptr);
}

TEST_F(MultiHostTest, AVanishedHostSendsTheJobBackToProfilingUntilItsPartIsBack) {
  RegisterRing();
  ReportRing();
  Advance(kDebounce);
  ASSERT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kScheduled);
  // host4's agent (or host) vanishes: no end, no heartbeat. host0's keeps heartbeating.
  for (int i = 0; i < 6; ++i) {
    Advance(core::Duration::Millis(300));
    ASSERT_TRUE(Client("agent0", PartHeartbeat("ring", "host0", 0, 10 + i)).has_ack());
  }
  Advance(kDebounce);
  ASSERT_EQ(daemon_->tracker().Find("ring")->parts.size(), 1u);
  v1::JobDetail d = Detail("ring");
  EXPECT_FALSE(d.merge().complete()) << "1 of 2 expected hosts";
  EXPECT_EQ(d.merge().unattributed_bytes(), 150 * kMB);
  EXPECT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kProfiling);
  const v1::Assignment alone = LastAssignment("agent0");
  EXPECT_EQ(alone.flows_size(), 0);
  EXPECT_EQ(alone.state(), v1::JOB_STATE_PROFILING);
  // host4's agent comes back (a new connection): it registers and reports again; host0's last
  // report still counts, so the job is whole and scheduled again at once.
  ASSERT_TRUE(Client("agent4b", RegisterPart("ring", "host4", 20)).has_register_job_reply());
  ASSERT_TRUE(
      Client("agent4b", PartReport("ring", "host4", 60, {2, 3}, {{2, 3, 100}, {3, 0, 150}}, 21))
          .has_ack());
  Advance(kDebounce);
  d = Detail("ring");
  EXPECT_TRUE(d.merge().complete());
  EXPECT_EQ(d.flows_size(), 2);
  EXPECT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kScheduled);
  EXPECT_EQ(LastAssignment("agent4b").flows_size(), 1);
  EXPECT_EQ(LastAssignment("agent0").flows_size(), 1);
}

TEST_F(MultiHostTest, RestartRestoresThePartsTheirReportsAndThePlan) {
  RegisterRing();
  ReportRing();
  Advance(kDebounce);  // The plan's write stores the planned profile and the part reports first.
  const uint64_t epoch = daemon_->epoch();
  const auto applied = daemon_->applied().at("ring")->assignment;
  Close();
  Open();
  EXPECT_EQ(daemon_->epoch(), epoch);
  const JobSession* j = daemon_->tracker().Find("ring");
  ASSERT_NE(j, nullptr);
  ASSERT_EQ(j->parts.size(), 2u);
  EXPECT_TRUE(JobTracker::PeersOf(*j).empty()) << "restored parts have no connection yet";
  EXPECT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kScheduled);
  v1::JobDetail d = Detail("ring");
  ASSERT_EQ(d.parts_size(), 2);
  EXPECT_FALSE(d.parts(0).connected());
  EXPECT_EQ(d.parts(1).samples(), 5u);
  EXPECT_TRUE(d.merge().complete());
  EXPECT_EQ(d.merge().cross_host_bytes(), 300 * kMB);
  Advance(kDebounce);
  EXPECT_EQ(daemon_->epoch(), epoch) << "the restart plan reproduces the applied one";
  EXPECT_EQ(daemon_->applied().at("ring")->assignment, applied);

  // The agents come back (new connections): a heartbeat binds each part and gets the plan.
  pushes_.clear();
  ASSERT_TRUE(Client("agent0b", PartHeartbeat("ring", "host0", 0)).has_ack());
  ASSERT_TRUE(
      Client("agent4b", RegisterPart("ring", "host4")).register_job_reply().already_known());
  EXPECT_EQ(pushes_["agent0b"].size(), 1u);
  EXPECT_EQ(pushes_["agent4b"].size(), 1u);
  EXPECT_EQ(Client("agent4b", PartHeartbeat("ring", "host0", 0)).error().code(),
            v1::ERROR_CODE_PERMISSION_DENIED)
      << "host0's part is bound to agent0b now";
  // A report after the restart merges with the restored report of the other part.
  ASSERT_TRUE(Client("agent4b", PartReport("ring", "host4", 80, {2, 3}, {{2, 3, 100}, {3, 0, 150}}))
                  .has_ack());
  EXPECT_EQ(daemon_->control().Find("ring")->profile->compute_time, core::Duration::Millis(80));
  EXPECT_EQ(daemon_->control().Find("ring")->profile->peers.size(), 2u);
}

TEST_F(MultiHostTest, ABigJobIsMergedAtMostEveryIntervalAndNeverLeftBehind) {
  RegisterRing();
  // host0's agent reports a communicator with 5,000 byte entries (ranks of host4 and others,
  // 1 MB each):
  // more than the merge does eagerly.
  std::vector<std::tuple<uint32_t, int32_t, uint64_t>> many;
  for (int32_t peer = 2; peer < 5002; ++peer) many.emplace_back(0, peer, 1);
  v1::Envelope big = PartReport("ring", "host0", 40, {0, 1}, many);
  big.mutable_profile_report()->mutable_comms(0)->set_nranks(6000);
  ASSERT_TRUE(Client("agent0", big).has_ack());
  EXPECT_EQ(daemon_->control().Find("ring")->profile->compute_time, core::Duration::Millis(40))
      << "the first merge of a job runs at once";
  ASSERT_TRUE(Client("agent4", PartReport("ring", "host4", 60, {2, 3}, {{3, 0, 150}})).has_ack());
  EXPECT_EQ(daemon_->control().Find("ring")->profile->compute_time, core::Duration::Millis(40))
      << "a big job's next merge waits for its interval";
  Advance(core::Duration::Millis(99));
  EXPECT_EQ(daemon_->control().Find("ring")->profile->compute_time, core::Duration::Millis(40));
  Advance(core::Duration::Millis(1));
  const core::LoopJob* j = daemon_->control().Find("ring");
  EXPECT_EQ(j->profile->compute_time, core::Duration::Millis(60)) << "merged when it is due";
  // 0 -> 2 and 0 -> 3 (1 MB each) share host0/nic0 -> host4/nic0; 3 -> 0 goes back.
  EXPECT_EQ(j->profile->peers.size(), 2u);
  EXPECT_EQ(j->profile->bytes_per_iteration, core::Bytes::Of(152 * kMB));
  EXPECT_EQ(Detail("ring").merge().unattributed_bytes(), 4998 * kMB);  // Ranks 4..5001: no part.
}

TEST_F(MultiHostTest, AFailedPartRegistrationIsUndoneAndNotAcknowledged) {
  ASSERT_TRUE(Client("agent0", RegisterPart("ring", "host0")).has_register_job_reply());
  faulty_->fail_method = "PutJobParts";
  v1::Envelope r = Client("agent4", RegisterPart("ring", "host4"));
  ASSERT_TRUE(r.has_error());
  EXPECT_EQ(r.error().code(), v1::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(daemon_->tracker().Find("ring")->parts.size(), 1u);
  faulty_->fail_method.clear();
  ASSERT_TRUE(Client("agent4", RegisterPart("ring", "host4")).has_register_job_reply());
  EXPECT_EQ(daemon_->control().Find("ring")->demand.placement.size(), 2u);
  EXPECT_EQ(sqlite_->LoadJobParts()->size(), 2u);
}

// Issue #28: an agent whose parts accept batches gets the changed parts of one epoch in one
// AssignmentBatch (each the part's own cut, as it would have come alone) and answers with one
// AckBatch; a part that registered without the flag still gets its own push.
TEST_F(MultiHostTest, AnAgentGetsItsPartsOfAnEpochInOneBatchAndAcksThemInOne) {
  for (const std::string id : {"ring", "ring2"}) {
    for (const auto& [agent, host] : {std::pair{"agent0", "host0"}, std::pair{"agent4", "host4"}}) {
      v1::Envelope r = RegisterPart(id, host);
      // agent4's "ring2" part comes from an agent that does not take batches.
      r.mutable_register_job()->mutable_host_part()->set_accepts_batches(
          !(id == "ring2" && std::string(agent) == "agent4"));
      ASSERT_TRUE(Client(agent, r).has_register_job_reply());
    }
  }
  for (const std::string id : {"ring", "ring2"}) {
    ASSERT_TRUE(Client("agent0", PartReport(id, "host0", 40, {0, 1}, {{0, 1, 100}, {1, 2, 150}}))
                    .has_ack());
    ASSERT_TRUE(Client("agent4", PartReport(id, "host4", 60, {2, 3}, {{2, 3, 100}, {3, 0, 150}}))
                    .has_ack());
  }
  pushes_.clear();
  const uint64_t pushes_before = daemon_->enforcer().pushes();
  Advance(kDebounce);
  ASSERT_EQ(daemon_->control().Find("ring")->phase, core::JobPhase::kScheduled);
  ASSERT_EQ(daemon_->control().Find("ring2")->phase, core::JobPhase::kScheduled);
  const uint64_t epoch = daemon_->epoch();

  // agent0: one frame with both parts, each cut to host0.
  ASSERT_EQ(pushes_["agent0"].size(), 1u);
  ASSERT_TRUE(pushes_["agent0"][0].has_assignment_batch()) << pushes_["agent0"][0].DebugString();
  const v1::AssignmentBatch& b = pushes_["agent0"][0].assignment_batch();
  ASSERT_EQ(b.assignments_size(), 2);
  std::set<std::string> jobs;
  for (const v1::Assignment& a : b.assignments()) {
    jobs.insert(a.job_id());
    EXPECT_EQ(a.epoch(), epoch);
    EXPECT_NE(a.state_id(), 0u);
    EXPECT_GT(a.sent_unix_ns(), 0u);
    ASSERT_EQ(a.flows_size(), 1) << a.DebugString();
    EXPECT_EQ(a.flows(0).src_nic(), "host0/nic0");
  }
  EXPECT_EQ(jobs, (std::set<std::string>{"ring", "ring2"}));
  // agent4: "ring" in a batch of one (sent as a plain Assignment), "ring2" alone.
  ASSERT_EQ(pushes_["agent4"].size(), 2u);
  for (const v1::Envelope& e : pushes_["agent4"]) {
    ASSERT_TRUE(e.has_assignment()) << e.DebugString();
    EXPECT_EQ(e.assignment().flows(0).src_nic(), "host4/nic0");
  }
  EXPECT_EQ(daemon_->enforcer().pushes() - pushes_before, 4u) << "pushes count assignments";
  EXPECT_EQ(daemon_->enforcer().batch_frames(), 1u);

  // One AckBatch acks both parts on agent0; an ack in it that names a job the connection does
  // not speak for is refused alone, and nothing is sent back.
  v1::Envelope acks = protocol::NewEnvelope(0);
  for (const std::string id : {"ring", "ring2", "nobody"}) {
    v1::Ack* a = acks.mutable_ack_batch()->add_acks();
    a->set_job_id(id);
    a->set_epoch(epoch);
    a->set_ok(true);
  }
  ASSERT_TRUE(protocol::Validate(acks).ok());
  daemon_->ProcessClient(In("agent0", acks));
  EXPECT_TRUE(client_.Take().empty()) << "an AckBatch gets no reply";
  for (const std::string id : {"ring", "ring2"}) {
    const JobSession& j = daemon_->tracker().jobs().at(id);
    EXPECT_EQ(j.parts.begin()->second.acked_epoch, epoch) << id << " on host0";
    EXPECT_LT(std::next(j.parts.begin())->second.acked_epoch, epoch) << id << " on host4";
  }
}

// A batch names each job once: one connection speaking for two hosts of a job (not what
// crux-hostd does, but allowed) gets one of the two cuts in the batch and the other alone.
TEST_F(MultiHostTest, TwoPartsOfAJobOnOneConnectionAreNotBatchedTogether) {
  for (const char* host : {"host0", "host4"}) {
    v1::Envelope r = RegisterPart("ring", host);
    r.mutable_register_job()->mutable_host_part()->set_accepts_batches(true);
    ASSERT_TRUE(Client("agent", r).has_register_job_reply());
  }
  ASSERT_TRUE(Client("agent", PartReport("ring", "host0", 40, {0, 1}, {{0, 1, 100}, {1, 2, 150}}))
                  .has_ack());
  ASSERT_TRUE(Client("agent", PartReport("ring", "host4", 60, {2, 3}, {{2, 3, 100}, {3, 0, 150}}))
                  .has_ack());
  pushes_.clear();
  Advance(kDebounce);
  // The parts are not merged into a complete job here (cruxd binds one part per connection), but
  // the epoch changes the job's assignment: two valid pushes, never one batch naming it twice.
  ASSERT_EQ(pushes_["agent"].size(), 2u);
  for (const v1::Envelope& e : pushes_["agent"]) {
    ASSERT_TRUE(e.has_assignment()) << "a batch of one goes as an Assignment";
    EXPECT_EQ(e.assignment().job_id(), "ring");
    EXPECT_TRUE(protocol::Validate(e).ok());
  }
}

}  // namespace
}  // namespace crux::daemon::testing
