// crux-switch-agent: command line and wiring only (logic: switch_agent.h; backends: the registry,
// builtin_backends.h, whose parameters become options here).
//
// Exit status: 0 after SIGINT/SIGTERM; kExitUsage (2) for a bad command line or backend
// configuration; kExitRefusedByDaemon (78, EX_CONFIG) when cruxd refuses the switch name or this
// agent's key (UNKNOWN_HOST / PERMISSION_DENIED); 1 for an internal error. The systemd unit does
// not restart on 2 or 78 (RestartPreventExitStatus=).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"
#include "crux/switch_adapters/builtin_backends.h"
#include "switch_agent.h"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  using crux::core::Duration;
  namespace sa = crux::switch_adapters;
  const sa::BackendRegistry& backends = sa::BuiltinBackends();

  CLI::App app{"crux-switch-agent: applies cruxd's QoS pushes to this switch"};
  std::string name, daemon, backend = backends.Names().empty() ? "" : backends.Names().front();
  std::string log_level = "info";
  int hello_ms = 5000, timeout_ms = 2000, reconcile_ms = 10000;
  bool insecure = false;
  std::string server_key, client_key;
  app.add_option("--switch-name", name, "Topology node name of this switch")->required();
  app.add_option("--daemon", daemon, "cruxd switch endpoint, e.g. tcp://10.0.0.1:7071")->required();
  const std::vector<std::string> backend_names = backends.Names();
  std::string backend_help = "Backend:";
  for (const sa::Backend& b : backends.backends()) {
    backend_help += " " + b.name + " (" + b.summary + ");";
  }
  app.add_option("--backend", backend, backend_help)->check(CLI::IsMember(backend_names));
  app.add_option("--hello-interval-ms", hello_ms, "Hello / liveness period")
      ->check(CLI::Range(1, 3600000));
  app.add_option("--call-timeout-ms", timeout_ms, "Reply timeout for calls to cruxd")
      ->check(CLI::Range(1, 600000));
  app.add_option("--reconcile-period-ms", reconcile_ms,
                 "Re-apply the desired state this often (repairs drift; no writes when in sync)")
      ->check(CLI::Range(1, 86400000));
  app.add_option("--server-key", server_key, "cruxd public key file (.pub) for CurveZMQ");
  app.add_option("--client-key", client_key, "own secret key file (.key, mode 0600)");
  app.add_flag("--insecure", insecure, "plain ZeroMQ without CURVE (labs only)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  std::string term_file;
  CLI::Option* term_file_opt = app.add_option(
      "--term-file", term_file,
      std::string("File keeping the highest cruxd leader term accepted, across restarts "
                  "(default ") +
          sa::kDefaultTermFileDir + "/<switch-name>.term; \"\": in memory only)");
  // Port telemetry (issue #14, docs/faults.md).
  bool watch_ports = false;
  int port_poll_ms = 250, counter_poll_ms = 1000;
  std::vector<std::string> neighbors;
  app.add_flag("--watch-ports", watch_ports,
               "Report port state and counter deltas to cruxd (backends with a port monitor)");
  app.add_option("--port-poll-ms", port_poll_ms, "Port state poll period (--watch-ports)")
      ->check(CLI::Range(10, 60000));
  app.add_option("--counter-poll-ms", counter_poll_ms, "Counter poll period (--watch-ports)")
      ->check(CLI::Range(100, 600000));
  app.add_option("--neighbors", neighbors,
                 "PORT=NODE,...: topology node at the other end of each port (default: the "
                 "device's, e.g. CONFIG_DB DEVICE_NEIGHBOR)")
      ->delimiter(',');

  // Enforcement verification (issue #29, docs/switch-adapters.md).
  bool no_verify = false;
  sa::QueueCheckOptions verify;
  int verify_interval_ms = static_cast<int>(verify.min_interval.nanos() / 1000000);
  app.add_flag("--no-verify-enforcement", no_verify,
               "Do not check what the switch applied (ASIC maps, queue counters) against the plan");
  app.add_option("--verify-silent-pps", verify.silent_max_pps,
                 "A queue at or below this packet rate is silent; a queue the plan leaves unused "
                 "carrying more is a MISMATCH")
      ->capture_default_str();
  app.add_option("--verify-queue0-pps", verify.queue0_min_pps,
                 "Queue-0 packet rate that, with every job queue silent, counts as job traffic in "
                 "queue 0")
      ->capture_default_str();
  app.add_option("--verify-queue0-intervals", verify.queue0_intervals,
                 "... for this many judged intervals in a row")
      ->capture_default_str();
  app.add_option("--verify-interval-ms", verify_interval_ms,
                 "Shortest interval queue counters are judged over (SONiC's QUEUE counters are "
                 "written every 10 s)")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();

  // Every backend's parameters, as options (a name shared by two backends is one option).
  std::map<std::string, std::string> values;
  std::map<std::string, CLI::Option*> given;
  std::map<std::string, bool> flags;
  for (const sa::Backend& b : backends.backends()) {
    for (const sa::BackendParam& p : b.params) {
      if (given.count(p.name)) continue;
      const std::string help = p.help + " (" + b.name + ")" +
                               (p.default_value.empty() ? "" : "; default " + p.default_value);
      if (p.flag) {
        given[p.name] = app.add_flag("--" + p.name, flags[p.name], help);
      } else {
        given[p.name] = app.add_option("--" + p.name, values[p.name], help);
      }
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : sa::kExitUsage;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  auto bad = [](const std::string& msg) {
    std::fprintf(stderr, "crux-switch-agent: %s\n", msg.c_str());
    return sa::kExitUsage;
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

  sa::BackendConfig config;
  config.switch_name = name;
  for (const auto& [param, option] : given) {
    if (option->count() == 0) continue;
    config.params[param] = flags.count(param) ? (flags[param] ? "true" : "false") : values[param];
  }
  auto adapter = backends.Create(backend, config);
  if (!adapter.ok()) return bad(adapter.status().ToString());
  std::unique_ptr<sa::PortMonitor> monitor;
  if (watch_ports) {
    auto m = backends.CreateMonitor(backend, config);
    if (!m.ok()) return bad("--watch-ports: " + m.status().message());
    monitor = std::move(m).value();
    sa::PortWatcher::Options w;
    w.state_poll = Duration::Millis(port_poll_ms);
    w.counter_poll = Duration::Millis(counter_poll_ms);
    for (const std::string& item : neighbors) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
        return bad("--neighbors: expected PORT=NODE (got '" + item + "')");
      }
      w.neighbors[item.substr(0, eq)] = item.substr(eq + 1);
    }
    options.watch_ports = w;
  } else if (!neighbors.empty()) {
    return bad("--neighbors: only with --watch-ports");
  }
  verify.min_interval = Duration::Millis(verify_interval_ms);
  crux::core::Result<std::unique_ptr<sa::EnforcementVerifier>> verifier =
      crux::core::FailedPreconditionError(
          "enforcement verification is off (--no-verify-enforcement)");
  if (!no_verify) {
    verifier = backends.CreateVerifier(backend, config, verify);
    // A backend that cannot verify is reported (UNKNOWN, with the reason); bad options are not.
    if (!verifier.ok() && verifier.status().code() != crux::core::StatusCode::kFailedPrecondition) {
      return bad(verifier.status().message());
    }
  }
  if (crux::core::Status h = (*adapter)->Health(); !h.ok()) {
    spdlog::warn("backend {} not healthy yet (the agent retries): {}", backend, h.ToString());
  }

  options.switch_name = name;
  options.term_file = term_file_opt->count() > 0
                          ? term_file
                          : std::string(sa::kDefaultTermFileDir) + "/" + name + ".term";
  if (options.term_file.empty()) {
    spdlog::warn(
        "--term-file \"\": the highest cruxd leader term is kept in memory only; after a "
        "restart this agent accepts a push from a deposed leader");
  }
  options.client.endpoint = daemon;  // Routing id: left empty, DealerClient draws a random one.
  options.hello_interval = Duration::Millis(hello_ms);
  options.call_timeout = Duration::Millis(timeout_ms);
  options.reconcile_period = Duration::Millis(reconcile_ms);
  std::random_device rd;  // Jitter seeds: agents restarting together do not retry in lock-step.
  options.daemon_backoff.seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  options.device_backoff.seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  crux::protocol::TransportContext ctx;
  int rc = 0;
  {
    sa::SwitchAgent agent(options, ctx, **adapter);
    if (monitor) agent.SetPortMonitor(std::move(monitor));
    agent.SetEnforcementVerifier(std::move(verifier));
    if (crux::core::Status s = agent.Start(); !s.ok()) return bad(s.ToString());
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    spdlog::info("crux-switch-agent {} ({} backend) -> {}, reconcile every {} ms", name, backend,
                 daemon, reconcile_ms);
    if (crux::core::Status s = agent.Run(g_stop); !s.ok()) {
      if (agent.fatal()) {
        std::fprintf(stderr, "crux-switch-agent: fatal configuration error: %s\n",
                     agent.fatal()->message().c_str());
        rc = sa::kExitRefusedByDaemon;
      } else {
        spdlog::error("{}", s.ToString());
        rc = 1;
      }
    }
  }
  spdlog::info("crux-switch-agent stopped (exit status {})", rc);
  return rc;
}
