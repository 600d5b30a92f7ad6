// The etcd gateway client and the leader election against a real 3-member etcd cluster.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "crux/daemon/ha/election.h"
#include "crux/daemon/ha/etcd_gateway.h"
#include "etcd_cluster.h"

namespace crux::daemon::ha {
namespace {

using ha_test::EtcdCluster;
using ha_test::WaitUntil;
using std::chrono::milliseconds;

TEST(Base64Test, RoundTripsEveryLength) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    auto back = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(back.ok()) << n;
    EXPECT_EQ(*back, bytes);
    bytes.push_back(static_cast<char>(n * 37 + 200));
  }
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_FALSE(Base64Decode("Zm9v!").ok());
  EXPECT_FALSE(Base64Decode("Zm9").ok());
}

TEST(PrefixEndTest, IncrementsTheLastByteBelow0xff) {
  EXPECT_EQ(PrefixEnd("/crux/"), "/crux0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(GatewayTest, RefusesBadEndpoints) {
  EXPECT_FALSE(ConnectGateway({{}, core::Duration::Millis(100)}).ok());
  EXPECT_FALSE(ConnectGateway({{"127.0.0.1:2379"}, core::Duration::Millis(100)}).ok());
}

TEST(GatewayTest, NobodyListeningIsUnavailable) {
  auto etcd = ConnectGateway({{"http://127.0.0.1:" + std::to_string(system_test::FreeTcpPort())},
                              core::Duration::Millis(200)});
  ASSERT_TRUE(etcd.ok());
  auto r = (*etcd)->Grant(3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kUnavailable);
}

class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) GTEST_SKIP() << "etcd-server not installed (scripts/deps.sh)";
    ASSERT_TRUE(cluster_.Start()) << "etcd cluster did not come up";
  }
  std::unique_ptr<Etcd> Connect(core::Duration timeout = core::Duration::Millis(1000)) {
    auto etcd = ConnectGateway({cluster_.Endpoints(), timeout});
    EXPECT_TRUE(etcd.ok());
    return std::move(etcd).value();
  }
  EtcdCluster cluster_;
};

TEST_F(EtcdTest, TxnRangeLeasesAndFailover) {
  auto etcd = Connect();
  // Create-if-absent on create revision 0, binary-safe keys and values.
  const std::string key = std::string("/t/k\x01\xfe", 6);
  Compare absent{key, Compare::Target::kCreateRevision, Compare::Op::kEqual, 0, {}};
  auto put = etcd->Txn({absent}, {TxnOp::Put(key, std::string("v\0w", 3))}, {TxnOp::Get(key)});
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(put->succeeded);
  auto again = etcd->Txn({absent}, {TxnOp::Put(key, "other")}, {TxnOp::Get(key)});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->succeeded);
  ASSERT_EQ(again->ranges.size(), 1u);
  ASSERT_EQ(again->ranges[0].size(), 1u);
  EXPECT_EQ(again->ranges[0][0].value, std::string("v\0w", 3));
  const int64_t created = again->ranges[0][0].create_revision;
  EXPECT_EQ(created, put->revision);

  // A guarded write runs only while the guard key keeps its create revision.
  Compare guard{key, Compare::Target::kCreateRevision, Compare::Op::kEqual, created, {}};
  auto guarded = etcd->Txn({guard}, {TxnOp::Put("/t/data", "1")}, {});
  ASSERT_TRUE(guarded.ok());
  EXPECT_TRUE(guarded->succeeded);
  ASSERT_TRUE(etcd->Txn({}, {TxnOp::Delete(key)}, {}).ok());
  ASSERT_TRUE(etcd->Txn({}, {TxnOp::Put(key, "recreated")}, {}).ok());
  guarded = etcd->Txn({guard}, {TxnOp::Put("/t/data", "2")}, {});
  ASSERT_TRUE(guarded.ok());
  EXPECT_FALSE(guarded->succeeded) << "a recreated key has another create revision";

  // Leases: a key attached to a revoked lease is gone.
  auto lease = etcd->Grant(5);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->ttl_s, 5);
  ASSERT_TRUE(etcd->Txn({}, {TxnOp::Put("/t/leased/a", "x", lease->id)}, {}).ok());
  auto ttl = etcd->KeepAlive(lease->id);
  ASSERT_TRUE(ttl.ok());
  EXPECT_EQ(*ttl, 5);
  auto listed = etcd->Range("/t/", PrefixEnd("/t/"), /*by_create_revision=*/true);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->kvs.size(), 3u);
  EXPECT_LT(listed->kvs[0].create_revision, listed->kvs[1].create_revision);
  EXPECT_LT(listed->kvs[1].create_revision, listed->kvs[2].create_revision);
  ASSERT_TRUE(etcd->Revoke(lease->id).ok());
  auto gone = etcd->KeepAlive(lease->id);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(*gone, 0);
  auto after = etcd->Range("/t/leased/", PrefixEnd("/t/leased/"));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->kvs.empty());

  // The member in use dies: the next call moves to another one. While the survivors elect a
  // new leader they answer 503 "leader changed" (UNAVAILABLE), which the gateway returns after
  // trying each member once; callers (the election loop) retry on their own timers, as here.
  const std::string first = etcd->endpoint();
  cluster_.Kill(0);
  auto moved = etcd->Range(key, "");
  ASSERT_TRUE(WaitUntil(
      [&] {
        if (!moved.ok() && moved.status().code() == core::StatusCode::kUnavailable) {
          moved = etcd->Range(key, "");
        }
        return moved.ok() || moved.status().code() != core::StatusCode::kUnavailable;
      },
      milliseconds(10000)));
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_NE(etcd->endpoint(), first);
  EXPECT_EQ(moved->kvs.size(), 1u);
}

