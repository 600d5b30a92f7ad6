// Measurement of a run (docs/simulator.md, section 5): the sampling bins (busy and alive GPU-time,
// running jobs), the bits carried and the capacity offered per link class, and the byte
// accounting (sent = delivered + in flight). Everything is credited as the run goes (or, over a
// fast-forward sleep, at the group's rates) and turned into SimResult fields by Fill().
//
// Internal to crux::sim. Thread-safety: none.
#ifndef CRUX_SIM_SRC_METRICS_METRICS_H_
#define CRUX_SIM_SRC_METRICS_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "crux/core/base/units.h"
#include "crux/core/topology/topology.h"
#include "crux/sim/sim_types.h"

namespace crux::sim::internal {

class Metrics {
 public:
  // REQUIRES: horizon > 0, sample_interval > 0 (ValidateSimInput).
  Metrics(const core::Topology& topo, core::Duration horizon, core::Duration sample_interval,
          int gpus_per_host);

  // GPU-time busy computing over [start, end) (clipped to the horizon), `weight` GPUs (a GPU
  // count, or GPUs x a busy fraction during a sleep).
  void AddBusy(core::Duration start, core::Duration end, double weight);
  // A job's lifetime [arrival, end) on `gpus` GPUs: alive GPU-time and running-job counts.
  void AddLifetime(core::Duration arrival, core::Duration end, int gpus);

  // Link classes: "host-nic", "tor-agg", ... (NodeKinds at both ends, lower tier first).
  size_t num_classes() const { return class_names_.size(); }
  int ClassOf(core::LinkId l) const { return link_class_[l.value()]; }
  void AddClassBits(int link_class, double bits) { class_bits_[link_class] += bits; }
  // Link `l` goes from `old_bps` to `new_bps` at `now` (capacity is integrated over time).
  void CapacityChanged(core::LinkId l, double old_bps, double new_bps, core::Duration now);
  // Integrates capacity up to `now` (clipped to the horizon).
  void IntegrateCapacity(core::Duration now);

  void Sent(double bytes) { bytes_sent_ += bytes; }
  void Delivered(double bytes) { bytes_delivered_ += bytes; }
  void InFlight(double bytes) { bytes_in_flight_ += bytes; }

  // GPUs of the cluster (hosts x gpus_per_host).
  int64_t total_gpus() const { return total_gpus_; }
  // Samples, link-class utilisation and bytes into `r`.
  void Fill(SimResult& r) const;

 private:
  void Credit(std::vector<double>& bins, int64_t start, int64_t end, double weight);

  int64_t horizon_;
  std::vector<int> link_class_;
  std::vector<std::string> class_names_;
  std::vector<double> class_bits_;
  std::vector<double> class_cap_;       // Current summed capacity (bps).
  std::vector<double> class_cap_time_;  // Integral of capacity over time (bits).
  int64_t cap_t_ = 0;
  // Sampling bins: num_bins_ over the horizon, but the vectors only grow as far as activity
  // reaches (an idle tail costs nothing until the samples are written).
  int64_t bin_ns_ = 0;
  int64_t num_bins_ = 0;
  std::vector<double> bin_busy_;   // GPU-ns computing.
  std::vector<double> bin_alive_;  // GPU-ns of running jobs.
  std::vector<int> bin_running_;   // Difference array of running jobs (<= num_bins_ + 1).
  int64_t total_gpus_ = 0;
  double bytes_sent_ = 0;
  double bytes_delivered_ = 0;
  double bytes_in_flight_ = 0;
};

}  // namespace crux::sim::internal

#endif  // CRUX_SIM_SRC_METRICS_METRICS_H_
