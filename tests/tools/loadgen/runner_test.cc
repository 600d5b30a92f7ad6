// crux-loadgen's engine against an in-test RouterServer playing the daemon (real ZeroMQ).
#include "crux/loadgen/runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

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
      reports[m.profile_report().job_id()]++;
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.profile_report().job_id()));
    } else if (m.has_heartbeat()) {
      heartbeats++;
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.heartbeat().job_id()));
    } else if (m.has_ack()) {
      acks[m.ack().job_id()] = m.ack().epoch();
    } else if (m.has_end_job()) {
      ended.insert(m.end_job().job_id());
      (void)server->Send(in.peer, protocol::MakeAck(m.request_id(), m.end_job().job_id()));
    }
  }

  protocol::RouterServer* server = nullptr;
  std::mutex mu_;
  std::map<std::string, int> registers;
  std::map<std::string, int> reports;
  std::map<std::string, uint64_t> acks;
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

TEST_F(RunnerTest, UnreachableDaemonRegistersNothingAndStops) {
  std::vector<SimJob> jobs = Jobs(3);
  LoadGenOptions o;
  o.endpoint = "tcp://127.0.0.1:1";  // Nothing listens there.
  o.duration = Duration::Millis(100);
  o.request_timeout = Duration::Millis(100);
  o.register_timeout = Duration::Millis(300);
  auto start = std::chrono::steady_clock::now();
  auto summary = RunLoad(ctx_, jobs, o);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->registered, 0);
  EXPECT_GT(summary->timeouts, 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
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
