// FaultManager: automatic link health from switch and job signals, with the decision rules,
// hysteresis and flap damping (docs/faults.md). Pure: no I/O, no clock of its own (every input
// carries `now`); core::ControlLoop owns one and drives it (control_loop.h), cruxd and crux-sim
// host the loop.
//
// Signals (three tiers, failures-ha.md "Design implications" 2):
//   * link state: a switch port's oper_status (SONiC APPL_DB PORT_TABLE) - direct evidence;
//   * counters: error and discard deltas of a port direction (COUNTERS_DB), per second;
//   * tomography: the flows' (and probes') achieved rate against what they are entitled to, over
//     the routing matrix of the applied plan (fault_localisation.h: 007 voting for hard faults,
//     the least-squares estimate for gray ones). What a flow is entitled to (expectation
//     kPlanShare, the default) is the smaller of its own best recent rate and its share under the
//     plan in force with every reported flow active at once, each taking at most its own best
//     rate, and a flow its job's latest report found idle taking nothing from that report's
//     flows (planned_share.h): congestion the plan creates - two jobs on one link, traffic
//     concentrated next to a handled fault - leaves every flow at or above that share, so it
//     is not taken for a fault; a re-plan moves the shares with it. Below that, how slow a flow is
//     is measured against its best rate; a flow the plan starves (share 0) is no evidence when
//     slow. kOwnBest (before issue #27) measures against the own best rate alone.
//
// Rules (Evaluate), per directed link:
//   * a link-state "down" makes it DOWN at once;
//   * two agreeing independent signals (tomography and counters on the same link) make it DOWN;
//   * one signal alone only makes it DEGRADED, with the estimated capacity (tomography: the
//     estimated fraction of its rate; counters alone: counter_capacity_fraction), never below
//     min_capacity_fraction of nominal;
//   * no tenant steers the fabric: tomography without a switch signal on the link moves it only
//     when its evidence comes from at least `min_jobs` jobs (default 2), or when a NIC at an end
//     of one of its slow flows reports loss (nic_loss_per_s: the host agent's counters, not the
//     tenant's word), or when a probe a host agent measured (OnHostProbes: its path's capacity)
//     is among its slow rows (unless another link of its path is held faulty, or a flow crossed
//     this one faster than kProbeMargin x the probe's capacity: OutranProbe); one job's flows
//     alone are shown as a suspect and change nothing (a
//     link already held faulty stays so on any job's evidence) but make it a probe target
//     (probe_targets: the control loop has host probes designed over it, which settle it either
//     way);
//   * a job whose reports contradict every other source is not believed: when all of its slow
//     flows (at least localisation.min_flows) cross only links on which another job's flow of
//     the same or a lower priority is healthy and ran at least 1 / gray_ratio times as fast
//     (any healthy flow for a flow that made no progress: a dead link serves nobody; a slower
//     one may just need less than a degraded link still has), and no switch counter, port
//     state, NIC loss or slow
//     host-measured probe backs any of
//     them, in two consecutive evaluations, its samples are left out of the tomography until
//     an evaluation finds it consistent again; it is listed (ContradictedJobs) for cruxctl
//     faults and /metrics. A capacity loss hurts the lowest priority first, hence the level
//     condition: a low-priority job that alone slows down on a degraded link is not a liar;
//   * a suspect that the observations cannot tell apart from another link (ambiguous) changes
//     nothing unless counters single it out; it is shown (cruxctl faults) for probes to resolve;
//   * tomography acts only on a suspect that two consecutive evaluations (evaluate_interval
//     apart) agree on: right after a fault starts, jobs that have not reported since still show
//     healthy samples over the faulty link, which can shift the blame to a neighbour for a round.
//     A suspect that host probes back needs two evaluations within 3 evaluate_intervals (a probe
//     sees a gray link only while the job that shares it is active, which may alternate);
// Worse states apply at once. A better state (recovery, or a higher capacity estimate) applies
// only once the link has been free of every fault signal for its hold time:
//   * hold = min_dwell for a first fault; a new fault within `stable_decay` of the last
//     recovery doubles it (up to max_hold); every stable_decay without a fault halves it back;
//   * flaps are scored by downtime, not by count: a decayed sum of the time the link spent down
//     (half-life downtime_half_life); above quarantine_downtime the hold is max_hold.
//   So a link flapping faster than its hold stays down for the whole episode: two re-plans
//   (down, then up once it has been quiet for the hold), and a link flapping slower than its
//   hold costs at most 2 + 2 log2(max_hold / min_dwell) changes per episode.
// A degraded capacity is re-estimated only when the estimate moves by more than
// capacity_hysteresis (relative), so jitter in the flows' rates does not re-plan.
//
// Admin: SetAdmin pins a link's health (cruxctl set-link up|down|degraded): the automatic state
// is still computed and shown, but the pinned one is in force until ClearAdmin (cruxctl set-link
// ... auto) hands the link back. With `automatic` off, only admin pins change links.
//
// Every change of a link's effective health is returned by Evaluate as a LinkDecision (for the
// host to apply to its topology, audit and re-plan) and kept in an event log with the reason,
// the evidence and the jobs whose pinned flows crossed the link at that moment.
//
// Cost: a signal is O(1) (flows: O(flows of the report)); Evaluate is O(flow samples) when all
// are healthy, plus the localisation of the unhealthy part of the matrix otherwise.
//
// Thread-safety: not thread-safe (one owner: the control loop's thread).
#ifndef CRUX_CORE_FAULTS_FAULT_MANAGER_H_
#define CRUX_CORE_FAULTS_FAULT_MANAGER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/faults/fault_localisation.h"
#include "crux/core/faults/fault_probes.h"
#include "crux/core/model/control_types.h"
#include "crux/core/topology/link_name.h"
#include "crux/core/topology/topology.h"

