// cruxd: the Crux scheduling daemon. Wiring only: command line -> App (crux/daemon/app.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "crux/daemon/app.h"

int main(int argc, char** argv) {
  CLI::App cli{"cruxd: GPU-intensity-aware communication scheduling daemon"};
  crux::daemon::AppOptions options;
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
  cli.add_flag("--check-config", check, "Validate the config, print the effective one, exit");
  CLI11_PARSE(cli, argc, argv);

  crux::daemon::ConfigureLogging("info");
  if (check) {
    auto c = options.config_path.empty()
                 ? crux::core::Result<crux::daemon::DaemonConfig>(crux::daemon::BuiltinDefaults())
                 : crux::daemon::LoadConfigFile(options.config_path);
    if (!c.ok()) {
      std::fprintf(stderr, "cruxd: %s\n", c.status().ToString().c_str());
      return 2;
    }
    std::fputs(crux::daemon::EffectiveConfigYaml(*c).c_str(), stdout);
    return 0;
  }
  auto app = crux::daemon::App::Create(options);
  if (!app.ok()) {
    std::fprintf(stderr, "cruxd: %s\n", app.status().ToString().c_str());
    return 2;
  }
  return (*app)->Run();
}
