// crux::client: the job-side client library. A training job links it (C++, the C ABI in
// crux_client.h, or the Python module `crux`) to join Crux without changing model code.
//
//   auto client = crux::client::Client::Start(options);        // returns at once
//   PeerId next = (*client)->AddPeer("host0/nic0", "host1/nic0");
//   for (...) {
//     (*client)->BeginIteration();
//     ... forward / backward ...
//     (*client)->CommStart(next, bytes); ... (*client)->CommEnd(next);
//     (*client)->EndIteration();
//   }
//
// What it does:
//  * Registers the job (id, placement) with cruxd, heartbeats every granted lease / 3 and
//    re-registers idempotently after a reconnect, when the daemon answers UNKNOWN_JOB, or when it
//    answers PERMISSION_DENIED because it bound the job to another connection.
//  * Measures each iteration (period, compute time, bytes per peer, overlap start) either from
//    explicit marks (BeginIteration/EndIteration) or, when the job sends no marks, by detecting
//    the iteration period from the communication events themselves (period_detector.h).
//    It reports a converged ProfileReport within `converge_max_iterations` iterations (10 by
//    default), then again only when the profile changes significantly.
//  * Receives Assignments (level, DSCP / traffic class, per-flow UDP source ports, NCCL env,
//    epoch, state id), applies newer epochs (and, after an operator reset cruxd's state, the
//    first assignment of the new state: see Assignment::state_id), acks them, and hands them to
//    the application through the callback and CurrentAssignment().
//  * Fail-static: when the daemon is unreachable the last assignment stays in force, the client
//    reconnects with exponential backoff, and the training step is never blocked or slowed.
//
// Identity: the connection uses a random, unguessable ZeroMQ routing id drawn at Start() and kept
// for the client's life (reconnects keep it); it is never derived from the job id.
//
// Threads: Start() creates one background thread that owns the ZeroMQ socket and drives the
// protocol logic (a sans-I/O session, client_lib/src/session.h). The hot-path
// calls (BeginIteration, EndIteration, ComputeEnd, CommStart, CommEnd, RecordComm) are
// thread-safe, lock-free and wait-free in practice: they take a timestamp and push a 40-byte
// event into a preallocated ring; they never block and never allocate. When the ring is full the
// event is dropped and counted (Stats().events_dropped). Every other method is thread-safe too.
//
// Units: durations in nanoseconds of std::chrono::steady_clock, bytes as on the wire, FLOPs per
// iteration.
#ifndef CRUX_CLIENT_CLIENT_H_
#define CRUX_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/client/export.h"
#include "crux/core/base/status.h"

namespace crux::client {

// Index of a peer (a local NIC -> remote NIC pair) returned by AddPeer; used on the hot path.
using PeerId = uint32_t;
inline constexpr PeerId kNoPeer = 0xFFFFFFFFu;

struct HostPlacement {
  std::string host;               // Topology host name, e.g. "host3".
  uint32_t gpus = 1;              // GPUs of the job on this host, >= 1.
  std::vector<std::string> nics;  // Topology NIC names ("host3/nic0"); empty = all of them.
};

// When a profile counts as converged and when a change is significant.
struct ProfilerOptions {
  uint32_t window = 10;                   // Iterations the profile is the median of, >= 3.
  uint32_t converge_min_iterations = 3;   // Earliest report, >= 2.
  uint32_t converge_max_iterations = 10;  // Report (converged) at this count whatever the spread.
  double stable_spread = 0.10;      // Converged early when every sample is within this fraction.
  double change_threshold = 0.20;   // Re-report when period/compute/bytes move by more.
  uint32_t change_persistence = 3;  // ... in this many consecutive window medians.
  // Period detection (no iteration marks): events analysed, and bursts needed to trust it.
  uint32_t detect_events = 4096;
  uint32_t detect_min_bursts = 4;
};

struct ClientOptions {
  // Daemon endpoint, e.g. "tcp://10.0.0.1:7450".
  std::string endpoint;
  // CurveZMQ (all three, Z85) or none (the daemon must run insecure).
  std::string server_public_key;
  std::string client_public_key;
  std::string client_secret_key;

  std::string job_id;  // 1..128 chars of [A-Za-z0-9._:/-].
  std::string tenant;
  std::vector<HostPlacement> placement;  // >= 1 host.
  std::string model;                     // Informational.

  // Static description used by the daemon until the first profile (all optional).
  std::string pattern;               // "ring_allreduce" (default), "all_to_all", "pipeline".
  uint64_t bytes_per_iteration = 0;  // Collective size S for the pattern.

