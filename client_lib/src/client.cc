#include "crux/client/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "crux/protocol/client.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/transport_context.h"
#include "crux/protocol/validate.h"
#include "event_ring.h"
#include "profiler.h"
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

int64_t NowMs() { return Client::NowNs() / 1'000'000; }

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class Client::Impl {
 public:
  explicit Impl(ClientOptions options)
      : options_(std::move(options)),
        ring_(options_.ring_capacity),
        profiler_(options_.profiler, options_.flops_per_iteration,
                  options_.gpu_peak_flops * internal::TotalGpus(options_)) {}

  ~Impl() { Close(); }

  core::Status Init() {
    context_ = std::make_unique<protocol::TransportContext>();
    protocol::ClientOptions co;
    co.endpoint = options_.endpoint;
    co.routing_id = "job:" + options_.job_id;
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
    thread_ = std::thread([this] { Run(); });
    return core::Status::Ok();
  }

  void Push(const Event& e) {
    if (!ring_.TryPush(e)) dropped_.fetch_add(1, std::memory_order_relaxed);
  }

  core::Result<PeerId> AddPeer(const std::string& local, const std::string& remote) {
    if (!protocol::IsValidId(local)) {
      return core::InvalidArgumentError("local_nic: invalid name \"" + local + "\"");
    }
    if (!protocol::IsValidId(remote)) {
      return core::InvalidArgumentError("remote_nic: invalid name \"" + remote + "\"");
    }
    std::lock_guard<std::mutex> lock(peers_mu_);
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

  void SetCallback(AssignmentCallback cb) {
    std::lock_guard<std::mutex> lock(callback_mu_);
    callback_ = std::move(cb);
  }
  void SetEnforcer(Enforcer e) {
    std::lock_guard<std::mutex> lock(callback_mu_);
    enforcer_ = std::move(e);
  }

  std::optional<Assignment> Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return assignment_;
  }

  std::optional<Assignment> Wait(uint64_t after_epoch, int64_t timeout_ms) const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)),
                 [&] { return (assignment_ && assignment_->epoch > after_epoch) || closed_; });
    if (assignment_ && assignment_->epoch > after_epoch) return assignment_;
    return std::nullopt;
  }

  std::optional<Profile> LastReported() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_reported_;
  }

  ClientStats Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    ClientStats s = stats_;
    s.events_dropped = dropped_.load(std::memory_order_relaxed);
    return s;
  }

  void Close() {
    stop_.store(true);
    // From the callback/enforcer (the background thread itself): only ask it to stop; it cannot
    // join itself. The owner's later Close()/destructor joins it.
    if (thread_.joinable() && std::this_thread::get_id() == thread_.get_id()) return;
    if (thread_.joinable()) thread_.join();
    dealer_.reset();
    context_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  void SetError(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.last_error = std::move(e);
  }

  // A request/reply; on transport failure marks the session disconnected.
  core::Result<v1::Envelope> Call(const v1::Envelope& req) {
    auto r = dealer_->Call(req, core::Duration::Millis(options_.call_timeout_ms));
    if (!r.ok()) {
      Disconnected(r.status().ToString());
      return r.status();
    }
    // Pushes received meanwhile are queued inside the DealerClient.
    return r;
  }

  void Disconnected(std::string why) {
    registered_ = false;
    next_register_ms_ = NowMs() + backoff_ms_;
    backoff_ms_ = std::min(backoff_ms_ * 2, options_.reconnect_max_ms);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.registered = false;
    stats_.last_error = std::move(why);
  }

  // Handles an Error reply to a job request. UNKNOWN_JOB: re-register now.
  void ErrorReply(const v1::Error& e) {
    if (e.code() == v1::ERROR_CODE_UNKNOWN_JOB) {
      registered_ = false;
      next_register_ms_ = NowMs();
      std::lock_guard<std::mutex> lock(mu_);
      stats_.registered = false;
    }
    SetError(protocol::StatusFromError(e).ToString());
  }

  void Register() {
    v1::Envelope req = protocol::NewEnvelope();
    *req.mutable_register_job() = internal::MakeRegisterJob(options_);
    auto r = Call(req);
    if (!r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.register_failures;
      return;
    }
    if (r->has_error()) {
      // A refusal (unknown host, conflict): retry with backoff; the reason is in last_error.
      SetError(protocol::StatusFromError(r->error()).ToString());
      next_register_ms_ = NowMs() + backoff_ms_;
      backoff_ms_ = std::min(backoff_ms_ * 2, options_.reconnect_max_ms);
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.register_failures;
      return;
    }
    if (!r->has_register_job_reply()) {
      SetError("register_job: unexpected reply " + std::string(protocol::BodyName(*r)));
      next_register_ms_ = NowMs() + backoff_ms_;
      return;
    }
    registered_ = true;
    backoff_ms_ = options_.reconnect_min_ms;
    lease_ms_ = r->register_job_reply().lease_ms();
    if (lease_ms_ == 0) lease_ms_ = 15000;
    next_heartbeat_ms_ = NowMs() + static_cast<int64_t>(lease_ms_ / 3);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.registrations;
    stats_.registered = true;
    stats_.lease_ms = lease_ms_;
  }

  void Heartbeat() {
    v1::Envelope req = protocol::NewEnvelope();
    auto* hb = req.mutable_heartbeat();
    hb->set_job_id(options_.job_id);
    hb->set_seq(++heartbeat_seq_);
    hb->set_applied_epoch(applied_epoch_);
    next_heartbeat_ms_ = NowMs() + static_cast<int64_t>(std::max<uint64_t>(1, lease_ms_ / 3));
    auto r = Call(req);
    if (!r.ok()) return;
    if (r->has_error()) return ErrorReply(r->error());
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.heartbeats_sent;
  }

  void Report() {
    v1::Envelope req = protocol::NewEnvelope();
    *req.mutable_profile_report() = internal::MakeProfileReport(options_.job_id, *pending_);
    auto r = Call(req);
    if (!r.ok()) return;  // Kept pending: resent after re-registration.
    if (r->has_error()) {
      ErrorReply(r->error());
      if (r->error().code() != v1::ERROR_CODE_UNKNOWN_JOB) pending_.reset();  // Refused.
      return;
    }
    // Any accepted request renews the lease.
    next_heartbeat_ms_ = NowMs() + static_cast<int64_t>(std::max<uint64_t>(1, lease_ms_ / 3));
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.reports_sent;
    last_reported_ = *pending_;
    pending_.reset();
  }

  void HandleMessage(const v1::Envelope& msg) {
    if (!msg.has_assignment()) return;  // Late replies and other bodies: nothing to do.
    const v1::Assignment& a = msg.assignment();
    v1::Envelope ack = protocol::NewEnvelope(0);
    auto* body = ack.mutable_ack();
    body->set_job_id(options_.job_id);
    body->set_epoch(a.epoch());
    body->set_ok(true);
    if (a.job_id() != options_.job_id) {
      body->set_ok(false);
      body->set_error("assignment.job_id: \"" + a.job_id() + "\" is not this client's job");
    } else if (a.epoch() <= applied_epoch_) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.assignments_stale;
    } else {
      Assignment applied = internal::FromWire(a, UnixNowNs());
      applied_epoch_ = a.epoch();
      Enforcer enforcer;
      AssignmentCallback callback;
      {
        std::lock_guard<std::mutex> lock(callback_mu_);
        enforcer = enforcer_;
        callback = callback_;
      }
      if (enforcer) {
        core::Status s = enforcer(applied);
        if (!s.ok()) {
          body->set_ok(false);
          body->set_error(s.ToString().substr(0, 4000));
          SetError("enforcement: " + s.ToString());
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        assignment_ = applied;
        ++stats_.assignments_applied;
        cv_.notify_all();
      }
      if (callback) callback(applied);
    }
    core::Status s = dealer_->Send(ack);
    if (!s.ok()) SetError("ack: " + s.ToString());
  }

  void DrainRing() {
    Event e;
    uint64_t before = profiler_.iterations();
    while (ring_.TryPop(&e)) profiler_.Consume(e);
    if (profiler_.iterations() != before) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.iterations = profiler_.iterations();
    }
    std::vector<PeerId> index;
    auto p = profiler_.TakeReport(Client::NowNs(), &index);
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(peers_mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    stats_.iterations = profiler_.iterations();
    pending_ = std::move(p);
  }

  void Run() {
    next_register_ms_ = NowMs();
    backoff_ms_ = options_.reconnect_min_ms;
    while (!stop_.load()) {
      if (!registered_ && NowMs() >= next_register_ms_) Register();
      DrainRing();
      if (registered_ && pending_) Report();
      if (registered_ && NowMs() >= next_heartbeat_ms_) Heartbeat();
      auto msg = dealer_->Receive(core::Duration::Millis(options_.poll_interval_ms));
      while (msg.ok() && msg->has_value()) {
        HandleMessage(**msg);
        msg = dealer_->TryReceive();
      }
    }
    if (options_.end_job_on_close && registered_) {
      v1::Envelope req = protocol::NewEnvelope();
      req.mutable_end_job()->set_job_id(options_.job_id);
      req.mutable_end_job()->set_reason("client closed");
      (void)dealer_->Call(req, core::Duration::Millis(options_.call_timeout_ms));
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.registered = false;
  }

  const ClientOptions options_;
  internal::EventRing ring_;
  std::atomic<uint64_t> dropped_{0};

  std::mutex peers_mu_;
  std::vector<std::pair<std::string, std::string>> peers_;
  std::map<std::pair<std::string, std::string>, PeerId> peer_ids_;

  std::mutex callback_mu_;
  AssignmentCallback callback_;
  Enforcer enforcer_;

  mutable std::mutex mu_;  // Guards the members below it up to the background-thread block.
  mutable std::condition_variable cv_;
  std::optional<Assignment> assignment_;
  std::optional<Profile> last_reported_;
  ClientStats stats_;
  bool closed_ = false;

  // Background thread only.
  std::unique_ptr<protocol::TransportContext> context_;
  std::unique_ptr<protocol::DealerClient> dealer_;
  internal::Profiler profiler_;
  std::optional<Profile> pending_;
  bool registered_ = false;
  int64_t next_register_ms_ = 0;
  int64_t backoff_ms_ = 100;
  int64_t next_heartbeat_ms_ = 0;
  uint64_t lease_ms_ = 15000;
  uint64_t heartbeat_seq_ = 0;
  uint64_t applied_epoch_ = 0;

  std::atomic<bool> stop_{false};
  std::thread thread_;
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
  impl_->Push({NowNs(), 0, bytes, peer, EventKind::kCommStart});
}
void Client::CommEnd(PeerId peer) { impl_->Push({NowNs(), 0, 0, peer, EventKind::kCommEnd}); }
void Client::RecordComm(PeerId peer, uint64_t bytes, int64_t start_ns, int64_t end_ns) {
  impl_->Push({start_ns, end_ns, bytes, peer, EventKind::kComm});
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
std::optional<Profile> Client::LastReportedProfile() const { return impl_->LastReported(); }
ClientStats Client::Stats() const { return impl_->Stats(); }
void Client::Close() { impl_->Close(); }

}  // namespace crux::client
