#include "crux/daemon/store/store.h"

#include <pthread.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "crux/sync/thread_annotations.h"

namespace crux::daemon {
namespace {

using core::Result;
using core::Status;

// RAII statement with positional binds.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return rc_ == SQLITE_OK; }
  Stmt& Text(int i, const std::string& s) {
    sqlite3_bind_text(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Blob(int i, const std::string& s) {
    sqlite3_bind_blob(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Int(int i, int64_t v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  Stmt& Real(int i, double v) {
    sqlite3_bind_double(st_, i, v);
    return *this;
  }
  int Step() { return sqlite3_step(st_); }
  // Ready for the next set of bindings.
  void Reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  std::string ColText(int i) {
    const unsigned char* t = sqlite3_column_text(st_, i);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(st_, i)))
             : std::string();
  }
  std::string ColBlob(int i) {
    const void* b = sqlite3_column_blob(st_, i);
    return b ? std::string(static_cast<const char*>(b),
                           static_cast<size_t>(sqlite3_column_bytes(st_, i)))
             : std::string();
  }
  int64_t ColInt(int i) { return sqlite3_column_int64(st_, i); }
  double ColReal(int i) { return sqlite3_column_double(st_, i); }

 private:
  sqlite3_stmt* st_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

Status SqlError(sqlite3* db, const std::string& what) {
  return core::InternalError("sqlite: " + what + ": " + sqlite3_errmsg(db));
}

Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return core::InternalError("sqlite: " + msg + " (in: " + sql.substr(0, 60) + ")");
  }
  return Status::Ok();
}

Result<int> UserVersion(sqlite3* db) {
  Stmt st(db, "PRAGMA user_version");
  if (!st.ok() || st.Step() != SQLITE_ROW) return SqlError(db, "read user_version");
  return static_cast<int>(st.ColInt(0));
}

// Checkpoints the WAL from a connection and a thread of its own (PASSIVE: never blocks the
// writer), every `every`, so that the loop's commits never pay for a checkpoint. With SQLite's
// automatic checkpoint (every ~1000 WAL pages, run inside the commit that crosses it, fsync
// included) every other 1,000-row plan commit took 54-68 ms instead of ~20 ms.
class WalCheckpointer {
 public:
  // Null when the second connection cannot be opened (the caller keeps automatic checkpoints).
  static std::unique_ptr<WalCheckpointer> Start(const std::string& path,
                                                std::chrono::milliseconds every) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      sqlite3_close_v2(db);
      return nullptr;
    }
    sqlite3_busy_timeout(db, 0);  // A busy checkpoint is skipped, never waited for.
    return std::unique_ptr<WalCheckpointer>(new WalCheckpointer(db, every));
  }
  ~WalCheckpointer() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    cv_.NotifyAll();
    thread_.join();
    sqlite3_close_v2(db_);
  }

 private:
  WalCheckpointer(sqlite3* db, std::chrono::milliseconds every)
      : db_(db), every_(every), thread_([this] { Run(); }) {}

  void Run() {
    pthread_setname_np(pthread_self(), "crux-checkpoint");  // For top -H, perf, gdb.
    for (;;) {
      {
        MutexLock lock(&mu_);
        if (cv_.WaitFor(&mu_, every_, [this]() CRUX_REQUIRES(mu_) { return stop_; })) return;
      }
      // SQLITE_BUSY (a writer is mid-commit) is fine: the next period checkpoints.
      (void)sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    }
  }

  sqlite3* db_;  // The checkpointer thread's only (after construction).
  const std::chrono::milliseconds every_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ CRUX_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts after the members it reads.
};