namespace crux::core {

// What a flow's achieved rate is measured against (see the file comment).
enum class FlowExpectation {
  kPlanShare,  // min(own best recent rate, share under the plan in force).
  kOwnBest,    // Own best recent rate.
};

struct FaultOptions {
  // false: signals are recorded and localised (shown), but links change only by admin pins.
  bool automatic = true;
  LocalisationOptions localisation;
  FlowExpectation expectation = FlowExpectation::kPlanShare;
  // Jobs whose flows must back a tomography suspicion before it changes a link that no switch
  // signal (counters, port state) accuses. >= 1; 1 lets a single tenant's reports move links.
  int min_jobs = 2;
  // Flow samples and counter readings older than this are ignored. > 0.
  Duration evidence_window = Duration::Millis(10000);
  // Evaluate at most this often because of new flow or counter data (link-state events are
  // evaluated at once). > 0.
  Duration evaluate_interval = Duration::Millis(1000);
  // Errors + discards per second on a port direction that count as a counter signal. > 0.
  double counter_errors_per_s = 10;
  // Loss events per second on a NIC (NicCounterSignal::loss) that count as loss evidence for
  // the paths of its flows. > 0.
  double nic_loss_per_s = 10;
  // Capacity of a link that only counters accuse, as a fraction of nominal. (0, 1].
  double counter_capacity_fraction = 0.5;
  // Floor of an estimated capacity (a planner needs capacity > 0). (0, 1].
  double min_capacity_fraction = 0.01;
  // A degraded link's capacity changes only when the estimate moves by more than this (relative).
  double capacity_hysteresis = 0.25;
  // A flow's expected rate is its best recent rate, decaying with this half-life. > 0.
  Duration baseline_half_life = Duration::Millis(600000);
  // Damping (see the file comment). min_dwell > 0, max_hold >= min_dwell, others > 0.
  Duration min_dwell = Duration::Millis(5000);
  Duration max_hold = Duration::Millis(300000);
  Duration stable_decay = Duration::Millis(60000);
  Duration downtime_half_life = Duration::Millis(600000);
  Duration quarantine_downtime = Duration::Millis(60000);
  size_t max_events = 256;  // Event log length, >= 1.
  // Probes over the links no live flow covers (fault_probes.h), designed with every plan.
  ProbeOptions probes;

