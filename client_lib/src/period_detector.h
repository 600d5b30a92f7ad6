// Iteration period detection from communication events alone (for jobs that do not mark
// iterations). Data-parallel training communicates in bursts (gradient buckets, then a compute
// phase without traffic), so the period is the spacing of burst starts.
//
// Method (robust to jitter, stray transfers and missing bursts):
//  1. Candidate burst thresholds: "every transfer is its own burst" (one collective per
//     iteration), and the midpoints of the largest jumps (>= min_jump x, at most max_candidates)
//     between consecutive sorted gaps in the upper half of the gaps (within-burst gaps are the
//     majority whenever bursts hold >= 2 transfers).
//  2. For each candidate: burst starts are the first event and every event after a gap above the
//     threshold; when bursts hold >= 4 transfers (median), bursts under a quarter of the median
//     size (stray transfers) are dropped.
//  3. The period estimate is the median spacing of burst starts; spacings close to an integer
//     multiple k <= max_multiple of it (missing bursts) count as k periods, spacings far from every
//     multiple are discarded; period = accepted time / accepted periods; confidence = accepted time
//     / the time the bursts span (the share of the observation the period explains).
//  The candidate with the highest confidence (then the most bursts) wins; below min_confidence
//  the series has no period.
//
// Thread-safety: pure functions.
#ifndef CRUX_CLIENT_SRC_PERIOD_DETECTOR_H_
#define CRUX_CLIENT_SRC_PERIOD_DETECTOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::client::internal {

struct PeriodEstimate {
  int64_t period_ns = 0;
  uint32_t bursts = 0;       // Bursts found.
  double confidence = 0;     // Share of the observed time explained by whole periods, [0, 1].
  int64_t threshold_ns = 0;  // Gap above which a new burst starts.
  std::vector<int64_t> burst_starts_ns;
};

struct PeriodDetectorOptions {
  uint32_t min_bursts = 4;          // Fewer bursts: kFailedPrecondition.
  double min_jump = 1.3;            // Jumps between sorted gaps considered as thresholds.
  uint32_t max_candidates = 16;     // Largest jumps tried.
  double multiple_tolerance = 0.2;  // Spacing within k x period +- 20% of a period is accepted,
  uint32_t max_multiple = 4;        // for k = 1 .. max_multiple (up to 3 missing bursts).
  double min_confidence = 0.5;      // Below: kFailedPrecondition.
};

// `starts_ns` must be sorted ascending (ties allowed). Errors: kFailedPrecondition when there
// are too few bursts or no consistent period ("period detection: only 2 bursts (need 4)").
core::Result<PeriodEstimate> DetectPeriod(const std::vector<int64_t>& starts_ns,
                                          const PeriodDetectorOptions& options = {});

}  // namespace crux::client::internal

#endif  // CRUX_CLIENT_SRC_PERIOD_DETECTOR_H_
