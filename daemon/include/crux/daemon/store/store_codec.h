// StoreCodec: the one place where cruxd's store rows meet protobuf. The store keeps job
// registrations, profiles, host parts and applied assignments as serialized crux.v1 messages
// (store.h); the codec turns core values into those blobs and back, naming nodes after one
// topology (the nominal one: names do not change with link health).
//
// Decoding checks each blob against the topology, as the gateway checks the wire
// (crux/protocol/convert.h). A blob that does not parse, or names what the topology does not
// have, is a kInvalidArgument error that says which ("does not parse", "does not fit the
// topology (...)"); the caller logs it and leaves the row in the state file (restore.cc).
//
// Who encodes where: the worker encodes a plan's rows (PlanEngine), the store thread the
// registrations and profiles of a flush (JobJournal), the loop what is cheap or cannot wait.
//
// Thread-safety: immutable; usable from any thread while its topology lives.
#ifndef CRUX_DAEMON_STORE_STORE_CODEC_H_
#define CRUX_DAEMON_STORE_STORE_CODEC_H_

#include <string>

#include "crux/core/base/status.h"
#include "crux/core/model/control_types.h"
#include "crux/core/model/host_parts.h"
#include "crux/core/topology/topology.h"
#include "crux/daemon/store/store.h"

namespace crux::daemon {

class StoreCodec {
 public:
  // `topo` must outlive the codec.
  explicit StoreCodec(const core::Topology& topo) : topo_(&topo) {}

  // ---- jobs (the `jobs` and `profiles` tables) ----
  // StoredJob::registration: a crux.v1.RegisterJob.
  std::string EncodeRegistration(const core::JobDemand& demand) const;
  // The registration of `row`, which must name row.job_id.
  core::Result<core::JobDemand> DecodeRegistration(const StoredJob& row) const;
  // StoredJob::state: the crux.v1.JobState number of a phase.
  static int EncodePhase(core::JobPhase phase);
  // A profile (latest or planned): a crux.v1.ProfileReport.
  std::string EncodeProfile(const std::string& job_id, const core::JobProfile& profile) const;
  // A stored profile of the job registered as `demand` (its peers must be on its hosts).
  core::Result<core::JobProfile> DecodeProfile(const std::string& blob,
                                               const core::JobDemand& demand) const;

  // ---- host parts of multi-host jobs (the `job_parts` table) ----
  // StoredPart::registration: the job's fields with `part` as the only placement, and `info`.
  std::string EncodePartRegistration(const core::JobDemand& job, const core::PlacementHost& part,
                                     const core::HostPartInfo& info) const;
  struct DecodedPart {
    core::JobDemand demand;  // The part alone: placement[0] is its host.
    core::HostPartInfo info;
  };
  // The registration of `row`: it must name row.job_id and carry one host and its HostPart.
  core::Result<DecodedPart> DecodePartRegistration(const StoredPart& row) const;
  // StoredPart::report: the part's latest report.
  std::string EncodePartReport(const std::string& job_id, core::NodeId host,
                               const core::HostPartReport& report) const;
  // A stored report of the part on `host` of the job registered as `demand` (every part).
  core::Result<core::HostPartReport> DecodePartReport(const std::string& blob,
                                                      const core::JobDemand& demand,
                                                      core::NodeId host) const;

  // ---- the applied plan (the `plan` table) ----
  // The row of an applied assignment: its level, colour and epoch, and the assignment as a
  // crux.v1.Assignment (what a push sends as is: Enforcer::Push).
  PlanRow EncodePlanRow(const core::AppliedAssignment& applied) const;
  core::Result<core::AppliedAssignment> DecodeAssignment(const std::string& blob) const;

 private:
  const core::Topology* topo_;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STORE_STORE_CODEC_H_
