#include "crux/daemon/job_tracker.h"
#include "crux/protocol/convert.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace crux::daemon {
namespace {

Refusal Ok() { return {}; }
Refusal Refuse(v1::ErrorCode code, std::string msg, std::string reason = "") {
  return {code, std::move(msg), std::move(reason)};
}

// |b - a| > pct% of |a| (a == 0: any change counts).
bool Moved(double a, double b, double pct) {
  if (a == b) return false;
  if (a == 0) return true;
  return std::fabs(b - a) > std::fabs(a) * pct / 100.0;
}

}  // namespace

bool SignificantChange(const v1::ProfileReport& planned, const v1::ProfileReport& next,
                       double threshold_pct) {
  if (threshold_pct <= 0) return true;
  const double t = threshold_pct;
  if (Moved(static_cast<double>(planned.compute_time_ns()),
            static_cast<double>(next.compute_time_ns()), t) ||
      Moved(static_cast<double>(planned.iteration_period_ns()),
            static_cast<double>(next.iteration_period_ns()), t) ||
      Moved(planned.flops_per_iteration(), next.flops_per_iteration(), t) ||
      Moved(static_cast<double>(planned.bytes_per_iteration()),
            static_cast<double>(next.bytes_per_iteration()), t) ||
      Moved(planned.compression_ratio() > 0 ? planned.compression_ratio() : 1.0,
            next.compression_ratio() > 0 ? next.compression_ratio() : 1.0, t) ||
      std::fabs(next.overlap_start() - planned.overlap_start()) > t / 100.0) {
    return true;
  }
  if (planned.peers_size() != next.peers_size()) return true;
  for (int i = 0; i < next.peers_size(); ++i) {
    const v1::PeerBytes& a = planned.peers(i);
    const v1::PeerBytes& b = next.peers(i);
    if (a.local_nic() != b.local_nic() || a.remote_nic() != b.remote_nic() ||
        Moved(static_cast<double>(a.bytes()), static_cast<double>(b.bytes()), t)) {
      return true;
    }
  }
  return false;
}

bool SamePlacement(const v1::RegisterJob& a, const v1::RegisterJob& b) {
  if (a.placement_size() != b.placement_size()) return false;
  for (int i = 0; i < a.placement_size(); ++i) {
    const auto& x = a.placement(i);
    const auto& y = b.placement(i);
    if (x.host() != y.host() || x.gpus() != y.gpus() || x.nics_size() != y.nics_size()) {
      return false;
    }
    for (int n = 0; n < x.nics_size(); ++n) {
      if (x.nics(n).name() != y.nics(n).name()) return false;
    }
  }
  return true;
}

namespace {
core::DscpPool MakePool(std::vector<int>* dscps) {
  auto pool = core::DscpPool::Create(*dscps);
  if (pool.ok()) return *std::move(pool);
  *dscps = {0};
  return *core::DscpPool::Create(*dscps);
}
}  // namespace

JobTracker::JobTracker(const core::Topology* topo, Options options)
    : topo_(topo), options_(std::move(options)), pool_(MakePool(&options_.dscp_pool)) {}

Refusal JobTracker::CheckPlacement(const v1::RegisterJob& r) const {
  std::set<std::string> hosts;
  for (int i = 0; i < r.placement_size(); ++i) {
    const auto& p = r.placement(i);
    const std::string field = "register_job.placement[" + std::to_string(i) + "]";
    auto host = topo_->FindNode(p.host());
    if (!host.ok() || topo_->node(*host).kind != core::NodeKind::kHost) {
      return Refuse(v1::ERROR_CODE_UNKNOWN_HOST,
                    field + ".host: '" + p.host() + "' is not a host of the topology");
    }
    if (!hosts.insert(p.host()).second) {
      return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                    field + ".host: '" + p.host() + "' appears twice in the placement");
    }
    for (int n = 0; n < p.nics_size(); ++n) {
      auto nic = topo_->FindNode(p.nics(n).name());
      if (!nic.ok() || topo_->node(*nic).kind != core::NodeKind::kNic ||
          topo_->node(*nic).host != *host) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, field + ".nics[" + std::to_string(n) +
                                                       "].name: '" + p.nics(n).name() +
                                                       "' is not a NIC of " + p.host());
      }
    }
  }
  for (int i = 0; i < r.qps_size(); ++i) {
    for (const auto& [name, key] : {std::pair{r.qps(i).local_nic(), "local_nic"},
                                    std::pair{r.qps(i).remote_nic(), "remote_nic"}}) {
      auto nic = topo_->FindNode(name);
      if (!nic.ok() || topo_->node(*nic).kind != core::NodeKind::kNic) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, "register_job.qps[" + std::to_string(i) + "]." +
                                                       key + ": '" + name +
                                                       "' is not a NIC of the topology");
      }
    }
  }
  if (!r.pattern().empty() && r.pattern() != "ring_allreduce" && r.pattern() != "all_to_all" &&
      r.pattern() != "pipeline") {
    return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                  "register_job.pattern: must be ring_allreduce, all_to_all or pipeline (got '" +
                      r.pattern() + "')");
  }
  return Ok();
}

