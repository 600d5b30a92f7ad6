// HostProbe: the seam for host-side probes in crux-hostd (e.g. the failure-handling issue's
// path probes over the pinned flows, NIC counters, link checks). A probe runs on crux-hostd's
// thread at its own interval with a read-only view of what the agent knows; its last result is
// part of `crux-hostd --status`; its capacity measurements (ProbeResult::capacity) are reported
// to cruxd (HostTelemetry.probes) once per round.
//
// Contract: Run must be quick (it shares the agent's thread: no blocking I/O longer than a few
// milliseconds; a probe needing more runs its own worker and returns the last result) and must
// not throw. Built in: UdpPathProbe (path_probe.h; crux-hostd's probes: config).
//
// Thread-safety: called only from the agent's thread.
#ifndef CRUX_HOSTD_PROBE_H_
#define CRUX_HOSTD_PROBE_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/hostd/config.h"
#include "crux/hostd/host_protocol.h"

namespace crux::hostd {

// One probe of the planner's (Assignment.probes) that leaves a NIC of this host.
struct PlannedProbe {
  std::string src_nic;     // Topology NIC name (a NIC of this host's config).
  std::string device;      // Its RDMA device.
  std::string dst_nic;     // Topology NIC name of the remote end.
  std::string remote_gid;  // Its address (nic_addresses), canonical GID text.
  uint16_t sport = 0;      // The UDP source port that pins the probe's path.
  int traffic_class = 0;   // The job's (dscp << 2): the probe rides the job's queue.
};

// One capacity probe a HostProbe measured (a datagram train; path_probe.h "Capacity trains"),
// as crux-hostd reports it to cruxd (HostTelemetry.probes).
struct CapacityMeasurement {
  std::vector<std::string> jobs;  // Every job whose assignment carries the probe.
  std::string src_nic;
  std::string dst_nic;
  uint16_t sport = 0;
  uint32_t sent = 0;      // Datagrams of the train.
  uint32_t received = 0;  // ... that arrived at the responder.
  bool lost = false;      // Nothing arrived, or no report came back.
  // The train arrived no more spread than it left: `bytes / transfer_time` is then a lower bound
  // (the sender's pace), not the path's capacity.
  bool sender_limited = false;
  core::Bytes bytes;             // Arrived after the first arrival.
  core::Duration transfer_time;  // First to last arrival (the responder's clock).
  core::Duration send_time;      // First to last send (the sender's clock).
};

// What a probe may look at.
struct ProbeContext {
  const HostdConfig* config = nullptr;
  // Every QP the shims reported (device, remote GID, UDP source port, pinned), over all jobs.
  std::vector<QpInfo> qps;
  // Job id -> its current PinTable (empty when unassigned).
  std::map<std::string, PinTable> pins;
  // Job id -> the probes of its assignment leaving this host's NICs (empty: none).
  std::map<std::string, std::vector<PlannedProbe>> planned;
  core::Duration now;
};

struct ProbeResult {
  bool ok = true;
  std::string summary;                      // One line for the status.
  std::map<std::string, std::string> data;  // Details, e.g. per path.
  // The round these results come from (increases with each finished round; 0: none yet) and
  // its capacity measurements, which the agent reports to cruxd once per round.
  uint64_t round = 0;
  std::vector<CapacityMeasurement> capacity;
};

class HostProbe {
 public:
  virtual ~HostProbe() = default;
  virtual std::string_view name() const = 0;
  virtual core::Duration interval() const = 0;
  virtual ProbeResult Run(const ProbeContext& context) = 0;
};

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_PROBE_H_
