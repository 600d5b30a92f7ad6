#include "crux/core/plan/priority.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace crux::core {
namespace {

PairJob Job(double compute_s, double comm_s, double overlap_start = 1.0) {
  return PairJob{Duration::Seconds(compute_s), Duration::Seconds(comm_s), overlap_start};
}

// Paper Example 1 (Fig. 11): equal intensity, no overlap.
const PairJob kExample1Job1 = Job(2.0, 2.0);
const PairJob kExample1Job2 = Job(1.0, 1.0);

double Utilization(const PairOutcome& o) {
  return (o.compute_a_s + o.compute_b_s) / (2.0 * o.window_s);
}

// A deliberately naive event-driven simulation of the same model, used as an oracle: both jobs
// are stepped generically (no closed forms), the link goes to the higher-priority job whenever
// it has ready data, and every event (ready, compute end, transmission end) is visited.
PairOutcome OracleSimulate(const PairJob& a, const PairJob& b, bool a_first,
                           const PairSimOptions& options) {
  struct State {
    double c, t, a, s, rem;
  };
  auto init = [](const PairJob& j) {
    State st{};
    st.c = j.compute.ToSeconds();
    st.t = j.comm.ToSeconds();
    st.a = std::clamp(j.overlap_start, 0.0, 1.0) * st.c;
    st.s = 0;
    st.rem = st.t;
    return st;
  };
  State jobs[2] = {init(a), init(b)};
  const double slow = std::max(std::max(jobs[0].c, jobs[0].a + jobs[0].t),
                               std::max(jobs[1].c, jobs[1].a + jobs[1].t));
  const double ws = options.warmup_periods * slow;
  const double we = ws + options.measure_periods * slow;
  const int hi = a_first ? 0 : 1;
  double transmit[2] = {0, 0};
  double compute[2] = {0, 0};
  auto clip = [&](double x, double y) { return std::max(0.0, std::min(y, we) - std::max(x, ws)); };
  for (State& st : jobs) compute[&st - jobs] += clip(st.s, st.s + st.c);
  double now = 0;
  while (now < we) {
    auto can_send = [&](const State& st) { return st.rem > 0 && now >= st.s + st.a; };
    int sender = -1;
    if (can_send(jobs[hi])) {
      sender = hi;
    } else if (can_send(jobs[1 - hi])) {
      sender = 1 - hi;
    }
    double next = we;
    bool finishes = false;
    for (const State& st : jobs) {
      if (st.rem > 0 && now < st.s + st.a) next = std::min(next, st.s + st.a);
      if (now < st.s + st.c) next = std::min(next, st.s + st.c);
    }
    if (sender >= 0 && now + jobs[sender].rem <= next) {
      next = now + jobs[sender].rem;
      finishes = true;
    }
    if (sender >= 0) {
      transmit[sender] += clip(now, next);
      jobs[sender].rem = finishes ? 0.0 : jobs[sender].rem - (next - now);
    }
    now = next;
    for (int i = 0; i < 2; ++i) {
      State& st = jobs[i];
      if (now >= st.s + st.c && st.rem <= 0) {
        st.s = now;
        st.rem = st.t;
        compute[i] += clip(st.s, st.s + st.c);
      }
    }
  }
  PairOutcome out;
  out.transmit_a_s = transmit[0];
  out.transmit_b_s = transmit[1];
  out.compute_a_s = compute[0];
  out.compute_b_s = compute[1];
  out.window_s = we - ws;
  return out;
}

bool AllFinite(const PairOutcome& o) {
  return std::isfinite(o.transmit_a_s) && std::isfinite(o.transmit_b_s) &&
         std::isfinite(o.compute_a_s) && std::isfinite(o.compute_b_s) && std::isfinite(o.window_s);
}

TEST(PrioritySimulatePairTest, Example1Job1FirstGivesThirtySevenAndAHalfPercent) {
  const PairOutcome o = SimulatePair(kExample1Job1, kExample1Job2, /*a_first=*/true);
  EXPECT_NEAR(o.window_s, 60 * 4.0, 1e-9);  // 60 periods of the slower job (4 s).
  EXPECT_NEAR(Utilization(o), 0.375, 0.005);
  // Job 1 holds the link half the time, Job 2 a quarter.
  EXPECT_NEAR(o.transmit_a_s / o.window_s, 0.5, 0.005);
  EXPECT_NEAR(o.transmit_b_s / o.window_s, 0.25, 0.005);
}

TEST(PrioritySimulatePairTest, Example1Job2FirstGivesFortyOnePointSevenPercent) {
  const PairOutcome o = SimulatePair(kExample1Job1, kExample1Job2, /*a_first=*/false);
  EXPECT_NEAR(Utilization(o), 0.41667, 0.005);
  EXPECT_NEAR(o.transmit_a_s / o.window_s, 1.0 / 3.0, 0.005);
  EXPECT_NEAR(o.transmit_b_s / o.window_s, 0.5, 0.005);
}

TEST(PrioritySimulatePairTest, MatchesNaiveEventSimulationOnRandomPairs) {
  std::mt19937 rng(20240804);
  // Log-uniform over three decades so that very unequal pairs are covered too.
  std::uniform_real_distribution<double> decades(-1.5, 1.5);
  auto log_uniform = [&] { return std::pow(10.0, decades(rng)); };
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double overlaps[] = {0.0, 0.25, 0.5, 1.0, -1.0};  // -1: random.
  PairSimOptions options;
  options.measure_periods = 20;
  for (int trial = 0; trial < 300; ++trial) {
    auto make = [&] {
      double o = overlaps[rng() % 5];
      if (o < 0) o = unit(rng);
      const double t = (rng() % 6 == 0) ? 0.0 : log_uniform();
      return Job(log_uniform(), t, o);
    };
    const PairJob a = make();
    const PairJob b = make();
    for (bool a_first : {true, false}) {
      const PairOutcome fast = SimulatePair(a, b, a_first, options);
      const PairOutcome slow = OracleSimulate(a, b, a_first, options);
      const double tol = 1e-6 * slow.window_s;
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " a_first " << a_first);
      EXPECT_NEAR(fast.window_s, slow.window_s, tol);
      EXPECT_NEAR(fast.transmit_a_s, slow.transmit_a_s, tol);
      EXPECT_NEAR(fast.transmit_b_s, slow.transmit_b_s, tol);
      EXPECT_NEAR(fast.compute_a_s, slow.compute_a_s, tol);
      EXPECT_NEAR(fast.compute_b_s, slow.compute_b_s, tol);
    }
  }
}

