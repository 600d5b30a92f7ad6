// DealerClient: the client/agent/cruxctl side of the transport. One ZeroMQ DEALER socket
// connected to one daemon endpoint, used synchronously from one thread.
//
// Call() is request/reply: it assigns the next request_id, sends, and waits up to `timeout` for
// the reply carrying that id. Pushes (request_id 0: Assignment, SwitchQosState) that arrive
// meanwhile are queued for Receive(); late replies to earlier timed-out calls are discarded
// (counted in stale_replies). A reply may be an Error body: Call() returns it as a value (use
// StatusFromError in codec.h); Call() fails only for transport problems: kUnavailable on
// timeout ("no reply within N ms"), kOutOfRange for an oversize request, kInternal for zmq
// errors. Frames from the daemon that fail Decode are dropped and counted (bad_frames).
//
// Connection: ZeroMQ connects asynchronously and retries by itself (RECONNECT_IVL
// `reconnect_ivl` doubling up to `reconnect_ivl_max`); messages sent while disconnected wait in
// the socket (up to SNDHWM) and are dropped at Close (linger 0). Nothing blocks forever: every
// wait has a timeout and sends use ZMQ_DONTWAIT (a full pipe is kUnavailable).
//
// Reconnects take a fresh routing id (issue #31 item 1): a socket monitor watches the
// connections, and when one that had completed its handshake drops (ZMQ_EVENT_DISCONNECTED) and
// no other endpoint's connection works (see below), the client disconnects every endpoint, draws a
// new RandomRoutingId(), sets it (ZMQ_ROUTING_ID) and connects again. A CURVE cruxd runs its ROUTER
// without hand-over, so a reconnect with the old id while cruxd still holds the old, half-open
// connection would be parked by libzmq for good. The monitor is read by every call (Send,
// TryReceive, Receive, Call, TakeConnectionChange; Receive and Call also wake on it). Costs:
// messages still queued for the dropped connection are lost, and the daemon sees a new peer:
// whatever it bound to the old id (a job's connection, a switch's) must be re-bound by the layer
// above. A connection that never completed its handshake (refused, CURVE failure, accepted by a
// paused daemon's kernel) is left to ZeroMQ's retry and backoff, even when another endpoint's
// connection works; ZMQ_EVENT_CLOSED is not watched, since a connecter emits it on every failed
// attempt. An explicit ClientOptions::routing_id is kept across reconnects.
//
// Following the daemon (issue #31 item 6: HA clients follow a new leader at once): the owner
// learns of connection changes from TakeConnectionChange() instead of waiting for a timeout:
//  * lost: a connection that had completed its handshake dropped. A killed daemon's TCP close is
//    seen at once; a paused or unreachable one when the ZMTP heartbeat times out (with several
//    endpoints PING every 300 ms, dropped after 1 s without traffic). Everything sent before is
//    lost: no reply will come. A Call() waiting for a reply fails at once (kUnavailable,
//    "connection ... lost") instead of waiting out its timeout. Only the last working connection
//    counts: when another endpoint's connection still works (two daemons had the endpoint
//    bound: a deposed leader woke up long enough to complete handshakes, then exited) that one
//    stays, with the routing id, and nothing is reported (counters().drops counts it; what was
//    sent on the dropped connection is lost, as on any drop, and times out).
//  * connected: a connection completed its handshake (the first one, or after `lost` the next
//    daemon's: with several endpoints, the new leader's as soon as it binds) and has not dropped
//    since. The daemon may know nothing of this connection (after a renewal its routing id is
//    new), so the owner re-announces itself now - a registration, heartbeat or hello that
//    (re)binds what it speaks for - and retries on a short backoff, rather than at its next
//    periodic message.
// Event loops that poll raw_socket() also poll raw_monitor_socket() (readable when connection
// events wait) and call TakeConnectionChange() when it is - and after their last other call on
// the client before they wait again: any call reads the monitor, which consumes its signal.
//
// Thread-safety: NOT thread-safe (one owner thread). Distinct clients may live on distinct
// threads. The TransportContext must outlive the client.
#ifndef CRUX_PROTOCOL_CLIENT_H_
#define CRUX_PROTOCOL_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/protocol/curve.h"
#include "crux/protocol/transport_context.h"
#include "crux/v1/envelope.pb.h"

