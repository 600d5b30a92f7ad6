// Model profiles: what a trace job's `model` name means to the simulator.
//
// configs/models.yaml lists one profile per model:
//
//   models:
//     - name: bert_large                # unique, [a-z0-9_.-]+; what traces refer to
//       description: BERT-large ...     # free text (optional)
//       gpu: A100-SXM4-80GB             # the GPU the compute time is for (required)
//       compute_time_s: 0.134           # one iteration's computation on one GPU, > 0
//       parallelism: data               # data | pipeline | embedding (see below)
//       gradient_bytes: 680e6           # bytes all-reduced per iteration (data), >= 0
//       activation_bytes: 0             # bytes per stage boundary (pipeline) or per-GPU
//                                       # all-to-all buffer (embedding) per iteration, >= 0
//       overlap_start: 0.4              # fraction of compute before communication may start
//       min_gpus: 8                     # sizes the trace generator may give it, powers of two
//       max_gpus: 512                   #   not required; 1 <= min_gpus <= max_gpus
//       sources:                        # where every number comes from (required keys:
//         compute_time_s: "..."         #   compute_time_s, overlap_start, and gradient_bytes
//         gradient_bytes: "..."         #   / activation_bytes whenever that value is > 0)
//         overlap_start: "..."
//
// Parallelism -> core traffic pattern (core/job.h has the byte maths):
//   data      -> ring_allreduce of gradient_bytes   (gradient_bytes > 0)
//   pipeline  -> pipeline of activation_bytes       (activation_bytes > 0)
//   embedding -> all_to_all of activation_bytes     (activation_bytes > 0)
//   hybrid    -> a multi-phase iteration (core/traffic_model.h), see below
// Compute time is per iteration and independent of the job's GPU count (weak scaling: every GPU
// keeps its per-GPU batch), which is how data-parallel jobs are usually scaled.
//
// Hybrid (3D/4D-parallel LLM) profiles describe one iteration by its parallel layout and the
// byte-relevant quantities of core::TrainingRecipe, instead of compute_time_s / overlap_start /
// *_bytes (those keys are errors there):
//
//   - name: llama3_70b_h100
//     gpu: H100-SXM
//     parallelism: hybrid
//     iteration_time_s: 10.2          # measured or derived standalone iteration at `reference`
//     model_tflops_per_gpu: 679       # achieved model FLOP/s per GPU: W_j = this x iteration
//     min_gpus: 32                    # job sizes: multiples of tp x cp x pp whose DP degree
//     max_gpus: 256                   #   is a multiple of ep
//     layout: {tp: 4, cp: 1, pp: 8, ep: 1, vp: 5, gpus_per_host: 8, order: tp-cp-dp-pp}
//     reference: {gpus: 64, nic_gbps: 400, nics_per_host: 8}   # where the iteration was measured
//     micro_batches: 64               # and every TrainingRecipe field by its name
//     sharding: zero1                 #   (none | zero1 | zero3), dtypes as fp8 | bf16 | fp16 |
//     grad_dtype: bf16                #   fp32; absent fields keep TrainingRecipe's defaults
//     ...
//     sources: {<every key given above but name, description, gpu, parallelism>: "..."}
//
// At load, the busy compute C is calibrated (core::CalibrateCompute) so that the phase model's
// standalone iteration at the reference scale and NIC speed equals iteration_time_s; a profile
// whose communication alone exceeds it is an error. A job of G GPUs then runs the same recipe
// with dp = G / (tp x cp x pp) and the same C (weak scaling).
//
// Strictness: unknown/duplicate keys, missing required keys, wrong types, quoted numbers, NaN,
// out-of-range values, duplicate names and missing sources are errors naming the key path and
// position ("models[3].sources.gradient_bytes: required key is missing (line 40, column 5)").
//
// Thread-safety: pure functions; a ModelCatalog is immutable after loading.
#ifndef CRUX_SIM_WORKLOAD_MODELS_H_
#define CRUX_SIM_WORKLOAD_MODELS_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/core/model/iteration_timing.h"
#include "crux/core/model/job.h"
#include "crux/core/model/traffic_model.h"
#include "crux/core/topology/topology.h"

