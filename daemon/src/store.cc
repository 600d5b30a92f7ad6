#include "crux/daemon/store.h"

#include <sqlite3.h>

#include <filesystem>
#include <system_error>
#include <utility>

namespace crux::daemon {
namespace {

using core::Result;
using core::Status;

// RAII statement with positional binds.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr);
  }
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
  sqlite3* db_;
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

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(sqlite3* db) : db_(db) {}
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  Status PutMeta(const std::string& key, const std::string& value) override {
    Stmt st(db_,
            "INSERT INTO meta(key, value) VALUES(?1, ?2) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    if (!st.ok()) return SqlError(db_, "prepare meta");
    if (st.Text(1, key).Text(2, value).Step() != SQLITE_DONE) return SqlError(db_, "put meta");
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
    Stmt st(db_,
            "INSERT INTO jobs(job_id, tenant, registration, dscp, registered_ms, last_seen_ms, "
            "state, owner) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(job_id) DO UPDATE "
            "SET tenant = excluded.tenant, registration = excluded.registration, dscp = "
            "excluded.dscp, registered_ms = excluded.registered_ms, last_seen_ms = "
            "excluded.last_seen_ms, state = excluded.state, owner = excluded.owner");
    if (!st.ok()) return SqlError(db_, "prepare job");
    st.Text(1, j.job_id).Text(2, j.tenant).Blob(3, j.registration).Int(4, j.dscp);
    st.Int(5, j.registered_ms).Int(6, j.last_seen_ms).Int(7, j.state).Text(8, j.owner);
    if (st.Step() != SQLITE_DONE) return SqlError(db_, "upsert job " + j.job_id);
    return Status::Ok();
  }

  Status PutProfile(const std::string& job_id, const std::string& report, int64_t now_ms) override {
    Stmt st(db_,
            "INSERT INTO profiles(job_id, report, updated_ms) VALUES(?1, ?2, ?3) "
            "ON CONFLICT(job_id) DO UPDATE SET report = excluded.report, "
            "updated_ms = excluded.updated_ms");
    if (!st.ok()) return SqlError(db_, "prepare profile");
    if (st.Text(1, job_id).Blob(2, report).Int(3, now_ms).Step() != SQLITE_DONE) {
      return SqlError(db_, "put profile " + job_id);
    }
    return Status::Ok();
  }

  Status PutProfiles(const std::vector<std::pair<std::string, std::string>>& reports,
                     int64_t now_ms) override {
    if (reports.empty()) return Status::Ok();
    CRUX_RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    Stmt st(db_,
            "INSERT INTO profiles(job_id, report, updated_ms) VALUES(?1, ?2, ?3) "
            "ON CONFLICT(job_id) DO UPDATE SET report = excluded.report, "
            "updated_ms = excluded.updated_ms");
    if (!st.ok()) {
      Status s = SqlError(db_, "prepare profiles");
      (void)Exec(db_, "ROLLBACK");
      return s;
    }
    for (const auto& [job_id, report] : reports) {
      st.Reset();
      if (st.Text(1, job_id).Blob(2, report).Int(3, now_ms).Step() != SQLITE_DONE) {
        Status s = SqlError(db_, "put profile " + job_id);
        (void)Exec(db_, "ROLLBACK");
        return s;
      }
    }
    return Exec(db_, "COMMIT");
  }

  Status DeleteJob(const std::string& job_id) override {
    CRUX_RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    for (const char* sql :
         {"DELETE FROM profiles WHERE job_id = ?1", "DELETE FROM plan WHERE job_id = ?1",
          "DELETE FROM jobs WHERE job_id = ?1"}) {
      Stmt st(db_, sql);
      if (!st.ok() || st.Text(1, job_id).Step() != SQLITE_DONE) {
        Status s = SqlError(db_, "delete job " + job_id);
        (void)Exec(db_, "ROLLBACK");
        return s;
      }
    }
    return Exec(db_, "COMMIT");
  }

  Result<std::vector<StoredJob>> LoadJobs() override {
    Stmt st(db_,
            "SELECT j.job_id, j.tenant, j.registration, j.dscp, j.registered_ms, j.last_seen_ms, "
            "j.state, p.report, j.owner FROM jobs j LEFT JOIN profiles p ON p.job_id = j.job_id "
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
      out.push_back(std::move(j));
    }
    if (rc != SQLITE_DONE) return SqlError(db_, "load jobs");
    return out;
  }

  Status ApplyPlan(uint64_t epoch, const std::vector<PlanRow>& changed,
                   const std::vector<std::string>& removed,
                   const std::vector<AuditRow>& audit) override {
    CRUX_RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    Status s = ApplyPlanLocked(epoch, changed, removed, audit);
    if (!s.ok()) {
      (void)Exec(db_, "ROLLBACK");
      return s;
    }
    return Exec(db_, "COMMIT");
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
    // One prepared statement per kind, re-bound per row (preparing per row cost more than the
    // writes for a 10,000-job plan).
    if (!changed.empty()) {
      Stmt st(db_,
              "INSERT INTO plan(job_id, level, dscp, epoch, assignment) "
              "VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(job_id) DO UPDATE SET level = "
              "excluded.level, dscp = excluded.dscp, epoch = excluded.epoch, assignment = "
              "excluded.assignment");
      if (!st.ok()) return SqlError(db_, "prepare plan");
      for (const PlanRow& r : changed) {
        st.Reset();
        st.Text(1, r.job_id).Int(2, r.level).Int(3, r.dscp);
        st.Int(4, static_cast<int64_t>(r.epoch)).Blob(5, r.assignment);
        if (st.Step() != SQLITE_DONE) return SqlError(db_, "upsert plan " + r.job_id);
      }
    }
    if (!removed.empty()) {
      Stmt st(db_, "DELETE FROM plan WHERE job_id = ?1");
      if (!st.ok()) return SqlError(db_, "prepare delete plan");
      for (const std::string& id : removed) {
        st.Reset();
        if (st.Text(1, id).Step() != SQLITE_DONE) return SqlError(db_, "delete plan");
      }
    }
    if (!audit.empty()) {
      Stmt st(db_,
              "INSERT INTO audit(ts_ms, epoch, job_id, old_level, new_level, reason) "
              "VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
      if (!st.ok()) return SqlError(db_, "prepare audit");
      for (const AuditRow& a : audit) {
        st.Reset();
        st.Int(1, a.ts_ms).Int(2, static_cast<int64_t>(a.epoch)).Text(3, a.job_id);
        st.Int(4, a.old_level).Int(5, a.new_level).Text(6, a.reason);
        if (st.Step() != SQLITE_DONE) return SqlError(db_, "insert audit");
      }
    }
    return PutMeta("epoch", std::to_string(epoch));
  }

  sqlite3* db_;
};

Result<sqlite3*> OpenRaw(const std::string& path) {
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
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return core::UnavailableError(path + ": cannot open database: " + msg);
  }
  return db;
}

}  // namespace

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
  };
  return kMigrations;
}

