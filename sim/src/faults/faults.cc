#include "crux/sim/faults.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/ids.h"
#include "crux/core/topology/link_name.h"
#include "crux/textio/csv.h"
#include "crux/textio/number.h"
#include "engine/num_text.h"

namespace crux::sim {
namespace {

using internal::Num;

// Uniform in [0, 1) from 53 random bits (portable, unlike std::uniform_real_distribution).
double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// The columns of a faults CSV (crux/textio/csv.h is the dialect).
constexpr std::string_view kColumns[] = {"time_s", "kind", "target", "fraction", "duration_s"};
constexpr double kMaxSeconds = 1e9;

// A real of the one number grammar of Crux's inputs (crux/textio/number.h): finite, decimal, so
// "0x10", "inf" and "+1" are refused here as in every other input.
bool ParseReal(std::string_view s, double* v) {
  return textio::ParseReal(s, v) == textio::NumberStatus::kOk;
}

}  // namespace

std::string_view FaultKindName(FaultKind k) {
  switch (k) {
    case FaultKind::kLinkDown:
      return "link_down";
    case FaultKind::kLinkGray:
      return "link_gray";
    case FaultKind::kTorDown:
      return "tor_down";
    case FaultKind::kLinkLossy:
      return "link_lossy";
  }
  return "?";
}

core::Status ValidateFaultSimOptions(const core::Topology& topo, const FaultSimOptions& o) {
  if (o.report_interval <= Duration::Zero()) {
    return core::InvalidArgumentError("faults.report_interval: must be > 0");
  }
  if (o.stall_timeout <= Duration::Zero()) {
    return core::InvalidArgumentError("faults.stall_timeout: must be > 0");
  }
  if (o.switch_delay < Duration::Zero()) {
    return core::InvalidArgumentError("faults.switch_delay: must be >= 0");
  }
  if (!(o.lossy_errors_per_s >= 0 && o.lossy_errors_per_s <= 1e12)) {
    return core::InvalidArgumentError("faults.lossy_errors_per_s: must be in [0, 1e12]");
  }
  if (!(o.nic_loss_per_flow_per_s >= 0 && o.nic_loss_per_flow_per_s <= 1e12)) {
    return core::InvalidArgumentError("faults.nic_loss_per_flow_per_s: must be in [0, 1e12]");
  }
  for (size_t i = 0; i < o.faults.size(); ++i) {
    const InjectedFault& f = o.faults[i];
    const std::string ctx = "fault #" + std::to_string(i);
    if (f.at < Duration::Zero()) return core::InvalidArgumentError(ctx + ": at: must be >= 0");
    if (f.duration <= Duration::Zero()) {
      return core::InvalidArgumentError(ctx + ": duration: must be > 0");
    }
    if (IsGray(f.kind) && !(f.fraction > 0 && f.fraction < 1)) {
      return core::InvalidArgumentError(ctx + ": fraction: must be in (0, 1) for " +
                                        std::string(FaultKindName(f.kind)));
    }
    if (f.busy) continue;
    if (f.kind == FaultKind::kTorDown) {
      if (!f.node.valid() || f.node.value() >= topo.num_nodes() ||
          topo.node(f.node).kind != core::NodeKind::kTor) {
        return core::InvalidArgumentError(ctx + ": node: must be a ToR of the topology");
      }
    } else if (!f.link.valid() || f.link.value() >= topo.num_links()) {
      return core::InvalidArgumentError(ctx + ": link: unknown link id");
    }
  }
  return core::Status::Ok();
}

core::Result<std::vector<InjectedFault>> GenerateFaults(const core::Topology& topo,
                                                        const FaultGenOptions& o) {
  if (o.spacing <= Duration::Zero()) return core::InvalidArgumentError("spacing: must be > 0");
  if (o.min_duration <= Duration::Zero() || o.max_duration < o.min_duration ||
      o.max_duration >= o.spacing) {
    return core::InvalidArgumentError("min_duration/max_duration: need 0 < min <= max < spacing");
  }
  const double wsum = o.link_down + o.link_gray + o.tor_down + o.link_lossy;
  if (o.link_down < 0 || o.link_gray < 0 || o.tor_down < 0 || o.link_lossy < 0 || !(wsum > 0)) {
    return core::InvalidArgumentError("mix: weights must be >= 0 with a positive sum");
  }
  if (!(o.gray_min > 0 && o.gray_min <= o.gray_max && o.gray_max < 1)) {
    return core::InvalidArgumentError("gray_min/gray_max: need 0 < min <= max < 1");
  }
  std::vector<core::LinkId> cables;
  std::vector<core::NodeId> tors;
  for (size_t i = 0; i < topo.num_links(); ++i) {
    const core::Link& l = topo.link(core::LinkId(static_cast<uint32_t>(i)));
    const bool sw = core::IsNetworkSwitch(topo.node(l.src).kind) ||
                    core::IsNetworkSwitch(topo.node(l.dst).kind);
    if (sw && l.src.value() < l.dst.value())
      cables.push_back(core::LinkId(static_cast<uint32_t>(i)));
  }
  for (size_t n = 0; n < topo.num_nodes(); ++n) {
    if (topo.node(core::NodeId(static_cast<uint32_t>(n))).kind == core::NodeKind::kTor) {
      tors.push_back(core::NodeId(static_cast<uint32_t>(n)));
    }
  }
  std::mt19937_64 rng(o.seed);
  std::vector<InjectedFault> out;
  for (uint32_t i = 0; i < o.count; ++i) {
    InjectedFault f;
    const double k = Uniform(rng) * wsum;
    f.kind = k < o.link_down                              ? FaultKind::kLinkDown
             : k < o.link_down + o.link_gray              ? FaultKind::kLinkGray
             : k < o.link_down + o.link_gray + o.tor_down ? FaultKind::kTorDown
                                                          : FaultKind::kLinkLossy;
    const int64_t dmin = o.min_duration.nanos();
    const int64_t dmax = o.max_duration.nanos();
    f.duration = Duration::Nanos(dmin + static_cast<int64_t>(Uniform(rng) * (dmax - dmin)));
    const int64_t slot = o.start.nanos() + static_cast<int64_t>(i) * o.spacing.nanos();
    f.at = Duration::Nanos(
        slot + static_cast<int64_t>(Uniform(rng) * (o.spacing.nanos() - f.duration.nanos())));
    // Round to milliseconds (the CSV's precision).
    f.at = Duration::Millis(f.at.nanos() / 1'000'000);
    f.duration = Duration::Millis(std::max<int64_t>(1, f.duration.nanos() / 1'000'000));
    if (IsGray(f.kind)) {
      f.fraction = std::round((o.gray_min + Uniform(rng) * (o.gray_max - o.gray_min)) * 100) / 100;
      f.fraction = std::clamp(f.fraction, 0.01, 0.99);
    }
    const double pick = Uniform(rng);
    if (o.busy_targets) {
      f.busy = true;
      f.busy_fabric = o.busy_fabric && f.kind != FaultKind::kTorDown;
    } else if (f.kind == FaultKind::kTorDown) {
      if (tors.empty()) return core::InvalidArgumentError("tor_down: the topology has no ToR");
      f.node = tors[static_cast<size_t>(pick * static_cast<double>(tors.size()))];
    } else {
      if (cables.empty()) return core::InvalidArgumentError("the topology has no switch link");
      f.link = cables[static_cast<size_t>(pick * static_cast<double>(cables.size()))];
    }
    out.push_back(f);
  }
  return out;
}

core::Result<std::vector<InjectedFault>> ParseFaultsCsv(std::string_view text,
                                                        const core::Topology& topo) {
  CRUX_ASSIGN_OR_RETURN(const std::vector<textio::CsvRow> rows, textio::ReadCsv(text, kColumns));
  std::vector<InjectedFault> out;
  for (const textio::CsvRow& row : rows) {
    const std::vector<std::string_view>& f = row.fields;
    auto error = [&](size_t col, const std::string& what) {
      return textio::CsvFieldError(row, col, kColumns,
                                   what + " (got " + core::QuoteName(f[col]) + ")");
    };
    InjectedFault x;
    double v = 0;
    if (!ParseReal(f[0], &v) || v < 0 || v > kMaxSeconds) {
      return error(0, "must be a finite number >= 0 and <= 1e+09");
    }
    x.at = Duration::Seconds(v);
    if (f[1] == "link_down") {
      x.kind = FaultKind::kLinkDown;
    } else if (f[1] == "link_gray") {
      x.kind = FaultKind::kLinkGray;
    } else if (f[1] == "tor_down") {
      x.kind = FaultKind::kTorDown;
    } else if (f[1] == "link_lossy") {
      x.kind = FaultKind::kLinkLossy;
    } else {
      return error(1, "must be link_down, link_gray, link_lossy or tor_down");
    }
    if (f[2] == "busy") {
      x.busy = true;
    } else if (f[2] == "busy_fabric" && x.kind != FaultKind::kTorDown) {
      x.busy = true;
      x.busy_fabric = true;
    } else if (x.kind == FaultKind::kTorDown) {
      core::Result<core::NodeId> n = topo.FindNode(f[2]);
      if (!n.ok() || topo.node(*n).kind != core::NodeKind::kTor) {
        return error(2, "must be a ToR of the topology or busy");
      }
      x.node = *n;
    } else {
      core::Result<core::LinkName> l = core::ParseLinkName(topo, f[2]);
      if (!l.ok()) return textio::CsvFieldError(row, 2, kColumns, l.status().message());
      x.link = l->link;
    }
    if (IsGray(x.kind)) {
      if (!ParseReal(f[3], &v) || !(v > 0 && v < 1)) {
        return error(3, "must be a number in (0, 1) for link_gray and link_lossy");
      }
      x.fraction = v;
    } else if (!f[3].empty() && !(ParseReal(f[3], &v) && v == 0)) {
      return error(3, "only for link_gray and link_lossy (empty or 0)");
    }
    if (!ParseReal(f[4], &v) || !(v > 0) || v > kMaxSeconds) {
      return error(4, "must be a finite number > 0 and <= 1e+09");
    }
    x.duration = Duration::Seconds(v);
    out.push_back(x);
  }
  return out;
}

std::string FormatFaultsCsv(const std::vector<InjectedFault>& faults, const core::Topology& topo) {
  std::string s = textio::CsvHeader(kColumns) + "\n";
  for (const InjectedFault& f : faults) {
    std::string target = f.busy_fabric ? "busy_fabric" : "busy";
    if (f.kind == FaultKind::kTorDown ? f.node.valid() : f.link.valid()) {
      if (f.kind == FaultKind::kTorDown) {
        target = topo.node(f.node).name;
      } else {
        const core::Link& l = topo.link(f.link);
        target = topo.node(l.src).name + "<->" + topo.node(l.dst).name;
      }
    }
    s += Num(f.at.ToSeconds()) + "," + std::string(FaultKindName(f.kind)) + "," + target + "," +
         (IsGray(f.kind) ? Num(f.fraction) : std::string()) + "," + Num(f.duration.ToSeconds()) +
         "\n";
  }
  return s;
}

FaultScore ScoreFaults(const std::vector<FaultRecord>& faults,
                       const std::vector<LinkDecisionRecord>& decisions, bool switch_signals,
                       Duration grace, uint32_t min_flows) {
  FaultScore sc;
  // Which faults are "on" (in force or within grace) for a link at a time.
  auto on = [&](const FaultRecord& r, Duration t) {
    return r.injected && t >= r.fault.at && t <= r.fault.at + r.fault.duration + grace;
  };
  std::vector<bool> correct(decisions.size(), false);
  for (size_t d = 0; d < decisions.size(); ++d) {
    const LinkDecisionRecord& x = decisions[d];
    if (!x.automatic || x.health == core::LinkHealth::kUp) continue;
    ++sc.decisions;
    for (const FaultRecord& r : faults) {
      if (on(r, x.at) && std::find(r.links.begin(), r.links.end(), x.link) != r.links.end()) {
        correct[d] = true;
        break;
      }
    }
    if (correct[d]) ++sc.true_decisions;
  }
  std::vector<double> times;
  double est_err = 0;
  size_t est_n = 0;
  for (size_t i = 0; i < faults.size(); ++i) {
    const FaultRecord& r = faults[i];
    if (!r.injected) continue;
    ++sc.injected;
    FaultOutcome o;
    o.index = i;
    const bool hard = !IsGray(r.fault.kind);
    // A lossy link's ports count errors: the switches see it as they see a hard fault.
    const bool switch_seen = hard || r.fault.kind == FaultKind::kLinkLossy;
    o.observable = r.crossed_by_flow || (switch_seen && switch_signals);
    bool first = true;
    for (size_t d = 0; d < decisions.size(); ++d) {
      const LinkDecisionRecord& x = decisions[d];
      if (!x.automatic || x.health == core::LinkHealth::kUp || !on(r, x.at)) continue;
      const bool mine = std::find(r.links.begin(), r.links.end(), x.link) != r.links.end();
      if (mine && first) {
        first = false;
        o.detected = true;
        o.detection_time = x.at - r.fault.at;
        o.estimate = x.health == core::LinkHealth::kDown ? 0 : x.capacity_fraction;
      } else if (!mine && !correct[d]) {
        ++o.false_suspects;
      }
    }
    o.localised = o.detected && o.false_suspects == 0;
    if (o.observable) ++sc.observable;
    o.felt = r.crossed_by_flow && (hard || r.limited_a_flow);  // Crossed: observable.
    if (o.felt) {
      ++sc.felt;
      if (o.detected) ++sc.detected_felt;
    }
    const bool localisable =
        r.max_flows_per_link >= std::max<uint32_t>(1, min_flows) || (switch_seen && switch_signals);
    if (localisable) {
      ++sc.localisable;
      if (o.detected) ++sc.detected_localisable;
    }
    if (o.detected) {
      ++sc.detected;
      if (o.observable) ++sc.detected_observable;
      times.push_back(o.detection_time.ToSeconds());
      if (IsGray(r.fault.kind)) {
        est_err += std::abs(o.estimate - r.fault.fraction);
        ++est_n;
      }
    }
    if (o.localised) ++sc.localised;
    sc.outcomes.push_back(o);
  }
  sc.precision = sc.decisions > 0
                     ? static_cast<double>(sc.true_decisions) / static_cast<double>(sc.decisions)
                     : 1.0;
  sc.recall = sc.observable > 0
                  ? static_cast<double>(sc.detected_observable) / static_cast<double>(sc.observable)
                  : 0.0;
  sc.recall_localisable = sc.localisable > 0 ? static_cast<double>(sc.detected_localisable) /
                                                   static_cast<double>(sc.localisable)
                                             : 0.0;
  sc.recall_felt =
      sc.felt > 0 ? static_cast<double>(sc.detected_felt) / static_cast<double>(sc.felt) : 0.0;
  sc.raw_recall =
      sc.injected > 0 ? static_cast<double>(sc.detected) / static_cast<double>(sc.injected) : 0.0;
  sc.accuracy =
      sc.detected > 0 ? static_cast<double>(sc.localised) / static_cast<double>(sc.detected) : 0.0;
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    double sum = 0;
    for (double t : times) sum += t;
    sc.detect_mean_s = sum / static_cast<double>(times.size());
    auto pct = [&](double p) {
      const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(times.size())) - 1);
      return times[std::min(k, times.size() - 1)];
    };
    sc.detect_p50_s = pct(0.5);
    sc.detect_p99_s = pct(0.99);
    sc.detect_max_s = times.back();
  }
  sc.gray_estimate_error = est_n > 0 ? est_err / static_cast<double>(est_n) : 0.0;
  return sc;
}

}  // namespace crux::sim
