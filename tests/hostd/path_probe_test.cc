// crux-hostd's UDP path probes (path_probe.h) on loopback: the header, the responder (echoes,
// garbage counted and not answered), rounds (all received, all lost without a responder, the
// source port seen by the responder, per-target errors) and the HostProbe over pin tables.
// Network namespaces (a real lossy path) need root and are not used here. No assertion depends
// on timing: waits are generous deadlines with polling, and RTTs are only checked for order.
#include "crux/hostd/path_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../system/process_util.h"
#include "crux/hostd/config.h"

namespace crux::hostd {
namespace {

constexpr auto kWait = std::chrono::seconds(10);

// A UDP socket of `family` bound to loopback:port (0: ephemeral); -1 when it cannot be.
int LoopbackSocket(int family, uint16_t port = 0) {
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

uint16_t PortOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

// A UDP port that was free on every address a moment ago.
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const uint16_t port = PortOf(fd);
  ::close(fd);
  return port;
}

bool HaveIpv6Loopback() {
  const int fd = LoopbackSocket(AF_INET6);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

void SendTo(int fd, const std::string& bytes, int family, uint16_t port) {
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(
        ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a),
        static_cast<ssize_t>(bytes.size()));
  } else {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    ASSERT_EQ(
        ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a),
        static_cast<ssize_t>(bytes.size()));
  }
}

// The next datagram on `fd` within kWait ("" if none came).
std::string Receive(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kWait).count())) <= 0) return "";
  char buf[2048];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n < 0 ? "" : std::string(buf, n);
}

// The responder answers on its own thread: poll what it shows (the shared test helper).
bool WaitFor(const std::function<bool()>& done) {
  return system_test::WaitUntil(done, std::chrono::duration_cast<std::chrono::milliseconds>(kWait),
                                std::chrono::milliseconds(5));
}

TEST(ProbeHeaderTest, RoundTripAndRefusals) {
  const ProbeHeader h{kProbeReply, 0x0102030405060708ull, 42};
  const std::string bytes = EncodeProbeHeader(h);
  ASSERT_EQ(bytes.size(), kProbeHeaderBytes);
  EXPECT_EQ(bytes.substr(0, 4), "CRXP");
  auto d = DecodeProbeHeader(bytes);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, h);
  EXPECT_FALSE(DecodeProbeHeader("").ok());
  EXPECT_FALSE(DecodeProbeHeader(bytes.substr(0, 23)).ok());
  EXPECT_FALSE(DecodeProbeHeader(bytes + "x").ok());
  for (size_t at : {0u, 4u, 5u, 6u}) {  // Magic, version, kind, reserved.
    std::string bad = bytes;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    EXPECT_FALSE(DecodeProbeHeader(bad).ok()) << "byte " << at;
  }
}

void ExpectEchoes(int family, const std::string& address) {
  auto r = UdpProbeResponder::Start({address}, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE((*r)->port(), 0);
  const int fd = LoopbackSocket(family);
  ASSERT_GE(fd, 0);
  const ProbeHeader req{kProbeRequest, 7, 1234};
  SendTo(fd, EncodeProbeHeader(req), family, (*r)->port());
  auto reply = DecodeProbeHeader(Receive(fd));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(*reply, (ProbeHeader{kProbeReply, 7, 1234}));
  EXPECT_TRUE(WaitFor([&] { return (*r)->stats().echoed == 1; }));
  EXPECT_EQ((*r)->stats().bad, 0u);
  ::close(fd);
}

TEST(UdpProbeResponderTest, EchoesIpv4) { ExpectEchoes(AF_INET, "127.0.0.1"); }

TEST(UdpProbeResponderTest, EchoesIpv6) {
  if (!HaveIpv6Loopback()) GTEST_SKIP() << "no ::1 on this host";
  ExpectEchoes(AF_INET6, "::1");
}

TEST(UdpProbeResponderTest, WildcardEchoesIpv4) {
  auto r = UdpProbeResponder::Start({}, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->bound().size(), 1u);
  const int fd = LoopbackSocket(AF_INET);
  SendTo(fd, EncodeProbeHeader({kProbeRequest, 9, 1}), AF_INET, (*r)->port());
  auto reply = DecodeProbeHeader(Receive(fd));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->sequence, 9u);
  // An IPv4 peer of a dual-stack socket is shown as IPv4.
  const std::string me = "127.0.0.1:" + std::to_string(PortOf(fd));
  EXPECT_TRUE(WaitFor([&] {
    auto peers = (*r)->RecentPeers();
    return std::find(peers.begin(), peers.end(), me) != peers.end();
  }));
  ::close(fd);
}

