// HostProbe: the seam for host-side probes in crux-hostd (e.g. the failure-handling issue's
// path probes over the pinned flows, NIC counters, link checks). A probe runs on crux-hostd's
// thread at its own interval with a read-only view of what the agent knows; its last result is
// part of `crux-hostd --status` (and is where a future report to cruxd would come from).
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

// What a probe may look at.
struct ProbeContext {
  const HostdConfig* config = nullptr;
  // Every QP the shims reported (device, remote GID, UDP source port, pinned), over all jobs.
  std::vector<QpInfo> qps;
  // Job id -> its current PinTable (empty when unassigned).
  std::map<std::string, PinTable> pins;
  core::Duration now;
};

struct ProbeResult {
  bool ok = true;
  std::string summary;                      // One line for the status.
  std::map<std::string, std::string> data;  // Details, e.g. per path.
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
