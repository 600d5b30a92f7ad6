// JobTracker on its own (issue #12 item 6): registration, binding to connection and key, quotas,
// leases, restore and colours. Time is passed in (loop time), never read.
#include "crux/daemon/state/job_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace crux::daemon {
namespace {

using core::Duration;
using ::testing::HasSubstr;

core::JobDemand Demand(const std::string& id, uint32_t host = 0) {
  core::JobDemand d;
  d.id = id;
  d.tenant = "t";
  d.placement.push_back({core::NodeId(host), 8, {}});
  d.placement.push_back({core::NodeId(host + 1), 8, {}});
  d.bytes_per_iteration = core::Bytes::MiB(1);
  return d;
}

JobTracker::Options SmallPool() {
  JobTracker::Options o;
  o.dscp_pool = {10, 11};
  o.default_lease = Duration::Millis(1000);
  o.max_lease = Duration::Millis(5000);
  return o;
}

TEST(JobTrackerTest, RegistrationCreatesASessionWithALeaseAndAColour) {
  JobTracker t(SmallPool());
  bool known = true;
  const Refusal r = t.Register(Demand("a"), "peer1", "", Duration::Millis(100), 5000, &known);
  ASSERT_FALSE(Refused(r)) << r.message;
  EXPECT_FALSE(known);
  const JobSession* s = t.Find("a");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->demand, Demand("a"));
  EXPECT_EQ(s->peer, "peer1");
  EXPECT_EQ(s->lease, Duration::Millis(1000));
  EXPECT_EQ(s->deadline, Duration::Millis(1100));
  EXPECT_EQ(s->registered_ms, 5000);
  EXPECT_TRUE(s->dscp == 10 || s->dscp == 11) << s->dscp;
  EXPECT_EQ(t.DistinctPeers(), 1u);
  EXPECT_EQ(t.JobsOfPeer("peer1"), 1u);

  // A requested lease is honoured up to max_lease.
  core::JobDemand long_lease = Demand("b", 4);
  long_lease.lease = Duration::Millis(60000);
  ASSERT_FALSE(Refused(t.Register(long_lease, "peer1", "", Duration::Zero(), 0, &known)));
  EXPECT_EQ(t.Find("b")->lease, Duration::Millis(5000));
  // Two jobs, two colours.
  EXPECT_NE(t.Find("a")->dscp, t.Find("b")->dscp);
  EXPECT_EQ(t.SharedColours(), 0u);
}

TEST(JobTrackerTest, ReRegistrationIsIdempotentMovesTheConnectionAndRefusesConflicts) {
  JobTracker t(SmallPool());
  bool known = false;
  ASSERT_FALSE(Refused(t.Register(Demand("a"), "p1", "keyA", Duration::Zero(), 0, &known)));
  const uint32_t colour = t.Find("a")->dscp;

  // Same placement from another connection of the same key: known, moved, lease renewed.
  Refusal r = t.Register(Demand("a"), "p2", "keyA", Duration::Millis(700), 10, &known);
  ASSERT_FALSE(Refused(r)) << r.message;
  EXPECT_TRUE(known);
  EXPECT_EQ(t.Find("a")->peer, "p2");
  EXPECT_EQ(t.Find("a")->deadline, Duration::Millis(1700));
  EXPECT_EQ(t.Find("a")->dscp, colour);  // A job keeps its colour for life.
  EXPECT_EQ(t.JobsOfPeer("p1"), 0u);
  EXPECT_EQ(t.JobsOfPeer("p2"), 1u);

  // Another placement: CONFLICT, nothing changes.
  r = t.Register(Demand("a", 6), "p2", "keyA", Duration::Millis(800), 11, &known);
  EXPECT_EQ(r.code, RefusalCode::kConflict);
  EXPECT_THAT(r.message, HasSubstr("register_job.placement"));
  EXPECT_EQ(t.Find("a")->demand, Demand("a"));
  EXPECT_EQ(t.Find("a")->deadline, Duration::Millis(1700));

  // Another CURVE key: PERMISSION_DENIED "job_owner", nothing changes.
  r = t.Register(Demand("a"), "p3", "keyB", Duration::Millis(900), 12, &known);
  EXPECT_EQ(r.code, RefusalCode::kPermissionDenied);
  EXPECT_EQ(r.reason, "job_owner");
  EXPECT_EQ(t.Find("a")->peer, "p2");
}