TEST(UdpProbeResponderTest, GarbageIsCountedAndNotAnswered) {
  auto r = UdpProbeResponder::Start({"127.0.0.1"}, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int fd = LoopbackSocket(AF_INET);
  const uint16_t port = (*r)->port();
  std::string bad_magic = EncodeProbeHeader({kProbeRequest, 1, 1});
  bad_magic[0] = 'X';
  SendTo(fd, "hello", AF_INET, port);
  SendTo(fd, bad_magic, AF_INET, port);
  SendTo(fd, EncodeProbeHeader({kProbeReply, 2, 2}), AF_INET, port);  // Never echo a reply.
  SendTo(fd, EncodeProbeHeader({kProbeRequest, 3, 3}) + std::string(1000, 'z'), AF_INET, port);
  SendTo(fd, std::string(), AF_INET, port);
  SendTo(fd, EncodeProbeHeader({kProbeRequest, 4, 4}), AF_INET, port);
  // Loopback keeps order: the first answer is the valid request's, so no garbage was echoed.
  auto reply = DecodeProbeHeader(Receive(fd));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->sequence, 4u);
  EXPECT_TRUE(WaitFor([&] { return (*r)->stats().bad == 5; })) << (*r)->stats().bad;
  // Counted once its sendto returned, which may be just after the reply arrived here.
  EXPECT_TRUE(WaitFor([&] { return (*r)->stats().echoed == 1; })) << (*r)->stats().echoed;
  ::close(fd);
}

TEST(UdpProbeResponderTest, BusyPortIsAnError) {
  const int fd = LoopbackSocket(AF_INET);
  auto r = UdpProbeResponder::Start({"127.0.0.1"}, PortOf(fd));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bind 127.0.0.1:"), std::string::npos)
      << r.status().ToString();
  ::close(fd);
  auto bad = UdpProbeResponder::Start({"not-an-address"}, 0);
  EXPECT_FALSE(bad.ok());
}

UdpProbeOptions Options(uint16_t port, int64_t timeout_ms) {
  UdpProbeOptions o;
  o.port = port;
  o.interval_ms = 50;
  o.count = 3;
  o.timeout_ms = timeout_ms;
  return o;
}

ProbeTarget Target(const std::string& gid, uint16_t sport) {
  return ProbeTarget{"mlx5_0", gid, sport, {"job1"}};
}

