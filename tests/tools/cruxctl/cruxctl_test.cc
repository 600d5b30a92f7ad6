// cruxctl's command line: argument parsing, endpoint resolution, exit codes and output, first
// against a scripted transport, then over a real ZeroMQ ipc socket with an in-test RouterServer
// playing cruxd.
#include "cruxctl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"

namespace crux::cruxctl {
namespace {

namespace fs = std::filesystem;

// A transport that records requests and answers with a scripted reply (or failure).
struct Script {
  std::vector<std::string> endpoints;  // Every endpoint a transport was made for.
  std::vector<v1::Envelope> requests;
  core::Result<v1::Envelope> reply = core::InternalError("no reply scripted");
  core::Status connect_status;
};

class FakeTransport final : public AdminTransport {
 public:
  explicit FakeTransport(Script* script) : script_(script) {}
  core::Result<v1::Envelope> Call(const v1::Envelope& request, core::Duration) override {
    script_->requests.push_back(request);
    if (!script_->reply.ok()) return script_->reply.status();
    v1::Envelope reply = *script_->reply;
    reply.set_request_id(request.request_id());
    return reply;
  }

 private:
  Script* script_;
};

CruxctlEnvironment FakeEnv(Script* script) {
  CruxctlEnvironment env;
  env.make_transport =
      [script](const std::string& endpoint) -> core::Result<std::unique_ptr<AdminTransport>> {
    script->endpoints.push_back(endpoint);
    if (!script->connect_status.ok()) return script->connect_status;
    return std::unique_ptr<AdminTransport>(std::make_unique<FakeTransport>(script));
  };
  return env;
}

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};

CliRun RunWith(std::vector<std::string> args, const CruxctlEnvironment& env) {
  args.insert(args.begin(), "cruxctl");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  CliRun r;
  r.code = RunCruxctl(static_cast<int>(argv.size()), argv.data(), out, err, env);
  r.out = out.str();
  r.err = err.str();
  return r;
}

v1::Envelope StatusReplyEnvelope(uint64_t epoch) {
  v1::Envelope e = protocol::NewEnvelope();
  v1::StatusReply* s = e.mutable_status_reply();
  s->set_version("test");
  s->set_epoch(epoch);
  s->set_jobs(2);
  (*s->mutable_jobs_by_state())["scheduled"] = 2;
  s->set_levels(8);
  return e;
}

TEST(CruxctlArgsTest, UsageErrorsExitTwoWithoutTouchingTheDaemon) {
  Script script;
  const CruxctlEnvironment env = FakeEnv(&script);
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"job"},
      {"jobs", "--no-such-flag"},
      {"set-link", "tor0->agg1"},
      {"set-link", "tor0->agg1", "sideways"},
      {"set-link", "tor0->agg1", "degraded"},
      {"set-link", "tor0->agg1", "degraded", "--capacity-gbps", "inf"},
      {"set-link", "tor0->agg1", "degraded", "--capacity-gbps", "-5"},
      {"set-link", "tor0->agg1", "up", "--capacity-gbps", "10"},
      {"plan"},
      {"job", "has space"},
      {"--timeout-ms", "0", "status"},
      {"keygen"},
  };
  for (const auto& args : bad) {
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    const CliRun r = RunWith(args, env);
    EXPECT_EQ(r.code, kExitUsage) << joined << "\nerr: " << r.err;
    EXPECT_TRUE(r.out.empty() || r.out.find("Usage") != std::string::npos) << joined;
    EXPECT_FALSE(r.err.empty()) << joined;
  }
  EXPECT_TRUE(script.requests.empty());
}

