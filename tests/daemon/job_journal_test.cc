// JobJournal: reports only mark their jobs; a flush writes the latest profiles (and the planned
// profiles and phases the reports changed) in one transaction, reading the rows when it writes;
// a failed write marks its jobs dirty again; a deleted job is not written back.
#include "crux/daemon/store/job_journal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "crux/core/base/clock.h"
#include "crux/daemon/store/store_codec.h"
#include "crux/protocol/convert.h"
#include "daemon_test_util.h"

namespace crux::daemon {
namespace {

// The rows of the jobs in `jobs` (no host parts).
class FakeRows final : public JobJournal::Rows {
 public:
  std::map<std::string, core::JobDemand> jobs;
  std::optional<JobJournal::JobRow> Job(const std::string& id) const override {
    auto it = jobs.find(id);
    if (it == jobs.end()) return std::nullopt;
    JobJournal::JobRow r;
    r.row.job_id = id;
    r.row.state = 7;
    r.demand = it->second;
    return r;
  }
  std::optional<StoredPart> Part(const std::string&, core::NodeId) const override {
    return std::nullopt;
  }
  bool HasPart(const std::string&, core::NodeId) const override { return false; }
};

class JobJournalTest : public ::testing::Test {
 protected:
  JobJournalTest()
      : dir_(testing::TempDir("journal")),
        topo_(std::make_shared<const core::Topology>(
            spec::ParseTopology(EmbeddedTopologyYaml(), "").value())),
        loop_(&clock_, topo_.get(), core::ControlLoopOptions{}),
        sqlite_(OpenSqliteStore((dir_ / "cruxd.sqlite").string()).value()),
        faulty_(sqlite_.get()),
        writer_(&faulty_, &events_, /*threaded=*/false),
        health_(nullptr),
        journal_(&loop_, &rows_, topo_, &events_, &writer_, &health_) {}
  ~JobJournalTest() override { std::filesystem::remove_all(dir_); }

  // A registered job with a converged report of `compute_ms`; returns the loop's verdict.
  core::ReportVerdict Report(const std::string& id, int64_t compute_ms) {
    if (!rows_.jobs.count(id)) {
      core::JobDemand d;
      EXPECT_FALSE(protocol::Failed(protocol::DemandFromProto(
          testing::Register(id, {"host0", "host4"}).register_job(), *topo_, &d)));
      rows_.jobs[id] = d;
      loop_.AddJob(d, 10);
      StoredJob row;
      row.job_id = id;
      row.registration = "r";
      EXPECT_TRUE(sqlite_->UpsertJob(row).ok());
    }
    core::JobProfile p;
    p.compute_time = core::Duration::Millis(compute_ms);
    p.iteration_period = core::Duration::Millis(2 * compute_ms);
    p.converged = true;
    return loop_.ReportProfile(id, p);
  }
  std::map<std::string, StoredJob> Stored() {
    std::map<std::string, StoredJob> out;
    core::Result<std::vector<StoredJob>> jobs = sqlite_->LoadJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    if (jobs.ok()) {
      for (StoredJob& j : *jobs) out[j.job_id] = std::move(j);
    }
    return out;
  }

