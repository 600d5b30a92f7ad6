#include "sim_fault_report.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace crux::simcli {

using nlohmann::json;

namespace {

std::string F(double v, const char* fmt = "%.3f") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string LinkStr(const core::Topology& topo, core::LinkId l) {
  return l.valid() && l.value() < topo.num_links() ? topo.LinkName(l) : "?";
}

json ScoreJson(const sim::FaultScore& s) {
  json j;
  j["injected"] = s.injected;
  j["observable"] = s.observable;
  j["detected"] = s.detected;
  j["detected_observable"] = s.detected_observable;
  j["localisable"] = s.localisable;
  j["detected_localisable"] = s.detected_localisable;
  j["recall_localisable"] = s.recall_localisable;
  j["felt"] = s.felt;
  j["detected_felt"] = s.detected_felt;
  j["recall_felt"] = s.recall_felt;
  j["localised"] = s.localised;
  j["decisions"] = s.decisions;
  j["true_decisions"] = s.true_decisions;
  j["precision"] = s.precision;
  j["recall"] = s.recall;
  j["raw_recall"] = s.raw_recall;
  j["localisation_accuracy"] = s.accuracy;
  j["detection_mean_s"] = s.detect_mean_s;
  j["detection_p50_s"] = s.detect_p50_s;
  j["detection_p99_s"] = s.detect_p99_s;
  j["detection_max_s"] = s.detect_max_s;
  j["gray_estimate_mean_abs_error"] = s.gray_estimate_error;
  return j;
}

// Per-kind breakdown of the outcomes.
json KindsJson(const FaultModeRun& r) {
  // injected, observable, detected, localised, >= 2 flows on a link
  std::map<std::string, std::array<size_t, 5>> k;
  std::map<std::string, double> tsum;
  for (const sim::FaultOutcome& o : r.score.outcomes) {
    const std::string name(sim::FaultKindName(r.result.fault_records[o.index].fault.kind));
    auto& a = k[name];
    ++a[0];
    a[1] += o.observable;
    a[2] += o.detected;
    a[3] += o.localised;
    a[4] += r.result.fault_records[o.index].max_flows_per_link >= 2;
    if (o.detected) tsum[name] += o.detection_time.ToSeconds();
  }
  json j = json::object();
  for (const auto& [name, a] : k) {
    j[name] = {{"injected", a[0]},
               {"observable", a[1]},
               {"detected", a[2]},
               {"localised", a[3]},
               {"two_flows_on_a_link", a[4]},
               {"detection_mean_s", a[2] > 0 ? tsum[name] / static_cast<double>(a[2]) : 0.0}};
  }
  return j;
}

}  // namespace

json FaultReportJson(const core::Topology& topo, const std::vector<FaultModeRun>& runs,
                     const json& setup) {
  json rep;
  rep["setup"] = setup;
  json modes = json::array();
  for (const FaultModeRun& r : runs) {
    json m;
    m["mode"] = r.mode;
    m["description"] = r.description;
    m["faults"] = r.faults;
    m["switch_signals"] = r.switch_signals;
    m["gpu_utilization"] = r.result.gpu_utilization;
    m["cluster_utilization"] = r.result.cluster_utilization;
    m["replans"] = r.result.replans;
    m["epochs"] = r.result.epochs;
    m["events"] = r.result.events;
    m["wall_s"] = r.result.wall_s;
    m["flow_reports"] = r.result.flow_reports;
    m["fault_evaluations"] = r.result.fault_evaluations;
    m["disbelieved_reports"] = r.result.disbelieved_reports;
    m["probe_samples"] = r.result.probe_samples;
    size_t automatic = 0;
    for (const sim::LinkDecisionRecord& d : r.result.link_decisions) automatic += d.automatic;
    m["link_decisions"] = automatic;
    m["score"] = ScoreJson(r.score);
    if (r.faults) {
      m["by_kind"] = KindsJson(r);
      json per = json::array();
      for (const sim::FaultOutcome& o : r.score.outcomes) {
        const sim::FaultRecord& fr = r.result.fault_records[o.index];
        json x;
        x["index"] = o.index;
        x["kind"] = std::string(sim::FaultKindName(fr.fault.kind));
        x["target"] = fr.fault.kind == sim::FaultKind::kTorDown ? topo.node(fr.fault.node).name
                                                                : LinkStr(topo, fr.fault.link);
        if (sim::IsGray(fr.fault.kind)) x["fraction"] = fr.fault.fraction;
        x["start_s"] = fr.fault.at.ToSeconds();
        x["duration_s"] = fr.fault.duration.ToSeconds();
        x["crossed_by_flow"] = fr.crossed_by_flow;
        x["max_flows_per_link"] = fr.max_flows_per_link;
        x["limited_a_flow"] = fr.limited_a_flow;
        x["observable"] = o.observable;
        x["felt"] = o.felt;
        x["detected"] = o.detected;
        if (o.detected) {
          x["detection_s"] = o.detection_time.ToSeconds();
          x["estimate"] = o.estimate;
        }
        x["localised"] = o.localised;
        x["false_suspects"] = o.false_suspects;
        per.push_back(x);
      }
      m["per_fault"] = per;
    }
    // The decisions that blamed no fault (false positives), for inspection.
    json fp = json::array();
    for (const sim::LinkDecisionRecord& d : r.result.link_decisions) {
      if (!d.automatic || d.health == core::LinkHealth::kUp) continue;
      bool ok = false;
      for (const sim::FaultRecord& fr : r.result.fault_records) {
        if (!fr.injected || d.at < fr.fault.at ||
            d.at > fr.fault.at + fr.fault.duration + core::Duration::Seconds(5)) {
          continue;
        }
        for (core::LinkId l : fr.links) ok = ok || l == d.link;
      }
      if (ok) continue;
      if (fp.size() < 50) {
        fp.push_back({{"at_s", d.at.ToSeconds()},
                      {"link", LinkStr(topo, d.link)},
                      {"health", std::string(core::LinkHealthName(d.health))},
                      {"fraction", d.capacity_fraction},
                      {"reason", d.reason}});
      }
    }
    m["false_decisions_first_50"] = fp;
    modes.push_back(m);
  }
  rep["modes"] = modes;
  return rep;
}

