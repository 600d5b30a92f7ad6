// HostAgent with scripted ranks, daemon replies and time (no socket, no clock, no thread).
#include "crux/hostd/host_agent.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "crux/protocol/validate.h"

namespace crux::hostd {
namespace {

using core::Duration;

Duration Ms(int64_t ms) { return Duration::Millis(ms); }

HostdConfig Config() {
  HostdConfig c;
  c.host = "host1";
  c.daemon_endpoint = "tcp://cruxd:7450";
  c.insecure = true;
  c.nics = {{"host1/nic0", "mlx5_0", "::ffff:10.0.1.1"}};
  c.nic_by_address = {{"::ffff:10.0.1.1", "host1/nic0"}, {"::ffff:10.0.2.1", "host2/nic0"}};
  c.register_delay_ms = 100;
  c.end_delay_ms = 500;
  c.call_timeout_ms = 200;
  return c;
}

RankProfile Profile(int peer, uint64_t bytes) {
  RankProfile p;
  p.job_id = "job-a";
  p.period_ns = 100'000'000;
  p.comm_ns = 20'000'000;
  p.compute_ns = 80'000'000;
  p.samples = 6;
  p.converged = true;
  p.comms = {{0xC0, bytes, {{peer, bytes}}}};
  return p;
}

class HostAgentTest : public ::testing::Test {
 protected:
  void Rank(ConnId conn, pid_t pid, int rank, Role role = Role::kProfiler, uid_t uid = 1000,
            const std::string& job = "job-a") {
    agent_.OnLocalConnected(conn, pid, uid, now_);
    agent_.OnLocalMessage(conn, Hello{role, pid, job, job.empty() ? "" : "CRUX_JOB_ID", "v6"},
                          now_);
    if (role == Role::kProfiler) {
      agent_.OnLocalMessage(conn, CommInfo{0xC0, rank, 4, 2, "", true}, now_);
    }
  }

  // Advances to `t`, ticking; returns what went to cruxd.
  std::vector<v1::Envelope> At(Duration t) {
    now_ = t;
    agent_.Tick(now_);
    return agent_.TakeToDaemon();
  }

  void Reply(const v1::Envelope& request, v1::Envelope reply) {
    reply.set_protocol_version(1);
    reply.set_request_id(request.request_id());
    agent_.OnDaemonMessage(reply, now_, 0);
  }
  void Register(const v1::Envelope& request) {
    v1::Envelope r;
    r.mutable_register_job_reply()->set_job_id(request.register_job().job_id());
    r.mutable_register_job_reply()->set_lease_ms(3000);
    Reply(request, r);
  }
  void AckOk(const v1::Envelope& request) {
    v1::Envelope r;
    r.mutable_ack()->set_ok(true);
    Reply(request, r);
  }

  // Registers job-a with ranks 0 and 1 (pids 100, 101) and answers the registration.
  void RegisterTwoRanks() {
    Rank(1, 100, 0);
    Rank(2, 101, 1);
    ASSERT_TRUE(At(Ms(50)).empty());
    auto out = At(Ms(100));
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(out[0].has_register_job());
    Register(out[0]);
    agent_.TakeToDaemon();
  }

  v1::Envelope Push(uint64_t epoch) {
    v1::Envelope e;
    e.set_protocol_version(1);
    auto* a = e.mutable_assignment();
    a->set_job_id("job-a");
    a->set_epoch(epoch);
    a->set_state_id(7);
    a->set_dscp(26);
    a->set_traffic_class(104);
    a->set_state(v1::JOB_STATE_SCHEDULED);
    auto flow = [&](const char* s, const char* d, uint32_t port) {
      auto* f = a->add_flows();
      f->set_src_nic(s);
      f->set_dst_nic(d);
      f->set_udp_sport(port);
    };
    flow("host1/nic0", "host2/nic0", 0xC123);
    flow("host1/nic0", "host9/nic0", 0xC200);  // No known address: unresolved.
    flow("host2/nic0", "host1/nic0", 0xC300);  // Another host's flow.
    flow("host1/nic0", "host2/nic0", 0);       // Unpinned.
    return e;
  }

