#include "crux/daemon/state/part_profiles.h"

#include <memory>
#include <utility>
#include <vector>

namespace crux::daemon {

void PartProfiles::Set(const std::string& job_id, core::NodeId host, core::HostPartReport report,
                       int64_t unix_ms) {
  jobs_[job_id].reports[host] = {std::move(report), unix_ms};
}

void PartProfiles::Erase(const std::string& job_id, core::NodeId host) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  it->second.reports.erase(host);
}

void PartProfiles::EraseJob(const std::string& job_id) { jobs_.erase(job_id); }

const std::map<core::NodeId, PartReportEntry>* PartProfiles::Of(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second.reports;
}

const PartReportEntry* PartProfiles::Find(const std::string& job_id, core::NodeId host) const {
  const auto* reports = Of(job_id);
  if (reports == nullptr) return nullptr;
  auto it = reports->find(host);
  return it == reports->end() ? nullptr : &it->second;
}

core::HostPartMerge PartProfiles::Merge(const JobSession& j, const core::Topology& topo) {
  JobParts& parts = jobs_[j.demand.id];
  std::vector<core::HostPartInput> inputs;
  inputs.reserve(j.parts.size());
  for (const auto& [host, part] : j.parts) {
    core::HostPartInput in;
    in.host = host;
    in.nics = core::PartNics(topo, part.placement);
    in.hosts_expected = part.info.hosts_expected;
    in.gpus = static_cast<uint32_t>(topo.host_gpus(host));
    auto r = parts.reports.find(host);
    if (r != parts.reports.end()) in.report = &r->second.report;
    inputs.push_back(std::move(in));
  }
  core::HostPartMerge merged = core::MergeHostParts(inputs);
  parts.stats = merged.stats;
  return merged;
}

const core::HostPartMergeStats* PartProfiles::LastStats(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !it->second.stats) return nullptr;
  return &*it->second.stats;
}

core::AppliedAssignment PartAssignment(const core::AppliedAssignment& a, const core::Topology& topo,
                                       core::NodeId host) {
  core::AppliedAssignment out;
  out.epoch = a.epoch;
  out.assignment = std::move(core::SplitAssignmentByHost(a.assignment, topo, {host})[host]);
  return out;
}

std::vector<PartCut> PartAssignments(const JobSession& j, const core::AppliedAssignment& a,
                                     const core::Topology& topo) {
  std::vector<core::NodeId> hosts;
  hosts.reserve(j.parts.size());
  for (const auto& [host, part] : j.parts) {
    if (!part.peer.empty()) hosts.push_back(host);
  }
  std::map<core::NodeId, core::Assignment> cuts =
      core::SplitAssignmentByHost(a.assignment, topo, hosts);
  std::vector<PartCut> out;
  out.reserve(hosts.size());
  for (core::NodeId host : hosts) {
    auto cut = std::make_shared<core::AppliedAssignment>();
    cut->epoch = a.epoch;
    cut->assignment = std::move(cuts[host]);
    const PartSession& part = j.parts.at(host);
    out.push_back({part.peer, std::move(cut), part.accepts_batches});
  }
  return out;
}

}  // namespace crux::daemon