class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* db, std::unique_ptr<WalCheckpointer> checkpointer)
      : db_(db), checkpointer_(std::move(checkpointer)) {}
  ~SqliteStore() override {
    checkpointer_.reset();  // Its connection closes first; the last close checkpoints the WAL.
    prepared_.clear();      // Finalized before the connection closes.
    sqlite3_close_v2(db_);
  }

  Status PutMeta(const std::string& key, const std::string& value) override {
    Stmt* st = Prepared(
        "INSERT INTO meta(key, value) VALUES(?1, ?2) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    if (!st) return SqlError(db_, "prepare meta");
    const int rc = st->Text(1, key).Text(2, value).Step();
    st->Reset();
    if (rc != SQLITE_DONE) return SqlError(db_, "put meta");
    return Status::Ok();
  }

  Result<std::optional<std::string>> GetMeta(const std::string& key) override {
    Stmt st(db_, "SELECT value FROM meta WHERE key = ?1");
    if (!st.ok()) return SqlError(db_, "prepare meta");
    st.Text(1, key);
    const int rc = st.Step();
    if (rc == SQLITE_ROW) return std::optional<std::string>(st.ColText(0));
    if (rc == SQLITE_DONE) return std::optional<std::string>();
    return SqlError(db_, "get meta");
  }

  Status UpsertJob(const StoredJob& j) override {
    Stmt* st = Prepared(kUpsertJobSql);
    if (!st) return SqlError(db_, "prepare job");
    return StepUpsertJob(st, j);
  }

  Status UpsertJobs(const std::vector<StoredJob>& jobs) override {
    if (jobs.empty()) return Status::Ok();
    if (jobs.size() == 1) return UpsertJob(jobs.front());
    CRUX_RETURN_IF_ERROR(Begin());
    Stmt* st = Prepared(kUpsertJobSql);
    Status s = st ? Status::Ok() : SqlError(db_, "prepare job");
    for (size_t i = 0; s.ok() && i < jobs.size(); ++i) s = StepUpsertJob(st, jobs[i]);
    if (!s.ok()) {
      Rollback();
      return s;
    }
    return Commit();
  }

  Status PutProfile(const std::string& job_id, const std::string& report,
                    const std::string& planned, int64_t now_ms) override {
    Stmt* st = Prepared(
        "INSERT INTO profiles(job_id, report, updated_ms, planned) VALUES(?1, ?2, ?3, ?4) "
        "ON CONFLICT(job_id) DO UPDATE SET report = excluded.report, "
        "updated_ms = excluded.updated_ms, "
        "planned = CASE WHEN length(excluded.planned) > 0 THEN excluded.planned "
        "ELSE profiles.planned END");
    if (!st) return SqlError(db_, "prepare profile");
    const int rc = st->Text(1, job_id).Blob(2, report).Int(3, now_ms).Blob(4, planned).Step();
    st->Reset();
    if (rc != SQLITE_DONE) return SqlError(db_, "put profile " + job_id);
    return Status::Ok();
  }

  Status PutProfiles(const std::vector<ProfileRow>& rows, int64_t now_ms) override {
    if (rows.empty()) return Status::Ok();
    CRUX_RETURN_IF_ERROR(Begin());
    Stmt* st = Prepared(
        "INSERT INTO profiles(job_id, report, updated_ms, planned) VALUES(?1, ?2, ?3, ?4) "
        "ON CONFLICT(job_id) DO UPDATE SET report = excluded.report, "
        "updated_ms = excluded.updated_ms, "
        "planned = CASE WHEN length(excluded.planned) > 0 THEN excluded.planned "
        "ELSE profiles.planned END");
    if (!st) {
      Status s = SqlError(db_, "prepare profiles");
      Rollback();
      return s;
    }
    for (const ProfileRow& r : rows) {
      const int rc =
          st->Text(1, r.job_id).Blob(2, r.report).Int(3, now_ms).Blob(4, r.planned).Step();
      st->Reset();
      if (rc != SQLITE_DONE) {
        Status s = SqlError(db_, "put profile " + r.job_id);
        Rollback();
        return s;
      }
    }
    return Commit();
  }

  Status DeleteJob(const std::string& job_id) override {
    CRUX_RETURN_IF_ERROR(Begin());
    static constexpr const char* kDeletes[] = {
        "DELETE FROM profiles WHERE job_id = ?1", "DELETE FROM plan WHERE job_id = ?1",
        "DELETE FROM job_parts WHERE job_id = ?1", "DELETE FROM jobs WHERE job_id = ?1"};
    for (const char* sql : kDeletes) {
      Stmt* st = Prepared(sql);
      const int rc = st ? st->Text(1, job_id).Step() : SQLITE_ERROR;
      if (st) st->Reset();
      if (rc != SQLITE_DONE) {
        Status s = SqlError(db_, "delete job " + job_id);
        Rollback();
        return s;
      }
    }
    return Commit();
  }

  Result<std::vector<StoredJob>> LoadJobs() override {
    Stmt st(db_,
            "SELECT j.job_id, j.tenant, j.registration, j.dscp, j.registered_ms, j.last_seen_ms, "
            "j.state, p.report, j.owner, p.planned FROM jobs j "
            "LEFT JOIN profiles p ON p.job_id = j.job_id "
            "ORDER BY j.registered_ms, j.job_id");
    if (!st.ok()) return SqlError(db_, "prepare load jobs");
    std::vector<StoredJob> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      StoredJob j;
      j.job_id = st.ColText(0);
      j.tenant = st.ColText(1);
      j.registration = st.ColBlob(2);
      j.dscp = static_cast<uint32_t>(st.ColInt(3));
      j.registered_ms = st.ColInt(4);
      j.last_seen_ms = st.ColInt(5);
      j.state = static_cast<int>(st.ColInt(6));
      j.profile = st.ColBlob(7);
      j.owner = st.ColText(8);
      j.planned_profile = st.ColBlob(9);
      out.push_back(std::move(j));
    }
    if (rc != SQLITE_DONE) return SqlError(db_, "load jobs");
    return out;
  }

  Status PutJobParts(const std::vector<StoredJob>& jobs, const std::vector<StoredPart>& parts,
                     const std::vector<PartKey>& removed) override {
    if (jobs.empty() && parts.empty() && removed.empty()) return Status::Ok();
    CRUX_RETURN_IF_ERROR(Begin());
    Status s = PutJobPartsLocked(jobs, parts, removed);
    if (!s.ok()) {
      Rollback();
      return s;
    }
    return Commit();
  }

  Result<std::vector<StoredPart>> LoadJobParts() override {
    Stmt st(db_,
            "SELECT job_id, host, registration, owner, registered_ms, last_seen_ms, report "
            "FROM job_parts ORDER BY job_id, host");
    if (!st.ok()) return SqlError(db_, "prepare load job_parts");
    std::vector<StoredPart> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      StoredPart p;
      p.job_id = st.ColText(0);
      p.host = st.ColText(1);
      p.registration = st.ColBlob(2);
      p.owner = st.ColText(3);
      p.registered_ms = st.ColInt(4);
      p.last_seen_ms = st.ColInt(5);
      p.report = st.ColBlob(6);
      out.push_back(std::move(p));
    }
    if (rc != SQLITE_DONE) return SqlError(db_, "load job_parts");
    return out;
  }

  Status ApplyPlan(uint64_t epoch, const std::vector<PlanRow>& changed,
                   const std::vector<std::string>& removed,
                   const std::vector<AuditRow>& audit) override {
    CRUX_RETURN_IF_ERROR(Begin());
    Status s = ApplyPlanLocked(epoch, changed, removed, audit);
    if (!s.ok()) {
      Rollback();
      return s;
    }
    return Commit();
  }

  Result<std::vector<PlanRow>> LoadPlan() override {
    Stmt st(db_, "SELECT job_id, level, dscp, epoch, assignment FROM plan ORDER BY job_id");
    if (!st.ok()) return SqlError(db_, "prepare load plan");
    std::vector<PlanRow> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      PlanRow r;
      r.job_id = st.ColText(0);
      r.level = static_cast<int>(st.ColInt(1));
      r.dscp = static_cast<uint32_t>(st.ColInt(2));
      r.epoch = static_cast<uint64_t>(st.ColInt(3));
      r.assignment = st.ColBlob(4);
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return SqlError(db_, "load plan");
    return out;
  }

  Result<uint64_t> LoadEpoch() override {
    CRUX_ASSIGN_OR_RETURN(auto v, GetMeta("epoch"));
    if (!v) return uint64_t{0};
    try {
      return static_cast<uint64_t>(std::stoull(*v));
    } catch (const std::exception&) {
      return core::InternalError("meta.epoch: not a number ('" + *v + "')");
    }
  }

  Status PutLinkOverride(const LinkOverride& o) override {
    Stmt st(db_,
            "INSERT INTO link_state(link, health, capacity_bps, updated_ms) "
            "VALUES(?1, ?2, ?3, ?4) ON CONFLICT(link) DO UPDATE SET health = "
            "excluded.health, capacity_bps = excluded.capacity_bps, updated_ms = "
            "excluded.updated_ms");
    if (!st.ok()) return SqlError(db_, "prepare link_state");
    st.Text(1, o.link).Int(2, o.health).Real(3, o.capacity_bps).Int(4, o.updated_ms);
    if (st.Step() != SQLITE_DONE) return SqlError(db_, "put link_state " + o.link);
    return Status::Ok();
  }

  Status DeleteLinkOverride(const std::string& link) override {
    Stmt st(db_, "DELETE FROM link_state WHERE link = ?1");
    if (!st.ok() || st.Text(1, link).Step() != SQLITE_DONE) {
      return SqlError(db_, "delete link_state " + link);
    }
    return Status::Ok();
  }

  Result<std::vector<LinkOverride>> LoadLinkOverrides() override {
    Stmt st(db_, "SELECT link, health, capacity_bps, updated_ms FROM link_state ORDER BY link");
    if (!st.ok()) return SqlError(db_, "prepare load link_state");
    std::vector<LinkOverride> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      out.push_back({st.ColText(0), static_cast<int>(st.ColInt(1)), st.ColReal(2), st.ColInt(3)});
    }
    if (rc != SQLITE_DONE) return SqlError(db_, "load link_state");
    return out;
  }

  Result<std::vector<AuditRow>> RecentAudit(size_t limit) override {
    Stmt st(db_,
            "SELECT ts_ms, epoch, job_id, old_level, new_level, reason FROM audit "
            "ORDER BY id DESC LIMIT ?1");
    if (!st.ok()) return SqlError(db_, "prepare audit");
    st.Int(1, static_cast<int64_t>(limit));
    std::vector<AuditRow> out;
    int rc;
    while ((rc = st.Step()) == SQLITE_ROW) {
      AuditRow a;
      a.ts_ms = st.ColInt(0);
      a.epoch = static_cast<uint64_t>(st.ColInt(1));
      a.job_id = st.ColText(2);
      a.old_level = static_cast<int>(st.ColInt(3));
      a.new_level = static_cast<int>(st.ColInt(4));
      a.reason = st.ColText(5);
      out.push_back(std::move(a));
    }
    if (rc != SQLITE_DONE) return SqlError(db_, "load audit");
    return out;
  }

 private:
  Status ApplyPlanLocked(uint64_t epoch, const std::vector<PlanRow>& changed,
                         const std::vector<std::string>& removed,
                         const std::vector<AuditRow>& audit) {
    // Prepared once per store (cached), re-bound per row.
    if (!changed.empty()) {
      Stmt* st = Prepared(
          "INSERT INTO plan(job_id, level, dscp, epoch, assignment) "
          "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(job_id) DO UPDATE SET level = "
          "excluded.level, dscp = excluded.dscp, epoch = excluded.epoch, assignment = "
          "excluded.assignment");
      if (!st) return SqlError(db_, "prepare plan");
      for (const PlanRow& r : changed) {
        st->Text(1, r.job_id).Int(2, r.level).Int(3, r.dscp);
        const int rc = st->Int(4, static_cast<int64_t>(r.epoch)).Blob(5, r.assignment).Step();
        st->Reset();
        if (rc != SQLITE_DONE) return SqlError(db_, "upsert plan " + r.job_id);
      }
    }
    if (!removed.empty()) {
      Stmt* st = Prepared("DELETE FROM plan WHERE job_id = ?1");
      if (!st) return SqlError(db_, "prepare delete plan");
      for (const std::string& id : removed) {
        const int rc = st->Text(1, id).Step();
        st->Reset();
        if (rc != SQLITE_DONE) return SqlError(db_, "delete plan");
      }
    }
    if (!audit.empty()) {
      Stmt* st = Prepared(
          "INSERT INTO audit(ts_ms, epoch, job_id, old_level, new_level, reason) "
          "VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
      if (!st) return SqlError(db_, "prepare audit");
      for (const AuditRow& a : audit) {
        st->Int(1, a.ts_ms).Int(2, static_cast<int64_t>(a.epoch)).Text(3, a.job_id);
        const int rc = st->Int(4, a.old_level).Int(5, a.new_level).Text(6, a.reason).Step();
        st->Reset();
        if (rc != SQLITE_DONE) return SqlError(db_, "insert audit");
      }
    }
    return PutMeta("epoch", std::to_string(epoch));
  }

  Status PutJobPartsLocked(const std::vector<StoredJob>& jobs, const std::vector<StoredPart>& parts,
                           const std::vector<PartKey>& removed) {
    if (!jobs.empty()) {
      Stmt* st = Prepared(kUpsertJobSql);
      if (!st) return SqlError(db_, "prepare job");
      for (const StoredJob& j : jobs) CRUX_RETURN_IF_ERROR(StepUpsertJob(st, j));
    }
    if (!parts.empty()) {
      Stmt* st = Prepared(
          "INSERT INTO job_parts(job_id, host, registration, owner, registered_ms, last_seen_ms, "
          "report, updated_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?6) "
          "ON CONFLICT(job_id, host) DO UPDATE SET registration = excluded.registration, "
          "owner = excluded.owner, registered_ms = excluded.registered_ms, "
          "last_seen_ms = excluded.last_seen_ms, "
          "report = CASE WHEN length(excluded.report) > 0 THEN excluded.report "
          "ELSE job_parts.report END, "
          "updated_ms = excluded.updated_ms");
      if (!st) return SqlError(db_, "prepare job_parts");
      for (const StoredPart& p : parts) {
        st->Text(1, p.job_id).Text(2, p.host).Blob(3, p.registration).Text(4, p.owner);
        const int rc = st->Int(5, p.registered_ms).Int(6, p.last_seen_ms).Blob(7, p.report).Step();
        st->Reset();
        if (rc != SQLITE_DONE) return SqlError(db_, "upsert part " + p.job_id + "@" + p.host);
      }
    }
    if (!removed.empty()) {
      Stmt* st = Prepared("DELETE FROM job_parts WHERE job_id = ?1 AND host = ?2");
      if (!st) return SqlError(db_, "prepare delete part");
      for (const PartKey& k : removed) {
        const int rc = st->Text(1, k.job_id).Text(2, k.host).Step();
        st->Reset();
        if (rc != SQLITE_DONE) return SqlError(db_, "delete part " + k.job_id + "@" + k.host);
      }
    }
    return Status::Ok();
  }

  static constexpr const char* kUpsertJobSql =
      "INSERT INTO jobs(job_id, tenant, registration, dscp, registered_ms, last_seen_ms, state, "
      "owner) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(job_id) DO UPDATE SET tenant = "
      "excluded.tenant, registration = excluded.registration, dscp = excluded.dscp, "
      "registered_ms = excluded.registered_ms, last_seen_ms = excluded.last_seen_ms, state = "
      "excluded.state, owner = excluded.owner";

  Status StepUpsertJob(Stmt* st, const StoredJob& j) {
    st->Text(1, j.job_id).Text(2, j.tenant).Blob(3, j.registration).Int(4, j.dscp);
    st->Int(5, j.registered_ms).Int(6, j.last_seen_ms).Int(7, j.state).Text(8, j.owner);
    const int rc = st->Step();
    st->Reset();
    if (rc != SQLITE_DONE) return SqlError(db_, "upsert job " + j.job_id);
    return Status::Ok();
  }

  // The statement for `sql` (a string literal: cached by address), prepared on first use and kept
  // for the store's lifetime; reset and unbound. Callers Reset() it after stepping, so no
  // statement keeps a read snapshot open. Null when it does not prepare (the error is in db_).
  Stmt* Prepared(const char* sql) {
    auto it = prepared_.find(sql);
    if (it == prepared_.end()) {
      auto st = std::make_unique<Stmt>(db_, sql);
      if (!st->ok()) return nullptr;
      it = prepared_.emplace(sql, std::move(st)).first;
    }
    return it->second.get();
  }

  Status Begin() { return Run("BEGIN IMMEDIATE", "begin"); }
  Status Commit() {
    Status s = Run("COMMIT", "commit");
    if (!s.ok()) Rollback();  // A failed COMMIT may leave the transaction open.
    return s;
  }
  void Rollback() {
    if (!sqlite3_get_autocommit(db_)) (void)Run("ROLLBACK", "rollback");
  }
  Status Run(const char* sql, const char* what) {
    Stmt* st = Prepared(sql);
    if (!st) return SqlError(db_, std::string("prepare ") + what);
    const int rc = st->Step();
    st->Reset();
    if (rc != SQLITE_DONE) return SqlError(db_, what);
    return Status::Ok();
  }

  sqlite3* db_;
  std::unique_ptr<WalCheckpointer> checkpointer_;  // Null: SQLite's automatic checkpoints.
  std::unordered_map<const char*, std::unique_ptr<Stmt>> prepared_;
};

