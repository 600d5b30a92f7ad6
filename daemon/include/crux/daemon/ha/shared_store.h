// SharedStore: the Store of an HA leader. It keeps the local SQLite store (every table, as a
// single cruxd has it: history, profiles, the node's durable cache) and mirrors into etcd what
// must survive a takeover, small and bounded, under /crux/<election>/state/:
//
//   meta/<key>        meta values (state_id: one state id for the whole cluster, so clients and
//                     agents keep ordering epochs across leaders)
//   epoch             the last applied epoch
//   jobs/<job id>     per job: registration, tenant, owner key, registered time, DSCP colour and
//                     the *planned* profile (what the planner used; changes only on significant
//                     reports) - at most limits.max_jobs keys of ~0.2-1 KB
//   links/<link>      admin link overrides
//   audit             the last kAuditTail audit rows (one JSON value)
//
// Not mirrored (rebuilt level-triggered): latest profiles (clients report again), the applied
// plan (the new leader plans afresh from the planned profiles and pushes its term), switch state
// (computed from the plan; agents say what they applied in their hellos), sessions and leases.
//
// Fencing: every etcd write is one transaction guarded by
// `create_revision(<leader's election key>) == term`; when the guard fails (this instance was
// deposed) the write fails with kFailedPrecondition and nothing is written locally either
// (etcd first, then SQLite), so a deposed leader's plan is never applied: the StoreWriter's
// failure path keeps it unpushed. Writes larger than etcd's --max-txn-ops are split into
// several guarded transactions (each all or nothing).
//
// Epochs: LoadEpoch() is max(epoch in etcd, term << 32): a new leader's epochs are above every
// epoch of the leaders before it (terms grow), as long as a leader stays below 2^32 epochs.
//
// Thread-safety: like every Store, one thread at a time (loop at start-up, then crux-store).
#ifndef CRUX_DAEMON_HA_SHARED_STORE_H_
#define CRUX_DAEMON_HA_SHARED_STORE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/daemon/ha/etcd.h"
#include "crux/daemon/store/store.h"

namespace crux::daemon::ha {

inline constexpr size_t kAuditTail = 100;

struct SharedStoreOptions {
  std::string prefix;        // "/crux/<election>": state under <prefix>/state/.
  std::string election_key;  // The leader's election key (the guard).
  int64_t term = 0;          // Its create revision.
  // Observers for metrics (may be empty; called on the store's thread): an etcd call failed, and
  // the guard refused a write (this instance was deposed: nothing was written).
  std::function<void(const core::Status&)> on_etcd_error;
  std::function<void()> on_fenced;
};

class SharedStore final : public Store {
 public:
  // Reads the shared state once (jobs, links, epoch, audit) and publishes the cluster's state id
  // (the local store's when etcd has none yet). Errors: etcd unreachable (kUnavailable),
  // deposed (kFailedPrecondition), a term >= 2^32 (kOutOfRange).
  static core::Result<std::unique_ptr<SharedStore>> Open(std::unique_ptr<Store> local,
                                                         std::unique_ptr<Etcd> etcd,
                                                         SharedStoreOptions options);

  core::Status PutMeta(const std::string& key, const std::string& value) override;
  core::Result<std::optional<std::string>> GetMeta(const std::string& key) override;
  core::Status UpsertJob(const StoredJob& job) override;
  core::Status UpsertJobs(const std::vector<StoredJob>& jobs) override;
  core::Status PutProfile(const std::string& job_id, const std::string& report,
                          const std::string& planned, int64_t now_ms) override;
  core::Status PutProfiles(const std::vector<ProfileRow>& rows, int64_t now_ms) override;
  core::Status DeleteJob(const std::string& job_id) override;
  core::Result<std::vector<StoredJob>> LoadJobs() override;
  // Host parts: the jobs' union registrations are mirrored like UpsertJobs; the parts themselves
  // are not (their host agents register them again with whichever instance leads, like
  // sessions), so LoadJobParts is empty and a new leader never restores parts it did not see.
  core::Status PutJobParts(const std::vector<StoredJob>& jobs, const std::vector<StoredPart>& parts,
                           const std::vector<PartKey>& removed) override;
  core::Result<std::vector<StoredPart>> LoadJobParts() override;
  core::Status ApplyPlan(uint64_t epoch, const std::vector<PlanRow>& changed,
                         const std::vector<std::string>& removed,
                         const std::vector<AuditRow>& audit) override;
  core::Result<std::vector<PlanRow>> LoadPlan() override;
  core::Result<uint64_t> LoadEpoch() override;
  core::Status PutLinkOverride(const LinkOverride& o) override;
  core::Status DeleteLinkOverride(const std::string& link) override;
  core::Result<std::vector<LinkOverride>> LoadLinkOverrides() override;
  core::Result<std::vector<AuditRow>> RecentAudit(size_t limit) override;

  Store& local() { return *local_; }

 private:
  SharedStore(std::unique_ptr<Store> local, std::unique_ptr<Etcd> etcd, SharedStoreOptions options);
  core::Status Load();
  // Writes the jobs' rows to etcd (a row without a planned profile keeps the mirrored one).
  core::Status MirrorJobs(const std::vector<StoredJob>& jobs);
  // Runs `ops` in guarded transactions of at most kMaxTxnOps - 1 operations each.
  core::Status Write(const std::vector<TxnOp>& ops);
  std::string Key(const std::string& rest) const { return options_.prefix + "/state/" + rest; }
  TxnOp PutJob(const StoredJob& job);

  std::unique_ptr<Store> local_;
  std::unique_ptr<Etcd> etcd_;
  SharedStoreOptions options_;
  // The shared records as last written (jobs by id), so an upsert keeps the planned profile.
  std::map<std::string, StoredJob> jobs_;
  std::map<std::string, std::string> meta_;
  std::vector<LinkOverride> links_;
  std::vector<AuditRow> audit_;
  uint64_t epoch_ = 0;
};

}  // namespace crux::daemon::ha

#endif  // CRUX_DAEMON_HA_SHARED_STORE_H_
