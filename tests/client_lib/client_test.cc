// The client against a stand-in daemon: a real protocol::RouterServer on loopback TCP (real
// ZeroMQ sockets) whose handler answers like cruxd and can push assignments.
#include "crux/client/client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "crux/protocol/codec.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"

namespace crux::client {
namespace {

using namespace std::chrono_literals;

class FakeDaemon {
 public:
  explicit FakeDaemon(protocol::TransportContext& ctx) : ctx_(ctx) {}
  ~FakeDaemon() { Stop(); }

  void Start(const std::string& endpoint = "tcp://127.0.0.1:*") {
    protocol::ServerOptions o;
    o.endpoint = endpoint;
    auto s = protocol::RouterServer::Start(ctx_, o, [this](protocol::Inbound in) { Handle(in); });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    endpoint_ = server_->endpoint();
  }
  void Stop() {
    if (server_) server_->Stop();
    server_.reset();
  }

  void Push(uint64_t epoch, uint32_t dscp = 26) {
    v1::Envelope e = protocol::NewEnvelope(0);
    auto* a = e.mutable_assignment();
    a->set_job_id("job-a");
    a->set_epoch(epoch);
    a->set_level(1);
    a->set_dscp(dscp);
    a->set_traffic_class(dscp << 2);
    a->set_state(v1::JOB_STATE_SCHEDULED);
    auto* f = a->add_flows();
    f->set_src_nic("host0/nic0");
    f->set_dst_nic("host1/nic0");
    f->set_udp_sport(50000 + static_cast<uint32_t>(epoch));
    (*a->mutable_nccl_env())["NCCL_IB_TC"] = std::to_string(dscp << 2);
    std::string peer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      peer = peer_;
    }
    ASSERT_TRUE(server_->Send(peer, e).ok());
  }

  // Waits until pred() (under the lock) holds, up to `timeout`.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }

  std::string endpoint_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Under mu_:
  std::string peer_;
  int registrations = 0;
  std::vector<v1::ProfileReport> reports;
  std::vector<v1::Heartbeat> heartbeats;
  std::vector<v1::Ack> acks;
  std::vector<v1::EndJob> ends;
  int unknown_job_replies = 0;  // Answer this many heartbeats with UNKNOWN_JOB.
  uint32_t lease_ms = 300;

 private:
  void Handle(const protocol::Inbound& in) {
    v1::Envelope reply;
    bool send = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto& m = in.msg;
      if (m.has_register_job()) {
        peer_ = in.peer;
        reply = protocol::NewEnvelope(m.request_id());
        auto* r = reply.mutable_register_job_reply();
        r->set_job_id(m.register_job().job_id());
        r->set_lease_ms(lease_ms);
        r->set_already_known(registrations > 0);
        ++registrations;
      } else if (m.has_profile_report()) {
        reports.push_back(m.profile_report());
        reply = protocol::MakeAck(m.request_id(), m.profile_report().job_id());
      } else if (m.has_heartbeat()) {
        heartbeats.push_back(m.heartbeat());
        if (unknown_job_replies > 0) {
          --unknown_job_replies;
          reply = protocol::MakeError(m.request_id(), v1::ERROR_CODE_UNKNOWN_JOB,
                                      "heartbeat.job_id: unknown job");
        } else {
          reply = protocol::MakeAck(m.request_id(), m.heartbeat().job_id());
        }
      } else if (m.has_end_job()) {
        ends.push_back(m.end_job());
        reply = protocol::MakeAck(m.request_id(), m.end_job().job_id());
      } else if (m.has_ack()) {
        acks.push_back(m.ack());
        send = false;
      } else {
        send = false;
      }
    }
    cv_.notify_all();
    if (send) (void)server_->Send(in.peer, reply);
  }

  protocol::TransportContext& ctx_;
  std::unique_ptr<protocol::RouterServer> server_;
};

ClientOptions Options(const std::string& endpoint) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.job_id = "job-a";
  o.placement = {{"host0", 2, {}}, {"host1", 2, {}}};
  o.lease_ms = 300;
  o.call_timeout_ms = 300;
  o.reconnect_min_ms = 50;
  o.reconnect_max_ms = 400;
  o.gpu_peak_flops = 100e12;
  return o;
}

template <typename F>
bool Eventually(F f, std::chrono::milliseconds timeout = 5000ms) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return f();
}

void RunIterations(Client& c, PeerId peer, int n) {
  for (int i = 0; i < n; ++i) {
    c.BeginIteration();
    std::this_thread::sleep_for(8ms);
    c.CommStart(peer, 1 << 20);
    std::this_thread::sleep_for(2ms);
    c.CommEnd(peer);
    c.EndIteration();
  }
}

