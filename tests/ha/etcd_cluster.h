// EtcdCluster: a real etcd cluster (Debian etcd-server, 3 members by default) on free loopback
// ports in a temporary directory, for the HA tests. Members run with a 100 ms heartbeat and a
// 500 ms election timeout (etcd's defaults are 100 / 1000 ms), so the cluster is up in about a
// second; each can be killed, paused (SIGSTOP) and restarted on its data directory.
//
// With EtcdSecurity::kTls the members serve clients over https:// only and require a client
// certificate (--client-cert-auth): Start() first makes, with openssl (TestPki), a CA "ca", the
// members' certificate "server" (IP 127.0.0.1), the client certificate "client" (no Common Name,
// as the gateway needs once auth is on), "root" (CN=root, etcdctl's admin identity) and a
// "stranger" certificate from another CA "stranger-ca". EnableAuth() then turns on etcd auth with
// a user limited to one key prefix, as docs/daemon.md tells operators to. Peer traffic stays
// plain HTTP on loopback.
//
// Skips (Available() == false) when /usr/bin/etcd is missing; scripts/deps.sh installs it.
//
// Thread-safety: test thread only.
#ifndef CRUX_TESTS_HA_ETCD_CLUSTER_H_
#define CRUX_TESTS_HA_ETCD_CLUSTER_H_

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../system/process_util.h"
#include "crux/daemon/ha/etcd_gateway.h"
#include "test_pki.h"

namespace crux::ha_test {

using system_test::ChildProcess;
using system_test::FreeTcpPort;
using system_test::TempDir;
using system_test::WaitUntil;

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";
inline constexpr const char* kEtcdctlBinary = "/usr/bin/etcdctl";

enum class EtcdSecurity { kPlain, kTls };

class EtcdCluster {
 public:
  static bool Available() { return ::access(kEtcdBinary, X_OK) == 0; }
  // What a kTls cluster needs besides etcd: openssl, and etcdctl for EnableAuth.
  static bool TlsAvailable() {
    return Available() && TestPki::Available() && ::access(kEtcdctlBinary, X_OK) == 0;
  }

  explicit EtcdCluster(int members = 3, EtcdSecurity security = EtcdSecurity::kPlain)
      : dir_("crux_etcd"), tls_(security == EtcdSecurity::kTls), pki_(dir_.path()) {
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
    if (tls_ && !MakeCertificates()) return false;
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
    const std::string client = Scheme() + "127.0.0.1:" + std::to_string(m.client_port);
    const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
    std::vector<std::string> tls;
    if (tls_) {
      tls = {"--cert-file",       pki_.Crt("server"), "--key-file",        pki_.Key("server"),
             "--trusted-ca-file", pki_.Crt("ca"),     "--client-cert-auth"};
    }
    std::vector<std::string> argv = {kEtcdBinary,
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
                                     "error"};
    argv.insert(argv.end(), tls.begin(), tls.end());
    m.process = std::make_unique<ChildProcess>();
    m.process->Start(argv, dir_.path() / (m.name + ".out"), dir_.path() / (m.name + ".err"));
  }

  void Kill(size_t i) { members_[i].process->Kill(SIGKILL); }
  void Signal(size_t i, int sig) { members_[i].process->Kill(sig); }

  // A write through the gateway succeeds within `timeout`.
  bool WaitWritable(std::chrono::milliseconds timeout) {
    auto etcd = daemon::ha::ConnectGateway(Client(core::Duration::Millis(500)));
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
      daemon::ha::GatewayOptions o = Client(core::Duration::Millis(500));
      o.endpoints = {all[i]};
      auto etcd = daemon::ha::ConnectGateway(o);
      if (!etcd.ok()) continue;
      auto s = (*etcd)->Status();
      if (s.ok() && s->leader != 0 && s->leader == s->member_id) return static_cast<int>(i);
    }
    return -1;
  }

  std::vector<std::string> Endpoints() const {
    std::vector<std::string> out;
    for (const Member& m : members_) {
      out.push_back(Scheme() + "127.0.0.1:" + std::to_string(m.client_port));
    }
    return out;
  }
  // "http://a,http://b,http://c" (https:// on kTls; cruxd's --etcd flag, a config's YAML list).
  std::string EndpointList() const {
    std::string out;
    for (const std::string& e : Endpoints()) out += (out.empty() ? "" : ",") + e;
    return out;
  }
  const system_test::fs::path& dir() const { return dir_.path(); }

