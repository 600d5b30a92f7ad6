// Enforcer: sends what the plan decided. Assignment pushes go to the peer that speaks for each
// job (acks are tracked by the JobTracker); switch agents that said SwitchHello are kept in a
// registry (for `cruxctl switches`) and get a desired SwitchQosState whenever the applied plan
// changes.
//
// Desired switch state (a simple first cut; per-switch QoS computation is a later issue): every
// job's DSCP colour maps to traffic class `queues - 1 - min(level, queues - 1)` (level 0 = the
// highest strict-priority queue), colours shared by several jobs take the highest of their
// levels; TC -> queue is the identity and every queue is STRICT.
//
// Thread-safety: loop thread only.
#ifndef CRUX_DAEMON_ENFORCER_H_
#define CRUX_DAEMON_ENFORCER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crux/core/status.h"
#include "crux/daemon/job_tracker.h"
#include "crux/daemon/metrics.h"
#include "crux/v1/envelope.pb.h"

namespace crux::daemon {

using Sender = std::function<core::Status(const std::string& peer, const v1::Envelope& msg)>;

struct SwitchEntry {
  std::string name;
  std::string peer;
  v1::SwitchCapabilities capabilities;
  uint64_t desired_epoch = 0;
  uint64_t applied_epoch = 0;
  std::string last_error;
  int64_t last_seen_ms = 0;
  bool connected = true;
};

// The desired QoS state of one switch for the applied assignments (see the file comment).
v1::SwitchQosState ComputeSwitchState(const std::string& name, uint64_t epoch, uint32_t queues,
                                      const std::map<std::string, v1::Assignment>& applied);

class Enforcer {
 public:
  explicit Enforcer(Metrics* metrics) : metrics_(metrics) {}

  void SetSender(Sender s) { sender_ = std::move(s); }

  // Queues `a` for `peer`. False when there is no peer or the transport refused it.
  bool Push(const std::string& peer, const v1::Assignment& a);

  void OnHello(const v1::SwitchHello& h, const std::string& peer, int64_t unix_ms);
  Refusal OnApplied(const v1::SwitchApplied& a, const std::string& peer, int64_t unix_ms);
  // Sends every known switch its desired state for `epoch`.
  void PushSwitchStates(uint64_t epoch, const std::map<std::string, v1::Assignment>& applied);
  // Sends one switch its desired state (after its hello).
  void PushSwitchState(const std::string& name, uint64_t epoch,
                       const std::map<std::string, v1::Assignment>& applied);

  std::vector<v1::SwitchInfo> Switches(uint32_t shared_colours) const;
  size_t switch_count() const { return switches_.size(); }
  uint64_t pushes() const { return pushes_; }
  uint64_t push_failures() const { return push_failures_; }

 private:
  Metrics* metrics_;
  Sender sender_;
  std::map<std::string, SwitchEntry> switches_;
  uint64_t pushes_ = 0;
  uint64_t push_failures_ = 0;
};

}  // namespace crux::daemon

#endif  // CRUX_DAEMON_ENFORCER_H_
