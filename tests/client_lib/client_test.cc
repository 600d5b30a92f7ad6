// The client (its driver thread, the session and the profiler together) against a stand-in
// daemon: a real protocol::RouterServer on loopback TCP (real ZeroMQ sockets) whose handler
// answers like cruxd, can push assignments and can refuse requests on demand.
//
// No sleeps and no assertions on durations: the tests wait for conditions (the daemon's view
// under its lock, Client::WaitForStats, WaitForAssignment), each wait bounded by a generous
// timeout that only matters when something is broken. The protocol timing itself (heartbeat
// schedule, backoff, timeouts) is covered with scripted time in session_test.cc.
#include "crux/client/client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "crux/protocol/codec.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"

namespace crux::client {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kWaitMs = 10000;  // Upper bound of every wait (a failure, not a pace).
constexpr uint64_t kStateA = 0xA11CE;
constexpr uint64_t kStateB = 0xB0B;

class FakeDaemon {
 public:
  explicit FakeDaemon(protocol::TransportContext& ctx) : ctx_(ctx) {}
  ~FakeDaemon() { Stop(); }

  void Start(const std::string& endpoint = "tcp://127.0.0.1:*") {
    protocol::ServerOptions o;
    o.endpoint = endpoint;
    // Held until server_ is set: a client already running (a restarted daemon at the same
    // address) has messages queued that the server thread hands to Handle() as soon as Start
    // binds, and Handle() replies through server_. Handle() takes mu_ before it reads server_.
    std::lock_guard<std::mutex> lock(mu_);
    auto s = protocol::RouterServer::Start(ctx_, o, [this](protocol::Inbound in) { Handle(in); });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    endpoint_ = server_->endpoint();
  }
  void Stop() {
    if (server_) server_->Stop();
    server_.reset();
  }

  void Push(uint64_t epoch, uint32_t dscp = 26, uint64_t state_id = kStateA) {
    v1::Envelope e = protocol::NewEnvelope(0);
    auto* a = e.mutable_assignment();
    a->set_job_id("job-a");
    a->set_epoch(epoch);
    a->set_state_id(state_id);
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

  // Waits until pred() (under the lock) holds.
  bool WaitFor(const std::function<bool()>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs), pred);
  }

  std::string endpoint_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Under mu_:
  std::string peer_;
  std::vector<std::string> register_peers;  // Routing id of each RegisterJob.
  int registrations = 0;
  std::vector<v1::ProfileReport> reports;
  std::vector<v1::Heartbeat> heartbeats;
  std::vector<v1::Ack> acks;
  std::vector<v1::EndJob> ends;
  int unknown_job_replies = 0;        // Answer this many heartbeats with UNKNOWN_JOB.
  int permission_denied_replies = 0;  // ... with PERMISSION_DENIED (bound elsewhere).
  int quota_refusals = 0;             // Refuse this many registrations (RESOURCE_EXHAUSTED).
  uint32_t lease_ms = 300;

 private:
  void Handle(const protocol::Inbound& in) {
    v1::Envelope reply;
    bool send = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto& m = in.msg;
      if (m.has_register_job()) {
        register_peers.push_back(in.peer);
        if (quota_refusals > 0) {
          --quota_refusals;
          reply = protocol::MakeError(m.request_id(), v1::ERROR_CODE_RESOURCE_EXHAUSTED,
                                      "register_job: connection quota reached (1 job)");
        } else {
          peer_ = in.peer;
          reply = protocol::NewEnvelope(m.request_id());
          auto* r = reply.mutable_register_job_reply();
          r->set_job_id(m.register_job().job_id());
          r->set_lease_ms(lease_ms);
          r->set_already_known(registrations > 0);
          ++registrations;
        }
      } else if (m.has_profile_report()) {
        reports.push_back(m.profile_report());
        reply = protocol::MakeAck(m.request_id(), m.profile_report().job_id());
      } else if (m.has_heartbeat()) {
        heartbeats.push_back(m.heartbeat());
        if (unknown_job_replies > 0) {
          --unknown_job_replies;
          reply = protocol::MakeError(m.request_id(), v1::ERROR_CODE_UNKNOWN_JOB,
                                      "heartbeat.job_id: unknown job");
        } else if (permission_denied_replies > 0) {
          --permission_denied_replies;
          reply = protocol::MakeError(m.request_id(), v1::ERROR_CODE_PERMISSION_DENIED,
                                      "heartbeat: job \"job-a\" is bound to another connection");
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
  // Set by Start() under mu_ (the server thread's Handle() reads it after taking mu_); reset by
  // Stop() after the server thread is joined.
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

bool WaitStats(const Client& c, const std::function<bool(const ClientStats&)>& pred) {
  return c.WaitForStats(pred, kWaitMs);
}

// Marked iterations back to back (real timestamps, whatever they are: the numbers are checked
// with scripted timestamps in profiler_test.cc).
void RunIterations(Client& c, PeerId peer, int n) {
  for (int i = 0; i < n; ++i) {
    c.BeginIteration();
    c.CommStart(peer, 1 << 20);
    c.CommEnd(peer);
    c.EndIteration();
  }
}

bool IsRandomRoutingId(const std::string& id) {
  if (id.size() != 33 || id[0] != 'r') return false;
  for (size_t i = 1; i < id.size(); ++i) {
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
  }
  return true;
}

TEST(ClientTest, RegistersReportsAndAppliesAssignments) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Client& client = **c;
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.registered; }));
  auto peer = client.AddPeer("host0/nic0", "host1/nic0");
  ASSERT_TRUE(peer.ok());
  EXPECT_EQ(*client.AddPeer("host0/nic0", "host1/nic0"), *peer);  // Same pair, same id.
  EXPECT_EQ(client.AddPeer("bad nic", "x").status().code(), core::StatusCode::kInvalidArgument);

