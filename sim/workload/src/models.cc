#include "crux/sim/workload/models.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "crux/core/base/ids.h"
#include "crux/core/model/iteration_summary.h"
#include "crux/textio/file.h"
#include "crux/textio/yaml.h"
#include "text_checks.h"

namespace crux::sim::workload {

using core::InvalidArgumentError;
using core::Result;
using core::Status;
using textio::ChildPath;
using textio::ElementPath;
using textio::ErrorAt;

std::string_view ParallelismName(Parallelism p) {
  switch (p) {
    case Parallelism::kData:
      return "data";
    case Parallelism::kPipeline:
      return "pipeline";
    case Parallelism::kEmbedding:
      return "embedding";
    case Parallelism::kHybrid:
      return "hybrid";
  }
  return "data";
}

core::TrafficPattern ModelProfile::pattern() const {
  switch (parallelism) {
    case Parallelism::kData:
      return core::TrafficPattern::kRingAllReduce;
    case Parallelism::kPipeline:
      return core::TrafficPattern::kPipeline;
    case Parallelism::kEmbedding:
      return core::TrafficPattern::kAllToAll;
    case Parallelism::kHybrid:
      return core::TrafficPattern::kExplicit;
  }
  return core::TrafficPattern::kRingAllReduce;
}

core::Bytes ModelProfile::pattern_bytes() const {
  if (parallelism == Parallelism::kHybrid) return core::Bytes();
  return parallelism == Parallelism::kData ? gradient_bytes : activation_bytes;
}

bool ModelProfile::AcceptsGpus(int gpus) const {
  if (gpus < min_gpus || gpus > max_gpus) return false;
  if (!hybrid) return true;
  const int mp = hybrid->model_parallel();
  return gpus % mp == 0 && (gpus / mp) % hybrid->recipe.layout.ep == 0;
}

const ModelProfile* ModelCatalog::Find(std::string_view name) const {
  for (const ModelProfile& m : models_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string ModelCatalog::Names() const {
  std::string out;
  for (const ModelProfile& m : models_) out += (out.empty() ? "" : ", ") + m.name;
  return out;
}

namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

bool ValidName(const std::string& s) {
  return !s.empty() && s.size() <= core::kMaxNameLength &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                  c == '-';
         });
}

// The keys of a hybrid profile beyond the common ones (models.h); each needs a source.
constexpr std::string_view kHybridKeys[] = {"iteration_time_s",
                                            "model_tflops_per_gpu",
                                            "layout",
                                            "reference",
                                            "micro_batches",
                                            "forward_share",
                                            "dp_buckets",
                                            "sharding",
                                            "dense_params_per_rank",
                                            "expert_params_per_rank",
                                            "param_dtype",
                                            "grad_dtype",
                                            "pp_elements_per_transfer",
                                            "pp_dtype",
                                            "moe_layers_per_rank",
                                            "ep_tokens_per_microbatch",
                                            "ep_fanout",
                                            "ep_hidden",
                                            "ep_dispatch_dtype",
                                            "ep_combine_dtype",
                                            "ep_backward_dtype",
                                            "layers_per_rank",
                                            "cp_buffer_elements",
                                            "cp_dtype",
                                            "tp_elements_per_layer",
                                            "tp_dtype"};
constexpr std::string_view kCommonKeys[] = {"name",     "description", "gpu",    "parallelism",
                                            "min_gpus", "max_gpus",    "sources"};
constexpr std::string_view kClassicKeys[] = {"compute_time_s", "gradient_bytes", "activation_bytes",
                                             "overlap_start"};

Status ReadDtype(const textio::YamlNode& n, const std::string& path, std::string_view key,
                 core::WireDtype* out) {
  std::string text;
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, key, false, &text));
  if (text.empty()) return Status::Ok();
  Result<core::WireDtype> d = core::ParseWireDtype(text);
  if (!d.ok()) return ErrorAt(n.Get(key), ChildPath(path, key), d.status().message());
  *out = *d;
  return Status::Ok();
}

Status ReadElements(const textio::YamlNode& n, const std::string& path, std::string_view key,
                    double* out) {
  return internal::ReadReal(n, path, key, false, textio::RealRange::Closed(0, 1e15), out);
}

