// Automatic fault handling end to end, all real processes (docs/faults.md):
// redis-server (the SONiC APPL_DB / CONFIG_DB of switch tor0, on a unix socket, no persistence),
// cruxd (embedded example_clos2 topology, insecure loopback TCP), crux-switch-agent for tor0
// (sonic backend, --watch-ports: APPL_DB PORT_TABLE oper_status polled every 50 ms; Ethernet0 is
// the cable to agg0, Ethernet4 the one to agg1) and crux-loadgen playing jobs that report per-flow
// stats with their heartbeats (--flow-stats, 200 ms heartbeats).
//
// The damping times are those of the defaults divided by 5 (min_dwell 1 s, max_hold 60 s,
// stable_decay 12 s, quarantine 12 s), so "a link flapping every second for a minute" becomes a
// flap every 200 ms for 12 s with the same number of flaps and the same ratios to the damping.
//
//   PortDownReplansAndFlappingIsDamped:
//     1. Ethernet0 oper_status "down" in APPL_DB -> tor0<->agg0 down in cruxd, automatic, with
//        the link-state reason, since a moment between the HSET and the poll that saw it, and
//        every job that crossed it re-planned off it by a newer epoch (measured from the HSET to
//        the moment cruxctl shows no path through the cable; the goal is <= 2 s);
//        `cruxctl job ID` of each moved job shows the change that re-routed it.
//     2. Ethernet0 back up -> the link recovers after the hold (1 s of quiet), not before.
//     3. Ethernet4 flaps: 60 down/up cycles of 200 ms. The bound under test: a link flapping
//        faster than its hold goes down at the first flap and comes back once, one hold after the
//        last (2 automatic changes per direction), so the flapping costs at most 2 re-plans from
//        fault handling (`cruxctl status` replans is allowed 2 more for unrelated reasons, e.g.
//        a profile report).
//   GrayLinkFromTheFlowsIsLocalised:
//     crux-loadgen --fault tor0-agg0:0.3@5 slows every flow whose pinned path crosses the cable
//     (both directions) to 30 % from 5 s into its run. cruxd's tomography (least squares over the
//     pinned paths) must mark tor0->agg0 (and agg0->tor0 when enough flows cross that direction)
//     degraded, automatically, and no other link may be marked or suspected at any poll
//     (measured: the fault's start as crux-loadgen logs it to cruxd's `since` of the degraded
//     state; the goal is <= 10 s). Another link may be a suspect only while ambiguous (the fresh
//     samples cannot tell it apart from the faulty one; that changes nothing). The cable is not
//     handed back healthy while still slow, not even for a moment (the marked direction changes
//     once: flows left on it or, with faults.probes on, probes designed over it keep accusing
//     it); `cruxctl faults` shows the coverage.
//   ALyingTenantIsNotBelieved:
//     crux-loadgen --lie lg-0:0.1@3 makes job lg-0 report every flow at 10 % of its rate from
//     3 s on, while the fabric is healthy and the other jobs report their true rates. With
//     faults.min_jobs 1 (so that the contradiction rule is the only guard), cruxd must list
//     lg-0 under contradicted_jobs in `cruxctl faults` (its flows are slow where jobs of the same
//     or a lower priority are healthy on every link), count it in /metrics
//     (crux_fault_contradicted_jobs 1, crux_fault_disbelieved_reports_total > 0), and change no
//     link, in the whole run.
//
// Measured durations are printed, not asserted: the goals are reported, and what is asserted is
// the outcome and the order of events (cruxd's timestamps against the test's, on the same clock),
// which a loaded machine cannot change. Every wait polls with a generous deadline; every child is
// SIGKILLed in teardown.
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
#include <string>
#include <thread>
#include <vector>

#include "cruxd_harness.h"
#include "http_get.h"
#include "process_util.h"
#include "redis_process.h"

namespace crux::system_test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kJobs = 6;

// The defaults (core::FaultOptions) divided by 5; see the file comment.
const char* const kFaultsConfig =
    "faults:\n"
    "  evaluate_interval_ms: 200\n"
    "  evidence_window_ms: 2000\n"
    "  min_dwell_ms: 1000\n"
    "  max_hold_ms: 60000\n"
    "  stable_decay_ms: 12000\n"
    "  quarantine_downtime_ms: 12000\n"
    "  probes: true\n";

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Whether a node path crosses the cable a<->b (either direction).
bool PathCrosses(const json& path, const std::string& a, const std::string& b) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const std::string x = path[i].get<std::string>();
    const std::string y = path[i + 1].get<std::string>();
    if ((x == a && y == b) || (x == b && y == a)) return true;
  }
  return false;
}

class FaultsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = MissingSwitchE2eBinary(); !missing.empty()) {
      GTEST_SKIP() << missing << " is not available";
    }
    ASSERT_FALSE(dir_.path().empty());
    cruxd_ = std::make_unique<CruxdHarness>(dir_.path());
    cruxd_->WriteConfig(std::string(kFaultsConfig) + "log_level: info\n");
  }

  void TearDown() override {
    if (HasFailure()) {
      const std::string log = cruxd_ ? cruxd_->LastLog() : "";
      std::cerr << "---- cruxd stderr (tail) ----\n"
                << log.substr(log.size() > 20000 ? log.size() - 20000 : 0) << "\n";
      for (const fs::path& p : {dir_.path() / "agent.err", dir_.path() / "loadgen.err"}) {
        const std::string t = ReadFile(p);
        std::cerr << "---- " << p.filename() << " (tail) ----\n"
                  << t.substr(t.size() > 6000 ? t.size() - 6000 : 0) << "\n";
      }
    }
    if (loadgen_) loadgen_->Kill(SIGKILL);
    if (agent_) agent_->Kill(SIGKILL);
    redis_.Kill(SIGKILL);
    cruxd_.reset();
  }

  // ---- processes ----

  void StartRedis() {
    std::string why;
    ASSERT_TRUE(redis_.Start(&why)) << why;
    SetPort("Ethernet0", "up");
    SetPort("Ethernet4", "up");
  }

  void StartAgent() {
    agent_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(agent_->Start({CRUX_SWITCH_AGENT_BINARY,
                               "--switch-name",
                               "tor0",
                               "--daemon",
                               cruxd_->endpoint(),
                               "--insecure",
                               "--backend",
                               "sonic",
                               "--redis-socket",
                               redis_.socket().string(),
                               "--redis-timeout-ms",
                               "300",
                               "--ports",
                               "Ethernet0,Ethernet4",
                               "--hello-interval-ms",
                               "300",
                               "--call-timeout-ms",
                               "1000",
                               "--watch-ports",
                               "--port-poll-ms",
                               "50",
                               "--neighbors",
                               "Ethernet0=agg0,Ethernet4=agg1",
                               "--term-file",
                               (dir_.path() / "tor0.term").string()},
                              dir_.path() / "agent.out", dir_.path() / "agent.err", dir_.path()));
  }

  void StartLoadgen(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {CRUX_LOADGEN_BINARY,
                                     "--endpoint",
                                     cruxd_->endpoint(),
                                     "--insecure",
                                     "--topology",
                                     kExampleClos2.string(),
                                     "--jobs",
                                     std::to_string(kJobs),
                                     "--seed",
                                     "3",
                                     "--report-interval-ms",
                                     "200",
                                     "--heartbeat-ms",
                                     "200",
                                     "--jitter-pct",
                                     "0",
                                     "--duration-s",
                                     "120",
                                     "--flow-stats"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    loadgen_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(loadgen_->Start(argv, dir_.path() / "loadgen.out", dir_.path() / "loadgen.err",
                                dir_.path()));
  }

  // ---- clients ----

  CommandResult Redis(int db, const std::vector<std::string>& args) { return redis_.Cli(db, args); }

  // APPL_DB PORT_TABLE:<port> oper_status, as portsorch writes it.
  void SetPort(const std::string& port, const std::string& status) {
    const CommandResult r =
        Redis(0, {"HSET", "PORT_TABLE:" + port, "oper_status", status, "admin_status", "up"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  json Json(std::vector<std::string> args) { return cruxd_->PollJson(std::move(args)); }

  bool AllScheduled() {
    const json j = Json({"jobs"});
    if (!j.contains("jobs") || j["jobs"].size() != static_cast<size_t>(kJobs)) return false;
    for (const auto& job : j["jobs"]) {
      if (job["state"] != "scheduled") return false;
    }
    return true;
  }

  // Job id -> its flows' paths (`cruxctl --json job ID`); empty on any failure.
  std::map<std::string, std::vector<json>> Paths() {
    std::map<std::string, std::vector<json>> out;
    const json j = Json({"jobs"});
    for (const auto& job : j.value("jobs", json::array())) {
      const std::string id = job["job_id"].get<std::string>();
      const json d = Json({"job", id});
      if (!d.contains("flows")) return {};
      for (const auto& f : d["flows"]) out[id].push_back(f["path"]);
    }
    return out;
  }

  std::set<std::string> JobsCrossing(const std::string& a, const std::string& b) {
    std::set<std::string> out;
    for (const auto& [id, paths] : Paths()) {
      for (const json& p : paths) {
        if (PathCrosses(p, a, b)) out.insert(id);
      }
    }
    return out;
  }

  // Directed link name -> its row of `cruxctl --json faults`.
  std::map<std::string, json> Faults() {
    std::map<std::string, json> out;
    for (const auto& l : Json({"faults"}).value("links", json::array())) {
      out[l["link"].get<std::string>()] = l;
    }
    return out;
  }

  std::string Health(const std::map<std::string, json>& faults, const std::string& link) {
    auto it = faults.find(link);
    return it == faults.end() ? "up" : it->second["health"].get<std::string>();
  }

  uint64_t Replans() { return Json({"status"}).value("replans", uint64_t{0}); }

  void StartAll(const std::vector<std::string>& loadgen_extra) {
    StartRedis();
    ASSERT_FALSE(HasFatalFailure());
    std::string why;
    ASSERT_TRUE(cruxd_->Start({}, &why)) << why;
    StartAgent();
    ASSERT_FALSE(HasFatalFailure());
    StartLoadgen(loadgen_extra);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_TRUE(WaitUntil([&] { return AllScheduled(); }, seconds(20), milliseconds(100)))
        << "jobs not scheduled: " << Json({"jobs"}).dump();
    // The agent's first report (both ports up) has arrived once cruxd knows the switch.
    ASSERT_TRUE(WaitUntil(
        [&] {
          for (const auto& s : Json({"switches"}).value("switches", json::array())) {
            if (s["name"] == "tor0" && s.value("connected", false)) return true;
          }
          return false;
        },
        seconds(10), milliseconds(100)));
  }

  TempDir dir_{"crux_faults_e2e"};
  std::unique_ptr<CruxdHarness> cruxd_;
  RedisProcess redis_{dir_.path()};  // tor0's APPL_DB (db 0) and CONFIG_DB.
  std::unique_ptr<ChildProcess> agent_;
  std::unique_ptr<ChildProcess> loadgen_;
};

TEST_F(FaultsE2eTest, PortDownReplansAndFlappingIsDamped) {
  StartAll({});
  ASSERT_FALSE(HasFatalFailure());

  // 1. Port down -> link down and its jobs re-planned.
  const std::set<std::string> crossing = JobsCrossing("tor0", "agg0");
  ASSERT_FALSE(crossing.empty()) << "no job crosses tor0<->agg0 with this workload";
  const uint64_t epoch_before = Json({"status"}).value("epoch", uint64_t{0});
  ASSERT_GT(epoch_before, 0u);
  const int64_t down_unix_ms = UnixMs();
  const auto down_at = std::chrono::steady_clock::now();
  SetPort("Ethernet0", "down");
  double link_down_s = -1;
  double replanned_s = -1;
  int64_t seen_down_unix_ms = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (link_down_s < 0) {
          const auto f = Faults();
          if (Health(f, "tor0->agg0") == "down" && Health(f, "agg0->tor0") == "down") {
            link_down_s = SecondsSince(down_at);
            seen_down_unix_ms = UnixMs();
          }
          return false;
        }
        if (JobsCrossing("tor0", "agg0").empty()) {
          replanned_s = SecondsSince(down_at);
          return true;
        }
        return false;
      },
      seconds(15), milliseconds(20)))
      << "link down after " << link_down_s
      << " s; jobs still crossing it: " << JobsCrossing("tor0", "agg0").size();
  std::cout << "port down in APPL_DB -> tor0<->agg0 down in cruxctl after " << link_down_s
            << " s, the " << crossing.size() << " job(s) crossing it re-planned off it after "
            << replanned_s << " s (polling upper bounds; goal <= 2 s, reported, not asserted)\n";
  {
    const auto f = Faults();
    const json& row = f.at("tor0->agg0");
    EXPECT_FALSE(row["admin"].get<bool>());
    EXPECT_TRUE(row["port_down"].get<bool>());
    EXPECT_NE(row["reason"].get<std::string>().find("oper_status down"), std::string::npos)
        << row.dump();
    // cruxd's own timestamp (same clock): the down state began after the HSET and before the
    // test saw it, so it is this port's doing, not an earlier state.
    const int64_t detected_ms = static_cast<int64_t>(row["since_unix_ms"].get<uint64_t>());
    std::cout << "cruxd marked it down " << detected_ms - down_unix_ms
              << " ms after the HSET (its own clock)\n";
    EXPECT_GE(detected_ms, down_unix_ms) << row.dump();
    EXPECT_LE(detected_ms, seen_down_unix_ms) << row.dump();
    // Every job that crossed the cable was re-planned by a plan after the fault (a newer epoch),
    // and explains why: an automatic change to down after the HSET that names it.
    for (const std::string& id : crossing) {
      const json d = Json({"job", id});
      EXPECT_GT(d.value("summary", json::object()).value("epoch", uint64_t{0}), epoch_before)
          << id << ": " << d.dump();
      bool explained = false;
      for (const auto& e : d.value("faults", json::array())) {
        if (e["link"] != "tor0->agg0" && e["link"] != "agg0->tor0") continue;
        const std::vector<std::string> jobs = e.value("jobs", std::vector<std::string>{});
        explained = e["automatic"].get<bool>() && e["to"] == "down" &&
                    static_cast<int64_t>(e["at_unix_ms"].get<uint64_t>()) >= down_unix_ms &&
                    std::find(jobs.begin(), jobs.end(), id) != jobs.end();
        if (explained) break;
      }
      EXPECT_TRUE(explained) << id << ": " << d.dump();
    }
    // Nothing else was touched.
    for (const auto& [link, r] : f) {
      if (link == "tor0->agg0" || link == "agg0->tor0") continue;
      EXPECT_EQ(r["health"], "up") << link << ": " << r.dump();
    }
  }

  // 2. Back up: recovers after the hold (1 s of quiet), never before. The clock starts before the
  //    HSET, so a slow machine only makes the recovery later; only an early one fails.
  const auto up_at = std::chrono::steady_clock::now();
  SetPort("Ethernet0", "up");
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto f = Faults();
        return Health(f, "tor0->agg0") == "up" && Health(f, "agg0->tor0") == "up";
      },
      seconds(10), milliseconds(50)));
  const double recovered_s = SecondsSince(up_at);
  std::cout << "port up -> link up after " << recovered_s << " s (hold 1 s)\n";
  EXPECT_GE(recovered_s, 0.9);

  // 3. Ethernet4 (tor0<->agg1) flaps 60 times, every 200 ms (down 100 ms, up 100 ms).
  std::this_thread::sleep_for(milliseconds(500));  // Let the recovery's re-plan settle.
  const uint64_t replans_before = Replans();
  ASSERT_GT(replans_before, 0u);
  const auto flap_start = std::chrono::steady_clock::now();
  for (int i = 0; i < 60; ++i) {
    SetPort("Ethernet4", "down");
    std::this_thread::sleep_until(flap_start + milliseconds(200 * i + 100));
    SetPort("Ethernet4", "up");
    std::this_thread::sleep_until(flap_start + milliseconds(200 * i + 200));
  }
  const double flapped_s = SecondsSince(flap_start);
  const auto flap_end = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto f = Faults();
        return Health(f, "tor0->agg1") == "up" && Health(f, "agg1->tor0") == "up";
      },
      seconds(10), milliseconds(50)));
  const double settled_s = SecondsSince(flap_end);
  std::this_thread::sleep_for(milliseconds(300));
  const uint64_t replans = Replans() - replans_before;
  const auto f = Faults();
  const uint64_t changes_up = f.at("tor0->agg1")["changes"].get<uint64_t>();
  const uint64_t changes_down = f.at("agg1->tor0")["changes"].get<uint64_t>();
  std::cout << "60 flaps in " << flapped_s << " s: " << changes_up << " + " << changes_down
            << " automatic changes (tor0->agg1, agg1->tor0), " << replans
            << " re-plans; link up again " << settled_s << " s after the last flap "
            << "(bound: 2 changes per direction, 2 re-plans from fault handling)\n";
  EXPECT_EQ(changes_up, 2u);
  EXPECT_EQ(changes_down, 2u);
  EXPECT_LE(replans, 4u);
  EXPECT_GE(f.at("tor0->agg1")["downtime_s"].get<double>(), 5.0);
}