Result<sqlite3*> OpenRaw(const std::string& path,
                         int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return core::UnavailableError(path + ": cannot create directory " + parent.string() + ": " +
                                    ec.message());
    }
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return core::UnavailableError(path + ": cannot open database: " + msg);
  }
  return db;
}

}  // namespace

int StoredHealth(core::LinkHealth h) {
  switch (h) {
    case core::LinkHealth::kUp:
      return 1;
    case core::LinkHealth::kDegraded:
      return 2;
    case core::LinkHealth::kDown:
      return 3;
  }
  return 0;
}

core::Result<core::LinkHealth> HealthFromStored(int stored) {
  switch (stored) {
    case 1:
      return core::LinkHealth::kUp;
    case 2:
      return core::LinkHealth::kDegraded;
    case 3:
      return core::LinkHealth::kDown;
    default:
      return core::InvalidArgumentError("link_state.health: unknown value " +
                                        std::to_string(stored));
  }
}

const std::vector<std::string>& StoreMigrations() {
  static const std::vector<std::string> kMigrations = {
      // v1: the tables.
      "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE jobs(job_id TEXT PRIMARY KEY, tenant TEXT NOT NULL DEFAULT '', "
      "  registration BLOB NOT NULL, dscp INTEGER NOT NULL DEFAULT 0, "
      "  registered_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL, "
      "  state INTEGER NOT NULL);"
      "CREATE TABLE profiles(job_id TEXT PRIMARY KEY, report BLOB NOT NULL, "
      "  updated_ms INTEGER NOT NULL);"
      "CREATE TABLE plan(job_id TEXT PRIMARY KEY, level INTEGER NOT NULL, "
      "  dscp INTEGER NOT NULL, epoch INTEGER NOT NULL, assignment BLOB NOT NULL);"
      "CREATE TABLE link_state(link TEXT PRIMARY KEY, health INTEGER NOT NULL, "
      "  capacity_bps REAL NOT NULL, updated_ms INTEGER NOT NULL);"
      "CREATE TABLE audit(id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, "
      "  epoch INTEGER NOT NULL, job_id TEXT NOT NULL, old_level INTEGER NOT NULL, "
      "  new_level INTEGER NOT NULL, reason TEXT NOT NULL);",
      // v2: audit lookups by job and time.
      "CREATE INDEX audit_job ON audit(job_id, id);"
      "CREATE INDEX audit_ts ON audit(ts_ms);",
      // v3: the CURVE key that registered a job (only it may speak for the job after a restart).
      "ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';",
      // v4: the profile the planner uses (hysteresis), so a restart plans from the same inputs.
      "ALTER TABLE profiles ADD COLUMN planned BLOB NOT NULL DEFAULT x'';",
      // v5: host parts of multi-host jobs (crux-hostd), each with its latest report.
      "CREATE TABLE job_parts(job_id TEXT NOT NULL, host TEXT NOT NULL, "
      "  registration BLOB NOT NULL, owner TEXT NOT NULL DEFAULT '', "
      "  registered_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL, "
      "  report BLOB NOT NULL DEFAULT x'', updated_ms INTEGER NOT NULL DEFAULT 0, "
      "  PRIMARY KEY(job_id, host));",
  };
  return kMigrations;
}

