// Framing of the Crux wire protocol: one protobuf `crux.v1.Envelope` per ZeroMQ frame.
//
// Encode/Decode are the only places that turn bytes into messages. Decode never throws and
// never returns a partially checked message: a frame is either a parsed Envelope of a supported
// protocol version, no larger than kMaxFrameBytes, or an error whose wire code is known:
//
//   frame size > kMaxFrameBytes      -> ERROR_CODE_TOO_LARGE         (core kOutOfRange)
//   not a parseable Envelope / no body -> ERROR_CODE_MALFORMED       (core kInvalidArgument)
//   protocol_version != 1            -> ERROR_CODE_UNSUPPORTED_VERSION (core kFailedPrecondition)
//
// Decode checks syntax only; crux/protocol/validate.h checks the values (NaN, ranges, ids).
//
// Thread-safety: every function here is pure and may be called from any thread.
#ifndef CRUX_PROTOCOL_CODEC_H_
#define CRUX_PROTOCOL_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "crux/core/base/status.h"
#include "crux/v1/envelope.pb.h"

namespace crux::protocol {

// Largest Envelope frame accepted or produced (1 MiB).
inline constexpr size_t kMaxFrameBytes = size_t{1} << 20;
// The protocol version this library speaks (crux.v1.PROTOCOL_VERSION_1).
inline constexpr uint32_t kProtocolVersion = v1::PROTOCOL_VERSION_1;

// A wire error: what an Error body carries.
struct ProtocolError {
  v1::ErrorCode code = v1::ERROR_CODE_UNSPECIFIED;
  std::string message;
  // Security refusals (identity, role, ownership, connection, quota): the reason they are
  // counted and logged under (docs/protocol.md "Refusals"); "" for ordinary errors. Not sent.
  std::string reason = {};
};
// True when `e` is an error (code != ERROR_CODE_UNSPECIFIED).
inline bool Failed(const ProtocolError& e) { return e.code != v1::ERROR_CODE_UNSPECIFIED; }

// Serialises `msg` as one frame. Does not check the size: callers that must not emit oversize
// frames use EncodeChecked (the transports do).
std::string Encode(const v1::Envelope& msg);

// Like Encode, but fails with kOutOfRange ("envelope: N bytes exceeds the 1048576-byte frame
// limit") when the frame would be larger than kMaxFrameBytes.
core::Result<std::string> EncodeChecked(const v1::Envelope& msg);

// Parses one frame (see the table at the top of the file). When `error_code` is non-null it
// receives the precise wire code of a failure (ERROR_CODE_UNSPECIFIED on success).
core::Result<v1::Envelope> Decode(std::string_view frame, v1::ErrorCode* error_code = nullptr);

// Wire code of a Decode failure status (kOutOfRange -> TOO_LARGE, kFailedPrecondition ->
// UNSUPPORTED_VERSION, anything else -> MALFORMED).
v1::ErrorCode DecodeErrorCode(const core::Status& decode_status);

// Wire code for a general core::Status produced while handling a request:
// kInvalidArgument/kOutOfRange -> INVALID_ARGUMENT, kNotFound -> NOT_FOUND, kAlreadyExists and
// kFailedPrecondition -> CONFLICT, kUnavailable -> UNAVAILABLE, kInternal/other -> INTERNAL.
v1::ErrorCode ErrorCodeFromStatus(const core::Status& status);

// The core::Status a receiver of an Error body should surface: message
// "ERROR_CODE_UNKNOWN_HOST: <message>", code mapped back (INVALID_ARGUMENT/MALFORMED/TOO_LARGE/
// UNKNOWN_HOST -> kInvalidArgument, UNKNOWN_JOB/NOT_FOUND -> kNotFound, CONFLICT ->
// kFailedPrecondition, PERMISSION_DENIED -> kFailedPrecondition, UNSUPPORTED_VERSION ->
// kFailedPrecondition, UNAVAILABLE -> kUnavailable, others -> kInternal).
core::Status StatusFromError(const v1::Error& error);

// The frame of an Assignment push (request_id 0) from an Assignment serialized earlier (e.g. on
// a worker thread), with state_id and sent_unix_ns stamped now: the encoding of
// NewEnvelope(0) with `assignment` merged with {state_id, sent_unix_ns} (protobuf's documented
// rule: concatenated encodings parse as the merge, the last value of a scalar wins), without
// parsing or re-serializing the assignment. Does not check the size (the transport does).
// `term` (HA: the leader's term, Assignment.term) is merged too when non-zero.
std::string EncodeAssignmentPush(std::string_view assignment, uint64_t state_id,
                                 uint64_t sent_unix_ns, uint64_t term = 0);

// An empty envelope with protocol_version set and the given request id.
v1::Envelope NewEnvelope(uint64_t request_id = 0);

// Sets protocol_version = kProtocolVersion on `msg`.
void SetVersion(v1::Envelope* msg);

// An Error reply.
v1::Envelope MakeError(uint64_t request_id, v1::ErrorCode code, std::string message);
v1::Envelope MakeError(uint64_t request_id, const ProtocolError& error);

// A positive Ack reply (Ack.ok = true) for a ProfileReport, Heartbeat, EndJob, ... request.
v1::Envelope MakeAck(uint64_t request_id, std::string job_id = {}, uint64_t epoch = 0);

// The oneof field name of the body ("profile_report", "status_request", ...) or "none".
// Stable: used as a metric label.
std::string_view BodyName(const v1::Envelope& msg);

// Name of a wire error code, e.g. "ERROR_CODE_TOO_LARGE".
std::string_view ErrorCodeName(v1::ErrorCode code);

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_CODEC_H_
