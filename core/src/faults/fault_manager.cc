#include "crux/core/faults/fault_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>

#include "crux/core/faults/planned_share.h"

namespace crux::core {
namespace {

int Rank(LinkHealth h) {
  switch (h) {
    case LinkHealth::kUp:
      return 0;
    case LinkHealth::kDegraded:
      return 1;
    case LinkHealth::kDown:
      return 2;
  }
  return 0;
}

// -1: `d` is better than `c`, 0: the same (within the capacity hysteresis), 1: worse.
int Compare(LinkHealth d, double df, LinkHealth c, double cf, double hysteresis) {
  if (Rank(d) != Rank(c)) return Rank(d) > Rank(c) ? 1 : -1;
  if (d != LinkHealth::kDegraded) return 0;
  if (df < cf * (1 - hysteresis)) return 1;
  if (df > cf * (1 + hysteresis)) return -1;
  return 0;
}

std::string WireName(const Topology& topo, LinkId id) {
  if (!id.valid() || id.value() >= topo.num_links()) return "link#" + std::to_string(id.value());
  const Link& l = topo.link(id);
  return topo.node(l.src).name + "->" + topo.node(l.dst).name;
}

std::string NodeName(const Topology& topo, NodeId id) {
  return id.valid() && id.value() < topo.num_nodes() ? topo.node(id).name
                                                     : "node#" + std::to_string(id.value());
}

std::string Pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", f * 100);
  return buf;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

double Decay(double value, Duration elapsed, Duration half_life) {
  if (elapsed <= Duration::Zero()) return value;
  return value * std::exp2(-(elapsed / half_life));
}

}  // namespace

Status ValidateFaultOptions(const FaultOptions& o) {
  const LocalisationOptions& l = o.localisation;
  if (!(l.gray_ratio > 0 && l.gray_ratio <= 1)) {
    return InvalidArgumentError("faults.gray_ratio: must be in (0, 1]");
  }
  if (l.min_flows < 1) return InvalidArgumentError("faults.min_flows: must be >= 1");
  if (o.min_jobs < 1) return InvalidArgumentError("faults.min_jobs: must be >= 1");
  if (l.iterations < 1) return InvalidArgumentError("faults.iterations: must be >= 1");
  if (!(l.lambda >= 0 && std::isfinite(l.lambda))) {
    return InvalidArgumentError("faults.lambda: must be >= 0");
  }
  const std::pair<const char*, Duration> positive[] = {
      {"evidence_window", o.evidence_window},
      {"evaluate_interval", o.evaluate_interval},
      {"baseline_half_life", o.baseline_half_life},
      {"min_dwell", o.min_dwell},
      {"stable_decay", o.stable_decay},
      {"downtime_half_life", o.downtime_half_life},
      {"quarantine_downtime", o.quarantine_downtime}};
  for (const auto& [name, d] : positive) {
    if (d <= Duration::Zero()) {
      return InvalidArgumentError(std::string("faults.") + name + ": must be > 0");
    }
  }
  if (o.max_hold < o.min_dwell) {
    return InvalidArgumentError("faults.max_hold: must be >= faults.min_dwell");
  }
  if (!(o.counter_errors_per_s > 0 && std::isfinite(o.counter_errors_per_s))) {
    return InvalidArgumentError("faults.counter_errors_per_s: must be > 0");
  }
  if (!(o.nic_loss_per_s > 0 && std::isfinite(o.nic_loss_per_s))) {
    return InvalidArgumentError("faults.nic_loss_per_s: must be > 0");
  }
  const std::pair<const char*, double> fractions[] = {
      {"counter_capacity_fraction", o.counter_capacity_fraction},
      {"min_capacity_fraction", o.min_capacity_fraction}};
  for (const auto& [name, f] : fractions) {
    if (!(f > 0 && f <= 1)) {
      return InvalidArgumentError(std::string("faults.") + name + ": must be in (0, 1]");
    }
  }
  if (!(o.capacity_hysteresis >= 0 && o.capacity_hysteresis < 1)) {
    return InvalidArgumentError("faults.capacity_hysteresis: must be in [0, 1)");
  }
  if (o.max_events < 1) return InvalidArgumentError("faults.max_events: must be >= 1");
  return ValidateProbeOptions(o.probes);
}

FaultManager::FaultManager(FaultOptions options) : options_(std::move(options)) {}

void FaultManager::SetOptions(const FaultOptions& options) {
  options_ = options;
  urgent_ = true;  // `automatic` may have changed what is in force.
}

FaultManager::LinkState& FaultManager::State(LinkId link) { return links_[link]; }

void FaultManager::OnLinkState(const LinkStateSignal& s, Duration now) {
  LinkState& st = State(s.link);
  AccrueDowntime(st, now);
  if (st.port_down != !s.up) urgent_ = true;
  // The fault lasted until now: the hold (quiet time before recovery) starts here, not at the
  // last evaluation that saw the port down.
  if (st.port_down && s.up && st.health != LinkHealth::kUp) {
    st.last_at_current = std::max(st.last_at_current, now);
  }
  st.port_down = !s.up;
  st.port_source = s.source;
}

void FaultManager::OnCounters(const CounterSignal& s, Duration now) {
  if (s.interval <= Duration::Zero()) return;
  State(s.link).counters = Counters{s, now};
  dirty_ = true;
}

void FaultManager::OnNicCounters(const NicCounterSignal& s, Duration now) {
  if (s.interval <= Duration::Zero() || !s.nic.valid()) return;
  nics_[s.nic.value()] = NicCounters{s, now};
  dirty_ = true;
}

void FaultManager::OnFlows(const std::string& job_id, const std::vector<FlowSample>& samples,
                           Duration now) {
  Store(job_id, samples, /*host=*/false, now);
}

void FaultManager::OnHostProbes(const std::string& job_id, const std::vector<FlowSample>& samples,
                                Duration now) {
  std::vector<FlowSample> probes;
  probes.reserve(samples.size());
  for (const FlowSample& f : samples) {
    if (f.probe) probes.push_back(f);
  }
  Store(job_id, probes, /*host=*/true, now);
}

void FaultManager::Store(const std::string& job_id, const std::vector<FlowSample>& samples,
                         bool host, Duration now) {
  for (const FlowSample& f : samples) {
    const FlowKey key{job_id, f.src_nic.value(), f.dst_nic.value(), f.probe, f.udp_sport, host};
    auto [it, inserted] = flows_.try_emplace(key);
    FlowRecord& r = it->second;
    if (inserted && !f.probe) {
      // A new port of a known pair (a re-pin): it starts from the pair's best recent rate, as
      // one record per pair did, so a new path that is already slow still looks slow.
      for (auto o = flows_.lower_bound(FlowKey{job_id, key.src, key.dst, false, 0});
           o != flows_.end() && !o->first.probe && o->first.job == job_id &&
           o->first.src == key.src && o->first.dst == key.dst;
           ++o) {
        if (o == it) continue;
        const double d =
            Decay(o->second.baseline_bps, now - o->second.baseline_at, options_.baseline_half_life);
        if (d > r.baseline_bps) {
          r.baseline_bps = d;
          r.baseline_at = now;
        }
      }
    }
    r.sample = f;
    r.at = now;
    if (f.bytes.count() > 0 && f.transfer_time > Duration::Zero()) {
      const double rate = f.bytes.ToBits() / f.transfer_time.ToSeconds();
      const double decayed =
          Decay(r.baseline_bps, now - r.baseline_at, options_.baseline_half_life);
      r.baseline_bps = std::max(rate, decayed);
      r.baseline_at = now;
    }
  }
  if (!samples.empty()) dirty_ = true;
}

void FaultManager::ForgetJob(const std::string& job_id) {
  auto it = flows_.lower_bound(FlowKey{job_id, 0, 0, false, 0});
  while (it != flows_.end() && it->first.job == job_id) it = flows_.erase(it);
  replans_.erase(job_id);
  contradictions_.erase(job_id);
}

void FaultManager::SetAdmin(LinkId link, AdminLinkState state, Duration /*now*/) {
  State(link).admin = state;
  urgent_ = true;
}

void FaultManager::RestoreAdmin(LinkId link, AdminLinkState state, Duration now) {
  LinkState& s = State(link);
  s.admin = state;
  s.eff_health = state.health;
  s.eff_fraction = state.health == LinkHealth::kDegraded ? state.capacity_fraction : 1.0;
  s.eff_since = now;
}

void FaultManager::ClearAdmin(LinkId link, Duration /*now*/) {
  auto it = links_.find(link);
  if (it == links_.end() || !it->second.admin) return;
  it->second.admin.reset();
  urgent_ = true;
}

std::optional<AdminLinkState> FaultManager::admin(LinkId link) const {
  auto it = links_.find(link);
  return it == links_.end() ? std::nullopt : it->second.admin;
}

LinkHealth FaultManager::effective(LinkId link) const {
  auto it = links_.find(link);
  return it == links_.end() ? LinkHealth::kUp : it->second.eff_health;
}

double FaultManager::effective_fraction(LinkId link) const {
  auto it = links_.find(link);
  return it == links_.end() ? 1.0 : it->second.eff_fraction;
}

void FaultManager::AccrueDowntime(LinkState& s, Duration now) const {
  if (now <= s.downtime_at) return;
  const bool down = s.port_down || s.health == LinkHealth::kDown;
  const double added = down ? (now - s.downtime_at).ToSeconds() : 0.0;
  s.downtime_s = Decay(s.downtime_s, now - s.downtime_at, options_.downtime_half_life) + added;
  s.downtime_at = now;
}

Duration FaultManager::NextHold(const LinkState& s, Duration now) const {
  Duration hold = options_.min_dwell;
  if (s.hold_set && s.last_recovery) {
    const Duration quiet = now - *s.last_recovery;
    if (quiet < options_.stable_decay) {
      hold = std::min(s.hold + s.hold, options_.max_hold);  // Flapping: back off.
    } else {
      // Every stable_decay without a fault halves the hold back towards min_dwell.
      const double halvings = std::floor(quiet / options_.stable_decay);
      const double h = static_cast<double>(s.hold.nanos()) * std::exp2(-halvings);
      hold = std::max(options_.min_dwell, Duration::Nanos(static_cast<int64_t>(h)));
    }
  }
  if (s.downtime_s >= options_.quarantine_downtime.ToSeconds()) hold = options_.max_hold;
  return hold;
}

std::optional<Duration> FaultManager::NextDue() const {
  if (urgent_) return Duration::Zero();
  std::optional<Duration> at;
  auto earliest = [&](Duration t) { at = at ? std::min(*at, t) : t; };
  if (dirty_) earliest(last_eval_ ? *last_eval_ + options_.evaluate_interval : Duration::Zero());
  for (const auto& [id, s] : links_) {
    // A link that may recover (or whose evidence expires) needs another look.
    if (s.health != LinkHealth::kUp) earliest(s.last_at_current + s.hold);
    if (s.suspect && last_eval_) earliest(*last_eval_ + options_.evaluate_interval);
  }
  return at;
}

void FaultManager::Record(LinkId link, const LinkState& s, LinkHealth from, Duration now,
                          bool automatic, std::vector<std::string> jobs) {
  FaultEvent e;
  e.at = now;
  e.link = link;
  e.from = from;
  e.to = s.eff_health;
  e.capacity_fraction = s.eff_fraction;
  e.automatic = automatic;
  e.reason = automatic ? s.reason : "admin";
  if (automatic) e.evidence = s.evidence;
  e.jobs = std::move(jobs);
  events_.push_back(std::move(e));
  while (events_.size() > options_.max_events) events_.pop_front();
}

// ---- Evaluate and its steps ----

// The routing matrix of one evaluation: row i is a fresh sample over the path it was measured
// on (paths[i]) and the flow record it came from (flows[i], pointing into flows_, which does not
// change until the evaluation ends).
struct FaultManager::Observations {
  std::vector<PathObservation> paths;
  std::vector<const std::pair<const FlowKey, FlowRecord>*> flows;
  // Per row: the achieved and the best recent rate (bits/s; 0 for a failed row), the job's level.
  std::vector<double> rate_bps;
  std::vector<double> best_bps;
  std::vector<int> levels;

