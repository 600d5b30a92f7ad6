// RouterServer: the daemon side of the transport. One ZeroMQ ROUTER socket bound to one
// endpoint (tcp://, ipc:// or inproc://), served by its own I/O thread.
//
// Receiving: the I/O thread polls the ROUTER and a wake-up eventfd. Each inbound frame is
// decoded (codec.h) and, when `validate` is on, checked (validate.h). A frame that fails is
// answered by the server itself with an Error envelope (MALFORMED, TOO_LARGE,
// UNSUPPORTED_VERSION, INVALID_ARGUMENT; the request_id is echoed when it could be parsed),
// counted, and never delivered. Everything else goes to the handler as an Inbound.
// Frames larger than `max_msg_size` (ZMQ_MAXMSGSIZE, default 4 x kMaxFrameBytes) make libzmq
// drop that peer's connection without a reply; frames between kMaxFrameBytes and that get a
// TOO_LARGE error.
//
// Sending: Send() is thread-safe. It encodes (refusing frames over kMaxFrameBytes), queues, and
// wakes the I/O thread, which sends with ZMQ_DONTWAIT. With ROUTER_MANDATORY (default on) a send
// to an unknown or full peer (EHOSTUNREACH / EAGAIN) is dropped and counted in send_failed.
//
// Security: with `curve` on, the socket is a CURVE server with `server_keys`, ZAP domain
// `zap_domain`, and the authorised keys (`authorized_keys` plus every *.pub in
// `authorized_keys_dir`) are installed in the TransportContext's ZAP handler before binding.
// Inbound.user_id is then the peer's public key (Z85). libzmq runs no security handshake on
// inproc:// connections: CURVE protects tcp:// and ipc:// only (inproc peers are in-process).
// Without curve the socket accepts anyone (callers log a warning for non-local endpoints) and
// user_id is "".
//
// Identities (curve only, `bind_identities`): a routing id belongs to the CURVE key that first
// sent a message with it. A later message with the same routing id from another key (a peer that
// took the id over through ROUTER_HANDOVER) is answered PERMISSION_DENIED, counted in
// refused_identity and not delivered. At most `max_bound_identities` bindings are kept (the
// oldest is forgotten first). Crux peers draw unguessable random routing ids (client.h), so a
// takeover needs the victim's id, which only it and the daemon know. ROUTER_HANDOVER is off on
// such servers (whatever `router_handover` says): a second connection presenting a routing id that
// a live connection holds is parked by libzmq (never read, never answered) until it closes, so a
// thief cannot take a live victim's replies. A client that reconnects while the daemon still holds
// its old, half-open connection is parked the same way; DealerClient therefore reconnects with a
// fresh routing id after every drop (client.h, docs/protocol.md "Identities and roles").
//
// Requests: every request must carry a non-zero request_id (0 marks pushes); the only message a
// peer may send with request_id 0 is an Ack (or AckBatch) answering a push. Others are answered
// INVALID_ARGUMENT (counted in invalid). Error replies echo the request_id whenever the frame
// parses as an Envelope, even when it is refused (MALFORMED body, wrong version, invalid field).
//
// Refused handshakes are watched with a socket monitor and counted by reason: a security
// mechanism mismatch seen by this side (refused_mechanism: a plain peer on a CURVE socket or the
// reverse), and every other failed handshake (refused_handshake): CURVE handshakes that fail
// cryptographically (a client using the wrong server key), other protocol errors, and on CURVE
// sockets peers that hang up mid-handshake - which is how a plain client shows up when it
// notices the mismatch before this side does, so a plain client counts as one or the other.
// ZAP refusals of unauthorised keys are auth_refused.
//
// Lifetime: Stop() (or the destructor) stops the I/O thread, then closes the socket (linger 0).
// The handler is never called after Stop() returns. The TransportContext must outlive the server.
#ifndef CRUX_PROTOCOL_SERVER_H_
#define CRUX_PROTOCOL_SERVER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/protocol/codec.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"
#include "crux/v1/envelope.pb.h"

namespace crux::protocol {

struct ServerOptions {
  std::string
      endpoint;  // e.g. "tcp://0.0.0.0:7070", "tcp://127.0.0.1:*", "ipc:///run/cruxd/admin.sock".

  bool curve = false;
  CurveKeyPair server_keys;                  // Required (with secret) when curve.
  std::vector<std::string> authorized_keys;  // Z85 public keys allowed (curve only).
  std::string authorized_keys_dir;           // Optional: every *.pub in it is also allowed.
  std::string zap_domain = "crux";           // Distinct per CURVE server in one context.