Status ParseLayout(const textio::YamlNode& n, const std::string& path, core::ParallelLayout* l) {
  CRUX_RETURN_IF_ERROR(
      textio::CheckMap(n, path, {"tp", "cp", "pp", "dp", "ep", "vp", "gpus_per_host", "order"}));
  for (auto [key, field] : {std::pair<std::string_view, int*>{"tp", &l->tp},
                            {"cp", &l->cp},
                            {"pp", &l->pp},
                            {"ep", &l->ep},
                            {"vp", &l->vp},
                            {"gpus_per_host", &l->gpus_per_host}}) {
    int64_t v = *field;
    CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, key, key == "tp" || key == "pp",
                                               textio::IntRange::Closed(1, 1 << 16), &v));
    *field = static_cast<int>(v);
  }
  if (n.Has("dp")) {
    return ErrorAt(n.Get("dp"), ChildPath(path, "dp"),
                   "the DP degree follows from the job size (give reference.gpus)");
  }
  std::string order = "tp-cp-dp-pp";
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "order", false, &order));
  if (order == "tp-cp-dp-pp") {
    l->order = core::RankOrder::kTpCpDpPp;
  } else if (order == "tp-cp-pp-dp") {
    l->order = core::RankOrder::kTpCpPpDp;
  } else {
    return ErrorAt(n.Get("order"), ChildPath(path, "order"),
                   "must be tp-cp-dp-pp or tp-cp-pp-dp (got " + internal::Shown(order) + ")");
  }
  return Status::Ok();
}

