// JobJournal: the job rows the daemon changed and has not stored yet, and every write of a job's
// rows after start-up (through the StoreWriter, so none of them blocks the loop).
//
// Batched: reports arrive by the thousand per second, and one store write each would cap
// ingestion at SQLite's commit rate. So a report only marks its job dirty (Reported,
// PartReported), and the journal writes what is dirty in batches: the latest profiles every
// second (FlushProfiles, in chunks: Daemon::FlushChunk) and at shutdown (FlushAll), and the
// planned profiles and phases also ahead of every plan's write (FlushPlanned: the PlanApplier), so
// that a restart plans from what was planned. A failed write marks its jobs dirty again (those
// still here).
//
// Throttled: a report that changes neither the planned profile nor the phase (jitter within the
// hysteresis) is stored at most once per `latest_interval` per job; the ones in between are
// deferred, and the latest of them is written once the interval is over (or at shutdown). A
// kill -9 therefore loses at most `latest_interval` (plus about a second) of a job's latest
// profile, never a planned profile or a phase; clients report again anyway. At 10 K jobs the
// store thread wrote every job's row every second (~28 % of a core) although nothing a restart
// plans from had changed.
//
// Written at once: a registration group (StoreRegistrations; its replies wait for it), a job's
// deletion (Delete), a host part's removal (PartGone).
//
// What a flush writes is read when it is written, not copied at report time: the profiles from
// the control loop, a job's row and its parts' rows from `rows` (the sessions: JobRows). Profiles
// and registrations are serialized on the store thread (StoreCodec), never on the loop.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_STORE_JOB_JOURNAL_H_
#define CRUX_DAEMON_STORE_JOB_JOURNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/control/control_loop.h"
#include "crux/core/topology/topology.h"
#include "crux/daemon/runtime/event_loop.h"
#include "crux/daemon/store/store.h"
#include "crux/daemon/store/store_health.h"
#include "crux/daemon/store/store_writer.h"

namespace crux::daemon {

class JobJournal {
 public:
  // A job row whose `registration` is left empty: it is encoded from `demand` on the store
  // thread, never on the loop.
  struct JobRow {
    StoredJob row;
    core::JobDemand demand;
  };

  // Where a flush reads the rows of a job and of its host parts (implemented above the store,
  // by whoever knows the sessions).
  class Rows {
   public:
    virtual ~Rows() = default;
    // The job's row now; nullopt: the job is gone.
    virtual std::optional<JobRow> Job(const std::string& id) const = 0;
    // The row of the job's part on `host` now, its latest report included; nullopt: gone.
    virtual std::optional<StoredPart> Part(const std::string& id, core::NodeId host) const = 0;
    // Whether the job still has a part on `host` (a failed write marks it dirty again).
    virtual bool HasPart(const std::string& id, core::NodeId host) const = 0;
  };

  // `loop` (read for the profiles), `rows`, `events`, `writer` and `health` must outlive the
  // journal; `topo` is the nominal topology the store thread encodes against. `latest_interval`
  // (>= 0; zero: every report's job is written by the next flush) bounds how often a job's
  // latest profile is written when nothing planned changed.
  JobJournal(const core::ControlLoop* loop, const Rows* rows,
             std::shared_ptr<const core::Topology> topo, EventLoop* events, StoreWriter* writer,
             StoreHealth* health, core::Duration latest_interval = core::Duration::Zero())
      : loop_(loop),
        rows_(rows),
        topo_(std::move(topo)),
        events_(events),
        writer_(writer),
        health_(health),
        latest_interval_(latest_interval) {}
  JobJournal(const JobJournal&) = delete;
  JobJournal& operator=(const JobJournal&) = delete;

  // ---- what changed ----
  // A profile reached the control loop (a job's report, or a multi-host job's merge): its latest
  // profile, and what the verdict says changed besides (the planned profile, the phase).
  void Reported(const std::string& id, const core::ReportVerdict& verdict);
  // The latest report of the job's part on `host` changed (written with the job's profile).
  void PartReported(const std::string& id, core::NodeId host);

  // ---- batched writes ----
  // Submits the rows of at most `max_rows` dirty jobs in one transaction: latest profiles,
  // planned profiles and phases, and their parts' reports; deferred jobs whose interval is over
  // are dirty again first. Returns how many jobs are still dirty (deferred ones not counted).
  size_t FlushProfiles(size_t max_rows = SIZE_MAX);
  // Submits every job's unstored rows, deferred ones included (shutdown).
  void FlushAll();
  // Jobs whose latest profile waits for its interval (not written yet, nothing lost).
  size_t deferred() const { return deferred_.size(); }
  // Submits every planned profile and phase not stored yet.
  void FlushPlanned();

  // ---- writes at once ----
  // A group of registrations (with their parts' rows, if any) in one transaction; `done` gets
  // whether it was stored, on the loop thread (inline with an inline writer).
  void StoreRegistrations(std::vector<JobRow> jobs, std::vector<StoredPart> parts,
                          std::function<void(bool stored)> done);
  // The job is gone: nothing of it is flushed any more, its rows are deleted and, with `audit`,
  // the removal of its assignment is recorded.
  void Delete(const std::string& id, std::optional<AuditRow> audit);
  // The job's part on `host` is gone: not flushed any more; if the job is still here its row
  // (the placement without the part) is written with the part's removal.
  void PartGone(const std::string& id, core::NodeId host);

 private:
  // Submits the rows of `ids` (taken out of the dirty sets; marked again on failure).
  void Flush(const std::vector<std::string>& ids);
  // The job's latest profile (or a part's report) changed: dirty now, or deferred until its
  // interval is over. `now`: forced (the planned profile or the phase changed).
  void MarkLatest(const std::string& id, bool now);
  // Deferred jobs whose interval is over become dirty.
  void PromoteDue();
  void Forget(const std::string& id);
  // Store thread: the rows with their registrations encoded.
  static std::vector<StoredJob> Encode(const std::vector<JobRow>& rows, const core::Topology& topo);

  const core::ControlLoop* loop_;
  const Rows* rows_;
  std::shared_ptr<const core::Topology> topo_;
  EventLoop* events_;
  StoreWriter* writer_;
  StoreHealth* health_;
  std::set<std::string> profiles_;  // Jobs whose latest profile is not stored yet.
  std::set<std::string> planned_;   // Jobs whose planned profile is not stored yet.
  std::set<std::string> phases_;    // Jobs whose phase (their row) is not stored yet.
  // Host parts whose latest report is not stored yet (written with their job's profile).
  std::set<std::pair<std::string, core::NodeId>> parts_;
  const core::Duration latest_interval_;
  // When each job's latest profile may be written again (set when it is marked dirty).
  std::map<std::string, core::Duration> next_latest_;
  // Jobs with a deferred latest profile, by when it is due (the key's time is next_latest_'s).
  std::set<std::pair<core::Duration, std::string>> deferred_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STORE_JOB_JOURNAL_H_
