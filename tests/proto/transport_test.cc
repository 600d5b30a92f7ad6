// RouterServer + DealerClient over real ZeroMQ sockets (ipc:// in a temp dir, tcp:// on
// 127.0.0.1 with a kernel-chosen port, inproc://), with and without CURVE.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"
#include "test_util.h"

namespace crux::protocol {
namespace {

using core::Duration;
using testing::TempDir;
using testing::WaitFor;

constexpr Duration kTimeout = Duration::Millis(5000);

// A tiny daemon: answers Heartbeat with an Ack, RegisterJob with a RegisterJobReply preceded by
// an Assignment push, everything else with an Ack. Records what it was given.
class FakeDaemon {
 public:
  RouterServer::Handler Handler() {
    return [this](Inbound in) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        inbound_.push_back(in);
      }
      const v1::Envelope& m = in.msg;
      if (m.has_register_job()) {
        v1::Envelope push = NewEnvelope(0);
        push.mutable_assignment()->set_job_id(m.register_job().job_id());
        push.mutable_assignment()->set_epoch(1);
        push.mutable_assignment()->set_dscp(10);
        push.mutable_assignment()->set_traffic_class(40);
        EXPECT_TRUE(server->Send(in.peer, push).ok());
        v1::Envelope reply = NewEnvelope(m.request_id());
        reply.mutable_register_job_reply()->set_job_id(m.register_job().job_id());
        reply.mutable_register_job_reply()->set_lease_ms(3000);
        EXPECT_TRUE(server->Send(in.peer, reply).ok());
      } else {
        EXPECT_TRUE(server->Send(in.peer, MakeAck(m.request_id(), "ok")).ok());
      }
    };
  }
  std::vector<Inbound> inbound() {
    std::lock_guard<std::mutex> lock(mu_);
    return inbound_;
  }

  RouterServer* server = nullptr;

 private:
  std::mutex mu_;
  std::vector<Inbound> inbound_;
};

ClientOptions Plain(const std::string& endpoint) {
  ClientOptions co;
  co.endpoint = endpoint;
  return co;
}

v1::Envelope Heartbeat(const std::string& job, uint64_t seq) {
  v1::Envelope m = NewEnvelope();
  m.mutable_heartbeat()->set_job_id(job);
  m.mutable_heartbeat()->set_seq(seq);
  return m;
}

v1::Envelope Register(const std::string& job) {
  v1::Envelope m = NewEnvelope();
  auto* r = m.mutable_register_job();
  r->set_job_id(job);
  auto* h = r->add_placement();
  h->set_host("host0");
  h->set_gpus(8);
  return m;
}

class TransportTest : public ::testing::Test {
 protected:
  std::unique_ptr<RouterServer> StartServer(ServerOptions options) {
    auto server = RouterServer::Start(ctx_, std::move(options), daemon_.Handler());
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (!server.ok()) return nullptr;
    daemon_.server = server->get();
    return std::move(server).value();
  }
  std::unique_ptr<DealerClient> Connect(ClientOptions options) {
    auto client = DealerClient::Connect(ctx_, std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }
  // Checks the request/reply and push paths against `endpoint`.
  void ExerciseRequestReply(const std::string& bind_endpoint) {
    ServerOptions so;
    so.endpoint = bind_endpoint;
    auto server = StartServer(so);
    ASSERT_NE(server, nullptr);
    auto client = Connect(Plain(server->endpoint()));
    ASSERT_NE(client, nullptr);

    auto reply = client->Call(Heartbeat("job-a", 1), kTimeout);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_TRUE(reply->has_ack());
    EXPECT_EQ(reply->request_id(), 1u);

    auto reg = client->Call(Register("job-a"), kTimeout);
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    ASSERT_TRUE(reg->has_register_job_reply());
    EXPECT_EQ(reg->register_job_reply().lease_ms(), 3000u);
    // The push sent before the reply was queued for Receive().
    auto push = client->Receive(Duration::Millis(1000));
    ASSERT_TRUE(push.ok());
    ASSERT_TRUE(push->has_value());
    EXPECT_TRUE((*push)->has_assignment());
    EXPECT_EQ((*push)->request_id(), 0u);
    // Nothing else arrives.
    auto none = client->Receive(Duration::Millis(20));
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());

    const ServerCounters c = server->counters();
    EXPECT_EQ(c.received, 2u);
    EXPECT_EQ(c.delivered, 2u);
    EXPECT_EQ(c.sent, 3u);
    EXPECT_EQ(c.malformed, 0u);
    // Every frame queued with Send() is counted once in the send-queue wait buckets.
    uint64_t waited = 0;
    for (uint64_t n : c.send_queue_buckets) waited += n;
    EXPECT_EQ(waited, 3u);
    auto inbound = daemon_.inbound();
    ASSERT_EQ(inbound.size(), 2u);
    EXPECT_EQ(inbound[0].user_id, "");
    EXPECT_FALSE(inbound[0].peer.empty());
    client.reset();
    server.reset();
  }

