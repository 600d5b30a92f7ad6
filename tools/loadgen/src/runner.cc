#include "crux/loadgen/runner.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <zmq.h>
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "crux/core/base/backoff.h"
#include "crux/core/base/random.h"
#include "crux/core/base/text.h"
#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"

namespace crux::loadgen {
namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

// kQuietReport: a report sent quiet (LoadGenOptions::ack_every), answered only if refused.
enum class Kind { kRegister, kReport, kQuietReport, kHeartbeat, kEnd };
// kHeld: an arrival (LoadGenOptions::arrivals) not due yet.
enum class State { kUnregistered, kRegistered, kFailed, kHeld };

struct Outstanding {
  uint64_t request_id;
  Kind kind;
  TimePoint sent;
};

// One simulated client of a job: the whole job (host = -1), or one host's part of it (host-agent
// mode: jobs[...].hosts[host], spoken for by its host's agent connection).
struct Sim {
  const SimJob* job = nullptr;
  int host = -1;
  size_t conn = 0;            // Its connection (Engine::conns_).
  int arrival = -1;           // Index into Engine::arrivals_, or -1.
  bool first_acked = false;   // Its first profile report was acknowledged (arrivals).
  bool pushed_since = false;  // Got a push after its arrival's trigger.
  State state = State::kUnregistered;
  std::vector<Outstanding> outstanding;  // Few entries: linear search.
  uint64_t sample = 0;
  uint64_t heartbeat_seq = 0;
  // The applied assignment: a push is applied when its epoch is above applied_epoch or its
  // state_id differs from applied_state_id (docs/protocol.md, "Epochs and state ids").
  uint64_t applied_epoch = 0;
  uint64_t applied_state_id = 0;
  uint64_t highest_term = 0;  // HA: pushes from a lower cruxd term are refused.
  core::Duration heartbeat_interval;
  TimePoint retry_register_at{};
  core::ExponentialBackoff register_backoff;  // Between registration attempts.
  // The applied assignment's pinned flows and the start of the current flow-stats window.
  std::vector<PinnedFlow> flows;
  TimePoint flows_since{};
  size_t reports_outstanding = 0;
  // Why the job is not registered (last refusal's code name, "TIMEOUT", "SEND_FAILED"), and the
  // daemon's message; empty while nothing went wrong.
  std::string fail_reason;
  std::string fail_message;
};

// Registration retries (UNAVAILABLE, timeouts, failed sends): 200 ms doubling to 5 s, with
// jitter so that thousands of jobs refused together do not come back in lock-step.
core::BackoffOptions RegisterBackoff(uint64_t seed, size_t job) {
  core::BackoffOptions o;
  o.initial = core::Duration::Millis(200);
  o.max = core::Duration::Millis(5000);
  o.multiplier = 2;
  o.jitter = 0.5;
  o.seed = core::Mix64(seed ^ (0x9e3779b97f4a7c15ULL * (job + 1)));
  return o;
}

// One connection to cruxd: a job's own (whole-job mode) or a host agent's, carrying the parts
// of every job on that host.
struct Conn {
  std::unique_ptr<protocol::DealerClient> client;
  std::vector<size_t> sims;                            // The clients it carries.
  std::unordered_map<uint64_t, size_t> owner;          // Request id -> sim (outstanding).
  std::unordered_map<std::string, size_t> sim_of_job;  // Job id -> sim (pushes, by job id).
};

// A job held back and registered during the run (LoadGenOptions::arrivals).
struct Arrival {
  std::vector<size_t> sims;
  TimePoint trigger{};  // When its last unit's first report was acknowledged.
  size_t reported = 0;  // Units whose first report was acknowledged.
  size_t pushed = 0;    // Units with a push after the trigger.
  bool registered = false;
};

struct Due {
  TimePoint at;
  size_t sim;
  Kind kind;
  bool operator>(const Due& o) const { return at > o.at; }
};

std::chrono::nanoseconds Ns(core::Duration d) { return std::chrono::nanoseconds(d.nanos()); }

uint64_t UnixNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

class Engine {
 public:
  // `units[i]` = (job, host) of client i (host -1: the whole job), `conn_of[i]` its connection
  // (0 .. connections - 1).
  Engine(protocol::TransportContext& ctx, const std::vector<SimJob>& jobs,
         std::vector<std::pair<size_t, int>> units, std::vector<size_t> conn_of, size_t connections,
         const LoadGenOptions& options, const std::atomic<bool>* stop)
      : ctx_(ctx),
        jobs_(jobs),
        units_(std::move(units)),
        conn_of_(std::move(conn_of)),
        connections_(connections),
        options_(options),
        stop_(stop),
        rng_(core::Mix64(options.seed)) {}
  ~Engine() {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
  }