TEST(PrioritySimulatePairTest, JobWithoutCommNeverUsesTheLink) {
  const PairOutcome o = SimulatePair(Job(1.0, 0.0), Job(2.0, 3.0, 0.0), /*a_first=*/false);
  EXPECT_EQ(o.transmit_a_s, 0.0);
  EXPECT_NEAR(o.compute_a_s, o.window_s, 1e-9);  // Computes back to back.
  // The other job is not disturbed: standalone period 3 s, transmitting 3 s of it.
  EXPECT_NEAR(o.transmit_b_s, o.window_s, 1e-9);
}

TEST(PrioritySimulatePairTest, MaxEventsCapStopsTheSimulationEarly) {
  PairSimOptions options;
  const PairOutcome full = SimulatePair(kExample1Job1, kExample1Job2, false, options);
  options.max_events = 10;
  const PairOutcome capped = SimulatePair(kExample1Job1, kExample1Job2, false, options);
  EXPECT_TRUE(AllFinite(capped));
  EXPECT_GT(capped.window_s, 0.0);
  EXPECT_LT(capped.window_s, full.window_s);
  EXPECT_LE(capped.transmit_a_s + capped.transmit_b_s, capped.window_s + 1e-9);
  // The cap applies before anything is simulated, too.
  options.max_events = 0;
  const PairOutcome none = SimulatePair(kExample1Job1, kExample1Job2, false, options);
  EXPECT_EQ(none.window_s, 0.0);
  EXPECT_EQ(none.transmit_a_s + none.transmit_b_s + none.compute_a_s + none.compute_b_s, 0.0);
  // A capped call never yields NaN in the correction factor.
  const double k = CorrectionFactor(kExample1Job2, kExample1Job1, options);
  EXPECT_TRUE(std::isfinite(k));
}