  Duration now_;
  HostAgent agent_{Config()};
};

TEST_F(HostAgentTest, RegistersTheHostPartAfterTheDelay) {
  Rank(1, 100, 0);
  Rank(2, 101, 1);
  EXPECT_TRUE(At(Ms(99)).empty());
  auto out = At(Ms(100));
  ASSERT_EQ(out.size(), 1u);
  const v1::RegisterJob& r = out[0].register_job();
  EXPECT_NE(out[0].request_id(), 0u);
  EXPECT_EQ(r.job_id(), "job-a");
  ASSERT_EQ(r.placement_size(), 1);
  EXPECT_EQ(r.placement(0).host(), "host1");
  EXPECT_EQ(r.placement(0).gpus(), 2u);
  ASSERT_EQ(r.placement(0).nics_size(), 1);
  EXPECT_EQ(r.placement(0).nics(0).name(), "host1/nic0");
  EXPECT_EQ(r.placement(0).nics(0).address(), "::ffff:10.0.1.1");
  EXPECT_EQ(r.host_part().host(), "host1");
  EXPECT_EQ(r.host_part().hosts_expected(), 2u);
  EXPECT_EQ(r.host_part().local_ranks(), 2u);
  EXPECT_TRUE(r.host_part().accepts_batches()) << "the agent takes AssignmentBatch pushes";
}

// A loaded host: the ranks said hello but their communicators (which name the host count and
// the ranks per host) come late. Registration waits for them instead of telling cruxd that the
// job spans 0 hosts; once they are in, it goes at once.
TEST_F(HostAgentTest, RegistrationWaitsUntilTheLocalRanksLookComplete) {
  for (auto [conn, pid] : {std::pair<ConnId, pid_t>{1, 100}, {2, 101}}) {
    agent_.OnLocalConnected(conn, pid, 1000, now_);
    agent_.OnLocalMessage(conn, Hello{Role::kProfiler, pid, "job-a", "CRUX_JOB_ID", "v6"}, now_);
  }
  EXPECT_EQ(agent_.NextWakeup(), Ms(100 * HostAgent::kRegisterWaitFactor));
  EXPECT_TRUE(At(Ms(100)).empty());
  agent_.OnLocalMessage(1, CommInfo{0xC0, 0, 4, 2, "", true}, Ms(150));
  EXPECT_TRUE(At(Ms(150)).empty());  // Rank 1's communicator is still missing.
  agent_.OnLocalMessage(2, CommInfo{0xC0, 1, 4, 2, "", true}, Ms(160));
  EXPECT_EQ(agent_.NextWakeup(), Ms(100));  // Overdue: due now.
  auto out = At(Ms(160));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].register_job().host_part().hosts_expected(), 2u);
  EXPECT_EQ(out[0].register_job().host_part().local_ranks(), 2u);
}

TEST_F(HostAgentTest, MergesTheRanksProfilesIntoOneHostReport) {
  RegisterTwoRanks();
  agent_.OnLocalMessage(1, Profile(1, 150'000'000), now_);
  auto out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);  // The first rank's profile is reported at once.
  AckOk(out[0]);
  agent_.OnLocalMessage(2, Profile(2, 150'000'000), now_);
  out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);  // The peer split changed: re-reported.
  const v1::ProfileReport& p = out[0].profile_report();
  EXPECT_EQ(p.job_id(), "job-a");
  EXPECT_EQ(p.iteration_period_ns(), 100'000'000u);
  EXPECT_EQ(p.compute_time_ns(), 80'000'000u);
  EXPECT_EQ(p.bytes_per_iteration(), 300'000'000u);
  EXPECT_TRUE(p.converged());
  EXPECT_EQ(p.host_part().host(), "host1");
  ASSERT_EQ(p.comms_size(), 1);
  const v1::CommTraffic& c = p.comms(0);
  EXPECT_EQ(c.comm_hash(), 0xC0u);
  EXPECT_EQ(c.nranks(), 4u);
  EXPECT_EQ(c.nnodes(), 2u);
  ASSERT_EQ(c.local_ranks_size(), 2);
  ASSERT_EQ(c.bytes_size(), 2);
  EXPECT_EQ(c.bytes(0).rank(), 0u);
  EXPECT_EQ(c.bytes(0).peer_rank(), 1);
  EXPECT_EQ(c.bytes(1).rank(), 1u);
  EXPECT_EQ(c.bytes(1).peer_rank(), 2);
  EXPECT_EQ(c.bytes(1).bytes(), 150'000'000u);
  AckOk(out[0]);
  // A small change is not re-reported; a large one is.
  RankProfile small = Profile(2, 160'000'000);
  agent_.OnLocalMessage(2, small, now_);
  EXPECT_TRUE(agent_.TakeToDaemon().empty());
  RankProfile large = Profile(2, 400'000'000);
  agent_.OnLocalMessage(2, large, now_);
  EXPECT_EQ(agent_.TakeToDaemon().size(), 1u);
}

TEST_F(HostAgentTest, ReportsEachRanksLocalSlotFromItsPluginsHello) {
  // Rank 1 runs on GPU 6 (pid 101), rank 0 on GPU 3 (pid 100): slots follow local_ranks.
  auto hello = [&](ConnId conn, pid_t pid, int rank, int slot) {
    agent_.OnLocalConnected(conn, pid, 1000, now_);
    agent_.OnLocalMessage(conn, Hello{Role::kProfiler, pid, "job-a", "CRUX_JOB_ID", "v6", slot},
                          now_);
    agent_.OnLocalMessage(conn, CommInfo{0xC0, rank, 4, 2, "", true}, now_);
  };
  hello(1, 100, 0, 3);
  hello(2, 101, 1, 6);
  auto out = At(Ms(100));
  ASSERT_EQ(out.size(), 1u);
  Register(out[0]);
  agent_.TakeToDaemon();
  agent_.OnLocalMessage(1, Profile(1, 150'000'000), now_);
  out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].profile_report().comms(0).local_slots_size(), 1);
  AckOk(out[0]);
  agent_.OnLocalMessage(2, Profile(2, 150'000'000), now_);
  out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);
  const v1::CommTraffic& c = out[0].profile_report().comms(0);
  ASSERT_EQ(c.local_ranks_size(), 2);
  ASSERT_EQ(c.local_slots_size(), 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c.local_slots(i), c.local_ranks(i) == 0 ? 3u : 6u) << "rank " << c.local_ranks(i);
  }
  const std::string status = agent_.StatusJson();
  EXPECT_NE(status.find(R"("local_slot":6)"), std::string::npos) << status;
}

