// crux-loadgen's engine against an in-test RouterServer playing the daemon (real ZeroMQ).
#include "crux/loadgen/runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crux/loadgen/cli.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"
#include "crux/spec/topology_spec.h"

namespace crux::loadgen {
namespace {

using core::Duration;

// Registers jobs, pushes one Assignment (with sent_unix_ns) right after each registration,
// acks reports and heartbeats, refuses jobs whose id ends in "-bad" with UNKNOWN_HOST.
class FakeDaemon {
 public:
  void Handle(protocol::Inbound in) {
    const v1::Envelope& m = in.msg;
    std::lock_guard<std::mutex> lock(mu_);
    if (m.has_register_job()) {
      const std::string& id = m.register_job().job_id();
      registers[id]++;
      peers[id] = in.peer;
      if (id.size() > 4 && id.substr(id.size() - 4) == "-bad") {
        (void)server->Send(in.peer, protocol::MakeError(m.request_id(), v1::ERROR_CODE_UNKNOWN_HOST,
                                                        "register_job.placement[0].host"));
        return;
      }
      v1::Envelope reply = protocol::NewEnvelope(m.request_id());
      reply.mutable_register_job_reply()->set_job_id(id);
      reply.mutable_register_job_reply()->set_lease_ms(300);
      (void)server->Send(in.peer, reply);
      v1::Envelope push = protocol::NewEnvelope(0);
      v1::Assignment* a = push.mutable_assignment();
      a->set_job_id(id);
      a->set_epoch(++epoch_);
      a->set_dscp(26);
      a->set_traffic_class(104);
      a->set_sent_unix_ns(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count()));
      (void)server->Send(in.peer, push);
    } else if (m.has_profile_report()) {
      if (m.quiet()) {  // Answered only when refused, as cruxd does.
        quiet_reports[m.profile_report().job_id()]++;
        if (refuse_every_quiet > 0 && quiet_reports_seen++ % refuse_every_quiet == 0) {
          ++quiet_refused;
          (void)server->Send(in.peer,
                             protocol::MakeError(m.request_id(), v1::ERROR_CODE_INVALID_ARGUMENT,
                                                 "profile_report: refused by the test"));
          return;
        }
        reports[m.profile_report().job_id()]++;
        return;
      }
      asked_reports[m.profile_report().job_id()]++;
      reports[m.profile_report().job_id()]++;
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.profile_report().job_id()));
    } else if (m.has_heartbeat()) {
      heartbeats++;
      last_heartbeat[m.heartbeat().job_id()] = m.heartbeat();
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.heartbeat().job_id()));
    } else if (m.has_ack()) {
      acks[m.ack().job_id()] = m.ack().epoch();
      ack_log[m.ack().job_id()].push_back(m.ack());
    } else if (m.has_end_job()) {
      ended.insert(m.end_job().job_id());
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.end_job().job_id()));
    }
  }

  protocol::RouterServer* server = nullptr;
  std::mutex mu_;
  std::map<std::string, int> registers;
  std::map<std::string, int> reports;  // Accepted (acknowledged or quiet and not refused).
  std::map<std::string, int> quiet_reports;
  std::map<std::string, int> asked_reports;  // Not quiet.
  int refuse_every_quiet = 0;                // Refuse quiet reports 1, 1 + n, 1 + 2n, ...
  int quiet_reports_seen = 0;
  uint64_t quiet_refused = 0;
  std::map<std::string, uint64_t> acks;
  std::map<std::string, std::vector<v1::Ack>> ack_log;
  std::map<std::string, std::string> peers;  // Routing id each job registered from.
  std::map<std::string, v1::Heartbeat> last_heartbeat;
  std::set<std::string> ended;
  int heartbeats = 0;

 private:
  uint64_t epoch_ = 0;
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    protocol::ServerOptions so;
    so.endpoint = "tcp://127.0.0.1:*";
    auto server = protocol::RouterServer::Start(
        ctx_, so, [this](protocol::Inbound in) { daemon_.Handle(std::move(in)); });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    daemon_.server = server_.get();
  }
  void TearDown() override { server_.reset(); }

  std::vector<SimJob> Jobs(int n) {
    auto topo =
        spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml");
    EXPECT_TRUE(topo.ok());
    WorkloadOptions wo;
    wo.jobs = n;
    auto jobs = MakeJobs(*topo, wo);
    EXPECT_TRUE(jobs.ok());
    return std::move(jobs).value();
  }

  protocol::TransportContext ctx_;
  FakeDaemon daemon_;
  std::unique_ptr<protocol::RouterServer> server_;
};