core::Result<int> SqliteSchemaVersion(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(sqlite3 * db, OpenRaw(path));
  auto v = UserVersion(db);
  sqlite3_close_v2(db);
  return v;
}

namespace {

namespace fs = std::filesystem;

constexpr const char* kRecovery =
    "; cruxd will not start on it: restore the file from a backup, or start afresh with "
    "`cruxd --fresh-state` (the file is moved aside, every job re-registers, and clients and "
    "switch agents follow the new state id)";

Status Unhealthy(const std::string& path, const std::string& what) {
  return core::FailedPreconditionError("state file " + path + " " + what + kRecovery);
}

// The checks of CheckSqliteStore on an open connection.
Status CheckOpen(sqlite3* db, const std::string& path) {
  Stmt tables(db,
              "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
              "('meta', 'jobs', 'profiles', 'plan', 'link_state', 'audit')");
  if (!tables.ok() || tables.Step() != SQLITE_ROW) {
    return Unhealthy(path,
                     std::string("is not a readable SQLite database (") + sqlite3_errmsg(db) + ")");
  }
  const int64_t crux_tables = tables.ColInt(0);
  auto version = UserVersion(db);
  if (!version.ok()) return Unhealthy(path, "is not readable: " + version.status().message());
  if (*version > StoreSchemaVersion()) {
    return core::FailedPreconditionError(
        "state file " + path + ": schema version " + std::to_string(*version) +
        " is newer than this cruxd knows (" + std::to_string(StoreSchemaVersion()) +
        "); run the cruxd that wrote it");
  }
  if (*version == 0 || crux_tables < 6) {
    return Unhealthy(path, "has no Crux schema (user_version " + std::to_string(*version) + ", " +
                               std::to_string(crux_tables) + " of the 6 Crux tables)");
  }
  if (*version >= 5) {  // v5 added job_parts.
    Stmt parts(db,
               "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'job_parts'");
    if (!parts.ok() || parts.Step() != SQLITE_ROW || parts.ColInt(0) != 1) {
      return Unhealthy(
          path, "has schema version " + std::to_string(*version) + " but no job_parts table (v5)");
    }
  }
  Stmt check(db, "PRAGMA quick_check(5)");
  if (!check.ok()) {
    return Unhealthy(path, std::string("cannot be checked (") + sqlite3_errmsg(db) + ")");
  }
  std::string problems;
  int rc;
  while ((rc = check.Step()) == SQLITE_ROW) {
    const std::string row = check.ColText(0);
    if (row == "ok") continue;
    if (!problems.empty()) problems += "; ";
    problems += row;
  }
  if (rc != SQLITE_DONE) {
    return Unhealthy(path, std::string("failed its integrity check (PRAGMA quick_check: ") +
                               sqlite3_errmsg(db) + ")");
  }
  if (!problems.empty()) {
    return Unhealthy(
        path, "failed its integrity check (PRAGMA quick_check: " + problems.substr(0, 500) + ")");
  }
  return Status::Ok();
}

Result<uint64_t> RandomStateId() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  uint64_t id = 0;
  while (id == 0) {
    if (!urandom.read(reinterpret_cast<char*>(&id), sizeof(id))) {
      return core::UnavailableError("state_id: cannot read /dev/urandom");
    }
  }
  return id;
}

