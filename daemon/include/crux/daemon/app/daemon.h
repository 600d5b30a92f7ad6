// Daemon: cruxd's services wired together on one event loop.
//
//   RouterServer I/O threads --(TypedQueue<Inbound> "client" in batches, "admin")--> Gateway,
//   AdminService
//   Gateway: authorise, convert once (wire -> core), sessions (JobTracker), control-loop events
//   ControlHost: core::ControlLoop (every control rule) + the planner on a worker thread
//   PlanApplier: commit a finished run (store, loop, pushes, switch states, a new DaemonView)
//   AdminService: cruxctl, from the published DaemonView (dry runs on the worker)
//
//   FaultService: link health decisions and admin pins into the topology
//   JobJournal: the job rows not stored yet, written in batches; StoreWriter: every write, FIFO
//
// This class owns them and the state they share (the sessions, the topology, the part reports,
// the switch registry), hands each service the few it uses, and runs what is periodic: lease
// expiry, the profile flush, metrics (incl. the transport's refusal counters) and the event-loop
// lag probe.
//
// Identities and roles (docs/protocol.md): with CURVE, SetKeyGrants() installs what each key may
// do; the Gateway checks every client-endpoint message against them. Store health: see
// store_health.h and docs/daemon.md. State id: every Assignment and SwitchQosState carries the
// store's state id.
//
// Persistence: every state change is written to the Store before it is acknowledged or pushed;
// Create() restores jobs, profiles (latest and planned), the applied plan, the epoch and link
// overrides, so after a kill -9 clients re-register idempotently and keep their assignment, and
// the restart plan reproduces the applied one.
//
// Thread-safety: OnClientInbound/OnAdminInbound are thread-safe (they only enqueue); everything
// else runs on the loop thread.
#ifndef CRUX_DAEMON_APP_DAEMON_H_
#define CRUX_DAEMON_APP_DAEMON_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/topology/topology.h"
#include "crux/daemon/config/config.h"
#include "crux/daemon/control/control_host.h"
#include "crux/daemon/control/fault_service.h"
#include "crux/daemon/control/plan_applier.h"
#include "crux/daemon/rpc/admin.h"
#include "crux/daemon/rpc/gateway.h"
#include "crux/daemon/rpc/refusal_book.h"
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
#include "crux/protocol/server.h"

namespace crux::daemon {

class Daemon {
 public:
  // Restores the persisted state from `store`. `store`, `loop` and `metrics` must outlive the
  // daemon. Errors: a store read failure is returned; stored jobs or links that do not fit the
  // topology are kept in the store and not served (quarantined; logged).
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
  // Optional: the client endpoint's sender of encoded frames (pushes of pre-serialized
  // assignments; Enforcer::SetEncodedSender).
  void SetClientEncodedSender(Enforcer::EncodedSender s) {
    enforcer_.SetEncodedSender(std::move(s));
  }
  void SetAdminSender(Sender s) { admin_.SetSender(std::move(s)); }
  // High availability: the leader's term, stamped on every push (Enforcer::SetTerm).
  void SetTerm(uint64_t term) { enforcer_.SetTerm(term); }
  // Transport counters for the metrics (refusals, malformed frames, ...).
  using CounterSource = std::function<protocol::ServerCounters()>;
  void AddTransportCounters(const std::string& endpoint, CounterSource source);
  // Wall clock for Assignment.sent_unix_ns (default: the system clock).
  void SetWallClock(std::function<int64_t()> unix_ns);

  // Arms the lease sweep, metrics refresh and lag probe; asks for the first plan (which also
  // establishes the switches' desired state).
  void Start();

  // Curve only: what each authorised key may do (protocol::GrantsOf). Without grants (insecure
  // mode) roles are not checked. Loop thread (App calls it before Start and on SIGHUP).
  void SetKeyGrants(std::optional<protocol::KeyGrants> grants) {
    gateway_.SetKeyGrants(std::move(grants));
  }
  // Called with "" when the store works again after a failure, else with the failure.
  void SetStoreHealthListener(std::function<void(const std::string& error)> f) {
    store_health_.SetListener(std::move(f));
  }

  // Thread-safe: hand a message to the loop.
  void OnClientInbound(protocol::Inbound in) { client_queue_.Push(std::move(in)); }
  void OnClientBatch(std::vector<protocol::Inbound> batch) {
    client_queue_.PushBatch(std::move(batch));
  }
  void OnAdminInbound(protocol::Inbound in) { admin_queue_.Push(std::move(in)); }

  // Loop thread: handle one message, send its reply, then the pushes it caused.
  void ProcessClient(const protocol::Inbound& in) { gateway_.Process(in); }
  void ProcessClientBatch(const std::vector<protocol::Inbound>& batch) {
    gateway_.ProcessBatch(batch);
  }
  void ProcessAdmin(const protocol::Inbound& in) { admin_.Process(in); }

