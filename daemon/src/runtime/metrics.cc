#include "crux/daemon/runtime/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "crux/protocol/server.h"

namespace crux::daemon {

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  using namespace prometheus;  // NOLINT(build/namespaces): builder-heavy block.
  jobs_ =
      &BuildGauge().Name("crux_jobs").Help("Jobs known to cruxd, by state.").Register(*registry_);
  for (const char* s : {"registered", "profiling", "scheduled"}) jobs_->Add({{"state", s}});
  clients_ = &BuildGauge()
                  .Name("crux_clients")
                  .Help("Client peers with a live job.")
                  .Register(*registry_)
                  .Add({});
  switches_ = &BuildGauge()
                   .Name("crux_switches")
                   .Help("Switch agents that said hello.")
                   .Register(*registry_)
                   .Add({});
  epoch_ = &BuildGauge()
                .Name("crux_plan_epoch")
                .Help("Epoch of the applied plan.")
                .Register(*registry_)
                .Add({});
  replan_seconds_ =
      &BuildHistogram()
           .Name("crux_replan_duration_seconds")
           .Help("Wall time of one re-plan (planner run, diff and persistence).")
           .Register(*registry_)
           .Add({}, Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                0.1, 0.25, 0.5, 1, 2.5, 5});
  loop_lag_seconds_ =
      &BuildHistogram()
           .Name("crux_event_loop_lag_seconds")
           .Help("Time from posting work to the event loop until it runs (probed every 100 ms).")
           .Register(*registry_)
           .Add({}, Histogram::BucketBoundaries{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02,
                                                0.05, 0.1, 0.25, 0.5, 1});
  auto& replans = BuildCounter()
                      .Name("crux_replans_total")
                      .Help("Re-plans run, by result.")
                      .Register(*registry_);
  replans_ok_ = &replans.Add({{"result", "ok"}});
  replans_failed_ = &replans.Add({{"result", "failed"}});
  pushes_ = &BuildCounter()
                 .Name("crux_pushes_total")
                 .Help("Assignment pushes queued to clients.")
                 .Register(*registry_)
                 .Add({});
  push_failures_ = &BuildCounter()
                        .Name("crux_push_failures_total")
                        .Help("Assignment pushes that could not be queued.")
                        .Register(*registry_)
                        .Add({});
  auto& acks = BuildCounter()
                   .Name("crux_acks_total")
                   .Help("Assignment acks, by result.")
                   .Register(*registry_);
  acks_ok_ = &acks.Add({{"result", "ok"}});
  acks_failed_ = &acks.Add({{"result", "failed"}});
  errors_ = &BuildCounter()
                 .Name("crux_errors_total")
                 .Help("Requests refused with an error reply, by endpoint and kind.")
                 .Register(*registry_);
  host_probes_ = &BuildCounter()
                      .Name("crux_host_probes_total")
                      .Help(
                          "Host agents' capacity probe results, by outcome (accepted, rejected, "
                          "stale, sender_limited).")
                      .Register(*registry_);
  for (const char* o : {"accepted", "rejected", "stale", "sender_limited"}) {
    host_probes_->Add({{"outcome", o}});
  }
  messages_ = &BuildCounter()
                   .Name("crux_messages_total")
                   .Help("Messages handled, by endpoint and body type.")
                   .Register(*registry_);
  queue_depth_ = &BuildGauge()
                      .Name("crux_queue_depth")
                      .Help("Items waiting in the daemon's internal queues.")
                      .Register(*registry_);
  send_queue_seconds_ = &BuildHistogram()
                             .Name("crux_transport_send_queue_seconds")
                             .Help(
                                 "Time frames (replies, pushes) waited in cruxd's send queue "
                                 "before its I/O thread handed them to ZeroMQ, by endpoint.")
                             .Register(*registry_);
  auth_refused_ = &BuildCounter()
                       .Name("crux_auth_refused_total")
                       .Help(
                           "Connections and messages refused for security reasons, by reason "
                           "(unauthorised_key, mechanism, handshake, identity, role, job_owner, "
                           "connection, quota; docs/protocol.md).")
                       .Register(*registry_);
  for (const char* r : {"unauthorised_key", "mechanism", "handshake", "identity", "role",
                        "job_owner", "connection", "quota"}) {
    auth_refused_->Add({{"reason", r}});
  }
  store_healthy_ = &BuildGauge()
                        .Name("crux_store_healthy")
                        .Help(
                            "1 while state writes succeed, 0 after a failed write (re-plans "
                            "are not applied until the store works again).")
                        .Register(*registry_)
                        .Add({});
  store_healthy_->Set(1);
  link_changes_ = &BuildCounter()
                       .Name("crux_link_changes_total")
                       .Help(
                           "Changes of a directed link's health in force, by source (automatic "
                           "fault handling or an admin pin) and new health.")
                       .Register(*registry_);
  // Every series from 0, so that rate() and increase() see the first change.
  for (const char* source : {"automatic", "admin"}) {
    for (const char* health : {"up", "degraded", "down"}) {
      link_changes_->Add({{"source", source}, {"health", health}});
    }
  }
  links_not_up_ = &BuildGauge()
                       .Name("crux_links_not_up")
                       .Help("Directed links whose health in force is down or degraded.")
                       .Register(*registry_);
  SetLinksNotUp(0, 0);
  contradicted_jobs_ = &BuildGauge()
                            .Name("crux_fault_contradicted_jobs")
                            .Help(
                                "Jobs whose flow reports contradict every other source (slow "
                                "where others are healthy, no switch or NIC signal): not believed "
                                "by fault handling (cruxctl faults).")
                            .Register(*registry_)
                            .Add({});
  auto& reoptimizations = BuildCounter()
                              .Name("crux_reoptimizations_total")
                              .Help(
                                  "Re-optimisations beside the runs, by result: fresh plan "
                                  "adopted, plan in force kept (gain below the minimum), "
                                  "discarded (topology or planner options changed while it "
                                  "ran), failed.")
                              .Register(*registry_);
  const char* const kReoptimizeResults[] = {"adopted", "kept", "discarded", "failed"};
  for (size_t i = 0; i < reoptimizations_.size(); ++i) {
    reoptimizations_[i] = &reoptimizations.Add({{"result", kReoptimizeResults[i]}});
  }
  disbelieved_reports_ = &BuildCounter()
                              .Name("crux_fault_disbelieved_reports_total")
                              .Help(
                                  "Fault evaluations x jobs whose flow samples were left out "
                                  "because they contradict every other source.")
                              .Register(*registry_)
                              .Add({});
  ha_leader_ = &BuildGauge()
                    .Name("crux_ha_leader")
                    .Help("1 while this cruxd serves as leader (a single cruxd always), 0 standby.")
                    .Register(*registry_)
                    .Add({});
  impact_recovered_ = &BuildGauge()
                           .Name("crux_impact_gpus_recovered")
                           .Help(
                               "GPU-hours recovered per hour by the plan in force against ECMP "
                               "hashing of the same flows, as predicted (docs/impact.md).")
                           .Register(*registry_)
                           .Add({});
  impact_gpus_ = &BuildGauge()
                      .Name("crux_impact_planned_gpus")
                      .Help("GPUs of the jobs the plan in force covers.")
                      .Register(*registry_)
                      .Add({});
  impact_error_ =
      &BuildHistogram()
           .Name("crux_impact_prediction_error")
           .Help(
               "|observed - predicted| / observed iteration time of scheduled jobs, one "
               "observation per job per plan.")
           .Register(*registry_)
           .Add({}, Histogram::BucketBoundaries{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2});
  job_iteration_ = &BuildGauge()
                        .Name("crux_job_iteration_seconds")
                        .Help(
                            "Iteration time of the jobs with most GPUs (impact.top_jobs): "
                            "predicted under the plan, under ECMP, and observed.")
                        .Register(*registry_);
  auto& enforcement = BuildGauge()
                          .Name("crux_switch_enforcement")
                          .Help(
                              "Switches by their agent's latest enforcement check: the QoS maps "
                              "the ASIC holds and the queues traffic uses, against the plan "
                              "(unknown: not checked, cannot be checked, or agent away).")
                          .Register(*registry_);
  enforcement_match_ = &enforcement.Add({{"state", "match"}});
  enforcement_mismatch_ = &enforcement.Add({{"state", "mismatch"}});
  enforcement_unknown_ = &enforcement.Add({{"state", "unknown"}});
}