  // Removes the rows marked in `drop` (one flag per row), keeping the order of the others.
  void Erase(const std::vector<bool>& drop);
  // "flow of job j a->b (sport n)".
  std::string FlowName(size_t row, const Topology& nominal) const;

  // The jobs (sorted, ", "-separated) and the first few flows behind `s`, as evidence lines.
  std::pair<std::string, std::vector<std::string>> Describe(const Suspect& s,
                                                            const Topology& nominal) const;
};

// What every link's decision in one Evaluate call works from.
struct FaultManager::Evaluation {
  Duration now;
  Duration window_start;  // Older evidence is ignored.
  const Topology& nominal;
  const AppliedPlan& applied;
  const Observations& observations;
  std::map<LinkId, const Suspect*> suspect_of;  // The localisation's suspects.
};

// One link's signals at this evaluation.
struct FaultManager::LinkSignals {
  bool counters_bad = false;
  bool nic_loss = false;  // A NIC at an end of a slow flow behind the suspect reports loss.
  std::string nic_text;
  int tomo_jobs = 0;         // Distinct jobs behind the tomography suspect (their own flows).
  int host_probes = 0;       // Host-measured probes among its slow rows.
  std::string counter_text;  // Empty: no fresh counter reading.
  const Suspect* tomo = nullptr;
  std::string tomo_text;
  std::vector<std::string> tomo_lines;
};

// The automatic state the rules ask for, and why.
struct FaultManager::Want {
  LinkHealth health = LinkHealth::kUp;
  double fraction = 1;
  std::string why;
  std::vector<std::string> evidence;
};

namespace {

// Whether a healthy row (priority level `level`, `rate` bits/s) crossing a link speaks for that
// link against a slow row (`slow_level`, `slow_rate`, `failed`: no progress). A dead link serves
// nobody: any healthy row clears it of a failed one. Against a slow row only a row of the same or
// a lower priority (strict priority queues starve the lowest first) that ran at least
// 1 / gray_ratio times as fast: flows held back by a link's lost capacity share what is left
// max-min, so a healthy flow slower than that may merely need less than the link still has.
bool SpeaksFor(int level, double rate, int slow_level, double slow_rate, bool failed,
               double gray_ratio) {
  if (failed) return true;
  return level >= slow_level && rate * gray_ratio >= slow_rate;
}

// The smallest nominal capacity over `links` (bits/s; 0 for an empty path or an unknown link).
double PathCapacityBps(const std::vector<LinkId>& links, const Topology& nominal) {
  double cap = links.empty() ? 0 : std::numeric_limits<double>::infinity();
  for (LinkId l : links) {
    if (!l.valid() || l.value() >= nominal.num_links()) return 0;
    cap = std::min(cap, nominal.link(l).capacity.ToBitsPerSec());
  }
  return std::isfinite(cap) ? cap : 0;
}

// The pins of one job's applied assignment, indexed the ways a sample is matched to them.
class JobPins {
 public:
  void Load(const AppliedPlan& applied, const std::string& job) {
    first_.clear();
    pins_.clear();
    probes_.clear();
    auto a = applied.find(job);
    if (a == applied.end()) return;
    for (const FlowPin& p : a->second->assignment.flows) {
      first_.emplace(std::make_pair(p.src_nic.value(), p.dst_nic.value()), &p);
      if (p.udp_sport != 0) pins_.emplace(Key(p), &p);
    }
    for (const FlowPin& p : a->second->assignment.probes) probes_.emplace(Key(p), &p);
  }

