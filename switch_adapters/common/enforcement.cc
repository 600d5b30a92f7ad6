#include "crux/switch_adapters/enforcement.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "crux/core/base/line_rate.h"

namespace crux::switch_adapters {
namespace {

// The QUEUE flex-counter group's poll lag (as for port telemetry, port_monitor.cc): a delta may
// hold up to one extra poll interval of traffic.
constexpr core::Duration kQueueCounterLag = core::Duration::Millis(10000);

std::string JoinInts(const std::set<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out.empty() ? "none" : out;
}

std::string Rate(double pps) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", pps);
  return buf;
}

// The first difference of one map kind (see FirstMapDifference).
std::string MapDifference(const std::string& port, const char* kind, const char* key_name,
                          const char* value_name, const std::map<int, int>& want,
                          const std::optional<std::map<int, int>>& have,
                          const std::string& object) {
  if (!have) {
    return port + ": no " + kind + " map is bound in the ASIC; the plan maps " +
           std::to_string(want.size()) + " " + (want.size() == 1 ? "entry" : "entries");
  }
  const std::string where = port + " " + kind + (object.empty() ? "" : " (" + object + ")") + ": ";
  auto w = want.begin();
  auto h = have->begin();
  while (w != want.end() || h != have->end()) {
    if (h == have->end() || (w != want.end() && w->first < h->first)) {
      return where + key_name + " " + std::to_string(w->first) + " missing, the plan says " +
             value_name + " " + std::to_string(w->second);
    }
    if (w == want.end() || h->first < w->first) {
      return where + key_name + " " + std::to_string(h->first) + " -> " + value_name + " " +
             std::to_string(h->second) + " is not in the plan";
    }
    if (w->second != h->second) {
      return where + key_name + " " + std::to_string(w->first) + " -> " + value_name + " " +
             std::to_string(h->second) + ", the plan says " + value_name + " " +
             std::to_string(w->second);
    }
    ++w;
    ++h;
  }
  return "";
}

}  // namespace

std::string FirstMapDifference(const core::SwitchQosState& desired,
                               const AppliedPortMaps& applied) {
  std::string d = MapDifference(applied.port, "DSCP_TO_TC", "dscp", "tc", desired.dscp_to_tc,
                                applied.dscp_to_tc, applied.dscp_to_tc_object);
  if (!d.empty()) return d;
  return MapDifference(applied.port, "TC_TO_QUEUE", "tc", "queue", desired.tc_to_queue,
                       applied.tc_to_queue, applied.tc_to_queue_object);
}

int QueueOfTc(const core::SwitchQosState& state, int tc) {
  auto it = state.tc_to_queue.find(tc);
  return it == state.tc_to_queue.end() ? tc : it->second;
}

std::set<int> PlannedQueues(const core::SwitchQosState& state) {
  std::set<int> out;
  for (const auto& [dscp, tc] : state.dscp_to_tc) out.insert(QueueOfTc(state, tc));
  return out;
}

std::set<int> JobQueues(const EnforcementPlan& plan) {
  std::set<int> out;
  for (const auto& [dscp, tc] : plan.state.dscp_to_tc) {
    if (plan.job_tcs.count(tc)) out.insert(QueueOfTc(plan.state, tc));
  }
  out.erase(0);
  return out;
}

core::Status ValidateQueueCheckOptions(const QueueCheckOptions& o) {
  if (!std::isfinite(o.silent_max_pps) || o.silent_max_pps < 0) {
    return core::InvalidArgumentError("--verify-silent-pps: must be a number >= 0");
  }
  if (!std::isfinite(o.queue0_min_pps) || o.queue0_min_pps <= o.silent_max_pps) {
    return core::InvalidArgumentError(
        "--verify-queue0-pps: must be a number above --verify-silent-pps");
  }
  if (o.queue0_intervals < 1) {
    return core::InvalidArgumentError("--verify-queue0-intervals: must be >= 1");
  }
  if (o.min_interval <= core::Duration::Zero()) {
    return core::InvalidArgumentError("--verify-interval-ms: must be > 0");
  }
  return core::Status::Ok();
}

QueueTrafficJudge::QueueTrafficJudge(QueueCheckOptions options) : options_(options) {}