namespace zmq {
class socket_t;
}

namespace crux::protocol {

struct ClientOptions {
  // e.g. "tcp://10.0.0.1:7070", "ipc:///run/cruxd/admin.sock". A comma-separated list (HA:
  // every cruxd instance) connects to each; messages go to the one that accepted the
  // connection (ZMQ_IMMEDIATE; only the leader binds), see Connect() in client.cc. With several
  // endpoints the ZMTP heartbeat is kFollowHeartbeatIvl / kFollowHeartbeatTimeout and
  // reconnects are capped at kFollowReconnectIvlMax, whatever the fields below say.
  std::string endpoint;

  bool curve = false;
  std::string server_public_z85;  // Required when curve.
  CurveKeyPair client_keys;       // Required (with secret) when curve.

  // ZMQ_ROUTING_ID, 1-255 bytes, first byte not 0. Empty (the default and what every Crux peer
  // uses): a fresh RandomRoutingId() per client, and a new one after every dropped connection
  // (see the file comment; routing_id() is the current one). An explicit id is kept across
  // reconnects: against a CURVE cruxd (no ROUTER hand-over) its reconnect is parked while the
  // daemon still holds the old connection, so use explicit ids only in tests. Never derive one
  // from a public name (a job or switch name): a ROUTER with hand-over (non-CURVE servers) gives
  // an id to whoever connects with it, so a guessable id lets another peer receive this one's
  // pushes (docs/protocol.md "Identities and roles").
  std::string routing_id;
  core::Duration reconnect_ivl = core::Duration::Millis(100);
  core::Duration reconnect_ivl_max = core::Duration::Millis(10000);
  core::Duration heartbeat_ivl = core::Duration::Millis(5000);  // ZMTP PING; 0 = off.
  core::Duration heartbeat_timeout = core::Duration::Millis(15000);
  int sndhwm = 1000;
  int rcvhwm = 1000;
  int64_t max_msg_size = 4 * static_cast<int64_t>(1 << 20);  // ZMQ_MAXMSGSIZE.
};

// Several endpoints (HA): a lost leader is noticed within about a second - a killed one at once
// (TCP close), a paused or partitioned one when no traffic came for kFollowHeartbeatTimeout after
// a PING (sent every kFollowHeartbeatIvl) - and the next leader's endpoint is tried at least
// every kFollowReconnectIvlMax.
inline constexpr core::Duration kFollowHeartbeatIvl = core::Duration::Millis(300);
inline constexpr core::Duration kFollowHeartbeatTimeout = core::Duration::Millis(1000);
inline constexpr core::Duration kFollowReconnectIvlMax = core::Duration::Millis(1000);

struct ClientCounters {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t bad_frames = 0;
  uint64_t stale_replies = 0;
  uint64_t new_routing_ids = 0;  // Reconnects with a fresh routing id after a drop.
  uint64_t connects = 0;         // Connections that completed their handshake.
  uint64_t drops = 0;            // ... and that dropped afterwards (lost or not: see below).
};

// What happened to a DealerClient's connection since the previous TakeConnectionChange() (see
// "Following the daemon" in the file comment). Both may be true: lost, then connected again.
struct ConnectionChange {
  // The last handshaken connection dropped: nothing sent before it will be answered.
  bool lost = false;
  // A connection completed its handshake and is up now: re-announce (hello, registration,
  // heartbeat) at once.
  bool connected = false;
};

// 'r' followed by 32 lower-case hex digits of 16 bytes from getrandom(2): unguessable, printable.
// Errors: kUnavailable when the kernel's random source fails.
core::Result<std::string> RandomRoutingId();

// ZeroMQ sockets one DealerClient uses (its DEALER, the monitor's PAIR and libzmq's end of it):
// count them for ZMQ_MAX_SOCKETS (TransportContextOptions::max_sockets). Each has a mailbox
// eventfd; the PAIRs talk over inproc (no further descriptor).
inline constexpr int kSocketsPerClient = 3;

class DealerClient {
 public:
  // Creates the socket and starts connecting (returns before the connection exists).
  // Errors: kInvalidArgument for bad options (bad key, bad routing id, bad endpoint);
  // kUnavailable when the monitor cannot be set up (ZMQ_MAX_SOCKETS or descriptors exhausted).
  static core::Result<std::unique_ptr<DealerClient>> Connect(TransportContext& ctx,
                                                             ClientOptions options);
  ~DealerClient();
  DealerClient(const DealerClient&) = delete;
  DealerClient& operator=(const DealerClient&) = delete;

