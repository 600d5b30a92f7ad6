// EnforcementCheck: whether a switch enforces what Crux planned for it, as its switch agent last
// verified (issue #29, docs/switch-adapters.md "Enforcement verification"). The agent reads back
// what the switch applied (SONiC: the QoS maps bound to its ports in ASIC_DB, and the per-queue
// counters in COUNTERS_DB) and compares it with the desired state (qos.h) and with the queues the
// plan expects traffic in. A switch can accept a map in CONFIG_DB and apply another one in the
// ASIC (sonic-buildimage #27310); this is how Crux notices.
//
// Plain comparable data; the wire form is crux.v1.EnforcementCheck (proto/crux/v1/switch.proto).
#ifndef CRUX_CORE_CONTROL_ENFORCEMENT_H_
#define CRUX_CORE_CONTROL_ENFORCEMENT_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace crux::core {

enum class EnforcementStatus {
  // Not known: the backend cannot verify (file, log), verification is off, nothing was read
  // yet, or the device data could not be read or interpreted (`detail` says why).
  kUnknown,
  kMatch,     // Every map checked matches the plan and no queue carries what the plan forbids.
  kMismatch,  // `detail` holds the first difference found.
};

// "UNKNOWN", "MATCH", "MISMATCH".
constexpr std::string_view EnforcementStatusName(EnforcementStatus s) {
  switch (s) {
    case EnforcementStatus::kMatch:
      return "MATCH";
    case EnforcementStatus::kMismatch:
      return "MISMATCH";
    case EnforcementStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

struct EnforcementCheck {
  EnforcementStatus status = EnforcementStatus::kUnknown;
  // kMismatch: the first difference ("Ethernet0 DSCP_TO_TC (ASIC_DB oid:0x14000000000615):
  // dscp 10 -> tc 0, the plan says tc 5"); kUnknown: why; kMatch: empty.
  std::string detail;
  uint32_t maps_checked = 0;    // (port, map kind) pairs compared with the plan.
  uint32_t queues_checked = 0;  // (port, queue) counter deltas judged; 0: traffic not judged.
  int64_t checked_unix_ms = 0;  // Wall time of the check; 0: never checked.
  uint64_t epoch = 0;           // The desired state's epoch it was checked against.

  friend bool operator==(const EnforcementCheck&, const EnforcementCheck&) = default;

  // Same verdict: status and detail (not the counts or the time).
  bool SameVerdict(const EnforcementCheck& o) const {
    return status == o.status && detail == o.detail;
  }
};

}  // namespace crux::core

#endif  // CRUX_CORE_CONTROL_ENFORCEMENT_H_
