#include "crux/protocol/client.h"

#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "crux/protocol/codec.h"

namespace crux::protocol {
namespace {

using Clock = std::chrono::steady_clock;

int ToMillis(core::Duration d) {
  const int64_t ms = d.nanos() / 1000000;
  if (ms > 0x7fffffff) return 0x7fffffff;
  return static_cast<int>(ms < 0 ? 0 : ms);
}

// ZMQ_EVENT_* this client watches (see client.h "Reconnects take a fresh routing id").
constexpr int kWatchedEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

std::string MonitorEndpoint() {
  static std::atomic<uint64_t> next{0};
  return "inproc://crux.protocol.client.monitor." + std::to_string(++next);
}

}  // namespace

core::Result<std::string> RandomRoutingId() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return core::UnavailableError(std::string("routing id: getrandom failed: ") +
                                    std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "r";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

core::Result<std::unique_ptr<DealerClient>> DealerClient::Connect(TransportContext& ctx,
                                                                  ClientOptions options) {
  if (options.endpoint.empty()) {
    return core::InvalidArgumentError("client.endpoint: must not be empty");
  }
  if (options.curve) {
    if (!IsValidZ85Key(options.server_public_z85)) {
      return core::InvalidArgumentError(
          "client.server_public_z85: not a 40-character Z85 CurveZMQ key");
    }
    if (!IsValidZ85Key(options.client_keys.public_z85) ||
        !IsValidZ85Key(options.client_keys.secret_z85)) {
      return core::InvalidArgumentError(
          "client.client_keys: CURVE needs a valid Z85 public and secret key");
    }
  }
  if (!options.routing_id.empty() &&
      (options.routing_id.size() > 255 || options.routing_id[0] == '\0')) {
    return core::InvalidArgumentError(
        "client.routing_id: must be 1-255 bytes and not start with a zero byte");
  }
  const bool random_id = options.routing_id.empty();
  if (random_id) {
    CRUX_ASSIGN_OR_RETURN(options.routing_id, RandomRoutingId());
  }
  // Several endpoints (HA: every cruxd instance, "tcp://a:7450,tcp://b:7450"): connect to all;
  // only the leader binds its client endpoint, and with ZMQ_IMMEDIATE messages go only to
  // connections whose handshake completed, i.e. to the leader. Reconnects are capped and ZMTP
  // heartbeats short (kFollow* in client.h) so that a dead or paused leader's connection is
  // dropped within about a second and the next leader's is picked up as soon as it binds.
  std::vector<std::string> endpoints;
  for (size_t start = 0; start <= options.endpoint.size();) {
    size_t end = options.endpoint.find(',', start);
    if (end == std::string::npos) end = options.endpoint.size();
    if (end > start) endpoints.push_back(options.endpoint.substr(start, end - start));
    start = end + 1;
  }
  if (endpoints.empty()) return core::InvalidArgumentError("client.endpoint: empty");
  const bool several = endpoints.size() > 1;
  if (several) {
    options.reconnect_ivl_max = std::min(options.reconnect_ivl_max, kFollowReconnectIvlMax);
    options.heartbeat_ivl = kFollowHeartbeatIvl;
    options.heartbeat_timeout = kFollowHeartbeatTimeout;
  }
  auto socket = std::make_unique<zmq::socket_t>();
  auto monitor = std::make_unique<zmq::socket_t>();
  try {
    *socket = zmq::socket_t(ctx.context(), zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::sndhwm, options.sndhwm);
    socket->set(zmq::sockopt::rcvhwm, options.rcvhwm);
    socket->set(zmq::sockopt::maxmsgsize, options.max_msg_size);
    socket->set(zmq::sockopt::reconnect_ivl, std::max(1, ToMillis(options.reconnect_ivl)));
    socket->set(zmq::sockopt::reconnect_ivl_max, ToMillis(options.reconnect_ivl_max));
    if (options.heartbeat_ivl > core::Duration::Zero()) {
      socket->set(zmq::sockopt::heartbeat_ivl, ToMillis(options.heartbeat_ivl));
      socket->set(zmq::sockopt::heartbeat_timeout, ToMillis(options.heartbeat_timeout));
    }
    socket->set(zmq::sockopt::routing_id, options.routing_id);
    if (several) socket->set(zmq::sockopt::immediate, 1);
    if (options.curve) {
      socket->set(zmq::sockopt::curve_serverkey, options.server_public_z85);
      socket->set(zmq::sockopt::curve_publickey, options.client_keys.public_z85);
      socket->set(zmq::sockopt::curve_secretkey, options.client_keys.secret_z85);
    }
  } catch (const zmq::error_t& e) {
    return core::InvalidArgumentError("client " + options.endpoint +
                                      ": socket option: " + e.what());
  }
  // The monitor is connected before the endpoints, so that no event is lost.
  try {
    const std::string monitor_endpoint = MonitorEndpoint();
    if (zmq_socket_monitor(socket->handle(), monitor_endpoint.c_str(), kWatchedEvents) != 0) {
      throw zmq::error_t();
    }
    *monitor = zmq::socket_t(ctx.context(), zmq::socket_type::pair);
    monitor->set(zmq::sockopt::linger, 0);
    monitor->connect(monitor_endpoint);
  } catch (const zmq::error_t& e) {
    // Typically a resource limit (ZMQ_MAX_SOCKETS, file descriptors).
    return core::UnavailableError("client " + options.endpoint + ": socket monitor: " + e.what());
  }
  for (const std::string& ep : endpoints) {
    try {
      socket->connect(ep);
    } catch (const zmq::error_t& e) {
      return core::InvalidArgumentError("client.endpoint: cannot connect to \"" + ep +
                                        "\": " + e.what());
    }
  }
  return std::unique_ptr<DealerClient>(new DealerClient(
      std::move(options), std::move(endpoints), random_id, std::move(monitor), std::move(socket)));
}

DealerClient::DealerClient(ClientOptions options, std::vector<std::string> endpoints,
                           bool random_id, std::unique_ptr<zmq::socket_t> monitor,
                           std::unique_ptr<zmq::socket_t> socket)
    : options_(std::move(options)),
      endpoints_(std::move(endpoints)),
      random_id_(random_id),
      monitor_(std::move(monitor)),
      socket_(std::move(socket)) {}

DealerClient::~DealerClient() {
  if (socket_ && socket_->handle() != nullptr) {
    (void)zmq_socket_monitor(socket_->handle(), nullptr, 0);
  }
  socket_.reset();
  monitor_.reset();
}

core::Status DealerClient::WatchConnection() {
  bool dropped = false;
  bool handshaken = false;
  try {
    while (true) {
      // Each event is two frames: 6 bytes (uint16 event, uint32 value), then the endpoint.
      zmq::message_t head;
      if (!monitor_->recv(head, zmq::recv_flags::dontwait)) break;
      uint16_t event = 0;
      if (head.size() >= sizeof(event)) std::memcpy(&event, head.data(), sizeof(event));
      std::string endpoint;  // The second frame: the connection's endpoint.
      while (head.more()) {
        zmq::message_t rest;
        if (!monitor_->recv(rest, zmq::recv_flags::dontwait)) break;
        endpoint = rest.to_string();
        head.move(rest);
      }
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        handshaken = true;
        handshaken_.insert(endpoint);
        ++counters_.connects;
        change_.connected = true;
      } else if (event == ZMQ_EVENT_DISCONNECTED && handshaken_.erase(endpoint) > 0) {
        // A connection that worked dropped. (One that never completed its handshake does not
        // count, e.g. one a paused daemon's kernel accepted.)
        ++counters_.drops;
        if (handshaken_.empty()) {
          // No connection left; the daemon may still hold this one (half-open): renew the
          // routing id (below).
          dropped = true;
          ++losses_;
          change_.lost = true;
          change_.connected = false;  // Until a handshake completes again.
        }
        // Else another endpoint's connection works (a deposed leader that woke up long enough
        // to complete handshakes, then exited, while the next leader serves): it stays, with
        // the routing id the daemon knows, and the owner is not disturbed.
      }
    }
    if (handshaken && !dropped) {
      // libzmq posts the new connection's pipe to the socket before it emits the event, but a
      // send right after a receive may skip the socket's command queue (libzmq throttles it for
      // ~1 ms): reading ZMQ_EVENTS attaches the pipe, so a send right after `connected` goes
      // out on it instead of failing (ZMQ_IMMEDIATE: no pipe yet).
      (void)socket_->get(zmq::sockopt::events);
    }
  } catch (const zmq::error_t& e) {
    return core::InternalError("monitor of " + options_.endpoint + ": " + e.what());
  }
  if (!dropped) return core::Status::Ok();
  handshaken_.clear();
  if (!random_id_) return core::Status::Ok();
  // Reconnect every endpoint with a fresh id: a CURVE cruxd has no ROUTER hand-over and would
  // park a new connection presenting the id of one it has not yet seen drop.
  CRUX_ASSIGN_OR_RETURN(std::string id, RandomRoutingId());
  try {
    for (const std::string& ep : endpoints_) {
      try {
        socket_->disconnect(ep);
      } catch (const zmq::error_t&) {
        // Not connected (any more): nothing to undo.
      }
    }
    socket_->set(zmq::sockopt::routing_id, id);
    for (const std::string& ep : endpoints_) socket_->connect(ep);
  } catch (const zmq::error_t& e) {
    return core::InternalError("reconnect to " + options_.endpoint + ": " + e.what());
  }
  options_.routing_id = std::move(id);
  ++counters_.new_routing_ids;
  return core::Status::Ok();
}

core::Status DealerClient::Wait(std::chrono::milliseconds left) {
  zmq::pollitem_t items[2] = {{socket_->handle(), 0, ZMQ_POLLIN, 0},
                              {monitor_->handle(), 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, 2, std::max(left, std::chrono::milliseconds(1)));
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) return core::InternalError("poll " + options_.endpoint + ": " + e.what());
  }
  return core::Status::Ok();
}