TEST_F(HostAgentTest, ACommunicatorWithARankOfUnknownSlotReportsNoSlots) {
  RegisterTwoRanks();  // Hellos without a slot (older plugins).
  // pid 100 says its slot on a second connection; pid 101 never does.
  agent_.OnLocalConnected(4, 100, 1000, now_);
  agent_.OnLocalMessage(4, Hello{Role::kProfiler, 100, "job-a", "CRUX_JOB_ID", "v6", 2}, now_);
  agent_.OnLocalMessage(1, Profile(1, 150'000'000), now_);
  auto out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].profile_report().comms(0).local_slots_size(), 1) << "rank 0 alone: known";
  AckOk(out[0]);
  agent_.OnLocalMessage(2, Profile(2, 150'000'000), now_);
  out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);
  const v1::CommTraffic& c = out[0].profile_report().comms(0);
  EXPECT_EQ(c.local_ranks_size(), 2);
  EXPECT_EQ(c.local_slots_size(), 0) << "pid 101's slot is not known";
}

TEST_F(HostAgentTest, AssignmentBecomesAPinTableForEveryShimAndStaysWhenCruxdIsAway) {
  RegisterTwoRanks();
  Rank(3, 100, 0, Role::kVerbs, 1000, "");  // pid 100's shim: knows no job id itself.
  agent_.OnDaemonMessage(Push(2), now_, 0);
  auto local = agent_.TakeToLocal();
  ASSERT_EQ(local.size(), 1u);
  EXPECT_EQ(local[0].first, 3u);
  const auto& t = std::get<PinTable>(local[0].second);
  EXPECT_EQ(t.job_id, "job-a");
  EXPECT_EQ(t.epoch, 2u);
  EXPECT_EQ(t.state_id, 7u);
  EXPECT_EQ(t.traffic_class, 104);
  ASSERT_EQ(t.pins.size(), 1u);
  EXPECT_EQ(t.pins[0], (Pin{"mlx5_0", "::ffff:10.0.2.1", 0xC123}));
  EXPECT_EQ(agent_.counters().unresolved_flows, 1u);
  auto acks = agent_.TakeToDaemon();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].request_id(), 0u);
  EXPECT_EQ(acks[0].ack().epoch(), 2u);
  EXPECT_TRUE(acks[0].ack().ok());

  // cruxd goes away: requests time out, the session re-registers with backoff...
  for (int i = 1; i <= 40; ++i) At(now_ + Ms(250));
  // ...and a shim connecting meanwhile still gets the last table (fail static).
  Rank(4, 101, 1, Role::kVerbs, 1000, "");
  local = agent_.TakeToLocal();
  ASSERT_EQ(local.size(), 1u);
  EXPECT_EQ(local[0].first, 4u);
  EXPECT_EQ(std::get<PinTable>(local[0].second).epoch, 2u);
  // A stale push (same state, older epoch) changes nothing.
  agent_.OnDaemonMessage(Push(1), now_, 0);
  EXPECT_TRUE(agent_.TakeToLocal().empty());
}

