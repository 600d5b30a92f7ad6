// SwitchAgent: the logic of crux-switch-agent, the small daemon that runs on (or next to) a
// switch. It connects to cruxd with a ZeroMQ DEALER (protocol/client.h), introduces itself with a
// SwitchHello (name, capabilities, last applied epoch), applies every SwitchQosState push through
// a SwitchAdapter backend and answers with a SwitchApplied (ok + the state read back from the
// device, or the error).
//
// Liveness: the hello is repeated every `hello_interval` while the daemon answers (a restarted
// daemon thus re-learns the switch and re-pushes if it is ahead); when a call times out the agent
// marks the daemon away and retries the hello with exponential backoff (initial_backoff doubling
// up to max_backoff). While the daemon is away the device keeps the last applied state: the agent
// never clears or rewrites it on its own. A push that fails to apply (device down) is reported
// and retried at the next hello tick until it succeeds or a newer push replaces it.
//
// Thread-safety: not thread-safe; Run()/RunOnce() on one thread. `stop` may be set from any
// thread (or a signal handler).
#ifndef CRUX_SWITCH_ADAPTERS_AGENT_SWITCH_AGENT_H_
#define CRUX_SWITCH_ADAPTERS_AGENT_SWITCH_AGENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "crux/core/clock.h"
#include "crux/core/qos.h"
#include "crux/core/status.h"
#include "crux/core/units.h"
#include "crux/protocol/client.h"
#include "crux/protocol/transport_context.h"
#include "crux/switch_adapters/adapter.h"
#include "crux/v1/switch.pb.h"

namespace crux::switch_adapters {

struct AgentOptions {
  std::string switch_name;         // Topology node name; required.
  protocol::ClientOptions client;  // client.endpoint required (e.g. "tcp://cruxd:7071").
  core::Duration call_timeout = core::Duration::Millis(2000);
  core::Duration hello_interval = core::Duration::Millis(5000);
  core::Duration initial_backoff = core::Duration::Millis(200);
  core::Duration max_backoff = core::Duration::Millis(10000);
  core::Duration poll = core::Duration::Millis(100);  // Longest wait of one RunOnce().
  std::string agent_version = "crux-switch-agent/0.1";
};

// Errors name the option ("agent.switch_name: required").
core::Status ValidateAgentOptions(const AgentOptions& o);

struct AgentCounters {
  uint64_t hellos_sent = 0;
  uint64_t hellos_acked = 0;
  uint64_t pushes = 0;  // SwitchQosState pushes received.
  uint64_t applies_ok = 0;
  uint64_t applies_failed = 0;
  uint64_t bad_pushes = 0;  // Rejected before reaching the device.
  uint64_t reconnects = 0;  // Daemon away -> back transitions.
};

class SwitchAgent {
 public:
  // `adapter` and `ctx` must outlive the agent. Does not connect yet.
  SwitchAgent(AgentOptions options, protocol::TransportContext& ctx, SwitchAdapter& adapter,
              const core::Clock& clock = core::SteadyClock::Instance());
  ~SwitchAgent();

  // Validates the options and creates the DEALER socket (connects in the background).
  core::Status Start();
  // One step: a due hello (or a due retry of a failed apply), then waits up to `poll` for one
  // message and handles it. Errors only for broken invariants (transport errors are handled).
  core::Status RunOnce();
  // RunOnce() until `stop` is true.
  core::Status Run(const std::atomic<bool>& stop);

  bool daemon_connected() const { return connected_; }
  uint64_t applied_epoch() const { return applied_epoch_; }
  const std::string& last_error() const { return last_error_; }
  const AgentCounters& counters() const { return counters_; }

 private:
  void SendHello();
  void HandlePush(const v1::SwitchQosState& push);
  void ApplyAndReport(const core::SwitchQosState& state, uint64_t epoch);
  void MarkAway(const std::string& why);

  AgentOptions options_;
  protocol::TransportContext& ctx_;
  SwitchAdapter& adapter_;
  const core::Clock& clock_;
  std::unique_ptr<protocol::DealerClient> client_;

  bool connected_ = false;
  core::Duration next_hello_;
  core::Duration backoff_;
  uint64_t applied_epoch_ = 0;
  std::string last_error_;
  // A push that failed to apply, retried at each hello tick.
  std::optional<std::pair<core::SwitchQosState, uint64_t>> pending_;
  AgentCounters counters_;
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_AGENT_SWITCH_AGENT_H_
