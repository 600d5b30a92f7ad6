// Helpers for the daemon tests: message builders and a capturing sender.
#ifndef CRUX_TESTS_DAEMON_DAEMON_TEST_UTIL_H_
#define CRUX_TESTS_DAEMON_DAEMON_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "crux/daemon/app/daemon.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/server.h"
#include "crux/spec/topology_spec.h"
#include "crux/v1/envelope.pb.h"
#include "faulty_store.h"

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

// crux-hostd's NIC counters (HostTelemetry) for `host`: one report of `nics` (default: the host's
// nic0), each with `seq_errors` sequence errors and 40 CNPs over one second.
inline v1::Envelope NicReport(const std::string& host, uint64_t rid = 42,
                              std::vector<std::string> nics = {}, uint64_t seq_errors = 500) {
  if (nics.empty()) nics = {host + "/nic0"};
  v1::Envelope e = protocol::NewEnvelope(rid);
  v1::HostTelemetry* t = e.mutable_host_telemetry();
  t->set_host(host);
  t->set_seq(rid);
  for (const std::string& name : nics) {
    v1::NicCounters* n = t->add_nics();
    n->set_nic(name);
    n->set_device("mlx5_0");
    n->set_port(1);
    n->set_interval_ns(1000000000);
    n->set_packet_seq_err(seq_errors);
    n->set_np_cnp_sent(40);
  }
  return e;
}

inline protocol::Inbound In(const std::string& peer, v1::Envelope msg,
                            const std::string& user_id = "") {
  return protocol::Inbound{peer, user_id, std::move(msg)};
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

constexpr core::Duration kDebounce = core::Duration::Millis(20);

// A whole Daemon on a ManualEventLoop over a real SQLite file (through a FaultyStore, whose
// rules are off unless a test sets them), with capturing senders. Client() returns a request's
// reply and files pushes under pushes_[peer].
class DaemonFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    config_ = BuiltinDefaults();
    config_.state_dir = dir_.string();
    config_.lease_ms = 1000;
    config_.debounce_ms = kDebounce.nanos() / 1000000;
    config_.min_replan_interval_ms = 0;
    config_.profiling_samples = 10;
    Open();
  }
  void TearDown() override {
    Close();
    std::filesystem::remove_all(dir_);
  }

  // `topology_yaml` "" = the embedded example Clos.
  void Open(const std::string& topology_yaml = "") {
    auto store = OpenSqliteStore(DatabasePath(config_));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    sqlite_ = std::move(store).value();
    faulty_ = std::make_unique<FaultyStore>(sqlite_.get());
    auto topo = spec::ParseTopology(
        topology_yaml.empty() ? std::string(EmbeddedTopologyYaml()) : topology_yaml, "");
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    auto d = Daemon::Create(config_, std::move(topo).value(), "embedded:example_clos2",
                            faulty_.get(), &loop_, &metrics_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    daemon_->SetClientSender(
        [this](const std::string& p, const v1::Envelope& m) { return client_.Send(p, m); });
    daemon_->SetAdminSender(
        [this](const std::string& p, const v1::Envelope& m) { return admin_.Send(p, m); });
    daemon_->Start();
  }
  void Close() {
    daemon_.reset();
    faulty_.reset();
    sqlite_.reset();
  }

  // Sends one client message; returns its reply and files pushes under pushes_[peer].
  v1::Envelope Client(const std::string& peer, const v1::Envelope& msg,
                      const std::string& user_id = "") {
    daemon_->ProcessClient(In(peer, msg, user_id));
    v1::Envelope reply;
    bool got = false;
    for (auto& [p, m] : client_.Take()) {
      if (m.request_id() == 0) {
        pushes_[p].push_back(m);
      } else if (!got && p == peer) {
        reply = m;
        got = true;
      }
    }
    EXPECT_TRUE(got) << "no reply to " << protocol::BodyName(msg);
    return reply;
  }
  v1::Envelope Admin(const v1::Envelope& msg) {
    daemon_->ProcessAdmin(In("admin", msg));
    auto sent = admin_.Take();
    EXPECT_EQ(sent.size(), 1u);
    return sent.empty() ? v1::Envelope() : sent.back().second;
  }
  v1::StatusReply Status() {
    v1::Envelope req = protocol::NewEnvelope(90);
    req.mutable_status_request();
    return Admin(req).status_reply();
  }
  // Lets time pass; pushes land in pushes_.
  void Advance(core::Duration d) {
    loop_.Advance(d);
    for (auto& [p, m] : client_.Take()) pushes_[p].push_back(m);
  }
  // The latest Assignment pushed to `peer` (fails the test if none).
  v1::Assignment LastAssignment(const std::string& peer) {
    for (auto it = pushes_[peer].rbegin(); it != pushes_[peer].rend(); ++it) {
      if (it->has_assignment()) return it->assignment();
    }
    ADD_FAILURE() << "no assignment pushed to " << peer;
    return v1::Assignment();
  }
  void RegisterThree() {
    for (const auto& [id, hosts] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"a", {"host0", "host4"}}, {"b", {"host1", "host5"}}, {"c", {"host2", "host6"}}}) {
      v1::Envelope r = Client("peer-" + id, Register(id, hosts));
      ASSERT_TRUE(r.has_register_job_reply()) << r.DebugString();
      EXPECT_FALSE(r.register_job_reply().already_known());
    }
  }

  std::filesystem::path dir_;
  DaemonConfig config_;
  ManualEventLoop loop_;
  Metrics metrics_;
  std::unique_ptr<Store> sqlite_;
  std::unique_ptr<FaultyStore> faulty_;
  std::unique_ptr<Daemon> daemon_;
  Capture client_;
  Capture admin_;
  std::map<std::string, std::vector<v1::Envelope>> pushes_;
};

}  // namespace crux::daemon::testing

#endif  // CRUX_TESTS_DAEMON_DAEMON_TEST_UTIL_H_
