#include "port_watcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace crux::switch_adapters {

PortTracker::PortTracker(std::map<std::string, std::string> fixed) : fixed_(std::move(fixed)) {}

void PortTracker::SetDeviceNeighbors(const std::map<std::string, std::string>& device) {
  device_ = device;
}

std::string PortTracker::NeighborOf(const std::string& port) const {
  if (auto it = fixed_.find(port); it != fixed_.end()) return it->second;
  if (auto it = device_.find(port); it != device_.end()) return it->second;
  return "";
}

std::optional<TelemetryReport> PortTracker::Observe(const std::vector<PortReading>& readings,
                                                    core::Duration now) {
  TelemetryReport report;
  report.state_changed = first_;
  bool with_counters = false;
  for (const PortReading& r : readings) {
    Last& last = last_[r.port];
    PortReport p;
    p.port = r.port;
    p.neighbor = NeighborOf(r.port);
    p.oper_up = r.oper_up;
    if (r.oper_up != last.oper_up) report.state_changed = true;
    last.oper_up = r.oper_up;
    if (r.counters) {
      with_counters = true;
      if (last.counters && now > last.counters_at) {
        CounterJudgement j =
            JudgeCounters(*last.counters, *r.counters, r.speed, now - last.counters_at);
        switch (j.verdict) {
          case CounterVerdict::kOk:
            p.delta = j.delta;
            p.interval = now - last.counters_at;
            break;
          case CounterVerdict::kReset:
            report.resets.push_back(r.port + ": " + j.why);
            break;
          case CounterVerdict::kImplausible:
            report.implausible.push_back(r.port + ": " + j.why);
            break;
        }
      }
      last.counters = r.counters;
      last.counters_at = now;
    }
    report.ports.push_back(std::move(p));
  }
  first_ = false;
  if (!report.state_changed && !with_counters) return std::nullopt;
  return report;
}

PortWatcher::PortWatcher(std::unique_ptr<PortMonitor> monitor, Options options)
    : monitor_(std::move(monitor)),
      options_(std::move(options)),
      tracker_(options_.neighbors),
      thread_([this] { Loop(); }) {}

PortWatcher::~PortWatcher() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

std::vector<TelemetryReport> PortWatcher::Take() {
  MutexLock lock(&mu_);
  std::vector<TelemetryReport> out(std::make_move_iterator(queue_.begin()),
                                   std::make_move_iterator(queue_.end()));
  queue_.clear();
  return out;
}

std::string PortWatcher::last_error() const {
  MutexLock lock(&mu_);
  return last_error_;
}

PortWatcher::Counters PortWatcher::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

void PortWatcher::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto since = [start = Clock::now()] {
    return core::Duration::Nanos(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
  };
  core::Duration next_counters;   // Zero: the first reading has counters.
  core::Duration next_neighbors;  // Zero: read at once (--neighbors entries win over them).
  bool logged_error = false;
  while (true) {
    const core::Duration now = since();
    if (now >= next_neighbors) {
      core::Result<std::map<std::string, std::string>> nb = monitor_->Neighbors();
      if (nb.ok()) {
        tracker_.SetDeviceNeighbors(*nb);
        next_neighbors = now + options_.neighbor_refresh;
      } else {
        next_neighbors = now + options_.state_poll;  // The device is not there yet: soon again.
      }
    }
    const bool with_counters = now >= next_counters;
    core::Result<std::vector<PortReading>> readings = monitor_->ReadPorts(with_counters);
    {
      MutexLock lock(&mu_);
      ++counters_.reads;
      if (!readings.ok()) {
        ++counters_.read_errors;
        last_error_ = readings.status().ToString();
      }
    }
    if (!readings.ok()) {
      if (!logged_error) {
        spdlog::warn("port watcher: {} (retrying every {} ms)", readings.status().ToString(),
                     options_.state_poll.nanos() / 1000000);
        logged_error = true;
      }
    } else {
      if (logged_error) spdlog::info("port watcher: ports readable again");
      logged_error = false;
      if (with_counters) next_counters = now + options_.counter_poll;
      if (std::optional<TelemetryReport> report = tracker_.Observe(*readings, now)) {
        uint64_t resets = 0, implausible = 0;  // Totals before this report.
        {
          MutexLock lock(&mu_);
          resets = counters_.counter_resets;
          implausible = counters_.implausible_samples;
          counters_.counter_resets += report->resets.size();
          counters_.implausible_samples += report->implausible.size();
        }
        // A dropped sample is logged: the first ten of each kind, then every hundredth.
        auto note = [](const std::vector<std::string>& items, uint64_t count, const char* what) {
          for (const std::string& item : items) {
            if (++count <= 10 || count % 100 == 0) {
              spdlog::warn("port watcher: dropped a counter sample ({}; {} so far): {}", what,
                           count, item);
            }
          }
        };
        note(report->resets, resets, "a reset, not a wrap");
        note(report->implausible, implausible, "implausible, not reported to cruxd");
        MutexLock lock(&mu_);
        ++counters_.reports;
        queue_.push_back(std::move(*report));
        while (queue_.size() > options_.max_queued) {
          queue_.pop_front();
          ++counters_.dropped;
        }
      }
    }
    const core::Duration wake = std::min(now + options_.state_poll, next_counters);
    const auto wait = std::chrono::nanoseconds(std::max<int64_t>(0, (wake - since()).nanos()));
    MutexLock lock(&mu_);
    if (cv_.WaitFor(&mu_, wait, [this]() CRUX_REQUIRES(mu_) { return stop_; })) return;
  }
}

}  // namespace crux::switch_adapters
