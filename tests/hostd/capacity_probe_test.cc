// crux-hostd's capacity probes (path_probe.h, "Capacity trains"): the train wire format, the
// responder's arrival bookkeeping, the dispersion estimator (pure, scripted times), and on
// loopback a real sender and responder (a train measured, a train with no responder lost, the
// HostProbe measuring planned probes). Loopback measures the host's stack, not a link, so no
// figure of it is asserted; no assertion depends on timing (waits poll with WaitUntil).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../system/process_util.h"
#include "crux/hostd/path_probe.h"

namespace crux::hostd {
namespace {

using core::Bytes;
using core::Duration;

// A UDP port that was free on 127.0.0.1 a moment ago.
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  sockaddr_in got{};
  socklen_t len = sizeof got;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
  ::close(fd);
  return ntohs(got.sin_port);
}

TEST(TrainWireTest, EveryKindRoundTripsAndEachIsRefusedOutsideItsShape) {
  const std::string d = EncodeTrainDatagram({0x1122334455667788ull, 3, 32}, 1472);
  ASSERT_EQ(d.size(), 1472u);
  auto got = DecodeProbeDatagram(d.substr(0, 256), d.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->kind, kProbeTrain);
  EXPECT_EQ(got->train, (TrainDatagram{0x1122334455667788ull, 3, 32}));

  const std::string end = EncodeTrainEnd(77);
  ASSERT_EQ(end.size(), kTrainControlBytes);
  got = DecodeProbeDatagram(end, end.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->kind, kProbeTrainEnd);
  EXPECT_EQ(got->train.train, 77u);

  const TrainReport report{77, 31, 123456, 31 * 1472};
  const std::string rep = EncodeTrainReport(report);
  ASSERT_EQ(rep.size(), kTrainControlBytes);  // Never more than the end request it answers.
  got = DecodeProbeDatagram(rep, rep.size());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->kind, kProbeTrainReport);
  EXPECT_EQ(got->report, report);

  // The echo kinds still decode (the responder's one entry point), at their size only.
  const std::string echo = EncodeProbeHeader({kProbeRequest, 5, 6});
  got = DecodeProbeDatagram(echo, echo.size());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->header, (ProbeHeader{kProbeRequest, 5, 6}));
  EXPECT_FALSE(DecodeProbeDatagram(echo + "x", echo.size() + 1).ok());

  // Refusals: a train of one, an index past the count, short or padded control messages, a
  // non-zero end padding or report reserved field, an unknown kind, too short.
  EXPECT_FALSE(DecodeProbeDatagram(EncodeTrainDatagram({1, 0, 1}, 64), 64).ok());
  EXPECT_FALSE(DecodeProbeDatagram(EncodeTrainDatagram({1, 32, 32}, 64), 64).ok());
  EXPECT_FALSE(DecodeProbeDatagram(end.substr(0, 40), 40).ok());
  EXPECT_FALSE(DecodeProbeDatagram(end + "xx", end.size() + 2).ok());
  std::string padded = end;
  padded[30] = 1;
  EXPECT_FALSE(DecodeProbeDatagram(padded, padded.size()).ok());
  std::string reserved = rep;
  reserved[29] = 1;
  EXPECT_FALSE(DecodeProbeDatagram(reserved, reserved.size()).ok());
  std::string kind = end;
  kind[5] = 9;
  EXPECT_FALSE(DecodeProbeDatagram(kind, kind.size()).ok());
  EXPECT_FALSE(DecodeProbeDatagram(d.substr(0, 20), 20).ok());
}

TEST(TrainArrivalsTest, SpreadAndBytesAfterTheFirstInAnyOrder) {
  TrainArrivals in_order, shuffled;
  for (int k = 0; k < 4; ++k) in_order.Add(Duration::Micros(100 + 10 * k), 1000);
  for (int k : {2, 0, 3, 1}) shuffled.Add(Duration::Micros(100 + 10 * k), 1000);
  for (const TrainArrivals* a : {&in_order, &shuffled}) {
    const TrainReport r = a->Report(9);
    EXPECT_EQ(r.train, 9u);
    EXPECT_EQ(r.received, 4u);
    EXPECT_EQ(r.spread_ns, 30000u);
    EXPECT_EQ(r.bytes, 3000u);  // Every arrival but the first counts toward the spread.
  }
  EXPECT_EQ(TrainArrivals().Report(1), (TrainReport{1, 0, 0, 0}));
}

