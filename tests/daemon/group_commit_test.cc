// Group commit of registrations (gateway.h): the registrations the transport delivers in one
// batch are persisted in one store transaction and answered after it commits; a failed commit
// undoes every new job of the group; any other message first commits the group.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon_test_util.h"

namespace crux::daemon::testing {
namespace {

class GroupCommitTest : public DaemonFixture {
 protected:
  // Hands `msgs` to the daemon as one batch; returns every message sent meanwhile, in order.
  std::vector<std::pair<std::string, v1::Envelope>> Batch(
      std::vector<std::pair<std::string, v1::Envelope>> msgs) {
    std::vector<protocol::Inbound> batch;
    for (auto& [peer, m] : msgs) batch.push_back(In(peer, std::move(m)));
    daemon_->ProcessClientBatch(batch);
    return client_.Take();
  }
};

TEST_F(GroupCommitTest, RegistrationsInOneBatchArePersistedTogetherAndEachAnsweredOnce) {
  auto sent = Batch({{"peer-a", Register("a", {"host0", "host4"}, 1000000000, 11)},
                     {"peer-b", Register("b", {"host1", "host5"}, 1000000000, 12)},
                     {"peer-c", Register("c", {"host2", "host6"}, 1000000000, 13)}});
  ASSERT_EQ(sent.size(), 3u);
  const std::vector<std::string> peers = {"peer-a", "peer-b", "peer-c"};
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(sent[i].first, peers[i]);
    ASSERT_TRUE(sent[i].second.has_register_job_reply()) << sent[i].second.DebugString();
    EXPECT_EQ(sent[i].second.request_id(), 11 + i);
    EXPECT_FALSE(sent[i].second.register_job_reply().already_known());
  }
  EXPECT_EQ(daemon_->tracker().jobs().size(), 3u);
  EXPECT_EQ(daemon_->control().jobs().size(), 3u);
  // All three are in the state file: a restart brings them back.
  Close();
  Open();
  EXPECT_EQ(daemon_->tracker().jobs().size(), 3u);
  EXPECT_EQ(Status().jobs(), 3u);
}

TEST_F(GroupCommitTest, AFailedGroupUndoesEveryNewJobAndKeepsKnownOnes) {
  ASSERT_TRUE(Client("peer-a", Register("a", {"host0", "host4"})).has_register_job_reply());
  faulty_->fail_method = "UpsertJob";
  auto sent = Batch({{"peer-b", Register("b", {"host1", "host5"}, 1000000000, 21)},
                     {"peer-a", Register("a", {"host0", "host4"}, 1000000000, 22)},
                     {"peer-c", Register("c", {"host2", "host6"}, 1000000000, 23)}});
  ASSERT_EQ(sent.size(), 3u);
  for (const auto& [peer, m] : sent) {
    ASSERT_TRUE(m.has_error()) << peer << ": " << m.DebugString();
    EXPECT_EQ(m.error().code(), v1::ERROR_CODE_UNAVAILABLE);
  }
  // b and c are undone; a (already known) stays, and nothing else changed.
  EXPECT_EQ(daemon_->tracker().jobs().size(), 1u);
  EXPECT_NE(daemon_->tracker().Find("a"), nullptr);
  EXPECT_EQ(daemon_->tracker().Find("b"), nullptr);
  EXPECT_EQ(daemon_->control().jobs().size(), 1u);
  // Once the store works, the same batch registers b and c.
  faulty_->fail_method.clear();
  sent = Batch({{"peer-b", Register("b", {"host1", "host5"}, 1000000000, 24)},
                {"peer-c", Register("c", {"host2", "host6"}, 1000000000, 25)}});
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& [peer, m] : sent) EXPECT_TRUE(m.has_register_job_reply()) << peer;
  EXPECT_EQ(daemon_->control().jobs().size(), 3u);
}

TEST_F(GroupCommitTest, AMessageAfterARegistrationInTheSameBatchSeesItCommitted) {
  faulty_->fail_method.clear();
  auto sent = Batch({{"peer-x", Register("x", {"host0", "host4"}, 1000000000, 31)},
                     {"peer-x", Profile("x", 100, 10, true, 32)},
                     {"peer-x", Register("x", {"host0", "host4"}, 1000000000, 33)},
                     {"peer-y", Register("y", {"host1", "host5"}, 1000000000, 34)}});
  std::vector<uint64_t> order;
  for (const auto& [peer, m] : sent) {
    if (m.request_id() == 0) continue;  // A push (the re-registration's current assignment).
    order.push_back(m.request_id());
    EXPECT_FALSE(m.has_error()) << m.DebugString();
  }
  // Replies in request order: the profile report and the second registration of x were handled
  // after x's registration was committed.
  EXPECT_EQ(order, (std::vector<uint64_t>{31, 32, 33, 34}));
  ASSERT_NE(daemon_->control().Find("x"), nullptr);
  EXPECT_EQ(daemon_->control().Find("x")->phase, core::JobPhase::kScheduled);
  EXPECT_EQ(daemon_->control().jobs().size(), 2u);
}

}  // namespace
}  // namespace crux::daemon::testing
