#include "crux/sim/workload/scenario.h"

#include <algorithm>

#include "crux/core/policies/policy.h"
#include "crux/textio/file.h"
#include "crux/textio/yaml.h"
#include "text_checks.h"

namespace crux::sim::workload {

using core::Result;
using core::Status;
using textio::ChildPath;
using textio::ErrorAt;

namespace {

Status ParseGenerate(const textio::YamlNode& n, const std::string& path, Scenario* s) {
  CRUX_RETURN_IF_ERROR(
      textio::CheckMap(n, path,
                       {"seed", "days", "mean_interarrival_s", "median_duration_s",
                        "duration_sigma", "place", "load", "scatter", "spill", "share", "mix"}));
  GeneratorOptions g;
  int64_t seed = static_cast<int64_t>(g.seed);
  CRUX_RETURN_IF_ERROR(
      internal::ReadInteger(n, path, "seed", false, textio::IntRange::AtLeast(0), &seed));
  g.seed = static_cast<uint64_t>(seed);
  CRUX_RETURN_IF_ERROR(
      internal::ReadReal(n, path, "days", false, textio::RealRange::AboveAtMost(0, 3650), &g.days));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "mean_interarrival_s", false,
                                          textio::RealRange::AboveAtMost(0, 1e9),
                                          &g.mean_interarrival_s));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "median_duration_s", false,
                                          textio::RealRange::AboveAtMost(0, 1e9),
                                          &g.median_duration_s));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "duration_sigma", false,
                                          textio::RealRange::Closed(0, 10), &g.duration_sigma));
  CRUX_RETURN_IF_ERROR(textio::OptionalBool(n, path, "place", &s->generate_place));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "scatter", false,
                                          textio::RealRange::Closed(0, 1), &g.scatter_probability));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "spill", false, textio::RealRange::Closed(0, 1),
                                          &g.spill_probability));
  CRUX_RETURN_IF_ERROR(internal::ReadReal(n, path, "share", false, textio::RealRange::Closed(0, 1),
                                          &g.share_probability));
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "mix", false, &g.mix));
  const std::vector<std::string> mixes = MixNames();
  if (std::find(mixes.begin(), mixes.end(), g.mix) == mixes.end()) {
    return ErrorAt(
        n.Get("mix"), path + ".mix",
        "unknown mix " + internal::Shown(g.mix) + " (known: " + mixes[0] + ", " + mixes[1] + ")");
  }
  if (n.Has("load")) {
    double load = 1;
    CRUX_RETURN_IF_ERROR(
        internal::ReadReal(n, path, "load", true, textio::RealRange::AboveAtMost(0, 4), &load));
    if (!s->generate_place) {
      return ErrorAt(n, path + ".load", "needs place: true (the load is relative to the topology)");
    }
    if (n.Has("mean_interarrival_s")) {
      return ErrorAt(n, path + ".load", "give load or mean_interarrival_s, not both");
    }
    s->generate_load = load;
  }
  s->generate = g;
  return Status::Ok();
}

}  // namespace

