// SwitchAgent: the logic of crux-switch-agent, the small daemon that runs on (or next to) a
// switch. It connects to cruxd with a ZeroMQ DEALER (protocol/client.h; random routing id),
// introduces itself with a SwitchHello (name, the backend's capabilities, the epoch and state id
// it last applied), and keeps the device holding the desired state cruxd pushes (SwitchQosState),
// reporting each outcome in a SwitchApplied.
//
// A reconciler (SONiC swss style):
//   * Device calls run on a thread of their own (device_worker.h). The loop never waits for the
//     device: while Redis is stalled, hellos, pushes and replies keep flowing.
//   * A push is accepted when its epoch is above the last accepted one OR its state_id differs
//     (cruxd's state was reset and a new epoch sequence started; proto/crux/v1/switch.proto).
//     Anything else is a stale or duplicate push and is ignored. A push for another switch, a
//     malformed one, or one the backend cannot enforce (CheckCapabilities) is refused with a
//     SwitchApplied error and never reaches the device.
//   * Terms (HA cruxd on etcd): the agent keeps the highest leader term seen on a push and
//     refuses a push from a lower term (a deposed leader) before anything else. With `term_file`
//     the term survives restarts (protocol::TermFile): loaded at Start (a corrupt or unreadable
//     file fails Start: fail closed), and a higher term is written to the file (atomically, with
//     fsync) before the push is accepted; a push whose term cannot be recorded is refused with a
//     SwitchApplied error and never reaches the device.
//   * The accepted state is applied at once. A failed apply is reported and retried with
//     core::ExponentialBackoff (`device_backoff`, unbounded) until it succeeds or a newer push
//     replaces it. The backend itself never retries.
//   * Once applied, the state is re-applied every `reconcile_period`. Apply is idempotent, so a
//     device that did not drift costs only reads (zero writes). A reconcile that found drift (a
//     hand edit, a FLUSHDB, a restarted empty Redis) repairs it and is reported with
//     `reconcile = true` and `drifted_fields` = the fields that differed; a failed reconcile is
//     reported and retried like a failed push; a reconcile without drift is not reported, unless
//     it ends a failure.
//   * cruxd away: a call that times out (or whose connection drops) marks it away and the hello
//     is retried with core::ExponentialBackoff (`daemon_backoff`); the device keeps its state and
//     the reconciler keeps it there.
//   * Following cruxd (HA leader changes, restarts; issue #31 item 6): when the client's
//     connection comes up (protocol/client.h "Following the daemon": a new leader bound its
//     endpoint), the hello goes out at once and the backoff starts over, so cruxd (which pushes
//     to the routing id of the switch's last hello) reaches the switch without waiting for a
//     backoff delay or the hello interval. A SwitchApplied answered NOT_FOUND (a restarted cruxd
//     that has not seen our hello yet) triggers a hello at once.
//   * Port telemetry (issue #14, with a PortMonitor and `watch_ports`): a PortWatcher thread
//     polls the ports (port_watcher.h); the loop sends its reports as SwitchTelemetry while cruxd
//     answers (the newest report only after an absence: states are complete in every report). A
//     cruxd that refuses the message (an older one: MALFORMED) gets none until the next hello.
//   * Enforcement verification (issue #29, with an EnforcementVerifier: enforcement.h): a
//     reconcile that found the device in sync (the switch had a reconcile period to act on the
//     state) also checks what the switch applied against the state (the device thread runs it
//     after the apply). The latest check is sent in every hello, and in a SwitchApplied at once
//     when its verdict (status and first difference, numbers aside) changed. Without a verifier
//     (the file and log backends, or verification off) the check stays UNKNOWN with the reason.
//   * Fatal configuration: a hello refused with UNKNOWN_HOST (not a switch of cruxd's topology) or
//     PERMISSION_DENIED (this agent's key may not speak for the switch) is not retried. RunOnce()
//     returns kFailedPrecondition, fatal() holds the reason, and crux-switch-agent exits with
//     kExitRefusedByDaemon (the systemd unit does not restart on it).
//
// Thread-safety: not thread-safe; Start()/Run()/RunOnce() and the accessors on one thread. `stop`
// may be set from any thread (or a signal handler). The adapter is used only on the device thread
// between Start() and destruction; its capabilities() are read once, in Start().
#ifndef CRUX_SWITCH_ADAPTERS_AGENT_SWITCH_AGENT_H_
#define CRUX_SWITCH_ADAPTERS_AGENT_SWITCH_AGENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "crux/core/base/backoff.h"
#include "crux/core/base/clock.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/control/enforcement.h"
#include "crux/core/control/qos.h"
#include "crux/protocol/client.h"
#include "crux/protocol/term_file.h"
#include "crux/protocol/transport_context.h"
#include "crux/switch_adapters/adapter.h"
#include "crux/switch_adapters/enforcement.h"
#include "crux/v1/switch.pb.h"
#include "device_worker.h"
#include "port_watcher.h"