void ExpectRoundMeasuresAll(const std::string& responder_address, const std::string& remote_gid,
                            const std::string& bind_address, const std::string& peer_prefix) {
  auto r = UdpProbeResponder::Start({responder_address}, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  UdpProbeOptions o = Options((*r)->port(), 5000);
  if (!bind_address.empty()) o.device_addresses["mlx5_0"] = bind_address;
  const uint16_t sport = FreePort();
  auto stats = RunProbeRound({Target(remote_gid, sport)}, o);
  ASSERT_EQ(stats.size(), 1u);
  const TargetStats& s = stats[0];
  EXPECT_EQ(s.error, "");
  EXPECT_EQ(s.sent, 3);
  EXPECT_EQ(s.received, 3);
  EXPECT_EQ(s.loss(), 0.0);
  EXPECT_FALSE(s.all_lost());
  ASSERT_EQ(s.rtt_us.size(), 3u);
  EXPECT_TRUE(std::is_sorted(s.rtt_us.begin(), s.rtt_us.end()));
  EXPECT_NE(s.Describe().find("sent 3 received 3 loss 0.000 rtt_us min"), std::string::npos)
      << s.Describe();
  // The responder saw the flow's source port.
  const auto peers = (*r)->RecentPeers();
  ASSERT_EQ(peers.size(), 3u);
  for (const std::string& p : peers) EXPECT_EQ(p, peer_prefix + std::to_string(sport));
}

TEST(UdpProbeRoundTest, MeasuresAllFromTheSourcePortIpv4) {
  ExpectRoundMeasuresAll("127.0.0.1", "::ffff:127.0.0.1", "", "127.0.0.1:");
}

TEST(UdpProbeRoundTest, BindsTheDeviceAddress) {
  ExpectRoundMeasuresAll("127.0.0.1", "::ffff:127.0.0.1", "::ffff:127.0.0.1", "127.0.0.1:");
}

TEST(UdpProbeRoundTest, MeasuresAllFromTheSourcePortIpv6) {
  if (!HaveIpv6Loopback()) GTEST_SKIP() << "no ::1 on this host";
  ExpectRoundMeasuresAll("::1", "::1", "", "[::1]:");
}

TEST(UdpProbeRoundTest, NoResponderLosesEverything) {
  const uint16_t nobody = FreePort();
  auto stats = RunProbeRound({Target("::ffff:127.0.0.1", FreePort())}, Options(nobody, 100));
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].error, "");
  EXPECT_EQ(stats[0].sent, 3);
  EXPECT_EQ(stats[0].received, 0);
  EXPECT_EQ(stats[0].loss(), 1.0);
  EXPECT_TRUE(stats[0].all_lost());
  EXPECT_TRUE(stats[0].rtt_us.empty());
}

TEST(UdpProbeRoundTest, ErrorsArePerTarget) {
  auto r = UdpProbeResponder::Start({"127.0.0.1"}, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int busy = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);  // Holds 0.0.0.0:port.
  sockaddr_in any{};
  any.sin_family = AF_INET;
  ASSERT_EQ(::bind(busy, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  const uint16_t busy_port = PortOf(busy);
  auto stats =
      RunProbeRound({Target("not-a-gid", FreePort()), Target("fe80::1", FreePort()),
                     Target("::ffff:127.0.0.1", busy_port), Target("::ffff:127.0.0.1", FreePort())},
                    Options((*r)->port(), 5000));
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_NE(stats[0].error.find("remote_gid"), std::string::npos) << stats[0].error;
  EXPECT_NE(stats[1].error.find("link-local"), std::string::npos) << stats[1].error;
  EXPECT_NE(stats[2].error.find("bind 0.0.0.0:" + std::to_string(busy_port)), std::string::npos)
      << stats[2].error;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stats[i].sent, 0);
    EXPECT_FALSE(stats[i].all_lost());
    EXPECT_NE(stats[i].Describe().find("error: "), std::string::npos);
  }
  EXPECT_EQ(stats[3].error, "");
  EXPECT_EQ(stats[3].received, 3);
  ::close(busy);
}

ProbeContext Context(const std::vector<std::pair<std::string, Pin>>& pins) {
  ProbeContext c;
  for (const auto& [job, pin] : pins) {
    PinTable& t = c.pins[job];
    t.job_id = job;
    t.epoch = 1;
    t.pins.push_back(pin);
  }
  return c;
}

// Runs the probe (as the agent would) until a finished round covers every key in `keys`.
ProbeResult RunUntilCovered(UdpPathProbe& probe, const ProbeContext& ctx,
                            const std::vector<std::string>& keys) {
  ProbeResult last;
  WaitFor([&] {
    last = probe.Run(ctx);
    for (const std::string& k : keys) {
      if (last.data.count(k) == 0) return false;
    }
    return true;
  });
  return last;
}