QueueTrafficJudge::Verdict QueueTrafficJudge::Observe(
    const EnforcementPlan& plan, const std::vector<QueueCounterReading>& readings,
    core::Duration now) {
  auto rebaseline = [&] {
    baseline_.clear();
    for (const QueueCounterReading& r : readings) baseline_[r.port] = r.packets;
    baseline_at_ = now;
    has_baseline_ = true;
  };
  if (!plan_ || !plan_->state.SameDeviceState(plan.state) || plan_->job_tcs != plan.job_tcs) {
    plan_ = plan;
    queue0_streak_ = 0;
    last_ = {};
    rebaseline();
    return last_;
  }
  if (!has_baseline_ || now < baseline_at_) {
    rebaseline();
    return last_;
  }
  const core::Duration interval = now - baseline_at_;
  if (interval < options_.min_interval) {
    Verdict v = last_;
    v.dropped.clear();
    return v;
  }

  const std::set<int> planned = PlannedQueues(plan.state);
  const std::set<int> job_queues = JobQueues(plan);
  const double seconds = interval.ToSeconds();
  const double bound =
      core::MaxFramesAtLineRate(core::kFastestPortRate, interval + kQueueCounterLag);
  Verdict v;
  std::string unused;  // Rule 1's first finding.
  double job_pps = 0;  // Rule 2: all job queues of all ports.
  bool job_sample_lost = false;
  std::string busiest_port;  // Rule 2: the port with the most queue-0 traffic.
  double busiest_pps = -1;
  for (const QueueCounterReading& r : readings) {
    auto base = baseline_.find(r.port);
    if (base == baseline_.end()) continue;  // New port: a baseline now, a delta next time.
    for (const auto& [queue, after] : r.packets) {
      auto b = base->second.find(queue);
      if (b == base->second.end()) continue;
      const uint64_t before = b->second;
      const std::string name = r.port + " queue " + std::to_string(queue);
      if (after < before) {
        v.dropped.push_back(name + ": SAI_QUEUE_STAT_PACKETS went backwards (" +
                            std::to_string(before) + " -> " + std::to_string(after) +
                            "): counters were reset");
        if (job_queues.count(queue)) job_sample_lost = true;
        continue;
      }
      const uint64_t delta = after - before;
      if (static_cast<double>(delta) > bound) {
        v.dropped.push_back(name + ": SAI_QUEUE_STAT_PACKETS grew by " + std::to_string(delta) +
                            " in " + std::to_string(interval.nanos() / 1000000) +
                            " ms: more than any port can count");
        if (job_queues.count(queue)) job_sample_lost = true;
        continue;
      }
      ++v.queues_checked;
      const double pps = static_cast<double>(delta) / seconds;
      if (queue != 0 && !planned.count(queue) && pps > options_.silent_max_pps && unused.empty()) {
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%.1f", seconds);
        unused = "traffic in a queue the plan leaves unused: " + name + " carried " +
                 std::to_string(delta) + " packets in " + secs + " s (" + Rate(pps) +
                 " pkt/s, more than " + Rate(options_.silent_max_pps) +
                 "); the plan maps no DSCP to it (queues in use: " + JoinInts(planned) + ")";
      }
      if (job_queues.count(queue)) job_pps += pps;
      if (queue == 0 && pps > busiest_pps) {
        busiest_pps = pps;
        busiest_port = r.port;
      }
    }
  }

  std::string queue0;
  if (!job_queues.empty() && v.queues_checked > 0 && !job_sample_lost) {
    if (job_pps <= options_.silent_max_pps && busiest_pps >= options_.queue0_min_pps) {
      ++queue0_streak_;
    } else {
      queue0_streak_ = 0;
    }
    if (queue0_streak_ >= options_.queue0_intervals) {
      std::set<int> colours;
      for (const auto& [dscp, tc] : plan.state.dscp_to_tc) {
        if (plan.job_tcs.count(tc)) colours.insert(dscp);
      }
      queue0 = "job traffic in queue 0: " + busiest_port + " queue 0 carried " + Rate(busiest_pps) +
               " pkt/s (at least " + Rate(options_.queue0_min_pps) + ") for " +
               std::to_string(queue0_streak_) +
               " intervals in a row while the queues of the job colours crossing this switch "
               "(queues " +
               JoinInts(job_queues) + "; DSCP " + JoinInts(colours) +
               ") stayed silent on every port";
    }
  }
  v.difference = !unused.empty() ? unused : queue0;
  rebaseline();
  last_ = v;
  last_.dropped.clear();
  return v;
}

}  // namespace crux::switch_adapters
