// The engine runs the phases of the shipped hybrid profiles (issue #16 item 1): alone on an
// empty rail fabric, its iteration time is core::TimeIteration's standalone reference; a
// multi-phase MoE job through Simulate gives fixed, explained figures; fast-forward agrees
// with the full simulation; --single-overlap runs the summary instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/model/iteration_summary.h"
#include "crux/core/model/iteration_timing.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/topology/builders.h"
#include "crux/sim/simulator.h"
#include "crux/sim/workload/models.h"
#include "crux/testing/sim_jobs.h"

namespace crux::sim::workload {
namespace {

namespace fs = std::filesystem;
using core::Duration;
const fs::path kConfigs = fs::path(CRUX_SOURCE_DIR) / "configs";

const ModelCatalog& Shipped() {
  static const ModelCatalog* catalog = [] {
    core::Result<ModelCatalog> c = LoadModelsFile((kConfigs / "models.yaml").string());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return new ModelCatalog(c.ok() ? *c : ModelCatalog());
  }();
  return *catalog;
}

// One HPN segment of `hosts` hosts with 8 single-port NICs of `gbps` each, one plane: NIC r of
// every host on rail ToR r. Rail-aligned traffic (all of the phase model's) crosses NIC -> ToR
// -> NIC only, on one path: an empty, non-blocking fabric whose only bottleneck is the NIC.
core::Topology RailSegment(int hosts, double gbps) {
  core::HpnParams p;
  p.segments = 1;
  p.hosts_per_segment = hosts;
  p.rails = 8;
  p.planes = 1;
  p.aggs_per_plane = 1;
  p.nic_port_gbps = gbps;
  core::Result<core::Topology> t = core::BuildHpn(p);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

SimJob PhaseJob(const core::Topology& topo, const std::string& id, const core::IterationModel& m,
                int first_host = 0) {
  std::vector<core::NodeId> hosts(topo.hosts().begin() + first_host,
                                  topo.hosts().begin() + first_host + m.layout.hosts());
  core::Result<core::JobSpec> spec = core::SingleOverlapJobSpec(topo, id, hosts, m);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  SimJob j;
  j.spec = *spec;
  j.iteration = std::make_shared<const core::IterationModel>(m);
  return j;
}

// The smallest size each profile accepts; the flows per iteration it starts (the test's cost).
struct Case {
  const ModelProfile* profile = nullptr;
  int gpus = 0;
  int64_t flows = 0;
};

std::vector<Case> SmallCases() {
  std::vector<Case> out;
  for (const ModelProfile& m : Shipped().models()) {
    if (!m.hybrid) continue;
    int g = m.min_gpus;
    while (g <= m.max_gpus && !m.AcceptsGpus(g)) ++g;
    core::Result<core::IterationModel> it = HybridIteration(m, g);
    EXPECT_TRUE(it.ok()) << m.name;
    if (!it.ok()) continue;
    int64_t flows = 0;
    for (const core::CommOp& op : it->ops) {
      flows += static_cast<int64_t>(op.instances) * static_cast<int64_t>(op.flows.size());
    }
    out.push_back({&m, g, flows});
  }
  return out;
}

// Engine vs TimeIteration for one profile at `gpus`, alone on an empty rail fabric. Returns
// the engine's mean iteration over two iterations and sets the reference.
//
// The two models share the NICs differently: TimeIteration by processor sharing over every
// transfer of the job in flight (each gets 1/n of "the NIC"), the engine max-min per link among
// the flows on it. They coincide when the transfers in flight load the same NICs (rail rings,
// all-to-alls over every host, paced transfers that never overlap), which holds for every
// shipped profile: the engine matches to the nanosecond rounding of finish times (each flow
// finishes at the next whole nanosecond; paced releases are floored to one), so the check is
// 1e-6 relative. With a per-hop latency alpha every transfer on the critical path is delivered
// 2 alpha later (NIC -> rail ToR -> NIC), which TimeIteration leaves out.
double EngineIteration(const ModelProfile& m, int gpus, Duration alpha, double* reference,
                       double* busy) {
  core::Result<core::IterationModel> it = HybridIteration(m, gpus);
  EXPECT_TRUE(it.ok());
  if (!it.ok()) return 0;
  const core::HostNetwork net{8, m.hybrid->reference_network.nic_bandwidth};
  core::Result<core::IterationTiming> ref = core::TimeIteration(*it, net);
  EXPECT_TRUE(ref.ok()) << ref.status().ToString();
  if (!ref.ok()) return 0;
  *reference = ref->iteration.ToSeconds();
  *busy = ref->busy.ToSeconds();
  const core::Topology topo = RailSegment(it->layout.hosts(), net.nic_bandwidth.ToGbps());
  SimJob job = PhaseJob(topo, m.name, *it);
  job.iterations = 2;
  SimOptions o = testing::OracleOptions(10 * ref->iteration.ToSeconds());
  o.per_hop_latency = alpha;
  o.fast_forward = false;
  core::Result<SimResult> r = Simulate(topo, "ecmp", {job}, {}, o);
  EXPECT_TRUE(r.ok()) << m.name << ": " << r.status().ToString();
  if (!r.ok()) return 0;
  EXPECT_EQ(r->jobs[0].iterations, 2) << m.name;
  // Busy compute: exactly the busy segments of two iterations (the bubble is idle).
  EXPECT_NEAR(r->jobs[0].compute_busy.ToSeconds(), 2 * *busy, 1e-6) << m.name;
  EXPECT_DOUBLE_EQ(r->bytes_sent, r->bytes_delivered) << m.name;
  return r->jobs[0].mean_iteration.ToSeconds();
}

TEST(PhasesProfilesTest, EngineMatchesTimeIterationAloneOnAnEmptyFabric) {
  // deepseek_v3_h800 starts 12.7 M flows per iteration at its smallest size (1024 GPUs, EP64
  // over 8 nodes): about 6 s of this test on the shared 2-core machine.
  constexpr int64_t kMaxFlows = 20'000'000;
  int ran = 0;
  for (const Case& c : SmallCases()) {
    if (c.flows > kMaxFlows) continue;
    double reference = 0;
    double busy = 0;
    const double engine = EngineIteration(*c.profile, c.gpus, Duration::Zero(), &reference, &busy);
    std::printf("%-28s %5d GPUs %7lld flows/iteration: engine %.6f s, TimeIteration %.6f s\n",
                c.profile->name.c_str(), c.gpus, static_cast<long long>(c.flows), engine,
                reference);
    EXPECT_NEAR(engine, reference, 1e-6 * reference) << c.profile->name;
    ++ran;
  }
  EXPECT_GE(ran, 11);
}

// With the default 1 us per hop, every transfer on the critical path arrives 2 us later: a few
// hundred transfers (the pipeline chains, the exposed buckets, the paced ops' stragglers) add
// well under 1 % to a multi-second iteration, never less than the reference.
TEST(PhasesProfilesTest, PerHopLatencyAddsLittleToTheReference) {
  for (const Case& c : SmallCases()) {
    if (c.flows > 100'000) continue;
    double reference = 0;
    double busy = 0;
    const double engine =
        EngineIteration(*c.profile, c.gpus, Duration::Micros(1), &reference, &busy);
    std::printf("%-28s alpha 1 us: engine %.6f s, TimeIteration %.6f s (+%.1f us)\n",
                c.profile->name.c_str(), engine, reference, (engine - reference) * 1e6);
    EXPECT_GE(engine, reference * (1 - 1e-9)) << c.profile->name;
    EXPECT_LE(engine, reference * 1.001) << c.profile->name;
  }
}

}  // namespace
}  // namespace crux::sim::workload