// Issue #31 item 5: crux-hostd accepts leader-termed pushes (each job's client Session checks
// Assignment.term), so it keeps the highest term in a term file: after a restart (a new
// HostAgent over the same file) a push from a lower term (a deposed leader) is nacked and no pin
// table reaches the shims.
TEST_F(HostAgentTest, TheHighestTermSurvivesARestartAndALowerTermIsRefusedAfterIt) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("crux_hostd_term_" + std::to_string(::getpid())) / "hostd.term")
                               .string();
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  auto open = [&] {
    auto f = protocol::TermFile::Open(path, "host1");
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return std::move(f).value();
  };
  agent_.SetTermFile(open());
  RegisterTwoRanks();
  Rank(3, 100, 0, Role::kVerbs, 1000, "");
  v1::Envelope five = Push(2);
  five.mutable_assignment()->set_term(5);
  agent_.OnDaemonMessage(five, now_, 0);
  EXPECT_EQ(agent_.TakeToLocal().size(), 1u);
  auto acks = agent_.TakeToDaemon();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_TRUE(acks[0].ack().ok());
  EXPECT_EQ(agent_.highest_term(), 5u);
  EXPECT_EQ(open().term(), 5u) << "recorded before the ack";

  // The restarted crux-hostd: a new agent over the same file, the same job's ranks again.
  HostAgent restarted(Config(), 2);
  restarted.SetTermFile(open());
  EXPECT_EQ(restarted.highest_term(), 5u);
  for (auto [conn, pid, rank] : {std::tuple<ConnId, pid_t, int>{1, 100, 0}, {2, 101, 1}}) {
    restarted.OnLocalConnected(conn, pid, 1000, now_);
    restarted.OnLocalMessage(conn, Hello{Role::kProfiler, pid, "job-a", "CRUX_JOB_ID", "v6"}, now_);
    restarted.OnLocalMessage(conn, CommInfo{0xC0, rank, 4, 2, "", true}, now_);
  }
  restarted.OnLocalConnected(3, 100, 1000, now_);
  restarted.OnLocalMessage(3, Hello{Role::kVerbs, 100, "", "", "v6"}, now_);
  restarted.TakeToLocal();
  restarted.Tick(now_ + Ms(100));
  auto out = restarted.TakeToDaemon();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].has_register_job());
  v1::Envelope reg;
  reg.set_protocol_version(1);
  reg.set_request_id(out[0].request_id());
  reg.mutable_register_job_reply()->set_job_id("job-a");
  reg.mutable_register_job_reply()->set_lease_ms(3000);
  restarted.OnDaemonMessage(reg, now_ + Ms(100), 0);
  restarted.TakeToDaemon();
  // Term 4 with a newer epoch: refused (nacked), nothing pinned.
  v1::Envelope four = Push(9);
  four.mutable_assignment()->set_term(4);
  restarted.OnDaemonMessage(four, now_ + Ms(100), 0);
  EXPECT_TRUE(restarted.TakeToLocal().empty());
  acks = restarted.TakeToDaemon();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_FALSE(acks[0].ack().ok());
  EXPECT_NE(acks[0].ack().error().find("deposed"), std::string::npos) << acks[0].ack().error();
  // Term 6: recorded, applied.
  v1::Envelope six = Push(10);
  six.mutable_assignment()->set_term(6);
  restarted.OnDaemonMessage(six, now_ + Ms(100), 0);
  EXPECT_EQ(restarted.TakeToLocal().size(), 1u);
  EXPECT_EQ(open().term(), 6u);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST_F(HostAgentTest, ProcessesOfAnotherUidCannotJoinAJob) {
  Rank(1, 100, 0);
  Rank(9, 200, 0, Role::kProfiler, 2000);
  EXPECT_EQ(agent_.counters().refused_uid, 1u);
  // One of the two local ranks its communicator promises: registered at the latest.
  EXPECT_TRUE(At(Ms(100)).empty());
  auto out = At(Ms(100 * HostAgent::kRegisterWaitFactor));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].register_job().placement(0).gpus(), 1u);
  auto status = nlohmann::json::parse(agent_.StatusJson());
  EXPECT_NE(status["last_error"].get<std::string>().find("claims job 'job-a' of uid 1000"),
            std::string::npos);
}

// The Refused messages queued for local connections, by connection.
RankProfile ProfileOf(const std::string& job) {
  RankProfile p;
  p.job_id = job;
  return p;
}

std::vector<std::pair<ConnId, Refused>> RefusalsOf(HostAgent& agent) {
  std::vector<std::pair<ConnId, Refused>> out;
  for (auto& [conn, m] : agent.TakeToLocal()) {
    if (const auto* r = std::get_if<Refused>(&m)) out.emplace_back(conn, *r);
  }
  return out;
}