TEST_F(RunnerTest, RegistersReportsHeartbeatsAndAcksPushes) {
  std::vector<SimJob> jobs = Jobs(20);
  jobs.back().job_id = "lg-19-bad";  // Refused by the fake daemon.
  LoadGenOptions o;
  o.endpoint = server_->endpoint();
  o.duration = Duration::Millis(600);
  o.report_interval = Duration::Millis(100);
  o.end_jobs = true;
  auto summary = RunLoad(ctx_, jobs, o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  RunSummary& s = *summary;
  EXPECT_EQ(s.jobs, 20);
  EXPECT_EQ(s.registered, 19);
  EXPECT_EQ(s.errors["ERROR_CODE_UNKNOWN_HOST"], 1u);
  EXPECT_EQ(s.assignments, 19u);
  EXPECT_EQ(s.acks_sent, 19u);
  EXPECT_EQ(s.push_latency.count(), 19u);
  EXPECT_GE(s.push_latency.Percentile(0), 0);
  EXPECT_LT(s.push_latency.Percentile(100), 5'000'000'000);
  // ~6 reports per job in 600 ms at 100 ms; be generous for a loaded CI machine.
  EXPECT_GE(s.reports_acked, 19u * 2);
  EXPECT_GT(s.ReportRate(), 0);
  EXPECT_EQ(s.timeouts, 0u);
  // Lease 300 ms -> heartbeat every 100 ms.
  EXPECT_GE(s.heartbeats_acked, 19u);

  std::lock_guard<std::mutex> lock(daemon_.mu_);
  EXPECT_EQ(daemon_.registers.size(), 20u);
  EXPECT_EQ(daemon_.registers["lg-19-bad"], 1);  // Not retried after a definite refusal.
  EXPECT_EQ(daemon_.acks.size(), 19u);
  EXPECT_EQ(daemon_.ended.size(), 19u);
  EXPECT_EQ(daemon_.reports.count("lg-19-bad"), 0u);
  uint64_t total = 0;
  for (const auto& [id, n] : daemon_.reports) total += n;
  EXPECT_EQ(total, s.reports_acked);
  // The server never had to refuse a frame: loadgen's messages are valid.
  EXPECT_EQ(server_->counters().invalid, 0u);
  EXPECT_EQ(server_->counters().malformed, 0u);
}

TEST_F(RunnerTest, BenchmarkModeKeepsReportsInFlight) {
  std::vector<SimJob> jobs = Jobs(10);
  LoadGenOptions o;
  o.endpoint = server_->endpoint();
  o.duration = Duration::Millis(300);
  o.report_interval = Duration::Zero();
  o.inflight = 2;
  auto summary = RunLoad(ctx_, jobs, o);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->registered, 10);
  // Back to back over loopback: far more than one report per job.
  EXPECT_GT(summary->reports_acked_in_window, 100u);
  EXPECT_GT(summary->ReportRate(), 300.0);
}

TEST_F(RunnerTest, QuietReportsAreConfirmedByTheNextAcknowledgedOne) {
  std::vector<SimJob> jobs = Jobs(10);
  {
    std::lock_guard<std::mutex> lock(daemon_.mu_);
    daemon_.refuse_every_quiet = 7;
  }
  LoadGenOptions o;
  o.endpoint = server_->endpoint();
  o.duration = Duration::Millis(400);
  o.report_interval = Duration::Zero();
  o.inflight = 2;
  o.ack_every = 4;
  auto summary = RunLoad(ctx_, jobs, o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  RunSummary& s = *summary;
  EXPECT_EQ(s.registered, 10);
  EXPECT_EQ(s.timeouts, 0u);
  EXPECT_EQ(s.reports_quiet * 4, s.reports_sent * 3);  // Whole groups of 3 quiet + 1.
  EXPECT_GT(s.reports_acked_in_window, 100u);

  std::lock_guard<std::mutex> lock(daemon_.mu_);
  uint64_t accepted = 0;
  for (const auto& [id, n] : daemon_.reports) accepted += n;
  for (const auto& [id, n] : daemon_.asked_reports) {
    // Each acknowledged report follows 3 quiet ones; the run can end after a group's quiet
    // reports reached the daemon but before its acknowledged one did (at most inflight groups).
    EXPECT_GE(daemon_.quiet_reports[id], 3 * n) << id;
    EXPECT_LE(daemon_.quiet_reports[id], 3 * (n + 2)) << id;
  }
  ASSERT_GT(daemon_.quiet_refused, 0u);
  // A quiet report counts once the Ack of a later one confirms it, unless it was refused; what
  // was still in flight when the run ended (at most inflight groups of 4 per job) is neither.
  const uint64_t in_flight = 10 * 2 * 4;
  EXPECT_LE(s.reports_acked, accepted);
  EXPECT_GE(s.reports_acked + in_flight, accepted);
  const uint64_t refused = s.errors["ERROR_CODE_INVALID_ARGUMENT"];
  EXPECT_LE(refused, daemon_.quiet_refused);
  EXPECT_GE(refused + in_flight, daemon_.quiet_refused);
  EXPECT_EQ(server_->counters().invalid, 0u);
}

TEST_F(RunnerTest, UnreachableDaemonRegistersNothingAndStops) {
  std::vector<SimJob> jobs = Jobs(3);
  LoadGenOptions o;
  o.endpoint = "tcp://127.0.0.1:1";  // Nothing listens there.
  o.duration = Duration::Millis(500);
  o.request_timeout = Duration::Millis(100);
  o.register_timeout = Duration::Seconds(3600);  // The duration ends the run.
  auto summary = RunLoad(ctx_, jobs, o);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->registered, 0);
  EXPECT_GT(summary->timeouts, 0u);
  EXPECT_EQ(summary->register_failed, 3);
  ASSERT_TRUE(summary->register_failures.count("TIMEOUT")) << summary->ToJson().dump();
  EXPECT_EQ(summary->register_failures.at("TIMEOUT").jobs, 3u);
  EXPECT_EQ(summary->register_failures.at("TIMEOUT").example, "no reply within 100 ms");
}

TEST_F(RunnerTest, StopFlagEndsTheRun) {
  std::vector<SimJob> jobs = Jobs(2);
  LoadGenOptions o;
  o.endpoint = server_->endpoint();
  o.duration = Duration::Zero();  // Until stopped.
  std::atomic<bool> stop{true};
  auto summary = RunLoad(ctx_, jobs, o, &stop);
  ASSERT_TRUE(summary.ok());
}

TEST_F(RunnerTest, CliRunsAgainstTheFakeDaemonAndPrintsJson) {
  const std::string topo = std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml";
  const std::string ep = server_->endpoint();
  const char* argv[] = {"crux-loadgen", "--endpoint", ep.c_str(),    "--insecure",
                        "--topology",   topo.c_str(), "--jobs",      "5",
                        "--duration-s", "0.3",        "--benchmark", "--quiet"};
  std::ostringstream out, err;
  int rc = RunCli(static_cast<int>(std::size(argv)), argv, out, err, nullptr);
  EXPECT_EQ(rc, kExitOk) << err.str();
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["registered"], 5);
  EXPECT_GT(j["report_rate_per_s"].get<double>(), 0);
  EXPECT_EQ(j["push_latency"]["samples"], 5);
}

