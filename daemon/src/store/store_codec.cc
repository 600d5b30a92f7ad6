#include "crux/daemon/store/store_codec.h"

#include <utility>

#include "crux/protocol/convert.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {
namespace {

core::Status DoesNotParse(const char* what) {
  return core::InvalidArgumentError(std::string(what) + " does not parse");
}

core::Status DoesNotFit(const protocol::ProtocolError& bad) {
  return core::InvalidArgumentError("does not fit the topology (" + bad.message + ")");
}

}  // namespace

std::string StoreCodec::EncodeRegistration(const core::JobDemand& demand) const {
  return protocol::DemandToProto(demand, *topo_).SerializeAsString();
}

core::Result<core::JobDemand> StoreCodec::DecodeRegistration(const StoredJob& row) const {
  v1::RegisterJob reg;
  if (!reg.ParseFromString(row.registration) || reg.job_id() != row.job_id) {
    return DoesNotParse("stored registration");
  }
  core::JobDemand demand;
  if (protocol::ProtocolError bad = protocol::DemandFromProto(reg, *topo_, &demand);
      protocol::Failed(bad)) {
    return core::InvalidArgumentError(bad.message);
  }
  return demand;
}

int StoreCodec::EncodePhase(core::JobPhase phase) { return protocol::JobPhaseToProto(phase); }

std::string StoreCodec::EncodeProfile(const std::string& job_id,
                                      const core::JobProfile& profile) const {
  return protocol::ProfileToProto(job_id, profile, *topo_).SerializeAsString();
}

core::Result<core::JobProfile> StoreCodec::DecodeProfile(const std::string& blob,
                                                         const core::JobDemand& demand) const {
  v1::ProfileReport report;
  if (!report.ParseFromString(blob)) return core::InvalidArgumentError("does not parse");
  core::JobProfile profile;
  if (protocol::ProtocolError bad = protocol::ProfileFromProto(report, *topo_, demand, &profile);
      protocol::Failed(bad)) {
    return DoesNotFit(bad);
  }
  return profile;
}

std::string StoreCodec::EncodePartRegistration(const core::JobDemand& job,
                                               const core::PlacementHost& part,
                                               const core::HostPartInfo& info) const {
  return protocol::PartRegistrationToProto(job, part, info, *topo_).SerializeAsString();
}

core::Result<StoreCodec::DecodedPart> StoreCodec::DecodePartRegistration(
    const StoredPart& row) const {
  v1::RegisterJob reg;
  if (!reg.ParseFromString(row.registration) || reg.job_id() != row.job_id ||
      !reg.has_host_part() || reg.placement_size() != 1) {
    return DoesNotParse("stored part registration");
  }
  DecodedPart part;
  if (protocol::ProtocolError bad = protocol::DemandFromProto(reg, *topo_, &part.demand);
      protocol::Failed(bad)) {
    return core::InvalidArgumentError(bad.message);
  }
  part.info = protocol::HostPartInfoFromProto(reg.host_part());
  return part;
}

std::string StoreCodec::EncodePartReport(const std::string& job_id, core::NodeId host,
                                         const core::HostPartReport& report) const {
  return protocol::PartReportToProto(job_id, host, report, *topo_).SerializeAsString();
}

core::Result<core::HostPartReport> StoreCodec::DecodePartReport(const std::string& blob,
                                                                const core::JobDemand& demand,
                                                                core::NodeId host) const {
  v1::ProfileReport report;
  if (!report.ParseFromString(blob)) return core::InvalidArgumentError("does not parse");
  core::HostPartReport part;
  if (protocol::ProtocolError bad =
          protocol::PartReportFromProto(report, *topo_, demand, host, &part);
      protocol::Failed(bad)) {
    return core::InvalidArgumentError(bad.message);
  }
  return part;
}

PlanRow StoreCodec::EncodePlanRow(const core::AppliedAssignment& applied) const {
  const core::Assignment& a = applied.assignment;
  return {a.job_id, a.level, a.dscp, applied.epoch,
          protocol::AssignmentToProto(applied, *topo_).SerializeAsString()};
}

core::Result<core::AppliedAssignment> StoreCodec::DecodeAssignment(const std::string& blob) const {
  v1::Assignment a;
  if (!a.ParseFromString(blob)) return core::InvalidArgumentError("does not parse");
  core::Result<core::AppliedAssignment> applied = protocol::AssignmentFromProto(a, *topo_);
  if (!applied.ok()) {
    return core::InvalidArgumentError("does not fit the topology (" + applied.status().ToString() +
                                      ")");
  }
  return applied;
}

}  // namespace crux::daemon