namespace crux::switch_adapters {

// Exit status of crux-switch-agent when cruxd refuses the switch (EX_CONFIG from sysexits.h):
// the configuration must change, restarting cannot help (RestartPreventExitStatus= in the unit).
inline constexpr int kExitRefusedByDaemon = 78;
// Exit status for a bad command line or backend configuration (also not restarted).
inline constexpr int kExitUsage = 2;

struct AgentOptions {
  std::string switch_name;         // Topology node name; required.
  protocol::ClientOptions client;  // client.endpoint required; leave client.routing_id empty.
  core::Duration call_timeout = core::Duration::Millis(2000);
  core::Duration hello_interval = core::Duration::Millis(5000);
  // Hello retries while cruxd does not answer.
  core::BackoffOptions daemon_backoff = {core::Duration::Millis(200), core::Duration::Millis(10000),
                                         2, 0.2};
  // Device re-applies after a failed apply (max_attempts 0: until it succeeds or is replaced).
  core::BackoffOptions device_backoff = {core::Duration::Millis(200), core::Duration::Millis(10000),
                                         2, 0.2};
  // Re-apply of the applied state (drift repair). > 0.
  core::Duration reconcile_period = core::Duration::Millis(10000);
  core::Duration poll = core::Duration::Millis(100);  // Longest wait of one RunOnce().
  std::string agent_version = "crux-switch-agent/0.3";
  // Port telemetry (needs SetPortMonitor); nullopt: none.
  std::optional<PortWatcher::Options> watch_ports;
  // Where the highest accepted leader term is kept across restarts (see the file comment);
  // empty: in memory only. crux-switch-agent's default: kDefaultTermFileDir/<switch>.term.
  std::string term_file;
};

// The directory of crux-switch-agent's default --term-file (the unit's StateDirectory=crux).
inline constexpr const char* kDefaultTermFileDir = "/var/lib/crux/switch-agent";

// Errors name the option ("agent.switch_name: required", "agent.device_backoff.max: ...").
core::Status ValidateAgentOptions(const AgentOptions& o);

struct AgentCounters {
  uint64_t hellos_sent = 0;
  uint64_t hellos_acked = 0;
  uint64_t pushes = 0;      // SwitchQosState pushes received.
  uint64_t applies_ok = 0;  // Applies of pushed states (first apply and its retries).
  uint64_t applies_failed = 0;
  uint64_t reconciles = 0;  // Successful reconciles (re-applies of an applied state).
  uint64_t reconciles_failed = 0;
  uint64_t drift_repairs = 0;   // Reconciles that found and repaired drift.
  uint64_t drifted_fields = 0;  // Sum of the fields they repaired.
  uint64_t bad_pushes = 0;      // Refused before reaching the device.
  uint64_t stale_pushes = 0;    // Ignored: epoch not above the accepted one, same state_id.
  uint64_t reconnects = 0;      // Daemon away -> back transitions.
  // High availability: pushes refused because their cruxd term was below the highest seen (a
  // deposed leader); never reported to cruxd as SwitchApplied, only counted, logged and sent in
  // the hellos (`cruxctl switches`).
  uint64_t stale_term_refused = 0;
  uint64_t term_write_failed = 0;       // Pushes refused: their higher term could not be recorded.
  uint64_t telemetry_sent = 0;          // SwitchTelemetry reports cruxd acknowledged.
  uint64_t telemetry_refused = 0;       // Reports cruxd answered with an error.
  uint64_t enforcement_checks = 0;      // Enforcement checks run (issue #29).
  uint64_t enforcement_mismatches = 0;  // Of them, checks that found a MISMATCH.
};

class SwitchAgent {
 public:
  // `adapter` and `ctx` must outlive the agent. Does not connect yet.
  SwitchAgent(AgentOptions options, protocol::TransportContext& ctx, SwitchAdapter& adapter,
              const core::Clock& clock = core::SteadyClock::Instance());
  ~SwitchAgent();  // Waits for a device call in progress (bounded by the backend's timeouts).