TEST(ClientTest, RegistersReportsAndAppliesAssignments) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Client& client = **c;
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  auto peer = client.AddPeer("host0/nic0", "host1/nic0");
  ASSERT_TRUE(peer.ok());
  EXPECT_EQ(*client.AddPeer("host0/nic0", "host1/nic0"), *peer);  // Same pair, same id.
  EXPECT_EQ(client.AddPeer("bad nic", "x").status().code(), core::StatusCode::kInvalidArgument);

  RunIterations(client, *peer, 10);
  ASSERT_TRUE(d.WaitFor([&] { return !d.reports.empty(); }));
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    const auto& r = d.reports.front();
    EXPECT_EQ(r.job_id(), "job-a");
    EXPECT_TRUE(r.converged());
    EXPECT_GE(r.samples(), 3u);
    EXPECT_LE(r.samples(), 10u);
    // ~10 ms iterations on a loaded machine: sane, not exact.
    EXPECT_GT(r.iteration_period_ns(), 9'000'000u);
    EXPECT_LT(r.iteration_period_ns(), 60'000'000u);
    EXPECT_GT(r.compute_time_ns(), 7'000'000u);
    ASSERT_EQ(r.peers_size(), 1);
    EXPECT_EQ(r.peers(0).local_nic(), "host0/nic0");
    EXPECT_EQ(r.peers(0).remote_nic(), "host1/nic0");
    EXPECT_EQ(r.peers(0).bytes(), 1u << 20);
    // W_j = compute x 100 TFLOP/s x 4 GPUs.
    EXPECT_NEAR(r.flops_per_iteration(), static_cast<double>(r.compute_time_ns()) * 1e-9 * 4e14,
                1e9);
  }
  ASSERT_TRUE(Eventually([&] { return client.LastReportedProfile().has_value(); }));

  std::mutex cb_mu;
  std::vector<uint64_t> seen;
  client.SetAssignmentCallback([&](const Assignment& a) {
    std::lock_guard<std::mutex> lock(cb_mu);
    seen.push_back(a.epoch);
  });
  EXPECT_FALSE(client.CurrentAssignment().has_value());
  d.Push(5);
  auto a = client.WaitForAssignment(0, 5000);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->epoch, 5u);
  EXPECT_EQ(a->dscp, 26u);
  EXPECT_EQ(a->traffic_class, 104u);
  EXPECT_EQ(a->UdpSportFor("host0/nic0", "host1/nic0"), 50005);
  EXPECT_EQ(a->nccl_env.at("NCCL_IB_TC"), "104");
  ASSERT_TRUE(d.WaitFor([&] { return d.acks.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    EXPECT_EQ(d.acks[0].epoch(), 5u);
    EXPECT_TRUE(d.acks[0].ok());
  }
  // An older epoch is acknowledged but not applied.
  d.Push(4, 10);
  ASSERT_TRUE(d.WaitFor([&] { return d.acks.size() == 2; }));
  EXPECT_EQ(client.CurrentAssignment()->epoch, 5u);
  EXPECT_EQ(client.CurrentAssignment()->dscp, 26u);
  EXPECT_EQ(client.Stats().assignments_stale, 1u);
  d.Push(6, 12);
  ASSERT_TRUE(client.WaitForAssignment(5, 5000).has_value());
  EXPECT_EQ(client.CurrentAssignment()->dscp, 12u);
  // The callback runs on the library thread right after the assignment becomes current.
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(cb_mu);
    return seen.size() == 2;
  }));
  {
    std::lock_guard<std::mutex> lock(cb_mu);
    EXPECT_EQ(seen, (std::vector<uint64_t>{5, 6}));
  }
  // Heartbeats every lease / 3 carry the applied epoch.
  ASSERT_TRUE(
      d.WaitFor([&] { return !d.heartbeats.empty() && d.heartbeats.back().applied_epoch() == 6; }));
  ClientStats s = client.Stats();
  EXPECT_TRUE(s.registered);
  EXPECT_EQ(s.registrations, 1u);
  EXPECT_EQ(s.reports_sent, 1u);
  EXPECT_EQ(s.assignments_applied, 2u);
  EXPECT_EQ(s.lease_ms, 300u);
  EXPECT_EQ(s.events_dropped, 0u);
  client.Close();
  std::lock_guard<std::mutex> lock(d.mu_);
  ASSERT_EQ(d.ends.size(), 1u);
  EXPECT_EQ(d.ends[0].job_id(), "job-a");
}

