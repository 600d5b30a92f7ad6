#include "metrics/metrics.h"

#include <algorithm>
#include <map>
#include <utility>

namespace crux::sim::internal {
namespace {

int Tier(core::NodeKind k) {
  switch (k) {
    case core::NodeKind::kHost:
      return 0;
    case core::NodeKind::kNvSwitch:
    case core::NodeKind::kPcieSwitch:
      return 1;
    case core::NodeKind::kNic:
      return 2;
    case core::NodeKind::kTor:
      return 3;
    case core::NodeKind::kAgg:
      return 4;
    case core::NodeKind::kCore:
      return 5;
    case core::NodeKind::kSwitch:
      return 6;
  }
  return 7;
}

std::string LinkClass(const core::Topology& topo, core::LinkId l) {
  core::NodeKind a = topo.node(topo.link(l).src).kind;
  core::NodeKind b = topo.node(topo.link(l).dst).kind;
  if (Tier(b) < Tier(a)) std::swap(a, b);
  return std::string(core::NodeKindName(a)) + "-" + std::string(core::NodeKindName(b));
}

}  // namespace

Metrics::Metrics(const core::Topology& topo, core::Duration horizon, core::Duration sample_interval,
                 int gpus_per_host)
    : horizon_(horizon.nanos()) {
  const size_t nl = topo.num_links();
  link_class_.assign(nl, 0);
  std::map<std::string, int> class_index;
  std::vector<double> cap(nl, 0);
  for (size_t i = 0; i < nl; ++i) {
    const core::LinkId l(static_cast<uint32_t>(i));
    const core::Link& link = topo.link(l);
    cap[i] = link.up ? link.capacity.ToBitsPerSec() : 0.0;
    const std::string name = LinkClass(topo, l);
    auto [it, inserted] = class_index.emplace(name, static_cast<int>(class_names_.size()));
    if (inserted) class_names_.push_back(name);
    link_class_[i] = it->second;
  }
  class_bits_.assign(class_names_.size(), 0);
  class_cap_.assign(class_names_.size(), 0);
  class_cap_time_.assign(class_names_.size(), 0);
  for (size_t i = 0; i < nl; ++i) class_cap_[link_class_[i]] += cap[i];

  total_gpus_ = static_cast<int64_t>(topo.hosts().size()) * gpus_per_host;
  bin_ns_ = sample_interval.nanos();
  num_bins_ = horizon_ / bin_ns_ + (horizon_ % bin_ns_ != 0 ? 1 : 0);  // No overflow.
}

void Metrics::Credit(std::vector<double>& bins, int64_t start, int64_t end, double weight) {
  start = std::max<int64_t>(start, 0);
  end = std::min(end, horizon_);
  if (end <= start || weight == 0) return;
  int64_t b = start / bin_ns_;
  const int64_t last = std::min<int64_t>((end - 1) / bin_ns_, num_bins_ - 1);
  if (last >= static_cast<int64_t>(bins.size())) bins.resize(static_cast<size_t>(last) + 1, 0.0);
  while (start < end && b < static_cast<int64_t>(bins.size())) {
    const int64_t bin_end = std::min((b + 1) * bin_ns_, end);
    bins[b] += weight * static_cast<double>(bin_end - start);
    start = bin_end;
    ++b;
  }
}

void Metrics::AddBusy(core::Duration start, core::Duration end, double weight) {
  Credit(bin_busy_, start.nanos(), end.nanos(), weight);
}

void Metrics::AddLifetime(core::Duration arrival_d, core::Duration end_d, int gpus) {
  const int64_t arrival = arrival_d.nanos();
  const int64_t end = end_d.nanos();
  Credit(bin_alive_, arrival, end, gpus);
  const int64_t b0 = arrival / bin_ns_;
  const int64_t b1 = std::min(end <= arrival ? b0 : (end - 1) / bin_ns_ + 1, num_bins_);
  if (b0 < num_bins_) {
    if (b1 >= static_cast<int64_t>(bin_running_.size())) {
      bin_running_.resize(static_cast<size_t>(b1) + 1, 0);
    }
    bin_running_[b0] += 1;
    bin_running_[b1] -= 1;
  }
}

void Metrics::IntegrateCapacity(core::Duration now) {
  const int64_t t = std::min(now.nanos(), horizon_);
  if (t <= cap_t_) return;
  const double dt = static_cast<double>(t - cap_t_) * 1e-9;
  for (size_t c = 0; c < class_cap_.size(); ++c) class_cap_time_[c] += class_cap_[c] * dt;
  cap_t_ = t;
}

void Metrics::CapacityChanged(core::LinkId l, double old_bps, double new_bps, core::Duration now) {
  IntegrateCapacity(now);
  class_cap_[link_class_[l.value()]] += new_bps - old_bps;
}

void Metrics::Fill(SimResult& r) const {
  for (size_t c = 0; c < class_names_.size(); ++c) {
    r.link_class_utilization[class_names_[c]] =
        class_cap_time_[c] > 0 ? class_bits_[c] / class_cap_time_[c] : 0;
  }
  int running = 0;
  r.samples.reserve(static_cast<size_t>(num_bins_));
  for (int64_t b = 0; b < num_bins_; ++b) {
    const size_t i = static_cast<size_t>(b);
    if (i < bin_running_.size()) running += bin_running_[i];
    const double busy_b = i < bin_busy_.size() ? bin_busy_[i] : 0.0;
    const double alive_b = i < bin_alive_.size() ? bin_alive_[i] : 0.0;
    Sample smp;
    smp.t = core::Duration::Nanos(b * bin_ns_);
    const int64_t len = std::min<int64_t>(bin_ns_, horizon_ - b * bin_ns_);
    smp.gpu_utilization = alive_b > 0 ? busy_b / alive_b : 0;
    smp.cluster_utilization =
        total_gpus_ > 0 ? busy_b / (static_cast<double>(total_gpus_) * static_cast<double>(len))
                        : 0;
    smp.running_jobs = running;
    r.samples.push_back(smp);
  }
  r.bytes_sent = bytes_sent_;
  r.bytes_delivered = bytes_delivered_;
  r.bytes_in_flight = bytes_in_flight_;
}

}  // namespace crux::sim::internal
