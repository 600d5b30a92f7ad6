// HostAgent: crux-hostd's logic, sans I/O (no socket, no clock, no thread). One per host.
//
// Inputs: local connections from the ranks' plugin and shim (opened, a host-protocol message,
// closed; each with the peer's pid and uid), the daemon's replies and pushes, the time (Tick).
// Outputs: envelopes for cruxd (TakeToDaemon: one connection for the whole host, every job
// multiplexed on it) and host-protocol messages for local connections (TakeToLocal). The driver
// (hostd_server.h) does the I/O; the unit tests script everything.
//
// What it does:
//  * Processes. A rank's plugin and shim connect separately; both are keyed by the peer's pid,
//    so the shim gets its job's pins even when only the plugin knows the job id (comm-hash rule).
//  * Jobs. A job is the set of local processes naming the same job id. All processes of a job
//    must belong to one uid (the first one's; others are refused), so a user cannot read or
//    steer another user's job through the agent.
//  * Limits (config `limits`, per local user by SO_PEERCRED uid; 0: no limit). A non-root uid
//    owns at most jobs_per_uid live jobs and has at most ranks_per_uid processes in them; all
//    non-root uids together own at most jobs_non_root live jobs. Root (uid 0) is exempt. A live
//    job counts until it ends (end_delay_ms after its last process left), as it does at cruxd,
//    whose limits.max_jobs_per_connection bounds the host's whole connection: so one local user
//    cannot fill the host's share and have every later job refused there (root's included).
//    Refusals (a limit, another uid's job) are answered to the process's connection (Refused:
//    code and reason naming the limit; once per process and job id), counted (refused_quota,
//    refused_uid), kept per uid for its status, and logged to stderr: the first 10, then every
//    100th. The process stays connected; a later message naming the job tries again.
//  * Status. A StatusRequest is answered with StatusJson(the connection's uid): root sees every
//    job; any other uid only its own jobs, its own usage and last refusal, and no per-flow
//    probe data (it names other jobs' flows).
//  * Registration. register_delay_ms after the job's first process appeared (its other local
//    ranks arrive meanwhile), and once its local ranks look complete - every process has
//    reported a communicator and there are at least nRanks / nNodes of them for its largest
//    one - or at the latest kRegisterWaitFactor x register_delay_ms after it appeared (a loaded
//    host starts ranks late; a shim-only process reports no communicator), the job gets a
//    session (client_lib's sans-I/O Session) that
//    registers it with placement = this host (GPUs = local ranks, NICs = the configured ones) and
//    a HostPart (host, hosts expected = the largest nNodes of its communicators, local ranks).
//    The placement is fixed from then on (a changed placement would be refused by cruxd).
//  * Profiles. The ranks' RankProfiles are merged into one host-part profile: period, compute
//    and communication time are the medians over ranks, bytes per iteration the sum, plus the
//    per-communicator traffic (CommTraffic: local ranks, bytes per rank and peer rank). It is
//    reported when first available and again when the period or bytes move by more than 10 % or
//    the peer split appears.
//  * Assignments. Each applied assignment becomes a PinTable (traffic class; per flow whose
//    source NIC is local and whose destination NIC's address is known (nic_addresses): local
//    device, remote GID, UDP source port) sent to every shim of the job, now and on every later
//    shim connection. Fail-static: when cruxd is away the last table stays (the session keeps
//    its assignment and re-registers with backoff).
//  * End. end_delay_ms after a job's last process left, the session ends the job (EndJob).
//    Stopping the agent ends nothing: cruxd's lease expires if the host is really gone.
//  * NIC counters (nic_counters.h). Every nic_counters_interval_ms (0: off) the agent reads each
//    configured NIC's RDMA hardware counters through its NicCounterSource (SetNicCounterSource;
//    none: off) and sends one HostTelemetry with the per-NIC deltas since the previous reading
//    (interval_ns = the time between the two readings). A NIC's first reading only primes it;
//    a NIC of which no counter could be read is left out (and primes again later); a report is
//    sent when at least one NIC has two readings. cruxd answers with an Ack; a refusal is
//    counted and shown (telemetry is not resent: the next interval carries new deltas).
//  * Probes. Registered HostProbes (probe.h) run on their own schedule; their last results are
//    part of the status. They see the pin tables and, per job, the planner's probes leaving this
//    host's NICs (Assignment.probes whose source NIC is configured and whose destination NIC's
//    address is known). A probe round that measured capacity probes (ProbeResult::capacity) is
//    reported to cruxd once, in a HostTelemetry of its own (probes, no NIC counters; one result
//    per probe and job, at most protocol::kMaxHostProbes); cruxd answers with an Ack, a refusal
//    is counted and shown (results are not resent: the next round measures again).
//
// Thread-safety: none; one owner thread. Times passed in must not decrease.
#ifndef CRUX_HOSTD_HOST_AGENT_H_
#define CRUX_HOSTD_HOST_AGENT_H_

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/hostd/config.h"
#include "crux/hostd/host_protocol.h"
#include "crux/hostd/nic_counters.h"
#include "crux/hostd/probe.h"
#include "crux/protocol/term_file.h"
#include "crux/v1/envelope.pb.h"

