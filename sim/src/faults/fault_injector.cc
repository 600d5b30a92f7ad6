#include "faults/fault_injector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace crux::sim::internal {

FaultInjector::FaultInjector(const core::Topology& topo, const FaultSimOptions& options,
                             Duration horizon, SimResult& result)
    : topo_(topo),
      options_(options),
      result_(result),
      next_report_(options.report_interval),
      rng_(options.seed) {
  result_.fault_records.clear();
  for (size_t i = 0; i < options.faults.size(); ++i) {
    FaultRecord r;
    r.fault = options.faults[i];
    result_.fault_records.push_back(r);
    if (r.fault.at < horizon) queue_.emplace(r.fault.at, Ev{Kind::kStart, i, false});
  }
}

Duration FaultInjector::next_time(Duration now) const {
  Duration t = options_.flow_reports ? next_report_ : Duration::Infinite();
  if (!queue_.empty()) t = std::min(t, queue_.begin()->first);
  return std::max(t, now);
}

bool FaultInjector::event_due(Duration now) const {
  return !queue_.empty() && queue_.begin()->first <= now;
}

Duration FaultInjector::barrier(bool links_not_up) const {
  Duration t = queue_.empty() ? Duration::Infinite() : queue_.begin()->first;
  if (options_.flow_reports && (!active_.empty() || links_not_up)) t = std::min(t, next_report_);
  return t;
}

void FaultInjector::SetPhysical(core::LinkId l, Duration now, Fabric& fabric, Metrics& metrics) {
  const double nominal = topo_.link(l).up ? topo_.link(l).capacity.ToBitsPerSec() : 0.0;
  double frac = 1;
  auto it = on_link_.find(l.value());
  if (it != on_link_.end()) {
    for (double f : it->second) frac = std::min(frac, f);
    if (it->second.empty()) on_link_.erase(it);
  }
  const double cap = nominal * frac;
  const double old = fabric.capacity_bps(l);
  if (cap == old) return;
  metrics.CapacityChanged(l, old, cap, now);
  fabric.SetCapacity(l, cap);
}

void FaultInjector::Start(size_t i, Duration now, Fabric& fabric, Metrics& metrics,
                          JobModel& jobs) {
  FaultRecord& r = result_.fault_records[i];
  InjectedFault& f = r.fault;
  if (f.busy) {
    // Targets that pinned plans cross now.
    std::set<uint32_t> cables;
    std::set<uint32_t> tors;
    for (const JobState& s : jobs.jobs()) {
      if (s.status != JobStatus::kRunning) continue;
      for (size_t k = 0; k < s.plan_flows.size() && k < s.pinned.size(); ++k) {
        if (!s.pinned[k]) continue;
        for (core::LinkId l : s.plan_flows[k].path) {
          const core::Link& link = topo_.link(l);
          const bool src_switch = core::IsNetworkSwitch(topo_.node(link.src).kind);
          const bool dst_switch = core::IsNetworkSwitch(topo_.node(link.dst).kind);
          if ((!src_switch && !dst_switch) || (f.busy_fabric && !(src_switch && dst_switch))) {
            continue;
          }
          cables.insert(link.reverse.valid() ? std::min(l.value(), link.reverse.value())
                                             : l.value());
          for (core::NodeId n : {link.src, link.dst}) {
            if (topo_.node(n).kind == core::NodeKind::kTor) tors.insert(n.value());
          }
        }
      }
    }
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    if (f.kind == FaultKind::kTorDown) {
      if (tors.empty()) return;  // Not injected.
      auto it = tors.begin();
      std::advance(it, static_cast<ptrdiff_t>(u * static_cast<double>(tors.size())));
      f.node = core::NodeId(*it);
    } else {
      if (cables.empty()) return;
      auto it = cables.begin();
      std::advance(it, static_cast<ptrdiff_t>(u * static_cast<double>(cables.size())));
      f.link = core::LinkId(*it);
    }
  }
  r.injected = true;
  if (f.kind == FaultKind::kTorDown) {
    for (core::LinkId l : topo_.OutLinks(f.node)) {
      r.links.push_back(l);
      if (topo_.link(l).reverse.valid()) r.links.push_back(topo_.link(l).reverse);
    }
  } else {
    r.links.push_back(f.link);
    if (topo_.link(f.link).reverse.valid()) r.links.push_back(topo_.link(f.link).reverse);
  }
  const double frac = IsGray(f.kind) ? f.fraction : 0.0;
  for (core::LinkId l : r.links) {
    on_link_[l.value()].push_back(frac);
    SetPhysical(l, now, fabric, metrics);
  }
  active_.push_back(i);
  queue_.emplace(now + f.duration, Ev{Kind::kEnd, i, false});
  if (options_.switch_signals && !IsGray(f.kind)) {
    queue_.emplace(now + options_.switch_delay, Ev{Kind::kSwitch, i, false});
  }
}