  TransportContext ctx_;
  FakeDaemon daemon_;
};

TEST_F(TransportTest, RequestReplyAndPushOverIpc) {
  TempDir dir;
  ExerciseRequestReply("ipc://" + dir.path() + "/cruxd.sock");
}

TEST_F(TransportTest, RequestReplyAndPushOverTcpEphemeralPort) {
  ExerciseRequestReply("tcp://127.0.0.1:*");
}

TEST_F(TransportTest, RequestReplyAndPushOverInproc) { ExerciseRequestReply("inproc://cruxd"); }

TEST_F(TransportTest, BadFramesGetErrorsAndNobodyElseIsAffected) {
  ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  auto good = Connect(Plain(server->endpoint()));
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->Call(Heartbeat("job-good", 1), kTimeout).ok());

  // A raw DEALER that misbehaves.
  zmq::socket_t raw(ctx_.context(), zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(server->endpoint());
  auto expect_error = [&](v1::ErrorCode code, uint64_t request_id) {
    zmq::pollitem_t item{raw.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
    zmq::message_t reply;
    ASSERT_TRUE(raw.recv(reply));
    auto decoded = Decode(reply.to_string_view());
    ASSERT_TRUE(decoded.ok());
    ASSERT_TRUE(decoded->has_error()) << decoded->DebugString();
    EXPECT_EQ(decoded->error().code(), code) << decoded->error().message();
    EXPECT_EQ(decoded->request_id(), request_id);
  };

  raw.send(zmq::str_buffer("this is not protobuf \xff\xff"));
  expect_error(v1::ERROR_CODE_MALFORMED, 0);

  raw.send(zmq::buffer(std::string(kMaxFrameBytes + 100, '\x08')));
  expect_error(v1::ERROR_CODE_TOO_LARGE, 0);

  v1::Envelope future = Heartbeat("job-raw", 1);
  future.set_request_id(77);
  future.set_protocol_version(9);
  raw.send(zmq::buffer(Encode(future)));
  expect_error(v1::ERROR_CODE_UNSUPPORTED_VERSION, 77);

  v1::Envelope nan = NewEnvelope(78);
  nan.mutable_profile_report()->set_job_id("job-raw");
  nan.mutable_profile_report()->set_compute_time_ns(1);
  nan.mutable_profile_report()->set_iteration_period_ns(1);
  nan.mutable_profile_report()->set_samples(1);
  nan.mutable_profile_report()->set_overlap_start(std::nan(""));
  raw.send(zmq::buffer(Encode(nan)));
  expect_error(v1::ERROR_CODE_INVALID_ARGUMENT, 78);

  raw.send(zmq::str_buffer("part1"), zmq::send_flags::sndmore);
  raw.send(zmq::str_buffer("part2"));
  expect_error(v1::ERROR_CODE_MALFORMED, 0);

  // The same peer's next valid request works.
  v1::Envelope ok = Heartbeat("job-raw", 2);
  ok.set_request_id(79);
  raw.send(zmq::buffer(Encode(ok)));
  {
    zmq::pollitem_t item{raw.handle(), 0, ZMQ_POLLIN, 0};
    ASSERT_EQ(zmq::poll(&item, 1, std::chrono::milliseconds(5000)), 1);
    zmq::message_t reply;
    ASSERT_TRUE(raw.recv(reply));
    auto decoded = Decode(reply.to_string_view());
    ASSERT_TRUE(decoded.ok());
    EXPECT_TRUE(decoded->has_ack());
    EXPECT_EQ(decoded->request_id(), 79u);
  }
  // And the other peer never noticed.
  auto reply = good->Call(Heartbeat("job-good", 2), kTimeout);
  ASSERT_TRUE(reply.ok());
  EXPECT_TRUE(reply->has_ack());
  EXPECT_EQ(good->counters().bad_frames, 0u);

  const ServerCounters c = server->counters();
  EXPECT_EQ(c.malformed, 2u);
  EXPECT_EQ(c.too_large, 1u);
  EXPECT_EQ(c.unsupported_version, 1u);
  EXPECT_EQ(c.invalid, 1u);
  EXPECT_EQ(c.delivered, 3u);  // Two good heartbeats + the raw peer's valid one.
  for (const Inbound& in : daemon_.inbound()) EXPECT_TRUE(in.msg.has_heartbeat());
  raw.close();
}

TEST_F(TransportTest, SendToUnknownPeerIsDroppedAndCounted) {
  ServerOptions so;
  so.endpoint = "inproc://unknown-peer";
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  auto client = Connect(Plain(server->endpoint()));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(server->Send("nobody", MakeAck(0)).ok());  // Queued; fails on the I/O thread.
  // The reply below is queued after the failed send, so once it arrives the send was tried.
  ASSERT_TRUE(client->Call(Heartbeat("job-a", 1), kTimeout).ok());
  EXPECT_EQ(server->counters().send_failed, 1u);
  // Oversize pushes are refused synchronously.
  v1::Envelope huge = NewEnvelope(0);
  huge.mutable_end_job()->set_job_id("x");
  huge.mutable_end_job()->set_reason(std::string(kMaxFrameBytes + 1, 'r'));
  EXPECT_EQ(server->Send("nobody", huge).code(), core::StatusCode::kOutOfRange);
}

// Nobody listens: the call ends at its own deadline with kUnavailable, naming it. (A call that
// blocked for good would hang the test until ctest's timeout ends it; no upper bound on the wall
// clock is asserted.)
TEST_F(TransportTest, CallTimesOutWithoutServerAndNeverBlocks) {
  TempDir dir;
  auto client = Connect(Plain("ipc://" + dir.path() + "/nobody.sock"));
  ASSERT_NE(client, nullptr);
  auto reply = client->Call(Heartbeat("job-a", 1), Duration::Millis(100));
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), core::StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("no reply from ipc://" + dir.path() +
                                          "/nobody.sock within 100 ms"),
            std::string::npos)
      << reply.status().ToString();
}