namespace crux::client::internal {
class Session;
}

namespace crux::hostd {

using ConnId = uint64_t;

struct HostAgentCounters {
  uint64_t local_messages = 0;
  uint64_t bad_local_messages = 0;
  uint64_t refused_uid = 0;       // A process claiming a job owned by another uid.
  uint64_t refused_quota = 0;     // A process whose job or rank is over a `limits` limit.
  uint64_t unresolved_flows = 0;  // Assignment flows whose remote NIC has no known address.
  uint64_t pin_tables_sent = 0;
  uint64_t daemon_messages = 0;
  uint64_t stray_daemon_messages = 0;  // Replies / pushes matching no job.
  // AssignmentBatch pushes (cruxd sends them since the parts register with
  // HostPart.accepts_batches): each of its assignments is handled as if it had come alone, and
  // their acks go back in one AckBatch.
  uint64_t assignment_batches = 0;
  // The connection to cruxd dropped / came up again after a drop (an HA leader change, a cruxd
  // restart): every job's session followed at once (OnDaemonConnectionChange).
  uint64_t daemon_connections_lost = 0;
  uint64_t daemon_reconnects = 0;
  uint64_t nic_telemetry_sent = 0;     // HostTelemetry reports handed to the transport.
  uint64_t nic_telemetry_acked = 0;    // ... that cruxd acknowledged.
  uint64_t nic_telemetry_refused = 0;  // ... that cruxd refused or the transport could not send.
  // NIC readings that gave no deltas (JudgeNicCounters): counters went backwards, or grew beyond
  // the port's rate (a garbled value). Logged, never sent to cruxd.
  uint64_t nic_counter_resets = 0;
  uint64_t nic_implausible_samples = 0;
  // Capacity probe results (HostTelemetry.probes, one report per probe round that measured any).
  uint64_t probe_reports_sent = 0;
  uint64_t probe_reports_acked = 0;
  uint64_t probe_reports_refused = 0;  // cruxd refused it or the transport could not send it.
  uint64_t probe_results_sent = 0;     // Results in the reports sent (one per probe and job).
};

class HostAgent {
 public:
  // A job whose local ranks do not look complete registers this many register_delay_ms late.
  static constexpr int64_t kRegisterWaitFactor = 10;

  explicit HostAgent(HostdConfig config, uint64_t seed = 1);
  ~HostAgent();
  HostAgent(const HostAgent&) = delete;
  HostAgent& operator=(const HostAgent&) = delete;

  void AddProbe(std::unique_ptr<HostProbe> probe);
  // Where the NIC counters come from (SysfsNicCounters in crux-hostd; scripted in tests). Without
  // one, or with nic_counters_interval_ms 0, no counters are read. The first reading is at the
  // first Tick.
  void SetNicCounterSource(std::unique_ptr<NicCounterSource> source);
  // High availability (issue #31): every job's session starts from the highest leader term this
  // host accepted, and a higher term is recorded in `file` before the assignment carrying it is
  // accepted (a failed write refuses the assignment). Without a file the term is shared by the
  // host's sessions in memory only. Call before the first Tick.
  void SetTermFile(protocol::TermFile file);
  uint64_t highest_term() const { return highest_term_; }

  // --- Inputs.
  void OnLocalConnected(ConnId conn, pid_t pid, uid_t uid, core::Duration now);
  void OnLocalMessage(ConnId conn, const Message& message, core::Duration now);
  void OnLocalBadMessage(ConnId conn, const core::Status& error);
  void OnLocalClosed(ConnId conn, core::Duration now);
  void OnDaemonMessage(const v1::Envelope& message, core::Duration now, int64_t unix_now_ns);
  // The transport refused `message` (an envelope from TakeToDaemon).
  void OnDaemonSendFailed(const v1::Envelope& message, const core::Status& error,
                          core::Duration now);
  // The connection to cruxd changed (protocol::DealerClient::TakeConnectionChange): `lost`, the
  // requests in flight can get no reply (forgotten); `connected`, one is up (again). Every job's
  // session follows at once (client_lib's Session::OnConnectionChange): a new HA leader hears
  // from every job of the host without waiting for their heartbeats.
  void OnDaemonConnectionChange(bool lost, bool connected, core::Duration now);
  void Tick(core::Duration now);

  // --- Outputs.
  std::vector<v1::Envelope> TakeToDaemon();
  std::vector<std::pair<ConnId, Message>> TakeToLocal();
  core::Duration NextWakeup() const;

  // --- State.
  // The agent's view as a JSON object (crux-hostd --status; the StatusReply) as `viewer` may see
  // it: nullopt or root everything, another uid only its own jobs (see Status above).
  std::string StatusJson(std::optional<uid_t> viewer = std::nullopt) const;
  const HostAgentCounters& counters() const { return counters_; }
  size_t jobs() const { return jobs_.size(); }

