// JobTracker host parts (multi-host jobs, issue #17 item 4): a job registered host by host by
// crux-hostd, each part on its own connection and lease; conflicts, ownership, quotas, expiry,
// restore. Time is passed in (loop time), never read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crux/daemon/state/job_tracker.h"

namespace crux::daemon {
namespace {

using core::Duration;
using core::NodeId;
using ::testing::HasSubstr;

// The part of job `id` on host `host` (node ids are opaque to the tracker).
core::JobDemand Part(const std::string& id, uint32_t host, uint32_t gpus = 2) {
  core::JobDemand d;
  d.id = id;
  d.tenant = "t";
  d.model = "nccl";
  d.placement.push_back({NodeId(host), gpus, {NodeId(100 + host)}});
  return d;
}

constexpr core::HostPartInfo kTwoHosts{2, 2};

JobTracker::Options Options() {
  JobTracker::Options o;
  o.dscp_pool = {10, 11, 12};
  o.default_lease = Duration::Millis(1000);
  o.max_lease = Duration::Millis(5000);
  return o;
}

class JobPartsTest : public ::testing::Test {
 protected:
  Refusal Reg(const core::JobDemand& d, const std::string& peer, int64_t now_ms = 0,
              const std::string& key = "") {
    return t_.RegisterPart(d, kTwoHosts, peer, key, Duration::Millis(now_ms), 1000 + now_ms, &r_);
  }

