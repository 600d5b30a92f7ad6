#include "crux/spec/plan_output.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/text.h"
#include "crux/core/topology/ecmp.h"

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

// Which DAG edges dag.edges lists (see plan_output.h, "Size"), and the per-job counts.
struct EdgeSelection {
  bool all = false;                 // Every edge is listed (`listed` is then empty).
  std::vector<size_t> listed;       // Indices into plan.dag.edges, ascending.
  std::vector<int64_t> contending;  // Per job: DAG neighbours (in + out edges).
  std::vector<int64_t> omitted;     // Per job: out edges not listed.
  size_t num_listed = 0;
};

bool IsJob(const core::Plan& plan, int index) {
  return index >= 0 && static_cast<size_t>(index) < plan.jobs.size();
}

// O(E) time; O(jobs x cap + the largest out-degree) memory.
EdgeSelection SelectEdges(const core::Plan& plan, int max_edges_per_job) {
  const std::vector<core::DagEdge>& edges = plan.dag.edges;
  const size_t n = plan.jobs.size();
  EdgeSelection sel;
  sel.contending.assign(n, 0);
  sel.omitted.assign(n, 0);
  for (const core::DagEdge& e : edges) {
    if (IsJob(plan, e.from)) ++sel.contending[static_cast<size_t>(e.from)];
    if (IsJob(plan, e.to)) ++sel.contending[static_cast<size_t>(e.to)];
  }
  if (max_edges_per_job <= 0) {
    sel.all = true;
    sel.num_listed = edges.size();
    return sel;
  }
  const auto cap = static_cast<size_t>(max_edges_per_job);
  // Edges are sorted by `from` (ContentionDag's contract); a run of equal `from` is one job's
  // out edges. `used` keeps the cap per job even if a producer broke the order.
  std::vector<size_t> used(n, 0);
  std::vector<size_t> run;
  auto rank_of_to = [&](size_t i) {
    const int to = edges[i].to;
    return IsJob(plan, to) ? plan.jobs[static_cast<size_t>(to)].rank
                           : std::numeric_limits<int>::max();
  };
  for (size_t b = 0; b < edges.size();) {
    size_t e = b + 1;
    while (e < edges.size() && edges[e].from == edges[b].from) ++e;
    const int from = edges[b].from;
    const size_t quota = IsJob(plan, from) ? cap - used[static_cast<size_t>(from)] : cap;
    const size_t count = e - b;
    if (count <= quota) {
      for (size_t i = b; i < e; ++i) sel.listed.push_back(i);
    } else {
      // Keep the `quota` edges to the closest-ranked lower jobs (ranks are distinct; the index
      // breaks ties for plans whose ranks are not), listed in index order.
      run.clear();
      for (size_t i = b; i < e; ++i) run.push_back(i);
      auto closer = [&](size_t x, size_t y) {
        const int rx = rank_of_to(x);
        const int ry = rank_of_to(y);
        return rx != ry ? rx < ry : x < y;
      };
      std::nth_element(run.begin(), run.begin() + static_cast<std::ptrdiff_t>(quota), run.end(),
                       closer);
      run.resize(quota);
      std::sort(run.begin(), run.end());
      sel.listed.insert(sel.listed.end(), run.begin(), run.end());
    }
    const size_t taken = std::min(count, quota);
    if (IsJob(plan, from)) {
      used[static_cast<size_t>(from)] += taken;
      sel.omitted[static_cast<size_t>(from)] += static_cast<int64_t>(count - taken);
    }
    b = e;
  }
  if (!std::is_sorted(sel.listed.begin(), sel.listed.end())) {
    std::sort(sel.listed.begin(), sel.listed.end());
  }
  sel.num_listed = sel.listed.size();
  return sel;
}

