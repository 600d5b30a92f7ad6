#include "crux/daemon/state/job_tracker.h"

#include <algorithm>
#include <utility>

namespace crux::daemon {
namespace {

Refusal Ok() { return {}; }
Refusal Refuse(RefusalCode code, std::string msg, std::string reason = "") {
  return {code, std::move(msg), std::move(reason)};
}

// limits.max_jobs_per_connection (`limit`, 0: none) for a connection that speaks for `jobs`.
Refusal ConnectionQuota(uint64_t limit, uint64_t jobs) {
  if (limit > 0 && jobs >= limit) {
    return Refuse(RefusalCode::kResourceExhausted,
                  "register_job: this connection already speaks for " + std::to_string(jobs) +
                      " jobs (limits.max_jobs_per_connection)",
                  "quota");
  }
  return Ok();
}

// A job's or part's connection `*slot` becomes `peer`, keeping the jobs counted per connection.
template <typename Counts>
void MovePeer(Counts* per_peer, std::string* slot, const std::string& peer) {
  if (*slot == peer) return;
  if (!slot->empty()) {
    auto it = per_peer->find(*slot);
    if (it != per_peer->end() && --it->second == 0) per_peer->erase(it);
  }
  *slot = peer;
  if (!peer.empty()) ++(*per_peer)[peer];
}

// A restored session (no connection yet) is bound to the connection of its first message
// (`bind`); a bound one speaks only through its own. `who`: "<field>: job 'x'" or the like;
// `again`: how to move it.
template <typename Bind>
Refusal BindConnection(const std::string& bound, const std::string& peer, Bind bind,
                       const std::string& who, const std::string& again) {
  if (bound.empty()) {
    bind();
  } else if (bound != peer) {
    return Refuse(RefusalCode::kPermissionDenied,
                  who + " is bound to another connection (the one that registered it); " + again +
                      " from this connection to move it",
                  "connection");
  }
  return Ok();
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
  if (Refusal bad = ConnectionQuota(options_.max_jobs_per_connection, JobsOfPeer(peer));
      Refused(bad)) {
    return bad;
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
  MovePeer(&jobs_per_peer_, &j.peer, peer);
}

void JobTracker::Forget(std::map<std::string, JobSession>::iterator it) {
  SetPeer(it->second, "");
  for (auto& [host, part] : it->second.parts) SetPartPeer(part, "");
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
  const core::Duration lease = LeaseFor(demand);
  auto it = jobs_.find(demand.id);
  if (it != jobs_.end()) {
    JobSession& j = it->second;
    if (Refusal bad = CheckOwner(j, user_id, "register_job.job_id"); Refused(bad)) return bad;
    if (j.parted()) {
      return Refuse(RefusalCode::kConflict,
                    "register_job.host_part: job '" + demand.id +
                        "' is made of host parts (crux-hostd); a registration of the whole job "
                        "cannot join it (end it first)");
    }
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
  if (j.parted()) {
    const core::NodeId host = PartOf(job_id, peer);
    if (!host.valid()) {
      return Refuse(RefusalCode::kPermissionDenied,
                    field + ": job '" + job_id +
                        "' is made of host parts and this connection speaks for none of them "
                        "(re-register the part from this connection)",
                    "connection");
    }
    return TouchPart(job_id, host, peer, user_id, field, now, unix_ms);
  }
  if (Refusal bad = CheckOwner(j, user_id, field); Refused(bad)) return bad;
  if (Refusal bad = BindConnection(
          j.peer, peer, [&] { SetPeer(j, peer); }, field + ": job '" + job_id + "'", "re-register");
      Refused(bad)) {
    return bad;
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
    if (!it->second.parted() && it->second.deadline <= now) {
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
  j.lease = LeaseFor(demand);
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

// ---- host parts ----

core::Duration JobTracker::LeaseFor(const core::JobDemand& d) const {
  if (d.lease > core::Duration::Zero()) return std::min(d.lease, options_.max_lease);
  return options_.default_lease;
}

void JobTracker::SetPartPeer(PartSession& p, const std::string& peer) {
  MovePeer(&jobs_per_peer_, &p.peer, peer);
}

void JobTracker::Reunion(JobSession& j) {
  j.demand.placement.clear();
  for (const auto& [host, part] : j.parts) j.demand.placement.push_back(part.placement);
}

Refusal JobTracker::RegisterPart(const core::JobDemand& demand, const core::HostPartInfo& info,
                                 const std::string& peer, const std::string& user_id,
                                 core::Duration now, int64_t unix_ms, PartRegistration* out) {
  *out = {};
  if (demand.placement.size() != 1) {
    return Refuse(RefusalCode::kInvalidArgument,
                  "register_job.placement: a host part's placement must be its one host");
  }
  const core::PlacementHost& place = demand.placement.front();
  auto fill = [&](PartSession& p) {
    p.placement = place;
    p.info = info;
    p.user_id = user_id;
    p.lease = LeaseFor(demand);
    p.deadline = now + p.lease;
    p.last_seen_ms = unix_ms;
  };
  auto it = jobs_.find(demand.id);
  if (it == jobs_.end()) {
    // The quotas of a new job, with the part's connection (Register below binds none).
    if (Refusal bad = CheckQuota(peer, user_id); Refused(bad)) return bad;
    bool known = false;
    if (Refusal bad = Register(demand, "", user_id, now, unix_ms, &known); Refused(bad)) {
      return bad;
    }
    JobSession& j = jobs_.at(demand.id);
    PartSession& p = j.parts[place.host];
    fill(p);
    p.registered_ms = unix_ms;
    SetPartPeer(p, peer);
    out->new_job = true;
    out->new_part = true;
    out->placement_changed = true;
    return Ok();
  }
  JobSession& j = it->second;
  if (Refusal bad = CheckOwner(j, user_id, "register_job.job_id"); Refused(bad)) return bad;
  if (!j.parted()) {
    if (!(j.demand.placement == demand.placement)) {
      return Refuse(RefusalCode::kConflict,
                    "register_job.host_part: job '" + demand.id +
                        "' is registered as a whole job (by a client, not by host parts); a "
                        "host part cannot join it (end it first)");
    }
    // The same one host: the job is adopted as its first part (registered by crux-hostd before
    // cruxd merged parts, and restored so).
    SetPeer(j, "");
    PartSession& p = j.parts[place.host];
    fill(p);
    p.registered_ms = j.registered_ms;
    p.acked_epoch = j.acked_epoch;
    SetPartPeer(p, peer);
    j.last_seen_ms = unix_ms;
    out->already_known = true;
    return Ok();
  }
  if (demand.tenant != j.demand.tenant || demand.pattern != j.demand.pattern) {
    return Refuse(RefusalCode::kConflict,
                  "register_job.tenant: the parts of job '" + demand.id +
                      "' disagree on its tenant or pattern (this part: tenant '" + demand.tenant +
                      "', pattern " + std::string(core::TrafficPatternName(demand.pattern)) +
                      "; the job: tenant '" + j.demand.tenant + "', pattern " +
                      std::string(core::TrafficPatternName(j.demand.pattern)) + ")");
  }
  auto p_it = j.parts.find(place.host);
  if (p_it == j.parts.end()) {
    // The connection takes on one more job (max_jobs and max_jobs_per_key count the job once).
    if (Refusal bad = ConnectionQuota(options_.max_jobs_per_connection, JobsOfPeer(peer));
        Refused(bad)) {
      return bad;
    }
    PartSession& p = j.parts[place.host];
    fill(p);
    p.registered_ms = unix_ms;
    SetPartPeer(p, peer);
    Reunion(j);
    j.last_seen_ms = unix_ms;
    out->new_part = true;
    out->placement_changed = true;
    return Ok();
  }
  PartSession& p = p_it->second;
  const bool same = p.placement == place;
  if (!same && !p.peer.empty() && p.peer != peer) {
    return Refuse(RefusalCode::kConflict,
                  "register_job.placement[0]: host part of job '" + demand.id +
                      "' on this host is registered with another placement by another "
                      "connection (two agents for one host?); it keeps its placement until that "
                      "part ends or its lease expires");
  }
  const uint64_t acked = p.acked_epoch;
  const int64_t registered = p.registered_ms;
  fill(p);
  p.registered_ms = registered;
  p.acked_epoch = acked;
  SetPartPeer(p, peer);
  j.last_seen_ms = unix_ms;
  if (same) {
    out->already_known = true;
  } else {
    Reunion(j);
    out->placement_changed = true;
  }
  return Ok();
}

Refusal JobTracker::TouchPart(const std::string& job_id, core::NodeId host, const std::string& peer,
                              const std::string& user_id, const std::string& field,
                              core::Duration now, int64_t unix_ms) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.parted()) {
    return Touch(job_id, peer, user_id, field, now, unix_ms);
  }
  JobSession& j = it->second;
  auto p_it = j.parts.find(host);
  if (p_it == j.parts.end()) {
    return Refuse(RefusalCode::kUnknownJob, field + ": job '" + job_id +
                                                "' has no registered part on this host "
                                                "(register the part again)");
  }
  PartSession& p = p_it->second;
  if (!p.user_id.empty() && p.user_id != user_id) {
    return Refuse(RefusalCode::kPermissionDenied,
                  field + ": this part of job '" + job_id + "' was registered by another CURVE key",
                  "job_owner");
  }
  if (Refusal bad = BindConnection(
          p.peer, peer, [&] { SetPartPeer(p, peer); },
          field + ": this part of job '" + job_id + "'", "re-register the part");
      Refused(bad)) {
    return bad;
  }
  p.deadline = now + p.lease;
  p.last_seen_ms = unix_ms;
  j.last_seen_ms = unix_ms;
  return Ok();
}

core::NodeId JobTracker::PartOf(const std::string& job_id, const std::string& peer) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || peer.empty()) return {};
  for (const auto& [host, part] : it->second.parts) {
    if (part.peer == peer) return host;
  }
  return {};
}

void JobTracker::AckedPart(const std::string& job_id, core::NodeId host, uint64_t epoch) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  auto p = it->second.parts.find(host);
  if (p != it->second.parts.end()) p->second.acked_epoch = std::max(p->second.acked_epoch, epoch);
}

void JobTracker::SetPartBatches(const std::string& job_id, core::NodeId host, bool accepts) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  auto p = it->second.parts.find(host);
  if (p != it->second.parts.end()) p->second.accepts_batches = accepts;
}

PartRemoval JobTracker::RemovePart(const std::string& job_id, core::NodeId host) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return PartRemoval::kNone;
  auto p = it->second.parts.find(host);
  if (p == it->second.parts.end()) return PartRemoval::kNone;
  if (it->second.parts.size() == 1) {
    Forget(it);
    return PartRemoval::kJob;
  }
  SetPartPeer(p->second, "");
  it->second.parts.erase(p);
  Reunion(it->second);
  return PartRemoval::kPart;
}

