// cruxd configuration: one YAML file (configs/cruxd.yaml documents every key with its default
// and unit), strictly validated, plus the built-in defaults cruxd runs on without a file.
//
// Strictness: unknown or duplicate keys, wrong types (a quoted number, a list where a map is
// expected), NaN/infinities and out-of-range values are errors whose message starts with the key
// path ("planner.levels: must be in [1, 64] (got 0)"). Nothing in this file throws.
//
// Paths: `topology` (a topology YAML as crux-plan reads it) is relative to the config file's
// directory; `state_dir` is relative to the working directory; `database` is relative to
// `state_dir`. The admin endpoint defaults to `ipc://<state_dir>/admin.sock`.
//
// Live reload (SIGHUP): log_level, dry_run, debounce_ms, min_replan_interval_ms, lease_ms,
// profiling_samples,
// replan_threshold_pct, the limits block, the planner block and the qos block except qos.dscp_pool
// take effect at
// once; every other key needs a restart (RestartOnlyChanges() reports which changed keys were
// ignored).
//
// Thread-safety: value types and pure functions (LoadConfigFile reads the file system).
#ifndef CRUX_DAEMON_CONFIG_H_
#define CRUX_DAEMON_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/planner.h"
#include "crux/core/qos.h"
#include "crux/core/status.h"

namespace crux::daemon {

inline constexpr std::string_view kEmbeddedTopology = "embedded";

struct CurveConfig {
  bool enabled = false;
  std::string server_secret_key_file;  // Z85 secret key file (0600); see crux/protocol/curve.h.
  std::string authorized_keys_dir;     // One public key per file.
};

struct PlannerConfig {
  int levels = 8;                // K hardware levels, [1, 64].
  int reserved_high_levels = 1;  // Levels above scheduled jobs; level 0 hosts profiling jobs.
  int reserved_low_levels = 0;
  int topo_orders = 10;  // m of Algorithm 1, [1, 1000].
  uint64_t seed = 1;
  double gpu_peak_tflops = 312;  // Per GPU, TFLOP/s, > 0.
};

// Quotas on registrations (docs/daemon.md "Identities, roles and quotas"); 0 = no limit. A
// registration beyond one is refused with ERROR_CODE_RESOURCE_EXHAUSTED. [live]
struct LimitsConfig {
  uint32_t max_jobs = 100000;             // Live jobs in all.
  uint32_t max_jobs_per_connection = 64;  // Jobs one connection (routing id) speaks for.
  uint32_t max_jobs_per_key = 0;          // Jobs one CURVE key registered (curve only).
};

struct DaemonConfig {
  // Where the config came from ("<built-in defaults>" or the file path).
  std::string source = "<built-in defaults>";
  // "embedded" (the example two-tier Clos, configs/topologies/example_clos2.yaml) or a path.
  std::string topology = std::string(kEmbeddedTopology);
  std::string state_dir = "state";
  std::string database = "cruxd.sqlite";
  std::string client_endpoint = "tcp://127.0.0.1:7450";
  std::string admin_endpoint;  // "" = ipc://<state_dir>/admin.sock
  CurveConfig curve;
  bool insecure = false;                          // Must be true when curve.enabled is false.
  std::string metrics_listen = "127.0.0.1:9464";  // host:port; port 0 = no exporter.
  PlannerConfig planner;
  int64_t debounce_ms = 30;            // [0, 60000].
  int64_t min_replan_interval_ms = 0;  // Between the starts of two re-plans, [0, 600000].
  int64_t lease_ms = 15000;            // Default lease, [100, 86400000].
  int64_t max_lease_ms = 600000;       // Upper bound on leases clients ask for.
  uint32_t profiling_samples = 20;     // Samples for a profile to count as converged, >= 1.
  // Hysteresis: a profile report counts for planning (re-plan, possible push) only when a figure
  // moves by more than this percentage of the planned value (JobTracker). [0, 1000]; 0 = every
  // report re-plans.
  double replan_threshold_pct = 10;
  LimitsConfig limits;
  bool dry_run = false;
  std::string log_level = "info";  // trace | debug | info | warn | error | critical | off.
  // The `qos:` block: DSCP colour pool, level -> TC, reserved classes (control, storage with its
  // DWRR weight), default TC, PFC. Validated by core::ValidateQosConfig (errors name the key,
  // "qos.reserved[1].weight: ..."). The deprecated top-level `dscp_pool` key sets
  // qos.dscp_pool (not both). [live, except qos.dscp_pool: restart]
  core::QosConfig qos;

  // The directory `topology` is relative to ("" = working directory).
  std::string base_dir;
};

// The built-in defaults for running without a file (`cruxd` alone, ./run.sh): everything as
// above plus insecure: true (plain TCP on loopback, warned about at start).
DaemonConfig BuiltinDefaults();

// Parses a config document. `base_dir` is the directory relative paths start from. An empty
// document yields the defaults above (insecure false, so it fails the curve check).
core::Result<DaemonConfig> ParseConfig(std::string_view yaml, const std::string& base_dir);

// Reads and parses a file; errors carry the file name as context.
core::Result<DaemonConfig> LoadConfigFile(const std::string& path);

// Cross-field checks (also run by ParseConfig): curve/insecure, reserved levels < levels, pool.
core::Status ValidateConfig(const DaemonConfig& c);

// The effective config as YAML (logged at start; `cruxctl status` may show it).
std::string EffectiveConfigYaml(const DaemonConfig& c);

// The admin endpoint with its default applied.
std::string AdminEndpoint(const DaemonConfig& c);
// The database path with state_dir applied.
std::string DatabasePath(const DaemonConfig& c);
// The topology path resolved against base_dir ("embedded" stays as is).
std::string TopologyPath(const DaemonConfig& c);

// Keys whose change between `before` and `after` needs a restart (they keep the old value).
std::vector<std::string> RestartOnlyChanges(const DaemonConfig& before, const DaemonConfig& after);

core::PlannerOptions ToPlannerOptions(const PlannerConfig& p);

// The example topology compiled into cruxd (same content as configs/topologies/example_clos2).
std::string_view EmbeddedTopologyYaml();

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONFIG_H_
