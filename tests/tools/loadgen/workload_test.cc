#include "crux/loadgen/workload.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "crux/core/topology/builders.h"
#include "crux/protocol/validate.h"
#include "crux/spec/topology_spec.h"

namespace crux::loadgen {
namespace {

core::Topology Testbed() {
  auto topo =
      spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) + "/configs/topologies/testbed.yaml");
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  return std::move(topo).value();
}

TEST(WorkloadTest, PlacementUsesDistinctTopologyHosts) {
  const core::Topology topo = Testbed();
  WorkloadOptions wo;
  wo.jobs = 200;
  wo.seed = 7;
  auto jobs = MakeJobs(topo, wo);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 200u);
  std::set<std::string> ids, models, patterns;
  std::set<size_t> sizes;
  for (const SimJob& j : *jobs) {
    EXPECT_TRUE(ids.insert(j.job_id).second) << j.job_id;
    ASSERT_FALSE(j.hosts.empty());
    EXPECT_LE(j.hosts.size(), topo.hosts().size());
    std::set<std::string> distinct(j.hosts.begin(), j.hosts.end());
    EXPECT_EQ(distinct.size(), j.hosts.size()) << j.job_id;
    for (size_t i = 0; i < j.hosts.size(); ++i) {
      auto id = topo.FindNode(j.hosts[i]);
      ASSERT_TRUE(id.ok()) << j.hosts[i];
      EXPECT_EQ(topo.node(*id).kind, core::NodeKind::kHost);
      EXPECT_EQ(j.nics[i].size(), 4u);  // testbed: 4 NICs per host.
    }
    for (const PeerDemand& p : j.peers) {
      EXPECT_TRUE(topo.FindNode(p.local_nic).ok());
      EXPECT_TRUE(topo.FindNode(p.remote_nic).ok());
      EXPECT_GT(p.bytes, 0u);
    }
    if (j.hosts.size() >= 2) {
      EXPECT_FALSE(j.peers.empty()) << j.job_id;
    }
    EXPECT_GE(j.period, j.compute_time);
    EXPECT_GT(j.flops_per_iteration, 0);
    models.insert(j.model);
    patterns.insert(j.pattern);
    sizes.insert(j.hosts.size());
  }
  // Variety, so that plans differ between jobs.
  EXPECT_GE(models.size(), 4u);
  EXPECT_EQ(patterns.size(), 3u);
  EXPECT_GE(sizes.size(), 4u);
  EXPECT_EQ((*jobs)[0].job_id, "lg-000");
}

TEST(WorkloadTest, DeterministicForASeed) {
  const core::Topology topo = Testbed();
  WorkloadOptions wo;
  wo.jobs = 20;
  wo.seed = 3;
  auto a = MakeJobs(topo, wo);
  auto b = MakeJobs(topo, wo);
  wo.seed = 4;
  auto c = MakeJobs(topo, wo);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].hosts, (*b)[i].hosts);
    EXPECT_EQ((*a)[i].compute_time, (*b)[i].compute_time);
    differs = differs || (*a)[i].hosts != (*c)[i].hosts;
  }
  EXPECT_TRUE(differs);
}

TEST(WorkloadTest, RingBytesFollowCoreMaths) {
  // Two hosts with one NIC each: a ring all-reduce of S sends 2 (p-1)/p S per direction.
  core::Clos2Params params;
  params.tors = 1;
  params.aggs = 1;
  params.hosts_per_tor = 2;
  params.host.nics_per_host = 1;
  auto topo = core::BuildClos2(params);
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  WorkloadOptions wo;
  wo.jobs = 50;
  wo.gpus_per_host = 1;
  auto jobs = MakeJobs(*topo, wo);
  ASSERT_TRUE(jobs.ok());
  int checked = 0;
  for (const SimJob& j : *jobs) {
    if (j.pattern != "ring_allreduce" || j.hosts.size() != 2) continue;
    ASSERT_EQ(j.peers.size(), 2u);
    // p = 2 GPUs: 2 * 1/2 * S = S per flow.
    EXPECT_NEAR(static_cast<double>(j.peers[0].bytes), static_cast<double>(j.pattern_bytes), 1);
    EXPECT_EQ(j.wire_bytes, j.peers[0].bytes + j.peers[1].bytes);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(WorkloadTest, MessagesPassProtocolValidation) {
  const core::Topology topo = Testbed();
  WorkloadOptions wo;
  wo.jobs = 50;
  auto jobs = MakeJobs(topo, wo);
  ASSERT_TRUE(jobs.ok());
  core::Rng rng(1);
  for (const SimJob& j : *jobs) {
    v1::RegisterJob reg = MakeRegister(j, 3000);
    EXPECT_TRUE(protocol::ValidateRegisterJob(reg).ok())
        << protocol::ValidateRegisterJob(reg).ToString();
    EXPECT_EQ(static_cast<size_t>(reg.placement_size()), j.hosts.size());
    EXPECT_EQ(reg.lease_ms(), 3000u);
    for (uint64_t s = 0; s < 3; ++s) {
      v1::ProfileReport p = SynthesizeProfile(j, s, rng);
      EXPECT_TRUE(protocol::ValidateProfileReport(p).ok())
          << protocol::ValidateProfileReport(p).ToString();
      EXPECT_EQ(p.converged(), s >= 1);
      EXPECT_GE(p.iteration_period_ns(), p.compute_time_ns());
      // Jitter stays within +-2% of the job's compute time.
      EXPECT_NEAR(static_cast<double>(p.compute_time_ns()),
                  static_cast<double>(j.compute_time.nanos()), 0.021 * j.compute_time.nanos());
    }
  }
}

TEST(WorkloadTest, ZeroJitterGivesStableProfiles) {
  const core::Topology topo = Testbed();
  WorkloadOptions wo;
  wo.jobs = 3;
  auto jobs = MakeJobs(topo, wo);
  ASSERT_TRUE(jobs.ok());
  core::Rng rng(5);
  const SimJob& j = (*jobs)[0];
  v1::ProfileReport a = SynthesizeProfile(j, 1, rng, 0.0);
  v1::ProfileReport b = SynthesizeProfile(j, 2, rng, 0.0);
  EXPECT_EQ(a.compute_time_ns(), b.compute_time_ns());
  EXPECT_EQ(a.iteration_period_ns(), b.iteration_period_ns());
  EXPECT_EQ(a.compute_time_ns(), static_cast<uint64_t>(j.compute_time.nanos()));
  // Out-of-range jitter is clamped, never producing invalid reports.
  v1::ProfileReport c = SynthesizeProfile(j, 3, rng, 7.0);
  EXPECT_TRUE(protocol::ValidateProfileReport(c).ok());
  EXPECT_GE(c.compute_time_ns(), static_cast<uint64_t>(0.5 * j.compute_time.nanos()) - 1);
}

TEST(WorkloadTest, BadOptionsAreErrors) {
  const core::Topology topo = Testbed();
  WorkloadOptions wo;
  wo.jobs = 0;
  auto r = MakeJobs(topo, wo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "jobs: must be >= 1");
  wo.jobs = 1;
  wo.gpus_per_host = 0;
  EXPECT_FALSE(MakeJobs(topo, wo).ok());
  wo.gpus_per_host = 8;
  EXPECT_FALSE(MakeJobs(core::Topology(), wo).ok());
}

}  // namespace
}  // namespace crux::loadgen
