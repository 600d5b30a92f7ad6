// Simulate by policy name: core::MakePolicy behind a PolicyFactory. Kept apart from the engine so
// that a program using only the factory overload does not need the policy registry.
#include "crux/core/base/clock.h"
#include "crux/sim/simulator.h"

namespace crux::sim {

core::Result<SimResult> Simulate(const core::Topology& topo, const std::string& policy,
                                 const std::vector<SimJob>& jobs,
                                 const std::vector<LinkEvent>& link_events,
                                 const SimOptions& options) {
  // Fail fast on an unknown name, before validating the workload. The probe never plans; it
  // still gets a clock of its own, not the wall clock.
  {
    const core::FakeClock probe_clock;
    CRUX_ASSIGN_OR_RETURN(auto probe, core::MakePolicy(policy, topo, options.policy, &probe_clock));
    (void)probe;
  }
  core::PolicyOptions policy_options = options.policy;
  // cruxd's stable re-planning under the control loop (ControlOptions::stable).
  policy_options.stable = !options.control.oracle && options.control.stable;
  // The engine passes its simulated-time clock: the policy reads virtual time only.
  PolicyFactory factory = [policy, policy_options](const core::Topology& t,
                                                   const core::Clock& clock) {
    return core::MakePolicy(policy, t, policy_options, &clock);
  };
  return Simulate(topo, factory, jobs, link_events, options);
}

}  // namespace crux::sim
