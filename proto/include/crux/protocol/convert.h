// Conversions between wire messages (crux::v1) and core types, shared by cruxd, the switch
// agent, cruxctl and the client library so that each mapping exists once.
//
// Thread-safety: pure functions.
#ifndef CRUX_PROTOCOL_CONVERT_H_
#define CRUX_PROTOCOL_CONVERT_H_

#include <cstdint>
#include <string>

#include "crux/core/qos.h"
#include "crux/core/status.h"
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

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_CONVERT_H_
