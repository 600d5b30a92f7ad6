#include "crux/core/policies/policy.h"

#include <memory>
#include <string>
#include <utility>

#include "crux/core/policies/policies.h"

namespace crux::core {

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {
      "crux", "crux-ps",   "crux-ps-pa", "crux-pa", "crux-guard", "crux-pa-guard",
      "ecmp", "sincronia", "taccl",      "cassini", "fixed",      "ideal"};
  return kNames;
}

Result<std::unique_ptr<SchedulingPolicy>> MakePolicy(std::string_view name, const Topology& topo,
                                                     const PolicyOptions& options,
                                                     const Clock* clock) {
  const auto& names = PolicyNames();
  bool known = false;
  for (const std::string& n : names) known = known || n == name;
  if (!known) {
    std::string valid;
    for (const std::string& n : names) valid += (valid.empty() ? "" : ", ") + n;
    return InvalidArgumentError("policy: unknown policy '" + std::string(name) +
                                "' (valid: " + valid + ")");
  }
  CRUX_RETURN_IF_ERROR(ValidatePlannerOptions(options.planner).WithContext("policy options"));
  if (options.stable && !options.incremental) {
    return InvalidArgumentError("policy options: stable: requires incremental re-planning");
  }
  if (clock == nullptr) clock = &SteadyClock::Instance();
  return policies::Make(name, topo, options, clock);
}

}  // namespace crux::core
