// cruxd's Prometheus metrics (prometheus-cpp). Names follow the conventions: prefix crux_,
// base units in the name, counters end in _total, low-cardinality labels only.
//
// Thread-safety: prometheus-cpp metrics are thread-safe (the pointers below are set by the
// constructor and never change); the message-counter cache has its own lock. The Metrics object
// is created before and destroyed after every module that uses it.
#ifndef CRUX_DAEMON_RUNTIME_METRICS_H_
#define CRUX_DAEMON_RUNTIME_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/sync/thread_annotations.h"

namespace prometheus {
class Registry;
class Exposer;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace crux::daemon {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Starts the HTTP exporter on "host:port" ("127.0.0.1:0" picks a free port, see port()).
  // Errors: kUnavailable when it cannot bind.
  core::Status StartExposer(const std::string& listen);
  int port() const;  // Bound port, 0 when not exposed.

  // The exposition text (what /metrics serves).
  std::string Serialize() const;

  // --- updates (any thread) ---
  void SetJobs(const std::map<std::string, int64_t>& by_state);
  void SetClients(int64_t n);
  void SetSwitches(int64_t n);
  void SetEpoch(uint64_t epoch);
  void ObserveReplan(double seconds, bool ok);
  // Event-loop lag: time from posting work to its start (crux_event_loop_lag_seconds).
  void ObserveLoopLag(double seconds);
  void AddPushes(uint64_t sent, uint64_t failed);
  void AddAck(bool ok);
  // Errors by kind ("unknown_host", "unknown_job", "malformed", ...), endpoint "client"/"admin".
  void AddError(const std::string& endpoint, const std::string& kind, uint64_t n = 1);
  // Per message: the counter is looked up once per (endpoint, type) and cached (no label map
  // built per message).
  void AddMessage(std::string_view endpoint, std::string_view type)
      CRUX_EXCLUDES(message_cache_mu_);
  void SetQueueDepth(const std::string& queue, int64_t depth);
  // crux_transport_send_queue_seconds{endpoint}: how long frames waited in the endpoint's send
  // queue (protocol::ServerCounters::send_queue_*): `bucket_frames` new frames per bucket
  // (bounds protocol::kSendQueueBoundsMs, then +Inf) and the sum of their waits in seconds.
  void ObserveSendQueue(const std::string& endpoint, const std::vector<double>& bucket_frames,
                        double wait_s);
  // Host agents' capacity probe results (HostTelemetry.probes) by what became of them
  // (crux_host_probes_total{outcome}): accepted (to the fault manager), rejected, stale (not a
  // probe of the assignment in force), sender_limited (a lower bound below the gray ratio).
  void AddHostProbes(const std::string& outcome, uint64_t n);
  // Security refusals by reason (crux_auth_refused_total{reason}).
  void AddRefusal(const std::string& reason, uint64_t n = 1);
  void SetStoreHealthy(bool ok);
  // Link health in force changed (crux_link_changes_total{source="automatic"|"admin",health}),
  // and the links not up now (crux_links_not_up{health="down"|"degraded"}).
  void AddLinkChange(bool automatic, const std::string& health);
  void SetLinksNotUp(int64_t down, int64_t degraded);
  // Jobs whose flow reports contradict every other source now (crux_fault_contradicted_jobs),
  // and evaluations x jobs whose samples were left out for it
  // (crux_fault_disbelieved_reports_total, raised by `more`).
  void SetContradictedJobs(int64_t jobs, uint64_t more);
  // Re-optimisations beside the runs so far, by result (crux_reoptimizations_total{result=
  // "adopted"|"kept"|"discarded"|"failed"}: ControlHost's ReoptimizeStats; totals, not deltas).
  void SetReoptimizations(uint64_t adopted, uint64_t kept, uint64_t discarded, uint64_t failed);
  // crux_ha_leader: 1 while this instance serves as leader (a single cruxd without `ha:` leads
  // from its start; a standby shows 0). Always present, unlike the crux_ha_* series below, so one
  // alert covers single and HA deployments.
  void SetLeader(bool leader);
  // Shadow accounting of a plan (docs/impact.md), at each published plan:
  //   crux_impact_gpus_recovered                gauge, PlanImpact::gpus_recovered
  //   crux_impact_planned_gpus                  gauge, the GPUs of the planned jobs
  //   crux_impact_prediction_error              histogram, one observation per scheduled job
  //                                             with a reported period, per plan
  //   crux_job_iteration_seconds{job,kind}      gauges for the `top` jobs with most GPUs, kind
  //                                             predicted | ecmp | observed (series of jobs
  //                                             that left the top are removed)
  // `jobs` are (id, gpus, predicted s, ecmp s, observed s or < 0 when none, error or < 0).
  struct ImpactJob {
    std::string id;
    int gpus = 0;
    double predicted_s = 0;
    double ecmp_s = 0;
    double observed_s = -1;
    double error = -1;
  };
  void SetImpact(double gpus_recovered, int planned_gpus, const std::vector<ImpactJob>& jobs,
                 int top) CRUX_EXCLUDES(impact_mu_);
  // Switches by their agents' latest enforcement check (issue #29):
  // crux_switch_enforcement{state="match"|"mismatch"|"unknown"}.
  void SetSwitchEnforcement(int64_t match, int64_t mismatch, int64_t unknown);

