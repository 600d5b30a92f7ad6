// crux-switch-agent: command line and wiring only (logic: switch_agent.h, backends: adapter.h).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"
#include "crux/switch_adapters/file_adapter.h"
#include "crux/switch_adapters/log_adapter.h"
#include "crux/switch_adapters/sonic_adapter.h"
#include "switch_agent.h"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  using crux::core::Duration;
  namespace sa = crux::switch_adapters;
  CLI::App app{"crux-switch-agent: applies cruxd's QoS pushes to this switch"};
  std::string name, daemon, backend = "sonic", redis_socket, redis_host = "127.0.0.1", state_dir;
  std::string log_level = "info";
  int redis_port = 6379, hello_ms = 5000, timeout_ms = 2000, redis_timeout_ms = 1000;
  std::vector<std::string> ports;
  bool no_pfc = false, insecure = false;
  std::string server_key, client_key;
  app.add_option("--switch-name", name, "Topology node name of this switch")->required();
  app.add_option("--daemon", daemon, "cruxd switch endpoint, e.g. tcp://10.0.0.1:7071")->required();
  app.add_option("--backend", backend, "sonic | file | log")
      ->check(CLI::IsMember({"sonic", "file", "log"}));
  app.add_option("--redis-socket", redis_socket, "CONFIG_DB unix socket (sonic)");
  app.add_option("--redis-host", redis_host, "CONFIG_DB host (sonic, without --redis-socket)");
  app.add_option("--redis-port", redis_port, "CONFIG_DB port");
  app.add_option("--redis-timeout-ms", redis_timeout_ms, "Connect/command timeout (sonic)");
  app.add_option("--ports", ports, "Ports to program (sonic), e.g. Ethernet0,Ethernet4")
      ->delimiter(',');
  app.add_flag("--no-pfc", no_pfc, "Never write pfc_enable (sonic)");
  app.add_option("--state-dir", state_dir, "Directory of the JSON state files (file)");
  app.add_option("--hello-interval-ms", hello_ms, "Hello / liveness period");
  app.add_option("--call-timeout-ms", timeout_ms, "Reply timeout for calls to cruxd");
  app.add_option("--server-key", server_key, "cruxd public key file (.pub) for CurveZMQ");
  app.add_option("--client-key", client_key, "own secret key file (.key, mode 0600)");
  app.add_flag("--insecure", insecure, "plain ZeroMQ without CURVE (labs only)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto bad = [](const std::string& msg) {
    std::fprintf(stderr, "crux-switch-agent: %s\n", msg.c_str());
    return 2;
  };

  sa::AgentOptions options;
  if (!server_key.empty() || !client_key.empty()) {
    if (insecure) return bad("--insecure: cannot be combined with --server-key/--client-key");
    if (server_key.empty()) return bad("--server-key: required with --client-key");
    if (client_key.empty()) return bad("--client-key: required with --server-key");
    auto spub = crux::protocol::LoadPublicKeyFile(server_key);
    if (!spub.ok()) return bad("--server-key: " + spub.status().message());
    auto ckeys = crux::protocol::LoadSecretKeyFile(client_key);
    if (!ckeys.ok()) return bad("--client-key: " + ckeys.status().message());
    options.client.curve = true;
    options.client.server_public_z85 = *spub;
    options.client.client_keys = *ckeys;
  } else if (!insecure) {
    return bad("either --server-key and --client-key (CurveZMQ) or --insecure is required");
  }

  std::unique_ptr<sa::SwitchAdapter> adapter;
  if (backend == "sonic") {
    sa::SonicOptions o;
    o.switch_name = name;
    o.unix_socket = redis_socket;
    o.host = redis_host;
    o.port = redis_port;
    o.ports = ports;
    o.manage_pfc = !no_pfc;
    o.connect_timeout = Duration::Millis(redis_timeout_ms);
    o.command_timeout = Duration::Millis(redis_timeout_ms);
    auto a = sa::SonicAdapter::Create(o);
    if (!a.ok()) {
      std::fprintf(stderr, "crux-switch-agent: %s\n", a.status().ToString().c_str());
      return 2;
    }
    adapter = std::move(a).value();
  } else if (backend == "file") {
    auto a = sa::FileAdapter::Create({state_dir, name});
    if (!a.ok()) {
      std::fprintf(stderr, "crux-switch-agent: %s\n", a.status().ToString().c_str());
      return 2;
    }
    adapter = std::move(a).value();
  } else {
    adapter = std::make_unique<sa::LogAdapter>(name);
  }
  if (crux::core::Status h = adapter->Health(); !h.ok()) {
    spdlog::warn("backend {} not healthy yet (will retry on apply): {}", backend, h.ToString());
  }

  options.switch_name = name;
  options.client.endpoint = daemon;
  options.client.routing_id = "switch:" + name;
  options.hello_interval = Duration::Millis(hello_ms);
  options.call_timeout = Duration::Millis(timeout_ms);
  crux::protocol::TransportContext ctx;
  int rc = 0;
  {
    sa::SwitchAgent agent(options, ctx, *adapter);
    if (crux::core::Status s = agent.Start(); !s.ok()) {
      std::fprintf(stderr, "crux-switch-agent: %s\n", s.ToString().c_str());
      return 2;
    }
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    spdlog::info("crux-switch-agent {} ({} backend) -> {}", name, backend, daemon);
    if (crux::core::Status s = agent.Run(g_stop); !s.ok()) {
      spdlog::error("{}", s.ToString());
      rc = 1;
    }
  }
  spdlog::info("crux-switch-agent stopped");
  return rc;
}
