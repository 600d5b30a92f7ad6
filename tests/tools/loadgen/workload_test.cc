#include "crux/loadgen/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
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

core::Topology ExampleClos2() {
  auto topo = spec::LoadTopologyFile(std::string(CRUX_SOURCE_DIR) +
                                     "/configs/topologies/example_clos2.yaml");
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  return std::move(topo).value();
}

// Host-agent mode: jobs packed onto the first N hosts within their GPUs, multi-host jobs as one
// part per host, every host's parts in its agent, and crux-hostd-shaped messages that validate.
TEST(WorkloadTest, HostdJobsPackHostsAndSplitIntoParts) {
  const core::Topology topo = ExampleClos2();  // 16 hosts x 8 GPUs, 2 NICs each.
  for (int jobs_count : {3, 20, 90}) {
    WorkloadOptions wo;
    wo.jobs = jobs_count;
    wo.seed = 11;
    auto jobs = MakeHostdJobs(topo, wo, 12);
    ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
    ASSERT_EQ(jobs->size(), static_cast<size_t>(jobs_count));
    std::map<std::string, std::set<uint32_t>> used;  // Host -> slots taken.
    size_t multi_host = 0;
    for (const SimJob& j : *jobs) {
      ASSERT_FALSE(j.hosts.empty()) << j.job_id;
      ASSERT_EQ(j.host_slots.size(), j.hosts.size()) << j.job_id;
      multi_host += j.hosts.size() >= 2 ? 1 : 0;
      for (size_t h = 0; h < j.hosts.size(); ++h) {
        auto id = topo.FindNode(j.hosts[h]);
        ASSERT_TRUE(id.ok());
        // Only the first 12 hosts (host0..host11).
        EXPECT_LT(std::find(topo.hosts().begin(), topo.hosts().end(), *id) - topo.hosts().begin(),
                  12);
        ASSERT_FALSE(j.host_slots[h].empty()) << j.job_id;
        for (uint32_t slot : j.host_slots[h]) {
          EXPECT_LT(slot, 8u);
          EXPECT_TRUE(used[j.hosts[h]].insert(slot).second) << j.hosts[h] << " slot " << slot;
        }
        const v1::RegisterJob r = MakePartRegister(j, h, 0);
        EXPECT_TRUE(protocol::ValidateRegisterJob(r).ok()) << r.ShortDebugString();
        ASSERT_EQ(r.placement_size(), 1);
        EXPECT_EQ(r.placement(0).host(), j.hosts[h]);
        EXPECT_EQ(r.placement(0).gpus(), j.host_slots[h].size());
        EXPECT_EQ(r.placement(0).nics_size(), 2);
        EXPECT_EQ(r.host_part().hosts_expected(), j.hosts.size());
        core::Rng rng(3);
        const v1::ProfileReport p = SynthesizePartProfile(j, h, 0, rng);
        EXPECT_TRUE(protocol::ValidateProfileReport(p).ok()) << p.ShortDebugString();
        EXPECT_EQ(p.host_part().host(), j.hosts[h]);
        ASSERT_EQ(p.comms_size(), 1);
        EXPECT_EQ(p.comms(0).local_ranks_size(), static_cast<int>(j.host_slots[h].size()));
        EXPECT_EQ(p.comms(0).nnodes(), j.hosts.size());
        uint64_t sum = 0;
        for (const auto& b : p.comms(0).bytes()) sum += b.bytes();
        EXPECT_EQ(sum, p.bytes_per_iteration());
      }
    }
    if (jobs_count >= 20) {
      // 90 jobs on 96 GPUs were scaled down to one GPU or so each; 20 leave room for some
      // multi-host ones.
      EXPECT_GE(multi_host, jobs_count == 20 ? 1u : 0u);
    }
    size_t parts = 0;
    for (const SimJob& j : *jobs) parts += j.hosts.size();
    const std::vector<SimAgent> agents = AgentsOf(*jobs);
    size_t carried = 0;
    std::set<std::string> hosts;
    for (const SimAgent& a : agents) {
      EXPECT_TRUE(hosts.insert(a.host).second) << a.host;
      for (const SimPart& p : a.parts) EXPECT_EQ((*jobs)[p.job].hosts[p.host], a.host);
      carried += a.parts.size();
    }
    EXPECT_EQ(carried, parts);
    EXPECT_LE(agents.size(), 12u);
  }
}

// Every rank of a part's communicator is its own, and the parts of a job cover ranks 0..n-1.
TEST(WorkloadTest, HostdPartsNumberRanksHostByHost) {
  const core::Topology topo = ExampleClos2();
  WorkloadOptions wo;
  wo.jobs = 4;
  wo.seed = 2;
  auto jobs = MakeHostdJobs(topo, wo, 16);
  ASSERT_TRUE(jobs.ok());
  for (const SimJob& j : *jobs) {
    std::set<uint32_t> ranks;
    core::Rng rng(1);
    for (size_t h = 0; h < j.hosts.size(); ++h) {
      const v1::ProfileReport p = SynthesizePartProfile(j, h, 1, rng, 0.0);
      for (uint32_t r : p.comms(0).local_ranks()) EXPECT_TRUE(ranks.insert(r).second);
      EXPECT_EQ(p.comms(0).comm_hash(), j.comm_hash);
    }
    ASSERT_FALSE(ranks.empty());
    EXPECT_EQ(*ranks.begin(), 0u);
    EXPECT_EQ(*ranks.rbegin(), ranks.size() - 1);
  }
}

TEST(WorkloadTest, HostdBadOptionsAreErrors) {
  const core::Topology topo = ExampleClos2();
  WorkloadOptions wo;
  wo.jobs = 4;
  auto r = MakeHostdJobs(topo, wo, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--hostd: must be 1-16 (the topology's hosts)");
  EXPECT_FALSE(MakeHostdJobs(topo, wo, 17).ok());
  wo.jobs = 17;  // 2 hosts hold 16 GPUs.
  r = MakeHostdJobs(topo, wo, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "--jobs: 17 jobs need a GPU each, but 2 hosts hold 16");
  wo.jobs = 16;
  EXPECT_TRUE(MakeHostdJobs(topo, wo, 2).ok());
}

}  // namespace
}  // namespace crux::loadgen
