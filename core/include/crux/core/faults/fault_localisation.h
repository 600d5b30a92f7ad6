// Fault localisation over the pinned paths (pure; docs/faults.md).
//
// Crux pins every RoCEv2 flow to a path (core::FlowPin::path), so the routing matrix that
// tomography methods spend traceroutes (007) or source-routed probes (NetBouncer) to learn is
// known exactly: an observation is a flow (or a probe) with the directed links it crossed and
// how well it did. Two methods run over the same observations:
//
//   * VoteHardFaults: 007's voting (Arzani et al., NSDI'18) for hard faults. Each failed flow
//     gives 1/h to each of its h links; links that a healthy flow crosses are exonerated (a cut
//     link passes nothing). The link with the most votes is a culprit if it explains at least
//     `min_flows` failed flows; the flows it explains are removed and the rest vote again, until
//     no link qualifies. Links with the same votes that explain exactly the same flows cannot be
//     told apart by these observations: they are returned together with `ambiguous` set (a
//     probe that crosses one but not the other separates them).
//   * EstimateLinkRates / GrayFaults: NetBouncer's estimate (Tan et al., NSDI'19) adapted to
//     rates. With y_f the flow's achieved / expected rate, w_f its weight and x_l the fraction of
//     its rate link l delivers, minimise
//     sum_f w_f (y_f - prod_{l in f} x_l)^2 + lambda sum_l x_l (1 - x_l)  over
//     x in [0, 1]^L by coordinate descent (each coordinate has a closed form; the regulariser
//     pushes towards 0 or 1 so that blame concentrates on few links). A healthy row that carries
//     per-link floors (PathObservation::floors) takes no term: it clamps each of its links from
//     below, x_l >= rate / capacity_l; an unhealthy row leaves out of its product the links
//     it is excused on (PathObservation::excused). A link no least-squares row blames stays
//     whole (1).
//     Coordinates are swept most-unhealthy-rows first, then least vouched for (lowest floor),
//     so that where the rows cannot tell two links apart the blame goes to the one fewer
//     healthy bytes crossed. Links estimated below `gray_ratio` that at least `min_flows` slow
//     flows cross are suspects.
//
// Only the part of the matrix near unhealthy observations is solved: the links of unhealthy
// observations, the observations that cross them and the links of those. Healthy observations
// elsewhere cost one pass (they exonerate their links). With no unhealthy observation both
// functions return nothing after O(observations).
//
// Thread-safety: pure functions.
#ifndef CRUX_CORE_FAULTS_FAULT_LOCALISATION_H_
#define CRUX_CORE_FAULTS_FAULT_LOCALISATION_H_

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "crux/core/base/ids.h"

namespace crux::core {

// One row of the routing matrix: a flow or a probe, its links and its outcome.
struct PathObservation {
  std::vector<LinkId> links;  // Directed links crossed, in order (no repetition expected).
  double rate_ratio = 1.0;    // Achieved / expected rate, clamped to [0, 1]; 1 = healthy.
  bool failed = false;        // No progress (transport errors, nothing delivered): a hard failure.
  // How much the row counts in the least squares (GrayFaults), (0, 1], when it is a term (see
  // `floors`: FaultManager gives its healthy rows floors instead). 007 voting ignores it.
  double weight = 1.0;
  // Per link of `links` (same order), the least fraction of its nominal capacity the link
  // delivered that this row proves: the row's rate over the link's capacity, in [0, 1]. A
  // healthy row with floors takes no least-squares term: it bounds each link it crosses from
  // below (x_l >= floor) and proves nothing more (a flow that got its share of a link says
  // nothing of what else the link could carry). Empty: the row counts as a least-squares row of
  // target rate_ratio and weight `weight` (unhealthy rows always do; floors are then unused).
  std::vector<double> floors;
  // Per link of `links` (same order), for an unhealthy row: the link is not this row's
  // bottleneck, so it takes none of the row's blame in the least squares (the row's product
  // leaves it out). FaultManager sets it where a healthy row crossed the link at least
  // 1 / gray_ratio times as fast at the same or a lower priority: under max-min sharing a flow's
  // bottleneck is a link on which no flow of its level runs faster. The row still counts as
  // evidence crossing the link (Suspect::evidence, min_flows). Empty: no link is excused.
  std::vector<bool> excused;

  friend bool operator==(const PathObservation&, const PathObservation&) = default;
};

struct LocalisationOptions {
  // An observation is unhealthy below this ratio (or failed); a link estimated below it is a
  // gray suspect. (0, 1].
  double gray_ratio = 0.8;
  // A suspect needs at least this many unhealthy observations crossing it. >= 1.
  int min_flows = 2;
  // Coordinate descent: sweeps (each over every variable) and the regulariser weight.
  int iterations = 200;
  double lambda = 0.01;

  friend bool operator==(const LocalisationOptions&, const LocalisationOptions&) = default;
};

enum class SuspectKind { kHard, kGray };

struct Suspect {
  LinkId link;
  SuspectKind kind = SuspectKind::kGray;
  // kHard: the 007 votes when the link was picked (sum of 1/h); kGray: 1 - estimate.
  double score = 0;
  double estimate = 1;  // Estimated fraction of its rate the link delivers, [0, 1].
  // Indices (into the observations) of the unhealthy observations that implicate it: kHard, the
  // failed flows it explains; kGray, the slow flows crossing it.
  std::vector<uint32_t> evidence;
  uint32_t healthy = 0;    // Healthy observations crossing it (evidence against).
  bool ambiguous = false;  // kHard: another suspect explains exactly the same flows.

  friend bool operator==(const Suspect&, const Suspect&) = default;
};

// Healthy: not failed and rate_ratio >= gray_ratio.
bool IsHealthy(const PathObservation& o, const LocalisationOptions& options);

// 007 voting (above). Suspects in the order they were picked (ties: lower link id first).
std::vector<Suspect> VoteHardFaults(std::span<const PathObservation> obs,
                                    const LocalisationOptions& options);

// The least-squares estimate x_l (above) of every link of the unhealthy part of the matrix (other
// links are not listed: they are exonerated, x = 1). Deterministic.
std::map<LinkId, double> EstimateLinkRates(std::span<const PathObservation> obs,
                                           const LocalisationOptions& options);

// Gray suspects from EstimateLinkRates, most degraded first (ties: lower link id).
std::vector<Suspect> GrayFaults(std::span<const PathObservation> obs,
                                const LocalisationOptions& options);

}  // namespace crux::core

#endif  // CRUX_CORE_FAULTS_FAULT_LOCALISATION_H_
