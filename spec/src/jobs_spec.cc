#include "crux/spec/jobs_spec.h"

#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/textio/file.h"
#include "crux/textio/yaml.h"

namespace crux::spec {
namespace {

using core::Result;
using core::Status;
using textio::ChildPath;
using textio::ElementPath;
using textio::ErrorAt;

// An optional int key of at least `min`.
Status OptionalInt(const textio::YamlNode& map, const std::string& path, std::string_view key,
                   int min, int* out) {
  return textio::OptionalInteger(map, path, key, textio::IntRange::AtLeast(min), out);
}

constexpr const char* kJobsPath = "jobs";

// Bytes: a plain integer (exact) or a finite float rounded to the nearest byte; >= 1 byte.
Result<core::Bytes> ReadBytes(const textio::YamlNode& node, const std::string& path) {
  Result<int64_t> as_int = textio::AsInteger(node, path);
  if (as_int.ok()) {
    if (*as_int <= 0) return ErrorAt(node, path, "must be > 0 (got " + node.scalar() + ")");
    return core::Bytes::Of(*as_int);
  }
  CRUX_ASSIGN_OR_RETURN(double v, textio::AsBoundedReal(node, path, textio::RealRange::Positive()));
  if (!(v < 9.2e18)) return ErrorAt(node, path, "too large (got " + node.scalar() + ")");
  core::Bytes b = core::Bytes::FromDouble(v);
  if (b.count() < 1) {
    return ErrorAt(node, path, "must be at least 1 byte (got " + node.scalar() + ")");
  }
  return b;
}

// A node name that must be a kHost node.
Result<core::NodeId> ReadHost(const textio::YamlNode& node, const std::string& path,
                              const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(std::string name, textio::AsString(node, path));
  Result<core::NodeId> id = topo.FindNode(name);
  if (!id.ok()) {
    return ErrorAt(node, path, "unknown host " + core::QuoteName(name),
                   core::StatusCode::kNotFound);
  }
  const core::Node& n = topo.node(*id);
  if (n.kind != core::NodeKind::kHost) {
    return ErrorAt(
        node, path,
        "'" + name + "' is not a host (it is a " + std::string(core::NodeKindName(n.kind)) + ")");
  }
  return *id;
}

// A flow endpoint: a NIC or a host.
Result<core::NodeId> ReadEndpoint(const textio::YamlNode& node, const std::string& path,
                                  const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(std::string name, textio::AsString(node, path));
  Result<core::NodeId> id = topo.FindNode(name);
  if (!id.ok()) {
    return ErrorAt(node, path, "unknown node " + core::QuoteName(name),
                   core::StatusCode::kNotFound);
  }
  const core::Node& n = topo.node(*id);
  if (n.kind != core::NodeKind::kHost && n.kind != core::NodeKind::kNic) {
    return ErrorAt(node, path,
                   "'" + name + "' must be a NIC or a host (it is a " +
                       std::string(core::NodeKindName(n.kind)) + ")");
  }
  return *id;
}

Result<double> RequiredNumber(const textio::YamlNode& map, const std::string& path, const char* key,
                              textio::RealRange bound) {
  if (!map.Has(key)) return textio::MissingKey(map, path, key);
  return textio::AsBoundedReal(map.Get(key), ChildPath(path, key), bound);
}

Status ReadTraffic(const textio::YamlNode& node, const std::string& path, core::JobSpec* job) {
  CRUX_RETURN_IF_ERROR(textio::CheckMap(node, path, {"pattern", "bytes"}));
  if (!node.Has("pattern")) return textio::MissingKey(node, path, "pattern");
  if (!node.Has("bytes")) return textio::MissingKey(node, path, "bytes");
  const textio::YamlNode& pattern_node = node.Get("pattern");
  CRUX_ASSIGN_OR_RETURN(std::string pattern,
                        textio::AsString(pattern_node, ChildPath(path, "pattern")));
  if (pattern == "ring_allreduce") {
    job->pattern = core::TrafficPattern::kRingAllReduce;
  } else if (pattern == "all_to_all") {
    job->pattern = core::TrafficPattern::kAllToAll;
  } else if (pattern == "pipeline") {
    job->pattern = core::TrafficPattern::kPipeline;
  } else {
    return ErrorAt(pattern_node, ChildPath(path, "pattern"),
                   "unknown pattern '" + pattern +
                       "' (expected ring_allreduce, all_to_all or pipeline; use flows: for "
                       "explicit traffic)");
  }
  CRUX_ASSIGN_OR_RETURN(job->pattern_bytes, ReadBytes(node.Get("bytes"), ChildPath(path, "bytes")));
  return Status::Ok();
}

Status ReadFlows(const textio::YamlNode& node, const std::string& path, const core::Topology& topo,
                 core::JobSpec* job) {
  CRUX_RETURN_IF_ERROR(textio::CheckSequence(node, path));
  if (node.size() == 0) return ErrorAt(node, path, "must list at least one flow");
  job->pattern = core::TrafficPattern::kExplicit;
  for (size_t i = 0; i < node.size(); ++i) {
    const textio::YamlNode& f = node.item(i);
    const std::string fpath = ElementPath(path, i);
    CRUX_RETURN_IF_ERROR(textio::CheckMap(f, fpath, {"src", "dst", "bytes"}));
    for (const char* key : {"src", "dst", "bytes"}) {
      if (!f.Has(key)) return textio::MissingKey(f, fpath, key);
    }
    core::FlowDemand flow;
    CRUX_ASSIGN_OR_RETURN(flow.src, ReadEndpoint(f.Get("src"), ChildPath(fpath, "src"), topo));
    CRUX_ASSIGN_OR_RETURN(flow.dst, ReadEndpoint(f.Get("dst"), ChildPath(fpath, "dst"), topo));
    if (flow.src == flow.dst) {
      return ErrorAt(f.Get("dst"), ChildPath(fpath, "dst"),
                     "must differ from src ('" + topo.node(flow.src).name + "')");
    }
    CRUX_ASSIGN_OR_RETURN(flow.bytes, ReadBytes(f.Get("bytes"), ChildPath(fpath, "bytes")));
    job->flows.push_back(flow);
  }
  return Status::Ok();
}

Result<JobEntry> ReadJob(const textio::YamlNode& node, const std::string& path,
                         const core::Topology& topo) {
  CRUX_RETURN_IF_ERROR(
      textio::CheckMap(node, path,
                       {"id", "hosts", "gpus_per_host", "compute_time_s", "flops_per_iteration",
                        "overlap_start", "compression_ratio", "traffic", "flows", "arrival_s",
                        "duration_s", "iterations", "fixed_rank"}));
  JobEntry entry;
  core::JobSpec& job = entry.spec;

  if (!node.Has("id")) return textio::MissingKey(node, path, "id");
  const textio::YamlNode& id_node = node.Get("id");
  CRUX_ASSIGN_OR_RETURN(job.id, textio::AsString(id_node, ChildPath(path, "id")));
  if (job.id.empty()) return ErrorAt(id_node, ChildPath(path, "id"), "must not be empty");
  if (!core::IsValidName(job.id)) {
    return ErrorAt(id_node, ChildPath(path, "id"),
                   "invalid job id " + core::QuoteName(job.id) +
                       " (allowed: " + std::string(core::kNameRule) + ")");
  }

  if (!node.Has("hosts")) return textio::MissingKey(node, path, "hosts");
  const textio::YamlNode& hosts = node.Get("hosts");
  const std::string hosts_path = ChildPath(path, "hosts");
  CRUX_RETURN_IF_ERROR(textio::CheckSequence(hosts, hosts_path));
  if (hosts.size() == 0) return ErrorAt(hosts, hosts_path, "must list at least one host");
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string hpath = ElementPath(hosts_path, i);
    CRUX_ASSIGN_OR_RETURN(core::NodeId host, ReadHost(hosts.item(i), hpath, topo));
    for (size_t j = 0; j < job.hosts.size(); ++j) {
      if (job.hosts[j] == host) {
        return ErrorAt(hosts.item(i), hpath,
                       "duplicate host '" + topo.node(host).name + "' (also at " +
                           ElementPath(hosts_path, j) + ")");
      }
    }
    job.hosts.push_back(host);
  }

