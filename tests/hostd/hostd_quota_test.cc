// crux-hostd's per-local-user limits and status filtering (issue #31 item 2), with a real
// crux-hostd process and real Unix sockets. Peers of other users are forked children that drop to
// that uid (setgid / setuid) before they connect, so the agent learns their uid from SO_PEERCRED
// as it does in production. Needs root to switch uids (skipped otherwise). No cruxd runs: the
// limits are the agent's own, enforced before anything reaches cruxd.
//
// The test process has no other thread when it forks (crux-hostd is a child process), so the
// children may allocate.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../system/process_util.h"
#include "crux/hostd/host_protocol.h"
#include "crux/hostd/hostd_server.h"
#include "crux/hostd/local_socket.h"

namespace crux::system_test {
namespace {

using nlohmann::json;

constexpr uid_t kNobody = 65534;
constexpr uid_t kOtherUser = 65533;

// In the calling process: connects to `socket`, says Hello for `job_id` (none when empty), asks
// for the status and returns {"replies": every message hostd sent before its status reply (raw
// JSON), "status": the status} or {"error": ...}.
json Talk(const std::string& socket, const std::string& job_id) {
  json out = {{"replies", json::array()}};
  auto c = hostd::LocalConnection::Connect(socket);
  if (!c.ok()) return {{"error", c.status().message()}};
  if (!job_id.empty()) {
    hostd::Hello h;
    h.role = hostd::Role::kProfiler;
    h.pid = ::getpid();
    h.job_id = job_id;
    h.job_source = "CRUX_JOB_ID";
    h.abi = "v6";
    if (auto s = c->Send(hostd::Encode(h)); !s.ok()) return {{"error", s.message()}};
  }
  if (auto s = c->Send(hostd::Encode(hostd::StatusRequest{})); !s.ok()) {
    return {{"error", s.message()}};
  }
  pollfd p{c->fd(), POLLIN, 0};
  for (;;) {
    auto r = c->Receive();
    if (!r.ok()) return {{"error", r.status().message()}};
    if (!r->has_value()) {
      if (::poll(&p, 1, 10000) <= 0) return {{"error", "no status reply in 10 s"}};
      continue;
    }
    json m = json::parse(**r, nullptr, false);
    if (m.value("type", "") == "status_reply") {
      out["status"] = m["status"];
      return out;
    }
    out["replies"].push_back(std::move(m));
  }
}

// Runs `fn` in a forked child as `uid` (and gid `uid`, no supplementary groups); returns what it
// returned. The child exits afterwards, closing its connections.
json AsUid(uid_t uid, const std::function<json()>& fn) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {{"error", "pipe2"}};
  const pid_t pid = ::fork();
  if (pid < 0) return {{"error", "fork"}};
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) {
      text = json{{"error", "could not switch to uid " + std::to_string(uid)}}.dump();
    } else {
      text = fn().dump();
    }
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = ::write(fds[1], text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  json out = json::parse(text, nullptr, false);
  if (out.is_discarded()) return {{"error", "child said: '" + text + "'"}};
  return out;
}

// The refusals among a Talk's replies.
std::vector<json> Refusals(const json& talk) {
  std::vector<json> out;
  for (const json& m : talk.value("replies", json::array())) {
    if (m.value("type", "") == "refused") out.push_back(m);
  }
  return out;
}

std::set<std::string> JobIds(const json& status) {
  std::set<std::string> out;
  for (const json& j : status.value("jobs", json::array())) out.insert(j.value("job_id", ""));
  return out;
}

class HostdQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::getuid() != 0) GTEST_SKIP() << "switching uids needs root";
    // The socket's directory must be reachable by the other users (the socket itself is 0666).
    ::chmod(dir_.path().c_str(), 0755);
  }

  // Starts crux-hostd with the default limits plus `extra` config lines. Jobs stay (and count)
  // for end_delay_ms after their last process left, and never register (no cruxd anyway).
  void Start(const std::string& extra = "") {
    socket_ = (dir_.path() / "hostd.sock").string();
    const fs::path config = dir_.path() / "hostd.yaml";
    WriteFile(config, "host: host0\ndaemon: tcp://127.0.0.1:" + std::to_string(FreeTcpPort()) +
                          "\ninsecure: true\nsocket: " + socket_ +
                          "\nterm_file: \"\"\nnic_counters_interval_ms: 0\n"
                          "register_delay_ms: 600000\nend_delay_ms: 600000\n" +
                          extra);
    ASSERT_TRUE(hostd_.Start({CRUX_HOSTD_BINARY, "--config", config.string()},
                             dir_.path() / "hostd.out", dir_.path() / "hostd.err"));
    ASSERT_TRUE(
        WaitUntil([&] { return hostd::QueryStatus(socket_, 500).ok(); }, std::chrono::seconds(10)))
        << hostd_.Stderr();
  }

  json StartJobAs(uid_t uid, const std::string& job_id) {
    if (uid == 0) return Talk(socket_, job_id);
    return AsUid(uid, [&] { return Talk(socket_, job_id); });
  }

  TempDir dir_;
  ChildProcess hostd_;
  std::string socket_;
};

