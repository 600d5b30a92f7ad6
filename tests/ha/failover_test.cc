// Active/standby cruxd on a real 3-member etcd cluster, with real processes: the leader killed
// (kill -9, with crux-loadgen and a crux-switch-agent on a real redis-server), paused past its
// lease (SIGSTOP ... SIGCONT), etcd losing its quorum, and a rolling restart under load. Lease TTL
// 2 s (ha_cluster.h). Takeover figures over 10 runs: scripts/bench_ha_takeover.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>

#include "ha_cluster.h"

namespace crux::ha_test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kDeposedExit = 75;

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) GTEST_SKIP() << "etcd-server not installed (scripts/deps.sh)";
    ASSERT_TRUE(cluster_.StartEtcd()) << "etcd did not come up";
  }
  // Starts the instances one after the other (a first, so a leads) and waits for a leader.
  int StartAll() {
    for (size_t i = 0; i < cluster_.size(); ++i) {
      cluster_.StartCruxd(i);
      if (i == 0) {
        EXPECT_EQ(cluster_.WaitLeader(milliseconds(10000)), 0) << cluster_.Log(0);
      }
    }
    // Every instance answers (the standbys campaign).
    for (size_t i = 0; i < cluster_.size(); ++i) {
      EXPECT_TRUE(WaitUntil(
          [&] {
            auto s = cluster_.Status(i, 300);
            return s && s->has_ha() && s->ha().members_size() == static_cast<int>(cluster_.size());
          },
          milliseconds(10000)))
          << cluster_.Log(i);
    }
    return 0;
  }
  // Waits until instance i serves `jobs` scheduled jobs with `jobs` connected clients.
  bool WaitServing(size_t i, uint32_t jobs, milliseconds timeout = milliseconds(20000)) {
    return WaitUntil(
        [&] {
          auto s = cluster_.Status(i, 500);
          if (!s || s->jobs() != jobs || s->clients() != jobs) return false;
          auto scheduled = s->jobs_by_state().find("scheduled");
          return scheduled != s->jobs_by_state().end() && scheduled->second == jobs;
        },
        timeout, milliseconds(100));
  }
  // Stops crux-loadgen (SIGINT: it prints its summary) and parses the summary.
  nlohmann::json LoadgenSummary() {
    cluster_.loadgen().Kill(SIGINT);
    const auto code = cluster_.loadgen().Wait(milliseconds(10000));
    EXPECT_TRUE(code.has_value());
    return nlohmann::json::parse(cluster_.loadgen().Stdout(), nullptr, false);
  }

  // The instances, crux-loadgen with `jobs` jobs, served by the first leader (a); its colours.
  std::map<std::string, uint32_t> StartUnderLoad(int jobs) {
    StartAll();
    cluster_.StartLoadgen(jobs, 120);
    EXPECT_TRUE(WaitServing(0, static_cast<uint32_t>(jobs))) << cluster_.Log(0);
    auto colours = cluster_.Colours(0);
    EXPECT_TRUE(colours.has_value());
    EXPECT_EQ(colours.value_or(std::map<std::string, uint32_t>{}).size(),
              static_cast<size_t>(jobs));
    return colours.value_or(std::map<std::string, uint32_t>{});
  }
  // Every job stayed registered, followed the leader of `term` and refused nothing.
  void ExpectLoadgenFollowed(int jobs, uint64_t term) {
    const nlohmann::json lg = LoadgenSummary();
    ASSERT_TRUE(lg.is_object()) << cluster_.loadgen().Stderr();
    EXPECT_EQ(lg["registered"], jobs);
    EXPECT_EQ(lg["highest_term"], term);
    EXPECT_EQ(lg["stale_term_refused"], 0u);
  }

  HaCluster cluster_{2};
};