TEST_F(FaultsE2eTest, GrayLinkFromTheFlowsIsLocalised) {
  StartAll({"--fault", "tor0-agg0:0.3@5"});
  ASSERT_FALSE(HasFatalFailure());
  const std::set<std::string> crossing = JobsCrossing("tor0", "agg0");
  ASSERT_FALSE(crossing.empty()) << "no job crosses tor0<->agg0 with this workload";
  // The fault starts 5 s into the loadgen's run; it logs the wall clock then.
  std::string log;
  ASSERT_TRUE(WaitUntil(
      [&] {
        log = loadgen_->Stderr();
        return log.find("fault active") != std::string::npos;
      },
      seconds(20), milliseconds(50)))
      << log;
  const size_t at = log.find("unix ms ", log.find("fault active"));
  ASSERT_NE(at, std::string::npos) << log;
  const int64_t fault_unix_ms = std::stoll(log.substr(at + 8));

  // Poll cruxctl faults after the fault started: every link ever marked or suspected, and when
  // the faulty one was first marked. The goal (10 s) is reported; the window is wider so that a
  // loaded machine does not fail what is asserted: which links, in which order.
  const std::set<std::string> faulty = {"tor0->agg0", "agg0->tor0"};
  std::set<std::string> marked, suspected, ambiguous;
  std::optional<int64_t> detected_ms;
  json last;
  // Until 30 s after the fault, or 4 s after the detection (the re-plan, the probes designed
  // over the cable and more than one hold time), whichever comes first.
  int64_t until = fault_unix_ms + 30000;
  while (UnixMs() < until) {
    const json j = Json({"faults"});
    for (const auto& l : j.value("links", json::array())) {
      const std::string name = l["link"].get<std::string>();
      if (l["health"] != "up") {
        marked.insert(name);
        if (faulty.count(name) && !detected_ms) {
          detected_ms = static_cast<int64_t>(l["since_unix_ms"].get<uint64_t>()) - fault_unix_ms;
          last = l;
          until = std::min(until, UnixMs() + 4000);
        }
      }
      // Another link may be a suspect only while the fresh samples cannot tell it apart from the
      // faulty one (identical columns of the routing matrix: ambiguous, which changes nothing).
      if (l["suspect"].get<bool>() && !faulty.count(name) && !l["ambiguous"].get<bool>()) {
        suspected.insert(name);
      }
      if (l["suspect"].get<bool>() && !faulty.count(name) && ambiguous.insert(name).second) {
        std::cout << "suspect " << name << ": " << l.dump() << "\n";
      }
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  std::string all;
  for (const std::string& m : marked) all += m + " ";
  ASSERT_TRUE(detected_ms.has_value())
      << "not localised within 30 s; marked: " << all << "\nfaults: " << Json({"faults"}).dump(2);
  // Marked after the fault began (cruxd's clock): the flows' slowdown, not an earlier state.
  EXPECT_GE(*detected_ms, 0) << last.dump();
  std::cout << "tor0<->agg0 at 30 % (crux-loadgen --fault): marked degraded " << *detected_ms
            << " ms after the fault started (goal <= 10 s); links ever marked: " << all
            << "; reason: " << last["reason"].get<std::string>() << "; capacity "
            << last["capacity_bps"].get<double>() / 1e9 << " Gb/s\n";
  EXPECT_EQ(last["health"], "degraded") << last.dump();
  EXPECT_FALSE(last["admin"].get<bool>());
  EXPECT_NE(last["reason"].get<std::string>().find("least squares"), std::string::npos)
      << last.dump();
  // The estimate: 30 % of 400 Gb/s, within the estimator's spread.
  EXPECT_GT(last["capacity_bps"].get<double>(), 0.15 * 400e9) << last.dump();
  EXPECT_LT(last["capacity_bps"].get<double>(), 0.5 * 400e9) << last.dump();
  for (const std::string& m : marked) EXPECT_TRUE(faulty.count(m)) << m << " marked";
  for (const std::string& s : suspected) ADD_FAILURE() << s << " suspected, not ambiguous";

  // The cable stays degraded while it is still slow: the flows left on it, or (when the
  // re-plan moved every flow off it) the probes designed over it (faults.probes, simulated by
  // crux-loadgen through the same fault), keep accusing it.
  const json end = Json({"faults"});
  const json& cov = end.value("coverage", json::object());
  std::string states;
  uint64_t marked_changes = 0;
  for (const auto& l : end.value("links", json::array())) {
    states += l["link"].get<std::string>() + " " + l["health"].get<std::string>() + " (" +
              std::to_string(l["changes"].get<uint64_t>()) + " changes) ";
    if (l["link"] == last["link"]) marked_changes = l["changes"].get<uint64_t>();
  }
  std::cout << "at the end: " << states
            << "; jobs crossing the cable: " << JobsCrossing("tor0", "agg0").size() << "; coverage "
            << cov.dump() << "\n";
  // The direction cruxd marked (a direction whose slow flows are one job's is not moved by
  // them alone: faults.min_jobs) stays degraded.
  EXPECT_EQ(Health(Faults(), last["link"].get<std::string>()), "degraded") << end.dump(2);
  // Marked once and never handed back in between: the jobs left on it are heard through their
  // re-issued assignments (a new epoch keeps the samples of the paths a job still has at the
  // same level), so the direction does not flap up and down again.
  EXPECT_EQ(marked_changes, 1u) << end.dump(2);
}

TEST_F(FaultsE2eTest, ALyingTenantIsNotBelieved) {
  const int metrics_port = FreeTcpPort();
  ASSERT_GT(metrics_port, 0);
  cruxd_->WriteConfig(std::string(kFaultsConfig) + "  min_jobs: 1\n" +
                      "metrics_listen: \"127.0.0.1:" + std::to_string(metrics_port) + "\"\n" +
                      "log_level: info\n");
  StartAll({"--lie", "lg-0:0.1@3"});
  ASSERT_FALSE(HasFatalFailure());
  std::set<std::string> marked;
  json flagged;
  json faults;
  // Every poll notes the links not up; the first waits until lg-0 is flagged (the goal: two
  // evaluations after its first lying reports), the second watches 3 s more in which nothing may
  // change either (it never returns true).
  auto poll = [&] {
    faults = Json({"faults"});
    for (const auto& l : faults.value("links", json::array())) {
      if (l["health"] != "up") marked.insert(l["link"].get<std::string>());
    }
    for (const auto& c : faults.value("contradicted_jobs", json::array())) {
      if (c["job_id"] == "lg-0" && flagged.is_null()) flagged = c;
    }
    return !flagged.is_null();
  };
  WaitUntil(poll, seconds(40), milliseconds(200));
  if (!flagged.is_null()) {
    WaitUntil([&] { return !poll(); }, seconds(3), milliseconds(200));
  }
  ASSERT_FALSE(flagged.is_null()) << "lg-0 not flagged within 40 s: " << faults.dump(2);
  std::cout << "lying tenant lg-0 flagged: " << flagged.dump() << "\n";
  EXPECT_GE(flagged["slow_flows"].get<int>(), 2) << flagged.dump();
  EXPECT_NE(flagged["example"].get<std::string>().find("healthy at the same or a lower priority"),
            std::string::npos)
      << flagged.dump();
  EXPECT_GT(faults["disbelieved_reports"].get<uint64_t>(), 0u) << faults.dump(2);
  // Only the liar: the honest jobs are believed.
  for (const auto& c : faults["contradicted_jobs"]) EXPECT_EQ(c["job_id"], "lg-0") << c.dump();
  for (const std::string& m : marked) ADD_FAILURE() << m << " marked on a lying tenant's word";
  EXPECT_TRUE(faults["events"].empty()) << faults.dump(2);
  // /metrics: the flag is there for alerting.
  std::string text;
  EXPECT_TRUE(WaitUntil(
      [&] {
        text = ::crux::test::HttpGet(metrics_port, "/metrics");
        return text.find("crux_fault_contradicted_jobs 1") != std::string::npos &&
               text.find("crux_fault_disbelieved_reports_total 0") == std::string::npos &&
               text.find("crux_fault_disbelieved_reports_total") != std::string::npos;
      },
      seconds(10), milliseconds(200)))
      << text;
}

}  // namespace
}  // namespace crux::system_test