std::string FaultReportTable(const std::vector<FaultModeRun>& runs) {
  std::string s =
      "mode          gpu_util  cluster_util  faults  observable  detected  precision  recall  "
      "recall_felt  recall_loc  raw_recall  accuracy  det_mean_s  det_p50_s  det_p99_s  "
      "decisions\n";
  for (const FaultModeRun& r : runs) {
    const sim::FaultScore& c = r.score;
    char line[512];
    std::snprintf(
        line, sizeof(line),
        "%-12s  %8.4f  %12.4f  %6zu  %10zu  %8zu  %9.4f  %6.4f  %11.4f  %10.4f  %10.4f  %8.4f  "
        "%10.2f  %9.2f  %9.2f  %9zu\n",
        r.mode.c_str(), r.result.gpu_utilization, r.result.cluster_utilization, c.injected,
        c.observable, c.detected, c.precision, c.recall, c.recall_felt, c.recall_localisable,
        c.raw_recall, c.accuracy, c.detect_mean_s, c.detect_p50_s, c.detect_p99_s, c.decisions);
    s += line;
  }
  return s;
}

std::string FaultReportMarkdown(const json& rep) {
  std::string s = "# Fault injection report\n\n";
  s += "Setup: `" + rep["setup"].dump() + "`\n\n";
  s += "| mode | faults | switch signals | GPU util | cluster util | injected | observable | "
       "detected | precision | recall (observable) | recall (felt by a flow) | "
       "recall (>= 2 flows or switch) | raw recall | "
       "localisation accuracy | "
       "detection mean / p50 / p99 s | decisions | gray estimate error |\n";
  s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const json& m : rep["modes"]) {
    const json& c = m["score"];
    s += "| " + m["mode"].get<std::string>() + " | " + (m["faults"].get<bool>() ? "yes" : "no") +
         " | " + (m["switch_signals"].get<bool>() ? "yes" : "no") + " | " +
         F(m["gpu_utilization"].get<double>(), "%.4f") + " | " +
         F(m["cluster_utilization"].get<double>(), "%.4f") + " | " +
         std::to_string(c["injected"].get<size_t>()) + " | " +
         std::to_string(c["observable"].get<size_t>()) + " | " +
         std::to_string(c["detected"].get<size_t>()) + " | " + F(c["precision"].get<double>()) +
         " | " + F(c["recall"].get<double>()) + " | " + F(c["recall_felt"].get<double>()) + " | " +
         F(c["recall_localisable"].get<double>()) + " | " + F(c["raw_recall"].get<double>()) +
         " | " + F(c["localisation_accuracy"].get<double>()) + " | " +
         F(c["detection_mean_s"].get<double>(), "%.2f") + " / " +
         F(c["detection_p50_s"].get<double>(), "%.2f") + " / " +
         F(c["detection_p99_s"].get<double>(), "%.2f") + " | " +
         std::to_string(c["decisions"].get<size_t>()) + " | " +
         F(c["gray_estimate_mean_abs_error"].get<double>()) + " |\n";
  }
  s += "\nBy kind (detected / observable / injected, >= 2 flows on a link, mean detection s):\n\n";
  for (const json& m : rep["modes"]) {
    if (!m.contains("by_kind")) continue;
    s += "* " + m["mode"].get<std::string>() + ":";
    for (const auto& [k, v] : m["by_kind"].items()) {
      s += " " + k + " " + std::to_string(v["detected"].get<size_t>()) + "/" +
           std::to_string(v["observable"].get<size_t>()) + "/" +
           std::to_string(v["injected"].get<size_t>()) + ", " +
           std::to_string(v["two_flows_on_a_link"].get<size_t>()) + " (" +
           F(v["detection_mean_s"].get<double>(), "%.2f") + " s);";
    }
    s += "\n";
  }
  return s;
}

core::Status WriteFaultReport(const std::string& dir, const core::Topology& topo,
                              const std::vector<FaultModeRun>& runs, const json& setup) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return core::InternalError("create " + dir + ": " + ec.message());
  const json rep = FaultReportJson(topo, runs, setup);
  auto write = [&](const std::string& name, const std::string& text) -> core::Status {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream f(path);
    f << text;
    if (!f) return core::InternalError("write " + path);
    return core::Status::Ok();
  };
  CRUX_RETURN_IF_ERROR(write("report.json", rep.dump(2) + "\n"));
  CRUX_RETURN_IF_ERROR(write("report.md", FaultReportMarkdown(rep)));
  for (const FaultModeRun& r : runs) {
    if (!r.faults) continue;
    std::vector<sim::InjectedFault> fs;
    for (const sim::FaultRecord& fr : r.result.fault_records) fs.push_back(fr.fault);
    CRUX_RETURN_IF_ERROR(write("faults_" + r.mode + ".csv", sim::FormatFaultsCsv(fs, topo)));
  }
  return core::Status::Ok();
}

}  // namespace crux::simcli