  CRUX_RETURN_IF_ERROR(OptionalInt(node, path, "gpus_per_host", 1, &job.gpus_per_host));

  CRUX_ASSIGN_OR_RETURN(double compute_s, RequiredNumber(node, path, "compute_time_s",
                                                         textio::RealRange::Positive()));
  job.compute_time = core::Duration::Seconds(compute_s);
  if (job.compute_time <= core::Duration::Zero() || job.compute_time.IsInfinite()) {
    const textio::YamlNode& n = node.Get("compute_time_s");
    return ErrorAt(n, ChildPath(path, "compute_time_s"),
                   "must be between 1 ns and 292 years (got " + n.scalar() + ")");
  }

  if (node.Has("flops_per_iteration")) {
    CRUX_ASSIGN_OR_RETURN(double flops,
                          textio::AsBoundedReal(node.Get("flops_per_iteration"),
                                                ChildPath(path, "flops_per_iteration"),
                                                textio::RealRange::Positive()));
    job.flops_per_iteration = core::Flops::Of(flops);
  }

  CRUX_RETURN_IF_ERROR(OptionalReal(node, path, "overlap_start", textio::RealRange::Closed(0, 1),
                                    &job.overlap_start));
  CRUX_RETURN_IF_ERROR(OptionalReal(node, path, "compression_ratio", textio::RealRange::Positive(),
                                    &job.compression_ratio));
  if (job.compression_ratio > 1e3) {
    const textio::YamlNode& n = node.Get("compression_ratio");
    return ErrorAt(n, ChildPath(path, "compression_ratio"),
                   "must be in (0, 1000] (got " + n.scalar() + ")");
  }

