// Clients follow a new leader at once (issue #31 item 6), and the HA metrics, with real
// processes: a 3-member etcd, two cruxd (`ha:`, lease TTL 2 s), crux-loadgen and a job linked
// with the client library, all given every client endpoint. The clients' heartbeats and reports
// are set far apart (120 s), longer than any wait here: when the leader is killed (kill -9),
// only the clients' reaction to the lost and the new connection can bring every job back to the
// next leader in time. No elapsed time is asserted (scripts/bench_ha_takeover.sh measures it).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "crux/client/client.h"
#include "crux/daemon/ha/etcd_gateway.h"
#include "ha_cluster.h"
#include "http_get.h"

namespace crux::ha_test {
namespace {

using std::chrono::milliseconds;

// Far apart: every wait below is shorter.
constexpr int kSlowMs = 120000;

class HaFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) GTEST_SKIP() << "etcd-server not installed (scripts/deps.sh)";
    ASSERT_TRUE(cluster_.StartEtcd()) << "etcd did not come up";
  }
  // a first (it leads), then b, both answering with both members known.
  void StartBoth() {
    cluster_.StartCruxd(0);
    ASSERT_EQ(cluster_.WaitLeader(milliseconds(10000)), 0) << cluster_.Log(0);
    cluster_.StartCruxd(1);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_TRUE(WaitUntil(
          [&] {
            auto s = cluster_.Status(i, 300);
            return s && s->has_ha() && s->ha().members_size() == 2;
          },
          milliseconds(10000)))
          << cluster_.Log(i);
    }
  }
  uint64_t Term(size_t i) {
    auto s = cluster_.Status(i);
    return s && s->has_ha() ? s->ha().term() : 0;
  }
  // Scrapes instance i's /metrics until every regex in `want` matches (or 20 s pass); returns
  // the last scrape.
  std::string ScrapeUntil(size_t i, const std::vector<std::string>& want) {
    std::string text;
    WaitUntil(
        [&] {
          text = test::HttpGet(cluster_.metrics_port(i), "/metrics");
          for (const std::string& w : want) {
            if (!std::regex_search(text, std::regex(w))) return false;
          }
          return true;
        },
        milliseconds(20000), milliseconds(100));
    return text;
  }
  // Jobs in the leader's shared state in etcd (what a takeover restores).
  size_t SharedJobs() {
    auto etcd =
        daemon::ha::ConnectGateway({cluster_.etcd().Endpoints(), core::Duration::Millis(500)});
    if (!etcd.ok()) return 0;
    const std::string prefix = "/crux/cruxd/state/jobs/";
    auto r = (*etcd)->Range(prefix, daemon::ha::PrefixEnd(prefix));
    return r.ok() ? r->kvs.size() : 0;
  }
  static bool Matches(const std::string& text, const std::string& re) {
    return std::regex_search(text, std::regex(re));
  }

  HaCluster cluster_{2};
};

TEST_F(HaFollowTest, EveryJobFollowsAKilledLeaderWithoutWaitingForItsHeartbeat) {
  constexpr int kJobs = 40;
  StartBoth();
  cluster_.StartLoadgen(kJobs, 300, kSlowMs,
                        {"--heartbeat-ms", std::to_string(kSlowMs), "--lease-ms", "600000"});
  client::ClientOptions o;
  o.endpoint = cluster_.ClientEndpoints();
  o.job_id = "lib-job";
  o.placement = {{"host15", 1, {}}};
  o.lease_ms = 600000;  // Heartbeats every 200 s.
  o.call_timeout_ms = 1000;
  auto job = client::Client::Start(o);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const uint64_t term_a = Term(0);
  ASSERT_GT(term_a, 0u);
  // Every job registered and acknowledged a's assignment (the library's job too).
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto s = cluster_.Status(0, 500);
        return s && s->jobs() == kJobs + 1 && s->clients() == kJobs + 1;
      },
      milliseconds(30000)))
      << cluster_.Log(0) << cluster_.loadgen().Stderr();
  // ... and durably: a registration is answered once it is in etcd, but counted from its
  // arrival, and one still unanswered at the kill would be a new job for b.
  ASSERT_TRUE(WaitUntil([&] { return SharedJobs() == kJobs + 1; }, milliseconds(30000)));
  ASSERT_TRUE((*job)->WaitForStats(
      [&](const client::ClientStats& s) { return s.registered && s.highest_term == term_a; },
      30000))
      << "registered " << (*job)->Stats().registered << " term " << (*job)->Stats().highest_term
      << " applied " << (*job)->Stats().assignments_applied << ": " << (*job)->Stats().last_error;

  cluster_.process(0).Kill(SIGKILL);
  ASSERT_EQ(cluster_.WaitLeader(milliseconds(15000), /*except=*/0), 1) << cluster_.Log(1);
  const uint64_t term_b = Term(1);
  ASSERT_GT(term_b, term_a);
  // b checks itself: every restored job bound to a connection and past an epoch of its term.
  const std::string done = "ha: takeover complete: all " + std::to_string(kJobs + 1) +
                           " jobs reconnected and acknowledged term " + std::to_string(term_b);
  ASSERT_TRUE(WaitUntil([&] { return cluster_.Log(1).find(done) != std::string::npos; },
                        milliseconds(60000)))
      << cluster_.Log(1);
  auto status = cluster_.Status(1);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->jobs(), static_cast<uint32_t>(kJobs + 1));
  EXPECT_EQ(status->clients(), static_cast<uint32_t>(kJobs + 1));

  // The library's job: reconnected once, applied b's assignment.
  ASSERT_TRUE((*job)->WaitForStats(
      [&](const client::ClientStats& s) {
        return s.reconnects == 1 && s.highest_term == term_b && s.registered;
      },
      30000))
      << (*job)->Stats().last_error;
  auto a = (*job)->CurrentAssignment();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->epoch >> 32, term_b);
  EXPECT_EQ((*job)->Stats().stale_term_refused, 0u);
  (*job)->Close();

  // crux-loadgen: every job lost its connection once, came back once, refused nothing.
  cluster_.loadgen().Kill(SIGINT);
  ASSERT_TRUE(cluster_.loadgen().Wait(milliseconds(10000)).has_value());
  const auto lg = nlohmann::json::parse(cluster_.loadgen().Stdout(), nullptr, false);
  ASSERT_TRUE(lg.is_object()) << cluster_.loadgen().Stderr();
  EXPECT_EQ(lg["registered"], kJobs);
  EXPECT_EQ(lg["connections_lost"], kJobs);
  EXPECT_EQ(lg["reconnects"], kJobs);
  EXPECT_EQ(lg["highest_term"], term_b);
  EXPECT_EQ(lg["stale_term_refused"], 0u);
}

