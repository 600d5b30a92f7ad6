#include "crux/protocol/transport_context.h"

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "crux/sync/thread_annotations.h"

namespace crux::protocol {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::string Z85Of32(const std::string& raw) {
  char out[41] = {};
  if (raw.size() != 32 ||
      zmq_z85_encode(out, reinterpret_cast<const uint8_t*>(raw.data()), 32) == nullptr) {
    return {};
  }
  return std::string(out, 40);
}

}  // namespace

class TransportContext::Impl {
 public:
  explicit Impl(TransportContextOptions options)
      : context_(options.io_threads, options.max_sockets) {}

  ~Impl() { StopZap(); }

  zmq::context_t& context() { return context_; }

  core::Status SetAuthorizedKeys(const std::string& domain, std::vector<std::string> keys)
      CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto& d = domains_[domain];
    d.keys = std::set<std::string>(keys.begin(), keys.end());
    d.configured = true;
    if (!zap_thread_.joinable()) {
      try {
        // Bind in the caller's thread so that the handler exists before any CURVE socket
        // binds (libzmq lets CURVE peers in unchecked when no handler is bound).
        zap_socket_ = zmq::socket_t(context_, zmq::socket_type::rep);
        zap_socket_.set(zmq::sockopt::linger, 0);
        zap_socket_.bind(kZapEndpoint);
        const std::string stop_ep =
            "inproc://crux.zap.stop." + std::to_string(reinterpret_cast<uintptr_t>(this));
        stop_rx_ = zmq::socket_t(context_, zmq::socket_type::pair);
        stop_rx_.set(zmq::sockopt::linger, 0);
        stop_rx_.bind(stop_ep);
        stop_tx_ = zmq::socket_t(context_, zmq::socket_type::pair);
        stop_tx_.set(zmq::sockopt::linger, 0);
        stop_tx_.connect(stop_ep);
      } catch (const zmq::error_t& e) {
        zap_socket_.close();
        stop_rx_.close();
        stop_tx_.close();
        return core::UnavailableError(std::string("zap: cannot bind ") + kZapEndpoint + ": " +
                                      e.what());
      }
      zap_thread_ = std::thread([this] { ZapLoop(); });
    }
    return core::Status::Ok();
  }

  uint64_t refused(const std::string& domain) const CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = domains_.find(domain);
    return it == domains_.end() ? 0 : it->second.refused;
  }
  uint64_t accepted(const std::string& domain) const CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    auto it = domains_.find(domain);
    return it == domains_.end() ? 0 : it->second.accepted;
  }

 private:
  struct Domain {
    bool configured = false;
    std::set<std::string> keys;
    uint64_t refused = 0;
    uint64_t accepted = 0;
  };

  void StopZap() CRUX_EXCLUDES(mu_) {
    std::thread zap_thread;
    {
      MutexLock lock(&mu_);
      if (!zap_thread_.joinable()) return;
      try {
        stop_tx_.send(zmq::str_buffer("stop"), zmq::send_flags::dontwait);
      } catch (const zmq::error_t&) {
        // The context is being terminated; the loop exits on ETERM.
      }
      zap_thread = std::move(zap_thread_);
    }
    zap_thread.join();
    zap_socket_.close();
    stop_rx_.close();
    MutexLock lock(&mu_);
    stop_tx_.close();
  }

  // Answers ZAP requests (RFC 27) until told to stop.
  void ZapLoop() CRUX_EXCLUDES(mu_) {
    while (true) {
      zmq::pollitem_t items[] = {{zap_socket_.handle(), 0, ZMQ_POLLIN, 0},
                                 {stop_rx_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, std::chrono::milliseconds(-1));
        if (items[1].revents & ZMQ_POLLIN) return;
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> req;
        if (!zmq::recv_multipart(zap_socket_, std::back_inserter(req), zmq::recv_flags::dontwait)) {
          continue;
        }
        std::string request_id = req.size() > 1 ? req[1].to_string() : "";
        std::string status = "400";
        std::string text = "malformed ZAP request";
        std::string user_id;
        if (req.size() >= 6 && req[0].to_string() == "1.0") {
          const std::string domain = req[2].to_string();
          const std::string mechanism = req[5].to_string();
          MutexLock lock(&mu_);
          auto it = domains_.find(domain);
          if (mechanism != "CURVE") {
            // Crux only sets ZAP domains on CURVE sockets; anything else is unexpected here.
            text = "mechanism " + mechanism + " not allowed in domain " + domain;
          } else if (it == domains_.end() || !it->second.configured) {
            text = "unknown ZAP domain";
          } else if (req.size() < 7) {
            text = "missing CURVE key";
          } else {
            const std::string key = Z85Of32(req[6].to_string());
            if (!key.empty() && it->second.keys.count(key) > 0) {
              status = "200";
              text = "OK";
              user_id = key;
            } else {
              text = "key not authorised";
            }
          }
          Domain& d = domains_[domain];
          (status == "200" ? d.accepted : d.refused)++;
        }
        std::vector<zmq::const_buffer> reply = {zmq::str_buffer("1.0"), zmq::buffer(request_id),
                                                zmq::buffer(status),    zmq::buffer(text),
                                                zmq::buffer(user_id),   zmq::const_buffer()};
        zmq::send_multipart(zap_socket_, reply, zmq::send_flags::dontwait);
      } catch (const zmq::error_t& e) {
        if (e.num() == ETERM) return;
        // EINTR and transient errors: keep serving.
      }
    }
  }

  zmq::context_t context_;  // Thread-safe (libzmq contexts are).
  mutable Mutex mu_;
  std::map<std::string, Domain> domains_ CRUX_GUARDED_BY(mu_);
  // Bound under mu_ before the ZAP thread starts, then used by that thread only; closed by
  // StopZap() after the join.
  zmq::socket_t zap_socket_;
  zmq::socket_t stop_rx_;
  zmq::socket_t stop_tx_ CRUX_GUARDED_BY(mu_);  // The stop signal's sending end.
  std::thread zap_thread_ CRUX_GUARDED_BY(mu_);
};

TransportContext::TransportContext() : TransportContext(TransportContextOptions{}) {}
TransportContext::TransportContext(TransportContextOptions options)
    : impl_(std::make_unique<Impl>(options)) {}
TransportContext::~TransportContext() = default;

zmq::context_t& TransportContext::context() { return impl_->context(); }

core::Status TransportContext::SetAuthorizedKeys(const std::string& domain,
                                                 std::vector<std::string> keys_z85) {
  return impl_->SetAuthorizedKeys(domain, std::move(keys_z85));
}

uint64_t TransportContext::auth_refused(const std::string& domain) const {
  return impl_->refused(domain);
}
uint64_t TransportContext::auth_accepted(const std::string& domain) const {
  return impl_->accepted(domain);
}

}  // namespace crux::protocol