  // See the file comment. `request` is copied; its request_id and version are overwritten.
  core::Result<v1::Envelope> Call(const v1::Envelope& request, core::Duration timeout);

  // Sends one envelope without waiting (sets protocol_version; keeps the caller's request_id,
  // e.g. 0 for an Ack of a push, or an id from NextRequestId() to match the reply yourself).
  core::Status Send(const v1::Envelope& msg);

  // Next queued push, else waits up to `timeout` for any message. Returns nullopt on timeout.
  // Replies (request_id != 0) received here are returned too (for callers using Send with
  // their own ids).
  core::Result<std::optional<v1::Envelope>> Receive(core::Duration timeout);

  // Non-blocking: the next message already queued or readable on the socket, else nullopt.
  // For event loops that poll many clients' sockets together (see raw_socket()).
  core::Result<std::optional<v1::Envelope>> TryReceive();

  // A fresh request id (never 0).
  uint64_t NextRequestId() { return ++last_request_id_; }

  // The libzmq socket handle, for zmq_poll over many clients (ZMQ_POLLIN only; use
  // TryReceive() to read). Owned by the client.
  void* raw_socket() const;
  // The socket monitor's libzmq handle (a PAIR), for the same polls: ZMQ_POLLIN when connection
  // events wait (its ZMQ_FD signals like any ZeroMQ socket's). Read it only through
  // TakeConnectionChange() (or any other call, which reads it too). Owned by the client.
  void* raw_monitor_socket() const;

  // Reads the monitor's queued events, then returns and clears what happened since the previous
  // call (the changes seen by other calls meanwhile included). Errors: kInternal for zmq errors.
  core::Result<ConnectionChange> TakeConnectionChange();

  const ClientCounters& counters() const { return counters_; }
  const std::string& endpoint() const { return options_.endpoint; }
  // The routing id the socket connects with now (changes after a dropped connection).
  const std::string& routing_id() const { return options_.routing_id; }

 private:
  DealerClient(ClientOptions options, std::vector<std::string> endpoints, bool random_id,
               std::unique_ptr<zmq::socket_t> monitor, std::unique_ptr<zmq::socket_t> socket);
  // Reads the monitor's queued events; when a handshaken connection dropped, reconnects every
  // endpoint with a fresh routing id (random ids only). Errors: kInternal for zmq errors.
  core::Status WatchConnection();
  // Waits up to `left` for the socket or the monitor to become readable.
  core::Status Wait(std::chrono::milliseconds left);
  // Reads one frame without waiting; nullopt when nothing is readable. Bad frames are dropped.
  core::Result<std::optional<v1::Envelope>> ReadOne();

  ClientOptions options_;
  std::vector<std::string> endpoints_;
  bool random_id_;
  // PAIR socket reading `socket_`'s monitor events (the destructor stops the monitor first).
  std::unique_ptr<zmq::socket_t> monitor_;
  std::unique_ptr<zmq::socket_t> socket_;
  // Endpoints whose connection completed its handshake since the last renewal (as the monitor
  // names them).
  std::set<std::string> handshaken_;
  ConnectionChange change_;  // Not yet taken by TakeConnectionChange().
  uint64_t losses_ = 0;      // Times the last working connection was lost (`lost` reported).
  std::deque<v1::Envelope> pending_;
  uint64_t last_request_id_ = 0;
  ClientCounters counters_;
};

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_CLIENT_H_
