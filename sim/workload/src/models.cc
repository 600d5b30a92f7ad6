#include "crux/sim/workload/models.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "crux/core/ids.h"
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
  }
  return core::TrafficPattern::kRingAllReduce;
}

core::Bytes ModelProfile::pattern_bytes() const {
  return parallelism == Parallelism::kData ? gradient_bytes : activation_bytes;
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

Result<ModelProfile> ParseModel(const textio::YamlNode& n, const std::string& path) {
  CRUX_RETURN_IF_ERROR(textio::CheckMap(
      n, path,
      {"name", "description", "gpu", "compute_time_s", "parallelism", "gradient_bytes",
       "activation_bytes", "overlap_start", "min_gpus", "max_gpus", "sources"}));
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
  double compute = 0;
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "compute_time_s", true,
                                          textio::RealRange::AboveAtMost(0, 1e6), &compute));
  m.compute_time = core::Duration::Seconds(compute);
  if (m.compute_time <= core::Duration::Zero()) {
    return ErrorAt(n.Get("compute_time_s"), ChildPath(path, "compute_time_s"),
                   "must be at least 1 ns");
  }
  std::string par;
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "parallelism", true, &par));
  if (par == "data") {
    m.parallelism = Parallelism::kData;
  } else if (par == "pipeline") {
    m.parallelism = Parallelism::kPipeline;
  } else if (par == "embedding") {
    m.parallelism = Parallelism::kEmbedding;
  } else {
    return ErrorAt(n.Get("parallelism"), ChildPath(path, "parallelism"),
                   "must be data, pipeline or embedding (got '" + par + "')");
  }
  double grad = 0;
  double act = 0;
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "gradient_bytes",
                                          m.parallelism == Parallelism::kData,
                                          textio::RealRange::Closed(0, 1e15), &grad));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "activation_bytes",
                                          m.parallelism != Parallelism::kData,
                                          textio::RealRange::Closed(0, 1e15), &act));
  m.gradient_bytes = core::Bytes::FromDouble(grad);
  m.activation_bytes = core::Bytes::FromDouble(act);
  const char* used = m.parallelism == Parallelism::kData ? "gradient_bytes" : "activation_bytes";
  if (m.pattern_bytes().count() < 1) {
    return ErrorAt(n.Get(used), ChildPath(path, used),
                   "must be >= 1 byte for parallelism '" + par + "'");
  }
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "overlap_start", true,
                                          textio::RealRange::Closed(0, 1), &m.overlap_start));
  int64_t min_gpus = 1;
  int64_t max_gpus = 1 << 20;
  CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, "min_gpus", false,
                                             textio::IntRange::Closed(1, 1 << 20), &min_gpus));
  CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, "max_gpus", false,
                                             textio::IntRange::Closed(1, 1 << 20), &max_gpus));
  if (!IsPowerOfTwo(min_gpus)) {
    return ErrorAt(n.Get("min_gpus"), ChildPath(path, "min_gpus"), "must be a power of two");
  }
  if (!IsPowerOfTwo(max_gpus)) {
    return ErrorAt(n.Get("max_gpus"), ChildPath(path, "max_gpus"), "must be a power of two");
  }
  if (min_gpus > max_gpus) {
    return ErrorAt(n.Get("max_gpus"), ChildPath(path, "max_gpus"),
                   "must be >= min_gpus (" + std::to_string(min_gpus) + ")");
  }
  m.min_gpus = static_cast<int>(min_gpus);
  m.max_gpus = static_cast<int>(max_gpus);

  const std::string spath = ChildPath(path, "sources");
  if (!n.Has("sources")) return textio::MissingKey(n, path, "sources");
  const textio::YamlNode& src = n.Get("sources");
  CRUX_RETURN_IF_ERROR(textio::CheckMap(
      src, spath, {"compute_time_s", "gradient_bytes", "activation_bytes", "overlap_start"}));
  std::vector<std::string> required = {"compute_time_s", "overlap_start"};
  if (m.gradient_bytes.count() > 0) required.push_back("gradient_bytes");
  if (m.activation_bytes.count() > 0) required.push_back("activation_bytes");
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