TEST_F(TransportTest, LateRepliesAreDiscarded) {
  // A server that answers only every second request: the first Call times out, its late
  // reply must not be mistaken for the second Call's.
  std::atomic<int> seen{0};
  RouterServer* srv = nullptr;
  ServerOptions so;
  so.endpoint = "inproc://late";
  std::vector<Inbound> held;
  std::mutex mu;
  auto server = RouterServer::Start(ctx_, so, [&](Inbound in) {
    std::lock_guard<std::mutex> lock(mu);
    if (seen.fetch_add(1) == 0) {
      held.push_back(std::move(in));  // Answer later.
      return;
    }
    // Answer the held request first (late), then this one.
    for (const Inbound& h : held) (void)srv->Send(h.peer, MakeAck(h.msg.request_id(), "late"));
    held.clear();
    (void)srv->Send(in.peer, MakeAck(in.msg.request_id(), "fresh"));
  });
  ASSERT_TRUE(server.ok());
  srv = server->get();
  auto client = Connect(Plain("inproc://late"));
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->Call(Heartbeat("job-a", 1), Duration::Millis(50)).ok());
  auto reply = client->Call(Heartbeat("job-a", 2), kTimeout);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->ack().job_id(), "fresh");
  EXPECT_EQ(client->counters().stale_replies, 1u);
}

