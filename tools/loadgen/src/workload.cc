#include "crux/loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
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
