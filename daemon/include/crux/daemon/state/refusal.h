// Refusal: why a domain module of the daemon (job tracker, enforcer) turns a request down. It is
// protobuf-free; the gateway maps it to the wire error (crux.v1.ErrorCode) in one place
// (Gateway::Refuse), so the modules never see wire types for their answers.
#ifndef CRUX_DAEMON_STATE_REFUSAL_H_
#define CRUX_DAEMON_STATE_REFUSAL_H_

#include <string>

namespace crux::daemon {

enum class RefusalCode {
  kNone,               // Not refused.
  kInvalidArgument,    // Malformed or out of range.
  kNotFound,           // Names something unknown (e.g. a switch that never said hello).
  kUnknownJob,         // Names a job that is not registered (clients re-register).
  kConflict,           // Contradicts what is known (e.g. another placement for a job).
  kPermissionDenied,   // The sender may not do this (identity, ownership, connection).
  kResourceExhausted,  // A quota.
  kUnsupported,        // The sender cannot do what the configuration needs (capabilities).
};

struct Refusal {
  RefusalCode code = RefusalCode::kNone;
  std::string message;  // Names the field: "heartbeat.job_id: job 'x' is not registered".
  // Security refusals (identity, role, ownership, connection, quota): the reason they are
  // counted and logged under (docs/protocol.md "Refusals"); "" for ordinary errors. Not sent.
  std::string reason = {};

  friend bool operator==(const Refusal&, const Refusal&) = default;
};

inline bool Refused(const Refusal& r) { return r.code != RefusalCode::kNone; }

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_STATE_REFUSAL_H_
