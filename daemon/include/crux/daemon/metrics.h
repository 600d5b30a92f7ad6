// cruxd's Prometheus metrics (prometheus-cpp). Names follow the conventions: prefix crux_,
// base units in the name, counters end in _total, low-cardinality labels only.
//
// Thread-safety: prometheus-cpp metrics are thread-safe; the Metrics object is created before
// and destroyed after every module that uses it.
#ifndef CRUX_DAEMON_METRICS_H_
#define CRUX_DAEMON_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/status.h"

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
  void AddPushes(uint64_t sent, uint64_t failed);
  void AddAck(bool ok);
  // Errors by kind ("unknown_host", "unknown_job", "malformed", ...), endpoint "client"/"admin".
  void AddError(const std::string& endpoint, const std::string& kind, uint64_t n = 1);
  // Per message: the counter is looked up once per (endpoint, type) and cached (no label map
  // built per message).
  void AddMessage(std::string_view endpoint, std::string_view type);
  void SetQueueDepth(const std::string& queue, int64_t depth);
  // Security refusals by reason (crux_auth_refused_total{reason}).
  void AddRefusal(const std::string& reason, uint64_t n = 1);
  void SetStoreHealthy(bool ok);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* clients_;
  prometheus::Gauge* switches_;
  prometheus::Gauge* epoch_;
  prometheus::Histogram* replan_seconds_;
  prometheus::Counter* replans_ok_;
  prometheus::Counter* replans_failed_;
  prometheus::Counter* pushes_;
  prometheus::Counter* push_failures_;
  prometheus::Counter* acks_ok_;
  prometheus::Counter* acks_failed_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Family<prometheus::Counter>* messages_;
  std::mutex message_cache_mu_;
  std::map<std::string, std::map<std::string, prometheus::Counter*, std::less<>>, std::less<>>
      message_cache_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Counter>* auth_refused_;
  prometheus::Gauge* store_healthy_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_METRICS_H_
