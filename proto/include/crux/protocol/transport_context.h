// TransportContext: the process-wide ZeroMQ context plus the ZAP (authentication) handler.
//
// One TransportContext per process is enough: it owns the zmq::context_t shared by every
// RouterServer and DealerClient created with it (inproc:// endpoints only connect within one
// context), and, once a CURVE server is started, a ZAP handler thread bound to
// inproc://zeromq.zap.01 that authorises CURVE peers per ZAP domain against a set of public
// keys. Servers without CURVE use no ZAP domain and are not affected.
//
// Lifetime: every RouterServer/DealerClient created with a context must be destroyed before
// the context (the destructor terminates the zmq context, which waits for open sockets).
// Thread-safety: all public methods are thread-safe.
#ifndef CRUX_PROTOCOL_TRANSPORT_CONTEXT_H_
#define CRUX_PROTOCOL_TRANSPORT_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/status.h"

namespace zmq {
class context_t;
}

namespace crux::protocol {

struct TransportContextOptions {
  int io_threads = 1;      // ZMQ_IO_THREADS (2-4 is plenty for 10k peers).
  int max_sockets = 1023;  // ZMQ_MAX_SOCKETS: raise for many DEALERs in one process (loadgen).
};

class TransportContext {
 public:
  TransportContext();
  explicit TransportContext(TransportContextOptions options);
  ~TransportContext();  // Stops the ZAP thread, then terminates the zmq context.
  TransportContext(const TransportContext&) = delete;
  TransportContext& operator=(const TransportContext&) = delete;

  zmq::context_t& context();

  // Starts the ZAP handler if it is not running (idempotent) and sets the public keys (Z85)
  // allowed in `domain`, replacing any previous set (so a SIGHUP can reload them). Peers of a
  // CURVE socket whose ZAP domain has no key set, or whose key is not in it, are refused.
  core::Status SetAuthorizedKeys(const std::string& domain, std::vector<std::string> keys_z85);

  // Number of ZAP requests refused / accepted for `domain` since start.
  uint64_t auth_refused(const std::string& domain) const;
  uint64_t auth_accepted(const std::string& domain) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_TRANSPORT_CONTEXT_H_