TEST(CruxctlArgsTest, HelpExitsZero) {
  Script script;
  const CliRun r = RunWith({"--help"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("set-link"), std::string::npos);
  EXPECT_NE(r.out.find("keygen"), std::string::npos);
}

TEST(CruxctlArgsTest, EndpointFromFlagThenEnvThenDefault) {
  Script script;
  script.reply = StatusReplyEnvelope(1);
  CruxctlEnvironment env = FakeEnv(&script);
  EXPECT_EQ(RunWith({"status"}, env).code, kExitOk);
  env.admin_socket_env = "/run/cruxd/admin.sock";
  EXPECT_EQ(RunWith({"status"}, env).code, kExitOk);
  EXPECT_EQ(RunWith({"--socket", "/tmp/x.sock", "status"}, env).code, kExitOk);
  EXPECT_EQ(RunWith({"status", "--socket", "tcp://127.0.0.1:1"}, env).code, kExitOk);
  EXPECT_EQ(script.endpoints,
            (std::vector<std::string>{"ipc://state/admin.sock", "ipc:///run/cruxd/admin.sock",
                                      "ipc:///tmp/x.sock", "tcp://127.0.0.1:1"}));
}

TEST(CruxctlCommandTest, EachCommandSendsItsRequest) {
  Script script;
  script.reply = core::UnavailableError("scripted");
  const CruxctlEnvironment env = FakeEnv(&script);
  RunWith({"status"}, env);
  RunWith({"jobs"}, env);
  RunWith({"job", "llm-7"}, env);
  RunWith({"links", "--all"}, env);
  RunWith({"set-link", "tor0-agg1", "degraded", "--capacity-gbps", "25"}, env);
  RunWith({"set-link", "tor0->agg1", "down"}, env);
  RunWith({"plan", "--dry-run"}, env);
  RunWith({"switches"}, env);
  ASSERT_EQ(script.requests.size(), 8u);
  for (const v1::Envelope& e : script.requests) {
    EXPECT_EQ(e.protocol_version(), protocol::kProtocolVersion);
  }
  EXPECT_TRUE(script.requests[0].has_status_request());
  EXPECT_TRUE(script.requests[1].has_list_jobs_request());
  EXPECT_EQ(script.requests[2].job_request().job_id(), "llm-7");
  EXPECT_TRUE(script.requests[3].list_links_request().all());
  const v1::SetLinkRequest& degraded = script.requests[4].set_link_request();
  EXPECT_EQ(degraded.link(), "tor0-agg1");
  EXPECT_EQ(degraded.health(), v1::LINK_HEALTH_DEGRADED);
  EXPECT_DOUBLE_EQ(degraded.capacity_bps(), 25e9);
  EXPECT_EQ(script.requests[5].set_link_request().health(), v1::LINK_HEALTH_DOWN);
  EXPECT_EQ(script.requests[5].set_link_request().capacity_bps(), 0.0);
  EXPECT_TRUE(script.requests[6].has_plan_dry_run_request());
  EXPECT_TRUE(script.requests[7].has_list_switches_request());
}

TEST(CruxctlCommandTest, JsonOutputIsOneParsableDocument) {
  Script script;
  script.reply = StatusReplyEnvelope(42);
  const CliRun r = RunWith({"status", "--json"}, FakeEnv(&script));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["epoch"], 42);
  EXPECT_EQ(j["jobs_by_state"]["scheduled"], 2);

  const CliRun table = RunWith({"status"}, FakeEnv(&script));
  ASSERT_EQ(table.code, kExitOk);
  EXPECT_NE(table.out.find("epoch        42"), std::string::npos) << table.out;
}