TEST(HostAgentLimitsTest, EachLimitRefusesWithItsReasonAndRootIsExempt) {
  HostdConfig config = Config();
  config.limits = {.jobs_per_uid = 2, .ranks_per_uid = 3, .jobs_non_root = 3};
  HostAgent agent(config);
  const Duration t = Ms(0);
  auto start = [&](ConnId conn, pid_t pid, uid_t uid, const std::string& job) {
    agent.OnLocalConnected(conn, pid, uid, t);
    agent.OnLocalMessage(conn, Hello{Role::kProfiler, pid, job, "CRUX_JOB_ID", "v6"}, t);
    return RefusalsOf(agent);
  };
  EXPECT_TRUE(start(1, 100, 1000, "a").empty());
  EXPECT_TRUE(start(2, 101, 1000, "b").empty());
  auto r = start(3, 102, 1000, "c");  // A third job of uid 1000.
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, 3u);
  EXPECT_EQ(r[0].second.job_id, "c");
  EXPECT_EQ(r[0].second.code, kRefusedResourceExhausted);
  EXPECT_NE(r[0].second.reason.find("limits.jobs_per_uid: uid 1000 already has 2 jobs"),
            std::string::npos)
      << r[0].second.reason;
  // Its profile names the job again: not answered twice, not counted twice.
  agent.OnLocalMessage(3, ProfileOf("c"), t);
  EXPECT_TRUE(RefusalsOf(agent).empty());
  EXPECT_EQ(agent.counters().refused_quota, 1u);

  EXPECT_TRUE(start(4, 103, 1000, "a").empty());  // A third rank.
  r = start(5, 104, 1000, "a");                   // A fourth.
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].second.reason.find("limits.ranks_per_uid"), std::string::npos);

  EXPECT_TRUE(start(6, 200, 2000, "d").empty());  // Three non-root jobs on the host now.
  r = start(7, 300, 3000, "e");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].second.reason.find("limits.jobs_non_root"), std::string::npos);
  // Root is exempt.
  EXPECT_TRUE(start(8, 1, 0, "r1").empty());
  EXPECT_TRUE(start(9, 2, 0, "r2").empty());
  EXPECT_EQ(agent.jobs(), 5u);
  EXPECT_EQ(agent.counters().refused_quota, 3u);

  // Another uid's job: refused as such.
  r = start(10, 301, 3000, "a");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].second.code, kRefusedPermissionDenied);
  EXPECT_EQ(r[0].second.reason, "job 'a' belongs to another user");  // Not whose.
  EXPECT_EQ(agent.counters().refused_uid, 1u);

  // Job b ends (its process left, end_delay_ms passed): pid 102's next profile gets job c in.
  agent.OnLocalClosed(2, t);
  agent.Tick(Ms(Config().end_delay_ms));
  agent.OnLocalMessage(3, ProfileOf("c"), Ms(Config().end_delay_ms));
  EXPECT_TRUE(RefusalsOf(agent).empty());
  auto status = nlohmann::json::parse(agent.StatusJson());
  std::set<std::string> ids;
  for (const auto& j : status["jobs"]) ids.insert(j["job_id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"a", "c", "d", "r1", "r2"}));
  EXPECT_EQ(status["limits"]["usage_by_uid"]["1000"]["jobs"], 2);
  EXPECT_EQ(status["limits"]["usage_by_uid"]["1000"]["ranks"], 3);
}

TEST(HostAgentLimitsTest, RefusalsAreLoggedTheFirstTenThenEveryHundredth) {
  HostdConfig config = Config();
  config.limits.jobs_per_uid = 1;
  HostAgent agent(config);
  agent.OnLocalConnected(1, 100, 1000, Ms(0));
  agent.OnLocalMessage(1, Hello{Role::kProfiler, 100, "mine", "CRUX_JOB_ID", "v6"}, Ms(0));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 150; ++i) {
    const ConnId conn = 10 + i;
    agent.OnLocalConnected(conn, 1000 + i, 1000, Ms(0));
    agent.OnLocalMessage(
        conn, Hello{Role::kProfiler, 1000 + i, "spam-" + std::to_string(i), "CRUX_JOB_ID", "v6"},
        Ms(0));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(agent.counters().refused_quota, 150u);
  EXPECT_EQ(RefusalsOf(agent).size(), 150u);  // Every one answered.
  size_t lines = 0;
  for (size_t at = log.find("refused job"); at != std::string::npos;
       at = log.find("refused job", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 11u) << log;  // 1-10 and the 100th.
  EXPECT_NE(log.find("'spam-99' of process 1099 (uid 1000): limits.jobs_per_uid"),
            std::string::npos)
      << log;
}

TEST(HostAgentLimitsTest, StatusShowsANonRootUidOnlyItsOwnJobsAndRefusals) {
  HostdConfig config = Config();
  config.limits.jobs_per_uid = 1;
  HostAgent agent(config);
  auto start = [&](ConnId conn, pid_t pid, uid_t uid, const std::string& job) {
    agent.OnLocalConnected(conn, pid, uid, Ms(0));
    agent.OnLocalMessage(conn, Hello{Role::kProfiler, pid, job, "CRUX_JOB_ID", "v6"}, Ms(0));
  };
  start(1, 100, 1000, "a");
  start(2, 101, 1000, "a2");  // Refused.
  start(3, 200, 2000, "b");
  start(4, 300, 3000, "a");  // Refused: 1000's job.
  start(5, 1, 0, "r");
  agent.TakeToLocal();
  // Each connection's status request is answered with its uid's view.
  agent.OnLocalMessage(2, StatusRequest{}, Ms(0));
  agent.OnLocalMessage(5, StatusRequest{}, Ms(0));
  auto replies = agent.TakeToLocal();
  ASSERT_EQ(replies.size(), 2u);
  auto own = nlohmann::json::parse(std::get<StatusReply>(replies[0].second).json);
  auto all = nlohmann::json::parse(std::get<StatusReply>(replies[1].second).json);
  ASSERT_EQ(own["jobs"].size(), 1u);
  EXPECT_EQ(own["jobs"][0]["job_id"], "a");
  EXPECT_EQ(own["viewer"]["uid"], 1000);
  EXPECT_EQ(own["processes"], 2);
  EXPECT_NE(own["last_error"].get<std::string>().find("'a2'"), std::string::npos);
  EXPECT_EQ(own["limits"]["usage_by_uid"].size(), 1u);
  EXPECT_EQ(own.dump().find("\"b\""), std::string::npos);
  EXPECT_EQ(all["jobs"].size(), 3u);
  EXPECT_EQ(all["viewer"]["scope"], "all jobs");
  EXPECT_NE(all["last_error"].get<std::string>().find("uid 3000"), std::string::npos);
  EXPECT_EQ(all["counters"]["refused_quota"], 1);
  EXPECT_EQ(all["counters"]["refused_uid"], 1);
}

TEST_F(HostAgentTest, JobEndsAfterItsRanksLeft) {
  RegisterTwoRanks();
  agent_.OnLocalClosed(1, now_);
  agent_.OnLocalClosed(2, now_);
  EXPECT_EQ(agent_.NextWakeup(), Ms(100) + Ms(500));
  auto out = At(Ms(599));
  for (const auto& e : out) EXPECT_FALSE(e.has_end_job());
  out = At(Ms(600));
  ASSERT_FALSE(out.empty());
  ASSERT_TRUE(out.back().has_end_job());
  EXPECT_EQ(out.back().end_job().host_part().host(), "host1");
  AckOk(out.back());
  At(Ms(601));
  EXPECT_EQ(agent_.jobs(), 0u);
}

TEST_F(HostAgentTest, RepliesAreRoutedToTheirJobOnTheSharedConnection) {
  Rank(1, 100, 0);
  Rank(2, 300, 0, Role::kProfiler, 1000, "job-b");
  auto out = At(Ms(100 * HostAgent::kRegisterWaitFactor));  // One local rank each.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0].request_id(), out[1].request_id());
  // Answer job-b first; an unknown request id is stray.
  const v1::Envelope& b = out[0].register_job().job_id() == "job-b" ? out[0] : out[1];
  Register(b);
  v1::Envelope stray;
  stray.set_request_id(999);
  stray.mutable_ack()->set_ok(true);
  agent_.OnDaemonMessage(stray, now_, 0);
  EXPECT_EQ(agent_.counters().stray_daemon_messages, 1u);
  auto status = nlohmann::json::parse(agent_.StatusJson());
  for (const auto& j : status["jobs"]) {
    EXPECT_EQ(j["registered"].get<bool>(), j["job_id"] == "job-b") << j.dump();
  }
}

// Issue #28: cruxd pushes an agent's changed parts of one epoch in one AssignmentBatch. Each
// assignment is applied as if it had come alone (its job's pin table), one naming no job of the
// host is stray, and the acks go back in one AckBatch.
TEST_F(HostAgentTest, AnAssignmentBatchIsAppliedPerJobAndAckedInOneFrame) {
  Rank(1, 100, 0);
  Rank(2, 300, 0, Role::kProfiler, 1000, "job-b");
  Rank(3, 100, 0, Role::kVerbs, 1000, "");  // pid 100's shim (job-a).
  Rank(4, 300, 0, Role::kVerbs, 1000, "");  // pid 300's shim (job-b).
  auto out = At(Ms(100 * HostAgent::kRegisterWaitFactor));
  ASSERT_EQ(out.size(), 2u);
  for (const v1::Envelope& r : out) Register(r);
  agent_.TakeToDaemon();
  agent_.TakeToLocal();

  v1::Envelope batch;
  batch.set_protocol_version(1);
  for (const char* job : {"job-a", "job-b", "job-gone"}) {
    v1::Assignment a = Push(3).assignment();
    a.set_job_id(job);
    *batch.mutable_assignment_batch()->add_assignments() = a;
  }
  ASSERT_TRUE(protocol::Validate(batch).ok());
  agent_.OnDaemonMessage(batch, now_, 0);
  EXPECT_EQ(agent_.counters().assignment_batches, 1u);
  EXPECT_EQ(agent_.counters().stray_daemon_messages, 1u) << "job-gone";

  std::map<ConnId, std::string> tables;
  for (const auto& [conn, msg] : agent_.TakeToLocal()) {
    const auto& t = std::get<PinTable>(msg);
    EXPECT_EQ(t.epoch, 3u);
    tables[conn] = t.job_id;
  }
  EXPECT_EQ(tables, (std::map<ConnId, std::string>{{3, "job-a"}, {4, "job-b"}}));

  auto acks = agent_.TakeToDaemon();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].request_id(), 0u);
  ASSERT_TRUE(acks[0].has_ack_batch()) << acks[0].DebugString();
  std::set<std::string> acked;
  for (const v1::Ack& a : acks[0].ack_batch().acks()) {
    EXPECT_TRUE(a.ok()) << a.DebugString();
    EXPECT_EQ(a.epoch(), 3u);
    acked.insert(a.job_id());
  }
  EXPECT_EQ(acked, (std::set<std::string>{"job-a", "job-b"}));
  EXPECT_TRUE(protocol::Validate(acks[0]).ok());

  // The same batch again: stale for both jobs (acked, nothing re-pinned).
  agent_.OnDaemonMessage(batch, now_, 0);
  EXPECT_TRUE(agent_.TakeToLocal().empty());
  acks = agent_.TakeToDaemon();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].ack_batch().acks_size(), 2);
}

