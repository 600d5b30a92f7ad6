// JobTracker: the job/demand module. Knows every live job: its registration (placement), latest
// profile, lifecycle state, lease, DSCP colour and the peer that speaks for it.
//
// Lifecycle: REGISTERED (no profile yet) -> PROFILING (profile not converged) -> SCHEDULED
// (profile converged: `converged` set by the client, or `samples` >= profiling_samples) -> gone
// (lease expired or EndJob; the entry is removed). REGISTERED and PROFILING jobs get the
// temporary top level from the planner runner.
//
// Hysteresis: `planned` is the profile the planner uses. A report replaces it only when it is
// significant for planning: the lifecycle state moves, the job had no planned profile, the
// set of peers changes, or compute time / period / W_j / total or per-peer bytes / compression
// move by more than `replan_threshold_pct` percent of the planned value (overlap_start: by more
// than threshold_pct / 100 absolute). Below the threshold the report still renews the lease and
// becomes the latest `profile` (shown by cruxctl, persisted), but triggers no re-plan, so
// measurement jitter does not swap near-equal jobs' levels. 0 = every report counts.
//
// Requests are checked against the topology here (names exist and are the right kind):
// refusals carry the wire code (UNKNOWN_HOST, UNKNOWN_JOB, CONFLICT, PERMISSION_DENIED,
// INVALID_ARGUMENT) and a message naming the field. A refusal never changes state.
//
// DSCP colours come from a core::DscpPool: a job keeps its colour for life; when the pool is
// exhausted a new job shares the colour whose best member level is closest to its own (newcomers
// register at level 0); the colour is freed when its last job ends or expires.
//
// Binding and quotas (docs/daemon.md "Identities, roles and quotas"): a job speaks through the
// connection (ROUTER routing id) that registered it. A report, heartbeat, ack or EndJob for it
// from another connection is PERMISSION_DENIED (reason "connection"); the client re-registers
// (idempotent) to move the job to its new connection. A job restored after a restart has no
// connection until its first message binds one. Under CURVE the job also belongs to the key that
// registered it (reason "job_owner" for any other key). New registrations are refused with
// RESOURCE_EXHAUSTED (reason "quota") beyond max_jobs (all), max_jobs_per_connection and
// max_jobs_per_key (CURVE keys); 0 = no limit.
//
// Thread-safety: loop thread only. The topology must outlive the tracker.
#ifndef CRUX_DAEMON_JOB_TRACKER_H_
#define CRUX_DAEMON_JOB_TRACKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/qos.h"
#include "crux/core/topology.h"
#include "crux/core/units.h"
#include "crux/daemon/store.h"
#include "crux/protocol/codec.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

struct JobEntry {
  v1::RegisterJob registration;
  std::optional<v1::ProfileReport> profile;  // Latest report.
  std::optional<v1::ProfileReport> planned;  // What the planner uses (see Hysteresis above).
  bool planned_dirty = false;  // `planned` changed since it was last written to the store.
  v1::JobState state = v1::JOB_STATE_REGISTERED;
  uint32_t dscp = 0;
  std::string peer;     // ROUTER id of the last message for the job ("" after a restart).
  std::string user_id;  // CURVE key that registered it ("" without CURVE).
  core::Duration lease;
  core::Duration deadline;  // Loop time at which the lease expires.
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
  uint64_t acked_epoch = 0;  // Last epoch the client acked.
};

// OK when code == ERROR_CODE_UNSPECIFIED.
using Refusal = protocol::ProtocolError;
inline bool Refused(const Refusal& r) { return r.code != v1::ERROR_CODE_UNSPECIFIED; }

class JobTracker {
 public:
  struct Options {
    // DSCP colours (core::DscpPool; fixed for the tracker's life: SetOptions keeps the pool).
    std::vector<int> dscp_pool = core::QosConfig().dscp_pool;
    uint32_t profiling_samples = 20;
    core::Duration default_lease = core::Duration::Millis(15000);
    core::Duration max_lease = core::Duration::Millis(600000);
    // Significance threshold of a report for planning, percent (>= 0; 0 = every report).
    double replan_threshold_pct = 10;
    // Quotas (0 = unlimited); see "Binding and quotas" above.
    uint32_t max_jobs = 0;
    uint32_t max_jobs_per_connection = 0;
    uint32_t max_jobs_per_key = 0;
  };
  // REQUIRES: options.dscp_pool valid (DscpPool::Create); an invalid pool falls back to {0}.
  JobTracker(const core::Topology* topo, Options options);