  friend bool operator==(const FaultOptions&, const FaultOptions&) = default;
};

// kInvalidArgument naming the field ("faults.min_dwell: must be > 0").
Status ValidateFaultOptions(const FaultOptions& o);

// ---- signals ----

// A port's operational state from a switch (both directions of the cable: the host sends one
// signal per directed link).
struct LinkStateSignal {
  LinkId link;
  bool up = true;
  std::string source;  // "switch tor0 port Ethernet0 (to agg0)".
};

// Counter deltas of one direction of a link over `interval` (the switch's reading of its port:
// in_* counters belong to the direction into the switch, out_* to the direction out of it).
struct CounterSignal {
  LinkId link;
  Duration interval;         // > 0.
  uint64_t errors = 0;       // IF_IN_ERRORS / IF_OUT_ERRORS, FEC uncorrectable frames.
  uint64_t discards = 0;     // IF_IN_DISCARDS / IF_OUT_DISCARDS.
  uint64_t pfc_pause = 0;    // PFC pause frames (informational: congestion, not a fault).
  uint64_t queue_drops = 0;  // Queue drops (informational).
  uint64_t ecn_marks = 0;    // ECN-marked packets (informational).
  std::string source;
};

// A NIC port's RDMA hardware counter deltas over `interval` (crux-hostd reads them from sysfs,
// /sys/class/infiniband/<dev>/ports/<n>/hw_counters). The host agent is the operator's, not a
// tenant's, so this is a signal independent of the jobs' flow reports. The NIC cannot say which
// link lost a packet, only that its flows met loss (or congestion) somewhere on their paths.
struct NicCounterSignal {
  NodeId nic;
  Duration interval;  // > 0.
  // Loss side: packet_seq_err + out_of_sequence + local_ack_timeout_err + roce_adp_retrans +
  // roce_adp_retrans_to (a receiver sees the gaps, a sender the retransmissions).
  uint64_t loss = 0;
  // Congestion side (informational): np_cnp_sent + rp_cnp_handled + np_ecn_marked_roce_packets.
  uint64_t congestion = 0;
  std::string source;  // "host3 mlx5_0 port 1".

  friend bool operator==(const NicCounterSignal&, const NicCounterSignal&) = default;
};

// One flow's (or probe's) measurement over the report window.
struct FlowSample {
  NodeId src_nic;
  NodeId dst_nic;
  // The source port it used: the sample is matched to the pin of its NIC pair with this port
  // (one sample per pin; a port no pin of the pair has is skipped as older than the plan).
  // 0 (unknown): matched to the pair's first pin in the assignment (the pre-per-pin behaviour).
  uint16_t udp_sport = 0;
  Bytes bytes;             // Delivered in the window.
  Duration transfer_time;  // Time spent transferring them (> 0 when bytes > 0).
  uint64_t errors = 0;     // Transport errors (timeouts, retransmission exhaustion).
  bool probe = false;      // A probe (its path is the assignment's probe pin with udp_sport).
};

// An admin pin.
struct AdminLinkState {
  LinkHealth health = LinkHealth::kUp;
  double capacity_fraction = 1;  // kDegraded: (0, 1].

  friend bool operator==(const AdminLinkState&, const AdminLinkState&) = default;
};

// ---- outputs ----

struct LinkDecision {
  LinkId link;
  LinkHealth health = LinkHealth::kUp;
  double capacity_fraction = 1;  // Of nominal; 1 unless kDegraded.
  bool automatic = true;         // false: an admin pin (or ClearAdmin handing back).
  std::string reason;

  friend bool operator==(const LinkDecision&, const LinkDecision&) = default;
};

struct FaultEvent {
  Duration at;
  LinkId link;
  LinkHealth from = LinkHealth::kUp;
  LinkHealth to = LinkHealth::kUp;
  double capacity_fraction = 1;
  bool automatic = true;
  std::string reason;
  std::vector<std::string> evidence;
  std::vector<std::string> jobs;  // Whose pinned flows crossed the link when it changed.
};

// A job whose flow reports contradict every other source (see the rules above).
struct ContradictedJob {
  std::string job;
  Duration since;            // First evaluation that flagged it.
  int slow_flows = 0;        // Its slow or failed flows at the latest evaluation.
  uint64_t evaluations = 0;  // Evaluations that left its samples out.
  std::string example;       // One contradicted flow and who contradicts it.