  // Gateway options of a client that the cluster accepts: every endpoint, with the "client"
  // certificate on a kTls cluster and the user once EnableAuth ran.
  daemon::ha::GatewayOptions Client(core::Duration timeout) const {
    daemon::ha::GatewayOptions o{Endpoints(), timeout};
    if (tls_) {
      o.ca_file = pki_.Crt("ca");
      o.cert_file = pki_.Crt("client");
      o.key_file = pki_.Key("client");
    }
    o.user = user_;
    o.password = password_;
    return o;
  }
  const TestPki& pki() const { return pki_; }

  // etcdctl against every member as CN=root (kTls clusters), `input` on its standard input;
  // its output and exit code.
  system_test::CommandResult Etcdctl(const std::vector<std::string>& args,
                                     const std::string& input = "") {
    std::vector<std::string> argv = {kEtcdctlBinary,   "--endpoints",  EndpointList(),
                                     "--cacert",       pki_.Crt("ca"), "--cert",
                                     pki_.Crt("root"), "--key",        pki_.Key("root")};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!input.empty()) {  // RunCommand's standard input is /dev/null: a shell redirects it.
      const system_test::fs::path in = dir_.path() / "etcdctl.in";
      system_test::WriteFile(in, input);
      std::string line = "exec";
      for (const std::string& a : argv) line += " '" + a + "'";
      argv = {"/bin/sh", "-c", line + " < '" + in.string() + "'"};
    }
    return system_test::RunCommand(argv, dir_.path(), std::chrono::milliseconds(10000),
                                   {"ETCDCTL_API=3"});
  }

  // Turns on etcd auth (kTls clusters) as docs/daemon.md describes: a root user, and `user`
  // (password `password`) with a role that may read and write keys under `prefix` only. Client()
  // then authenticates as `user`; password_file() holds the password (mode 0600). Returns ""
  // or the failing etcdctl command's output.
  std::string EnableAuth(const std::string& user, const std::string& password,
                         const std::string& prefix) {
    const std::vector<std::vector<std::string>> steps = {
        {"user", "add", "root:root-" + password},
        {"user", "grant-role", "root", "root"},
        {"user", "add", user + ":" + password},
        {"role", "add", "crux-role"},
        {"role", "grant-permission", "--prefix=true", "crux-role", "readwrite", prefix},
        {"user", "grant-role", user, "crux-role"},
        {"auth", "enable"}};
    for (const std::vector<std::string>& step : steps) {
      const system_test::CommandResult r = Etcdctl(step);
      if (r.exit_code != 0) return "etcdctl " + step[0] + " " + step[1] + ": " + r.out + r.err;
    }
    user_ = user;
    password_ = password;
    system_test::WriteFile(password_file(), password + "\n");
    system_test::fs::permissions(
        password_file(), system_test::fs::perms::owner_read | system_test::fs::perms::owner_write);
    return "";
  }
  system_test::fs::path password_file() const { return dir_.path() / "etcd-password"; }

 private:
  std::string Scheme() const { return tls_ ? "https://" : "http://"; }

  bool MakeCertificates() {
    const bool ok =
        pki_.MakeCa("ca") && pki_.Issue("ca", "server", "/CN=etcd-member", "IP:127.0.0.1") &&
        pki_.Issue("ca", "client", "/O=cruxd") && pki_.Issue("ca", "root", "/CN=root") &&
        pki_.MakeCa("stranger-ca") && pki_.Issue("stranger-ca", "stranger", "/O=cruxd");
    if (!ok) std::fprintf(stderr, "test certificates: %s\n", pki_.error().c_str());
    return ok;
  }

  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  TempDir dir_;
  bool tls_ = false;
  TestPki pki_;
  std::vector<Member> members_;
  std::string user_;
  std::string password_;
};

}  // namespace crux::ha_test

#endif  // CRUX_TESTS_HA_ETCD_CLUSTER_H_
