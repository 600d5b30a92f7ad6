// crux-hostd's configuration: /etc/crux/hostd.yaml (the unit's --config), strict YAML through
// textio (unknown keys, bad values and duplicates are errors naming the key and line).
//
//   host: host3                        # topology host name (default: the short hostname)
//   daemon: tcp://cruxd.example:7450   # cruxd's client endpoint (required)
//   insecure: false                    # true: plain TCP (labs only); else the two keys below
//   server_key: /etc/crux/cruxd.pub    # cruxd's public key file (curve.h format)
//   client_key: /etc/crux/hostd.key    # this agent's key pair (0600): a host key, its .pub in
//                                      # cruxd's authorised keys as hosts/<host>.pub
//   socket: /run/crux/hostd.sock       # the ranks' host-protocol socket
//   nics:                              # this host's NICs: topology name, RDMA device, address
//     - {name: host3/nic0, device: mlx5_0, address: 10.0.3.1}   # optional port: 1 (1-255)
//   nic_addresses: /etc/crux/nic-addresses.yaml   # optional: every NIC of the cluster,
//                                      # "address: topology NIC name" (to resolve remote GIDs)
//   register_delay_ms: 1000            # wait for a job's local ranks before registering it
//   end_delay_ms: 30000                # a job whose ranks all left ends after this
//   lease_ms: 0                        # requested lease (0: cruxd's default)
//   call_timeout_ms: 2000
//   nic_counters_interval_ms: 1000     # read the NICs' RDMA counters and send their deltas to
//                                      # cruxd (HostTelemetry) this often; 0: off (0-3600000)
//   sysfs_root: /sys                   # where the counters are read (nic_counters.h)
//   probes:                            # UDP path probes over the pinned flows (path_probe.h)
//     enabled: false                   # true: run the responder and the prober
//     port: 18515                      # the responders' UDP port (1-65535), every host alike
//     interval_ms: 1000                # a round every (10-3600000)
//     count: 3                         # requests per pinned flow per round (1-100)
//     timeout_ms: 200                  # later echoes count as lost (1-60000, <= interval_ms)
//     train_count: 32                  # capacity probes (Assignment.probes): datagrams per
//                                      # train (0: none; 2-1024)
//     train_bytes: 1472                # UDP payload of each (64-65000; not fragmented: at most
//                                      # the path MTU less the IP and UDP headers)
//   limits:                            # per local user (SO_PEERCRED uid); 0: no limit; root
//                                      # (uid 0) is exempt from all three (0-100000 each)
//     jobs_per_uid: 8                  # live jobs one non-root uid owns on this host
//     ranks_per_uid: 64                # processes of one non-root uid in its jobs
//     jobs_non_root: 48                # live jobs of all non-root uids together: keep below
//                                      # cruxd's limits.max_jobs_per_connection (64)
//
// Addresses are IPv4 (the RoCEv2 GID ::ffff:a.b.c.d) or GID / IPv6 text; kept canonical
// (host_protocol.h FormatGid).
//
// Thread-safety: value type; functions are pure except LoadHostdConfig (reads files).
#ifndef CRUX_HOSTD_CONFIG_H_
#define CRUX_HOSTD_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::hostd {

struct NicConfig {
  std::string name;     // Topology NIC name, e.g. "host3/nic0".
  std::string device;   // RDMA device, e.g. "mlx5_0".
  std::string address;  // Canonical GID text ("" = unknown).
  uint32_t port = 1;    // The device's port whose hw_counters are read (1-255).
  friend bool operator==(const NicConfig&, const NicConfig&) = default;
};

// probes: (path_probe.h). Off by default.
struct ProbeConfig {
  bool enabled = false;
  uint16_t port = 18515;
  int64_t interval_ms = 1000;
  int count = 3;
  int64_t timeout_ms = 200;
  // Capacity probes of the planner's Assignment.probes (path_probe.h, "Capacity trains").
  int train_count = 32;    // 0: none.
  int train_bytes = 1472;  // A 1500-byte MTU less IPv4 and UDP headers.
  friend bool operator==(const ProbeConfig&, const ProbeConfig&) = default;
};

// limits: per local user (host_agent.h, "Limits"); 0: no limit. Root (uid 0) is exempt: it is
// the operator's, and jobs_non_root keeps room for it on the host's connection to cruxd.
struct LocalLimitsConfig {
  uint32_t jobs_per_uid = 8;    // Live jobs one non-root uid owns on this host.
  uint32_t ranks_per_uid = 64;  // Processes of one non-root uid in its jobs on this host.
  uint32_t jobs_non_root = 48;  // Live jobs of all non-root uids together.
  friend bool operator==(const LocalLimitsConfig&, const LocalLimitsConfig&) = default;
};

struct HostdConfig {
  std::string host;
  std::string daemon_endpoint;
  bool insecure = false;
  std::string server_key_file;
  std::string client_key_file;
  std::string socket = "/run/crux/hostd.sock";
  std::vector<NicConfig> nics;
  std::string nic_addresses_file;
  // Canonical GID -> topology NIC name: this host's NICs plus nic_addresses_file's.
  std::map<std::string, std::string> nic_by_address;
  int64_t register_delay_ms = 1000;
  int64_t end_delay_ms = 30000;
  uint32_t lease_ms = 0;
  int64_t call_timeout_ms = 2000;
  int64_t nic_counters_interval_ms = 1000;  // 0: NIC counters off.
  std::string sysfs_root = "/sys";
  // The highest cruxd leader term this host accepted, kept across restarts (protocol::TermFile;
  // docs/daemon.md, "Fencing"). "": in memory only.
  std::string term_file = "/var/lib/crux-hostd/hostd.term";  // StateDirectory= of the unit.
  ProbeConfig probes;
  LocalLimitsConfig limits;
  friend bool operator==(const HostdConfig&, const HostdConfig&) = default;
};

// Parses the YAML text (`origin` names it in errors). Relative file names resolve against
// `base_dir`. The nic_addresses file is read when given.
core::Result<HostdConfig> ParseHostdConfig(std::string_view yaml, const std::string& base_dir);
core::Result<HostdConfig> LoadHostdConfig(const std::string& path);
// The nic_addresses file: a map "address: topology NIC name".
core::Result<std::map<std::string, std::string>> ParseNicAddresses(std::string_view yaml);

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_CONFIG_H_