ElectionOptions Options(const std::string& instance) {
  ElectionOptions o;
  o.prefix = "/crux-test/cruxd";
  o.instance = instance;
  o.client_endpoint = "tcp://127.0.0.1:1/" + instance;
  o.ttl = core::Duration::Millis(2000);
  o.poll = core::Duration::Millis(100);
  return o;
}

TEST_F(EtcdTest, LowestRevisionLeadsAndTheNextTakesOverWhenItsLeaseExpires) {
  std::atomic<int64_t> a_term{0};
  std::atomic<int64_t> b_term{0};
  std::atomic<bool> a_deposed{false};
  auto a = std::make_unique<LeaderElection>(
      Options("a"), Connect(), [&](int64_t t) { a_term = t; },
      [&](const std::string&) { a_deposed = true; });
  ASSERT_TRUE(WaitUntil([&] { return a_term.load() > 0; }, milliseconds(5000)));
  EXPECT_TRUE(a->MayAct());
  auto b = std::make_unique<LeaderElection>(
      Options("b"), Connect(), [&](int64_t t) { b_term = t; }, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return b->view().members.size() == 2; }, milliseconds(5000)));
  ElectionView v = b->view();
  EXPECT_EQ(v.role, Role::kStandby);
  EXPECT_EQ(v.leader, "a");
  EXPECT_EQ(v.term, a_term.load());
  EXPECT_EQ(v.leader_client_endpoint, "tcp://127.0.0.1:1/a");
  EXPECT_FALSE(b->MayAct());
  EXPECT_EQ(a->view().role, Role::kLeader);

  EXPECT_EQ(v.leader_changes, 0u) << "the first leader seen is no change";

  // Graceful: a resigns, b leads at once with a higher term.
  a->Resign();
  EXPECT_FALSE(a->MayAct());
  ASSERT_TRUE(WaitUntil([&] { return b_term.load() > 0; }, milliseconds(3000)));
  EXPECT_GT(b_term.load(), a_term.load());
  EXPECT_FALSE(a_deposed.load()) << "resigning is not being deposed";
  EXPECT_EQ(a->view().fence_closes, (std::map<std::string, uint64_t>{{"resigned", 1}}));
  EXPECT_EQ(b->view().leader_changes, 1u);
  EXPECT_TRUE(b->view().fence_closes.empty());
  a.reset();

  // Crash: c campaigns, b's thread stops without revoking: c leads once b's lease expires.
  std::atomic<int64_t> c_term{0};
  auto c = std::make_unique<LeaderElection>(
      Options("c"), Connect(), [&](int64_t t) { c_term = t; }, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return c->view().members.size() == 2; }, milliseconds(5000)));
  b.reset();  // No Resign: like kill -9 (the lease runs out).
  ASSERT_TRUE(WaitUntil([&] { return c_term.load() > 0; }, milliseconds(5000)));
  EXPECT_GT(c_term.load(), b_term.load());
  EXPECT_EQ(c->view().leader_changes, 1u);  // b, then itself.
  EXPECT_TRUE(c->view().etcd_errors.empty());
}

TEST_F(EtcdTest, LeaderStepsDownBeforeItsLeaseExpiresWhenQuorumIsLost) {
  std::atomic<int64_t> term{0};
  std::atomic<int64_t> deposed_after_ms{-1};
  std::chrono::steady_clock::time_point lost;
  // The view hook (metrics): the last view it got, from the campaign thread.
  std::mutex seen_mu;
  ElectionView seen;
  ElectionOptions o = Options("a");
  o.on_view = [&](const ElectionView& v) {
    std::lock_guard<std::mutex> lock(seen_mu);
    seen = v;
  };
  auto a = std::make_unique<LeaderElection>(
      o, Connect(core::Duration::Millis(300)), [&](int64_t t) { term = t; },
      [&](const std::string&) {
        deposed_after_ms =
            std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - lost)
                .count();
      });
  ASSERT_TRUE(WaitUntil([&] { return term.load() > 0; }, milliseconds(5000)));
  lost = std::chrono::steady_clock::now();
  cluster_.Kill(1);
  cluster_.Kill(2);
  // The fence closes TTL/6 before the lease (2 s from the last renewal) can run out. etcd's
  // leader keeps renewing leases until it notices it lost its peers (up to its 500 ms election
  // timeout, plus scheduling on a loaded machine), so the last renewal may come a little after
  // the kills. How long it takes is a figure of scripts/bench_ha_takeover.sh, not asserted here.
  ASSERT_TRUE(WaitUntil([&] { return !a->MayAct(); }, milliseconds(4000)));
  ASSERT_TRUE(WaitUntil([&] { return deposed_after_ms.load() >= 0; }, milliseconds(4000)));
  EXPECT_EQ(a->view().role, Role::kDeposed);
  // Counted: the fence closed once (the lease could not be renewed in time, or etcd said the
  // lease was gone), after failed etcd calls; the hook saw it before `deposed`.
  const ElectionView v = a->view();
  uint64_t closes = 0;
  for (const auto& [reason, n] : v.fence_closes) closes += n;
  EXPECT_EQ(closes, 1u);
  EXPECT_FALSE(v.etcd_errors.empty());
  std::lock_guard<std::mutex> lock(seen_mu);
  EXPECT_EQ(seen.role, Role::kDeposed);
  EXPECT_EQ(seen.fence_closes, v.fence_closes);
}

}  // namespace
}  // namespace crux::daemon::ha
