#include "crux/daemon/app/daemon.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace crux::daemon {
namespace {

int64_t SystemUnixNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

JobTracker::Options TrackerOptions(const DaemonConfig& c) {
  JobTracker::Options o;
  o.dscp_pool = c.qos.dscp_pool;
  o.default_lease = core::Duration::Millis(c.lease_ms);
  o.max_lease = core::Duration::Millis(c.max_lease_ms);
  o.max_jobs = c.limits.max_jobs;
  o.max_jobs_per_connection = c.limits.max_jobs_per_connection;
  o.max_jobs_per_key = c.limits.max_jobs_per_key;
  return o;
}

core::ControlLoopOptions LoopOptions(const DaemonConfig& c) {
  core::ControlLoopOptions o;
  o.debounce = core::Duration::Millis(c.debounce_ms);
  o.min_replan_interval = core::Duration::Millis(c.min_replan_interval_ms);
  o.reoptimize_interval =
      c.planner.stable ? core::Duration::Millis(c.reoptimize_interval_ms) : core::Duration::Zero();
  o.reoptimize_min_gain = c.reoptimize_min_gain;
  o.reoptimize_in_background = true;  // ControlHost: beside the runs, on reoptimize_worker_.
  o.replan_threshold_pct = c.replan_threshold_pct;
  o.profiling_samples = c.profiling_samples;
  o.qos = c.qos;
  const FaultsConfig& f = c.faults;
  o.faults.automatic = f.automatic;
  o.faults.evidence_window = core::Duration::Millis(f.evidence_window_ms);
  o.faults.evaluate_interval = core::Duration::Millis(f.evaluate_interval_ms);
  o.faults.localisation.gray_ratio = f.gray_ratio;
  o.faults.localisation.min_flows = f.min_flows;
  o.faults.expectation = f.expectation == "own_best" ? core::FlowExpectation::kOwnBest
                                                     : core::FlowExpectation::kPlanShare;
  o.faults.min_jobs = f.min_jobs;
  o.faults.counter_errors_per_s = f.counter_errors_per_s;
  o.faults.nic_loss_per_s = f.nic_loss_per_s;
  o.faults.counter_capacity_fraction = f.counter_capacity_fraction;
  o.faults.min_dwell = core::Duration::Millis(f.min_dwell_ms);
  o.faults.max_hold = core::Duration::Millis(f.max_hold_ms);
  o.faults.stable_decay = core::Duration::Millis(f.stable_decay_ms);
  o.faults.quarantine_downtime = core::Duration::Millis(f.quarantine_downtime_ms);
  o.faults.probes.enabled = f.probes;
  o.faults.probes.max_per_job = f.probes_per_job;
  o.faults.probes.max_total = f.max_probes;
  o.faults.probes.interval = core::Duration::Millis(f.probe_interval_ms);
  o.faults.probes.size = core::Bytes::Of(f.probe_bytes);
  // No o.impact: cruxd estimates the shadow accounting off the plan's path (PlanApplier).
  return o;
}

}  // namespace

// ---- Daemon ----

