// JSON form of a SwitchQosState, shared by the file and log backends (and the agent's status):
//
//   {"switch": "tor0",
//    "dscp_to_tc": {"0": 0, ..., "63": 0},
//    "tc_to_queue": {"0": 0, ...},
//    "schedulers": [{"queue": 0, "type": "DWRR", "weight": 10}, {"queue": 5, "type": "STRICT"}],
//    "pfc_enable": [2, 3, 4, 5],
//    "jobs": ["a", "b"]}
//
// Thread-safety: pure functions.
#ifndef CRUX_SWITCH_ADAPTERS_STATE_JSON_H_
#define CRUX_SWITCH_ADAPTERS_STATE_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/control/qos.h"

namespace crux::switch_adapters {

// Pretty-printed (2-space indent), keys in a stable order, trailing newline.
std::string StateToJson(const core::SwitchQosState& state);

// Parses and validates (core::ValidateSwitchQosState). Errors name the field, prefixed by
// `source` (e.g. a file name): "tor0.json: schedulers[1].weight: ...".
core::Result<core::SwitchQosState> StateFromJson(std::string_view text, std::string_view source);

// Human-readable differences between two device states ("dscp_to_tc[10]: 0 -> 5",
// "schedulers[q7]: removed"), in a stable order. Empty when SameDeviceState.
std::vector<std::string> DescribeDifferences(const core::SwitchQosState& from,
                                             const core::SwitchQosState& to);

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_STATE_JSON_H_
