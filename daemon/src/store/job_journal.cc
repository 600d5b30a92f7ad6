#include "crux/daemon/store/job_journal.h"

#include <algorithm>
#include <utility>

#include "crux/daemon/store/store_codec.h"

namespace crux::daemon {

void JobJournal::Reported(const std::string& id, const core::ReportVerdict& verdict) {
  if (verdict.plan_changed) planned_.insert(id);
  if (verdict.phase_changed) phases_.insert(id);
  MarkLatest(id, verdict.plan_changed || verdict.phase_changed);
}

void JobJournal::PartReported(const std::string& id, core::NodeId host) {
  parts_.insert({id, host});
  MarkLatest(id, /*now=*/false);  // The part's row is written with the job's.
}

void JobJournal::MarkLatest(const std::string& id, bool now) {
  if (profiles_.count(id)) return;  // Dirty already: the next flush writes the latest.
  const core::Duration t = events_->Now();
  auto [next, first] = next_latest_.try_emplace(id, t);
  if (!now && !first && t < next->second) {
    deferred_.insert({next->second, id});  // At most once: the key is the job's one due time.
    return;
  }
  if (!first) deferred_.erase({next->second, id});
  next->second = t + latest_interval_;
  profiles_.insert(id);
}

void JobJournal::PromoteDue() {
  const core::Duration t = events_->Now();
  while (!deferred_.empty() && deferred_.begin()->first <= t) {
    const std::string id = deferred_.begin()->second;
    deferred_.erase(deferred_.begin());
    next_latest_[id] = t + latest_interval_;
    profiles_.insert(id);
  }
}

void JobJournal::Forget(const std::string& id) {
  profiles_.erase(id);
  planned_.erase(id);
  phases_.erase(id);
  if (auto it = next_latest_.find(id); it != next_latest_.end()) {
    deferred_.erase({it->second, id});
    next_latest_.erase(it);
  }
}

void JobJournal::FlushAll() {
  for (const auto& [due, id] : std::exchange(deferred_, {})) profiles_.insert(id);
  FlushProfiles();
}

size_t JobJournal::FlushProfiles(size_t max_rows) {
  PromoteDue();
  if (profiles_.empty()) return 0;
  std::vector<std::string> ids;
  ids.reserve(std::min(max_rows, profiles_.size()));
  for (auto it = profiles_.begin(); it != profiles_.end() && ids.size() < max_rows; ++it) {
    ids.push_back(*it);
  }
  Flush(ids);
  return profiles_.size();
}

void JobJournal::FlushPlanned() {
  std::set<std::string> ids = planned_;
  ids.insert(phases_.begin(), phases_.end());
  if (!ids.empty()) Flush(std::vector<std::string>(ids.begin(), ids.end()));
}

void JobJournal::Flush(const std::vector<std::string>& ids) {
  // The loop only copies the core profiles; they are serialized on the store thread (at 10K jobs
  // serializing on the loop held it for ~0.4 s before each plan write).
  struct Pending {
    std::string job_id;
    core::JobProfile report;
    std::optional<core::JobProfile> planned;
  };
  auto pending = std::make_shared<std::vector<Pending>>();
  auto jobs = std::make_shared<std::vector<JobRow>>();
  auto planned = std::make_shared<std::vector<std::string>>();  // Job ids, for a retry.
  auto phases = std::make_shared<std::vector<std::string>>();
  auto parts = std::make_shared<std::vector<StoredPart>>();
  auto part_keys = std::make_shared<std::vector<std::pair<std::string, core::NodeId>>>();
  pending->reserve(ids.size());
  for (const std::string& id : ids) {
    const core::LoopJob* j = loop_->Find(id);
    const bool with_planned = planned_.erase(id) > 0;
    const bool with_phase = phases_.erase(id) > 0;
    profiles_.erase(id);
    if (auto next = next_latest_.find(id); next != next_latest_.end()) {
      deferred_.erase({next->second, id});  // Written now: the profile read below is the latest.
    }
    for (auto it = parts_.lower_bound({id, core::NodeId(0)}); it != parts_.end() && it->first == id;
         it = parts_.erase(it)) {
      if (std::optional<StoredPart> row = rows_->Part(id, it->second)) {
        parts->push_back(*std::move(row));
        part_keys->push_back(*it);
      }
    }
    if (j == nullptr || !j->profile) continue;
    Pending row{id, *j->profile, std::nullopt};
    if (with_planned && j->planned) {
      row.planned = *j->planned;
      planned->push_back(id);
    }
    pending->push_back(std::move(row));
    if (with_phase) {
      if (std::optional<JobRow> job = rows_->Job(id)) {
        jobs->push_back(*std::move(job));
        phases->push_back(id);
      }
    }
  }
  if (pending->empty() && parts->empty()) return;
  auto profiles = std::make_shared<std::vector<std::string>>();
  profiles->reserve(pending->size());
  for (const Pending& p : *pending) profiles->push_back(p.job_id);
  writer_->Submit(
      [pending, jobs, parts, topo = topo_, now = events_->UnixMs()](Store& store) {
        const StoreCodec codec(*topo);
        std::vector<ProfileRow> rows;
        rows.reserve(pending->size());
        for (const Pending& p : *pending) {
          ProfileRow row;
          row.job_id = p.job_id;
          row.report = codec.EncodeProfile(p.job_id, p.report);
          if (p.planned) row.planned = codec.EncodeProfile(p.job_id, *p.planned);
          rows.push_back(std::move(row));
        }
        core::Status s = store.PutProfiles(rows, now);
        if (s.ok() && !jobs->empty()) s = store.UpsertJobs(Encode(*jobs, *topo));
        if (s.ok() && !parts->empty()) s = store.PutJobParts({}, *parts, {});
        return s;
      },
      [this, profiles, planned, phases, part_keys](core::Status s) {
        if (health_->Stored(std::move(s), "put_profiles").ok()) return;
        // Marked dirty again (jobs still here), retried by the next flush.
        for (const auto& [id, host] : *part_keys) {
          if (rows_->HasPart(id, host)) {
            parts_.insert({id, host});
            profiles_.insert(id);
          }
        }
        for (const std::string& id : *profiles) {
          if (loop_->Find(id)) profiles_.insert(id);
        }
        for (const std::string& id : *planned) {
          if (loop_->Find(id)) planned_.insert(id);
        }
        for (const std::string& id : *phases) {
          if (loop_->Find(id)) phases_.insert(id);
        }
      });
}

void JobJournal::StoreRegistrations(std::vector<JobRow> jobs, std::vector<StoredPart> parts,
                                    std::function<void(bool stored)> done) {
  auto rows = std::make_shared<const std::vector<JobRow>>(std::move(jobs));
  auto part_rows = std::make_shared<const std::vector<StoredPart>>(std::move(parts));
  writer_->Submit(
      [rows, part_rows, topo = topo_](Store& store) {
        return part_rows->empty() ? store.UpsertJobs(Encode(*rows, *topo))
                                  : store.PutJobParts(Encode(*rows, *topo), *part_rows, {});
      },
      [this, done = std::move(done)](core::Status s) {
        done(health_->Stored(std::move(s), "upsert_job").ok());
      });
}

void JobJournal::Delete(const std::string& id, std::optional<AuditRow> audit) {
  Forget(id);
  parts_.erase(parts_.lower_bound({id, core::NodeId(0)}), parts_.lower_bound({id, core::NodeId()}));
  writer_->Submit(
      [id, audit = std::move(audit)](Store& store) {
        core::Status s = store.DeleteJob(id);
        if (s.ok() && audit) s = store.ApplyPlan(audit->epoch, {}, {id}, {*audit});
        return s;
      },
      [this](core::Status s) { (void)health_->Stored(std::move(s), "delete_job"); });
}

void JobJournal::PartGone(const std::string& id, core::NodeId host) {
  parts_.erase({id, host});
  std::optional<JobRow> row = rows_->Job(id);
  if (!row) return;
  phases_.erase(id);  // Written now, with the part's removal.
  writer_->Submit([row = *std::move(row), key = PartKey{id, topo_->node(host).name}, topo = topo_](
                      Store& store) { return store.PutJobParts(Encode({row}, *topo), {}, {key}); },
                  [this](core::Status s) { (void)health_->Stored(std::move(s), "put_job_parts"); });
}

std::vector<StoredJob> JobJournal::Encode(const std::vector<JobRow>& rows,
                                          const core::Topology& topo) {
  const StoreCodec codec(topo);
  std::vector<StoredJob> out;
  out.reserve(rows.size());
  for (const JobRow& r : rows) {
    out.push_back(r.row);
    out.back().registration = codec.EncodeRegistration(r.demand);
  }
  return out;
}

}  // namespace crux::daemon