  friend bool operator==(const ContradictedJob&, const ContradictedJob&) = default;
};

// What the manager knows about one directed link (only links with a signal, a suspect, an admin
// pin or a non-up state are kept).
struct LinkFaultView {
  LinkId link;
  LinkHealth effective = LinkHealth::kUp;
  double effective_fraction = 1;
  LinkHealth automatic = LinkHealth::kUp;  // The automatic state (whatever the admin pinned).
  double automatic_fraction = 1;
  Duration since;  // The effective state's start.
  std::optional<AdminLinkState> admin;
  std::string reason;                 // Of the current automatic state (or the latest suspicion).
  std::vector<std::string> evidence;  // Latest evidence lines.
  double score = 0;                   // Suspect score: 007 votes or 1 - estimate.
  int jobs = 0;                       // Jobs behind the tomography suspicion.
  bool suspect = false;               // A current suspect (tomography or counters).
  bool ambiguous = false;
  bool port_down = false;
  Duration hold;          // Current hold time.
  double downtime_s = 0;  // Decayed downtime score, seconds.
  uint64_t changes = 0;   // Automatic changes so far.
};

class FaultManager {
 public:
  // REQUIRES: ValidateFaultOptions(options).ok().
  explicit FaultManager(FaultOptions options);

  void SetOptions(const FaultOptions& options);
  const FaultOptions& options() const { return options_; }

  // ---- signals ----
  void OnLinkState(const LinkStateSignal& s, Duration now);
  void OnCounters(const CounterSignal& s, Duration now);
  // A NIC's counters (replace that NIC's previous reading).
  void OnNicCounters(const NicCounterSignal& s, Duration now);
  // Probes of job `job_id`'s assignment that a host agent (the operator's, not the tenant's)
  // sent and measured: an independent source, like a NIC's counters. Each sample gives the
  // *capacity* of the probe's path (bytes / transfer_time: a packet-pair or packet-train
  // dispersion measurement, which congestion does not lower), and is measured against the
  // smallest nominal capacity of that path. Rows as OnFlows (samples without `probe` set are
  // ignored). A slow one backs a suspicion of the links of its path (the
  // tenant rule and the contradiction rule, above); a healthy one clears them in the
  // localisation but vouches against no job (full capacity is not the absence of congestion).
  void OnHostProbes(const std::string& job_id, const std::vector<FlowSample>& samples,
                    Duration now);
  // The samples of one job's report (replace that job's previous ones per flow: per job, NIC
  // pair and source port). A flow's expected rate is the best recent rate of that key; a new
  // port of a known pair (a re-pin) starts from the best recent rate of the pair's other ports.
  void OnFlows(const std::string& job_id, const std::vector<FlowSample>& samples, Duration now);
  void ForgetJob(const std::string& job_id);

  // ---- admin ----
  void SetAdmin(LinkId link, AdminLinkState state, Duration now);
  void ClearAdmin(LinkId link, Duration now);
  // Start-up: a stored pin that the host already applied to its topology (no decision, no event).
  void RestoreAdmin(LinkId link, AdminLinkState state, Duration now);
  std::optional<AdminLinkState> admin(LinkId link) const;

  // ---- decisions ----
  // Applies the rules at `now` over the signals, the applied plan (the routing matrix) and
  // `nominal` (names, capacities); returns the links whose effective health changed.
  std::vector<LinkDecision> Evaluate(Duration now, const Topology& nominal,
                                     const AppliedPlan& applied);
  // When Evaluate should run next (nullopt: nothing pending).
  std::optional<Duration> NextDue() const;