TEST(UdpPathProbeTest, TargetsAreDeduplicatedOverJobs) {
  const Pin a{"mlx5_0", "::ffff:10.0.0.2", 50000};
  const Pin b{"mlx5_1", "::ffff:10.0.0.3", 50001};
  auto targets = ProbeTargetsOf(Context({{"j1", a}, {"j2", a}, {"j2", b}}));
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].Key(), "mlx5_0 ::ffff:10.0.0.2 sport 50000");
  EXPECT_EQ(targets[0].jobs, (std::vector<std::string>{"j1", "j2"}));
  EXPECT_EQ(targets[1].jobs, (std::vector<std::string>{"j2"}));
}

TEST(UdpPathProbeTest, ReportsPerFlowAndTheResponder) {
  std::shared_ptr<UdpProbeResponder> responder;
  {
    auto r = UdpProbeResponder::Start({"127.0.0.1"}, 0);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    responder = std::move(*r);
  }
  UdpPathProbe probe(Options(responder->port(), 5000), responder);
  EXPECT_EQ(probe.name(), "udp_path");
  EXPECT_EQ(probe.interval(), core::Duration::Millis(50));
  const Pin good{"mlx5_0", "::ffff:127.0.0.1", FreePort()};
  const Pin bad{"mlx5_0", "garbage", 50001};  // Not fatal: reported for its flow only.
  const ProbeContext ctx = Context({{"j1", good}, {"j2", bad}});
  const std::string good_key = "mlx5_0 ::ffff:127.0.0.1 sport " + std::to_string(good.sport);
  const std::string bad_key = "mlx5_0 garbage sport 50001";
  ProbeResult r = RunUntilCovered(probe, ctx, {good_key, bad_key});
  EXPECT_TRUE(r.ok) << r.summary;
  EXPECT_EQ(r.summary, "2 flows to port " + std::to_string(responder->port()) +
                           ": 1 no loss, 0 lossy, 0 all lost, 1 not probed");
  EXPECT_NE(r.data[good_key].find("jobs j1: sent 3 received 3 loss 0.000"), std::string::npos)
      << r.data[good_key];
  EXPECT_NE(r.data[bad_key].find("jobs j2: error: remote_gid"), std::string::npos)
      << r.data[bad_key];
  EXPECT_NE(r.data["responder"].find("port " + std::to_string(responder->port()) +
                                     " on 127.0.0.1: echoed "),
            std::string::npos)
      << r.data["responder"];
}

TEST(UdpPathProbeTest, AllLostIsNotOk) {
  UdpPathProbe probe(Options(FreePort(), 50));
  const Pin pin{"mlx5_0", "::ffff:127.0.0.1", FreePort()};
  const std::string key = "mlx5_0 ::ffff:127.0.0.1 sport " + std::to_string(pin.sport);
  ProbeResult r = RunUntilCovered(probe, Context({{"j1", pin}}), {key});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.summary.find("1 all lost"), std::string::npos) << r.summary;
  EXPECT_NE(r.data[key].find("received 0 loss 1.000"), std::string::npos) << r.data[key];
}

TEST(UdpPathProbeTest, NothingPinnedIsOk) {
  UdpPathProbe probe(Options(FreePort(), 50));
  EXPECT_TRUE(WaitFor([&] { return probe.rounds() >= 1; }));
  ProbeResult r = probe.Run(ProbeContext{});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.summary, "no pinned flows to probe");
}

TEST(UdpPathProbeTest, FromConfigBindsTheNicAddresses) {
  HostdConfig c;
  c.nics.push_back({"h/nic0", "mlx5_0", "::ffff:127.0.0.1"});
  c.probes.enabled = true;
  c.probes.port = FreePort();
  auto probe = MakeUdpPathProbe(c);
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  EXPECT_EQ((*probe)->name(), "udp_path");
  // The port is now the responder's: a second one cannot have it, and says which key.
  auto second = MakeUdpPathProbe(c);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().ToString().find("probes.port"), std::string::npos)
      << second.status().ToString();
}

}  // namespace
}  // namespace crux::hostd