// Issue #10 (D): routing ids were "loadgen:<job>", so anyone knowing a job id could take over
// its pushes. Now each socket has DealerClient's random id.
TEST_F(RunnerTest, RoutingIdsAreRandomNotDerivedFromJobIds) {
  std::vector<SimJob> jobs = Jobs(6);
  LoadGenOptions o;
  o.endpoint = server_->endpoint();
  o.duration = Duration::Millis(200);
  auto summary = RunLoad(ctx_, jobs, o);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->registered, 6);
  std::lock_guard<std::mutex> lock(daemon_.mu_);
  ASSERT_EQ(daemon_.peers.size(), 6u);
  std::set<std::string> distinct;
  for (const auto& [job, peer] : daemon_.peers) {
    distinct.insert(peer);
    EXPECT_EQ(peer.find(job), std::string::npos) << peer;
    EXPECT_EQ(peer.find("loadgen"), std::string::npos) << peer;
    // RandomRoutingId: 'r' and 32 lower-case hex digits (128 random bits).
    ASSERT_EQ(peer.size(), 33u) << peer;
    EXPECT_EQ(peer[0], 'r');
    EXPECT_EQ(peer.find_first_not_of("0123456789abcdef", 1), std::string::npos) << peer;
  }
  EXPECT_EQ(distinct.size(), 6u);
}

