// Persistent daemon state behind an interface: the SQLite implementation (WAL, schema version in
// PRAGMA user_version, forward-only migrations) is what cruxd runs; tests open it on temp files.
//
// Tables (schema v3):
//   meta(key, value)                        topology source, epoch, ...
//   jobs(job_id, tenant, registration, dscp, registered_ms, last_seen_ms, state, owner)
//                                           registration = serialized crux.v1.RegisterJob
//   profiles(job_id, report, updated_ms)    latest serialized crux.v1.ProfileReport per job
//   plan(job_id, level, dscp, epoch, assignment)   applied plan (serialized crux.v1.Assignment)
//   link_state(link, health, capacity_bps, updated_ms)   admin overrides
//   audit(id, ts_ms, epoch, job_id, old_level, new_level, reason)   plan changes
//
// Thread-safety: a Store is used from one thread (the daemon's event loop).
#ifndef CRUX_DAEMON_STORE_H_
#define CRUX_DAEMON_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/status.h"

namespace crux::daemon {

struct StoredJob {
  std::string job_id;
  std::string tenant;
  std::string registration;  // Serialized crux.v1.RegisterJob.
  uint32_t dscp = 0;
  int64_t registered_ms = 0;  // Unix ms.
  int64_t last_seen_ms = 0;
  int state = 0;        // crux.v1.JobState.
  std::string profile;  // Serialized crux.v1.ProfileReport; empty: none.
  std::string owner;    // CURVE public key (Z85) that registered it; "" without CURVE.
};

struct PlanRow {
  std::string job_id;
  int level = 0;
  uint32_t dscp = 0;
  uint64_t epoch = 0;
  std::string assignment;  // Serialized crux.v1.Assignment.
};

struct LinkOverride {
  std::string link;  // "a->b" (one direction).
  int health = 0;    // crux.v1.LinkHealth.
  double capacity_bps = 0;
  int64_t updated_ms = 0;
};

struct AuditRow {
  int64_t ts_ms = 0;
  uint64_t epoch = 0;
  std::string job_id;
  int old_level = -1;  // -1: none (new job / removed job).
  int new_level = -1;
  std::string reason;
};

class Store {
 public:
  virtual ~Store() = default;

  virtual core::Status PutMeta(const std::string& key, const std::string& value) = 0;
  virtual core::Result<std::optional<std::string>> GetMeta(const std::string& key) = 0;

  virtual core::Status UpsertJob(const StoredJob& job) = 0;  // Keeps the stored profile.
  virtual core::Status PutProfile(const std::string& job_id, const std::string& report,
                                  int64_t now_ms) = 0;
  // Many profiles (job id, serialized report) in one transaction (cruxd batches the per-report
  // writes: one write per report would cap ingestion at SQLite's commit rate).
  virtual core::Status PutProfiles(const std::vector<std::pair<std::string, std::string>>& reports,
                                   int64_t now_ms) = 0;
  // Deletes the job, its profile and its plan row.
  virtual core::Status DeleteJob(const std::string& job_id) = 0;
  virtual core::Result<std::vector<StoredJob>> LoadJobs() = 0;

  // One transaction: upserts `changed`, deletes `removed`, appends `audit`, stores the epoch.
  virtual core::Status ApplyPlan(uint64_t epoch, const std::vector<PlanRow>& changed,
                                 const std::vector<std::string>& removed,
                                 const std::vector<AuditRow>& audit) = 0;
  virtual core::Result<std::vector<PlanRow>> LoadPlan() = 0;
  virtual core::Result<uint64_t> LoadEpoch() = 0;  // 0 when none.

  virtual core::Status PutLinkOverride(const LinkOverride& o) = 0;
  virtual core::Status DeleteLinkOverride(const std::string& link) = 0;
  virtual core::Result<std::vector<LinkOverride>> LoadLinkOverrides() = 0;

  virtual core::Result<std::vector<AuditRow>> RecentAudit(size_t limit) = 0;
};

// The migrations, in order; migration i brings the schema from version i to i + 1.
const std::vector<std::string>& StoreMigrations();
inline int StoreSchemaVersion() { return static_cast<int>(StoreMigrations().size()); }

// Opens (creating the file and parent directory when missing) and migrates. Errors:
// kFailedPrecondition when the file's schema is newer than this binary knows, kUnavailable when
// the file cannot be opened. `max_version` (tests) stops migrating early.
core::Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, int max_version = -1);

// The schema version stored in the file (PRAGMA user_version).
core::Result<int> SqliteSchemaVersion(const std::string& path);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STORE_H_
