// cruxctl's command line: argument parsing, endpoint resolution, exit codes and output, first
// against a scripted transport, then over a real ZeroMQ ipc socket with an in-test RouterServer
// playing cruxd.
#include "cruxctl.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"
#include "crux/v1/common.pb.h"

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
      {"set-link", "tor0->agg1", "degraded", "--capacity-gbps", "0x10"},
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

TEST(CruxctlArgsTest, UsageErrorsQuotingArgumentsAreEscaped) {
  Script script;
  const CliRun r = RunWith({"status", "\x1b]0;owned\x07\x1b[2J"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b]0;owned\\x07"), std::string::npos) << r.err;
  const CliRun job = RunWith({"job", "a\nb"}, FakeEnv(&script));
  EXPECT_EQ(job.code, kExitUsage);
  EXPECT_NE(job.err.find("invalid job id \"a\\x0ab\""), std::string::npos) << job.err;
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

TEST(CruxctlCommandTest, ResourceExhaustedIsADaemonErrorWithWords) {
  Script script;
  script.reply = protocol::MakeError(0, v1::ERROR_CODE_RESOURCE_EXHAUSTED,
                                     "admin: at most 16 requests in flight per peer");
  const CliRun r = RunWith({"status"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitDaemonError);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("ERROR_CODE_RESOURCE_EXHAUSTED (a quota is reached): admin: at most 16"),
            std::string::npos)
      << r.err;
}

TEST(CruxctlCommandTest, EveryErrorCodeHasWords) {
  const google::protobuf::EnumDescriptor* codes = v1::ErrorCode_descriptor();
  for (int i = 0; i < codes->value_count(); ++i) {
    const auto code = static_cast<v1::ErrorCode>(codes->value(i)->number());
    if (code == v1::ERROR_CODE_UNSPECIFIED) continue;
    EXPECT_EQ(DescribeErrorCode(code).find("unknown error code"), std::string::npos)
        << codes->value(i)->name();
  }
  EXPECT_EQ(DescribeErrorCode(static_cast<v1::ErrorCode>(999)), "unknown error code 999");
}

// A model name with terminal escapes must not retitle or clear the admin's terminal.
TEST(CruxctlCommandTest, HostileModelNameIsEscapedInTextAndValidInJson) {
  const std::string model = "bert\x1b]0;owned\x07\x1b[2J\ncruxd: all jobs healthy";
  Script script;
  script.reply = protocol::NewEnvelope();
  v1::JobDetail* d = script.reply->mutable_job_detail();
  d->mutable_summary()->set_job_id("llm-7");
  d->mutable_summary()->set_state(v1::JOB_STATE_SCHEDULED);
  d->set_model(model);
  const CliRun text = RunWith({"job", "llm-7"}, FakeEnv(&script));
  ASSERT_EQ(text.code, kExitOk) << text.err;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.out.find('\x07'), std::string::npos);
  EXPECT_NE(text.out.find("model bert\\x1b]0;owned\\x07\\x1b[2J\\x0acruxd: all jobs healthy\n"),
            std::string::npos)
      << text.out;
  // No line of its own for the forged text.
  EXPECT_EQ(text.out.find("\ncruxd: all jobs healthy"), std::string::npos);

  const CliRun json = RunWith({"--json", "job", "llm-7"}, FakeEnv(&script));
  ASSERT_EQ(json.code, kExitOk) << json.err;
  EXPECT_EQ(json.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(json.out)["model"], model);
}

TEST(CruxctlCommandTest, DaemonErrorMessageCannotForgeLines) {
  Script script;
  script.reply = protocol::MakeError(0, v1::ERROR_CODE_NOT_FOUND,
                                     "no job\x1b[2K\rcruxctl: link tor0->agg1 repaired\n");
  const CliRun r = RunWith({"job", "x"}, FakeEnv(&script));
  EXPECT_EQ(r.code, kExitDaemonError);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // One line.
  EXPECT_NE(r.err.find("no job\\x1b[2K\\x0dcruxctl: link"), std::string::npos) << r.err;
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

// A daemon that takes the request and never answers: cruxctl gives up at its deadline, not
// before it (it waited for the reply) and says so. A cruxctl that blocked for good would hang the
// test until ctest's timeout ends it; no upper bound on the wall clock is asserted.
TEST_F(CruxctlIpcTest, SilentDaemonTimesOutWithExitThree) {
  StartServer(/*answer=*/false);
  const auto start = std::chrono::steady_clock::now();
  const CliRun r = RunWith({"--socket", socket_path(), "--timeout-ms", "300", "jobs"}, RealEnv());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.code, kExitUnreachable) << r.err;
  EXPECT_NE(r.err.find("did not answer within 300 ms"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_GE(elapsed, std::chrono::milliseconds(300));
  // The request did reach the daemon, once (the server thread may count it a little later).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (requests_.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(requests_.load(), 1);
}

TEST_F(CruxctlIpcTest, NoSocketFileExitsThreeAtOnce) {
  const CliRun r = RunWith({"--socket", socket_path(), "status"}, RealEnv());
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find("no cruxd: " + socket_path() + " does not exist"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("no admin socket"), std::string::npos) << r.err;  // tests/system use it.
  EXPECT_EQ(r.err.find("did not answer"), std::string::npos) << r.err;   // Not a timeout.
}

// A unix socket file nobody listens on: what a SIGKILLed cruxd leaves behind (bound, then the
// process died without unlinking).
void MakeStaleSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ::close(fd);
  ASSERT_TRUE(fs::is_socket(path));
}

// A unix socket that accepts connections (the kernel's backlog does) but never speaks ZMTP.
int ListeningSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  if (::listen(fd, 16) != 0) return -1;
  return fd;
}

// A stale admin.sock is named at once: cruxctl neither waits the whole timeout nor blames
// permissions.
TEST_F(CruxctlIpcTest, StaleSocketIsNamedAtOnceWithExitThree) {
  MakeStaleSocket(socket_path());
  // The default timeout of the report: the old code waited it out, then blamed permissions.
  const CliRun r = RunWith({"--socket", socket_path(), "--timeout-ms", "5000", "jobs"}, RealEnv());
  EXPECT_EQ(r.code, kExitUnreachable) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(
      r.err.find("cruxd is not running: " + socket_path() + " is a stale socket (ECONNREFUSED"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("did not answer"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ermission"), std::string::npos) << r.err;
}

TEST_F(CruxctlIpcTest, AFileThatIsNotASocketIsNamed) {
  { std::ofstream(socket_path()) << "not a socket\n"; }
  const CliRun r = RunWith({"--socket", socket_path(), "status"}, RealEnv());
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_NE(r.err.find(socket_path() + " is not a socket"), std::string::npos) << r.err;
}

TEST_F(CruxctlIpcTest, ADaemonThatDiesDuringTheRequestIsNamedBeforeTheTimeout) {
  const int listener = ListeningSocket(socket_path());
  ASSERT_GE(listener, 0) << std::strerror(errno);
  EXPECT_TRUE(ProbeAdminSocket(socket_path()).ok());
  auto transport = MakeZmqAdminTransport("ipc://" + socket_path());
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  // The "daemon" dies after cruxctl connected: its reconnect fails, and the request ends with
  // the reason rather than after the (here: ten minute) timeout.
  ::close(listener);
  v1::Envelope request = protocol::NewEnvelope(1);
  request.mutable_status_request();
  auto reply = (*transport)->Call(request, core::Duration::Millis(600000));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), core::StatusCode::kNotFound);
  EXPECT_NE(reply.status().message().find("is a stale socket (ECONNREFUSED"), std::string::npos)
      << reply.status().message();
}

// The socket check must not disturb a live daemon: a bare connect(2)-and-close is a failed ZMTP
// handshake to cruxd (counted as a refusal and logged as a warning). A listener that never
// answers records the first byte of every connection cruxctl makes: each must be ZeroMQ's
// greeting (0xff), none an immediate close.
TEST_F(CruxctlIpcTest, ALiveDaemonNeverSeesABareConnect) {
  const int listener = ListeningSocket(socket_path());
  ASSERT_GE(listener, 0) << std::strerror(errno);
  std::atomic<bool> stop{false};
  std::vector<int> first_bytes;  // -1: closed without a byte.
  std::thread acceptor([&] {
    std::vector<int> conns;
    while (!stop.load()) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 20) == 1) {
        const int c = ::accept(listener, nullptr, nullptr);
        if (c >= 0) conns.push_back(c);
      }
    }
    for (const int c : conns) {
      pollfd p{c, POLLIN, 0};
      unsigned char byte = 0;
      const bool readable = ::poll(&p, 1, 5000) == 1;
      first_bytes.push_back(readable && ::read(c, &byte, 1) == 1 ? byte : -1);
      ::close(c);
    }
  });
  const CliRun r = RunWith({"--socket", socket_path(), "--timeout-ms", "300", "status"}, RealEnv());
  stop.store(true);
  acceptor.join();
  ::close(listener);
  EXPECT_EQ(r.code, kExitUnreachable) << r.err;
  EXPECT_NE(r.err.find("did not answer within 300 ms"), std::string::npos) << r.err;
  ASSERT_FALSE(first_bytes.empty());
  for (const int b : first_bytes) EXPECT_EQ(b, 0xff) << "a connection that was not ZeroMQ's";
}