Metrics::~Metrics() = default;

core::Status Metrics::StartExposer(const std::string& listen) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
    exposer_->RegisterCollectable(registry_);
  } catch (const std::exception& e) {
    exposer_.reset();
    return core::UnavailableError("metrics_listen: cannot serve on " + listen + ": " + e.what());
  }
  return core::Status::Ok();
}

int Metrics::port() const {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::string Metrics::Serialize() const {
  prometheus::TextSerializer s;
  return s.Serialize(registry_->Collect());
}

void Metrics::SetJobs(const std::map<std::string, int64_t>& by_state) {
  for (const char* s : {"registered", "profiling", "scheduled"}) {
    auto it = by_state.find(s);
    jobs_->Add({{"state", s}}).Set(it == by_state.end() ? 0.0 : static_cast<double>(it->second));
  }
}
void Metrics::SetClients(int64_t n) { clients_->Set(static_cast<double>(n)); }
void Metrics::SetSwitches(int64_t n) { switches_->Set(static_cast<double>(n)); }
void Metrics::SetEpoch(uint64_t e) { epoch_->Set(static_cast<double>(e)); }
void Metrics::ObserveReplan(double seconds, bool ok) {
  replan_seconds_->Observe(seconds);
  (ok ? replans_ok_ : replans_failed_)->Increment();
}
void Metrics::ObserveLoopLag(double seconds) { loop_lag_seconds_->Observe(seconds); }
void Metrics::AddPushes(uint64_t sent, uint64_t failed) {
  if (sent) pushes_->Increment(static_cast<double>(sent));
  if (failed) push_failures_->Increment(static_cast<double>(failed));
}
void Metrics::AddAck(bool ok) { (ok ? acks_ok_ : acks_failed_)->Increment(); }
void Metrics::AddError(const std::string& endpoint, const std::string& kind, uint64_t n) {
  if (n) errors_->Add({{"endpoint", endpoint}, {"kind", kind}}).Increment(static_cast<double>(n));
}
void Metrics::AddMessage(std::string_view endpoint, std::string_view type) {
  prometheus::Counter* c = nullptr;
  {
    MutexLock lock(&message_cache_mu_);
    auto e = message_cache_.find(endpoint);
    if (e == message_cache_.end()) e = message_cache_.try_emplace(std::string(endpoint)).first;
    auto t = e->second.find(type);
    if (t == e->second.end()) {
      c = &messages_->Add({{"endpoint", std::string(endpoint)}, {"type", std::string(type)}});
      e->second.emplace(std::string(type), c);
    } else {
      c = t->second;
    }
  }
  c->Increment();
}
void Metrics::SetQueueDepth(const std::string& queue, int64_t depth) {
  queue_depth_->Add({{"queue", queue}}).Set(static_cast<double>(depth));
}
void Metrics::ObserveSendQueue(const std::string& endpoint,
                               const std::vector<double>& bucket_frames, double wait_s) {
  prometheus::Histogram::BucketBoundaries bounds;
  for (double ms : protocol::kSendQueueBoundsMs) bounds.push_back(ms / 1000.0);
  prometheus::Histogram& h = send_queue_seconds_->Add({{"endpoint", endpoint}}, bounds);
  if (bucket_frames.size() == bounds.size() + 1) h.ObserveMultiple(bucket_frames, wait_s);
}

void Metrics::AddHostProbes(const std::string& outcome, uint64_t n) {
  if (n) host_probes_->Add({{"outcome", outcome}}).Increment(static_cast<double>(n));
}
void Metrics::AddRefusal(const std::string& reason, uint64_t n) {
  if (n) auth_refused_->Add({{"reason", reason}}).Increment(static_cast<double>(n));
}
void Metrics::SetStoreHealthy(bool ok) { store_healthy_->Set(ok ? 1 : 0); }
void Metrics::AddLinkChange(bool automatic, const std::string& health) {
  link_changes_->Add({{"source", automatic ? "automatic" : "admin"}, {"health", health}})
      .Increment();
}
void Metrics::SetContradictedJobs(int64_t jobs, uint64_t more) {
  contradicted_jobs_->Set(static_cast<double>(jobs));
  if (more) disbelieved_reports_->Increment(static_cast<double>(more));
}
void Metrics::SetReoptimizations(uint64_t adopted, uint64_t kept, uint64_t discarded,
                                 uint64_t failed) {
  const std::array<uint64_t, 4> now = {adopted, kept, discarded, failed};
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] > reoptimizations_seen_[i]) {
      reoptimizations_[i]->Increment(static_cast<double>(now[i] - reoptimizations_seen_[i]));
      reoptimizations_seen_[i] = now[i];
    }
  }
}
void Metrics::SetLeader(bool leader) { ha_leader_->Set(leader ? 1 : 0); }

