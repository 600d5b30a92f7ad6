// EtcdCluster: a real etcd cluster (Debian etcd-server, 3 members by default) on free loopback
// ports in a temporary directory, for the HA tests. Members run with a 100 ms heartbeat and a
// 500 ms election timeout (etcd's defaults are 100 / 1000 ms), so the cluster is up in about a
// second; each can be killed, paused (SIGSTOP) and restarted on its data directory.
//
// Skips (Available() == false) when /usr/bin/etcd is missing; scripts/deps.sh installs it.
//
// Thread-safety: test thread only.
#ifndef CRUX_TESTS_HA_ETCD_CLUSTER_H_
#define CRUX_TESTS_HA_ETCD_CLUSTER_H_

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "../system/process_util.h"
#include "crux/daemon/ha/etcd_gateway.h"

namespace crux::ha_test {

using system_test::ChildProcess;
using system_test::FreeTcpPort;
using system_test::TempDir;
using system_test::WaitUntil;

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

class EtcdCluster {
 public:
  static bool Available() { return ::access(kEtcdBinary, X_OK) == 0; }

  explicit EtcdCluster(int members = 3) : dir_("crux_etcd") {
    for (int i = 0; i < members; ++i) {
      Member m;
      m.name = "m" + std::to_string(i);
      m.client_port = FreeTcpPort();
      m.peer_port = FreeTcpPort();
      members_.push_back(std::move(m));
    }
  }

  // Starts every member; true once the cluster answers a write (at most `timeout`).
  bool Start(std::chrono::milliseconds timeout = std::chrono::milliseconds(15000)) {
    for (size_t i = 0; i < members_.size(); ++i) StartMember(i);
    return WaitWritable(timeout);
  }

  void StartMember(size_t i) {
    Member& m = members_[i];
    std::string cluster;
    for (const Member& o : members_) {
      if (!cluster.empty()) cluster += ",";
      cluster += o.name + "=http://127.0.0.1:" + std::to_string(o.peer_port);
    }
    const std::string client = "http://127.0.0.1:" + std::to_string(m.client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    m.process = std::make_unique<ChildProcess>();
    m.process->Start({kEtcdBinary,
                      "--name",
                      m.name,
                      "--data-dir",
                      (dir_.path() / m.name).string(),
                      "--listen-client-urls",
                      client,
                      "--advertise-client-urls",
                      client,
                      "--listen-peer-urls",
                      peer,
                      "--initial-advertise-peer-urls",
                      peer,
                      "--initial-cluster",
                      cluster,
                      "--initial-cluster-state",
                      "new",
                      "--initial-cluster-token",
                      "crux-test",
                      "--heartbeat-interval",
                      "100",
                      "--election-timeout",
                      "500",
                      "--logger",
                      "zap",
                      "--log-level",
                      "error"},
                     dir_.path() / (m.name + ".out"), dir_.path() / (m.name + ".err"));
  }

  void Kill(size_t i) { members_[i].process->Kill(SIGKILL); }
  void Signal(size_t i, int sig) { members_[i].process->Kill(sig); }

  // A write through the gateway succeeds within `timeout`.
  bool WaitWritable(std::chrono::milliseconds timeout) {
    auto etcd = daemon::ha::ConnectGateway({Endpoints(), core::Duration::Millis(500)});
    if (!etcd.ok()) return false;
    return WaitUntil(
        [&] {
          auto r = (*etcd)->Txn({}, {daemon::ha::TxnOp::Put("/crux-test/ready", "1")}, {});
          return r.ok();
        },
        timeout, std::chrono::milliseconds(50));
  }

  // The index of the member etcd's Raft leader is, -1 when unknown.
  int LeaderIndex() {
    const std::vector<std::string> all = Endpoints();
    for (size_t i = 0; i < all.size(); ++i) {
      auto etcd = daemon::ha::ConnectGateway({{all[i]}, core::Duration::Millis(500)});
      if (!etcd.ok()) continue;
      auto s = (*etcd)->Status();
      if (s.ok() && s->leader != 0 && s->leader == s->member_id) return static_cast<int>(i);
    }
    return -1;
  }

  std::vector<std::string> Endpoints() const {
    std::vector<std::string> out;
    for (const Member& m : members_) {
      out.push_back("http://127.0.0.1:" + std::to_string(m.client_port));
    }
    return out;
  }
  // "http://a,http://b,http://c" (cruxd's --etcd flag, the YAML list in a config).
  std::string EndpointList() const {
    std::string out;
    for (const std::string& e : Endpoints()) out += (out.empty() ? "" : ",") + e;
    return out;
  }
  const system_test::fs::path& dir() const { return dir_.path(); }

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  TempDir dir_;
  std::vector<Member> members_;
};

}  // namespace crux::ha_test

#endif  // CRUX_TESTS_HA_ETCD_CLUSTER_H_
