#include "crux/spec/jobs_spec.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crux/core/ids.h"
#include "file_util.h"
#include "yaml_reader.h"

namespace crux::spec {
namespace {

using core::Result;
using core::Status;
using internal::Bound;
using internal::Child;
using internal::Element;
using internal::ErrorAt;
using internal::Get;
using internal::Has;

constexpr const char* kJobsPath = "jobs";

// Bytes: a plain integer (exact) or a finite float rounded to the nearest byte; >= 1 byte.
Result<core::Bytes> ReadBytes(const YAML::Node& node, const std::string& path) {
  Result<int64_t> as_int = internal::AsInteger(node, path);
  if (as_int.ok()) {
    if (*as_int <= 0) return ErrorAt(node, path, "must be > 0 (got " + node.Scalar() + ")");
    return core::Bytes::Of(*as_int);
  }
  CRUX_ASSIGN_OR_RETURN(double v, internal::AsBoundedNumber(node, path, Bound::kPositive));
  if (!(v < 9.2e18)) return ErrorAt(node, path, "too large (got " + node.Scalar() + ")");
  core::Bytes b = core::Bytes::FromDouble(v);
  if (b.count() < 1) {
    return ErrorAt(node, path, "must be at least 1 byte (got " + node.Scalar() + ")");
  }
  return b;
}

// A node name that must be a kHost node.
Result<core::NodeId> ReadHost(const YAML::Node& node, const std::string& path,
                              const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(std::string name, internal::AsString(node, path));
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
Result<core::NodeId> ReadEndpoint(const YAML::Node& node, const std::string& path,
                                  const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(std::string name, internal::AsString(node, path));
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

Result<double> RequiredNumber(const YAML::Node& map, const std::string& path, const char* key,
                              Bound bound) {
  if (!Has(map, key)) return internal::MissingKey(map, path, key);
  return internal::AsBoundedNumber(Get(map, key), Child(path, key), bound);
}

Status ReadTraffic(const YAML::Node& node, const std::string& path, core::JobSpec* job) {
  CRUX_RETURN_IF_ERROR(internal::CheckMap(node, path, {"pattern", "bytes"}));
  if (!Has(node, "pattern")) return internal::MissingKey(node, path, "pattern");
  if (!Has(node, "bytes")) return internal::MissingKey(node, path, "bytes");
  const YAML::Node pattern_node = Get(node, "pattern");
  CRUX_ASSIGN_OR_RETURN(std::string pattern,
                        internal::AsString(pattern_node, Child(path, "pattern")));
  if (pattern == "ring_allreduce") {
    job->pattern = core::TrafficPattern::kRingAllReduce;
  } else if (pattern == "all_to_all") {
    job->pattern = core::TrafficPattern::kAllToAll;
  } else if (pattern == "pipeline") {
    job->pattern = core::TrafficPattern::kPipeline;
  } else {
    return ErrorAt(pattern_node, Child(path, "pattern"),
                   "unknown pattern '" + pattern +
                       "' (expected ring_allreduce, all_to_all or pipeline; use flows: for "
                       "explicit traffic)");
  }
  CRUX_ASSIGN_OR_RETURN(job->pattern_bytes, ReadBytes(Get(node, "bytes"), Child(path, "bytes")));
  return Status::Ok();
}

Status ReadFlows(const YAML::Node& node, const std::string& path, const core::Topology& topo,
                 core::JobSpec* job) {
  CRUX_RETURN_IF_ERROR(internal::CheckSequence(node, path));
  if (node.size() == 0) return ErrorAt(node, path, "must list at least one flow");
  job->pattern = core::TrafficPattern::kExplicit;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node f = node[i];
    const std::string fpath = Element(path, i);
    CRUX_RETURN_IF_ERROR(internal::CheckMap(f, fpath, {"src", "dst", "bytes"}));
    for (const char* key : {"src", "dst", "bytes"}) {
      if (!Has(f, key)) return internal::MissingKey(f, fpath, key);
    }
    core::FlowDemand flow;
    CRUX_ASSIGN_OR_RETURN(flow.src, ReadEndpoint(Get(f, "src"), Child(fpath, "src"), topo));
    CRUX_ASSIGN_OR_RETURN(flow.dst, ReadEndpoint(Get(f, "dst"), Child(fpath, "dst"), topo));
    if (flow.src == flow.dst) {
      return ErrorAt(Get(f, "dst"), Child(fpath, "dst"),
                     "must differ from src ('" + topo.node(flow.src).name + "')");
    }
    CRUX_ASSIGN_OR_RETURN(flow.bytes, ReadBytes(Get(f, "bytes"), Child(fpath, "bytes")));
    job->flows.push_back(flow);
  }
  return Status::Ok();
}

Result<JobEntry> ReadJob(const YAML::Node& node, const std::string& path,
                         const core::Topology& topo) {
  CRUX_RETURN_IF_ERROR(
      internal::CheckMap(node, path,
                         {"id", "hosts", "gpus_per_host", "compute_time_s", "flops_per_iteration",
                          "overlap_start", "compression_ratio", "traffic", "flows", "arrival_s",
                          "duration_s", "iterations", "fixed_rank"}));
  JobEntry entry;
  core::JobSpec& job = entry.spec;

  if (!Has(node, "id")) return internal::MissingKey(node, path, "id");
  const YAML::Node id_node = Get(node, "id");
  CRUX_ASSIGN_OR_RETURN(job.id, internal::AsString(id_node, Child(path, "id")));
  if (job.id.empty()) return ErrorAt(id_node, Child(path, "id"), "must not be empty");
  if (!core::IsValidName(job.id)) {
    return ErrorAt(id_node, Child(path, "id"),
                   "invalid job id " + core::QuoteName(job.id) +
                       " (allowed: " + std::string(core::kNameRule) + ")");
  }

  if (!Has(node, "hosts")) return internal::MissingKey(node, path, "hosts");
  const YAML::Node hosts = Get(node, "hosts");
  const std::string hosts_path = Child(path, "hosts");
  CRUX_RETURN_IF_ERROR(internal::CheckSequence(hosts, hosts_path));
  if (hosts.size() == 0) return ErrorAt(hosts, hosts_path, "must list at least one host");
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string hpath = Element(hosts_path, i);
    CRUX_ASSIGN_OR_RETURN(core::NodeId host, ReadHost(hosts[i], hpath, topo));
    for (size_t j = 0; j < job.hosts.size(); ++j) {
      if (job.hosts[j] == host) {
        return ErrorAt(hosts[i], hpath,
                       "duplicate host '" + topo.node(host).name + "' (also at " +
                           Element(hosts_path, j) + ")");
      }
    }
    job.hosts.push_back(host);
  }

  CRUX_RETURN_IF_ERROR(internal::OptionalInt(node, path, "gpus_per_host", 1, &job.gpus_per_host));

  CRUX_ASSIGN_OR_RETURN(double compute_s,
                        RequiredNumber(node, path, "compute_time_s", Bound::kPositive));
  job.compute_time = core::Duration::Seconds(compute_s);
  if (job.compute_time <= core::Duration::Zero() || job.compute_time.IsInfinite()) {
    const YAML::Node& n = Get(node, "compute_time_s");
    return ErrorAt(n, Child(path, "compute_time_s"),
                   "must be between 1 ns and 292 years (got " + n.Scalar() + ")");
  }

  if (Has(node, "flops_per_iteration")) {
    CRUX_ASSIGN_OR_RETURN(double flops, internal::AsBoundedNumber(
                                            Get(node, "flops_per_iteration"),
                                            Child(path, "flops_per_iteration"), Bound::kPositive));
    job.flops_per_iteration = core::Flops::Of(flops);
  }

  CRUX_RETURN_IF_ERROR(
      internal::OptionalNumber(node, path, "overlap_start", Bound::kAny, &job.overlap_start));
  if (job.overlap_start < 0 || job.overlap_start > 1) {
    const YAML::Node& n = Get(node, "overlap_start");
    return ErrorAt(n, Child(path, "overlap_start"), "must be in [0, 1] (got " + n.Scalar() + ")");
  }
  CRUX_RETURN_IF_ERROR(internal::OptionalNumber(node, path, "compression_ratio", Bound::kPositive,
                                                &job.compression_ratio));
  if (job.compression_ratio > 1e3) {
    const YAML::Node& n = Get(node, "compression_ratio");
    return ErrorAt(n, Child(path, "compression_ratio"),
                   "must be in (0, 1000] (got " + n.Scalar() + ")");
  }

  const bool has_traffic = Has(node, "traffic");
  const bool has_flows = Has(node, "flows");
  if (has_traffic && has_flows) {
    return ErrorAt(Get(node, "flows"), Child(path, "flows"),
                   "give either traffic or flows, not both");
  }
  if (!has_traffic && !has_flows) {
    return ErrorAt(node, Child(path, "traffic"),
                   "missing required key (a job needs traffic: {pattern, bytes} or flows: [...])");
  }
  if (has_traffic) {
    CRUX_RETURN_IF_ERROR(ReadTraffic(Get(node, "traffic"), Child(path, "traffic"), &job));
  } else {
    CRUX_RETURN_IF_ERROR(ReadFlows(Get(node, "flows"), Child(path, "flows"), topo, &job));
  }

  if (Has(node, "arrival_s")) {
    CRUX_ASSIGN_OR_RETURN(
        entry.arrival_s, internal::AsBoundedNumber(Get(node, "arrival_s"), Child(path, "arrival_s"),
                                                   Bound::kNonNegative));
  }
  if (Has(node, "duration_s")) {
    CRUX_ASSIGN_OR_RETURN(entry.duration_s,
                          internal::AsBoundedNumber(Get(node, "duration_s"),
                                                    Child(path, "duration_s"), Bound::kPositive));
  }
  if (Has(node, "iterations")) {
    CRUX_ASSIGN_OR_RETURN(
        entry.iterations,
        internal::AsBoundedInteger(Get(node, "iterations"), Child(path, "iterations"), 1));
  }
  if (Has(node, "fixed_rank")) {
    int rank = 0;
    CRUX_RETURN_IF_ERROR(internal::OptionalInt(node, path, "fixed_rank", 0, &rank));
    entry.fixed_rank = rank;
    entry.spec.fixed_rank = rank;
  }
  return entry;
}

Result<std::vector<JobEntry>> ParseJobsImpl(std::string_view yaml, const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(YAML::Node root, internal::LoadYaml(yaml));
  if (root.IsNull() || !root.IsDefined()) {
    return core::InvalidArgumentError(std::string(kJobsPath) +
                                      ": missing required key (empty document)");
  }
  CRUX_RETURN_IF_ERROR(internal::CheckMap(root, "", {"jobs"}));
  if (!Has(root, "jobs")) return internal::MissingKey(root, "", "jobs");
  const YAML::Node jobs = Get(root, "jobs");
  CRUX_RETURN_IF_ERROR(internal::CheckSequence(jobs, kJobsPath));

  std::vector<JobEntry> out;
  std::map<std::string, size_t> first_index;  // Job id -> index of its first definition.
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string path = Element(kJobsPath, i);
    CRUX_ASSIGN_OR_RETURN(JobEntry entry, ReadJob(jobs[i], path, topo));
    auto [it, inserted] = first_index.emplace(entry.spec.id, i);
    if (!inserted) {
      return ErrorAt(Get(jobs[i], "id"), Child(path, "id"),
                     "duplicate job id '" + entry.spec.id + "' (first at " +
                         Element(kJobsPath, it->second) + ")",
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
  } catch (const YAML::Exception& e) {
    return core::InvalidArgumentError(std::string(kJobsPath) + ": " + e.what());
  } catch (const std::exception& e) {
    return core::InternalError(std::string(kJobsPath) + ": unexpected error: " + e.what());
  }
}

Result<std::vector<JobEntry>> LoadJobsFile(const std::string& path, const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(std::string text, internal::ReadTextFile(path));
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
