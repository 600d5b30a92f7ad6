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

struct PortReading {
  std::string port;
  std::optional<bool> oper_up;                // nullopt: the device does not say.
  std::optional<PortCounterValues> counters;  // nullopt: not read, or not available.

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