  // W_j: the job's FLOPs per iteration if known (> 0); otherwise, if gpu_peak_flops > 0, the
  // library estimates W_j = compute time x gpu_peak_flops x GPUs of the placement; otherwise 0
  // is reported and the daemon estimates it with its configured peak.
  double flops_per_iteration = 0;
  double gpu_peak_flops = 0;  // FLOP/s of one GPU.

  uint32_t lease_ms = 0;  // Requested lease; 0 = daemon default.

  // Transport behaviour.
  int64_t call_timeout_ms = 2000;    // A request without reply in this time = disconnected.
  int64_t reconnect_min_ms = 100;    // Backoff of re-registration attempts: min ...
  int64_t reconnect_max_ms = 10000;  // ... doubling up to max (each delay x [0.8, 1] jitter).
  int64_t poll_interval_ms = 5;      // Longest wait of the background thread between ring drains.
  bool end_job_on_close = true;      // Send EndJob when the client is closed.

  uint32_t ring_capacity = 1 << 16;  // Hot-path events buffered (rounded up to a power of 2).
  uint32_t max_peers = 4096;         // AddPeer limit.
  ProfilerOptions profiler;
};

// One pinned flow of an assignment.
struct FlowPin {
  std::string src_nic;
  std::string dst_nic;
  uint16_t udp_sport = 0;  // 0 = unpinned.
  std::vector<std::string> path;
};

// What the daemon decided for the job.
struct CRUX_CLIENT_EXPORT Assignment {
  // Strictly increasing per daemon state. Epochs are ordered only within one state_id.
  uint64_t epoch = 0;
  uint32_t level = 0;          // Hardware priority level, 0 = highest.
  uint32_t dscp = 0;           // 0-63.
  uint32_t traffic_class = 0;  // IB traffic class byte = dscp << 2.
  std::string state;           // "REGISTERED", "PROFILING", "SCHEDULED", "GONE".
  std::vector<FlowPin> flows;
  std::map<std::string, std::string> nccl_env;  // E.g. NCCL_IB_TC.
  int64_t received_unix_ns = 0;
  int64_t sent_unix_ns = 0;  // Daemon clock when sent.
  // Id of the daemon's persistent state (0 from daemons that send none). A different state_id
  // than the applied assignment's means an operator reset cruxd's state: that assignment is
  // applied although its epoch may be lower (epochs restart at 1).
  uint64_t state_id = 0;
  // High availability: the term of the cruxd leader that sent it (0 from a single cruxd).
  uint64_t term = 0;

  // The UDP source port pinned for src_nic -> dst_nic, or 0.
  uint16_t UdpSportFor(const std::string& src_nic, const std::string& dst_nic) const;
};

// A measured profile, as reported.
struct PeerBytesReport {
  std::string local_nic;
  std::string remote_nic;
  uint64_t bytes = 0;
};
struct Profile {
  int64_t iteration_period_ns = 0;
  int64_t compute_time_ns = 0;
  int64_t comm_time_ns = 0;  // Union of communication intervals per iteration.
  double overlap_start = 1;  // Fraction of compute before communication starts, [0, 1].
  double flops_per_iteration = 0;
  uint64_t bytes_per_iteration = 0;
  std::vector<PeerBytesReport> peers;
  uint32_t samples = 0;
  bool converged = false;
  bool detected = false;  // Period detected from traffic (no iteration marks).
};

struct ClientStats {
  bool registered = false;     // Currently registered with a live daemon.
  uint64_t registrations = 0;  // Successful RegisterJob calls (including re-registrations).
  uint64_t register_failures = 0;
  uint64_t reports_sent = 0;     // ProfileReports acknowledged.
  uint64_t heartbeats_sent = 0;  // Heartbeats acknowledged.
  uint64_t assignments_applied = 0;
  uint64_t assignments_stale = 0;  // Pushes not newer than the applied one (same state).
  uint64_t events_dropped = 0;     // Hot-path events lost to a full ring or a bad peer id.
  uint64_t iterations = 0;         // Iterations measured (marked or detected).
  uint64_t lease_ms = 0;           // Granted lease.
  std::string last_error;          // Last transport / daemon error, "" if none.
  // Assignments applied across a daemon state reset (state_id changed, epochs restarted).
  uint64_t state_resets = 0;
  // Re-registrations because cruxd bound the job to another connection (PERMISSION_DENIED).
  uint64_t rebinds = 0;
  // Registrations refused with RESOURCE_EXHAUSTED (a per-connection / per-key job quota); they
  // are retried with backoff like any refusal (also in register_failures and last_error).
  uint64_t quota_refusals = 0;
  // High availability (docs/daemon.md): the highest cruxd leader term seen on a push, and the
  // pushes refused because they came from a lower term (a deposed leader; also in last_error).
  uint64_t highest_term = 0;
  uint64_t stale_term_refused = 0;
  // Connections to cruxd up again after a lost one (an HA leader change, a restart), each
  // answered at once by a heartbeat or registration (docs/client.md, "fail-static").
  uint64_t reconnects = 0;
};

using AssignmentCallback = std::function<void(const Assignment&)>;
// Enforcement run before an assignment is acked (e.g. rdma::QpEnforcer); its Status goes into
// the Ack (ok = false, error) and Stats().last_error. The assignment becomes current either way.
using Enforcer = std::function<core::Status(const Assignment&)>;

class CRUX_CLIENT_EXPORT Client {
 public:
  // Validates the options (errors name the field: "options.job_id: ..."), creates the ZeroMQ
  // context and the background thread, and returns at once; registration happens in the
  // background. Fails only for bad options.
  static core::Result<std::unique_ptr<Client>> Start(ClientOptions options);

