#include "crux/hostd/host_agent.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>

#include "crux/protocol/codec.h"
#include "crux/protocol/validate.h"
#include "session.h"  // client_lib/src: the sans-I/O protocol session.

namespace crux::hostd {
namespace {

constexpr size_t kMaxRepinErrors = 8;
constexpr double kResendChange = 0.10;
constexpr size_t kMaxTelemetryInFlight = 16;
constexpr size_t kMaxRefusalUids = 1024;

// Rate-limited logging of a counted event: the first 10, then every 100th.
bool LogThisOne(uint64_t count) { return count <= 10 || count % 100 == 0; }

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool Moved(double now, double before) {
  if (before <= 0) return now > 0;
  return std::abs(now - before) / before > kResendChange;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

struct HostAgent::Process {
  pid_t pid = -1;
  uid_t uid = 0;
  std::string job_id;
  std::string job_source;
  std::string abi;
  int local_slot = -1;  // Hello.local_slot of its plugin (-1: not known).
  std::set<ConnId> conns;
  std::set<ConnId> verbs_conns;
  std::map<uint64_t, CommInfo> comms;
  std::optional<RankProfile> profile;
  std::optional<PluginStats> stats;
  std::map<std::pair<std::string, uint32_t>, QpInfo> qps;
  std::optional<PinAck> last_ack;
  std::deque<RepinResult> repin_errors;
  uint64_t repins_ok = 0;
  std::string refused_job;  // The job id last refused to it (answered once).
};

struct HostAgent::Job {
  std::string id;
  uid_t uid = 0;
  std::set<pid_t> pids;
  core::Duration first_seen;
  std::optional<core::Duration> empty_since;
  std::unique_ptr<client::internal::Session> session;
  uint32_t registered_ranks = 0;
  uint32_t hosts_expected = 0;
  std::optional<client::Profile> sent_profile;
  std::set<std::tuple<uint64_t, uint32_t, int32_t>> sent_keys;
  std::optional<client::Assignment> assignment;
  PinTable pins;
  std::vector<PlannedProbe> planned;  // The assignment's probes leaving this host's NICs.
};

HostAgent::HostAgent(HostdConfig config, uint64_t seed) : config_(std::move(config)), seed_(seed) {
  nic_states_.resize(config_.nics.size());
}
HostAgent::~HostAgent() = default;

void HostAgent::AddProbe(std::unique_ptr<HostProbe> probe) {
  probes_.push_back({std::move(probe), core::Duration::Zero(), std::nullopt});
}

void HostAgent::SetTermFile(protocol::TermFile file) {
  highest_term_ = std::max(highest_term_, file.term());
  term_file_ = std::move(file);
}

void HostAgent::SetNicCounterSource(std::unique_ptr<NicCounterSource> source) {
  nic_source_ = std::move(source);
}

HostAgent::Process& HostAgent::ProcessOf(pid_t pid, uid_t uid, core::Duration /*now*/) {
  auto& slot = processes_[pid];
  if (!slot) {
    slot = std::make_unique<Process>();
    slot->pid = pid;
    slot->uid = uid;
  }
  return *slot;
}

void HostAgent::OnLocalConnected(ConnId conn, pid_t pid, uid_t uid, core::Duration now) {
  conns_[conn] = {pid, uid};
  ProcessOf(pid, uid, now).conns.insert(conn);
}

HostAgent::Usage HostAgent::UsageOf(uid_t uid) const {
  Usage u;
  for (const auto& [id, j] : jobs_) {
    if (j->uid != uid) continue;
    ++u.jobs;
    u.ranks += static_cast<uint32_t>(j->pids.size());
  }
  return u;
}

std::string HostAgent::OverLimit(uid_t uid, bool new_job) const {
  if (uid == 0) return "";  // Root is exempt (config.h LocalLimitsConfig).
  const LocalLimitsConfig& l = config_.limits;
  const Usage u = UsageOf(uid);
  const std::string who = "uid " + std::to_string(uid);
  if (new_job && l.jobs_per_uid > 0 && u.jobs >= l.jobs_per_uid) {
    return "limits.jobs_per_uid: " + who + " already has " + std::to_string(u.jobs) +
           " jobs on this host (at most " + std::to_string(l.jobs_per_uid) + ")";
  }
  if (l.ranks_per_uid > 0 && u.ranks >= l.ranks_per_uid) {
    return "limits.ranks_per_uid: " + who + " already has " + std::to_string(u.ranks) +
           " processes in jobs on this host (at most " + std::to_string(l.ranks_per_uid) + ")";
  }
  if (new_job && l.jobs_non_root > 0) {
    uint32_t non_root = 0;
    for (const auto& [id, j] : jobs_) non_root += j->uid != 0 ? 1 : 0;
    if (non_root >= l.jobs_non_root) {
      return "limits.jobs_non_root: non-root users already have " + std::to_string(non_root) +
             " jobs on this host (at most " + std::to_string(l.jobs_non_root) + ")";
    }
  }
  return "";
}

void HostAgent::Refuse(Process& p, ConnId conn, const std::string& job_id, const char* code,
                       const std::string& reason, uint64_t* counter, const std::string& detail) {
  if (p.refused_job == job_id) return;  // Answered already; its next try may still get in.
  p.refused_job = job_id;
  const uint64_t count = ++*counter;
  const std::string line = "refused job '" + job_id + "' of process " + std::to_string(p.pid) +
                           " (uid " + std::to_string(p.uid) +
                           "): " + (detail.empty() ? reason : detail);
  last_error_ = line;
  if (last_refusal_.insert_or_assign(p.uid, line).second) {
    refusal_order_.push_back(p.uid);
    if (refusal_order_.size() > kMaxRefusalUids) {
      last_refusal_.erase(refusal_order_.front());
      refusal_order_.pop_front();
    }
  }
  to_local_.emplace_back(conn, Refused{job_id, code, reason});
  if (LogThisOne(count)) {
    std::fprintf(stderr, "crux-hostd: %s (%llu %s refusals so far)\n", line.c_str(),
                 static_cast<unsigned long long>(count),
                 counter == &counters_.refused_quota ? "limit" : "uid");
  }
}

void HostAgent::AttachJob(Process& p, ConnId conn, const std::string& job_id, core::Duration now) {
  if (!p.job_id.empty()) {
    if (p.job_id != job_id) {
      ++counters_.bad_local_messages;
      last_error_ = "process " + std::to_string(p.pid) + " changed its job id from '" + p.job_id +
                    "' to '" + job_id + "' (ignored)";
    }
    return;
  }
  auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second->uid != p.uid) {
    // The peer is not told whose job it is; the log and root's status are.
    Refuse(p, conn, job_id, kRefusedPermissionDenied,
           "job '" + job_id + "' belongs to another user", &counters_.refused_uid,
           "process " + std::to_string(p.pid) + " (uid " + std::to_string(p.uid) +
               ") claims job '" + job_id + "' of uid " + std::to_string(it->second->uid));
    return;
  }
  if (std::string why = OverLimit(p.uid, it == jobs_.end()); !why.empty()) {
    Refuse(p, conn, job_id, kRefusedResourceExhausted, why, &counters_.refused_quota);
    return;
  }
  if (it == jobs_.end()) {
    auto job = std::make_unique<Job>();
    job->id = job_id;
    job->uid = p.uid;
    job->first_seen = now;
    it = jobs_.emplace(job_id, std::move(job)).first;
  }
  Job& j = *it->second;
  p.refused_job.clear();
  p.job_id = job_id;
  j.pids.insert(p.pid);
  j.empty_since.reset();
  if (j.assignment) {
    for (ConnId c : p.verbs_conns) SendPins(j, c);
  }
}

void HostAgent::DetachJob(Process& p, core::Duration now) {
  auto it = jobs_.find(p.job_id);
  if (it == jobs_.end()) return;
  it->second->pids.erase(p.pid);
  if (it->second->pids.empty()) it->second->empty_since = now;
}

void HostAgent::OnLocalMessage(ConnId conn, const Message& message, core::Duration now) {
  auto c = conns_.find(conn);
  if (c == conns_.end()) return;
  auto pit = processes_.find(c->second.pid);
  if (pit == processes_.end()) return;
  Process& p = *pit->second;
  ++counters_.local_messages;
  if (const auto* h = std::get_if<Hello>(&message)) {
    p.abi = h->abi;
    if (h->local_slot >= 0) p.local_slot = h->local_slot;
    if (h->role == Role::kVerbs) p.verbs_conns.insert(conn);
    if (!h->job_id.empty()) {
      p.job_source = h->job_source;
      AttachJob(p, conn, h->job_id, now);
    }
    if (h->role == Role::kVerbs && !p.job_id.empty()) {
      auto j = jobs_.find(p.job_id);
      if (j != jobs_.end() && j->second->assignment) SendPins(*j->second, conn);
    }
  } else if (const auto* ci = std::get_if<CommInfo>(&message)) {
    p.comms[ci->hash] = *ci;
  } else if (const auto* rp = std::get_if<RankProfile>(&message)) {
    AttachJob(p, conn, rp->job_id, now);
    if (p.job_id == rp->job_id) {
      p.profile = *rp;
      auto j = jobs_.find(p.job_id);
      if (j != jobs_.end()) UpdateProfile(*j->second, now);
    }
  } else if (const auto* st = std::get_if<PluginStats>(&message)) {
    p.stats = *st;
  } else if (const auto* q = std::get_if<QpInfo>(&message)) {
    p.qps[{q->device, q->qpn}] = *q;
  } else if (const auto* g = std::get_if<QpGone>(&message)) {
    p.qps.erase({g->device, g->qpn});
  } else if (const auto* r = std::get_if<RepinResult>(&message)) {
    if (r->ok) {
      ++p.repins_ok;
      auto known = p.qps.find({r->device, r->qpn});
      if (known != p.qps.end()) {
        known->second.sport = r->sport;
        known->second.pinned = true;
      }
    } else {
      p.repin_errors.push_back(*r);
      if (p.repin_errors.size() > kMaxRepinErrors) p.repin_errors.pop_front();
    }
  } else if (const auto* a = std::get_if<PinAck>(&message)) {
    p.last_ack = *a;
  } else if (std::holds_alternative<StatusRequest>(message)) {
    // The connection's own uid decides what it sees (not its process's first one).
    const uid_t viewer = c->second.uid;
    to_local_.emplace_back(conn, StatusReply{viewer == 0 ? StatusJson() : StatusJson(viewer)});
  } else {
    ++counters_.bad_local_messages;
    last_error_ = "process " + std::to_string(p.pid) + " sent a message meant for the ranks";
  }
}

void HostAgent::OnLocalBadMessage(ConnId conn, const core::Status& error) {
  ++counters_.bad_local_messages;
  auto c = conns_.find(conn);
  last_error_ =
      "process " + std::to_string(c == conns_.end() ? -1 : c->second.pid) + ": " + error.message();
}

void HostAgent::OnLocalClosed(ConnId conn, core::Duration now) {
  auto c = conns_.find(conn);
  if (c == conns_.end()) return;
  const pid_t pid = c->second.pid;
  conns_.erase(c);
  auto pit = processes_.find(pid);
  if (pit == processes_.end()) return;
  Process& p = *pit->second;
  p.conns.erase(conn);
  p.verbs_conns.erase(conn);
  if (!p.conns.empty()) return;
  DetachJob(p, now);
  processes_.erase(pit);
}

bool HostAgent::LocalRanksComplete(const Job& j) const {
  uint32_t per_host = 1;
  for (pid_t pid : j.pids) {
    auto p = processes_.find(pid);
    if (p == processes_.end() || p->second->comms.empty()) return false;
    for (const auto& [hash, ci] : p->second->comms) {
      if (ci.nranks > 0 && ci.nnodes > 0) {
        per_host = std::max(per_host, static_cast<uint32_t>(ci.nranks / ci.nnodes));
      }
    }
  }
  return j.pids.size() >= per_host;
}

core::Duration HostAgent::RegisterAt(const Job& j) const {
  const int64_t factor = LocalRanksComplete(j) ? 1 : kRegisterWaitFactor;
  return j.first_seen + core::Duration::Millis(config_.register_delay_ms * factor);
}

void HostAgent::MaybeStartSession(Job& j, core::Duration now) {
  if (j.session || j.pids.empty()) return;
  if (now < RegisterAt(j)) return;
  uint32_t hosts = 0;
  for (pid_t pid : j.pids) {
    for (const auto& [hash, ci] : processes_[pid]->comms) {
      hosts = std::max(hosts, static_cast<uint32_t>(ci.nnodes));
    }
  }
  j.hosts_expected = hosts;
  j.registered_ranks = static_cast<uint32_t>(j.pids.size());
  client::internal::SessionOptions o;
  o.job_id = j.id;
  v1::RegisterJob& r = o.registration;
  r.set_job_id(j.id);
  auto* h = r.add_placement();
  h->set_host(config_.host);
  h->set_gpus(std::max<uint32_t>(1, j.registered_ranks));
  for (const NicConfig& n : config_.nics) {
    auto* nic = h->add_nics();
    nic->set_name(n.name);
    nic->set_address(n.address);
  }
  r.set_model("nccl");
  r.set_lease_ms(config_.lease_ms);
  v1::HostPart part;
  part.set_host(config_.host);
  part.set_hosts_expected(hosts);
  part.set_local_ranks(j.registered_ranks);
  part.set_accepts_batches(true);  // OnDaemonMessage takes AssignmentBatch pushes.
  *r.mutable_host_part() = part;
  o.host_part = part;
  o.call_timeout = core::Duration::Millis(config_.call_timeout_ms);
  o.backoff.initial = core::Duration::Millis(100);
  o.backoff.max = core::Duration::Millis(10000);
  o.backoff.multiplier = 2;
  o.backoff.jitter = 0.2;
  o.backoff.seed = seed_ ^ std::hash<std::string>()(j.id);
  o.end_job_on_close = true;
  o.initial_term = highest_term_;
  o.record_term = [this](uint64_t term) -> core::Status {
    if (term_file_) CRUX_RETURN_IF_ERROR(term_file_->Raise(term));
    highest_term_ = std::max(highest_term_, term);
    return core::Status::Ok();
  };
  j.session = std::make_unique<client::internal::Session>(std::move(o));
  j.session->Start(now);
  j.sent_profile.reset();
  j.sent_keys.clear();
  UpdateProfile(j, now);
  Pump(j, now);
}

void HostAgent::UpdateProfile(Job& j, core::Duration now) {
  if (!j.session) return;  // Merged once the session exists.
  std::vector<int64_t> period, comm, compute;
  uint32_t samples = 0;
  bool first = true;
  uint64_t total = 0;
  std::map<uint64_t, v1::CommTraffic> comms;
  std::set<std::tuple<uint64_t, uint32_t, int32_t>> keys;
  std::set<uint64_t> unslotted;  // Communicators with a rank of unknown slot: no slots at all.
  for (pid_t pid : j.pids) {
    const Process& p = *processes_[pid];
    if (!p.profile || !p.profile->converged) continue;
    const RankProfile& rp = *p.profile;
    period.push_back(rp.period_ns);
    comm.push_back(rp.comm_ns);
    compute.push_back(rp.compute_ns);
    samples = first ? rp.samples : std::min(samples, rp.samples);
    first = false;
    for (const CommBytes& cb : rp.comms) {
      auto ci = p.comms.find(cb.hash);
      if (ci == p.comms.end()) continue;  // CommInfo always comes first; a gap is transient.
      v1::CommTraffic& t = comms[cb.hash];
      t.set_comm_hash(cb.hash);
      t.set_nranks(static_cast<uint32_t>(ci->second.nranks));
      t.set_nnodes(static_cast<uint32_t>(ci->second.nnodes));
      const auto rank = static_cast<uint32_t>(ci->second.rank);
      t.add_local_ranks(rank);
      if (p.local_slot >= 0) {
        t.add_local_slots(static_cast<uint32_t>(p.local_slot));
      } else {
        unslotted.insert(cb.hash);
      }
      total += cb.bytes;
      if (cb.peers.empty()) {
        auto* b = t.add_bytes();
        b->set_rank(rank);
        b->set_peer_rank(-1);
        b->set_bytes(cb.bytes);
        keys.emplace(cb.hash, rank, -1);
      }
      for (const PeerBytes& pb : cb.peers) {
        auto* b = t.add_bytes();
        b->set_rank(rank);
        b->set_peer_rank(pb.peer_rank);
        b->set_bytes(pb.bytes);
        keys.emplace(cb.hash, rank, pb.peer_rank);
      }
    }
  }
  if (period.empty()) return;
  client::Profile prof;
  prof.iteration_period_ns = std::max<int64_t>(1, Median(period));
  prof.comm_time_ns = Median(comm);
  prof.compute_time_ns = std::max<int64_t>(1, Median(compute));
  prof.overlap_start = 1;
  prof.bytes_per_iteration = total;
  prof.samples = std::max<uint32_t>(1, samples);
  prof.converged = true;
  prof.detected = true;
  if (j.sent_profile && keys == j.sent_keys &&
      !Moved(static_cast<double>(prof.iteration_period_ns),
             static_cast<double>(j.sent_profile->iteration_period_ns)) &&
      !Moved(static_cast<double>(prof.bytes_per_iteration),
             static_cast<double>(j.sent_profile->bytes_per_iteration))) {
    return;
  }
  v1::ProfileReport extra;
  for (auto& [hash, t] : comms) {
    if (unslotted.contains(hash)) t.clear_local_slots();
    *extra.add_comms() = std::move(t);
  }
  j.sent_profile = prof;
  j.sent_keys = std::move(keys);
  j.session->SetProfile(now, prof, std::move(extra));
  Pump(j, now);
}

PinTable HostAgent::BuildPins(const Job& j) {
  PinTable t;
  t.job_id = j.id;
  if (!j.assignment) return t;
  const client::Assignment& a = *j.assignment;
  t.epoch = a.epoch;
  t.state_id = a.state_id;
  t.traffic_class = static_cast<int>(a.traffic_class);
  std::map<std::string, std::string> address_of;
  for (const auto& [addr, name] : config_.nic_by_address) address_of.emplace(name, addr);
  for (const client::FlowPin& f : a.flows) {
    if (f.udp_sport == 0) continue;
    const NicConfig* local = nullptr;
    for (const NicConfig& n : config_.nics) {
      if (n.name == f.src_nic) local = &n;
    }
    if (local == nullptr) continue;  // Another host's flow.
    auto remote = address_of.find(f.dst_nic);
    if (remote == address_of.end()) {
      ++counters_.unresolved_flows;
      last_error_ = "flow " + f.src_nic + " -> " + f.dst_nic + ": no address known for " +
                    f.dst_nic + " (nic_addresses)";
      continue;
    }
    if (t.pins.size() >= kMaxPins) break;
    t.pins.push_back({local->device, remote->second, f.udp_sport});
  }
  return t;
}

std::vector<PlannedProbe> HostAgent::BuildPlannedProbes(const Job& j, const v1::Assignment& a) {
  std::vector<PlannedProbe> out;
  std::map<std::string, std::string> address_of;
  for (const auto& [addr, name] : config_.nic_by_address) address_of.emplace(name, addr);
  for (const v1::ProbeTarget& p : a.probes()) {
    if (p.udp_sport() == 0 || p.udp_sport() > 65535) continue;
    const NicConfig* local = nullptr;
    for (const NicConfig& n : config_.nics) {
      if (n.name == p.src_nic()) local = &n;
    }
    if (local == nullptr) continue;  // Another host's probe.
    auto remote = address_of.find(p.dst_nic());
    if (remote == address_of.end()) {
      ++counters_.unresolved_flows;
      last_error_ = "probe " + p.src_nic() + " -> " + p.dst_nic() + " of job " + j.id +
                    ": no address known for " + p.dst_nic() + " (nic_addresses)";
      continue;
    }
    out.push_back({p.src_nic(), local->device, p.dst_nic(), remote->second,
                   static_cast<uint16_t>(p.udp_sport()), static_cast<int>(a.traffic_class())});
  }
  return out;
}

void HostAgent::SendPins(Job& j, std::optional<ConnId> only) {
  if (only) {
    to_local_.emplace_back(*only, j.pins);
    ++counters_.pin_tables_sent;
    return;
  }
  for (pid_t pid : j.pids) {
    for (ConnId c : processes_[pid]->verbs_conns) {
      to_local_.emplace_back(c, j.pins);
      ++counters_.pin_tables_sent;
    }
  }
}

void HostAgent::Pump(Job& j, core::Duration now) {
  if (!j.session) return;
  for (v1::Envelope& e : j.session->TakeOutgoing()) {
    if (e.request_id() != 0) {
      const uint64_t id = ++next_request_id_;
      requests_[id] = {j.id, e.request_id()};
      e.set_request_id(id);
    }
    to_daemon_.push_back(std::move(e));
  }
  (void)now;
}

void HostAgent::OnDaemonMessage(const v1::Envelope& message, core::Duration now,
                                int64_t unix_now_ns) {
  ++counters_.daemon_messages;
  if (message.request_id() != 0 && probe_report_requests_.erase(message.request_id()) > 0) {
    if (message.has_error()) {
      ++counters_.probe_reports_refused;
      probe_report_error_ = message.error().message();
    } else {
      ++counters_.probe_reports_acked;
    }
    return;
  }
  if (message.request_id() != 0 && telemetry_requests_.erase(message.request_id()) > 0) {
    if (message.has_error()) {
      ++counters_.nic_telemetry_refused;
      nic_telemetry_error_ = message.error().message();
    } else {
      ++counters_.nic_telemetry_acked;
    }
    return;
  }
  if (message.has_assignment_batch()) {
    OnAssignmentBatch(message.assignment_batch(), now, unix_now_ns);
    return;
  }
  Job* job = nullptr;
  v1::Envelope m = message;
  if (m.request_id() != 0) {
    auto r = requests_.find(m.request_id());
    if (r == requests_.end()) {
      ++counters_.stray_daemon_messages;
      return;
    }
    auto j = jobs_.find(r->second.first);
    m.set_request_id(r->second.second);
    requests_.erase(r);
    if (j == jobs_.end()) return;
    job = j->second.get();
  } else if (m.has_assignment()) {
    auto j = jobs_.find(m.assignment().job_id());
    if (j == jobs_.end()) {
      ++counters_.stray_daemon_messages;
      return;
    }
    job = j->second.get();
  } else {
    ++counters_.stray_daemon_messages;
    return;
  }
  OnJobMessage(*job, m, now, unix_now_ns);
}

void HostAgent::OnJobMessage(Job& job, const v1::Envelope& m, core::Duration now,
                             int64_t unix_now_ns) {
  if (!job.session) return;
  std::optional<client::Assignment> a = job.session->OnMessage(now, m, unix_now_ns);
  if (a) {
    job.assignment = *a;
    job.pins = BuildPins(job);
    if (m.has_assignment()) job.planned = BuildPlannedProbes(job, m.assignment());
    SendPins(job);
    job.session->FinishApply(core::Status::Ok());
  }
  Pump(job, now);
}

void HostAgent::OnAssignmentBatch(const v1::AssignmentBatch& batch, core::Duration now,
                                  int64_t unix_now_ns) {
  ++counters_.assignment_batches;
  const size_t mark = to_daemon_.size();
  for (const v1::Assignment& a : batch.assignments()) {
    auto j = jobs_.find(a.job_id());
    if (j == jobs_.end()) {
      ++counters_.stray_daemon_messages;
      continue;
    }
    // Each assignment is handled, applied and acked as if it had come alone.
    v1::Envelope one = protocol::NewEnvelope(0);
    *one.mutable_assignment() = a;
    OnJobMessage(*j->second, one, now, unix_now_ns);
  }
  // The acks the batch produced go back in one AckBatch; anything else keeps its place.
  v1::Envelope acks = protocol::NewEnvelope(0);
  std::vector<v1::Envelope> rest;
  for (size_t i = mark; i < to_daemon_.size(); ++i) {
    v1::Envelope& e = to_daemon_[i];
    if (e.request_id() == 0 && e.has_ack()) {
      *acks.mutable_ack_batch()->add_acks() = std::move(*e.mutable_ack());
    } else {
      rest.push_back(std::move(e));
    }
  }
  to_daemon_.resize(mark);
  if (acks.ack_batch().acks_size() > 0) to_daemon_.push_back(std::move(acks));
  for (v1::Envelope& e : rest) to_daemon_.push_back(std::move(e));
}

void HostAgent::OnDaemonSendFailed(const v1::Envelope& message, const core::Status& error,
                                   core::Duration now) {
  if (message.request_id() != 0 && probe_report_requests_.erase(message.request_id()) > 0) {
    ++counters_.probe_reports_refused;
    probe_report_error_ = error.message();
    return;
  }
  if (message.request_id() != 0 && telemetry_requests_.erase(message.request_id()) > 0) {
    ++counters_.nic_telemetry_refused;
    nic_telemetry_error_ = error.message();
    return;
  }
  v1::Envelope m = message;
  std::string job_id;
  if (m.request_id() != 0) {
    auto r = requests_.find(m.request_id());
    if (r == requests_.end()) return;
    job_id = r->second.first;
    m.set_request_id(r->second.second);
    requests_.erase(r);
  } else if (m.has_ack()) {
    job_id = m.ack().job_id();
  } else if (m.has_ack_batch()) {
    // Each session learns of its own ack's failure.
    for (const v1::Ack& a : m.ack_batch().acks()) {
      v1::Envelope one = protocol::NewEnvelope(0);
      *one.mutable_ack() = a;
      OnDaemonSendFailed(one, error, now);
    }
    return;
  }
  auto j = jobs_.find(job_id);
  if (j == jobs_.end() || !j->second->session) return;
  j->second->session->OnSendFailed(now, m, error);
  Pump(*j->second, now);
}

void HostAgent::OnDaemonConnectionChange(bool lost, bool connected, core::Duration now) {
  if (lost) {
    ++counters_.daemon_connections_lost;
    had_connection_lost_ = true;
    // No reply can come for these (the connection and its routing id are gone).
    requests_.clear();
    telemetry_requests_.clear();
    probe_report_requests_.clear();
  }
  if (connected && had_connection_lost_) {
    ++counters_.daemon_reconnects;
    had_connection_lost_ = false;
  }
  for (auto& [id, j] : jobs_) {
    if (!j->session) continue;
    j->session->OnConnectionChange(now, lost, connected);
    Pump(*j, now);
  }
}

void HostAgent::Tick(core::Duration now) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& j = *it->second;
    MaybeStartSession(j, now);
    const bool ended =
        j.empty_since && now >= *j.empty_since + core::Duration::Millis(config_.end_delay_ms);
    if (j.session) {
      if (ended) j.session->Close(now);
      j.session->Tick(now);
      Pump(j, now);
      if (j.session->Done()) {
        it = jobs_.erase(it);
        continue;
      }
    } else if (ended) {
      it = jobs_.erase(it);
      continue;
    }
    ++it;
  }
  // Requests whose session gave up (timed out, job gone) never get their reply routed.
  if (requests_.size() > 4 * (jobs_.size() + 1)) {
    for (auto r = requests_.begin(); r != requests_.end();) {
      auto j = jobs_.find(r->second.first);
      r = (j == jobs_.end()) ? requests_.erase(r) : std::next(r);
    }
    while (requests_.size() > 4 * (jobs_.size() + 1)) requests_.erase(requests_.begin());
  }
  RunProbes(now);
  ReadNicCounters(now);
}

