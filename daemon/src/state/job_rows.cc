#include "crux/daemon/state/job_rows.h"

#include "crux/daemon/store/store_codec.h"

namespace crux::daemon {

JobJournal::JobRow JobRows::JobOf(const JobSession& j) const {
  JobJournal::JobRow p;
  StoredJob& s = p.row;
  s.job_id = j.demand.id;
  s.tenant = j.demand.tenant;
  s.dscp = j.dscp;
  s.registered_ms = j.registered_ms;
  s.last_seen_ms = j.last_seen_ms;
  const core::LoopJob* lj = loop_->Find(j.demand.id);
  s.state = StoreCodec::EncodePhase(lj ? lj->phase : core::JobPhase::kRegistered);
  s.owner = j.user_id;
  p.demand = j.demand;
  return p;
}

StoredPart JobRows::PartOf(const JobSession& j, core::NodeId host) const {
  const StoreCodec codec(*topo_);
  const PartSession& p = j.parts.at(host);
  StoredPart s;
  s.job_id = j.demand.id;
  s.host = topo_->node(host).name;
  s.registration = codec.EncodePartRegistration(j.demand, p.placement, p.info);
  s.owner = p.user_id;
  s.registered_ms = p.registered_ms;
  s.last_seen_ms = p.last_seen_ms;
  if (const PartReportEntry* e = parts_->Find(j.demand.id, host)) {
    s.report = codec.EncodePartReport(j.demand.id, host, e->report);
  }
  return s;
}

std::optional<JobJournal::JobRow> JobRows::Job(const std::string& id) const {
  const JobSession* j = tracker_->Find(id);
  if (j == nullptr) return std::nullopt;
  return JobOf(*j);
}

std::optional<StoredPart> JobRows::Part(const std::string& id, core::NodeId host) const {
  if (!HasPart(id, host)) return std::nullopt;
  return PartOf(*tracker_->Find(id), host);
}

bool JobRows::HasPart(const std::string& id, core::NodeId host) const {
  const JobSession* j = tracker_->Find(id);
  return j != nullptr && j->parts.count(host) > 0;
}

}  // namespace crux::daemon
