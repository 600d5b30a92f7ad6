// Golden-trace regression: a fixed 7-job trace on the example 2:1 Clos under several policies.
// The expected figures in data/golden_expected.txt were produced by this same code; the test
// catches unintended changes in the engine, the policies or the workload path. After an
// intended change, regenerate with CRUX_UPDATE_GOLDEN=1 (the run then fails once on purpose, so
// that an update is never silent) and review the diff.
//
// Issue #10: the trace first had dlrm arrive at 400 s on host14;host3 while rn50 held host3's
// 8 GPUs until 660 s, which only loaded because explicit placements were never checked against
// each other. The loader now rejects that oversubscription; dlrm arrives at 700 s instead (after
// rn50 has left), and the figures were regenerated: sincronia 0.98488 -> 0.98988, ecmp
// 0.99451 -> 0.99528, cassini 0.99399 -> 0.99484; crux, taccl and ideal stay at 1.
//
// Two recordings: data/golden_expected.txt under the oracle (every job planned from its true
// spec at once, the engine and policies alone) and data/golden_loop_expected.txt through cruxd's
// control loop (issue #11): jobs register, run in the profiling phase until their simulated
// profiler reports, and are planned with the loop's debounce and hysteresis. The loop recording
// also holds, per job, the time spent in the profiling phase and the number of profile reports,
// so a change of the loop's rules (or of the profiler model) shows up here.
//
// Issue #13: the loop recording was regenerated when crux-sim adopted cruxd's stable re-planning
// (ControlOptions::stable, re-optimisation every 600 s). Changes: crux util 1 -> 0.99999772,
// crux bertl 6715 -> 6716 and dlrm 16666 -> 16665 iterations, crux dlrm profiling 0.12 ->
// 0.345 s, ideal bertl 6716 -> 6715. Why: a departure no longer re-plans the kept jobs (tbig
// returns to level 1 at the 600 s re-optimisation instead of at the 572 s departure; gpt27 stays
// on level 3 after 920 s), so dlrm (arriving at 700 s) profiles beside neighbours on other
// levels and its profiler needs more iterations to see 3 samples within 10 % (0.345 s on
// default routes instead of 0.12 s); that is crux's loss. ideal's plan never changes, but the
// loop's re-optimisation timer runs a plan every 600 s, which ends a fast-forward jump; the
// one-iteration difference is the jump rounding of docs/simulator.md section 6.
//
// Regenerated again when re-optimisations started to be weighed against the plan in force
// (ControlLoopOptions::reoptimize_min_gain, 0.01 by default as in cruxd). Changes: crux util
// 0.99999772 -> 1, crux bertl 6716 -> 6715 and dlrm 16665 -> 16666 iterations, crux dlrm
// profiling 0.345 -> 0.12 s (the figures before stable re-planning). Why: crux's one weighed
// re-optimisation, at 600 s, offers a plan of the same quality (contention cost 3.526e15 FLOP
// and cut fraction 1 in both: tbig's return to level 1 changes no pairwise order the cut
// counts), so the plan in force stays, tbig keeps its level and dlrm (700 s) profiles as it did
// before stable re-planning.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "crux/sim/simulator.h"
#include "crux/sim/workload/models.h"
#include "crux/sim/workload/trace.h"
#include "crux/sim/workload/workload.h"
#include "crux/spec/topology_spec.h"