Status Migrate(sqlite3* db, int target) {
  auto version = UserVersion(db);
  if (!version.ok()) return version.status();
  const auto& migrations = StoreMigrations();
  for (int v = *version; v < target; ++v) {
    Status s = Exec(db, "BEGIN IMMEDIATE");
    if (s.ok()) s = Exec(db, migrations[static_cast<size_t>(v)]);
    if (s.ok()) s = Exec(db, "PRAGMA user_version = " + std::to_string(v + 1));
    if (s.ok()) s = Exec(db, "COMMIT");
    if (!s.ok()) {
      (void)Exec(db, "ROLLBACK");
      return s.WithContext("migration to v" + std::to_string(v + 1));
    }
  }
  return Status::Ok();
}

// Moves `path` and its -wal/-shm files aside.
Status SetAside(const std::string& path, int64_t now_ms) {
  const std::string suffix = ".set-aside-" + std::to_string(now_ms);
  for (const char* ext : {"", "-wal", "-shm"}) {
    const std::string from = path + ext;
    std::error_code ec;
    if (!fs::exists(from, ec)) continue;
    fs::rename(from, path + suffix + ext, ec);
    if (ec) {
      return core::UnavailableError("--fresh-state: cannot move " + from +
                                    " aside: " + ec.message());
    }
  }
  return Status::Ok();
}

}  // namespace