void FaultInjector::End(size_t i, Duration now, Fabric& fabric, Metrics& metrics) {
  FaultRecord& r = result_.fault_records[i];
  const double frac = IsGray(r.fault.kind) ? r.fault.fraction : 0.0;
  for (core::LinkId l : r.links) {
    std::vector<double>& v = on_link_[l.value()];
    auto it = std::find(v.begin(), v.end(), frac);
    if (it != v.end()) v.erase(it);
    SetPhysical(l, now, fabric, metrics);
  }
  active_.erase(std::find(active_.begin(), active_.end(), i));
  if (options_.switch_signals && !IsGray(r.fault.kind)) {
    queue_.emplace(now + options_.switch_delay, Ev{Kind::kSwitch, i, true});
  }
}

void FaultInjector::Counters(PlanApplier& host) {
  for (size_t i : active_) {
    const FaultRecord& r = result_.fault_records[i];
    if (r.fault.kind != FaultKind::kLinkLossy) continue;
    // Both ends of the cable count the corrupted frames they receive (IF_IN_ERRORS and FEC
    // uncorrectable); the switch agent reads them every counter interval.
    for (core::LinkId l : r.links) {
      core::CounterSignal c;
      c.link = l;
      c.interval = options_.report_interval;
      c.errors = static_cast<uint64_t>(options_.lossy_errors_per_s * c.interval.ToSeconds());
      c.source = "simulated switch port counters (fault #" + std::to_string(i) + ")";
      host.ObserveCounters(c);
    }
  }
}

std::vector<core::FlowSample> FaultInjector::MeasureProbes(uint32_t j, const Fabric& fabric,
                                                           const PlanApplier& host) const {
  std::vector<core::FlowSample> out;
  const std::vector<core::FlowPin>* probes = host.ProbesOf(j);
  if (probes == nullptr) return out;
  const core::ProbeOptions& po = host.probe_options();
  for (const core::FlowPin& p : *probes) {
    if (p.path.empty()) continue;
    double capacity = std::numeric_limits<double>::infinity();
    for (core::LinkId l : p.path) {
      capacity = l.valid() && l.value() < topo_.num_links()
                     ? std::min(capacity, fabric.capacity_bps(l))
                     : 0.0;
      if (!(capacity > 0)) break;
    }
    core::FlowSample f;
    f.src_nic = p.src_nic;
    f.dst_nic = p.dst_nic;
    f.udp_sport = p.udp_sport;
    f.probe = true;
    if (capacity > 0 && std::isfinite(capacity)) {
      f.bytes = po.size;
      f.transfer_time =
          std::max(Duration::Nanos(1), Duration::Seconds(po.size.ToBits() / capacity));
    } else {
      f.errors = 1;  // A link of its path is physically down: lost, the probe times out.
    }
    out.push_back(f);
  }
  return out;
}

