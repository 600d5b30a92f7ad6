#include "crux/client/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "crux/core/base/clock.h"
#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/transport_context.h"
#include "crux/protocol/validate.h"
#include "crux/sync/thread_annotations.h"
#include "event_ring.h"
#include "profiler.h"
#include "session.h"
#include "wire.h"

namespace crux::client {

using internal::Event;
using internal::EventKind;

uint16_t Assignment::UdpSportFor(const std::string& src_nic, const std::string& dst_nic) const {
  for (const auto& f : flows) {
    if (f.src_nic == src_nic && f.dst_nic == dst_nic) return f.udp_sport;
  }
  return 0;
}

int64_t Client::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The seed of the session's backoff jitter: distinct per client (two jobs restarting together do
// not retry in lock-step).
uint64_t JitterSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(Client::NowNs());
}

}  // namespace

// The thin driver: one background thread that owns the DealerClient and feeds the sans-I/O
// Session (session.h) with the steady clock, the daemon's messages and the profiles the
// Profiler finds in the hot-path events; it publishes the session's state for the other threads.
class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        ring_(options_.ring_capacity),
        profiler_(options_.profiler, options_.flops_per_iteration,
                  options_.gpu_peak_flops * internal::TotalGpus(options_)),
        session_(internal::SessionOptionsFor(options_, JitterSeed())) {}

  ~Impl() { Close(); }

  core::Status Init() CRUX_EXCLUDES(close_mu_) {
    context_ = std::make_unique<protocol::TransportContext>();
    protocol::ClientOptions co;
    co.endpoint = options_.endpoint;
    // co.routing_id stays empty: DealerClient draws a random, unguessable routing id, and a
    // fresh one whenever the connection drops (docs/protocol.md "Identities and roles"); the
    // session speaks at once on the new connection (Session::OnConnectionChange) and
    // re-registers when cruxd answers PERMISSION_DENIED from the new id.
    if (!options_.server_public_key.empty()) {
      co.curve = true;
      co.server_public_z85 = options_.server_public_key;
      co.client_keys = {options_.client_public_key, options_.client_secret_key};
    }
    co.reconnect_ivl = core::Duration::Millis(options_.reconnect_min_ms);
    co.reconnect_ivl_max = core::Duration::Millis(options_.reconnect_max_ms);
    auto dealer = protocol::DealerClient::Connect(*context_, co);
    if (!dealer.ok()) return dealer.status().WithContext("options.endpoint");
    dealer_ = std::move(*dealer);
    MutexLock lock(&close_mu_);
    thread_ = std::thread([this] { Run(); });
    return core::Status::Ok();
  }

  void Push(const Event& e) {
    if (!ring_.TryPush(e)) dropped_.fetch_add(1, std::memory_order_relaxed);
  }
  // A transfer event: dropped (and counted in events_dropped) when its peer id is one AddPeer
  // can never have returned (>= max_peers), since the profiler sizes per-peer tables by id.
  void PushPeerEvent(const Event& e) {
    if (e.peer >= options_.max_peers) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Push(e);
  }

  core::Result<PeerId> AddPeer(const std::string& local, const std::string& remote) {
    if (!protocol::IsValidId(local)) {
      return core::InvalidArgumentError("local_nic: invalid name \"" + local + "\"");
    }
    if (!protocol::IsValidId(remote)) {
      return core::InvalidArgumentError("remote_nic: invalid name \"" + remote + "\"");
    }
    MutexLock lock(&peers_mu_);
    auto key = std::make_pair(local, remote);
    if (auto it = peer_ids_.find(key); it != peer_ids_.end()) return it->second;
    if (peers_.size() >= options_.max_peers) {
      return core::OutOfRangeError("AddPeer: max_peers (" + std::to_string(options_.max_peers) +
                                   ") reached");
    }
    PeerId id = static_cast<PeerId>(peers_.size());
    peers_.push_back(key);
    peer_ids_[key] = id;
    return id;
  }

  void SetCallback(AssignmentCallback cb) CRUX_EXCLUDES(callback_mu_) {
    MutexLock lock(&callback_mu_);
    callback_ = std::move(cb);
  }
  void SetEnforcer(Enforcer e) CRUX_EXCLUDES(callback_mu_) {
    MutexLock lock(&callback_mu_);
    enforcer_ = std::move(e);
  }

  std::optional<Assignment> Current() const CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return assignment_;
  }

  // See client.h for the rules.
  std::optional<Assignment> Wait(uint64_t after_epoch, int64_t timeout_ms) const
      CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    const std::optional<uint64_t> start_state =
        assignment_ ? std::optional<uint64_t>(assignment_->state_id) : std::nullopt;
    auto ready = [&]() CRUX_REQUIRES(mu_) {
      if (!assignment_) return false;
      const Assignment& a = *assignment_;
      if (a.epoch > after_epoch) return true;
      if (start_state && a.state_id != *start_state) return true;  // A reset while waiting.
      return stats_.state_resets > 0 && a.epoch < after_epoch;     // An epoch of an old state.
    };
    cv_.WaitFor(&mu_, std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)),
                [&]() CRUX_REQUIRES(mu_) { return ready() || closed_; });
    if (ready()) return assignment_;
    return std::nullopt;
  }

  std::optional<Assignment> Wait(uint64_t after_epoch, uint64_t after_state_id,
                                 int64_t timeout_ms) const CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto ready = [&]() CRUX_REQUIRES(mu_) {
      return assignment_ &&
             (assignment_->state_id != after_state_id || assignment_->epoch > after_epoch);
    };
    cv_.WaitFor(&mu_, std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)),
                [&]() CRUX_REQUIRES(mu_) { return ready() || closed_; });
    if (ready()) return assignment_;
    return std::nullopt;
  }

  std::optional<Profile> LastReported() const CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return last_reported_;
  }

  ClientStats Stats() const CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    ClientStats s = stats_;
    s.events_dropped = dropped_.load(std::memory_order_relaxed);
    return s;
  }

  bool WaitForStats(const std::function<bool(const ClientStats&)>& pred, int64_t timeout_ms) const
      CRUX_EXCLUDES(mu_) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms));
    uint64_t seen = 0;
    bool first = true;
    while (true) {
      ClientStats s;
      bool closed = false;
      bool timed_out = false;
      {
        MutexLock lock(&mu_);
        if (!first) {
          timed_out = !cv_.WaitUntil(&mu_, deadline, [&]() CRUX_REQUIRES(mu_) {
            return stats_version_ != seen || closed_;
          });
        }
        s = stats_;
        seen = stats_version_;
        closed = closed_;
      }
      s.events_dropped = dropped_.load(std::memory_order_relaxed);
      first = false;
      // The predicate runs without the lock: it may call back into the client.
      if (pred(s)) return true;
      if (closed || timed_out) return false;
    }
  }

  void Close() CRUX_EXCLUDES(close_mu_, mu_) {
    stop_.store(true);
    // From the callback/enforcer (the background thread itself): only ask it to stop; it cannot
    // join itself. The owner's later Close()/destructor joins it. (Read from the atomic copy of
    // the thread's id: thread_ itself is written by the join below, maybe on another thread.)
    if (std::this_thread::get_id() == thread_id_.load()) return;
    {
      // Concurrent Close() calls (and the destructor) join and reset one at a time.
      MutexLock close_lock(&close_mu_);
      if (thread_.joinable()) thread_.join();
      dealer_.reset();
      context_.reset();
    }
    MutexLock lock(&mu_);
    closed_ = true;
    ++stats_version_;
    cv_.NotifyAll();
  }

 private:
  static core::Duration Now() { return core::SteadyClock::Instance().Now(); }

  // Sends what the session queued; a refused send goes back to the session.
  void Flush() {
    for (;;) {
      std::vector<v1::Envelope> out = session_.TakeOutgoing();
      if (out.empty()) return;
      for (const auto& msg : out) {
        core::Status s = dealer_->Send(msg);
        if (!s.ok()) session_.OnSendFailed(Now(), msg, s);
      }
    }
  }

  // Copies the session's state for the other threads when it changed.
  void Publish() {
    const uint64_t iterations = profiler_.iterations();
    if (session_.version() == published_version_ && iterations == published_iterations_) return;
    published_version_ = session_.version();
    published_iterations_ = iterations;
    MutexLock lock(&mu_);
    stats_ = session_.stats();
    stats_.iterations = iterations;
    assignment_ = session_.current();
    last_reported_ = session_.last_reported();
    ++stats_version_;
    cv_.NotifyAll();
  }

  void HandleMessage(const v1::Envelope& msg) {
    std::optional<Assignment> applied = session_.OnMessage(Now(), msg, UnixNowNs());
    if (applied) {
      Enforcer enforcer;
      AssignmentCallback callback;
      {
        MutexLock lock(&callback_mu_);
        enforcer = enforcer_;
        callback = callback_;
      }
      core::Status enforced = enforcer ? enforcer(*applied) : core::Status::Ok();
      Publish();  // The assignment is current before the callback runs.
      if (callback) callback(*applied);
      session_.FinishApply(enforced);
    }
    Flush();
  }

  void DrainRing() {
    Event e;
    while (ring_.TryPop(&e)) profiler_.Consume(e);
    std::vector<PeerId> index;
    auto p = profiler_.TakeReport(&index);
    if (!p) return;
    {
      MutexLock lock(&peers_mu_);
      for (size_t i = 0; i < index.size() && i < p->peers.size(); ++i) {
        if (index[i] < peers_.size()) {
          p->peers[i].local_nic = peers_[index[i]].first;
          p->peers[i].remote_nic = peers_[index[i]].second;
        }
      }
    }
    // Peers without a name (never declared) cannot be reported per peer; their bytes stay in
    // bytes_per_iteration.
    p->peers.erase(std::remove_if(p->peers.begin(), p->peers.end(),
                                  [](const PeerBytesReport& b) { return b.local_nic.empty(); }),
                   p->peers.end());
    session_.SetProfile(Now(), std::move(*p));
  }

  void Run() {
    thread_id_.store(std::this_thread::get_id());
    const core::Duration poll = core::Duration::Millis(options_.poll_interval_ms);
    session_.Start(Now());
    Flush();
    bool closing = false;
    while (true) {
      if (!closing && stop_.load()) {
        closing = true;
        session_.Close(Now());
        Flush();
      }
      if (session_.Done()) break;
      if (!closing) DrainRing();
      session_.Tick(Now());
      Flush();
      Publish();
      // Wake up for the session's next deadline, and at least every poll interval to drain the
      // ring (the hot path does not signal) and to notice Close().
      const core::Duration wait =
          std::clamp(session_.NextWakeup() - Now(), core::Duration::Zero(), poll);
      auto msg = dealer_->Receive(wait);
      while (msg.ok() && msg->has_value()) {
        HandleMessage(**msg);
        msg = dealer_->TryReceive();
      }
      if (!msg.ok()) session_.OnTransportError(msg.status());
      // A lost or new connection (read from the monitor by the calls above): the session
      // follows cruxd at once (a new HA leader, a restart).
      auto change = dealer_->TakeConnectionChange();
      if (!change.ok()) {
        session_.OnTransportError(change.status());
      } else if (change->lost || change->connected) {
        session_.OnConnectionChange(Now(), change->lost, change->connected);
        Flush();
      }
    }
    Publish();
  }

  const ClientOptions options_;
  internal::EventRing ring_;
  std::atomic<uint64_t> dropped_{0};

  // Declared peers (AddPeer on any thread; names read by the background thread).
  Mutex peers_mu_;
  std::vector<std::pair<std::string, std::string>> peers_ CRUX_GUARDED_BY(peers_mu_);
  std::map<std::pair<std::string, std::string>, PeerId> peer_ids_ CRUX_GUARDED_BY(peers_mu_);

  // Set on any thread, copied out by the background thread before each apply.
  Mutex callback_mu_;
  AssignmentCallback callback_ CRUX_GUARDED_BY(callback_mu_);
  Enforcer enforcer_ CRUX_GUARDED_BY(callback_mu_);

  // The session's state as published for the other threads (Publish, Close).
  mutable Mutex mu_;
  mutable CondVar cv_;  // Signalled with mu_ held on every publish and on Close.
  std::optional<Assignment> assignment_ CRUX_GUARDED_BY(mu_);
  std::optional<Profile> last_reported_ CRUX_GUARDED_BY(mu_);
  ClientStats stats_ CRUX_GUARDED_BY(mu_);
  uint64_t stats_version_ CRUX_GUARDED_BY(mu_) = 0;  // Bumped by every Publish and by Close.
  bool closed_ CRUX_GUARDED_BY(mu_) = false;

  // Background thread only while it runs; created by Init() before the thread starts and reset
  // by Close() after the join (under close_mu_). Not annotated: ownership moves between threads
  // through the thread's start and join, which the analysis cannot express.
  std::unique_ptr<protocol::TransportContext> context_;
  std::unique_ptr<protocol::DealerClient> dealer_;
  internal::Profiler profiler_;
  internal::Session session_;
  uint64_t published_version_ = ~uint64_t{0};
  uint64_t published_iterations_ = 0;

  std::atomic<bool> stop_{false};
  std::atomic<std::thread::id> thread_id_{};  // The background thread's id, set as it starts.
  Mutex close_mu_;  // Serialises the join in Close() (Close is callable from any thread).
  std::thread thread_ CRUX_GUARDED_BY(close_mu_);  // Started by Init(), joined by Close().
};