  // Loop thread: applies the live keys of `c`; returns the restart-only keys that changed
  // (ignored until restart).
  std::vector<std::string> Reload(const DaemonConfig& c);

  void SweepLeases();
  void FlushProfiles() { journal_.FlushAll(); }  // Deferred latest profiles too.
  void RefreshMetrics();

  // Introspection (loop thread).
  uint64_t epoch() const { return control_.loop().epoch(); }
  const JobTracker& tracker() const { return tracker_; }
  const TopologyManager& topology() const { return topo_; }
  const ControlHost& plans() const { return control_; }
  const core::ControlLoop& control() const { return control_.loop(); }
  const Gateway& gateway() const { return gateway_; }
  const Enforcer& enforcer() const { return enforcer_; }
  const core::AppliedPlan& applied() const { return control_.loop().applied(); }
  const DaemonConfig& config() const { return config_; }
  uint64_t replans() const { return applier_.replans(); }
  uint64_t state_id() const { return enforcer_.state_id(); }
  const std::string& store_error() const { return store_health_.error(); }
  const std::map<std::string, uint64_t>& refusals() const { return refusals_.counts(); }
  size_t quarantined_jobs() const { return quarantined_jobs_; }
  std::shared_ptr<const DaemonView> view() const { return applier_.view(); }

 private:
  Daemon(const DaemonConfig& config, core::Topology topology, std::string topology_source,
         Store* store, EventLoop* loop, Metrics* metrics, bool plan_in_background);
  // Start-up (restore.cc): reads the store table by table, in this order. Errors: a store read
  // (or the write of a recoloured job) failed; a row that does not fit is logged and skipped.
  core::Status Restore();
  // The topology check, the state id; returns the stored epoch.
  core::Result<uint64_t> RestoreMeta();
  // The admin link pins; returns how many are stored.
  core::Result<size_t> RestoreLinks();
  // The jobs, their host parts and profiles; returns how many are stored.
  core::Result<size_t> RestoreJobs();
  // One stored job (`parts`: its stored host parts, null: a job registered whole).
  core::Status RestoreJob(const StoredJob& row, const std::vector<StoredPart>* parts);
  // The stored host parts of one restored job (rows of one job id) and their reports. A part
  // that does not parse or fit is logged and left in the state file.
  void RestoreParts(const std::vector<StoredPart>& rows);
  // The applied plan of the restored jobs, in force at `epoch`; returns how many were restored.
  core::Result<size_t> RestorePlan(uint64_t epoch);
  void ScheduleSweep();
  void ScheduleRefresh();
  void ScheduleLagProbe();
  // Writes the dirty profiles in chunks (JobJournal::FlushProfiles), one posted task per chunk.
  void FlushChunk();
  static constexpr size_t kFlushChunkRows = 500;
  bool flushing_ = false;  // A chunked flush is under way.

  // What the services share (they hold pointers to it: constructed first, destroyed last).
  DaemonConfig config_;  // The running config (Reload).
  Store* store_;         // Read and written directly only by the restore; then through writer_.
  EventLoop* loop_;
  Metrics* metrics_;
  TopologyManager topo_;
  JobTracker tracker_;
  PartProfiles parts_;  // Host parts' latest reports (multi-host jobs).
  Enforcer enforcer_;
  StoreHealth store_health_;
  RefusalBook refusals_;
  size_t quarantined_jobs_ = 0;  // Stored jobs the restore could not serve.
  // Every store write after start-up. Reset first in the destructor (it runs the writes left).
  std::unique_ptr<StoreWriter> writer_;

  // The services, each given what it uses.
  ControlHost control_;
  JobRows rows_;
  JobJournal journal_;
  FaultService faults_;
  PlanApplier applier_;
  Gateway gateway_;
  LagTracker lag_;
  AdminService admin_;
  TypedQueue<protocol::Inbound> client_queue_;
  TypedQueue<protocol::Inbound> admin_queue_;
  std::vector<std::pair<std::string, CounterSource>> counter_sources_;
  std::map<std::string, protocol::ServerCounters> last_counters_;
  // The daemon's own timers (sweep, refresh, lag probe) hold a weak reference: a loop that
  // outlives the daemon (a test that reopens it) drops them.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // Last member: destroyed (joined, its run cancelled) first, before the state a run reads.
  std::unique_ptr<WorkerThread> worker_;
  // The shadow accounting's own thread (PlanApplier::SetImpactExecutor): an estimate never
  // delays a plan. Null without plan_in_background (estimated on the loop thread).
  std::unique_ptr<WorkerThread> impact_worker_;
  // Re-optimisations beside the runs (ControlHost::SetReoptimizeExecutor): no event waits for
  // one. A re-optimisation in progress is not cancellable inside the planner: shutdown waits for
  // it (seconds at 10,000 jobs). Null without plan_in_background (inline on the loop thread).
  std::unique_ptr<WorkerThread> reoptimize_worker_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_APP_DAEMON_H_
