// DealerClient following a daemon across endpoints (issue #31 item 6): with real sockets, two
// ROUTER servers standing for an HA leader and the next one (only one bound at a time, as only a
// leader binds), the client reports the lost connection and the new one
// (TakeConnectionChange, raw_monitor_socket), a Call waiting on a dropped connection fails at
// once, and a peer that stops answering (paused: its TCP connection stays open) is found by the
// ZMTP heartbeat.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/server.h"
#include "crux/protocol/transport_context.h"
#include "test_util.h"

namespace crux::protocol {
namespace {

using core::Duration;
using testing::WaitFor;

// A loopback TCP port nobody listens on (bound once, then released).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string Tcp(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

v1::Envelope Heartbeat() {
  v1::Envelope m = NewEnvelope();
  m.mutable_heartbeat()->set_job_id("job-a");
  m.mutable_heartbeat()->set_seq(1);
  return m;
}

// Answers requests with an Ack (unless `silent`); records the peers it saw. The handler runs on
// the server's thread: it reaches the server through `live_` (under mu_, set once Start returned,
// cleared before Stop destroys it - whose destructor joins that thread), never through server_.
class Daemon {
 public:
  explicit Daemon(TransportContext& ctx, int port, bool silent = false) : silent_(silent) {
    ServerOptions so;
    so.endpoint = Tcp(port);
    std::unique_lock<std::mutex> hold(mu_);  // A request before live_ is set waits for it.
    auto s = RouterServer::Start(ctx, so, [this](Inbound in) {
      RouterServer* server = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        peers_.insert(in.peer);
        ++requests_;
        server = live_;
      }
      if (server != nullptr && !silent_ && in.msg.request_id() != 0) {
        (void)server->Send(in.peer, MakeAck(in.msg.request_id(), "ok"));
      }
    });
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) {
      server_ = std::move(s).value();
      live_ = server_.get();
    }
  }
  ~Daemon() { Stop(); }  // The server (its thread) goes before the members its handler uses.
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  bool ok() const { return server_ != nullptr; }
  std::set<std::string> peers() {
    std::lock_guard<std::mutex> lock(mu_);
    return peers_;
  }
  int requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  void Stop() {  // Closes the socket: its peers see a TCP close.
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_ = nullptr;
    }
    server_.reset();
  }

 private:
  const bool silent_;
  std::unique_ptr<RouterServer> server_;
  std::mutex mu_;
  RouterServer* live_ = nullptr;  // Guarded by mu_.
  std::set<std::string> peers_;
  int requests_ = 0;
};

// A TCP relay that can freeze: it stops reading and writing but keeps every connection open, as
// a SIGSTOPped daemon's kernel does (the peer sees no close, only silence).
class FreezingRelay {
 public:
  FreezingRelay(int listen_port, int server_port) : server_port_(server_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(listen_port));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      ADD_FAILURE() << "relay: cannot listen on " << listen_port;
      return;
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~FreezingRelay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  void Freeze() { frozen_ = true; }

