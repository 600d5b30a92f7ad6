#include "crux/daemon/app/daemon.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace crux::daemon {
namespace {

// Why each refusal reason happens, for the log.
const char* RefusalMeaning(const std::string& reason) {
  if (reason == "unauthorised_key") return "CURVE client keys not in the authorised keys";
  if (reason == "mechanism") {
    return "peers without CURVE (plain ZeroMQ) on the CURVE endpoint, or CURVE peers on a plain "
           "one";
  }
  if (reason == "handshake") {
    return "failed CURVE handshakes (a client using the wrong server public key, or a plain "
           "client that hung up)";
  }
  if (reason == "identity") {
    return "messages on a routing id bound to another CURVE key (an identity takeover attempt?)";
  }
  if (reason == "role") {
    return "keys used outside their role (a job key as a switch agent, a switch key for another "
           "switch or for a job)";
  }
  if (reason == "job_owner") return "keys speaking for a job another key registered";
  if (reason == "connection") {
    return "messages for a job from a connection other than the one that registered it";
  }
  if (reason == "quota") return "registrations beyond a job quota (limits.*)";
  return "refusals";
}

int64_t SystemUnixNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// ---- context helpers ----

void RefusalBook::Count(const std::string& reason, uint64_t n) {
  if (n == 0) return;
  counts_[reason] += n;
  if (metrics_) metrics_->AddRefusal(reason, n);
}

void RefusalBook::Log(int64_t now_ms) {
  for (const auto& [reason, total] : counts_) {
    LogState& l = log_[reason];
    if (total == l.logged) continue;
    if (l.last_ms >= 0 && now_ms - l.last_ms < kRefusalLogEveryMs) continue;
    spdlog::warn("refused {} {} (reason '{}'){}; {} since start", total - l.logged,
                 RefusalMeaning(reason), reason,
                 l.last_ms < 0 ? "" : fmt::format(" in the last {} s", (now_ms - l.last_ms) / 1000),
                 total);
    l.logged = total;
    l.last_ms = now_ms;
  }
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
  o.replan_threshold_pct = c.replan_threshold_pct;
  o.profiling_samples = c.profiling_samples;
  o.qos = c.qos;
  const FaultsConfig& f = c.faults;
  o.faults.automatic = f.automatic;
  o.faults.evidence_window = core::Duration::Millis(f.evidence_window_ms);
  o.faults.evaluate_interval = core::Duration::Millis(f.evaluate_interval_ms);
  o.faults.localisation.gray_ratio = f.gray_ratio;
  o.faults.localisation.min_flows = f.min_flows;
  o.faults.counter_errors_per_s = f.counter_errors_per_s;
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
  return o;
}

DaemonContext::DaemonContext(const DaemonConfig& c, core::Topology topology,
                             std::string topology_source, Store* s, EventLoop* l, Metrics* m)
    : config(c),
      store(s),
      loop(l),
      metrics(m),
      topo(std::move(topology), std::move(topology_source)),
      tracker(TrackerOptions(c)),
      enforcer(m, &topo.nominal(), SystemUnixNanos),
      store_health(m),
      refusals(m),
      started(l->Now()) {
  enforcer.SetQosConfig(c.qos);
}

// ---- Daemon ----

Daemon::Daemon(const DaemonConfig& config, core::Topology topology, std::string topology_source,
               Store* store, EventLoop* loop, Metrics* metrics, bool plan_in_background)
    : ctx_(config, std::move(topology), std::move(topology_source), store, loop, metrics),
      gateway_(&ctx_),
      applier_(&ctx_),
      admin_(&ctx_, &gateway_, &lag_),
      client_queue_(
          "client", loop,
          TypedQueue<protocol::Inbound>::BatchHandler(
              [this](std::vector<protocol::Inbound> batch) { ProcessClientBatch(batch); })),
      admin_queue_("admin", loop,
                   TypedQueue<protocol::Inbound>::ItemHandler(
                       [this](protocol::Inbound in) { ProcessAdmin(in); })) {
  if (plan_in_background) worker_ = std::make_unique<WorkerThread>();
  ctx_.writer = std::make_unique<StoreWriter>(store, loop, plan_in_background);
  ControlHost::Executor executor;
  if (plan_in_background) {
    executor = [this](WorkerThread::CancellableWork work) { worker_->Post(std::move(work)); };
  }
  ctx_.plans = std::make_unique<ControlHost>(
      loop, &ctx_.topo, LoopOptions(config), ToPlannerOptions(config.planner),
      [this](PlanRun run) { applier_.Apply(std::move(run)); },
      [this](const std::vector<core::LinkDecision>& decisions) { ctx_.faults->Apply(decisions); },
      std::move(executor));
  ctx_.rows = std::make_unique<JobRows>(&ctx_.tracker, &ctx_.parts, &ctx_.plans->loop(),
                                        &ctx_.topo.nominal());
  ctx_.journal =
      std::make_unique<JobJournal>(&ctx_.plans->loop(), ctx_.rows.get(), ctx_.topo.shared_nominal(),
                                   loop, ctx_.writer.get(), &ctx_.store_health);
  ctx_.faults = std::make_unique<FaultService>(ctx_.plans.get(), &ctx_.topo, loop, metrics,
                                               ctx_.writer.get(), &ctx_.store_health);
}

Daemon::~Daemon() {
  FlushProfiles();
  worker_.reset();      // Cancel and join a run in flight before the state it reports to goes.
  ctx_.writer.reset();  // Runs every write submitted (the profiles above included), then joins.
}

core::Result<std::unique_ptr<Daemon>> Daemon::Create(const DaemonConfig& config,
                                                     core::Topology topology,
                                                     std::string topology_source, Store* store,
                                                     EventLoop* loop, Metrics* metrics,
                                                     bool plan_in_background) {
  std::unique_ptr<Daemon> d(new Daemon(config, std::move(topology), std::move(topology_source),
                                       store, loop, metrics, plan_in_background));
  CRUX_RETURN_IF_ERROR(d->Restore());
  return d;
}

void Daemon::SetClientSender(Sender s) {
  ctx_.client_sender = s;
  ctx_.enforcer.SetSender(std::move(s));
}

void Daemon::SetWallClock(std::function<int64_t()> unix_ns) {
  ctx_.enforcer.SetWallClock(std::move(unix_ns));
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
  ctx_.plans->Invalidate(ctx_.tracker.jobs().empty() ? "start" : "restart");
  RefreshMetrics();
}

void Daemon::ScheduleSweep() {
  core::Duration every =
      std::min(core::Duration::Millis(ctx_.config.lease_ms / 4), core::Duration::Millis(1000));
  every = std::max(every, core::Duration::Millis(10));
  ctx_.loop->RunAfter(every, [this] {
    SweepLeases();
    ScheduleSweep();
  });
}

void Daemon::ScheduleRefresh() {
  ctx_.loop->RunAfter(core::Duration::Millis(1000), [this] {
    if (!flushing_) FlushChunk();
    RefreshMetrics();
    ScheduleRefresh();
  });
}

void Daemon::FlushChunk() {
  // A chunk is one transaction of at most kFlushChunkRows rows (~10 ms); the next chunk is
  // posted behind the messages waiting meanwhile.
  flushing_ = ctx_.journal->FlushProfiles(kFlushChunkRows) > 0;
  if (flushing_) ctx_.loop->Post([this] { FlushChunk(); });
}

void Daemon::ScheduleLagProbe() {
  // Every 100 ms: the time a posted item waits before it runs (what every message waits too).
  ctx_.loop->RunAfter(core::Duration::Millis(100), [this] {
    const core::Duration posted = ctx_.loop->Now();
    ctx_.loop->Post([this, posted] {
      const core::Duration lag = ctx_.loop->Now() - posted;
      lag_.Add(lag);
      if (ctx_.metrics) ctx_.metrics->ObserveLoopLag(lag.ToSeconds());
    });
    ScheduleLagProbe();
  });
}

void Daemon::SweepLeases() {
  gateway_.PartsExpired(ctx_.tracker.ExpireParts(ctx_.loop->Now()));
  for (const std::string& id : ctx_.tracker.Expire(ctx_.loop->Now())) {
    // The session is already gone; the rest of JobGone (store, control loop) still applies.
    gateway_.JobGone(id, "lease expired");
  }
}

void Daemon::RefreshMetrics() {
  ctx_.refusals.Log(ctx_.loop->Now().nanos() / 1000000);
  Metrics* m = ctx_.metrics;
  if (!m) return;
  std::map<std::string, int64_t> by_state = {{"registered", 0}, {"profiling", 0}, {"scheduled", 0}};
  for (const auto& [id, j] : ctx_.plans->loop().jobs()) {
    ++by_state[std::string(core::JobPhaseName(j.phase))];
  }
  m->SetJobs(by_state);
  m->SetClients(static_cast<int64_t>(ctx_.tracker.DistinctPeers()));
  m->SetSwitches(static_cast<int64_t>(ctx_.enforcer.switch_count()));
  m->SetEpoch(ctx_.plans->loop().epoch());
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
    ctx_.refusals.Count("unauthorised_key", now.auth_refused - last.auth_refused);
    ctx_.refusals.Count("identity", now.refused_identity - last.refused_identity);
    ctx_.refusals.Count("mechanism", now.refused_mechanism - last.refused_mechanism);
    ctx_.refusals.Count("handshake", now.refused_handshake - last.refused_handshake);
    m->SetQueueDepth(endpoint + "_send", static_cast<int64_t>(now.queued));
    last = now;
  }
  ctx_.refusals.Log(ctx_.loop->Now().nanos() / 1000000);
}

