#include "crux/sim/workload/scenario.h"

#include <algorithm>
#include <filesystem>

#include "crux/core/policy.h"
#include "crux/sim/workload/file_io.h"
#include "text_checks.h"
#include "yaml_util.h"

namespace crux::sim::workload {

using core::Result;
using core::Status;
using internal::Child;
using internal::ErrorAt;
using internal::Get;
using internal::Has;

namespace {

std::string Resolve(const std::string& base_dir, const std::string& p) {
  const std::filesystem::path path(p);
  if (path.is_absolute() || base_dir.empty()) return path.lexically_normal().string();
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

Status ParseGenerate(const YAML::Node& n, const std::string& path, Scenario* s) {
  CRUX_RETURN_IF_ERROR(
      internal::CheckMap(n, path,
                         {"seed", "days", "mean_interarrival_s", "median_duration_s",
                          "duration_sigma", "place", "load", "scatter"}));
  GeneratorOptions g;
  int64_t seed = static_cast<int64_t>(g.seed);
  CRUX_RETURN_IF_ERROR(internal::ReadInt(n, path, "seed", false, 0, INT64_MAX, &seed));
  g.seed = static_cast<uint64_t>(seed);
  CRUX_RETURN_IF_ERROR(internal::ReadNumber(n, path, "days", false, 0, true, 3650, &g.days));
  CRUX_RETURN_IF_ERROR(internal::ReadNumber(n, path, "mean_interarrival_s", false, 0, true, 1e9,
                                            &g.mean_interarrival_s));
  CRUX_RETURN_IF_ERROR(internal::ReadNumber(n, path, "median_duration_s", false, 0, true, 1e9,
                                            &g.median_duration_s));
  CRUX_RETURN_IF_ERROR(
      internal::ReadNumber(n, path, "duration_sigma", false, 0, false, 10, &g.duration_sigma));
  CRUX_RETURN_IF_ERROR(internal::ReadBool(n, path, "place", &s->generate_place));
  CRUX_RETURN_IF_ERROR(
      internal::ReadNumber(n, path, "scatter", false, 0, false, 1, &g.scatter_probability));
  if (Has(n, "load")) {
    double load = 1;
    CRUX_RETURN_IF_ERROR(internal::ReadNumber(n, path, "load", true, 0, true, 4, &load));
    if (!s->generate_place) {
      return ErrorAt(n, path + ".load", "needs place: true (the load is relative to the topology)");
    }
    if (Has(n, "mean_interarrival_s")) {
      return ErrorAt(n, path + ".load", "give load or mean_interarrival_s, not both");
    }
    s->generate_load = load;
  }
  s->generate = g;
  return Status::Ok();
}

}  // namespace

Result<Scenario> ParseScenario(std::string_view yaml, const std::string& base_dir) {
  CRUX_ASSIGN_OR_RETURN(const YAML::Node doc, internal::ParseDocument(yaml));
  try {
    CRUX_RETURN_IF_ERROR(internal::CheckMap(doc, "", {"scenario"}));
    if (!Has(doc, "scenario")) return ErrorAt(doc, "scenario", "required key is missing");
    const YAML::Node n = Get(doc, "scenario");
    const std::string path = "scenario";
    CRUX_RETURN_IF_ERROR(internal::CheckMap(
        n, path,
        {"description", "topology", "jobs", "trace", "generate", "models", "policies", "levels",
         "seed", "horizon_s", "fast_forward", "gpus_per_host", "link_events"}));
    Scenario s;
    CRUX_RETURN_IF_ERROR(internal::ReadString(n, path, "description", false, &s.description));
    CRUX_RETURN_IF_ERROR(internal::ReadString(n, path, "topology", true, &s.topology_path));
    s.topology_path = Resolve(base_dir, s.topology_path);
    const int sources = static_cast<int>(Has(n, "jobs")) + static_cast<int>(Has(n, "trace")) +
                        static_cast<int>(Has(n, "generate"));
    if (sources != 1) {
      return ErrorAt(n, path, "exactly one of jobs, trace and generate is required");
    }
    CRUX_RETURN_IF_ERROR(internal::ReadString(n, path, "jobs", false, &s.jobs_path));
    if (!s.jobs_path.empty()) s.jobs_path = Resolve(base_dir, s.jobs_path);
    CRUX_RETURN_IF_ERROR(internal::ReadString(n, path, "trace", false, &s.trace_path));
    if (!s.trace_path.empty()) s.trace_path = Resolve(base_dir, s.trace_path);
    if (Has(n, "generate")) {
      CRUX_RETURN_IF_ERROR(ParseGenerate(Get(n, "generate"), Child(path, "generate"), &s));
    }
    s.models_path = "../models.yaml";
    CRUX_RETURN_IF_ERROR(internal::ReadString(n, path, "models", false, &s.models_path));
    s.models_path = Resolve(base_dir, s.models_path);
    CRUX_RETURN_IF_ERROR(internal::ReadString(n, path, "link_events", false, &s.link_events_path));
    if (!s.link_events_path.empty()) s.link_events_path = Resolve(base_dir, s.link_events_path);
    if (Has(n, "policies")) {
      const YAML::Node list = Get(n, "policies");
      const std::string lp = Child(path, "policies");
      if (!list.IsSequence() || list.size() == 0)
        return ErrorAt(list, lp, "must be a non-empty list");
      const std::vector<std::string>& known = core::PolicyNames();
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string ip = internal::Index(lp, i);
        if (!list[i].IsScalar() || list[i].Scalar().empty()) {
          return ErrorAt(list[i], ip, "must be a policy name");
        }
        const std::string& name = list[i].Scalar();
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          std::string names;
          for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
          return ErrorAt(list[i], ip,
                         "unknown policy " + internal::Shown(name) + " (known: " + names + ")");
        }
        if (std::find(s.policies.begin(), s.policies.end(), name) != s.policies.end()) {
          return ErrorAt(list[i], ip, "policy '" + name + "' is listed twice");
        }
        s.policies.push_back(name);
      }
    }
    int64_t v = 0;
    if (Has(n, "levels")) {
      CRUX_RETURN_IF_ERROR(internal::ReadInt(n, path, "levels", true, 1, 64, &v));
      s.levels = static_cast<int>(v);
    }
    if (Has(n, "seed")) {
      CRUX_RETURN_IF_ERROR(internal::ReadInt(n, path, "seed", true, 0, INT64_MAX, &v));
      s.seed = static_cast<uint64_t>(v);
    }
    if (Has(n, "horizon_s")) {
      double h = 0;
      CRUX_RETURN_IF_ERROR(internal::ReadNumber(n, path, "horizon_s", true, 0, true, 1e9, &h));
      s.horizon_s = h;
    }
    if (Has(n, "fast_forward")) {
      bool ff = true;
      CRUX_RETURN_IF_ERROR(internal::ReadBool(n, path, "fast_forward", &ff));
      s.fast_forward = ff;
    }
    if (Has(n, "gpus_per_host")) {
      CRUX_RETURN_IF_ERROR(internal::ReadInt(n, path, "gpus_per_host", true, 1, 1024, &v));
      s.gpus_per_host = static_cast<int>(v);
    }
    return s;
  } catch (const YAML::Exception& e) {
    return core::InvalidArgumentError(std::string("invalid YAML: ") + e.what());
  }
}

Result<Scenario> LoadScenarioFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  Result<Scenario> r = ParseScenario(text, std::filesystem::path(path).parent_path().string());
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace crux::sim::workload
