// cruxd's re-plan path without the sockets: the work the daemon's worker and loop do for one plan
// of the jobs `scripts/bench_daemon.sh` plays (crux-loadgen's workload, seed 1, on the same
// topology file), so the planner's share of a daemon re-plan can be measured and profiled alone.
//
// Inputs are built as cruxd builds them: loadgen's RegisterJob and converged ProfileReport
// messages, converted once by the gateway's functions (protocol::DemandFromProto /
// ProfileFromProto), fed to a core::ControlLoop with cruxd's default options (qos block
// included). The timed part is the daemon's own code:
//   worker: daemon::PlanEngine::Run (policy "crux", incremental, ports resolved; core::RunPlan:
//           plan, assignments, diff, switch QoS; the serialized store rows of the changed jobs)
//   loop:   ControlLoop::FinishPlan and Commit (what stays on the event loop, minus SQLite and
//           the sends, which bench_daemon.sh measures)
//
// Second argument: cruxd's planner.stable (0: exact incremental re-planning, every plan the full
// re-plan's; 1: stable re-planning, the default).
// BM_DaemonFirstPlan/N: every job registered and converged, the first plan (cold policy).
// BM_DaemonReplanOneProfile/N: the same state, warm; each iteration one job's profile changes
//   beyond the hysteresis threshold (compute time x1.5, then back) and the plan runs again
//   (issue #11: trigger-to-last-push <= 1 s at 10,000 jobs; the sends are not in here).
// BM_DaemonReplanOneArrival/N: warm; one newcomer registers with a converged profile and is
//   planned, then leaves (untimed) so every iteration starts from the same state.
// BM_DaemonReoptimize/N: warm; the re-optimisation timer fires and the run re-optimises (below).
// BM_DaemonImpact/N: the shadow accounting of the first plan (cruxd estimates it off the plan's
//   path, on a thread of its own).
// N = 1,000 runs on configs/topologies/example_clos2.yaml, N = 10,000 on hpn_pod.yaml, as
// bench_daemon.sh's two cases. Counters: worker_ms (PlanEngine::Run), loop_ms (FinishPlan +
// Commit), plan stages of the core planner, changed assignments, flows.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/random.h"
#include "crux/core/control/control_loop.h"
#include "crux/daemon/config/config.h"
#include "crux/daemon/control/control_host.h"
#include "crux/loadgen/workload.h"
#include "crux/protocol/convert.h"
#include "crux/spec/topology_spec.h"