// A daemon that pushes, right after the registration: epoch 5 of state A, a stale epoch 3 of
// state A, then epoch 2 of state B (its state was reset: a new epoch sequence), then a stale
// epoch 1 of state B.
class ResetDaemon {
 public:
  static constexpr uint64_t kStateA = 0x1111;
  static constexpr uint64_t kStateB = 0x2222;
  void Handle(protocol::Inbound in) {
    const v1::Envelope& m = in.msg;
    if (m.has_register_job()) {
      const std::string& id = m.register_job().job_id();
      v1::Envelope reply = protocol::NewEnvelope(m.request_id());
      reply.mutable_register_job_reply()->set_job_id(id);
      reply.mutable_register_job_reply()->set_lease_ms(150);  // Heartbeats every 50 ms.
      (void)server->Send(in.peer, reply);
      for (const auto& [epoch, state] : std::vector<std::pair<uint64_t, uint64_t>>{
               {5, kStateA}, {3, kStateA}, {2, kStateB}, {1, kStateB}}) {
        v1::Envelope push = protocol::NewEnvelope(0);
        v1::Assignment* a = push.mutable_assignment();
        a->set_job_id(id);
        a->set_epoch(epoch);
        a->set_state_id(state);
        a->set_dscp(26);
        a->set_traffic_class(104);
        (void)server->Send(in.peer, push);
      }
    } else if (m.has_heartbeat()) {
      std::lock_guard<std::mutex> lock(mu);
      heartbeats.push_back(m.heartbeat());
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.heartbeat().job_id()));
    } else if (m.has_ack()) {
      std::lock_guard<std::mutex> lock(mu);
      acks.push_back(m.ack());
    } else if (m.has_profile_report()) {
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.profile_report().job_id()));
    }
  }
  protocol::RouterServer* server = nullptr;
  std::mutex mu;
  std::vector<v1::Heartbeat> heartbeats;
  std::vector<v1::Ack> acks;
};

