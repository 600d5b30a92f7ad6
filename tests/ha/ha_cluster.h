// HaCluster: a real HA deployment on loopback for the failover tests - a 3-member etcd cluster
// (EtcdCluster; or another size, over TLS), N cruxd processes (the real binary, `ha:` configs,
// lease TTL 2 s, each on its own state directory, client port and admin socket) and helpers to ask
// them over their admin sockets, find the leader and run crux-loadgen against every client
// endpoint.
//
// Thread-safety: test thread only.
#ifndef CRUX_TESTS_HA_HA_CLUSTER_H_
#define CRUX_TESTS_HA_HA_CLUSTER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/transport_context.h"
#include "etcd_cluster.h"

namespace crux::ha_test {

#ifndef CRUXD_BINARY
#define CRUXD_BINARY ""
#endif
#ifndef CRUX_LOADGEN_BINARY
#define CRUX_LOADGEN_BINARY ""
#endif

inline constexpr int kLeaseTtlS = 2;

class HaCluster {
 public:
  explicit HaCluster(int instances, int etcd_members = 3,
                     EtcdSecurity security = EtcdSecurity::kPlain)
      : dir_("crux_ha"), etcd_(etcd_members, security) {
    for (int i = 0; i < instances; ++i) {
      Instance in;
      in.name = std::string(1, static_cast<char>('a' + i));
      in.port = FreeTcpPort();
      in.metrics_port = FreeTcpPort();
      in.state = dir_.path() / ("state_" + in.name);
      nodes_.push_back(std::move(in));
    }
  }

  EtcdCluster& etcd() { return etcd_; }
  const system_test::fs::path& dir() const { return dir_.path(); }
  size_t size() const { return nodes_.size(); }
  const std::string& name(size_t i) const { return nodes_[i].name; }
  system_test::ChildProcess& process(size_t i) { return *nodes_[i].process; }

  bool StartEtcd() { return etcd_.Start(); }

  // The `ha:` lines of a config for the etcd's security: none on a plain cluster; on a kTls one
  // the CA, certificate `cert` with key `key` (TestPki names: "client", "stranger"), and the
  // user once auth is on.
  std::string EtcdSecurityYaml(const std::string& cert, const std::string& key) const {
    const daemon::ha::GatewayOptions o = etcd_.Client(core::Duration::Millis(1000));
    if (o.ca_file.empty()) return "";
    const TestPki& pki = etcd_.pki();
    std::string out = "  etcd_tls: {ca_file: \"" + o.ca_file + "\", cert_file: \"" + pki.Crt(cert) +
                      "\", key_file: \"" + pki.Key(key) + "\"}\n";
    if (!o.user.empty()) {
      out += "  etcd_auth: {user: " + o.user + ", password_file: \"" +
             etcd_.password_file().string() + "\"}\n";
    }
    return out;
  }

  // Starts instance i; its config's etcd security lines are `etcd_security` (nullopt: the
  // cluster's client certificate and user, EtcdSecurityYaml("client", "client")).
  void StartCruxd(size_t i, const std::optional<std::string>& etcd_security = std::nullopt) {
    Instance& n = nodes_[i];
    const auto config = dir_.path() / (n.name + ".yaml");
    system_test::WriteFile(
        config, "insecure: true\nstate_dir: " + n.state.string() +
                    "\nclient_endpoint: tcp://127.0.0.1:" + std::to_string(n.port) +
                    "\nmetrics_listen: 127.0.0.1:" + std::to_string(n.metrics_port) +
                    "\nlog_level: info\nha:\n  etcd_endpoints: \"" + etcd_.EndpointList() +
                    "\"\n  instance: " + n.name + "\n  lease_ttl_s: " + std::to_string(kLeaseTtlS) +
                    "\n" + etcd_security.value_or(EtcdSecurityYaml("client", "client")));
    n.process = std::make_unique<system_test::ChildProcess>();
    const std::string run = std::to_string(++n.starts);
    n.process->Start({CRUXD_BINARY, "--config", config.string()},
                     dir_.path() / (n.name + "." + run + ".out"),
                     dir_.path() / (n.name + "." + run + ".log"));
  }