 private:
  void Run() {
    while (!stop_) {
      if (frozen_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      std::vector<pollfd> p = {{listen_fd_, POLLIN, 0}};
      for (int fd : fds_) p.push_back({fd, POLLIN, 0});
      if (::poll(p.data(), p.size(), 10) <= 0) continue;
      if (p[0].revents != 0) {
        const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<uint16_t>(server_port_));
        if (c >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
          fds_.push_back(c);
          fds_.push_back(s);
        } else {
          if (c >= 0) ::close(c);
          ::close(s);
        }
        continue;
      }
      // fds_ holds pairs: client side at even indexes, server side next to it.
      for (size_t i = 0; i + 1 < p.size(); ++i) {
        if (p[i + 1].revents == 0) continue;
        const int to = fds_[i % 2 == 0 ? i + 1 : i - 1];
        char buf[65536];
        const ssize_t n = ::read(fds_[i], buf, sizeof(buf));
        if (n > 0) (void)!::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
  }

  const int server_port_;
  int listen_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::vector<int> fds_;  // Relay thread only (then the destructor).
};

class FollowTest : public ::testing::Test {
 protected:
  std::unique_ptr<DealerClient> Connect(const std::string& endpoints) {
    ClientOptions co;
    co.endpoint = endpoints;
    auto c = DealerClient::Connect(ctx_, co);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  // Polls the client's monitor socket, as an event loop would, and collects the changes until
  // `want` holds (or the generous deadline passes). Returns what was collected.
  static ConnectionChange WaitChange(DealerClient& client,
                                     const std::function<bool(const ConnectionChange&)>& want) {
    ConnectionChange seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!want(seen) && std::chrono::steady_clock::now() < deadline) {
      zmq_pollitem_t item{client.raw_monitor_socket(), 0, ZMQ_POLLIN, 0};
      (void)zmq_poll(&item, 1, 100);
      auto c = client.TakeConnectionChange();
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      if (!c.ok()) break;
      seen.lost = seen.lost || c->lost;
      seen.connected = c->connected || (seen.connected && !c->lost);
    }
    return seen;
  }
  static bool Answered(DealerClient& client) {
    auto r = client.Call(Heartbeat(), Duration::Millis(5000));
    return r.ok() && r->has_ack();
  }

  TransportContext ctx_;
};

TEST_F(FollowTest, ReportsTheLostLeaderAndTheNextOneAsSoonAsItBinds) {
  const int port_a = FreePort();
  const int port_b = FreePort();
  ASSERT_NE(port_a, port_b);
  auto a = std::make_unique<Daemon>(ctx_, port_a);
  ASSERT_TRUE(a->ok());
  auto client = Connect(Tcp(port_a) + "," + Tcp(port_b));
  ASSERT_NE(client, nullptr);

  // The first connection is reported (the owner announces itself on it).
  ConnectionChange c = WaitChange(*client, [](const ConnectionChange& s) { return s.connected; });
  EXPECT_TRUE(c.connected);
  EXPECT_FALSE(c.lost);
  ASSERT_TRUE(Answered(*client));
  EXPECT_EQ(client->counters().connects, 1u);
  const std::string first_id = client->routing_id();
  EXPECT_EQ(a->peers(), std::set<std::string>{first_id});

  // The leader goes away: lost, and nothing connected (b is not bound yet).
  a->Stop();
  c = WaitChange(*client, [](const ConnectionChange& s) { return s.lost; });
  EXPECT_TRUE(c.lost);
  EXPECT_FALSE(c.connected);
  EXPECT_EQ(client->counters().drops, 1u);
  auto none = client->TakeConnectionChange();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->lost || none->connected) << "a change is reported once";

  // The next leader binds: connected, with a fresh routing id that it answers.
  Daemon b(ctx_, port_b);
  ASSERT_TRUE(b.ok());
  c = WaitChange(*client, [](const ConnectionChange& s) { return s.connected; });
  EXPECT_TRUE(c.connected);
  EXPECT_FALSE(c.lost);
  ASSERT_TRUE(Answered(*client)) << "a send right after `connected` goes to the new leader";
  EXPECT_EQ(client->counters().connects, 2u);
  EXPECT_EQ(client->counters().new_routing_ids, 1u);
  EXPECT_NE(client->routing_id(), first_id);
  EXPECT_EQ(b.peers(), std::set<std::string>{client->routing_id()});
}

// Two daemons had the endpoint bound (a deposed leader woke up long enough to accept, then
// exits): the drop beside a working connection is no change for the owner; the connection and
// the routing id stay.
TEST_F(FollowTest, ADropBesideAWorkingConnectionKeepsItAndTheRoutingId) {
  const int port_a = FreePort();
  const int port_b = FreePort();
  auto a = std::make_unique<Daemon>(ctx_, port_a);
  Daemon b(ctx_, port_b);
  ASSERT_TRUE(a->ok() && b.ok());
  auto client = Connect(Tcp(port_a) + "," + Tcp(port_b));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitFor(
      [&] {
        (void)client->TakeConnectionChange();
        return client->counters().connects == 2;
      },
      std::chrono::milliseconds(20000)));
  const std::string id = client->routing_id();
  a->Stop();
  ConnectionChange seen;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto c = client->TakeConnectionChange();
        seen.lost = seen.lost || (c.ok() && c->lost);
        seen.connected = seen.connected || (c.ok() && c->connected);
        return client->counters().drops == 1;
      },
      std::chrono::milliseconds(20000)));
  EXPECT_FALSE(seen.lost || seen.connected);
  EXPECT_EQ(client->counters().new_routing_ids, 0u);
  EXPECT_EQ(client->routing_id(), id);
  // b answers on the same routing id. (A request sent in the instant a's pipe was being torn
  // down is lost like any on a dropped connection: a call or two may time out.)
  bool answered = false;
  for (int i = 0; i < 3 && !answered; ++i) {
    auto r = client->Call(Heartbeat(), Duration::Millis(2000));
    answered = r.ok() && r->has_ack();
  }
  EXPECT_TRUE(answered);
  EXPECT_EQ(b.peers(), std::set<std::string>{id});
}

