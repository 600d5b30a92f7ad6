// cruxd configuration: one YAML file (configs/cruxd.yaml documents every key with its default
// and unit), strictly validated, plus the built-in defaults cruxd runs on without a file.
//
// One description: config.cc holds one table of field descriptors (YAML path, member, unit,
// bounds, live or restart-only) that drives ParseConfig, ValidateConfig, EffectiveConfigYaml,
// RestartOnlyChanges and KeepRestartOnly; ConfigKeys() lists it.
//
// Strictness (crux/textio/yaml.h, the one strict YAML reader): unknown or duplicate keys, wrong
// types (a quoted number, a list where a map is expected), numbers outside the one number
// grammar (crux/textio/number.h: no 0x10, no +1, no leading zeros), NaN/infinities and
// out-of-range values are errors whose message starts with the key path and ends with the
// position: "planner.levels: must be in [1, 64] (got 0) (line 3, column 11)". Nothing in this
// file throws.
//
// Paths: `topology` (a topology YAML as crux-plan reads it) is relative to the config file's
// directory, and so are `ha.etcd_tls.*` and `ha.etcd_auth.password_file` (which ParseConfig
// resolves in place); `state_dir` is relative to the working directory; `database` is relative
// to `state_dir`. The admin endpoint defaults to `ipc://<state_dir>/admin.sock`.
//
// Live reload (SIGHUP): the keys ConfigKeys() marks live (log_level, dry_run, debounce_ms,
// min_replan_interval_ms, lease_ms, profiling_samples, replan_threshold_pct, limits.*,
// planner.*, qos.* except qos.dscp_pool) take effect at once; the others need a restart
// (RestartOnlyChanges() names the changed ones; KeepRestartOnly() keeps their running values).
//
// Thread-safety: value types and pure functions (LoadConfigFile reads the file system).
#ifndef CRUX_DAEMON_CONFIG_CONFIG_H_
#define CRUX_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/control/qos.h"
#include "crux/core/plan/planner.h"

namespace crux::daemon {

// cruxd's version (the start-up log, `cruxctl status`).
inline constexpr const char* kCruxdVersion = "0.1.0";

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
  double gpu_peak_tflops = 312;  // Per GPU, TFLOP/s, in (0, 1e6].
  // Stable re-planning (core::PlannerOptions::stable): between re-optimisations
  // (reoptimize_interval_ms) an event re-plans only the jobs it touches; the others keep
  // their paths, ports and levels. false: every re-plan is the best plan (may move many jobs).
  bool stable = true;
  // Packet-spraying fabric (core::PlannerOptions::spray): paths cannot be pinned, so the planner
  // plans priorities and levels only and assignments carry no UDP source ports.
  bool spray = false;
};

// Quotas on registrations (docs/daemon.md "Identities, roles and quotas"); 0 = no limit. A
// registration beyond one is refused with ERROR_CODE_RESOURCE_EXHAUSTED. [live]
struct LimitsConfig {
  uint32_t max_jobs = 100000;             // Live jobs in all.
  uint32_t max_jobs_per_connection = 64;  // Jobs one connection (routing id) speaks for.
  uint32_t max_jobs_per_key = 0;          // Jobs one CURVE key registered (curve only).
};

// `ha.etcd_tls` (docs/daemon.md "etcd over TLS"): PEM files for https:// etcd endpoints.
// ca_file (required with https://) is the CA that signed the members' certificates, the only one
// trusted; cert_file and key_file (both or neither) are cruxd's client certificate for etcd's
// --client-cert-auth. Relative paths start at the config file's directory (ParseConfig resolves
// them). The files are read at start (a missing or unreadable one stops cruxd) and by each new
// connection.
struct EtcdTlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool any() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// `ha.etcd_auth`: the etcd user cruxd authenticates as (etcd auth enabled; https:// only), and
// the file holding its password (one line; mode 0600 or stricter). Both or neither. The path is
// relative to the config file's directory.
struct EtcdAuthConfig {
  std::string user;
  std::string password_file;
};

