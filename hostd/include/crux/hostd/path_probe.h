// UDP path probes in crux-hostd (issue #27): a responder that echoes probe datagrams, and a
// HostProbe (probe.h) that sends probes along each pinned flow of the host's jobs.
//
// Wire format (kProbeHeaderBytes = 24, network byte order; nothing else is a probe):
//   u32 magic kProbeMagic ("CRXP") | u8 version kProbeVersion | u8 kind (0 request, 1 reply) |
//   u16 zero | u64 sequence | u64 sender's send time (ns, the sender's clock; opaque to the
//   responder).
// The responder answers a valid request with the same 24 bytes, kind = reply, to the sender's
// address and port; it never answers a reply (no loops) and never sends more than it got (no
// amplification). Anything else (other size, magic, version or kind) is dropped and counted.
//
// The sender (UdpPathProbe), per pinned flow (PinTable entry: local device, remote GID, UDP
// source port), sends `count` requests from a UDP socket bound to the flow's source port (and
// to the local NIC's configured address when the config names one for that device), to
// remote:probe_port, so an ECMP hash over the source address and port sees the flow's. It does
// not set SO_REUSEPORT: a port another socket holds would share (steal) the echoes, so a busy
// port is reported for that target instead.
//
// Capacity trains (issue #27; the planner's Assignment.probes, not the pinned flows): per
// planned probe leaving a local NIC, the sender sends a back-to-back train of `train_count`
// datagrams of `train_bytes` (kind kProbeTrain: the header, then zeros; never fragmented:
// IP_PMTUDISC_DO / IPV6_DONTFRAG) from the probe's source port, with the job's traffic class, to
// remote:probe_port, then a kTrainControlBytes end request (kind kProbeTrainEnd), resent once
// when no report came in half the timeout. The responder keeps per (sender address and port,
// train id) the first and last arrival (kernel receive timestamps, SO_TIMESTAMPNS; its own
// steady clock where the kernel gives none), the datagrams and the bytes after the first, and
// answers the end request with a kTrainControlBytes report (kind kProbeTrainReport: u32
// received, u32 zero, u64 spread ns, u64 bytes after the first), never more bytes than the
// request. capacity = bytes after the first / spread (EstimateTrainCapacity). Trains are sent
// one at a time (they would share the sender's NIC otherwise).
//
// Limits (docs/client.md "crux-hostd", docs/faults.md "Probes"):
//  * the destination port differs from the flow's (RoCEv2's 4791 is consumed by the RDMA NIC in
//    hardware, a kernel socket cannot use it), so a switch hashing over the destination port
//    may route a probe over another ECMP path than the flow;
//  * the echo probes measure reachability, loss and round-trip time, not capacity;
//  * a train is kernel UDP, not RoCE: it measures the path's capacity only where the path is
//    slower than the sender's pace (one sendto per datagram, a few microseconds each: a few Gb/s
//    to tens of Gb/s, below a 100-400 Gb/s NIC). A train that arrives no more spread than it
//    left is reported as sender-limited (a lower bound). NIC offloads (GRO/LRO) and interrupt
//    coalescing batch arrivals and compress the spread (overestimate); on loopback it measures
//    the host's stack, not a link;
//  * the echo results are only in `crux-hostd --status`; the trains' are reported to cruxd;
//  * link-local (fe80::/10) remote GIDs are not probed (no scope id is known), they are reported.
#ifndef CRUX_HOSTD_PATH_PROBE_H_
#define CRUX_HOSTD_PATH_PROBE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/hostd/probe.h"

