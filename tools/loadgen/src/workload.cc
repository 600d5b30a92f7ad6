#include "crux/loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

#include "crux/core/model/job.h"

namespace crux::loadgen {
namespace {

// Line rate of a NIC: its fastest link towards a network switch (0 if it has none).
double NicBps(const core::Topology& topo, core::NodeId nic) {
  double best = 0;
  for (core::LinkId l : topo.OutLinks(nic)) {
    const core::Link& link = topo.link(l);
    if (core::IsNetworkSwitch(topo.node(link.dst).kind)) {
      best = std::max(best, link.capacity.ToBitsPerSec());
    }
  }
  return best;
}

std::string JobId(const std::string& prefix, int index, int total) {
  std::string digits = std::to_string(index);
  const size_t width = std::to_string(std::max(total - 1, 0)).size();
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return prefix + "-" + digits;
}

// A stable 64-bit hash of a job id (FNV-1a, mixed): the same in every process and build.
uint64_t StableHash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return core::Mix64(h);
}

core::Status CheckOptions(const WorkloadOptions& options) {
  if (options.jobs < 1) return core::InvalidArgumentError("jobs: must be >= 1");
  if (options.gpus_per_host < 1 || options.gpus_per_host > 1024) {
    return core::InvalidArgumentError("gpus_per_host: must be 1-1024");
  }
  if (options.max_hosts_per_job < 1) {
    return core::InvalidArgumentError("max_hosts_per_job: must be >= 1");
  }
  if (!(options.effective_flops_per_gpu > 0) || !std::isfinite(options.effective_flops_per_gpu)) {
    return core::InvalidArgumentError("effective_flops_per_gpu: must be > 0");
  }
  return core::Status::Ok();
}

// Host-agent mode: calls `emit(peer_rank, bytes)` for what rank `rank` of an `n`-rank world
// communicator sends per iteration under the job's pattern (nothing for a single rank).
template <typename Emit>
void ForEachRankSend(const SimJob& job, uint32_t rank, uint32_t n, Emit emit) {
  if (n < 2) return;
  const double s = static_cast<double>(job.pattern_bytes);
  if (job.pattern == "all_to_all") {
    const auto share = static_cast<uint64_t>(s / n);
    for (uint32_t peer = 0; peer < n; ++peer) {
      if (peer != rank) emit(peer, share);
    }
  } else if (job.pattern == "pipeline") {
    if (rank + 1 < n) emit(rank + 1, job.pattern_bytes);
  } else {  // ring_allreduce
    emit((rank + 1) % n, static_cast<uint64_t>(2.0 * (n - 1) / n * s));
  }
}

uint32_t RankCount(const SimJob& job) {
  size_t n = 0;
  for (const auto& slots : job.host_slots) n += slots.size();
  return static_cast<uint32_t>(n);
}

}  // namespace

const std::vector<ModelProfile>& ModelCatalogue() {
  // name, compute_time_s, bytes, overlap_start, pattern, min_hosts, max_hosts.
  static const std::vector<ModelProfile> kModels = {
      {"resnet50", 0.1, 102.2e6, 0.4, "ring_allreduce", 1, 8},
      {"bert_large", 0.134, 680e6, 0.4, "ring_allreduce", 2, 8},
      {"gpt2_xl", 0.295, 3.0e9, 0.4, "ring_allreduce", 2, 16},
      {"gpt3_2.7b", 0.53, 5.4e9, 0.4, "ring_allreduce", 4, 16},
      {"gpt3_6.7b", 0.66, 134e6, 0.2, "pipeline", 2, 8},
      {"llama_7b", 1.32, 13.4e9, 0.4, "ring_allreduce", 4, 32},
      {"dlrm", 0.03, 54.5e6, 0.5, "all_to_all", 2, 8},
  };
  return kModels;
}