Daemon::Daemon(const DaemonConfig& config, core::Topology topology, std::string topology_source,
               Store* store, EventLoop* loop, Metrics* metrics, bool plan_in_background)
    : config_(config),
      store_(store),
      loop_(loop),
      metrics_(metrics),
      topo_(std::move(topology), std::move(topology_source)),
      tracker_(TrackerOptions(config)),
      enforcer_(metrics, &topo_.nominal(), SystemUnixNanos),
      store_health_(metrics),
      refusals_(metrics),
      writer_(std::make_unique<StoreWriter>(store, loop, plan_in_background)),
      control_(
          loop, &topo_, LoopOptions(config), ToPlannerOptions(config.planner),
          [this](PlanRun run) { applier_.Apply(std::move(run)); },
          [this](const std::vector<core::LinkDecision>& decisions) { faults_.Apply(decisions); },
          plan_in_background ? ControlHost::Executor([this](WorkerThread::CancellableWork work) {
            worker_->Post(std::move(work));
          })
                             : ControlHost::Executor()),
      rows_(&tracker_, &parts_, &control_.loop(), &topo_.nominal()),
      journal_(&control_.loop(), &rows_, topo_.shared_nominal(), loop, writer_.get(),
               &store_health_, core::Duration::Millis(config.profile_store_interval_ms)),
      faults_(&control_, &topo_, loop, metrics, writer_.get(), &store_health_),
      applier_(&config_, loop, metrics, &topo_, &tracker_, &enforcer_, &control_, &journal_,
               writer_.get(), &store_health_),
      gateway_(&config_, loop, metrics, &topo_, &tracker_, &parts_, &enforcer_, &control_,
               &journal_, &rows_, &refusals_),
      admin_(&config_, loop, metrics, &topo_, &tracker_, &parts_, &enforcer_, &control_, &faults_,
             &applier_, &store_health_, &refusals_, &gateway_, &lag_),
      client_queue_(
          "client", loop,
          TypedQueue<protocol::Inbound>::BatchHandler(
              [this](std::vector<protocol::Inbound> batch) { ProcessClientBatch(batch); })),
      admin_queue_("admin", loop,
                   TypedQueue<protocol::Inbound>::ItemHandler(
                       [this](protocol::Inbound in) { ProcessAdmin(in); })),
      worker_(plan_in_background ? std::make_unique<WorkerThread>() : nullptr),
      impact_worker_(plan_in_background ? std::make_unique<WorkerThread>() : nullptr),
      reoptimize_worker_(plan_in_background ? std::make_unique<WorkerThread>() : nullptr) {
  enforcer_.SetQosConfig(config.qos);
  if (reoptimize_worker_) {
    control_.SetReoptimizeExecutor(
        [this](WorkerThread::CancellableWork work) { reoptimize_worker_->Post(std::move(work)); });
  }
  if (impact_worker_) {
    applier_.SetImpactExecutor(
        [this](WorkerThread::CancellableWork work) { impact_worker_->Post(std::move(work)); });
  }
}

Daemon::~Daemon() {
  FlushProfiles();
  worker_.reset();  // Cancel and join a run in flight before the state it reports to goes.
  impact_worker_.reset();
  reoptimize_worker_.reset();
  writer_.reset();  // Runs every write submitted (the profiles above included), then joins.
}

core::Result<std::unique_ptr<Daemon>> Daemon::Create(const DaemonConfig& config,
                                                     core::Topology topology,
                                                     std::string topology_source, Store* store,
                                                     EventLoop* loop, Metrics* metrics,
                                                     bool plan_in_background) {
  std::unique_ptr<Daemon> d(new Daemon(config, std::move(topology), std::move(topology_source),
                                       store, loop, metrics, plan_in_background));
  CRUX_RETURN_IF_ERROR(d->Restore());
  d->admin_.SetQuarantinedJobs(d->quarantined_jobs_);
  return d;
}

void Daemon::SetClientSender(Sender s) {
  gateway_.SetSender(s);
  enforcer_.SetSender(std::move(s));
}

void Daemon::SetWallClock(std::function<int64_t()> unix_ns) {
  enforcer_.SetWallClock(std::move(unix_ns));
}

void Daemon::AddTransportCounters(const std::string& endpoint, CounterSource source) {
  counter_sources_.emplace_back(endpoint, std::move(source));
}

void Daemon::Start() {
  ScheduleSweep();
  ScheduleRefresh();
  ScheduleLagProbe();
  // The first plan computes the switches' desired state (and, after a restart, reproduces the
  // applied plan from the restored inputs).
  control_.Invalidate(tracker_.jobs().empty() ? "start" : "restart");
  RefreshMetrics();
}

void Daemon::ScheduleSweep() {
  core::Duration every =
      std::min(core::Duration::Millis(config_.lease_ms / 4), core::Duration::Millis(1000));
  every = std::max(every, core::Duration::Millis(10));
  loop_->RunAfter(every, [this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;
    SweepLeases();
    ScheduleSweep();
  });
}

void Daemon::ScheduleRefresh() {
  loop_->RunAfter(core::Duration::Millis(1000), [this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;
    if (!flushing_) FlushChunk();
    RefreshMetrics();
    ScheduleRefresh();
  });
}

void Daemon::FlushChunk() {
  // A chunk is one transaction of at most kFlushChunkRows rows (~10 ms); the next chunk is
  // posted behind the messages waiting meanwhile.
  flushing_ = journal_.FlushProfiles(kFlushChunkRows) > 0;
  if (flushing_) loop_->Post([this] { FlushChunk(); });
}

