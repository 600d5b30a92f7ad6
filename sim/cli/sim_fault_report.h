// The report of `crux-sim faults` (docs/fault-simulation.md): one run per mode on the same
// workload and faults, scored with sim::ScoreFaults, written as DIR/report.json and
// DIR/report.md (and DIR/faults.csv, the faults as injected, busy targets resolved).
//
// Thread-safety: pure functions (and file output).
#ifndef CRUX_SIM_CLI_SIM_FAULT_REPORT_H_
#define CRUX_SIM_CLI_SIM_FAULT_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/faults.h"
#include "crux/sim/simulator.h"

namespace crux::simcli {

// One run of the report.
struct FaultModeRun {
  std::string mode;  // "none", "manual", "auto", "tomography".
  std::string description;
  bool faults = false;          // Faults injected.
  bool switch_signals = false;  // Switch port state was reported.
  sim::SimResult result;
  sim::FaultScore score;  // When faults (or decisions: "none").
};

nlohmann::json FaultReportJson(const core::Topology& topo, const std::vector<FaultModeRun>& runs,
                               const nlohmann::json& setup);
std::string FaultReportMarkdown(const nlohmann::json& report);
// The one-line-per-mode table printed on stdout.
std::string FaultReportTable(const std::vector<FaultModeRun>& runs);

core::Status WriteFaultReport(const std::string& dir, const core::Topology& topo,
                              const std::vector<FaultModeRun>& runs, const nlohmann::json& setup);

}  // namespace crux::simcli

#endif  // CRUX_SIM_CLI_SIM_FAULT_REPORT_H_