  // High availability (docs/daemon.md "High availability"): the crux_ha_* series exist only
  // after EnableHa() (an instance with `ha:`); the setters below do nothing before it.
  // crux_ha_role{role}: 1 for this instance's role (campaigning, standby, leader, deposed), 0 for
  // the others; crux_ha_term: the leader's term (this instance's while it leads);
  // crux_ha_leader_changes_total; crux_ha_etcd_errors_total{op}: failed etcd calls by operation
  // (campaign, keepalive, list, revoke, state: the leader's shared-state reads and writes);
  // crux_ha_fence_closes_total{reason}: this instance's fence closed while it led (lease, deposed,
  // resigned; store_guard: the shared state refused a write, its election key being gone).
  void EnableHa() CRUX_EXCLUDES(ha_mu_);
  void SetHaRole(const std::string& role) CRUX_EXCLUDES(ha_mu_);
  void SetHaTerm(uint64_t term) CRUX_EXCLUDES(ha_mu_);
  void AddHaLeaderChanges(uint64_t n) CRUX_EXCLUDES(ha_mu_);
  void AddHaEtcdErrors(const std::string& op, uint64_t n) CRUX_EXCLUDES(ha_mu_);
  void AddHaFenceCloses(const std::string& reason, uint64_t n) CRUX_EXCLUDES(ha_mu_);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* clients_;
  prometheus::Gauge* switches_;
  prometheus::Gauge* epoch_;
  prometheus::Histogram* replan_seconds_;
  prometheus::Histogram* loop_lag_seconds_;
  prometheus::Counter* replans_ok_;
  prometheus::Counter* replans_failed_;
  prometheus::Counter* pushes_;
  prometheus::Counter* push_failures_;
  prometheus::Counter* acks_ok_;
  prometheus::Counter* acks_failed_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Counter>* messages_;
  Mutex message_cache_mu_;
  std::map<std::string, std::map<std::string, prometheus::Counter*, std::less<>>, std::less<>>
      message_cache_ CRUX_GUARDED_BY(message_cache_mu_);
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Histogram>* send_queue_seconds_;
  prometheus::Family<prometheus::Counter>* auth_refused_;
  prometheus::Family<prometheus::Counter>* host_probes_;
  prometheus::Gauge* store_healthy_;
  prometheus::Family<prometheus::Counter>* link_changes_;
  prometheus::Family<prometheus::Gauge>* links_not_up_;
  prometheus::Gauge* contradicted_jobs_;
  prometheus::Counter* disbelieved_reports_;
  // adopted, kept, discarded, failed; and the totals already counted.
  std::array<prometheus::Counter*, 4> reoptimizations_{};
  std::array<uint64_t, 4> reoptimizations_seen_{};
  prometheus::Gauge* ha_leader_;
  prometheus::Gauge* impact_recovered_;
  prometheus::Gauge* impact_gpus_;
  prometheus::Histogram* impact_error_;
  prometheus::Family<prometheus::Gauge>* job_iteration_;
  Mutex impact_mu_;
  std::vector<prometheus::Gauge*> job_series_ CRUX_GUARDED_BY(impact_mu_);
  prometheus::Gauge* enforcement_match_;
  prometheus::Gauge* enforcement_mismatch_;
  prometheus::Gauge* enforcement_unknown_;
  // HA series: null until EnableHa().
  Mutex ha_mu_;
  prometheus::Family<prometheus::Gauge>* ha_role_ CRUX_GUARDED_BY(ha_mu_) = nullptr;
  prometheus::Gauge* ha_term_ CRUX_GUARDED_BY(ha_mu_) = nullptr;
  prometheus::Counter* ha_leader_changes_ CRUX_GUARDED_BY(ha_mu_) = nullptr;
  prometheus::Family<prometheus::Counter>* ha_etcd_errors_ CRUX_GUARDED_BY(ha_mu_) = nullptr;
  prometheus::Family<prometheus::Counter>* ha_fence_closes_ CRUX_GUARDED_BY(ha_mu_) = nullptr;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_RUNTIME_METRICS_H_
