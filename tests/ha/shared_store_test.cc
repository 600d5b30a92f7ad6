// SharedStore on a real etcd cluster and a real SQLite file: what a new leader reads back, the
// guard on every write, chunking past etcd's --max-txn-ops, epochs above every older term.
#include "crux/daemon/ha/shared_store.h"

#include <gtest/gtest.h>

#include "crux/daemon/ha/etcd_gateway.h"
#include "etcd_cluster.h"

namespace crux::daemon::ha {
namespace {

using ha_test::EtcdCluster;

constexpr const char* kPrefix = "/crux/test";

class SharedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) GTEST_SKIP() << "etcd-server not installed (scripts/deps.sh)";
    ASSERT_TRUE(cluster_.Start());
  }
  std::unique_ptr<Etcd> Connect() {
    return std::move(ConnectGateway({cluster_.Endpoints(), core::Duration::Millis(1000)})).value();
  }
  // An election key like LeaderElection's; returns its create revision (the term).
  int64_t Elect(const std::string& key) {
    auto r = Connect()->Txn({}, {TxnOp::Put(key, "x")}, {});
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->revision : 0;
  }
  std::unique_ptr<SharedStore> Open(const std::string& file, const std::string& key, int64_t term) {
    auto local = OpenSqliteStore((cluster_.dir() / file).string());
    EXPECT_TRUE(local.ok()) << local.status().ToString();
    SharedStoreOptions o;
    o.prefix = kPrefix;
    o.election_key = key;
    o.term = term;
    auto s = SharedStore::Open(std::move(local).value(), Connect(), std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static StoredJob Job(int i, uint32_t dscp) {
    StoredJob j;
    j.job_id = "job-" + std::to_string(i);
    j.tenant = "t";
    j.registration = std::string("reg\0") + std::to_string(i);
    j.dscp = dscp;
    j.registered_ms = 1000 + i;
    j.owner = "key";
    return j;
  }
  EtcdCluster cluster_;
};

TEST_F(SharedStoreTest, ANewLeaderReadsWhatTheOldOneWroteAndTheOldOneCannotWriteAnyMore) {
  const std::string key_a = std::string(kPrefix) + "/election/a";
  const int64_t term_a = Elect(key_a);
  auto a = Open("a.sqlite", key_a, term_a);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(*a->LoadEpoch(), static_cast<uint64_t>(term_a) << 32);
  const auto state_id = a->GetMeta("state_id");
  ASSERT_TRUE(state_id.ok() && state_id->has_value());

  // 300 jobs: more than one transaction's worth (etcd's --max-txn-ops is 128).
  std::vector<StoredJob> jobs;
  for (int i = 0; i < 300; ++i) jobs.push_back(Job(i, 10 + i % 12));
  ASSERT_TRUE(a->UpsertJobs(jobs).ok());
  ASSERT_TRUE(a->PutProfiles({{"job-7", "latest", "planned-7"}, {"job-8", "latest", ""}}, 5).ok());
  ASSERT_TRUE(a->DeleteJob("job-299").ok());
  ASSERT_TRUE(a->PutLinkOverride({"tor0->agg1", 3, 0, 42}).ok());
  const uint64_t epoch_a = (static_cast<uint64_t>(term_a) << 32) + 3;
  ASSERT_TRUE(a->ApplyPlan(epoch_a, {}, {}, {{1, epoch_a, "job-1", -1, 2, "new"}}).ok());
  // An upsert keeps the planned profile (as the SQLite store keeps the stored profile).
  ASSERT_TRUE(a->UpsertJob(Job(7, 20)).ok());

  // a's key goes (its lease expired); b is elected with a higher term.
  ASSERT_TRUE(Connect()->Txn({}, {TxnOp::Delete(key_a)}, {}).ok());
  const std::string key_b = std::string(kPrefix) + "/election/b";
  const int64_t term_b = Elect(key_b);
  ASSERT_GT(term_b, term_a);
  auto b = Open("b.sqlite", key_b, term_b);
  ASSERT_NE(b, nullptr);
  auto loaded = b->LoadJobs();
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->size(), 299u);
  std::map<std::string, StoredJob> by_id;
  for (const StoredJob& j : *loaded) by_id[j.job_id] = j;
  EXPECT_EQ(by_id["job-3"].dscp, 13u);
  EXPECT_EQ(by_id["job-3"].registration, std::string("reg\0") + "3");
  EXPECT_EQ(by_id["job-7"].dscp, 20u);
  EXPECT_EQ(by_id["job-7"].planned_profile, "planned-7");
  EXPECT_EQ(by_id["job-8"].planned_profile, "");
  EXPECT_FALSE(by_id.count("job-299"));
  auto links = b->LoadLinkOverrides();
  ASSERT_TRUE(links.ok());
  ASSERT_EQ(links->size(), 1u);
  EXPECT_EQ((*links)[0].health, 3);
  EXPECT_EQ(*b->LoadEpoch(), static_cast<uint64_t>(term_b) << 32) << "above every epoch of a";
  EXPECT_GT(*b->LoadEpoch(), epoch_a);
  EXPECT_EQ(**b->GetMeta("state_id"), **state_id) << "one state id for the cluster";
  auto audit = b->RecentAudit(10);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].reason, "new");
  EXPECT_TRUE(b->LoadPlan()->empty()) << "a new leader plans afresh";

  // The deposed a cannot write anything, to etcd or to its SQLite file.
  const core::Status s = a->UpsertJob(Job(500, 30));
  EXPECT_EQ(s.code(), core::StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(a->ApplyPlan(epoch_a + 1, {}, {}, {}).code(), core::StatusCode::kFailedPrecondition);
  auto a_local = a->local().LoadJobs();
  ASSERT_TRUE(a_local.ok());
  for (const StoredJob& j : *a_local) EXPECT_NE(j.job_id, "job-500");
  auto again = b->LoadJobs();
  EXPECT_EQ(again->size(), 299u);
}

}  // namespace
}  // namespace crux::daemon::ha
