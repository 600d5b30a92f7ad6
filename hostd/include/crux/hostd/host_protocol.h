// The host protocol: what the NCCL profiler plugin and the verbs shim (inside every rank's
// process) and crux-hostd (one per host) say to each other over a local Unix socket.
//
// Transport: a SOCK_SEQPACKET Unix socket (local_socket.h) at $CRUX_HOSTD_SOCKET, default
// /run/crux/hostd.sock; one JSON object per packet, at most kMaxMessageBytes. Every message
// carries "v": kVersion and "type". Receivers refuse other versions and unknown types with a
// clear error and keep the connection (a newer peer may send more types); unknown fields are
// ignored, so fields are only ever added.
//
// Flows:
//   plugin -> hostd  Hello (role profiler), CommInfo per communicator, RankProfile when the
//                    plugin's profiler reports (converged, then on significant change),
//                    PluginStats every few seconds. On every (re)connect the plugin sends its
//                    whole state again (Hello, CommInfos, the last RankProfile), so a restarted
//                    hostd loses nothing.
//   shim   -> hostd  Hello (role verbs), QpInfo per RC QP brought to RTR, QpGone, RepinResult,
//                    PinAck per PinTable received.
//   hostd  -> shim   PinTable: the job's traffic class and the UDP source port per (local
//                    device, remote GID), sent on connect and whenever the job's assignment
//                    changes.
//   anyone -> hostd  StatusRequest; hostd answers StatusReply (its view as JSON; crux-hostd
//                    --status prints it, tests read it): root's connections see every job, any
//                    other uid's only that uid's jobs.
//   hostd  -> any    Refused: hostd will not act on a job id the peer named (Hello / RankProfile):
//                    over a per-user limit (hostd.yaml `limits`) or another uid's job. Sent once
//                    per process and job id; the peer's connection stays open and hostd tries
//                    again on its next message naming the job (a freed slot admits it then).
//                    Older peers drop it as an unknown type.
// hostd identifies the process behind a connection by SO_PEERCRED (pid, uid), so the shim and
// the plugin of one rank are matched by pid even when only the plugin knows the job id.
//
// Thread-safety: pure functions.
#ifndef CRUX_HOSTD_HOST_PROTOCOL_H_
#define CRUX_HOSTD_HOST_PROTOCOL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::hostd {

inline constexpr int kHostProtocolVersion = 1;
inline constexpr size_t kMaxMessageBytes = 128 * 1024;
inline constexpr const char* kDefaultSocketPath = "/run/crux/hostd.sock";
inline constexpr size_t kMaxPins = 2048;  // Per PinTable.
inline constexpr size_t kMaxCommsPerProfile = 256;
inline constexpr size_t kMaxPeersPerComm = 1024;
inline constexpr int kMaxLocalSlot = 1023;  // Hello.local_slot: a GPU index (cruxd: < 1024 GPUs).

// $CRUX_HOSTD_SOCKET when set and non-empty, else kDefaultSocketPath.
std::string HostdSocketPath();

enum class Role { kProfiler, kVerbs };

struct Hello {
  Role role = Role::kProfiler;
  int64_t pid = 0;
  std::string job_id;      // Empty: not known yet (the plugin resolves it at its first report).
  std::string job_source;  // "CRUX_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "comm_hash".
  std::string abi;         // Profiler ABI NCCL picked ("v6"), or the shim's verbs version.
  // The process's local slot on the host (its local GPU index: LOCAL_RANK, else SLURM_LOCALID);
  // -1: not known (older plugins do not send it). crux-hostd reports it as the slot of the
  // process's ranks (CommTraffic.local_slots), which cruxd maps to the GPU's NIC.
  int local_slot = -1;
  friend bool operator==(const Hello&, const Hello&) = default;
};

// One communicator of the process (NCCL calls profiler init once per communicator).
struct CommInfo {
  uint64_t hash = 0;  // commHash: identical on every rank of the communicator.
  int rank = 0;
  int nranks = 0;
  int nnodes = 0;
  std::string name;
  bool alive = true;  // false: finalized.
  friend bool operator==(const CommInfo&, const CommInfo&) = default;
};

struct PeerBytes {
  int peer_rank = 0;  // Communicator rank.
  uint64_t bytes = 0;
  friend bool operator==(const PeerBytes&, const PeerBytes&) = default;
};

// Bytes this rank puts on the wire per iteration on one communicator, and (once a sampling
// window measured the real proxy bytes) their split over peers.
struct CommBytes {
  uint64_t hash = 0;
  uint64_t bytes = 0;
  std::vector<PeerBytes> peers;  // Empty until sampled.
  friend bool operator==(const CommBytes&, const CommBytes&) = default;
};