TEST(LoadgenPushTest, AppliesNewerEpochsOrAnotherStateIdAndReportsBothInHeartbeats) {
  protocol::TransportContext ctx;
  ResetDaemon daemon;
  protocol::ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  auto server = protocol::RouterServer::Start(
      ctx, so, [&daemon](protocol::Inbound in) { daemon.Handle(std::move(in)); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  daemon.server = server->get();
  auto topo =
      spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml");
  ASSERT_TRUE(topo.ok());
  WorkloadOptions wo;
  wo.jobs = 1;
  auto jobs = MakeJobs(*topo, wo);
  ASSERT_TRUE(jobs.ok());
  LoadGenOptions o;
  o.endpoint = (*server)->endpoint();
  o.duration = Duration::Millis(500);
  auto summary = RunLoad(ctx, *jobs, o);
  server->reset();
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->assignments, 4u);
  EXPECT_EQ(summary->state_resets, 1u);       // Epoch 2 of state B, although 2 < 5.
  EXPECT_EQ(summary->assignments_stale, 2u);  // Epoch 3 of A, epoch 1 of B.
  ASSERT_EQ(daemon.acks.size(), 4u);
  EXPECT_EQ(daemon.acks[0].error(), "");
  EXPECT_EQ(daemon.acks[1].error(), "stale epoch ignored");
  EXPECT_EQ(daemon.acks[2].error(), "");
  EXPECT_EQ(daemon.acks[3].error(), "stale epoch ignored");
  // Heartbeats after the pushes carry what was applied: epoch 2 of state B.
  ASSERT_FALSE(daemon.heartbeats.empty());
  EXPECT_EQ(daemon.heartbeats.back().applied_epoch(), 2u);
  EXPECT_EQ(daemon.heartbeats.back().applied_state_id(), ResetDaemon::kStateB);
}

std::vector<SimJob> TestbedJobs(int n) {
  auto topo =
      spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml");
  EXPECT_TRUE(topo.ok());
  WorkloadOptions wo;
  wo.jobs = n;
  auto jobs = MakeJobs(*topo, wo);
  EXPECT_TRUE(jobs.ok());
  return std::move(jobs).value();
}

// A daemon that forgets every job once (the first heartbeat of each registration gets
// UNKNOWN_JOB, as after `cruxd --fresh-state`): the jobs register again and the run goes on.
class ForgetfulDaemon {
 public:
  void Handle(protocol::Inbound in) {
    const v1::Envelope& m = in.msg;
    std::lock_guard<std::mutex> lock(mu);
    if (m.has_register_job()) {
      const std::string& id = m.register_job().job_id();
      ++registers[id];
      forgot[id] = false;
      v1::Envelope reply = protocol::NewEnvelope(m.request_id());
      reply.mutable_register_job_reply()->set_job_id(id);
      reply.mutable_register_job_reply()->set_lease_ms(150);  // Heartbeats every 50 ms.
      (void)server->Send(in.peer, reply);
    } else if (m.has_heartbeat()) {
      const std::string& id = m.heartbeat().job_id();
      if (registers[id] == 1 && !forgot[id]) {
        forgot[id] = true;
        (void)server->Send(in.peer, protocol::MakeError(m.request_id(), v1::ERROR_CODE_UNKNOWN_JOB,
                                                        "heartbeat.job_id: unknown job"));
        return;
      }
      ++heartbeats_acked[id];
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), id));
    } else if (m.has_profile_report()) {
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.profile_report().job_id()));
    }
  }
  protocol::RouterServer* server = nullptr;
  std::mutex mu;
  std::map<std::string, int> registers;
  std::map<std::string, bool> forgot;
  std::map<std::string, int> heartbeats_acked;
};

TEST(LoadgenForgottenJobTest, AJobTheDaemonForgotRegistersAgainAndTheRunGoesOn) {
  protocol::TransportContext ctx;
  ForgetfulDaemon daemon;
  protocol::ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  auto server = protocol::RouterServer::Start(
      ctx, so, [&daemon](protocol::Inbound in) { daemon.Handle(std::move(in)); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  daemon.server = server->get();
  const std::vector<SimJob> jobs = TestbedJobs(1);
  LoadGenOptions o;
  o.endpoint = (*server)->endpoint();
  o.duration = Duration::Millis(600);
  auto summary = RunLoad(ctx, jobs, o);
  server->reset();
  ASSERT_TRUE(summary.ok());
  // The only job was unregistered for a moment; that must not end the run.
  EXPECT_EQ(summary->registered, 1);
  EXPECT_EQ(summary->errors["ERROR_CODE_UNKNOWN_JOB"], 1u);
  EXPECT_EQ(daemon.registers[jobs[0].job_id], 2);
  EXPECT_GE(daemon.heartbeats_acked[jobs[0].job_id], 1);  // Heartbeats after re-registering.
}

// Issue #10 (C): a daemon that refuses every registration kept crux-loadgen running far past
// --duration-s. Each mode is a real ZeroMQ ROUTER answering (or not) every RegisterJob.
enum class Refusal { kUnavailable, kQuota, kSilent };

class RefusingDaemon {
 public:
  explicit RefusingDaemon(Refusal mode) : mode_(mode) {
    protocol::ServerOptions so;
    so.endpoint = "tcp://127.0.0.1:*";
    auto server =
        protocol::RouterServer::Start(ctx_, so, [this](protocol::Inbound in) { Handle(in); });
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  ~RefusingDaemon() { server_.reset(); }
  std::string endpoint() const { return server_->endpoint(); }
  std::map<std::string, int> registers() {
    std::lock_guard<std::mutex> lock(mu_);
    return registers_;
  }

 private:
  void Handle(const protocol::Inbound& in) {
    if (!in.msg.has_register_job()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++registers_[in.msg.register_job().job_id()];
    }
    switch (mode_) {
      case Refusal::kUnavailable:
        (void)server_->Send(in.peer,
                            protocol::MakeError(in.msg.request_id(), v1::ERROR_CODE_UNAVAILABLE,
                                                "cruxd: store unavailable, retry later"));
        break;
      case Refusal::kQuota:
        (void)server_->Send(
            in.peer, protocol::MakeError(in.msg.request_id(), v1::ERROR_CODE_RESOURCE_EXHAUSTED,
                                         "register_job: at most 0 jobs per client key\x1b[2J"));
        break;
      case Refusal::kSilent:
        break;
    }
  }

  Refusal mode_;
  protocol::TransportContext ctx_;
  std::unique_ptr<protocol::RouterServer> server_;
  std::mutex mu_;
  std::map<std::string, int> registers_;
};

// Sets `stop` if the test body is still running after a generous limit, so that a regression
// (a run that does not end) fails with a message instead of hanging the suite.
class Watchdog {
 public:
  explicit Watchdog(std::atomic<bool>* stop)
      : thread_([this, stop] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, std::chrono::seconds(60), [this] { return done_; })) {
            fired_ = true;
            stop->store(true);
          }
        }) {}
  ~Watchdog() { Finish(); }
  bool Finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    return fired_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;
};