// Issue #31 item 6: when the connection to cruxd drops and comes up again (a new HA leader),
// every job of the host speaks at once on it instead of at its next heartbeat.
TEST_F(HostAgentTest, EveryJobFollowsANewConnectionAtOnce) {
  Rank(1, 100, 0);
  Rank(2, 300, 0, Role::kProfiler, 1000, "job-b");
  auto out = At(Ms(100 * HostAgent::kRegisterWaitFactor));
  ASSERT_EQ(out.size(), 2u);
  for (const v1::Envelope& reg : out) Register(reg);  // Lease 3 s: heartbeats every second.
  EXPECT_TRUE(agent_.TakeToDaemon().empty());
  const Duration registered = now_;
  out = At(registered + Ms(1000));
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].has_heartbeat());
  // Lost with both heartbeats in flight: nothing is sent until a connection is up again, and a
  // reply to the old connection's requests is stray.
  now_ = registered + Ms(1100);
  agent_.OnDaemonConnectionChange(/*lost=*/true, /*connected=*/false, now_);
  EXPECT_TRUE(agent_.TakeToDaemon().empty());
  AckOk(out[0]);
  EXPECT_EQ(agent_.counters().stray_daemon_messages, 1u);
  now_ = registered + Ms(1300);
  agent_.OnDaemonConnectionChange(/*lost=*/false, /*connected=*/true, now_);
  out = agent_.TakeToDaemon();
  ASSERT_EQ(out.size(), 2u);
  std::set<std::string> jobs;
  for (const v1::Envelope& hb : out) {
    ASSERT_TRUE(hb.has_heartbeat());
    EXPECT_EQ(hb.heartbeat().host_part().host(), "host1");
    jobs.insert(hb.heartbeat().job_id());
    AckOk(hb);
  }
  EXPECT_EQ(jobs, (std::set<std::string>{"job-a", "job-b"}));
  EXPECT_EQ(agent_.counters().daemon_connections_lost, 1u);
  EXPECT_EQ(agent_.counters().daemon_reconnects, 1u);
  EXPECT_EQ(agent_.counters().stray_daemon_messages, 1u);
  auto status = nlohmann::json::parse(agent_.StatusJson());
  EXPECT_EQ(status["counters"]["daemon_reconnects"], 1u) << status.dump();
}