namespace crux::hostd {

inline constexpr uint32_t kProbeMagic = 0x43525850;  // "CRXP".
inline constexpr uint8_t kProbeVersion = 1;
inline constexpr size_t kProbeHeaderBytes = 24;
inline constexpr uint8_t kProbeRequest = 0;
inline constexpr uint8_t kProbeReply = 1;
// Bounds of one round: targets probed (the rest are counted as skipped) and requests per target.
inline constexpr size_t kMaxProbeTargets = 1024;
inline constexpr int kMaxProbeCount = 100;

// Capacity trains (above). A train datagram's header carries the train id as its sequence and
// (index << 32 | count) in place of the send time.
inline constexpr uint8_t kProbeTrain = 2;
inline constexpr uint8_t kProbeTrainEnd = 3;
inline constexpr uint8_t kProbeTrainReport = 4;
inline constexpr size_t kTrainControlBytes = 48;  // End request and report alike.
// Bounds: trains per round (the rest are counted as skipped) and trains the responder follows
// at once (the oldest is forgotten).
inline constexpr size_t kMaxTrainTargets = 64;
inline constexpr size_t kMaxResponderTrains = 1024;
// A train whose spread at the responder is within this fraction of its spread at the sender was
// paced by the sender, not stretched by the path. Measured on loopback (HostdProbesE2eTest):
// with 0.1, a loaded sender's train arrived 12 % more spread than it left (133.5 us against
// 119.1 us) and counted as a 1.08 Gb/s path; 0.5 leaves that noise to the sender.
inline constexpr double kSenderLimitedMargin = 0.5;
// Trains per probe and round: a train is only ever stretched (cross traffic, the receiver's
// scheduling), so the fastest of a few is the estimate (minimum filtering of the spread).
inline constexpr int kTrainsPerProbe = 3;

struct ProbeHeader {
  uint8_t kind = kProbeRequest;
  uint64_t sequence = 0;
  uint64_t send_ns = 0;
  friend bool operator==(const ProbeHeader&, const ProbeHeader&) = default;
};

// kProbeHeaderBytes bytes.
std::string EncodeProbeHeader(const ProbeHeader& h);
// Errors (kInvalidArgument) for any other size, magic, version, kind or a non-zero reserved field.
core::Result<ProbeHeader> DecodeProbeHeader(std::string_view bytes);

// A datagram of a train (kind kProbeTrain).
struct TrainDatagram {
  uint64_t train = 0;
  uint32_t index = 0;
  uint32_t count = 0;
  friend bool operator==(const TrainDatagram&, const TrainDatagram&) = default;
};
// What the responder saw of a train (kind kProbeTrainReport).
struct TrainReport {
  uint64_t train = 0;
  uint32_t received = 0;
  uint64_t spread_ns = 0;  // First to last arrival.
  uint64_t bytes = 0;      // UDP payload bytes that arrived after the first arrival.
  friend bool operator==(const TrainReport&, const TrainReport&) = default;
};
// `size` bytes (REQUIRES: >= kProbeHeaderBytes): the header, then zeros.
std::string EncodeTrainDatagram(const TrainDatagram& d, size_t size);
std::string EncodeTrainEnd(uint64_t train);           // kTrainControlBytes.
std::string EncodeTrainReport(const TrainReport& r);  // kTrainControlBytes.

// Any probe datagram, by kind: `prefix` is (at least) its first kProbeHeaderBytes bytes and
// `size` its real size. Errors (kInvalidArgument) for anything that is not exactly one of: a
// kProbeHeaderBytes echo request or reply, a train datagram of at least kProbeHeaderBytes with
// 2 <= count and index < count, a kTrainControlBytes end request (zero padding) or report.
struct ProbeDatagram {
  uint8_t kind = kProbeRequest;
  ProbeHeader header;   // Echo request / reply.
  TrainDatagram train;  // kProbeTrain; also the id of kProbeTrainEnd.
  TrainReport report;   // kProbeTrainReport.
};
core::Result<ProbeDatagram> DecodeProbeDatagram(std::string_view prefix, size_t size);

// The responder's view of one train: arrivals accumulated in any order (equal-size datagrams).
class TrainArrivals {
 public:
  // One datagram of `bytes` arrived at `at` (any monotonic or realtime clock, the same for all).
  void Add(core::Duration at, uint64_t bytes);
  TrainReport Report(uint64_t train) const;
  uint32_t received() const { return received_; }

 private:
  uint32_t received_ = 0;
  core::Duration first_;
  core::Duration last_;
  uint64_t bytes_after_first_ = 0;
};

// The sender's verdict on a train of `sent` datagrams sent over `send_time` (first to last
// send), from the responder's report (nullopt: none came back). Pure.
//  * no report, or a report of nothing received: lost;
//  * fewer than 2 received, or a spread of 0 with a send time of 0: not measured (no dispersion);
//  * the spread at most (1 + kSenderLimitedMargin) x send_time: sender-limited, transfer_time =
//    max(spread, send_time) (a lower bound on the capacity: the path was not the narrowest);
//  * otherwise transfer_time = spread: capacity = bytes / transfer_time.
struct TrainVerdict {
  bool measured = false;  // A capacity (or a loss) to report.
  CapacityMeasurement measurement;
  std::string note;  // Why not measured.
};
TrainVerdict EstimateTrainCapacity(uint32_t sent, core::Duration send_time,
                                   const std::optional<TrainReport>& report);

// The echo side: one UDP socket per address, served by its own worker thread (echoes do not wait
// for the agent's loop). Thread-safety: Start once, then stats() / RecentPeers() from any thread;
// the destructor stops and joins the worker.
class UdpProbeResponder {
 public:
  struct Stats {
    uint64_t echoed = 0;           // Valid requests answered.
    uint64_t bad = 0;              // Datagrams dropped as not a probe request.
    uint64_t send_errors = 0;      // Echoes the kernel refused.
    uint64_t train_datagrams = 0;  // Datagrams of capacity trains.
    uint64_t trains_reported = 0;  // End requests answered with a report.
  };
  static constexpr size_t kRecentPeers = 32;