TEST(PrioritySimulatePairTest, ExtremeInputsStayFinite) {
  const PairJob tiny_comm = Job(1e4, 1e-9);
  const PairJob heavy = Job(1e-9, 1e4, 0.0);
  const PairJob fast = Job(1e-9, 1e-9, 0.5);
  const PairJob huge = PairJob{Duration::Infinite(), Duration::Infinite(), 1.0};
  const PairJob zero = PairJob{Duration::Zero(), Duration::Zero(), 1.0};
  const PairJob nan_overlap = Job(1.0, 1.0, std::nan(""));
  const std::vector<PairJob> jobs = {tiny_comm, heavy,       fast,         huge,
                                     zero,      nan_overlap, kExample1Job1};
  for (const PairJob& x : jobs) {
    for (const PairJob& y : jobs) {
      for (bool first : {true, false}) {
        const PairOutcome o = SimulatePair(x, y, first);
        EXPECT_TRUE(AllFinite(o));
        EXPECT_GE(o.transmit_a_s, 0.0);
        EXPECT_GE(o.transmit_b_s, 0.0);
        EXPECT_LE(o.transmit_a_s + o.transmit_b_s, o.window_s * (1 + 1e-9) + 1e-9);
      }
      const double k = CorrectionFactor(x, y);
      EXPECT_TRUE(std::isfinite(k));
      EXPECT_GE(k, 1.0 / kMaxCorrection);
      EXPECT_LE(k, kMaxCorrection);
    }
  }
}

TEST(PriorityCorrectionFactorTest, Example1ShorterIterationJobGetsOnePointFive) {
  const double k = CorrectionFactor(kExample1Job2, kExample1Job1);
  EXPECT_NEAR(k, 1.5, 0.015);
}

TEST(PriorityCorrectionFactorTest, HiddenCommunicationGetsFactorBelowOne) {
  // Example 2 spirit: j's 1 s of communication becomes ready halfway through its 7 s compute and
  // always finds 1 s of free link in the remaining 3.5 s, even behind r. r's 2 s of
  // communication starts 1 s before its compute ends and cannot be hidden.
  const PairJob j = Job(7.0, 1.0, 0.5);
  const PairJob r = Job(2.0, 2.0, 0.5);
  const PairOutcome j_first = SimulatePair(j, r, /*a_first=*/true);
  const PairOutcome r_first = SimulatePair(j, r, /*a_first=*/false);
  EXPECT_NEAR(j_first.compute_a_s, r_first.compute_a_s, 1e-9);  // j loses nothing behind r.
  EXPECT_GT(r_first.compute_b_s, j_first.compute_b_s + 1.0);    // r does lose behind j.
  const double k = CorrectionFactor(j, r);
  EXPECT_LT(k, 1.0);
  EXPECT_GE(k, 1.0 / kMaxCorrection);
}

TEST(PriorityCorrectionFactorTest, JobsThatDoNotInteractGetOne) {
  EXPECT_EQ(CorrectionFactor(Job(1.0, 0.0), kExample1Job1), 1.0);
  EXPECT_EQ(CorrectionFactor(kExample1Job1, Job(3.0, 0.0)), 1.0);
}

TEST(PriorityCorrectionFactorTest, IdenticalJobsGetOne) {
  EXPECT_EQ(CorrectionFactor(Job(1.5, 0.7, 0.3), Job(1.5, 0.7, 0.3)), 1.0);
}

PriorityInput Input(const PairJob& timing, double intensity, double bytes_per_iteration, int gpus) {
  PriorityInput in;
  in.intensity = intensity;
  in.timing = timing;
  const double period =
      std::max(timing.compute.ToSeconds(),
               timing.overlap_start * timing.compute.ToSeconds() + timing.comm.ToSeconds());
  in.bytes_per_iteration = bytes_per_iteration;
  in.bytes_per_sec = bytes_per_iteration / period;
  in.gpus = gpus;
  in.has_traffic = timing.comm > Duration::Zero();
  return in;
}

TEST(PriorityAssignTest, Example1RanksShorterIterationJobFirst) {
  // Equal intensity (5 Gflops/s), equal bytes/sec; Job 1 moves twice the bytes per iteration
  // and is therefore the reference.
  const std::vector<PriorityInput> jobs = {Input(kExample1Job1, 5e9, 2e9, 10),
                                           Input(kExample1Job2, 5e9, 1e9, 10)};
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.reference, 0);
  EXPECT_EQ(p.k[0], 1.0);
  EXPECT_NEAR(p.k[1], 1.5, 0.015);
  EXPECT_NEAR(p.priority[1] / p.priority[0], 1.5, 0.015);
  EXPECT_EQ(p.order, (std::vector<int>{1, 0}));
  EXPECT_EQ(p.rank, (std::vector<int>{1, 0}));
}

