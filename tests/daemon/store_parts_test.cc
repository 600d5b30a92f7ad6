// SqliteStore, schema v5: host parts of multi-host jobs (job_parts), the migration from a v4
// file, one-transaction writes with the job rows, reports kept across registrations, deletion
// with the job.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>
#include <vector>

#include "crux/daemon/store/store.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

namespace fs = std::filesystem;

class StorePartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir(std::string("parts_") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    path_ = (dir_ / "cruxd.sqlite").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static StoredJob Job(const std::string& id) {
    StoredJob j;
    j.job_id = id;
    j.registration = "union-of-" + id;
    j.registered_ms = 1;
    j.last_seen_ms = 2;
    j.state = 1;
    return j;
  }
  static StoredPart Part(const std::string& id, const std::string& host, std::string report) {
    StoredPart p;
    p.job_id = id;
    p.host = host;
    p.registration = "part-" + id + "@" + host;
    p.owner = "key";
    p.registered_ms = 10;
    p.last_seen_ms = 20;
    p.report = std::move(report);
    return p;
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(StorePartsTest, V4FileMigratesToV5AndKeepsItsJobs) {
  ASSERT_GE(StoreSchemaVersion(), 5);
  {
    auto v4 = OpenSqliteStore(path_, {.max_version = 4});
    ASSERT_TRUE(v4.ok()) << v4.status().ToString();
    ASSERT_TRUE((*v4)->UpsertJob(Job("old")).ok());
  }
  EXPECT_EQ(*SqliteSchemaVersion(path_), 4);
  ASSERT_TRUE(CheckSqliteStore(path_).ok());  // A v4 file has no job_parts, and needs none.
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*SqliteSchemaVersion(path_), StoreSchemaVersion());
  auto jobs = (*s)->LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  auto parts = (*s)->LoadJobParts();
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_TRUE(parts->empty());
}

TEST_F(StorePartsTest, PartsPersistWithTheirJobAndReportsSurviveRegistrations) {
  {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok());
    Store& st = **s;
    ASSERT_TRUE(
        st.PutJobParts({Job("j")}, {Part("j", "host4", ""), Part("j", "host0", "r0")}, {}).ok());
    // A re-registration (empty report) keeps the stored report; a flush replaces it.
    StoredPart again = Part("j", "host0", "");
    again.last_seen_ms = 99;
    ASSERT_TRUE(st.PutJobParts({}, {again, Part("j", "host4", "r4")}, {}).ok());
  }
  auto s = OpenSqliteStore(path_);  // Reopened: everything was committed.
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  auto parts = st.LoadJobParts();
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].host, "host0");  // By job, then host.
  EXPECT_EQ((*parts)[0].report, "r0");
  EXPECT_EQ((*parts)[0].last_seen_ms, 99);
  EXPECT_EQ((*parts)[0].registration, "part-j@host0");
  EXPECT_EQ((*parts)[0].owner, "key");
  EXPECT_EQ((*parts)[0].registered_ms, 10);
  EXPECT_EQ((*parts)[1].host, "host4");
  EXPECT_EQ((*parts)[1].report, "r4");
  auto jobs = st.LoadJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].registration, "union-of-j");

  // A part leaves: the job row (new union) and the deletion in one write.
  StoredJob shrunk = Job("j");
  shrunk.registration = "host0-only";
  ASSERT_TRUE(st.PutJobParts({shrunk}, {}, {{"j", "host4"}}).ok());
  parts = st.LoadJobParts();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].host, "host0");
  EXPECT_EQ((*st.LoadJobs())[0].registration, "host0-only");

  // The job goes with its parts.
  ASSERT_TRUE(st.DeleteJob("j").ok());
  EXPECT_TRUE(st.LoadJobParts()->empty());
  EXPECT_TRUE(st.LoadJobs()->empty());
}

TEST_F(StorePartsTest, AFailedPartsWriteLeavesNothingBehind) {
  auto s = OpenSqliteStore(path_);
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  // A trigger refuses the second part row: the whole write (job row included) rolls back.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TRIGGER no_host9 BEFORE INSERT ON job_parts WHEN NEW.host = "
                         "'host9' BEGIN SELECT RAISE(ABORT, 'refused'); END;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  core::Status w =
      st.PutJobParts({Job("j")}, {Part("j", "host0", "r0"), Part("j", "host9", "r9")}, {});
  EXPECT_FALSE(w.ok());
  EXPECT_TRUE(st.LoadJobParts()->empty()) << "all or none";
  EXPECT_TRUE(st.LoadJobs()->empty()) << "the job row is in the same transaction";
}

TEST_F(StorePartsTest, AV5FileWithoutItsPartsTableIsRefused) {
  { ASSERT_TRUE(OpenSqliteStore(path_).ok()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE job_parts", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  core::Status c = CheckSqliteStore(path_);
  EXPECT_EQ(c.code(), core::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.message().find("job_parts"), std::string::npos) << c.message();
}

}  // namespace
}  // namespace crux::daemon
