// Gateway: the host parts of multi-host jobs (docs/daemon.md "Multi-host jobs"). crux-hostd
// registers, reports, keeps alive and ends one host's part of a job over its own connection; the
// job is the union of its parts, its profile the merge of their reports.
#include <spdlog/spdlog.h>

#include <set>
#include <utility>

#include "crux/daemon/rpc/gateway.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"

namespace crux::daemon {

std::optional<v1::Envelope> Gateway::OnRegisterPart(const protocol::Inbound& in) {
  const v1::RegisterJob& r = in.msg.register_job();
  const core::Topology& topo = topo_->nominal();
  core::JobDemand demand;
  if (protocol::ProtocolError bad = protocol::DemandFromProto(r, topo, &demand);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  // Validation (validate.cc) made the placement the part's one host.
  PartRegistration pr;
  Refusal bad = tracker_->RegisterPart(demand, protocol::HostPartInfoFromProto(r.host_part()),
                                       in.peer, in.user_id, loop_->Now(), loop_->UnixMs(), &pr);
  if (Refused(bad)) return Refuse("client", in.msg.request_id(), bad);
  const core::NodeId host = demand.placement.front().host;
  tracker_->SetPartBatches(r.job_id(), host, r.host_part().accepts_batches());
  const JobSession& j = *tracker_->Find(r.job_id());
  const PartSession& part = j.parts.at(host);
  HeldRegistration h;
  h.peer = in.peer;
  h.request_id = in.msg.request_id();
  h.job_id = r.job_id();
  h.known = !pr.new_job;
  h.placement = j.demand.placement.size();
  h.part_host = host;
  h.part = pr;
  h.reply = protocol::NewEnvelope(in.msg.request_id());
  v1::RegisterJobReply* rr = h.reply.mutable_register_job_reply();
  rr->set_job_id(r.job_id());
  rr->set_lease_ms(static_cast<uint64_t>(part.lease.nanos() / 1000000));
  rr->set_already_known(pr.already_known);
  rr->set_dscp(j.dscp);
  rr->set_merges_host_parts(true);
  held_rows_.push_back(rows_->JobOf(j));
  held_part_rows_.push_back(rows_->PartOf(j, host));
  held_ids_.insert(h.job_id);
  held_.push_back(std::move(h));
  return std::nullopt;  // Answered by CommitRegistrations.
}

void Gateway::PartRegistered(const HeldRegistration& h) {
  const JobSession* j = tracker_->Find(h.job_id);
  if (j == nullptr || !j->parts.count(h.part_host)) return;  // Gone meanwhile.
  const std::string& host = topo_->nominal().node(h.part_host).name;
  const PartSession& part = j->parts.at(h.part_host);
  if (h.part.new_job) {
    control_->AddJob(j->demand, j->dscp);
    spdlog::info("job {} registered by its part on {} ({} ranks, {} hosts expected; dscp {})",
                 h.job_id, host, part.info.local_ranks, part.info.hosts_expected, j->dscp);
  } else {
    // Also after a retried registration whose first store write failed: the loop follows the
    // tracker.
    SyncDemand(*j);
    if (h.part.new_part) {
      spdlog::info("job {}: part on {} joined ({} ranks; {} of {} hosts)", h.job_id, host,
                   part.info.local_ranks, j->parts.size(), part.info.hosts_expected);
    }
    if (h.part.placement_changed) Remerge(h.job_id);
  }
  // Every part gets the assignment in force at once: a plan that does not change it (a job with
  // no flows yet) pushes nothing.
  DeferAssignment(h.peer, h.job_id);
}

std::optional<v1::Envelope> Gateway::OnPartProfile(const protocol::Inbound& in) {
  const v1::ProfileReport& p = in.msg.profile_report();
  const JobSession* known = tracker_->Find(p.job_id());
  if (known == nullptr || !known->parted()) return std::nullopt;
  core::NodeId host;
  if (protocol::ProtocolError bad =
          TouchJob(in, p.job_id(), &p.host_part(), "profile_report.job_id", &host);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  const JobSession& j = *tracker_->Find(p.job_id());
  core::HostPartReport report;
  if (protocol::ProtocolError bad =
          protocol::PartReportFromProto(p, topo_->nominal(), j.demand, host, &report);
      protocol::Failed(bad)) {
    return Refuse("client", in.msg.request_id(), bad);
  }
  parts_->Set(p.job_id(), host, std::move(report), loop_->UnixMs());
  journal_->PartReported(p.job_id(), host);
  Remerge(p.job_id());
  return protocol::MakeAck(in.msg.request_id(), p.job_id());
}

void Gateway::Remerge(const std::string& id) { merge_due_.insert(id); }

void Gateway::MergeDue() {
  const core::Duration now = loop_->Now();
  for (const std::string& id : std::exchange(merge_due_, {})) {
    const JobSession* j = tracker_->Find(id);
    if (j == nullptr || !j->parted()) continue;
    auto next = next_merge_.find(id);
    if (next != next_merge_.end() && now < next->second) {
      if (merge_timers_.insert(id).second) {
        loop_->RunAfter(next->second - now, [self = self_, id] {
          Gateway* g = *self;
          if (g == nullptr) return;
          g->merge_timers_.erase(id);
          g->merge_due_.insert(id);
          g->MergeDue();
        });
      }
      continue;
    }
    core::HostPartMerge m = parts_->Merge(*j, topo_->nominal());
    if (m.stats.entries > kEagerMergeEntries) {
      next_merge_[id] = now + kBigMergeInterval;
    } else {
      next_merge_.erase(id);
    }
    if (m.profile) Reported(id, *m.profile);
  }
}

void Gateway::SyncDemand(const JobSession& j) {
  const core::LoopJob* lj = control_->loop().Find(j.demand.id);
  if (lj != nullptr && !(lj->demand == j.demand)) {
    peer_names_.erase(j.demand.id);
    control_->UpdateDemand(j.demand);
  }
}

void Gateway::EndPart(const std::string& id, core::NodeId host, const std::string& reason) {
  switch (tracker_->RemovePart(id, host)) {
    case PartRemoval::kJob:
      JobGone(id, reason + " (its last part, on " + topo_->nominal().node(host).name + ")");
      return;
    case PartRemoval::kPart:
      PartGone(id, host, reason);
      return;
    case PartRemoval::kNone:
      return;
  }
}

void Gateway::PartsExpired(const std::vector<ExpiredPart>& parts) {
  std::set<std::string> gone;
  for (const ExpiredPart& p : parts) {
    if (!p.job_gone) {
      PartGone(p.job_id, p.host, "lease expired");
    } else if (gone.insert(p.job_id).second) {
      JobGone(p.job_id, "lease expired (every part)");
    }
  }
  MergeDue();
}

void Gateway::PartGone(const std::string& id, core::NodeId host, const std::string& reason) {
  parts_->Erase(id, host);
  if (const JobSession* j = tracker_->Find(id)) {
    spdlog::info("job {}: part on {} left ({}); {} parts remain", id,
                 topo_->nominal().node(host).name, reason, j->parts.size());
    SyncDemand(*j);
    Remerge(id);
  }
  journal_->PartGone(id, host);  // With the job's row, its placement now.
}

}  // namespace crux::daemon
