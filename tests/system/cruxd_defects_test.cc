// Regressions with real processes: state files that are empty, schema-less or corrupt
// make cruxd refuse to start (and --fresh-state starts afresh with a new state id), cruxd
// --check-config checks what start-up checks, a lock that cannot be taken is reported for what it
// is, the admin socket is removed at exit, a restart with the same inputs reproduces the applied
// plan (no epoch bump), and CURVE roles and refusals end to end.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"
#include "cruxd_harness.h"

namespace crux::system_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class CruxdDefectsTest : public CruxdTest {
 protected:
  CruxdDefectsTest() : CruxdTest("crux_cruxd_defects") {}

  // Runs crux-loadgen for `jobs` jobs for `duration_s` and waits for it.
  void RunLoadgen(int jobs, int duration_s) {
    StartLoadgen(jobs, duration_s);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(loadgen_->Wait(seconds(duration_s + 60)).has_value());
  }
  // job_id -> level of every live job.
  std::map<std::string, int> Levels() {
    std::map<std::string, int> out;
    const nlohmann::json j = cruxd_.CruxctlJson({"jobs"});
    if (!j.contains("jobs")) return out;
    for (const auto& job : j["jobs"])
      out[job["job_id"].get<std::string>()] = job["level"].get<int>();
    return out;
  }
  uint64_t Epoch() { return cruxd_.CruxctlJson({"status"}).value("epoch", uint64_t{0}); }
  // cruxctl prints the 64-bit state id as a decimal string (JSON numbers lose precision).
  uint64_t StateId() {
    return std::stoull(cruxd_.CruxctlJson({"status"}).value("state_id", std::string("0")));
  }
};

TEST_F(CruxdDefectsTest, EmptyStateFileRefusesToStartAndFreshStateStartsAfresh) {
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  RunLoadgen(3, 2);
  ASSERT_GT(Epoch(), 0u);
  const uint64_t old_state = StateId();
  ASSERT_NE(old_state, 0u);
  cruxd_.Kill(SIGKILL);
  // The state file is truncated (a bad restore, a full disk, an operator's mistake).
  for (const char* ext : {"-wal", "-shm"}) fs::remove(cruxd_.database().string() + ext);
  std::ofstream(cruxd_.database(), std::ios::trunc).close();
  ASSERT_EQ(fs::file_size(cruxd_.database()), 0u);
  CommandResult r = cruxd_.RunToExit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("empty (0 bytes)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--fresh-state"), std::string::npos) << r.err;
  EXPECT_EQ(fs::file_size(cruxd_.database()), 0u) << "a refused start writes nothing";
  // --check-config sees the same problem.
  r = cruxd_.RunToExit({"--check-config"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("empty (0 bytes)"), std::string::npos) << r.err;
  // The operator chooses to start afresh: a new state id, the empty file kept aside.
  ASSERT_TRUE(cruxd_.Start({"--fresh-state"}, &why)) << why;
  const uint64_t new_state = StateId();
  EXPECT_NE(new_state, 0u);
  EXPECT_NE(new_state, old_state);
  EXPECT_EQ(Epoch(), 0u);
  bool set_aside = false;
  for (const auto& e : fs::directory_iterator(cruxd_.state_dir())) {
    if (e.path().filename().string().find("cruxd.sqlite.set-aside-") == 0) set_aside = true;
  }
  EXPECT_TRUE(set_aside);
}