TEST_F(FailoverTest, KilledLeaderIsReplacedWithinTtlPlusTwoSecondsKeepingJobsAndColours) {
  constexpr int kJobs = 40;
  const auto colours_before = StartUnderLoad(kJobs);
  auto status_before = cluster_.Status(0);
  ASSERT_TRUE(status_before);
  const uint64_t term_a = status_before->ha().term();
  // A switch agent on a real redis-server follows the leader too.
  const bool with_switch = HaCluster::kHaveSwitchAgent && cluster_.StartSwitch("tor0");
  if (with_switch) {
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto s = cluster_.Switch(0, "tor0");
          return s && s->highest_term() == term_a && s->applied_epoch() == s->desired_epoch() &&
                 s->desired_epoch() > 0;
        },
        milliseconds(15000)))
        << cluster_.AgentLog();
    EXPECT_GT(cluster_.RedisMapSize(), 0);
  }

  const auto killed = Clock::now();
  cluster_.process(0).Kill(SIGKILL);
  ASSERT_EQ(cluster_.WaitLeader(milliseconds(10000), /*except=*/0), 1) << cluster_.Log(1);
  const auto takeover = Clock::now() - killed;
  std::printf("takeover after kill -9: %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(takeover).count()));

  // No job lost, every colour kept, epochs above the old leader's, every client back.
  ASSERT_TRUE(WaitServing(1, kJobs)) << cluster_.Log(1);
  auto colours_after = cluster_.Colours(1);
  auto status_after = cluster_.Status(1);
  ASSERT_TRUE(colours_after && status_after);
  EXPECT_EQ(*colours_after, colours_before);
  EXPECT_GT(status_after->ha().term(), term_a);
  EXPECT_GT(status_after->epoch(), status_before->epoch());
  EXPECT_EQ(status_after->epoch() >> 32, status_after->ha().term()) << "term in the high bits";
  EXPECT_EQ(status_after->state_id(), status_before->state_id()) << "one state id per cluster";

  if (with_switch) {
    // The agent moved to the new leader, applied its state (epoch of the new term) and refused
    // nothing; the switch's CONFIG_DB holds the map.
    const uint64_t term_b = status_after->ha().term();
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto s = cluster_.Switch(1, "tor0");
          return s && s->connected() && s->highest_term() == term_b &&
                 (s->applied_epoch() >> 32) == term_b;
        },
        milliseconds(15000)))
        << cluster_.AgentLog();
    EXPECT_EQ(cluster_.Switch(1, "tor0")->stale_term_refused(), 0u);
    EXPECT_GT(cluster_.RedisMapSize(), 0);
    std::printf("switch agent tor0 follows term %llu, %d DSCP map entries in its CONFIG_DB\n",
                static_cast<unsigned long long>(term_b), cluster_.RedisMapSize());
  }
  ExpectLoadgenFollowed(kJobs, status_after->ha().term());
}

TEST_F(FailoverTest, PausedLeaderIsDeposedAndNothingItSendsIsAccepted) {
  constexpr int kJobs = 20;
  const auto colours_before = StartUnderLoad(kJobs);

  // Paused past its lease: the standby takes over.
  cluster_.process(0).Kill(SIGSTOP);
  ASSERT_EQ(cluster_.WaitLeader(milliseconds(10000), /*except=*/0), 1) << cluster_.Log(1);
  ASSERT_TRUE(WaitServing(1, kJobs)) << cluster_.Log(1);
  auto status_b = cluster_.Status(1);
  ASSERT_TRUE(status_b);

  // Woken up: it finds its lease gone and leaves without sending anything (its fence was
  // closed before this process could run again).
  cluster_.process(0).Kill(SIGCONT);
  const auto code = cluster_.process(0).Wait(milliseconds(5000));
  ASSERT_TRUE(code.has_value()) << "the deposed leader is still running\n" << cluster_.Log(0);
  EXPECT_EQ(*code, kDeposedExit);
  EXPECT_NE(cluster_.Log(0).find("deposed"), std::string::npos) << cluster_.Log(0);

  // The clients stayed with the new leader and refused nothing (nothing stale reached them);
  // the colours are unchanged.
  auto colours_after = cluster_.Colours(1);
  ASSERT_TRUE(colours_after);
  EXPECT_EQ(*colours_after, colours_before);
  ExpectLoadgenFollowed(kJobs, status_b->ha().term());

  // Restarted (as systemd would), it stands by.
  cluster_.StartCruxd(0);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto s = cluster_.Status(0, 300);
        return s && s->has_ha() && s->ha().role() == "standby" && s->ha().leader() == "b";
      },
      milliseconds(10000)))
      << cluster_.Log(0);
}