namespace crux {
namespace {

struct Workload {
  std::shared_ptr<const core::Topology> topo;
  std::vector<core::JobDemand> demands;
  std::vector<core::JobProfile> profiles;
  size_t flows = 0;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "daemon_replan_bench: %s\n", what.c_str());
  std::abort();
}

// loadgen's jobs, converted as the gateway converts them. `extra` more jobs are built for
// arrivals (ids after the first `jobs`).
const Workload& LoadgenWorkload(int jobs) {
  static std::map<int, Workload>* cache = new std::map<int, Workload>();
  auto it = cache->find(jobs);
  if (it != cache->end()) return it->second;
  const std::string file = std::string(CRUX_SOURCE_DIR) + "/configs/topologies/" +
                           (jobs <= 1000 ? "example_clos2.yaml" : "hpn_pod.yaml");
  auto topo = spec::LoadTopologyFile(file);
  if (!topo.ok()) Die(topo.status().ToString());
  Workload w;
  w.topo = std::make_shared<const core::Topology>(std::move(topo).value());
  loadgen::WorkloadOptions opts;
  opts.jobs = jobs + 64;  // The last 64 are the arrivals.
  opts.seed = 1;
  auto sim_jobs = loadgen::MakeJobs(*w.topo, opts);
  if (!sim_jobs.ok()) Die(sim_jobs.status().ToString());
  core::Rng rng(7);
  for (const loadgen::SimJob& j : *sim_jobs) {
    core::JobDemand d;
    if (auto e = protocol::DemandFromProto(loadgen::MakeRegister(j, 30000), *w.topo, &d);
        e.code != v1::ERROR_CODE_UNSPECIFIED) {
      Die("register " + j.job_id + ": " + e.message);
    }
    core::JobProfile p;
    if (auto e = protocol::ProfileFromProto(loadgen::SynthesizeProfile(j, 1, rng), *w.topo, d, &p);
        e.code != v1::ERROR_CODE_UNSPECIFIED) {
      Die("profile " + j.job_id + ": " + e.message);
    }
    w.flows += j.peers.size();
    w.demands.push_back(std::move(d));
    w.profiles.push_back(std::move(p));
  }
  return cache->emplace(jobs, std::move(w)).first->second;
}

// With `reoptimize`, cruxd's re-optimisation timer and min gain (daemon.cc: stable planners).
core::ControlLoopOptions DaemonLoopOptions(bool reoptimize = false) {
  const daemon::DaemonConfig c;
  core::ControlLoopOptions o;
  o.debounce = core::Duration::Zero();
  o.replan_threshold_pct = c.replan_threshold_pct;
  o.profiling_samples = c.profiling_samples;
  o.qos = c.qos;
  if (reoptimize) {
    o.reoptimize_interval = core::Duration::Millis(c.reoptimize_interval_ms);
    o.reoptimize_min_gain = c.reoptimize_min_gain;
  }
  return o;
}

// cruxd's default planner options, with planner.stable as given.
core::PlannerOptions DaemonPlannerOptions(bool stable) {
  daemon::PlannerConfig c;
  c.stable = stable;
  return daemon::ToPlannerOptions(c);
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// A colour of cruxd's default pool, round robin (as the tracker hands them out).
uint32_t Dscp(int i) {
  static const std::vector<int> pool = daemon::DaemonConfig{}.qos.dscp_pool;
  return static_cast<uint32_t>(pool[static_cast<size_t>(i) % pool.size()]);
}

// A daemon's control loop and worker on one workload.
class Daemonish {
 public:
  Daemonish(const Workload& w, int jobs, bool stable, bool reoptimize = false)
      : w_(w),
        loop_(&clock_, w.topo.get(), DaemonLoopOptions(reoptimize)),
        options_(DaemonPlannerOptions(stable)) {
    for (int i = 0; i < jobs; ++i) {
      loop_.AddJob(w.demands[i], Dscp(i));
      loop_.ReportProfile(w.demands[i].id, w.profiles[i]);
    }
  }

  struct Times {
    double worker_ms = 0;
    double loop_ms = 0;
    size_t changed = 0;
    core::StageTimings timing;
    double dag_edges = 0;
    double prepare_ms = 0;  // RunPlan before Schedule (specs copied and validated).
    double assign_ms = 0;
    double qos_ms = 0;
    double impact_ms = 0;
    core::ReplanStats replan;
    bool reoptimized = false;  // The run was a re-optimisation ...
    bool adopted = false;      // ... whose fresh plan was adopted.
  };

  // One run as cruxd does it (due now: debounce 0).
  Times Run() {
    Times t;
    auto snap = loop_.StartPlan();
    if (!snap)
      Die("no plan due (in flight " + std::to_string(loop_.in_flight()) + ", due " +
          std::to_string(loop_.due().has_value()) + ")");
    auto start = std::chrono::steady_clock::now();
    daemon::PlanRun run = engine_.Run(snap, w_.topo, 1, options_, /*rows=*/true);
    t.worker_ms = MsSince(start);
    if (!run.outcome->status.ok()) Die(run.outcome->status.ToString());
    start = std::chrono::steady_clock::now();
    core::ApplyBatch batch = loop_.FinishPlan(*snap, *run.outcome);
    loop_.Commit(batch);
    t.loop_ms = MsSince(start);
    t.changed = batch.changed.size();
    t.timing = run.outcome->plan.timing;
    t.dag_edges = static_cast<double>(run.outcome->plan.dag.edges.size() +
                                      static_cast<size_t>(run.outcome->plan.dag.edges_omitted));
    if (run.outcome->replan) t.replan = *run.outcome->replan;
    const core::PlanOutcome& o = *run.outcome;
    t.prepare_ms =
        (o.planning_time - o.schedule_time - o.assign_time - o.qos_time - o.impact_time).ToMillis();
    t.assign_ms = o.assign_time.ToMillis();
    t.qos_ms = o.qos_time.ToMillis();
    t.impact_ms = o.impact_time.ToMillis();
    t.reoptimized = o.reoptimized;
    t.adopted = o.reoptimize_verdict.has_value() && o.reoptimize_verdict->adopted;
    last_snapshot_ = snap;
    last_outcome_ = run.outcome;
    return t;
  }

  // The shadow accounting of the last run's plan, as cruxd estimates it after the push
  // (PlanApplier, on its own thread).
  core::Result<core::PlanImpact> EstimateImpact() const {
    core::ImpactOptions options;
    options.ecmp_seed = static_cast<uint64_t>(daemon::DaemonConfig{}.planner.seed);
    return core::EstimatePlanImpact(*w_.topo, *last_snapshot_, last_outcome_->plan, options);
  }

  core::ControlLoop& loop() { return loop_; }
  // Moves the loop's clock to when its next run is due (the re-optimisation timer when nothing
  // else is pending).
  void AdvanceToDue() {
    const std::optional<core::Duration> due = loop_.due();
    if (!due) Die("nothing due");
    if (*due > clock_.Now()) clock_.Set(*due);
  }

 private:
  std::shared_ptr<const core::PlanningSnapshot> last_snapshot_;
  std::shared_ptr<const core::PlanOutcome> last_outcome_;
  const Workload& w_;
  core::FakeClock clock_;
  core::ControlLoop loop_;
  daemon::PlanEngine engine_;
  core::PlannerOptions options_;
};

void Report(benchmark::State& state, const Workload& w, const std::vector<Daemonish::Times>& ts) {
  double worker = 0, loop = 0, changed = 0, paths = 0, compress = 0, ports = 0, profile = 0,
         priority = 0, traffic = 0, total = 0;
  for (const auto& t : ts) {
    worker += t.worker_ms;
    loop += t.loop_ms;
    changed += static_cast<double>(t.changed);
    paths += t.timing.path_selection.ToMillis();
    compress += t.timing.compression.ToMillis();
    ports += t.timing.ports.ToMillis();
    profile += t.timing.profile.ToMillis();
    priority += t.timing.priority.ToMillis();
    traffic += t.timing.traffic.ToMillis();
    total += t.timing.total.ToMillis();
  }
  const double n = ts.empty() ? 1 : static_cast<double>(ts.size());
  state.counters["worker_ms"] = worker / n;
  state.counters["loop_ms"] = loop / n;
  state.counters["changed"] = changed / n;
  state.counters["plan_ms"] = total / n;
  state.counters["paths_ms"] = paths / n;
  state.counters["compress_ms"] = compress / n;
  state.counters["ports_ms"] = ports / n;
  state.counters["profile_ms"] = profile / n;
  state.counters["priority_ms"] = priority / n;
  state.counters["traffic_ms"] = traffic / n;
  state.counters["flows"] = static_cast<double>(w.flows);
  double edges = 0, searched = 0, compressed = 0, inserted = 0, refused = 0, prepare = 0,
         assign = 0, qos = 0, impact = 0, reoptimized = 0, adopted = 0;
  for (const auto& t : ts) {
    prepare += t.prepare_ms;
    assign += t.assign_ms;
    qos += t.qos_ms;
    impact += t.impact_ms;
    edges += t.dag_edges;
    searched += t.replan.paths_searched;
    compressed += t.replan.jobs_compressed;
    inserted += t.replan.levels_inserted;
    refused += t.replan.insertions_repaired;
    reoptimized += t.reoptimized ? 1 : 0;
    adopted += t.adopted ? 1 : 0;
  }
  state.counters["reoptimized"] = reoptimized / n;
  state.counters["adopted"] = adopted / n;
  state.counters["dag_edges"] = edges / n;
  state.counters["prepare_ms"] = prepare / n;
  state.counters["assign_ms"] = assign / n;
  state.counters["qos_ms"] = qos / n;
  state.counters["impact_ms"] = impact / n;
  state.counters["paths_searched"] = searched / n;
  state.counters["jobs_compressed"] = compressed / n;
  state.counters["levels_inserted"] = inserted / n;
  state.counters["insertions_repaired"] = refused / n;
}

void BM_DaemonFirstPlan(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const Workload& w = LoadgenWorkload(jobs);
  std::vector<Daemonish::Times> ts;
  for (auto _ : state) {
    state.PauseTiming();
    auto d = std::make_unique<Daemonish>(w, jobs, state.range(1) != 0);
    state.ResumeTiming();
    ts.push_back(d->Run());
    state.PauseTiming();
    d.reset();
    state.ResumeTiming();
  }
  Report(state, w, ts);
}
// Args: jobs, planner.stable (0: exact re-planning, 1: stable, cruxd's default).
BENCHMARK(BM_DaemonFirstPlan)
    ->Args({1000, 1})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_DaemonReplanOneProfile(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const Workload& w = LoadgenWorkload(jobs);
  Daemonish d(w, jobs, state.range(1) != 0);
  d.Run();
  std::vector<Daemonish::Times> ts;
  size_t k = 0;
  for (auto _ : state) {
    const size_t i = (k / 2 * 7919) % static_cast<size_t>(jobs);  // x1.5, then back.
    core::JobProfile p = w.profiles[i];
    if (k % 2 == 0) p.compute_time = p.compute_time * 1.5;
    p.samples += static_cast<uint32_t>(k + 1);
    d.loop().ReportProfile(w.demands[i].id, p);
    ts.push_back(d.Run());
    ++k;
  }
  Report(state, w, ts);
}
BENCHMARK(BM_DaemonReplanOneProfile)
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(6);

void BM_DaemonReplanOneArrival(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const Workload& w = LoadgenWorkload(jobs);
  Daemonish d(w, jobs, state.range(1) != 0);
  d.Run();
  std::vector<Daemonish::Times> ts;
  size_t k = 0;
  for (auto _ : state) {
    const size_t i = static_cast<size_t>(jobs) + k % 64;
    d.loop().AddJob(w.demands[i], Dscp(static_cast<int>(i)));
    d.loop().ReportProfile(w.demands[i].id, w.profiles[i]);
    ts.push_back(d.Run());
    state.PauseTiming();
    d.loop().RemoveJob(w.demands[i].id, "bench");
    d.Run();
    state.ResumeTiming();
    ++k;
  }
  Report(state, w, ts);
}
BENCHMARK(BM_DaemonReplanOneArrival)
    ->Args({1000, 0})
    ->Args({1000, 1})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(6);

// cruxd's periodic re-optimisation (stable planner, reoptimize_interval_ms, min gain 0.01):
// warm; each iteration the clock moves to the timer and the run re-optimises. With the min gain
// RunPlan plans the continued plan and a fresh one and weighs them; when it keeps the plan in
// force it re-seeds the policy with it (a third Schedule). Counters as above, plus the share of
// runs that re-optimised (1) and whose fresh plan was adopted.
void BM_DaemonReoptimize(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const Workload& w = LoadgenWorkload(jobs);
  Daemonish d(w, jobs, /*stable=*/true, /*reoptimize=*/true);
  d.Run();
  std::vector<Daemonish::Times> ts;
  for (auto _ : state) {
    state.PauseTiming();
    d.AdvanceToDue();
    state.ResumeTiming();
    ts.push_back(d.Run());
  }
  Report(state, w, ts);
}
BENCHMARK(BM_DaemonReoptimize)
    ->Args({1000})
    ->Args({10000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(4);

// The shadow accounting of the plan (docs/impact.md): what cruxd's impact thread spends per
// estimate, after the push (at most every impact.interval_ms). Counters: jobs, gpus_recovered, the
// two fixed points' rounds and last relative move.
void BM_DaemonImpact(benchmark::State& state) {
  const int jobs = static_cast<int>(state.range(0));
  const Workload& w = LoadgenWorkload(jobs);
  Daemonish d(w, jobs, /*stable=*/true);
  d.Run();
  double recovered = 0;
  size_t planned = 0;
  core::PlanImpact report;
  for (auto _ : state) {
    core::Result<core::PlanImpact> impact = d.EstimateImpact();
    if (!impact.ok()) Die(impact.status().ToString());
    recovered = impact->gpus_recovered;
    planned = impact->jobs.size();
    report = std::move(impact).value();
  }
  state.counters["jobs"] = static_cast<double>(planned);
  state.counters["gpus_recovered"] = recovered;
  state.counters["plan_rounds"] = report.plan_report.rounds;
  state.counters["plan_moved"] = report.plan_report.moved;
  state.counters["ecmp_rounds"] = report.ecmp_report.rounds;
  state.counters["ecmp_moved"] = report.ecmp_report.moved;
}
BENCHMARK(BM_DaemonImpact)
    ->Args({1000})
    ->Args({10000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace
}  // namespace crux

BENCHMARK_MAIN();
