// JobTracker: the sessions of live jobs - who speaks for each job and for how long. For every
// job: its registration (core::JobDemand, converted once at the gateway), the CURVE key that
// registered it, the connection (ROUTER routing id) it speaks through, its lease, its DSCP colour
// and when it was last heard of. What the job measured and what it is planned as live in the
// control loop (core::ControlLoop), not here.
//
// Binding and quotas (docs/daemon.md "Identities, roles and quotas"): a job speaks through the
// connection that registered it. A report, heartbeat, ack or EndJob for it from another
// connection is PERMISSION_DENIED (reason "connection"); the client re-registers (idempotent) to
// move the job to its new connection. A job restored after a restart has no connection until
// its first message binds one. Under CURVE the job also belongs to the key that registered it
// (reason "job_owner" for any other key). New registrations are refused with RESOURCE_EXHAUSTED
// (reason "quota") beyond max_jobs (all), max_jobs_per_connection and max_jobs_per_key (CURVE
// keys); 0 = no limit. A refusal never changes state.
//
// DSCP colours come from a core::DscpPool: a job keeps its colour for life; when the pool is
// exhausted a new job shares the colour whose best member level is closest to its own (newcomers
// register at level 0); the colour is freed when its last job ends or expires.
//
// Host parts (multi-host jobs, docs/daemon.md "Multi-host jobs"): crux-hostd registers one part
// per host (RegisterPart); the job's placement is the union of its parts' hosts (in topology
// order) and each part has its own connection, key, lease and acked epoch. A part speaks only
// through its own connection (TouchPart; Touch finds the part bound to the connection); a part
// whose lease expires leaves alone (ExpireParts), and the job goes with its last part. All parts
// of a job belong to the key that registered its first part. A whole-job registration and a
// part registration of one job are CONFLICT (except the adoption rule in RegisterPart).
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_STATE_JOB_TRACKER_H_
#define CRUX_DAEMON_STATE_JOB_TRACKER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/core/control/qos.h"
#include "crux/core/model/control_types.h"
#include "crux/core/model/host_parts.h"
#include "crux/daemon/state/refusal.h"

namespace crux::daemon {

// One host's part of a multi-host job.
struct PartSession {
  core::PlacementHost placement;  // The part's host, GPUs (its ranks), NICs.
  core::HostPartInfo info;
  std::string peer;     // ROUTER id that speaks for the part ("" after a restart, until bound).
  std::string user_id;  // CURVE key that registered it ("" without CURVE).
  core::Duration lease;
  core::Duration deadline;  // Loop time at which the part's lease expires.
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
  uint64_t acked_epoch = 0;  // Last epoch the part acked (Ack or Heartbeat).
  // The registration said HostPart.accepts_batches: its pushes may share one AssignmentBatch
  // with the other batching parts of `peer` (issue #28). A restored part is false until its agent
  // registers it again.
  bool accepts_batches = false;
};

struct JobSession {
  core::JobDemand demand;
  uint32_t dscp = 0;
  std::string peer;     // ROUTER id that speaks for the job ("" after a restart, until bound).
  std::string user_id;  // CURVE key that registered it ("" without CURVE).
  core::Duration lease;
  core::Duration deadline;  // Loop time at which the lease expires.
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
  uint64_t acked_epoch = 0;  // Last epoch the client acked.
  // Host parts by host; empty for a job registered whole. With parts, demand.placement is the
  // union of theirs, and `peer`, `lease`, `deadline` and `acked_epoch` are unused (per part).
  std::map<core::NodeId, PartSession> parts = {};

  bool parted() const { return !parts.empty(); }
};

// What RegisterPart did.
struct PartRegistration {
  bool new_job = false;            // The job's first part: the job is new.
  bool new_part = false;           // A host that was not part of the job yet.
  bool already_known = false;      // This part, with this placement, was known (idempotent).
  bool placement_changed = false;  // The job's union placement changed.
};

// A part removed by ExpireParts.
struct ExpiredPart {
  std::string job_id;
  core::NodeId host;
  bool job_gone = false;  // It was the job's last part: the job is removed too.
};

enum class PartRemoval { kNone, kPart, kJob };

class JobTracker {
 public:
  struct Options {
    // DSCP colours (core::DscpPool; fixed for the tracker's life: SetOptions keeps the pool).
    std::vector<int> dscp_pool = core::QosConfig().dscp_pool;
    core::Duration default_lease = core::Duration::Millis(15000);
    core::Duration max_lease = core::Duration::Millis(600000);
    // Quotas (0 = unlimited); see "Binding and quotas" above.
    uint32_t max_jobs = 0;
    uint32_t max_jobs_per_connection = 0;
    uint32_t max_jobs_per_key = 0;
  };
  // REQUIRES: options.dscp_pool valid (DscpPool::Create); an invalid pool falls back to {0}.
  explicit JobTracker(Options options);

  // Everything but dscp_pool (restart-only) takes effect.
  void SetOptions(const Options& o);
  const Options& options() const { return options_; }

  // Registers a new job or re-registers a known one (idempotent: same placement ->
  // *already_known = true, lease renewed, the job moves to `peer`). A different placement is
  // CONFLICT, another CURVE key is PERMISSION_DENIED, a quota is RESOURCE_EXHAUSTED (new jobs
  // only). REQUIRES: `demand` checked against the topology (protocol::DemandFromProto).
  Refusal Register(const core::JobDemand& demand, const std::string& peer,
                   const std::string& user_id, core::Duration now, int64_t unix_ms,
                   bool* already_known);
  // A job message (profile report, heartbeat, ack, end) from `peer` / `user_id`: checks the
  // binding (binding a restored job's first connection) and renews the lease. `field` names the
  // message in refusals ("heartbeat.job_id"). UNKNOWN_JOB for an unknown id.
  Refusal Touch(const std::string& job_id, const std::string& peer, const std::string& user_id,
                const std::string& field, core::Duration now, int64_t unix_ms);
  // Records an acked epoch (after Touch).
  void Acked(const std::string& job_id, uint64_t epoch);
  // Removes a job (after Touch for EndJob; also the undo of a registration that could not be
  // stored). Unknown ids are ignored.
  void Remove(const std::string& job_id);