  std::string Log(size_t i) const {
    return system_test::ReadFile(
        dir_.path() / (nodes_[i].name + "." + std::to_string(nodes_[i].starts) + ".log"));
  }

  // Instance i's /metrics port (metrics_listen).
  int metrics_port(size_t i) const { return nodes_[i].metrics_port; }

  // Every client endpoint, comma-separated (what clients, loadgen and agents are given).
  std::string ClientEndpoints() const {
    std::string out;
    for (const Instance& n : nodes_) {
      out += (out.empty() ? "" : ",") + std::string("tcp://127.0.0.1:") + std::to_string(n.port);
    }
    return out;
  }

  // One admin request to instance i; nullopt when it does not answer in time.
  std::optional<v1::Envelope> Admin(size_t i, const v1::Envelope& request, int timeout_ms = 1000) {
    protocol::ClientOptions o;
    o.endpoint = "ipc://" + (nodes_[i].state / "admin.sock").string();
    auto client = protocol::DealerClient::Connect(transport_, o);
    if (!client.ok()) return std::nullopt;
    auto reply = (*client)->Call(request, core::Duration::Millis(timeout_ms));
    if (!reply.ok()) return std::nullopt;
    return *reply;
  }

  std::optional<v1::StatusReply> Status(size_t i, int timeout_ms = 1000) {
    v1::Envelope req = protocol::NewEnvelope();
    req.mutable_status_request();
    auto r = Admin(i, req, timeout_ms);
    if (!r || !r->has_status_reply()) return std::nullopt;
    return r->status_reply();
  }

  // job id -> DSCP colour, from instance i's ListJobs (nullopt: no answer).
  std::optional<std::map<std::string, uint32_t>> Colours(size_t i) {
    v1::Envelope req = protocol::NewEnvelope();
    req.mutable_list_jobs_request();
    auto r = Admin(i, req);
    if (!r || !r->has_list_jobs_reply()) return std::nullopt;
    std::map<std::string, uint32_t> out;
    for (const v1::JobSummary& j : r->list_jobs_reply().jobs()) out[j.job_id()] = j.dscp();
    return out;
  }

  bool IsLeader(size_t i) {
    auto s = Status(i, 300);
    return s && s->has_ha() && s->ha().role() == "leader";
  }

  // The index of the instance that says it leads, waiting up to `timeout`; -1 if none.
  int WaitLeader(std::chrono::milliseconds timeout, int except = -1) {
    int found = -1;
    WaitUntil(
        [&] {
          for (size_t i = 0; i < nodes_.size(); ++i) {
            if (static_cast<int>(i) == except || !nodes_[i].process ||
                !nodes_[i].process->running()) {
              continue;
            }
            if (IsLeader(i)) {
              found = static_cast<int>(i);
              return true;
            }
          }
          return false;
        },
        timeout, std::chrono::milliseconds(20));
    return found;
  }

