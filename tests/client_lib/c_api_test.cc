// The C ABI and the hot path called with what a caller may get wrong: regression tests for the
// defects fuzz/client_c_abi and fuzz/client_profiler found (docs/fuzzing.md). The client is
// created without a daemon (nothing listens on the endpoint); registration is never needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>

#include "crux/client/client.h"
#include "crux/client/crux_client.h"

namespace crux::client {
namespace {

// crux_client.h: "Hot path. A NULL client is a no-op, so call sites need no 'is Crux on'
// check." The six hot-path functions dereferenced the handle (reproducer:
// fuzz/corpus/client_c_abi/repro_null_client_hot_path).
TEST(CApiTest, HotPathWithNullClientIsANoOp) {
  crux_client_begin_iteration(nullptr);
  crux_client_end_iteration(nullptr);
  crux_client_compute_end(nullptr);
  crux_client_comm_start(nullptr, 0, 4096);
  crux_client_comm_end(nullptr, 0);
  crux_client_record_comm(nullptr, 0, 4096, 1, 2);
  // The other functions answer "nothing" for a NULL client.
  crux_assignment_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(crux_client_assignment(nullptr, &info), 0);
  EXPECT_EQ(crux_client_wait_assignment(nullptr, 0, 0, &info), 0);
  EXPECT_EQ(crux_client_udp_sport(nullptr, "a", "b"), 0);
  EXPECT_EQ(crux_client_nccl_traffic_class(nullptr, 0), -1);
  uint32_t peer = 0;
  char err[64];
  EXPECT_EQ(crux_client_add_peer(nullptr, "a", "b", &peer, err, sizeof(err)),
            CRUX_ERR_INVALID_ARGUMENT);
  crux_client_destroy(nullptr);
}

// A transfer event with a peer id AddPeer never returned reached the profiler, which sizes its
// per-peer tables by id: UINT32_MAX wrapped `id + 1` to 0 and wrote out of bounds, large ids
// allocated up to 4 G entries. Such events are now dropped on the caller's thread and counted
// in events_dropped; the background thread keeps measuring (iterations are counted).
TEST(CApiTest, PeerIdsBeyondMaxPeersAreDroppedAndCounted) {
  ClientOptions o;
  o.endpoint = "tcp://127.0.0.1:1";  // Nothing listens: no daemon needed.
  o.job_id = "fuzz-regression";
  o.placement = {{"host0", 1, {}}};
  o.end_job_on_close = false;
  auto c = Client::Start(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto peer = (*c)->AddPeer("host0/nic0", "host1/nic0");
  ASSERT_TRUE(peer.ok());
  constexpr PeerId kHuge = std::numeric_limits<PeerId>::max();
  const int64_t now = Client::NowNs();
  for (int i = 0; i < 4; ++i) {
    (*c)->BeginIteration();
    (*c)->RecordComm(kHuge, 1000, now, now + 1000);
    (*c)->CommStart(kHuge - 1, 1000);
    (*c)->CommEnd(kHuge - 1);
    (*c)->RecordComm(o.max_peers, 1000, now, now + 1000);  // The first id out of range.
    (*c)->RecordComm(*peer, 1000, now, now + 1000);        // A declared peer: kept.
    (*c)->EndIteration();
  }
  EXPECT_EQ((*c)->Stats().events_dropped, 16u);  // Counted on the caller's thread, at once.
  // The thread consumed every event pushed before the last EndIteration (the ring is FIFO).
  EXPECT_TRUE((*c)->WaitForStats([](const ClientStats& s) { return s.iterations >= 4; }, 30000));
  (*c)->Close();
}

}  // namespace
}  // namespace crux::client
