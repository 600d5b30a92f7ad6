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
// Compute time is per iteration and independent of the job's GPU count (weak scaling: every GPU
// keeps its per-GPU batch), which is how data-parallel jobs are usually scaled.
//
// Strictness: unknown/duplicate keys, missing required keys, wrong types, quoted numbers, NaN,
// out-of-range values, duplicate names and missing sources are errors naming the key path and
// position ("models[3].sources.gradient_bytes: required key is missing (line 40, column 5)").
//
// Thread-safety: pure functions; a ModelCatalog is immutable after loading.
#ifndef CRUX_SIM_WORKLOAD_MODELS_H_
#define CRUX_SIM_WORKLOAD_MODELS_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/job.h"
#include "crux/core/status.h"
#include "crux/core/units.h"

namespace crux::sim::workload {

enum class Parallelism { kData, kPipeline, kEmbedding };
std::string_view ParallelismName(Parallelism p);

struct ModelProfile {
  std::string name;
  std::string description;
  std::string gpu;
  core::Duration compute_time;  // Per iteration, > 0.
  Parallelism parallelism = Parallelism::kData;
  core::Bytes gradient_bytes;    // >= 0.
  core::Bytes activation_bytes;  // >= 0.
  double overlap_start = 1.0;    // [0, 1].
  int min_gpus = 1;
  int max_gpus = 1 << 20;
  std::map<std::string, std::string> sources;  // Field name -> source text.

  core::TrafficPattern pattern() const;
  core::Bytes pattern_bytes() const;  // The bytes the pattern moves (see above).
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
core::JobSpec MakeJobSpec(const ModelProfile& model, std::string id,
                          std::vector<core::NodeId> hosts, int gpus_per_host);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_MODELS_H_