void FaultInjector::Heartbeat(Duration now, Fabric& fabric, JobModel& jobs, PlanApplier& host) {
  ++result_.flow_reports;
  // Per fault in force: the reported flows over each of its directed links this round.
  std::map<std::pair<size_t, uint32_t>, uint32_t> per_link;
  // Per NIC: the flows that met loss (or congestion) on their paths this round.
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> nic_hits;
  for (uint32_t j = 0; j < jobs.jobs().size(); ++j) {
    JobState& s = jobs.job(j);
    // A sleeping job (fast-forward) reports at its first heartbeat after it woke, as if the
    // heartbeats of its sleep had been lost: its window covers what was simulated in detail.
    if (s.status != JobStatus::kRunning || !s.profiler || s.asleep) continue;
    std::vector<ReportedFlow> rep = jobs.TakeFlowSamples(j, options_.stall_timeout);
    if (rep.empty()) continue;
    std::vector<core::FlowSample> samples;
    samples.reserve(rep.size());
    for (ReportedFlow& x : rep) {
      // Observability: a reported flow crossed a link of a fault in force.
      bool lossy = false;
      bool congested = false;
      for (size_t i : active_) {
        FaultRecord& r = result_.fault_records[i];
        bool crossed = false;
        for (core::LinkId l : x.path) {
          if (std::find(r.links.begin(), r.links.end(), l) == r.links.end()) continue;
          crossed = true;
          if (!r.crossed_by_flow) {
            r.crossed_by_flow = true;
            r.first_crossed = now;
          }
          ++per_link[{i, l.value()}];
        }
        if (!crossed) continue;
        if (r.fault.kind == FaultKind::kLinkLossy || (!IsGray(r.fault.kind) && x.sample.errors)) {
          lossy = true;
        } else if (IsGray(r.fault.kind)) {
          congested = true;
        }
      }
      if (options_.nic_signals && (lossy || congested)) {
        for (core::NodeId nic : {x.sample.src_nic, x.sample.dst_nic}) {
          auto& [loss, congestion] = nic_hits[nic.value()];
          ++(lossy ? loss : congestion);
        }
      }
      samples.push_back(x.sample);
    }
    host.ObserveFlows(j, samples);
  }
  // The host agents' probes: every running job's, including one that reported no flow.
  for (uint32_t j = 0; j < jobs.jobs().size(); ++j) {
    if (jobs.job(j).status != JobStatus::kRunning) continue;
    std::vector<core::FlowSample> probes = MeasureProbes(j, fabric, host);
    if (!probes.empty()) {
      result_.probe_samples += probes.size();
      host.ObserveHostProbes(j, probes);
    }
  }
  for (size_t i : active_) {
    FaultRecord& r = result_.fault_records[i];
    for (core::LinkId l : r.links) r.limited_a_flow = r.limited_a_flow || fabric.LimitsAFlow(l);
  }
  for (const auto& [key, n] : per_link) {
    FaultRecord& r = result_.fault_records[key.first];
    r.max_flows_per_link = std::max(r.max_flows_per_link, n);
  }
  // The host agents' NIC counters of this round (a NIC with nothing to count reports zeros,
  // which the rules ignore: left out).
  for (const auto& [nic, hits] : nic_hits) {
    core::NicCounterSignal s;
    s.nic = core::NodeId(nic);
    s.interval = options_.report_interval;
    const double per_flow = options_.nic_loss_per_flow_per_s * s.interval.ToSeconds();
    s.loss = static_cast<uint64_t>(per_flow * hits.first);
    s.congestion = static_cast<uint64_t>(per_flow * hits.second);
    s.source = "simulated host agent NIC counters";
    host.ObserveNicCounters(s);
  }
}

bool FaultInjector::Handle(Duration now, Fabric& fabric, Metrics& metrics, JobModel& jobs,
                           PlanApplier& host) {
  bool changed = false;
  while (!queue_.empty() && queue_.begin()->first <= now) {
    const Ev e = queue_.begin()->second;
    queue_.erase(queue_.begin());
    switch (e.kind) {
      case Kind::kStart:
        Start(e.fault, now, fabric, metrics, jobs);
        changed = true;
        break;
      case Kind::kEnd:
        End(e.fault, now, fabric, metrics);
        changed = true;
        break;
      case Kind::kSwitch:
        for (core::LinkId l : result_.fault_records[e.fault].links) {
          core::LinkStateSignal s;
          s.link = l;
          s.up = e.up;
          s.source = "simulated switch port (fault #" + std::to_string(e.fault) + ")";
          host.ObserveLinkState(s);
        }
        break;
    }
  }
  if (options_.flow_reports && next_report_ <= now) {
    Heartbeat(now, fabric, jobs, host);
    if (options_.switch_signals) Counters(host);
    next_report_ = now + options_.report_interval;
  }
  return changed;
}

}  // namespace crux::sim::internal
