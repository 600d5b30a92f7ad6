// Steady-state fast-forward (docs/simulator.md, section 6): a detector of steady regimes of
// groups of interacting jobs, and their sleep.
//
// Groups are jobs whose planned flows share resources, transitively: their dynamics are
// independent of every other group's. Each group's anchor (its job with the longest standalone
// period) takes a snapshot of the group at its iteration starts. A snapshot equal to an earlier
// one (up to 63 anchor iterations back: commensurate periods) makes the group exactly periodic;
// otherwise (contending jobs with incommensurate periods) it is taken as steady when its jobs'
// rates over the two halves of the last 64 or 32 anchor iterations agree.
//
// A steady group whose jobs' profilers are settled falls asleep on its own, whatever the other
// groups do: its timeline (job events, flow clocks) moves whole group periods later, up to the
// horizon, an iteration limit or a fault barrier, and it is credited its rates when it wakes.
// What may change a sleeping group's dynamics wakes it first, moving it back to now: it then
// lands on the last whole group period and is simulated from there up to now, alone (nothing
// else has events in between), so it resumes in the state the full simulation has. A link or
// fault event (a capacity) and the oracle's re-plan wake every group; a departure wakes the
// departing job's group; a control loop run wakes the groups of the jobs whose plan it changes
// (WakeGroupOf, before the change), and a regroup those whose resources a job outside them now
// plans to use (an arrival's default routes, another job's new paths). Any other group sleeps on
// through the re-plan: its jobs, plans and resources are unchanged, so is its timeline.
//
// A re-plan (BeginRegroup / EndRegroup) keeps what is known about a group whose jobs and plans
// are unchanged (their dynamics are unchanged), its sleep included; a link event (FabricChanged)
// keeps nothing.
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_STEADY_FAST_FORWARD_H_
#define CRUX_SIM_SRC_STEADY_FAST_FORWARD_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/sim/sim_types.h"
#include "engine/sim_clock.h"
#include "jobs/job_model.h"
#include "metrics/metrics.h"
#include "network/fabric.h"

namespace crux::sim::internal {

class SteadyStateDetector {
 public:
  // Simulates the events before `until` (all of them a woken group's), the clock set back to
  // where the group landed: the engine's event loop restricted to flow and job events.
  using CatchUp = std::function<void(core::Duration until)>;

  // Everything passed outlives the detector.
  SteadyStateDetector(const SimOptions& options, const engine::SimClock& clock, JobModel& jobs,
                      Fabric& fabric, Metrics& metrics, SimResult& result, CatchUp catch_up);

  // Around a regroup, after the plans changed and before the iterations of arrived jobs start:
  // BeginRegroup (wakes every group after a link event, otherwise each sleeping group a job
  // outside it now plans to cross or whose plans changed; a new plan epoch: flows in flight now
  // are old, but for those of sleeping groups), EndRegroup after (the groups of the new plans;
  // unchanged ones carried over, asleep or not, and a sleep check is due).
  void BeginRegroup();
  void EndRegroup();
  // A link event: capacities changed, no group carries over. REQUIRES: WakeAll() before the
  // capacities changed.
  void FabricChanged() { fabric_changed_ = true; }

  // Hooks of the job model: `j` started an iteration; the flows of earlier plans are done
  // (a steady group that waited for them may sleep now).
  void OnIterationStart(uint32_t j);
  void OnOldFlowsDone();
  // A check is due at the end of the instant (a snapshot is pending, or a steady group is
  // awake).
  bool check_due() const { return check_; }
  void ClearCheck() { check_ = false; }

  // Takes the pending snapshots, then puts to sleep every steady, awake group whose jobs are
  // all `settled(j)` (no profiler report under way), when no flow of an earlier plan is in
  // flight: whole periods of the group, waking before `limit` (horizon, fault barrier) and
  // before the last iterations of jobs with an iteration count.
  void Check(core::Duration limit, const std::function<bool(uint32_t)>& settled);