  // ---- views ----
  LinkHealth effective(LinkId link) const;
  double effective_fraction(LinkId link) const;
  std::vector<LinkFaultView> Links() const;
  const std::deque<FaultEvent>& events() const { return events_; }
  // Events (newest first) that listed `job_id` among the jobs crossing the changed link.
  std::vector<const FaultEvent*> EventsForJob(const std::string& job_id) const;
  uint64_t evaluations() const { return evaluations_; }
  // Jobs whose reports are not believed now (see the rules), by job id.
  std::vector<ContradictedJob> ContradictedJobs() const;
  // Evaluations x jobs whose samples were left out, since start.
  uint64_t disbelieved_reports() const { return disbelieved_reports_; }
  // Links under a suspicion that the rules cannot act on yet for want of an independent source
  // (one job's flows and no switch or NIC signal), or that the flows cannot tell apart from a
  // neighbour (ambiguous), or on the path of a slow flow the localisation cannot place (fewer
  // than min_flows rows over its links), at some evaluation within the evidence window: the
  // control loop has
  // probes designed over them (fault_probes.h, DesignProbes' `suspects`), whose host-measured
  // results settle them. Kept only with options().probes.enabled. At most kMaxProbeTargets.
  // In the order probes are designed for them (per-job budgets run out): the localisation's
  // suspects first, the most degraded (highest score) first, then the links only on a slow
  // flow's path: those no healthy row vouches for first, then those whose slow flows' jobs have
  // the smallest share of slow rows, then the most recently wanted; ties by id. Changes only at
  // Evaluate.
  const std::vector<LinkId>& probe_targets() const { return probe_targets_; }
  // The same links, sorted by id (what a re-plan for probes depends on: the set, not the order).
  const std::vector<LinkId>& probe_target_set() const { return probe_target_set_; }
  static constexpr size_t kMaxProbeTargets = 64;

 private:
  struct Counters {
    CounterSignal last;
    Duration at;
  };
  struct LinkState {
    // Automatic state.
    LinkHealth health = LinkHealth::kUp;
    double fraction = 1;
    Duration auto_since;
    std::string reason;
    std::vector<std::string> evidence;
    // Effective state in force (what the host applied).
    LinkHealth eff_health = LinkHealth::kUp;
    double eff_fraction = 1;
    Duration eff_since;
    std::optional<AdminLinkState> admin;
    // Signals.
    bool port_down = false;
    std::string port_source;
    std::optional<Counters> counters;
    bool suspect = false;
    bool ambiguous = false;
    double score = 0;
    int jobs = 0;  // Distinct jobs behind the tomography suspicion.
    // Last evaluation that found it a suspect the rules cannot act on yet (probe_targets).
    std::optional<Duration> probes_wanted_at;
    // Of those, the last that found it a localisation suspect (not only on a slow flow's path):
    // such targets are kept first when there are more than kMaxProbeTargets.
    std::optional<Duration> suspect_probes_at;
    // For a link only on slow flows' paths, as the last evaluation that wanted probes over it
    // saw it: whether a healthy row vouched for it (one of the same or a lower priority, or a
    // host probe), and the smallest share of slow rows in the jobs of the slow flows crossing
    // it, in [0, 1] (a job with one slow row of many points at its path; one slow all over, at
    // nothing). Both only rank probe targets.
    bool probes_vouched = false;
    double probes_slow_share = 1;
    int host_probes = 0;                 // Host-measured probes behind the tomography suspicion.
    std::optional<Duration> suspect_at;  // Last evaluation with a tomography suspicion.
    // Damping.
    Duration hold;
    bool hold_set = false;
    std::optional<Duration> last_bad;  // Last evaluation with a fault signal.
    Duration last_at_current;  // Last evaluation whose signals were at least as bad as `health`.
    std::optional<Duration> last_recovery;  // Last automatic return to up.
    double downtime_s = 0;
    Duration downtime_at;
    uint64_t changes = 0;
  };
  struct FlowKey {
    std::string job;
    uint32_t src = 0;
    uint32_t dst = 0;
    bool probe = false;
    // The sample's source port: a pair may have several pins (and probes), each its own row of
    // the routing matrix. 0 (unknown): the pair's first pin.
    uint32_t sport = 0;
    bool host = false;  // A probe a host agent measured (OnHostProbes), not the job.
    friend auto operator<=>(const FlowKey&, const FlowKey&) = default;
  };
  struct FlowRecord {
    FlowSample sample;
    Duration at;
    double baseline_bps = 0;
    Duration baseline_at;
  };