  // The pin a sample of the NIC pair (src, dst) from source port `sport` was measured on, or
  // null when it has none (see BuildObservations).
  const FlowPin* Find(uint32_t src, uint32_t dst, uint32_t sport, bool probe) const {
    if (probe) {
      // A probe of a list no longer in force (re-designed with a new plan) has none.
      auto found = probes_.find({src, dst, sport});
      return found == probes_.end() ? nullptr : found->second;
    }
    auto exact = sport != 0 ? pins_.find({src, dst, sport}) : pins_.end();
    if (exact != pins_.end()) return exact->second;
    auto first = first_.find({src, dst});
    if (first == first_.end()) return nullptr;
    // Port 0 (unknown): the pair's first pin. A first pin without a port takes any sample.
    if (sport != 0 && first->second->udp_sport != 0) return nullptr;
    return first->second;
  }

 private:
  using PinKey = std::tuple<uint32_t, uint32_t, uint32_t>;
  static PinKey Key(const FlowPin& p) {
    return std::make_tuple(p.src_nic.value(), p.dst_nic.value(), uint32_t{p.udp_sport});
  }

  std::map<std::pair<uint32_t, uint32_t>, const FlowPin*> first_;
  std::map<PinKey, const FlowPin*> pins_;
  std::map<PinKey, const FlowPin*> probes_;
};

// Hard faults by 007 voting, then gray ones by least squares on the links voting left alone.
std::vector<Suspect> Localise(const std::vector<PathObservation>& obs,
                              const LocalisationOptions& options) {
  std::vector<Suspect> suspects = VoteHardFaults(obs, options);
  std::set<LinkId> hard;
  for (const Suspect& s : suspects) hard.insert(s.link);
  for (Suspect& g : GrayFaults(obs, options)) {
    if (!hard.count(g.link)) suspects.push_back(std::move(g));
  }
  return suspects;
}

// The jobs whose pinned flows cross `link` (their flows are the ones a change moves).
std::vector<std::string> JobsCrossing(const AppliedPlan& applied, LinkId link) {
  std::vector<std::string> jobs;
  for (const auto& [job, entry] : applied) {
    for (const FlowPin& p : entry->assignment.flows) {
      if (std::find(p.path.begin(), p.path.end(), link) != p.path.end()) {
        jobs.push_back(job);
        break;
      }
    }
  }
  return jobs;
}

}  // namespace

std::vector<LinkDecision> FaultManager::Evaluate(Duration now, const Topology& nominal,
                                                 const AppliedPlan& applied) {
  ++evaluations_;
  last_eval_ = now;
  urgent_ = false;
  dirty_ = false;
  ForgetStaleFlows(now);
  NoteReplans(applied, now);
  const Duration window_start = now - options_.evidence_window;
  Observations observations = BuildObservations(window_start, applied, nominal);
  DropContradictedJobs(observations, now, window_start, nominal);
  const std::vector<Suspect> suspects = Localise(observations.paths, options_.localisation);
  Evaluation ev{.now = now,
                .window_start = window_start,
                .nominal = nominal,
                .applied = applied,
                .observations = observations,
                .suspect_of = {}};
  for (const Suspect& s : suspects) ev.suspect_of.emplace(s.link, &s);
  if (options_.probes.enabled) WantProbesForUnexplained(observations, ev.suspect_of, now);

  // Every link with a record or a suspicion, in id order (the order of the decisions).
  std::set<LinkId> touched;
  for (const auto& [id, s] : links_) touched.insert(id);
  for (const Suspect& s : suspects) touched.insert(s.link);
  std::vector<LinkDecision> decisions;
  for (LinkId id : touched) {
    if (!id.valid() || id.value() >= nominal.num_links()) continue;
    if (std::optional<LinkDecision> d = DecideLink(id, ev)) decisions.push_back(std::move(*d));
  }
  UpdateProbeTargets(now);
  PruneRecords();
  return decisions;
}

void FaultManager::WantProbesForUnexplained(const Observations& obs,
                                            const std::map<LinkId, const Suspect*>& suspects,
                                            Duration now) {
  // Slow, or below suspect_ratio of what it is entitled to: the capacity probes decide.
  const double ratio = SlowForProbes();
  auto slow = [&](size_t i) { return obs.paths[i].failed || obs.paths[i].rate_ratio < ratio; };
  // A job most of whose rows are slow is slow as a whole (its phases, its compute, a collective
  // held back by one peer): no link to look for. Only a few slow rows point at their paths.
  std::map<std::string_view, std::pair<int, int>> rows;  // Job -> (rows, slow rows).
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    if (obs.flows[i]->first.host) continue;
    auto& [n, k] = rows[obs.flows[i]->first.job];
    ++n;
    k += slow(i) ? 1 : 0;
  }
  // The slow rows that point at their paths: not explained by a suspect, in a job not slow as a
  // whole.
  std::vector<size_t> pointing;
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    const PathObservation& o = obs.paths[i];
    if (obs.flows[i]->first.host || !slow(i)) continue;
    const auto& [n, k] = rows[obs.flows[i]->first.job];
    if (2 * k > n) continue;
    const bool explained = std::any_of(o.links.begin(), o.links.end(),
                                       [&](LinkId l) { return suspects.count(l) > 0; });
    if (!explained) pointing.push_back(i);
  }
  if (pointing.empty()) return;
  // Per link of those rows: the healthy rows crossing it, (level, rate); a host probe measures
  // the capacity itself and speaks for its links against any slow row (level max, rate inf).
  std::map<LinkId, std::vector<std::pair<int, double>>> healthy;
  for (size_t i : pointing) {
    for (LinkId l : obs.paths[i].links) healthy.try_emplace(l);
  }
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    if (slow(i)) continue;
    const bool host = obs.flows[i]->first.host;
    for (LinkId l : obs.paths[i].links) {
      auto it = healthy.find(l);
      if (it == healthy.end()) continue;
      it->second.emplace_back(host ? std::numeric_limits<int>::max() : obs.levels[i],
                              host ? std::numeric_limits<double>::infinity() : obs.rate_bps[i]);
    }
  }
  // What this evaluation wants, per link: (vouched, smallest slow share).
  const double gray = options_.localisation.gray_ratio;
  std::map<LinkId, std::pair<bool, double>> wanted;
  for (size_t i : pointing) {
    const auto& [n, k] = rows[obs.flows[i]->first.job];
    const double share = static_cast<double>(k) / static_cast<double>(n);
    for (LinkId l : obs.paths[i].links) {
      if (!l.valid()) continue;
      const std::vector<std::pair<int, double>>& h = healthy[l];
      const bool vouched = std::any_of(h.begin(), h.end(), [&](const auto& x) {
        return SpeaksFor(x.first, x.second, obs.levels[i], obs.rate_bps[i], obs.paths[i].failed,
                         gray);
      });
      auto [it, inserted] = wanted.try_emplace(l, vouched, share);
      if (!inserted) {
        it->second.first = it->second.first && vouched;
        it->second.second = std::min(it->second.second, share);
      }
    }
  }
  for (const auto& [l, w] : wanted) {
    LinkState& s = State(l);
    if (s.health != LinkHealth::kUp) continue;
    s.probes_wanted_at = now;
    s.probes_vouched = w.first;
    s.probes_slow_share = w.second;
  }
}