  bool validate = true;          // Run Validate() before delivery.
  bool router_mandatory = true;  // ZMQ_ROUTER_MANDATORY.
  bool router_handover = true;   // ZMQ_ROUTER_HANDOVER; forced off with curve + bind_identities.
  int64_t max_msg_size = 4 * static_cast<int64_t>(kMaxFrameBytes);  // ZMQ_MAXMSGSIZE, -1 = none.
  int sndhwm = 1000;   // ZMQ_SNDHWM (messages per peer).
  int rcvhwm = 1000;   // ZMQ_RCVHWM.
  int backlog = 4096;  // ZMQ_BACKLOG: pending connections (capped by net.core.somaxconn).
  // ZMTP PING; 0 = off (default). Off because libzmq 4.3.x keeps every connection's heartbeat
  // timers in one std::multimap per I/O thread and cancels them with a linear scan
  // (poller_base_t::cancel_timer, "O(n)... rarely used"): each PING/next-message cycle costs
  // O(connections), and with 10,000 clients the I/O thread spent ~35% of its time walking that
  // map (perf, std::_Rb_tree_increment). Dead peers are found by TCP keepalive below instead
  // (kernel timers), and jobs by their application-level lease.
  core::Duration heartbeat_ivl = core::Duration::Zero();
  core::Duration heartbeat_timeout = core::Duration::Millis(15000);  // No traffic -> close.
  // TCP keepalive (ZMQ_TCP_KEEPALIVE*): idle time before the first probe; 0 = system default
  // (keepalive off). Probes every 10 s, 3 unanswered -> the connection is closed.
  core::Duration tcp_keepalive_idle = core::Duration::Millis(60000);
  bool bind_identities = true;            // See "Identities" above (curve only).
  size_t max_bound_identities = 1 << 20;  // Routing id -> key bindings kept.
  size_t max_send_queue = 1000000;        // Send() fails with kUnavailable beyond this backlog.
  size_t max_batch = 256;                 // Frames handled per poll wake-up before sends run.
};

// One delivered message.
struct Inbound {
  std::string peer;     // ROUTER routing id of the sender (opaque bytes); pass to Send().
  std::string user_id;  // CURVE: the peer's public key (Z85); otherwise "".
  v1::Envelope msg;     // Decoded (and validated when ServerOptions::validate).
};

// Upper bounds (ms) of the send-queue wait buckets (ServerCounters::send_queue_buckets; one
// more bucket holds the waits above the last bound).
inline constexpr std::array<double, 10> kSendQueueBoundsMs = {0.1, 0.5, 1,  2,   5,
                                                              10,  20,  50, 100, 500};

struct ServerCounters {
  uint64_t received = 0;             // Frames received (valid or not).
  uint64_t delivered = 0;            // Handed to the handler.
  uint64_t sent = 0;                 // Frames sent (replies, pushes, errors).
  uint64_t malformed = 0;            // MALFORMED answered.
  uint64_t too_large = 0;            // TOO_LARGE answered.
  uint64_t unsupported_version = 0;  // UNSUPPORTED_VERSION answered.
  uint64_t invalid = 0;              // INVALID_ARGUMENT answered by validation.
  uint64_t auth_refused = 0;         // ZAP refusals in this server's domain (curve only).
  uint64_t refused_identity = 0;     // Routing id bound to another CURVE key (curve only).
  uint64_t refused_mechanism = 0;    // Handshake: security mechanism mismatch (plain vs CURVE).
  uint64_t refused_handshake = 0;    // Handshake: cryptographic / other protocol failure.
  uint64_t send_failed = 0;          // Dropped: unknown peer / HWM / encode failure.
  uint64_t queued = 0;               // Current outbound backlog.
  // How long frames waited in this server's send queue: from Send() (or SendEncoded()) to the
  // I/O thread handing them to libzmq (not counting libzmq's own queue and the network). Frames
  // per bucket (bucket i: waits <= kSendQueueBoundsMs[i] and above the bound before it; the last
  // bucket: above every bound), and the sum of every wait in ns. Answers to refused frames,
  // which the I/O thread sends itself, are not counted.
  std::array<uint64_t, kSendQueueBoundsMs.size() + 1> send_queue_buckets{};
  uint64_t send_queue_wait_ns = 0;
};

class RouterServer {
 public:
  // Called on the I/O thread for every delivered message, in arrival order. It must not block
  // for long (it delays every peer); hand work to another thread and reply with Send().
  using Handler = std::function<void(Inbound)>;
  // Called on the I/O thread once per poll wake-up with the messages delivered in it (in arrival
  // order, at most ServerOptions::max_batch, never empty). Handing a batch to another thread
  // costs one hand-off instead of one per message. If it throws, every message of the batch is
  // answered INTERNAL.
  using BatchHandler = std::function<void(std::vector<Inbound>)>;

  // Creates the socket, applies the options, installs CURVE keys, binds and starts the I/O
  // thread. Errors: kInvalidArgument for bad options (missing keys, bad endpoint), kUnavailable
  // when the bind fails (address in use, permission), both naming the endpoint.
  static core::Result<std::unique_ptr<RouterServer>> Start(TransportContext& ctx,
                                                           ServerOptions options, Handler handler);
  // The same, delivering batches (BatchHandler).
  static core::Result<std::unique_ptr<RouterServer>> StartBatched(TransportContext& ctx,
                                                                  ServerOptions options,
                                                                  BatchHandler handler);

  ~RouterServer();
  RouterServer(const RouterServer&) = delete;
  RouterServer& operator=(const RouterServer&) = delete;

  // Idempotent. Pending sends are discarded.
  void Stop();

  // Thread-safe. Sets protocol_version and queues `msg` for `peer`. Errors: kOutOfRange if the
  // frame would exceed kMaxFrameBytes, kUnavailable when stopped or the queue is full. A
  // successful return means queued, not delivered (see send_failed).
  core::Status Send(const std::string& peer, const v1::Envelope& msg);
  // Same, for an already encoded frame (e.g. one Assignment encoded once, sent to many).
  core::Status SendEncoded(const std::string& peer, std::string frame);

  // Thread-safe snapshot.
  ServerCounters counters() const;

  // The bound endpoint as libzmq reports it (ZMQ_LAST_ENDPOINT): with "tcp://127.0.0.1:*" this
  // carries the chosen port.
  const std::string& endpoint() const;

 private:
  class Impl;
  explicit RouterServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_SERVER_H_