TEST_F(FailoverTest, LeaderStepsDownWhenEtcdLosesQuorumAndOneLeadsWhenItIsBack) {
  StartAll();
  // One member lost (a follower: killing etcd's own leader costs an etcd election, which a 2 s
  // lease may or may not survive on a loaded machine): service continues.
  int etcd_leader = -1;
  ASSERT_TRUE(WaitUntil([&] { return (etcd_leader = cluster_.etcd().LeaderIndex()) >= 0; },
                        milliseconds(5000)));
  const size_t follower = etcd_leader == 2 ? 1 : 2;
  cluster_.etcd().Kill(follower);
  std::this_thread::sleep_for(milliseconds(kLeaseTtlS * 1000 + 500));
  auto s = cluster_.Status(0, 2000);
  ASSERT_TRUE(s.has_value()) << cluster_.Log(0);
  EXPECT_EQ(s->ha().role(), "leader") << cluster_.Log(0);
  EXPECT_TRUE(cluster_.process(1).running());

  // Quorum lost: the leader steps down (exits) before its lease could have run out.
  cluster_.etcd().Kill(follower == 2 ? 1 : 2);
  const auto code = cluster_.process(0).Wait(milliseconds(kLeaseTtlS * 1000 + 3000));
  ASSERT_TRUE(code.has_value()) << cluster_.Log(0);
  EXPECT_EQ(*code, kDeposedExit);
  // Its fence closes TTL/6 before the lease ends; etcd may renew for up to its election timeout
  // after losing its peers (see EtcdTest.LeaderStepsDownBeforeItsLeaseExpiresWhenQuorumIsLost).
  EXPECT_FALSE(cluster_.IsLeader(1)) << "no quorum, no leader";

  // Quorum back: exactly one leader again (a restarted as a standby, as systemd would).
  cluster_.etcd().StartMember(1);
  cluster_.etcd().StartMember(2);
  ASSERT_TRUE(cluster_.etcd().WaitWritable(milliseconds(15000)));
  cluster_.StartCruxd(0);
  const int leader = cluster_.WaitLeader(milliseconds(15000));
  ASSERT_GE(leader, 0) << cluster_.Log(0) << cluster_.Log(1);
  std::this_thread::sleep_for(milliseconds(500));
  int leaders = 0;
  for (size_t i = 0; i < cluster_.size(); ++i) leaders += cluster_.IsLeader(i) ? 1 : 0;
  EXPECT_EQ(leaders, 1);
}

TEST_F(FailoverTest, RollingRestartUnderLoadKeepsEveryJobAndColour) {
  constexpr int kJobs = 40;
  const auto colours_before = StartUnderLoad(kJobs);
  auto first = cluster_.Status(0);
  ASSERT_TRUE(first);
  uint64_t term = first->ha().term();
  uint64_t epoch = first->epoch();
  // Each instance in turn, the leader first: SIGTERM (it resigns), the other leads at once,
  // every job keeps its colour and is scheduled again, then it comes back as a standby.
  for (size_t down : {size_t{0}, size_t{1}}) {
    const size_t up = 1 - down;
    cluster_.process(down).Kill(SIGTERM);
    ASSERT_TRUE(cluster_.process(down).Wait(milliseconds(10000)).has_value()) << cluster_.Log(down);
    ASSERT_EQ(cluster_.WaitLeader(milliseconds(10000), static_cast<int>(down)),
              static_cast<int>(up))
        << cluster_.Log(up);
    ASSERT_TRUE(WaitServing(up, kJobs)) << cluster_.Log(up);
    auto colours = cluster_.Colours(up);
    auto status = cluster_.Status(up);
    ASSERT_TRUE(colours && status);
    EXPECT_EQ(*colours, colours_before) << "restart of " << cluster_.name(down);
    EXPECT_GT(status->ha().term(), term);
    EXPECT_GT(status->epoch(), epoch);
    term = status->ha().term();
    epoch = status->epoch();
    cluster_.StartCruxd(down);
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto s = cluster_.Status(down, 300);
          return s && s->has_ha() && s->ha().role() == "standby" &&
                 s->ha().leader() == cluster_.name(up);
        },
        milliseconds(10000)))
        << cluster_.Log(down);
  }
  ExpectLoadgenFollowed(kJobs, term);
}

}  // namespace
}  // namespace crux::ha_test