  const bool has_traffic = node.Has("traffic");
  const bool has_flows = node.Has("flows");
  if (has_traffic && has_flows) {
    return ErrorAt(node.Get("flows"), ChildPath(path, "flows"),
                   "give either traffic or flows, not both");
  }
  if (!has_traffic && !has_flows) {
    return ErrorAt(node, ChildPath(path, "traffic"),
                   "missing required key (a job needs traffic: {pattern, bytes} or flows: [...])");
  }
  if (has_traffic) {
    CRUX_RETURN_IF_ERROR(ReadTraffic(node.Get("traffic"), ChildPath(path, "traffic"), &job));
  } else {
    CRUX_RETURN_IF_ERROR(ReadFlows(node.Get("flows"), ChildPath(path, "flows"), topo, &job));
  }

  if (node.Has("arrival_s")) {
    CRUX_ASSIGN_OR_RETURN(entry.arrival_s,
                          textio::AsBoundedReal(node.Get("arrival_s"), ChildPath(path, "arrival_s"),
                                                textio::RealRange::NonNegative()));
  }
  if (node.Has("duration_s")) {
    CRUX_ASSIGN_OR_RETURN(entry.duration_s, textio::AsBoundedReal(node.Get("duration_s"),
                                                                  ChildPath(path, "duration_s"),
                                                                  textio::RealRange::Positive()));
  }
  if (node.Has("iterations")) {
    CRUX_ASSIGN_OR_RETURN(entry.iterations, textio::AsBoundedInteger(node.Get("iterations"),
                                                                     ChildPath(path, "iterations"),
                                                                     textio::IntRange::AtLeast(1)));
  }
  if (node.Has("fixed_rank")) {
    int rank = 0;
    CRUX_RETURN_IF_ERROR(OptionalInt(node, path, "fixed_rank", 0, &rank));
    entry.fixed_rank = rank;
    entry.spec.fixed_rank = rank;
  }
  return entry;
}

Result<std::vector<JobEntry>> ParseJobsImpl(std::string_view yaml, const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(const textio::YamlNode root, textio::ParseYaml(yaml));
  if (root.IsNull()) {
    return core::InvalidArgumentError(std::string(kJobsPath) +
                                      ": missing required key (empty document)");
  }
  CRUX_RETURN_IF_ERROR(textio::CheckMap(root, "", {"jobs"}));
  if (!root.Has("jobs")) return textio::MissingKey(root, "", "jobs");
  const textio::YamlNode& jobs = root.Get("jobs");
  CRUX_RETURN_IF_ERROR(textio::CheckSequence(jobs, kJobsPath));

  std::vector<JobEntry> out;
  std::map<std::string, size_t> first_index;  // Job id -> index of its first definition.
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string path = ElementPath(kJobsPath, i);
    CRUX_ASSIGN_OR_RETURN(JobEntry entry, ReadJob(jobs.item(i), path, topo));
    auto [it, inserted] = first_index.emplace(entry.spec.id, i);
    if (!inserted) {
      return ErrorAt(jobs.item(i).Get("id"), ChildPath(path, "id"),
                     "duplicate job id '" + entry.spec.id + "' (first at " +
                         ElementPath(kJobsPath, it->second) + ")",
                     core::StatusCode::kAlreadyExists);
    }
    Status valid = core::ValidateJob(topo, entry.spec);
    if (!valid.ok()) return valid.WithContext(path);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

Result<std::vector<JobEntry>> ParseJobs(std::string_view yaml, const core::Topology& topo) {
  try {
    return ParseJobsImpl(yaml, topo);
  } catch (const std::exception& e) {
    return core::InternalError(std::string(kJobsPath) + ": unexpected error: " + e.what());
  }
}

Result<std::vector<JobEntry>> LoadJobsFile(const std::string& path, const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(std::string text, textio::ReadTextFile(path));
  Result<std::vector<JobEntry>> jobs = ParseJobs(text, topo);
  if (!jobs.ok()) return jobs.status().WithContext(path);
  return jobs;
}

std::vector<core::JobSpec> JobSpecs(const std::vector<JobEntry>& entries) {
  std::vector<core::JobSpec> specs;
  specs.reserve(entries.size());
  for (const JobEntry& e : entries) specs.push_back(e.spec);
  return specs;
}

}  // namespace crux::spec