TEST_F(TransportTest, BadOptionsAreRefused) {
  ServerOptions so;
  EXPECT_EQ(RouterServer::Start(ctx_, so, [](Inbound) {}).status().code(),
            core::StatusCode::kInvalidArgument);
  so.endpoint = "bogus://x";
  auto bad = RouterServer::Start(ctx_, so, [](Inbound) {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bogus://x"), std::string::npos);
  so.endpoint = "tcp://127.0.0.1:*";
  so.curve = true;  // Without keys.
  EXPECT_FALSE(RouterServer::Start(ctx_, so, [](Inbound) {}).ok());

  ClientOptions co = Plain("tcp://127.0.0.1:1");
  co.curve = true;
  EXPECT_FALSE(DealerClient::Connect(ctx_, co).ok());
  EXPECT_FALSE(DealerClient::Connect(ctx_, ClientOptions{}).ok());

  // Port already in use.
  ServerOptions first;
  first.endpoint = "tcp://127.0.0.1:*";
  auto a = RouterServer::Start(ctx_, first, [](Inbound) {});
  ASSERT_TRUE(a.ok());
  ServerOptions second;
  second.endpoint = (*a)->endpoint();
  auto b = RouterServer::Start(ctx_, second, [](Inbound) {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), core::StatusCode::kUnavailable);
}

class CurveTransportTest : public TransportTest {
 protected:
  void SetUp() override {
    auto s = GenerateCurveKeyPair();
    auto c = GenerateCurveKeyPair();
    auto o = GenerateCurveKeyPair();
    ASSERT_TRUE(s.ok() && c.ok() && o.ok());
    server_keys_ = *s;
    client_keys_ = *c;
    other_keys_ = *o;
    ASSERT_TRUE(SavePublicKey(client_keys_.public_z85, keys_dir_.path() + "/job-a.pub").ok());
  }
  ClientOptions CurveClient(const std::string& endpoint, const CurveKeyPair& keys) {
    ClientOptions co;
    co.endpoint = endpoint;
    co.curve = true;
    co.server_public_z85 = server_keys_.public_z85;
    co.client_keys = keys;
    return co;
  }

  TempDir keys_dir_;
  CurveKeyPair server_keys_, client_keys_, other_keys_;
};

TEST_F(CurveTransportTest, AuthorisedClientWorksUnknownKeyIsRefusedAndCounted) {
  ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  so.curve = true;
  so.server_keys = server_keys_;
  so.authorized_keys_dir = keys_dir_.path();
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);

  auto good = Connect(CurveClient(server->endpoint(), client_keys_));
  ASSERT_NE(good, nullptr);
  auto reply = good->Call(Heartbeat("job-a", 1), kTimeout);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->has_ack());
  auto inbound = daemon_.inbound();
  ASSERT_EQ(inbound.size(), 1u);
  EXPECT_EQ(inbound[0].user_id, client_keys_.public_z85);

  auto intruder = Connect(CurveClient(server->endpoint(), other_keys_));
  ASSERT_NE(intruder, nullptr);
  auto refused = intruder->Call(Heartbeat("job-a", 1), Duration::Millis(300));
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(WaitFor([&] { return server->counters().auth_refused >= 1; }));
  auto nothing = intruder->Receive(Duration::Millis(50));
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->has_value());
  EXPECT_EQ(daemon_.inbound().size(), 1u);  // The handler never saw the intruder.

  // A client that does not speak CURVE at all gets nothing either.
  auto plain = Connect(Plain(server->endpoint()));
  ASSERT_NE(plain, nullptr);
  EXPECT_FALSE(plain->Call(Heartbeat("job-a", 1), Duration::Millis(200)).ok());
  EXPECT_EQ(daemon_.inbound().size(), 1u);

  // The authorised client still works.
  EXPECT_TRUE(good->Call(Heartbeat("job-a", 2), kTimeout).ok());
  EXPECT_EQ(ctx_.auth_accepted("crux"), 1u);
}

TEST_F(CurveTransportTest, PlainAdminEndpointInSameContextStillWorks) {
  ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  so.curve = true;
  so.server_keys = server_keys_;
  so.authorized_keys = {client_keys_.public_z85};
  auto curve_server = StartServer(so);
  ASSERT_NE(curve_server, nullptr);

  TempDir dir;
  FakeDaemon admin;
  ServerOptions ao;
  ao.endpoint = "ipc://" + dir.path() + "/admin.sock";
  auto admin_server = RouterServer::Start(ctx_, ao, admin.Handler());
  ASSERT_TRUE(admin_server.ok()) << admin_server.status().ToString();
  admin.server = admin_server->get();

  auto ctl = Connect(Plain((*admin_server)->endpoint()));
  ASSERT_NE(ctl, nullptr);
  v1::Envelope status = NewEnvelope();
  status.mutable_status_request();
  auto reply = ctl->Call(status, kTimeout);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->has_ack());

  auto job = Connect(CurveClient(curve_server->endpoint(), client_keys_));
  ASSERT_NE(job, nullptr);
  EXPECT_TRUE(job->Call(Heartbeat("job-a", 1), kTimeout).ok());
}

