// The placement policy: same host, then same ToR, then same Agg, then anywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "crux/core/topology/builders.h"
#include "crux/sim/workload/placement.h"
#include "crux/spec/topology_spec.h"

namespace crux::sim::workload {
namespace {

using ::testing::HasSubstr;

// 2 pods x 2 ToRs x 4 hosts (host0-3 tor0, 4-7 tor1 in pod 0; 8-11 tor2, 12-15 tor3 in pod 1).
core::Topology TwoPods() {
  core::Clos3Params p;
  p.hosts_per_tor = 4;
  core::Result<core::Topology> t = core::BuildClos3(p);
  EXPECT_TRUE(t.ok());
  return *t;
}

std::vector<std::string> Names(const core::Topology& t, const Placement& p) {
  std::vector<std::string> out;
  for (core::NodeId h : p.hosts) out.push_back(t.node(h).name);
  return out;
}

TEST(PlacementTest, GroupsFollowTheTopology) {
  const core::Topology t = TwoPods();
  core::Result<Placer> p = Placer::Create(t, 8);
  ASSERT_TRUE(p.ok());
  const auto& h = t.hosts();
  EXPECT_EQ(p->tor_group(h[0]), p->tor_group(h[3]));
  EXPECT_NE(p->tor_group(h[3]), p->tor_group(h[4]));
  EXPECT_EQ(p->agg_group(h[0]), p->agg_group(h[7]));  // Same pod.
  EXPECT_NE(p->agg_group(h[7]), p->agg_group(h[8]));  // Other pod.
  EXPECT_EQ(p->total_gpus(), 128);
  EXPECT_EQ(p->free_gpus(), 128);
}

TEST(PlacementTest, PacksSameHostThenSameTorThenSameAggThenAnywhere) {
  const core::Topology t = TwoPods();
  core::Result<Placer> placer = Placer::Create(t, 8);
  ASSERT_TRUE(placer.ok());
  Placer& p = *placer;
  // Small jobs share a host, best fit.
  core::Result<Placement> a = p.Place(4);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->level, PlacementLevel::kSameHost);
  EXPECT_EQ(Names(t, *a), std::vector<std::string>{"host0"});
  core::Result<Placement> b = p.Place(2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Names(t, *b), std::vector<std::string>{"host0"});  // Fewest free that fit.
  core::Result<Placement> c = p.Place(4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Names(t, *c), std::vector<std::string>{"host1"});  // host0 has only 2 left.
  EXPECT_EQ(p.free_gpus(t.hosts()[0]), 2);
  // 24 GPUs = 3 whole hosts under one ToR: tor0 has only 2 whole hosts left, tor1 has 4;
  // best fit among ToRs with >= 3 is any with 4 -> the first (tor1).
  core::Result<Placement> d = p.Place(24);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->level, PlacementLevel::kSameTor);
  EXPECT_EQ(Names(t, *d), (std::vector<std::string>{"host4", "host5", "host6"}));
  EXPECT_EQ(d->gpus_per_host, 8);
  // 24 more: tor2 (pod 1) has 4 -> same ToR again.
  core::Result<Placement> e = p.Place(24);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->level, PlacementLevel::kSameTor);
  EXPECT_EQ(Names(t, *e), (std::vector<std::string>{"host8", "host9", "host10"}));
  // 40 GPUs = 5 hosts: no ToR has 5; pod 1 has 1 + 4 = 5 whole hosts -> same Agg group,
  // fullest ToR first.
  core::Result<Placement> f = p.Place(40);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->level, PlacementLevel::kSameAgg);
  EXPECT_EQ(Names(t, *f),
            (std::vector<std::string>{"host12", "host13", "host14", "host15", "host11"}));
  // 16 GPUs = 2 hosts: pod 0 still has host2, host3 (tor0) and host7 (tor1).
  core::Result<Placement> g = p.Place(16);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->level, PlacementLevel::kSameTor);
  EXPECT_EQ(Names(t, *g), (std::vector<std::string>{"host2", "host3"}));
  // Free a whole host in each pod, then 16 GPUs must span the pods: anywhere.
  p.Release(*e);  // host8-10 free again (pod 1).
  ASSERT_TRUE(p.Reserve(Placement{{t.hosts()[8], t.hosts()[9]}, 8, PlacementLevel::kSameTor}).ok());
  // Whole free hosts now: host7 (pod 0) and host10 (pod 1).
  core::Result<Placement> h = p.Place(16);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->level, PlacementLevel::kAnywhere);
  const std::vector<std::string> names = Names(t, *h);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"host7", "host10"}));
}

