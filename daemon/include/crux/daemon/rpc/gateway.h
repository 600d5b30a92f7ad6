// Gateway: the client endpoint's requests (jobs and switch agents). Each message is authorised
// (key roles), converted once from the wire into core types (crux/protocol/convert.h, against
// the topology), checked against the sessions (JobTracker: ownership, connection binding,
// quotas, leases), persisted when it changes state, and turned into control-loop events
// (core::ControlLoop via ControlHost). Every request gets exactly one reply (its specific reply, an
// Ack or an Error); an Ack answering a push (request id 0) gets none. Pushes a request causes
// (the current assignment after a re-registration or a heartbeat from a stale or foreign state,
// a switch's full state) are sent after its reply.
//
// Group commit: registrations that arrive in one batch (ProcessBatch: what the transport read in
// one wake-up) are persisted in one store transaction, and their replies are sent after it
// commits (a registration that is not persisted is never acknowledged; if the transaction fails
// every new job of the group is undone and answered UNAVAILABLE). Any other message, and a
// registration of a job already in the group, first commits the group, so every message sees
// the state it would see if the messages were handled one by one.
//
// Multi-host jobs (docs/daemon.md "Multi-host jobs", gateway_parts.cc): a registration, report,
// heartbeat or EndJob carrying a HostPart speaks for one host's part (crux-hostd). Parts join the
// job's placement (JobTracker::RegisterPart), their reports are kept (PartProfiles) and merged
// into the one profile the control loop sees (core::MergeHostParts), and a part that ends or
// expires leaves alone; every part's connection gets the job's assignment.
//
// Refusals are counted in crux_errors_total{endpoint,kind}, security refusals also by reason
// (RefusalBook), and never change state: a bad peer never affects anyone else.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_RPC_GATEWAY_H_
#define CRUX_DAEMON_RPC_GATEWAY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crux/daemon/config/config.h"
#include "crux/daemon/control/control_host.h"
#include "crux/daemon/rpc/refusal_book.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/runtime/metrics.h"
#include "crux/daemon/state/enforcer.h"
#include "crux/daemon/state/job_rows.h"
#include "crux/daemon/state/job_tracker.h"
#include "crux/daemon/state/part_profiles.h"
#include "crux/daemon/state/refusal.h"
#include "crux/daemon/state/topology_manager.h"
#include "crux/daemon/store/job_journal.h"
#include "crux/protocol/convert.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/server.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