std::vector<std::string> Daemon::Reload(const DaemonConfig& c) {
  DaemonConfig& config = ctx_.config;
  std::vector<std::string> ignored = RestartOnlyChanges(config, c);
  DaemonConfig next = c;
  KeepRestartOnly(config, &next);  // Restart-only keys keep their running values (config.h).
  if (core::Status s = core::ValidateQosConfig(next.qos); !s.ok()) {
    spdlog::error("qos config not applied (keeps the running one): {}", s.ToString());
    next.qos = config.qos;
  }
  next.lease_ms = std::min(next.lease_ms, next.max_lease_ms);
  config = next;
  ctx_.tracker.SetOptions(TrackerOptions(config));
  ctx_.enforcer.SetQosConfig(config.qos);
  ctx_.plans->SetOptions(LoopOptions(config));
  if (core::Status s = ctx_.plans->SetPlannerOptions(ToPlannerOptions(config.planner)); !s.ok()) {
    spdlog::error("planner options not applied: {}", s.ToString());
  }
  spdlog::info("config reloaded from {} (dry_run {}, debounce {} ms, lease {} ms)", c.source,
               config.dry_run, config.debounce_ms, config.lease_ms);
  for (const auto& k : ignored) spdlog::warn("config key '{}' changed: needs a restart", k);
  ctx_.plans->Invalidate("config reload");
  return ignored;
}

}  // namespace crux::daemon
