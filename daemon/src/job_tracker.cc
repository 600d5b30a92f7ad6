#include "crux/daemon/job_tracker.h"

#include <algorithm>
#include <utility>

namespace crux::daemon {
namespace {

Refusal Ok() { return {}; }
Refusal Refuse(RefusalCode code, std::string msg, std::string reason = "") {
  return {code, std::move(msg), std::move(reason)};
}

core::DscpPool MakePool(std::vector<int>* dscps) {
  auto pool = core::DscpPool::Create(*dscps);
  if (pool.ok()) return *std::move(pool);
  *dscps = {0};
  return *core::DscpPool::Create(*dscps);
}

}  // namespace

JobTracker::JobTracker(Options options)
    : options_(std::move(options)), pool_(MakePool(&options_.dscp_pool)) {}

void JobTracker::SetOptions(const Options& o) {
  const std::vector<int> pool = options_.dscp_pool;
  options_ = o;
  options_.dscp_pool = pool;
}

Refusal JobTracker::CheckOwner(const JobSession& j, const std::string& user_id,
                               const std::string& field) const {
  if (!j.user_id.empty() && j.user_id != user_id) {
    return Refuse(RefusalCode::kPermissionDenied,
                  field + ": job '" + j.demand.id + "' was registered by another CURVE key",
                  "job_owner");
  }
  return Ok();
}

Refusal JobTracker::CheckQuota(const std::string& peer, const std::string& user_id) const {
  if (options_.max_jobs > 0 && jobs_.size() >= options_.max_jobs) {
    return Refuse(RefusalCode::kResourceExhausted,
                  "register_job: cruxd already has " + std::to_string(jobs_.size()) +
                      " jobs (limits.max_jobs)",
                  "quota");
  }
  if (options_.max_jobs_per_connection > 0 &&
      JobsOfPeer(peer) >= options_.max_jobs_per_connection) {
    return Refuse(RefusalCode::kResourceExhausted,
                  "register_job: this connection already speaks for " +
                      std::to_string(JobsOfPeer(peer)) + " jobs (limits.max_jobs_per_connection)",
                  "quota");
  }
  if (options_.max_jobs_per_key > 0 && !user_id.empty()) {
    auto it = jobs_per_key_.find(user_id);
    const uint32_t n = it == jobs_per_key_.end() ? 0 : it->second;
    if (n >= options_.max_jobs_per_key) {
      return Refuse(RefusalCode::kResourceExhausted,
                    "register_job: this CURVE key already registered " + std::to_string(n) +
                        " jobs (limits.max_jobs_per_key)",
                    "quota");
    }
  }
  return Ok();
}

uint32_t JobTracker::JobsOfPeer(const std::string& peer) const {
  auto it = jobs_per_peer_.find(peer);
  return it == jobs_per_peer_.end() ? 0 : it->second;
}

void JobTracker::SetPeer(JobSession& j, const std::string& peer) {
  if (j.peer == peer) return;
  if (!j.peer.empty()) {
    auto it = jobs_per_peer_.find(j.peer);
    if (it != jobs_per_peer_.end() && --it->second == 0) jobs_per_peer_.erase(it);
  }
  j.peer = peer;
  if (!peer.empty()) ++jobs_per_peer_[peer];
}

void JobTracker::Forget(std::map<std::string, JobSession>::iterator it) {
  SetPeer(it->second, "");
  if (!it->second.user_id.empty()) {
    auto k = jobs_per_key_.find(it->second.user_id);
    if (k != jobs_per_key_.end() && --k->second == 0) jobs_per_key_.erase(k);
  }
  pool_.Release(it->first);
  jobs_.erase(it);
}

Refusal JobTracker::Register(const core::JobDemand& demand, const std::string& peer,
                             const std::string& user_id, core::Duration now, int64_t unix_ms,
                             bool* already_known) {
  *already_known = false;
  core::Duration lease = options_.default_lease;
  if (demand.lease > core::Duration::Zero()) lease = std::min(demand.lease, options_.max_lease);
  auto it = jobs_.find(demand.id);
  if (it != jobs_.end()) {
    JobSession& j = it->second;
    if (Refusal bad = CheckOwner(j, user_id, "register_job.job_id"); Refused(bad)) return bad;
    if (!(j.demand.placement == demand.placement)) {
      return Refuse(RefusalCode::kConflict,
                    "register_job.placement: job '" + demand.id +
                        "' is already registered with a different placement (end it first)");
    }
    *already_known = true;
    SetPeer(j, peer);
    j.lease = lease;
    j.deadline = now + lease;
    j.last_seen_ms = unix_ms;
    return Ok();
  }
  if (Refusal bad = CheckQuota(peer, user_id); Refused(bad)) return bad;
  // Newcomers sit on the temporary top level 0 until planned.
  core::Result<int> colour = pool_.Acquire(demand.id, 0);
  if (!colour.ok()) {
    return Refuse(RefusalCode::kInvalidArgument,
                  "register_job.job_id: " + std::string(colour.status().message()));
  }
  JobSession j;
  j.demand = demand;
  j.dscp = static_cast<uint32_t>(*colour);
  j.user_id = user_id;
  j.lease = lease;
  j.deadline = now + lease;
  j.registered_ms = unix_ms;
  j.last_seen_ms = unix_ms;
  if (!user_id.empty()) ++jobs_per_key_[user_id];
  SetPeer(jobs_.emplace(demand.id, std::move(j)).first->second, peer);
  return Ok();
}

Refusal JobTracker::Touch(const std::string& job_id, const std::string& peer,
                          const std::string& user_id, const std::string& field, core::Duration now,
                          int64_t unix_ms) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return Refuse(RefusalCode::kUnknownJob,
                  field + ": job '" + job_id + "' is not registered (register again)");
  }
  JobSession& j = it->second;
  if (Refusal bad = CheckOwner(j, user_id, field); Refused(bad)) return bad;
  if (j.peer.empty()) {
    SetPeer(j, peer);  // Restored job: its first message binds the connection.
  } else if (j.peer != peer) {
    return Refuse(RefusalCode::kPermissionDenied,
                  field + ": job '" + job_id +
                      "' is bound to another connection (the one that registered it); "
                      "re-register from this connection to move it",
                  "connection");
  }
  j.deadline = now + j.lease;
  j.last_seen_ms = unix_ms;
  return Ok();
}

