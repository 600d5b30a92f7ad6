// PortWatcher: the switch agent's view of its ports (issue #14, docs/faults.md). A thread of its
// own polls the backend's PortMonitor (port_monitor.h) - blocking Redis reads never stall the
// agent's loop - and turns the readings into telemetry reports (PortTracker, pure) that the loop
// takes and sends to cruxd as SwitchTelemetry:
//
//   * port state every `state_poll` (250 ms by default: a few pipelined HGETs): a change of any
//     port's oper_status is reported at once, with every watched port's state;
//   * counters every `counter_poll` (1 s, SONiC's PORT flex-counter interval): every port's
//     state and its counter deltas since the previous counter reading. A port's sample whose
//     counters went backwards (a reset) or grew beyond its line rate (JudgeCounters,
//     port_monitor.h: a garbled value) carries no delta: it is counted, logged, and becomes the
//     baseline of the next delta, so it never reaches cruxd as errors (issue #31);
//   * neighbours (the topology node at the other end of each port) from --neighbors, else from
//     the monitor (CONFIG_DB DEVICE_NEIGHBOR) at start and every `neighbor_refresh`.
//
// Thread-safety: Take/last_error/counters from any one thread (the agent's loop); the monitor is
// used only on the watcher's thread. The destructor stops and joins it (bounded by one monitor
// call: the backend's timeouts).
#ifndef CRUX_SWITCH_ADAPTERS_AGENT_PORT_WATCHER_H_
#define CRUX_SWITCH_ADAPTERS_AGENT_PORT_WATCHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "crux/core/base/clock.h"
#include "crux/core/base/units.h"
#include "crux/switch_adapters/port_monitor.h"
#include "crux/sync/thread_annotations.h"

namespace crux::switch_adapters {

struct PortReport {
  std::string port;
  std::string neighbor;  // Empty: unknown.
  std::optional<bool> oper_up;
  std::optional<PortCounterValues> delta;  // Counters since the previous counter reading.
  core::Duration interval;                 // Of `delta`.

  friend bool operator==(const PortReport&, const PortReport&) = default;
};

struct TelemetryReport {
  std::vector<PortReport> ports;
  bool state_changed = false;  // Some port's state changed (or the first reading).
  // Samples dropped from this report ("Ethernet0: in_errors grew by ..."; JudgeCounters).
  std::vector<std::string> resets;
  std::vector<std::string> implausible;
};

// Pure: readings in, reports out.
class PortTracker {
 public:
  // `fixed` neighbours (--neighbors) win over the monitor's.
  explicit PortTracker(std::map<std::string, std::string> fixed = {});
  void SetDeviceNeighbors(const std::map<std::string, std::string>& device);
  // A reading taken at `now`. A report when it holds counters (deltas from the previous counter
  // reading of each port; a port's first counter reading gives no delta, nor does a sample
  // JudgeCounters drops: it is listed in the report's resets / implausible), when some port's
  // state changed, or for the first reading; nullopt otherwise.
  std::optional<TelemetryReport> Observe(const std::vector<PortReading>& readings,
                                         core::Duration now);
  std::string NeighborOf(const std::string& port) const;

 private:
  struct Last {
    std::optional<bool> oper_up;
    std::optional<PortCounterValues> counters;
    core::Duration counters_at;
  };
  std::map<std::string, std::string> fixed_;
  std::map<std::string, std::string> device_;
  std::map<std::string, Last> last_;
  bool first_ = true;
};

class PortWatcher {
 public:
  struct Options {
    core::Duration state_poll = core::Duration::Millis(250);     // > 0.
    core::Duration counter_poll = core::Duration::Millis(1000);  // > 0.
    core::Duration neighbor_refresh = core::Duration::Millis(60000);
    std::map<std::string, std::string> neighbors;  // --neighbors (port -> node).
    size_t max_queued = 64;                        // Reports kept while the loop does not take.
  };
  struct Counters {
    uint64_t reads = 0;
    uint64_t read_errors = 0;
    uint64_t reports = 0;
    uint64_t dropped = 0;              // Reports dropped because the queue was full.
    uint64_t counter_resets = 0;       // Port samples whose counters went backwards.
    uint64_t implausible_samples = 0;  // Port samples beyond the line rate (dropped).
  };

  // Starts the thread. `monitor` is used only there.
  PortWatcher(std::unique_ptr<PortMonitor> monitor, Options options);
  ~PortWatcher();
  PortWatcher(const PortWatcher&) = delete;
  PortWatcher& operator=(const PortWatcher&) = delete;

  // The reports produced since the last call, oldest first.
  std::vector<TelemetryReport> Take() CRUX_EXCLUDES(mu_);
  std::string last_error() const CRUX_EXCLUDES(mu_);
  Counters counters() const CRUX_EXCLUDES(mu_);

 private:
  void Loop() CRUX_EXCLUDES(mu_);

  std::unique_ptr<PortMonitor> monitor_;  // Watcher thread only.
  const Options options_;
  PortTracker tracker_;  // Watcher thread only.
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<TelemetryReport> queue_ CRUX_GUARDED_BY(mu_);
  std::string last_error_ CRUX_GUARDED_BY(mu_);
  Counters counters_ CRUX_GUARDED_BY(mu_);
  bool stop_ CRUX_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts after the members above exist.
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_AGENT_PORT_WATCHER_H_