void FaultManager::UpdateProbeTargets(Duration now) {
  auto fresh = [&](const std::optional<Duration>& at) {
    return at && now - *at <= options_.evidence_window;
  };
  struct Wanted {
    bool suspect;       // A localisation suspect within the evidence window.
    double score;       // Its last score (1 - estimate); 0 for a link only on a slow flow's path.
    bool vouched;       // Only on slow flows' paths, and a healthy row vouched for it.
    double slow_share;  // Only on slow flows' paths: the smallest share of slow rows of a job.
    Duration at;        // Last wanted.
    LinkId id;
  };
  std::vector<Wanted> wanted;
  for (const auto& [id, s] : links_) {
    if (!fresh(s.probes_wanted_at)) continue;
    const bool suspect = fresh(s.suspect_probes_at);
    wanted.push_back({suspect, suspect ? s.score : 0.0, !suspect && s.probes_vouched,
                      suspect ? 0.0 : s.probes_slow_share, *s.probes_wanted_at, id});
  }
  // Suspects first, the most degraded first; then the links no healthy row vouches for, those
  // whose slow flows stand out most in their jobs, the most recently wanted; ties by id.
  std::sort(wanted.begin(), wanted.end(), [](const Wanted& a, const Wanted& b) {
    if (a.suspect != b.suspect) return a.suspect;
    if (a.score != b.score) return a.score > b.score;
    if (a.vouched != b.vouched) return !a.vouched;
    if (a.slow_share != b.slow_share) return a.slow_share < b.slow_share;
    if (a.at != b.at) return a.at > b.at;
    return a.id < b.id;
  });
  if (wanted.size() > kMaxProbeTargets) wanted.resize(kMaxProbeTargets);
  probe_targets_.clear();
  for (const Wanted& w : wanted) probe_targets_.push_back(w.id);
  probe_target_set_ = probe_targets_;
  std::sort(probe_target_set_.begin(), probe_target_set_.end());
}

void FaultManager::ForgetStaleFlows(Duration now) {
  for (auto it = flows_.begin(); it != flows_.end();) {
    it = (now - it->second.at > options_.baseline_half_life) ? flows_.erase(it) : std::next(it);
  }
}

void FaultManager::NoteReplans(const AppliedPlan& applied, Duration now) {
  for (auto it = replans_.begin(); it != replans_.end();) {
    it = applied.count(it->first) ? std::next(it) : replans_.erase(it);
  }
  for (const auto& [job, entry] : applied) {
    auto [it, inserted] = replans_.try_emplace(job);
    Replan& r = it->second;
    if (!inserted && r.epoch == entry->epoch) continue;
    std::map<PinKey, PinSince> pins;
    // Samples carry over only for a job seen before, at the same level.
    const bool carry = !inserted && r.level == entry->assignment.level;
    auto note = [&](const FlowPin& p, bool probe) {
      const PinKey key{p.src_nic.value(), p.dst_nic.value(), p.udp_sport, probe};
      auto old = r.pins.find(key);
      const bool same_path = old != r.pins.end() && old->second.path == p.path;  // None if new.
      const bool kept = carry && !probe && same_path;
      pins.try_emplace(key, PinSince{p.path, kept ? old->second.since : now,
                                     same_path ? old->second.path_since : now});
    };
    for (const FlowPin& p : entry->assignment.flows) note(p, false);
    for (const FlowPin& p : entry->assignment.probes) note(p, true);
    r.epoch = entry->epoch;
    r.level = entry->assignment.level;
    r.pins = std::move(pins);
  }
}