  // Evaluate's working types (defined in fault_manager.cc).
  struct Observations;  // The routing matrix.
  struct Evaluation;    // What one Evaluate call decides from.
  struct LinkSignals;   // One link's counter and tomography signals.
  struct Want;          // The automatic state the rules ask for.

  LinkState& State(LinkId link);
  void AccrueDowntime(LinkState& s, Duration now) const;
  Duration NextHold(const LinkState& s, Duration now) const;
  void Record(LinkId link, const LinkState& s, LinkHealth from, Duration now, bool automatic,
              std::vector<std::string> jobs);

  // ---- the steps of Evaluate, in order ----
  // Drops the flows nobody reported for a baseline half-life (their baselines too).
  void ForgetStaleFlows(Duration now);
  // OnFlows and OnHostProbes: records the samples under `job_id` (`host`: measured by a host).
  void Store(const std::string& job_id, const std::vector<FlowSample>& samples, bool host,
             Duration now);
  // Notes, for each pin of each job's assignment in `applied`, since when it has had its path
  // (first seen at `now` when the pin is new, its path changed or the job's level changed): its
  // samples from before then plus one evaluate_interval measured the old path or were taken at
  // another priority (a sample with port 0 would otherwise be read as the new first pin's), so
  // they are left out. A new epoch that keeps a flow pin's path and the job's level (only the
  // probes or the DSCP changed) keeps its samples: a job re-issued at every evaluation must not
  // go unheard. Probes start again at every new epoch (kept too, they made crux-sim decide wrong
  // links on llm2025_dualtor3: docs/fault-simulation.md, stop 46).
  void NoteReplans(const AppliedPlan& applied, Duration now);
  // Every sample since `window_start` whose flow (or probe) is pinned in `applied`, with the
  // path it was measured on.
  Observations BuildObservations(Duration window_start, const AppliedPlan& applied,
                                 const Topology& nominal) const;
  // The best recent rate of `key` (a probe: also its pair's flows' best).
  double BestRate(const FlowKey& key, const FlowRecord& rec) const;
  // Under kPlanShare, when some row is slow against its best rate: measures every row against
  // min(best rate, planned share) instead (planned_share.h; demands = best rates; a job's row
  // older than its newest by more than evaluate_interval is idle: it competes only for its own
  // share, never for the other rows').
  void ApplyPlannedShares(Observations& obs, const Topology& nominal) const;
  // The contradiction rule (see the file comment): updates contradictions_ and drops the rows
  // of the jobs not believed.
  void DropContradictedJobs(Observations& obs, Duration now, Duration window_start,
                            const Topology& nominal);
  // Whether switch counters (fresh since `window_start`) accuse the link.
  bool CountersAccuse(const LinkState& s, Duration window_start) const;
  // The NIC's fresh reading when it reports loss at or above nic_loss_per_s, else null.
  const NicCounterSignal* NicLoss(NodeId nic, Duration window_start) const;
  // Applies the rules to one link of the nominal topology: updates its automatic and effective
  // state, and returns the decision when its effective health changed.
  std::optional<LinkDecision> DecideLink(LinkId id, const Evaluation& ev);
  LinkSignals ReadSignals(LinkId id, const LinkState& s, const Evaluation& ev) const;
  // Whether a link of `path` other than `id`, or the other direction of one (a cable fails both
  // ways), is held faulty (automatically or by the admin): it explains a slow host probe over
  // `path`, which then backs no suspicion of `id`.
  bool HeldFaultyElsewhere(const std::vector<LinkId>& path, LinkId id,
                           const Topology& nominal) const;
  // Whether a flow (a job's row of `obs`, not failed) crossing `id`, reported within
  // evaluate_interval of the host probe at row `probe`, ran faster than kProbeMargin times the
  // probe's measured capacity: then `id` is not the probe's narrowest link, and the probe backs
  // no suspicion of it. O(rows x path length).
  bool OutranProbe(const Observations& obs, size_t probe, LinkId id) const;
  // A host probe's measurement error allowed for by OutranProbe (a flow must beat its capacity
  // by more than 10 %).
  static constexpr double kProbeMargin = 1.1;
  // The rules (see the file comment); `tomo_usable`: a confirmed suspicion that counters back
  // if the observations cannot single it out.
  Want Rules(const LinkState& s, const LinkSignals& sig, bool tomo_usable) const;
  // Moves the automatic state to `want` under the damping: worse at once, better only after
  // the hold. Returns whether it moved.
  bool ApplyDamped(LinkState& s, Want want, Duration now);
  // Brings the effective state in line (admin pin, else the automatic state when automatic);
  // records the event and returns the decision when it changed.
  std::optional<LinkDecision> UpdateEffective(LinkId id, LinkState& s, bool auto_changed,
                                              const Evaluation& ev);
  // Drops the records of links that never faulted and carry no signal.
  void PruneRecords();
  // A slow row (not a host probe) none of whose links the localisation suspects - fewer than
  // min_flows rows cross them, e.g. the one flow over a NIC's access link - makes every link of
  // its path a probe target: host probes over them add the rows the localisation lacks. "Slow"
  // here is below SlowForProbes(), so a row only a little below what it is entitled to counts
  // too (it accuses nothing itself). Not the rows of a job most of whose rows are slow (slow as a
  // whole: no link to look for).
  void WantProbesForUnexplained(const Observations& obs,
                                const std::map<LinkId, const Suspect*>& suspects, Duration now);
  // The rate ratio below which a row wants probes: gray_ratio, raised to probes.suspect_ratio
  // with probes on. Also the ratio (against the best rate) that makes BuildObservations compute
  // the planned shares.
  double SlowForProbes() const {
    return options_.probes.enabled
               ? std::max(options_.localisation.gray_ratio, options_.probes.suspect_ratio)
               : options_.localisation.gray_ratio;
  }
  // probe_targets_ from the links' probes_wanted_at (wanted within the evidence window): at most
  // kMaxProbeTargets, in the order probe_targets() states.
  void UpdateProbeTargets(Duration now);

