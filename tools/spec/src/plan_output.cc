#include "crux/spec/plan_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "crux/core/ecmp.h"

namespace crux::spec {
namespace {

using nlohmann::json;

// JSON has no NaN or infinity: NaN -> 0, +-inf -> +-max.
double Finite(double v) {
  if (std::isnan(v)) return 0.0;
  if (std::isinf(v)) {
    return v > 0 ? std::numeric_limits<double>::max() : std::numeric_limits<double>::lowest();
  }
  return v;
}

json LinkNameOrNull(const core::Topology& topo, core::LinkId link) {
  if (!link.valid() || link.value() >= topo.num_links()) return nullptr;
  return topo.LinkName(link);
}

std::string NodeName(const core::Topology& topo, core::NodeId id) {
  if (!id.valid() || id.value() >= topo.num_nodes()) return "?";
  return topo.node(id).name;
}

json FlowToJson(const core::FlowPlan& f, const core::Topology& topo) {
  json j;
  j["src"] = NodeName(topo, f.src);
  j["dst"] = NodeName(topo, f.dst);
  j["bytes"] = f.bytes.count();
  j["path"] = core::PathNodeNames(topo, f.src, f.path);
  j["path_index"] = f.path_index;
  j["num_paths"] = f.num_paths;
  if (f.udp_sport.has_value()) {
    j["udp_sport"] = *f.udp_sport;
  } else {
    j["udp_sport"] = nullptr;
  }
  j["pinned"] = f.udp_sport.has_value();
  return j;
}

json JobToJson(const core::JobPlan& job, const core::Topology& topo) {
  json j;
  j["id"] = job.id;
  j["gpus"] = job.gpus;
  j["work_flops"] = Finite(job.work.value());
  j["comm_time_s"] = Finite(job.comm_time.ToSeconds());
  j["period_s"] = Finite(job.period.ToSeconds());
  j["bytes_per_sec"] = Finite(job.bytes_per_sec);
  j["intensity"] = Finite(job.intensity);
  j["k"] = Finite(job.k);
  j["priority"] = Finite(job.priority);
  j["rank"] = job.rank;
  j["level"] = job.level;
  j["reference"] = job.reference;
  j["bottleneck"] = LinkNameOrNull(topo, job.bottleneck);
  json flows = json::array();
  for (const core::FlowPlan& f : job.flows) flows.push_back(FlowToJson(f, topo));
  j["flows"] = std::move(flows);
  return j;
}

std::string JobIdAt(const core::Plan& plan, int index) {
  if (index < 0 || static_cast<size_t>(index) >= plan.jobs.size()) return "?";
  return plan.jobs[static_cast<size_t>(index)].id;
}

double Ms(core::Duration d) { return Finite(d.ToMillis()); }

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// Pads or keeps `s` to `width` characters (left-aligned when `left`).
std::string Pad(const std::string& s, size_t width, bool left) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return left ? s + fill : fill + s;
}

}  // namespace

json PlanToJson(const core::Plan& plan, const core::Topology& topo) {
  json out;
  out["levels"] = plan.levels;
  out["first_job_level"] = plan.first_job_level;
  out["usable_levels"] = plan.usable_levels;
  if (plan.reference_job >= 0 && static_cast<size_t>(plan.reference_job) < plan.jobs.size()) {
    out["reference_job"] = plan.jobs[static_cast<size_t>(plan.reference_job)].id;
  } else {
    out["reference_job"] = nullptr;
  }
  out["unpinned_flows"] = plan.unpinned_flows;
  out["cut_weight"] = Finite(plan.cut_weight);
  out["total_edge_weight"] = Finite(plan.total_edge_weight);

  json jobs = json::array();
  for (const core::JobPlan& job : plan.jobs) jobs.push_back(JobToJson(job, topo));
  out["jobs"] = std::move(jobs);

  json edges = json::array();
  for (const core::DagEdge& e : plan.dag.edges) {
    edges.push_back({{"from", JobIdAt(plan, e.from)},
                     {"to", JobIdAt(plan, e.to)},
                     {"weight", Finite(e.weight)}});
  }
  out["dag"] = {{"edges", std::move(edges)}};

  out["timing_ms"] = {{"traffic", Ms(plan.timing.traffic)},
                      {"profile", Ms(plan.timing.profile)},
                      {"priority", Ms(plan.timing.priority)},
                      {"path_selection", Ms(plan.timing.path_selection)},
                      {"compression", Ms(plan.timing.compression)},
                      {"ports", Ms(plan.timing.ports)},
                      {"total", Ms(plan.timing.total)}};
  return out;
}

std::string PlanToTable(const core::Plan& plan, const core::Topology& topo) {
  std::vector<size_t> order(plan.jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan.jobs[a].rank < plan.jobs[b].rank; });

  size_t id_width = 2;
  for (const core::JobPlan& j : plan.jobs) id_width = std::max(id_width, j.id.size() + 1);

  struct Column {
    const char* title;
    size_t width;
    bool left;
  };
  const std::vector<Column> columns = {{"rank", 4, false},     {"id", id_width, true},
                                       {"level", 5, false},    {"I(TFLOP/s)", 12, false},
                                       {"k", 9, false},        {"P(TFLOP/s)", 12, false},
                                       {"t_j(ms)", 10, false}, {"period(ms)", 11, false},
                                       {"flows", 6, false},    {"bottleneck", 0, true}};

  auto row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (c > 0) line += "  ";
      line += Pad(cells[c], columns[c].width, columns[c].left);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };

  std::string out;
  std::vector<std::string> titles;
  for (const Column& c : columns) titles.emplace_back(c.title);
  const std::string header = row(titles);
  out += header;
  out += std::string(header.size() - 1, '-') + "\n";

  for (size_t i : order) {
    const core::JobPlan& j = plan.jobs[i];
    std::string bottleneck = "-";
    if (j.bottleneck.valid() && j.bottleneck.value() < topo.num_links()) {
      bottleneck = topo.LinkName(j.bottleneck);
    }
    std::string id = j.id + (j.reference ? "*" : "");
    out += row(
        {std::to_string(j.rank), id, std::to_string(j.level),
         Format("%.6g", Finite(j.intensity) / 1e12), Format("%.4g", Finite(j.k)),
         Format("%.6g", Finite(j.priority) / 1e12), Format("%.3f", Finite(j.comm_time.ToMillis())),
         Format("%.3f", Finite(j.period.ToMillis())), std::to_string(j.flows.size()), bottleneck});
  }

  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "levels %d (jobs on %d..%d), DAG edges %zu, cut weight %.6g / %.6g TFLOP/s, "
                "unpinned flows %d%s\n",
                plan.levels, plan.first_job_level,
                plan.first_job_level + std::max(plan.usable_levels, 1) - 1, plan.dag.edges.size(),
                Finite(plan.cut_weight) / 1e12, Finite(plan.total_edge_weight) / 1e12,
                plan.unpinned_flows, plan.reference_job >= 0 ? " (* = reference job)" : "");
  out += buf;
  std::snprintf(buf, sizeof(buf),
                "timing ms: traffic %.3f, profile %.3f, priority %.3f, paths %.3f, "
                "compression %.3f, ports %.3f, total %.3f\n",
                Ms(plan.timing.traffic), Ms(plan.timing.profile), Ms(plan.timing.priority),
                Ms(plan.timing.path_selection), Ms(plan.timing.compression), Ms(plan.timing.ports),
                Ms(plan.timing.total));
  out += buf;
  return out;
}

}  // namespace crux::spec