TEST_F(CruxdDefectsTest, SchemaLessAndCorruptStateFilesAreRefused) {
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  RunLoadgen(6, 2);
  cruxd_.Kill(SIGTERM);  // Clean stop: the WAL is checkpointed into the file.
  ASSERT_TRUE(cruxd_.WaitExit(seconds(20)).has_value());
  // Corrupt a few pages in the middle of the file (keeping the header intact).
  const auto size = fs::file_size(cruxd_.database());
  ASSERT_GT(size, 4u * 4096u);
  {
    std::fstream f(cruxd_.database(), std::ios::in | std::ios::out | std::ios::binary);
    for (uint64_t page = 1; page * 4096 < size; page += 2) {
      f.seekp(static_cast<std::streamoff>(page * 4096 + 100));
      const std::string junk(600, '\x5a');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
  }
  CommandResult r = cruxd_.RunToExit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.err.find("integrity check") != std::string::npos ||
              r.err.find("not a readable SQLite database") != std::string::npos ||
              r.err.find("no Crux schema") != std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--fresh-state"), std::string::npos) << r.err;
  // A file that is an SQLite database but not Crux's.
  fs::remove(cruxd_.database());
  for (const char* ext : {"-wal", "-shm"}) fs::remove(cruxd_.database().string() + ext);
  const CommandResult made = RunCommand(
      {"/usr/bin/python3", "-c",
       "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); "
       "c.commit()",
       cruxd_.database().string()},
      dir_.path(), seconds(30));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  r = cruxd_.RunToExit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no Crux schema"), std::string::npos) << r.err;
}

TEST_F(CruxdDefectsTest, CheckConfigChecksWhatStartUpChecks) {
  CommandResult r = cruxd_.RunToExit({"--check-config"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("limits:"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(cruxd_.state_dir())) << "--check-config changes nothing";
  cruxd_.WriteConfig("topology: nope.yaml\n");
  r = cruxd_.RunToExit({"--check-config"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << r.err;
  r = cruxd_.RunToExit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << r.err;
  // CURVE with a missing key file.
  cruxd_.WriteConfig(
      "curve:\n  enabled: true\n  server_secret_key_file: /nonexistent/server.key\n"
      "  authorized_keys_dir: /nonexistent\n",
      /*curve=*/true);
  r = cruxd_.RunToExit({"--check-config"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("server_secret_key_file"), std::string::npos) << r.err;
}

TEST_F(CruxdDefectsTest, ALockThatCannotBeTakenIsNotAnotherCruxd) {
  fs::create_directories(cruxd_.state_dir() / "cruxd.lock");  // Cannot be opened as a file.
  CommandResult r = cruxd_.RunToExit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find("another cruxd"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot open the lock file"), std::string::npos) << r.err;
  fs::remove(cruxd_.state_dir() / "cruxd.lock");
  if (::geteuid() != 0) {  // Root ignores permission bits.
    ::chmod(cruxd_.state_dir().c_str(), 0500);
    r = cruxd_.RunToExit();
    ::chmod(cruxd_.state_dir().c_str(), 0700);
    EXPECT_NE(r.err.find("not writable"), std::string::npos) << r.err;
  }
  // A second cruxd on the same state really is reported as such.
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  r = cruxd_.RunToExit();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("another cruxd is running"), std::string::npos) << r.err;
}

TEST_F(CruxdDefectsTest, TheAdminSocketIsRemovedAtExit) {
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  ASSERT_TRUE(fs::exists(cruxd_.admin_socket()));
  cruxd_.Kill(SIGTERM);
  ASSERT_EQ(cruxd_.WaitExit(seconds(20)).value_or(-1), 0);
  EXPECT_FALSE(fs::exists(cruxd_.admin_socket()));
}

TEST_F(CruxdDefectsTest, RestartsWithTheSameInputsReproduceTheAppliedPlan) {
  // Jittery reports (loadgen: 2 % noise, below the 10 % hysteresis) from many jobs, and five
  // kill -9 restarts while the clients keep reporting: the plan must not move.
  cruxd_.WriteConfig("debounce_ms: 30\n");
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  constexpr int kJobs = 60;
  StartLoadgen(kJobs, 600);
  ASSERT_FALSE(HasFatalFailure());
  auto settled = [&](std::map<std::string, int>* levels, uint64_t* epoch) {
    // Scheduled everywhere and no epoch change over a second.
    const uint64_t e1 = Epoch();
    const nlohmann::json jobs = cruxd_.CruxctlJson({"jobs"});
    if (!jobs.contains("jobs") || jobs["jobs"].size() != kJobs) return false;
    for (const auto& j : jobs["jobs"]) {
      if (j["state"] != "scheduled") return false;
    }
    std::this_thread::sleep_for(milliseconds(1000));
    *levels = Levels();
    *epoch = Epoch();
    return e1 == *epoch && levels->size() == static_cast<size_t>(kJobs);
  };
  std::map<std::string, int> levels;
  uint64_t epoch = 0;
  ASSERT_TRUE(WaitUntil([&] { return settled(&levels, &epoch); }, seconds(120), milliseconds(200)))
      << "the plan never settled";
  for (int restart = 0; restart < 5; ++restart) {
    cruxd_.Kill(SIGKILL);
    ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
    // The clients reconnect and keep reporting; give the restart re-plan and their reports time.
    std::this_thread::sleep_for(milliseconds(1500));
    EXPECT_EQ(Epoch(), epoch) << "restart " << restart << " bumped the epoch";
    const auto now = Levels();
    int moved = 0;
    for (const auto& [id, level] : levels) {
      if (!now.count(id) || now.at(id) != level) ++moved;
    }
    EXPECT_EQ(moved, 0) << "restart " << restart << " moved " << moved << " of " << kJobs
                        << " jobs to another level";
  }
}

// CURVE end to end: a job key cannot act as a switch agent, a switch key only for its switch,
// and plain clients, clients with the wrong server key and unknown keys are refused, counted by
// reason (cruxctl status) and logged.
TEST_F(CruxdDefectsTest, CurveRolesAndEveryRefusalAreVisible) {
  const fs::path keys = dir_.path() / "keys";
  fs::create_directories(keys / "switches");
  auto server = protocol::GenerateCurveKeyPair();
  auto job = protocol::GenerateCurveKeyPair();
  auto sw = protocol::GenerateCurveKeyPair();
  auto stranger = protocol::GenerateCurveKeyPair();
  auto wrong_server = protocol::GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok() && job.ok() && sw.ok() && stranger.ok() && wrong_server.ok());
  ASSERT_TRUE(protocol::SaveKeyPair(*server, (dir_.path() / "server").string()).ok());
  ASSERT_TRUE(protocol::SavePublicKey(job->public_z85, (keys / "job-a.pub").string()).ok());
  ASSERT_TRUE(
      protocol::SavePublicKey(sw->public_z85, (keys / "switches" / "tor1.pub").string()).ok());
  cruxd_.WriteConfig("curve:\n  enabled: true\n  server_secret_key_file: " +
                         (dir_.path() / "server.key").string() +
                         "\n  authorized_keys_dir: " + keys.string() + "\n",
                     /*curve=*/true);
  std::string why;
  ASSERT_TRUE(cruxd_.Start({}, &why)) << why;

  protocol::TransportContext ctx;
  auto connect = [&](const protocol::CurveKeyPair* keys_to_use, const std::string& server_pub) {
    protocol::ClientOptions co;
    co.endpoint = cruxd_.endpoint();
    if (keys_to_use != nullptr) {
      co.curve = true;
      co.server_public_z85 = server_pub;
      co.client_keys = *keys_to_use;
    }
    auto c = protocol::DealerClient::Connect(ctx, co);
    EXPECT_TRUE(c.ok());
    return std::move(c).value();
  };
  auto hello = [](const std::string& name) {
    v1::Envelope e = protocol::NewEnvelope();
    e.mutable_switch_hello()->set_switch_name(name);
    e.mutable_switch_hello()->mutable_capabilities()->set_queues(8);
    e.mutable_switch_hello()->mutable_capabilities()->set_strict_priority(true);
    e.mutable_switch_hello()->mutable_capabilities()->set_dwrr(true);
    return e;
  };
  {
    auto job_client = connect(&*job, server->public_z85);
    auto r = job_client->Call(hello("tor1"), core::Duration::Millis(5000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->has_error());
    EXPECT_EQ(r->error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
    auto agent = connect(&*sw, server->public_z85);
    r = agent->Call(hello("tor0"), core::Duration::Millis(5000));
    ASSERT_TRUE(r.ok() && r->has_error());
    EXPECT_EQ(r->error().code(), v1::ERROR_CODE_PERMISSION_DENIED);
    r = agent->Call(hello("tor1"), core::Duration::Millis(5000));
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->has_ack()) << r->DebugString();
    // Refused at the handshake: a plain client, a client with the wrong server key, an
    // unauthorised key. None gets a reply.
    auto plain = connect(nullptr, "");
    EXPECT_FALSE(plain->Call(hello("tor1"), core::Duration::Millis(300)).ok());
    auto wrong = connect(&*job, wrong_server->public_z85);
    EXPECT_FALSE(wrong->Call(hello("tor1"), core::Duration::Millis(300)).ok());
    auto unknown = connect(&*stranger, server->public_z85);
    EXPECT_FALSE(unknown->Call(hello("tor1"), core::Duration::Millis(300)).ok());
  }
  nlohmann::json refusals;
  ASSERT_TRUE(WaitUntil(
      [&] {
        refusals = cruxd_.CruxctlJson({"status"}).value("refusals", nlohmann::json::object());
        // The plain client counts as `mechanism` or `handshake`, depending on which side sees
        // the mismatch first (server.h); the wrong server key is `handshake`.
        return refusals.value("role", 0) >= 2 && refusals.value("handshake", 0) >= 1 &&
               refusals.value("mechanism", 0) + refusals.value("handshake", 0) >= 2 &&
               refusals.value("unauthorised_key", 0) >= 1;
      },
      seconds(20), milliseconds(200)))
      << refusals.dump();
  const std::string log = cruxd_.LastLog();
  for (const char* reason : {"'role'", "'handshake'", "'unauthorised_key'"}) {
    EXPECT_NE(log.find(reason), std::string::npos) << "no log line for " << reason;
  }
  // tor1 is known (its real agent said hello); no forged state for tor0 exists.
  const nlohmann::json switches = cruxd_.CruxctlJson({"switches"});
  ASSERT_TRUE(switches.contains("switches")) << switches.dump();
  for (const auto& s : switches["switches"]) EXPECT_EQ(s["name"], "tor1");
}

}  // namespace
}  // namespace crux::system_test
