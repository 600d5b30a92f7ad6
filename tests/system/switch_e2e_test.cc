// Switches end to end, all real processes: two redis-server instances (CONFIG_DB stand-ins on
// unix sockets in a temp dir, no persistence), cruxd (temp config + state dir, insecure loopback
// TCP on a free port), crux-loadgen registering a few jobs, and one crux-switch-agent (sonic
// backend) per Redis for two switches of the example topology.
//
// The expected DSCP -> TC map of a switch is derived from what cruxctl reports, independently of
// the daemon's QoS code: every DSCP is best effort (qos.default_tc) except the reserved ones and
// the colours of the jobs whose flow paths (`cruxctl --json job ID`) cross the switch, which map
// to the level TC (qos.level_tcs[level], the last entry for deeper levels) of the
// highest-priority such job. Each CONFIG_DB is read back with
// `redis-cli -s SOCK -n 4 HGETALL 'DSCP_TO_TC_MAP|CRUX'`.
//
// Steps: converge; a link goes down (paths and levels move) and the maps follow; one Redis is
// SIGKILLed while a reloaded qos block (storage DWRR weight) is pushed -> `cruxctl switches`
// shows that switch's error, the other switch applies; the Redis comes back (empty) -> the agent
// retries and the switch converges; an agent is restarted after its map was deleted -> it gets
// the full state again; the aggregation switch's CONFIG_DB is FLUSHDBed under its running agent ->
// within one reconcile period the tables are back and `cruxctl --json switches` shows the repair
// (drift_repairs, last_drifted_fields, in_sync); cruxd is SIGKILLed and restarted -> jobs keep
// their (distinct) colours, agents re-hello and everything converges. cruxd logs "switch agent X
// connected" only for new or returning agents.
//
// A second test starts an agent under a name that is not a switch of cruxd's topology: cruxd
// refuses it (UNKNOWN_HOST) and the agent exits with status 78 (EX_CONFIG) instead of retrying.
//
// Every wait polls with a deadline; every child is SIGKILLed in teardown (ChildProcess).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../switch_adapters/asic_rows.h"
#include "cruxd_harness.h"
#include "http_get.h"
#include "process_util.h"
#include "redis_process.h"

namespace crux::system_test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kJobs = 4;
constexpr int kReconcileMs = 1000;     // The agents' --reconcile-period-ms.
constexpr int kAgentRefusedExit = 78;  // crux-switch-agent: cruxd refused the switch (EX_CONFIG).

// The QoS policy the test configures (and derives its expectations from).
const std::vector<int> kLevelTcs = {5, 4, 3, 2};
constexpr int kDefaultTc = 0;
const std::map<int, int> kReserved = {{48, 6}, {8, 1}};  // control, storage.

std::string QosBlock(int storage_weight) {
  return "qos:\n"
         "  dscp_pool: [10, 12, 14, 18, 20, 22, 26, 28, 30, 34, 36, 38]\n"
         "  level_tcs: [5, 4, 3, 2]\n"
         "  reserved:\n"
         "    - {name: control, dscps: [48], tc: 6, scheduler: STRICT}\n"
         "    - {name: storage, dscps: [8], tc: 1, scheduler: DWRR, weight: " +
         std::to_string(storage_weight) +
         "}\n"
         "  default_tc: 0\n";
}

uint64_t UnixMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

int LevelTc(int level) {
  return kLevelTcs[std::min<size_t>(static_cast<size_t>(level), kLevelTcs.size() - 1)];
}

std::string Dump(const std::map<int, int>& m) {
  std::ostringstream o;
  for (const auto& [k, v] : m) o << k << "->" << v << " ";
  return o.str();
}

struct Switch {
  std::string name;
  std::unique_ptr<RedisProcess> redis;  // Its CONFIG_DB (db 4).
  std::unique_ptr<ChildProcess> agent;
  int agent_runs = 0;
};

