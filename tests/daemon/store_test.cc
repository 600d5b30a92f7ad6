// SqliteStore: schema version and migrations, persistence across reopen, transactions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crux/daemon/store/store.h"

namespace crux::daemon {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("crux_store_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    path_ = (dir_ / "sub" / "cruxd.sqlite").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string path_;
};

TEST_F(StoreTest, CreatesFileAtLatestSchemaInWalMode) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(fs::exists(path_));
  auto v = SqliteSchemaVersion(path_);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, StoreSchemaVersion());
  EXPECT_GE(StoreSchemaVersion(), 3);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(StoreTest, MigratesAnOlderFileForward) {
  { ASSERT_TRUE(OpenSqliteStore(path_, {.max_version = 1}).ok()); }
  EXPECT_EQ(*SqliteSchemaVersion(path_), 1);
  {
    // A row as a v1 cruxd wrote it (no owner column yet).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "INSERT INTO jobs(job_id, registration, registered_ms, last_seen_ms, "
                           "state) VALUES('old', x'00', 1, 2, 1)",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*SqliteSchemaVersion(path_), StoreSchemaVersion());
  auto jobs = (*s)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job_id, "old");
  EXPECT_EQ((*jobs)[0].owner, "");  // v3 default.
  // The v2 indexes exist.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT count(*) FROM sqlite_master WHERE type='index' AND "
                               "name IN ('audit_job','audit_ts')",
                               -1, &st, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 2);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_F(StoreTest, RefusesANewerSchema) {
  { ASSERT_TRUE(OpenSqliteStore(path_).ok()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = OpenSqliteStore(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("newer"));
}

TEST_F(StoreTest, UnopenablePathIsUnavailable) {
  auto s = OpenSqliteStore("/proc/definitely/not/here.sqlite");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), core::StatusCode::kUnavailable);
}

TEST_F(StoreTest, BatchedProfilesAndLargePlansAreOneTransactionEach) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  std::vector<ProfileRow> profiles;
  std::vector<PlanRow> rows;
  std::vector<AuditRow> audit;
  for (int i = 0; i < 500; ++i) {
    const std::string id = "j" + std::to_string(i);
    ASSERT_TRUE(st.UpsertJob({id, "", "reg", 10, 1, 2, 1, "", ""}).ok());
    profiles.push_back({id, "p1-" + id, i == 2 ? "planned-" + id : ""});
    rows.push_back({id, i % 7, 10, 3, "asg-" + id});
    audit.push_back({1, 3, id, -1, i % 7, "bulk"});
  }
  ASSERT_TRUE(st.PutProfiles(profiles, 100).ok());
  ASSERT_TRUE(st.PutProfiles({}, 100).ok());
  profiles.resize(3);
  profiles[1].report = "p2-j1";  // Upsert: replaces.
  profiles[1].planned = "planned-j1";
  profiles[2].report = "p2-j2";  // No planned profile: the stored one stays.
  profiles[2].planned = "";
  ASSERT_TRUE(st.PutProfiles(profiles, 200).ok());
  ASSERT_TRUE(st.ApplyPlan(3, rows, {}, audit).ok());
  ASSERT_TRUE(st.ApplyPlan(4, {}, {"j0", "j1"}, {}).ok());
  auto jobs = st.LoadJobs().value();
  ASSERT_EQ(jobs.size(), 500u);
  std::map<std::string, std::string> by_id;
  std::map<std::string, std::string> planned;
  for (const StoredJob& j : jobs) {
    by_id[j.job_id] = j.profile;
    planned[j.job_id] = j.planned_profile;
  }
  EXPECT_EQ(by_id["j0"], "p1-j0");
  EXPECT_EQ(by_id["j1"], "p2-j1");
  EXPECT_EQ(planned["j1"], "planned-j1");
  EXPECT_EQ(by_id["j2"], "p2-j2");
  EXPECT_EQ(planned["j2"], "planned-j2");
  EXPECT_EQ(by_id["j499"], "p1-j499");
  auto plan = st.LoadPlan().value();
  ASSERT_EQ(plan.size(), 498u);
  EXPECT_EQ(plan.back().assignment, "asg-j99");  // Ordered by id.
  EXPECT_EQ(st.LoadEpoch().value(), 4u);
  EXPECT_EQ(st.RecentAudit(1000).value().size(), 500u);
}