TEST(LoadgenRefusalTest, DurationBoundsTheRunWhileEveryRegistrationIsRetried) {
  RefusingDaemon daemon(Refusal::kUnavailable);
  const std::vector<SimJob> jobs = TestbedJobs(4);
  LoadGenOptions o;
  o.endpoint = daemon.endpoint();
  o.duration = Duration::Millis(400);
  o.register_timeout = Duration::Seconds(3600);  // Only the duration may end this run.
  std::atomic<bool> stop{false};
  Watchdog watchdog(&stop);
  protocol::TransportContext ctx;
  auto summary = RunLoad(ctx, jobs, o, &stop);
  EXPECT_FALSE(watchdog.Finish()) << "the run did not end by itself";
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->registered, 0);
  EXPECT_EQ(summary->register_failed, 4);
  ASSERT_EQ(summary->register_failures.size(), 1u);
  const RegisterFailure& f = summary->register_failures.at("ERROR_CODE_UNAVAILABLE");
  EXPECT_EQ(f.jobs, 4u);
  EXPECT_EQ(f.example, "cruxd: store unavailable, retry later");
  for (const auto& [job, n] : daemon.registers()) EXPECT_GE(n, 2) << job;  // It did retry.
}

TEST(LoadgenRefusalTest, ASilentDaemonEndsWithTheDurationAndCountsNoReply) {
  RefusingDaemon daemon(Refusal::kSilent);
  const std::vector<SimJob> jobs = TestbedJobs(3);
  LoadGenOptions o;
  o.endpoint = daemon.endpoint();
  o.duration = Duration::Millis(300);
  o.register_timeout = Duration::Seconds(3600);
  std::atomic<bool> stop{false};
  Watchdog watchdog(&stop);
  protocol::TransportContext ctx;
  auto summary = RunLoad(ctx, jobs, o, &stop);
  EXPECT_FALSE(watchdog.Finish()) << "the run did not end by itself";
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->registered, 0);
  EXPECT_EQ(summary->register_failed, 3);
  // The request timeout (5 s) is longer than the run: the attempts were still unanswered.
  ASSERT_TRUE(summary->register_failures.count("NO_REPLY")) << summary->ToJson().dump();
  EXPECT_EQ(summary->register_failures.at("NO_REPLY").jobs, 3u);
}