core::Result<std::unique_ptr<Client>> Client::Start(ClientOptions options) {
  CRUX_RETURN_IF_ERROR(internal::ValidateOptions(options));
  auto impl = std::make_unique<Impl>(std::move(options));
  CRUX_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { Close(); }

core::Result<PeerId> Client::AddPeer(const std::string& local_nic, const std::string& remote_nic) {
  return impl_->AddPeer(local_nic, remote_nic);
}

void Client::BeginIteration() { impl_->Push({NowNs(), 0, 0, 0, EventKind::kIterationBegin}); }
void Client::EndIteration() { impl_->Push({NowNs(), 0, 0, 0, EventKind::kIterationEnd}); }
void Client::ComputeEnd() { impl_->Push({NowNs(), 0, 0, 0, EventKind::kComputeEnd}); }
void Client::CommStart(PeerId peer, uint64_t bytes) {
  impl_->PushPeerEvent({NowNs(), 0, bytes, peer, EventKind::kCommStart});
}
void Client::CommEnd(PeerId peer) {
  impl_->PushPeerEvent({NowNs(), 0, 0, peer, EventKind::kCommEnd});
}
void Client::RecordComm(PeerId peer, uint64_t bytes, int64_t start_ns, int64_t end_ns) {
  impl_->PushPeerEvent({start_ns, end_ns, bytes, peer, EventKind::kComm});
}

void Client::SetAssignmentCallback(AssignmentCallback callback) {
  impl_->SetCallback(std::move(callback));
}
void Client::SetEnforcer(Enforcer enforcer) { impl_->SetEnforcer(std::move(enforcer)); }
std::optional<Assignment> Client::CurrentAssignment() const { return impl_->Current(); }
std::optional<Assignment> Client::WaitForAssignment(uint64_t after_epoch,
                                                    int64_t timeout_ms) const {
  return impl_->Wait(after_epoch, timeout_ms);
}
std::optional<Assignment> Client::WaitForAssignment(uint64_t after_epoch, uint64_t after_state_id,
                                                    int64_t timeout_ms) const {
  return impl_->Wait(after_epoch, after_state_id, timeout_ms);
}
std::optional<Profile> Client::LastReportedProfile() const { return impl_->LastReported(); }
ClientStats Client::Stats() const { return impl_->Stats(); }
bool Client::WaitForStats(const std::function<bool(const ClientStats&)>& pred,
                          int64_t timeout_ms) const {
  return impl_->WaitForStats(pred, timeout_ms);
}
void Client::Close() { impl_->Close(); }

}  // namespace crux::client
