// App: a whole cruxd process minus argument parsing - config, logging, the SQLite store, the
// topology, the event loop, metrics exporter, the two ROUTER endpoints (client: tcp with
// CurveZMQ; admin: local ipc, socket file 0600 in a 0700 directory), signals and systemd
// notifications. main.cc only parses the command line and calls Create() and Run().
//
// Signals: SIGTERM/SIGINT stop cleanly (STOPPING=1), SIGHUP re-reads the config file
// (RELOADING=1 ... READY=1) and the CURVE authorised keys. READY=1 is sent once both endpoints
// are bound; WATCHDOG=1 every WatchdogSec/2 from the loop when WATCHDOG_USEC is set.
//
// Thread-safety: Create/Run on one thread; RequestStop() from any thread.
#ifndef CRUX_DAEMON_APP_APP_H_
#define CRUX_DAEMON_APP_APP_H_

#include <memory>
#include <string>

#include "crux/core/base/status.h"
#include "crux/daemon/config/config.h"

namespace crux::daemon {

struct AppOptions {
  std::string config_path;               // "" = built-in defaults.
  std::string state_dir_override;        // --state-dir.
  std::string client_endpoint_override;  // --listen (tests, loadgen).
  std::string metrics_listen_override;   // --metrics.
  // Tests: serve metrics on an ephemeral port of metrics_listen's host (see metrics_port()).
  bool metrics_any_port = false;
  // --fresh-state: move an existing state file aside and start with empty state (a new state
  // id). Without it an empty, schema-less or corrupt state file makes Create() fail.
  bool fresh_state = false;
  // The malloc the binary runs on, for the start-up log (cruxd: daemon/allocator.cc).
  std::string allocator = "system malloc";
};

class App {
 public:
  static core::Result<std::unique_ptr<App>> Create(const AppOptions& options);

  // `cruxd --check-config`: every check Create() makes before it binds anything (config, key
  // files and authorised keys, topology, state directory, state file health) without changing
  // anything (no lock, no socket, no write). Returns the effective config as YAML.
  static core::Result<std::string> Check(const AppOptions& options);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Runs the loop until a stop signal or RequestStop(). Returns the process exit code.
  int Run();
  void RequestStop();

  const DaemonConfig& config() const;
  std::string client_endpoint() const;  // As bound (with the chosen port for ":*").
  std::string admin_endpoint() const;
  int metrics_port() const;

 private:
  struct Impl;
  explicit App(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Sets up spdlog on stderr: colours only on a terminal; no timestamps under journald
// ($JOURNAL_STREAM), which stamps lines itself. Unknown level names leave the level unchanged.
void ConfigureLogging(const std::string& level);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_APP_APP_H_