  // Removes jobs whose lease expired; returns their ids. Jobs made of host parts expire part by
  // part (ExpireParts).
  std::vector<std::string> Expire(core::Duration now);

  // ---- host parts (see the file comment) ----
  // Registers the part of one host: `part` is the job's registration with placement = that host.
  //  * Unknown job: a new job (quotas and colour as Register) made of this part.
  //  * Known job made of parts: same CURVE key as the job (PERMISSION_DENIED "job_owner"), same
  //    tenant and pattern (CONFLICT). A new host joins. A known host with the same placement is
  //    idempotent (*already_known; the part moves to `peer`, lease renewed). A known host with
  //    another placement (its ranks changed) is updated when it comes from the part's own
  //    connection or the part has none (restored); from another connection it is CONFLICT (two
  //    agents claiming one host).
  //  * Known job registered whole: CONFLICT, unless its placement is exactly this one host:
  //    then it is adopted as its first part (a job crux-hostd registered before cruxd merged
  //    parts).
  // REQUIRES: `part` checked against the topology, exactly one placement host.
  Refusal RegisterPart(const core::JobDemand& part, const core::HostPartInfo& info,
                       const std::string& peer, const std::string& user_id, core::Duration now,
                       int64_t unix_ms, PartRegistration* out);
  // A message for the part on `host` (it carries the HostPart): UNKNOWN_JOB for an unknown job
  // or part (the agent re-registers), then key and connection as Touch (binding a restored
  // part's first connection); renews the part's lease. A job registered whole: Touch.
  Refusal TouchPart(const std::string& job_id, core::NodeId host, const std::string& peer,
                    const std::string& user_id, const std::string& field, core::Duration now,
                    int64_t unix_ms);
  // The host of the part of `job_id` bound to `peer` (invalid: none, or a job registered whole).
  core::NodeId PartOf(const std::string& job_id, const std::string& peer) const;
  // Records an epoch the part acked.
  void AckedPart(const std::string& job_id, core::NodeId host, uint64_t epoch);
  // Records whether the part's agent takes AssignmentBatch pushes (its latest registration's
  // HostPart.accepts_batches). Unknown jobs and parts are ignored.
  void SetPartBatches(const std::string& job_id, core::NodeId host, bool accepts);
  // Removes the part on `host` (EndJob of a part; the undo of a part that could not be stored).
  // The job goes with its last part (kJob, as Remove).
  PartRemoval RemovePart(const std::string& job_id, core::NodeId host);
  // Removes the parts whose lease expired (and jobs whose last part it was).
  std::vector<ExpiredPart> ExpireParts(core::Duration now);
  // Restart: after Restore of the job, puts back one of its stored parts (`part`: the part's
  // registration, one placement host; no connection, lease restarted from `now`); the job's
  // placement becomes the union of the restored parts. Unknown job: kNotFound.
  core::Status RestorePart(const core::JobDemand& part, const core::HostPartInfo& info,
                           const std::string& owner, int64_t registered_ms, int64_t last_seen_ms,
                           core::Duration now);
  // The connections the job's assignment goes to: its own, or each bound part's.
  static std::vector<std::string> PeersOf(const JobSession& j);

  // Restart: puts back a stored job (no connection yet, lease restarted from `now`) on the
  // colour it had (DscpPool::Restore, so its running QPs keep matching). A stored colour that is
  // no longer in the pool (the pool was reconfigured) gets a new colour: *recoloured is set and
  // the caller persists the job again.
  core::Status Restore(const core::JobDemand& demand, uint32_t dscp, const std::string& owner,
                       int64_t registered_ms, int64_t last_seen_ms, core::Duration now,
                       bool* recoloured);
  // The job's level in force, for the colour sharing rule.
  void SetLevel(const std::string& id, int level);

  const std::map<std::string, JobSession>& jobs() const { return jobs_; }
  const JobSession* Find(const std::string& id) const;
  size_t DistinctPeers() const { return jobs_per_peer_.size(); }
  // Jobs sharing their DSCP colour with another job (the pool is smaller than the job count).
  uint32_t SharedColours() const { return static_cast<uint32_t>(pool_.SharedJobs()); }
  const core::DscpPool& pool() const { return pool_; }
  // Jobs the peer speaks for (quota accounting).
  uint32_t JobsOfPeer(const std::string& peer) const;

 private:
  Refusal CheckOwner(const JobSession& j, const std::string& user_id,
                     const std::string& field) const;
  Refusal CheckQuota(const std::string& peer, const std::string& user_id) const;
  void SetPeer(JobSession& j, const std::string& peer);
  void SetPartPeer(PartSession& p, const std::string& peer);
  // demand.placement = the parts' placements, by host id.
  static void Reunion(JobSession& j);
  core::Duration LeaseFor(const core::JobDemand& d) const;
  void Forget(std::map<std::string, JobSession>::iterator it);

  Options options_;
  core::DscpPool pool_;
  std::map<std::string, JobSession> jobs_;
  std::map<std::string, uint32_t> jobs_per_peer_;  // Non-empty peers only.
  std::map<std::string, uint32_t> jobs_per_key_;   // Non-empty CURVE keys only.
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STATE_JOB_TRACKER_H_