  RunIterations(client, *peer, 10);  // Converged at 10 iterations at the latest.
  ASSERT_TRUE(d.WaitFor([&] { return !d.reports.empty(); }));
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    const auto& r = d.reports.front();
    EXPECT_EQ(r.job_id(), "job-a");
    EXPECT_TRUE(r.converged());
    EXPECT_GE(r.samples(), 3u);
    EXPECT_LE(r.samples(), 10u);
    EXPECT_GT(r.iteration_period_ns(), 0u);
    EXPECT_GT(r.compute_time_ns(), 0u);
    ASSERT_EQ(r.peers_size(), 1);
    EXPECT_EQ(r.peers(0).local_nic(), "host0/nic0");
    EXPECT_EQ(r.peers(0).remote_nic(), "host1/nic0");
    EXPECT_EQ(r.peers(0).bytes(), 1u << 20);
    // W_j = compute x 100 TFLOP/s x 4 GPUs.
    const double expected = static_cast<double>(r.compute_time_ns()) * 1e-9 * 4e14;
    EXPECT_NEAR(r.flops_per_iteration(), expected, 1e-9 * expected + 1);
  }
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.reports_sent == 1; }));
  ASSERT_TRUE(client.LastReportedProfile().has_value());
  EXPECT_EQ(client.LastReportedProfile()->peers.at(0).bytes, 1u << 20);

  std::mutex cb_mu;
  std::condition_variable cb_cv;
  std::vector<uint64_t> seen;
  client.SetAssignmentCallback([&](const Assignment& a) {
    std::lock_guard<std::mutex> lock(cb_mu);
    seen.push_back(a.epoch);
    cb_cv.notify_all();
  });
  EXPECT_FALSE(client.CurrentAssignment().has_value());
  d.Push(5);
  auto a = client.WaitForAssignment(0, kWaitMs);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->epoch, 5u);
  EXPECT_EQ(a->state_id, kStateA);
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
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.assignments_stale == 1; }));
  d.Push(6, 12);
  ASSERT_TRUE(client.WaitForAssignment(5, kWaitMs).has_value());
  EXPECT_EQ(client.CurrentAssignment()->dscp, 12u);
  // The callback runs on the library thread right after the assignment becomes current.
  {
    std::unique_lock<std::mutex> lock(cb_mu);
    ASSERT_TRUE(
        cb_cv.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] { return seen.size() == 2; }));
    EXPECT_EQ(seen, (std::vector<uint64_t>{5, 6}));
  }
  // Heartbeats (every lease / 3) carry the applied epoch and state id.
  ASSERT_TRUE(d.WaitFor([&] {
    return !d.heartbeats.empty() && d.heartbeats.back().applied_epoch() == 6 &&
           d.heartbeats.back().applied_state_id() == kStateA;
  }));
  ClientStats s = client.Stats();
  EXPECT_TRUE(s.registered);
  EXPECT_EQ(s.registrations, 1u);
  EXPECT_EQ(s.reports_sent, 1u);
  EXPECT_EQ(s.assignments_applied, 2u);
  EXPECT_EQ(s.lease_ms, 300u);
  EXPECT_EQ(s.events_dropped, 0u);
  EXPECT_EQ(s.iterations, 10u);
  client.Close();
  std::lock_guard<std::mutex> lock(d.mu_);
  ASSERT_EQ(d.ends.size(), 1u);
  EXPECT_EQ(d.ends[0].job_id(), "job-a");
}