  // Binds `port` (0: an ephemeral one, the same for every address) on each of `addresses` (GID
  // text or IPv4/IPv6 text; IPv4-mapped GIDs bind IPv4), or on every address (IPv6 wildcard,
  // dual-stack; IPv4 wildcard where the host has no IPv6) when `addresses` is empty, and starts
  // the worker. Errors name the address ("probe responder: bind 10.0.0.1:18515: ...").
  static core::Result<std::unique_ptr<UdpProbeResponder>> Start(
      const std::vector<std::string>& addresses, uint16_t port);
  ~UdpProbeResponder();
  UdpProbeResponder(const UdpProbeResponder&) = delete;
  UdpProbeResponder& operator=(const UdpProbeResponder&) = delete;

  uint16_t port() const { return port_; }
  // "addr" per bound socket ("[::]", "10.0.0.1").
  const std::vector<std::string>& bound() const { return bound_; }
  Stats stats() const;
  // The senders ("addr:port", IPv6 "[addr]:port") of the last kRecentPeers valid requests, oldest
  // first.
  std::vector<std::string> RecentPeers() const;

 private:
  UdpProbeResponder() = default;
  void Serve();

  std::vector<int> fds_;
  int stop_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<std::string> bound_;
  std::atomic<uint64_t> echoed_{0};
  std::atomic<uint64_t> bad_{0};
  std::atomic<uint64_t> send_errors_{0};
  std::atomic<uint64_t> train_datagrams_{0};
  std::atomic<uint64_t> trains_reported_{0};
  // The trains being received (worker thread only): (sender "addr:port", train id) -> arrivals,
  // at most kMaxResponderTrains (the oldest forgotten).
  std::map<std::pair<std::string, uint64_t>, TrainArrivals> trains_;
  std::deque<std::pair<std::string, uint64_t>> train_order_;
  mutable std::mutex mu_;
  std::deque<std::string> recent_;  // Guarded by mu_.
  std::thread worker_;
};

struct UdpProbeOptions {
  uint16_t port = 18515;  // The responders' port on the remote hosts.
  int64_t interval_ms = 1000;
  int count = 3;             // Requests per target per round, 1-kMaxProbeCount.
  int64_t timeout_ms = 200;  // A reply later than this after its request counts as lost.
  // Local RDMA device -> the address to bind (GID text; "" or absent: the wildcard address).
  std::map<std::string, std::string> device_addresses;
  int train_count = 32;  // Capacity trains: datagrams per train (0: none).
  int train_bytes = 1472;
  int trains_per_probe = kTrainsPerProbe;  // Trains per probe and round: the fastest counts.
};

// One capacity probe to send (planned probes of several jobs over the same source NIC, remote
// and source port are sent once).
struct TrainTarget {
  PlannedProbe probe;
  std::vector<std::string> jobs;
  // "train host1/nic0 -> host4/nic0 sport 49152" (the key in ProbeResult::data).
  std::string Key() const;
};
// The capacity targets of a ProbeContext: every planned probe of every job, deduplicated,
// sorted by key.
std::vector<TrainTarget> TrainTargetsOf(const ProbeContext& context);
// Of two trains of one probe, the one that counts: one with a rate over one without (lost or not
// measured), the faster of two with a rate (cross traffic and the receiver's scheduling only
// stretch a train: the fastest is the closest to the capacity), a loss over no measurement,
// else `a`. Pure.
const TrainVerdict& BetterTrain(const TrainVerdict& a, const TrainVerdict& b);

// Sends each target's train and collects the responder's report, one train at a time,
// trains_per_probe passes over the targets (at most kMaxTrainTargets: the caller trims); per
// target the fastest measured train counts, lost only when every train was. Blocks up to
// timeout_ms per train (or until `stop_fd` is readable). Per target its verdict (note: the error
// that kept it from being sent; a report claiming more datagrams or bytes than were sent is not
// measured). Never throws. Thread-safety: reentrant.
std::vector<TrainVerdict> RunTrainRound(const std::vector<TrainTarget>& targets,
                                        const UdpProbeOptions& options, int stop_fd = -1);

// One pinned flow to probe; flows with the same (device, remote GID, source port) of several
// jobs are probed once.
struct ProbeTarget {
  std::string device;
  std::string remote_gid;
  uint16_t sport = 0;
  std::vector<std::string> jobs;
  // "mlx5_0 ::ffff:10.0.1.2 sport 49152" (the key in ProbeResult::data).
  std::string Key() const;
};

struct TargetStats {
  ProbeTarget target;
  std::string error;  // Set: not probed (bad GID, bind failed, ...); the counts are then 0.
  int sent = 0;       // Requests handed to the kernel.
  int send_errors = 0;
  int received = 0;            // Valid echoes within timeout_ms.
  std::vector<double> rtt_us;  // Of the received echoes, sorted.
  double loss() const;         // 1 - received / (sent + send_errors); 0 when none tried.
  bool all_lost() const;       // Tried and nothing came back.
  // "jobs a,b: sent 3 received 3 loss 0.000 rtt_us min 12.1 median 13.0 max 20.4"
  // or "jobs a: error: ...".
  std::string Describe() const;
};

// The targets of a ProbeContext: every pin of every job's table, deduplicated, sorted by key.
std::vector<ProbeTarget> ProbeTargetsOf(const ProbeContext& context);

// One blocking round: sends every target's requests, then waits for echoes until all came or
// timeout_ms passed (or `stop_fd`, an eventfd, becomes readable). Never throws; per-target
// failures are in the target's TargetStats. At most kMaxProbeTargets targets are probed (the
// caller trims). Thread-safety: reentrant (no shared state besides the sequence counter).
std::vector<TargetStats> RunProbeRound(const std::vector<ProbeTarget>& targets,
                                       const UdpProbeOptions& options, int stop_fd = -1);

// The HostProbe "udp_path". Run (agent's thread, never blocks) hands the current targets (the
// pinned flows' echo targets and the planned probes' trains) to a worker thread, which runs a
// round every interval_ms (the echoes, then the trains one by one), and returns the last
// finished round (its `capacity`: the trains measured; `round` counts rounds; a train with no
// report toward an address whose responder never answered an echo or a train is not measured,
// not lost: that host may run no responder):
// ok = false when any target lost every request; summary one line; data = per target (Key ->
// Describe), plus "responder" (its port and counts) when one is attached, and "skipped" when
// there were over kMaxProbeTargets targets. Before the first round: ok, "no round yet".
// Thread-safety: Run from one thread (the agent's); the destructor stops and joins the worker.
class UdpPathProbe : public HostProbe {
 public:
  explicit UdpPathProbe(UdpProbeOptions options,
                        std::shared_ptr<const UdpProbeResponder> responder = nullptr);
  ~UdpPathProbe() override;
  UdpPathProbe(const UdpPathProbe&) = delete;
  UdpPathProbe& operator=(const UdpPathProbe&) = delete;