TEST(PlacementTest, ReleaseReturnsGpusAndErrorsAreClear) {
  const core::Topology t = TwoPods();
  core::Result<Placer> placer = Placer::Create(t, 8);
  ASSERT_TRUE(placer.ok());
  Placer& p = *placer;
  core::Result<Placement> all = p.Place(128);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(p.free_gpus(), 0);
  core::Result<Placement> none = p.Place(1);
  EXPECT_EQ(none.status().code(), core::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no host has 1 free GPUs"));
  p.Release(*all);
  EXPECT_EQ(p.free_gpus(), 128);
  EXPECT_THAT(p.Place(12).status().message(), HasSubstr("must use a multiple of 8 GPUs (got 12)"));
  EXPECT_EQ(p.Place(0).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.Place(136).status().message(), HasSubstr("not enough whole free hosts"));
  EXPECT_THAT(Placer::Create(t, 0).status().message(), HasSubstr("gpus_per_host: must be >= 1"));
  // Reserving a non-host or an over-full host fails and changes nothing.
  core::Result<core::NodeId> tor = t.FindNode("tor0");
  ASSERT_TRUE(tor.ok());
  EXPECT_FALSE(p.Reserve(Placement{{*tor}, 1, PlacementLevel::kSameHost}).ok());
  EXPECT_FALSE(p.Reserve(Placement{{t.hosts()[0]}, 9, PlacementLevel::kSameHost}).ok());
  EXPECT_EQ(p.free_gpus(), 128);
}

TEST(PlacementTest, ScatteredPlacementTakesRandomWholeFreeHostsAcrossTors) {
  const core::Topology t = TwoPods();  // 16 hosts, 4 per ToR.
  core::Result<Placer> placer = Placer::Create(t, 8);
  ASSERT_TRUE(placer.ok());
  core::Rng rng(7);
  // One-host jobs are placed exactly as Place does (best fit, lowest index).
  core::Result<Placement> small = placer->PlaceScattered(4, rng);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(Names(t, *small), (std::vector<std::string>{"host0"}));
  // A 4-host job: 4 distinct whole free hosts (host0 is half used), in host order, and over
  // many seeds they are not always one ToR (packing would always give one ToR).
  int spread = 0;
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    core::Result<Placer> p = Placer::Create(t, 8);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p->Place(4).ok());  // host0 half used.
    core::Rng r(seed);
    core::Result<Placement> big = p->PlaceScattered(32, r);
    ASSERT_TRUE(big.ok()) << big.status().ToString();
    ASSERT_EQ(big->hosts.size(), 4u);
    EXPECT_EQ(big->gpus_per_host, 8);
    std::set<int> tors;
    for (size_t i = 0; i < big->hosts.size(); ++i) {
      EXPECT_NE(t.node(big->hosts[i]).name, "host0");
      EXPECT_EQ(p->free_gpus(big->hosts[i]), 0);  // Reserved.
      if (i > 0) {
        EXPECT_LT(big->hosts[i - 1].value(), big->hosts[i].value());  // Host order.
      }
      tors.insert(p->tor_group(big->hosts[i]));
      seen.insert(t.node(big->hosts[i]).name);
    }
    if (tors.size() > 1) {
      ++spread;
      EXPECT_NE(big->level, PlacementLevel::kSameTor);
    }
  }
  EXPECT_GT(spread, 40);
  EXPECT_GT(seen.size(), 12u);  // Every free host gets picked at some point.
  // Same seed, same choice.
  core::Result<Placer> a = Placer::Create(t, 8);
  core::Result<Placer> b = Placer::Create(t, 8);
  core::Rng ra(3);
  core::Rng rb(3);
  EXPECT_EQ(Names(t, *a->PlaceScattered(64, ra)), Names(t, *b->PlaceScattered(64, rb)));
  // Errors as Place: no room, bad size.
  core::Rng r(1);
  EXPECT_THAT(a->PlaceScattered(72, r).status().message(),
              HasSubstr("not enough whole free hosts"));
  EXPECT_THAT(a->PlaceScattered(12, r).status().message(), HasSubstr("multiple of 8"));
}

TEST(PlacementTest, SpilledPlacementFillsTheFullestDomainsFirst) {
  const core::Topology t = TwoPods();  // 16 hosts, 4 per ToR, 2 ToRs per pod.
  core::Result<Placer> p = Placer::Create(t, 8);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Place(8).ok());  // host0.
  // 5 hosts: pod 0 (7 whole free) is fuller than pod 1 (8); inside it tor0 (3 free) before tor1
  // (4): hosts 1-3, then spill into tor1.
  core::Result<Placement> a = p->PlaceSpilled(40);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Names(t, *a), (std::vector<std::string>{"host1", "host2", "host3", "host4", "host5"}));
  EXPECT_EQ(a->level, PlacementLevel::kSameAgg);
  // Pod 0 has host6-7 left: a 2-host job fills them (one ToR).
  core::Result<Placement> b = p->PlaceSpilled(16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Names(t, *b), (std::vector<std::string>{"host6", "host7"}));
  EXPECT_EQ(b->level, PlacementLevel::kSameTor);
  // Pod 1: equal ToRs, the first in group order.
  core::Result<Placement> c = p->PlaceSpilled(24);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Names(t, *c), (std::vector<std::string>{"host8", "host9", "host10"}));
  // Place would now put a 2-host job whole in tor3; spilling fills tor2's last host first, so
  // the job shares tor2 (and its uplinks) with the previous one.
  core::Result<Placer> q = Placer::Create(t, 8);
  ASSERT_TRUE(q.ok());
  for (const Placement* done : {&*a, &*b, &*c}) ASSERT_TRUE(q->Reserve(*done).ok());
  ASSERT_TRUE(q->Reserve(Placement{{t.hosts()[0]}, 8, PlacementLevel::kSameHost}).ok());
  EXPECT_EQ(Names(t, *q->Place(16)), (std::vector<std::string>{"host12", "host13"}));
  core::Result<Placement> d = p->PlaceSpilled(16);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(Names(t, *d), (std::vector<std::string>{"host11", "host12"}));
  EXPECT_EQ(d->level, PlacementLevel::kSameAgg);
  // Jobs of one host as Place; errors as Place.
  EXPECT_EQ(p->PlaceSpilled(4)->hosts.size(), 1u);
  EXPECT_THAT(p->PlaceSpilled(12).status().message(), HasSubstr("multiple of 8"));
  EXPECT_THAT(p->PlaceSpilled(64).status().message(), HasSubstr("not enough whole free hosts"));
}

