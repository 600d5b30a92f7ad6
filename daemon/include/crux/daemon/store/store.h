// Persistent daemon state behind an interface: the SQLite implementation (WAL, schema version in
// PRAGMA user_version, forward-only migrations) is what cruxd runs; tests open it on temp files.
//
// Tables (schema v5):
//   meta(key, value)                        topology source, epoch, state_id, ...
//   jobs(job_id, tenant, registration, dscp, registered_ms, last_seen_ms, state, owner)
//                                           registration = serialized crux.v1.RegisterJob
//   profiles(job_id, report, updated_ms, planned)   latest serialized crux.v1.ProfileReport per
//                                           job, and the one the planner uses (hysteresis; v4)
//   plan(job_id, level, dscp, epoch, assignment)   applied plan (serialized crux.v1.Assignment)
//   link_state(link, health, capacity_bps, updated_ms)   admin overrides
//   audit(id, ts_ms, epoch, job_id, old_level, new_level, reason)   plan changes
//   job_parts(job_id, host, registration, owner, registered_ms, last_seen_ms, report,
//             updated_ms)                   host parts of multi-host jobs (v5): the part's own
//                                           serialized crux.v1.RegisterJob (its host, HostPart)
//                                           and latest crux.v1.ProfileReport (comms)
//
// Thread-safety: a Store is used from one thread (the daemon's event loop).
#ifndef CRUX_DAEMON_STORE_STORE_H_
#define CRUX_DAEMON_STORE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/link_name.h"

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
  // The profile the planner used (JobTracker hysteresis); empty: same as `profile` (stores
  // written before v4, or a job that never had a significant report).
  std::string planned_profile = {};
};

struct ProfileRow {
  std::string job_id;
  std::string report;   // Serialized crux.v1.ProfileReport: the latest.
  std::string planned;  // The profile the planner uses now; empty: unchanged.
};

struct PlanRow {
  std::string job_id;
  int level = 0;
  uint32_t dscp = 0;
  uint64_t epoch = 0;
  std::string assignment;  // Serialized crux.v1.Assignment.
};

// One host's part of a multi-host job (docs/daemon.md "Multi-host jobs"). The job's row in
// `jobs` holds the union of its parts' placements; the parts are the truth on restore.
struct StoredPart {
  std::string job_id;
  std::string host;          // Topology host name.
  std::string registration;  // Serialized crux.v1.RegisterJob: the part's host only, host_part set.
  std::string owner;         // CURVE key that registered the part ("" without CURVE).
  int64_t registered_ms = 0;
  int64_t last_seen_ms = 0;
  // Serialized crux.v1.ProfileReport (host_part, comms): the part's latest report. Empty on a
  // write: keep the stored one (a registration); empty on a load: none yet.
  std::string report = {};
};

struct PartKey {
  std::string job_id;
  std::string host;
};

struct LinkOverride {
  std::string link;  // "a->b" (one direction).
  int health = 0;    // StoredHealth (the crux.v1.LinkHealth numbers: 1 up, 2 degraded, 3 down).
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

// The stored numbers of link health (equal to the wire enum's, so old files keep their meaning).
int StoredHealth(core::LinkHealth h);
core::Result<core::LinkHealth> HealthFromStored(int stored);

class Store {
 public:
  virtual ~Store() = default;

  virtual core::Status PutMeta(const std::string& key, const std::string& value) = 0;
  virtual core::Result<std::optional<std::string>> GetMeta(const std::string& key) = 0;

  virtual core::Status UpsertJob(const StoredJob& job) = 0;  // Keeps the stored profile.
  // Many jobs at once (cruxd group-commits the registrations that arrive together). The SQLite
  // store writes them in one transaction (all or none); this default calls UpsertJob for each in
  // order and stops at the first failure (earlier rows stay written).
  virtual core::Status UpsertJobs(const std::vector<StoredJob>& jobs) {
    for (const StoredJob& j : jobs) CRUX_RETURN_IF_ERROR(UpsertJob(j));
    return core::Status::Ok();
  }
  // `planned`: the profile the planner now uses (empty: unchanged).
  virtual core::Status PutProfile(const std::string& job_id, const std::string& report,
                                  const std::string& planned, int64_t now_ms) = 0;
  // Many profiles in one transaction, all or none (cruxd batches the per-report writes: one
  // write per report would cap ingestion at SQLite's commit rate).
  virtual core::Status PutProfiles(const std::vector<ProfileRow>& rows, int64_t now_ms) = 0;
  // Deletes the job, its profile, its host parts and its plan row.
  virtual core::Status DeleteJob(const std::string& job_id) = 0;
  virtual core::Result<std::vector<StoredJob>> LoadJobs() = 0;

  // Host parts (schema v5), in one transaction, all or none: upserts `jobs` (like UpsertJobs:
  // the union placement of a job whose parts changed) and `parts` (an empty report keeps the
  // stored one), deletes `removed` parts.
  virtual core::Status PutJobParts(const std::vector<StoredJob>& jobs,
                                   const std::vector<StoredPart>& parts,
                                   const std::vector<PartKey>& removed) = 0;
  // Every stored part, by job id then host.
  virtual core::Result<std::vector<StoredPart>> LoadJobParts() = 0;

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

struct StoreOpenOptions {
  // Start afresh: an existing file (healthy or not) is moved aside to
  // `<path>.set-aside-<unix ms>` (with its -wal/-shm files) and a new state is created.
  bool fresh = false;
  int max_version = -1;     // Tests: stop migrating at this schema version.
  int64_t now_unix_ms = 0;  // For the set-aside name (0: the file is named by the wall clock).
};

// Opens and migrates the state file. A missing file is a first start: the database is created
// under a temporary name, migrated and renamed into place, so a crash mid-creation never leaves
// an empty file behind; it gets a random non-zero `meta.state_id` (kept for the state's life).
// An existing file must be a healthy Crux state (CheckSqliteStore), otherwise nothing is opened
// and the error (kFailedPrecondition) says what is wrong and how to recover: restore a backup, or
// start afresh with StoreOpenOptions::fresh (`cruxd --fresh-state`). A file written by an older
// cruxd without a state id gets one. Errors: kFailedPrecondition as above or when the schema is
// newer than this binary knows; kUnavailable when the file or its directory cannot be opened.
core::Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                     StoreOpenOptions options = {});

// Read-only check of an existing state file (cruxd --check-config and every start): it must not
// be empty, must be an SQLite database with the Crux schema (user_version 1..StoreSchemaVersion()
// and the Crux tables), and must pass `PRAGMA quick_check`. OK when the file does not exist (a
// first start creates it). Never writes.
core::Status CheckSqliteStore(const std::string& path);

// The `meta.state_id` of a store (0 when none: a store created before state ids).
core::Result<uint64_t> LoadStateId(Store& store);

// The schema version stored in the file (PRAGMA user_version).
core::Result<int> SqliteSchemaVersion(const std::string& path);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STORE_STORE_H_