  std::string_view name() const override { return "udp_path"; }
  core::Duration interval() const override;
  ProbeResult Run(const ProbeContext& context) override;

  // Rounds finished so far (tests poll it).
  uint64_t rounds() const { return rounds_.load(); }

 private:
  void Work();
  ProbeResult Summarise(const std::vector<TargetStats>& stats, size_t skipped,
                        const std::vector<TrainTarget>& trains,
                        const std::vector<TrainVerdict>& verdicts, size_t trains_skipped) const;

  const UdpProbeOptions options_;
  const std::shared_ptr<const UdpProbeResponder> responder_;
  int stop_fd_ = -1;
  std::atomic<uint64_t> rounds_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;             // Guarded by mu_.
  std::vector<ProbeTarget> targets_;  // Guarded by mu_: the latest from Run.
  std::vector<TrainTarget> trains_;   // Guarded by mu_: the latest from Run.
  size_t skipped_ = 0;                // Guarded by mu_.
  size_t trains_skipped_ = 0;         // Guarded by mu_.
  std::optional<ProbeResult> last_;   // Guarded by mu_.
  // Remote addresses whose responder has answered (an echo or a train report): only a train
  // toward one of them can be lost. Worker thread only.
  std::set<std::string> answered_;
  std::thread worker_;
};

// The probe for crux-hostd's config (probes.*): binds the responder on the configured NICs'
// addresses (all addresses when none has one) and returns the path probe holding it. Errors name
// the key ("probes.port: ...").
core::Result<std::unique_ptr<HostProbe>> MakeUdpPathProbe(const HostdConfig& config);

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_PATH_PROBE_H_