// One rank's profile (the client library's Profile, from the collective sequence).
struct RankProfile {
  std::string job_id;
  int64_t period_ns = 0;
  int64_t comm_ns = 0;
  int64_t compute_ns = 0;
  uint32_t samples = 0;
  bool converged = false;
  std::vector<CommBytes> comms;
  friend bool operator==(const RankProfile&, const RankProfile&) = default;
};

struct PluginStats {
  uint64_t events = 0;       // Records queued by the hot path.
  uint64_t dropped = 0;      // Lost to a full queue.
  uint64_t collectives = 0;  // Completed collectives and p2p operations.
  uint64_t sampled_windows = 0;
  friend bool operator==(const PluginStats&, const PluginStats&) = default;
};

// A QP the shim saw go to RTR.
struct QpInfo {
  std::string device;  // RDMA device, e.g. "mlx5_0".
  int port = 1;        // ah_attr.port_num at RTR (0: not given).
  uint32_t qpn = 0;
  uint32_t dest_qpn = 0;
  std::string remote_gid;  // Canonical text (FormatGid).
  uint16_t sport = 0;      // The RoCEv2 source port the flow label selects, 0 = NCCL's own.
  int traffic_class = -1;  // Set by the shim, -1 = NCCL's own.
  bool pinned = false;     // The shim applied a Crux pin at RTR.
  friend bool operator==(const QpInfo&, const QpInfo&) = default;
};

struct QpGone {
  std::string device;
  uint32_t qpn = 0;
  friend bool operator==(const QpGone&, const QpGone&) = default;
};

// Outcome of re-pinning a live QP (mlx5dv_modify_qp_udp_sport).
struct RepinResult {
  std::string device;
  uint32_t qpn = 0;
  uint16_t sport = 0;
  bool ok = false;
  std::string error;
  friend bool operator==(const RepinResult&, const RepinResult&) = default;
};

struct Pin {
  std::string device;      // Local RDMA device.
  std::string remote_gid;  // Canonical text (FormatGid).
  uint16_t sport = 0;      // 49152-65535.
  friend bool operator==(const Pin&, const Pin&) = default;
};

// What the shim enforces for a job. An empty job_id (or no table at all) means "no assignment":
// the shim keeps NCCL's own behaviour.
struct PinTable {
  std::string job_id;
  uint64_t epoch = 0;
  uint64_t state_id = 0;
  int traffic_class = -1;  // GRH traffic class byte (DSCP << 2), -1 = keep NCCL's.
  std::vector<Pin> pins;
  friend bool operator==(const PinTable&, const PinTable&) = default;
};

// The shim's answer to a PinTable: taken (ok) or refused (error names the field).
struct PinAck {
  uint64_t epoch = 0;
  uint64_t state_id = 0;
  bool ok = false;
  std::string error;
  friend bool operator==(const PinAck&, const PinAck&) = default;
};

struct StatusRequest {
  friend bool operator==(const StatusRequest&, const StatusRequest&) = default;
};
struct StatusReply {
  std::string json;  // crux-hostd's view (an object).
  friend bool operator==(const StatusReply&, const StatusReply&) = default;
};

// hostd's refusal of a job id the peer named. `code`: kRefusedResourceExhausted (a limit; the
// reason names it: "limits.jobs_per_uid: ...") or kRefusedPermissionDenied (another uid's job).
struct Refused {
  std::string job_id;
  std::string code;
  std::string reason;  // At most 1024 chars.
  friend bool operator==(const Refused&, const Refused&) = default;
};
inline constexpr const char* kRefusedResourceExhausted = "resource_exhausted";
inline constexpr const char* kRefusedPermissionDenied = "permission_denied";

using Message = std::variant<Hello, CommInfo, RankProfile, PluginStats, QpInfo, QpGone, RepinResult,
                             PinTable, PinAck, StatusRequest, StatusReply, Refused>;

// The JSON text of `m` (never longer than kMaxMessageBytes for the bounded types; a PinTable
// over kMaxPins entries is truncated to kMaxPins by the sender, see hostd).
std::string Encode(const Message& m);
// Parses and checks one message. Errors (kInvalidArgument) name the field:
// "host message: comm.nranks: must be >= 1".
core::Result<Message> Decode(std::string_view text);

// "16 bytes" <-> text: IPv4 ("10.0.0.2", as the IPv4-mapped GID ::ffff:10.0.0.2) or IPv6/GID
// text in, canonical inet_ntop text out (so both ends compare strings).
using Gid = std::array<uint8_t, 16>;
core::Result<Gid> ParseGid(std::string_view text);
std::string FormatGid(const Gid& gid);
// Canonical form of `text` (ParseGid + FormatGid).
core::Result<std::string> CanonicalGid(std::string_view text);

// Job ids follow the wire protocol's rule: 1-128 chars of [A-Za-z0-9._:/-].
bool IsValidJobId(std::string_view id);

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_HOST_PROTOCOL_H_
