// A synthetic trace generator calibrated to what is published about the Alibaba Lingjun
// production trace that Crux was evaluated on (SIGCOMM'24 §2.2, Figs. 4-5; docs/sim-workloads.md
// lists every calibration target and every assumption):
//   * two weeks, > 5,000 jobs (Poisson arrivals, mean gap 240 s -> ~5,040 jobs);
//   * job sizes from a power-of-two mix with > 10% of jobs at >= 128 GPUs and 512 the largest;
//   * log-normal durations (median 15 min, sigma 1.8; larger jobs run longer), so that the peak
//     has > 30 concurrent jobs on > 1,000 GPUs;
//   * each job gets a model whose [min_gpus, max_gpus] holds its size (uniform among those),
//     so the >= 128-GPU jobs are the GPT / LLaMA variants, as in the paper.
// That is the `lingjun-2023` mix (the default), drawn from the single-pattern profiles of the
// catalog. The `llm-2025` mix (GeneratorOptions::mix) draws job classes instead: mostly small
// legacy jobs, a few mid-size and large dense LLM jobs, and a rare cross-host MoE job, on the
// hybrid profiles of configs/models.yaml (Llm2025Classes says which, and why).
// When given a Placer (the real Lingjun topo.csv hosts), jobs are placed at arrival by the
// placement policy (placement.h); a job that does not fit waits (FIFO) until enough GPUs free
// up, and its arrival_s is then its start time (the simulator does not model queueing).
// Deterministic: the same options, catalog and topology give the same trace on every platform
// (core::Rng, no std distributions).
//
// Thread-safety: pure function (the Placer is the caller's and is mutated).
#ifndef CRUX_SIM_WORKLOAD_GENERATOR_H_
#define CRUX_SIM_WORKLOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/workload/models.h"
#include "crux/sim/workload/placement.h"
#include "crux/sim/workload/trace.h"

