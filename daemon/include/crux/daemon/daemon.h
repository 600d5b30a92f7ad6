// Daemon: cruxd's modules wired together on one event loop.
//
//   RouterServer I/O threads --(TypedQueue<Inbound> "client" / "admin")--> gateway (this class:
//   topology checks, dispatch) --> JobTracker / TopologyManager / Enforcer (switch registry)
//   --(PlannerRunner::Request, debounced)--> PlannerRunner --(TypedQueue<PlanResult> "plans")-->
//   OnPlan: diff against the applied plan, bump and persist the epoch, audit --> Enforcer
//   (Assignment pushes, switch states).
//
// Every request gets exactly one reply (its specific reply, an Ack or an Error); refusals are
// counted in crux_errors_total{endpoint,kind} and never change state, so a bad peer never
// affects anyone else. Pushes a request causes (the current assignment after a re-registration
// or a heartbeat with a stale epoch) are sent after its reply.
//
// Persistence: every state change is written to the Store before it is acknowledged or pushed;
// Create() restores jobs, profiles, the applied plan, the epoch and link overrides, so after a
// kill -9 clients re-register idempotently (already_known) and keep their assignment.
//
// Identities and roles (docs/protocol.md): with CURVE, SetKeyGrants() installs what each key may
// do; job messages need a job key, switch messages a switch key for that switch. Refusals of
// identity, role, ownership, connection binding and quotas are counted by reason
// (crux_auth_refused_total{reason}, `cruxctl status`) together with the transport's (unauthorised
// keys, mechanism mismatches, failed handshakes, routing ids bound to other keys) and logged at
// most once per kRefusalLogEvery per reason.
//
// Store health: a failed store write is logged, counted, shown by `cruxctl status` (store_ok,
// store_error) and the crux_store_healthy gauge, and reported to the health listener (cruxd:
// sd_notify STATUS); a re-plan that could not be stored is retried with backoff until the store
// works again.
//
// State id: every Assignment and SwitchQosState carries the store's state_id; a heartbeat or
// hello reporting another state id gets the current assignment / state again.
//
// Thread-safety: OnClientInbound/OnAdminInbound are thread-safe (they only enqueue); everything
// else runs on the loop thread.
#ifndef CRUX_DAEMON_DAEMON_H_
#define CRUX_DAEMON_DAEMON_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/backoff.h"
#include "crux/core/topology.h"
#include "crux/daemon/config.h"
#include "crux/daemon/enforcer.h"
#include "crux/daemon/event_loop.h"
#include "crux/daemon/job_tracker.h"
#include "crux/daemon/metrics.h"
#include "crux/daemon/planner_runner.h"
#include "crux/daemon/store.h"
#include "crux/daemon/topology_manager.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"

namespace crux::daemon {

inline constexpr const char* kCruxdVersion = "0.1.0";
inline constexpr int64_t kRefusalLogEveryMs = 10000;

class Daemon {
 public:
  // Restores the persisted state from `store`. `store`, `loop` and `metrics` must outlive the
  // daemon. Errors: a stored job or link that does not fit the topology is logged and dropped;
  // a store read failure is returned.
  // `plan_in_background`: re-plans run on a worker thread (cruxd); false runs them inline on
  // the loop (deterministic tests on ManualEventLoop).
  static core::Result<std::unique_ptr<Daemon>> Create(const DaemonConfig& config,
                                                      core::Topology topology,
                                                      std::string topology_source, Store* store,
                                                      EventLoop* loop, Metrics* metrics,
                                                      bool plan_in_background = false);
  ~Daemon();

  // Where replies and pushes go (the RouterServers' Send). Set before Start().
  void SetClientSender(Sender s);
  void SetAdminSender(Sender s);
  // Transport counters for the metrics (auth refusals, malformed frames, ...).
  using CounterSource = std::function<protocol::ServerCounters()>;
  void AddTransportCounters(const std::string& endpoint, CounterSource source);

  // Arms the lease sweep and metrics refresh; re-plans if state was restored.
  void Start();

  // Curve only: what each authorised key may do (protocol::GrantsOf). Without grants (insecure
  // mode) roles are not checked. Loop thread (App calls it before Start and on SIGHUP).
  void SetKeyGrants(std::optional<protocol::KeyGrants> grants) { grants_ = std::move(grants); }
  // Called with "" when the store works again after a failure, else with the failure.
  void SetStoreHealthListener(std::function<void(const std::string& error)> f) {
    store_health_listener_ = std::move(f);
  }

  // Thread-safe: hand a message to the loop.
  void OnClientInbound(protocol::Inbound in) { client_queue_.Push(std::move(in)); }
  void OnAdminInbound(protocol::Inbound in) { admin_queue_.Push(std::move(in)); }

  // Loop thread: handle one message, send its reply, then the pushes it caused.
  void ProcessClient(const protocol::Inbound& in);
  void ProcessAdmin(const protocol::Inbound& in);

  // Loop thread: applies the live keys of `c`; returns the restart-only keys that changed
  // (ignored until restart).
  std::vector<std::string> Reload(const DaemonConfig& c);

  // Loop thread: runs the lease sweep now.
  void SweepLeases();
  // Loop thread: writes the profiles reported since the last flush in one transaction. Runs
  // every second (metrics refresh) and at destruction; a report that changes a job's lifecycle
  // state is written at once (so a kill -9 loses at most ~1 s of non-state-changing reports,
  // which clients re-send anyway).
  void FlushProfiles();
  void RefreshMetrics();