json JobToJson(const core::Plan& plan, size_t index, const EdgeSelection& sel,
               const core::Topology& topo) {
  const core::JobPlan& job = plan.jobs[index];
  json j;
  j["id"] = job.id;
  j["gpus"] = job.gpus;
  j["work_flops"] = Finite(job.work.value());
  j["comm_time_s"] = Finite(job.comm_time.ToSeconds());
  j["period_s"] = Finite(job.period.ToSeconds());
  j["bytes_per_sec"] = Finite(job.bytes_per_sec);
  j["intensity"] = Finite(job.intensity);
  j["k"] = Finite(job.k);
  j["pair_gain"] = Finite(job.pair_gain);
  j["pair_loss"] = Finite(job.pair_loss);
  j["priority"] = Finite(job.priority);
  j["rank"] = job.rank;
  j["level"] = job.level;
  j["reference"] = job.reference;
  j["bottleneck"] = LinkNameOrNull(topo, job.bottleneck);
  j["contending_jobs"] = sel.contending[index];
  j["dag_edges_omitted"] = sel.omitted[index];
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

json EdgeToJson(const core::Plan& plan, const core::DagEdge& e) {
  return {
      {"from", JobIdAt(plan, e.from)}, {"to", JobIdAt(plan, e.to)}, {"weight", Finite(e.weight)}};
}

// Everything but "jobs" and "dag".
json HeadToJson(const core::Plan& plan) {
  json out;
  out["levels"] = plan.levels;
  out["first_job_level"] = plan.first_job_level;
  out["usable_levels"] = plan.usable_levels;
  if (IsJob(plan, plan.reference_job)) {
    out["reference_job"] = plan.jobs[static_cast<size_t>(plan.reference_job)].id;
  } else {
    out["reference_job"] = nullptr;
  }
  out["unpinned_flows"] = plan.unpinned_flows;
  out["cut_weight"] = Finite(plan.cut_weight);
  out["total_edge_weight"] = Finite(plan.total_edge_weight);
  out["timing_ms"] = {{"traffic", Ms(plan.timing.traffic)},
                      {"profile", Ms(plan.timing.profile)},
                      {"priority", Ms(plan.timing.priority)},
                      {"path_selection", Ms(plan.timing.path_selection)},
                      {"compression", Ms(plan.timing.compression)},
                      {"ports", Ms(plan.timing.ports)},
                      {"total", Ms(plan.timing.total)}};
  return out;
}

// dag's scalar members (its "edges" are added by the caller).
json DagHeadToJson(const core::Plan& plan, const EdgeSelection& sel, int max_edges_per_job) {
  return {{"num_edges", plan.dag.edges.size()},
          {"edges_omitted", plan.dag.edges.size() - sel.num_listed},
          {"max_edges_per_job", std::max(max_edges_per_job, 0)}};
}

// Streaming writer for PlanToJsonText: nlohmann's pretty printer (indent 2) applied to one value
// at a time, re-indented for its depth. JSON strings never hold a raw newline, so every '\n'
// of a dumped value starts a new line of it.
constexpr int kIndent = 2;

void AppendValue(const json& value, int depth, std::string* out) {
  const std::string text = value.dump(kIndent, ' ', false, json::error_handler_t::replace);
  const std::string pad(static_cast<size_t>(depth * kIndent), ' ');
  for (char c : text) {
    *out += c;
    if (c == '\n') *out += pad;
  }
}

void AppendKey(const std::string& key, int depth, std::string* out) {
  out->append(static_cast<size_t>(depth * kIndent), ' ');
  *out += json(key).dump();
  *out += ": ";
}

// An array of `count` elements, element i written by `element(i, depth + 1)`; "[]" when empty,
// as nlohmann prints it.
template <typename F>
void AppendArray(size_t count, int depth, std::string* out, F element) {
  if (count == 0) {
    *out += "[]";
    return;
  }
  *out += "[\n";
  for (size_t i = 0; i < count; ++i) {
    out->append(static_cast<size_t>((depth + 1) * kIndent), ' ');
    element(i, depth + 1);
    *out += i + 1 < count ? ",\n" : "\n";
  }
  out->append(static_cast<size_t>(depth * kIndent), ' ');
  *out += ']';
}

// An object whose members are `head`'s plus the extra keys, in alphabetical order (as
// nlohmann's std::map-backed objects print); extra member `k` is written by `extra(k, depth+1)`.
template <typename F>
void AppendObject(const json& head, const std::set<std::string>& extra_keys, int depth,
                  std::string* out, F extra) {
  std::set<std::string> keys = extra_keys;
  for (auto it = head.begin(); it != head.end(); ++it) keys.insert(it.key());
  *out += "{\n";
  size_t i = 0;
  for (const std::string& key : keys) {
    AppendKey(key, depth + 1, out);
    if (extra_keys.count(key) != 0) {
      extra(key, depth + 1);
    } else {
      AppendValue(head.at(key), depth + 1, out);
    }
    *out += ++i < keys.size() ? ",\n" : "\n";
  }
  out->append(static_cast<size_t>(depth * kIndent), ' ');
  *out += '}';
}

}  // namespace