  std::filesystem::path dir_;
  std::shared_ptr<const core::Topology> topo_;
  core::FakeClock clock_;
  core::ControlLoop loop_;
  ManualEventLoop events_;
  std::unique_ptr<Store> sqlite_;
  testing::FaultyStore faulty_;
  StoreWriter writer_;
  StoreHealth health_;
  FakeRows rows_;
  JobJournal journal_;
};

TEST_F(JobJournalTest, AFlushWritesWhatTheReportsChanged) {
  const core::ReportVerdict v = Report("a", 80);
  ASSERT_TRUE(v.plan_changed && v.phase_changed);
  journal_.Reported("a", v);
  EXPECT_TRUE(Stored().at("a").profile.empty()) << "a report alone writes nothing";
  EXPECT_EQ(journal_.FlushProfiles(), 0u);
  const StoredJob a = Stored().at("a");
  EXPECT_FALSE(a.profile.empty());
  EXPECT_FALSE(a.planned_profile.empty());
  EXPECT_EQ(a.state, 7) << "the phase changed: the job's row was written too";
  const core::Result<core::JobProfile> p =
      StoreCodec(*topo_).DecodeProfile(a.profile, rows_.jobs.at("a"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->compute_time, core::Duration::Millis(80));
}

TEST_F(JobJournalTest, FlushesInChunksAndRetriesAFailedWrite) {
  for (const std::string id : {"a", "b", "c"}) journal_.Reported(id, Report(id, 80));
  faulty_.fail_method = "PutProfiles";
  EXPECT_EQ(journal_.FlushProfiles(2), 3u) << "the failed chunk is dirty again";
  EXPECT_FALSE(health_.ok());
  faulty_.fail_method.clear();
  EXPECT_EQ(journal_.FlushProfiles(2), 1u);
  EXPECT_EQ(journal_.FlushProfiles(2), 0u);
  const std::map<std::string, StoredJob> stored = Stored();
  ASSERT_EQ(stored.size(), 3u);
  for (const auto& [id, row] : stored) EXPECT_FALSE(row.profile.empty()) << id;
  EXPECT_TRUE(health_.ok());
}

TEST_F(JobJournalTest, PlannedProfilesGoAheadAndADeletedJobIsNotWrittenBack) {
  journal_.Reported("a", Report("a", 80));
  journal_.Reported("b", Report("b", 80));
  journal_.Reported("b", Report("b", 81));  // Jitter: the latest profile only.
  journal_.FlushPlanned();
  EXPECT_FALSE(Stored().at("a").planned_profile.empty());
  journal_.Reported("a", Report("a", 400));
  journal_.Delete("a", std::nullopt);
  EXPECT_EQ(Stored().count("a"), 0u);
  EXPECT_EQ(journal_.FlushProfiles(), 0u);
  EXPECT_EQ(Stored().count("a"), 0u);
}

TEST_F(JobJournalTest, JitterIsStoredOncePerIntervalAndEverythingAtShutdown) {
  JobJournal journal(&loop_, &rows_, topo_, &events_, &writer_, &health_,
                     core::Duration::Seconds(10));
  auto samples = [&](const std::string& id) {
    const core::Result<core::JobProfile> p =
        StoreCodec(*topo_).DecodeProfile(Stored().at(id).profile, rows_.jobs.at(id));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->compute_time.ToMillis() : -1;
  };
  journal.Reported("a", Report("a", 80));  // Planned and phase: written at once.
  journal.Reported("b", Report("b", 80));
  EXPECT_EQ(journal.FlushProfiles(), 0u);
  EXPECT_EQ(samples("a"), 80);
  EXPECT_EQ(samples("b"), 80);

  // Jitter within the hysteresis: deferred, not lost.
  events_.Advance(core::Duration::Seconds(1));
  journal.Reported("a", Report("a", 81));
  journal.Reported("b", Report("b", 82));
  EXPECT_EQ(journal.FlushProfiles(), 0u);
  EXPECT_EQ(journal.deferred(), 2u);
  EXPECT_EQ(samples("a"), 80);
  events_.Advance(core::Duration::Seconds(4));
  journal.Reported("a", Report("a", 83));
  EXPECT_EQ(journal.deferred(), 2u) << "one entry per job, however many reports";
  // A significant report is written at once, with the newest figures.
  journal.Reported("b", Report("b", 400));
  EXPECT_EQ(journal.deferred(), 1u);
  EXPECT_EQ(journal.FlushProfiles(), 0u);
  EXPECT_EQ(samples("b"), 400);
  EXPECT_EQ(samples("a"), 80);

  // Past a's interval (10 s after its first write): its newest report is written by the next
  // flush, without another report.
  events_.Advance(core::Duration::Seconds(5));
  EXPECT_EQ(journal.FlushProfiles(), 0u);
  EXPECT_EQ(samples("a"), 83);
  EXPECT_EQ(journal.deferred(), 0u);

  // Deferred again, then written by the shutdown flush; a deleted job leaves nothing behind.
  journal.Reported("a", Report("a", 84));
  journal.Reported("b", Report("b", 401));
  EXPECT_EQ(journal.deferred(), 2u);
  journal.Delete("b", std::nullopt);
  EXPECT_EQ(journal.deferred(), 1u);
  journal.FlushAll();
  EXPECT_EQ(samples("a"), 84);
  EXPECT_EQ(journal.deferred(), 0u);
  EXPECT_EQ(Stored().count("b"), 0u);
}

}  // namespace
}  // namespace crux::daemon
