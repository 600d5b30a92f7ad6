// SonicPortMonitor: reads a SONiC switch's port state and counters from its local Redis
// (failures-ha.md A6; docs/faults.md):
//
//   APPL_DB (db 0)      PORT_TABLE:<port>            oper_status "up" / "down" (portsorch writes
//                                                    it on SAI port_state_change: event-driven);
//                                                    speed (Mbit/s: the line rate the counter
//                                                    deltas are checked against, port_monitor.h)
//   COUNTERS_DB (db 2)  COUNTERS_PORT_NAME_MAP       <port> -> port counter OID
//                       COUNTERS:<port oid>          SAI_PORT_STAT_IF_IN_ERRORS,
//                       ..._IF_IN_DISCARDS,
//                                                    ..._IF_OUT_ERRORS, ..._IF_OUT_DISCARDS,
//                                                    ..._IF_IN_FEC_NOT_CORRECTABLE_FRAMES,
//                                                    SAI_PORT_STAT_PFC_<0..7>_RX_PKTS / _TX_PKTS,
//                                                    ..._IF_IN_UCAST_PKTS, ..._IF_OUT_UCAST_PKTS
//                                                    (flex counter group PORT, every 1 s)
//                       COUNTERS_QUEUE_NAME_MAP      <port>:<queue> -> queue counter OID
//                       COUNTERS:<queue oid>         SAI_QUEUE_STAT_DROPPED_PACKETS,
//                                                    SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS (group
//                                                    QUEUE, every 10 s; ECN where supported)
//   CONFIG_DB (db 4)    DEVICE_NEIGHBOR|<port>       name (the neighbour's host name)
//
// A missing counter field counts as 0; a port without a name-map entry has no counters (yet).
// The name maps are read once and again when a watched port is missing from them, every 5
// counter reads while a watched port has no queues in them, and every 60 counter reads (orchagent
// rebuilds them after a restart; counters_db.h, shared with the enforcement verifier). One
// pipelined round trip per database per read; every call is one attempt (RedisSession: kUnavailable
// on connection errors and timeouts).
//
// Thread-safety: not thread-safe (port_monitor.h).
#ifndef CRUX_SWITCH_ADAPTERS_SONIC_PORT_MONITOR_H_
#define CRUX_SWITCH_ADAPTERS_SONIC_PORT_MONITOR_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crux/switch_adapters/counters_db.h"
#include "crux/switch_adapters/port_monitor.h"
#include "crux/switch_adapters/redis_session.h"

namespace crux::switch_adapters {

struct SonicMonitorOptions {
  RedisEndpoint endpoint;  // Socket or host:port and timeouts; `db` is ignored (the dbs below).
  int appl_db = 0;
  int counters_db = 2;
  int config_db = 4;
  std::vector<std::string> ports;  // Watched ports, non-empty.
};

class SonicPortMonitor final : public PortMonitor {
 public:
  // Errors name the field ("sonic.ports: must not be empty").
  static core::Result<std::unique_ptr<SonicPortMonitor>> Create(SonicMonitorOptions options);

  core::Result<std::vector<PortReading>> ReadPorts(bool with_counters) override;
  core::Result<std::map<std::string, std::string>> Neighbors() override;

 private:
  explicit SonicPortMonitor(SonicMonitorOptions options);

  SonicMonitorOptions options_;
  RedisSession appl_;
  RedisSession counters_;
  RedisSession config_;
  CountersNameMapCache names_;  // COUNTERS_DB name maps.
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_SONIC_PORT_MONITOR_H_
