// Semantic validation of every Crux v1 message, without topology knowledge.
//
// What is checked: numbers are finite and inside their documented ranges (common.proto,
// client.proto, switch.proto, admin.proto), required fields are present, ids match the id
// grammar, DSCP 0-63, traffic classes 0-7, queues 0-7 (switch queues up to 64), counts below
// the limits below. What is NOT checked: that hosts, NICs, links, switches or jobs exist - the
// daemon does that against its topology and answers UNKNOWN_HOST / UNKNOWN_JOB / NOT_FOUND.
//
// Every failure is kInvalidArgument (wire code ERROR_CODE_INVALID_ARGUMENT) with a message that
// starts with the field path, e.g.
//   "profile_report.compute_time_ns: must be > 0"
//   "register_job.placement[2].host: invalid name \"a b\" (allowed: 1-128 chars of
//   [A-Za-z0-9._:/-])"
//
// Thread-safety: pure functions.
#ifndef CRUX_PROTOCOL_VALIDATE_H_
#define CRUX_PROTOCOL_VALIDATE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/v1/envelope.pb.h"

namespace crux::protocol {

// Ids (job ids, tenants, host/NIC/switch/link names): core's name rule (core::IsValidName,
// 1..kMaxIdLength chars of [A-Za-z0-9._:/-]). Link names additionally allow '>' ("tor0->agg1").
inline constexpr size_t kMaxIdLength = core::kMaxNameLength;
// Free text (error strings, explanations, model names, versions): at most this many bytes.
inline constexpr size_t kMaxTextLength = 4096;
// Count limits per message.
inline constexpr size_t kMaxPlacementHosts = 16384;
inline constexpr size_t kMaxNicsPerHost = 64;
inline constexpr size_t kMaxGpusPerHost = 1024;
inline constexpr size_t kMaxQueuePairs = 65536;
inline constexpr size_t kMaxPeers = 65536;
inline constexpr size_t kMaxFlows = 65536;
inline constexpr size_t kMaxPathHops = 64;
inline constexpr size_t kMaxNcclEnv = 64;
// Assignments per AssignmentBatch and acks per AckBatch (issue #28: one frame per agent and epoch).
inline constexpr size_t kMaxBatchAssignments = 1024;
// Host probe results per HostTelemetry, and the bounds of one (a short datagram train).
inline constexpr size_t kMaxHostProbes = 1024;
inline constexpr uint32_t kMaxProbeTrainDatagrams = 65536;
inline constexpr uint64_t kMaxProbeTrainBytes = uint64_t{1} << 32;
inline constexpr uint64_t kMaxProbeTrainNs = uint64_t{60} * 1000 * 1000 * 1000;  // One minute.
// Leases: 0 (daemon default) or within [kMinLeaseMs, kMaxLeaseMs].
inline constexpr uint32_t kMinLeaseMs = 100;
inline constexpr uint32_t kMaxLeaseMs = 24u * 3600u * 1000u;
// Per-iteration times above this are refused (one day, in ns).
inline constexpr uint64_t kMaxIterationNs = uint64_t{24} * 3600 * 1000 * 1000 * 1000;
inline constexpr double kMaxCompressionRatio = 1000.0;

// True when `id` is 1..kMaxIdLength chars of [A-Za-z0-9._:/-].
bool IsValidId(std::string_view id);

// Dispatches on the body. An envelope with no body is invalid ("envelope.body: missing").
// Does not check protocol_version (Decode does).
core::Status Validate(const v1::Envelope& msg);

// One function per message; `field` is the path prefix used in messages (the envelope field
// name when called through Validate).
core::Status ValidateError(const v1::Error& m, std::string_view field = "error");
core::Status ValidateRegisterJob(const v1::RegisterJob& m, std::string_view field = "register_job");
core::Status ValidateRegisterJobReply(const v1::RegisterJobReply& m,
                                      std::string_view field = "register_job_reply");
core::Status ValidateProfileReport(const v1::ProfileReport& m,
                                   std::string_view field = "profile_report");
core::Status ValidateHeartbeat(const v1::Heartbeat& m, std::string_view field = "heartbeat");
core::Status ValidateEndJob(const v1::EndJob& m, std::string_view field = "end_job");
core::Status ValidateAssignment(const v1::Assignment& m, std::string_view field = "assignment");
core::Status ValidateAck(const v1::Ack& m, std::string_view field = "ack");
// 1..kMaxBatchAssignments entries, each valid; an AssignmentBatch names each job at most once.
core::Status ValidateAssignmentBatch(const v1::AssignmentBatch& m,
                                     std::string_view field = "assignment_batch");
core::Status ValidateAckBatch(const v1::AckBatch& m, std::string_view field = "ack_batch");
core::Status ValidateSwitchHello(const v1::SwitchHello& m, std::string_view field = "switch_hello");
core::Status ValidateSwitchQosState(const v1::SwitchQosState& m,
                                    std::string_view field = "switch_state");
core::Status ValidateSwitchApplied(const v1::SwitchApplied& m,
                                   std::string_view field = "switch_applied");
core::Status ValidateSwitchTelemetry(const v1::SwitchTelemetry& m,
                                     std::string_view field = "switch_telemetry");
core::Status ValidateHostTelemetry(const v1::HostTelemetry& m,
                                   std::string_view field = "host_telemetry");
core::Status ValidateJobRequest(const v1::JobRequest& m, std::string_view field = "job_request");
core::Status ValidateListLinksRequest(const v1::ListLinksRequest& m,
                                      std::string_view field = "list_links_request");
core::Status ValidateSetLinkRequest(const v1::SetLinkRequest& m,
                                    std::string_view field = "set_link_request");
// Admin replies (StatusReply, ListJobsReply, JobDetail, ...) are checked for finite numbers and
// text lengths only, through Validate().

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_VALIDATE_H_