  // crux-loadgen with `jobs` jobs against every instance, reporting every `report_ms`, for
  // `duration_s`, with further options `extra`; its JSON summary goes to <dir>/loadgen.json.
  void StartLoadgen(int jobs, int duration_s, int report_ms = 1000,
                    const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        CRUX_LOADGEN_BINARY,
        "--insecure",
        "--endpoint",
        ClientEndpoints(),
        "--topology",
        std::string(CRUX_SOURCE_DIR) + "/configs/topologies/example_clos2.yaml",
        "--jobs",
        std::to_string(jobs),
        "--duration-s",
        std::to_string(duration_s),
        "--report-interval-ms",
        std::to_string(report_ms),
        "--timeout-ms",
        "1000",
        "--json",
        "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    loadgen_ = std::make_unique<system_test::ChildProcess>();
    loadgen_->Start(args, dir_.path() / "loadgen.json", dir_.path() / "loadgen.err");
  }
  system_test::ChildProcess& loadgen() { return *loadgen_; }

#if defined(CRUX_REDIS_SERVER_BINARY) && defined(CRUX_SWITCH_AGENT_BINARY)
  static constexpr bool kHaveSwitchAgent = true;
  // A redis-server (CONFIG_DB stand-in on a unix socket) and crux-switch-agent (sonic backend)
  // for switch `name`, given every client endpoint. True once redis answers.
  bool StartSwitch(const std::string& name) {
    const auto sock = dir_.path() / ("redis_" + name + ".sock");
    redis_socket_ = sock.string();
    redis_ = std::make_unique<system_test::ChildProcess>();
    redis_->Start({CRUX_REDIS_SERVER_BINARY, "--port", "0", "--unixsocket", sock.string(),
                   "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir",
                   dir_.path().string(), "--daemonize", "no"},
                  dir_.path() / "redis.out", dir_.path() / "redis.err");
    if (!WaitUntil([&] { return RedisMapSize() >= 0; }, std::chrono::milliseconds(10000))) {
      return false;
    }
    agent_ = std::make_unique<system_test::ChildProcess>();
    agent_->Start({CRUX_SWITCH_AGENT_BINARY, "--switch-name", name, "--daemon", ClientEndpoints(),
                   "--insecure", "--backend", "sonic", "--redis-socket", sock.string(), "--ports",
                   "Ethernet0,Ethernet4", "--hello-interval-ms", "300", "--call-timeout-ms", "1000",
                   "--term-file", (dir_.path() / (name + ".term")).string()},
                  dir_.path() / "agent.out", dir_.path() / "agent.err");
    return true;
  }
  // Entries of the switch's DSCP_TO_TC_MAP|CRUX in its CONFIG_DB; -1 when redis does not answer.
  int RedisMapSize() {
    auto r = system_test::RunCommand(
        {CRUX_REDIS_CLI_BINARY, "-s", redis_socket_, "-n", "4", "HLEN", "DSCP_TO_TC_MAP|CRUX"},
        dir_.path(), std::chrono::milliseconds(3000));
    if (r.exit_code != 0 || r.out.empty()) return -1;
    return std::atoi(r.out.c_str());
  }
  std::string AgentLog() const { return system_test::ReadFile(dir_.path() / "agent.err"); }
#else
  static constexpr bool kHaveSwitchAgent = false;
  bool StartSwitch(const std::string&) { return false; }
  int RedisMapSize() { return -1; }
  std::string AgentLog() const { return ""; }
#endif
  // Instance i's view of switch `name` (nullopt: no answer or unknown switch).
  std::optional<v1::SwitchInfo> Switch(size_t i, const std::string& name) {
    v1::Envelope req = protocol::NewEnvelope();
    req.mutable_list_switches_request();
    auto r = Admin(i, req);
    if (!r || !r->has_list_switches_reply()) return std::nullopt;
    for (const v1::SwitchInfo& s : r->list_switches_reply().switches()) {
      if (s.name() == name) return s;
    }
    return std::nullopt;
  }

 private:
  struct Instance {
    std::string name;
    int port = 0;
    int metrics_port = 0;
    system_test::fs::path state;
    std::unique_ptr<system_test::ChildProcess> process;
    int starts = 0;
  };
  TempDir dir_;
  EtcdCluster etcd_;
  std::vector<Instance> nodes_;
  protocol::TransportContext transport_;
  std::unique_ptr<system_test::ChildProcess> loadgen_;
  std::string redis_socket_;
  std::unique_ptr<system_test::ChildProcess> redis_;
  std::unique_ptr<system_test::ChildProcess> agent_;
};

}  // namespace crux::ha_test

#endif  // CRUX_TESTS_HA_HA_CLUSTER_H_