TEST_F(StoreTest, UpsertJobsIsOneTransactionAllOrNone) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  std::vector<StoredJob> jobs;
  for (int i = 0; i < 300; ++i) {
    jobs.push_back({"g" + std::to_string(i), "t", "reg", 10, 1, 2, 1, "", "owner"});
  }
  ASSERT_TRUE(st.UpsertJobs(jobs).ok());
  ASSERT_TRUE(st.UpsertJobs({}).ok());
  EXPECT_EQ(st.LoadJobs().value().size(), 300u);
  // A real SQLite failure in the middle of a group (a trigger refuses job "z"): nothing of the
  // group is written, and the store keeps working.
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "CREATE TRIGGER refuse_z BEFORE INSERT ON jobs WHEN NEW.job_id = 'z' "
                           "BEGIN SELECT RAISE(ABORT, 'injected'); END;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  std::vector<StoredJob> group = {{"x", "t", "reg", 10, 1, 2, 1, "", ""},
                                  {"y", "t", "reg", 10, 1, 2, 1, "", ""},
                                  {"z", "t", "reg", 10, 1, 2, 1, "", ""}};
  core::Status failed = st.UpsertJobs(group);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), ::testing::HasSubstr("upsert job z"));
  EXPECT_EQ(st.LoadJobs().value().size(), 300u);  // x and y rolled back.
  group.pop_back();
  ASSERT_TRUE(st.UpsertJobs(group).ok());
  EXPECT_EQ(st.LoadJobs().value().size(), 302u);
}

TEST_F(StoreTest, EverythingSurvivesReopen) {
  {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok());
    Store& st = **s;
    ASSERT_TRUE(st.PutMeta("topology_source", "embedded").ok());
    ASSERT_TRUE(st.PutMeta("topology_source", "file.yaml").ok());  // Overwrites.
    StoredJob a{"a", "t1", std::string("\x01\x00\x02", 3), 10, 100, 200, 1, "", "key-a"};
    StoredJob b{"b", "", "regb", 12, 101, 201, 2, "", ""};
    ASSERT_TRUE(st.UpsertJob(a).ok());
    ASSERT_TRUE(st.UpsertJob(b).ok());
    ASSERT_TRUE(st.PutProfile("b", "profile-b", "", 300).ok());
    b.state = 3;
    ASSERT_TRUE(st.UpsertJob(b).ok());  // Keeps the profile.
    ASSERT_TRUE(st.ApplyPlan(7, {{"a", 1, 10, 7, "asg-a"}, {"b", 2, 12, 7, "asg-b"}}, {},
                             {{1, 7, "a", -1, 1, "registered"}, {1, 7, "b", -1, 2, "registered"}})
                    .ok());
    ASSERT_TRUE(st.PutLinkOverride({"tor0->agg0", 3, 0, 5}).ok());
    ASSERT_TRUE(st.PutLinkOverride({"tor1->agg0", 2, 1e9, 6}).ok());
    ASSERT_TRUE(st.DeleteLinkOverride("tor1->agg0").ok());
  }
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  EXPECT_EQ(*st.GetMeta("topology_source").value(), "file.yaml");
  EXPECT_FALSE(st.GetMeta("nothing").value().has_value());
  EXPECT_EQ(st.LoadEpoch().value(), 7u);
  auto jobs = st.LoadJobs().value();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job_id, "a");
  EXPECT_EQ(jobs[0].registration, std::string("\x01\x00\x02", 3));  // Binary-safe.
  EXPECT_EQ(jobs[0].tenant, "t1");
  EXPECT_EQ(jobs[0].dscp, 10u);
  EXPECT_EQ(jobs[0].profile, "");
  EXPECT_EQ(jobs[0].owner, "key-a");
  EXPECT_EQ(jobs[1].profile, "profile-b");
  EXPECT_EQ(jobs[1].state, 3);
  auto plan = st.LoadPlan().value();
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[1].assignment, "asg-b");
  EXPECT_EQ(plan[1].level, 2);
  EXPECT_EQ(plan[1].epoch, 7u);
  auto links = st.LoadLinkOverrides().value();
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].link, "tor0->agg0");
  EXPECT_EQ(links[0].health, 3);
  auto audit = st.RecentAudit(10).value();
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0].job_id, "b");  // Newest first.
  EXPECT_EQ(audit[0].reason, "registered");

  // Removing a job removes its profile and plan row; ApplyPlan removals work too.
  ASSERT_TRUE(st.DeleteJob("b").ok());
  ASSERT_TRUE(st.ApplyPlan(8, {}, {"a"}, {{2, 8, "a", 1, -1, "gone"}}).ok());
  EXPECT_EQ(st.LoadJobs().value().size(), 1u);
  EXPECT_TRUE(st.LoadPlan().value().empty());
  EXPECT_EQ(st.LoadEpoch().value(), 8u);
  EXPECT_EQ(st.RecentAudit(1).value()[0].new_level, -1);
}

}  // namespace
}  // namespace crux::daemon
