// Conversions between wire messages (crux::v1) and core types, shared by cruxd, the switch
// agent, cruxctl and the client library so that each mapping exists once.
//
// Thread-safety: pure functions.
#ifndef CRUX_PROTOCOL_CONVERT_H_
#define CRUX_PROTOCOL_CONVERT_H_

#include <cstdint>
#include <string>

#include "crux/core/base/status.h"
#include "crux/core/control/enforcement.h"
#include "crux/core/control/qos.h"
#include "crux/core/faults/fault_manager.h"
#include "crux/core/model/control_types.h"
#include "crux/core/model/host_parts.h"
#include "crux/core/topology/link_name.h"
#include "crux/core/topology/topology.h"
#include "crux/protocol/codec.h"
#include "crux/v1/admin.pb.h"
#include "crux/v1/client.pb.h"
#include "crux/v1/common.pb.h"
#include "crux/v1/switch.pb.h"

namespace crux::protocol {

// Lower-case name of a job state: "registered", "profiling", "scheduled", "gone",
// "unspecified" for anything else.
std::string JobStateName(v1::JobState state);

// The desired QoS state of one switch on the wire, stamped with `epoch`.
v1::SwitchQosState SwitchQosStateToProto(const core::SwitchQosState& state, uint64_t epoch);

// The wire state as a core state (schedulers sorted by queue, pfc_enable sorted), validated
// with core::ValidateSwitchQosState. Errors name the field ("switch_state.schedulers[0].type").
core::Result<core::SwitchQosState> SwitchQosStateFromProto(const v1::SwitchQosState& state);

// An enforcement check on the wire (issue #29). The detail is made safe to send, so the message
// always passes validation: printable text of at most kMaxEnforcementDetailSent bytes is sent as
// it is; anything else (device data quoted in it may hold any byte) is cut to its first
// kMaxEnforcementDetail bytes (then " ...") and escaped with core::EscapeForTerminal. A detail
// that went through once passes unchanged the next time (agent -> cruxd -> cruxctl).
inline constexpr size_t kMaxEnforcementDetail = 512;
inline constexpr size_t kMaxEnforcementDetailSent = 4 * kMaxEnforcementDetail + 4;
v1::EnforcementCheck EnforcementCheckToProto(const core::EnforcementCheck& check);
// A validated wire check as a core one (an unknown status value is UNKNOWN).
core::EnforcementCheck EnforcementCheckFromProto(const v1::EnforcementCheck& check);

// ---- jobs (cruxd's gateway and its store codec) ----
// Every *FromProto checks the message against the topology and answers a wire refusal: the code
// a client branches on (UNKNOWN_HOST for a name that is not the right kind of node,
// INVALID_ARGUMENT otherwise) and a message naming the field ("register_job.placement[1].host:
// 'host99' is not a host of the topology"). A refusal leaves *out unspecified. Field validation
// (validate.h) is assumed done; these add only what needs the topology.

// Placement (hosts exist, appear once, NICs belong to their host, GPUs within the host's count
// when the topology knows it), QPs' NICs, pattern.
ProtocolError DemandFromProto(const v1::RegisterJob& r, const core::Topology& topo,
                              core::JobDemand* out);
// The NIC names of a job's last accepted report and the nodes they resolved to. A report naming
// the same NICs in the same order (every report of a running job) is converted without topology
// lookups. Valid for one (topology, demand) pair: drop it when the job re-registers.
struct PeerNameCache {
  std::vector<std::string> names;  // Per peer: local, remote.
  std::vector<core::NodeId> ids;   // Same order.
};

// Peers are NICs (or hosts) on one of `demand`'s hosts, local != remote. With `cache`, names
// equal to the cached ones at the same position reuse the cached nodes (already checked for this
// demand), and an accepted report replaces the cache.
ProtocolError ProfileFromProto(const v1::ProfileReport& p, const core::Topology& topo,
                               const core::JobDemand& demand, core::JobProfile* out,
                               PeerNameCache* cache = nullptr);
// Inverses, for the store (names from `topo`; ids must be nodes of `topo`).
v1::RegisterJob DemandToProto(const core::JobDemand& d, const core::Topology& topo);
v1::ProfileReport ProfileToProto(const std::string& job_id, const core::JobProfile& p,
                                 const core::Topology& topo);

// ---- host parts of multi-host jobs (core/host_parts.h; crux-hostd's reports) ----
// A part's report: ProfileFromProto against the job's `demand` (the union of its parts; no
// cache), the local NIC of every explicit peer on `part_host` (a part reports only what leaves
// its own host), and its communicators. Field validation (validate.h) is assumed done.
ProtocolError PartReportFromProto(const v1::ProfileReport& p, const core::Topology& topo,
                                  const core::JobDemand& demand, core::NodeId part_host,
                                  core::HostPartReport* out);
// Inverse, for the store: the report with host_part.host set.
v1::ProfileReport PartReportToProto(const std::string& job_id, core::NodeId part_host,
                                    const core::HostPartReport& r, const core::Topology& topo);
// A part's registration, for the store: the job's fields (`job`), placement = `part` only, and
// the HostPart. DemandFromProto of it gives the part back (placement[0]).
v1::RegisterJob PartRegistrationToProto(const core::JobDemand& job, const core::PlacementHost& part,
                                        const core::HostPartInfo& info, const core::Topology& topo);
core::HostPartInfo HostPartInfoFromProto(const v1::HostPart& h);

v1::JobState JobPhaseToProto(core::JobPhase p);
v1::LinkHealth LinkHealthToProto(core::LinkHealth h);
// UNSPECIFIED and unknown values are kInvalidArgument.
core::Result<core::LinkHealth> LinkHealthFromProto(v1::LinkHealth h);

// The wire form of an applied assignment (names from `topo`; epoch from the entry; state_id and
// sent_unix_ns are the pusher's to stamp).
v1::Assignment AssignmentToProto(const core::AppliedAssignment& a, const core::Topology& topo);
// The stored form back (a restart): names resolved against `topo`; a flow whose NICs or path
// do not exist in `topo` any more is an error naming it (the caller drops the entry, so the
// job gets a fresh assignment).
core::Result<core::AppliedAssignment> AssignmentFromProto(const v1::Assignment& a,
                                                          const core::Topology& topo);

// ---- faults (issue #14, docs/faults.md) ----

// A switch's port telemetry as fault-manager signals. Each port with a neighbour is placed on
// the topology link switch <-> neighbour: its oper_status gives one LinkStateSignal per
// direction; its counters two CounterSignals (in_* errors/discards and FEC uncorrectable frames
// on neighbour->switch, out_* errors/discards, queue drops and ECN marks on switch->neighbour;
// PFC pause frames received on switch->neighbour, sent on neighbour->switch). Errors: the switch
// is not a switch of `topo` (UNKNOWN_HOST). A port whose neighbour is empty, unknown or not
// adjacent is not an error (the rest of the report still counts): it is named in *ignored
// ("Ethernet8: neighbour 'agg9' is not a node of the topology").
struct TelemetrySignals {
  std::vector<core::LinkStateSignal> states;
  std::vector<core::CounterSignal> counters;
  std::vector<std::string> ignored;
};
ProtocolError TelemetryFromProto(const v1::SwitchTelemetry& t, const core::Topology& topo,
                                 TelemetrySignals* out);

// A host's NIC counter report (crux-hostd) as fault-manager signals: per NIC, loss = the sum
// of the loss-side counters, congestion = the sum of the congestion-side ones (saturating at
// 2^64-1), interval as sent (validated to (0, 1 day]), source "host3 mlx5_0 port 1". Errors:
// `host` is not a host of `topo` (UNKNOWN_HOST); a NIC that is a node of the topology but not
// a NIC of `host` (INVALID_ARGUMENT naming the field: a host speaks only for its own NICs). A NIC
// name the topology does not know is not an error: it is named in *ignored and skipped.
// Field validation (validate.h ValidateHostTelemetry) is assumed done.
struct NicSignals {
  std::vector<core::NicCounterSignal> nics;
  std::vector<std::string> ignored;  // Per skipped NIC: "host3/nic9: not a NIC of the topology".
};
ProtocolError NicSignalsFromProto(const v1::HostTelemetry& t, const core::Topology& topo,
                                  NicSignals* out);

// A host's probe results (crux-hostd's capacity probes, HostTelemetry.probes) as fault-manager
// samples (core::FlowSample with probe set: bytes and transfer time as sent; a lost train is
// errors 1, bytes 0). Per probe, what the topology alone can judge: both NICs must be NICs of
// `topo` and the source one a NIC of `host`; a probe that is not is rejected (*rejected[i], its
// wire error naming the field) and the others still count. The host itself must be a host of
// `topo` (UNKNOWN_HOST for the whole report). Whether the job may be spoken for by this host
// is the caller's (the daemon's sessions). Field validation (ValidateHostTelemetry) is assumed
// done.
struct HostProbeSample {
  int index = 0;  // In HostTelemetry.probes.
  std::string job_id;
  core::FlowSample sample;
  bool sender_limited = false;  // HostProbeResult.sender_limited: a lower bound only.
};
struct HostProbeSamples {
  std::vector<HostProbeSample> probes;
  std::vector<ProtocolError> rejected;  // One per rejected probe, in order.
};
ProtocolError HostProbesFromProto(const v1::HostTelemetry& t, const core::Topology& topo,
                                  HostProbeSamples* out);

// A heartbeat's per-flow stats as fault-manager samples. Flows whose NICs are not nodes of
// `topo`, or whose source NIC is not on one of `demand`'s hosts, are skipped and counted in
// *skipped (the heartbeat itself stays valid: it is the job's keep-alive).
std::vector<core::FlowSample> FlowSamplesFromProto(const v1::Heartbeat& h,
                                                   const core::Topology& topo,
                                                   const core::JobDemand& demand, size_t* skipped);
// The inverse (for tests and the load generator): names from `topo`, the window given.
v1::FlowStats FlowStatsToProto(const core::FlowSample& s, core::Duration window,
                               const core::Topology& topo);

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_CONVERT_H_