TEST(EstimateTrainCapacityTest, LostUnmeasuredStretchedAndSenderLimited) {
  // No report, or one of nothing received: lost (a failed row for the fault manager).
  TrainVerdict v = EstimateTrainCapacity(32, Duration::Micros(50), std::nullopt);
  EXPECT_TRUE(v.measured);
  EXPECT_TRUE(v.measurement.lost);
  v = EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 0, 0, 0});
  EXPECT_TRUE(v.measured && v.measurement.lost);
  // One datagram: no dispersion, nothing to report.
  v = EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 1, 0, 0});
  EXPECT_FALSE(v.measured);
  EXPECT_FALSE(v.measurement.lost);
  EXPECT_NE(v.note.find("no dispersion"), std::string::npos) << v.note;

  // The path stretched the train: 31 x 1472 bytes over 365.056 us = 1 Gb/s, against a send
  // time of 50 us.
  const uint64_t bytes = 31 * 1472;
  const uint64_t spread_ns = bytes * 8;  // At 1 Gb/s, 1 bit per ns.
  v = EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 32, spread_ns, bytes});
  ASSERT_TRUE(v.measured);
  const CapacityMeasurement& m = v.measurement;
  EXPECT_FALSE(m.lost);
  EXPECT_FALSE(m.sender_limited);
  EXPECT_EQ(m.sent, 32u);
  EXPECT_EQ(m.received, 32u);
  EXPECT_EQ(m.bytes, Bytes::Of(static_cast<int64_t>(bytes)));
  EXPECT_EQ(m.transfer_time, Duration::Nanos(static_cast<int64_t>(spread_ns)));
  EXPECT_DOUBLE_EQ(m.bytes.ToBits() / m.transfer_time.ToSeconds(), 1e9);

  // Arrived no more spread than sent (within 10 %): a lower bound, the sender's pace; the
  // transfer time is the longer of the two, so the rate never exceeds what the sender did.
  v = EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 32, 54000, bytes});
  ASSERT_TRUE(v.measured);
  EXPECT_TRUE(v.measurement.sender_limited);
  EXPECT_EQ(v.measurement.transfer_time, Duration::Micros(54));
  // Interrupt coalescing compressed the arrivals below the send time: still sender-limited, at
  // the send time.
  v = EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 32, 2000, bytes});
  EXPECT_TRUE(v.measurement.sender_limited);
  EXPECT_EQ(v.measurement.transfer_time, Duration::Micros(50));
  // Partial loss: measured over what arrived.
  v = EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 20, spread_ns, 19 * 1472});
  EXPECT_TRUE(v.measured);
  EXPECT_EQ(v.measurement.received, 20u);
  EXPECT_EQ(v.measurement.bytes, Bytes::Of(19 * 1472));
}

TEST(EstimateTrainCapacityTest, TheFastestOfAProbesTrainsCountsAndLostOnlyWhenAllWere) {
  const uint64_t bytes = 31 * 1472;
  const TrainVerdict slow =
      EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{1, 32, bytes * 8, bytes});
  const TrainVerdict fast =
      EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{2, 32, bytes * 4, bytes});
  const TrainVerdict lost = EstimateTrainCapacity(32, Duration::Micros(50), std::nullopt);
  const TrainVerdict none =
      EstimateTrainCapacity(32, Duration::Micros(50), TrainReport{3, 1, 0, 0});
  EXPECT_EQ(&BetterTrain(slow, fast), &fast);
  EXPECT_EQ(&BetterTrain(fast, slow), &fast);
  EXPECT_EQ(&BetterTrain(lost, slow), &slow);
  EXPECT_EQ(&BetterTrain(slow, lost), &slow);
  EXPECT_EQ(&BetterTrain(none, lost), &lost);
  EXPECT_EQ(&BetterTrain(lost, none), &lost);
  EXPECT_EQ(&BetterTrain(none, slow), &slow);
}

PlannedProbe Planned(uint16_t sport, const std::string& remote = "::ffff:127.0.0.1") {
  return {"host0/nic0", "mlx5_0", "host4/nic0", remote, sport, 104};
}

UdpProbeOptions TrainOptions(uint16_t port) {
  UdpProbeOptions o;
  o.port = port;
  o.interval_ms = 50;
  o.timeout_ms = 2000;  // Only waited out when no report comes (a loaded machine is slow).
  o.train_count = 16;
  o.train_bytes = 1200;
  return o;
}