Status ParseHybrid(const textio::YamlNode& n, const std::string& path, ModelProfile* m) {
  for (std::string_view key : kClassicKeys) {
    if (n.Has(key)) {
      return ErrorAt(n.Get(key), ChildPath(path, key),
                     "not a key of a hybrid profile (its compute and overlap follow from "
                     "iteration_time_s and the phases)");
    }
  }
  HybridProfile h;
  core::TrainingRecipe& r = h.recipe;
  double iteration = 0;
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "iteration_time_s", true,
                                          textio::RealRange::AboveAtMost(0, 1e6), &iteration));
  h.iteration_time = core::Duration::Seconds(iteration);
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "model_tflops_per_gpu", true,
                                          textio::RealRange::AboveAtMost(0, 1e6),
                                          &h.model_tflops_per_gpu));
  if (!n.Has("layout")) return textio::MissingKey(n, path, "layout");
  CRUX_RETURN_IF_ERROR(ParseLayout(n.Get("layout"), ChildPath(path, "layout"), &r.layout));
  if (!n.Has("reference")) return textio::MissingKey(n, path, "reference");
  const textio::YamlNode& ref = n.Get("reference");
  const std::string rpath = ChildPath(path, "reference");
  CRUX_RETURN_IF_ERROR(textio::CheckMap(ref, rpath, {"gpus", "nic_gbps", "nics_per_host"}));
  int64_t gpus = 0;
  CRUX_RETURN_IF_ERROR(
      internal::ReadInteger(ref, rpath, "gpus", true, textio::IntRange::Closed(1, 1 << 20), &gpus));
  double gbps = 0;
  CRUX_RETURN_IF_ERROR(internal::ReadReal(ref, rpath, "nic_gbps", true,
                                          textio::RealRange::AboveAtMost(0, 1e5), &gbps));
  int64_t nics = r.layout.gpus_per_host;
  CRUX_RETURN_IF_ERROR(internal::ReadInteger(ref, rpath, "nics_per_host", false,
                                             textio::IntRange::Closed(1, 1024), &nics));
  h.reference_gpus = static_cast<int>(gpus);
  h.reference_network = core::HostNetwork{static_cast<int>(nics), core::Bandwidth::Gbps(gbps)};
  const int mp = h.model_parallel();
  if (gpus % mp != 0) {
    return ErrorAt(ref.Get("gpus"), ChildPath(rpath, "gpus"),
                   "must be a multiple of tp x cp x pp (" + std::to_string(mp) + ")");
  }
  r.layout.dp = static_cast<int>(gpus / mp);

  int64_t v = r.micro_batches;
  CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, "micro_batches", false,
                                             textio::IntRange::Closed(1, 1000000), &v));
  r.micro_batches = static_cast<int>(v);
  v = r.dp_buckets;
  CRUX_RETURN_IF_ERROR(
      internal::ReadInteger(n, path, "dp_buckets", false, textio::IntRange::Closed(1, 64), &v));
  r.dp_buckets = static_cast<int>(v);
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "forward_share", false,
                                          textio::RealRange{0, true, 1, true}, &r.forward_share));
  std::string sharding;
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "sharding", false, &sharding));
  if (!sharding.empty()) {
    Result<core::DpSharding> sh = core::ParseDpSharding(sharding);
    if (!sh.ok())
      return ErrorAt(n.Get("sharding"), ChildPath(path, "sharding"), sh.status().message());
    r.sharding = *sh;
  }
  for (auto [key, field] :
       {std::pair<std::string_view, double*>{"dense_params_per_rank", &r.dense_params_per_rank},
        {"expert_params_per_rank", &r.expert_params_per_rank},
        {"pp_elements_per_transfer", &r.pp_elements_per_transfer},
        {"moe_layers_per_rank", &r.moe_layers_per_rank},
        {"ep_tokens_per_microbatch", &r.ep_tokens_per_microbatch},
        {"ep_fanout", &r.ep_fanout},
        {"ep_hidden", &r.ep_hidden},
        {"layers_per_rank", &r.layers_per_rank},
        {"cp_buffer_elements", &r.cp_buffer_elements},
        {"tp_elements_per_layer", &r.tp_elements_per_layer}}) {
    CRUX_RETURN_IF_ERROR(ReadElements(n, path, key, field));
  }
  for (auto [key, field] :
       {std::pair<std::string_view, core::WireDtype*>{"param_dtype", &r.param_dtype},
        {"grad_dtype", &r.grad_dtype},
        {"pp_dtype", &r.pp_dtype},
        {"ep_dispatch_dtype", &r.ep_dispatch_dtype},
        {"ep_combine_dtype", &r.ep_combine_dtype},
        {"ep_backward_dtype", &r.ep_backward_dtype},
        {"cp_dtype", &r.cp_dtype},
        {"tp_dtype", &r.tp_dtype}}) {
    CRUX_RETURN_IF_ERROR(ReadDtype(n, path, key, field));
  }
  r.work_per_gpu = core::Flops::Tera(h.model_tflops_per_gpu * iteration);
  Status valid = core::ValidateRecipe(r);
  if (!valid.ok()) return ErrorAt(n, path, valid.message());
  if (m->min_gpus % mp != 0 || m->max_gpus % mp != 0) {
    return ErrorAt(n.Get(m->min_gpus % mp != 0 ? "min_gpus" : "max_gpus"),
                   ChildPath(path, m->min_gpus % mp != 0 ? "min_gpus" : "max_gpus"),
                   "must be a multiple of tp x cp x pp (" + std::to_string(mp) + ")");
  }
  // The busy compute that reproduces the measured iteration at the reference.
  Result<core::Duration> c = core::CalibrateCompute(r, h.reference_network, h.iteration_time);
  if (!c.ok()) {
    return ErrorAt(n.Get("iteration_time_s"), ChildPath(path, "iteration_time_s"),
                   "the profile cannot reproduce it at the reference: " + c.status().message());
  }
  r.compute = *c;
  m->compute_time = h.iteration_time;
  m->hybrid = std::move(h);
  return Status::Ok();
}

Status ParseClassic(const textio::YamlNode& n, const std::string& path, ModelProfile* m,
                    const std::string& par) {
  for (std::string_view key : kHybridKeys) {
    if (n.Has(key)) {
      return ErrorAt(n.Get(key), ChildPath(path, key),
                     "only hybrid profiles take this key (parallelism: hybrid)");
    }
  }
  double compute = 0;
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "compute_time_s", true,
                                          textio::RealRange::AboveAtMost(0, 1e6), &compute));
  m->compute_time = core::Duration::Seconds(compute);
  if (m->compute_time <= core::Duration::Zero()) {
    return ErrorAt(n.Get("compute_time_s"), ChildPath(path, "compute_time_s"),
                   "must be at least 1 ns");
  }
  double grad = 0;
  double act = 0;
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "gradient_bytes",
                                          m->parallelism == Parallelism::kData,
                                          textio::RealRange::Closed(0, 1e15), &grad));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "activation_bytes",
                                          m->parallelism != Parallelism::kData,
                                          textio::RealRange::Closed(0, 1e15), &act));
  m->gradient_bytes = core::Bytes::FromDouble(grad);
  m->activation_bytes = core::Bytes::FromDouble(act);
  const char* used = m->parallelism == Parallelism::kData ? "gradient_bytes" : "activation_bytes";
  if (m->pattern_bytes().count() < 1) {
    return ErrorAt(n.Get(used), ChildPath(path, used),
                   "must be >= 1 byte for parallelism '" + par + "'");
  }
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "overlap_start", true,
                                          textio::RealRange::Closed(0, 1), &m->overlap_start));
  if (!IsPowerOfTwo(m->min_gpus)) {
    return ErrorAt(n.Get("min_gpus"), ChildPath(path, "min_gpus"), "must be a power of two");
  }
  if (!IsPowerOfTwo(m->max_gpus)) {
    return ErrorAt(n.Get("max_gpus"), ChildPath(path, "max_gpus"), "must be a power of two");
  }
  return Status::Ok();
}