class CountingProbe : public HostProbe {
 public:
  std::string_view name() const override { return "count"; }
  Duration interval() const override { return Ms(1000); }
  ProbeResult Run(const ProbeContext& ctx) override {
    ++runs;
    ProbeResult r;
    r.summary = std::to_string(ctx.qps.size()) + " qps";
    r.data = {{"runs", std::to_string(runs)}};
    return r;
  }
  int runs = 0;
};

TEST_F(HostAgentTest, ProbesRunOnTheirScheduleAndShowInTheStatus) {
  auto probe = std::make_unique<CountingProbe>();
  CountingProbe* p = probe.get();
  agent_.AddProbe(std::move(probe));
  Rank(3, 100, 0, Role::kVerbs, 1000, "job-a");
  agent_.OnLocalMessage(3, QpInfo{"mlx5_0", 1, 0x10, 0x20, "::ffff:10.0.2.1", 0, 0, false}, now_);
  At(Ms(0));
  At(Ms(500));
  At(Ms(1000));
  EXPECT_EQ(p->runs, 2);
  agent_.OnLocalConnected(7, 555, 1000, now_);
  agent_.OnLocalMessage(7, StatusRequest{}, now_);
  auto local = agent_.TakeToLocal();
  ASSERT_EQ(local.size(), 1u);
  auto status = nlohmann::json::parse(std::get<StatusReply>(local[0].second).json);
  EXPECT_EQ(status["host"], "host1");
  EXPECT_EQ(status["probes"][0]["name"], "count");
  EXPECT_EQ(status["probes"][0]["summary"], "1 qps");
}

// A probe that sees the planned probes and returns one capacity measurement per planned probe
// and round (a round per Run).
class CapacityProbe : public HostProbe {
 public:
  std::string_view name() const override { return "capacity"; }
  Duration interval() const override { return Ms(100); }
  ProbeResult Run(const ProbeContext& ctx) override {
    seen = ctx.planned;
    ProbeResult r;
    r.round = ++rounds;
    for (const auto& [job, planned] : ctx.planned) {
      for (const PlannedProbe& p : planned) {
        CapacityMeasurement m;
        m.jobs = {job};
        m.src_nic = p.src_nic;
        m.dst_nic = p.dst_nic;
        m.sport = p.sport;
        m.sent = 32;
        m.received = 32;
        m.bytes = core::Bytes::Of(31 * 1472);
        m.transfer_time = Duration::Micros(400);
        m.send_time = Duration::Micros(50);
        r.capacity.push_back(m);
      }
    }
    if (repeat_round) r.round = 1;
    return r;
  }
  std::map<std::string, std::vector<PlannedProbe>> seen;
  uint64_t rounds = 0;
  bool repeat_round = false;
};