  // Port telemetry source (before Start; with options.watch_ports).
  void SetPortMonitor(std::unique_ptr<PortMonitor> monitor) { monitor_ = std::move(monitor); }
  // Enforcement verification (before Start): the backend's verifier, or why there is none (the
  // message becomes the UNKNOWN check's detail, e.g. "the file backend cannot verify
  // enforcement"). Without a call: UNKNOWN, "no enforcement verifier was set up for the <backend>
  // backend".
  void SetEnforcementVerifier(core::Result<std::unique_ptr<EnforcementVerifier>> verifier);
  // Validates the options, reads the capabilities, starts the device thread (and the port
  // watcher) and creates the DEALER socket (connects in the background).
  core::Status Start();
  // One step: a due hello, the outcome of a finished device call (reported), a due device apply
  // (retry or reconcile) handed to the device thread, then up to `poll` waiting for one message.
  // Transport problems are handled inside; returns an error only before Start() or once fatal().
  core::Status RunOnce();
  // RunOnce() until `stop` is true or a fatal error.
  core::Status Run(const std::atomic<bool>& stop);

  bool daemon_connected() const { return connected_; }
  uint64_t applied_epoch() const { return applied_epoch_; }
  uint64_t applied_state_id() const { return applied_state_id_; }
  uint64_t highest_term() const { return highest_term_; }
  bool device_busy() const { return in_flight_.has_value(); }
  const std::string& last_error() const { return last_error_; }
  const AgentCounters& counters() const { return counters_; }
  // Why cruxd refused this switch (see the file comment); nullopt while not refused.
  const std::optional<core::Status>& fatal() const { return fatal_; }
  // The latest enforcement check (see the file comment).
  const core::EnforcementCheck& enforcement() const { return enforcement_; }
  // The port watcher's counters (reads, dropped counter samples, ...); nullopt without one.
  std::optional<PortWatcher::Counters> port_watcher_counters() const;

 private:
  struct Desired {
    core::SwitchQosState state;
    uint64_t epoch = 0;
    uint64_t state_id = 0;
    bool applied_once = false;  // Later applies of it are reconciles.
    std::set<int> job_tcs;      // SwitchQosState.job_tcs (enforcement checks).
  };
  struct InFlight {
    uint64_t epoch = 0;
    uint64_t state_id = 0;
    bool reconcile = false;
  };

  void SendHello();
  void HandlePush(const v1::SwitchQosState& push);
  void Refuse(const v1::SwitchQosState& push, const std::string& error);
  void TakeDeviceOutcome();
  void MaybeStartDeviceWork();
  void Report(v1::Envelope env);
  void MarkAway(const std::string& why);
  // Acts on the client's connection changes (see "Following cruxd" in the file comment).
  void FollowDaemon();
  // Sends the port watcher's reports (see the file comment).
  void SendTelemetry();
  // Takes the enforcement check of a device outcome, if one ran; whether its verdict changed.
  bool TakeEnforcement(const DeviceWorker::Done& done, uint64_t epoch);

  AgentOptions options_;
  protocol::TransportContext& ctx_;
  SwitchAdapter& adapter_;
  const core::Clock& clock_;
  Capabilities caps_;
  std::unique_ptr<protocol::DealerClient> client_;

  bool connected_ = false;
  core::Duration next_hello_;
  core::ExponentialBackoff daemon_backoff_;
  uint64_t applied_epoch_ = 0;     // Last pushed state applied successfully.
  uint64_t applied_state_id_ = 0;  // Its state_id.
  uint64_t highest_term_ = 0;      // HA: the highest cruxd leader term seen on a push.
  std::optional<protocol::TermFile> term_file_;  // With options_.term_file, after Start.
  std::string last_error_;
  std::optional<core::Status> fatal_;

  std::optional<Desired> desired_;  // The last accepted push.
  bool dirty_ = false;              // desired_ not handed to the device yet.
  bool device_failed_ = false;      // The last device call for desired_ failed.
  core::Duration next_device_;      // When a retry / reconcile of desired_ is due.
  core::ExponentialBackoff device_backoff_;
  std::optional<InFlight> in_flight_;
  uint64_t next_job_id_ = 0;
  AgentCounters counters_;
  std::unique_ptr<PortMonitor> monitor_;  // Handed to the watcher at Start.
  bool telemetry_off_ = false;            // cruxd refused telemetry; until the next hello.
  uint64_t telemetry_seq_ = 0;
  std::unique_ptr<PortWatcher> watcher_;
  std::unique_ptr<EnforcementVerifier> verifier_;  // Used by the device thread (worker_).
  core::EnforcementCheck enforcement_;             // The latest check.
  std::unique_ptr<DeviceWorker> worker_;           // Last: destroyed (joined) first.
};

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_AGENT_SWITCH_AGENT_H_