namespace crux::sim::workload {
namespace {

const std::filesystem::path kSource = CRUX_SOURCE_DIR;
const std::filesystem::path kExpected = kSource / "tests/sim/workload/data/golden_expected.txt";
const std::filesystem::path kLoopExpected =
    kSource / "tests/sim/workload/data/golden_loop_expected.txt";
const std::vector<std::string> kPolicies = {"crux",    "ecmp",  "sincronia",
                                            "cassini", "taccl", "ideal"};

// "<policy> util <value>" and "<policy> iterations <job> <n>" lines; with the control loop also
// "<policy> profiling <job> <seconds>" and "<policy> reports <job> <n>".
struct Figures {
  std::map<std::string, double> util;
  std::map<std::string, std::map<std::string, int64_t>> iterations;
  std::map<std::string, std::map<std::string, double>> profiling;
  std::map<std::string, std::map<std::string, int64_t>> reports;
};

Figures RunAll(bool oracle = true) {
  Figures f;
  auto topo = spec::LoadTopologyFile((kSource / "configs/topologies/example_clos2.yaml").string());
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  auto models = LoadModelsFile((kSource / "configs/models.yaml").string());
  EXPECT_TRUE(models.ok()) << models.status().ToString();
  auto trace = LoadTraceFile((kSource / "tests/sim/workload/data/golden_trace.csv").string());
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  if (!topo.ok() || !models.ok() || !trace.ok()) return f;
  auto jobs = TraceToSimJobs(*trace, *models, *topo, 8);
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  if (!jobs.ok()) return f;
  for (const std::string& policy : kPolicies) {
    SimOptions o;
    o.control.oracle = oracle;
    if (!oracle) o.policy.planner.reserved_high_levels = 1;  // cruxd's newcomer level.
    o.horizon = core::Duration::Seconds(1800);
    o.policy.planner.levels = 4;
    o.policy.planner.seed = 7;
    auto r = Simulate(*topo, policy, *jobs, {}, o);
    EXPECT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
    if (!r.ok()) continue;
    f.util[policy] = r->gpu_utilization;
    for (const JobResult& j : r->jobs) {
      f.iterations[policy][j.id] = j.iterations;
      if (!oracle) {
        f.profiling[policy][j.id] = j.profiling.ToSeconds();
        f.reports[policy][j.id] = j.profile_reports;
      }
    }
  }
  return f;
}

std::string Format(const Figures& f) {
  std::ostringstream out;
  out.precision(9);
  for (const auto& [policy, u] : f.util) out << policy << " util " << u << "\n";
  for (const auto& [policy, jobs] : f.iterations) {
    for (const auto& [job, n] : jobs) out << policy << " iterations " << job << " " << n << "\n";
  }
  for (const auto& [policy, jobs] : f.profiling) {
    for (const auto& [job, t] : jobs) out << policy << " profiling " << job << " " << t << "\n";
  }
  for (const auto& [policy, jobs] : f.reports) {
    for (const auto& [job, n] : jobs) out << policy << " reports " << job << " " << n << "\n";
  }
  return out.str();
}

Figures Parse(std::istream& in) {
  Figures f;
  std::string policy, kind;
  while (in >> policy >> kind) {
    if (kind == "util") {
      in >> f.util[policy];
    } else if (kind == "profiling") {
      std::string job;
      in >> job >> f.profiling[policy][job];
    } else if (kind == "reports") {
      std::string job;
      in >> job >> f.reports[policy][job];
    } else {
      std::string job;
      int64_t n = 0;
      in >> job >> n;
      f.iterations[policy][job] = n;
    }
  }
  return f;
}

// Compares `got` with the recording at `path` (or rewrites it under CRUX_UPDATE_GOLDEN).
void ExpectRecorded(const Figures& got, const std::filesystem::path& path) {
  ASSERT_EQ(got.util.size(), kPolicies.size());
  if (std::getenv("CRUX_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << Format(got);
    FAIL() << "wrote " << path << "; review the diff and re-run without CRUX_UPDATE_GOLDEN";
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path;
  const Figures want = Parse(in);
  ASSERT_EQ(want.util.size(), kPolicies.size());
  for (const auto& [policy, u] : want.util) {
    ASSERT_TRUE(got.util.count(policy)) << policy;
    EXPECT_NEAR(got.util.at(policy), u, 2e-3) << policy;
    for (const auto& [job, n] : want.iterations.at(policy)) {
      const int64_t g = got.iterations.at(policy).at(job);
      EXPECT_LE(std::llabs(g - n), std::max<int64_t>(1, n / 100)) << policy << " " << job;
    }
  }
  ASSERT_EQ(got.profiling.size(), want.profiling.size());
  for (const auto& [policy, jobs] : want.profiling) {
    for (const auto& [job, t] : jobs) {
      // Within 1 % or 0.1 s (an iteration boundary moved by float rounding).
      EXPECT_NEAR(got.profiling.at(policy).at(job), t, std::max(0.1, t / 100))
          << policy << " " << job;
      EXPECT_EQ(got.reports.at(policy).at(job), want.reports.at(policy).at(job))
          << policy << " " << job;
    }
  }
  // Sanity that does not depend on the recording: the contention-free bound is the best.
  for (const auto& [policy, u] : got.util) EXPECT_LE(u, got.util.at("ideal") + 1e-3) << policy;
}

TEST(GoldenTraceTest, PoliciesReproduceTheRecordedFiguresWithinTolerance) {
  ExpectRecorded(RunAll(/*oracle=*/true), kExpected);
}

TEST(GoldenTraceTest, TheControlLoopReproducesTheRecordedProfilingPhaseAndFigures) {
  const Figures got = RunAll(/*oracle=*/false);
  ExpectRecorded(got, kLoopExpected);
  // Independent of the recording: every job that ran went through a profiling phase and
  // reported at least once (the trace's jobs all run for more than 10 iterations).
  for (const auto& [policy, jobs] : got.profiling) {
    for (const auto& [job, t] : jobs) {
      EXPECT_GT(t, 0) << policy << " " << job;
      EXPECT_GE(got.reports.at(policy).at(job), 1) << policy << " " << job;
    }
  }
}

TEST(GoldenTraceTest, SameSeedGivesIdenticalFigures) {
  EXPECT_EQ(Format(RunAll()), Format(RunAll()));
  EXPECT_EQ(Format(RunAll(false)), Format(RunAll(false)));
}

}  // namespace
}  // namespace crux::sim::workload
