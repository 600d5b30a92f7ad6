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

#include <cstddef>
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

  // Same verdict: the same status and the same detail with the numbers in it aside (a queue's
  // rate, a packet count change with every check; not the counts or the time either). What the
  // agent reports at once and cruxd logs is a changed verdict.
  bool SameVerdict(const EnforcementCheck& o) const {
    return status == o.status && EqualNumbersAside(detail, o.detail);
  }

  // `a` and `b` are equal where every run of decimal digits counts as equal to any other.
  static constexpr bool EqualNumbersAside(std::string_view a, std::string_view b) {
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
      if (digit(a[i]) && digit(b[j])) {
        while (i < a.size() && digit(a[i])) ++i;
        while (j < b.size() && digit(b[j])) ++j;
        continue;
      }
      if (a[i] != b[j]) return false;
      ++i;
      ++j;
    }
    return i == a.size() && j == b.size();
  }
};

}  // namespace crux::core

#endif  // CRUX_CORE_CONTROL_ENFORCEMENT_H_
