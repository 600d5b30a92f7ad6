#include "crux/daemon/ha/shared_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "crux/daemon/ha/etcd_gateway.h"

namespace crux::daemon::ha {

using json = nlohmann::json;

namespace {

json JobToJson(const StoredJob& j) {
  return {{"tenant", j.tenant},
          {"registration", Base64Encode(j.registration)},
          {"dscp", j.dscp},
          {"registered_ms", j.registered_ms},
          {"state", j.state},
          {"owner", j.owner},
          {"planned", Base64Encode(j.planned_profile)}};
}

core::Result<StoredJob> JobFromJson(const std::string& id, const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return core::InternalError("shared job " + id + ": not a JSON object");
  StoredJob out;
  out.job_id = id;
  try {
    out.tenant = j.value("tenant", std::string());
    CRUX_ASSIGN_OR_RETURN(out.registration, Base64Decode(j.value("registration", std::string())));
    out.dscp = j.value("dscp", 0u);
    out.registered_ms = j.value("registered_ms", int64_t{0});
    out.last_seen_ms = out.registered_ms;
    out.state = j.value("state", 0);
    out.owner = j.value("owner", std::string());
    CRUX_ASSIGN_OR_RETURN(out.planned_profile, Base64Decode(j.value("planned", std::string())));
  } catch (const json::exception& e) {
    return core::InternalError("shared job " + id + ": " + e.what());
  }
  out.profile = out.planned_profile;
  return out;
}

json LinkToJson(const LinkOverride& o) {
  return {{"health", o.health}, {"capacity_bps", o.capacity_bps}, {"updated_ms", o.updated_ms}};
}

json AuditToJson(const AuditRow& a) {
  return {{"ts_ms", a.ts_ms},         {"epoch", a.epoch},         {"job_id", a.job_id},
          {"old_level", a.old_level}, {"new_level", a.new_level}, {"reason", a.reason}};
}

}  // namespace

SharedStore::SharedStore(std::unique_ptr<Store> local, std::unique_ptr<Etcd> etcd,
                         SharedStoreOptions options)
    : local_(std::move(local)), etcd_(std::move(etcd)), options_(std::move(options)) {}

core::Result<std::unique_ptr<SharedStore>> SharedStore::Open(std::unique_ptr<Store> local,
                                                             std::unique_ptr<Etcd> etcd,
                                                             SharedStoreOptions options) {
  if (options.term <= 0 || options.term >= (int64_t{1} << 32)) {
    return core::OutOfRangeError("ha: term " + std::to_string(options.term) +
                                 " does not fit the high 32 bits of an epoch");
  }
  std::unique_ptr<SharedStore> s(
      new SharedStore(std::move(local), std::move(etcd), std::move(options)));
  CRUX_RETURN_IF_ERROR(s->Load());
  return s;
}

core::Status SharedStore::Load() {
  const std::string root = Key("");
  core::Result<RangeResult> listed = etcd_->Range(root, PrefixEnd(root));
  if (!listed.ok() && options_.on_etcd_error) options_.on_etcd_error(listed.status());
  CRUX_ASSIGN_OR_RETURN(RangeResult all, std::move(listed));
  for (const KeyValue& kv : all.kvs) {
    const std::string rest = kv.key.substr(root.size());
    try {
      if (rest.rfind("jobs/", 0) == 0) {
        auto job = JobFromJson(rest.substr(5), kv.value);
        if (!job.ok()) {
          spdlog::error("ha: {} (skipped)", job.status().ToString());
          continue;
        }
        jobs_[job->job_id] = *std::move(job);
      } else if (rest.rfind("meta/", 0) == 0) {
        meta_[rest.substr(5)] = kv.value;
      } else if (rest.rfind("links/", 0) == 0) {
        json j = json::parse(kv.value);
        links_.push_back({rest.substr(6), j.value("health", 0), j.value("capacity_bps", 0.0),
                          j.value("updated_ms", int64_t{0})});
      } else if (rest == "epoch") {
        epoch_ = std::stoull(kv.value);
      } else if (rest == "audit") {
        for (const json& a : json::parse(kv.value)) {
          audit_.push_back({a.value("ts_ms", int64_t{0}), a.value("epoch", uint64_t{0}),
                            a.value("job_id", std::string()), a.value("old_level", -1),
                            a.value("new_level", -1), a.value("reason", std::string())});
        }
      }
    } catch (const std::exception& e) {
      spdlog::error("ha: shared state key {} does not parse ({}); skipped", kv.key, e.what());
    }
  }
  // One state id for the cluster: the first leader publishes its own.
  if (!meta_.count("state_id")) {
    CRUX_ASSIGN_OR_RETURN(auto local_id, local_->GetMeta("state_id"));
    if (local_id) CRUX_RETURN_IF_ERROR(PutMeta("state_id", *local_id));
  }
  spdlog::info("ha: shared state from etcd: {} jobs, {} link overrides, epoch {}, state id {}",
               jobs_.size(), links_.size(), epoch_,
               meta_.count("state_id") ? meta_["state_id"] : std::string("none"));
  return core::Status::Ok();
}

core::Status SharedStore::Write(const std::vector<TxnOp>& ops) {
  const Compare guard{options_.election_key,
                      Compare::Target::kCreateRevision,
                      Compare::Op::kEqual,
                      options_.term,
                      {}};
  const size_t chunk = kMaxTxnOps - 1;
  for (size_t i = 0; i < ops.size(); i += chunk) {
    std::vector<TxnOp> part(
        ops.begin() + static_cast<std::ptrdiff_t>(i),
        ops.begin() + static_cast<std::ptrdiff_t>(std::min(ops.size(), i + chunk)));
    core::Result<TxnResult> done = etcd_->Txn({guard}, part, {});
    if (!done.ok() && options_.on_etcd_error) options_.on_etcd_error(done.status());
    CRUX_ASSIGN_OR_RETURN(TxnResult r, std::move(done));
    if (!r.succeeded) {
      if (options_.on_fenced) options_.on_fenced();
      return core::FailedPreconditionError(
          "ha: deposed: the election key " + options_.election_key + " of term " +
          std::to_string(options_.term) + " is gone; nothing written");
    }
  }
  return core::Status::Ok();
}

TxnOp SharedStore::PutJob(const StoredJob& job) {
  return TxnOp::Put(Key("jobs/" + job.job_id), JobToJson(job).dump());
}

core::Status SharedStore::PutMeta(const std::string& key, const std::string& value) {
  CRUX_RETURN_IF_ERROR(Write({TxnOp::Put(Key("meta/" + key), value)}));
  meta_[key] = value;
  return local_->PutMeta(key, value);
}

core::Result<std::optional<std::string>> SharedStore::GetMeta(const std::string& key) {
  auto it = meta_.find(key);
  if (it != meta_.end()) return std::optional<std::string>(it->second);
  return local_->GetMeta(key);
}

core::Status SharedStore::UpsertJob(const StoredJob& job) { return UpsertJobs({job}); }

core::Status SharedStore::UpsertJobs(const std::vector<StoredJob>& jobs) {
  CRUX_RETURN_IF_ERROR(MirrorJobs(jobs));
  return local_->UpsertJobs(jobs);
}

core::Status SharedStore::PutJobParts(const std::vector<StoredJob>& jobs,
                                      const std::vector<StoredPart>& parts,
                                      const std::vector<PartKey>& removed) {
  if (!jobs.empty()) CRUX_RETURN_IF_ERROR(MirrorJobs(jobs));
  return local_->PutJobParts(jobs, parts, removed);
}

core::Result<std::vector<StoredPart>> SharedStore::LoadJobParts() {
  return std::vector<StoredPart>{};
}

core::Status SharedStore::MirrorJobs(const std::vector<StoredJob>& jobs) {
  std::vector<TxnOp> ops;
  std::vector<StoredJob> merged;
  ops.reserve(jobs.size());
  for (const StoredJob& j : jobs) {
    StoredJob m = j;
    auto it = jobs_.find(j.job_id);
    if (it != jobs_.end() && m.planned_profile.empty()) {
      m.planned_profile = it->second.planned_profile;  // An upsert keeps the stored profile.
    }
    ops.push_back(PutJob(m));
    merged.push_back(std::move(m));
  }
  CRUX_RETURN_IF_ERROR(Write(ops));
  for (StoredJob& m : merged) jobs_[m.job_id] = std::move(m);
  return core::Status::Ok();
}

core::Status SharedStore::PutProfile(const std::string& job_id, const std::string& report,
                                     const std::string& planned, int64_t now_ms) {
  return PutProfiles({{job_id, report, planned}}, now_ms);
}

core::Status SharedStore::PutProfiles(const std::vector<ProfileRow>& rows, int64_t now_ms) {
  // Only planned profiles are shared (they change on significant reports only).
  std::vector<TxnOp> ops;
  std::vector<std::pair<std::string, std::string>> planned;
  for (const ProfileRow& r : rows) {
    if (r.planned.empty()) continue;
    auto it = jobs_.find(r.job_id);
    if (it == jobs_.end() || it->second.planned_profile == r.planned) continue;
    StoredJob j = it->second;
    j.planned_profile = r.planned;
    ops.push_back(PutJob(j));
    planned.emplace_back(r.job_id, r.planned);
  }
  CRUX_RETURN_IF_ERROR(Write(ops));
  for (auto& [id, p] : planned) jobs_[id].planned_profile = std::move(p);
  return local_->PutProfiles(rows, now_ms);
}

core::Status SharedStore::DeleteJob(const std::string& job_id) {
  CRUX_RETURN_IF_ERROR(Write({TxnOp::Delete(Key("jobs/" + job_id))}));
  jobs_.erase(job_id);
  return local_->DeleteJob(job_id);
}

core::Result<std::vector<StoredJob>> SharedStore::LoadJobs() {
  std::vector<StoredJob> out;
  out.reserve(jobs_.size());
  for (const auto& [id, j] : jobs_) out.push_back(j);
  return out;
}

core::Status SharedStore::ApplyPlan(uint64_t epoch, const std::vector<PlanRow>& changed,
                                    const std::vector<std::string>& removed,
                                    const std::vector<AuditRow>& audit) {
  std::vector<AuditRow> tail = audit_;
  tail.insert(tail.end(), audit.begin(), audit.end());
  if (tail.size() > kAuditTail) {
    tail.erase(tail.begin(), tail.end() - static_cast<std::ptrdiff_t>(kAuditTail));
  }
  json a = json::array();
  for (const AuditRow& r : tail) a.push_back(AuditToJson(r));
  CRUX_RETURN_IF_ERROR(
      Write({TxnOp::Put(Key("epoch"), std::to_string(epoch)), TxnOp::Put(Key("audit"), a.dump())}));
  epoch_ = epoch;
  audit_ = std::move(tail);
  return local_->ApplyPlan(epoch, changed, removed, audit);
}

core::Result<std::vector<PlanRow>> SharedStore::LoadPlan() {
  // A new leader plans afresh (and pushes every assignment with its term): the local plan rows
  // are this node's history, not necessarily the last leader's plan.
  return std::vector<PlanRow>{};
}

core::Result<uint64_t> SharedStore::LoadEpoch() {
  return std::max<uint64_t>(epoch_, static_cast<uint64_t>(options_.term) << 32);
}

core::Status SharedStore::PutLinkOverride(const LinkOverride& o) {
  CRUX_RETURN_IF_ERROR(Write({TxnOp::Put(Key("links/" + o.link), LinkToJson(o).dump())}));
  links_.erase(std::remove_if(links_.begin(), links_.end(),
                              [&](const LinkOverride& l) { return l.link == o.link; }),
               links_.end());
  links_.push_back(o);
  return local_->PutLinkOverride(o);
}

core::Status SharedStore::DeleteLinkOverride(const std::string& link) {
  CRUX_RETURN_IF_ERROR(Write({TxnOp::Delete(Key("links/" + link))}));
  links_.erase(std::remove_if(links_.begin(), links_.end(),
                              [&](const LinkOverride& l) { return l.link == link; }),
               links_.end());
  return local_->DeleteLinkOverride(link);
}

core::Result<std::vector<LinkOverride>> SharedStore::LoadLinkOverrides() { return links_; }

core::Result<std::vector<AuditRow>> SharedStore::RecentAudit(size_t limit) {
  // Newest first, as the SQLite store answers.
  std::vector<AuditRow> out(audit_.rbegin(), audit_.rend());
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace crux::daemon::ha