TEST_F(FollowTest, ACallWaitingOnADroppedConnectionFailsAtOnce) {
  const int port = FreePort();
  auto silent = std::make_unique<Daemon>(ctx_, port, /*silent=*/true);
  ASSERT_TRUE(silent->ok());
  auto client = Connect(Tcp(port) + "," + Tcp(FreePort()));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitChange(*client, [](const ConnectionChange& s) { return s.connected; }).connected);
  // The daemon takes the request and dies without answering; the call does not wait out its
  // (long) timeout.
  std::thread killer([&] {
    WaitFor([&] { return silent->requests() == 1; }, std::chrono::milliseconds(20000));
    silent->Stop();
  });
  auto r = client->Call(Heartbeat(), Duration::Millis(600000));
  killer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("lost"), std::string::npos) << r.status().ToString();
  auto c = client->TakeConnectionChange();
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->lost) << "the owner learns of it too";
}

TEST_F(FollowTest, APeerThatStopsAnsweringIsFoundByTheHeartbeat) {
  const int relay_port = FreePort();
  const int daemon_port = FreePort();
  Daemon d(ctx_, daemon_port);
  ASSERT_TRUE(d.ok());
  FreezingRelay relay(relay_port, daemon_port);
  auto client = Connect(Tcp(relay_port) + "," + Tcp(FreePort()));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitChange(*client, [](const ConnectionChange& s) { return s.connected; }).connected);
  ASSERT_TRUE(Answered(*client));
  // Paused: the TCP connection stays open, nothing comes back. The ZMTP heartbeat (PING every
  // kFollowHeartbeatIvl, kFollowHeartbeatTimeout without traffic) drops it.
  relay.Freeze();
  const ConnectionChange c = WaitChange(*client, [](const ConnectionChange& s) { return s.lost; });
  EXPECT_TRUE(c.lost);
  EXPECT_EQ(client->counters().drops, 1u);
}

TEST_F(FollowTest, ASingleEndpointReportsItsConnectionsToo) {
  const int port = FreePort();
  auto d = std::make_unique<Daemon>(ctx_, port);
  ASSERT_TRUE(d->ok());
  auto client = Connect(Tcp(port));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(Answered(*client));
  EXPECT_TRUE(WaitChange(*client, [](const ConnectionChange& s) { return s.connected; }).connected);
  d->Stop();
  EXPECT_TRUE(WaitChange(*client, [](const ConnectionChange& s) { return s.lost; }).lost);
  d = std::make_unique<Daemon>(ctx_, port);  // Restarted on the same endpoint.
  ASSERT_TRUE(d->ok());
  EXPECT_TRUE(WaitChange(*client, [](const ConnectionChange& s) { return s.connected; }).connected);
  EXPECT_TRUE(Answered(*client));
}

}  // namespace
}  // namespace crux::protocol
