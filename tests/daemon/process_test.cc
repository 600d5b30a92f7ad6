// The real cruxd binary: systemd notifications (READY, WATCHDOG, RELOADING, STOPPING) on a
// NOTIFY_SOCKET of our own, kill -9 and restart with the state back and idempotent
// re-registration, SIGHUP reload and a clean SIGTERM exit. Readiness is awaited through the
// notify socket, never by sleeping.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/transport_context.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

using namespace crux::daemon::testing;  // NOLINT(build/namespaces)
namespace fs = std::filesystem;

constexpr core::Duration kTimeout = core::Duration::Millis(5000);

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("process");
    port_ = FreePort();
    config_ = dir_ / "cruxd.yaml";
    std::ofstream(config_) << "topology: embedded\nstate_dir: " << (dir_ / "state").string()
                           << "\nclient_endpoint: tcp://127.0.0.1:" << port_
                           << "\nmetrics_listen: 127.0.0.1:0\ninsecure: true\ndebounce_ms: 10\n"
                              "lease_ms: 60000\n";
    notify_path_ = (dir_ / "notify.sock").string();
    notify_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof(a.sun_path), "%s", notify_path_.c_str());
    ASSERT_EQ(::bind(notify_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(notify_);
    fs::remove_all(dir_);
  }

  void Spawn() {
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::setenv("NOTIFY_SOCKET", notify_path_.c_str(), 1);
      ::setenv("WATCHDOG_USEC", "200000", 1);
      ::unsetenv("WATCHDOG_PID");
      const std::string log = (dir_ / "cruxd.log").string();
      FILE* f = std::freopen(log.c_str(), "a", stderr);
      (void)f;
      ::execl(CRUXD_BINARY, CRUXD_BINARY, "--config", config_.c_str(), nullptr);
      ::_exit(127);
    }
  }

  // Waits for a notification containing `what`; returns everything received meanwhile.
  std::string WaitNotify(const std::string& what, int timeout_ms = 15000) {
    std::string seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{notify_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(notify_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      const std::string msg(buf, static_cast<size_t>(n));
      seen += msg + "\n";
      if (msg.find(what) != std::string::npos) return seen;
    }
    ADD_FAILURE() << "no '" << what << "' notification; got:\n" << seen << "\nlog:\n" << Log();
    return seen;
  }

  std::string Log() {
    std::ifstream in(dir_ / "cruxd.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::unique_ptr<protocol::DealerClient> Client(const std::string& endpoint) {
    protocol::ClientOptions o;
    o.endpoint = endpoint;
    auto c = protocol::DealerClient::Connect(ctx_, o);
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  }

  v1::Assignment NextAssignment(protocol::DealerClient& c) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      auto m = c.Receive(core::Duration::Millis(200));
      if (m.ok() && m->has_value() && (*m)->has_assignment()) return (*m)->assignment();
    }
    ADD_FAILURE() << "no assignment";
    return v1::Assignment();
  }

  fs::path dir_;
  fs::path config_;
  int port_ = 0;
  std::string notify_path_;
  int notify_ = -1;
  pid_t pid_ = -1;
  protocol::TransportContext ctx_;
};

TEST_F(ProcessTest, KillDashNineRestartKeepsStateAndSystemdNotificationsFlow) {
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port_);
  Spawn();
  WaitNotify("READY=1");
  WaitNotify("WATCHDOG=1");  // WATCHDOG_USEC=200 ms: pings every 100 ms from the loop.

  std::map<std::string, v1::Assignment> before;
  {
    auto a = Client(endpoint);
    auto b = Client(endpoint);
    ASSERT_TRUE(a->Call(Register("ja", {"host0", "host4"}), kTimeout)->has_register_job_reply());
    ASSERT_TRUE(b->Call(Register("jb", {"host1", "host5"}), kTimeout)->has_register_job_reply());
    before["ja"] = NextAssignment(*a);
    before["jb"] = NextAssignment(*b);
    ASSERT_TRUE(a->Call(Profile("ja", 300, 50, true), kTimeout)->has_ack());
    before["ja"] = NextAssignment(*a);  // Scheduled: its own level, a newer epoch.
    EXPECT_GT(before["ja"].epoch(), before["jb"].epoch());
  }

  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  pid_ = -1;

  Spawn();
  WaitNotify("READY=1");
  auto a = Client(endpoint);
  auto r = a->Call(Register("ja", {"host0", "host4"}), kTimeout);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_register_job_reply()) << r->DebugString();
  EXPECT_TRUE(r->register_job_reply().already_known());
  EXPECT_EQ(r->register_job_reply().dscp(), before["ja"].dscp());
  v1::Assignment again = NextAssignment(*a);
  EXPECT_EQ(again.epoch(), before["ja"].epoch());
  EXPECT_EQ(again.level(), before["ja"].level());
  EXPECT_EQ(again.state(), v1::JOB_STATE_SCHEDULED);

  auto admin = Client("ipc://" + (dir_ / "state" / "admin.sock").string());
  v1::Envelope req = protocol::NewEnvelope();
  req.mutable_status_request();
  auto st = admin->Call(req, kTimeout);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->status_reply().jobs(), 2u) << "no job lost";
  EXPECT_EQ(st->status_reply().epoch(), before["ja"].epoch());

  // SIGHUP: RELOADING=1 then READY=1; dry_run turned on live.
  std::ofstream(config_, std::ios::app) << "dry_run: true\n";
  ::kill(pid_, SIGHUP);
  const std::string seen = WaitNotify("READY=1");
  EXPECT_THAT(seen, ::testing::HasSubstr("RELOADING=1"));
  st = admin->Call(req, kTimeout);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->status_reply().dry_run());

  ::kill(pid_, SIGTERM);
  WaitNotify("STOPPING=1");
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace crux::daemon