void HostAgent::ReadNicCounters(core::Duration now) {
  if (!nic_source_ || config_.nic_counters_interval_ms <= 0 || config_.nics.empty()) return;
  if (now < next_nic_read_) return;
  next_nic_read_ = now + core::Duration::Millis(config_.nic_counters_interval_ms);
  v1::Envelope e = protocol::NewEnvelope(0);
  v1::HostTelemetry* t = e.mutable_host_telemetry();
  for (size_t i = 0; i < config_.nics.size(); ++i) {
    const NicConfig& n = config_.nics[i];
    NicState& st = nic_states_[i];
    NicCounterReading r = nic_source_->Read(n);
    st.errors = r.errors;
    bool any = false;
    for (const auto& v : r.values) any = any || v.has_value();
    if (!any) {  // Nothing to report (no hw_counters): not a NIC with all-zero deltas.
      st.last.reset();
      st.deltas.reset();
      continue;
    }
    NicJudgement judged;
    if (st.last && now > st.last_at) judged = JudgeNicCounters(*st.last, r, now - st.last_at);
    if (st.last && now > st.last_at && judged.verdict != NicVerdict::kOk) {
      // Dropped (never a fault signal); the reading is the next one's baseline. Logged: the first
      // ten of each kind, then every hundredth.
      const bool reset = judged.verdict == NicVerdict::kReset;
      const uint64_t count =
          ++(reset ? counters_.nic_counter_resets : counters_.nic_implausible_samples);
      if (LogThisOne(count)) {
        std::fprintf(
            stderr, "crux-hostd: NIC %s: dropped a counter reading (%s; %llu so far): %s\n",
            n.name.c_str(), reset ? "a reset, not a wrap" : "implausible, not reported to cruxd",
            static_cast<unsigned long long>(count), judged.why.c_str());
      }
      st.dropped = judged.why;
      st.deltas.reset();
    } else if (st.last && now > st.last_at) {
      const std::array<uint64_t, kNicCounterCount>& d = judged.delta;
      v1::NicCounters* c = t->add_nics();
      c->set_nic(n.name);
      c->set_device(n.device);
      c->set_port(n.port);
      c->set_interval_ns(static_cast<uint64_t>((now - st.last_at).nanos()));
      c->set_packet_seq_err(d[0]);
      c->set_out_of_sequence(d[1]);
      c->set_local_ack_timeout_err(d[2]);
      c->set_roce_adp_retrans(d[3]);
      c->set_roce_adp_retrans_to(d[4]);
      c->set_np_cnp_sent(d[5]);
      c->set_rp_cnp_handled(d[6]);
      c->set_np_ecn_marked_roce_packets(d[7]);
      st.deltas = d;
      st.delta_interval = now - st.last_at;
    }
    st.last = std::move(r);
    st.last_at = now;
  }
  if (t->nics_size() == 0) return;  // First reading: primes only.
  t->set_host(config_.host);
  t->set_seq(++nic_telemetry_seq_);
  const uint64_t id = ++next_request_id_;
  e.set_request_id(id);
  telemetry_requests_.insert(id);
  while (telemetry_requests_.size() > kMaxTelemetryInFlight) {
    telemetry_requests_.erase(telemetry_requests_.begin());  // The oldest: never answered.
  }
  ++counters_.nic_telemetry_sent;
  to_daemon_.push_back(std::move(e));
}