Result<ModelProfile> ParseModel(const textio::YamlNode& n, const std::string& path) {
  std::vector<std::string_view> allowed(std::begin(kCommonKeys), std::end(kCommonKeys));
  allowed.insert(allowed.end(), std::begin(kClassicKeys), std::end(kClassicKeys));
  allowed.insert(allowed.end(), std::begin(kHybridKeys), std::end(kHybridKeys));
  CRUX_RETURN_IF_ERROR(textio::CheckMap(n, path, allowed));
  ModelProfile m;
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "name", true, &m.name));
  if (!ValidName(m.name)) {
    return ErrorAt(n.Get("name"), ChildPath(path, "name"),
                   "must use only a-z, 0-9, '_', '.', '-', at most " +
                       std::to_string(core::kMaxNameLength) + " of them (got " +
                       internal::Shown(m.name) + ")");
  }
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "description", false, &m.description));
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "gpu", true, &m.gpu));
  std::string par;
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "parallelism", true, &par));
  if (par == "data") {
    m.parallelism = Parallelism::kData;
  } else if (par == "pipeline") {
    m.parallelism = Parallelism::kPipeline;
  } else if (par == "embedding") {
    m.parallelism = Parallelism::kEmbedding;
  } else if (par == "hybrid") {
    m.parallelism = Parallelism::kHybrid;
  } else {
    return ErrorAt(n.Get("parallelism"), ChildPath(path, "parallelism"),
                   "must be data, pipeline, embedding or hybrid (got '" + par + "')");
  }
  int64_t min_gpus = 1;
  int64_t max_gpus = 1 << 20;
  CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, "min_gpus", false,
                                             textio::IntRange::Closed(1, 1 << 20), &min_gpus));
  CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, "max_gpus", false,
                                             textio::IntRange::Closed(1, 1 << 20), &max_gpus));
  m.min_gpus = static_cast<int>(min_gpus);
  m.max_gpus = static_cast<int>(max_gpus);
  if (m.parallelism == Parallelism::kHybrid) {
    CRUX_RETURN_IF_ERROR(ParseHybrid(n, path, &m));
  } else {
    CRUX_RETURN_IF_ERROR(ParseClassic(n, path, &m, par));
  }
  if (min_gpus > max_gpus) {
    return ErrorAt(n.Get("max_gpus"), ChildPath(path, "max_gpus"),
                   "must be >= min_gpus (" + std::to_string(min_gpus) + ")");
  }

  // Sources: one per number given (models.h).
  const std::string spath = ChildPath(path, "sources");
  if (!n.Has("sources")) return textio::MissingKey(n, path, "sources");
  const textio::YamlNode& src = n.Get("sources");
  std::vector<std::string> required;
  std::vector<std::string_view> allowed_sources;
  if (m.hybrid) {
    allowed_sources.assign(std::begin(kHybridKeys), std::end(kHybridKeys));
    for (std::string_view key : kHybridKeys) {
      if (n.Has(key)) required.emplace_back(key);
    }
  } else {
    allowed_sources.assign(std::begin(kClassicKeys), std::end(kClassicKeys));
    required = {"compute_time_s", "overlap_start"};
    if (m.gradient_bytes.count() > 0) required.push_back("gradient_bytes");
    if (m.activation_bytes.count() > 0) required.push_back("activation_bytes");
  }
  CRUX_RETURN_IF_ERROR(textio::CheckMap(src, spath, allowed_sources));
  for (const std::string& key : required) {
    std::string text;
    CRUX_RETURN_IF_ERROR(internal::ReadText(src, spath, key, true, &text));
  }
  for (size_t i = 0; i < src.size(); ++i) {
    const std::string& key = src.key(i).scalar();
    std::string text;
    CRUX_RETURN_IF_ERROR(internal::ReadText(src, spath, key, true, &text));
    m.sources[key] = text;
  }
  return m;
}

}  // namespace