  JobTracker t_{Options()};
  PartRegistration r_;
};

TEST_F(JobPartsTest, PartsJoinOneJobInHostOrderEachOnItsConnection) {
  ASSERT_FALSE(Refused(Reg(Part("j", 5), "agent5")));
  EXPECT_TRUE(r_.new_job);
  EXPECT_TRUE(r_.new_part);
  EXPECT_TRUE(r_.placement_changed);
  EXPECT_FALSE(r_.already_known);
  const JobSession* j = t_.Find("j");
  ASSERT_NE(j, nullptr);
  EXPECT_TRUE(j->parted());
  EXPECT_EQ(j->peer, "");  // Each part speaks through its own connection.
  EXPECT_EQ(j->parts.at(NodeId(5)).peer, "agent5");
  EXPECT_EQ(j->parts.at(NodeId(5)).info, kTwoHosts);
  EXPECT_EQ(j->parts.at(NodeId(5)).deadline, Duration::Millis(1000));
  const uint32_t dscp = j->dscp;

  ASSERT_FALSE(Refused(Reg(Part("j", 2, 4), "agent2", 100)));
  EXPECT_FALSE(r_.new_job);
  EXPECT_TRUE(r_.new_part);
  EXPECT_TRUE(r_.placement_changed);
  j = t_.Find("j");
  ASSERT_EQ(j->demand.placement.size(), 2u);
  EXPECT_EQ(j->demand.placement[0].host, NodeId(2));  // Topology order, not arrival order.
  EXPECT_EQ(j->demand.placement[0].gpus, 4u);
  EXPECT_EQ(j->demand.placement[1].host, NodeId(5));
  EXPECT_EQ(j->dscp, dscp);
  EXPECT_EQ(t_.jobs().size(), 1u);
  EXPECT_EQ(t_.DistinctPeers(), 2u);
  EXPECT_EQ(t_.JobsOfPeer("agent2"), 1u);
  EXPECT_EQ(JobTracker::PeersOf(*j), (std::vector<std::string>{"agent2", "agent5"}));
  EXPECT_EQ(t_.PartOf("j", "agent2"), NodeId(2));
  EXPECT_FALSE(t_.PartOf("j", "stranger").valid());
}

TEST_F(JobPartsTest, ReRegistrationIsIdempotentAndMovesThePart) {
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1")));
  ASSERT_FALSE(Refused(Reg(Part("j", 3), "a3")));
  t_.AckedPart("j", NodeId(1), 7);
  // A restarted agent on host 1 (new connection), same placement.
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1-new", 500)));
  EXPECT_TRUE(r_.already_known);
  EXPECT_FALSE(r_.placement_changed);
  const PartSession& p = t_.Find("j")->parts.at(NodeId(1));
  EXPECT_EQ(p.peer, "a1-new");
  EXPECT_EQ(p.deadline, Duration::Millis(1500));
  EXPECT_EQ(p.acked_epoch, 7u);
  EXPECT_EQ(t_.JobsOfPeer("a1"), 0u);
  EXPECT_EQ(t_.JobsOfPeer("a1-new"), 1u);
}

TEST_F(JobPartsTest, AnotherPlacementForAHostConflictsUnlessItIsThePartsOwnConnection) {
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1")));
  ASSERT_FALSE(Refused(Reg(Part("j", 3), "a3")));
  // A second agent claiming host 1 with other GPUs while the first is alive.
  Refusal r = Reg(Part("j", 1, 8), "impostor");
  EXPECT_EQ(r.code, RefusalCode::kConflict);
  EXPECT_THAT(r.message, HasSubstr("another placement"));
  EXPECT_EQ(t_.Find("j")->parts.at(NodeId(1)).placement.gpus, 2u);
  EXPECT_EQ(t_.Find("j")->parts.at(NodeId(1)).peer, "a1");
  // The part's own agent: its ranks changed, the part follows.
  ASSERT_FALSE(Refused(Reg(Part("j", 1, 8), "a1")));
  EXPECT_TRUE(r_.placement_changed);
  EXPECT_FALSE(r_.already_known);
  EXPECT_EQ(t_.Find("j")->demand.placement[0].gpus, 8u);
}

TEST_F(JobPartsTest, WholeJobsAndPartsDoNotMixExceptTheSameOneHost) {
  bool known = false;
  core::JobDemand whole = Part("w", 1);
  whole.placement.push_back({NodeId(2), 8, {}});
  ASSERT_FALSE(Refused(t_.Register(whole, "client", "", Duration::Zero(), 0, &known)));
  Refusal r = Reg(Part("w", 1), "agent");
  EXPECT_EQ(r.code, RefusalCode::kConflict);
  EXPECT_THAT(r.message, HasSubstr("registered as a whole job"));
  EXPECT_FALSE(t_.Find("w")->parted());

  // A one-host job registered whole (by a crux-hostd before cruxd merged parts) is adopted.
  ASSERT_FALSE(Refused(t_.Register(Part("old", 4), "agent4", "", Duration::Zero(), 0, &known)));
  t_.Acked("old", 3);
  ASSERT_FALSE(Refused(Reg(Part("old", 4), "agent4")));
  EXPECT_TRUE(r_.already_known);
  const JobSession* old = t_.Find("old");
  ASSERT_TRUE(old->parted());
  EXPECT_EQ(old->peer, "");
  EXPECT_EQ(old->parts.at(NodeId(4)).peer, "agent4");
  EXPECT_EQ(old->parts.at(NodeId(4)).acked_epoch, 3u);
  EXPECT_EQ(t_.JobsOfPeer("agent4"), 1u);

  // A job made of parts refuses a whole registration.
  r = t_.Register(Part("old", 4), "agent4", "", Duration::Zero(), 0, &known);
  EXPECT_EQ(r.code, RefusalCode::kConflict);
  EXPECT_THAT(r.message, HasSubstr("made of host parts"));
}

TEST_F(JobPartsTest, PartsBelongToTheJobsKeyAndAgreeOnTenant) {
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1", 0, "key-A")));
  Refusal r = Reg(Part("j", 2), "a2", 0, "key-B");
  EXPECT_EQ(r.code, RefusalCode::kPermissionDenied);
  EXPECT_EQ(r.reason, "job_owner");
  core::JobDemand other = Part("j", 2);
  other.tenant = "someone-else";
  r = Reg(other, "a2", 0, "key-A");
  EXPECT_EQ(r.code, RefusalCode::kConflict);
  EXPECT_THAT(r.message, HasSubstr("tenant"));
  EXPECT_EQ(t_.Find("j")->parts.size(), 1u);  // Refusals change nothing.
  // A message for the part from another key.
  r = t_.TouchPart("j", NodeId(1), "a1", "key-B", "heartbeat.job_id", Duration::Zero(), 0);
  EXPECT_EQ(r.reason, "job_owner");
}

TEST_F(JobPartsTest, APartSpeaksOnlyThroughItsConnectionAndRenewsOnlyItsLease) {
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1")));
  ASSERT_FALSE(Refused(Reg(Part("j", 3), "a3")));
  Refusal r = t_.TouchPart("j", NodeId(1), "a3", "", "heartbeat.job_id", Duration::Millis(10), 0);
  EXPECT_EQ(r.code, RefusalCode::kPermissionDenied);
  EXPECT_EQ(r.reason, "connection");
  r = t_.TouchPart("j", NodeId(7), "a1", "", "heartbeat.job_id", Duration::Millis(10), 0);
  EXPECT_EQ(r.code, RefusalCode::kUnknownJob);  // The agent re-registers its part.
  r = t_.TouchPart("nope", NodeId(1), "a1", "", "heartbeat.job_id", Duration::Millis(10), 0);
  EXPECT_EQ(r.code, RefusalCode::kUnknownJob);

  ASSERT_FALSE(Refused(
      t_.TouchPart("j", NodeId(1), "a1", "", "heartbeat.job_id", Duration::Millis(600), 1600)));
  const JobSession* j = t_.Find("j");
  EXPECT_EQ(j->parts.at(NodeId(1)).deadline, Duration::Millis(1600));
  EXPECT_EQ(j->parts.at(NodeId(3)).deadline, Duration::Millis(1000));
  EXPECT_EQ(j->last_seen_ms, 1600);
  // Without a HostPart (an Ack): the part bound to the connection.
  ASSERT_FALSE(Refused(t_.Touch("j", "a3", "", "ack.job_id", Duration::Millis(700), 1700)));
  EXPECT_EQ(t_.Find("j")->parts.at(NodeId(3)).deadline, Duration::Millis(1700));
  r = t_.Touch("j", "stranger", "", "ack.job_id", Duration::Millis(700), 1700);
  EXPECT_EQ(r.reason, "connection");
}

TEST_F(JobPartsTest, PartsExpireOneByOneAndTheJobWithItsLast) {
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1")));
  ASSERT_FALSE(Refused(Reg(Part("j", 3), "a3")));
  ASSERT_FALSE(Refused(
      t_.TouchPart("j", NodeId(3), "a3", "", "heartbeat.job_id", Duration::Millis(900), 0)));
  EXPECT_TRUE(t_.Expire(Duration::Millis(5000)).empty()) << "parts expire through ExpireParts";
  std::vector<ExpiredPart> gone = t_.ExpireParts(Duration::Millis(1000));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].job_id, "j");
  EXPECT_EQ(gone[0].host, NodeId(1));
  EXPECT_FALSE(gone[0].job_gone);
  ASSERT_EQ(t_.Find("j")->demand.placement.size(), 1u);
  EXPECT_EQ(t_.Find("j")->demand.placement[0].host, NodeId(3));
  EXPECT_EQ(t_.JobsOfPeer("a1"), 0u);
  gone = t_.ExpireParts(Duration::Millis(1900));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_TRUE(gone[0].job_gone);
  EXPECT_EQ(t_.Find("j"), nullptr);
  EXPECT_EQ(t_.DistinctPeers(), 0u);
}