class Gateway {
 public:
  // Every pointer must outlive the gateway; `metrics` may be null. `config` is the running one
  // (dry_run is live); `control` gets the events, `journal` the rows to store, `rows` builds
  // them.
  Gateway(const DaemonConfig* config, EventLoop* loop, Metrics* metrics,
          const TopologyManager* topo, JobTracker* tracker, PartProfiles* parts, Enforcer* enforcer,
          ControlHost* control, JobJournal* journal, const JobRows* rows, RefusalBook* refusals)
      : config_(config),
        loop_(loop),
        metrics_(metrics),
        topo_(topo),
        tracker_(tracker),
        parts_(parts),
        enforcer_(enforcer),
        control_(control),
        journal_(journal),
        rows_(rows),
        refusals_(refusals) {}
  ~Gateway() { *self_ = nullptr; }  // A timer firing later finds no gateway.
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Where replies and pushes of envelopes go (the client endpoint's Send). Set before the first
  // message.
  void SetSender(Sender s) { client_sender_ = std::move(s); }
  // Curve only: what each authorised key may do (protocol::GrantsOf). Without grants (insecure
  // mode) roles are not checked.
  void SetKeyGrants(std::optional<protocol::KeyGrants> grants) { grants_ = std::move(grants); }

  // What became of the host probe results (HostTelemetry.probes) so far.
  struct HostProbeCounters {
    uint64_t accepted = 0;        // Handed to the fault manager.
    uint64_t rejected = 0;        // Refused (crux_errors_total{kind="host_probe"}), logged.
    uint64_t stale = 0;           // Not a probe of the job's assignment in force (a re-plan).
    uint64_t sender_limited = 0;  // A sender-paced train below the gray ratio: no evidence.
  };
  const HostProbeCounters& host_probe_counters() const { return host_probe_counters_; }

  // Handles one message: sends its reply, then the pushes it caused.
  void Process(const protocol::Inbound& in);
  // Handles the messages in order (group-committing registrations, above), then sends the
  // pushes they caused.
  void ProcessBatch(const std::vector<protocol::Inbound>& batch);

  // A job is gone (EndJob, lease expired): sessions, store, control loop.
  void JobGone(const std::string& id, const std::string& reason);
  // Parts whose lease expired (JobTracker::ExpireParts, already out of the tracker): each leaves
  // its job (PartGone), a job whose last part it was is gone (JobGone).
  void PartsExpired(const std::vector<ExpiredPart>& parts);

  // The reply for a refusal: counted (errors by kind; security refusals by reason).
  v1::Envelope Refuse(const std::string& endpoint, uint64_t request_id,
                      const protocol::ProtocolError& r);
  // A domain module's refusal, as the wire error it maps to (ToWire).
  v1::Envelope Refuse(const std::string& endpoint, uint64_t request_id, const Refusal& r);

 private:
  // One message: its reply is sent unless held for the group commit.
  void HandleOne(const protocol::Inbound& in);
  // After the messages: commits held registrations, sends the pushes, asks for a plan.
  void EndBatch();
  // Persists the held registrations in one transaction and sends their replies.
  void CommitRegistrations();
  // Sends the pushes the handled messages caused.
  void SendDeferred();
  void Reply(const std::string& peer, uint64_t request_id, const v1::Envelope& reply);
  // The reply, or nullopt when it is held (a registration waiting for the group commit).
  std::optional<v1::Envelope> Handle(const protocol::Inbound& in);
  // The key's role allows the message (curve.h): switch messages need a switch key for the
  // switch, host telemetry a host key for the host, job messages a job or host key. Per-job
  // ownership is the tracker's. Always allowed without grants (insecure mode).
  protocol::ProtocolError Authorise(const protocol::Inbound& in) const;
  std::optional<v1::Envelope> OnRegister(const protocol::Inbound& in);
  v1::Envelope OnProfile(const protocol::Inbound& in);
  v1::Envelope OnHeartbeat(const protocol::Inbound& in);
  v1::Envelope OnEndJob(const protocol::Inbound& in);
  v1::Envelope OnAck(const protocol::Inbound& in);
  // Each ack of the batch as OnAck; a refused one is counted and logged (request_id 0: no reply).
  void OnAckBatch(const protocol::Inbound& in);
  // What OnAck does for one ack; `field` names it in a refusal.
  protocol::ProtocolError ApplyAck(const protocol::Inbound& in, const v1::Ack& a,
                                   const std::string& field);
  v1::Envelope OnSwitchHello(const protocol::Inbound& in);
  v1::Envelope OnSwitchApplied(const protocol::Inbound& in);
  // Port telemetry: link-state and counter signals for the fault manager.
  v1::Envelope OnSwitchTelemetry(const protocol::Inbound& in);
  // crux-hostd's NIC counters: NIC counter signals for the fault manager. With CURVE only a host
  // key authorised for the host (hosts/<host>.pub) may send it (Authorise); the NICs must be the
  // reporting host's.
  //
  // Its probe results (crux-hostd's capacity probes, docs/faults.md "Probes"): each must name a
  // NIC of the host as its source, a NIC of the topology as its destination, and a job that has
  // a part on the host registered by the same key (without CURVE: spoken for by the same
  // connection; a host agent reports probes only for the jobs it has parts of); a probe that does
  // not is rejected with its reason (counted, logged at a bounded rate) and the others still count.
  // The accepted ones that are probes of the job's assignment in force become host-measured samples
  // (ControlHost::ObserveHostProbes); a sender-limited train (a lower bound on the capacity) counts
  // only when it reaches the gray ratio of its path's smallest nominal capacity (healthy), never as
  // slow. The report is refused (the first rejection's error) only when it had probes and every one
  // was rejected.
  v1::Envelope OnHostTelemetry(const protocol::Inbound& in);
  // The probe part of OnHostTelemetry; an error when every probe was rejected.
  protocol::ProtocolError ObserveHostProbes(const protocol::Inbound& in);
  // A heartbeat's per-flow stats: flow samples for the fault manager.
  void ObserveFlows(const v1::Heartbeat& h);
  void DeferAssignment(const std::string& peer, const std::string& job_id);
  // A profile for the control loop (a job's report, or a multi-host job's merge): hysteresis
  // verdict, the journal's next flush.
  void Reported(const std::string& id, const core::JobProfile& profile);
  // Touch, or TouchPart for a message carrying a HostPart (`part`, null: none); *part_host: the
  // part the message speaks for (invalid for a job registered whole).
  protocol::ProtocolError TouchJob(const protocol::Inbound& in, const std::string& job_id,
                                   const v1::HostPart* part, const std::string& field,
                                   core::NodeId* part_host);

  // ---- host parts (gateway_parts.cc) ----
  struct HeldRegistration;
  std::optional<v1::Envelope> OnRegisterPart(const protocol::Inbound& in);
  // nullopt: the job is not made of parts (handled as a whole job's report).
  std::optional<v1::Envelope> OnPartProfile(const protocol::Inbound& in);
  // A committed part registration: the control loop learns the job or its new placement, the
  // part gets the assignment in force.
  void PartRegistered(const HeldRegistration& h);
  // The part on `host` ended (EndJob): the job loses the part, or is gone with its last one.
  void EndPart(const std::string& id, core::NodeId host, const std::string& reason);
  // A part left the tracker (ended, expired) while its job stays.
  void PartGone(const std::string& id, core::NodeId host, const std::string& reason);
  // The job's parts changed (a report, a part joined or left): its merge is due (MergeDue).
  void Remerge(const std::string& id);
  // Merges the jobs whose merge is due and reports each merge to the control loop: once per job
  // per batch, and a big job (its last merge handled more than kEagerMergeEntries entries) at
  // most every kBigMergeInterval (a timer merges it then). A 1,920-host job of 8 ranks per host
  // costs ~3.2 ms of CPU per merge (bench/host_parts_bench.cc): a storm of its agents' reports
  // costs the loop ~3 %, and its profile lags the reports by at most the interval.
  void MergeDue();
  // The control loop's registration of the job follows the tracker's (a part joined or left).
  void SyncDemand(const JobSession& j);

  const DaemonConfig* config_;
  EventLoop* loop_;
  Metrics* metrics_;
  const TopologyManager* topo_;
  JobTracker* tracker_;
  PartProfiles* parts_;
  Enforcer* enforcer_;
  ControlHost* control_;
  JobJournal* journal_;
  const JobRows* rows_;
  RefusalBook* refusals_;
  Sender client_sender_;
  std::optional<protocol::KeyGrants> grants_;  // Curve only.
  bool committing_ = false;                    // In CommitRegistrations' call of the journal.
  // Pushes caused by the message being handled: (peer, job id) assignments and raw envelopes.
  std::vector<std::pair<std::string, std::string>> deferred_assignments_;
  std::vector<std::pair<std::string, v1::Envelope>> deferred_;
  static constexpr uint64_t kEagerMergeEntries = 4096;  // ~128 hosts of 8 ranks.
  static constexpr core::Duration kBigMergeInterval = core::Duration::Millis(100);
  std::set<std::string> merge_due_;                   // Jobs whose parts changed.
  std::map<std::string, core::Duration> next_merge_;  // Big jobs: no merge before (loop time).
  std::set<std::string> merge_timers_;                // Big jobs with a merge timer armed.
  std::shared_ptr<Gateway*> self_ = std::make_shared<Gateway*>(this);  // For timers.
  // Per job: the NIC names of its last report and their nodes (protocol::ProfileFromProto).
  std::unordered_map<std::string, protocol::PeerNameCache> peer_names_;
  // Registrations accepted in memory, waiting for the group commit (CommitRegistrations).
  struct HeldRegistration {
    std::string peer;
    uint64_t request_id = 0;
    std::string job_id;
    bool known = false;  // A re-registration (nothing to undo on failure).
    size_t placement = 0;
    v1::Envelope reply;
    core::NodeId part_host;  // A host part's registration (invalid: a whole job's).
    PartRegistration part;
  };
  std::vector<HeldRegistration> held_;
  std::vector<JobJournal::JobRow> held_rows_;
  std::vector<StoredPart> held_part_rows_;
  std::set<std::string> held_ids_;
  std::set<std::string> ignored_ports_;  // Telemetry ports already logged as unplaceable.
  std::set<std::string> ignored_nics_;   // Host telemetry NICs already logged as unknown.
  HostProbeCounters host_probe_counters_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_RPC_GATEWAY_H_