Refusal JobTracker::CheckOwner(const JobEntry& j, const std::string& user_id,
                               const std::string& field) const {
  if (!j.user_id.empty() && j.user_id != user_id) {
    return Refuse(
        v1::ERROR_CODE_PERMISSION_DENIED,
        field + ": job '" + j.registration.job_id() + "' was registered by another CURVE key",
        "job_owner");
  }
  return Ok();
}

Refusal JobTracker::CheckSpeaker(JobEntry& j, const std::string& peer, const std::string& user_id,
                                 const std::string& field) {
  if (Refusal bad = CheckOwner(j, user_id, field); Refused(bad)) return bad;
  if (j.peer.empty()) {
    SetPeer(j, peer);  // Restored job: its first message binds the connection.
  } else if (j.peer != peer) {
    return Refuse(v1::ERROR_CODE_PERMISSION_DENIED,
                  field + ": job '" + j.registration.job_id() +
                      "' is bound to another connection (the one that registered it); "
                      "re-register from this connection to move it",
                  "connection");
  }
  return Ok();
}

Refusal JobTracker::CheckQuota(const std::string& peer, const std::string& user_id) const {
  if (options_.max_jobs > 0 && jobs_.size() >= options_.max_jobs) {
    return Refuse(v1::ERROR_CODE_RESOURCE_EXHAUSTED,
                  "register_job: cruxd already has " + std::to_string(jobs_.size()) +
                      " jobs (limits.max_jobs)",
                  "quota");
  }
  if (options_.max_jobs_per_connection > 0 &&
      JobsOfPeer(peer) >= options_.max_jobs_per_connection) {
    return Refuse(v1::ERROR_CODE_RESOURCE_EXHAUSTED,
                  "register_job: this connection already speaks for " +
                      std::to_string(JobsOfPeer(peer)) + " jobs (limits.max_jobs_per_connection)",
                  "quota");
  }
  if (options_.max_jobs_per_key > 0 && !user_id.empty()) {
    auto it = jobs_per_key_.find(user_id);
    const uint32_t n = it == jobs_per_key_.end() ? 0 : it->second;
    if (n >= options_.max_jobs_per_key) {
      return Refuse(v1::ERROR_CODE_RESOURCE_EXHAUSTED,
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

void JobTracker::SetPeer(JobEntry& j, const std::string& peer) {
  if (j.peer == peer) return;
  if (!j.peer.empty()) {
    auto it = jobs_per_peer_.find(j.peer);
    if (it != jobs_per_peer_.end() && --it->second == 0) jobs_per_peer_.erase(it);
  }
  j.peer = peer;
  if (!peer.empty()) ++jobs_per_peer_[peer];
}

void JobTracker::Forget(std::map<std::string, JobEntry>::iterator it) {
  SetPeer(it->second, "");
  if (!it->second.user_id.empty()) {
    auto k = jobs_per_key_.find(it->second.user_id);
    if (k != jobs_per_key_.end() && --k->second == 0) jobs_per_key_.erase(k);
  }
  pool_.Release(it->first);
  jobs_.erase(it);
}

void JobTracker::PlannedStored(const std::string& id) {
  auto it = jobs_.find(id);
  if (it != jobs_.end()) it->second.planned_dirty = false;
}

v1::JobState JobTracker::StateFor(const v1::ProfileReport& p) const {
  return (p.converged() || p.samples() >= options_.profiling_samples) ? v1::JOB_STATE_SCHEDULED
                                                                      : v1::JOB_STATE_PROFILING;
}

Refusal JobTracker::Register(const v1::RegisterJob& r, const std::string& peer,
                             const std::string& user_id, core::Duration now, int64_t unix_ms,
                             bool* already_known) {
  *already_known = false;
  if (Refusal bad = CheckPlacement(r); Refused(bad)) return bad;
  core::Duration lease = options_.default_lease;
  if (r.lease_ms() > 0) {
    lease = std::min(core::Duration::Millis(r.lease_ms()), options_.max_lease);
  }
  auto it = jobs_.find(r.job_id());
  if (it != jobs_.end()) {
    JobEntry& j = it->second;
    if (Refusal bad = CheckOwner(j, user_id, "register_job.job_id"); Refused(bad)) return bad;
    if (!SamePlacement(j.registration, r)) {
      return Refuse(v1::ERROR_CODE_CONFLICT,
                    "register_job.placement: job '" + r.job_id() +
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
  core::Result<int> colour = pool_.Acquire(r.job_id(), 0);
  if (!colour.ok()) {
    return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                  "register_job.job_id: " + std::string(colour.status().message()));
  }
  JobEntry j;
  j.registration = r;
  j.state = v1::JOB_STATE_REGISTERED;
  j.dscp = static_cast<uint32_t>(*colour);
  j.user_id = user_id;
  j.lease = lease;
  j.deadline = now + lease;
  j.registered_ms = unix_ms;
  j.last_seen_ms = unix_ms;
  if (!user_id.empty()) ++jobs_per_key_[user_id];
  SetPeer(jobs_.emplace(r.job_id(), std::move(j)).first->second, peer);
  return Ok();
}

Refusal JobTracker::Report(const v1::ProfileReport& p, const std::string& peer,
                           const std::string& user_id, core::Duration now, int64_t unix_ms,
                           bool* state_changed, bool* plan_changed) {
  *state_changed = false;
  if (plan_changed) *plan_changed = false;
  auto it = jobs_.find(p.job_id());
  if (it == jobs_.end()) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_JOB,
                  "profile_report.job_id: job '" + p.job_id() + "' is not registered");
  }
  JobEntry& j = it->second;
  if (Refusal bad = CheckSpeaker(j, peer, user_id, "profile_report.job_id"); Refused(bad)) {
    return bad;
  }
  // Field names are only built on refusal: the accepted path (every report) allocates nothing.
  auto field = [](int i, const char* key) {
    return "profile_report.peers[" + std::to_string(i) + "]." + key;
  };
  auto on_job_host = [&j](const std::string& host) {
    for (const auto& h : j.registration.placement()) {
      if (h.host() == host) return true;
    }
    return false;
  };
  for (int i = 0; i < p.peers_size(); ++i) {
    const v1::PeerBytes& pb = p.peers(i);
    for (int side = 0; side < 2; ++side) {
      const std::string& name = side == 0 ? pb.local_nic() : pb.remote_nic();
      const char* key = side == 0 ? "local_nic" : "remote_nic";
      auto nic = topo_->FindNode(name);
      if (!nic.ok()) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST,
                      field(i, key) + ": '" + name + "' is not a node of the topology");
      }
      const core::Node& node = topo_->node(*nic);
      if (node.kind != core::NodeKind::kNic && node.kind != core::NodeKind::kHost) {
        return Refuse(v1::ERROR_CODE_UNKNOWN_HOST, field(i, key) + ": '" + name + "' is not a NIC");
      }
      if (!on_job_host(topo_->node(node.host).name)) {
        return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                      field(i, key) + ": '" + name + "' is not on one of the job's hosts");
      }
    }
    if (pb.local_nic() == pb.remote_nic()) {
      return Refuse(v1::ERROR_CODE_INVALID_ARGUMENT,
                    "profile_report.peers[" + std::to_string(i) + "]: local_nic == remote_nic");
    }
  }
  const v1::JobState next = StateFor(p);
  *state_changed = next != j.state;
  j.state = next;
  const bool significant = *state_changed || !j.planned ||
                           SignificantChange(*j.planned, p, options_.replan_threshold_pct);
  if (significant) {
    j.planned = p;
    j.planned_dirty = true;
  }
  if (plan_changed) *plan_changed = significant;
  j.profile = p;
  j.deadline = now + j.lease;
  j.last_seen_ms = unix_ms;
  return Ok();
}

Refusal JobTracker::Heartbeat(const v1::Heartbeat& h, const std::string& peer,
                              const std::string& user_id, core::Duration now, int64_t unix_ms) {
  auto it = jobs_.find(h.job_id());
  if (it == jobs_.end()) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_JOB,
                  "heartbeat.job_id: job '" + h.job_id() + "' is not registered (register again)");
  }
  JobEntry& j = it->second;
  if (Refusal bad = CheckSpeaker(j, peer, user_id, "heartbeat.job_id"); Refused(bad)) return bad;
  j.deadline = now + j.lease;
  j.last_seen_ms = unix_ms;
  j.acked_epoch = std::max(j.acked_epoch, h.applied_epoch());
  return Ok();
}

