// SwitchAdapter: the one interface through which Crux makes a switch enforce its desired QoS state
// (crux::core::SwitchQosState, computed by core/qos.h). Backends live in their own folders:
//
//   sonic/  SonicAdapter — SONiC CONFIG_DB (Redis db 4) through hiredis; diff-based, one
//           MULTI/EXEC per apply, can emit the equivalent `config apply-patch` JSON Patch.
//   file/   FileAdapter  — the state as a JSON file per switch, written atomically (GitOps).
//   log/    LogAdapter   — dry run: logs what it would apply.
//
// Contract of every backend:
//   * Apply(desired) makes the device hold `desired` (the whole state, not a delta). It is
//     idempotent: applying the state the device already holds writes nothing (writes == 0). It is
//     transactional where the capability says so: on error the device keeps its previous state
//     whole, never a mix. It returns what it wrote.
//   * ReadBack() returns the state the device holds now (as far as the backend owns it);
//     kNotFound when nothing was ever applied.
//   * Health() is OK when the device is reachable and usable; kUnavailable otherwise.
//   * Errors are Status values (kUnavailable: the device is unreachable or timed out, retrying
//     may help; kInvalidArgument: a malformed desired state, naming the field; kFailedPrecondition:
//     the device holds data the backend cannot interpret, naming the key).
//
// Thread-safety: an adapter is NOT thread-safe; one owner thread calls it (the switch agent's
// loop). Distinct adapters may be used from distinct threads.
#ifndef CRUX_SWITCH_ADAPTERS_ADAPTER_H_
#define CRUX_SWITCH_ADAPTERS_ADAPTER_H_

#include <string>
#include <vector>

#include "crux/core/qos.h"
#include "crux/core/status.h"

namespace crux::switch_adapters {

struct Capabilities {
  std::string backend;  // "sonic", "file", "log".
  int queues = 8;       // Hardware queues per port the backend can program.
  bool strict_priority = true;
  bool dwrr = true;
  bool pfc = false;            // Writes pfc_enable.
  bool pbr_redirect = false;   // Can pin paths with ACL/PBR (no backend does yet).
  bool transactional = false;  // Apply is all-or-nothing on the device.
};

// What one Apply() did.
struct ApplyResult {
  int writes = 0;    // Fields (or files) written.
  int deletes = 0;   // Fields or keys removed (only ones the backend owns).
  int attempts = 1;  // Tries, including retries after connection errors or conflicts.
  // Human-readable operations in the order they were sent, e.g.
  // "HSET DSCP_TO_TC_MAP|CRUX 10 5", "DEL SCHEDULER|crux_q7", "write /etc/crux/tor0.json".
  std::vector<std::string> operations;

  bool changed() const { return writes + deletes > 0; }
};

class SwitchAdapter {
 public:
  virtual ~SwitchAdapter() = default;

  virtual Capabilities capabilities() const = 0;
  // See the file comment. `desired` must pass core::ValidateSwitchQosState (checked).
  virtual core::Result<ApplyResult> Apply(const core::SwitchQosState& desired) = 0;
  virtual core::Result<core::SwitchQosState> ReadBack() = 0;
  virtual core::Status Health() = 0;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_ADAPTER_H_