// The `ha:` block (docs/daemon.md "High availability"): active/standby cruxd instances on etcd.
// Off while etcd_endpoints is empty: cruxd then runs exactly as a single instance. [restart]
struct HaConfig {
  // etcd members' client URLs, comma-separated, all http:// or all https://
  // ("https://10.0.0.1:2379,https://10.0.0.2:2379"; https:// needs etcd_tls.ca_file).
  std::string etcd_endpoints;
  EtcdTlsConfig etcd_tls;
  EtcdAuthConfig etcd_auth;
  // Election name: every instance of one cruxd cluster uses the same; keys under /crux/<name>/.
  std::string election = "cruxd";
  std::string instance;  // This instance's name in `cruxctl status` ("" = the host name).
  // The client endpoint other instances and cruxctl show for this one ("" = client_endpoint).
  std::string advertise_endpoint;
  int64_t lease_ttl_s = 3;  // Election lease TTL; keep-alive every TTL/3. [2, 300].

  bool enabled() const { return !etcd_endpoints.empty(); }
};

// "a,b , c" -> {"a", "b", "c"} (blanks trimmed, empty items dropped).
std::vector<std::string> SplitEndpointList(const std::string& list);

// Shadow accounting (docs/impact.md; core/control/impact.h): every plan predicts each job's
// iteration under the plan and under ECMP, on the worker; cruxctl jobs / impact and /metrics
// compare them with the periods jobs report. [live]
struct ImpactConfig {
  bool enabled = true;
  int top_jobs = 20;  // Per-job series on /metrics for the N jobs with most GPUs, [0, 1000].
  double error_threshold = 0.1;  // `cruxctl impact` lists jobs predicted worse than this, (0, 10].
  // Least time between two estimates, [0, 3600000] ms (0: after every plan). An estimate runs on
  // its own thread after the plan is pushed, for the newest plan; never on the plan's path.
  int64_t interval_ms = 10000;
};

// Automatic failure detection and handling (docs/faults.md; core::FaultOptions). [live]
struct FaultsConfig {
  bool automatic = true;  // false: suspects are shown (cruxctl faults), links change only by admin.
  int64_t evidence_window_ms = 10000;   // Flow samples / counter readings older are ignored.
  int64_t evaluate_interval_ms = 1000;  // Evaluation cadence for flow and counter data.
  double gray_ratio = 0.8;  // A flow below this fraction of what it is entitled to is slow.
  int min_flows = 2;        // Unhealthy flows a suspect needs.
  // What a flow is measured against: "plan_share" (min of its best recent rate and its share
  // under the plan in force) or "own_best" (its best recent rate; before issue #27).
  std::string expectation = "plan_share";
  int min_jobs = 2;                  // Jobs behind a flows-only suspicion before it changes a link.
  double counter_errors_per_s = 10;  // Errors + discards per second on a port direction.
  double nic_loss_per_s = 10;        // RDMA loss events per second on a NIC (crux-hostd).
  double counter_capacity_fraction = 0.5;  // Capacity of a link only counters accuse.
  int64_t min_dwell_ms = 5000;             // Hold of a first fault (quiet time before recovery).
  int64_t max_hold_ms = 300000;            // Back-off cap for a flapping link.
  int64_t stable_decay_ms = 60000;         // Hold doubles on a fault within this of a recovery.
  int64_t quarantine_downtime_ms = 60000;  // Decayed downtime above which the hold is max_hold_ms.
  // Probes over the links no live flow covers (core/fault_probes.h), in the jobs' assignments.
  bool probes = false;
  int probes_per_job = 4;
  int max_probes = 256;
  int64_t probe_interval_ms = 1000;  // Each probe once per interval.
  int64_t probe_bytes = 65536;       // Per probe message.
};