namespace crux::sim::workload {

enum class Parallelism { kData, kPipeline, kEmbedding, kHybrid };
std::string_view ParallelismName(Parallelism p);

// The multi-phase part of a `hybrid` profile.
struct HybridProfile {
  core::TrainingRecipe recipe;  // layout.dp = the reference's; compute = the calibrated C.
  int reference_gpus = 0;
  core::HostNetwork reference_network;
  core::Duration iteration_time;  // Measured or derived, at the reference.
  double model_tflops_per_gpu = 0;

  int model_parallel() const { return recipe.layout.tp * recipe.layout.cp * recipe.layout.pp; }
};

struct ModelProfile {
  std::string name;
  std::string description;
  std::string gpu;
  // Per iteration, > 0. Hybrid: the standalone iteration at the reference (used where only a
  // duration is needed, e.g. how long an iteration-limited job holds its GPUs).
  core::Duration compute_time;
  Parallelism parallelism = Parallelism::kData;
  core::Bytes gradient_bytes;    // >= 0.
  core::Bytes activation_bytes;  // >= 0.
  double overlap_start = 1.0;    // [0, 1].
  int min_gpus = 1;
  int max_gpus = 1 << 20;
  std::map<std::string, std::string> sources;  // Field name -> source text.
  std::optional<HybridProfile> hybrid;         // Set iff parallelism == kHybrid.

  core::TrafficPattern pattern() const;  // kExplicit for hybrid.
  core::Bytes pattern_bytes() const;     // The bytes the pattern moves (see above); 0 for hybrid.
  // Whether a job of `gpus` GPUs may run this model: min_gpus <= gpus <= max_gpus and, for
  // hybrid profiles, gpus a multiple of tp x cp x pp with a DP degree divisible by ep.
  bool AcceptsGpus(int gpus) const;
};

class ModelCatalog {
 public:
  ModelCatalog() = default;
  explicit ModelCatalog(std::vector<ModelProfile> models) : models_(std::move(models)) {}
  const std::vector<ModelProfile>& models() const { return models_; }
  // nullptr when absent.
  const ModelProfile* Find(std::string_view name) const;
  // Comma-separated names, for error messages.
  std::string Names() const;

 private:
  std::vector<ModelProfile> models_;
};

core::Result<ModelCatalog> ParseModels(std::string_view yaml);
// Errors carry the path as context.
core::Result<ModelCatalog> LoadModelsFile(const std::string& path);

// A job running `model` on `hosts` with `gpus_per_host` GPUs each (placement already chosen).
// The result passes core::ValidateJob on a topology holding those hosts.
// REQUIRES: model.parallelism != kHybrid (use MakeJobSpecOn).
core::JobSpec MakeJobSpec(const ModelProfile& model, std::string id,
                          std::vector<core::NodeId> hosts, int gpus_per_host);

// The same for any profile on `topo`. Hybrid profiles become the single-overlap summary of their
// multi-phase iteration (core::SingleOverlapJobSpec: explicit per-NIC flows, W_j, compute time
// and the equivalent overlap_start, on the topology's NIC speed). Errors (hybrid only): a size
// the profile does not accept, hosts not holding whole layout hosts of
// layout.gpus_per_host GPUs.
core::Result<core::JobSpec> MakeJobSpecOn(const core::Topology& topo, const ModelProfile& model,
                                          std::string id, std::vector<core::NodeId> hosts,
                                          int gpus_per_host);

// The iteration a hybrid profile runs with `gpus` GPUs (dp = gpus / (tp cp pp)).
core::Result<core::IterationModel> HybridIteration(const ModelProfile& model, int gpus);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_MODELS_H_