TEST(ClientTest, FailStaticThenReconnectsWithAFreshRandomRoutingId) {
  protocol::TransportContext ctx;
  // The first daemon has a context of its own: destroying it waits until its listening socket
  // is closed, so the restarted daemon can bind the same port at once.
  auto first_ctx = std::make_unique<protocol::TransportContext>();
  FakeDaemon d(*first_ctx);
  d.Start();
  const std::string endpoint = d.endpoint_;
  auto c = Client::Start(Options(endpoint));
  ASSERT_TRUE(c.ok());
  Client& client = **c;
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  std::string routing_id;
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    routing_id = d.register_peers.at(0);
  }
  // Not derived from the job id: random and unguessable.
  EXPECT_NE(routing_id, "job:job-a");
  EXPECT_TRUE(IsRandomRoutingId(routing_id)) << routing_id;
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.registered; }));
  d.Push(2);
  ASSERT_TRUE(client.WaitForAssignment(0, kWaitMs).has_value());

  d.Stop();  // The daemon goes away: the next heartbeat gets no reply.
  first_ctx.reset();
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return !s.registered; }));
  EXPECT_FALSE(client.Stats().last_error.empty());
  // Fail-static: the assignment stays, and the job keeps being measured.
  EXPECT_EQ(client.CurrentAssignment()->epoch, 2u);
  auto peer = client.AddPeer("host0/nic0", "host1/nic0");
  ASSERT_TRUE(peer.ok());
  RunIterations(client, *peer, 5);
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.iterations == 5; }));
  EXPECT_FALSE(client.Stats().registered);

  FakeDaemon back(ctx);
  back.Start(endpoint);  // Same address, as a restarted cruxd.
  ASSERT_FALSE(back.endpoint_.empty());
  ASSERT_TRUE(back.WaitFor([&] { return back.registrations >= 1; }));
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.registered; }));
  EXPECT_GE(client.Stats().registrations, 2u);
  {
    // The dropped connection made the socket reconnect with a fresh random routing id (a CURVE
    // cruxd without ROUTER hand-over would park the old one while it holds a half-open
    // connection of that id): the job re-registered from the new id.
    std::lock_guard<std::mutex> lock(back.mu_);
    for (const auto& p : back.register_peers) {
      EXPECT_NE(p, routing_id);
      EXPECT_TRUE(IsRandomRoutingId(p)) << p;
    }
  }
  // The restarted daemon can push again; epochs keep counting.
  back.Push(3);
  ASSERT_TRUE(client.WaitForAssignment(2, kWaitMs).has_value());
}

TEST(ClientTest, TwoClientsOfOneJobGetDistinctRoutingIds) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  ClientOptions o = Options(d.endpoint_);
  o.end_job_on_close = false;
  auto c1 = Client::Start(o);
  auto c2 = Client::Start(o);
  ASSERT_TRUE(c1.ok() && c2.ok());
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations >= 2; }));
  std::lock_guard<std::mutex> lock(d.mu_);
  EXPECT_NE(d.register_peers[0], d.register_peers[1]);
}

TEST(ClientTest, UnknownJobTriggersReRegistration) {
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
  EXPECT_TRUE(WaitStats(**c, [](const ClientStats& s) { return s.registrations >= 2; }));
}

TEST(ClientTest, PermissionDeniedReRegistersFromItsOwnConnection) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    d.permission_denied_replies = 1;
  }
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok());
  // Denied heartbeat -> the same idempotent RegisterJob from the same connection -> heartbeats
  // accepted again.
  ASSERT_TRUE(WaitStats(**c, [](const ClientStats& s) {
    return s.rebinds == 1 && s.registered && s.registrations == 2 && s.heartbeats_sent >= 1;
  }));
  EXPECT_NE((*c)->Stats().last_error.find("bound to another connection"), std::string::npos);
  std::lock_guard<std::mutex> lock(d.mu_);
  ASSERT_EQ(d.register_peers.size(), 2u);
  EXPECT_EQ(d.register_peers[0], d.register_peers[1]);
}

TEST(ClientTest, QuotaRefusedRegistrationIsRetriedAndShown) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  {
    std::lock_guard<std::mutex> lock(d.mu_);
    d.quota_refusals = 2;
  }
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(WaitStats(**c, [](const ClientStats& s) { return s.quota_refusals == 2; }));
  EXPECT_NE((*c)->Stats().last_error.find("RESOURCE_EXHAUSTED"), std::string::npos);
  ASSERT_TRUE(WaitStats(**c, [](const ClientStats& s) { return s.registered; }));
  EXPECT_EQ((*c)->Stats().register_failures, 2u);
}