TEST(PriorityAssignTest, ReferenceIsTheHighestTrafficRate) {
  const std::vector<PriorityInput> jobs = {Input(Job(1.0, 1.0), 1.0, 100, 1),
                                           Input(Job(1.0, 1.0), 1.0, 300, 1),
                                           Input(Job(1.0, 1.0), 1.0, 300, 1)};
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.reference, 1);  // Tie between 1 and 2 goes to the lower index.
  EXPECT_EQ(p.k[1], 1.0);
}

TEST(PriorityAssignTest, JobsWithoutTrafficRankLastWithZeroPriority) {
  std::vector<PriorityInput> jobs = {
      Input(Job(1.0, 0.0), 0.0, 0, 64), Input(Job(2.0, 1.0), 1e-3, 1e6, 1),
      Input(Job(1.0, 0.0), 0.0, 0, 8), Input(Job(1.0, 2.0), 2e-3, 2e6, 2)};
  jobs[2].intensity = 1e9;  // Ignored: no traffic means I = 0.
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.reference, 3);
  EXPECT_EQ(p.priority[0], 0.0);
  EXPECT_EQ(p.priority[2], 0.0);
  EXPECT_EQ(p.k[0], 1.0);
  EXPECT_EQ(p.k[2], 1.0);
  EXPECT_GT(p.priority[1], 0.0);
  EXPECT_GT(p.priority[3], 0.0);
  EXPECT_GE(p.rank[0], 2);
  EXPECT_GE(p.rank[2], 2);
  EXPECT_EQ(p.order[2], 0);  // More GPUs first among the traffic-free jobs.
  EXPECT_EQ(p.order[3], 2);
}

TEST(PriorityAssignTest, NoJobWithTrafficLeavesNoReference) {
  const std::vector<PriorityInput> jobs = {Input(Job(1.0, 0.0), 0.0, 0, 1),
                                           Input(Job(1.0, 0.0), 0.0, 0, 4)};
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.reference, -1);
  EXPECT_EQ(p.order, (std::vector<int>{1, 0}));
  EXPECT_TRUE(AssignPriorities({}).order.empty());
}

TEST(PriorityAssignTest, EqualPriorityBreaksTiesByIntensity) {
  // Example 1 again: k_2 = 1.5 exactly over a window of whole common periods, so with I_1 = 3
  // and I_2 = 2 both priorities equal 3; the higher intensity (Job 1, index 1) goes first.
  const std::vector<PriorityInput> jobs = {Input(kExample1Job2, 2.0, 1e9, 10),
                                           Input(kExample1Job1, 3.0, 2e9, 10)};
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.reference, 1);
  EXPECT_NEAR(p.priority[0], p.priority[1], 1e-12 * p.priority[1]);
  EXPECT_EQ(p.order, (std::vector<int>{1, 0}));
}

TEST(PriorityAssignTest, EqualPriorityAndIntensityBreakTiesByGpusThenIndex) {
  const PairJob t = Job(1.0, 0.5, 0.5);
  const std::vector<PriorityInput> jobs = {Input(t, 4.0, 1e6, 2), Input(t, 4.0, 1e6, 8),
                                           Input(t, 4.0, 1e6, 2), Input(t, 4.0, 1e6, 8)};
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.order, (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(p.rank, (std::vector<int>{2, 0, 3, 1}));
}

TEST(PriorityAssignTest, HigherPriorityWinsOverTieBreakers) {
  const PairJob t = Job(1.0, 0.5, 0.5);
  const std::vector<PriorityInput> jobs = {Input(t, 1.0, 1e6, 100), Input(t, 2.0, 1e6, 1)};
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.order, (std::vector<int>{1, 0}));
}