TEST(PlacementTest, SharedPlacementTakesHalfHostsBesideAnotherJob) {
  const core::Topology t = TwoPods();  // 16 hosts of 8 GPUs.
  core::Result<Placer> p = Placer::Create(t, 8);
  ASSERT_TRUE(p.ok());
  // 16 GPUs on half of 4 hosts: whole free hosts in host order when none is half-held.
  core::Result<Placement> a = p->PlaceShared(16);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Names(t, *a), (std::vector<std::string>{"host0", "host1", "host2", "host3"}));
  EXPECT_EQ(a->gpus_per_host, 4);
  EXPECT_EQ(a->level, PlacementLevel::kSameTor);
  // The next shared job takes the other halves first, then whole hosts.
  core::Result<Placement> b = p->PlaceShared(24);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(Names(t, *b),
            (std::vector<std::string>{"host0", "host1", "host2", "host3", "host4", "host5"}));
  EXPECT_EQ(b->gpus_per_host, 4);
  EXPECT_EQ(b->level, PlacementLevel::kSameAgg);
  EXPECT_EQ(p->free_gpus(t.hosts()[0]), 0);
  EXPECT_EQ(p->free_gpus(t.hosts()[4]), 4);
  EXPECT_EQ(p->free_gpus(), 128 - 40);
  // One host's worth or less, and sizes that are no multiple of 8: as Place.
  EXPECT_EQ(p->PlaceShared(4)->hosts.size(), 1u);
  EXPECT_THAT(p->PlaceShared(12).status().message(), HasSubstr("multiple of 8"));
  // No room: the message says what was missing.
  EXPECT_THAT(p->PlaceShared(128).status().message(), HasSubstr("not enough half-free hosts"));
  // Released GPUs come back per host.
  p->Release(*b);
  EXPECT_EQ(p->free_gpus(t.hosts()[0]), 4);
  EXPECT_EQ(p->free_gpus(t.hosts()[5]), 8);
}

TEST(PlacementTest, DualTorPairIsOneTorGroup) {
  core::Clos3Params params;
  params.dual_tor = true;
  params.pods = 2;
  params.hosts_per_tor = 3;
  params.host.nics_per_host = 2;
  core::Result<core::Topology> t = core::BuildClos3(params);
  ASSERT_TRUE(t.ok());
  core::Result<Placer> p = Placer::Create(*t, 8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tor_group(t->hosts()[0]), p->tor_group(t->hosts()[2]));
  EXPECT_NE(p->tor_group(t->hosts()[2]), p->tor_group(t->hosts()[3]));
  core::Result<Placement> job = p->Place(24);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->level, PlacementLevel::kSameTor);
}

TEST(PlacementTest, LingjunHostsGroupByAswAndPsw) {
  core::Result<core::Topology> t = spec::LoadTopologyFile(
      (std::filesystem::path(CRUX_SOURCE_DIR) / "configs/topologies/lingjun.yaml").string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  core::Result<Placer> p = Placer::Create(*t, 8);
  ASSERT_TRUE(p.ok());
  std::set<int> tors;
  std::set<int> aggs;
  for (core::NodeId h : t->hosts()) {
    tors.insert(p->tor_group(h));
    aggs.insert(p->agg_group(h));
  }
  EXPECT_EQ(tors.size(), 48u);  // One per ASW label.
  EXPECT_GE(aggs.size(), 2u);
  // A 64-GPU job fits under one ASW (up to 24 hosts each).
  core::Result<Placement> job = p->Place(64);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->level, PlacementLevel::kSameTor);
  std::set<int> used;
  for (core::NodeId h : job->hosts) used.insert(p->tor_group(h));
  EXPECT_EQ(used.size(), 1u);
}

}  // namespace
}  // namespace crux::sim::workload
