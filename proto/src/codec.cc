#include "crux/protocol/codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <string>
#include <utility>

namespace crux::protocol {
namespace {

using core::Status;
using core::StatusCode;

}  // namespace

std::string Encode(const v1::Envelope& msg) {
  std::string out;
  msg.SerializeToString(&out);
  return out;
}

core::Result<std::string> EncodeChecked(const v1::Envelope& msg) {
  const size_t size = msg.ByteSizeLong();
  if (size > kMaxFrameBytes) {
    return core::OutOfRangeError("envelope: " + std::to_string(size) + " bytes exceeds the " +
                                 std::to_string(kMaxFrameBytes) + "-byte frame limit");
  }
  std::string out;
  if (!msg.SerializeToString(&out)) return core::InternalError("envelope: serialisation failed");
  return out;
}

core::Result<v1::Envelope> Decode(std::string_view frame, v1::ErrorCode* error_code) {
  auto fail = [&](v1::ErrorCode code, Status status) -> core::Result<v1::Envelope> {
    if (error_code != nullptr) *error_code = code;
    return status;
  };
  if (error_code != nullptr) *error_code = v1::ERROR_CODE_UNSPECIFIED;
  if (frame.size() > kMaxFrameBytes) {
    return fail(
        v1::ERROR_CODE_TOO_LARGE,
        core::OutOfRangeError("frame: " + std::to_string(frame.size()) + " bytes exceeds the " +
                              std::to_string(kMaxFrameBytes) + "-byte limit"));
  }
  v1::Envelope msg;
  if (frame.empty() || !msg.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return fail(v1::ERROR_CODE_MALFORMED,
                core::InvalidArgumentError("frame: not a crux.v1.Envelope (" +
                                           std::to_string(frame.size()) + " bytes)"));
  }
  if (msg.protocol_version() != kProtocolVersion) {
    return fail(
        v1::ERROR_CODE_UNSUPPORTED_VERSION,
        core::FailedPreconditionError(
            "envelope.protocol_version: " + std::to_string(msg.protocol_version()) +
            " is not supported (this peer speaks " + std::to_string(kProtocolVersion) + ")"));
  }
  if (msg.body_case() == v1::Envelope::BODY_NOT_SET) {
    // Also what an Envelope with an unknown (newer) body field parses to.
    return fail(v1::ERROR_CODE_MALFORMED,
                core::InvalidArgumentError("envelope.body: missing or unknown message type"));
  }
  return msg;
}

v1::ErrorCode DecodeErrorCode(const core::Status& decode_status) {
  switch (decode_status.code()) {
    case StatusCode::kOutOfRange:
      return v1::ERROR_CODE_TOO_LARGE;
    case StatusCode::kFailedPrecondition:
      return v1::ERROR_CODE_UNSUPPORTED_VERSION;
    default:
      return v1::ERROR_CODE_MALFORMED;
  }
}

v1::ErrorCode ErrorCodeFromStatus(const core::Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return v1::ERROR_CODE_UNSPECIFIED;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return v1::ERROR_CODE_INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return v1::ERROR_CODE_NOT_FOUND;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return v1::ERROR_CODE_CONFLICT;
    case StatusCode::kUnavailable:
      return v1::ERROR_CODE_UNAVAILABLE;
    case StatusCode::kInternal:
      return v1::ERROR_CODE_INTERNAL;
  }
  return v1::ERROR_CODE_INTERNAL;
}

core::Status StatusFromError(const v1::Error& error) {
  std::string msg = std::string(ErrorCodeName(error.code())) + ": " + error.message();
  switch (error.code()) {
    case v1::ERROR_CODE_MALFORMED:
    case v1::ERROR_CODE_TOO_LARGE:
    case v1::ERROR_CODE_INVALID_ARGUMENT:
    case v1::ERROR_CODE_UNKNOWN_HOST:
      return core::InvalidArgumentError(std::move(msg));
    case v1::ERROR_CODE_UNKNOWN_JOB:
    case v1::ERROR_CODE_NOT_FOUND:
      return core::NotFoundError(std::move(msg));
    case v1::ERROR_CODE_CONFLICT:
    case v1::ERROR_CODE_PERMISSION_DENIED:
    case v1::ERROR_CODE_UNSUPPORTED_VERSION:
      return core::FailedPreconditionError(std::move(msg));
    case v1::ERROR_CODE_UNAVAILABLE:
      return core::UnavailableError(std::move(msg));
    default:
      return core::InternalError(std::move(msg));
  }
}

std::string EncodeAssignmentPush(std::string_view assignment, uint64_t state_id,
                                 uint64_t sent_unix_ns, uint64_t term) {
  v1::Assignment stamps;
  stamps.set_state_id(state_id);
  stamps.set_sent_unix_ns(sent_unix_ns);
  stamps.set_term(term);
  const std::string stamp_bytes = stamps.SerializeAsString();
  std::string out = NewEnvelope(0).SerializeAsString();
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        v1::Envelope::kAssignmentFieldNumber,
        google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint64(assignment.size() + stamp_bytes.size());
    coded.WriteRaw(assignment.data(), static_cast<int>(assignment.size()));
    coded.WriteRaw(stamp_bytes.data(), static_cast<int>(stamp_bytes.size()));
  }
  return out;
}

v1::Envelope NewEnvelope(uint64_t request_id) {
  v1::Envelope msg;
  msg.set_protocol_version(kProtocolVersion);
  msg.set_request_id(request_id);
  return msg;
}

void SetVersion(v1::Envelope* msg) { msg->set_protocol_version(kProtocolVersion); }

v1::Envelope MakeError(uint64_t request_id, v1::ErrorCode code, std::string message) {
  v1::Envelope msg = NewEnvelope(request_id);
  v1::Error* error = msg.mutable_error();
  error->set_code(code);
  error->set_message(std::move(message));
  return msg;
}

v1::Envelope MakeError(uint64_t request_id, const ProtocolError& error) {
  return MakeError(request_id, error.code, error.message);
}

v1::Envelope MakeAck(uint64_t request_id, std::string job_id, uint64_t epoch) {
  v1::Envelope msg = NewEnvelope(request_id);
  v1::Ack* ack = msg.mutable_ack();
  ack->set_job_id(std::move(job_id));
  ack->set_epoch(epoch);
  ack->set_ok(true);
  return msg;
}

std::string_view BodyName(const v1::Envelope& msg) {
  if (msg.body_case() == v1::Envelope::BODY_NOT_SET) return "none";
  const auto* field = v1::Envelope::descriptor()->FindFieldByNumber(msg.body_case());
  if (field == nullptr) return "unknown";
  return field->name();  // Descriptor strings live as long as the generated pool.
}

std::string_view ErrorCodeName(v1::ErrorCode code) {
  const std::string& name = v1::ErrorCode_Name(code);
  if (name.empty()) return "ERROR_CODE_UNKNOWN";
  return name;
}

}  // namespace crux::protocol
