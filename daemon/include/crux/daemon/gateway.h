// Gateway: the client endpoint's requests (jobs and switch agents). Each message is authorised
// (key roles), converted once from the wire into core types (crux/protocol/convert.h, against
// the topology), checked against the sessions (JobTracker: ownership, connection binding,
// quotas, leases), persisted when it changes state, and turned into control-loop events
// (core::ControlLoop via PlanHost). Every request gets exactly one reply (its specific reply, an
// Ack or an Error); an Ack answering a push (request id 0) gets none. Pushes a request causes
// (the current assignment after a re-registration or a heartbeat from a stale or foreign state,
// a switch's full state) are sent after its reply.
//
// Refusals are counted in crux_errors_total{endpoint,kind}, security refusals also by reason
// (RefusalBook), and never change state: a bad peer never affects anyone else.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_GATEWAY_H_
#define CRUX_DAEMON_GATEWAY_H_

#include <string>
#include <utility>
#include <vector>

#include "crux/daemon/context.h"
#include "crux/protocol/server.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

class Gateway {
 public:
  explicit Gateway(DaemonContext* ctx) : ctx_(ctx) {}

  // Handles one message: sends its reply, then the pushes it caused.
  void Process(const protocol::Inbound& in);

  // A job is gone (EndJob, lease expired): sessions, store, control loop.
  void JobGone(const std::string& id, const std::string& reason);

  // Writes the profiles reported since the last flush in one transaction (runs every second
  // and at destruction; a report that changes a job's phase or planned profile is written at
  // once, so a kill -9 loses at most ~1 s of reports that changed nothing for planning).
  void FlushProfiles();

  // The reply for a refusal: counted (errors by kind; security refusals by reason).
  v1::Envelope Refuse(const std::string& endpoint, uint64_t request_id, const Refusal& r);

 private:
  v1::Envelope Handle(const protocol::Inbound& in);
  Refusal Authorise(const protocol::Inbound& in) const;
  v1::Envelope OnRegister(const protocol::Inbound& in);
  v1::Envelope OnProfile(const protocol::Inbound& in);
  v1::Envelope OnHeartbeat(const protocol::Inbound& in);
  v1::Envelope OnEndJob(const protocol::Inbound& in);
  v1::Envelope OnAck(const protocol::Inbound& in);
  v1::Envelope OnSwitchHello(const protocol::Inbound& in);
  v1::Envelope OnSwitchApplied(const protocol::Inbound& in);
  StoredJob ToStored(const JobSession& j) const;
  void DeferAssignment(const std::string& peer, const std::string& job_id);

  DaemonContext* ctx_;
  // Pushes caused by the message being handled: (peer, job id) assignments and raw envelopes.
  std::vector<std::pair<std::string, std::string>> deferred_assignments_;
  std::vector<std::pair<std::string, v1::Envelope>> deferred_;
  std::set<std::string> planned_dirty_;  // Planned profiles whose immediate write failed.
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_GATEWAY_H_
