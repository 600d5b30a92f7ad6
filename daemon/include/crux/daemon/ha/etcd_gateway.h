// The Etcd backend cruxd runs: etcd's v3 gRPC-JSON gateway (`POST /v3/kv/txn`, `/v3/kv/range`,
// `/v3/lease/grant`, `/v3/lease/keepalive`, `/v3/lease/revoke`) over libcurl, one unary HTTP
// request per call (a keep-alive is one request that reads the first streamed answer, as
// Patroni's etcd3 backend does). Why this and not gRPC C++: docs/daemon.md "High availability".
//
// Endpoints: "http://host:port" (plain HTTP: the gateway has no TLS client-certificate CN auth;
// run cruxd beside a local member or a TLS proxy). A call goes to the current endpoint; on a
// transport failure (refused, timeout, HTTP 5xx, "no leader") it tries the next ones in turn, at
// most once each, and stays on the first that answers.
//
// Thread-safety: one thread at a time (one curl handle per object).
#ifndef CRUX_DAEMON_HA_ETCD_GATEWAY_H_
#define CRUX_DAEMON_HA_ETCD_GATEWAY_H_

#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/daemon/ha/etcd.h"

namespace crux::daemon::ha {

struct GatewayOptions {
  std::vector<std::string> endpoints;                     // >= 1, "http://127.0.0.1:2379".
  core::Duration timeout = core::Duration::Millis(1000);  // Per request and endpoint.
};

// Errors: kInvalidArgument for no endpoint or one that is not http://host:port.
core::Result<std::unique_ptr<Etcd>> ConnectGateway(const GatewayOptions& options);

// Base64 (RFC 4648, with padding), as the gateway encodes bytes fields.
std::string Base64Encode(const std::string& bytes);
core::Result<std::string> Base64Decode(const std::string& text);

}  // namespace crux::daemon::ha

#endif  // CRUX_DAEMON_HA_ETCD_GATEWAY_H_