TEST(TrainRoundTest, ALoopbackTrainIsMeasuredByTheResponder) {
  auto r = UdpProbeResponder::Start({"127.0.0.1"}, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const uint16_t sport = FreePort();
  const std::vector<TrainTarget> targets = {{Planned(sport), {"j1", "j2"}}};
  EXPECT_EQ(targets[0].Key(), "train host0/nic0 -> host4/nic0 sport " + std::to_string(sport));
  const std::vector<TrainVerdict> v = RunTrainRound(targets, TrainOptions((*r)->port()));
  ASSERT_EQ(v.size(), 1u);  // The best of kTrainsPerProbe trains.
  ASSERT_TRUE(v[0].measured) << v[0].note;
  const CapacityMeasurement& m = v[0].measurement;
  EXPECT_FALSE(m.lost) << v[0].note;
  EXPECT_EQ(m.jobs, (std::vector<std::string>{"j1", "j2"}));
  EXPECT_EQ(m.src_nic, "host0/nic0");
  EXPECT_EQ(m.dst_nic, "host4/nic0");
  EXPECT_EQ(m.sport, sport);
  EXPECT_EQ(m.sent, 16u);
  EXPECT_EQ(m.received, 16u);  // Loopback does not drop 16 datagrams.
  EXPECT_EQ(m.bytes, Bytes::Of(15 * 1200));
  EXPECT_GT(m.transfer_time, Duration::Zero());
  EXPECT_TRUE(system_test::WaitUntil(
      [&] { return (*r)->stats().trains_reported == uint64_t{kTrainsPerProbe}; },
      std::chrono::seconds(10), std::chrono::milliseconds(5)));
  EXPECT_EQ((*r)->stats().train_datagrams, 16u * kTrainsPerProbe);
  EXPECT_EQ((*r)->stats().echoed, 0u);
  // The responder saw the planned source port (the end request comes from the train's socket).
  const std::vector<std::string> peers = (*r)->RecentPeers();
  ASSERT_FALSE(peers.empty());
  EXPECT_EQ(peers.back(), "127.0.0.1:" + std::to_string(sport));
}

TEST(TrainRoundTest, NoResponderIsLostAndABadAddressIsNotMeasured) {
  const std::vector<TrainTarget> targets = {{Planned(FreePort()), {"j1"}},
                                            {Planned(FreePort(), "garbage"), {"j2"}}};
  UdpProbeOptions o = TrainOptions(FreePort());  // Nobody answers there.
  o.timeout_ms = 50;
  const std::vector<TrainVerdict> v = RunTrainRound(targets, o);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_TRUE(v[0].measured);
  EXPECT_TRUE(v[0].measurement.lost);
  EXPECT_EQ(v[0].note, "no report from the responder");
  EXPECT_FALSE(v[1].measured);
  EXPECT_NE(v[1].note.find("remote_gid"), std::string::npos) << v[1].note;
}

// A responder that claims more than was sent (garbled or forged) gives no measurement: the
// agent would otherwise send cruxd a result it must refuse.
TEST(TrainRoundTest, AReportOfMoreThanWasSentIsNotAMeasurement) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const timeval give_up{10, 0};  // The forger never outlives a broken sender by long.
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &give_up, sizeof give_up);
  // The forger answers the first end request with 10^12 bytes, then stops.
  std::thread forger([fd] {
    char buf[2048];
    for (;;) {
      sockaddr_in peer{};
      socklen_t plen = sizeof peer;
      const ssize_t n =
          ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&peer), &plen);
      if (n < 0) return;
      auto d = DecodeProbeDatagram(std::string_view(buf, static_cast<size_t>(n)),
                                   static_cast<size_t>(n));
      if (!d.ok() || d->kind != kProbeTrainEnd) continue;
      const std::string r = EncodeTrainReport({d->train.train, 16, 1000, 1000000000000ull});
      ::sendto(fd, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&peer), plen);
      return;
    }
  });
  UdpProbeOptions o = TrainOptions(ntohs(a.sin_port));
  o.trains_per_probe = 1;
  const std::vector<TrainVerdict> v = RunTrainRound({{Planned(FreePort()), {"j1"}}}, o);
  forger.join();
  ::close(fd);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].measured);
  EXPECT_NE(v[0].note.find("implausible report"), std::string::npos) << v[0].note;
}