  // Close()s.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Declares a peer (local NIC -> remote NIC, topology names). Not for the hot path (takes a
  // lock); the same pair returns the same id. Errors: kInvalidArgument (bad name),
  // kOutOfRange (max_peers reached).
  core::Result<PeerId> AddPeer(const std::string& local_nic, const std::string& remote_nic);

  // Hot path (see the file comment). Marks use the current steady_clock time.
  void BeginIteration();
  void EndIteration();
  // Optional: compute of this iteration is over; what follows is exposed communication.
  void ComputeEnd();
  // A transfer of `bytes` to `peer` starts / ends. Starts and ends pair per peer in FIFO order.
  // Events naming a peer id >= max_peers (never returned by AddPeer) are dropped and counted in
  // Stats().events_dropped.
  void CommStart(PeerId peer, uint64_t bytes);
  void CommEnd(PeerId peer);
  // A complete transfer with explicit steady_clock timestamps (ns), e.g. from a NCCL profiler.
  // Transfers with a timestamp outside [0, 2^61] (not a steady_clock reading) are ignored.
  void RecordComm(PeerId peer, uint64_t bytes, int64_t start_ns, int64_t end_ns);

  // Called on the background thread for every newly applied assignment (and, when set while
  // one is applied, not retroactively: use CurrentAssignment). Must not block for long.
  // Replaces the previous callback; pass nullptr to remove it.
  void SetAssignmentCallback(AssignmentCallback callback);

  // Replaces the enforcer (nullptr: none). Runs on the background thread, before the callback.
  void SetEnforcer(Enforcer enforcer);

  // The applied assignment (kept while the daemon is unreachable), if any.
  std::optional<Assignment> CurrentAssignment() const;
  // Waits up to `timeout_ms` for an assignment with an epoch > `after_epoch` and returns it
  // (nullopt on timeout or when closed). Across a daemon state reset (epochs restart at 1) it
  // does not hang: it also returns the current assignment when that one was applied across a
  // reset during the wait, and, once any reset happened, when the current epoch is below
  // `after_epoch` (the caller's epoch then belongs to an earlier daemon state). A caller that
  // remembers both numbers of the assignment it has should use the overload below, which is
  // exact.
  std::optional<Assignment> WaitForAssignment(uint64_t after_epoch, int64_t timeout_ms) const;
  // Waits up to `timeout_ms` for an assignment newer than the one with (`after_epoch`,
  // `after_state_id`): a different state_id, or the same one and a greater epoch. (0, 0) waits
  // for any assignment (from daemons that send state ids).
  std::optional<Assignment> WaitForAssignment(uint64_t after_epoch, uint64_t after_state_id,
                                              int64_t timeout_ms) const;

  // The last profile reported to the daemon, if any.
  std::optional<Profile> LastReportedProfile() const;
  ClientStats Stats() const;
  // Waits up to `timeout_ms` until `pred(Stats())` holds; returns whether it did. `pred` is
  // evaluated on the calling thread, without any library lock held, whenever the background
  // thread changes the stats (registration, replies, iterations, errors; not events_dropped),
  // and once more at the deadline or when the client is closed. E.g. a launcher waiting for the
  // registration: WaitForStats([](const ClientStats& s) { return s.registered; }, 5000).
  bool WaitForStats(const std::function<bool(const ClientStats&)>& pred, int64_t timeout_ms) const;

  // Stops the background thread (sends EndJob first when end_job_on_close and registered,
  // waiting at most call_timeout_ms; a request in flight is abandoned).
  // Idempotent. Called from the callback or enforcer it only requests the stop (the thread
  // cannot join itself); the client must not be destroyed from there.
  void Close();

  // The steady_clock "now" the library uses, in ns (for RecordComm).
  static int64_t NowNs();

  class Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace crux::client

#endif  // CRUX_CLIENT_CLIENT_H_