TEST_F(HostdQuotaTest, AUserOverItsJobLimitIsRefusedWithTheReasonWhileOtherUsersAreAccepted) {
  Start();  // Default limits: 8 jobs per non-root uid.
  for (int i = 0; i < 8; ++i) {
    const std::string id = "nobody-" + std::to_string(i);
    json t = StartJobAs(kNobody, id);
    ASSERT_FALSE(t.contains("error")) << t.dump();
    EXPECT_TRUE(Refusals(t).empty()) << id << ": " << t.dump();
  }
  // The ninth job of the same user: refused, and told why.
  json ninth = StartJobAs(kNobody, "nobody-8");
  ASSERT_FALSE(ninth.contains("error")) << ninth.dump();
  std::vector<json> refused = Refusals(ninth);
  ASSERT_EQ(refused.size(), 1u) << ninth.dump();
  EXPECT_EQ(refused[0].value("job_id", ""), "nobody-8");
  EXPECT_EQ(refused[0].value("code", ""), "resource_exhausted");
  EXPECT_NE(refused[0].value("reason", "").find("limits.jobs_per_uid"), std::string::npos)
      << refused[0].dump();
  EXPECT_EQ(JobIds(ninth["status"]).count("nobody-8"), 0u);

  // Another user and root still start jobs on this host.
  json other = StartJobAs(kOtherUser, "other-0");
  ASSERT_FALSE(other.contains("error")) << other.dump();
  EXPECT_TRUE(Refusals(other).empty()) << other.dump();
  json root = StartJobAs(0, "root-0");
  ASSERT_FALSE(root.contains("error")) << root.dump();
  EXPECT_TRUE(Refusals(root).empty()) << root.dump();

  const std::set<std::string> jobs = JobIds(root["status"]);
  EXPECT_EQ(jobs.size(), 10u) << root["status"].dump();
  EXPECT_EQ(jobs.count("nobody-8"), 0u);
  EXPECT_EQ(jobs.count("other-0"), 1u);
  EXPECT_EQ(jobs.count("root-0"), 1u);
  EXPECT_EQ(root["status"]["counters"].value("refused_quota", 0), 1) << root["status"].dump();
  // And the refusal is in crux-hostd's log, naming the job and the uid.
  EXPECT_TRUE(WaitUntil(
      [&] {
        const std::string log = hostd_.Stderr();
        return log.find("refused") != std::string::npos &&
               log.find("nobody-8") != std::string::npos &&
               log.find("uid 65534") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << hostd_.Stderr();
}

TEST_F(HostdQuotaTest, StatusShowsANonRootUserOnlyItsOwnJobsAndRootEverything) {
  Start();
  ASSERT_TRUE(Refusals(StartJobAs(kNobody, "nobody-job")).empty());
  ASSERT_TRUE(Refusals(StartJobAs(kOtherUser, "other-job")).empty());
  ASSERT_TRUE(Refusals(StartJobAs(0, "root-job")).empty());
  // A claim on another user's job is refused; its error must not show in others' status.
  json claim = StartJobAs(kOtherUser, "nobody-job");
  ASSERT_FALSE(claim.contains("error")) << claim.dump();

  json as_nobody = AsUid(kNobody, [&] { return Talk(socket_, ""); });
  ASSERT_FALSE(as_nobody.contains("error")) << as_nobody.dump();
  EXPECT_EQ(JobIds(as_nobody["status"]), std::set<std::string>{"nobody-job"})
      << as_nobody["status"].dump();
  EXPECT_EQ(as_nobody["status"].dump().find("other-job"), std::string::npos);
  EXPECT_EQ(as_nobody["status"].dump().find("root-job"), std::string::npos);

  json as_other = AsUid(kOtherUser, [&] { return Talk(socket_, ""); });
  ASSERT_FALSE(as_other.contains("error")) << as_other.dump();
  EXPECT_EQ(JobIds(as_other["status"]), std::set<std::string>{"other-job"})
      << as_other["status"].dump();
  EXPECT_EQ(as_other["status"].dump().find("root-job"), std::string::npos);

  json as_root = Talk(socket_, "");
  ASSERT_FALSE(as_root.contains("error")) << as_root.dump();
  EXPECT_EQ(JobIds(as_root["status"]),
            (std::set<std::string>{"nobody-job", "other-job", "root-job"}));
  // crux-hostd --status (root here) sees everything too.
  auto cli = hostd::QueryStatus(socket_, 2000);
  ASSERT_TRUE(cli.ok()) << cli.status().message();
  EXPECT_EQ(JobIds(json::parse(*cli)).size(), 3u);
}

}  // namespace
}  // namespace crux::system_test