TEST(ClientTest, StateResetAppliesTheNewStateAndWaitsDoNotHang) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  auto c = Client::Start(Options(d.endpoint_));
  ASSERT_TRUE(c.ok());
  Client& client = **c;
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  d.Push(5, 26, kStateA);
  ASSERT_TRUE(client.WaitForAssignment(0, kWaitMs).has_value());

  // A waiter for "something newer than epoch 5" while the operator resets cruxd's state.
  auto waiter =
      std::async(std::launch::async, [&] { return client.WaitForAssignment(5, kWaitMs); });
  d.Push(1, 14, kStateB);  // Epochs restart at 1 under a new state id.
  std::optional<Assignment> woke = waiter.get();
  ASSERT_TRUE(woke.has_value());
  EXPECT_EQ(woke->epoch, 1u);
  EXPECT_EQ(woke->state_id, kStateB);
  EXPECT_EQ(woke->dscp, 14u);
  EXPECT_EQ(client.CurrentAssignment()->state_id, kStateB);
  EXPECT_EQ(client.Stats().state_resets, 1u);
  // Old-style wait with the pre-reset epoch: returns at once, no hang.
  auto again = client.WaitForAssignment(5, 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->state_id, kStateB);
  // The exact overload: nothing newer than (1, B) yet; (5, A) is older.
  EXPECT_FALSE(client.WaitForAssignment(1, kStateB, 0).has_value());
  EXPECT_TRUE(client.WaitForAssignment(5, kStateA, 0).has_value());
  // Heartbeats report the new pair, so cruxd can tell the job applied its current state.
  ASSERT_TRUE(d.WaitFor([&] {
    return !d.heartbeats.empty() && d.heartbeats.back().applied_epoch() == 1 &&
           d.heartbeats.back().applied_state_id() == kStateB;
  }));
  d.Push(2, 16, kStateB);
  auto next = client.WaitForAssignment(1, kStateB, kWaitMs);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->epoch, 2u);
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
  // No iteration marks: bursts of 3 transfers (as from a NCCL profiler) every 50 ms with explicit
  // timestamps. Detection is paced by these timestamps, so feeding them all at once works.
  int64_t t = Client::NowNs();
  for (int i = 0; i < 16; ++i) {
    for (int b = 0; b < 3; ++b) {
      int64_t s = t + b * 2'000'000;
      client.RecordComm(*peer, 1000, s, s + 1'000'000);
    }
    t += 50'000'000;
  }
  ASSERT_TRUE(d.WaitFor([&] { return !d.reports.empty(); }));
  std::lock_guard<std::mutex> lock(d.mu_);
  const auto& r = d.reports.front();
  EXPECT_NEAR(static_cast<double>(r.iteration_period_ns()), 50e6, 1e6);
  EXPECT_EQ(r.bytes_per_iteration(), 3000u);
  ASSERT_EQ(r.peers_size(), 1);
  EXPECT_EQ(r.peers(0).local_nic(), "host0/nic0");
  EXPECT_EQ(r.peers(0).bytes(), 3000u);
  // 50 ms - 3 ms of transfers (0-1, 2-3, 4-5 ms).
  EXPECT_NEAR(static_cast<double>(r.compute_time_ns()), 47e6, 1e6);
  EXPECT_TRUE(r.converged());
}

TEST(ClientTest, RingOverflowDropsAndCounts) {
  protocol::TransportContext ctx;
  FakeDaemon d(ctx);
  d.Start();
  ClientOptions o = Options(d.endpoint_);
  o.ring_capacity = 16;
  auto c = Client::Start(o);
  ASSERT_TRUE(c.ok());
  Client& client = **c;
  // Hold the background thread (the ring's only consumer) inside the enforcer.
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  client.SetEnforcer([&, released](const Assignment&) {
    entered.set_value();
    released.wait();
    return core::Status::Ok();
  });
  ASSERT_TRUE(d.WaitFor([&] { return d.registrations == 1; }));
  d.Push(1);
  entered.get_future().wait();
  for (int i = 0; i < 1000; ++i) client.BeginIteration();  // 16 fit, the rest is dropped.
  EXPECT_EQ(client.Stats().events_dropped, 1000u - 16u);
  release.set_value();
  // The 16 buffered begins are 15 iterations (each begin closes the previous one).
  ASSERT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.iterations == 15; }));
  client.SetEnforcer(nullptr);
}

TEST(ClientTest, WaitForStatsReturnsFalseWhenClosed) {
  ClientOptions o = Options("tcp://127.0.0.1:1");  // Nothing listens: never registered.
  o.end_job_on_close = false;
  auto c = Client::Start(o);
  ASSERT_TRUE(c.ok());
  Client& client = **c;
  auto waiter = std::async(std::launch::async, [&] {
    return client.WaitForStats([](const ClientStats& s) { return s.registered; }, kWaitMs);
  });
  EXPECT_TRUE(WaitStats(client, [](const ClientStats& s) { return s.register_failures >= 1; }));
  client.Close();
  EXPECT_FALSE(waiter.get());
  EXPECT_FALSE(client.WaitForAssignment(0, kWaitMs).has_value());  // Closed: no wait.
}

}  // namespace
}  // namespace crux::client
