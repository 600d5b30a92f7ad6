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
// Limits (docs/client.md "crux-hostd", docs/faults.md "Probes"):
//  * the destination port differs from the flow's (RoCEv2's 4791 is consumed by the RDMA NIC in
//    hardware, a kernel socket cannot use it), so a switch hashing over the destination port
//    may route a probe over another ECMP path than the flow;
//  * a probe measures reachability, loss and round-trip time, not capacity;
//  * results are only in `crux-hostd --status` (not reported to cruxd yet);
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
#include <string>
#include <string_view>
#include <thread>
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

// The echo side: one UDP socket per address, served by its own worker thread (echoes do not wait
// for the agent's loop). Thread-safety: Start once, then stats() / RecentPeers() from any thread;
// the destructor stops and joins the worker.
class UdpProbeResponder {
 public:
  struct Stats {
    uint64_t echoed = 0;       // Valid requests answered.
    uint64_t bad = 0;          // Datagrams dropped as not a probe request.
    uint64_t send_errors = 0;  // Echoes the kernel refused.
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
};

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

// The HostProbe "udp_path". Run (agent's thread, never blocks) hands the current targets to a
// worker thread, which runs a round every interval_ms, and returns the last finished round:
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
  ProbeResult Summarise(const std::vector<TargetStats>& stats, size_t skipped) const;

  const UdpProbeOptions options_;
  const std::shared_ptr<const UdpProbeResponder> responder_;
  int stop_fd_ = -1;
  std::atomic<uint64_t> rounds_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;             // Guarded by mu_.
  std::vector<ProbeTarget> targets_;  // Guarded by mu_: the latest from Run.
  size_t skipped_ = 0;                // Guarded by mu_.
  std::optional<ProbeResult> last_;   // Guarded by mu_.
  std::thread worker_;
};

// The probe for crux-hostd's config (probes.*): binds the responder on the configured NICs'
// addresses (all addresses when none has one) and returns the path probe holding it. Errors name
// the key ("probes.port: ...").
core::Result<std::unique_ptr<HostProbe>> MakeUdpPathProbe(const HostdConfig& config);

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_PATH_PROBE_H_