// A sample is one row per pin: matched to the pin of its NIC pair with its source port (a sample
// from a port no pin of the pair uses predates a re-route: skipped); a sample with port 0
// (unknown) goes to the pair's first pin, and so does any sample of a pair whose first pin has
// no port.
FaultManager::Observations FaultManager::BuildObservations(Duration window_start,
                                                           const AppliedPlan& applied,
                                                           const Topology& nominal) const {
  Observations obs;
  JobPins pins;
  const std::string* pins_of = nullptr;  // The job `pins` holds (flows_ is sorted by job).
  int level = 0;
  const Replan* replan = nullptr;  // The pins' ages of the job `pins` holds.
  bool slow = false;               // Some row below SlowForProbes() of its best rate.
  bool failed = false;             // Some row made no progress.
  const double slow_ratio = SlowForProbes();
  for (const auto& entry : flows_) {
    const auto& [key, rec] = entry;
    if (rec.at < window_start) continue;
    const FlowSample& f = rec.sample;
    if (f.bytes.count() == 0 && f.errors == 0) continue;  // Idle: no information.
    if (pins_of == nullptr || *pins_of != key.job) {
      pins_of = &key.job;
      pins.Load(applied, key.job);
      auto a = applied.find(key.job);
      level = a == applied.end() ? 0 : a->second->assignment.level;
      auto r = replans_.find(key.job);
      replan = r == replans_.end() ? nullptr : &r->second;
    }
    const FlowPin* pin = pins.Find(key.src, key.dst, key.sport, key.probe);
    if (pin == nullptr || pin->path.empty()) continue;
    // Measured (partly) on another path than the pin's now (or before the pin existed). A host
    // probe is one capacity measurement on the path its source port takes, sent only for a probe
    // of the host's assignment: it counts from the moment its pin has had this path, through
    // re-plans that re-issue the job's probes (they came every second while probe targets
    // changed, and every host probe sample fell within an evaluate_interval of one: stop 52).
    if (replan != nullptr) {
      auto since = replan->pins.find(
          PinKey{pin->src_nic.value(), pin->dst_nic.value(), pin->udp_sport, key.probe});
      if (since != replan->pins.end()) {
        const bool stale = key.host ? rec.at < since->second.path_since
                                    : since->second.since > Duration::Zero() &&
                                          rec.at < since->second.since + options_.evaluate_interval;
        if (stale) continue;
      }
    }
    PathObservation o;
    o.links = pin->path;
    double rate = 0;
    const double best = BestRate(key, rec);
    if (f.bytes.count() == 0) {
      o.failed = true;
      o.rate_ratio = 0;
      failed = true;
    } else {
      rate = f.transfer_time > Duration::Zero() ? f.bytes.ToBits() / f.transfer_time.ToSeconds()
                                                : rec.baseline_bps;
      if (key.host) {
        // A host probe measures its path's capacity (OnHostProbes): against the nominal one.
        const double nominal_bps = PathCapacityBps(o.links, nominal);
        o.rate_ratio = nominal_bps > 0 ? std::clamp(rate / nominal_bps, 0.0, 1.0) : 1.0;
      } else {
        o.rate_ratio = best > 0 ? std::clamp(rate / best, 0.0, 1.0) : 1.0;
      }
      slow = slow || o.rate_ratio < slow_ratio;
    }
    obs.paths.push_back(std::move(o));
    obs.flows.push_back(&entry);
    obs.rate_bps.push_back(rate);
    obs.best_bps.push_back(best);
    obs.levels.push_back(level);
  }
  if (slow && options_.expectation == FlowExpectation::kPlanShare) {
    ApplyPlannedShares(obs, nominal);
  }
  // A healthy row proves that each link it crossed carried its rate, and nothing more: a floor
  // of rate / the link's nominal capacity on each (a 20 G flow healthy on a 200 G link says
  // nothing about whether the link still has 120 G, and a flow that got its share of a link at
  // 60 % says nothing against the loss). And a link is not an unhealthy row's bottleneck where a
  // healthy row crossing it vouches for it (SpeaksFor: at least 1 / gray_ratio times as fast,
  // same or lower priority; a healthy host probe measured the capacity itself and vouches
  // against any row): under max-min sharing no flow of a flow's level runs faster on its
  // bottleneck, so such a link takes none of that row's blame. Both speak of the moment the
  // row was measured: a healthy row counts against a link only if it is no older than the
  // newest unhealthy row crossing the link by more than an evaluate_interval (a row from before
  // a fault began proves nothing about the link now). Slow and failed rows count fully. Floors
  // and excuses matter only beside an unhealthy row (the localisation solves nothing else).
  if (!slow && !failed) return obs;
  const double gray = options_.localisation.gray_ratio;
  auto healthy_row = [&](size_t i) { return IsHealthy(obs.paths[i], options_.localisation); };
  std::map<LinkId, Duration> newest_unhealthy;
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    if (healthy_row(i)) continue;
    const Duration at = obs.flows[i]->second.at;
    for (LinkId l : obs.paths[i].links) {
      auto [it, inserted] = newest_unhealthy.try_emplace(l, at);
      if (!inserted) it->second = std::max(it->second, at);
    }
  }
  // Per link with an unhealthy row: the healthy rows of its moment, (level, rate).
  std::map<LinkId, std::vector<std::pair<int, double>>> healthy;
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    if (!healthy_row(i)) continue;
    PathObservation& o = obs.paths[i];
    const Duration at = obs.flows[i]->second.at;
    const bool host = obs.flows[i]->first.host;
    o.floors.assign(o.links.size(), 0.0);
    for (size_t k = 0; k < o.links.size(); ++k) {
      const LinkId l = o.links[k];
      auto newest = newest_unhealthy.find(l);
      if (newest == newest_unhealthy.end()) continue;  // Not in the localisation's part.
      if (at + options_.evaluate_interval < newest->second) continue;
      if (!l.valid() || l.value() >= nominal.num_links()) continue;
      const double cap = nominal.link(l).capacity.ToBitsPerSec();
      if (cap > 0 && obs.rate_bps[i] > 0) o.floors[k] = std::clamp(obs.rate_bps[i] / cap, 0.0, 1.0);
      healthy[l].emplace_back(host ? std::numeric_limits<int>::max() : obs.levels[i],
                              host ? std::numeric_limits<double>::infinity() : obs.rate_bps[i]);
    }
  }
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    if (healthy_row(i)) continue;
    PathObservation& o = obs.paths[i];
    o.excused.assign(o.links.size(), false);
    for (size_t k = 0; k < o.links.size(); ++k) {
      auto h = healthy.find(o.links[k]);
      if (h == healthy.end()) continue;
      o.excused[k] = std::any_of(h->second.begin(), h->second.end(), [&](const auto& x) {
        return SpeaksFor(x.first, x.second, obs.levels[i], obs.rate_bps[i], o.failed, gray);
      });
    }
  }
  return obs;
}

void FaultManager::ApplyPlannedShares(Observations& obs, const Topology& nominal) const {
  // A job's row older than the job's latest report by more than an evaluate_interval (the
  // slack covers ranks reporting one after another) is a flow that report found idle: it is
  // evidence of its own, but it shares no link with the rows of that report. Per job: the time
  // of its latest report (its own rows, not host probes).
  std::map<std::string_view, Duration> latest;
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    const auto& [key, rec] = *obs.flows[i];
    if (key.host) continue;
    auto [it, inserted] = latest.try_emplace(key.job, rec.at);
    if (!inserted) it->second = std::max(it->second, rec.at);
  }
  std::vector<bool> idle(obs.paths.size(), false);
  std::vector<ShareFlow> flows;
  flows.reserve(obs.paths.size());
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    const auto& [key, rec] = *obs.flows[i];
    idle[i] = !key.host && rec.at + options_.evaluate_interval < latest.at(key.job);
    // A link id the nominal topology does not have (a stale plan) takes no share.
    const std::vector<LinkId>& links = obs.paths[i].links;
    const bool known = std::all_of(links.begin(), links.end(), [&](LinkId l) {
      return l.valid() && l.value() < nominal.num_links();
    });
    // A flow takes no more than its best recent rate (a small message leaves a link to the
    // others).
    flows.push_back(ShareFlow{
        .path = known ? std::span<const LinkId>(links) : std::span<const LinkId>(),
        .level = obs.levels[i],
        .newcomer = key.probe,
        .demand = obs.best_bps[i] > 0 ? obs.best_bps[i] : std::numeric_limits<double>::infinity()});
  }
  // Every row at once (as the plan assumes), for the idle rows: when they last ran, the rows of
  // that time may have been active too. The other rows share only with each other.
  std::vector<double> share = PlannedShares(flows, nominal);
  if (std::find(idle.begin(), idle.end(), true) != idle.end()) {
    std::vector<ShareFlow> current = flows;
    for (size_t i = 0; i < current.size(); ++i) {
      if (idle[i]) current[i].path = {};
    }
    const std::vector<double> now_share = PlannedShares(current, nominal);
    for (size_t i = 0; i < share.size(); ++i) {
      if (!idle[i]) share[i] = now_share[i];
    }
  }
  std::vector<bool> drop(obs.paths.size(), false);
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    PathObservation& o = obs.paths[i];
    if (o.failed || flows[i].path.empty()) continue;
    if (share[i] <= 0) {
      // The plan promises it nothing (higher levels fill a link of its path): running at its
      // best it still clears its links; slower, it is no evidence against them.
      if (o.rate_ratio < options_.localisation.gray_ratio) drop[i] = true;
      continue;
    }
    // The plan entitles the flow to at most its share: at or above gray_ratio of that it is
    // healthy (whatever its own past says). Below it, how slow it is is still measured against
    // its best rate, which the share does not lower (so a 30 % link is estimated at 30 %).
    // A probe is measured against its newcomer share alone: it has no past of its own that
    // predates a fault (a probe designed over a suspect starts on the degraded link).
    if (obs.flows[i]->first.host) continue;  // Measured against its path's capacity already.
    const bool probe = obs.flows[i]->first.probe;
    const double expected =
        obs.best_bps[i] > 0 && !probe ? std::min(obs.best_bps[i], share[i]) : share[i];
    if (probe) {
      o.rate_ratio = std::clamp(obs.rate_bps[i] / expected, 0.0, 1.0);
      continue;
    }
    const double by_share = std::clamp(obs.rate_bps[i] / expected, 0.0, 1.0);
    if (by_share >= options_.localisation.gray_ratio) o.rate_ratio = by_share;
  }
  obs.Erase(drop);
}