Result<ModelCatalog> ParseModels(std::string_view yaml) {
  CRUX_ASSIGN_OR_RETURN(const textio::YamlNode doc, textio::ParseYaml(yaml));
  CRUX_RETURN_IF_ERROR(textio::CheckMap(doc, "", {"models"}));
  if (!doc.Has("models")) return textio::MissingKey(doc, "", "models");
  const textio::YamlNode& list = doc.Get("models");
  if (!list.IsSequence() || list.size() == 0) {
    return ErrorAt(list, "models", "must be a non-empty list");
  }
  std::vector<ModelProfile> out;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = ElementPath("models", i);
    CRUX_ASSIGN_OR_RETURN(ModelProfile m, ParseModel(list.item(i), path));
    if (!names.insert(m.name).second) {
      return Status(core::StatusCode::kAlreadyExists,
                    ChildPath(path, "name") + ": duplicate model name '" + m.name + "'" +
                        textio::Position(list.item(i).Get("name")));
    }
    out.push_back(std::move(m));
  }
  return ModelCatalog(std::move(out));
}

Result<ModelCatalog> LoadModelsFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(const std::string text, textio::ReadTextFile(path));
  Result<ModelCatalog> r = ParseModels(text);
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

Result<core::IterationModel> HybridIteration(const ModelProfile& model, int gpus) {
  if (!model.hybrid) {
    return InvalidArgumentError("model '" + model.name + "' is not a hybrid profile");
  }
  if (!model.AcceptsGpus(gpus)) {
    const core::ParallelLayout& l = model.hybrid->recipe.layout;
    return InvalidArgumentError(
        "model '" + model.name + "' does not run on " + std::to_string(gpus) +
        " GPUs (sizes: multiples of tp x cp x pp = " +
        std::to_string(model.hybrid->model_parallel()) +
        " with a DP degree divisible by ep = " + std::to_string(l.ep) + ", from " +
        std::to_string(model.min_gpus) + " to " + std::to_string(model.max_gpus) + ")");
  }
  core::TrainingRecipe r = model.hybrid->recipe;
  r.layout.dp = gpus / model.hybrid->model_parallel();
  return core::BuildIteration(r);
}

Result<core::JobSpec> MakeJobSpecOn(const core::Topology& topo, const ModelProfile& model,
                                    std::string id, std::vector<core::NodeId> hosts,
                                    int gpus_per_host) {
  if (!model.hybrid) return MakeJobSpec(model, std::move(id), std::move(hosts), gpus_per_host);
  const int per_host = model.hybrid->recipe.layout.gpus_per_host;
  const int gpus = gpus_per_host * static_cast<int>(hosts.size());
  if (hosts.size() > 1 && gpus_per_host != per_host) {
    return InvalidArgumentError("model '" + model.name + "' runs on whole hosts of " +
                                std::to_string(per_host) + " GPUs (got " +
                                std::to_string(gpus_per_host) + " per host)");
  }
  CRUX_ASSIGN_OR_RETURN(const core::IterationModel it, HybridIteration(model, gpus));
  return core::SingleOverlapJobSpec(topo, std::move(id), hosts, it);
}

core::JobSpec MakeJobSpec(const ModelProfile& model, std::string id,
                          std::vector<core::NodeId> hosts, int gpus_per_host) {
  core::JobSpec j;
  j.id = std::move(id);
  j.hosts = std::move(hosts);
  j.gpus_per_host = gpus_per_host;
  j.compute_time = model.compute_time;
  j.overlap_start = model.overlap_start;
  j.pattern = model.pattern();
  j.pattern_bytes = model.pattern_bytes();
  return j;
}

}  // namespace crux::sim::workload
