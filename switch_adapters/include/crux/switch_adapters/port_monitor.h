// PortMonitor: the one interface through which the switch agent reads its ports' operational
// state and counters (issue #14, docs/faults.md). A backend that can watch ports exports a
// monitor factory in its registry descriptor (registry.h, Backend::create_monitor); today the
// sonic backend does (sonic_port_monitor.h: APPL_DB PORT_TABLE and COUNTERS_DB).
//
// Contract of every monitor:
//   * ReadPorts makes ONE attempt (no retries, no sleeps: the agent's port watcher polls on its
//     own schedule) and returns one reading per watched port, in the order of the watched ports.
//     A port the device does not know yet (no PORT_TABLE entry, no counter OID) is returned
//     with what is known (oper_up / counters unset), not as an error.
//   * Neighbors returns the topology name of the node at the other end of each watched port that
//     the device knows (SONiC: CONFIG_DB DEVICE_NEIGHBOR|<port> `name`).
//   * Errors are Status values: kUnavailable (device unreachable or timed out: retry later),
//     kFailedPrecondition (data the monitor cannot interpret, naming the key).
//
// Thread-safety: a monitor is NOT thread-safe (one owner thread: the port watcher's).
#ifndef CRUX_SWITCH_ADAPTERS_PORT_MONITOR_H_
#define CRUX_SWITCH_ADAPTERS_PORT_MONITOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

namespace crux::switch_adapters {

// Cumulative counters of one port (SAI names in sonic_port_monitor.h).
struct PortCounterValues {
  uint64_t in_errors = 0;
  uint64_t in_discards = 0;
  uint64_t out_errors = 0;
  uint64_t out_discards = 0;
  uint64_t fec_uncorrectable = 0;
  uint64_t pfc_rx_pause = 0;  // All priorities.
  uint64_t pfc_tx_pause = 0;
  uint64_t queue_drops = 0;  // All queues of the port.
  uint64_t ecn_marked = 0;
  uint64_t in_packets = 0;
  uint64_t out_packets = 0;

  friend bool operator==(const PortCounterValues&, const PortCounterValues&) = default;
};

// after - before per field; a counter that went backwards (a counter reset, a restarted
// orchagent) counts as 0, never as a huge wrap-around.
PortCounterValues CounterDelta(const PortCounterValues& before, const PortCounterValues& after);

// Plausibility of two cumulative readings of one port (issue #31, docs/faults.md). SONiC's
// counters are 64-bit and cumulative, so they never wrap in practice:
//   * kReset: some counter went backwards. That is a reset (`sonic-clear counters`, a restarted
//     syncd or orchagent, a queue that left the name map), never a 2^64 wrap. No delta.
//   * kImplausible: some delta is more than the port could carry at `line_rate` in `interval`
//     plus the counter group's poll lag (a garbled or torn COUNTERS_DB value, e.g. an error
//     counter jumping to 2^64-1). No delta; `why` names the field, its delta and the bound.
//   * kOk: `delta` is after - before.
// Bounds, with frames = core::MaxFramesAtLineRate(line_rate, interval + lag): port counters (lag
// 1 s, SONiC's PORT flex-counter interval) at most 1 x frames each; the PFC sums 8 x (one frame
// counts on each priority it pauses); out_discards 256 x (egress drops come from every ingress
// port: incast); queue counters (lag 10 s, the QUEUE group's interval): ecn_marked 1 x,
// queue_drops 256 x. Generous on purpose: they refuse what cannot be a measurement, not heavy
// traffic. A caller that drops a sample keeps `after` as its next baseline.
enum class CounterVerdict { kOk, kReset, kImplausible };
struct CounterJudgement {
  CounterVerdict verdict = CounterVerdict::kOk;
  PortCounterValues delta;  // kOk only.
  std::string why;          // Not kOk: "in_errors went backwards (7 -> 0)", ...
};
// `line_rate`: the port's speed; nullopt or not positive: core::kFastestPortRate. `interval` > 0.
CounterJudgement JudgeCounters(const PortCounterValues& before, const PortCounterValues& after,
                               std::optional<core::Bandwidth> line_rate, core::Duration interval);

struct PortReading {
  std::string port;
  std::optional<bool> oper_up;                // nullopt: the device does not say.
  std::optional<PortCounterValues> counters;  // nullopt: not read, or not available.
  std::optional<core::Bandwidth> speed = {};  // The port's line rate; nullopt: not told.

  friend bool operator==(const PortReading&, const PortReading&) = default;
};

class PortMonitor {
 public:
  virtual ~PortMonitor() = default;
  // The watched ports' state, and their counters when `with_counters`.
  virtual core::Result<std::vector<PortReading>> ReadPorts(bool with_counters) = 0;
  // Port -> neighbour node name, for the watched ports the device knows.
  virtual core::Result<std::map<std::string, std::string>> Neighbors() = 0;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_PORT_MONITOR_H_
