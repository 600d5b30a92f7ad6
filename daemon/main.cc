// cruxd: the Crux scheduling daemon. Wiring only: command line -> App (crux/daemon/app.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "allocator.h"
#include "crux/daemon/app/app.h"

int main(int argc, char** argv) {
  CLI::App cli{"cruxd: GPU-intensity-aware communication scheduling daemon"};
  crux::daemon::AppOptions options;
  options.allocator = crux::daemon::AllocatorName();
  cli.add_option("-c,--config", options.config_path,
                 "YAML config (configs/cruxd.yaml); default: built-in lab defaults")
      ->check(CLI::ExistingFile);
  cli.add_option("--state-dir", options.state_dir_override,
                 "State directory (SQLite, admin socket); overrides state_dir");
  cli.add_option("--listen", options.client_endpoint_override,
                 "Client endpoint; overrides client_endpoint");
  cli.add_option("--metrics", options.metrics_listen_override,
                 "Metrics host:port (port 0 = off); overrides metrics_listen");
  bool check = false;
  cli.add_flag("--check-config", check,
               "Run every start-up check (config, keys, topology, state directory and file) "
               "without starting; print the effective config");
  cli.add_flag("--fresh-state", options.fresh_state,
               "Start with empty state: an existing state file is moved aside (every job "
               "re-registers; clients and agents follow the new state id)");
  CLI11_PARSE(cli, argc, argv);

  crux::daemon::ConfigureLogging("info");
  if (check) {
    auto effective = crux::daemon::App::Check(options);
    if (!effective.ok()) {
      std::fprintf(stderr, "cruxd: %s\n", effective.status().ToString().c_str());
      return 2;
    }
    std::fputs(effective->c_str(), stdout);
    return 0;
  }
  auto app = crux::daemon::App::Create(options);
  if (!app.ok()) {
    std::fprintf(stderr, "cruxd: %s\n", app.status().ToString().c_str());
    return 2;
  }
  return (*app)->Run();
}