TEST(PriorityAssignTest, IsDeterministicAndAPermutation) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.01, 3.0);
  std::vector<PriorityInput> jobs;
  for (int i = 0; i < 60; ++i) {
    const PairJob t = Job(u(rng), (i % 7 == 0) ? 0.0 : u(rng), std::fmod(u(rng), 1.0));
    jobs.push_back(Input(t, u(rng), u(rng) * 1e6, 1 + i % 5));
  }
  const PriorityAssignment p1 = AssignPriorities(jobs);
  const PriorityAssignment p2 = AssignPriorities(jobs);
  EXPECT_EQ(p1.reference, p2.reference);
  EXPECT_EQ(p1.k, p2.k);
  EXPECT_EQ(p1.priority, p2.priority);
  EXPECT_EQ(p1.order, p2.order);
  EXPECT_EQ(p1.rank, p2.rank);
  std::vector<int> sorted = p1.order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < static_cast<int>(jobs.size()); ++i) {
    EXPECT_EQ(sorted[i], i);
    EXPECT_EQ(p1.order[p1.rank[i]], i);
  }
  // Consistency of the order with (tier of k, P).
  for (size_t r = 1; r < p1.order.size(); ++r) {
    const int x = p1.order[r - 1];
    const int y = p1.order[r];
    if (jobs[x].has_traffic == jobs[y].has_traffic) {
      const int tx = CorrectionTier(p1.k[x]);
      const int ty = CorrectionTier(p1.k[y]);
      EXPECT_GE(tx, ty);
      if (tx == ty) {
        EXPECT_GE(p1.priority[x], p1.priority[y] * (1 - 1e-12));
      }
    } else {
      EXPECT_TRUE(jobs[x].has_traffic);
    }
  }
}

// ---- Bounded corrections (issue #16 item 5) ----

TEST(PriorityCorrectionFactorTest, HiddenReferenceGivesTheUpperBoundAsAFinding) {
  // r's 0.5 s of communication starts halfway through its 3 s compute: behind j it still has
  // 1 s of slack, so it loses nothing; j (no overlap) gains link time by going first.
  const PairJob j = Job(1.0, 1.0);
  const PairJob r = Job(3.0, 0.5, 0.5);
  const Correction c = CompareWithReference(j, r);
  EXPECT_EQ(c.finding, PairFinding::kOnlyJobGains);
  EXPECT_EQ(c.k, kMaxCorrection);
  EXPECT_GT(c.gain_job, 0.0);
  EXPECT_EQ(c.loss_reference, 0.0);
  EXPECT_EQ(CorrectionTier(c.k), 1);
  EXPECT_EQ(CorrectionFactor(j, r), c.k);
  // The other way round j is the one that loses nothing by yielding.
  const Correction back = CompareWithReference(r, j);
  EXPECT_EQ(back.finding, PairFinding::kOnlyRefGains);
  EXPECT_EQ(back.k, 1.0 / kMaxCorrection);
  EXPECT_EQ(CorrectionTier(back.k), -1);
}

TEST(PriorityCorrectionFactorTest, RatiosAndNoInteractionAreNamed) {
  const Correction ex1 = CompareWithReference(kExample1Job2, kExample1Job1);
  EXPECT_EQ(ex1.finding, PairFinding::kRatio);
  EXPECT_NEAR(ex1.k, ex1.gain_job / ex1.loss_reference, 1e-12);
  EXPECT_EQ(CorrectionTier(ex1.k), 0);
  EXPECT_EQ(CompareWithReference(Job(1.0, 0.0), kExample1Job1).finding,
            PairFinding::kNoInteraction);
  EXPECT_EQ(PairFindingName(PairFinding::kOnlyJobGains), "only_job_gains");
}

TEST(PriorityRankTest, TiersOfKComeBeforePriority) {
  // Job 1 has a 10^4 times higher intensity than job 2, but job 2's comparison with the
  // reference (job 0) found that only job 2 gains (k = max): it ranks first although its
  // P = 1e3 * 1 is below job 1's 0.5 * 1e4. Job 3 (k = min) ranks after every ordinary k,
  // although its P is above job 0's.
  const PairJob t = Job(1.0, 0.5, 0.5);
  const std::vector<PriorityInput> jobs = {Input(t, 1.0, 1e9, 8), Input(t, 1e4, 1e6, 8),
                                           Input(t, 1.0, 1e6, 8), Input(t, 1e4, 1e6, 8)};
  const std::vector<double> k = {1.0, 0.5, kMaxCorrection, 1.0 / kMaxCorrection};
  std::vector<double> p(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) p[i] = PriorityValue(jobs[i], k[i]);
  std::vector<int> rank;
  std::vector<int> order;
  RankByPriority(jobs, k, p, rank, order);
  EXPECT_EQ(order, (std::vector<int>{2, 1, 0, 3}));
  EXPECT_LT(p[2], p[1]);
  EXPECT_GT(p[3], p[0]);
}