core::Status CheckSqliteStore(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::Ok();
  const auto size = fs::file_size(path, ec);
  if (ec) return core::UnavailableError("state file " + path + ": " + ec.message());
  if (size == 0) {
    return Unhealthy(path,
                     "exists but is empty (0 bytes): its jobs, link overrides and epoch "
                     "are gone (truncated or replaced)");
  }
  CRUX_ASSIGN_OR_RETURN(sqlite3 * db, OpenRaw(path, SQLITE_OPEN_READONLY));
  Status s = CheckOpen(db, path);
  sqlite3_close_v2(db);
  return s;
}

core::Result<uint64_t> LoadStateId(Store& store) {
  CRUX_ASSIGN_OR_RETURN(auto v, store.GetMeta("state_id"));
  if (!v) return uint64_t{0};
  try {
    return static_cast<uint64_t>(std::stoull(*v));
  } catch (const std::exception&) {
    return core::InternalError("meta.state_id: not a number ('" + *v + "')");
  }
}

core::Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                                     StoreOpenOptions options) {
  const int target = options.max_version < 0
                         ? StoreSchemaVersion()
                         : std::min<int>(options.max_version, StoreSchemaVersion());
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) {
      return core::UnavailableError(path + ": cannot create directory " + parent.string() + ": " +
                                    ec.message());
    }
  }
  if (options.fresh) {
    const int64_t now_ms = options.now_unix_ms != 0
                               ? options.now_unix_ms
                               : std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
    CRUX_RETURN_IF_ERROR(SetAside(path, now_ms));
  }
  if (!fs::exists(path, ec)) {
    // First start: build the database aside and move it into place once it is whole.
    const std::string tmp = path + ".creating";
    for (const char* ext : {"", "-wal", "-shm", "-journal"}) fs::remove(tmp + ext, ec);
    CRUX_ASSIGN_OR_RETURN(sqlite3 * db, OpenRaw(tmp));
    Status s = Migrate(db, target);
    Result<uint64_t> id = RandomStateId();
    if (s.ok() && !id.ok()) s = id.status();
    if (s.ok() && target >= 1) {
      s = Exec(db,
               "INSERT INTO meta(key, value) VALUES('state_id', '" + std::to_string(*id) + "')");
    }
    sqlite3_close_v2(db);
    if (!s.ok()) return s.WithContext(path);
    fs::rename(tmp, path, ec);
    if (ec) return core::UnavailableError(path + ": cannot create: " + ec.message());
  } else {
    CRUX_RETURN_IF_ERROR(CheckSqliteStore(path));
  }
  CRUX_ASSIGN_OR_RETURN(sqlite3 * db, OpenRaw(path, SQLITE_OPEN_READWRITE));
  auto fail = [&](Status s) -> core::Result<std::unique_ptr<Store>> {
    sqlite3_close_v2(db);
    return s.WithContext(path);
  };
  sqlite3_busy_timeout(db, 5000);
  if (Status s = Exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !s.ok()) {
    return fail(s);
  }
  if (Status s = Migrate(db, target); !s.ok()) return fail(s);
  // Checkpoints move to a thread of their own (WalCheckpointer); without it SQLite keeps
  // checkpointing inside commits.
  std::unique_ptr<WalCheckpointer> checkpointer =
      WalCheckpointer::Start(path, std::chrono::milliseconds(1000));
  if (checkpointer) {
    if (Status s = Exec(db, "PRAGMA wal_autocheckpoint=0;"); !s.ok()) return fail(s);
  }
  auto store = std::unique_ptr<Store>(new SqliteStore(db, std::move(checkpointer)));
  if (target >= 1) {
    CRUX_ASSIGN_OR_RETURN(uint64_t id, LoadStateId(*store));
    if (id == 0) {  // Written by a cruxd before state ids.
      CRUX_ASSIGN_OR_RETURN(id, RandomStateId());
      CRUX_RETURN_IF_ERROR(store->PutMeta("state_id", std::to_string(id)).WithContext(path));
    }
  }
  return store;
}

}  // namespace crux::daemon
