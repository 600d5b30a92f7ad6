// Checks shared by the two protocol fuzzers (protocol_decode, protocol_envelope): what must hold
// for any frame / any Envelope, whatever its content. A violated property aborts (a libFuzzer
// crash), so it is reported and minimised like a sanitizer finding.
#ifndef CRUX_FUZZ_PROTOCOL_CHECKS_H_
#define CRUX_FUZZ_PROTOCOL_CHECKS_H_

#include <string_view>

#include "crux/v1/envelope.pb.h"

namespace crux::fuzz {

// Decode(frame) must not crash; when it succeeds, CheckEnvelope(decoded) holds.
void CheckFrame(std::string_view frame);

// For a decoded Envelope: Validate runs, its verdict survives Encode -> Decode (the re-encoded
// frame decodes again, to the same message and the same verdict), BodyName names the body, and
// the wire <-> core conversions of crux/protocol/convert.h and codec.h are consistent (a
// SwitchQosState accepted by SwitchQosStateFromProto converts back and forth to the same core
// state; Error bodies map to a non-OK core::Status).
void CheckEnvelope(const v1::Envelope& msg);

}  // namespace crux::fuzz

#endif  // CRUX_FUZZ_PROTOCOL_CHECKS_H_