TEST_F(HaFollowTest, HaMetricsShowRoleTermLeaderChangesAndEtcdErrors) {
  StartBoth();
  const uint64_t term_a = Term(0);
  ASSERT_GT(term_a, 0u);
  const std::string ta = std::to_string(term_a);
  std::string text =
      ScrapeUntil(0, {"crux_ha_role\\{role=\"leader\"\\} 1\n", "crux_ha_term " + ta + "\n"});
  EXPECT_TRUE(Matches(text, "crux_ha_role\\{role=\"standby\"\\} 0\n")) << text;
  EXPECT_TRUE(Matches(text, "crux_ha_leader_changes_total 0\n")) << text;
  EXPECT_TRUE(Matches(text, "crux_ha_fence_closes_total\\{reason=\"lease\"\\} 0\n")) << text;
  text = ScrapeUntil(1, {"crux_ha_role\\{role=\"standby\"\\} 1\n", "crux_ha_term " + ta + "\n"});
  EXPECT_TRUE(Matches(text, "crux_ha_role\\{role=\"leader\"\\} 0\n")) << text;
  EXPECT_TRUE(Matches(text, "crux_ha_leader_changes_total 0\n")) << "the first leader seen";

  // The leader dies: b leads in a higher term, one leader change.
  cluster_.process(0).Kill(SIGKILL);
  ASSERT_EQ(cluster_.WaitLeader(milliseconds(15000), /*except=*/0), 1) << cluster_.Log(1);
  const std::string tb = std::to_string(Term(1));
  text = ScrapeUntil(1, {"crux_ha_role\\{role=\"leader\"\\} 1\n", "crux_ha_term " + tb + "\n",
                         "crux_ha_leader_changes_total 1\n"});
  EXPECT_TRUE(Matches(text, "crux_ha_role\\{role=\"leader\"\\} 1\n")) << text;
  EXPECT_TRUE(Matches(text, "crux_ha_term " + tb + "\n")) << text;
  EXPECT_TRUE(Matches(text, "crux_ha_leader_changes_total 1\n")) << text;

  // a restarted stands by under b.
  cluster_.StartCruxd(0);
  text = ScrapeUntil(0, {"crux_ha_role\\{role=\"standby\"\\} 1\n", "crux_ha_term " + tb + "\n"});
  EXPECT_TRUE(Matches(text, "crux_ha_role\\{role=\"standby\"\\} 1\n")) << text;
  EXPECT_TRUE(Matches(text, "crux_ha_leader_changes_total 0\n")) << text;

  // etcd loses its quorum: the standby's calls fail and are counted (b exits, deposed).
  cluster_.etcd().Kill(1);
  cluster_.etcd().Kill(2);
  text = ScrapeUntil(0, {"crux_ha_etcd_errors_total\\{op=\"(list|keepalive)\"\\} [1-9]"});
  EXPECT_TRUE(Matches(text, "crux_ha_etcd_errors_total\\{op=\"(list|keepalive)\"\\} [1-9]"))
      << text;
}

}  // namespace
}  // namespace crux::ha_test