void Metrics::SetImpact(double gpus_recovered, int planned_gpus, const std::vector<ImpactJob>& jobs,
                        int top) {
  impact_recovered_->Set(gpus_recovered);
  impact_gpus_->Set(static_cast<double>(planned_gpus));
  for (const ImpactJob& j : jobs) {
    if (j.error >= 0) impact_error_->Observe(j.error);
  }
  std::vector<const ImpactJob*> order;
  order.reserve(jobs.size());
  for (const ImpactJob& j : jobs) order.push_back(&j);
  const size_t n = std::min(order.size(), static_cast<size_t>(std::max(0, top)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [](const ImpactJob* a, const ImpactJob* b) {
                      return a->gpus != b->gpus ? a->gpus > b->gpus : a->id < b->id;
                    });
  MutexLock lock(&impact_mu_);
  for (prometheus::Gauge* g : job_series_) job_iteration_->Remove(g);
  job_series_.clear();
  for (size_t i = 0; i < n; ++i) {
    const ImpactJob& j = *order[i];
    const std::pair<const char*, double> kinds[] = {
        {"predicted", j.predicted_s}, {"ecmp", j.ecmp_s}, {"observed", j.observed_s}};
    for (const auto& [kind, v] : kinds) {
      if (v < 0) continue;  // No observation yet.
      prometheus::Gauge* g = &job_iteration_->Add({{"job", j.id}, {"kind", kind}});
      g->Set(v);
      job_series_.push_back(g);
    }
  }
}

void Metrics::SetSwitchEnforcement(int64_t match, int64_t mismatch, int64_t unknown) {
  enforcement_match_->Set(static_cast<double>(match));
  enforcement_mismatch_->Set(static_cast<double>(mismatch));
  enforcement_unknown_->Set(static_cast<double>(unknown));
}
void Metrics::SetLinksNotUp(int64_t down, int64_t degraded) {
  links_not_up_->Add({{"health", "down"}}).Set(static_cast<double>(down));
  links_not_up_->Add({{"health", "degraded"}}).Set(static_cast<double>(degraded));
}

namespace {

constexpr const char* kHaRoles[] = {"campaigning", "standby", "leader", "deposed"};

}  // namespace

void Metrics::EnableHa() {
  using namespace prometheus;  // NOLINT(build/namespaces): builder-heavy block.
  MutexLock lock(&ha_mu_);
  if (ha_role_ != nullptr) return;
  ha_role_ = &BuildGauge()
                  .Name("crux_ha_role")
                  .Help(
                      "High availability: 1 for this instance's role (campaigning, standby, "
                      "leader, deposed), 0 for the others.")
                  .Register(*registry_);
  for (const char* r : kHaRoles) ha_role_->Add({{"role", r}}).Set(r == kHaRoles[0] ? 1 : 0);
  ha_term_ = &BuildGauge()
                  .Name("crux_ha_term")
                  .Help("High availability: the leader's term (its etcd election revision).")
                  .Register(*registry_)
                  .Add({});
  ha_leader_changes_ = &BuildCounter()
                            .Name("crux_ha_leader_changes_total")
                            .Help(
                                "High availability: times the leader's term changed as this "
                                "instance saw it (the first leader seen is no change).")
                            .Register(*registry_)
                            .Add({});
  ha_etcd_errors_ = &BuildCounter()
                         .Name("crux_ha_etcd_errors_total")
                         .Help(
                             "High availability: failed etcd calls by operation (campaign, "
                             "keepalive, list, revoke, state).")
                         .Register(*registry_);
  for (const char* op : {"campaign", "keepalive", "list", "revoke", "state"}) {
    ha_etcd_errors_->Add({{"op", op}});
  }
  ha_fence_closes_ = &BuildCounter()
                          .Name("crux_ha_fence_closes_total")
                          .Help(
                              "High availability: this instance's fence closed while it led, by "
                              "reason (lease, deposed, resigned, store_guard).")
                          .Register(*registry_);
  for (const char* r : {"lease", "deposed", "resigned", "store_guard"}) {
    ha_fence_closes_->Add({{"reason", r}});
  }
}

void Metrics::SetHaRole(const std::string& role) {
  MutexLock lock(&ha_mu_);
  if (ha_role_ == nullptr) return;
  for (const char* r : kHaRoles) ha_role_->Add({{"role", r}}).Set(role == r ? 1 : 0);
}
void Metrics::SetHaTerm(uint64_t term) {
  MutexLock lock(&ha_mu_);
  if (ha_term_ != nullptr) ha_term_->Set(static_cast<double>(term));
}
void Metrics::AddHaLeaderChanges(uint64_t n) {
  MutexLock lock(&ha_mu_);
  if (ha_leader_changes_ != nullptr && n > 0) ha_leader_changes_->Increment(static_cast<double>(n));
}
void Metrics::AddHaEtcdErrors(const std::string& op, uint64_t n) {
  MutexLock lock(&ha_mu_);
  if (ha_etcd_errors_ != nullptr && n > 0) {
    ha_etcd_errors_->Add({{"op", op}}).Increment(static_cast<double>(n));
  }
}
void Metrics::AddHaFenceCloses(const std::string& reason, uint64_t n) {
  MutexLock lock(&ha_mu_);
  if (ha_fence_closes_ != nullptr && n > 0) {
    ha_fence_closes_->Add({{"reason", reason}}).Increment(static_cast<double>(n));
  }
}

}  // namespace crux::daemon
