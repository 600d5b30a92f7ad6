#include "crux/daemon/daemon.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>

#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::daemon {
namespace {

JobTracker::Options TrackerOptions(const DaemonConfig& c) {
  JobTracker::Options o;
  o.dscp_pool = c.qos.dscp_pool;
  o.profiling_samples = c.profiling_samples;
  o.replan_threshold_pct = c.replan_threshold_pct;
  o.default_lease = core::Duration::Millis(c.lease_ms);
  o.max_lease = core::Duration::Millis(c.max_lease_ms);
  o.max_jobs = c.limits.max_jobs;
  o.max_jobs_per_connection = c.limits.max_jobs_per_connection;
  o.max_jobs_per_key = c.limits.max_jobs_per_key;
  return o;
}

// Why each refusal reason happens, for the log.
const char* RefusalMeaning(const std::string& reason) {
  if (reason == "unauthorised_key") return "CURVE client keys not in the authorised keys";
  if (reason == "mechanism") {
    return "peers without CURVE (plain ZeroMQ) on the CURVE endpoint, or CURVE peers on a plain "
           "one";
  }
  if (reason == "handshake") {
    return "failed CURVE handshakes (a client using the wrong server public key?)";
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

// "ERROR_CODE_UNKNOWN_HOST" -> "unknown_host".
std::string MetricKind(v1::ErrorCode code) {
  std::string s(protocol::ErrorCodeName(code));
  if (s.rfind("ERROR_CODE_", 0) == 0) s = s.substr(11);
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

Daemon::Daemon(const DaemonConfig& config, core::Topology topology, std::string topology_source,
               Store* store, EventLoop* loop, Metrics* metrics, bool plan_in_background)
    : config_(config),
      store_(store),
      loop_(loop),
      metrics_(metrics),
      topo_(std::move(topology), std::move(topology_source)),
      tracker_(&topo_.nominal(), TrackerOptions(config)),
      enforcer_(metrics, &topo_.nominal(), config.qos),
      runner_(
          loop, &topo_, &tracker_, ToPlannerOptions(config.planner),
          core::Duration::Millis(config.debounce_ms),
          [this](PlanResult r) { plan_queue_.Push(std::move(r)); },
          plan_in_background ? PlannerRunner::Executor([this](std::function<void()> work) {
            worker_->Post(std::move(work));
          })
                             : PlannerRunner::Executor()),
      client_queue_("client", loop, [this](protocol::Inbound in) { ProcessClient(in); }),
      admin_queue_("admin", loop, [this](protocol::Inbound in) { ProcessAdmin(in); }),
      plan_queue_("plans", loop, [this](PlanResult r) { OnPlan(std::move(r)); }),
      started_(loop->Now()) {
  runner_.SetMinInterval(core::Duration::Millis(config.min_replan_interval_ms));
  if (plan_in_background) worker_ = std::make_unique<WorkerThread>();
}

Daemon::~Daemon() { FlushProfiles(); }

void Daemon::FlushProfiles() {
  if (dirty_profiles_.empty()) return;
  std::vector<std::pair<std::string, std::string>> batch;
  batch.reserve(dirty_profiles_.size());
  std::vector<std::string> planned_dirty;
  for (const std::string& id : dirty_profiles_) {
    const JobEntry* j = tracker_.Find(id);
    if (!j || !j->profile) continue;
    if (j->planned_dirty && j->planned) {
      planned_dirty.push_back(id);  // An earlier immediate write failed: retried here.
    } else {
      batch.emplace_back(id, j->profile->SerializeAsString());
    }
  }
  for (const std::string& id : planned_dirty) {
    const JobEntry& j = *tracker_.Find(id);
    if (Stored(store_->PutProfile(id, j.profile->SerializeAsString(),
                                  j.planned->SerializeAsString(), loop_->UnixMs()),
               "put_profile")
            .ok()) {
      tracker_.PlannedStored(id);
    }
  }
  dirty_profiles_.clear();
  (void)Stored(store_->PutProfiles(batch, loop_->UnixMs()), "put_profiles");
}

core::Status Daemon::Stored(core::Status s, const char* what) {
  if (s.ok()) {
    if (!store_error_.empty()) {
      spdlog::info("store works again ({} succeeded; last failure was: {})", what, store_error_);
      store_error_.clear();
      if (metrics_) metrics_->SetStoreHealthy(true);
      if (store_health_listener_) store_health_listener_("");
    }
    return s;
  }
  const std::string error = std::string(what) + ": " + s.ToString();
  spdlog::error("store failed: {}", error);
  if (metrics_) {
    metrics_->AddError("store", what);
    metrics_->SetStoreHealthy(false);
  }
  if (error != store_error_) {
    store_error_ = error;
    if (store_health_listener_) store_health_listener_(store_error_);
  }
  return s;
}

void Daemon::RetryPlanAfterStoreFailure() {
  if (store_retry_armed_) return;
  store_retry_armed_ = true;
  const core::Duration delay = store_retry_.Next();
  spdlog::warn("re-plan will be retried in {:.1f} s (store failure)", delay.ToSeconds());
  loop_->RunAfter(delay, [this] {
    store_retry_armed_ = false;
    runner_.Request("retry after a store failure");
  });
}

void Daemon::CountRefusal(const std::string& reason, uint64_t n) {
  if (n == 0) return;
  refusals_[reason] += n;
  if (metrics_) metrics_->AddRefusal(reason, n);
}

void Daemon::LogRefusals() {
  const int64_t now = loop_->Now().nanos() / 1000000;
  for (const auto& [reason, total] : refusals_) {
    RefusalLog& l = refusal_log_[reason];
    if (total == l.logged) continue;
    if (l.last_ms >= 0 && now - l.last_ms < kRefusalLogEveryMs) continue;
    spdlog::warn("refused {} {} (reason '{}'){}; {} since start", total - l.logged,
                 RefusalMeaning(reason), reason,
                 l.last_ms < 0 ? "" : fmt::format(" in the last {} s", (now - l.last_ms) / 1000),
                 total);
    l.logged = total;
    l.last_ms = now;
  }
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

core::Status Daemon::Restore() {
  CRUX_ASSIGN_OR_RETURN(auto previous, store_->GetMeta("topology_source"));
  if (previous && *previous != topo_.source()) {
    spdlog::warn("topology changed since the last run ('{}' -> '{}'); stored jobs are re-checked",
                 *previous, topo_.source());
  }
  CRUX_RETURN_IF_ERROR(store_->PutMeta("topology_source", topo_.source()));
  CRUX_ASSIGN_OR_RETURN(state_id_, LoadStateId(*store_));
  enforcer_.SetStateId(state_id_);
  CRUX_ASSIGN_OR_RETURN(epoch_, store_->LoadEpoch());
  CRUX_ASSIGN_OR_RETURN(auto links, store_->LoadLinkOverrides());
  // What does not fit the topology is kept in the store, never deleted: a wrong topology file
  // given once must not lose state for good (it comes back with the right topology).
  for (const LinkOverride& o : links) {
    if (core::Status s = topo_.Restore(o); !s.ok()) {
      spdlog::error("stored link state not applied (kept in the state file): {}", s.ToString());
    }
  }
  CRUX_ASSIGN_OR_RETURN(auto jobs, store_->LoadJobs());
  for (const StoredJob& j : jobs) {
    bool recoloured = false;
    if (core::Status s = tracker_.Restore(j, loop_->Now(), &recoloured); !s.ok()) {
      ++quarantined_jobs_;
      spdlog::error("stored job {} not restored (kept in the state file, quarantined): {}",
                    j.job_id, s.ToString());
    } else if (recoloured) {
      const JobEntry& e = *tracker_.Find(j.job_id);
      spdlog::warn("job {}: stored DSCP {} is not in qos.dscp_pool any more; new colour {}",
                   j.job_id, j.dscp, e.dscp);
      CRUX_RETURN_IF_ERROR(store_->UpsertJob(tracker_.ToStored(e)));
    }
  }
  CRUX_ASSIGN_OR_RETURN(auto plan, store_->LoadPlan());
  for (const PlanRow& r : plan) {
    v1::Assignment a;
    if (!tracker_.Find(r.job_id) || !a.ParseFromString(r.assignment)) continue;
    tracker_.SetLevel(r.job_id, static_cast<int>(a.level()));
    applied_[r.job_id] = std::move(a);
  }
  if (!jobs.empty() || epoch_ > 0) {
    spdlog::info("restored {} jobs, {} applied assignments, {} link overrides, epoch {}",
                 tracker_.jobs().size(), applied_.size(), links.size(), epoch_);
  }
  if (quarantined_jobs_ > 0) {
    spdlog::error(
        "{} stored jobs do not fit topology {} and are not served; they stay in the state file "
        "and are restored by a start with a topology they fit (check the `topology` key)",
        quarantined_jobs_, topo_.source());
  }
  if (metrics_) metrics_->SetEpoch(epoch_);
  return core::Status::Ok();
}

void Daemon::SetClientSender(Sender s) {
  client_sender_ = s;
  enforcer_.SetSender(std::move(s));
}

void Daemon::SetAdminSender(Sender s) { admin_sender_ = std::move(s); }

void Daemon::AddTransportCounters(const std::string& endpoint, CounterSource source) {
  counter_sources_.emplace_back(endpoint, std::move(source));
}

void Daemon::Start() {
  ScheduleSweep();
  ScheduleRefresh();
  if (!tracker_.jobs().empty()) {
    runner_.Request("restart");  // The first plan computes the switches' desired state.
  } else if (auto s = enforcer_.UpdateDesired(epoch_, {}, !config_.dry_run); !s.ok()) {
    spdlog::error("desired switch state: {}", s.status().ToString());
  }
  RefreshMetrics();
}

void Daemon::ScheduleSweep() {
  core::Duration every =
      std::min(core::Duration::Millis(config_.lease_ms / 4), core::Duration::Millis(1000));
  every = std::max(every, core::Duration::Millis(10));
  loop_->RunAfter(every, [this] {
    SweepLeases();
    ScheduleSweep();
  });
}

void Daemon::ScheduleRefresh() {
  loop_->RunAfter(core::Duration::Millis(1000), [this] {
    FlushProfiles();
    RefreshMetrics();
    ScheduleRefresh();
  });
}

void Daemon::SweepLeases() {
  for (const std::string& id : tracker_.Expire(loop_->Now())) JobGone(id, "lease expired");
}

void Daemon::JobGone(const std::string& id, const std::string& reason) {
  spdlog::info("job {} gone: {}", id, reason);
  dirty_profiles_.erase(id);
  (void)Stored(store_->DeleteJob(id), "delete_job");
  auto it = applied_.find(id);
  if (it != applied_.end()) {
    AuditRow a;
    a.ts_ms = loop_->UnixMs();
    a.epoch = epoch_;
    a.job_id = id;
    a.old_level = static_cast<int>(it->second.level());
    a.new_level = -1;
    a.reason = reason;
    (void)Stored(store_->ApplyPlan(epoch_, {}, {id}, {a}), "apply_plan");
    applied_.erase(it);
  }
  runner_.Request("job " + id + " gone");
}

void Daemon::RefreshMetrics() {
  if (!metrics_) return;
  metrics_->SetJobs(tracker_.CountByState());
  metrics_->SetClients(static_cast<int64_t>(tracker_.DistinctPeers()));
  metrics_->SetSwitches(static_cast<int64_t>(enforcer_.switch_count()));
  metrics_->SetEpoch(epoch_);
  metrics_->SetQueueDepth("client", client_queue_.depth());
  metrics_->SetQueueDepth("admin", admin_queue_.depth());
  metrics_->SetQueueDepth("plans", plan_queue_.depth());
  for (const auto& [endpoint, source] : counter_sources_) {
    const protocol::ServerCounters now = source();
    protocol::ServerCounters& last = last_counters_[endpoint];
    metrics_->AddError(endpoint, "malformed", now.malformed - last.malformed);
    metrics_->AddError(endpoint, "too_large", now.too_large - last.too_large);
    metrics_->AddError(endpoint, "unsupported_version",
                       now.unsupported_version - last.unsupported_version);
    metrics_->AddError(endpoint, "invalid_argument", now.invalid - last.invalid);
    metrics_->AddError(endpoint, "send_failed", now.send_failed - last.send_failed);
    CountRefusal("unauthorised_key", now.auth_refused - last.auth_refused);
    CountRefusal("identity", now.refused_identity - last.refused_identity);
    CountRefusal("mechanism", now.refused_mechanism - last.refused_mechanism);
    CountRefusal("handshake", now.refused_handshake - last.refused_handshake);
    metrics_->SetQueueDepth(endpoint + "_send", static_cast<int64_t>(now.queued));
    last = now;
  }
  LogRefusals();
}

v1::Envelope Daemon::Refuse(const std::string& endpoint, uint64_t request_id, const Refusal& r) {
  if (metrics_) metrics_->AddError(endpoint, MetricKind(r.code));
  if (!r.reason.empty()) CountRefusal(r.reason);
  spdlog::debug("{} request {} refused: {} {}", endpoint, request_id,
                protocol::ErrorCodeName(r.code), r.message);
  return protocol::MakeError(request_id, r);
}

void Daemon::ProcessClient(const protocol::Inbound& in) {
  if (metrics_) metrics_->AddMessage("client", protocol::BodyName(in.msg));
  v1::Envelope reply = HandleClient(in);
  // request_id 0 is only allowed on an Ack answering a push (the transport refuses it on every
  // other request): a reply would look like a push, so none is sent.
  if (client_sender_ && in.msg.request_id() != 0) {
    if (core::Status s = client_sender_(in.peer, reply); !s.ok()) {
      spdlog::warn("client reply not sent: {}", s.ToString());
    }
  }
  auto deferred = std::move(deferred_);
  deferred_.clear();
  for (auto& [peer, msg] : deferred) {
    if (msg.has_assignment()) {
      enforcer_.Push(peer, msg.assignment());
    } else if (client_sender_) {
      (void)client_sender_(peer, msg);
    }
  }
}

void Daemon::ProcessAdmin(const protocol::Inbound& in) {
  if (metrics_) metrics_->AddMessage("admin", protocol::BodyName(in.msg));
  v1::Envelope reply = HandleAdmin(in);
  if (admin_sender_) {
    if (core::Status s = admin_sender_(in.peer, reply); !s.ok()) {
      spdlog::warn("admin reply not sent: {}", s.ToString());
    }
  }
}

Refusal Daemon::Authorise(const protocol::Inbound& in) const {
  if (!grants_) return {};
  const v1::Envelope& m = in.msg;
  auto it = grants_->find(in.user_id);
  if (it == grants_->end()) {
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            "envelope: this CURVE key is no longer authorised (removed from "
            "curve.authorized_keys_dir)",
            "unauthorised_key"};
  }
  const protocol::KeyGrant& g = it->second;
  const bool switch_message = m.has_switch_hello() || m.has_switch_applied();
  if (!switch_message) {
    if (g.role == protocol::KeyRole::kJob) return {};
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            std::string(protocol::BodyName(m)) + ": this CURVE key is a switch key (" + g.name +
                "); jobs need a job key (a *.pub directly in the authorised-keys directory)",
            "role"};
  }
  const std::string& name =
      m.has_switch_hello() ? m.switch_hello().switch_name() : m.switch_applied().switch_name();
  const std::string field = m.has_switch_hello() ? "switch_hello" : "switch_applied";
  if (g.role != protocol::KeyRole::kSwitch) {
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            field + ": this CURVE key is a job key (" + g.name +
                "); switch agents need a switch key (switches/" + name +
                ".pub in the authorised-keys directory)",
            "role"};
  }
  if (!std::binary_search(g.switches.begin(), g.switches.end(), name)) {
    return {v1::ERROR_CODE_PERMISSION_DENIED,
            field + ".switch_name: this CURVE key may not speak for switch '" + name +
                "' (it is authorised for " + std::to_string(g.switches.size()) +
                " other switch(es); add switches/" + name + ".pub to authorise it)",
            "role"};
  }
  return {};
}

v1::Envelope Daemon::HandleClient(const protocol::Inbound& in) {
  const v1::Envelope& m = in.msg;
  if (Refusal bad = Authorise(in); Refused(bad)) return Refuse("client", m.request_id(), bad);
  switch (m.body_case()) {
    case v1::Envelope::kRegisterJob:
      return OnRegister(in);
    case v1::Envelope::kProfileReport:
      return OnProfile(in);
    case v1::Envelope::kHeartbeat:
      return OnHeartbeat(in);
    case v1::Envelope::kEndJob:
      return OnEndJob(in);
    case v1::Envelope::kAck:
      return OnAck(in);
    case v1::Envelope::kSwitchHello:
      return OnSwitchHello(in);
    case v1::Envelope::kSwitchApplied:
      return OnSwitchApplied(in);
    default:
      return Refuse("client", m.request_id(),
                    {v1::ERROR_CODE_INVALID_ARGUMENT,
                     "envelope.body: '" + std::string(protocol::BodyName(m)) +
                         "' is not a request the client endpoint accepts"});
  }
}

v1::Envelope Daemon::OnRegister(const protocol::Inbound& in) {
  const v1::RegisterJob& r = in.msg.register_job();
  bool known = false;
  Refusal bad = tracker_.Register(r, in.peer, in.user_id, loop_->Now(), loop_->UnixMs(), &known);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  const JobEntry& j = *tracker_.Find(r.job_id());
  if (core::Status s = Stored(store_->UpsertJob(tracker_.ToStored(j)), "upsert_job"); !s.ok()) {
    if (!known) {  // Undo: a registration that is not persisted is not acknowledged.
      v1::EndJob undo;
      undo.set_job_id(r.job_id());
      (void)tracker_.End(undo, in.peer, in.user_id);
    }
    return Refuse("client", in.msg.request_id(),
                  {v1::ERROR_CODE_UNAVAILABLE, "register_job: state could not be persisted"});
  }
  v1::Envelope reply = protocol::NewEnvelope(in.msg.request_id());
  v1::RegisterJobReply* rr = reply.mutable_register_job_reply();
  rr->set_job_id(r.job_id());
  rr->set_lease_ms(static_cast<uint64_t>(j.lease.nanos() / 1000000));
  rr->set_already_known(known);
  rr->set_dscp(j.dscp);
  if (known) {
    auto it = applied_.find(r.job_id());
    if (it != applied_.end() && !config_.dry_run) {
      v1::Envelope push = protocol::NewEnvelope(0);
      *push.mutable_assignment() = it->second;
      Defer(in.peer, std::move(push));
    }
  } else {
    spdlog::info("job {} registered ({} hosts, dscp {})", r.job_id(), r.placement_size(), j.dscp);
    runner_.Request("job " + r.job_id() + " registered");
  }
  return reply;
}

v1::Envelope Daemon::OnProfile(const protocol::Inbound& in) {
  const v1::ProfileReport& p = in.msg.profile_report();
  bool changed = false;
  bool plan_changed = false;
  Refusal bad = tracker_.Report(p, in.peer, in.user_id, loop_->Now(), loop_->UnixMs(), &changed,
                                &plan_changed);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  if (changed || plan_changed) {
    // The lifecycle state is derived from the stored profile at restart, and a restart plans
    // from the stored planned profile: both are written at once (significant reports only).
    const JobEntry& j = *tracker_.Find(p.job_id());
    dirty_profiles_.erase(p.job_id());
    const std::string planned =
        j.planned_dirty && j.planned ? j.planned->SerializeAsString() : std::string();
    core::Status s =
        store_->PutProfile(p.job_id(), p.SerializeAsString(), planned, loop_->UnixMs());
    if (s.ok() && changed) s = store_->UpsertJob(tracker_.ToStored(j));
    if (Stored(s, "put_profile").ok()) {
      tracker_.PlannedStored(p.job_id());
    } else {
      dirty_profiles_.insert(p.job_id());  // Retried by FlushProfiles.
    }
    if (changed) spdlog::info("job {} is now {}", p.job_id(), protocol::JobStateName(j.state));
  } else {
    dirty_profiles_.insert(p.job_id());  // FlushProfiles (batched, ~1 s).
  }
  // Below the significance threshold a report changes nothing the planner sees: no re-plan.
  if (plan_changed) runner_.Request("profile of " + p.job_id());
  return protocol::MakeAck(in.msg.request_id(), p.job_id());
}

v1::Envelope Daemon::OnHeartbeat(const protocol::Inbound& in) {
  const v1::Heartbeat& h = in.msg.heartbeat();
  Refusal bad = tracker_.Heartbeat(h, in.peer, in.user_id, loop_->Now(), loop_->UnixMs());
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  auto it = applied_.find(h.job_id());
  uint64_t epoch = 0;
  if (it != applied_.end()) {
    epoch = it->second.epoch();
    const bool other_state = h.applied_state_id() != 0 && h.applied_state_id() != state_id_;
    if ((h.applied_epoch() < epoch || other_state) && !config_.dry_run) {
      v1::Envelope push = protocol::NewEnvelope(0);
      *push.mutable_assignment() = it->second;
      Defer(in.peer, std::move(push));
    }
  }
  return protocol::MakeAck(in.msg.request_id(), h.job_id(), epoch);
}

v1::Envelope Daemon::OnEndJob(const protocol::Inbound& in) {
  const v1::EndJob& e = in.msg.end_job();
  Refusal bad = tracker_.End(e, in.peer, in.user_id);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  JobGone(e.job_id(), e.reason().empty() ? "ended" : "ended: " + e.reason());
  return protocol::MakeAck(in.msg.request_id(), e.job_id());
}

v1::Envelope Daemon::OnAck(const protocol::Inbound& in) {
  const v1::Ack& a = in.msg.ack();
  Refusal bad = tracker_.Acked(a, in.peer, in.user_id);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  if (metrics_) metrics_->AddAck(a.ok());
  if (!a.ok())
    spdlog::warn("job {} could not apply epoch {}: {}", a.job_id(), a.epoch(), a.error());
  return protocol::MakeAck(in.msg.request_id(), a.job_id(), a.epoch());
}

v1::Envelope Daemon::OnSwitchHello(const protocol::Inbound& in) {
  const v1::SwitchHello& h = in.msg.switch_hello();
  auto node = topo_.nominal().FindNode(h.switch_name());
  if (!node.ok() || !core::IsNetworkSwitch(topo_.nominal().node(*node).kind)) {
    return Refuse("client", in.msg.request_id(),
                  {v1::ERROR_CODE_UNKNOWN_HOST, "switch_hello.switch_name: '" + h.switch_name() +
                                                    "' is not a switch of the topology"});
  }
  bool returning = false;
  std::optional<v1::Envelope> push = enforcer_.OnHello(h, in.peer, loop_->UnixMs(), &returning);
  if (returning) {
    spdlog::info("switch agent {} connected (applied epoch {}, desired {})", h.switch_name(),
                 h.applied_epoch(), enforcer_.desired_epoch(h.switch_name()));
  }
  if (push && !config_.dry_run) Defer(in.peer, *std::move(push));
  return protocol::MakeAck(in.msg.request_id(), "", epoch_);
}

v1::Envelope Daemon::OnSwitchApplied(const protocol::Inbound& in) {
  Refusal bad = enforcer_.OnApplied(in.msg.switch_applied(), in.peer, loop_->UnixMs());
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  return protocol::MakeAck(in.msg.request_id(), "", in.msg.switch_applied().epoch());
}

void Daemon::OnPlan(PlanResult r) {
  const auto apply_start = std::chrono::steady_clock::now();
  // Loop-thread time of applying a plan (diff, store, pushes, switch state): logged when large,
  // since message handling waits for it (the planning itself runs on the worker).
  struct LogSlow {
    std::chrono::steady_clock::time_point start;
    size_t jobs;
    std::string steps;  // "diff 3.1, store 40.2, ..." (ms since the previous step).
    std::chrono::steady_clock::time_point last = start;
    void Step(const char* what) {
      const auto now = std::chrono::steady_clock::now();
      steps += fmt::format("{}{} {:.1f}", steps.empty() ? "" : ", ", what,
                           std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
    }
    ~LogSlow() {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (ms >= 50) {
        spdlog::info("applying a plan of {} jobs took {:.1f} ms on the loop ({})", jobs, ms, steps);
      }
    }
  } log_slow{apply_start, r.desired.size(), {}};
  ++replans_;
  last_replan_ms_ = r.replan_ms;
  if (metrics_) metrics_->ObserveReplan(r.replan_ms / 1000.0, r.ok);
  if (!r.ok) {
    spdlog::error("re-plan ({}) failed: {}; keeping epoch {}", r.reason, r.error, epoch_);
    return;
  }
  for (const auto& [id, why] : r.excluded) spdlog::warn("job {} not planned: {}", id, why);
  // The plan was computed on a snapshot: jobs that left since then are not applied again (jobs
  // that arrived since then have a re-plan pending).
  for (auto it = r.desired.begin(); it != r.desired.end();) {
    it = tracker_.Find(it->first) ? std::next(it) : r.desired.erase(it);
  }
  log_slow.Step("filter");
  std::vector<std::string> changed;
  for (const auto& [id, a] : r.desired) {
    auto it = applied_.find(id);
    if (it == applied_.end() || !SameAssignment(it->second, a)) changed.push_back(id);
  }
  std::vector<std::string> removed;
  for (const auto& [id, a] : applied_) {
    if (!r.desired.count(id)) removed.push_back(id);
  }
  const uint64_t next = epoch_ + 1;
  if (config_.dry_run) {
    if (!changed.empty() || !removed.empty()) {
      spdlog::info(
          "dry_run: re-plan ({}) would push {} changed assignments as epoch {} ({:.2f} ms)",
          r.reason, changed.size(), next, r.replan_ms);
      for (const std::string& id : changed) {
        auto it = applied_.find(id);
        spdlog::info("dry_run:   {} level {} -> {}", id,
                     it == applied_.end() ? -1 : static_cast<int>(it->second.level()),
                     r.desired[id].level());
      }
    }
    r.desired.clear();
    last_plan_ = std::move(r);
    return;
  }
  if (changed.empty() && removed.empty()) {
    spdlog::debug("re-plan ({}) {:.2f} ms: nothing changed, epoch stays {}", r.reason, r.replan_ms,
                  epoch_);
    log_slow.Step("diff");
    UpdateSwitches(r, /*assignments_changed=*/false);
    log_slow.Step("switches");
    r.desired.clear();  // Every job's assignment again: applied_ holds what counts.
    last_plan_ = std::move(r);
    return;
  }
  std::vector<PlanRow> rows;
  std::vector<AuditRow> audit;
  const int64_t now_ms = loop_->UnixMs();
  for (const std::string& id : changed) {
    v1::Assignment& a = r.desired[id];
    a.set_epoch(next);
    rows.push_back({id, static_cast<int>(a.level()), a.dscp(), next, a.SerializeAsString()});
    auto it = applied_.find(id);
    AuditRow row;
    row.ts_ms = now_ms;
    row.epoch = next;
    row.job_id = id;
    row.old_level = it == applied_.end() ? -1 : static_cast<int>(it->second.level());
    row.new_level = static_cast<int>(a.level());
    row.reason = r.reason.substr(0, 1000);
    audit.push_back(std::move(row));
  }
  log_slow.Step("diff+rows");
  if (core::Status s = Stored(store_->ApplyPlan(next, rows, removed, audit), "apply_plan");
      !s.ok()) {
    spdlog::error("re-plan ({}) not applied: epoch stays {} until the store works again", r.reason,
                  epoch_);
    RetryPlanAfterStoreFailure();
    return;
  }
  store_retry_.Reset();
  epoch_ = next;
  for (const std::string& id : removed) applied_.erase(id);
  log_slow.Step("store");
  size_t pushed = 0;
  for (const std::string& id : changed) {
    spdlog::debug("epoch {}: {} level {} ({} flows)", next, id, r.desired[id].level(),
                  r.desired[id].flows_size());
    v1::Assignment& a = applied_[id];
    a = std::move(r.desired[id]);  // Moved, not copied: desired is dropped below.
    tracker_.SetLevel(id, static_cast<int>(a.level()));
    const JobEntry* j = tracker_.Find(id);
    if (j && enforcer_.Push(j->peer, a)) ++pushed;
  }
  log_slow.Step("push");
  UpdateSwitches(r, /*assignments_changed=*/true);
  log_slow.Step("switches");
  spdlog::info("epoch {}: {} assignments changed ({} pushed), {} removed; re-plan ({}) {:.2f} ms",
               epoch_, changed.size(), pushed, removed.size(), r.reason, r.replan_ms);
  if (metrics_) metrics_->SetEpoch(epoch_);
  r.desired.clear();
  last_plan_ = std::move(r);
}

std::vector<core::QosJob> Daemon::QosJobs(const PlanResult& r) const {
  std::vector<core::QosJob> jobs = core::QosJobsFromPlan(topo_.nominal(), r.plan, tracker_.pool());
  // Levels as applied (newcomers sit on the temporary top level, not on the planner's level).
  for (core::QosJob& j : jobs) {
    auto it = applied_.find(j.id);
    if (it != applied_.end()) j.level = static_cast<int>(it->second.level());
  }
  return jobs;
}

void Daemon::UpdateSwitches(const PlanResult& r, bool assignments_changed) {
  const std::vector<core::QosJob> jobs = QosJobs(r);
  // Computed once, committed below (ComputeDesiredQos is the bulk of applying a large plan).
  auto pending = enforcer_.ComputeDesired(jobs);
  if (!pending.ok()) {
    spdlog::error("desired switch state not computed: {}", pending.status().ToString());
    return;
  }
  if (pending->changed.empty()) return;
  // A switch-only change (e.g. a reloaded qos block) gets its own epoch, so an agent that missed
  // the push is seen as stale at its next hello. Not for the first state after a start.
  if (!assignments_changed && enforcer_.qos_ready()) {
    if (core::Status s = Stored(store_->ApplyPlan(epoch_ + 1, {}, {}, {}), "apply_plan"); !s.ok()) {
      spdlog::error("switch state not pushed: the store failed");
      RetryPlanAfterStoreFailure();
      return;
    }
    ++epoch_;
    if (metrics_) metrics_->SetEpoch(epoch_);
  }
  const std::vector<std::string> pushed = enforcer_.Commit(epoch_, *std::move(pending));
  spdlog::info("epoch {}: desired QoS changed on {} switches", epoch_, pushed.size());
}

std::vector<std::string> Daemon::Reload(const DaemonConfig& c) {
  std::vector<std::string> ignored = RestartOnlyChanges(config_, c);
  DaemonConfig next = c;
  // Restart-only keys keep their running values.
  next.topology = config_.topology;
  next.base_dir = config_.base_dir;
  next.state_dir = config_.state_dir;
  next.database = config_.database;
  next.client_endpoint = config_.client_endpoint;
  next.admin_endpoint = config_.admin_endpoint;
  next.curve = config_.curve;
  next.insecure = config_.insecure;
  next.metrics_listen = config_.metrics_listen;
  next.max_lease_ms = config_.max_lease_ms;
  next.qos.dscp_pool = config_.qos.dscp_pool;
  if (core::Status s = core::ValidateQosConfig(next.qos); !s.ok()) {
    spdlog::error("qos config not applied (keeps the running one): {}", s.ToString());
    next.qos = config_.qos;
  }
  next.lease_ms = std::min(next.lease_ms, next.max_lease_ms);
  config_ = next;
  tracker_.SetOptions(TrackerOptions(config_));
  enforcer_.SetQosConfig(config_.qos);
  runner_.SetDebounce(core::Duration::Millis(config_.debounce_ms));
  runner_.SetMinInterval(core::Duration::Millis(config_.min_replan_interval_ms));
  if (core::Status s = runner_.SetOptions(ToPlannerOptions(config_.planner)); !s.ok()) {
    spdlog::error("planner options not applied: {}", s.ToString());
  }
  spdlog::info("config reloaded from {} (dry_run {}, debounce {} ms, lease {} ms)", c.source,
               config_.dry_run, config_.debounce_ms, config_.lease_ms);
  for (const auto& k : ignored) spdlog::warn("config key '{}' changed: needs a restart", k);
  runner_.Request("config reload");
  return ignored;
}

}  // namespace crux::daemon