std::vector<ExpiredPart> JobTracker::ExpireParts(core::Duration now) {
  std::vector<ExpiredPart> gone;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobSession& j = it->second;
    std::vector<core::NodeId> expired;
    for (const auto& [host, part] : j.parts) {
      if (part.deadline <= now) expired.push_back(host);
    }
    if (expired.empty()) {
      ++it;
      continue;
    }
    const bool job_gone = expired.size() == j.parts.size();
    for (core::NodeId host : expired) gone.push_back({it->first, host, job_gone});
    if (job_gone) {
      Forget(it++);
      continue;
    }
    for (core::NodeId host : expired) {
      SetPartPeer(j.parts.at(host), "");
      j.parts.erase(host);
    }
    Reunion(j);
    ++it;
  }
  return gone;
}

core::Status JobTracker::RestorePart(const core::JobDemand& part, const core::HostPartInfo& info,
                                     const std::string& owner, int64_t registered_ms,
                                     int64_t last_seen_ms, core::Duration now) {
  auto it = jobs_.find(part.id);
  if (it == jobs_.end()) {
    return core::NotFoundError("job part: job '" + part.id + "' is not restored");
  }
  if (part.placement.size() != 1) {
    return core::InvalidArgumentError("job part of '" + part.id + "': not one host");
  }
  JobSession& j = it->second;
  SetPeer(j, "");
  PartSession& p = j.parts[part.placement.front().host];
  SetPartPeer(p, "");
  p.placement = part.placement.front();
  p.info = info;
  p.user_id = owner;
  p.lease = LeaseFor(part);
  p.deadline = now + p.lease;
  p.registered_ms = registered_ms;
  p.last_seen_ms = last_seen_ms;
  Reunion(j);
  return core::Status::Ok();
}

std::vector<std::string> JobTracker::PeersOf(const JobSession& j) {
  std::vector<std::string> out;
  if (!j.parted()) {
    if (!j.peer.empty()) out.push_back(j.peer);
    return out;
  }
  for (const auto& [host, part] : j.parts) {
    if (!part.peer.empty()) out.push_back(part.peer);
  }
  return out;
}

}  // namespace crux::daemon