void FaultManager::Observations::Erase(const std::vector<bool>& drop) {
  size_t kept = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (drop[i]) continue;
    if (kept != i) paths[kept] = std::move(paths[i]);
    flows[kept] = flows[i];
    rate_bps[kept] = rate_bps[i];
    best_bps[kept] = best_bps[i];
    levels[kept] = levels[i];
    ++kept;
  }
  paths.resize(kept);
  flows.resize(kept);
  rate_bps.resize(kept);
  best_bps.resize(kept);
  levels.resize(kept);
}

std::string FaultManager::Observations::FlowName(size_t row, const Topology& nominal) const {
  const auto& [key, rec] = *flows[row];
  return std::string(key.host    ? "host probe"
                     : key.probe ? "probe"
                                 : "flow") +
         " of job " + key.job + " " + NodeName(nominal, rec.sample.src_nic) + "->" +
         NodeName(nominal, rec.sample.dst_nic) + " (sport " + std::to_string(rec.sample.udp_sport) +
         ")";
}

bool FaultManager::CountersAccuse(const LinkState& s, Duration window_start) const {
  if (!s.counters || s.counters->at < window_start) return false;
  const CounterSignal& c = s.counters->last;
  return static_cast<double>(c.errors + c.discards) / c.interval.ToSeconds() >=
         options_.counter_errors_per_s;
}

const NicCounterSignal* FaultManager::NicLoss(NodeId nic, Duration window_start) const {
  auto it = nics_.find(nic.value());
  if (it == nics_.end() || it->second.at < window_start) return nullptr;
  const NicCounterSignal& n = it->second.last;
  return static_cast<double>(n.loss) / n.interval.ToSeconds() >= options_.nic_loss_per_s ? &n
                                                                                         : nullptr;
}

void FaultManager::DropContradictedJobs(Observations& obs, Duration now, Duration window_start,
                                        const Topology& nominal) {
  const double gray = options_.localisation.gray_ratio;
  auto slow = [&](size_t i) { return obs.paths[i].failed || obs.paths[i].rate_ratio < gray; };
  // Per link: the healthy job rows crossing it (row indices; SpeaksFor decides which vouch for
  // it against a slow row); and the links a slow host-measured probe crosses (the operator's
  // measurement backs a slow flow). A healthy host probe vouches for nothing: it measures
  // capacity, and a link at full capacity may still be congested.
  std::map<LinkId, std::vector<size_t>> healthy;
  std::set<LinkId> host_slow;
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    const bool host = obs.flows[i]->first.host;
    if (slow(i)) {
      if (host) host_slow.insert(obs.paths[i].links.begin(), obs.paths[i].links.end());
      continue;
    }
    if (host) continue;
    for (LinkId l : obs.paths[i].links) healthy[l].push_back(i);
  }
  struct Tally {
    int slow = 0;
    int contradicted = 0;
    std::string example;
  };
  std::map<std::string_view, Tally> tally;
  for (size_t i = 0; i < obs.paths.size(); ++i) {
    if (!slow(i) || obs.flows[i]->first.host) continue;  // A host's probe is no tenant's word.
    const auto& [key, rec] = *obs.flows[i];
    Tally& t = tally[key.job];
    ++t.slow;
    // Another source backs it: a NIC at one of its ends reports loss.
    if (NicLoss(rec.sample.src_nic, window_start) || NicLoss(rec.sample.dst_nic, window_start)) {
      continue;
    }
    std::string_view witness;
    bool contradicted = !obs.paths[i].links.empty();
    for (LinkId l : obs.paths[i].links) {
      auto ls = links_.find(l);
      if ((ls != links_.end() &&
           (ls->second.port_down || CountersAccuse(ls->second, window_start))) ||
          host_slow.count(l)) {
        contradicted = false;  // The switch (or a host's probe) agrees that something is wrong.
        break;
      }
      auto h = healthy.find(l);
      bool vouched = false;
      if (h != healthy.end()) {
        for (size_t r : h->second) {
          const std::string_view other = obs.flows[r]->first.job;
          if (other != key.job && SpeaksFor(obs.levels[r], obs.rate_bps[r], obs.levels[i],
                                            obs.rate_bps[i], obs.paths[i].failed, gray)) {
            vouched = true;
            if (witness.empty()) witness = other;
            break;
          }
        }
      }
      if (!vouched) {
        contradicted = false;
        break;
      }
    }
    if (!contradicted) continue;
    ++t.contradicted;
    if (t.example.empty()) {
      t.example =
          obs.FlowName(i, nominal) + (obs.paths[i].failed ? " made no progress" : " is slow") +
          ", yet job " + std::string(witness) +
          " is healthy at the same or a lower priority and faster on every link of its path";
    }
  }
  // Update the flags: a job is consistent again as soon as an evaluation finds it so.
  std::vector<bool> drop(obs.paths.size(), false);
  bool any = false;
  for (auto it = contradictions_.begin(); it != contradictions_.end();) {
    it = tally.count(it->first) ? std::next(it) : contradictions_.erase(it);
  }
  for (const auto& [job, t] : tally) {
    const bool contradicted = t.slow >= options_.localisation.min_flows && t.contradicted == t.slow;
    if (!contradicted) {
      contradictions_.erase(std::string(job));
      continue;
    }
    Contradiction& c = contradictions_[std::string(job)];
    ++c.streak;
    if (c.streak < 2) continue;
    if (!c.flagged) {
      c.flagged = true;
      c.view.job = std::string(job);
      c.view.since = now;
    }
    c.view.slow_flows = t.slow;
    c.view.example = t.example;
    ++c.view.evaluations;
    ++disbelieved_reports_;
    for (size_t i = 0; i < obs.paths.size(); ++i) {
      if (obs.flows[i]->first.job == job && !obs.flows[i]->first.host) drop[i] = any = true;
    }
  }
  if (any) obs.Erase(drop);
}

std::vector<ContradictedJob> FaultManager::ContradictedJobs() const {
  std::vector<ContradictedJob> out;
  for (const auto& [job, c] : contradictions_) {
    if (c.flagged) out.push_back(c.view);
  }
  return out;
}

double FaultManager::BestRate(const FlowKey& key, const FlowRecord& rec) const {
  double baseline = rec.baseline_bps;
  if (!key.probe) return baseline;
  // A probe's expectation is also its pair's flows' best rate: a probe designed onto an already
  // degraded link must not take the degraded rate for its normal.
  for (auto flow = flows_.lower_bound(FlowKey{key.job, key.src, key.dst, false, 0});
       flow != flows_.end() && !flow->first.probe && flow->first.job == key.job &&
       flow->first.src == key.src && flow->first.dst == key.dst;
       ++flow) {
    baseline = std::max(baseline, flow->second.baseline_bps);
  }
  return baseline;
}

std::pair<std::string, std::vector<std::string>> FaultManager::Observations::Describe(
    const Suspect& s, const Topology& nominal) const {
  std::vector<std::string> lines;
  std::set<std::string> jobs;
  for (uint32_t i : s.evidence) {
    if (!flows[i]->first.host) jobs.insert(flows[i]->first.job);
  }
  constexpr size_t kShown = 4;
  for (size_t k = 0; k < s.evidence.size() && k < kShown; ++k) {
    const uint32_t i = s.evidence[k];
    const FlowRecord& rec = flows[i]->second;
    std::string line = FlowName(i, nominal) + ": ";
    line += paths[i].failed
                ? "no progress, " + std::to_string(rec.sample.errors) + " transport errors"
                : Pct(paths[i].rate_ratio) + " of its best rate";
    lines.push_back(std::move(line));
  }
  if (s.evidence.size() > kShown) {
    lines.push_back("... and " + std::to_string(s.evidence.size() - kShown) + " more flows");
  }
  std::string jl;
  for (const std::string& j : jobs) jl += (jl.empty() ? "" : ", ") + j;
  return std::make_pair(jl, lines);
}

