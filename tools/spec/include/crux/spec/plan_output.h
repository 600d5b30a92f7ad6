// Plan rendering: core::Plan -> JSON (a stable contract for other tools) or a readable table.
//
// JSON schema (every number finite; NaN becomes 0 and infinities the largest finite double):
//   {
//     "levels": K, "first_job_level": int, "usable_levels": int,
//     "reference_job": id | null, "unpinned_flows": int,
//     "cut_weight": number, "total_edge_weight": number,
//     "jobs": [                       // input order
//       { "id": string, "gpus": int, "work_flops": number, "comm_time_s": number,
//         "period_s": number, "bytes_per_sec": number, "intensity": number (FLOP/s),
//         "k": number, "priority": number, "rank": int (0 = highest), "level": int (0 = highest),
//         "reference": bool, "bottleneck": "a -> b" | null,
//         "flows": [ { "src": name, "dst": name, "bytes": int (per iteration, on the wire),
//                      "path": [node names, src first, dst last],
//                      "path_index": int, "num_paths": int,
//                      "udp_sport": int | null (null = unpinned), "pinned": bool } ] } ],
//     "dag": { "edges": [ { "from": job id, "to": job id, "weight": number } ] },
//     "timing_ms": { "traffic", "profile", "priority", "path_selection", "compression",
//                    "ports", "total": number }
//   }
//
// Thread-safety: pure functions.
#ifndef CRUX_SPEC_PLAN_OUTPUT_H_
#define CRUX_SPEC_PLAN_OUTPUT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "crux/core/planner.h"
#include "crux/core/topology.h"

namespace crux::spec {

// REQUIRES: `plan` was computed on `topo`.
nlohmann::json PlanToJson(const core::Plan& plan, const core::Topology& topo);

// One row per job sorted by rank (rank, id, level, intensity in TFLOP/s, k, P in TFLOP/s,
// t_j ms, period ms, #flows, bottleneck link), then summary lines (levels, DAG edges,
// cut weight / total, unpinned flows, stage timings in ms). Ends with a newline.
std::string PlanToTable(const core::Plan& plan, const core::Topology& topo);

}  // namespace crux::spec

#endif  // CRUX_SPEC_PLAN_OUTPUT_H_