void Daemon::ScheduleLagProbe() {
  // Every 100 ms: the time a posted item waits before it runs (what every message waits too).
  loop_->RunAfter(core::Duration::Millis(100), [this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;
    const core::Duration posted = loop_->Now();
    loop_->Post([this, posted, alive] {
      if (alive.expired()) return;
      const core::Duration lag = loop_->Now() - posted;
      lag_.Add(lag);
      if (metrics_) metrics_->ObserveLoopLag(lag.ToSeconds());
    });
    ScheduleLagProbe();
  });
}

void Daemon::SweepLeases() {
  gateway_.PartsExpired(tracker_.ExpireParts(loop_->Now()));
  for (const std::string& id : tracker_.Expire(loop_->Now())) {
    // The session is already gone; the rest of JobGone (store, control loop) still applies.
    gateway_.JobGone(id, "lease expired");
  }
}

void Daemon::RefreshMetrics() {
  refusals_.Log(loop_->Now().nanos() / 1000000);
  Metrics* m = metrics_;
  if (!m) return;
  std::map<std::string, int64_t> by_state = {{"registered", 0}, {"profiling", 0}, {"scheduled", 0}};
  for (const auto& [id, j] : control_.loop().jobs()) {
    ++by_state[std::string(core::JobPhaseName(j.phase))];
  }
  m->SetJobs(by_state);
  m->SetClients(static_cast<int64_t>(tracker_.DistinctPeers()));
  m->SetSwitches(static_cast<int64_t>(enforcer_.switch_count()));
  m->SetEpoch(control_.loop().epoch());
  const ReoptimizeStats& re = control_.reoptimize_stats();
  m->SetReoptimizations(re.adopted, re.kept, re.discarded, re.failed);
  m->SetQueueDepth("client", client_queue_.depth());
  m->SetQueueDepth("admin", admin_queue_.depth());
  for (const auto& [endpoint, source] : counter_sources_) {
    const protocol::ServerCounters now = source();
    protocol::ServerCounters& last = last_counters_[endpoint];
    m->AddError(endpoint, "malformed", now.malformed - last.malformed);
    m->AddError(endpoint, "too_large", now.too_large - last.too_large);
    m->AddError(endpoint, "unsupported_version",
                now.unsupported_version - last.unsupported_version);
    m->AddError(endpoint, "invalid_argument", now.invalid - last.invalid);
    m->AddError(endpoint, "send_failed", now.send_failed - last.send_failed);
    refusals_.Count("unauthorised_key", now.auth_refused - last.auth_refused);
    refusals_.Count("identity", now.refused_identity - last.refused_identity);
    refusals_.Count("mechanism", now.refused_mechanism - last.refused_mechanism);
    refusals_.Count("handshake", now.refused_handshake - last.refused_handshake);
    m->SetQueueDepth(endpoint + "_send", static_cast<int64_t>(now.queued));
    std::vector<double> waited(now.send_queue_buckets.size());
    for (size_t i = 0; i < waited.size(); ++i) {
      waited[i] = static_cast<double>(now.send_queue_buckets[i] - last.send_queue_buckets[i]);
    }
    m->ObserveSendQueue(
        endpoint, waited,
        static_cast<double>(now.send_queue_wait_ns - last.send_queue_wait_ns) / 1e9);
    last = now;
  }
  refusals_.Log(loop_->Now().nanos() / 1000000);
}

std::vector<std::string> Daemon::Reload(const DaemonConfig& c) {
  DaemonConfig& config = config_;
  std::vector<std::string> ignored = RestartOnlyChanges(config, c);
  DaemonConfig next = c;
  KeepRestartOnly(config, &next);  // Restart-only keys keep their running values (config.h).
  if (core::Status s = core::ValidateQosConfig(next.qos); !s.ok()) {
    spdlog::error("qos config not applied (keeps the running one): {}", s.ToString());
    next.qos = config.qos;
  }
  next.lease_ms = std::min(next.lease_ms, next.max_lease_ms);
  config = next;
  tracker_.SetOptions(TrackerOptions(config));
  enforcer_.SetQosConfig(config.qos);
  control_.SetOptions(LoopOptions(config));
  if (core::Status s = control_.SetPlannerOptions(ToPlannerOptions(config.planner)); !s.ok()) {
    spdlog::error("planner options not applied: {}", s.ToString());
  }
  spdlog::info("config reloaded from {} (dry_run {}, debounce {} ms, lease {} ms)", c.source,
               config.dry_run, config.debounce_ms, config.lease_ms);
  for (const auto& k : ignored) spdlog::warn("config key '{}' changed: needs a restart", k);
  control_.Invalidate("config reload");
  return ignored;
}

}  // namespace crux::daemon