  // Everything but dscp_pool (restart-only) takes effect.
  void SetOptions(const Options& o) {
    const std::vector<int> pool = options_.dscp_pool;
    options_ = o;
    options_.dscp_pool = pool;
  }
  const Options& options() const { return options_; }

  // Registers or re-registers (idempotent: same placement -> *already_known = true, lease
  // renewed, the job moves to `peer`). A different placement is CONFLICT, another CURVE key is
  // PERMISSION_DENIED, a quota is RESOURCE_EXHAUSTED (new jobs only).
  Refusal Register(const v1::RegisterJob& r, const std::string& peer, const std::string& user_id,
                   core::Duration now, int64_t unix_ms, bool* already_known);
  // Stores the profile and moves the job to PROFILING / SCHEDULED. *state_changed tells whether
  // the lifecycle state moved; *plan_changed (optional) whether the report changed what the
  // planner sees (Hysteresis above; implies nothing when refused). O(peers), no allocation on
  // the accepted path beyond the profile copy.
  Refusal Report(const v1::ProfileReport& p, const std::string& peer, const std::string& user_id,
                 core::Duration now, int64_t unix_ms, bool* state_changed,
                 bool* plan_changed = nullptr);
  Refusal Heartbeat(const v1::Heartbeat& h, const std::string& peer, const std::string& user_id,
                    core::Duration now, int64_t unix_ms);
  Refusal End(const v1::EndJob& e, const std::string& peer, const std::string& user_id);
  // Records an Ack for a pushed assignment.
  Refusal Acked(const v1::Ack& a, const std::string& peer, const std::string& user_id);

  // Removes jobs whose lease expired; returns their ids.
  std::vector<std::string> Expire(core::Duration now);

  // The store now holds the job's planned profile (clears planned_dirty).
  void PlannedStored(const std::string& id);

  // Restart: puts back a stored job (peer unknown, lease restarted from `now`) on the colour it
  // had (DscpPool::Restore, so its running QPs keep matching). A stored colour that is no longer
  // in the pool (the pool was reconfigured) gets a new colour: *recoloured is set and the caller
  // persists the job again.
  core::Status Restore(const StoredJob& s, core::Duration now, bool* recoloured);
  // The job's current plan level (after a plan is applied), for the colour sharing rule.
  void SetLevel(const std::string& id, int level);
  StoredJob ToStored(const JobEntry& j) const;

  const std::map<std::string, JobEntry>& jobs() const { return jobs_; }
  const JobEntry* Find(const std::string& id) const;
  std::map<std::string, int64_t> CountByState() const;  // "registered", "profiling", ...
  size_t DistinctPeers() const;
  // Jobs sharing their DSCP colour with another job (the pool is smaller than the job count).
  uint32_t SharedColours() const { return static_cast<uint32_t>(pool_.SharedJobs()); }
  const core::DscpPool& pool() const { return pool_; }
  // Jobs the peer speaks for (quota accounting).
  uint32_t JobsOfPeer(const std::string& peer) const;

 private:
  Refusal CheckPlacement(const v1::RegisterJob& r) const;
  Refusal CheckOwner(const JobEntry& j, const std::string& user_id, const std::string& field) const;
  // CheckOwner, then the connection binding (binds a restored job's first connection).
  Refusal CheckSpeaker(JobEntry& j, const std::string& peer, const std::string& user_id,
                       const std::string& field);
  Refusal CheckQuota(const std::string& peer, const std::string& user_id) const;
  void SetPeer(JobEntry& j, const std::string& peer);
  void Forget(std::map<std::string, JobEntry>::iterator it);
  v1::JobState StateFor(const v1::ProfileReport& p) const;

  const core::Topology* topo_;
  Options options_;
  core::DscpPool pool_;
  std::map<std::string, JobEntry> jobs_;
  std::map<std::string, uint32_t> jobs_per_peer_;  // Non-empty peers only.
  std::map<std::string, uint32_t> jobs_per_key_;   // Non-empty CURVE keys only.
};

// Whether `next` differs from `planned` by more than `threshold_pct` for planning (see
// Hysteresis in the file comment). Pure.
bool SignificantChange(const v1::ProfileReport& planned, const v1::ProfileReport& next,
                       double threshold_pct);

// Same placement (hosts, GPUs and NICs; order of hosts matters as it orders pipelines).
bool SamePlacement(const v1::RegisterJob& a, const v1::RegisterJob& b);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_JOB_TRACKER_H_