void JobTracker::Acked(const std::string& job_id, uint64_t epoch) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) it->second.acked_epoch = std::max(it->second.acked_epoch, epoch);
}

void JobTracker::Remove(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) Forget(it);
}

std::vector<std::string> JobTracker::Expire(core::Duration now) {
  std::vector<std::string> gone;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second.deadline <= now) {
      gone.push_back(it->first);
      Forget(it++);
    } else {
      ++it;
    }
  }
  return gone;
}

void JobTracker::SetLevel(const std::string& id, int level) {
  (void)pool_.SetLevel(id, std::max(level, 0));  // Unknown jobs: nothing to update.
}

core::Status JobTracker::Restore(const core::JobDemand& demand, uint32_t dscp,
                                 const std::string& owner, int64_t registered_ms,
                                 int64_t last_seen_ms, core::Duration now, bool* recoloured) {
  *recoloured = false;
  if (auto old = jobs_.find(demand.id); old != jobs_.end()) Forget(old);
  JobSession j;
  j.demand = demand;
  if (core::Status r = pool_.Restore(demand.id, static_cast<int>(dscp), 0); r.ok()) {
    j.dscp = dscp;
  } else {
    CRUX_ASSIGN_OR_RETURN(int colour, pool_.Acquire(demand.id, 0));
    j.dscp = static_cast<uint32_t>(colour);
    *recoloured = true;
  }
  j.user_id = owner;
  j.lease = options_.default_lease;
  if (demand.lease > core::Duration::Zero()) j.lease = std::min(demand.lease, options_.max_lease);
  j.deadline = now + j.lease;
  j.registered_ms = registered_ms;
  j.last_seen_ms = last_seen_ms;
  if (!j.user_id.empty()) ++jobs_per_key_[j.user_id];
  jobs_[demand.id] = std::move(j);
  return core::Status::Ok();
}

const JobSession* JobTracker::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

}  // namespace crux::daemon