  core::Status Init() {
    if (options_.endpoint.empty()) return core::InvalidArgumentError("endpoint: must be set");
    if (options_.inflight < 1) return core::InvalidArgumentError("inflight: must be >= 1");
    if (options_.ack_every < 1 || options_.ack_every > 1000) {
      return core::InvalidArgumentError("ack_every: must be 1-1000");
    }
    if (options_.request_timeout <= core::Duration::Zero()) {
      return core::InvalidArgumentError("request_timeout: must be > 0");
    }
    sims_.resize(units_.size());
    conns_.resize(connections_);
    is_dirty_.assign(connections_, 0);
    // zmq_poll is O(sockets) per call; with thousands of sockets an epoll set over their
    // ZMQ_FDs keeps the cost per event constant. A ZMQ_FD only says "look at this socket": after
    // it fires, and after every send (which may consume the signal), the socket is drained.
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return core::UnavailableError("epoll_create1 failed");
    for (size_t i = 0; i < units_.size(); ++i) {
      sims_[i].job = &jobs_[units_[i].first];
      sims_[i].host = units_[i].second;
      sims_[i].conn = conn_of_[i];
      sims_[i].register_backoff = core::ExponentialBackoff(RegisterBackoff(options_.seed, i));
      Conn& c = conns_[conn_of_[i]];
      c.sims.push_back(i);
      c.sim_of_job[sims_[i].job->job_id] = i;
    }
    for (size_t i = 0; i < conns_.size(); ++i) {
      protocol::ClientOptions co;
      co.endpoint = options_.endpoint;
      co.curve = options_.curve;
      co.server_public_z85 = options_.server_public_z85;
      co.client_keys = options_.client_keys;
      // routing_id stays empty: DealerClient draws a random, unguessable one. One derived from
      // the job id would let anyone who knows the id take over this job's pushes (the daemon's
      // ROUTER hands a routing id over to the newest peer using it).
      // One endpoint: the application heartbeat is enough. Several (HA): DealerClient runs a
      // short ZMTP heartbeat anyway, so that a paused leader is left within about a second.
      co.heartbeat_ivl = core::Duration::Zero();
      auto client = protocol::DealerClient::Connect(ctx_, co);
      if (!client.ok()) {
        if ((client.status().code() == core::StatusCode::kInvalidArgument ||
             client.status().code() == core::StatusCode::kUnavailable) &&
            i > 0) {
          // Options were fine for the first sockets: a resource limit (ZMQ_MAX_SOCKETS, fds).
          return core::UnavailableError("cannot create socket " + std::to_string(i + 1) + ": " +
                                        client.status().message());
        }
        return client.status();
      }
      conns_[i].client = std::move(client).value();
      // The socket and its connection monitor (a lost or new connection is acted on at once,
      // see OnConnectionChange).
      for (void* socket :
           {conns_[i].client->raw_socket(), conns_[i].client->raw_monitor_socket()}) {
        int fd = -1;
        size_t fd_len = sizeof(fd);
        if (zmq_getsockopt(socket, ZMQ_FD, &fd, &fd_len) != 0) {
          return core::UnavailableError("ZMQ_FD failed");
        }
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = i;
        if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
          return core::UnavailableError("epoll_ctl failed (open-file limit?)");
        }
      }
    }
    PickArrivals();
    return core::Status::Ok();
  }

  RunSummary Run() {
    summary_.jobs = static_cast<int>(sims_.size());
    const TimePoint start = Clock::now();
    // The duration bounds the whole run, registration included: a daemon that refuses or
    // ignores every registration cannot keep the tool running.
    const TimePoint end = options_.duration > core::Duration::Zero() ? start + Ns(options_.duration)
                                                                     : TimePoint::max();
    const TimePoint register_deadline = std::min(end, start + Ns(options_.register_timeout));
    start_ = start;
    fault_active_.assign(options_.faults.size(), false);
    for (size_t i = 0; i < sims_.size(); ++i) {
      if (sims_[i].state != State::kHeld) SendRegister(i, start);
    }
    size_t next_arrival = 0;
    TimePoint next_arrival_at = TimePoint::max();

    TimePoint measure_start{};
    bool measuring = false;
    uint64_t acked_at_measure_start = 0;
    TimePoint next_progress = start + Ns(options_.progress_interval);
    TimePoint next_timeout_scan = start;

    while (!(stop_ != nullptr && stop_->load(std::memory_order_relaxed))) {
      TimePoint now = Clock::now();
      if (now >= end) break;
      if (!measuring && (unresolved() == 0 || now >= register_deadline)) {
        measuring = true;
        measure_start = now;
        acked_at_measure_start = summary_.reports_acked;
        summary_.register_s = std::chrono::duration<double>(now - start).count();
        for (size_t i = 0; i < sims_.size(); ++i) {
          if (sims_[i].state == State::kUnregistered) SetState(i, State::kFailed);
        }
        measuring_ = true;
        if (!arrivals_.empty()) next_arrival_at = now + Ns(options_.arrival_interval);
        if (options_.report_interval == core::Duration::Zero()) {
          for (size_t i = 0; i < sims_.size(); ++i) StartBurst(i, now);
        }
        Log("registered " + std::to_string(summary_.registered) + "/" +
            std::to_string(sims_.size()) + " jobs in " + std::to_string(summary_.register_s) +
            " s");
      }
      // Nothing left to do once no job is registered and none is (re-)registering. A job the
      // daemon forgot (UNKNOWN_JOB, e.g. after a state reset) is re-registering: not the end.
      if (measuring && summary_.registered == 0 && unresolved() == 0) break;

      LogFaults(now);
      if (next_arrival < arrivals_.size() && now >= next_arrival_at) {
        Arrive(next_arrival++, now);
        next_arrival_at = now + Ns(options_.arrival_interval);
      }
      // Due reports / heartbeats.
      while (!due_.empty() && due_.top().at <= now) {
        Due d = due_.top();
        due_.pop();
        Fire(d, now);
      }
      if (now >= next_timeout_scan) {
        ScanTimeouts(now);
        next_timeout_scan = now + std::chrono::milliseconds(50);
      }
      if (now >= next_progress) {
        Progress(now, measuring ? measure_start : now, acked_at_measure_start);
        next_progress = now + Ns(options_.progress_interval);
      }

      // Wait for input until the next due event (at most 50 ms, to notice `stop`).
      auto wait = std::chrono::milliseconds(50);
      if (!due_.empty()) {
        auto until = std::chrono::duration_cast<std::chrono::milliseconds>(due_.top().at - now);
        wait = std::clamp(until, std::chrono::milliseconds(0), wait);
      }
      if (end != TimePoint::max()) {
        // Rounded up: waking a little after the end beats spinning just before it.
        auto until_end = std::chrono::ceil<std::chrono::milliseconds>(end - now);
        wait = std::clamp(until_end, std::chrono::milliseconds(0), wait);
      }
      WaitAndDrain(dirty_.empty() ? wait : std::chrono::milliseconds(0));
    }
    const TimePoint stop_time = Clock::now();
    if (measuring) {
      summary_.duration_s = std::chrono::duration<double>(stop_time - measure_start).count();
      // Only reports acknowledged inside the window count towards the rate.
      const uint64_t in_window = summary_.reports_acked - acked_at_measure_start;
      summary_.reports_acked_in_window = in_window;
    } else {
      // The run ended while jobs were still registering.
      summary_.register_s = std::chrono::duration<double>(stop_time - start).count();
    }
    if (options_.end_jobs) EndJobs();
    CollectRegisterFailures();
    return std::move(summary_);
  }

