// Hidden faults in the simulated fabric and the signals the simulated world produces about them
// (docs/fault-simulation.md; the public types are crux/sim/faults.h). A fault changes the
// physical capacity of its links in the fluid network (Fabric) and nothing else: the planner's
// topology (PlanApplier) learns about it only from the control loop's decisions, which come from
//   * the jobs' heartbeats: every report_interval each running job reports its pinned flows'
//     samples (JobModel::TakeFlowSamples) to the loop (PlanApplier::ObserveFlows);
//   * the host agents: with probes on (the loop's faults.probes), every report_interval each
//     running job's probes measure their pinned paths' capacity (MeasureProbes) and are reported
//     as host-measured results (PlanApplier::ObserveHostProbes);
//   * the switches: for a hard fault, each of its directed links goes down (and later up)
//     switch_delay after the fault starts (ends), when switch_signals is on; a lossy link's
//     ports report error counters with every heartbeat round while it is in force.
//
// Internal to crux::sim. Thread-safety: none (owned by the engine).
#ifndef CRUX_SIM_SRC_FAULTS_FAULT_INJECTOR_H_
#define CRUX_SIM_SRC_FAULTS_FAULT_INJECTOR_H_

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "control/plan_applier.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/faults.h"
#include "crux/sim/sim_types.h"
#include "jobs/job_model.h"
#include "metrics/metrics.h"
#include "network/fabric.h"

namespace crux::sim::internal {

class FaultInjector {
 public:
  // `topo` (nominal capacities), `options` and `result` (fault records go into
  // result.fault_records) outlive the injector.
  FaultInjector(const core::Topology& topo, const FaultSimOptions& options, Duration horizon,
                SimResult& result);

  // The next time something of ours is due (never before `now`).
  Duration next_time(Duration now) const;
  // A fault start, end or switch signal is due at `now` (not only a heartbeat).
  bool event_due(Duration now) const;
  // The time a fast-forward sleep must end before: the next fault start, end or switch signal,
  // and, while a fault is in force or `links_not_up` (a decision to undo), the next heartbeat
  // (the samples then carry news; otherwise they repeat healthy ones, which a sleeping job
  // skips: Handle's heartbeat leaves jobs asleep out).
  Duration barrier(bool links_not_up) const;
  // Everything due at `now`. Returns true if a physical capacity changed.
  bool Handle(Duration now, Fabric& fabric, Metrics& metrics, JobModel& jobs, PlanApplier& host);

 private:
  enum class Kind : uint8_t { kStart, kEnd, kSwitch };
  struct Ev {
    Kind kind = Kind::kStart;
    size_t fault = 0;
    bool up = false;  // kSwitch.
  };

  void Start(size_t i, Duration now, Fabric& fabric, Metrics& metrics, JobModel& jobs);
  void End(size_t i, Duration now, Fabric& fabric, Metrics& metrics);
  void SetPhysical(core::LinkId l, Duration now, Fabric& fabric, Metrics& metrics);
  void Heartbeat(Duration now, Fabric& fabric, JobModel& jobs, PlanApplier& host);
  // Job j's probes (its assignment's, when the loop designs them) as its hosts' agents measure
  // them this round: the capacity of the probe's pinned path (the smallest physical capacity in
  // force on it: what a packet-pair / packet-train dispersion measurement gives, which
  // congestion does not lower; the probe does not join the network), reported as one message of
  // the probe size at that rate; a probe over a link that is down is lost (one transport error).
  std::vector<core::FlowSample> MeasureProbes(uint32_t j, const Fabric& fabric,
                                              const PlanApplier& host) const;
  // The switches' counter readings of the lossy links in force (switch_signals), one per
  // report_interval (SONiC's port flex counters poll every second, as the heartbeats come).
  void Counters(PlanApplier& host);

  const core::Topology& topo_;
  const FaultSimOptions& options_;
  SimResult& result_;
  std::multimap<Duration, Ev> queue_;
  Duration next_report_;
  std::mt19937_64 rng_;
  // Per directed link: the capacity fractions of the faults in force on it.
  std::map<uint32_t, std::vector<double>> on_link_;
  std::vector<size_t> active_;  // Faults in force.
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_FAULTS_FAULT_INJECTOR_H_