core::Result<int> SqliteSchemaVersion(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(sqlite3 * db, OpenRaw(path));
  auto v = UserVersion(db);
  sqlite3_close_v2(db);
  return v;
}

core::Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, int max_version) {
  CRUX_ASSIGN_OR_RETURN(sqlite3 * db, OpenRaw(path));
  auto fail = [&](Status s) -> core::Result<std::unique_ptr<Store>> {
    sqlite3_close_v2(db);
    return s.WithContext(path);
  };
  sqlite3_busy_timeout(db, 5000);
  if (Status s = Exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !s.ok()) {
    return fail(s);
  }
  auto version = UserVersion(db);
  if (!version.ok()) return fail(version.status());
  const auto& migrations = StoreMigrations();
  const int target = max_version < 0 ? static_cast<int>(migrations.size())
                                     : std::min<int>(max_version, migrations.size());
  if (*version > static_cast<int>(migrations.size())) {
    return fail(core::FailedPreconditionError("schema version " + std::to_string(*version) +
                                              " is newer than this cruxd knows (" +
                                              std::to_string(migrations.size()) + ")"));
  }
  for (int v = *version; v < target; ++v) {
    Status s = Exec(db, "BEGIN IMMEDIATE");
    if (s.ok()) s = Exec(db, migrations[static_cast<size_t>(v)]);
    if (s.ok()) s = Exec(db, "PRAGMA user_version = " + std::to_string(v + 1));
    if (s.ok()) s = Exec(db, "COMMIT");
    if (!s.ok()) {
      (void)Exec(db, "ROLLBACK");
      return fail(s.WithContext("migration to v" + std::to_string(v + 1)));
    }
  }
  return std::unique_ptr<Store>(new SqliteStore(db));
}

}  // namespace crux::daemon