Result<Scenario> ParseScenario(std::string_view yaml, const std::string& base_dir) {
  CRUX_ASSIGN_OR_RETURN(const textio::YamlNode doc, textio::ParseYaml(yaml));
  CRUX_RETURN_IF_ERROR(textio::CheckMap(doc, "", {"scenario"}));
  if (!doc.Has("scenario")) return textio::MissingKey(doc, "", "scenario");
  const textio::YamlNode& n = doc.Get("scenario");
  const std::string path = "scenario";
  CRUX_RETURN_IF_ERROR(textio::CheckMap(
      n, path,
      {"description", "topology", "jobs", "trace", "generate", "models", "policies", "levels",
       "seed", "horizon_s", "fast_forward", "gpus_per_host", "link_events", "oracle", "spray"}));
  Scenario s;
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "description", false, &s.description));
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "topology", true, &s.topology_path));
  s.topology_path = textio::ResolvePath(base_dir, s.topology_path);
  const int sources = static_cast<int>(n.Has("jobs")) + static_cast<int>(n.Has("trace")) +
                      static_cast<int>(n.Has("generate"));
  if (sources != 1) {
    return ErrorAt(n, path, "exactly one of jobs, trace and generate is required");
  }
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "jobs", false, &s.jobs_path));
  if (!s.jobs_path.empty()) s.jobs_path = textio::ResolvePath(base_dir, s.jobs_path);
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "trace", false, &s.trace_path));
  if (!s.trace_path.empty()) s.trace_path = textio::ResolvePath(base_dir, s.trace_path);
  if (n.Has("generate")) {
    CRUX_RETURN_IF_ERROR(ParseGenerate(n.Get("generate"), ChildPath(path, "generate"), &s));
  }
  s.models_path = "../models.yaml";
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "models", false, &s.models_path));
  s.models_path = textio::ResolvePath(base_dir, s.models_path);
  CRUX_RETURN_IF_ERROR(internal::ReadText(n, path, "link_events", false, &s.link_events_path));
  if (!s.link_events_path.empty())
    s.link_events_path = textio::ResolvePath(base_dir, s.link_events_path);
  if (n.Has("policies")) {
    const textio::YamlNode& list = n.Get("policies");
    const std::string lp = ChildPath(path, "policies");
    if (!list.IsSequence() || list.size() == 0)
      return ErrorAt(list, lp, "must be a non-empty list");
    const std::vector<std::string>& known = core::PolicyNames();
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string ip = textio::ElementPath(lp, i);
      if (!list.item(i).IsScalar() || list.item(i).scalar().empty()) {
        return ErrorAt(list.item(i), ip, "must be a policy name");
      }
      const std::string& name = list.item(i).scalar();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string names;
        for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
        return ErrorAt(list.item(i), ip,
                       "unknown policy " + internal::Shown(name) + " (known: " + names + ")");
      }
      if (std::find(s.policies.begin(), s.policies.end(), name) != s.policies.end()) {
        return ErrorAt(list.item(i), ip, "policy '" + name + "' is listed twice");
      }
      s.policies.push_back(name);
    }
  }
  int64_t v = 0;
  if (n.Has("levels")) {
    CRUX_RETURN_IF_ERROR(
        internal::ReadInteger(n, path, "levels", true, textio::IntRange::Closed(1, 64), &v));
    s.levels = static_cast<int>(v);
  }
  if (n.Has("seed")) {
    CRUX_RETURN_IF_ERROR(
        internal::ReadInteger(n, path, "seed", true, textio::IntRange::AtLeast(0), &v));
    s.seed = static_cast<uint64_t>(v);
  }
  if (n.Has("horizon_s")) {
    double h = 0;
    CRUX_RETURN_IF_ERROR(
        internal::ReadReal(n, path, "horizon_s", true, textio::RealRange::AboveAtMost(0, 1e9), &h));
    s.horizon_s = h;
  }
  if (n.Has("fast_forward")) {
    bool ff = true;
    CRUX_RETURN_IF_ERROR(textio::OptionalBool(n, path, "fast_forward", &ff));
    s.fast_forward = ff;
  }
  if (n.Has("oracle")) {
    bool oracle = false;
    CRUX_RETURN_IF_ERROR(textio::OptionalBool(n, path, "oracle", &oracle));
    s.oracle = oracle;
  }
  if (n.Has("spray")) {
    bool spray = false;
    CRUX_RETURN_IF_ERROR(textio::OptionalBool(n, path, "spray", &spray));
    s.spray = spray;
  }
  if (n.Has("gpus_per_host")) {
    CRUX_RETURN_IF_ERROR(internal::ReadInteger(n, path, "gpus_per_host", true,
                                               textio::IntRange::Closed(1, 1024), &v));
    s.gpus_per_host = static_cast<int>(v);
  }
  return s;
}

Result<Scenario> LoadScenarioFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(const std::string text, textio::ReadTextFile(path));
  Result<Scenario> r = ParseScenario(text, textio::DirectoryOf(path));
  if (!r.ok()) return r.status().WithContext(path);
  return r;
}

}  // namespace crux::sim::workload
