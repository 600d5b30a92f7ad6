// The crux-loadgen engine: plays many jobs' clients against a running cruxd over real ZeroMQ.
//
// One DEALER socket per simulated job, each with a random routing id drawn by DealerClient
// (never derived from the job id: a guessable id would let another peer take over the job's
// pushes), all polled together by the calling thread (epoll over their ZMQ_FDs). Each job
// registers (RegisterJob, retried with core::ExponentialBackoff on timeout or UNAVAILABLE; any
// other refusal - RESOURCE_EXHAUSTED (a quota), UNKNOWN_HOST, CONFLICT, ... - is final;
// re-registered when a heartbeat gets UNKNOWN_JOB, as after a daemon restart), then sends
// ProfileReports every `report_interval` (first one staggered uniformly in the interval; with
// report_interval 0 it keeps `inflight` reports outstanding back to back: the benchmark mode)
// and Heartbeats every `heartbeat_interval` (0: a third of the granted lease), carrying the
// applied epoch and state id (and, with flow_stats, every pinned flow's bytes, transfer time and
// transport errors since the previous heartbeat; faults slow or cut the flows whose pinned path
// crosses a named link: flow_model.h). Assignment pushes are applied when their epoch is above the
// applied one or their state_id differs from the applied one (the daemon's state was reset),
// answered with an Ack, and their latency measured as local wall clock minus
// Assignment.sent_unix_ns (when the daemon sets it; same host or synchronised clocks).
//
// Following cruxd (HA leader changes, restarts): the clients' connection monitors are polled too
// (protocol/client.h "Following the daemon"). When a job's connection drops, its outstanding
// requests are abandoned at once (RunSummary::requests_lost); when a connection completes its
// handshake (a new leader bound its endpoint), the job sends its heartbeat - or its registration
// when it is not registered - at once, with the registration backoff reset.
//
// Host-agent mode (RunHostAgents, crux-loadgen --hostd): one DEALER socket per simulated
// crux-hostd agent instead of per job; each agent speaks for the parts of every job placed on its
// host (workload.h MakeHostdJobs), multiplexed on its connection as crux-hostd does
// (hostd/include/crux/hostd/host_agent.h): every part registers on its own (MakePartRegister),
// reports its part profile (SynthesizePartProfile) and heartbeats with its HostPart, replies are
// matched to parts by request id and pushes by job id (each part gets its host's cut of the job's
// assignment and acks it). Everything else (retries, timeouts, following cruxd, the summary) is
// per part as it is per job in the default mode; RunSummary::jobs and registered count parts.
//
// Arrivals (`arrivals` > 0, either mode): that many jobs (the last ones, preferring jobs on
// several hosts) are held back and registered one by one, every `arrival_interval` from the
// start of the measurement window; for each, the time from the acknowledgement of the report
// that completes it (the last of its clients' first reports: cruxd can then plan it as a whole)
// until every one of its clients received an assignment push after that is recorded
// (RunSummary::arrival_latency, "trigger to push").
//
// `duration` bounds the whole run, registration included. The measurement window starts once
// every job is registered or has failed (or at `register_timeout`), and ends with the run; a
// run that ends while jobs are still registering has an empty window. The summary says how many
// jobs failed to register and why (RunSummary::register_failures).
//
// Thread-safety: RunLoad uses the calling thread only; `stop` may be set from another thread
// or a signal handler.
#ifndef CRUX_LOADGEN_RUNNER_H_
#define CRUX_LOADGEN_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/loadgen/flow_model.h"
#include "crux/loadgen/stats.h"
#include "crux/loadgen/workload.h"
#include "crux/protocol/client.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"

namespace crux::loadgen {

struct LoadGenOptions {
  std::string endpoint;  // The daemon's client endpoint.
  bool curve = false;
  std::string server_public_z85;       // When curve.
  protocol::CurveKeyPair client_keys;  // When curve.