  // Introspection (loop thread).
  uint64_t epoch() const { return epoch_; }
  const JobTracker& tracker() const { return tracker_; }
  const TopologyManager& topology() const { return topo_; }
  const PlannerRunner& runner() const { return runner_; }
  const Enforcer& enforcer() const { return enforcer_; }
  const std::map<std::string, v1::Assignment>& applied() const { return applied_; }
  const DaemonConfig& config() const { return config_; }
  uint64_t replans() const { return replans_; }
  uint64_t state_id() const { return state_id_; }
  const std::string& store_error() const { return store_error_; }
  // Refusals since start by reason (transport and daemon), as of the last RefreshMetrics().
  const std::map<std::string, uint64_t>& refusals() const { return refusals_; }
  size_t quarantined_jobs() const { return quarantined_jobs_; }

 private:
  Daemon(const DaemonConfig& config, core::Topology topology, std::string topology_source,
         Store* store, EventLoop* loop, Metrics* metrics, bool plan_in_background);
  core::Status Restore();

  v1::Envelope HandleClient(const protocol::Inbound& in);
  v1::Envelope HandleAdmin(const protocol::Inbound& in);
  v1::Envelope Refuse(const std::string& endpoint, uint64_t request_id, const Refusal& r);
  // Role check of a client-endpoint message (curve only).
  Refusal Authorise(const protocol::Inbound& in) const;
  void CountRefusal(const std::string& reason, uint64_t n = 1);
  void LogRefusals();
  // Records the outcome of a store write (health, metric, listener); returns `s`.
  core::Status Stored(core::Status s, const char* what);
  void RetryPlanAfterStoreFailure();

  // Client messages.
  v1::Envelope OnRegister(const protocol::Inbound& in);
  v1::Envelope OnProfile(const protocol::Inbound& in);
  v1::Envelope OnHeartbeat(const protocol::Inbound& in);
  v1::Envelope OnEndJob(const protocol::Inbound& in);
  v1::Envelope OnAck(const protocol::Inbound& in);
  v1::Envelope OnSwitchHello(const protocol::Inbound& in);
  v1::Envelope OnSwitchApplied(const protocol::Inbound& in);

  // Admin messages (admin.cc).
  v1::Envelope AdminStatus(uint64_t rid);
  v1::Envelope AdminListJobs(uint64_t rid);
  v1::Envelope AdminJob(uint64_t rid, const v1::JobRequest& r);
  v1::Envelope AdminListLinks(uint64_t rid, const v1::ListLinksRequest& r);
  v1::Envelope AdminSetLink(uint64_t rid, const v1::SetLinkRequest& r);
  v1::Envelope AdminPlanDryRun(uint64_t rid);
  v1::Envelope AdminListSwitches(uint64_t rid);
  v1::JobSummary Summary(const std::string& id, const JobEntry& j) const;
  v1::LinkInfo LinkInfoFor(core::LinkId id, const std::vector<double>& load,
                           const std::vector<uint32_t>& jobs) const;
  // Per directed link: committed load (bps) and jobs, from the last plan.
  void LinkLoads(std::vector<double>* load, std::vector<uint32_t>* jobs) const;

  void OnPlan(PlanResult r);
  // The plan's jobs as the QoS computation sees them (colour, applied level, switches crossed).
  std::vector<core::QosJob> QosJobs(const PlanResult& r) const;
  // Recomputes the switches' desired QoS state and pushes it to the changed ones.
  void UpdateSwitches(const PlanResult& r, bool assignments_changed);
  void JobGone(const std::string& id, const std::string& reason);
  void Defer(const std::string& peer, v1::Envelope msg) {
    deferred_.emplace_back(peer, std::move(msg));
  }
  void ScheduleSweep();
  void ScheduleRefresh();

  DaemonConfig config_;
  Store* store_;
  EventLoop* loop_;
  Metrics* metrics_;
  TopologyManager topo_;
  JobTracker tracker_;
  Enforcer enforcer_;
  PlannerRunner runner_;
  Sender client_sender_;
  Sender admin_sender_;
  TypedQueue<protocol::Inbound> client_queue_;
  TypedQueue<protocol::Inbound> admin_queue_;
  TypedQueue<PlanResult> plan_queue_;

  std::map<std::string, v1::Assignment> applied_;
  uint64_t epoch_ = 0;
  std::optional<PlanResult> last_plan_;
  uint64_t replans_ = 0;
  double last_replan_ms_ = 0;
  core::Duration started_;
  std::vector<std::pair<std::string, v1::Envelope>> deferred_;
  std::set<std::string> dirty_profiles_;  // Jobs whose latest profile is not stored yet.
  std::vector<std::pair<std::string, CounterSource>> counter_sources_;
  std::map<std::string, protocol::ServerCounters> last_counters_;
  uint64_t state_id_ = 0;
  std::optional<protocol::KeyGrants> grants_;
  std::map<std::string, uint64_t> refusals_;
  struct RefusalLog {
    uint64_t logged = 0;   // Count at the last log line.
    int64_t last_ms = -1;  // Loop time of the last log line.
  };
  std::map<std::string, RefusalLog> refusal_log_;
  std::string store_error_;
  std::function<void(const std::string&)> store_health_listener_;
  core::ExponentialBackoff store_retry_{
      {.initial = core::Duration::Millis(1000), .max = core::Duration::Millis(30000)}};
  bool store_retry_armed_ = false;
  size_t quarantined_jobs_ = 0;
  // Last member: destroyed (joined) first, before the state a running re-plan reads.
  std::unique_ptr<WorkerThread> worker_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_DAEMON_H_