  // When the next sleeping group wakes (Infinite() if none sleeps).
  core::Duration next_wake() const { return next_wake_; }
  // Wakes the groups due now (credited their sleep).
  void WakeDue();
  // Wakes the group of job `j` if it sleeps (before its plan or its flows change).
  void WakeGroupOf(uint32_t j);
  // Wakes every sleeping group now: its timeline moves back to the last whole group period
  // since it fell asleep (credited up to there) and the rest, under one period, is simulated up
  // to now (catch_up), so it wakes in the state it would be in.
  void WakeAll();
  // Every running job's group sleeps (nothing is simulated in detail).
  bool all_asleep() const { return !groups_.empty() && asleep_ == groups_.size(); }

 private:
  struct JobSnap {
    core::Duration phase;  // now - iter_start.
    core::Duration compute_left;
    core::Duration comm_start_left;
    core::Duration pending_shift;
    bool computing = false;
    bool comm_started = false;
    bool comm_done = false;
    std::vector<uint8_t> flow_status;
    std::vector<double> flow_value;  // Remaining bytes, or ns to delivery.
    std::vector<double> flow_size;   // Planned bytes.
    // Phase-level jobs: only flows not done, by FlowRun::key (slots are reused in an order that
    // depends on history), and the iteration machine (segment, per-op counters).
    std::vector<uint64_t> flow_key;
    std::vector<int64_t> phase_state;
    int64_t iterations = 0;
    // Continuous: iterations plus the part of the one under way, in units of the job's mean
    // iteration so far (for the rates of approximately steady groups).
    double progress = 0;
    core::Duration iteration_time_sum;
    // Continuous: compute phases done plus the one under way up to now.
    core::Duration compute_busy;
    double bytes_sent = 0;
    std::vector<double> class_bits;
  };
  struct Snapshot {
    core::Duration t;
    std::vector<JobSnap> snaps;  // One per job of the group, in group order.
  };
  struct Group {
    std::vector<uint32_t> jobs;  // Ascending.
    uint32_t anchor = 0;         // Snapshots are taken when it starts an iteration.
    int64_t anchor_iterations = 0;
    bool pending = false;  // A snapshot is due at the end of this instant.
    bool known = false;    // Steady: the rates of its jobs are set.
    core::Duration period;
    std::vector<Snapshot> snaps;
    // Asleep: its timeline was moved to wake_at when it fell asleep at slept_from.
    bool asleep = false;
    core::Duration slept_from;
    core::Duration wake_at;
  };

  void BuildGroups();
  uint64_t PlanFingerprint(uint32_t j) const;
  void CheckGroup(Group& g);
  Snapshot TakeSnapshot(const Group& g) const;
  bool Matches(const Group& g, const Snapshot& a, const Snapshot& b, core::Duration period) const;
  bool RatesAgree(const Group& g, const Snapshot& a, const Snapshot& b, const Snapshot& c) const;
  void SetRates(Group& g, const Snapshot& from, const Snapshot& to, core::Duration period,
                bool exact);
  // The wake time of a sleep of `g` starting now (now if it cannot sleep before `limit`).
  core::Duration WakeTime(const Group& g, core::Duration limit) const;
  void Sleep(Group& g, core::Duration wake_at);
  void Wake(Group& g);
  // BeginRegroup's wake-ups: every sleeping group that will not be carried over unchanged.
  void WakeChanged();
  // Credits the jobs of `g` their rates over [from, from + d) (iterations, compute, bytes,
  // link bits, samples).
  void Credit(const Group& g, core::Duration from, core::Duration d);
  void UpdateNextWake();

  const SimOptions& options_;
  const engine::SimClock& clock_;
  CatchUp catch_up_;
  JobModel& jobs_;
  Fabric& fabric_;
  Metrics& metrics_;
  SimResult& result_;
  std::vector<Group> groups_;
  std::vector<Group> previous_groups_;  // From BeginRegroup to EndRegroup.
  bool fabric_changed_ = false;         // Since the last EndRegroup: nothing carries over.
  bool check_ = false;
  size_t asleep_ = 0;  // Groups asleep.
  core::Duration next_wake_ = core::Duration::Infinite();
  std::vector<int> resource_owner_;  // Scratch for BuildGroups.
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_STEADY_FAST_FORWARD_H_