TEST_F(HostAgentTest, PlannedProbesOfThisHostAreProbedAndTheirCapacityReportedOncePerRound) {
  auto probe = std::make_unique<CapacityProbe>();
  CapacityProbe* p = probe.get();
  agent_.AddProbe(std::move(probe));
  RegisterTwoRanks();
  v1::Envelope push = Push(2);
  auto planned = [&](const char* s, const char* d, uint32_t port) {
    v1::ProbeTarget* t = push.mutable_assignment()->add_probes();
    t->set_src_nic(s);
    t->set_dst_nic(d);
    t->set_udp_sport(port);
  };
  planned("host1/nic0", "host2/nic0", 0xD001);
  planned("host2/nic0", "host1/nic0", 0xD002);  // Leaves another host: not ours.
  planned("host1/nic0", "host9/nic0", 0xD003);  // No address known for the remote NIC.
  agent_.OnDaemonMessage(push, now_, 0);
  agent_.TakeToDaemon();
  std::vector<v1::Envelope> reports;
  for (const v1::Envelope& e : At(now_ + Ms(100))) {
    if (e.has_host_telemetry()) reports.push_back(e);
  }
  ASSERT_EQ(p->seen.size(), 1u);
  ASSERT_EQ(p->seen["job-a"].size(), 1u);
  const PlannedProbe& seen = p->seen["job-a"][0];
  EXPECT_EQ(seen.src_nic, "host1/nic0");
  EXPECT_EQ(seen.device, "mlx5_0");
  EXPECT_EQ(seen.dst_nic, "host2/nic0");
  EXPECT_EQ(seen.remote_gid, "::ffff:10.0.2.1");
  EXPECT_EQ(seen.sport, 0xD001);
  EXPECT_EQ(seen.traffic_class, 104);
  ASSERT_EQ(reports.size(), 1u);
  const v1::HostTelemetry& t = reports[0].host_telemetry();
  EXPECT_EQ(t.host(), "host1");
  EXPECT_EQ(t.nics_size(), 0);  // A report of its own: refusing it costs no NIC counters.
  ASSERT_EQ(t.probes_size(), 1);
  const v1::HostProbeResult& r = t.probes(0);
  EXPECT_EQ(r.job_id(), "job-a");
  EXPECT_EQ(r.src_nic(), "host1/nic0");
  EXPECT_EQ(r.dst_nic(), "host2/nic0");
  EXPECT_EQ(r.udp_sport(), 0xD001u);
  EXPECT_EQ(r.bytes(), 31u * 1472u);
  EXPECT_EQ(r.transfer_time_ns(), 400000u);
  EXPECT_EQ(r.send_time_ns(), 50000u);
  EXPECT_EQ(r.sent(), 32u);
  EXPECT_EQ(r.received(), 32u);
  EXPECT_FALSE(r.lost());
  EXPECT_FALSE(r.sender_limited());
  EXPECT_TRUE(protocol::Validate(reports[0]).ok()) << protocol::Validate(reports[0]).ToString();
  AckOk(reports[0]);

  // The same round again (a probe whose worker has not finished a new one): nothing re-sent.
  p->repeat_round = true;
  for (const v1::Envelope& e : At(now_ + Ms(100))) EXPECT_FALSE(e.has_host_telemetry());
  p->repeat_round = false;
  // A new round is reported; cruxd's refusal is counted and shown.
  reports.clear();
  for (const v1::Envelope& e : At(now_ + Ms(100))) {
    if (e.has_host_telemetry()) reports.push_back(e);
  }
  ASSERT_EQ(reports.size(), 1u);
  v1::Envelope refusal;
  refusal.mutable_error()->set_code(v1::ERROR_CODE_UNKNOWN_JOB);
  refusal.mutable_error()->set_message("host_telemetry.probes[0].job_id: unknown job 'job-a'");
  Reply(reports[0], refusal);
  EXPECT_EQ(agent_.counters().probe_reports_sent, 2u);
  EXPECT_EQ(agent_.counters().probe_reports_acked, 1u);
  EXPECT_EQ(agent_.counters().probe_reports_refused, 1u);
  EXPECT_EQ(agent_.counters().probe_results_sent, 2u);
  auto status = nlohmann::json::parse(agent_.StatusJson());
  EXPECT_EQ(status["probe_reports"]["acked"], 1);
  EXPECT_EQ(status["probe_reports"]["refused"], 1);
  EXPECT_EQ(status["probe_reports"]["last_error"],
            "host_telemetry.probes[0].job_id: unknown job 'job-a'");
}

}  // namespace
}  // namespace crux::hostd