// Runs `body` in a child process as user nobody (65534); returns what it wrote to the pipe.
// Only for root (permissions do not apply to root itself).
std::string RunAsNobody(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string result;
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      result = "setuid failed";
    } else {
      result = body();
    }
    (void)!::write(fds[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return out;
}

TEST_F(CruxctlIpcTest, PermissionDeniedNamesPathAndUser) {
  const int listener = ListeningSocket(socket_path());
  ASSERT_GE(listener, 0) << std::strerror(errno);
  const std::string path = socket_path();
  auto run = [path] {
    CruxctlEnvironment env;
    env.make_transport = MakeZmqAdminTransport;
    const CliRun r = RunWith({"--socket", path, "status"}, env);
    return std::to_string(r.code) + "|" + r.err;
  };
  std::string got;
  std::string user;
  if (::geteuid() == 0) {
    // cruxd's layout: socket 0600 in a directory the other user may traverse.
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::others_exec);
    ::chmod(path.c_str(), 0600);
    got = RunAsNobody(run);
    user = "uid 65534";
  } else {
    ::chmod(path.c_str(), 0);  // Even the owner may not connect (write permission needed).
    got = run();
    user = "uid " + std::to_string(::geteuid());
  }
  ::close(listener);
  EXPECT_EQ(got.substr(0, 2), "3|") << got;
  EXPECT_NE(got.find("permission denied: user " + user), std::string::npos) << got;
  EXPECT_NE(got.find("may not connect to " + path), std::string::npos) << got;
  EXPECT_NE(got.find("EACCES"), std::string::npos) << got;
  if (::geteuid() == 0) {
    EXPECT_NE(got.find("socket owned by uid 0"), std::string::npos) << got;
    EXPECT_NE(got.find("mode 0600"), std::string::npos) << got;
  }
}

TEST_F(CruxctlIpcTest, UnsearchableDirectoryIsAPermissionProblemNotAMissingDaemon) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another user";
  const int listener = ListeningSocket(socket_path());
  ASSERT_GE(listener, 0) << std::strerror(errno);
  fs::permissions(dir_.path(), fs::perms::owner_all);  // 0700, owned by root.
  const std::string path = socket_path();
  const std::string got = RunAsNobody([path] { return ProbeAdminSocket(path).message(); });
  ::close(listener);
  EXPECT_NE(got.find("permission denied: user uid 65534"), std::string::npos) << got;
  EXPECT_NE(got.find("cannot look up " + path), std::string::npos) << got;
}

}  // namespace
}  // namespace crux::cruxctl
