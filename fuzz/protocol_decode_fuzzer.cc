// Fuzz target: one raw ZeroMQ frame, as the daemon, the client library, the switch agent and
// cruxctl receive it. Runs Decode and, for every frame that decodes, Validate and the round-trip
// and conversion properties of protocol_checks.h (every message type: the body is whatever the
// bytes say). Seeds: fuzz/corpus/protocol_decode (encoded envelopes of every body type, written
// by crux_fuzz_seedgen). Dictionary: fuzz/dict/protocol_decode.dict (field tags, ids).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crux::fuzz::CheckFrame(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
