// Simulate by policy name: core::MakePolicy behind a PolicyFactory. Kept apart from the engine so
// that a program using only the factory overload does not need the policy registry.
#include "crux/sim/simulator.h"

namespace crux::sim {

core::Result<SimResult> Simulate(const core::Topology& topo, const std::string& policy,
                                 const std::vector<SimJob>& jobs,
                                 const std::vector<LinkEvent>& link_events,
                                 const SimOptions& options) {
  // Fail fast on an unknown name, before validating the workload.
  {
    CRUX_ASSIGN_OR_RETURN(auto probe, core::MakePolicy(policy, topo, options.policy));
    (void)probe;
  }
  const core::PolicyOptions policy_options = options.policy;
  PolicyFactory factory = [policy, policy_options](const core::Topology& t) {
    return core::MakePolicy(policy, t, policy_options);
  };
  return Simulate(topo, factory, jobs, link_events, options);
}

}  // namespace crux::sim