TEST(JobTrackerTest, MessagesAreBoundToTheRegisteringConnectionAndKey) {
  JobTracker t(SmallPool());
  bool known = false;
  ASSERT_FALSE(Refused(t.Register(Demand("a"), "p1", "keyA", Duration::Zero(), 0, &known)));

  Refusal r = t.Touch("nope", "p1", "keyA", "heartbeat.job_id", Duration::Zero(), 0);
  EXPECT_EQ(r.code, RefusalCode::kUnknownJob);
  EXPECT_THAT(r.message, HasSubstr("heartbeat.job_id: job 'nope' is not registered"));

  r = t.Touch("a", "p2", "keyA", "heartbeat.job_id", Duration::Millis(500), 1);
  EXPECT_EQ(r.code, RefusalCode::kPermissionDenied);
  EXPECT_EQ(r.reason, "connection");
  EXPECT_EQ(t.Find("a")->deadline, Duration::Millis(1000));  // Not renewed by a refusal.

  r = t.Touch("a", "p1", "keyB", "profile_report.job_id", Duration::Millis(500), 1);
  EXPECT_EQ(r.code, RefusalCode::kPermissionDenied);
  EXPECT_EQ(r.reason, "job_owner");

  r = t.Touch("a", "p1", "keyA", "heartbeat.job_id", Duration::Millis(500), 77);
  ASSERT_FALSE(Refused(r)) << r.message;
  EXPECT_EQ(t.Find("a")->deadline, Duration::Millis(1500));
  EXPECT_EQ(t.Find("a")->last_seen_ms, 77);

  // Acked epochs only move forward.
  t.Acked("a", 5);
  t.Acked("a", 3);
  EXPECT_EQ(t.Find("a")->acked_epoch, 5u);
  t.Acked("nope", 9);  // Ignored.
}

TEST(JobTrackerTest, QuotasRefuseNewJobsOnlyAndChangeNothing) {
  JobTracker::Options o = SmallPool();
  o.max_jobs_per_connection = 2;
  o.max_jobs_per_key = 3;
  o.max_jobs = 4;
  JobTracker t(o);
  bool known = false;
  ASSERT_FALSE(Refused(t.Register(Demand("a", 0), "p1", "k1", Duration::Zero(), 0, &known)));
  ASSERT_FALSE(Refused(t.Register(Demand("b", 2), "p1", "k1", Duration::Zero(), 0, &known)));
  // Per connection.
  Refusal r = t.Register(Demand("c", 4), "p1", "k1", Duration::Zero(), 0, &known);
  EXPECT_EQ(r.code, RefusalCode::kResourceExhausted);
  EXPECT_EQ(r.reason, "quota");
  EXPECT_THAT(r.message, HasSubstr("limits.max_jobs_per_connection"));
  EXPECT_EQ(t.Find("c"), nullptr);
  // A known job re-registering is not a new job.
  EXPECT_FALSE(Refused(t.Register(Demand("a", 0), "p1", "k1", Duration::Zero(), 0, &known)));
  EXPECT_TRUE(known);
  // Per key.
  ASSERT_FALSE(Refused(t.Register(Demand("c", 4), "p2", "k1", Duration::Zero(), 0, &known)));
  r = t.Register(Demand("d", 6), "p3", "k1", Duration::Zero(), 0, &known);
  EXPECT_EQ(r.code, RefusalCode::kResourceExhausted);
  EXPECT_THAT(r.message, HasSubstr("limits.max_jobs_per_key"));
  // In all.
  ASSERT_FALSE(Refused(t.Register(Demand("d", 6), "p3", "k2", Duration::Zero(), 0, &known)));
  r = t.Register(Demand("e", 8), "p4", "k3", Duration::Zero(), 0, &known);
  EXPECT_EQ(r.code, RefusalCode::kResourceExhausted);
  EXPECT_THAT(r.message, HasSubstr("limits.max_jobs"));
  EXPECT_EQ(t.jobs().size(), 4u);
  // Removing a job frees its place under every quota.
  t.Remove("a");
  EXPECT_EQ(t.JobsOfPeer("p1"), 1u);
  EXPECT_FALSE(Refused(t.Register(Demand("e", 8), "p1", "k1", Duration::Zero(), 0, &known)));
}