 private:
  size_t unresolved() const { return sims_.size() - summary_.registered - failed_ - held_; }

  // The last `options_.arrivals` jobs (preferring jobs of several clients, i.e. parts on several
  // hosts) are held back; their clients register during the run (Arrive).
  void PickArrivals() {
    if (options_.arrivals <= 0) return;
    std::map<const SimJob*, std::vector<size_t>> by_job;
    for (size_t i = 0; i < sims_.size(); ++i) by_job[sims_[i].job].push_back(i);
    std::vector<const SimJob*> order;  // Jobs by index, last first.
    for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
      if (by_job.contains(&*it)) order.push_back(&*it);
    }
    std::vector<const SimJob*> chosen;
    for (int pass = 0; pass < 2; ++pass) {
      for (const SimJob* j : order) {
        if (chosen.size() >= static_cast<size_t>(options_.arrivals)) break;
        const bool wide = j->hosts.size() >= 2;
        if ((pass == 0) != wide) continue;
        chosen.push_back(j);
      }
    }
    for (const SimJob* j : chosen) {
      Arrival a;
      a.sims = by_job[j];
      for (size_t i : a.sims) {
        sims_[i].arrival = static_cast<int>(arrivals_.size());
        SetState(i, State::kHeld);
      }
      arrivals_.push_back(std::move(a));
    }
    summary_.arrivals = static_cast<int>(arrivals_.size());
  }

  void Arrive(size_t k, TimePoint now) {
    Arrival& a = arrivals_[k];
    a.registered = true;
    Log("arrival " + std::to_string(k + 1) + "/" + std::to_string(arrivals_.size()) + ": job " +
        core::EscapeForTerminal(sims_[a.sims[0]].job->job_id) + " (" +
        std::to_string(a.sims.size()) + " client(s))");
    for (size_t i : a.sims) {
      SetState(i, State::kUnregistered);
      SendRegister(i, now);
    }
  }

  // Arrival bookkeeping on an acknowledged report of client i.
  void NoteReportAcked(size_t i, TimePoint now) {
    Sim& s = sims_[i];
    if (s.arrival < 0 || s.first_acked) return;
    s.first_acked = true;
    Arrival& a = arrivals_[static_cast<size_t>(s.arrival)];
    if (++a.reported == a.sims.size()) a.trigger = now;
  }

  // Arrival bookkeeping on an applied push to client i.
  void NotePush(size_t i) {
    Sim& s = sims_[i];
    if (s.arrival < 0 || s.pushed_since) return;
    Arrival& a = arrivals_[static_cast<size_t>(s.arrival)];
    if (a.trigger == TimePoint{}) return;
    s.pushed_since = true;
    if (++a.pushed == a.sims.size()) {
      const auto ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - a.trigger);
      summary_.arrival_latency.Add(ns.count());
      Log("arrival of job " + core::EscapeForTerminal(s.job->job_id) + ": trigger to push " +
          std::to_string(static_cast<double>(ns.count()) / 1e6) + " ms");
    }
  }

  // The one place a job's state changes: keeps summary_.registered and failed_ exact (a late
  // RegisterJobReply may turn a job that was given up on into a registered one).
  void SetState(size_t i, State to) {
    Sim& s = sims_[i];
    if (s.state == to) return;
    if (s.state == State::kRegistered) --summary_.registered;
    if (s.state == State::kFailed) --failed_;
    if (s.state == State::kHeld) --held_;
    if (to == State::kRegistered) ++summary_.registered;
    if (to == State::kFailed) ++failed_;
    if (to == State::kHeld) ++held_;
    s.state = to;
  }

  void CollectRegisterFailures() {
    for (const Sim& s : sims_) {
      if (s.state == State::kRegistered) continue;
      const bool pending =
          std::any_of(s.outstanding.begin(), s.outstanding.end(),
                      [](const Outstanding& o) { return o.kind == Kind::kRegister; });
      std::string reason = s.fail_reason;
      std::string message = s.fail_message;
      if (s.state == State::kHeld) {
        reason = "NOT_ARRIVED";
        message = "an arrival (--arrivals) not due before the run ended";
      } else if (reason.empty()) {
        reason = pending ? "NO_REPLY" : "SEND_FAILED";
        message = pending ? "no reply before the run ended" : "never sent";
      }
      RegisterFailure& f = summary_.register_failures[reason];
      if (f.jobs == 0) f.example = message;
      ++f.jobs;
      ++summary_.register_failed;
    }
  }

  void RetryRegisterLater(size_t i, TimePoint now) {
    Sim& s = sims_[i];
    s.retry_register_at = now + Ns(s.register_backoff.Next());
  }

  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }

  void Progress(TimePoint now, TimePoint since, uint64_t acked_base) {
    const double secs = std::chrono::duration<double>(now - since).count();
    const double rate = secs > 0 ? (summary_.reports_acked - acked_base) / secs : 0.0;
    Log("registered " + std::to_string(summary_.registered) + "/" + std::to_string(sims_.size()) +
        " (refused " + std::to_string(failed_) + "), reports acked " +
        std::to_string(summary_.reports_acked) + " (" + std::to_string(static_cast<int64_t>(rate)) +
        "/s), heartbeats acked " + std::to_string(summary_.heartbeats_acked) + ", assignments " +
        std::to_string(summary_.assignments) + ", errors " + std::to_string(error_total_) +
        ", timeouts " + std::to_string(summary_.timeouts));
  }

  bool SendRequest(size_t i, Kind kind, v1::Envelope msg, TimePoint now) {
    Sim& s = sims_[i];
    Conn& c = conns_[s.conn];
    const uint64_t id = c.client->NextRequestId();
    msg.set_request_id(id);
    core::Status st = c.client->Send(msg);
    MarkDirty(s.conn);
    if (!st.ok()) {
      ++summary_.send_failures;
      return false;
    }
    s.outstanding.push_back(Outstanding{id, kind, now});
    c.owner[id] = i;
    return true;
  }

  // Forgets client i's outstanding request `id` on its connection.
  void Forget(size_t i, uint64_t id) { conns_[sims_[i].conn].owner.erase(id); }

  void SendRegister(size_t i, TimePoint now) {
    v1::Envelope msg = protocol::NewEnvelope();
    const Sim& s = sims_[i];
    *msg.mutable_register_job() =
        s.host < 0 ? MakeRegister(*s.job, options_.lease_ms)
                   : MakePartRegister(*s.job, static_cast<size_t>(s.host), options_.lease_ms);
    if (s.host >= 0 && options_.host_batches) {
      msg.mutable_register_job()->mutable_host_part()->set_accepts_batches(true);
    }
    if (!SendRequest(i, Kind::kRegister, std::move(msg), now)) {
      if (sims_[i].fail_reason.empty()) {
        sims_[i].fail_reason = "SEND_FAILED";
        sims_[i].fail_message = "the socket refused the message (send queue full)";
      }
      RetryRegisterLater(i, now);
    }
  }

  v1::Envelope NextReport(Sim& s) {
    v1::Envelope msg = protocol::NewEnvelope();
    *msg.mutable_profile_report() =
        s.host < 0 ? SynthesizeProfile(*s.job, s.sample++, rng_, options_.profile_jitter)
                   : SynthesizePartProfile(*s.job, static_cast<size_t>(s.host), s.sample++, rng_,
                                           options_.profile_jitter);
    return msg;
  }

  // Sends one acknowledged report, preceded by ack_every - 1 quiet ones (its Ack confirms them:
  // cruxd answers a connection's requests in order, a refused quiet one with its Error first).
  void SendReport(size_t i, TimePoint now) {
    Sim& s = sims_[i];
    for (int q = 1; q < options_.ack_every; ++q) {
      v1::Envelope msg = NextReport(s);
      msg.set_quiet(true);
      if (!SendRequest(i, Kind::kQuietReport, std::move(msg), now)) return;
      ++summary_.reports_sent;
      ++summary_.reports_quiet;
    }
    if (SendRequest(i, Kind::kReport, NextReport(s), now)) {
      ++summary_.reports_sent;
      ++s.reports_outstanding;
    }
  }

  // The Ack (or Error) of client i's report `id` arrived: the quiet reports sent before it that
  // were not refused were accepted.
  void ConfirmQuietReports(size_t i, uint64_t id) {
    Sim& s = sims_[i];
    for (auto it = s.outstanding.begin(); it != s.outstanding.end();) {
      if (it->kind != Kind::kQuietReport || it->request_id > id) {
        ++it;
        continue;
      }
      Forget(i, it->request_id);
      it = s.outstanding.erase(it);
      ++summary_.reports_acked;
    }
  }

  core::Duration SinceStart(TimePoint now) const {
    return core::Duration::Nanos(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_).count());
  }

  // One log line when a fault starts and when it ends (with the wall clock, for measurements).
  void LogFaults(TimePoint now) {
    for (size_t k = 0; k < options_.faults.size(); ++k) {
      const bool active = Active(options_.faults[k], SinceStart(now));
      if (active == fault_active_[k]) continue;
      fault_active_[k] = active;
      Log(std::string("fault ") + (active ? "active" : "over") + ": " +
          DescribeFault(options_.faults[k]) + " (unix ms " + std::to_string(UnixNowNs() / 1000000) +
          ")");
    }
  }

  // The pinned flows' stats since the previous heartbeat that carried them.
  void AddFlowStats(Sim& s, v1::Heartbeat* hb, TimePoint now) {
    if (s.flows.empty() || s.flows_since == TimePoint{} || now <= s.flows_since) return;
    const core::Duration window = core::Duration::Nanos(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.flows_since).count());
    const core::Duration since = SinceStart(now);
    for (const PinnedFlow& f : s.flows) {
      const double factor =
          FaultFactor(f, options_.faults, since) * LieFactor(s.job->job_id, options_.lies, since);
      if (factor < 1) ++summary_.faulted_flow_reports;
      *hb->add_flows() = FlowStatsFor(f, window, s.job->period, options_.flow_gbps, factor, rng_,
                                      options_.profile_jitter);
    }
    s.flows_since = now;
  }

  void SendHeartbeat(size_t i, TimePoint now) {
    Sim& s = sims_[i];
    v1::Envelope msg = protocol::NewEnvelope();
    v1::Heartbeat* hb = msg.mutable_heartbeat();
    hb->set_job_id(s.job->job_id);
    hb->set_seq(++s.heartbeat_seq);
    hb->set_applied_epoch(s.applied_epoch);
    hb->set_applied_state_id(s.applied_state_id);
    if (s.host >= 0) *hb->mutable_host_part() = MakeHostPart(*s.job, static_cast<size_t>(s.host));
    if (options_.flow_stats || !options_.faults.empty()) AddFlowStats(s, hb, now);
    if (SendRequest(i, Kind::kHeartbeat, std::move(msg), now)) ++summary_.heartbeats_sent;
  }

  void Fire(const Due& d, TimePoint now) {
    Sim& s = sims_[d.sim];
    if (s.state != State::kRegistered) return;  // Stale entry (job re-registering or failed).
    if (d.kind == Kind::kReport) {
      if (s.reports_outstanding < static_cast<size_t>(options_.inflight)) SendReport(d.sim, now);
      due_.push(Due{now + Ns(options_.report_interval), d.sim, Kind::kReport});
    } else if (d.kind == Kind::kHeartbeat) {
      SendHeartbeat(d.sim, now);
      due_.push(Due{now + Ns(s.heartbeat_interval), d.sim, Kind::kHeartbeat});
    }
  }

  void OnRegistered(size_t i, const v1::RegisterJobReply& reply, TimePoint now) {
    Sim& s = sims_[i];
    if (s.state == State::kRegistered) return;
    SetState(i, State::kRegistered);
    s.register_backoff.Reset();
    s.retry_register_at = TimePoint{};
    s.fail_reason.clear();
    s.fail_message.clear();
    if (options_.heartbeat_interval > core::Duration::Zero()) {
      s.heartbeat_interval = options_.heartbeat_interval;
    } else {
      const uint64_t lease = reply.lease_ms() > 0 ? reply.lease_ms() : 3000;
      s.heartbeat_interval =
          core::Duration::Millis(static_cast<int64_t>(std::max<uint64_t>(lease / 3, 10)));
    }
    const double u = rng_.UniformDouble();
    due_.push(Due{now + Ns(s.heartbeat_interval * u), i, Kind::kHeartbeat});
    if (options_.report_interval > core::Duration::Zero()) {
      // crux-hostd reports a part's profile as soon as it is registered (it has it already).
      const double first = options_.report_at_register ? 0.0 : rng_.UniformDouble();
      due_.push(Due{now + Ns(options_.report_interval * first), i, Kind::kReport});
    } else {
      // Back-to-back reports start together once registration is over (StartBurst), so that
      // the registration storm and the measurement do not overlap.
      if (measuring_) StartBurst(i, now);
    }
  }

  void CountError(const v1::Error& e) {
    ++summary_.errors[std::string(protocol::ErrorCodeName(e.code()))];
    ++error_total_;
  }

  // Logs the first refusal of each code (later ones are only counted: 10,000 jobs refused for
  // the same reason must not print 10,000 lines).
  void LogRefusal(const Sim& s, const v1::Error& e) {
    const std::string code(protocol::ErrorCodeName(e.code()));
    if (!logged_refusals_.insert(code).second) return;
    Log("job " + core::EscapeForTerminal(s.job->job_id) + ": registration refused: " + code + ": " +
        core::EscapeForTerminal(e.message()) + " (further " + code +
        " refusals are counted in the summary, not logged)");
  }

  void OnReply(size_t i, Outstanding req, const v1::Envelope& msg, TimePoint now) {
    Sim& s = sims_[i];
    const int64_t rtt =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - req.sent).count();
    switch (req.kind) {
      case Kind::kRegister:
        summary_.register_rtt.Add(rtt);
        if (msg.has_register_job_reply()) {
          OnRegistered(i, msg.register_job_reply(), now);
        } else if (msg.has_error()) {
          const v1::Error& e = msg.error();
          CountError(e);
          if (s.state == State::kRegistered) break;
          s.fail_reason = std::string(protocol::ErrorCodeName(e.code()));
          s.fail_message = e.message();
          LogRefusal(s, e);
          if (e.code() == v1::ERROR_CODE_UNAVAILABLE) {
            // Shutting down or overloaded: try again (until the run ends).
            if (s.state == State::kUnregistered) RetryRegisterLater(i, now);
          } else {
            // A definite refusal (RESOURCE_EXHAUSTED: a quota, UNKNOWN_HOST, CONFLICT,
            // PERMISSION_DENIED, INVALID_ARGUMENT, ...): retrying the same request cannot help.
            SetState(i, State::kFailed);
          }
        }
        break;
      case Kind::kQuietReport:  // Answered only when refused.
        if (msg.has_error()) CountError(msg.error());
        break;
      case Kind::kReport:
        if (s.reports_outstanding > 0) --s.reports_outstanding;
        ConfirmQuietReports(i, req.request_id);
        summary_.report_rtt.Add(rtt);
        if (msg.has_ack() && msg.ack().ok()) {
          ++summary_.reports_acked;
          NoteReportAcked(i, now);
        } else if (msg.has_error()) {
          CountError(msg.error());
        }
        if (options_.report_interval == core::Duration::Zero() && s.state == State::kRegistered) {
          SendReport(i, now);
        }
        break;
      case Kind::kHeartbeat:
        if (msg.has_ack()) {
          ++summary_.heartbeats_acked;
        } else if (msg.has_error()) {
          CountError(msg.error());
          const v1::ErrorCode code = msg.error().code();
          if ((code == v1::ERROR_CODE_UNKNOWN_JOB || code == v1::ERROR_CODE_PERMISSION_DENIED) &&
              s.state == State::kRegistered) {
            // The daemon forgot the job (lease expired, state lost), or the job is bound to
            // another connection (this client reconnected with a fresh routing id after a
            // drop, see protocol/client.h): register again, idempotently, from this one. A
            // refusal of that registration (e.g. another key owns the job) fails the job.
            SetState(i, State::kUnregistered);
            s.reports_outstanding = 0;
            SendRegister(i, now);
          }
        }
        break;
      case Kind::kEnd:
        if (msg.has_error()) CountError(msg.error());
        break;
    }
  }

  void OnPush(size_t conn, const v1::Envelope& msg) {
    if (msg.has_assignment_batch()) {
      // crux-hostd's way: each assignment handled alone, their acks in one AckBatch.
      ++summary_.push_frames;
      v1::Envelope acks = protocol::NewEnvelope(0);
      for (const v1::Assignment& a : msg.assignment_batch().assignments()) {
        if (auto ack = OnAssignment(conn, a)) {
          *acks.mutable_ack_batch()->add_acks() = std::move(*ack);
        }
      }
      SendAcks(conn, acks, static_cast<uint64_t>(acks.ack_batch().acks_size()));
      return;
    }
    if (!msg.has_assignment()) {
      if (msg.has_error()) CountError(msg.error());
      return;
    }
    ++summary_.push_frames;
    if (auto ack = OnAssignment(conn, msg.assignment())) {
      v1::Envelope e = protocol::NewEnvelope(0);
      *e.mutable_ack() = std::move(*ack);
      SendAcks(conn, e, 1);
    }
  }

  void SendAcks(size_t conn, const v1::Envelope& e, uint64_t acks) {
    if (acks == 0) return;
    MarkDirty(conn);
    if (conns_[conn].client->Send(e).ok()) {
      summary_.acks_sent += acks;
      ++summary_.ack_frames;
    } else {
      ++summary_.send_failures;
    }
  }

  // One pushed assignment: applied (or refused) for its job; returns the ack to send (none for a
  // job the connection does not carry).
  std::optional<v1::Ack> OnAssignment(size_t conn, const v1::Assignment& a) {
    Conn& c = conns_[conn];
    auto owner = c.sim_of_job.find(a.job_id());
    if (owner == c.sim_of_job.end()) {
      ++summary_.stray_pushes;
      return std::nullopt;
    }
    const size_t i = owner->second;
    Sim& s = sims_[i];
    ++summary_.assignments;
    if (a.sent_unix_ns() > 0) {
      summary_.push_latency.Add(static_cast<int64_t>(UnixNowNs() - a.sent_unix_ns()));
    }
    // A push from a lower cruxd term than one seen comes from a deposed leader: refused.
    if (a.term() != 0 && a.term() < s.highest_term) {
      ++summary_.stale_term_refused;
      v1::Ack nack;
      nack.set_job_id(s.job->job_id);
      nack.set_epoch(a.epoch());
      nack.set_ok(false);
      nack.set_error("stale term " + std::to_string(a.term()) + " < " +
                     std::to_string(s.highest_term) + " refused");
      return nack;
    }
    s.highest_term = std::max(s.highest_term, a.term());
    summary_.highest_term = std::max(summary_.highest_term, a.term());
    // Applied when newer in the current epoch sequence, or when it comes from another daemon
    // state (state_id differs: the state was reset and epochs started again).
    const bool newer = a.epoch() > s.applied_epoch;
    const bool fresh = newer || a.state_id() != s.applied_state_id;
    if (fresh) {
      if (!newer) ++summary_.state_resets;
      s.applied_epoch = a.epoch();
      s.applied_state_id = a.state_id();
      if (options_.flow_stats || !options_.faults.empty()) {
        // A new window on the new paths (a partial one on the old paths is dropped).
        s.flows = PinnedFlows(a, *s.job);
        for (PinnedFlow& p : PinnedProbes(a, options_.probe_bytes)) s.flows.push_back(std::move(p));
        s.flows_since = Clock::now();
      }
      NotePush(i);
    } else {
      ++summary_.assignments_stale;
    }
    v1::Ack ack;
    ack.set_job_id(s.job->job_id);
    ack.set_epoch(a.epoch());
    ack.set_ok(true);
    if (!fresh) ack.set_error("stale epoch ignored");
    return ack;
  }

  void StartBurst(size_t i, TimePoint now) {
    if (sims_[i].state != State::kRegistered) return;
    while (sims_[i].reports_outstanding < static_cast<size_t>(options_.inflight)) {
      const uint64_t before = summary_.reports_sent;
      SendReport(i, now);
      if (summary_.reports_sent == before) break;  // Send failed; retried on the next reply.
    }
  }

  void MarkDirty(size_t conn) {
    if (!is_dirty_[conn]) {
      is_dirty_[conn] = 1;
      dirty_.push_back(conn);
    }
  }

  // Waits up to `wait` for socket activity, then drains every signalled or dirty socket.
  void WaitAndDrain(std::chrono::milliseconds wait) {
    epoll_event events[512];
    const int n = ::epoll_wait(epoll_fd_, events, 512, static_cast<int>(wait.count()));
    for (int k = 0; k < n; ++k) MarkDirty(static_cast<size_t>(events[k].data.u64));
    std::vector<size_t> batch;
    batch.swap(dirty_);
    for (size_t i : batch) is_dirty_[i] = 0;
    const TimePoint now = Clock::now();
    for (size_t i : batch) Drain(i, now);
  }

  // The job's connection changed (protocol/client.h "Following the daemon"): requests sent on a
  // lost connection are abandoned at once (no reply can come), and a new connection - the next
  // HA leader, a restarted cruxd - gets the job's heartbeat (or registration) at once, so that
  // cruxd binds the job to it without waiting for the next periodic heartbeat or a timeout.
  void OnConnectionChange(size_t conn, const protocol::ConnectionChange& c, TimePoint now) {
    Conn& k = conns_[conn];
    if (c.lost) {
      ++summary_.connections_lost;
      k.owner.clear();
    }
    if (c.connected && k.client->counters().connects > 1) ++summary_.reconnects;
    // The first connection's handshake: what was sent before it went on it (nothing to say again).
    if (!c.lost && c.connected && k.client->counters().connects == 1 &&
        k.client->counters().drops == 0) {
      return;
    }
    for (size_t i : k.sims) OnSimConnectionChange(i, c, now);
  }

  void OnSimConnectionChange(size_t i, const protocol::ConnectionChange& c, TimePoint now) {
    Sim& s = sims_[i];
    if (c.lost) {
      summary_.requests_lost += s.outstanding.size();
      const bool register_lost =
          std::any_of(s.outstanding.begin(), s.outstanding.end(),
                      [](const Outstanding& o) { return o.kind == Kind::kRegister; });
      s.outstanding.clear();
      s.reports_outstanding = 0;
      if (register_lost && s.state == State::kUnregistered && !c.connected) {
        RetryRegisterLater(i, now);
      }
    }
    if (!c.connected) return;
    s.register_backoff.Reset();  // Retries after a reconnect start short again.
    if (s.state == State::kRegistered) {
      SendHeartbeat(i, now);
      // Back-to-back reports run only in the measurement window (they start together there).
      if (options_.report_interval == core::Duration::Zero() && measuring_) StartBurst(i, now);
    } else if (s.state == State::kUnregistered) {
      const bool pending =
          std::any_of(s.outstanding.begin(), s.outstanding.end(),
                      [](const Outstanding& o) { return o.kind == Kind::kRegister; });
      if (!pending) {
        s.retry_register_at = TimePoint{};
        SendRegister(i, now);
      }
    }
  }

  void Drain(size_t conn, TimePoint now) {
    Conn& c = conns_[conn];
    while (true) {
      auto next = c.client->TryReceive();
      if (!next.ok() || !next->has_value()) {
        // Once the socket is empty: a connection change (read from the monitor by this call
        // or any earlier one, which consumed its signal) is acted on now.
        auto change = c.client->TakeConnectionChange();
        if (!change.ok() || !(change->lost || change->connected)) return;
        OnConnectionChange(conn, *change, now);
        continue;
      }
      const v1::Envelope& msg = **next;
      if (msg.request_id() == 0) {
        OnPush(conn, msg);
        continue;
      }
      auto owner = c.owner.find(msg.request_id());
      if (owner == c.owner.end()) continue;  // Late reply after a timeout.
      const size_t i = owner->second;
      c.owner.erase(owner);
      Sim& s = sims_[i];
      auto it = std::find_if(s.outstanding.begin(), s.outstanding.end(), [&](const Outstanding& o) {
        return o.request_id == msg.request_id();
      });
      if (it == s.outstanding.end()) continue;
      Outstanding req = *it;
      s.outstanding.erase(it);
      OnReply(i, req, msg, now);
    }
  }

  void ScanTimeouts(TimePoint now) {
    const auto limit = Ns(options_.request_timeout);
    for (size_t i = 0; i < sims_.size(); ++i) {
      Sim& s = sims_[i];
      for (auto it = s.outstanding.begin(); it != s.outstanding.end();) {
        if (now - it->sent < limit) {
          ++it;
          continue;
        }
        const Kind kind = it->kind;
        // A quiet report expects no reply; the acknowledged report after it times out instead.
        if (kind != Kind::kQuietReport) ++summary_.timeouts;
        Forget(i, it->request_id);
        it = s.outstanding.erase(it);
        if (kind == Kind::kReport) {
          if (s.reports_outstanding > 0) --s.reports_outstanding;
          if (options_.report_interval == core::Duration::Zero() && s.state == State::kRegistered) {
            SendReport(i, now);
          }
        }
        if (kind == Kind::kRegister && s.state == State::kUnregistered) {
          s.fail_reason = "TIMEOUT";
          s.fail_message = "no reply within " +
                           std::to_string(options_.request_timeout.nanos() / 1000000) + " ms";
          RetryRegisterLater(i, now);
        }
      }
      if (s.state == State::kUnregistered && s.retry_register_at != TimePoint{} &&
          now >= s.retry_register_at) {
        s.retry_register_at = TimePoint{};
        const bool pending =
            std::any_of(s.outstanding.begin(), s.outstanding.end(),
                        [](const Outstanding& o) { return o.kind == Kind::kRegister; });
        if (!pending) SendRegister(i, now);
      }
    }
  }

  void EndJobs() {
    const TimePoint now = Clock::now();
    size_t waiting = 0;
    for (size_t i = 0; i < sims_.size(); ++i) {
      if (sims_[i].state != State::kRegistered) continue;
      v1::Envelope msg = protocol::NewEnvelope();
      msg.mutable_end_job()->set_job_id(sims_[i].job->job_id);
      msg.mutable_end_job()->set_reason("crux-loadgen finished");
      if (sims_[i].host >= 0) {
        *msg.mutable_end_job()->mutable_host_part() =
            MakeHostPart(*sims_[i].job, static_cast<size_t>(sims_[i].host));
      }
      if (SendRequest(i, Kind::kEnd, std::move(msg), now)) ++waiting;
    }
    const TimePoint deadline = now + Ns(options_.request_timeout);
    while (waiting > 0 && Clock::now() < deadline) {
      size_t left = 0;
      for (const Sim& sim : sims_) {
        for (const Outstanding& o : sim.outstanding) left += o.kind == Kind::kEnd ? 1 : 0;
      }
      if (left == 0) break;
      WaitAndDrain(std::chrono::milliseconds(20));
    }
  }

  protocol::TransportContext& ctx_;
  const std::vector<SimJob>& jobs_;
  const std::vector<std::pair<size_t, int>> units_;
  const std::vector<size_t> conn_of_;
  const size_t connections_;
  const LoadGenOptions& options_;
  const std::atomic<bool>* stop_;
  core::Rng rng_;
  std::vector<Sim> sims_;
  std::vector<Conn> conns_;
  std::vector<Arrival> arrivals_;
  size_t held_ = 0;  // Clients in State::kHeld.
  int epoll_fd_ = -1;
  std::vector<size_t> dirty_;  // Connections sent to (or signalled) since their last drain.
  std::vector<char> is_dirty_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due_;
  RunSummary summary_;
  size_t failed_ = 0;
  std::set<std::string> logged_refusals_;  // Error codes already logged (LogRefusal).
  bool measuring_ = false;
  uint64_t error_total_ = 0;
  TimePoint start_{};
  std::vector<bool> fault_active_;
};

}  // namespace

