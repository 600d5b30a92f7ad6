// Hidden fault injection in crux::sim (docs/fault-simulation.md): faults that change the
// *physical* capacity of links in the fluid network without telling the planner, and the
// signals the simulated world then produces for core::ControlLoop's FaultManager (per-flow
// samples with the jobs' heartbeats, switch port state for hard faults). What the loop decides
// (core::LinkDecision) is applied to the planner's topology, as cruxd's FaultService does.
//
//   link down   both directions of a cable at 0 (flows on it stall; transport errors);
//   link gray   both directions at `fraction` of nominal (flows on it slow down);
//   ToR down    every link to and from a ToR at 0.
//
// Faults come from a CSV (ParseFaultsCsv) or a seeded generator (GenerateFaults). The scoring
// (ScoreFaults) compares the loop's automatic decisions with the injected faults.
//
// Thread-safety: pure functions and value types.
#ifndef CRUX_SIM_FAULTS_H_
#define CRUX_SIM_FAULTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/link_name.h"
#include "crux/core/topology/topology.h"

namespace crux::sim {

using core::Duration;

// kLinkLossy: a gray link that also drops or corrupts packets, so its switch ports count errors
// (what a dirty optic or a failing cable does; kLinkGray is capacity alone, e.g. a downshifted
// lane set, which port counters do not show).
enum class FaultKind : uint8_t { kLinkDown, kLinkGray, kTorDown, kLinkLossy };

// Gray kinds (a capacity fraction in force, the link stays up).
inline bool IsGray(FaultKind k) { return k == FaultKind::kLinkGray || k == FaultKind::kLinkLossy; }
std::string_view FaultKindName(FaultKind k);  // "link_down", "link_gray", "tor_down".

// One hidden fault. `link` (link kinds: either direction of the cable; both fail) or `node`
// (kTorDown) names the target; with `busy` set and no target, the engine picks it when the
// fault starts, uniformly among the cables (or ToRs) that a pinned flow in the network crosses
// at that moment (seeded by FaultSimOptions::seed), and the fault is dropped (recorded as
// such) when there is none. `busy_fabric`: a busy cable between two switches (the fabric's
// inside, where a re-route moves traffic onto neighbouring cables), never a NIC's.
struct InjectedFault {
  Duration at;        // Start, >= 0.
  Duration duration;  // > 0.
  FaultKind kind = FaultKind::kLinkDown;
  core::LinkId link;    // Link kinds.
  core::NodeId node;    // kTorDown.
  double fraction = 0;  // Gray kinds: capacity in force as a fraction of nominal, (0, 1).
  bool busy = false;
  bool busy_fabric = false;  // With busy: switch-to-switch cables only.

  friend bool operator==(const InjectedFault&, const InjectedFault&) = default;
};

// How the simulated world reports (docs/fault-simulation.md, "Signals").
struct FaultSimOptions {
  std::vector<InjectedFault> faults;
  // Per-flow samples (core::FlowSample) with every job's heartbeat, every `report_interval`:
  // bytes each pinned flow delivered in the window and the time it spent transferring them; a
  // flow in the network that made no progress for `stall_timeout` while crossing a physically
  // dead link reports a transport error. Off by default (crux-sim faults turns it on); with it
  // off and no `faults`, nothing of this runs (a no-op). Faults without flow reports are seen
  // by switch port state only.
  bool flow_reports = false;
  Duration report_interval = Duration::Millis(1000);  // > 0.
  Duration stall_timeout = Duration::Millis(1000);    // > 0.
  // Switch port state (core::LinkStateSignal) for hard faults (link down, ToR down): each
  // directed link of the fault goes down `switch_delay` after the fault starts and up that
  // long after it ends. false: tomography (flows) alone.
  bool switch_signals = true;
  Duration switch_delay = Duration::Millis(250);  // >= 0.
  // Errors per second each port of a link_lossy fault counts (IF_IN_ERRORS + FEC uncorrectable
  // frames), reported with every heartbeat round when switch_signals is on. >= 0; cruxd's
  // default counter threshold is 10/s.
  double lossy_errors_per_s = 1000;
  // Host agents' NIC counters (core::NicCounterSignal, crux-hostd's sysfs hw_counters) with
  // every heartbeat round: each reported flow over a link_lossy fault adds
  // nic_loss_per_flow_per_s loss events (retransmissions at its source NIC, sequence errors at
  // its destination NIC), and so does a flow that made no progress over a hard fault (ack
  // timeouts); a flow over a capacity-gray fault adds as many congestion events (CNPs) instead,
  // which the rules do not count as loss. false: no NIC signals.
  bool nic_signals = true;
  double nic_loss_per_flow_per_s = 100;  // >= 0.
  uint64_t seed = 1;                     // Busy-target choices.