TEST(PriorityAssignTest, BoundedCorrectionKeepsTheOrderOfTheFormerGuard) {
  // The former rule: k = dS_j / dS_r clamped to [1e-6, 1e6], k = 1e6 when only j gains, one
  // order by P. With intensities within a factor 10 (so that 1e6 always dominated), both
  // rules give the same ranks on random pairs, unless a ratio falls strictly between the new
  // bound and the old one, where the old order followed an arbitrary clamp.
  std::mt19937 rng(16);
  std::uniform_real_distribution<double> secs(0.05, 3.0);
  std::uniform_real_distribution<double> frac(0.0, 1.0);
  std::uniform_real_distribution<double> intensity(1.0, 10.0);
  int compared = 0;
  int bounded = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<PriorityInput> jobs;
    for (int i = 0; i < 6; ++i) {
      jobs.push_back(Input(Job(secs(rng), secs(rng), frac(rng)), intensity(rng), 1e6, 8));
    }
    const PriorityAssignment now = AssignPriorities(jobs);
    std::vector<double> old_k(jobs.size(), 1.0);
    std::vector<double> old_p(jobs.size(), 0.0);
    bool between = false;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (static_cast<int>(i) != now.reference) {
        const Correction c = CompareWithReference(jobs[i].timing, jobs[now.reference].timing);
        if (c.loss_reference == 0) {
          old_k[i] = c.gain_job > 0 ? 1e6 : 1.0;
        } else {
          const double ratio = c.gain_job / c.loss_reference;
          between = between || (ratio > kMaxCorrection && ratio < 1e6) ||
                    (ratio < 1.0 / kMaxCorrection && ratio > 1e-6);
          old_k[i] = std::clamp(ratio, 1e-6, 1e6);
        }
        bounded += CorrectionTier(now.k[i]) != 0;
      }
      old_p[i] = old_k[i] * jobs[i].intensity;
    }
    if (between) continue;
    // The old order: P descending, ties as today (no ties occur with random inputs).
    std::vector<int> old_order(jobs.size());
    std::iota(old_order.begin(), old_order.end(), 0);
    std::stable_sort(old_order.begin(), old_order.end(),
                     [&](int x, int y) { return old_p[x] > old_p[y]; });
    EXPECT_EQ(now.order, old_order) << "trial " << trial;
    ++compared;
  }
  EXPECT_GE(compared, 30);
  EXPECT_GT(bounded, 0);  // The cases the change is about do occur.
}

TEST(PriorityDescribeTest, SaysWhatThePairComparisonFound) {
  EXPECT_EQ(DescribeCorrection(1.5),
            "1.5: going first gains this job 1.5 s of link time per second the reference job "
            "loses");
  EXPECT_EQ(DescribeCorrection(1.0, /*is_reference=*/true), "reference job (k = 1 by definition)");
  EXPECT_NE(DescribeCorrection(kMaxCorrection).find("ranks above every job"), std::string::npos);
  EXPECT_NE(DescribeCorrection(1e6).find("(bound)"), std::string::npos);
  EXPECT_NE(DescribeCorrection(1.0 / kMaxCorrection).find("ranks below every job"),
            std::string::npos);
  EXPECT_EQ(DescribeCorrection(std::nan("")), "unknown");
}

TEST(PriorityAssignTest, ExtremeInputsGiveFiniteOutputs) {
  std::vector<PriorityInput> jobs = {Input(Job(1e4, 1e-9), 1e300, 1.0, 1),
                                     Input(Job(1e-9, 1e4, 0.0), 1e-300, 1e12, 1),
                                     Input(Job(1.0, 1.0), 1.0, 1e6, 1)};
  jobs.push_back(jobs[2]);
  jobs[3].intensity = std::numeric_limits<double>::infinity();
  jobs.push_back(jobs[2]);
  jobs[4].intensity = std::nan("");
  jobs[4].bytes_per_sec = std::nan("");
  const PriorityAssignment p = AssignPriorities(jobs);
  EXPECT_EQ(p.reference, 1);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(std::isfinite(p.k[i])) << i;
    EXPECT_TRUE(std::isfinite(p.priority[i])) << i;
    EXPECT_GE(p.priority[i], 0.0) << i;
  }
}

}  // namespace
}  // namespace crux::core