namespace crux::sim::workload {

// Bounds on what one trace may ask for (ten years; ten million jobs on average), so that a
// typo cannot make the generator run until memory is exhausted.
inline constexpr double kMaxGeneratorDays = 3650;
inline constexpr int64_t kMaxGeneratedJobs = 10'000'000;

inline constexpr std::string_view kLingjun2023Mix = "lingjun-2023";
inline constexpr std::string_view kLlm2025Mix = "llm-2025";
// The mixes GeneratorOptions::mix accepts.
std::vector<std::string> MixNames();

// One class of a mix: a share of the jobs, the sizes they draw from (uniformly) and the models
// they draw from (uniformly among those accepting the size; empty: every single-pattern model
// of the catalog, in catalog order).
struct MixClass {
  std::string name;
  double weight = 0;
  std::vector<int> gpus;
  std::vector<std::string> models;
};

// The llm-2025 classes. Sources (workloads-2025.md §5) and what is assumed:
//   * Acme (NSDI'24): the median job has 1 GPU and "less than 7% of jobs request over 8 GPUs"
//     [S]; pre-training jobs are 0.9-3.2% of jobs but 69.5-94% of GPU time; mean job size 5.7
//     (Seren) to 26.8 (Kalos) GPUs [D]. Here: 93.5% of jobs on <= 8 GPUs, 55.5% on 1 GPU, 4%
//     LLM pre-training jobs (>= 64 GPUs), mean 16.7 GPUs.
//   * The split among the <= 8-GPU sizes, among the LLM classes, and the class sizes are
//     assumptions (no published split): dense mid-size jobs (Llama 3 8B FSDP, Llama 3 70B)
//     on 64-256 GPUs, large dense jobs (Llama 3.1 405B) on 256-512 GPUs, and 0.5% DeepSeek-V3
//     cross-host MoE jobs on 1,024 GPUs, which are what saturates NICs (workloads-2025.md §6).
//   * Small legacy jobs keep the lingjun-2023 profiles (A100 timings).
std::vector<MixClass> Llm2025Classes();

struct GeneratorOptions {
  uint64_t seed = 1;
  double days = 14;  // Trace span (arrivals), in (0, kMaxGeneratorDays].
  // Poisson arrivals, > 0; days x 86400 / mean_interarrival_s <= kMaxGeneratedJobs.
  double mean_interarrival_s = 240;
  // (GPUs, weight) pairs; GPUs >= 1, weights >= 0 with a positive sum.
  std::vector<std::pair<int, double>> size_mix = {
      {1, 0.305}, {2, 0.08},   {4, 0.10},   {8, 0.20},    {16, 0.10},
      {32, 0.06}, {64, 0.035}, {128, 0.07}, {256, 0.035}, {512, 0.015}};
  double median_duration_s = 900;  // Log-normal median, > 0.
  double duration_sigma = 1.8;     // Log-normal sigma, >= 0.
  // Duration multiplier 1 + size_duration_slope * log2(gpus): bigger jobs run longer.
  double size_duration_slope = 0.25;
  double min_duration_s = 60;
  double max_duration_s = 4 * 86400.0;
  // Fragmentation (only with a Placer): each job larger than one host is, with this probability,
  // placed by Placer::PlaceScattered (random whole free hosts) instead of packed. In [0, 1].
  // Drawn from its own random stream, so 0 gives exactly the packed traces of earlier versions.
  // Crux §2.2 / Fig. 6 reports 36.3% of jobs (51% of GPUs) may contend on the real cluster;
  // docs/evaluation.md calibrates this value against that statistic.
  double scatter_probability = 0;
  // Pack-then-spill (only with a Placer): each job larger than one host that is not scattered
  // is, with this probability, placed by Placer::PlaceSpilled (fullest domain first, spilling
  // across ToR groups and pods) instead of Place (the tightest domain that holds it whole).
  // In [0, 1]; its own random stream, so 0 gives the traces of earlier versions.
  // docs/sim-workloads.md calibrates it against Crux's 51% of GPUs that may contend.
  double spill_probability = 0;
  // GPU-sharing hosts (only with a Placer): each job larger than one host that is neither
  // scattered nor spilled, and whose profile is not hybrid (those fix 8 GPUs per host), is with
  // this probability placed by Placer::PlaceShared (half of each of twice as many hosts, beside
  // another job). Its own random stream: 0 gives the traces of earlier versions.
  double share_probability = 0;
  // The job mix: kLingjun2023Mix (size_mix over the single-pattern profiles) or kLlm2025Mix
  // (Llm2025Classes; size_mix is then not used).
  std::string mix = std::string(kLingjun2023Mix);
};

core::Status ValidateGeneratorOptions(const GeneratorOptions& o);

// Expected GPU-seconds one generated job asks for: sum over the size mix of
// weight x GPUs x E[clamped log-normal duration x size factor], by deterministic quadrature
// over the standard normal (no sampling). Precondition: ValidateGeneratorOptions(o) is OK.
double ExpectedGpuSecondsPerJob(const GeneratorOptions& o);

// The mean inter-arrival gap (seconds) at which the generated jobs offer `load` x
// `cluster_gpus` GPUs on average (offered load = arrival rate x E[GPUs x duration] / cluster
// GPUs, before any FIFO waiting). Errors: invalid options, cluster_gpus < 1, load not in
// (0, 4] (names the field).
core::Result<double> MeanInterarrivalForLoad(const GeneratorOptions& o, int cluster_gpus,
                                             double load);

// Generates the trace. `placer` may be null (placement column left empty).
// Errors: invalid options (naming the field), a catalog without a model for some size, a job
// larger than the whole cluster.
core::Result<std::vector<TraceJob>> GenerateTrace(const GeneratorOptions& options,
                                                  const ModelCatalog& models,
                                                  const core::Topology* topo, Placer* placer);

struct TraceStats {
  size_t jobs = 0;
  double share_ge_128 = 0;  // Fraction of jobs with >= 128 GPUs.
  int max_gpus = 0;
  double span_s = 0;  // Last arrival - first arrival.
  int peak_jobs = 0;  // Most jobs running at once (duration jobs only).
  int peak_gpus = 0;  // Most GPUs in use at once.
  // Most jobs running at once at a moment when they held >= 1,000 GPUs (0 if never).
  int peak_jobs_on_1000_gpus = 0;
  std::vector<std::pair<int, size_t>> size_counts;  // (GPUs, jobs), ascending.
};

// Crux Fig. 6's statistic for a placed trace: the share of jobs (and of their GPUs) that may
// contend on a network link, i.e. that span more than one ToR group and, at some time in their
// life, share a ToR group with another such job (so both can use that ToR's uplinks).
// `tor_group` maps a host name of the placement to its ToR group (-1 if unknown: ignored).
struct ContentionStats {
  double share_jobs_cross_tor = 0;
  double share_jobs_may_contend = 0;
  double share_gpus_may_contend = 0;  // Of the sum of all jobs' GPUs.
};
ContentionStats ComputeContentionStats(const std::vector<TraceJob>& jobs,
                                       const std::function<int(const std::string&)>& tor_group);
// Jobs without duration_s count as running until the last event.
TraceStats ComputeTraceStats(const std::vector<TraceJob>& jobs);

// Time-averaged fraction of `cluster_gpus` held by the trace's duration jobs over [0, span_s]
// (jobs are clipped to the window; arrival_s is the start time). 0 if span_s <= 0 or
// cluster_gpus < 1.
double MeanGpuOccupancy(const std::vector<TraceJob>& jobs, int cluster_gpus, double span_s);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_GENERATOR_H_