TEST(LoadgenRefusalTest, AQuotaRefusalIsFinalAndEndsARunWithoutDuration) {
  RefusingDaemon daemon(Refusal::kQuota);
  const std::vector<SimJob> jobs = TestbedJobs(5);
  LoadGenOptions o;
  o.endpoint = daemon.endpoint();
  o.duration = Duration::Zero();  // "Until ^C": ends anyway once no job can run.
  o.register_timeout = Duration::Seconds(3600);
  std::atomic<bool> stop{false};
  Watchdog watchdog(&stop);
  protocol::TransportContext ctx;
  auto summary = RunLoad(ctx, jobs, o, &stop);
  EXPECT_FALSE(watchdog.Finish()) << "the run did not end by itself";
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->registered, 0);
  EXPECT_EQ(summary->register_failed, 5);
  EXPECT_EQ(summary->errors["ERROR_CODE_RESOURCE_EXHAUSTED"], 5u);
  const RegisterFailure& f = summary->register_failures.at("ERROR_CODE_RESOURCE_EXHAUSTED");
  EXPECT_EQ(f.jobs, 5u);
  EXPECT_EQ(f.example, "register_job: at most 0 jobs per client key\x1b[2J");  // Raw here.
  const auto registers = daemon.registers();
  EXPECT_EQ(registers.size(), 5u);
  for (const auto& [job, n] : registers) EXPECT_EQ(n, 1) << job;  // Not retried.
}

TEST(LoadgenRefusalTest, CliExitsOneAndSaysWhyNoJobRegistered) {
  RefusingDaemon daemon(Refusal::kQuota);
  const std::string topo = std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml";
  const std::string ep = daemon.endpoint();
  std::atomic<bool> stop{false};
  Watchdog watchdog(&stop);
  for (const bool json : {false, true}) {
    std::vector<const char*> argv = {"crux-loadgen", "--endpoint", ep.c_str(), "--insecure",
                                     "--topology",   topo.c_str(), "--jobs",   "3",
                                     "--duration-s", "1",          "--quiet"};
    if (json) argv.push_back("--json");
    std::ostringstream out, err;
    const int rc = RunCli(static_cast<int>(argv.size()), argv.data(), out, err, &stop);
    EXPECT_EQ(rc, kExitFailure) << err.str();
    EXPECT_NE(err.str().find("no job could register with " + ep +
                             ": 3 of 3 jobs: ERROR_CODE_RESOURCE_EXHAUSTED 3 (a quota"),
              std::string::npos)
        << err.str();
    // The daemon's text is escaped on the terminal.
    EXPECT_EQ(err.str().find('\x1b'), std::string::npos);
    EXPECT_NE(err.str().find("client key\\x1b[2J"), std::string::npos) << err.str();
    EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
    if (json) {
      const nlohmann::json j = nlohmann::json::parse(out.str());
      EXPECT_EQ(j["registered"], 0);
      EXPECT_EQ(j["register_failed"], 3);
      EXPECT_EQ(j["register_failures"]["ERROR_CODE_RESOURCE_EXHAUSTED"]["jobs"], 3);
      EXPECT_EQ(j["register_failures"]["ERROR_CODE_RESOURCE_EXHAUSTED"]["example"],
                "register_job: at most 0 jobs per client key\x1b[2J");
    } else {
      EXPECT_NE(out.str().find("jobs registered     0/3"), std::string::npos) << out.str();
      EXPECT_NE(out.str().find("not registered      3 of 3 jobs: ERROR_CODE_RESOURCE_EXHAUSTED 3"),
                std::string::npos)
          << out.str();
    }
  }
  EXPECT_FALSE(watchdog.Finish()) << "the CLI did not end by itself";
}

