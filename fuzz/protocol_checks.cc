#include "protocol_checks.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "crux/core/base/status.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/convert.h"
#include "crux/protocol/validate.h"

namespace crux::fuzz {
namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "crux fuzz: property violated: %s %s\n", what, detail.c_str());
  std::abort();
}

// Deterministic serialisation (map entries sorted), so two equal messages give equal bytes.
std::string Canonical(const v1::Envelope& msg) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    msg.SerializeToCodedStream(&coded);
  }
  return out;
}

void CheckSwitchState(const v1::SwitchQosState& wire) {
  auto core_state = protocol::SwitchQosStateFromProto(wire);
  if (!core_state.ok()) {
    if (core_state.status().message().empty()) Fail("SwitchQosStateFromProto: empty error");
    return;
  }
  const v1::SwitchQosState back = protocol::SwitchQosStateToProto(*core_state, wire.epoch());
  auto again = protocol::SwitchQosStateFromProto(back);
  if (!again.ok()) Fail("SwitchQosStateFromProto(ToProto(s)) failed:", again.status().ToString());
  if (!(*again == *core_state)) Fail("SwitchQosState wire<->core round trip changed the state");
  // A state that passes both checks converts back to a wire state that passes them again.
  if (protocol::ValidateSwitchQosState(wire).ok()) {
    if (core::Status v = protocol::ValidateSwitchQosState(back); !v.ok()) {
      Fail("ValidateSwitchQosState(ToProto(FromProto(valid state))) failed:", v.ToString());
    }
  }
}

}  // namespace

void CheckEnvelope(const v1::Envelope& msg) {
  const core::Status verdict = protocol::Validate(msg);
  if (!verdict.ok() && verdict.code() != core::StatusCode::kInvalidArgument) {
    Fail("Validate returned a code other than kInvalidArgument:", verdict.ToString());
  }
  if (!verdict.ok() && verdict.message().empty()) Fail("Validate: error without a message");
  if (protocol::BodyName(msg).empty()) Fail("BodyName: empty");

  // Encode -> Decode round trip: a decoded message re-encodes to a frame that decodes again to
  // the same message with the same verdict.
  const std::string frame = protocol::Encode(msg);
  if (msg.protocol_version() == protocol::kProtocolVersion &&
      msg.body_case() != v1::Envelope::BODY_NOT_SET && frame.size() <= protocol::kMaxFrameBytes) {
    v1::ErrorCode code = v1::ERROR_CODE_UNSPECIFIED;
    auto again = protocol::Decode(frame, &code);
    if (!again.ok()) Fail("Decode(Encode(m)) failed:", again.status().ToString());
    if (code != v1::ERROR_CODE_UNSPECIFIED) Fail("Decode success with an error code");
    if (Canonical(*again) != Canonical(msg)) Fail("Decode(Encode(m)) != m");
    // Same verdict; the message may name another offending entry of the same map, since map
    // iteration order is not part of the encoding.
    const core::Status verdict_again = protocol::Validate(*again);
    if (verdict_again.ok() != verdict.ok() || verdict_again.code() != verdict.code()) {
      Fail("Validate verdict changed across Encode/Decode:",
           verdict.ToString() + " vs " + verdict_again.ToString());
    }
    auto checked = protocol::EncodeChecked(msg);
    if (!checked.ok()) Fail("EncodeChecked failed on a frame within the limit");
  }

  switch (msg.body_case()) {
    case v1::Envelope::kError: {
      const core::Status s = protocol::StatusFromError(msg.error());
      if (s.ok()) Fail("StatusFromError returned OK");
      if (protocol::ErrorCodeName(msg.error().code()).empty()) Fail("ErrorCodeName: empty");
      // The daemon-side mapping never yields UNSPECIFIED for an error.
      if (protocol::ErrorCodeFromStatus(s) == v1::ERROR_CODE_UNSPECIFIED) {
        Fail("ErrorCodeFromStatus(non-OK) is UNSPECIFIED");
      }
      break;
    }
    case v1::Envelope::kSwitchState:
      CheckSwitchState(msg.switch_state());
      break;
    case v1::Envelope::kSwitchApplied:
      CheckSwitchState(msg.switch_applied().state());
      break;
    case v1::Envelope::kAssignment:
      (void)protocol::JobStateName(msg.assignment().state());
      break;
    case v1::Envelope::kListJobsReply:
      for (const auto& j : msg.list_jobs_reply().jobs()) (void)protocol::JobStateName(j.state());
      break;
    default:
      break;
  }
}

void CheckFrame(std::string_view frame) {
  v1::ErrorCode code = v1::ERROR_CODE_UNSPECIFIED;
  auto msg = protocol::Decode(frame, &code);
  if (!msg.ok()) {
    if (code == v1::ERROR_CODE_UNSPECIFIED) Fail("Decode failure without an error code");
    if (protocol::DecodeErrorCode(msg.status()) != code) {
      Fail("DecodeErrorCode(status) differs from Decode's error code");
    }
    return;
  }
  CheckEnvelope(*msg);
}

}  // namespace crux::fuzz