void* DealerClient::raw_socket() const { return socket_->handle(); }
void* DealerClient::raw_monitor_socket() const { return monitor_->handle(); }

core::Result<ConnectionChange> DealerClient::TakeConnectionChange() {
  CRUX_RETURN_IF_ERROR(WatchConnection());
  const ConnectionChange c = change_;
  change_ = ConnectionChange{};
  return c;
}

core::Status DealerClient::Send(const v1::Envelope& msg) {
  CRUX_RETURN_IF_ERROR(WatchConnection());
  v1::Envelope copy;
  const v1::Envelope* to_send = &msg;
  if (msg.protocol_version() != kProtocolVersion) {
    copy = msg;
    SetVersion(&copy);
    to_send = &copy;
  }
  CRUX_ASSIGN_OR_RETURN(std::string frame, EncodeChecked(*to_send));
  try {
    if (!socket_->send(zmq::buffer(frame), zmq::send_flags::dontwait)) {
      return core::UnavailableError("send to " + options_.endpoint +
                                    ": not connected or send queue full");
    }
  } catch (const zmq::error_t& e) {
    return core::InternalError("send to " + options_.endpoint + ": " + e.what());
  }
  ++counters_.sent;
  return core::Status::Ok();
}

core::Result<std::optional<v1::Envelope>> DealerClient::ReadOne() {
  CRUX_RETURN_IF_ERROR(WatchConnection());
  while (true) {
    zmq::message_t frame;
    try {
      if (!socket_->recv(frame, zmq::recv_flags::dontwait)) return std::optional<v1::Envelope>();
      if (frame.more()) {
        // A multi-part message is not part of the protocol: drop it whole.
        zmq::message_t extra;
        while (socket_->recv(extra, zmq::recv_flags::dontwait) && extra.more()) {
        }
        ++counters_.received;
        ++counters_.bad_frames;
        continue;
      }
    } catch (const zmq::error_t& e) {
      return core::InternalError("receive from " + options_.endpoint + ": " + e.what());
    }
    ++counters_.received;
    auto decoded = Decode(std::string_view(static_cast<const char*>(frame.data()), frame.size()));
    if (!decoded.ok()) {
      ++counters_.bad_frames;
      continue;
    }
    return std::optional<v1::Envelope>(std::move(decoded).value());
  }
}

