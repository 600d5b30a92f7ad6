// DaemonContext: cruxd's modules and the state they share, owned by Daemon and handed to its
// services (Gateway, PlanApplier, AdminService). It is wiring, not logic: each module keeps its
// own rules (JobTracker: sessions; ControlHost/core::ControlLoop: planning; Enforcer: pushes and
// the switch registry; TopologyManager: link health), and the services only route between them.
//
// Also here, small helpers the services share:
//   StoreHealth  - records the outcome of every store write (log, metric, listener, status).
//   RefusalBook  - security refusals by reason (metric, status, rate-limited log).
//   DaemonView   - what cruxctl reads: an immutable picture published at each commit.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_CONTROL_CONTEXT_H_
#define CRUX_DAEMON_CONTROL_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "crux/core/base/status.h"
#include "crux/core/control/control_loop.h"
#include "crux/daemon/config/config.h"
#include "crux/daemon/control/control_host.h"
#include "crux/daemon/control/fault_service.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/state/enforcer.h"
#include "crux/daemon/state/job_rows.h"
#include "crux/daemon/state/job_tracker.h"
#include "crux/daemon/state/part_profiles.h"
#include "crux/daemon/state/topology_manager.h"
#include "crux/daemon/store/job_journal.h"
#include "crux/daemon/store/store.h"
#include "crux/daemon/store/store_health.h"
#include "crux/daemon/store/store_writer.h"
#include "crux/protocol/curve.h"

namespace crux::daemon {

inline constexpr const char* kCruxdVersion = "0.1.0";
inline constexpr int64_t kRefusalLogEveryMs = 10000;

class RefusalBook {
 public:
  explicit RefusalBook(Metrics* metrics) : metrics_(metrics) {}
  void Count(const std::string& reason, uint64_t n = 1);
  // Logs the reasons whose count moved, at most once per kRefusalLogEveryMs each.
  void Log(int64_t now_ms);
  const std::map<std::string, uint64_t>& counts() const { return counts_; }

 private:
  struct LogState {
    uint64_t logged = 0;   // Count at the last log line.
    int64_t last_ms = -1;  // Loop time of the last log line.
  };
  Metrics* metrics_;
  std::map<std::string, uint64_t> counts_;
  std::map<std::string, LogState> log_;
};

struct DaemonView {
  uint64_t epoch = 0;
  std::shared_ptr<const core::AppliedPlan> applied;
  std::shared_ptr<const core::PlanOutcome> outcome;  // Of the last successful run (null: none).
  std::shared_ptr<const core::Topology> topology;    // The one `outcome` was planned on.
};

struct DaemonContext {
  DaemonContext(const DaemonConfig& config, core::Topology topology, std::string topology_source,
                Store* store, EventLoop* loop, Metrics* metrics);

  DaemonConfig config;
  Store* store;
  EventLoop* loop;
  Metrics* metrics;
  TopologyManager topo;
  JobTracker tracker;
  PartProfiles parts;  // Host parts' latest reports (multi-host jobs).
  Enforcer enforcer;
  std::unique_ptr<ControlHost> plans;  // Made by Daemon (it needs the done callback).
  // Applies the fault rules' decisions and the admin pins (fault_service.h). Made by Daemon,
  // after `plans`.
  std::unique_ptr<FaultService> faults;
  // Every store write after start-up (Daemon::Restore reads and writes the store directly,
  // before the first Submit). Made by Daemon.
  std::unique_ptr<StoreWriter> writer;
  // The job rows not stored yet and every write of a job's rows (job_journal.h), reading the
  // rows through `rows`. Made by Daemon, after `plans` and `writer`.
  std::unique_ptr<JobRows> rows;
  std::unique_ptr<JobJournal> journal;
  StoreHealth store_health;
  RefusalBook refusals;
  uint64_t state_id = 0;
  std::optional<protocol::KeyGrants> grants;  // Curve only.
  size_t quarantined_jobs = 0;
  std::shared_ptr<const DaemonView> view = std::make_shared<const DaemonView>();
  core::Duration started;
  uint64_t replans = 0;
  double last_replan_ms = 0;

  // Client endpoint sender (replies, pushes) and admin sender.
  Sender client_sender;
  Sender admin_sender;
};

// The job tracker, control loop and planner options a config asks for.
JobTracker::Options TrackerOptions(const DaemonConfig& c);
core::ControlLoopOptions LoopOptions(const DaemonConfig& c);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONTROL_CONTEXT_H_