class SwitchE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = MissingSwitchE2eBinary(); !missing.empty()) {
      GTEST_SKIP() << missing << " is not available";
    }
    ASSERT_FALSE(dir_.path().empty());
    WriteConfig(40);
  }

  void TearDown() override {
    if (HasFailure()) {
      cruxd_.DumpLogs();
      for (Switch& s : switches_) {
        for (int run = 0; run < s.agent_runs; ++run) {
          const std::string log = AgentOutput(s, run);
          std::cerr << "---- agent " << s.name << " run " << run << " (tail) ----\n"
                    << log.substr(log.size() > 6000 ? log.size() - 6000 : 0) << "\n";
        }
      }
    }
    for (Switch& s : switches_) {
      if (s.agent) s.agent->Kill(SIGKILL);
      if (s.redis) s.redis->Kill(SIGKILL);
    }
    if (loadgen_) loadgen_->Kill(SIGKILL);
    cruxd_.Kill(SIGKILL);
  }

  // The harness's lab settings (info logs) and the QoS policy of the test.
  void WriteConfig(int storage_weight) {
    cruxd_.WriteConfig("log_level: info\n" + QosBlock(storage_weight));
  }

  // ---- processes ----

  void StartCruxd() {
    std::string why;
    ASSERT_TRUE(cruxd_.Start({}, &why)) << why;
  }

  // Starts (or restarts, empty) the Redis of `s`.
  void StartRedis(Switch& s) {
    if (!s.redis) s.redis = std::make_unique<RedisProcess>(dir_.path() / ("redis_" + s.name));
    std::string why;
    ASSERT_TRUE(s.redis->Start(&why)) << s.name << ": " << why;
  }

  fs::path AgentLog(const Switch& s, int run) const {
    return dir_.path() / ("agent_" + s.name + "_" + std::to_string(run) + ".err");
  }
  // What run `run` of the agent of `s` wrote: its log (spdlog writes to stdout), then stderr.
  std::string AgentOutput(const Switch& s, int run) const {
    const fs::path log = AgentLog(s, run);
    return ReadFile(log.string() + ".out") + ReadFile(log);
  }

  // `extra`: more agent options.
  void StartAgent(Switch& s, const std::vector<std::string>& extra = {}) {
    s.agent = std::make_unique<ChildProcess>();
    const fs::path log = AgentLog(s, s.agent_runs++);
    std::vector<std::string> args = {CRUX_SWITCH_AGENT_BINARY,
                                     "--switch-name",
                                     s.name,
                                     "--daemon",
                                     cruxd_.endpoint(),
                                     "--insecure",
                                     "--backend",
                                     "sonic",
                                     "--redis-socket",
                                     s.redis->socket().string(),
                                     "--redis-timeout-ms",
                                     "300",
                                     "--ports",
                                     "Ethernet0,Ethernet4",
                                     "--hello-interval-ms",
                                     "300",
                                     "--call-timeout-ms",
                                     "1000",
                                     "--reconcile-period-ms",
                                     std::to_string(kReconcileMs),
                                     "--term-file",
                                     (dir_.path() / (s.name + ".term")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(s.agent->Start(args, log.string() + ".out", log, dir_.path()));
  }

  // ---- clients ----

  CommandResult Redis(const Switch& s, const std::vector<std::string>& args) {
    return s.redis->Cli(4, args);
  }

  // HGETALL of a CONFIG_DB key; nullopt when Redis does not answer.
  std::optional<std::map<std::string, std::string>> RedisHash(const Switch& s,
                                                              const std::string& key) {
    const CommandResult r = Redis(s, {"HGETALL", key});
    if (r.exit_code != 0 || r.out.find("ERR") == 0 || r.out.find("Could not connect") == 0) {
      return std::nullopt;
    }
    std::map<std::string, std::string> out;
    std::istringstream in(r.out);
    std::string k, v;
    while (std::getline(in, k) && std::getline(in, v)) out[k] = v;
    return out;
  }

  std::optional<std::map<int, int>> DeviceDscpMap(const Switch& s) {
    auto h = RedisHash(s, "DSCP_TO_TC_MAP|CRUX");
    if (!h) return std::nullopt;
    std::map<int, int> m;
    for (const auto& [k, v] : *h) m[std::stoi(k)] = std::stoi(v);
    return m;
  }

  CommandResult Cruxctl(std::vector<std::string> args, milliseconds timeout) {
    return cruxd_.Cruxctl(std::move(args), timeout);
  }
  // cruxctl --json ...; an empty object when it fails (callers poll).
  json CruxctlJson(std::vector<std::string> args) { return cruxd_.PollJson(std::move(args)); }

  struct JobView {
    int dscp = 0;
    int level = 0;
    std::string state;
    std::set<std::string> nodes;  // Every node on the job's flow paths.
  };

  // The jobs as cruxctl reports them, with their paths. Empty on any failure.
  std::map<std::string, JobView> Jobs() {
    std::map<std::string, JobView> out;
    const json j = CruxctlJson({"jobs"});
    if (!j.contains("jobs")) return {};
    for (const auto& job : j["jobs"]) {
      if (job["state"] == "gone") continue;
      JobView v;
      v.dscp = job["dscp"].get<int>();
      v.level = job["level"].get<int>();
      v.state = job["state"].get<std::string>();
      const std::string id = job["job_id"].get<std::string>();
      const json d = CruxctlJson({"job", id});
      if (!d.contains("flows")) return {};
      for (const auto& f : d["flows"]) {
        for (const auto& n : f["path"]) v.nodes.insert(n.get<std::string>());
      }
      out[id] = std::move(v);
    }
    return out;
  }

  bool AllScheduled(size_t n) {
    const json j = CruxctlJson({"jobs"});
    if (!j.contains("jobs") || j["jobs"].size() != n) return false;
    for (const auto& job : j["jobs"]) {
      if (job["state"] != "scheduled") return false;
    }
    return true;
  }

  // The DSCP -> TC map a switch must hold for `jobs` (see the file comment).
  static std::map<int, int> Expected(const std::string& sw,
                                     const std::map<std::string, JobView>& jobs) {
    std::map<int, int> m;
    for (int d = 0; d <= 63; ++d) m[d] = kDefaultTc;
    for (const auto& [d, tc] : kReserved) m[d] = tc;
    std::map<int, int> best;  // colour -> best (lowest) level among the jobs crossing `sw`.
    for (const auto& [id, j] : jobs) {
      if (!j.nodes.count(sw)) continue;
      auto it = best.find(j.dscp);
      if (it == best.end() || j.level < it->second) best[j.dscp] = j.level;
    }
    for (const auto& [d, level] : best) m[d] = LevelTc(level);
    return m;
  }

  json SwitchRow(const std::string& name) {
    const json j = CruxctlJson({"switches"});
    for (const auto& s : j.value("switches", json::array())) {
      if (s["name"] == name) return s;
    }
    return json::object();
  }

  // True when every switch's CONFIG_DB holds the expected map for the jobs cruxctl shows (read
  // twice, so a re-plan in between is not mistaken for convergence) and cruxctl reports the
  // switch applied without error. *why says what differs.
  bool Converged(std::string* why) {
    const auto jobs = Jobs();
    if (jobs.size() != static_cast<size_t>(kJobs)) {
      *why = "cruxctl shows " + std::to_string(jobs.size()) + " jobs";
      return false;
    }
    for (Switch& s : switches_) {
      const json row = SwitchRow(s.name);
      if (row.empty() || !row.value("connected", false) ||
          !row.value("last_error", std::string("?")).empty() ||
          row.value("applied_epoch", 0ull) < row.value("desired_epoch", 1ull)) {
        *why = "cruxctl switches: " + row.dump();
        return false;
      }
      const auto device = DeviceDscpMap(s);
      const auto want = Expected(s.name, jobs);
      if (!device || *device != want) {
        *why = s.name + ": CONFIG_DB " + (device ? Dump(*device) : "unreachable") +
               "\n  expected " + Dump(want);
        return false;
      }
    }
    if (Jobs().size() != jobs.size()) return false;
    for (const auto& [id, j] : Jobs()) {
      const auto it = jobs.find(id);
      if (it == jobs.end() || it->second.level != j.level || it->second.dscp != j.dscp ||
          it->second.nodes != j.nodes) {
        *why = "the plan moved while reading";
        return false;
      }
    }
    return true;
  }

  void ExpectConverges(const std::string& step) {
    std::string why;
    EXPECT_TRUE(WaitUntil([&] { return Converged(&why); }, seconds(20), milliseconds(150)))
        << step << ": not converged: " << why;
  }

  // Occurrences of `needle` in cruxd's stderr of run `run`, or in the stderr of the running
  // agent of `s`.
  int CountInLog(size_t run, const std::string& needle) { return Count(cruxd_.Log(run), needle); }
  int CountInAgentLog(const Switch& s, const std::string& needle) {
    return Count(AgentOutput(s, s.agent_runs - 1), needle);
  }
  static int Count(const std::string& text, const std::string& needle) {
    int n = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }

  TempDir dir_{"crux_switch_e2e"};
  CruxdHarness cruxd_{dir_.path()};
  std::unique_ptr<ChildProcess> loadgen_;
  std::vector<Switch> switches_;
};

TEST_F(SwitchE2eTest, ConfigDbFollowsPlansThroughFaultsAndRestarts) {
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());

  // 1. A few jobs arrive through crux-loadgen and get scheduled; then the clients go away (their
  //    leases outlive the test), so the plan settles.
  loadgen_ = std::make_unique<ChildProcess>();
  ASSERT_TRUE(loadgen_->Start(cruxd_.LoadgenArgs(kJobs, 120), dir_.path() / "loadgen.out",
                              dir_.path() / "loadgen.err", dir_.path()));
  ASSERT_TRUE(WaitUntil([&] { return AllScheduled(kJobs); }, seconds(30), milliseconds(200)))
      << CruxctlJson({"jobs"}).dump(2);
  loadgen_->Kill(SIGKILL);

  // 2. The two switches: the ToR and the aggregation switch crossed by the most jobs.
  std::map<std::string, JobView> jobs;
  ASSERT_TRUE(WaitUntil([&] { return (jobs = Jobs()).size() == kJobs; }, seconds(10)));
  std::map<std::string, int> crossing;
  for (const auto& [id, j] : jobs) {
    for (const std::string& n : j.nodes) ++crossing[n];
  }
  std::string tor, agg;
  for (const auto& [n, c] : crossing) {
    if (n.rfind("tor", 0) == 0 && (tor.empty() || c > crossing[tor])) tor = n;
    if (n.rfind("agg", 0) == 0 && (agg.empty() || c > crossing[agg])) agg = n;
  }
  ASSERT_FALSE(tor.empty());
  ASSERT_FALSE(agg.empty()) << "no job leaves its ToR";
  switches_.resize(2);
  switches_[0].name = tor;
  switches_[1].name = agg;
  for (Switch& s : switches_) {
    StartRedis(s);
    ASSERT_FALSE(HasFatalFailure());
    StartAgent(s);
  }
  ExpectConverges("initial");
  // Jobs really are mapped by level (not only the static part).
  const auto tor_map = DeviceDscpMap(switches_[0]);
  ASSERT_TRUE(tor_map.has_value());
  int job_entries = 0;
  for (const auto& [id, j] : jobs) {
    if (j.nodes.count(tor)) {
      ++job_entries;
      EXPECT_GE(tor_map->at(j.dscp), kLevelTcs.back()) << id;
    }
  }
  EXPECT_GT(job_entries, 0);
  std::cout << "switches " << tor << " and " << agg << "; " << tor
            << " CONFIG_DB: " << Dump(*tor_map) << "\n";
  // The rest of CONFIG_DB: schedulers with the configured storage weight.
  auto sched = RedisHash(switches_[1], "SCHEDULER|crux_q1");
  ASSERT_TRUE(sched.has_value());
  EXPECT_EQ((*sched)["type"], "DWRR");
  EXPECT_EQ((*sched)["weight"], "40");
  ASSERT_FALSE(HasFailure());

  // 3. Priorities change: the ToR's uplink to that aggregation switch goes down, flows move to
  //    the other one, levels are recomputed; both CONFIG_DBs follow.
  const json before = CruxctlJson({"status"});
  const CommandResult down = Cruxctl({"set-link", tor + "-" + agg, "down"}, seconds(5));
  ASSERT_EQ(down.exit_code, 0) << down.out << down.err;
  ASSERT_TRUE(WaitUntil(
      [&] { return CruxctlJson({"status"}).value("epoch", 0ull) > before.value("epoch", 0ull); },
      seconds(10)));
  ExpectConverges("after set-link down");
  // No flow uses the downed link any more (the plan really moved).
  for (const auto& [id, j] : Jobs()) {
    const json d = CruxctlJson({"job", id});
    for (const auto& f : d.value("flows", json::array())) {
      const auto& path = f["path"];
      for (size_t i = 1; i < path.size(); ++i) {
        const bool uses =
            (path[i - 1] == tor && path[i] == agg) || (path[i - 1] == agg && path[i] == tor);
        EXPECT_FALSE(uses) << id << " still routes over " << tor << "-" << agg;
      }
    }
  }

  // 4. Redis of the aggregation switch dies; a reloaded qos block (storage weight 40 -> 20) is
  //    pushed to every switch: the ToR applies it, the agg reports the error.
  Switch& sick = switches_[1];
  sick.redis->Kill(SIGKILL);
  WriteConfig(20);
  ASSERT_EQ(::kill(cruxd_.process()->pid(), SIGHUP), 0);
  std::string error;
  ASSERT_TRUE(WaitUntil(
      [&] {
        error = SwitchRow(sick.name).value("last_error", std::string());
        return !error.empty();
      },
      seconds(15), milliseconds(150)))
      << "no error shown for " << sick.name << ": " << CruxctlJson({"switches"}).dump();
  EXPECT_NE(error.find("UNAVAILABLE"), std::string::npos) << error;
  std::cout << "cruxctl switches shows for " << sick.name << ": " << error << "\n";
  EXPECT_TRUE(WaitUntil(
      [&] {
        auto s = RedisHash(switches_[0], "SCHEDULER|crux_q1");
        return s && (*s)["weight"] == "20";
      },
      seconds(10)));
  // The human table shows it too.
  const CommandResult table = Cruxctl({"switches"}, seconds(3));
  EXPECT_NE(table.out.find(sick.name), std::string::npos) << table.out;

  // 5. Redis comes back (empty: no persistence); the agent retries and the switch converges.
  StartRedis(sick);
  ASSERT_FALSE(HasFatalFailure());
  ExpectConverges("after redis restart");
  sched = RedisHash(sick, "SCHEDULER|crux_q1");
  ASSERT_TRUE(sched.has_value());
  EXPECT_EQ((*sched)["weight"], "20");

  // 6. An agent restarts after its map was deleted behind its back: as a returning agent it gets
  //    its full state again.
  Switch& restarted = switches_[0];
  restarted.agent->Kill(SIGKILL);
  ASSERT_EQ(Redis(restarted, {"DEL", "DSCP_TO_TC_MAP|CRUX"}).exit_code, 0);
  ASSERT_TRUE(DeviceDscpMap(restarted).value_or(std::map<int, int>{{0, 0}}).empty());
  StartAgent(restarted);
  ExpectConverges("after agent restart");

  // "connected" is logged for new and returning agents only, not for every periodic hello.
  EXPECT_EQ(CountInLog(0, "switch agent " + restarted.name + " connected"), 2);
  EXPECT_EQ(CountInLog(0, "switch agent " + sick.name + " connected"), 1);

  // 6b. Drift: the aggregation switch's CONFIG_DB is flushed under its running agent (no push, no
  //     restart). The agent's own reconcile puts every table back and cruxd shows the repair. The
  //     agent's ports are Ethernet0,Ethernet4, so the repair is 64 DSCP entries + 7 TC entries + 9
  //     scheduler fields (7 types, 2 DWRR weights) + 2 ports x (7 queues + 3 PORT_QOS_MAP fields)
  //     = 100 fields. What is checked is the order of events, not how long it took: the repair
  //     was reported after the flush, as one repair of the whole flush, by the agent that was
  //     running (no restart) for the epoch it had applied (no push in between).
  {
    Switch& drifted = switches_[1];
    const json before_row = SwitchRow(drifted.name);
    const uint64_t repairs_before = before_row.value("drift_repairs", 0ull);
    const uint64_t epoch_before = before_row.value("applied_epoch", 0ull);
    const int agent_runs_before = drifted.agent_runs;
    const int applies_before = CountInAgentLog(drifted, "applied epoch");
    ASSERT_GT(applies_before, 0) << "the agent's log shows no apply: is it the right file?";
    const std::string repair_line = "reconcile: 100 field(s) of switch " + drifted.name +
                                    " had drifted from epoch " + std::to_string(epoch_before);
    const int repair_lines_before = CountInAgentLog(drifted, repair_line);
    const auto want = Expected(drifted.name, Jobs());
    const uint64_t flushed_unix_ms = UnixMs();  // Before the flush: cruxd's clock is the same.
    const auto flushed_at = std::chrono::steady_clock::now();
    ASSERT_EQ(Redis(drifted, {"FLUSHDB"}).exit_code, 0);
    // (The agent may already have repaired it by the time a second redis-cli runs on a loaded
    // machine, so the empty map is not asserted; the repair report below proves the flush.)
    ASSERT_TRUE(
        WaitUntil([&] { return DeviceDscpMap(drifted) == want; }, seconds(10), milliseconds(20)))
        << "CONFIG_DB of " << drifted.name
        << " not repaired: " << Dump(DeviceDscpMap(drifted).value_or(std::map<int, int>{}));
    std::cout << "FLUSHDB on " << drifted.name << " repaired after "
              << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                          flushed_at)
                     .count()
              << " ms (reconcile period " << kReconcileMs << " ms; reported, not asserted)\n";
    auto sched_back = RedisHash(drifted, "SCHEDULER|crux_q1");
    ASSERT_TRUE(sched_back.has_value());
    EXPECT_EQ((*sched_back)["weight"], "20");
    EXPECT_EQ(RedisHash(drifted, "PORT_QOS_MAP|Ethernet4")
                  .value_or(std::map<std::string, std::string>{})["dscp_to_tc_map"],
              "CRUX");
    json row;
    EXPECT_TRUE(WaitUntil(
        [&] {
          row = SwitchRow(drifted.name);
          return row.value("drift_repairs", 0ull) > repairs_before && row.value("in_sync", false);
        },
        seconds(10), milliseconds(100)))
        << "cruxctl switches does not show the repair: " << row.dump();
    EXPECT_EQ(row.value("drift_repairs", 0ull), repairs_before + 1) << row.dump();
    EXPECT_EQ(row.value("last_drifted_fields", 0u), 100u) << row.dump();
    EXPECT_GE(row.value("last_drift_ms", 0ull), flushed_unix_ms) << row.dump();
    EXPECT_TRUE(row.value("last_error", std::string("?")).empty()) << row.dump();
    // The reconcile of the running agent, not a push or a restart, repaired it.
    EXPECT_EQ(row.value("applied_epoch", 0ull), epoch_before) << row.dump();
    EXPECT_EQ(drifted.agent_runs, agent_runs_before);
    EXPECT_TRUE(drifted.agent->running());
    EXPECT_EQ(CountInAgentLog(drifted, "applied epoch"), applies_before);
    EXPECT_EQ(CountInAgentLog(drifted, repair_line), repair_lines_before + 1);
    std::cout << "cruxctl switches after the repair: " << row.dump() << "\n";
    ExpectConverges("after FLUSHDB");
    // In sync again: the next reconciles find nothing and report nothing.
    std::this_thread::sleep_for(milliseconds(3 * kReconcileMs));
    EXPECT_EQ(SwitchRow(drifted.name).value("drift_repairs", 0ull), repairs_before + 1);
  }

  // 6c. A stalled Redis (SIGSTOP) does not stall its agent: while a push (storage weight 20 -> 30,
  //     pushed to every switch) cannot be applied, the agent keeps saying hello (cruxd sees it
  //     every hello interval, 300 ms) and reports the timeout; after SIGCONT the switch converges.
  {
    Switch& stalled = switches_[0];
    ASSERT_EQ(::kill(stalled.redis->pid(), SIGSTOP), 0);
    WriteConfig(30);
    ASSERT_EQ(::kill(cruxd_.process()->pid(), SIGHUP), 0);
    std::set<uint64_t> seen;
    int64_t max_gap_ms = 0;
    uint64_t last = 0;
    std::string stall_error;
    const auto until = std::chrono::steady_clock::now() + seconds(3);
    while (std::chrono::steady_clock::now() < until) {
      const json row = SwitchRow(stalled.name);
      const uint64_t at = row.value("last_seen_ms", 0ull);
      EXPECT_TRUE(row.value("connected", false)) << row.dump();
      if (at != 0 && seen.insert(at).second) {
        if (last != 0) max_gap_ms = std::max<int64_t>(max_gap_ms, static_cast<int64_t>(at - last));
        last = at;
      }
      if (stall_error.empty()) stall_error = row.value("last_error", std::string());
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_EQ(::kill(stalled.redis->pid(), SIGCONT), 0);
    std::cout << "Redis of " << stalled.name << " stopped for 3 s: cruxd heard the agent "
              << seen.size() << " times, longest silence " << max_gap_ms
              << " ms (hello interval 300 ms); error shown: " << stall_error << "\n";
    // A blocked loop would be silent for a whole device call; 300 ms hellos give ~10 in 3 s.
    EXPECT_GE(seen.size(), 5u);
    EXPECT_NE(stall_error.find("timed out"), std::string::npos) << stall_error;
    ExpectConverges("after SIGCONT");
    auto weight = RedisHash(stalled, "SCHEDULER|crux_q1");
    ASSERT_TRUE(weight.has_value());
    EXPECT_EQ((*weight)["weight"], "30");
  }

  // 7. cruxd is killed and restarted on the same state: colours come back unchanged and
  //    distinct, agents re-hello, the switches converge.
  std::map<std::string, int> colours;
  for (const auto& [id, j] : Jobs()) colours[id] = j.dscp;
  ASSERT_EQ(colours.size(), static_cast<size_t>(kJobs));
  cruxd_.Kill(SIGKILL);
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());
  std::map<std::string, int> after;
  for (const auto& [id, j] : Jobs()) after[id] = j.dscp;
  EXPECT_EQ(after, colours);
  std::set<int> distinct;
  for (const auto& [id, d] : after) distinct.insert(d);
  EXPECT_EQ(distinct.size(), after.size()) << "duplicate colours";
  ExpectConverges("after cruxd restart");
  const json sw = CruxctlJson({"switches"});
  ASSERT_EQ(sw.value("switches", json::array()).size(), 2u) << sw.dump();
  for (const auto& row : sw["switches"]) EXPECT_EQ(row["dscp_colours_shared"], 0) << row.dump();
}