TEST(CruxctlCommandTest, DaemonErrorExitsOneAndPrintsNothingOnStdout) {
  Script script;
  script.reply = protocol::MakeError(0, v1::ERROR_CODE_NOT_FOUND, "job_request.job_id: no job x");
  const CliRun r = RunWith({"job", "x"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitDaemonError);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("ERROR_CODE_NOT_FOUND"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no job x"), std::string::npos) << r.err;
}

TEST(CruxctlCommandTest, WrongReplyKindExitsOne) {
  Script script;
  script.reply = StatusReplyEnvelope(1);  // A status reply to a jobs request.
  const CliRun r = RunWith({"jobs"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitDaemonError);
  EXPECT_NE(r.err.find("status_reply"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(CruxctlCommandTest, UnreachableAndTimeoutExitThree) {
  Script script;
  script.connect_status = core::UnavailableError("no admin socket at state/admin.sock");
  CliRun r = RunWith({"jobs"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find("no admin socket"), std::string::npos) << r.err;

  Script slow;
  slow.reply = core::UnavailableError("no reply within 100 ms");
  r = RunWith({"--timeout-ms", "100", "jobs"}, FakeEnv(&slow));
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find("did not answer within 100 ms"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "cruxctl_test_XXXXXX").string();
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(CruxctlKeygenTest, WritesLoadableKeyPairWithPrivateSecret) {
  TempDir dir;
  const fs::path out = dir.path() / "keys";
  Script script;
  const CliRun r =
      RunWith({"keygen", "--out-dir", out.string(), "--name", "job-a", "--json"}, FakeEnv(&script));
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(script.endpoints.empty());  // No daemon involved.
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const std::string secret_file = (out / "job-a.key").string();
  EXPECT_EQ(j["secret_key_file"], secret_file);
  struct stat st {};
  ASSERT_EQ(stat(secret_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto keys = protocol::LoadSecretKeyFile(secret_file);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->public_z85, j["public_key"]);
  auto pub = protocol::LoadPublicKeyFile((out / "job-a.pub").string());
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(*pub, keys->public_z85);

  // A second run refuses to overwrite; --force replaces the pair.
  const CliRun again =
      RunWith({"keygen", "--out-dir", out.string(), "--name", "job-a"}, FakeEnv(&script));
  EXPECT_EQ(again.code, kExitDaemonError);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  const CliRun forced = RunWith({"keygen", "--out-dir", out.string(), "--name", "job-a", "--force"},
                                FakeEnv(&script));
  EXPECT_EQ(forced.code, kExitOk) << forced.err;
  auto replaced = protocol::LoadSecretKeyFile(secret_file);
  ASSERT_TRUE(replaced.ok());
  EXPECT_NE(replaced->public_z85, keys->public_z85);

  EXPECT_EQ(
      RunWith({"keygen", "--out-dir", out.string(), "--name", "../evil"}, FakeEnv(&script)).code,
      kExitUsage);
}

// Over a real ipc socket: a RouterServer plays cruxd.
class CruxctlIpcTest : public ::testing::Test {
 protected:
  void StartServer(bool answer) {
    protocol::ServerOptions options;
    options.endpoint = "ipc://" + socket_path();
    auto server =
        protocol::RouterServer::Start(context_, options, [this, answer](protocol::Inbound in) {
          ++requests_;
          if (!answer) return;
          v1::Envelope reply;
          if (in.msg.has_status_request()) {
            reply = StatusReplyEnvelope(77);
          } else if (in.msg.has_job_request()) {
            reply =
                protocol::MakeError(0, v1::ERROR_CODE_NOT_FOUND,
                                    "job_request.job_id: no job " + in.msg.job_request().job_id());
          } else {
            reply = protocol::MakeError(0, v1::ERROR_CODE_INVALID_ARGUMENT, "unsupported");
          }
          reply.set_request_id(in.msg.request_id());
          (void)server_->Send(in.peer, reply);
        });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    server_.reset();
  }
  std::string socket_path() const { return (dir_.path() / "admin.sock").string(); }
  CruxctlEnvironment RealEnv() const {
    CruxctlEnvironment env;
    env.make_transport = MakeZmqAdminTransport;
    return env;
  }

  TempDir dir_;
  protocol::TransportContext context_;
  std::unique_ptr<protocol::RouterServer> server_;
  std::atomic<int> requests_{0};
};

TEST_F(CruxctlIpcTest, StatusRoundTripOverIpc) {
  StartServer(/*answer=*/true);
  const CliRun r = RunWith({"--socket", socket_path(), "--json", "status"}, RealEnv());
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["epoch"], 77);
  const CliRun missing = RunWith({"--socket", socket_path(), "job", "nope"}, RealEnv());
  EXPECT_EQ(missing.code, kExitDaemonError);
  EXPECT_NE(missing.err.find("no job nope"), std::string::npos) << missing.err;
  EXPECT_EQ(requests_.load(), 2);
}

TEST_F(CruxctlIpcTest, SilentDaemonTimesOutWithExitThree) {
  StartServer(/*answer=*/false);
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = RunWith({"--socket", socket_path(), "--timeout-ms", "300", "jobs"}, RealEnv());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.code, kExitUnreachable) << r.err;
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_GE(elapsed, std::chrono::milliseconds(250));
}

TEST_F(CruxctlIpcTest, NoSocketFileExitsThreeAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = RunWith({"--socket", socket_path(), "status"}, RealEnv());
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find("no admin socket"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

}  // namespace
}  // namespace crux::cruxctl
