// SwitchAdapter: the one interface through which Crux makes a switch enforce its desired QoS state
// (crux::core::SwitchQosState, computed by core/qos.h). Backends live in their own folders and are
// picked by name through the registry (registry.h):
//
//   sonic/  SonicAdapter: SONiC CONFIG_DB (Redis db 4). A pure schema module (config_db_schema.h:
//           state <-> hash fields, diff, JSON Patch) plus one hiredis session (redis_session.h).
//   file/   FileAdapter: the state as a JSON file per switch, written atomically (GitOps).
//   log/    LogAdapter: dry run, logs what it would apply.
//
// Contract of every backend:
//   * Apply(desired) makes the device hold `desired` (the whole state, not a delta) in ONE attempt:
//     a backend never retries or sleeps (the switch agent owns retries, with core/backoff.h). It is
//     idempotent: applying the state the device already holds writes nothing (writes == 0), so it
//     can be called on a timer to repair drift. It is transactional where the capability says so:
//     on error the device keeps its previous state whole, never a mix. It returns what it changed;
//     writes + deletes is the number of device fields that differed from `desired` before the call.
//   * ReadBack() returns the state the device holds now (as far as the backend owns it);
//     kNotFound when nothing was ever applied.
//   * Health() is OK when the device is reachable and usable; kUnavailable otherwise.
//   * Errors are Status values (kUnavailable: the device is unreachable, timed out or changed under
//     the apply, retrying may help; kInvalidArgument: a malformed desired state, naming the field;
//     kFailedPrecondition: the device holds data the backend cannot interpret, naming the key).
//   * Calls may block for the backend's own timeouts (the sonic backend: Redis connect/command
//     timeouts); callers that must stay responsive run them on a thread of their own (the agent
//     does, see agent/device_worker.h).
//
// Thread-safety: an adapter is NOT thread-safe; one owner thread calls it. capabilities() is
// constant after construction (safe to read from any thread once the adapter is built). Distinct
// adapters may be used from distinct threads.
#ifndef CRUX_SWITCH_ADAPTERS_ADAPTER_H_
#define CRUX_SWITCH_ADAPTERS_ADAPTER_H_

#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/control/qos.h"

namespace crux::switch_adapters {

// What a backend can program on its device. Sent to cruxd in the agent's SwitchHello and checked
// against every pushed state before it reaches the device (CheckCapabilities).
struct Capabilities {
  std::string backend;                    // "sonic", "file", "log".
  int queues = core::kMaxTrafficClasses;  // Hardware queues per port it can program, 1..8.
  bool strict_priority = true;            // STRICT schedulers.
  bool dwrr = true;                       // DWRR schedulers.
  bool pfc = false;            // Writes pfc_enable (false: PFC is left as the operator set it).
  bool pbr_redirect = false;   // Can pin paths with ACL/PBR (no backend does yet).
  bool transactional = false;  // Apply is all-or-nothing on the device.

  friend bool operator==(const Capabilities&, const Capabilities&) = default;
};

// OK when a backend with `caps` can enforce `state`: every queue (tc_to_queue values, scheduler
// queues) is below caps.queues, STRICT schedulers only with strict_priority, DWRR only with dwrr.
// kFailedPrecondition otherwise, naming the field and the capability, e.g.
// "switch_state.schedulers[q6]: queue 6 is beyond the 4 queues per port of the sonic backend".
// pfc_enable is not checked: a backend without `pfc` leaves PFC alone (documented degradation).
core::Status CheckCapabilities(const Capabilities& caps, const core::SwitchQosState& state);

// What one Apply() did.
struct ApplyResult {
  int writes = 0;   // Fields (or files) written.
  int deletes = 0;  // Fields or keys removed (only ones the backend owns).
  // Human-readable operations in the order they were sent, e.g.
  // "HSET DSCP_TO_TC_MAP|CRUX 10 5", "DEL SCHEDULER|crux_q7", "write /etc/crux/tor0.json".
  std::vector<std::string> operations;

  bool changed() const { return writes + deletes > 0; }
  // Device fields that differed from the desired state before the apply.
  int differing() const { return writes + deletes; }
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