// Enforcement verification (issue #29) through the real processes: crux-switch-agent (sonic)
// reads back what "the switch" applied from ASIC_DB and COUNTERS_DB of its redis-server (rows
// planted with redis-cli as orchagent and syncd write them, from the CONFIG_DB the agent wrote),
// and `cruxctl switches` shows ENFORCED, then MISMATCH with the first difference for a wrong
// ASIC_DB entry, then MISMATCH for traffic in a queue the plan leaves unused.
TEST_F(SwitchE2eTest, CruxctlSwitchesShowsWhetherTheAsicEnforcesThePlan) {
  const int metrics_port = FreeTcpPort();
  ASSERT_GT(metrics_port, 0);
  cruxd_.WriteConfig("log_level: info\n" + QosBlock(40) +
                     "metrics_listen: \"127.0.0.1:" + std::to_string(metrics_port) + "\"\n");
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());
  loadgen_ = std::make_unique<ChildProcess>();
  ASSERT_TRUE(loadgen_->Start(cruxd_.LoadgenArgs(kJobs, 120), dir_.path() / "loadgen.out",
                              dir_.path() / "loadgen.err", dir_.path()));
  ASSERT_TRUE(WaitUntil([&] { return AllScheduled(kJobs); }, seconds(30), milliseconds(200)))
      << CruxctlJson({"jobs"}).dump(2);
  loadgen_->Kill(SIGKILL);

  switches_.resize(1);
  Switch& sw = switches_[0];
  sw.name = "tor0";
  StartRedis(sw);
  ASSERT_FALSE(HasFatalFailure());
  StartAgent(sw, {"--verify-interval-ms", "1000"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        const json row = SwitchRow(sw.name);
        return row.value("in_sync", false) &&
               DeviceDscpMap(sw).value_or(std::map<int, int>{}).size() == 64;
      },
      seconds(20), milliseconds(150)))
      << SwitchRow(sw.name).dump();
  // No ASIC_DB rows yet (orchagent has not created the ports): UNKNOWN, with the reason.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return SwitchRow(sw.name)["enforcement"]
                   .value("detail", std::string())
                   .find("COUNTERS_PORT_NAME_MAP") != std::string::npos;
      },
      seconds(10), milliseconds(150)))
      << SwitchRow(sw.name).dump();

  // "orchagent": one QOS_MAP object per CONFIG_DB map bound to both ports in ASIC_DB, port and
  // queue counters.
  auto cli = [&](int db, const std::vector<std::string>& args) {
    const CommandResult r = sw.redis->Cli(db, args);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  };
  auto ints = [](const std::map<std::string, std::string>& h) {
    std::map<int, int> out;
    for (const auto& [k, v] : h) out[std::stoi(k)] = std::stoi(v);
    return out;
  };
  const std::map<int, int> dscp = ints(*RedisHash(sw, "DSCP_TO_TC_MAP|CRUX"));
  const std::map<int, int> queues = ints(*RedisHash(sw, "TC_TO_QUEUE_MAP|CRUX"));
  const std::string dscp_vid = "oid:0x14000000000615", queue_vid = "oid:0x14000000000616";
  auto write_map = [&](const std::string& vid, const std::string& type, const std::string& list) {
    cli(1, {"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_QOS_MAP:" + vid, "SAI_QOS_MAP_ATTR_TYPE", type,
            "SAI_QOS_MAP_ATTR_MAP_TO_VALUE_LIST", list});
  };
  // As orchagent does it: the map objects, the ports' attributes, each port's queue counters and
  // queue maps (one HSET per port), the port name map last.
  write_map(dscp_vid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC", switch_adapters::testing::DscpToTcList(dscp));
  write_map(queue_vid, "SAI_QOS_MAP_TYPE_TC_TO_QUEUE",
            switch_adapters::testing::TcToQueueList(queues));
  const std::vector<std::string> ports = {"Ethernet0", "Ethernet4"};
  std::vector<std::string> port_map = {"HSET", "COUNTERS_PORT_NAME_MAP"};
  for (size_t i = 0; i < ports.size(); ++i) {
    const std::string vid = "oid:0x100000000000" + std::to_string(2 + i);
    cli(1, {"HSET", "ASIC_STATE:SAI_OBJECT_TYPE_PORT:" + vid, "SAI_PORT_ATTR_ADMIN_STATE", "true",
            "SAI_PORT_ATTR_QOS_DSCP_TO_TC_MAP", dscp_vid, "SAI_PORT_ATTR_QOS_TC_TO_QUEUE_MAP",
            queue_vid});
    std::vector<std::string> names = {"HSET", "COUNTERS_QUEUE_NAME_MAP"};
    std::vector<std::string> index = {"HSET", "COUNTERS_QUEUE_INDEX_MAP"};
    std::vector<std::string> type = {"HSET", "COUNTERS_QUEUE_TYPE_MAP"};
    for (int q = 0; q < 8; ++q) {
      const std::string qvid =
          "oid:0x15000000000" + std::to_string(10 * (i + 1)) + std::to_string(q);
      cli(2, {"HSET", "COUNTERS:" + qvid, "SAI_QUEUE_STAT_PACKETS", "0"});
      names.insert(names.end(), {ports[i] + ":" + std::to_string(q), qvid});
      index.insert(index.end(), {qvid, std::to_string(q)});
      type.insert(type.end(), {qvid, "SAI_QUEUE_TYPE_UNICAST"});
    }
    cli(2, index);
    cli(2, type);
    cli(2, names);
    port_map.insert(port_map.end(), {ports[i], vid});
  }
  cli(2, port_map);
  ASSERT_FALSE(HasFatalFailure());

  // The ASIC holds the plan: ENFORCED.
  ASSERT_TRUE(
      WaitUntil([&] { return SwitchRow(sw.name)["enforcement"].value("status", "") == "match"; },
                seconds(10), milliseconds(150)))
      << SwitchRow(sw.name).dump();
  CommandResult table = Cruxctl({"switches"}, seconds(5));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("ENFORCED"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("MISMATCH"), std::string::npos) << table.out;
  json row = SwitchRow(sw.name);
  EXPECT_EQ(row["enforcement"]["maps_checked"], 4) << row.dump();
  EXPECT_GT(row["enforcement"]["checked_unix_ms"].get<uint64_t>(), 0u);

  // The ASIC applies another DSCP map than CONFIG_DB holds (sonic-buildimage #27310's shape).
  std::map<int, int> wrong = dscp;
  wrong[8] = 0;  // The storage class lands in best effort.
  write_map(dscp_vid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC", switch_adapters::testing::DscpToTcList(wrong));
  ASSERT_FALSE(HasFatalFailure());
  const std::string first_difference =
      "Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14000000000615): dscp 8 -> tc 0, the plan says tc 1";
  ASSERT_TRUE(WaitUntil(
      [&] {
        return SwitchRow(sw.name)["enforcement"].value("detail", std::string()) == first_difference;
      },
      seconds(10), milliseconds(150)))
      << SwitchRow(sw.name).dump();
  EXPECT_EQ(SwitchRow(sw.name)["enforcement"]["status"], "mismatch");
  table = Cruxctl({"switches"}, seconds(5));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("MISMATCH"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tor0: MISMATCH (epoch "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(first_difference), std::string::npos) << table.out;
  std::cout << "cruxctl switches with a wrong ASIC_DB entry:\n" << table.out;
  EXPECT_EQ(DeviceDscpMap(sw)->at(8), 1);  // CONFIG_DB is right: only the ASIC is wrong.
  EXPECT_GE(CountInLog(0, "switch tor0 does not enforce its plan"), 1);

  // Repaired; then traffic in queue 7, which no DSCP of the plan maps to.
  write_map(dscp_vid, "SAI_QOS_MAP_TYPE_DSCP_TO_TC", switch_adapters::testing::DscpToTcList(dscp));
  ASSERT_TRUE(
      WaitUntil([&] { return SwitchRow(sw.name)["enforcement"].value("status", "") == "match"; },
                seconds(10), milliseconds(150)))
      << SwitchRow(sw.name).dump();
  cli(2, {"HSET", "COUNTERS:oid:0x15000000000207", "SAI_QUEUE_STAT_PACKETS", "5000000"});
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitUntil(
      [&] {
        return SwitchRow(sw.name)["enforcement"]
                   .value("detail", std::string())
                   .find("traffic in a queue the plan leaves unused: Ethernet4 queue 7") == 0;
      },
      seconds(10), milliseconds(150)))
      << SwitchRow(sw.name).dump();
  table = Cruxctl({"switches"}, seconds(5));
  EXPECT_NE(table.out.find("tor0: MISMATCH"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Ethernet4 queue 7 carried"), std::string::npos) << table.out;
  const std::string metrics = ::crux::test::HttpGet(metrics_port, "/metrics");
  EXPECT_NE(metrics.find("crux_switch_enforcement{state=\"mismatch\"} 1"), std::string::npos)
      << metrics;
}

TEST_F(SwitchE2eTest, AgentForAnUnknownSwitchExitsWithAConfigurationError) {
  StartCruxd();
  ASSERT_FALSE(HasFatalFailure());
  ChildProcess agent;
  const fs::path log = dir_.path() / "agent_unknown.err";
  ASSERT_TRUE(agent.Start(
      {CRUX_SWITCH_AGENT_BINARY, "--switch-name", "no-such-switch", "--daemon", cruxd_.endpoint(),
       "--insecure", "--backend", "log", "--hello-interval-ms", "300", "--call-timeout-ms", "1000",
       "--term-file", (dir_.path() / "no-such-switch.term").string()},
      dir_.path() / "agent_unknown.out", log, dir_.path()));
  // Bounded: an agent that retried forever would still be running.
  const std::optional<int> rc = agent.Wait(seconds(30));
  ASSERT_TRUE(rc.has_value()) << "agent still running:\n" << ReadFile(log);
  EXPECT_EQ(*rc, kAgentRefusedExit) << ReadFile(log);
  const std::string err = ReadFile(log);
  EXPECT_NE(err.find("fatal configuration error"), std::string::npos) << err;
  EXPECT_NE(err.find("ERROR_CODE_UNKNOWN_HOST"), std::string::npos) << err;
  EXPECT_NE(err.find("'no-such-switch' is not a switch of the topology"), std::string::npos) << err;
  // cruxd is unaffected and knows no such switch.
  EXPECT_TRUE(cruxd_.process()->running());
  EXPECT_TRUE(SwitchRow("no-such-switch").empty());
}

}  // namespace
}  // namespace crux::system_test