std::optional<LinkDecision> FaultManager::DecideLink(LinkId id, const Evaluation& ev) {
  LinkState& s = State(id);
  AccrueDowntime(s, ev.now);
  if (s.counters && s.counters->at < ev.window_start) s.counters.reset();
  const LinkSignals sig = ReadSignals(id, s, ev);
  // Tomography acts only on a suspect the previous evaluation saw too (score > 0 is from
  // there): right after a fault starts, jobs that have not reported since still show healthy
  // samples over the faulty link, which can shift the blame to a neighbour for one round.
  // A suspicion host probes back may also be confirmed by one within the last three evaluate
  // intervals: a probe is one message, so it sees the capacity a job leaves it only while that
  // job's flows are active, and an intermittent job makes its verdict alternate.
  // (An earlier evaluation that wanted probes over the link - a slow flow crossed it - counts.)
  auto within = [&](const std::optional<Duration>& at) {
    return at && ev.now - *at <= options_.evaluate_interval * 3;
  };
  const bool recent = within(s.suspect_at) || within(s.probes_wanted_at);
  const bool confirmed = s.score > 0 || (sig.tomo && sig.host_probes > 0 && recent);
  if (sig.tomo) s.suspect_at = ev.now;
  // No tenant steers the fabric: flows of fewer than min_jobs jobs need a switch signal too.
  // A link already faulty by the automatic rules stays so on the evidence of any job (the jobs
  // left on it after the re-plan may be one): the rule guards moving a link, not keeping it.
  const bool enough_jobs = sig.tomo_jobs >= options_.min_jobs || sig.counters_bad || sig.nic_loss ||
                           sig.host_probes > 0 || s.health != LinkHealth::kUp;
  const bool tomo_usable =
      sig.tomo && confirmed && enough_jobs && (!sig.tomo->ambiguous || sig.counters_bad);
  s.suspect = sig.tomo != nullptr || sig.counters_bad;
  s.ambiguous = sig.tomo && sig.tomo->ambiguous;
  s.score = sig.tomo ? sig.tomo->score : 0;
  s.jobs = sig.tomo_jobs;
  s.host_probes = sig.host_probes;
  // Host probes settle what the rules cannot act on yet (probe_targets).
  if (options_.probes.enabled && sig.tomo && s.health == LinkHealth::kUp &&
      (!enough_jobs || (sig.tomo->ambiguous && !sig.counters_bad))) {
    s.probes_wanted_at = ev.now;
    s.suspect_probes_at = ev.now;
  }

  Want want = Rules(s, sig, tomo_usable);
  if (want.health != LinkHealth::kUp) {
    want.evidence = sig.tomo_lines;
    if (!sig.counter_text.empty()) want.evidence.push_back(sig.counter_text);
    if (!sig.nic_text.empty()) want.evidence.push_back(sig.nic_text);
    s.last_bad = ev.now;
  } else if (s.suspect) {
    // Suspected but not acted on (ambiguous): keep what was seen for cruxctl faults.
    const char* why =
        !confirmed ? "suspect (to be confirmed at the next evaluation): "
        : !enough_jobs
            ? "suspect (no change: one job's flows alone, no switch, NIC or host probe signal): "
            : "suspect (no change): ";
    s.reason = std::string(why) + sig.tomo_text;
    s.evidence = sig.tomo_lines;
  }
  const bool changed = ApplyDamped(s, std::move(want), ev.now);
  return UpdateEffective(id, s, changed, ev);
}

FaultManager::LinkSignals FaultManager::ReadSignals(LinkId id, const LinkState& s,
                                                    const Evaluation& ev) const {
  LinkSignals sig;
  if (s.counters) {
    const CounterSignal& c = s.counters->last;
    const double per_s = static_cast<double>(c.errors + c.discards) / c.interval.ToSeconds();
    sig.counters_bad = per_s >= options_.counter_errors_per_s;
    sig.counter_text = "counters: " + c.source + ": " + Num(per_s) + " errors+discards/s (" +
                       std::to_string(c.errors) + " errors, " + std::to_string(c.discards) +
                       " discards in " + Num(c.interval.ToSeconds()) + " s; pfc pause " +
                       std::to_string(c.pfc_pause) + ", queue drops " +
                       std::to_string(c.queue_drops) + ", ecn marks " +
                       std::to_string(c.ecn_marks) + ")";
  }
  auto it = ev.suspect_of.find(id);
  if (it == ev.suspect_of.end()) return sig;
  const Suspect& tomo = *it->second;
  sig.tomo = &tomo;
  auto [jobs, lines] = ev.observations.Describe(tomo, ev.nominal);
  sig.tomo_lines = std::move(lines);
  std::set<std::string_view> distinct;
  std::set<uint32_t> lossy;  // NICs at the ends of its slow flows that report loss.
  for (uint32_t i : tomo.evidence) {
    const FlowRecord& rec = ev.observations.flows[i]->second;
    if (ev.observations.flows[i]->first.host) {
      // The operator's measurement: no tenant's word, no NIC to read. Unless a link already
      // held faulty on its path explains it (the re-plan around that link may congest this one),
      // or a flow crossed this link faster than the probe's capacity at about the same time: a
      // capacity probe sees its path's narrowest link, and this one is not it.
      if (!HeldFaultyElsewhere(ev.observations.paths[i].links, id, ev.nominal) &&
          !OutranProbe(ev.observations, i, id)) {
        ++sig.host_probes;
      }
      continue;
    }
    distinct.insert(ev.observations.flows[i]->first.job);
    for (NodeId nic : {rec.sample.src_nic, rec.sample.dst_nic}) {
      const NicCounterSignal* n = NicLoss(nic, ev.window_start);
      if (n == nullptr || !lossy.insert(nic.value()).second) continue;
      sig.nic_loss = true;
      if (lossy.size() <= 2) {
        sig.nic_text += std::string(sig.nic_text.empty() ? "NIC counters: " : "; ") + n->source +
                        ": " + Num(static_cast<double>(n->loss) / n->interval.ToSeconds()) +
                        " loss events/s (congestion " +
                        Num(static_cast<double>(n->congestion) / n->interval.ToSeconds()) + "/s)";
      }
    }
  }
  if (lossy.size() > 2) sig.nic_text += "; and " + std::to_string(lossy.size() - 2) + " more NICs";
  sig.tomo_jobs = static_cast<int>(distinct.size());
  // Evidence of host agents' probes alone names no job (their count follows below).
  if (tomo.kind == SuspectKind::kHard) {
    sig.tomo_text = "007 voting: " + std::to_string(tomo.evidence.size()) + " failed flows" +
                    (jobs.empty() ? "" : " (jobs " + jobs + ")") + " vote " + Num(tomo.score) +
                    " for it; no healthy flow crosses it";
  } else {
    sig.tomo_text = "least squares: it delivers ~" + Pct(tomo.estimate) + " of its rate (" +
                    std::to_string(tomo.evidence.size()) + " slow flows" +
                    (jobs.empty() ? "" : " of jobs " + jobs) + ", " + std::to_string(tomo.healthy) +
                    " healthy)";
  }
  if (sig.host_probes > 0) {
    sig.tomo_text += "; " + std::to_string(sig.host_probes) + " host agent probes agree";
  }
  if (tomo.ambiguous) sig.tomo_text += "; the flows cannot tell it apart from another link";
  return sig;
}