Refusal JobTracker::End(const v1::EndJob& e, const std::string& peer, const std::string& user_id) {
  auto it = jobs_.find(e.job_id());
  if (it == jobs_.end()) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_JOB,
                  "end_job.job_id: job '" + e.job_id() + "' is not registered");
  }
  if (Refusal bad = CheckSpeaker(it->second, peer, user_id, "end_job.job_id"); Refused(bad)) {
    return bad;
  }
  Forget(it);
  return Ok();
}

Refusal JobTracker::Acked(const v1::Ack& a, const std::string& peer, const std::string& user_id) {
  auto it = jobs_.find(a.job_id());
  if (it == jobs_.end()) {
    return Refuse(v1::ERROR_CODE_UNKNOWN_JOB,
                  "ack.job_id: job '" + a.job_id() + "' is not registered");
  }
  if (Refusal bad = CheckSpeaker(it->second, peer, user_id, "ack.job_id"); Refused(bad)) {
    return bad;
  }
  if (a.ok()) it->second.acked_epoch = std::max(it->second.acked_epoch, a.epoch());
  return Ok();
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

core::Status JobTracker::Restore(const StoredJob& s, core::Duration now, bool* recoloured) {
  *recoloured = false;
  JobEntry j;
  if (!j.registration.ParseFromString(s.registration) || j.registration.job_id() != s.job_id) {
    return core::InternalError("jobs." + s.job_id + ": stored registration does not parse");
  }
  if (Refusal bad = CheckPlacement(j.registration); Refused(bad)) {
    return core::FailedPreconditionError("jobs." + s.job_id +
                                         ": no longer fits the topology: " + bad.message);
  }
  if (!s.profile.empty()) {
    v1::ProfileReport p;
    if (!p.ParseFromString(s.profile)) {
      return core::InternalError("profiles." + s.job_id + ": stored profile does not parse");
    }
    j.profile = p;
    j.planned = p;
    j.state = StateFor(p);
  }
  if (!s.planned_profile.empty()) {
    v1::ProfileReport planned;
    if (!planned.ParseFromString(s.planned_profile)) {
      return core::InternalError("profiles." + s.job_id +
                                 ": stored planned profile does not parse");
    }
    j.planned = std::move(planned);
  }
  if (auto old = jobs_.find(s.job_id); old != jobs_.end()) Forget(old);
  if (core::Status r = pool_.Restore(s.job_id, static_cast<int>(s.dscp), 0); r.ok()) {
    j.dscp = s.dscp;
  } else {
    CRUX_ASSIGN_OR_RETURN(int colour, pool_.Acquire(s.job_id, 0));
    j.dscp = static_cast<uint32_t>(colour);
    *recoloured = true;
  }
  j.user_id = s.owner;
  j.lease = options_.default_lease;
  if (j.registration.lease_ms() > 0) {
    j.lease = std::min(core::Duration::Millis(j.registration.lease_ms()), options_.max_lease);
  }
  j.deadline = now + j.lease;
  j.registered_ms = s.registered_ms;
  j.last_seen_ms = s.last_seen_ms;
  if (!j.user_id.empty()) ++jobs_per_key_[j.user_id];
  jobs_[s.job_id] = std::move(j);
  return core::Status::Ok();
}

StoredJob JobTracker::ToStored(const JobEntry& j) const {
  StoredJob s;
  s.job_id = j.registration.job_id();
  s.tenant = j.registration.tenant();
  s.registration = j.registration.SerializeAsString();
  s.dscp = j.dscp;
  s.registered_ms = j.registered_ms;
  s.last_seen_ms = j.last_seen_ms;
  s.state = j.state;
  s.owner = j.user_id;
  return s;
}

const JobEntry* JobTracker::Find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::map<std::string, int64_t> JobTracker::CountByState() const {
  std::map<std::string, int64_t> out = {{"registered", 0}, {"profiling", 0}, {"scheduled", 0}};
  for (const auto& [id, j] : jobs_) ++out[protocol::JobStateName(j.state)];
  return out;
}

size_t JobTracker::DistinctPeers() const {
  std::set<std::string> peers;
  for (const auto& [id, j] : jobs_) {
    if (!j.peer.empty()) peers.insert(j.peer);
  }
  return peers.size();
}

}  // namespace crux::daemon