  // The whole run, registration included; 0 = until stop (or, when no job registers by
  // register_timeout, until then).
  core::Duration duration = core::Duration::Millis(30000);
  core::Duration report_interval = core::Duration::Millis(5000);  // 0 = back to back.
  core::Duration heartbeat_interval = core::Duration::Zero();     // 0 = lease / 3.
  uint32_t lease_ms = 0;                                          // Requested; 0 = default.
  core::Duration request_timeout = core::Duration::Millis(5000);
  // Longest registration phase (within `duration`): jobs unregistered by then are given up on.
  core::Duration register_timeout = core::Duration::Millis(60000);
  int inflight = 1;  // Outstanding reports per job (>= 1).
  // Every ack_every-th report asks for an Ack; the ack_every - 1 before it are sent quiet
  // (Envelope.quiet: cruxd answers them only when it refuses them), and `inflight` counts the
  // acknowledged ones. 1-1000; 1 = every report acknowledged (today's clients).
  int ack_every = 1;
  bool end_jobs = false;         // Send EndJob for every job at the end.
  uint64_t seed = 1;             // Profile jitter and staggering.
  double profile_jitter = 0.02;  // Relative noise on reported times (SynthesizeProfile).
  core::Duration progress_interval = core::Duration::Millis(5000);
  // Per-flow stats on every heartbeat and the fault mode (flow_model.h). `faults` implies
  // flow_stats.
  bool flow_stats = false;
  double flow_gbps = 100;         // The flows' line rate, > 0.
  uint64_t probe_bytes = 65536;   // Per probe and heartbeat window (Assignment.probes), > 0.
  std::vector<LinkFault> faults;  // Times count from the start of the run.
  std::vector<JobLie> lies;       // Lying tenants (implies flow_stats).
  // The first profile report is due at registration (crux-hostd: it has the part's profile
  // already) rather than at a random point of the first report interval.
  bool report_at_register = false;
  // Host parts register with HostPart.accepts_batches (as crux-hostd does), so cruxd may push an
  // agent's changed parts of one epoch in one AssignmentBatch, answered with one AckBatch.
  bool host_batches = true;
  int arrivals = 0;  // Jobs held back and registered during the run (see above), >= 0.
  core::Duration arrival_interval = core::Duration::Millis(5000);
  std::function<void(const std::string&)> log;  // Progress lines; may be empty.
};

// Runs until the duration has passed, `*stop` becomes true, or no job is left registered after
// the registration phase, and returns what it measured, even when no job could register
// (`registered` == 0: daemon unreachable or refusing; register_failures says why). Errors:
// kInvalidArgument for bad options or keys (naming the option), kUnavailable when the sockets
// cannot be created (fd or ZMQ_MAX_SOCKETS limits).
core::Result<RunSummary> RunLoad(protocol::TransportContext& ctx, const std::vector<SimJob>& jobs,
                                 const LoadGenOptions& options,
                                 const std::atomic<bool>* stop = nullptr);

// Host-agent mode (see above): plays `agents` (a subset of AgentsOf(jobs) is fine) against the
// daemon. Errors as RunLoad; kInvalidArgument also for flow stats, faults or lies (not simulated
// in this mode) and for an agent part that is not a host of its job.
core::Result<RunSummary> RunHostAgents(protocol::TransportContext& ctx,
                                       const std::vector<SimJob>& jobs,
                                       const std::vector<SimAgent>& agents,
                                       const LoadGenOptions& options,
                                       const std::atomic<bool>* stop = nullptr);

// File descriptors one process needs per simulated job (the mailbox eventfds of a DealerClient's
// protocol::kSocketsPerClient sockets plus its TCP/IPC connection), and the fixed reserve for
// everything else.
inline constexpr uint64_t kFdsPerJob = protocol::kSocketsPerClient + 1;
inline constexpr uint64_t kFdReserve = 256;

// Raises the RLIMIT_NOFILE soft limit towards what `sockets` ZeroMQ sockets need (up to the
// hard limit, or beyond it when privileged) and returns the resulting soft limit. Errors only
// when the system calls fail.
core::Result<uint64_t> RaiseFdLimit(size_t sockets);

// Simulated jobs one process can hold under `fd_limit` (at least 1).
size_t JobsPerProcess(uint64_t fd_limit);

}  // namespace crux::loadgen

#endif  // CRUX_LOADGEN_RUNNER_H_
