// NIC RDMA hardware counters for crux-hostd (issue #27): what is read, from where, and the delta
// of two readings. The reading is I/O behind NicCounterSource so the agent's logic (host_agent.h)
// is tested with scripted readings; SysfsNicCounters is the real one.
//
// Where: <sysfs_root>/class/infiniband/<device>/ports/<port>/hw_counters/<name>, one decimal
// integer per file (mlx5 names; kNicCounterNames). A file that does not exist (an older NIC or
// driver) is absent, not an error. A file that exists but does not hold a decimal integer (or
// cannot be read) is absent too, and its error names the file. Nothing else of the reading is
// lost.
//
// Thread-safety: NicCounterReading and NicCounterDelta are values; a NicCounterSource is used by
// one thread at a time (crux-hostd's agent thread).
#ifndef CRUX_HOSTD_NIC_COUNTERS_H_
#define CRUX_HOSTD_NIC_COUNTERS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/hostd/config.h"

namespace crux::hostd {

// The counters, in wire order (v1::NicCounters fields 5-12). The first kNicLossCounters are the
// loss side (a receiver sees gaps, a sender retransmits), the rest the congestion side.
inline constexpr size_t kNicCounterCount = 8;
inline constexpr size_t kNicLossCounters = 5;
inline constexpr std::array<std::string_view, kNicCounterCount> kNicCounterNames = {
    "packet_seq_err",   "out_of_sequence",           "local_ack_timeout_err",
    "roce_adp_retrans", "roce_adp_retrans_to",       "np_cnp_sent",
    "rp_cnp_handled",   "np_ecn_marked_roce_packets"};

// One reading of one NIC port.
struct NicCounterReading {
  // Per counter (kNicCounterNames order): its value, or nullopt when absent (no such file, or
  // its content was refused: see errors).
  std::array<std::optional<uint64_t>, kNicCounterCount> values;
  // The port's rate (sysfs <port>/rate, "100 Gb/sec (4X EDR)"); nullopt: not told.
  std::optional<core::Bandwidth> rate;
  // Problems of this reading, each naming the file: "<path>: not a decimal integer ("abc")",
  // "<path>: cannot open: Permission denied", or the missing hw_counters directory.
  std::vector<std::string> errors;
};

// Per counter: now - before when both readings have it and it did not go backwards; else 0 (a
// counter that went backwards, e.g. after a driver reload, starts over: never read as a wrap).
std::array<uint64_t, kNicCounterCount> NicCounterDelta(const NicCounterReading& before,
                                                       const NicCounterReading& now);

// Plausibility of two readings `interval` apart (issue #31, docs/faults.md):
//   * kReset: a counter both readings have went backwards (a driver reload, a NIC reset);
//   * kImplausible: some delta is more than the port could count at its rate (`now.rate`, else
//     core::kFastestPortRate) in interval + 1 s (every counter counts packets or events of
//     packets, at most one per minimum-size frame): a garbled value, e.g. 2^64-1;
//   * kOk: `delta` is NicCounterDelta(before, now).
// A dropped reading gives no deltas and is the baseline of the next one.
enum class NicVerdict { kOk, kReset, kImplausible };
struct NicJudgement {
  NicVerdict verdict = NicVerdict::kOk;
  std::array<uint64_t, kNicCounterCount> delta{};  // kOk only.
  std::string why;  // Not kOk: names the counter ("packet_seq_err went backwards (9 -> 2)").
};
NicJudgement JudgeNicCounters(const NicCounterReading& before, const NicCounterReading& now,
                              core::Duration interval);

// Parses a sysfs port `rate` file: "<n> Gb/sec (...)" (also "2.5 Gb/sec"). nullopt otherwise.
std::optional<core::Bandwidth> ParsePortRate(std::string_view text);

// Parses one counter file's content: a decimal integer (optionally surrounded by whitespace,
// sysfs ends it with "\n") that fits uint64. nullopt otherwise.
std::optional<uint64_t> ParseCounterValue(std::string_view text);

class NicCounterSource {
 public:
  virtual ~NicCounterSource() = default;
  // Reads `nic`'s counters now. Never fails as a whole (see NicCounterReading). Must be quick
  // (it runs on the agent's thread): sysfs reads are a few microseconds each.
  virtual NicCounterReading Read(const NicConfig& nic) = 0;
};

// The sysfs reader (see the top of the file).
class SysfsNicCounters : public NicCounterSource {
 public:
  // `sysfs_root`: "/sys" on a real host; a temp directory in tests.
  explicit SysfsNicCounters(std::string sysfs_root) : root_(std::move(sysfs_root)) {}

  // <root>/class/infiniband/<device>/ports/<port>/hw_counters.
  static std::string CounterDir(const std::string& root, const std::string& device, uint32_t port);

  NicCounterReading Read(const NicConfig& nic) override;

 private:
  std::string root_;
};

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_NIC_COUNTERS_H_