json PlanToJson(const core::Plan& plan, const core::Topology& topo,
                const PlanJsonOptions& options) {
  const EdgeSelection sel = SelectEdges(plan, options.max_edges_per_job);
  json out = HeadToJson(plan);
  json jobs = json::array();
  for (size_t i = 0; i < plan.jobs.size(); ++i) jobs.push_back(JobToJson(plan, i, sel, topo));
  out["jobs"] = std::move(jobs);

  json edges = json::array();
  if (sel.all) {
    for (const core::DagEdge& e : plan.dag.edges) edges.push_back(EdgeToJson(plan, e));
  } else {
    for (size_t i : sel.listed) edges.push_back(EdgeToJson(plan, plan.dag.edges[i]));
  }
  json dag = DagHeadToJson(plan, sel, options.max_edges_per_job);
  dag["edges"] = std::move(edges);
  out["dag"] = std::move(dag);
  return out;
}

std::string PlanToJsonText(const core::Plan& plan, const core::Topology& topo,
                           const PlanJsonOptions& options) {
  const EdgeSelection sel = SelectEdges(plan, options.max_edges_per_job);
  std::string out;
  AppendObject(HeadToJson(plan), {"dag", "jobs"}, 0, &out, [&](const std::string& key, int depth) {
    if (key == "jobs") {
      AppendArray(plan.jobs.size(), depth, &out,
                  [&](size_t i, int d) { AppendValue(JobToJson(plan, i, sel, topo), d, &out); });
      return;
    }
    AppendObject(DagHeadToJson(plan, sel, options.max_edges_per_job), {"edges"}, depth, &out,
                 [&](const std::string&, int d) {
                   AppendArray(sel.num_listed, d, &out, [&](size_t i, int dd) {
                     const size_t edge = sel.all ? i : sel.listed[i];
                     AppendValue(EdgeToJson(plan, plan.dag.edges[edge]), dd, &out);
                   });
                 });
  });
  out += '\n';
  return out;
}

std::string PlanToTable(const core::Plan& plan, const core::Topology& topo) {
  std::vector<size_t> order(plan.jobs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return plan.jobs[a].rank < plan.jobs[b].rank; });

  // Names are escaped for the terminal (a job id or node name cannot move the cursor, clear the
  // screen or retitle the window, whatever the input held).
  std::vector<std::string> ids(plan.jobs.size());
  size_t id_width = 2;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    ids[i] = core::EscapeForTerminal(plan.jobs[i].id);
    id_width = std::max(id_width, ids[i].size() + 1);  // Room for the reference marker.
    if (plan.jobs[i].reference) ids[i] += '*';
  }

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
      bottleneck = core::EscapeForTerminal(topo.LinkName(j.bottleneck));
    }
    out += row(
        {std::to_string(j.rank), ids[i], std::to_string(j.level),
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