void HostAgent::RunProbes(core::Duration now) {
  if (probes_.empty()) return;
  ProbeContext ctx;
  ctx.config = &config_;
  ctx.now = now;
  bool built = false;
  for (ProbeSlot& s : probes_) {
    if (now < s.next) continue;
    if (!built) {
      for (const auto& [pid, p] : processes_) {
        for (const auto& [key, q] : p->qps) ctx.qps.push_back(q);
      }
      for (const auto& [id, j] : jobs_) {
        ctx.pins[id] = j->pins;
        if (!j->planned.empty()) ctx.planned[id] = j->planned;
      }
      built = true;
    }
    s.last = s.probe->Run(ctx);
    s.next = now + s.probe->interval();
    if (s.last->round > s.reported_round) {
      s.reported_round = s.last->round;
      if (!s.last->capacity.empty()) ReportCapacity(s.last->capacity);
    }
  }
}

void HostAgent::ReportCapacity(const std::vector<CapacityMeasurement>& measured) {
  v1::Envelope e = protocol::NewEnvelope(0);
  v1::HostTelemetry* t = e.mutable_host_telemetry();
  t->set_host(config_.host);
  for (const CapacityMeasurement& m : measured) {
    for (const std::string& job : m.jobs) {
      if (static_cast<size_t>(t->probes_size()) >= protocol::kMaxHostProbes) break;
      v1::HostProbeResult* p = t->add_probes();
      p->set_job_id(job);
      p->set_src_nic(m.src_nic);
      p->set_dst_nic(m.dst_nic);
      p->set_udp_sport(m.sport);
      p->set_lost(m.lost);
      p->set_sent(m.sent);
      p->set_received(m.lost ? 0 : m.received);
      p->set_sender_limited(!m.lost && m.sender_limited);
      p->set_send_time_ns(static_cast<uint64_t>(std::max<int64_t>(0, m.send_time.nanos())));
      if (!m.lost) {
        p->set_bytes(static_cast<uint64_t>(std::max<int64_t>(0, m.bytes.count())));
        p->set_transfer_time_ns(
            static_cast<uint64_t>(std::max<int64_t>(0, m.transfer_time.nanos())));
      }
    }
  }
  if (t->probes_size() == 0) return;
  t->set_seq(++nic_telemetry_seq_);
  const uint64_t id = ++next_request_id_;
  e.set_request_id(id);
  probe_report_requests_.insert(id);
  while (probe_report_requests_.size() > kMaxTelemetryInFlight) {
    probe_report_requests_.erase(probe_report_requests_.begin());  // The oldest: never answered.
  }
  ++counters_.probe_reports_sent;
  counters_.probe_results_sent += static_cast<uint64_t>(t->probes_size());
  to_daemon_.push_back(std::move(e));
}