  FaultOptions options_;
  std::map<LinkId, LinkState> links_;
  std::map<FlowKey, FlowRecord> flows_;
  struct NicCounters {
    NicCounterSignal last;
    Duration at;
  };
  std::map<uint32_t, NicCounters> nics_;  // By NIC node id.
  struct Contradiction {
    int streak = 0;  // Consecutive evaluations that found the job contradicted.
    bool flagged = false;
    ContradictedJob view;
  };
  std::map<std::string, Contradiction, std::less<>> contradictions_;  // By job.
  uint64_t disbelieved_reports_ = 0;
  std::vector<LinkId> probe_targets_;
  std::vector<LinkId> probe_target_set_;
  // A pin (flow or probe) of a job's assignment in force: its path, and the evaluation that
  // first saw it on that path at the job's level. Samples from before then plus one
  // evaluate_interval measured something else (an older path or level, or no such pin yet).
  using PinKey = std::tuple<uint32_t, uint32_t, uint32_t, bool>;  // src, dst, sport, probe.
  struct PinSince {
    std::vector<LinkId> path;
    Duration since;
    // Since when the pin has had this path, whatever the level or the epochs since: a host
    // probe measures its path's capacity, which neither changes, so only a sample from before
    // then (another path, or no such pin yet) measured something else.
    Duration path_since;
  };
  struct Replan {
    uint64_t epoch = 0;
    int level = 0;  // The job's level in that epoch.
    std::map<PinKey, PinSince> pins;
  };
  std::map<std::string, Replan, std::less<>> replans_;  // By job.
  std::deque<FaultEvent> events_;
  bool urgent_ = false;  // A link-state or admin change: evaluate at once.
  bool dirty_ = false;   // New flow or counter data.
  std::optional<Duration> last_eval_;
  uint64_t evaluations_ = 0;
};

}  // namespace crux::core

#endif  // CRUX_CORE_FAULTS_FAULT_MANAGER_H_