TEST(JobTrackerTest, ExpiredLeasesRemoveJobsAndFreeTheirColours) {
  JobTracker t(SmallPool());
  bool known = false;
  ASSERT_FALSE(Refused(t.Register(Demand("a", 0), "p1", "", Duration::Zero(), 0, &known)));
  ASSERT_FALSE(Refused(t.Register(Demand("b", 2), "p2", "", Duration::Millis(500), 0, &known)));
  // The pool has two colours: a third job shares one.
  ASSERT_FALSE(Refused(t.Register(Demand("c", 4), "p3", "", Duration::Millis(600), 0, &known)));
  EXPECT_EQ(t.SharedColours(), 2u);

  EXPECT_TRUE(t.Expire(Duration::Millis(999)).empty());
  EXPECT_EQ(t.Expire(Duration::Millis(1000)), std::vector<std::string>{"a"});
  EXPECT_EQ(t.Find("a"), nullptr);
  EXPECT_EQ(t.JobsOfPeer("p1"), 0u);
  EXPECT_EQ(t.Expire(Duration::Millis(1600)), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(t.jobs().empty());
  EXPECT_EQ(t.DistinctPeers(), 0u);
  EXPECT_EQ(t.SharedColours(), 0u);
}

TEST(JobTrackerTest, RestoredJobsKeepTheirColourAndBindTheirFirstConnection) {
  JobTracker t(SmallPool());
  bool recoloured = true;
  ASSERT_TRUE(t.Restore(Demand("a"), 11, "keyA", 100, 200, Duration::Millis(50), &recoloured).ok());
  EXPECT_FALSE(recoloured);
  const JobSession* s = t.Find("a");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->dscp, 11u);
  EXPECT_EQ(s->peer, "");
  EXPECT_EQ(s->user_id, "keyA");
  EXPECT_EQ(s->registered_ms, 100);
  EXPECT_EQ(s->deadline, Duration::Millis(1050));

  // Its first message binds the connection; later ones must come through it.
  ASSERT_FALSE(Refused(t.Touch("a", "p9", "keyA", "heartbeat.job_id", Duration::Millis(60), 1)));
  EXPECT_EQ(t.Find("a")->peer, "p9");
  EXPECT_EQ(t.Touch("a", "p8", "keyA", "heartbeat.job_id", Duration::Millis(70), 2).reason,
            "connection");
  // The owner is kept across the restart.
  EXPECT_EQ(t.Touch("a", "p9", "keyB", "heartbeat.job_id", Duration::Millis(70), 2).reason,
            "job_owner");

  // A stored colour that is no longer in the pool gets a new one.
  ASSERT_TRUE(t.Restore(Demand("b", 4), 46, "", 0, 0, Duration::Zero(), &recoloured).ok());
  EXPECT_TRUE(recoloured);
  EXPECT_EQ(t.Find("b")->dscp, 10u);  // The pool's remaining colour.
}

TEST(JobTrackerTest, SetOptionsKeepsThePoolAndAppliesTheRest) {
  JobTracker t(SmallPool());
  JobTracker::Options o;
  o.dscp_pool = {40, 41, 42};
  o.max_jobs = 1;
  t.SetOptions(o);
  EXPECT_EQ(t.options().dscp_pool, (std::vector<int>{10, 11}));  // Restart-only.
  EXPECT_EQ(t.options().max_jobs, 1u);
  bool known = false;
  ASSERT_FALSE(Refused(t.Register(Demand("a"), "p", "", Duration::Zero(), 0, &known)));
  EXPECT_EQ(t.Register(Demand("b", 4), "p", "", Duration::Zero(), 0, &known).code,
            RefusalCode::kResourceExhausted);
  // An invalid pool falls back to {0} (documented in the header).
  JobTracker::Options bad;
  bad.dscp_pool = {};
  JobTracker fallback(bad);
  EXPECT_EQ(fallback.options().dscp_pool, std::vector<int>{0});
}

}  // namespace
}  // namespace crux::daemon
