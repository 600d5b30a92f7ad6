// HostdServer: crux-hostd's I/O around the HostAgent (host_agent.h). One thread polls, with
// zmq_poll, the DEALER connection to cruxd (one for the whole host), the host-protocol listener
// and every rank connection, and a stop eventfd; it feeds the agent and sends what it produces.
// The agent reads the NIC counters from sysfs (SysfsNicCounters at the config's sysfs_root).
// systemd: READY=1 once the socket is bound, WATCHDOG=1 from the loop, STOPPING=1 at the end.
//
// Thread-safety: Run on one thread; Stop from any thread or a signal handler.
#ifndef CRUX_HOSTD_HOSTD_SERVER_H_
#define CRUX_HOSTD_HOSTD_SERVER_H_

#include <atomic>
#include <memory>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/hostd/config.h"
#include "crux/hostd/probe.h"

namespace crux::hostd {

class HostdServer {
 public:
  // Loads the keys, binds the socket (its directory must exist: systemd's RuntimeDirectory),
  // starts connecting to cruxd. Errors name the config key ("client_key: ...").
  static core::Result<std::unique_ptr<HostdServer>> Create(
      HostdConfig config, std::vector<std::unique_ptr<HostProbe>> probes = {});
  ~HostdServer();

  // Serves until Stop(). Errors: kInternal for a broken poll loop.
  core::Status Run();
  // Async-signal-safe.
  void Stop();

  class Impl;

 private:
  explicit HostdServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `crux-hostd --status`: asks the agent at `socket` for its view. Errors: kUnavailable when no
// agent listens, kInvalidArgument for a bad reply.
core::Result<std::string> QueryStatus(const std::string& socket, int timeout_ms = 2000);

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_HOSTD_SERVER_H_
