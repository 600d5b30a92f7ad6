// Daemon's start-up read of the store, table by table: the meta rows (topology check, state id,
// epoch), the admin link pins, the jobs with their host parts and profiles, then the applied
// plan. Every blob is decoded through the StoreCodec. What does not fit the topology is kept in
// the store and not served (a wrong topology file given once must not lose state for good: it
// comes back with the right topology).
#include <spdlog/spdlog.h>

#include <map>
#include <utility>

#include "crux/daemon/app/daemon.h"
#include "crux/daemon/store/store_codec.h"

namespace crux::daemon {

core::Status Daemon::Restore() {
  CRUX_ASSIGN_OR_RETURN(const uint64_t epoch, RestoreMeta());
  CRUX_ASSIGN_OR_RETURN(const size_t links, RestoreLinks());
  CRUX_ASSIGN_OR_RETURN(const size_t stored_jobs, RestoreJobs());
  CRUX_ASSIGN_OR_RETURN(const size_t restored, RestorePlan(epoch));
  if (stored_jobs > 0 || epoch > 0) {
    spdlog::info("restored {} jobs, {} applied assignments, {} link overrides, epoch {}",
                 tracker_.jobs().size(), restored, links, epoch);
  }
  if (quarantined_jobs_ > 0) {
    spdlog::error(
        "{} stored jobs do not fit topology {} and are not served; they stay in the state file "
        "and are restored by a start with a topology they fit (check the `topology` key)",
        quarantined_jobs_, topo_.source());
  }
  applier_.PublishApplied();
  if (metrics_) metrics_->SetEpoch(epoch);
  return core::Status::Ok();
}

core::Result<uint64_t> Daemon::RestoreMeta() {
  Store& store = *store_;
  CRUX_ASSIGN_OR_RETURN(auto previous, store.GetMeta("topology_source"));
  if (previous && *previous != topo_.source()) {
    spdlog::warn("topology changed since the last run ('{}' -> '{}'); stored jobs are re-checked",
                 *previous, topo_.source());
  }
  CRUX_RETURN_IF_ERROR(store.PutMeta("topology_source", topo_.source()));
  CRUX_ASSIGN_OR_RETURN(const uint64_t state_id, LoadStateId(store));
  enforcer_.SetStateId(state_id);
  return store.LoadEpoch();
}

core::Result<size_t> Daemon::RestoreLinks() {
  CRUX_ASSIGN_OR_RETURN(std::vector<LinkOverride> links, store_->LoadLinkOverrides());
  for (const LinkOverride& stored : links) {
    const LinkOverride o = faults_.Floored(stored);
    if (core::Status s = topo_.Restore(o); !s.ok()) {
      spdlog::error("stored link state not applied (kept in the state file): {}", s.ToString());
      continue;
    }
    faults_.RestoreAdmin(o);
  }
  return links.size();
}

core::Result<size_t> Daemon::RestoreJobs() {
  CRUX_ASSIGN_OR_RETURN(std::vector<StoredJob> jobs, store_->LoadJobs());
  CRUX_ASSIGN_OR_RETURN(std::vector<StoredPart> stored_parts, store_->LoadJobParts());
  std::map<std::string, std::vector<StoredPart>> parts_of;
  for (StoredPart& p : stored_parts) parts_of[p.job_id].push_back(std::move(p));
  for (const StoredJob& row : jobs) {
    auto parts = parts_of.find(row.job_id);
    CRUX_RETURN_IF_ERROR(RestoreJob(row, parts == parts_of.end() ? nullptr : &parts->second));
  }
  return jobs.size();
}

core::Status Daemon::RestoreJob(const StoredJob& row, const std::vector<StoredPart>* parts) {
  const StoreCodec codec(topo_.nominal());
  core::Result<core::JobDemand> demand = codec.DecodeRegistration(row);
  if (!demand.ok()) {
    ++quarantined_jobs_;
    spdlog::error("stored job {} not restored (kept in the state file, quarantined): {}",
                  row.job_id, demand.status().message());
    return core::Status::Ok();
  }
  bool recoloured = false;
  if (core::Status s = tracker_.Restore(*demand, row.dscp, row.owner, row.registered_ms,
                                        row.last_seen_ms, loop_->Now(), &recoloured);
      !s.ok()) {
    ++quarantined_jobs_;
    spdlog::error("stored job {} not restored (kept in the state file): {}", row.job_id,
                  s.ToString());
    return core::Status::Ok();
  }
  const JobSession& session = *tracker_.Find(row.job_id);
  if (parts != nullptr) {
    RestoreParts(*parts);
    *demand = session.demand;  // The union of the restored parts.
  }
  // A profile that does not decode is dropped: the job reports again.
  auto profile = [&](const std::string& blob, const char* what) {
    std::optional<core::JobProfile> out;
    if (blob.empty()) return out;
    core::Result<core::JobProfile> p = codec.DecodeProfile(blob, *demand);
    if (p.ok()) {
      out = *std::move(p);
    } else {
      spdlog::error("job {}: stored {} profile {}; dropped", row.job_id, what,
                    p.status().message());
    }
    return out;
  };
  std::optional<core::JobProfile> latest = profile(row.profile, "latest");
  std::optional<core::JobProfile> planned = profile(row.planned_profile, "planned");
  control_.RestoreJob(*demand, session.dscp, std::move(latest), std::move(planned));
  if (recoloured) {
    spdlog::warn("job {}: stored DSCP {} is not in qos.dscp_pool any more; new colour {}",
                 row.job_id, row.dscp, session.dscp);
    StoredJob again = row;
    again.dscp = session.dscp;
    CRUX_RETURN_IF_ERROR(store_->UpsertJob(again));
  }
  return core::Status::Ok();
}

void Daemon::RestoreParts(const std::vector<StoredPart>& rows) {
  const core::Topology& topo = topo_.nominal();
  const StoreCodec codec(topo);
  const core::Duration now = loop_->Now();
  std::vector<const StoredPart*> restored;
  for (const StoredPart& p : rows) {
    core::Result<StoreCodec::DecodedPart> part = codec.DecodePartRegistration(p);
    core::Status s = part.ok() ? tracker_.RestorePart(part->demand, part->info, p.owner,
                                                      p.registered_ms, p.last_seen_ms, now)
                               : part.status();
    if (!s.ok()) {
      spdlog::error("job {}: stored part on {} not restored (kept in the state file): {}", p.job_id,
                    p.host, s.ToString());
      continue;
    }
    restored.push_back(&p);
  }
  // Reports after every part, against the union placement.
  const JobSession* j = rows.empty() ? nullptr : tracker_.Find(rows.front().job_id);
  if (j == nullptr || !j->parted()) return;
  for (const StoredPart* p : restored) {
    if (p->report.empty()) continue;
    const core::NodeId host = *topo.FindNode(p->host);
    core::Result<core::HostPartReport> report = codec.DecodePartReport(p->report, j->demand, host);
    if (!report.ok()) {
      spdlog::error("job {}: stored report of the part on {} dropped: {}", p->job_id, p->host,
                    report.status().message());
      continue;
    }
    parts_.Set(p->job_id, host, *std::move(report), 0);
  }
  (void)parts_.Merge(*j, topo);  // The statistics for cruxctl; the loop gets the stored
                                 // merged profiles.
}

core::Result<size_t> Daemon::RestorePlan(uint64_t epoch) {
  CRUX_ASSIGN_OR_RETURN(std::vector<PlanRow> plan, store_->LoadPlan());
  const StoreCodec codec(topo_.nominal());
  core::AppliedPlan applied;
  for (const PlanRow& r : plan) {
    if (!tracker_.Find(r.job_id)) continue;  // Not restored (quarantined): not served.
    core::Result<core::AppliedAssignment> a = codec.DecodeAssignment(r.assignment);
    if (!a.ok()) {
      spdlog::warn("job {}: stored assignment {}; re-planned", r.job_id, a.status().message());
      continue;
    }
    tracker_.SetLevel(r.job_id, a->assignment.level);
    applied[r.job_id] = std::make_shared<const core::AppliedAssignment>(*std::move(a));
  }
  const size_t restored = applied.size();
  control_.RestoreApplied(std::move(applied), epoch);
  return restored;
}

}  // namespace crux::daemon