core::Result<std::optional<v1::Envelope>> DealerClient::TryReceive() {
  if (!pending_.empty()) {
    v1::Envelope msg = std::move(pending_.front());
    pending_.pop_front();
    return std::optional<v1::Envelope>(std::move(msg));
  }
  return ReadOne();
}

core::Result<std::optional<v1::Envelope>> DealerClient::Receive(core::Duration timeout) {
  const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout.nanos());
  while (true) {
    CRUX_ASSIGN_OR_RETURN(auto msg, TryReceive());
    if (msg.has_value()) return msg;
    const auto now = Clock::now();
    if (now >= deadline) return std::optional<v1::Envelope>();
    CRUX_RETURN_IF_ERROR(
        Wait(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
  }
}

core::Result<v1::Envelope> DealerClient::Call(const v1::Envelope& request, core::Duration timeout) {
  v1::Envelope req = request;
  SetVersion(&req);
  const uint64_t id = NextRequestId();
  req.set_request_id(id);
  CRUX_RETURN_IF_ERROR(Send(req));
  // Losing the connection after the send loses the request (and any reply): no use waiting.
  const uint64_t losses = losses_;
  const auto deadline = Clock::now() + std::chrono::nanoseconds(timeout.nanos());
  while (true) {
    CRUX_ASSIGN_OR_RETURN(auto msg, ReadOne());
    if (msg.has_value()) {
      if (msg->request_id() == id) return std::move(*msg);
      if (msg->request_id() == 0) {
        pending_.push_back(std::move(*msg));
      } else {
        ++counters_.stale_replies;
      }
      continue;
    }
    if (losses_ != losses) {
      return core::UnavailableError("connection to " + options_.endpoint +
                                    " lost while waiting for the reply");
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return core::UnavailableError("no reply from " + options_.endpoint + " within " +
                                    std::to_string(ToMillis(timeout)) + " ms");
    }
    CRUX_RETURN_IF_ERROR(
        Wait(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)));
  }
}

}  // namespace crux::protocol