std::vector<v1::Envelope> HostAgent::TakeToDaemon() { return std::exchange(to_daemon_, {}); }

std::vector<std::pair<ConnId, Message>> HostAgent::TakeToLocal() {
  return std::exchange(to_local_, {});
}

core::Duration HostAgent::NextWakeup() const {
  core::Duration next = core::Duration::Infinite();
  for (const auto& [id, j] : jobs_) {
    if (j->session) {
      next = std::min(next, j->session->NextWakeup());
    } else if (!j->pids.empty()) {
      next = std::min(next, RegisterAt(*j));
    }
    if (j->empty_since) {
      next = std::min(next, *j->empty_since + core::Duration::Millis(config_.end_delay_ms));
    }
  }
  for (const ProbeSlot& s : probes_) next = std::min(next, s.next);
  if (nic_source_ && config_.nic_counters_interval_ms > 0 && !config_.nics.empty()) {
    next = std::min(next, next_nic_read_);
  }
  return next;
}

std::string HostAgent::StatusJson(std::optional<uid_t> viewer) const {
  using nlohmann::json;
  // Root (or no viewer: crux-hostd itself) sees everything; another uid only its own.
  const bool all = !viewer.has_value() || *viewer == 0;
  const uid_t own = all ? 0 : *viewer;
  json jobs = json::array();
  for (const auto& [id, j] : jobs_) {
    if (!all && j->uid != own) continue;
    json ranks = json::array();
    uint64_t qps = 0, pinned = 0, repin_errors = 0;
    for (pid_t pid : j->pids) {
      const Process& p = *processes_.at(pid);
      json r = {{"pid", p.pid},
                {"abi", p.abi},
                {"job_source", p.job_source},
                {"local_slot", p.local_slot}};
      json comms = json::array();
      for (const auto& [hash, ci] : p.comms) {
        comms.push_back({{"comm", Hex(hash)},
                         {"rank", ci.rank},
                         {"nranks", ci.nranks},
                         {"nnodes", ci.nnodes},
                         {"alive", ci.alive}});
      }
      r["comms"] = comms;
      if (p.profile) {
        json pc = json::array();
        for (const CommBytes& cb : p.profile->comms) {
          json peers = json::array();
          for (const PeerBytes& pb : cb.peers) peers.push_back({pb.peer_rank, pb.bytes});
          pc.push_back({{"comm", Hex(cb.hash)}, {"bytes", cb.bytes}, {"peers", peers}});
        }
        r["profile"] = {{"period_ns", p.profile->period_ns},
                        {"comm_ns", p.profile->comm_ns},
                        {"samples", p.profile->samples},
                        {"converged", p.profile->converged},
                        {"comms", pc}};
      }
      if (p.stats) {
        r["stats"] = {{"events", p.stats->events},
                      {"dropped", p.stats->dropped},
                      {"collectives", p.stats->collectives},
                      {"sampled_windows", p.stats->sampled_windows}};
      }
      if (p.last_ack) {
        r["pins_ack"] = {
            {"epoch", p.last_ack->epoch}, {"ok", p.last_ack->ok}, {"error", p.last_ack->error}};
      }
      json errs = json::array();
      for (const RepinResult& e : p.repin_errors) {
        errs.push_back({{"qpn", e.qpn}, {"sport", e.sport}, {"error", e.error}});
      }
      r["repin_errors"] = errs;
      r["repins_ok"] = p.repins_ok;
      qps += p.qps.size();
      for (const auto& [k, q] : p.qps) pinned += q.pinned ? 1 : 0;
      repin_errors += p.repin_errors.size();
      ranks.push_back(std::move(r));
    }
    json job = {{"job_id", id},
                {"uid", j->uid},
                {"local_ranks", j->pids.size()},
                {"registered_ranks", j->registered_ranks},
                {"hosts_expected", j->hosts_expected},
                {"ranks", ranks},
                {"qps", qps},
                {"pinned_qps", pinned},
                {"repin_errors", repin_errors}};
    if (j->session) {
      const auto& st = j->session->stats();
      job["registered"] = j->session->registered();
      job["reports_sent"] = st.reports_sent;
      job["registrations"] = st.registrations;
      job["register_failures"] = st.register_failures;
      job["last_error"] = st.last_error;
    } else {
      job["registered"] = false;
    }
    if (j->sent_profile) {
      job["profile"] = {{"period_ns", j->sent_profile->iteration_period_ns},
                        {"compute_ns", j->sent_profile->compute_time_ns},
                        {"comm_ns", j->sent_profile->comm_time_ns},
                        {"bytes_per_iteration", j->sent_profile->bytes_per_iteration},
                        {"samples", j->sent_profile->samples}};
    }
    if (j->assignment) {
      job["assignment"] = {
          {"epoch", j->assignment->epoch},        {"state_id", Hex(j->assignment->state_id)},
          {"dscp", j->assignment->dscp},          {"traffic_class", j->assignment->traffic_class},
          {"flows", j->assignment->flows.size()}, {"pins", j->pins.pins.size()}};
      // What the shims enforce: this host's flows (device, remote GID, UDP source port).
      json pins = json::array();
      for (const Pin& p : j->pins.pins) {
        pins.push_back({{"device", p.device}, {"remote_gid", p.remote_gid}, {"sport", p.sport}});
      }
      job["pin_table"] = std::move(pins);
    }
    jobs.push_back(std::move(job));
  }
  json probes = json::array();
  for (const ProbeSlot& s : probes_) {
    json p = {{"name", std::string(s.probe->name())}};
    if (s.last) {
      p["ok"] = s.last->ok;
      p["summary"] = s.last->summary;
      if (all) p["data"] = s.last->data;  // Per flow: other users' jobs too.
    }
    probes.push_back(std::move(p));
  }
  json nics = json::array();
  for (size_t i = 0; i < config_.nics.size(); ++i) {
    const NicConfig& n = config_.nics[i];
    const NicState& st = nic_states_[i];
    json found = json::array();
    json missing = json::array();
    if (st.last) {
      for (size_t k = 0; k < kNicCounterCount; ++k) {
        (st.last->values[k] ? found : missing).push_back(std::string(kNicCounterNames[k]));
      }
    }
    json nic = {{"nic", n.name},
                {"device", n.device},
                {"port", n.port},
                {"found", found},
                {"missing", missing},
                {"errors", st.errors},
                {"last_dropped", st.dropped},
                {"read", st.last.has_value()}};
    if (st.deltas) {
      json deltas = json::object();
      json rates = json::object();
      const double seconds = st.delta_interval.ToSeconds();
      uint64_t loss = 0, congestion = 0;
      for (size_t k = 0; k < kNicCounterCount; ++k) {
        const uint64_t d = (*st.deltas)[k];
        deltas[std::string(kNicCounterNames[k])] = d;
        rates[std::string(kNicCounterNames[k])] =
            seconds > 0 ? static_cast<double>(d) / seconds : 0;
        (k < kNicLossCounters ? loss : congestion) += d;
      }
      nic["interval_ms"] = st.delta_interval.ToMillis();
      nic["deltas"] = deltas;
      nic["rates_per_s"] = rates;
      nic["loss"] = loss;
      nic["congestion"] = congestion;
    }
    nics.push_back(std::move(nic));
  }
  json nic_counters = {{"interval_ms", config_.nic_counters_interval_ms},
                       {"enabled", nic_source_ != nullptr && config_.nic_counters_interval_ms > 0},
                       {"sysfs_root", config_.sysfs_root},
                       {"nics", nics},
                       {"sent", counters_.nic_telemetry_sent},
                       {"acked", counters_.nic_telemetry_acked},
                       {"refused", counters_.nic_telemetry_refused},
                       {"counter_resets", counters_.nic_counter_resets},
                       {"implausible_samples", counters_.nic_implausible_samples},
                       {"last_error", nic_telemetry_error_}};
  json probe_reports = {{"sent", counters_.probe_reports_sent},
                        {"acked", counters_.probe_reports_acked},
                        {"refused", counters_.probe_reports_refused},
                        {"results_sent", counters_.probe_results_sent},
                        {"last_error", probe_report_error_}};
  json c = {{"local_messages", counters_.local_messages},
            {"bad_local_messages", counters_.bad_local_messages},
            {"refused_uid", counters_.refused_uid},
            {"refused_quota", counters_.refused_quota},
            {"unresolved_flows", counters_.unresolved_flows},
            {"pin_tables_sent", counters_.pin_tables_sent},
            {"daemon_messages", counters_.daemon_messages},
            {"stray_daemon_messages", counters_.stray_daemon_messages},
            {"assignment_batches", counters_.assignment_batches},
            {"daemon_connections_lost", counters_.daemon_connections_lost},
            {"daemon_reconnects", counters_.daemon_reconnects}};
  // The limits and who uses them: the viewer's own usage, or (root) every uid's.
  json limits = {{"jobs_per_uid", config_.limits.jobs_per_uid},
                 {"ranks_per_uid", config_.limits.ranks_per_uid},
                 {"jobs_non_root", config_.limits.jobs_non_root},
                 {"root_exempt", true}};
  json usage = json::object();
  std::set<uid_t> uids;
  for (const auto& [id, j] : jobs_) uids.insert(j->uid);
  for (uid_t u : uids) {
    if (!all && u != own) continue;
    const Usage us = UsageOf(u);
    usage[std::to_string(u)] = {{"jobs", us.jobs}, {"ranks", us.ranks}};
  }
  limits["usage_by_uid"] = std::move(usage);
  size_t processes = 0;
  for (const auto& [pid, p] : processes_) processes += (all || p->uid == own) ? 1 : 0;
  std::string last_error = last_error_;
  if (!all) {
    auto r = last_refusal_.find(own);
    last_error = r == last_refusal_.end() ? "" : r->second;
  }
  json out = {
      {"host", config_.host},
      {"daemon", config_.daemon_endpoint},
      {"viewer", all ? json{{"scope", "all jobs"}} : json{{"uid", own}, {"scope", "own jobs"}}},
      {"processes", processes},
      {"jobs", jobs},
      {"probes", probes},
      {"probe_reports", probe_reports},
      {"nic_counters", nic_counters},
      {"limits", limits},
      {"counters", c},
      {"last_error", last_error}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace crux::hostd
