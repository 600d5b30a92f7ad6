// JobRows: a job's store rows as the daemon has it now: the session (JobTracker: tenant, colour,
// owner, times, the placement), its phase (the control loop) and, for a multi-host job, each host
// part with its latest report (PartProfiles). The gateway builds the rows of a registration with
// it; the JobJournal reads the rows of a flush through it.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_STATE_JOB_ROWS_H_
#define CRUX_DAEMON_STATE_JOB_ROWS_H_

#include <optional>
#include <string>

#include "crux/core/control/control_loop.h"
#include "crux/core/topology/topology.h"
#include "crux/daemon/state/job_tracker.h"
#include "crux/daemon/state/part_profiles.h"
#include "crux/daemon/store/job_journal.h"
#include "crux/daemon/store/store.h"

namespace crux::daemon {

class JobRows final : public JobJournal::Rows {
 public:
  // Every pointer must outlive this; `topo` is the nominal topology.
  JobRows(const JobTracker* tracker, const PartProfiles* parts, const core::ControlLoop* loop,
          const core::Topology* topo)
      : tracker_(tracker), parts_(parts), loop_(loop), topo_(topo) {}

  // The row of a tracked job (phase kRegistered until the control loop knows the job).
  JobJournal::JobRow JobOf(const JobSession& j) const;
  // The row of the job's part on `host` (REQUIRES: j.parts has it), its latest report included.
  StoredPart PartOf(const JobSession& j, core::NodeId host) const;

  std::optional<JobJournal::JobRow> Job(const std::string& id) const override;
  std::optional<StoredPart> Part(const std::string& id, core::NodeId host) const override;
  bool HasPart(const std::string& id, core::NodeId host) const override;

 private:
  const JobTracker* tracker_;
  const PartProfiles* parts_;
  const core::ControlLoop* loop_;
  const core::Topology* topo_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STATE_JOB_ROWS_H_
