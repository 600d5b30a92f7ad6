// Plan rendering: core::Plan -> JSON (a stable contract for other tools) or a readable table.
//
// JSON schema (every number finite; NaN becomes 0 and infinities the largest finite double;
// keys appear in alphabetical order):
//   {
//     "levels": K, "first_job_level": int, "usable_levels": int,
//     "reference_job": id | null, "unpinned_flows": int,
//     "cut_weight": number, "total_edge_weight": number,
//     "jobs": [                       // input order
//       { "id": string, "gpus": int, "work_flops": number, "comm_time_s": number,
//         "period_s": number, "bytes_per_sec": number, "intensity": number (FLOP/s),
//         "k": number, "priority": number, "rank": int (0 = highest), "level": int (0 = highest),
//         "reference": bool, "bottleneck": "a -> b" | null,
//         "contending_jobs": int (jobs it shares a directed link with: its DAG neighbours),
//         "dag_edges_omitted": int (its edges to lower-priority jobs left out of dag.edges),
//         "flows": [ { "src": name, "dst": name, "bytes": int (per iteration, on the wire),
//                      "path": [node names, src first, dst last],
//                      "path_index": int, "num_paths": int,
//                      "udp_sport": int | null (null = unpinned), "pinned": bool } ] } ],
//     "dag": { "num_edges": int (edges of the contention DAG),
//              "edges": [ { "from": job id, "to": job id, "weight": number } ],
//              "edges_omitted": int (num_edges - listed edges),
//              "max_edges_per_job": int (the cap below; 0 = none) },
//     "timing_ms": { "traffic", "profile", "priority", "path_selection", "compression",
//                    "ports", "total": number }
//   }
//
// Size. The contention DAG of n jobs that all meet each other has n (n - 1) / 2 edges (43 M for
// 10,000 jobs on a 16-host fabric); listing them all made the output grow with n^2 (gigabytes).
// dag.edges therefore lists, for each job (`from`, the higher-priority end), at most
// `max_edges_per_job` of its edges: those to the lower-priority jobs closest to it in rank (the
// ones Algorithm 1 is most likely to put on the same level). Edges are listed in (from, to)
// index order, the order of Plan::dag. What is left out is counted: dag.edges_omitted in total,
// dag_edges_omitted per job, and num_edges / contending_jobs give the full counts, so the
// output is O(jobs x (flows + max_edges_per_job)). max_edges_per_job = 0 lists every edge.
//
// Thread-safety: pure functions.
#ifndef CRUX_SPEC_PLAN_OUTPUT_H_
#define CRUX_SPEC_PLAN_OUTPUT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "crux/core/plan/planner.h"
#include "crux/core/topology/topology.h"

namespace crux::spec {

struct PlanJsonOptions {
  // Edges listed in dag.edges per `from` job (see "Size" above); >= 0, 0 = every edge.
  int max_edges_per_job = 32;
};

// The document as a DOM. Memory: a DOM node per value (~100 bytes), so prefer PlanToJsonText
// for large plans. REQUIRES: `plan` was computed on `topo`; options.max_edges_per_job >= 0.
nlohmann::json PlanToJson(const core::Plan& plan, const core::Topology& topo,
                          const PlanJsonOptions& options = {});

// The same document as PlanToJson(plan, topo, options).dump(2, ' ', false, replace) followed
// by a newline, byte for byte, but written one job and one edge at a time: besides the text it
// needs memory for one job's DOM and the edge selection (O(jobs x max_edges_per_job)), never a
// DOM of the whole plan. Invalid UTF-8 is replaced (U+FFFD), never thrown.
// May throw std::bad_alloc (the caller's edge turns it into an error).
std::string PlanToJsonText(const core::Plan& plan, const core::Topology& topo,
                           const PlanJsonOptions& options = {});

// One row per job sorted by rank (rank, id, level, intensity in TFLOP/s, k, P in TFLOP/s,
// t_j ms, period ms, #flows, bottleneck link), then summary lines (levels, DAG edges,
// cut weight / total, unpinned flows, stage timings in ms). Ends with a newline. Names (job
// ids, link names) go through core::EscapeForTerminal (core/text.h): control characters, ESC
// sequences and other non-printable bytes appear as visible escapes ("\x1b"), never raw.
std::string PlanToTable(const core::Plan& plan, const core::Topology& topo);

}  // namespace crux::spec

#endif  // CRUX_SPEC_PLAN_OUTPUT_H_
