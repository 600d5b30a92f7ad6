#include "crux/core/control/qos.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

namespace crux::core {
namespace {

std::string Key(std::string_view base, size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

Status CheckRange(const std::string& key, int v, int lo, int hi) {
  if (v < lo || v > hi) {
    return InvalidArgumentError(key + ": " + std::to_string(v) + " out of range " +
                                std::to_string(lo) + ".." + std::to_string(hi));
  }
  return Status::Ok();
}

bool ValidClassName(const std::string& n) {
  if (n.empty()) return false;
  for (char c : n) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string_view SchedulerTypeName(SchedulerType t) {
  return t == SchedulerType::kStrict ? "STRICT" : "DWRR";
}

Result<SchedulerType> ParseSchedulerType(std::string_view s) {
  if (s == "STRICT") return SchedulerType::kStrict;
  if (s == "DWRR") return SchedulerType::kDwrr;
  return InvalidArgumentError("scheduler type '" + std::string(s) + "' is not one of STRICT, DWRR");
}

Status ValidateQosConfig(const QosConfig& c) {
  CRUX_RETURN_IF_ERROR(CheckRange("qos.num_tcs", c.num_tcs, 1, kMaxTrafficClasses));
  const int max_tc = c.num_tcs - 1;
  // Who owns each DSCP / TC, for collision messages.
  std::map<int, std::string> dscp_owner;
  std::map<int, std::string> tc_owner;

  if (c.dscp_pool.empty()) return InvalidArgumentError("qos.dscp_pool: must not be empty");
  for (size_t i = 0; i < c.dscp_pool.size(); ++i) {
    std::string key = Key("qos.dscp_pool", i);
    CRUX_RETURN_IF_ERROR(CheckRange(key, c.dscp_pool[i], 0, kMaxDscp));
    auto [it, inserted] = dscp_owner.emplace(c.dscp_pool[i], key);
    if (!inserted) {
      return InvalidArgumentError(key + ": DSCP " + std::to_string(c.dscp_pool[i]) +
                                  " already used by " + it->second);
    }
  }

  if (c.level_tcs.empty()) return InvalidArgumentError("qos.level_tcs: must not be empty");
  for (size_t i = 0; i < c.level_tcs.size(); ++i) {
    std::string key = Key("qos.level_tcs", i);
    CRUX_RETURN_IF_ERROR(CheckRange(key, c.level_tcs[i], 0, max_tc));
    auto [it, inserted] = tc_owner.emplace(c.level_tcs[i], key);
    if (!inserted) {
      return InvalidArgumentError(key + ": TC " + std::to_string(c.level_tcs[i]) +
                                  " already used by " + it->second);
    }
  }
  if (c.jobs_strict) {
    if (!c.level_weights.empty()) {
      return InvalidArgumentError("qos.level_weights: only allowed when jobs_strict is false");
    }
  } else {
    if (c.level_weights.size() != c.level_tcs.size()) {
      return InvalidArgumentError("qos.level_weights: needs one weight per level_tcs entry (" +
                                  std::to_string(c.level_tcs.size()) + "), got " +
                                  std::to_string(c.level_weights.size()));
    }
    for (size_t i = 0; i < c.level_weights.size(); ++i) {
      CRUX_RETURN_IF_ERROR(CheckRange(Key("qos.level_weights", i), c.level_weights[i], 1, 100));
    }
  }

  std::set<std::string> names;
  for (size_t r = 0; r < c.reserved.size(); ++r) {
    const ReservedClass& rc = c.reserved[r];
    std::string base = Key("qos.reserved", r);
    if (!ValidClassName(rc.name)) {
      return InvalidArgumentError(base + ".name: '" + rc.name + "' must match [a-z0-9_-]+");
    }
    if (!names.insert(rc.name).second) {
      return InvalidArgumentError(base + ".name: duplicate class '" + rc.name + "'");
    }
    if (rc.dscps.empty()) return InvalidArgumentError(base + ".dscps: must not be empty");
    for (size_t i = 0; i < rc.dscps.size(); ++i) {
      std::string key = Key(base + ".dscps", i);
      CRUX_RETURN_IF_ERROR(CheckRange(key, rc.dscps[i], 0, kMaxDscp));
      auto [it, inserted] = dscp_owner.emplace(rc.dscps[i], key);
      if (!inserted) {
        return InvalidArgumentError(key + ": DSCP " + std::to_string(rc.dscps[i]) +
                                    " already used by " + it->second);
      }
    }
    CRUX_RETURN_IF_ERROR(CheckRange(base + ".tc", rc.tc, 0, max_tc));
    auto [it, inserted] = tc_owner.emplace(rc.tc, base + ".tc");
    if (!inserted) {
      return InvalidArgumentError(base + ".tc: TC " + std::to_string(rc.tc) + " already used by " +
                                  it->second);
    }
    if (rc.scheduler == SchedulerType::kStrict) {
      if (rc.weight != 0) {
        return InvalidArgumentError(base + ".weight: must be 0 (unset) for a STRICT class");
      }
    } else {
      CRUX_RETURN_IF_ERROR(CheckRange(base + ".weight", rc.weight, 1, 100));
    }
  }

  CRUX_RETURN_IF_ERROR(CheckRange("qos.default_tc", c.default_tc, 0, max_tc));
  if (auto it = tc_owner.find(c.default_tc); it != tc_owner.end()) {
    return InvalidArgumentError("qos.default_tc: TC " + std::to_string(c.default_tc) +
                                " already used by " + it->second);
  }
  CRUX_RETURN_IF_ERROR(CheckRange("qos.default_weight", c.default_weight, 1, 100));
  return Status::Ok();
}

Status ValidateSwitchQosState(const SwitchQosState& s) {
  if (s.switch_name.empty()) return InvalidArgumentError("switch_name: must not be empty");
  for (const auto& [dscp, tc] : s.dscp_to_tc) {
    std::string key = "dscp_to_tc[" + std::to_string(dscp) + "]";
    CRUX_RETURN_IF_ERROR(CheckRange(key + " (DSCP)", dscp, 0, kMaxDscp));
    CRUX_RETURN_IF_ERROR(CheckRange(key, tc, 0, kMaxTrafficClasses - 1));
  }
  for (const auto& [tc, q] : s.tc_to_queue) {
    std::string key = "tc_to_queue[" + std::to_string(tc) + "]";
    CRUX_RETURN_IF_ERROR(CheckRange(key + " (TC)", tc, 0, kMaxTrafficClasses - 1));
    CRUX_RETURN_IF_ERROR(CheckRange(key, q, 0, kMaxTrafficClasses - 1));
  }
  std::set<int> queues;
  for (size_t i = 0; i < s.schedulers.size(); ++i) {
    const QueueScheduler& q = s.schedulers[i];
    std::string key = Key("schedulers", i);
    CRUX_RETURN_IF_ERROR(CheckRange(key + ".queue", q.queue, 0, kMaxTrafficClasses - 1));
    if (!queues.insert(q.queue).second) {
      return InvalidArgumentError(key + ".queue: queue " + std::to_string(q.queue) +
                                  " has two schedulers");
    }
    if (q.type == SchedulerType::kStrict) {
      if (q.weight != 0) return InvalidArgumentError(key + ".weight: must be 0 for STRICT");
    } else {
      CRUX_RETURN_IF_ERROR(CheckRange(key + ".weight", q.weight, 1, 100));
    }
  }
  for (size_t i = 0; i < s.pfc_enable.size(); ++i) {
    CRUX_RETURN_IF_ERROR(
        CheckRange(Key("pfc_enable", i), s.pfc_enable[i], 0, kMaxTrafficClasses - 1));
  }
  return Status::Ok();
}

int LevelTc(const QosConfig& config, int level) {
  size_t i = std::min(static_cast<size_t>(std::max(level, 0)), config.level_tcs.size() - 1);
  return config.level_tcs[i];
}

// ---- DscpPool ----

Result<DscpPool> DscpPool::Create(const std::vector<int>& dscps) {
  if (dscps.empty()) return InvalidArgumentError("qos.dscp_pool: must not be empty");
  std::set<int> seen;
  for (size_t i = 0; i < dscps.size(); ++i) {
    std::string key = Key("qos.dscp_pool", i);
    CRUX_RETURN_IF_ERROR(CheckRange(key, dscps[i], 0, kMaxDscp));
    if (!seen.insert(dscps[i]).second) {
      return InvalidArgumentError(key + ": duplicate DSCP " + std::to_string(dscps[i]));
    }
  }
  DscpPool pool;
  pool.pool_ = dscps;
  return pool;
}

Result<int> DscpPool::Acquire(const std::string& job_id, int level) {
  if (job_id.empty()) return InvalidArgumentError("job id: must not be empty");
  if (level < 0) {
    return InvalidArgumentError("job '" + job_id + "' level: must be >= 0, got " +
                                std::to_string(level));
  }
  if (auto it = jobs_.find(job_id); it != jobs_.end()) {
    ChangeLevel(it->second, level);
    return it->second.dscp;
  }
  int chosen = -1;
  for (int d : pool_) {
    auto m = members_.find(d);
    if (m == members_.end() || m->second.empty()) {
      chosen = d;
      break;
    }
  }
  if (chosen < 0) {
    // Exhausted: share the colour whose best (lowest) member level is closest to `level`.
    int best_dist = std::numeric_limits<int>::max();
    size_t best_members = std::numeric_limits<size_t>::max();
    for (int d : pool_) {
      const auto& members = members_.at(d);
      const int min_level = *member_levels_.at(d).begin();  // Non-empty: the pool is full.
      int dist = std::abs(min_level - level);
      if (dist < best_dist || (dist == best_dist && members.size() < best_members)) {
        best_dist = dist;
        best_members = members.size();
        chosen = d;
      }
    }
  }
  AddMember(job_id, JobEntry{chosen, level});
  return chosen;
}

void DscpPool::AddMember(const std::string& job_id, const JobEntry& entry) {
  jobs_[job_id] = entry;
  members_[entry.dscp].insert(job_id);
  member_levels_[entry.dscp].insert(entry.level);
}

void DscpPool::ChangeLevel(JobEntry& entry, int level) {
  std::multiset<int>& levels = member_levels_[entry.dscp];
  levels.erase(levels.find(entry.level));
  levels.insert(level);
  entry.level = level;
}

Status DscpPool::Restore(const std::string& job_id, int dscp, int level) {
  if (job_id.empty()) return InvalidArgumentError("job id: must not be empty");
  if (std::find(pool_.begin(), pool_.end(), dscp) == pool_.end()) {
    return InvalidArgumentError("job '" + job_id + "' dscp: " + std::to_string(dscp) +
                                " is not in qos.dscp_pool");
  }
  if (level < 0) {
    return InvalidArgumentError("job '" + job_id + "' level: must be >= 0, got " +
                                std::to_string(level));
  }
  if (auto it = jobs_.find(job_id); it != jobs_.end()) {
    if (it->second.dscp != dscp) {
      return AlreadyExistsError("job '" + job_id + "' already holds DSCP " +
                                std::to_string(it->second.dscp));
    }
    ChangeLevel(it->second, level);
    return Status::Ok();
  }
  AddMember(job_id, JobEntry{dscp, level});
  return Status::Ok();
}

Status DscpPool::SetLevel(const std::string& job_id, int level) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NotFoundError("job '" + job_id + "' holds no DSCP colour");
  if (level < 0) {
    return InvalidArgumentError("job '" + job_id + "' level: must be >= 0, got " +
                                std::to_string(level));
  }
  ChangeLevel(it->second, level);
  return Status::Ok();
}

void DscpPool::Release(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  auto m = members_.find(it->second.dscp);
  if (m != members_.end()) {
    m->second.erase(job_id);
    if (m->second.empty()) members_.erase(m);
  }
  auto l = member_levels_.find(it->second.dscp);
  if (l != member_levels_.end()) {
    l->second.erase(l->second.find(it->second.level));
    if (l->second.empty()) member_levels_.erase(l);
  }
  jobs_.erase(it);
}

std::optional<int> DscpPool::ColourOf(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.dscp;
}

std::optional<int> DscpPool::LevelOf(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.level;
}

std::vector<std::string> DscpPool::MembersOf(int dscp) const {
  auto it = members_.find(dscp);
  if (it == members_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

size_t DscpPool::free_colours() const {
  size_t used = 0;
  for (const auto& [d, m] : members_) used += m.empty() ? 0 : 1;
  return pool_.size() - used;
}

size_t DscpPool::SharedJobs() const {
  size_t n = 0;
  for (const auto& [d, m] : members_) {
    if (m.size() > 1) n += m.size();
  }
  return n;
}

// ---- Desired state ----

Result<std::map<std::string, SwitchQosState>> ComputeDesiredQos(const QosConfig& config,
                                                                const Topology& topo,
                                                                const std::vector<QosJob>& jobs) {
  CRUX_RETURN_IF_ERROR(ValidateQosConfig(config));
  const std::set<int> pool(config.dscp_pool.begin(), config.dscp_pool.end());

  // The static part, shared by every switch.
  SwitchQosState base;
  for (int d = 0; d <= kMaxDscp; ++d) base.dscp_to_tc[d] = config.default_tc;
  std::set<int> lossless;
  std::map<int, QueueScheduler> sched;  // queue -> scheduler (queue == TC).
  sched[config.default_tc] = {config.default_tc, SchedulerType::kDwrr, config.default_weight};
  for (size_t i = 0; i < config.level_tcs.size(); ++i) {
    int tc = config.level_tcs[i];
    sched[tc] = config.jobs_strict
                    ? QueueScheduler{tc, SchedulerType::kStrict, 0}
                    : QueueScheduler{tc, SchedulerType::kDwrr, config.level_weights[i]};
    if (config.jobs_lossless) lossless.insert(tc);
  }
  for (const ReservedClass& rc : config.reserved) {
    for (int d : rc.dscps) base.dscp_to_tc[d] = rc.tc;
    sched[rc.tc] = {rc.tc, rc.scheduler, rc.scheduler == SchedulerType::kStrict ? 0 : rc.weight};
    if (rc.lossless) lossless.insert(rc.tc);
  }
  for (const auto& [q, s] : sched) {
    base.tc_to_queue[q] = q;
    base.schedulers.push_back(s);
  }
  if (config.pfc) base.pfc_enable.assign(lossless.begin(), lossless.end());

  // Per switch, the jobs crossing it, in id order (the order of `jobs` when it is sorted, as
  // the control loop's are; sorted here otherwise): their names need no set.
  std::vector<const QosJob*> ordered;
  ordered.reserve(jobs.size());
  for (const QosJob& j : jobs) ordered.push_back(&j);
  const auto by_id = [](const QosJob* a, const QosJob* b) { return a->id < b->id; };
  if (!std::is_sorted(ordered.begin(), ordered.end(), by_id)) {
    std::sort(ordered.begin(), ordered.end(), by_id);
  }
  std::vector<std::vector<const QosJob*>> by_switch(topo.num_nodes());
  for (const QosJob* jp : ordered) {
    const QosJob& j = *jp;
    if (!pool.count(j.dscp)) {
      return InvalidArgumentError("job '" + j.id + "' dscp: " + std::to_string(j.dscp) +
                                  " is not in qos.dscp_pool");
    }
    if (j.level < 0) {
      return InvalidArgumentError("job '" + j.id + "' level: must be >= 0, got " +
                                  std::to_string(j.level));
    }
    for (NodeId s : j.switches) {
      if (!s.valid() || s.value() >= topo.num_nodes() || !IsNetworkSwitch(topo.node(s).kind)) {
        return InvalidArgumentError("job '" + j.id + "' switches: node " +
                                    std::to_string(s.value()) + " is not a network switch");
      }
      auto& v = by_switch[s.value()];
      if (v.empty() || v.back() != &j) v.push_back(&j);  // j's repeats are consecutive.
    }
  }

  std::map<std::string, SwitchQosState> out;
  for (size_t n = 0; n < topo.num_nodes(); ++n) {
    NodeId id(static_cast<NodeId::ValueType>(n));
    const Node& node = topo.node(id);
    if (!IsNetworkSwitch(node.kind)) continue;
    SwitchQosState s = base;
    s.switch_name = node.name;
    const std::vector<const QosJob*>& crossing = by_switch[n];
    if (!crossing.empty()) {
      std::map<int, int> best_level;  // dscp -> highest-priority (lowest) level crossing here.
      s.jobs.reserve(crossing.size());
      for (const QosJob* j : crossing) {
        // Ids are unique in a plan; a repeated id (two entries for one job) is listed once.
        if (s.jobs.empty() || s.jobs.back() != j->id) s.jobs.push_back(j->id);
        auto [b, inserted] = best_level.emplace(j->dscp, j->level);
        if (!inserted) b->second = std::min(b->second, j->level);
      }
      for (const auto& [dscp, level] : best_level) s.dscp_to_tc[dscp] = LevelTc(config, level);
    }
    out.emplace(node.name, std::move(s));
  }
  return out;
}

std::vector<std::string> ChangedSwitches(const std::map<std::string, SwitchQosState>& before,
                                         const std::map<std::string, SwitchQosState>& after) {
  std::set<std::string> changed;
  for (const auto& [name, s] : after) {
    auto it = before.find(name);
    if (it == before.end() || !it->second.SameDeviceState(s)) changed.insert(name);
  }
  for (const auto& [name, s] : before) {
    if (!after.count(name)) changed.insert(name);
  }
  return {changed.begin(), changed.end()};
}

}  // namespace crux::core
