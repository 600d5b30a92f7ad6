// Cost of merging a multi-host job's part reports (core::MergeHostParts, docs/daemon.md
// "Multi-host jobs"): cruxd merges a job's parts after a batch in which one of them reported
// (a job above 4,096 entries at most every 100 ms), so a job of H hosts whose agents report one
// by one costs up to H merges: the merge time is the cost of one report. And of cutting the
// job's assignment per host for the pushes (core::SplitAssignmentByHost), once per epoch.
//
// Workload: H hosts x 8 ranks x 8 NICs; one world communicator (a ring over all 8H ranks: each
// host's last rank sends to the next host) and 8 rail communicators (rank i of every host, a
// ring over the hosts), as NCCL builds for a data-parallel job: 16 RankPeerBytes per part.
//
//   build/test/bench/host_parts_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crux/core/model/host_parts.h"

namespace crux::core {
namespace {

constexpr uint32_t kRanksPerHost = 8;
constexpr uint32_t kNicsPerHost = 8;

struct Job {
  std::vector<HostPartReport> reports;
  std::vector<HostPartInput> parts;
};

Job MakeJob(uint32_t hosts) {
  Job job;
  job.reports.resize(hosts);
  const uint32_t world = hosts * kRanksPerHost;
  for (uint32_t h = 0; h < hosts; ++h) {
    HostPartReport& r = job.reports[h];
    r.profile.compute_time = Duration::Millis(90 + h % 7);
    r.profile.iteration_period = Duration::Millis(100 + h % 5);
    r.profile.samples = 20;
    r.profile.converged = true;
    CommTraffic w;
    w.comm_hash = 0x1;
    w.nranks = world;
    w.nnodes = hosts;
    for (uint32_t k = 0; k < kRanksPerHost; ++k) {
      const uint32_t rank = h * kRanksPerHost + k;
      w.local_ranks.push_back(rank);
      w.bytes.push_back({rank, static_cast<int32_t>((rank + 1) % world), Bytes::Of(150'000'000)});
    }
    r.comms.push_back(std::move(w));
    for (uint32_t k = 0; k < kRanksPerHost; ++k) {  // Rail k: rank h of a ring over the hosts.
      CommTraffic rail;
      rail.comm_hash = 0x100 + k;
      rail.nranks = hosts;
      rail.nnodes = hosts;
      rail.local_ranks.push_back(h);
      rail.bytes.push_back({h, static_cast<int32_t>((h + 1) % hosts), Bytes::Of(40'000'000)});
      r.comms.push_back(std::move(rail));
    }
  }
  for (uint32_t h = 0; h < hosts; ++h) {
    HostPartInput in;
    in.host = NodeId(h * (kNicsPerHost + 1));
    for (uint32_t n = 1; n <= kNicsPerHost; ++n) in.nics.push_back(NodeId(in.host.value() + n));
    in.hosts_expected = hosts;
    in.report = &job.reports[h];
    job.parts.push_back(std::move(in));
  }
  return job;
}

void BM_MergeHostParts(benchmark::State& state) {
  const Job job = MakeJob(static_cast<uint32_t>(state.range(0)));
  size_t peers = 0;
  for (auto _ : state) {
    HostPartMerge m = MergeHostParts(job.parts);
    peers = m.profile->peers.size();
    benchmark::DoNotOptimize(m);
  }
  state.counters["peers"] = static_cast<double>(peers);
  state.counters["parts"] = static_cast<double>(job.parts.size());
}
BENCHMARK(BM_MergeHostParts)
    ->Arg(2)
    ->Arg(16)
    ->Arg(64)
    ->Arg(128)
    ->Arg(1920)
    ->Unit(benchmark::kMicrosecond)
    ->MeasureProcessCPUTime();

// The merged job's assignment (one flow per NIC pair of the profile) cut for every host.
void BM_SplitAssignmentByHost(benchmark::State& state) {
  const Job job = MakeJob(static_cast<uint32_t>(state.range(0)));
  const HostPartMerge m = MergeHostParts(job.parts);
  Topology topo;  // Hosts and NICs numbered as MakeJob does: host h = h * 9, its NICs after it.
  std::vector<NodeId> hosts;
  for (size_t h = 0; h < job.parts.size(); ++h) {
    const NodeId host = *topo.AddNode("h" + std::to_string(h), NodeKind::kHost);
    hosts.push_back(host);
    for (uint32_t n = 0; n < kNicsPerHost; ++n) {
      (void)*topo.AddNode("h" + std::to_string(h) + "/nic" + std::to_string(n), NodeKind::kNic,
                          host);
    }
  }
  Assignment a;
  a.job_id = "job";
  for (const PeerTraffic& p : m.profile->peers)
    a.flows.push_back({p.local_nic, p.remote_nic, 1, {}});
  for (auto _ : state) {
    std::map<NodeId, Assignment> cut = SplitAssignmentByHost(a, topo, hosts);
    benchmark::DoNotOptimize(cut);
  }
  state.counters["flows"] = static_cast<double>(a.flows.size());
}
BENCHMARK(BM_SplitAssignmentByHost)
    ->Arg(64)
    ->Arg(1920)
    ->Unit(benchmark::kMicrosecond)
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace crux::core

BENCHMARK_MAIN();