TEST(LoadgenCurveTest, AuthorisedKeyRegistersUnknownKeyDoesNot) {
  auto server_keys = protocol::GenerateCurveKeyPair();
  auto client_keys = protocol::GenerateCurveKeyPair();
  auto other_keys = protocol::GenerateCurveKeyPair();
  ASSERT_TRUE(server_keys.ok() && client_keys.ok() && other_keys.ok());
  protocol::TransportContext ctx;
  FakeDaemon daemon;
  protocol::ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  so.curve = true;
  so.server_keys = *server_keys;
  so.authorized_keys = {client_keys->public_z85};
  auto server = protocol::RouterServer::Start(
      ctx, so, [&daemon](protocol::Inbound in) { daemon.Handle(std::move(in)); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  daemon.server = server->get();

  auto topo =
      spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml");
  ASSERT_TRUE(topo.ok());
  WorkloadOptions wo;
  wo.jobs = 4;
  auto jobs = MakeJobs(*topo, wo);
  ASSERT_TRUE(jobs.ok());

  LoadGenOptions o;
  o.endpoint = (*server)->endpoint();
  o.curve = true;
  o.server_public_z85 = server_keys->public_z85;
  o.client_keys = *client_keys;
  o.duration = Duration::Millis(200);
  o.report_interval = Duration::Millis(50);
  auto ok = RunLoad(ctx, *jobs, o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->registered, 4);
  EXPECT_GT(ok->reports_acked, 0u);

  o.client_keys = *other_keys;
  o.request_timeout = Duration::Millis(100);
  o.register_timeout = Duration::Millis(300);
  auto refused = RunLoad(ctx, *jobs, o);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->registered, 0);
  EXPECT_GE((*server)->counters().auth_refused, 1u);
  server->reset();
}

TEST(LoadgenCliTest, BadInputExitsWithTwoNamingTheFlag) {
  const std::string topo = std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml";
  auto run = [](std::vector<std::string> args, std::string* err_text) {
    std::vector<const char*> argv{"crux-loadgen"};
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    int rc = RunCli(static_cast<int>(argv.size()), argv.data(), out, err, nullptr);
    *err_text = err.str();
    EXPECT_TRUE(out.str().empty());
    return rc;
  };
  std::string err;
  EXPECT_EQ(run({"--topology", topo}, &err), kExitBadInput);
  EXPECT_NE(err.find("--insecure"), std::string::npos) << err;
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--jobs", "0"}, &err), kExitBadInput);
  EXPECT_NE(err.find("--jobs"), std::string::npos);
  EXPECT_EQ(run({"--topology", "/nonexistent.yaml", "--insecure"}, &err), kExitBadInput);
  EXPECT_NE(err.find("--topology"), std::string::npos);
  EXPECT_EQ(run({"--topology", topo, "--server-key", "/nonexistent.pub"}, &err), kExitBadInput);
  EXPECT_NE(err.find("--client-key"), std::string::npos);
  EXPECT_EQ(run({"--insecure"}, &err), kExitBadInput);
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--duration-s", "nan"}, &err), kExitBadInput);
  // Host-agent mode (--hostd): hosts, GPUs, what it cannot simulate, arrivals.
  const std::string hosts = std::to_string(spec::LoadTopologyFile(topo)->hosts().size());
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--hostd", "100000"}, &err), kExitBadInput);
  EXPECT_NE(err.find("--hostd: must be 1-" + hosts), std::string::npos) << err;
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--hostd", "-1"}, &err), kExitBadInput);
  EXPECT_NE(err.find("--hostd"), std::string::npos) << err;
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--hostd", "1", "--jobs", "100000"}, &err),
            kExitBadInput);
  EXPECT_NE(err.find("--jobs: 100000 jobs need a GPU each"), std::string::npos) << err;
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--hostd", "2", "--flow-stats"}, &err),
            kExitBadInput);
  EXPECT_NE(err.find("--hostd: cannot be combined"), std::string::npos) << err;
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--jobs", "4", "--arrivals", "4"}, &err),
            kExitBadInput);
  EXPECT_NE(err.find("--arrivals: must be below --jobs"), std::string::npos) << err;
  EXPECT_EQ(run({"--topology", topo, "--insecure", "--arrival-interval-ms", "0"}, &err),
            kExitBadInput);
  EXPECT_NE(err.find("--arrival-interval-ms"), std::string::npos) << err;
}

TEST(LoadgenFdLimitTest, RaisesToWhatIsNeeded) {
  auto limit = RaiseFdLimit(100);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_GE(*limit, 100u * kFdsPerJob + kFdReserve);
  EXPECT_EQ(JobsPerProcess(20000), (20000u - kFdReserve) / kFdsPerJob);
  EXPECT_EQ(JobsPerProcess(10), 1u);
}

}  // namespace
}  // namespace crux::loadgen