  bool enabled() const { return flow_reports || !faults.empty(); }
};

core::Status ValidateFaultSimOptions(const core::Topology& topo, const FaultSimOptions& o);

// ---- results ----

// What happened to one injected fault during a run.
struct FaultRecord {
  InjectedFault fault;              // As given (busy: with the target picked).
  bool injected = false;            // false: a busy fault that found no target (or past horizon).
  std::vector<core::LinkId> links;  // Every directed link it took down or slowed.
  // A pinned flow of a job was in the network over one of `links` while the fault was in force.
  bool crossed_by_flow = false;
  Duration first_crossed;
  // The most pinned flows one heartbeat reported over one directed link of the fault while it
  // was in force: localisation needs LocalisationOptions::min_flows (2) on a link.
  uint32_t max_flows_per_link = 0;
  // At a heartbeat while the fault was in force, some flow was bottlenecked at one of `links`:
  // the fault held a flow below the rate it would have had (FluidNetwork::LimitsAFlow). A gray
  // fault that never does slows nobody, so no flow sample can show it.
  bool limited_a_flow = false;
};

// One change of link health the control loop decided (and the simulator applied).
struct LinkDecisionRecord {
  Duration at;
  core::LinkId link;
  core::LinkHealth health = core::LinkHealth::kUp;
  double capacity_fraction = 1;
  bool automatic = true;
  std::string reason;
};

// ---- generation ----

struct FaultGenOptions {
  uint32_t count = 200;
  uint64_t seed = 1;
  Duration start = Duration::Seconds(600);   // First slot begins here.
  Duration spacing = Duration::Seconds(60);  // One fault per slot of this length, > 0.
  Duration min_duration = Duration::Seconds(15);
  Duration max_duration = Duration::Seconds(40);  // <= spacing.
  // Mix (weights, >= 0, sum > 0).
  double link_down = 0.4;
  double link_gray = 0.4;
  double tor_down = 0.2;
  double link_lossy = 0;  // 0 keeps the draws (and so the faults) of a mix without it.
  double gray_min = 0.1;  // Gray fraction uniform in [gray_min, gray_max], within (0, 1).
  double gray_max = 0.7;
  // true: targets picked at the fault's start among the busy ones (InjectedFault::busy);
  // false: uniformly among all switch cables (NIC-switch and switch-switch) and ToRs.
  bool busy_targets = true;
  // With busy_targets: switch-to-switch cables only (InjectedFault::busy_fabric).
  bool busy_fabric = false;
};

// Fault i starts uniformly within slot [start + i spacing, start + (i + 1) spacing - duration).
core::Result<std::vector<InjectedFault>> GenerateFaults(const core::Topology& topo,
                                                        const FaultGenOptions& o);

// CSV: header "time_s,kind,target,fraction,duration_s"; kind link_down|link_gray|tor_down;
// target "a-b" / "a->b" (core::ParseLinkName) for links, a ToR name for tor_down, "busy", or
// "busy_fabric" (link kinds: a busy switch-to-switch cable);
// fraction only for link_gray (else empty or 0). The CSV dialect (comments, blank lines,
// trimming) is crux/textio/csv.h's, numbers are those of crux/textio/number.h ("0x10", "inf" and
// "+1" are refused), and an error names the line and column: "line 3, column 1 (time_s): ...".
core::Result<std::vector<InjectedFault>> ParseFaultsCsv(std::string_view text,
                                                        const core::Topology& topo);
std::string FormatFaultsCsv(const std::vector<InjectedFault>& faults, const core::Topology& topo);

// ---- scoring ----

struct FaultOutcome {
  size_t index = 0;         // Into the run's fault records.
  bool observable = false;  // Crossed by a flow, or a hard fault with switch signals.
  // Observable, and it held a flow below the rate it would have had: a hard fault a flow
  // crossed, or a gray one that was some flow's bottleneck at a heartbeat (limited_a_flow). A
  // gray fault no flow felt is visible to capacity probes at most, never in a flow's rate.
  bool felt = false;
  bool detected = false;        // An automatic non-up decision on one of its links in time.
  Duration detection_time;      // First such decision - start.
  bool localised = false;       // Detected, and no wrong link decided while it was on.
  uint32_t false_suspects = 0;  // Wrong links decided non-up while it was on.
  double estimate = 1;          // Gray: the fraction of the first correct decision.
};

struct FaultScore {
  std::vector<FaultOutcome> outcomes;
  size_t injected = 0;
  size_t observable = 0;
  size_t detected = 0;
  size_t detected_observable = 0;
  // Observable by at least `min_flows` flows on one link (or a hard fault with switch signals):
  // what the localisation can single out at all.
  size_t localisable = 0;
  size_t detected_localisable = 0;
  double recall_localisable = 0;
  size_t felt = 0;  // FaultOutcome::felt.
  size_t detected_felt = 0;
  double recall_felt = 0;  // detected_felt / felt.
  size_t localised = 0;
  size_t decisions = 0;       // Automatic decisions to down / degraded.
  size_t true_decisions = 0;  // ... on a link of a fault in force (or ended within `grace`).
  double precision = 1;       // true_decisions / decisions (1 when none).
  double recall = 0;          // detected_observable / observable.
  double raw_recall = 0;      // detected / injected.
  double accuracy = 0;        // localised / detected.
  double detect_mean_s = 0, detect_p50_s = 0, detect_p99_s = 0, detect_max_s = 0;
  double gray_estimate_error = 0;  // Mean |estimate - fraction| over detected gray faults.
};

// A decision counts for a fault while it is in force and up to `grace` after its end (the
// evidence lags the heartbeats).
FaultScore ScoreFaults(const std::vector<FaultRecord>& faults,
                       const std::vector<LinkDecisionRecord>& decisions, bool switch_signals,
                       Duration grace, uint32_t min_flows = 2);

}  // namespace crux::sim

#endif  // CRUX_SIM_FAULTS_H_
