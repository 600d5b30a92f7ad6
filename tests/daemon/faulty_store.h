// FaultyStore: a Store wrapper that injects failures (LevelDB EnvWrapper style), so that the
// daemon's failure paths run in tests: the register undo, "re-plan not applied", the switch-only
// epoch failure, the health reporting.
//
// Every call is forwarded to the wrapped store unless a rule says it fails: `fail_all` (every
// write fails while set), `fail_call` (the N-th call, 1-based, across all methods, fails once) or
// `fail_method` (every call of that method name, e.g. "ApplyPlan", fails while set). A failed
// call returns kInternal("injected: <method>") and does not reach the wrapped store. Reads never
// fail unless `fail_reads` is set. `calls_of[method]` counts the calls of each method (failed or
// not), so a test can tell whether a write was attempted at all and whether a retry reached the
// wrapped store.
//
// Thread-safety: single thread (the daemon's loop), like the Store it wraps.
#ifndef CRUX_TESTS_DAEMON_FAULTY_STORE_H_
#define CRUX_TESTS_DAEMON_FAULTY_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crux/daemon/store/store.h"

namespace crux::daemon::testing {

class FaultyStore final : public Store {
 public:
  explicit FaultyStore(Store* base) : base_(base) {}

  bool fail_all = false;
  bool fail_reads = false;
  uint64_t fail_call = 0;   // 0 = none.
  std::string fail_method;  // "" = none.
  uint64_t calls = 0;
  uint64_t failures = 0;
  std::map<std::string, uint64_t> calls_of;  // By method name.

  core::Status PutMeta(const std::string& k, const std::string& v) override {
    if (Fails("PutMeta")) return Injected("PutMeta");
    return base_->PutMeta(k, v);
  }
  core::Result<std::optional<std::string>> GetMeta(const std::string& k) override {
    if (FailsRead("GetMeta")) return Injected("GetMeta");
    return base_->GetMeta(k);
  }
  core::Status UpsertJob(const StoredJob& j) override {
    if (Fails("UpsertJob")) return Injected("UpsertJob");
    return base_->UpsertJob(j);
  }
  core::Status PutProfile(const std::string& id, const std::string& r, const std::string& planned,
                          int64_t now_ms) override {
    if (Fails("PutProfile")) return Injected("PutProfile");
    return base_->PutProfile(id, r, planned, now_ms);
  }
  core::Status PutProfiles(const std::vector<ProfileRow>& r, int64_t now_ms) override {
    if (Fails("PutProfiles")) return Injected("PutProfiles");
    return base_->PutProfiles(r, now_ms);
  }
  core::Status DeleteJob(const std::string& id) override {
    if (Fails("DeleteJob")) return Injected("DeleteJob");
    return base_->DeleteJob(id);
  }
  core::Result<std::vector<StoredJob>> LoadJobs() override {
    if (FailsRead("LoadJobs")) return Injected("LoadJobs");
    return base_->LoadJobs();
  }
  core::Status PutJobParts(const std::vector<StoredJob>& jobs, const std::vector<StoredPart>& parts,
                           const std::vector<PartKey>& removed) override {
    if (Fails("PutJobParts")) return Injected("PutJobParts");
    return base_->PutJobParts(jobs, parts, removed);
  }
  core::Result<std::vector<StoredPart>> LoadJobParts() override {
    if (FailsRead("LoadJobParts")) return Injected("LoadJobParts");
    return base_->LoadJobParts();
  }
  core::Status ApplyPlan(uint64_t epoch, const std::vector<PlanRow>& changed,
                         const std::vector<std::string>& removed,
                         const std::vector<AuditRow>& audit) override {
    if (Fails("ApplyPlan")) return Injected("ApplyPlan");
    return base_->ApplyPlan(epoch, changed, removed, audit);
  }
  core::Result<std::vector<PlanRow>> LoadPlan() override {
    if (FailsRead("LoadPlan")) return Injected("LoadPlan");
    return base_->LoadPlan();
  }
  core::Result<uint64_t> LoadEpoch() override {
    if (FailsRead("LoadEpoch")) return Injected("LoadEpoch");
    return base_->LoadEpoch();
  }
  core::Status PutLinkOverride(const LinkOverride& o) override {
    if (Fails("PutLinkOverride")) return Injected("PutLinkOverride");
    return base_->PutLinkOverride(o);
  }
  core::Status DeleteLinkOverride(const std::string& link) override {
    if (Fails("DeleteLinkOverride")) return Injected("DeleteLinkOverride");
    return base_->DeleteLinkOverride(link);
  }
  core::Result<std::vector<LinkOverride>> LoadLinkOverrides() override {
    if (FailsRead("LoadLinkOverrides")) return Injected("LoadLinkOverrides");
    return base_->LoadLinkOverrides();
  }
  core::Result<std::vector<AuditRow>> RecentAudit(size_t limit) override {
    if (FailsRead("RecentAudit")) return Injected("RecentAudit");
    return base_->RecentAudit(limit);
  }

 private:
  static core::Status Injected(const char* method) {
    return core::InternalError(std::string("injected: ") + method);
  }
  bool Decide(const char* method, bool is_read) {
    ++calls;
    ++calls_of[method];
    bool fail = (fail_call != 0 && calls == fail_call) || fail_method == method ||
                (is_read ? fail_reads : fail_all);
    if (fail) ++failures;
    return fail;
  }
  bool Fails(const char* method) { return Decide(method, false); }
  bool FailsRead(const char* method) { return Decide(method, true); }

  Store* base_;
};

}  // namespace crux::daemon::testing

#endif  // CRUX_TESTS_DAEMON_FAULTY_STORE_H_