core::Result<RunSummary> RunLoad(protocol::TransportContext& ctx, const std::vector<SimJob>& jobs,
                                 const LoadGenOptions& options, const std::atomic<bool>* stop) {
  if (jobs.empty()) return core::InvalidArgumentError("jobs: must not be empty");
  std::vector<std::pair<size_t, int>> units;
  std::vector<size_t> conn_of;
  for (size_t j = 0; j < jobs.size(); ++j) {
    units.emplace_back(j, -1);
    conn_of.push_back(j);
  }
  Engine engine(ctx, jobs, std::move(units), std::move(conn_of), jobs.size(), options, stop);
  CRUX_RETURN_IF_ERROR(engine.Init());
  return engine.Run();
}

core::Result<RunSummary> RunHostAgents(protocol::TransportContext& ctx,
                                       const std::vector<SimJob>& jobs,
                                       const std::vector<SimAgent>& agents,
                                       const LoadGenOptions& options,
                                       const std::atomic<bool>* stop) {
  if (agents.empty()) return core::InvalidArgumentError("agents: must not be empty");
  if (options.flow_stats || !options.faults.empty() || !options.lies.empty()) {
    return core::InvalidArgumentError("flow stats, faults and lies: not in host-agent mode");
  }
  std::vector<std::pair<size_t, int>> units;
  std::vector<size_t> conn_of;
  std::set<size_t> job_set;
  for (size_t a = 0; a < agents.size(); ++a) {
    for (const SimPart& p : agents[a].parts) {
      if (p.job >= jobs.size() || p.host >= jobs[p.job].hosts.size() ||
          jobs[p.job].host_slots.size() != jobs[p.job].hosts.size() ||
          jobs[p.job].hosts[p.host] != agents[a].host) {
        return core::InvalidArgumentError("agents[" + std::to_string(a) +
                                          "]: a part that is not a host of its job");
      }
      units.emplace_back(p.job, static_cast<int>(p.host));
      conn_of.push_back(a);
      job_set.insert(p.job);
    }
  }
  if (units.empty()) return core::InvalidArgumentError("agents: carry no part");
  Engine engine(ctx, jobs, std::move(units), std::move(conn_of), agents.size(), options, stop);
  CRUX_RETURN_IF_ERROR(engine.Init());
  RunSummary s = engine.Run();
  s.agents = static_cast<int>(agents.size());
  s.hostd_jobs = static_cast<int>(job_set.size());
  return s;
}

core::Result<uint64_t> RaiseFdLimit(size_t sockets) {
  const rlim_t needed = static_cast<rlim_t>(sockets * kFdsPerJob + kFdReserve);
  struct rlimit lim {};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return core::UnavailableError("getrlimit failed");
  if (lim.rlim_cur >= needed) return static_cast<uint64_t>(lim.rlim_cur);
  struct rlimit want = lim;
  want.rlim_cur = needed;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < needed) want.rlim_max = needed;
  if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
    // Not privileged to raise the hard limit: take what the hard limit allows.
    want = lim;
    want.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) != 0) {
      return core::UnavailableError("setrlimit(RLIMIT_NOFILE) failed");
    }
  }
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return core::UnavailableError("getrlimit failed");
  return static_cast<uint64_t>(lim.rlim_cur);
}

size_t JobsPerProcess(uint64_t fd_limit) {
  if (fd_limit <= kFdReserve + kFdsPerJob) return 1;
  return static_cast<size_t>((fd_limit - kFdReserve) / kFdsPerJob);
}

}  // namespace crux::loadgen
