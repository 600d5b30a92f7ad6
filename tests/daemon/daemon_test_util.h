// Helpers for the daemon tests: message builders and a capturing sender.
#ifndef CRUX_TESTS_DAEMON_DAEMON_TEST_UTIL_H_
#define CRUX_TESTS_DAEMON_DAEMON_TEST_UTIL_H_

#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "crux/protocol/codec.h"
#include "crux/protocol/server.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon::testing {

// One registration on the example Clos (hosts host0..host15), ring all-reduce of `bytes`.
inline v1::Envelope Register(const std::string& id, std::vector<std::string> hosts,
                             uint64_t bytes = 1000000000, uint64_t rid = 1) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::RegisterJob* r = e.mutable_register_job();
  r->set_job_id(id);
  r->set_tenant("team");
  for (const auto& h : hosts) {
    v1::HostPlacement* p = r->add_placement();
    p->set_host(h);
    p->set_gpus(8);
  }
  r->set_pattern("ring_allreduce");
  r->set_bytes_per_iteration(bytes);
  return e;
}

inline v1::Envelope Profile(const std::string& id, uint64_t compute_ms, uint32_t samples,
                            bool converged, uint64_t rid = 2, uint64_t bytes = 0) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::ProfileReport* p = e.mutable_profile_report();
  p->set_job_id(id);
  p->set_compute_time_ns(compute_ms * 1000000);
  p->set_iteration_period_ns(compute_ms * 1000000 * 2);
  p->set_overlap_start(1.0);
  p->set_samples(samples);
  p->set_converged(converged);
  p->set_bytes_per_iteration(bytes);
  return e;
}

inline v1::Envelope Heartbeat(const std::string& id, uint64_t applied_epoch, uint64_t rid = 3) {
  v1::Envelope e = protocol::NewEnvelope(rid);
  e.mutable_heartbeat()->set_job_id(id);
  e.mutable_heartbeat()->set_seq(rid);
  e.mutable_heartbeat()->set_applied_epoch(applied_epoch);
  return e;
}

inline protocol::Inbound In(const std::string& peer, v1::Envelope msg) {
  return protocol::Inbound{peer, "", std::move(msg)};
}

// Captures everything the daemon sends, per peer. Thread-safe.
class Capture {
 public:
  core::Status Send(const std::string& peer, const v1::Envelope& m) {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.emplace_back(peer, m);
    return core::Status::Ok();
  }
  std::vector<std::pair<std::string, v1::Envelope>> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(sent_, {});
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::string, v1::Envelope>> sent_;
};

inline std::filesystem::path TempDir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() /
           ("crux_daemon_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace crux::daemon::testing

#endif  // CRUX_TESTS_DAEMON_DAEMON_TEST_UTIL_H_