TEST(UdpPathProbeTest, PlannedProbesAreMeasuredOncePerRoundAndCarryTheirJobs) {
  std::shared_ptr<UdpProbeResponder> responder;
  {
    auto r = UdpProbeResponder::Start({"127.0.0.1"}, 0);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    responder = std::move(*r);
  }
  UdpPathProbe probe(TrainOptions(responder->port()), responder);
  ProbeContext ctx;
  const uint16_t sport = FreePort();
  // The same probe in two jobs' assignments is sent once and reported for both.
  ctx.planned["j1"] = {Planned(sport)};
  ctx.planned["j2"] = {Planned(sport)};
  const std::vector<TrainTarget> targets = TrainTargetsOf(ctx);
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].jobs, (std::vector<std::string>{"j1", "j2"}));
  ProbeResult r;
  ASSERT_TRUE(system_test::WaitUntil(
      [&] {
        r = probe.Run(ctx);
        return r.round > 0 && !r.capacity.empty();
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5)))
      << r.summary;
  ASSERT_EQ(r.capacity.size(), 1u);
  EXPECT_EQ(r.capacity[0].jobs, (std::vector<std::string>{"j1", "j2"}));
  EXPECT_FALSE(r.capacity[0].lost);
  EXPECT_EQ(r.capacity[0].received, 16u);
  EXPECT_TRUE(r.ok) << r.summary;
  EXPECT_NE(r.summary.find("1 capacity trains: "), std::string::npos) << r.summary;
  const std::string key = targets[0].Key();
  ASSERT_TRUE(r.data.contains(key));
  EXPECT_NE(r.data[key].find("jobs j1,j2: sent 16 received 16 bytes 18000 in "), std::string::npos)
      << r.data[key];
  EXPECT_NE(r.data["responder"].find("trains_reported "), std::string::npos);
  // A later round is a new round number (the agent reports each round once).
  const uint64_t first = r.round;
  ASSERT_TRUE(system_test::WaitUntil(
      [&] {
        r = probe.Run(ctx);
        return r.round > first;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5)));
}

// A remote whose responder never answered (its agent runs none, or an older one) is not a dead
// path: the train is not measured rather than lost, so it cannot accuse the links.
TEST(UdpPathProbeTest, NoReportFromANeverSeenResponderIsNotALoss) {
  UdpProbeOptions o = TrainOptions(FreePort());  // Nobody answers there.
  o.timeout_ms = 20;
  UdpPathProbe probe(o);
  ProbeContext ctx;
  const uint16_t sport = FreePort();
  ctx.planned["j1"] = {Planned(sport)};
  // The agent's first round may run before the probe knows any target: wait for one that
  // covered the train.
  const std::string key = TrainTargetsOf(ctx)[0].Key();
  ProbeResult r;
  ASSERT_TRUE(system_test::WaitUntil(
      [&] {
        r = probe.Run(ctx);
        return r.data.contains(key);
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5)))
      << r.summary;
  EXPECT_TRUE(r.capacity.empty());
  EXPECT_TRUE(r.ok) << r.summary;
  EXPECT_NE(r.data[key].find("not counted as lost"), std::string::npos) << r.data[key];
}

TEST(UdpPathProbeTest, TrainCountZeroSendsNoTrains) {
  auto responder = UdpProbeResponder::Start({"127.0.0.1"}, 0);
  ASSERT_TRUE(responder.ok());
  UdpProbeOptions o = TrainOptions((*responder)->port());
  o.train_count = 0;
  UdpPathProbe probe(o);
  ProbeContext ctx;
  ctx.planned["j1"] = {Planned(FreePort())};
  // A round that began after the probe was told of the flow: the one in progress when Run was
  // first called may have begun before.
  ProbeResult r = probe.Run(ctx);
  const uint64_t told = r.round;
  ASSERT_TRUE(system_test::WaitUntil(
      [&] {
        r = probe.Run(ctx);
        return r.round >= told + 2;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(5)))
      << r.summary;
  EXPECT_TRUE(r.capacity.empty());
  EXPECT_EQ(r.summary.find("capacity trains"), std::string::npos) << r.summary;
  EXPECT_EQ((*responder)->stats().train_datagrams, 0u);
}

}  // namespace
}  // namespace crux::hostd
