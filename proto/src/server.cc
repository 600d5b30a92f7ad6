#include "crux/protocol/server.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "crux/protocol/validate.h"
#include "crux/sync/thread_annotations.h"

namespace crux::protocol {
namespace {

int ToMillis(core::Duration d) {
  const int64_t ms = d.nanos() / 1000000;
  if (ms > 0x7fffffff) return 0x7fffffff;
  return static_cast<int>(ms < 0 ? 0 : ms);
}

}  // namespace

class RouterServer::Impl {
  // A queued frame and when Send() queued it (steady clock, ns).
  struct Outgoing {
    std::string peer;
    std::string frame;
    int64_t queued_ns = 0;
  };

 public:
  Impl(TransportContext& ctx, ServerOptions options, Handler handler, BatchHandler batch)
      : ctx_(ctx),
        options_(std::move(options)),
        handler_(std::move(handler)),
        batch_handler_(std::move(batch)) {}

  ~Impl() {
    Stop();
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  core::Status Init() {
    if (options_.endpoint.empty()) {
      return core::InvalidArgumentError("server.endpoint: must not be empty");
    }
    if (!handler_ && !batch_handler_) {
      return core::InvalidArgumentError("server.handler: must be set");
    }
    std::vector<std::string> keys = options_.authorized_keys;
    if (options_.curve) {
      if (!IsValidZ85Key(options_.server_keys.public_z85) ||
          !IsValidZ85Key(options_.server_keys.secret_z85)) {
        return core::InvalidArgumentError(
            "server.server_keys: CURVE needs a valid Z85 public and secret key");
      }
      if (options_.zap_domain.empty()) {
        return core::InvalidArgumentError("server.zap_domain: must not be empty with CURVE");
      }
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!IsValidZ85Key(keys[i])) {
          return core::InvalidArgumentError("server.authorized_keys[" + std::to_string(i) +
                                            "]: not a 40-character Z85 CurveZMQ key");
        }
      }
      if (!options_.authorized_keys_dir.empty()) {
        CRUX_ASSIGN_OR_RETURN(auto dir_keys, LoadAuthorizedKeys(options_.authorized_keys_dir));
        for (auto& k : dir_keys) keys.push_back(std::move(k.public_z85));
      }
      CRUX_RETURN_IF_ERROR(ctx_.SetAuthorizedKeys(options_.zap_domain, keys));
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      return core::UnavailableError(std::string("server: eventfd failed: ") + std::strerror(errno));
    }
    try {
      socket_ = zmq::socket_t(ctx_.context(), zmq::socket_type::router);
      socket_.set(zmq::sockopt::linger, 0);
      socket_.set(zmq::sockopt::router_mandatory, options_.router_mandatory);
      // With CURVE and bound identities hand-over is off: it would let a second authorised key
      // that presents a live peer's routing id take that peer's replies and pushes below any
      // check of ours (libzmq's ZAP request carries no peer routing id to refuse it with).
      socket_.set(zmq::sockopt::router_handover,
                  options_.router_handover && !(options_.curve && options_.bind_identities));
      socket_.set(zmq::sockopt::maxmsgsize, options_.max_msg_size);
      socket_.set(zmq::sockopt::sndhwm, options_.sndhwm);
      socket_.set(zmq::sockopt::rcvhwm, options_.rcvhwm);
      socket_.set(zmq::sockopt::backlog, options_.backlog);
      if (options_.heartbeat_ivl > core::Duration::Zero()) {
        socket_.set(zmq::sockopt::heartbeat_ivl, ToMillis(options_.heartbeat_ivl));
        socket_.set(zmq::sockopt::heartbeat_timeout, ToMillis(options_.heartbeat_timeout));
      }
      if (options_.tcp_keepalive_idle >= core::Duration::Millis(1000)) {
        socket_.set(zmq::sockopt::tcp_keepalive, 1);
        socket_.set(zmq::sockopt::tcp_keepalive_idle,
                    static_cast<int>(options_.tcp_keepalive_idle.nanos() / 1000000000));
        socket_.set(zmq::sockopt::tcp_keepalive_intvl, 10);
        socket_.set(zmq::sockopt::tcp_keepalive_cnt, 3);
      }
      if (options_.curve) {
        socket_.set(zmq::sockopt::zap_domain, options_.zap_domain);
        socket_.set(zmq::sockopt::curve_server, true);
        socket_.set(zmq::sockopt::curve_secretkey, options_.server_keys.secret_z85);
      }
    } catch (const zmq::error_t& e) {
      return core::InvalidArgumentError("server " + options_.endpoint +
                                        ": socket option: " + e.what());
    }
    try {
      socket_.bind(options_.endpoint);
      bound_endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINVAL || e.num() == EPROTONOSUPPORT) {
        return core::InvalidArgumentError("server.endpoint: cannot bind \"" + options_.endpoint +
                                          "\": " + e.what());
      }
      return core::UnavailableError("server.endpoint: cannot bind \"" + options_.endpoint +
                                    "\": " + e.what());
    }
    // Handshake failures are only visible through a socket monitor.
    try {
      const std::string monitor_ep =
          "inproc://crux.monitor." + std::to_string(reinterpret_cast<uintptr_t>(this));
      if (zmq_socket_monitor(socket_.handle(), monitor_ep.c_str(),
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 (options_.curve ? ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL : 0)) ==
          0) {
        monitor_ = zmq::socket_t(ctx_.context(), zmq::socket_type::pair);
        monitor_.set(zmq::sockopt::linger, 0);
        monitor_.connect(monitor_ep);
      }
    } catch (const zmq::error_t&) {
      monitor_.close();  // Counting refused handshakes is best effort.
    }
    MutexLock lock(&stop_mu_);
    thread_ = std::thread([this] { Loop(); });
    return core::Status::Ok();
  }

  // Safe to call more than once and from several threads; from the I/O thread itself (inside
  // the handler) it only requests the stop, and a later call from another thread joins.
  void Stop() CRUX_EXCLUDES(stop_mu_, mu_) {
    stopping_.store(true, std::memory_order_release);
    Wake();
    // The I/O thread must not wait for stop_mu_: another thread may hold it while joining this
    // very thread (a handler calling Stop() during the owner's Stop() would deadlock).
    if (std::this_thread::get_id() == io_thread_id_.load()) return;
    MutexLock lock(&stop_mu_);
    if (thread_.joinable()) {
      thread_.join();
    } else {
      socket_.close();  // Never started (Init failed) or already joined: the loop closed it.
    }
    MutexLock queue_lock(&mu_);
    outbox_.clear();
    queued_.store(0, std::memory_order_relaxed);
  }

  core::Status Enqueue(const std::string& peer, std::string frame) CRUX_EXCLUDES(mu_) {
    if (frame.size() > kMaxFrameBytes) {
      send_failed_.fetch_add(1, std::memory_order_relaxed);
      return core::OutOfRangeError("send: " + std::to_string(frame.size()) +
                                   "-byte frame exceeds the " + std::to_string(kMaxFrameBytes) +
                                   "-byte limit");
    }
    if (stopping_.load(std::memory_order_acquire)) {
      return core::UnavailableError("send: server stopped");
    }
    const int64_t queued_ns = SteadyNs();
    bool was_empty;
    {
      MutexLock lock(&mu_);
      if (outbox_.size() >= options_.max_send_queue) {
        send_failed_.fetch_add(1, std::memory_order_relaxed);
        return core::UnavailableError("send: outbound queue full (" +
                                      std::to_string(outbox_.size()) + " frames)");
      }
      was_empty = outbox_.empty();
      outbox_.push_back({peer, std::move(frame), queued_ns});
      queued_.store(outbox_.size(), std::memory_order_relaxed);
    }
    if (was_empty) Wake();
    return core::Status::Ok();
  }

  ServerCounters counters() const {
    ServerCounters c;
    c.received = received_.load(std::memory_order_relaxed);
    c.delivered = delivered_.load(std::memory_order_relaxed);
    c.sent = sent_.load(std::memory_order_relaxed);
    c.malformed = malformed_.load(std::memory_order_relaxed);
    c.too_large = too_large_.load(std::memory_order_relaxed);
    c.unsupported_version = unsupported_version_.load(std::memory_order_relaxed);
    c.invalid = invalid_.load(std::memory_order_relaxed);
    c.send_failed = send_failed_.load(std::memory_order_relaxed);
    c.refused_identity = refused_identity_.load(std::memory_order_relaxed);
    c.refused_mechanism = refused_mechanism_.load(std::memory_order_relaxed);
    c.refused_handshake = refused_handshake_.load(std::memory_order_relaxed);
    c.queued = queued_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < c.send_queue_buckets.size(); ++i) {
      c.send_queue_buckets[i] = send_queue_buckets_[i].load(std::memory_order_relaxed);
    }
    c.send_queue_wait_ns = send_queue_wait_ns_.load(std::memory_order_relaxed);
    c.auth_refused = options_.curve ? ctx_.auth_refused(options_.zap_domain) : 0;
    return c;
  }

  const std::string& endpoint() const { return bound_endpoint_; }

 private:
  static int64_t SteadyNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // I/O thread: one frame waited `wait_ns` in the send queue.
  void CountWait(int64_t wait_ns) {
    const double ms = static_cast<double>(std::max<int64_t>(0, wait_ns)) / 1e6;
    size_t b = 0;
    while (b < kSendQueueBoundsMs.size() && ms > kSendQueueBoundsMs[b]) ++b;
    send_queue_buckets_[b].fetch_add(1, std::memory_order_relaxed);
    send_queue_wait_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, wait_ns)),
                                  std::memory_order_relaxed);
  }

  void Wake() {
    const uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;  // EAGAIN means the counter is already non-zero: the thread will wake anyway.
  }

  void Loop() CRUX_EXCLUDES(mu_) {
    io_thread_id_.store(std::this_thread::get_id());
    pthread_setname_np(pthread_self(), "crux-server");  // For top -H, perf, gdb.
    std::deque<Outgoing> batch;
    while (!stopping_.load(std::memory_order_acquire)) {
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                                 {nullptr, wake_fd_, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, monitor_ ? 3 : 2, std::chrono::milliseconds(-1));
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) break;
        continue;  // EINTR.
      }
      if (items[1].revents & ZMQ_POLLIN) {
        uint64_t value;
        ssize_t n = ::read(wake_fd_, &value, sizeof(value));
        (void)n;
      }
      if (stopping_.load(std::memory_order_acquire)) break;
      if (monitor_ && (items[2].revents & ZMQ_POLLIN)) ReadMonitor();
      if (items[0].revents & ZMQ_POLLIN) ReceiveBatch();
      {
        MutexLock lock(&mu_);
        batch.swap(outbox_);
        queued_.store(0, std::memory_order_relaxed);
      }
      if (!batch.empty()) {
        const int64_t now_ns = SteadyNs();
        for (const Outgoing& o : batch) {
          CountWait(now_ns - o.queued_ns);
          SendNow(o.peer, o.frame);
        }
      }
      batch.clear();
    }
    if (monitor_) {
      zmq_socket_monitor(socket_.handle(), nullptr, 0);
      monitor_.close();
    }
    socket_.close();
  }

  // Monitor events: frame 1 = uint16 event + uint32 value, frame 2 = endpoint.
  void ReadMonitor() {
    for (int i = 0; i < 64; ++i) {
      std::vector<zmq::message_t> parts;
      std::optional<size_t> got;
      try {
        got = zmq::recv_multipart(monitor_, std::back_inserter(parts), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        return;
      }
      if (!got) return;
      if (parts.empty() || parts[0].size() < 6) continue;
      uint16_t event = 0;
      uint32_t value = 0;
      std::memcpy(&event, parts[0].data(), sizeof(event));
      std::memcpy(&value, static_cast<const char*>(parts[0].data()) + 2, sizeof(value));
      if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
          value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
        refused_mechanism_.fetch_add(1, std::memory_order_relaxed);
      } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                 (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && options_.curve)) {
        // NO_DETAIL: the peer closed mid-handshake. On a CURVE socket that is mostly a peer that
        // saw the mismatch first (a plain client) and hung up; on a plain socket it is a
        // short-lived client (cruxctl) and no refusal.
        refused_handshake_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  // Curve: true when `peer` may speak as `user_id` (binds a new routing id to the key).
  bool ClaimIdentity(const std::string& peer, const std::string& user_id) {
    auto it = bound_.find(peer);
    if (it != bound_.end()) return it->second == user_id;
    if (bound_.size() >= options_.max_bound_identities && !bound_order_.empty()) {
      bound_.erase(bound_order_.front());
      bound_order_.pop_front();
    }
    bound_.emplace(peer, user_id);
    bound_order_.push_back(peer);
    return true;
  }

  void ReceiveBatch() {
    std::vector<Inbound> delivered;
    ReceiveInto(&delivered);
    if (delivered.empty()) return;
    // Who to tell if the handler throws (the batch is moved into it).
    std::vector<std::pair<std::string, uint64_t>> senders;
    senders.reserve(delivered.size());
    for (const Inbound& in : delivered) senders.emplace_back(in.peer, in.msg.request_id());
    try {
      batch_handler_(std::move(delivered));
    } catch (const std::exception& e) {
      for (const auto& [peer, request_id] : senders) {
        SendNow(peer, Encode(MakeError(request_id, v1::ERROR_CODE_INTERNAL,
                                       std::string("handler failed: ") + e.what())));
      }
    }
  }

  // Reads up to max_batch frames. With a per-message handler each is handed over at once; with
  // a batch handler they are collected in `batch`.
  void ReceiveInto(std::vector<Inbound>* batch) {
    std::vector<zmq::message_t> parts;
    for (size_t i = 0; i < options_.max_batch; ++i) {
      parts.clear();
      std::optional<size_t> got;
      try {
        got = zmq::recv_multipart(socket_, std::back_inserter(parts), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t&) {
        return;
      }
      if (!got) return;  // Nothing more to read.
      if (parts.empty()) continue;
      received_.fetch_add(1, std::memory_order_relaxed);
      std::string peer = parts[0].to_string();
      if (parts.size() != 2) {
        malformed_.fetch_add(1, std::memory_order_relaxed);
        SendNow(peer, Encode(MakeError(0, v1::ERROR_CODE_MALFORMED,
                                       "frame: expected exactly one frame per message, got " +
                                           std::to_string(parts.size() - 1))));
        continue;
      }
      const zmq::message_t& payload = parts[1];
      v1::ErrorCode code = v1::ERROR_CODE_UNSPECIFIED;
      auto decoded =
          Decode(std::string_view(static_cast<const char*>(payload.data()), payload.size()), &code);
      if (!decoded.ok()) {
        uint64_t request_id = 0;
        if (code != v1::ERROR_CODE_TOO_LARGE) {
          // Echo the id whenever the bytes parse (a known version with no/unknown body, ...).
          v1::Envelope partial;
          if (partial.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
            request_id = partial.request_id();
          }
        }
        if (code == v1::ERROR_CODE_UNSUPPORTED_VERSION) {
          unsupported_version_.fetch_add(1, std::memory_order_relaxed);
        } else if (code == v1::ERROR_CODE_TOO_LARGE) {
          too_large_.fetch_add(1, std::memory_order_relaxed);
        } else {
          malformed_.fetch_add(1, std::memory_order_relaxed);
        }
        SendNow(peer, Encode(MakeError(request_id, code, decoded.status().message())));
        continue;
      }
      v1::Envelope msg = std::move(decoded).value();
      if (msg.request_id() == 0 && !msg.has_ack() && !msg.has_ack_batch()) {
        invalid_.fetch_add(1, std::memory_order_relaxed);
        SendNow(peer, Encode(MakeError(0, v1::ERROR_CODE_INVALID_ARGUMENT,
                                       "envelope.request_id: must be non-zero in a request (0 "
                                       "marks pushes; only an Ack or AckBatch answering a push "
                                       "carries 0)")));
        continue;
      }
      if (options_.validate) {
        core::Status st = Validate(msg);
        if (!st.ok()) {
          invalid_.fetch_add(1, std::memory_order_relaxed);
          SendNow(peer, Encode(MakeError(msg.request_id(), v1::ERROR_CODE_INVALID_ARGUMENT,
                                         st.message())));
          continue;
        }
      }
      Inbound in;
      in.peer = std::move(peer);
      if (options_.curve) {
        const char* uid = zmq_msg_gets(payload.handle(), "User-Id");
        if (uid != nullptr) in.user_id = uid;
        if (options_.bind_identities && !ClaimIdentity(in.peer, in.user_id)) {
          refused_identity_.fetch_add(1, std::memory_order_relaxed);
          SendNow(in.peer, Encode(MakeError(msg.request_id(), v1::ERROR_CODE_PERMISSION_DENIED,
                                            "routing id: in use by another CURVE key")));
          continue;
        }
      }
      const uint64_t request_id = msg.request_id();
      in.msg = std::move(msg);
      delivered_.fetch_add(1, std::memory_order_relaxed);
      if (batch_handler_) {
        batch->push_back(std::move(in));
        continue;
      }
      try {
        handler_(std::move(in));
      } catch (const std::exception& e) {
        SendNow(parts[0].to_string(),
                Encode(MakeError(request_id, v1::ERROR_CODE_INTERNAL,
                                 std::string("handler failed: ") + e.what())));
      }
    }
  }

  void SendNow(const std::string& peer, const std::string& frame) {
    try {
      if (!socket_.send(zmq::buffer(peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        send_failed_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      socket_.send(zmq::buffer(frame), zmq::send_flags::dontwait);
      sent_.fetch_add(1, std::memory_order_relaxed);
    } catch (const zmq::error_t&) {
      // EHOSTUNREACH (unknown peer with ROUTER_MANDATORY) and friends: drop and count.
      send_failed_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  TransportContext& ctx_;
  ServerOptions options_;  // Immutable after Init().
  Handler handler_;        // One of the two is set.
  BatchHandler batch_handler_;
  // Owned by the I/O thread while it runs (Init() before it starts, Stop() after the join):
  // socket_, monitor_, bound_ and bound_order_.
  zmq::socket_t socket_;
  std::string bound_endpoint_;  // Written by Init() only.
  int wake_fd_ = -1;            // Written by Init() only; written to from any thread.
  std::atomic<bool> stopping_{false};
  std::atomic<std::thread::id> io_thread_id_{};  // Set by the I/O thread as it starts.
  Mutex stop_mu_;                                // Serialises the join in Stop().
  std::thread thread_ CRUX_GUARDED_BY(stop_mu_);

  Mutex mu_;
  std::deque<Outgoing> outbox_ CRUX_GUARDED_BY(mu_);

  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> too_large_{0};
  std::atomic<uint64_t> unsupported_version_{0};
  std::atomic<uint64_t> invalid_{0};
  std::atomic<uint64_t> send_failed_{0};
  std::atomic<uint64_t> refused_identity_{0};
  std::atomic<uint64_t> refused_mechanism_{0};
  std::atomic<uint64_t> refused_handshake_{0};
  zmq::socket_t monitor_;
  // I/O thread only: routing id -> CURVE key, and the order of binding (oldest first).
  std::unordered_map<std::string, std::string> bound_;
  std::deque<std::string> bound_order_;
  std::atomic<uint64_t> queued_{0};
  // Written by the I/O thread, read by counters().
  std::array<std::atomic<uint64_t>, kSendQueueBoundsMs.size() + 1> send_queue_buckets_{};
  std::atomic<uint64_t> send_queue_wait_ns_{0};
};

core::Result<std::unique_ptr<RouterServer>> RouterServer::Start(TransportContext& ctx,
                                                                ServerOptions options,
                                                                Handler handler) {
  auto impl = std::make_unique<Impl>(ctx, std::move(options), std::move(handler), nullptr);
  CRUX_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<RouterServer>(new RouterServer(std::move(impl)));
}

core::Result<std::unique_ptr<RouterServer>> RouterServer::StartBatched(TransportContext& ctx,
                                                                       ServerOptions options,
                                                                       BatchHandler handler) {
  auto impl = std::make_unique<Impl>(ctx, std::move(options), nullptr, std::move(handler));
  CRUX_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<RouterServer>(new RouterServer(std::move(impl)));
}

RouterServer::RouterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RouterServer::~RouterServer() = default;

void RouterServer::Stop() { impl_->Stop(); }

core::Status RouterServer::Send(const std::string& peer, const v1::Envelope& msg) {
  v1::Envelope copy;
  const v1::Envelope* to_send = &msg;
  if (msg.protocol_version() != kProtocolVersion) {
    copy = msg;
    SetVersion(&copy);
    to_send = &copy;
  }
  CRUX_ASSIGN_OR_RETURN(std::string frame, EncodeChecked(*to_send));
  return impl_->Enqueue(peer, std::move(frame));
}

core::Status RouterServer::SendEncoded(const std::string& peer, std::string frame) {
  return impl_->Enqueue(peer, std::move(frame));
}

ServerCounters RouterServer::counters() const { return impl_->counters(); }

const std::string& RouterServer::endpoint() const { return impl_->endpoint(); }

}  // namespace crux::protocol