TEST(ClientTest, FailStaticThenReconnectsAndReRegisters) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  const std::string endpoint = d.endpoint_;
  auto c = Client::Start(Options(endpoint));
  ASSERT_TRUE(c.ok());
  Client& client = **c;
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  d.Push(2);
  ASSERT_TRUE(client.WaitForAssignment(0, 5000).has_value());

  d.Stop();  // The daemon goes away.
  ASSERT_TRUE(Eventually([&] { return !client.Stats().registered; }));
  // Fail-static: the assignment stays; the hot path neither blocks nor slows down.
  EXPECT_EQ(client.CurrentAssignment()->epoch, 2u);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000; ++i) {
    client.BeginIteration();
    client.EndIteration();
  }
  auto spent = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(spent, 200ms);
  EXPECT_FALSE(client.Stats().last_error.empty());

  FakeDaemon back(ctx);
  back.Start(endpoint);  // Same address, as a restarted cruxd.
  ASSERT_TRUE(back.WaitFor([&] { return back.registrations >= 1; }, 10000ms));
  ASSERT_TRUE(Eventually([&] { return client.Stats().registered; }));
  EXPECT_GE(client.Stats().registrations, 2u);
  // The restarted daemon can push again; epochs keep counting.
  back.Push(3);
  ASSERT_TRUE(client.WaitForAssignment(2, 5000).has_value());
}

TEST(ClientTest, UnknownJobTriggersImmediateReRegistration) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    d.unknown_job_replies = 1;
  }
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations >= 2; }));
  EXPECT_TRUE(Eventually([&] { return (*c)->Stats().registrations >= 2; }));
}

TEST(ClientTest, EnforcementFailureIsReportedInTheAck) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok());
  (*c)->SetEnforcer([](const Assignment& a) {
    return core::FailedPreconditionError("qp 0x11: cannot set traffic class " +
                                         std::to_string(a.traffic_class));
  });
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  d.Push(9);
  ASSERT_TRUE(d.WaitFor([&] { return !d.acks.empty(); }));
  std::lock_guard<std::mutex> lock(d.mu_);
  EXPECT_FALSE(d.acks[0].ok());
  EXPECT_NE(d.acks[0].error().find("cannot set traffic class 104"), std::string::npos);
  EXPECT_EQ((*c)->CurrentAssignment()->epoch, 9u);
}

TEST(ClientTest, DetectsThePeriodFromTransfersAlone) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok());
  Client& client = **c;
  auto peer = client.AddPeer("host0/nic0", "host1/nic0");
  ASSERT_TRUE(peer.ok());
  // No iteration marks: bursts of 3 transfers (as from a NCCL profiler) every 50 ms, with
  // explicit timestamps; more arrive after the first detection (two must agree).
  int64_t t = Client::NowNs();
  auto feed = [&](int iterations) {
    for (int i = 0; i < iterations; ++i) {
      for (int b = 0; b < 3; ++b) {
        int64_t s = t + b * 2'000'000;
        client.RecordComm(*peer, 1000, s, s + 1'000'000);
      }
      t += 50'000'000;
    }
  };
  feed(8);
  std::this_thread::sleep_for(150ms);
  feed(4);
  ASSERT_TRUE(d.WaitFor([&] { return !d.reports.empty(); }));
  std::lock_guard<std::mutex> lock(d.mu_);
  const auto& r = d.reports.front();
  EXPECT_NEAR(static_cast<double>(r.iteration_period_ns()), 50e6, 1e6);
  EXPECT_EQ(r.bytes_per_iteration(), 3000u);
  ASSERT_EQ(r.peers_size(), 1);
  EXPECT_EQ(r.peers(0).bytes(), 3000u);
  // 50 ms - 3 ms of transfers (0-1, 2-3, 4-5 ms).
  EXPECT_NEAR(static_cast<double>(r.compute_time_ns()), 47e6, 1e6);
  EXPECT_TRUE(r.converged());
}

TEST(ClientTest, RingOverflowDropsAndCounts) {
  ClientOptions o = Options("tcp://127.0.0.1:1");  // Nothing listens.
  o.ring_capacity = 16;
  o.poll_interval_ms = 1000;  // The consumer is slow: the ring fills up.
  auto c = Client::Start(o);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 1000; ++i) (*c)->BeginIteration();
  EXPECT_GT((*c)->Stats().events_dropped, 0u);
}

}  // namespace
}  // namespace crux::client