TEST_F(CurveTransportTest, KeysCanBeReplacedLive) {
  ServerOptions so;
  so.endpoint = "tcp://127.0.0.1:*";
  so.curve = true;
  so.server_keys = server_keys_;
  so.authorized_keys = {client_keys_.public_z85};
  auto server = StartServer(so);
  ASSERT_NE(server, nullptr);
  auto other = Connect(CurveClient(server->endpoint(), other_keys_));
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->Call(Heartbeat("job-b", 1), Duration::Millis(100)).ok());
  ASSERT_TRUE(ctx_.SetAuthorizedKeys("crux", {other_keys_.public_z85}).ok());
  // A new connection is checked against the new set.
  other.reset();
  auto again = Connect(CurveClient(server->endpoint(), other_keys_));
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->Call(Heartbeat("job-b", 1), kTimeout).ok());
}

}  // namespace
}  // namespace crux::protocol

namespace crux::protocol {
namespace {

// StartBatched: every message is delivered once, in arrival order, in non-empty batches of at
// most max_batch; replies sent from the batch handler reach the client.
TEST_F(TransportTest, BatchedServerDeliversEveryMessageInOrderInBoundedBatches) {
  ServerOptions so;
  so.endpoint = "inproc://batched";
  so.max_batch = 8;
  std::mutex mu;
  std::vector<size_t> sizes;
  std::vector<uint64_t> seqs;
  RouterServer* srv = nullptr;
  auto server = RouterServer::StartBatched(ctx_, so, [&](std::vector<Inbound> batch) {
    std::lock_guard<std::mutex> lock(mu);
    sizes.push_back(batch.size());
    for (const Inbound& in : batch) {
      seqs.push_back(in.msg.heartbeat().seq());
      EXPECT_TRUE(srv->Send(in.peer, MakeAck(in.msg.request_id(), "ok")).ok());
    }
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  srv = server->get();
  auto client = Connect(Plain("inproc://batched"));
  ASSERT_NE(client, nullptr);
  constexpr uint64_t kCount = 40;
  for (uint64_t i = 1; i <= kCount; ++i) {
    v1::Envelope m = Heartbeat("job-a", i);
    m.set_request_id(i);
    ASSERT_TRUE(client->Send(m).ok());
  }
  std::vector<uint64_t> acked;
  while (acked.size() < kCount) {
    auto got = client->Receive(kTimeout);
    ASSERT_TRUE(got.ok() && got->has_value()) << "only " << acked.size() << " replies";
    acked.push_back((*got)->request_id());
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seqs.size(), kCount);
  for (uint64_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(seqs[i], i + 1);
    EXPECT_EQ(acked[i], i + 1);
  }
  for (size_t n : sizes) {
    EXPECT_GE(n, 1u);
    EXPECT_LE(n, so.max_batch);
  }
  EXPECT_EQ(server.value()->counters().delivered, kCount);
}

// A batch handler that throws: every message of the batch is answered INTERNAL, and the server
// keeps serving.
TEST_F(TransportTest, ThrowingBatchHandlerAnswersEveryMessageInternal) {
  ServerOptions so;
  so.endpoint = "inproc://batched-throw";
  std::atomic<int> calls{0};
  RouterServer* srv = nullptr;
  auto server = RouterServer::StartBatched(ctx_, so, [&](std::vector<Inbound> batch) {
    if (calls.fetch_add(1) == 0) throw std::runtime_error("boom");
    for (const Inbound& in : batch) (void)srv->Send(in.peer, MakeAck(in.msg.request_id(), "ok"));
  });
  ASSERT_TRUE(server.ok());
  srv = server->get();
  auto client = Connect(Plain("inproc://batched-throw"));
  ASSERT_NE(client, nullptr);
  auto failed = client->Call(Heartbeat("job-a", 1), kTimeout);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  ASSERT_TRUE(failed->has_error()) << failed->DebugString();
  EXPECT_EQ(failed->error().code(), v1::ERROR_CODE_INTERNAL);
  EXPECT_NE(failed->error().message().find("boom"), std::string::npos);
  auto ok = client->Call(Heartbeat("job-a", 2), kTimeout);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->has_ack());
}

}  // namespace
}  // namespace crux::protocol