 private:
  struct Process;
  struct Job;

  struct LocalPeer {
    pid_t pid = -1;
    uid_t uid = static_cast<uid_t>(-1);
  };
  struct Usage {
    uint32_t jobs = 0;
    uint32_t ranks = 0;
  };

  Process& ProcessOf(pid_t pid, uid_t uid, core::Duration now);
  // `conn` (of `p`) named `job_id`: joins it, or creates it within the limits, or is refused.
  void AttachJob(Process& p, ConnId conn, const std::string& job_id, core::Duration now);
  // The limit `uid` would exceed with one more rank (and one more job when `new_job`), with the
  // reason naming it; "" when none.
  std::string OverLimit(uid_t uid, bool new_job) const;
  Usage UsageOf(uid_t uid) const;
  // Answers `reason`, counts and logs (rate-limited; `detail` instead of `reason` when given) a
  // refusal of `job_id` for `p` (once per job id).
  void Refuse(Process& p, ConnId conn, const std::string& job_id, const char* code,
              const std::string& reason, uint64_t* counter, const std::string& detail = "");
  void DetachJob(Process& p, core::Duration now);
  void MaybeStartSession(Job& j, core::Duration now);
  // Whether the job's local ranks look complete (see Registration above).
  bool LocalRanksComplete(const Job& j) const;
  // When the job registers at the earliest, given whether its local ranks look complete.
  core::Duration RegisterAt(const Job& j) const;
  void UpdateProfile(Job& j, core::Duration now);
  void SendPins(Job& j, std::optional<ConnId> only = std::nullopt);
  PinTable BuildPins(const Job& j);
  void Pump(Job& j, core::Duration now);
  // A reply or push for `job` (request id already mapped back to the session's own).
  void OnJobMessage(Job& job, const v1::Envelope& m, core::Duration now, int64_t unix_now_ns);
  void OnAssignmentBatch(const v1::AssignmentBatch& batch, core::Duration now, int64_t unix_now_ns);
  void RunProbes(core::Duration now);
  // The probes of `a` (an applied assignment of `j`) leaving this host's NICs.
  std::vector<PlannedProbe> BuildPlannedProbes(const Job& j, const v1::Assignment& a);
  // Queues one HostTelemetry with `measured` (a probe round's capacity measurements).
  void ReportCapacity(const std::vector<CapacityMeasurement>& measured);
  // Reads the NICs when due and queues a HostTelemetry (see NIC counters above).
  void ReadNicCounters(core::Duration now);

  HostdConfig config_;
  uint64_t seed_;
  std::map<ConnId, LocalPeer> conns_;
  std::map<pid_t, std::unique_ptr<Process>> processes_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  // Request ids on the shared connection: ours -> (job, the session's own id).
  std::map<uint64_t, std::pair<std::string, uint64_t>> requests_;
  uint64_t next_request_id_ = 0;
  std::vector<v1::Envelope> to_daemon_;
  std::vector<std::pair<ConnId, Message>> to_local_;
  struct ProbeSlot {
    std::unique_ptr<HostProbe> probe;
    core::Duration next;
    std::optional<ProbeResult> last;
    uint64_t reported_round = 0;  // The last round whose capacity results were reported.
  };
  std::vector<ProbeSlot> probes_;
  std::unique_ptr<NicCounterSource> nic_source_;
  std::optional<protocol::TermFile> term_file_;
  uint64_t highest_term_ = 0;  // Over every session of this host (and the term file).
  struct NicState {
    std::optional<NicCounterReading> last;  // The previous reading (primes the next delta).
    core::Duration last_at;
    std::vector<std::string> errors;                               // Of the last reading.
    std::optional<std::array<uint64_t, kNicCounterCount>> deltas;  // The last ones sent.
    core::Duration delta_interval;
    std::string dropped;  // Why the last dropped reading was dropped (JudgeNicCounters).
  };
  std::vector<NicState> nic_states_;  // Per config_.nics entry.
  core::Duration next_nic_read_ = core::Duration::Zero();
  uint64_t nic_telemetry_seq_ = 0;
  std::set<uint64_t> telemetry_requests_;     // Request ids of HostTelemetry awaiting a reply.
  std::set<uint64_t> probe_report_requests_;  // ... of probe reports awaiting a reply.
  std::string probe_report_error_;            // cruxd's last refusal of a probe report.
  bool had_connection_lost_ = false;          // Since the last connection came up.
  std::string nic_telemetry_error_;           // cruxd's last refusal (or the transport's error).
  HostAgentCounters counters_;
  std::string last_error_;
  // Each uid's last refusal (its status shows it); at most kMaxRefusalUids uids, oldest dropped.
  std::map<uid_t, std::string> last_refusal_;
  std::deque<uid_t> refusal_order_;
};

}  // namespace crux::hostd

#endif  // CRUX_HOSTD_HOST_AGENT_H_
