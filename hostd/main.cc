// crux-hostd: the per-host Crux agent (docs/client.md "NCCL jobs without code"). Wiring only:
// flags, config, signals, the server (hostd_server.h).
//
// Exit codes: 0 (stopped by SIGTERM/SIGINT), 1 (runtime failure), 2 (bad command line or config,
// the message names the key).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "crux/hostd/config.h"
#include "crux/hostd/host_protocol.h"
#include "crux/hostd/hostd_server.h"
#include "crux/hostd/path_probe.h"

namespace {
crux::hostd::HostdServer* g_server = nullptr;
void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"crux-hostd: Crux's per-host agent for the NCCL plugin and verbs shim"};
  std::string config_path = "/etc/crux/hostd.yaml";
  bool check = false;
  bool status = false;
  std::string socket;
  app.add_option("--config", config_path, "configuration file (YAML)");
  app.add_flag("--check-config", check, "validate the configuration and exit");
  app.add_flag("--status", status, "print the running agent's view (JSON) and exit");
  app.add_option("--socket", socket, "host-protocol socket for --status (default: the config's)");
  CLI11_PARSE(app, argc, argv);

  if (status && !socket.empty()) {
    auto s = crux::hostd::QueryStatus(socket);
    if (!s.ok()) {
      std::fprintf(stderr, "crux-hostd: %s\n", s.status().ToString().c_str());
      return 1;
    }
    std::cout << *s << "\n";
    return 0;
  }
  auto config = crux::hostd::LoadHostdConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "crux-hostd: %s\n", config.status().ToString().c_str());
    return 2;
  }
  if (status) {
    auto s = crux::hostd::QueryStatus(config->socket);
    if (!s.ok()) {
      std::fprintf(stderr, "crux-hostd: %s\n", s.status().ToString().c_str());
      return 1;
    }
    std::cout << *s << "\n";
    return 0;
  }
  if (check) {
    std::printf("%s: OK (host %s, %zu NICs, %zu known NIC addresses)\n", config_path.c_str(),
                config->host.c_str(), config->nics.size(), config->nic_by_address.size());
    return 0;
  }
  std::vector<std::unique_ptr<crux::hostd::HostProbe>> probes;
  if (config->probes.enabled) {
    auto probe = crux::hostd::MakeUdpPathProbe(*config);
    if (!probe.ok()) {
      std::fprintf(stderr, "crux-hostd: %s\n", probe.status().ToString().c_str());
      return 1;
    }
    probes.push_back(std::move(*probe));
  }
  auto server = crux::hostd::HostdServer::Create(*config, std::move(probes));
  if (!server.ok()) {
    std::fprintf(stderr, "crux-hostd: %s\n", server.status().ToString().c_str());
    return server.status().code() == crux::core::StatusCode::kInvalidArgument ? 2 : 1;
  }
  g_server = server->get();
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::fprintf(
      stderr, "crux-hostd: host %s, socket %s, daemon %s, probes %s\n", config->host.c_str(),
      config->socket.c_str(), config->daemon_endpoint.c_str(),
      config->probes.enabled ? ("on, port " + std::to_string(config->probes.port)).c_str() : "off");
  crux::core::Status s = (*server)->Run();
  g_server = nullptr;
  if (!s.ok()) {
    std::fprintf(stderr, "crux-hostd: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