bool FaultManager::OutranProbe(const Observations& obs, size_t probe, LinkId id) const {
  const double capacity = obs.rate_bps[probe];
  const Duration at = obs.flows[probe]->second.at;
  for (size_t r = 0; r < obs.paths.size(); ++r) {
    if (obs.flows[r]->first.host || obs.paths[r].failed) continue;
    if (obs.rate_bps[r] <= capacity * kProbeMargin) continue;
    const Duration t = obs.flows[r]->second.at;
    if (t > at + options_.evaluate_interval || at > t + options_.evaluate_interval) continue;
    const std::vector<LinkId>& links = obs.paths[r].links;
    if (std::find(links.begin(), links.end(), id) != links.end()) return true;
  }
  return false;
}

bool FaultManager::HeldFaultyElsewhere(const std::vector<LinkId>& path, LinkId id,
                                       const Topology& nominal) const {
  auto held = [&](LinkId l) {
    auto it = links_.find(l);
    return it != links_.end() &&
           (it->second.health != LinkHealth::kUp || it->second.eff_health != LinkHealth::kUp);
  };
  return std::any_of(path.begin(), path.end(), [&](LinkId l) {
    if (l == id) return false;
    if (held(l)) return true;
    // A cable is one fault in both directions: the other direction of a held link explains the
    // probe too, before its own evidence comes in (stop 52: a probe from a neighbour NIC into the
    // faulty NIC, with no flow yet in that direction, backed the neighbour's link).
    const LinkId reverse =
        l.valid() && l.value() < nominal.num_links() ? nominal.link(l).reverse : LinkId();
    return reverse.valid() && reverse != id && held(reverse);
  });
}

FaultManager::Want FaultManager::Rules(const LinkState& s, const LinkSignals& sig,
                                       bool tomo_usable) const {
  Want want;
  if (s.port_down) {
    want.health = LinkHealth::kDown;
    want.why = "link state: " + s.port_source + " oper_status down";
  } else if (tomo_usable && sig.counters_bad) {
    want.health = LinkHealth::kDown;
    want.why = "two agreeing signals: " + sig.tomo_text + "; " + sig.counter_text;
  } else if (tomo_usable) {
    want.health = LinkHealth::kDegraded;
    want.fraction = std::max(sig.tomo->estimate, options_.min_capacity_fraction);
    want.why = "one signal: " + sig.tomo_text;
    if (sig.nic_loss) want.why += "; the NICs of its flows see loss (" + sig.nic_text + ")";
  } else if (sig.counters_bad) {
    want.health = LinkHealth::kDegraded;
    want.fraction = options_.counter_capacity_fraction;
    want.why = "one signal: " + sig.counter_text;
  }
  return want;
}

bool FaultManager::ApplyDamped(LinkState& s, Want want, Duration now) {
  const int cmp =
      Compare(want.health, want.fraction, s.health, s.fraction, options_.capacity_hysteresis);
  bool changed = false;
  if (cmp > 0) {
    if (s.health == LinkHealth::kUp) {
      s.hold = NextHold(s, now);
      s.hold_set = true;
    }
    changed = true;
  } else if (cmp < 0) {
    // Better (a recovery, or down -> degraded, or a higher capacity): only once the signals
    // have stayed below the current state for the hold time.
    if (now - s.last_at_current >= s.hold) {
      changed = true;
      if (want.health == LinkHealth::kUp) s.last_recovery = now;
    }
  } else {
    s.last_at_current = now;
  }
  if (!changed) return false;
  AccrueDowntime(s, now);
  s.health = want.health;
  s.fraction = want.health == LinkHealth::kDegraded ? want.fraction : 1.0;
  s.auto_since = now;
  s.last_at_current = now;
  s.reason = want.health == LinkHealth::kUp
                 ? "recovered: no fault signal for " + Num(s.hold.ToSeconds()) + " s"
                 : want.why;
  s.evidence = std::move(want.evidence);
  ++s.changes;
  return true;
}

std::optional<LinkDecision> FaultManager::UpdateEffective(LinkId id, LinkState& s,
                                                          bool auto_changed, const Evaluation& ev) {
  // What is in force: an admin pin, else the automatic state when automatic control is on.
  LinkHealth eff = LinkHealth::kUp;
  double eff_fraction = 1;
  bool automatic = true;
  if (s.admin) {
    eff = s.admin->health;
    eff_fraction = eff == LinkHealth::kDegraded ? s.admin->capacity_fraction : 1.0;
    automatic = false;
  } else if (options_.automatic) {
    eff = s.health;
    eff_fraction = s.fraction;
  }
  if (eff == s.eff_health && eff_fraction == s.eff_fraction) return std::nullopt;
  const LinkHealth from = s.eff_health;
  const bool by_admin = !automatic || (s.eff_health != s.health && !auto_changed);
  s.eff_health = eff;
  s.eff_fraction = eff_fraction;
  s.eff_since = ev.now;
  Record(id, s, from, ev.now, !by_admin, JobsCrossing(ev.applied, id));
  LinkDecision d;
  d.link = id;
  d.health = eff;
  d.capacity_fraction = eff_fraction;
  d.automatic = !by_admin;
  d.reason = by_admin ? (s.admin ? "admin pinned it " + std::string(LinkHealthName(eff))
                                 : "handed back to automatic control")
                      : s.reason;
  d.reason = WireName(ev.nominal, id) + " " + std::string(LinkHealthName(eff)) +
             (eff == LinkHealth::kDegraded ? " (" + Pct(eff_fraction) + " of nominal)" : "") +
             ": " + d.reason;
  return d;
}

void FaultManager::PruneRecords() {
  // Links that never faulted and carry no signal need no record.
  for (auto it = links_.begin(); it != links_.end();) {
    const LinkState& s = it->second;
    const bool idle =
        !s.hold_set && !s.admin && !s.port_down && !s.counters && !s.suspect &&
        s.health == LinkHealth::kUp && s.eff_health == LinkHealth::kUp &&
        !(s.probes_wanted_at &&
          std::binary_search(probe_target_set_.begin(), probe_target_set_.end(), it->first));
    it = idle ? links_.erase(it) : std::next(it);
  }
}

std::vector<LinkFaultView> FaultManager::Links() const {
  std::vector<LinkFaultView> out;
  for (const auto& [id, s] : links_) {
    LinkFaultView v;
    v.link = id;
    v.effective = s.eff_health;
    v.effective_fraction = s.eff_fraction;
    v.automatic = s.health;
    v.automatic_fraction = s.fraction;
    v.since = s.eff_since;
    v.admin = s.admin;
    v.reason = s.reason;
    v.evidence = s.evidence;
    v.score = s.score;
    v.jobs = s.jobs;
    v.suspect = s.suspect;
    v.ambiguous = s.ambiguous;
    v.port_down = s.port_down;
    v.hold = s.hold_set ? s.hold : options_.min_dwell;
    v.downtime_s = s.downtime_s;
    v.changes = s.changes;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<const FaultEvent*> FaultManager::EventsForJob(const std::string& job_id) const {
  std::vector<const FaultEvent*> out;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (std::find(it->jobs.begin(), it->jobs.end(), job_id) != it->jobs.end()) out.push_back(&*it);
  }
  return out;
}

}  // namespace crux::core