struct DaemonConfig {
  // Where the config came from ("<built-in defaults>" or the file path).
  std::string source = "<built-in defaults>";
  // "embedded" (the example two-tier Clos, configs/topologies/example_clos2.yaml) or a path.
  std::string topology = std::string(kEmbeddedTopology);
  std::string state_dir = "state";
  std::string database = "cruxd.sqlite";
  // A job's latest profile is stored at most once per this many ms while its reports change
  // neither the planned profile nor its phase (JobJournal; a kill -9 loses at most this much of
  // it, never what is planned). [0, 3600000]; 0 = every report is stored by the next flush.
  int64_t profile_store_interval_ms = 10000;
  std::string client_endpoint = "tcp://127.0.0.1:7450";
  std::string admin_endpoint;  // "" = ipc://<state_dir>/admin.sock
  CurveConfig curve;
  bool insecure = false;                          // Must be true when curve.enabled is false.
  std::string metrics_listen = "127.0.0.1:9464";  // host:port; port 0 = no exporter.
  PlannerConfig planner;
  int64_t debounce_ms = 30;            // [0, 60000].
  int64_t min_replan_interval_ms = 0;  // Between the starts of two re-plans, [0, 600000].
  // With planner.stable: a re-plan from scratch every this many ms (the plan drifts from the best
  // one as events accumulate), [0, 86400000]; 0 = never.
  int64_t reoptimize_interval_ms = 600000;
  // What a re-optimisation must gain to replace the plan in force (core::ControlLoopOptions::
  // reoptimize_min_gain): contention cost lower by this fraction or cut fraction higher by this
  // much; otherwise no job moves. [0, 1); 0 = always take the fresh plan.
  double reoptimize_min_gain = 0.01;
  int64_t lease_ms = 15000;         // Default lease, [100, 86400000].
  int64_t max_lease_ms = 600000;    // Upper bound on leases clients ask for.
  uint32_t profiling_samples = 20;  // Samples for a profile to count as converged, >= 1.
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
  HaConfig ha;
  FaultsConfig faults;
  ImpactConfig impact;

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

// Cross-field checks (also run by ParseConfig): curve/insecure, reserved levels < levels, pool,
// the etcd security of `ha` (all http:// or all https://; https:// needs etcd_tls.ca_file; TLS
// files only with https://; cert_file and key_file, user and password_file in pairs; a user
// only over https://). Reads no file.
core::Status ValidateConfig(const DaemonConfig& c);

// The effective config as YAML (logged at start, printed by --check-config), written through
// YAML::Emitter: every key in block style with a "# <unit>; live|restart" comment, strings
// double-quoted (any text survives), `topology` resolved against base_dir, admin_endpoint with
// its default applied, and the database file (state_dir applied) in a comment. It parses back
// (ParseConfig) to the same settings.
std::string EffectiveConfigYaml(const DaemonConfig& c);

// The admin endpoint with its default applied.
std::string AdminEndpoint(const DaemonConfig& c);
// The database path with state_dir applied.
std::string DatabasePath(const DaemonConfig& c);
// The topology path resolved against base_dir ("embedded" stays as is).
std::string TopologyPath(const DaemonConfig& c);

// The restart-only keys (YAML paths, e.g. "client_endpoint", "curve.enabled", "qos.dscp_pool")
// whose value differs between `before` and `after`, in table order; `topology` and
// admin_endpoint compare their effective values (TopologyPath, AdminEndpoint).
std::vector<std::string> RestartOnlyChanges(const DaemonConfig& before, const DaemonConfig& after);

// What a reload applies: copies every restart-only key (and base_dir, which `topology` is
// relative to) from `running` into `*next`, so `*next` is the new config with only its live
// keys changed. REQUIRES: next != nullptr.
void KeepRestartOnly(const DaemonConfig& running, DaemonConfig* next);

// One row of the config table, for documentation and tests.
struct ConfigKey {
  std::string path;                 // "planner.levels"
  std::string type;                 // "integer", "number", "string", "boolean", ...
  std::string unit;                 // "ms", "%", "TFLOP/s"; "" when none.
  std::string bounds;               // "in [1, 64]", "> 0 and <= 1e+06", "" when any.
  bool live = false;                // Applied by a reload; false: needs a restart.
  std::string deprecated_alias_of;  // "qos.dscp_pool" for the old top-level dscp_pool.

  friend bool operator==(const ConfigKey&, const ConfigKey&) = default;
};
// Every key, in table order (the order of configs/cruxd.yaml).
std::vector<ConfigKey> ConfigKeys();

core::PlannerOptions ToPlannerOptions(const PlannerConfig& p);

// The example topology compiled into cruxd (same content as configs/topologies/example_clos2).
std::string_view EmbeddedTopologyYaml();

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_CONFIG_CONFIG_H_