core::Result<std::vector<SimJob>> MakeJobs(const core::Topology& topo,
                                           const WorkloadOptions& options) {
  CRUX_RETURN_IF_ERROR(CheckOptions(options));
  const std::vector<core::NodeId>& all_hosts = topo.hosts();
  if (all_hosts.empty()) return core::InvalidArgumentError("topology: has no hosts");
  const int num_hosts = static_cast<int>(all_hosts.size());
  const auto& models = ModelCatalogue();
  core::Rng rng(core::Mix64(options.seed));

  std::vector<SimJob> jobs;
  jobs.reserve(options.jobs);
  for (int j = 0; j < options.jobs; ++j) {
    const ModelProfile& m = models[rng.Uniform(models.size())];
    const int cap = std::min({num_hosts, options.max_hosts_per_job, m.max_hosts});
    const int lo = std::min(m.min_hosts, cap);
    int h = lo + static_cast<int>(rng.Uniform(static_cast<uint64_t>(cap - lo + 1)));
    // Patterns other than a single-host job need >= 2 hosts to put anything on the network.
    if (h < 2 && cap >= 2 && m.pattern != "ring_allreduce") h = 2;

    std::vector<core::NodeId> chosen;
    if (rng.UniformDouble() < 0.5) {
      const int start = static_cast<int>(rng.Uniform(num_hosts));
      for (int i = 0; i < h; ++i) chosen.push_back(all_hosts[(start + i) % num_hosts]);
    } else {
      std::vector<core::NodeId> pool = all_hosts;
      rng.Shuffle(pool);
      chosen.assign(pool.begin(), pool.begin() + h);
    }

    SimJob job;
    job.job_id = JobId(options.job_prefix, j, options.jobs);
    job.tenant = "tenant-" + std::to_string(j % 4);
    job.model = m.name;
    job.pattern = m.pattern;
    job.gpus_per_host = options.gpus_per_host;
    job.pattern_bytes = static_cast<uint64_t>(m.bytes);
    // Per-job variety: +-15% on compute time (batch size, sequence length differ).
    const double scale = 0.85 + 0.3 * rng.UniformDouble();
    job.compute_time = core::Duration::Seconds(m.compute_time_s * scale);
    job.overlap_start = m.overlap_start;
    job.flops_per_iteration =
        job.compute_time.ToSeconds() * options.gpus_per_host * h * options.effective_flops_per_gpu;

    core::JobSpec spec;
    spec.id = job.job_id;
    spec.hosts = chosen;
    spec.gpus_per_host = options.gpus_per_host;
    spec.compute_time = job.compute_time;
    spec.overlap_start = job.overlap_start;
    CRUX_ASSIGN_OR_RETURN(spec.pattern, core::ParseTrafficPattern(m.pattern));
    spec.pattern_bytes = core::Bytes::Of(static_cast<int64_t>(job.pattern_bytes));
    auto flows = core::ExpandTraffic(topo, spec);
    if (!flows.ok()) return flows.status().WithContext("job " + job.job_id);

    double comm_s = 0;  // Bottleneck: the slowest flow at its NIC's line rate.
    for (const core::FlowDemand& f : *flows) {
      PeerDemand p{topo.node(f.src).name, topo.node(f.dst).name,
                   static_cast<uint64_t>(f.bytes.count())};
      job.wire_bytes += p.bytes;
      job.peers.push_back(std::move(p));
      const double bps = NicBps(topo, f.src);
      if (bps > 0) comm_s = std::max(comm_s, f.bytes.ToBits() / bps);
    }
    const double compute_s = job.compute_time.ToSeconds();
    job.period =
        core::Duration::Seconds(std::max(compute_s, compute_s * job.overlap_start + comm_s));

    for (core::NodeId host : chosen) {
      job.hosts.push_back(topo.node(host).name);
      std::vector<std::string> nic_names;
      for (core::NodeId nic : topo.NicsOf(host)) nic_names.push_back(topo.node(nic).name);
      job.nics.push_back(std::move(nic_names));
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

core::Result<std::vector<SimJob>> MakeHostdJobs(const core::Topology& topo,
                                                const WorkloadOptions& options, int agents) {
  CRUX_RETURN_IF_ERROR(CheckOptions(options));
  const std::vector<core::NodeId>& all_hosts = topo.hosts();
  if (all_hosts.empty()) return core::InvalidArgumentError("topology: has no hosts");
  if (agents < 1 || static_cast<size_t>(agents) > all_hosts.size()) {
    return core::InvalidArgumentError("--hostd: must be 1-" + std::to_string(all_hosts.size()) +
                                      " (the topology's hosts)");
  }
  const size_t num_hosts = static_cast<size_t>(agents);
  std::vector<int> capacity(num_hosts);
  int64_t total = 0;
  int widest = 1;
  for (size_t i = 0; i < num_hosts; ++i) {
    const int g = topo.host_gpus(all_hosts[i]);
    capacity[i] = g > 0 ? g : options.gpus_per_host;
    total += capacity[i];
    widest = std::max(widest, capacity[i]);
  }
  if (options.jobs > total) {
    return core::InvalidArgumentError("--jobs: " + std::to_string(options.jobs) +
                                      " jobs need a GPU each, but " + std::to_string(agents) +
                                      " hosts hold " + std::to_string(total));
  }
  const auto& models = ModelCatalogue();
  core::Rng rng(core::Mix64(options.seed));

  // 1. Each job's model and wish (hosts x the widest host's GPUs), as MakeJobs draws them.
  struct Draw {
    const ModelProfile* model;
    int64_t want;
    double scale;
    bool contiguous;
    size_t start;
  };
  std::vector<Draw> draws;
  draws.reserve(static_cast<size_t>(options.jobs));
  int64_t wanted = 0;
  for (int j = 0; j < options.jobs; ++j) {
    const ModelProfile& m = models[rng.Uniform(models.size())];
    const int cap = std::min({static_cast<int>(num_hosts), options.max_hosts_per_job, m.max_hosts});
    const int lo = std::min(m.min_hosts, cap);
    const int h = lo + static_cast<int>(rng.Uniform(static_cast<uint64_t>(cap - lo + 1)));
    Draw d{&m, int64_t{h} * widest, 0.85 + 0.3 * rng.UniformDouble(), rng.UniformDouble() < 0.5,
           static_cast<size_t>(rng.Uniform(num_hosts))};
    wanted += d.want;
    draws.push_back(d);
  }
  // 2. Scaled to what the hosts hold: hosts and GPUs per host each by the square root of the
  // factor that fits (so multi-host jobs stay multi-host), shrunk until the rounded sizes fit.
  double shrink =
      std::sqrt(std::min(1.0, static_cast<double>(total) / static_cast<double>(wanted)));
  auto size_of = [&](const Draw& d, double f) {
    const int64_t hosts =
        std::max<int64_t>(1, std::llround(static_cast<double>(d.want / widest) * f));
    const int64_t per_host =
        std::clamp<int64_t>(std::llround(static_cast<double>(widest) * f), 1, widest);
    return std::make_pair(hosts, per_host);
  };
  for (int round = 0; round < 100; ++round) {
    int64_t sum = 0;
    for (const Draw& d : draws) {
      const auto [hosts, per_host] = size_of(d, shrink);
      sum += hosts * per_host;
    }
    if (sum <= total) break;
    shrink *= 0.95;
  }
  std::vector<int> free_gpus = capacity;
  int64_t free_total = total;
  std::vector<size_t> order(num_hosts);
  std::vector<SimJob> jobs;
  jobs.reserve(draws.size());
  for (size_t j = 0; j < draws.size(); ++j) {
    const Draw& d = draws[j];
    const auto [want_hosts, per_host] = size_of(d, shrink);
    // Leave a GPU for each job still to come (only binds when rounding left no room).
    const int64_t gpus =
        std::min(want_hosts * per_host, free_total - static_cast<int64_t>(draws.size() - j - 1));
    for (size_t i = 0; i < num_hosts; ++i) order[i] = (d.start + i) % num_hosts;
    if (!d.contiguous) rng.Shuffle(order);
    std::vector<std::pair<size_t, int>> taken;  // (host index, GPUs)
    int64_t left = gpus;
    for (int pass = 0; pass < 2 && left > 0; ++pass) {
      for (size_t idx : order) {
        if (left == 0) break;
        // Pass 0: hosts with room for a whole share (per_host GPUs, or the rest); pass 1:
        // whatever is free.
        const int chunk = static_cast<int>(std::min<int64_t>(left, per_host));
        const int take = pass == 0 ? (free_gpus[idx] >= chunk ? chunk : 0)
                                   : static_cast<int>(std::min<int64_t>(left, free_gpus[idx]));
        if (take == 0) continue;
        auto same = std::find_if(taken.begin(), taken.end(),
                                 [idx](const auto& t) { return t.first == idx; });
        if (same != taken.end()) {
          same->second += take;
        } else {
          taken.emplace_back(idx, take);
        }
        free_gpus[idx] -= take;
        left -= take;
      }
    }
    free_total -= gpus - left;
    std::sort(taken.begin(), taken.end());

    SimJob job;
    job.job_id = JobId(options.job_prefix, static_cast<int>(j), options.jobs);
    job.tenant = "tenant-" + std::to_string(j % 4);
    job.model = d.model->name;
    job.pattern = d.model->pattern;
    job.pattern_bytes = static_cast<uint64_t>(d.model->bytes);
    job.compute_time = core::Duration::Seconds(d.model->compute_time_s * d.scale);
    job.overlap_start = d.model->overlap_start;
    job.comm_hash = StableHash(job.job_id);
    job.gpus_per_host = 1;  // The most GPUs it has on one host (below).
    int ranks = 0;
    for (const auto& [idx, k] : taken) {
      const core::NodeId host = all_hosts[idx];
      job.hosts.push_back(topo.node(host).name);
      std::vector<std::string> nic_names;
      for (core::NodeId nic : topo.NicsOf(host)) nic_names.push_back(topo.node(nic).name);
      job.nics.push_back(std::move(nic_names));
      std::vector<uint32_t> slots;
      const int first = capacity[idx] - free_gpus[idx] - k;  // Slots are handed out in order.
      for (int s = 0; s < k; ++s) slots.push_back(static_cast<uint32_t>(first + s));
      job.host_slots.push_back(std::move(slots));
      job.gpus_per_host = std::max(job.gpus_per_host, k);
      ranks += k;
    }
    job.flops_per_iteration =
        job.compute_time.ToSeconds() * ranks * options.effective_flops_per_gpu;
    // Period: compute, then the busiest rank's sends at its NIC's line rate.
    uint64_t busiest = 0;
    ForEachRankSend(job, 0, static_cast<uint32_t>(ranks),
                    [&](uint32_t, uint64_t b) { busiest += b; });
    uint64_t sent = 0;
    for (uint32_t r = 0; r < static_cast<uint32_t>(ranks); ++r) {
      ForEachRankSend(job, r, static_cast<uint32_t>(ranks),
                      [&](uint32_t, uint64_t b) { sent += b; });
    }
    job.wire_bytes = sent;
    double comm_s = 0;
    if (!taken.empty() && !topo.NicsOf(all_hosts[taken[0].first]).empty()) {
      const double bps = NicBps(topo, topo.NicsOf(all_hosts[taken[0].first])[0]);
      if (bps > 0) comm_s = static_cast<double>(busiest) * 8 / bps;
    }
    const double compute_s = job.compute_time.ToSeconds();
    job.period =
        core::Duration::Seconds(std::max(compute_s, compute_s * job.overlap_start + comm_s));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<SimAgent> AgentsOf(const std::vector<SimJob>& jobs) {
  std::vector<SimAgent> agents;
  std::unordered_map<std::string, size_t> index;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (size_t h = 0; h < jobs[j].hosts.size(); ++h) {
      auto [it, inserted] = index.emplace(jobs[j].hosts[h], agents.size());
      if (inserted) agents.push_back(SimAgent{jobs[j].hosts[h], {}});
      agents[it->second].parts.push_back(SimPart{j, h});
    }
  }
  return agents;
}

v1::HostPart MakeHostPart(const SimJob& job, size_t host) {
  v1::HostPart part;
  part.set_host(job.hosts[host]);
  part.set_hosts_expected(static_cast<uint32_t>(job.hosts.size()));
  part.set_local_ranks(static_cast<uint32_t>(job.host_slots[host].size()));
  return part;
}

v1::RegisterJob MakePartRegister(const SimJob& job, size_t host, uint32_t lease_ms) {
  v1::RegisterJob r;
  r.set_job_id(job.job_id);
  v1::HostPlacement* h = r.add_placement();
  h->set_host(job.hosts[host]);
  h->set_gpus(std::max<uint32_t>(1, static_cast<uint32_t>(job.host_slots[host].size())));
  for (size_t n = 0; n < job.nics[host].size(); ++n) {
    v1::Nic* nic = h->add_nics();
    nic->set_name(job.nics[host][n]);
    nic->set_address("10." + std::to_string((host / 250) % 250) + "." + std::to_string(host % 250) +
                     "." + std::to_string(n + 1));
  }
  r.set_model("nccl");
  r.set_lease_ms(lease_ms);
  *r.mutable_host_part() = MakeHostPart(job, host);
  return r;
}

v1::ProfileReport SynthesizePartProfile(const SimJob& job, size_t host, uint64_t sample,
                                        core::Rng& rng, double jitter_fraction) {
  const double j = std::isfinite(jitter_fraction) ? std::clamp(jitter_fraction, 0.0, 0.5) : 0.0;
  auto jitter = [&rng, j](double v) { return v * (1.0 - j + 2.0 * j * rng.UniformDouble()); };
  v1::ProfileReport p;
  p.set_job_id(job.job_id);
  const double compute_ns = std::max(1.0, jitter(static_cast<double>(job.compute_time.nanos())));
  const double period_ns = std::max(compute_ns, jitter(static_cast<double>(job.period.nanos())));
  p.set_compute_time_ns(static_cast<uint64_t>(compute_ns));
  p.set_iteration_period_ns(static_cast<uint64_t>(period_ns));
  p.set_overlap_start(1);  // crux-hostd's merged part profile says 1 (no overlap measured).
  p.set_samples(static_cast<uint32_t>(std::min<uint64_t>(10 * (sample + 1), 1000000)));
  p.set_converged(true);
  const uint32_t n = RankCount(job);
  uint32_t first = 0;
  for (size_t h = 0; h < host; ++h) first += static_cast<uint32_t>(job.host_slots[h].size());
  v1::CommTraffic* t = p.add_comms();
  t->set_comm_hash(job.comm_hash);
  t->set_nranks(std::max<uint32_t>(1, n));
  t->set_nnodes(static_cast<uint32_t>(job.hosts.size()));
  uint64_t total = 0;
  const std::vector<uint32_t>& slots = job.host_slots[host];
  for (size_t k = 0; k < slots.size(); ++k) {
    const uint32_t rank = first + static_cast<uint32_t>(k);
    t->add_local_ranks(rank);
    t->add_local_slots(slots[k]);
    ForEachRankSend(job, rank, n, [&](uint32_t peer, uint64_t bytes) {
      v1::RankPeerBytes* b = t->add_bytes();
      b->set_rank(rank);
      b->set_peer_rank(static_cast<int32_t>(peer));
      b->set_bytes(bytes);
      total += bytes;
    });
  }
  p.set_bytes_per_iteration(total);
  *p.mutable_host_part() = MakeHostPart(job, host);
  return p;
}

v1::RegisterJob MakeRegister(const SimJob& job, uint32_t lease_ms) {
  v1::RegisterJob r;
  r.set_job_id(job.job_id);
  r.set_tenant(job.tenant);
  for (size_t i = 0; i < job.hosts.size(); ++i) {
    v1::HostPlacement* h = r.add_placement();
    h->set_host(job.hosts[i]);
    h->set_gpus(static_cast<uint32_t>(job.gpus_per_host));
    for (size_t n = 0; n < job.nics[i].size(); ++n) {
      v1::Nic* nic = h->add_nics();
      nic->set_name(job.nics[i][n]);
      // Informational RoCE address: 10.<host index>.<nic>.1 style, stable per NIC.
      nic->set_address("10." + std::to_string((i / 250) % 250) + "." + std::to_string(i % 250) +
                       "." + std::to_string(n + 1));
    }
  }
  r.set_pattern(job.pattern);
  r.set_bytes_per_iteration(job.pattern_bytes);
  r.set_flops_per_iteration(static_cast<uint64_t>(job.flops_per_iteration));
  r.set_lease_ms(lease_ms);
  r.set_model(job.model);
  return r;
}

v1::ProfileReport SynthesizeProfile(const SimJob& job, uint64_t sample, core::Rng& rng,
                                    double jitter_fraction) {
  const double j = std::isfinite(jitter_fraction) ? std::clamp(jitter_fraction, 0.0, 0.5) : 0.0;
  auto jitter = [&rng, j](double v) { return v * (1.0 - j + 2.0 * j * rng.UniformDouble()); };
  v1::ProfileReport p;
  p.set_job_id(job.job_id);
  const double compute_ns = std::max(1.0, jitter(static_cast<double>(job.compute_time.nanos())));
  const double period_ns = std::max(compute_ns, jitter(static_cast<double>(job.period.nanos())));
  p.set_compute_time_ns(static_cast<uint64_t>(compute_ns));
  p.set_iteration_period_ns(static_cast<uint64_t>(period_ns));
  p.set_flops_per_iteration(job.flops_per_iteration);
  p.set_overlap_start(job.overlap_start);
  p.set_compression_ratio(1.0);
  p.set_samples(static_cast<uint32_t>(std::min<uint64_t>(10 * (sample + 1), 1000000)));
  p.set_converged(sample >= 1);
  p.set_bytes_per_iteration(job.wire_bytes);
  for (const PeerDemand& d : job.peers) {
    v1::PeerBytes* pb = p.add_peers();
    pb->set_local_nic(d.local_nic);
    pb->set_remote_nic(d.remote_nic);
    pb->set_bytes(d.bytes);
  }
  return p;
}

}  // namespace crux::loadgen
