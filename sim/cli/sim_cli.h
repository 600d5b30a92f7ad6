// crux-sim's logic (main.cc only wires it to the process):
//
//   crux-sim run      --topology T.yaml (--jobs J.yaml | --trace TR.csv) --policy P
//                     [--levels K] [--seed S] [--horizon-s H] [--no-fast-forward]
//                     [--sample-interval-s X] [--models M.yaml] [--gpus-per-host G]
//                     [--link-events E.csv] [--no-plots] [--quiet] --out DIR
//   crux-sim compare  ... --policies a,b,c ... --out DIR
//   crux-sim run|compare --scenario SC.yaml [overrides] --out DIR
//   crux-sim faults   (run flags) [--faults N] [--fault-seed S] [--faults-file F.csv] [--uniform]
//                     [--modes none,manual,auto,tomography,tomography1] ... --out DIR
//                     hidden faults scored against the control loop's decisions
//                     (docs/fault-simulation.md): DIR/report.json, report.md, faults_<mode>.csv
//   crux-sim gen-trace [--seed S] [--days D] [--mean-interarrival-s X] [--models M.yaml]
//                     [--topology T.yaml [--gpus-per-host G]] --out TRACE.csv
//
// run writes DIR/summary.json, CSVs and PNGs (sim_output.h) and prints a one-line result on
// stdout. compare runs every policy on the same workload (DIR/<policy>/...), prints the
// side-by-side table and writes the combined files. gen-trace writes the trace CSV
// (trace.h) - placed on the topology's hosts when --topology is given - and prints its
// statistics. Progress (simulated time, events/s, ETA) goes to stderr unless --quiet.
// Defaults: --policy crux, --levels 8, --seed 1, --models <source tree>/configs/models.yaml,
// --gpus-per-host 8, --horizon-s = the end of the last job with a duration (at least 3600 s).
// Scenario values are used where the flag is not given.
//
// Bounds: the horizon (flag, scenario or default) is at most sim::kMaxSimSeconds (1e9 s), and a
// run has at most sim::kMaxSamples samples; beyond them is a usage error naming the option.
//
// Exit codes: 0 success; 2 bad input (flags, unreadable or invalid files, unknown policy -- in
// a scenario too, even the ones run does not use --, hosts or models, a trace or jobs file that
// does not fit the topology or oversubscribes a host, out-of-range horizon or sampling);
// 1 simulation or output failure (including gnuplot errors, running out of memory and any other
// exception: RunSimCli never throws). Errors: one line "crux-sim: error: ..." on stderr.
//
// Thread-safety: RunSimCli has no shared state.
#ifndef CRUX_SIM_CLI_SIM_CLI_H_
#define CRUX_SIM_CLI_SIM_CLI_H_

#include <ostream>

namespace crux::simcli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitSimulation = 1;
inline constexpr int kExitUsage = 2;

int RunSimCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace crux::simcli

#endif  // CRUX_SIM_CLI_SIM_CLI_H_