TEST_F(JobPartsTest, RemovingPartsLeavesTheJobUntilTheLast) {
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1")));
  ASSERT_FALSE(Refused(Reg(Part("j", 3), "a3")));
  EXPECT_EQ(t_.RemovePart("j", NodeId(9)), PartRemoval::kNone);
  EXPECT_EQ(t_.RemovePart("j", NodeId(3)), PartRemoval::kPart);
  EXPECT_EQ(t_.Find("j")->demand.placement.size(), 1u);
  EXPECT_EQ(t_.RemovePart("j", NodeId(1)), PartRemoval::kJob);
  EXPECT_EQ(t_.Find("j"), nullptr);
  EXPECT_EQ(t_.pool().SharedJobs(), 0u);
}

TEST_F(JobPartsTest, QuotasCountTheJobOnceAndThePartPerConnection) {
  JobTracker::Options o = Options();
  o.max_jobs = 1;
  o.max_jobs_per_connection = 1;
  t_.SetOptions(o);
  ASSERT_FALSE(Refused(Reg(Part("j", 1), "a1")));
  ASSERT_FALSE(Refused(Reg(Part("j", 3), "a3")));  // Same job: max_jobs not exceeded.
  Refusal r = Reg(Part("k", 3), "a3");
  EXPECT_EQ(r.code, RefusalCode::kResourceExhausted);
  EXPECT_THAT(r.message, HasSubstr("max_jobs"));
  o.max_jobs = 0;
  t_.SetOptions(o);
  ASSERT_FALSE(Refused(Reg(Part("k", 5), "a5")));
  r = Reg(Part("k", 3), "a3");  // a3 already speaks for a part of j.
  EXPECT_EQ(r.code, RefusalCode::kResourceExhausted);
  EXPECT_THAT(r.message, HasSubstr("max_jobs_per_connection"));
  EXPECT_EQ(r.reason, "quota");
}

TEST_F(JobPartsTest, RestoredPartsMakeTheUnionAndBindOnTheirFirstMessage) {
  bool recoloured = false;
  core::JobDemand stored = Part("j", 1);  // The job row (a stale union is replaced).
  ASSERT_TRUE(t_.Restore(stored, 11, "", 1, 2, Duration::Zero(), &recoloured).ok());
  core::JobDemand p3 = Part("j", 3);
  p3.lease = Duration::Millis(3000);
  ASSERT_TRUE(t_.RestorePart(Part("j", 1), kTwoHosts, "", 5, 6, Duration::Millis(100)).ok());
  ASSERT_TRUE(t_.RestorePart(p3, kTwoHosts, "", 7, 8, Duration::Millis(100)).ok());
  EXPECT_EQ(t_.RestorePart(Part("x", 1), kTwoHosts, "", 0, 0, Duration::Zero()).code(),
            core::StatusCode::kNotFound);
  const JobSession* j = t_.Find("j");
  ASSERT_TRUE(j->parted());
  ASSERT_EQ(j->demand.placement.size(), 2u);
  EXPECT_EQ(j->dscp, 11u);
  EXPECT_EQ(j->parts.at(NodeId(3)).deadline, Duration::Millis(3100));
  EXPECT_EQ(j->parts.at(NodeId(1)).registered_ms, 5);
  EXPECT_TRUE(JobTracker::PeersOf(*j).empty());
  ASSERT_FALSE(Refused(
      t_.TouchPart("j", NodeId(3), "a3", "", "heartbeat.job_id", Duration::Millis(200), 0)));
  EXPECT_EQ(JobTracker::PeersOf(*t_.Find("j")), std::vector<std::string>{"a3"});
  EXPECT_EQ(t_.JobsOfPeer("a3"), 1u);
}

}  // namespace
}  // namespace crux::daemon
