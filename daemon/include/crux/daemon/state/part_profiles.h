// PartProfiles: the latest report of every host part of every multi-host job (core types,
// converted once at the gateway), and the merge of a job's parts into its one profile
// (core::MergeHostParts, docs/daemon.md "Multi-host jobs"). Who the parts are (hosts, NICs,
// connections) is the JobTracker's; what they measured is kept here; what the job is planned
// as is the control loop's (the gateway feeds it the merged profile).
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_STATE_PART_PROFILES_H_
#define CRUX_DAEMON_STATE_PART_PROFILES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/model/host_parts.h"
#include "crux/core/topology/topology.h"
#include "crux/daemon/state/job_tracker.h"

namespace crux::daemon {

struct PartReportEntry {
  core::HostPartReport report;
  int64_t received_ms = 0;  // Unix ms (0: restored from the store).
};

class PartProfiles {
 public:
  // The part on `host` of `job_id` reported (replaces its previous report).
  void Set(const std::string& job_id, core::NodeId host, core::HostPartReport report,
           int64_t unix_ms);
  // The part left (its report goes with it). Unknown ids are ignored.
  void Erase(const std::string& job_id, core::NodeId host);
  // The job is gone.
  void EraseJob(const std::string& job_id);

  // The reports of `job_id`'s parts by host (null: none).
  const std::map<core::NodeId, PartReportEntry>* Of(const std::string& job_id) const;
  const PartReportEntry* Find(const std::string& job_id, core::NodeId host) const;

  // Merges the reports of the parts `j` has now (a part without a report counts as not
  // reporting; reports of parts `j` no longer has are ignored) and keeps the statistics for
  // cruxctl (LastStats). `topo`: the nominal topology (the parts' NICs).
  core::HostPartMerge Merge(const JobSession& j, const core::Topology& topo);
  // The statistics of the last Merge of `job_id` (null: never merged).
  const core::HostPartMergeStats* LastStats(const std::string& job_id) const;

  size_t jobs() const { return jobs_.size(); }

 private:
  struct JobParts {
    std::map<core::NodeId, PartReportEntry> reports;
    std::optional<core::HostPartMergeStats> stats;
  };
  std::map<std::string, JobParts> jobs_;
};

// What the agent of a multi-host job's part on `host` receives: `a` (same epoch) cut to the part's
// host (core::SplitAssignmentByHost: the header and the flows leaving the host's NICs).
core::AppliedAssignment PartAssignment(const core::AppliedAssignment& a, const core::Topology& topo,
                                       core::NodeId host);

// One connected part's cut of an assignment, for its agent's connection `peer`.
struct PartCut {
  std::string peer;
  std::shared_ptr<const core::AppliedAssignment> cut;
  bool accepts_batches = false;  // PartSession::accepts_batches.
};

// Every connected part of `j` (JobTracker::PeersOf order) with its cut of `a` (as
// PartAssignment): splits the flows once for all parts.
std::vector<PartCut> PartAssignments(const JobSession& j, const core::AppliedAssignment& a,
                                     const core::Topology& topo);

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STATE_PART_PROFILES_H_
