// The Etcd backend cruxd runs: etcd's v3 gRPC-JSON gateway (`POST /v3/kv/txn`, `/v3/kv/range`,
// `/v3/lease/grant`, `/v3/lease/keepalive`, `/v3/lease/revoke`) over libcurl, one unary HTTP
// request per call (a keep-alive is one request that reads the first streamed answer, as
// Patroni's etcd3 backend does). Why this and not gRPC C++: docs/daemon.md "High availability".
//
// Endpoints: all "http://host:port" or all "https://host:port" (docs/daemon.md "etcd over
// TLS"). A call goes to the current endpoint; on a transport failure (refused, timeout, TLS
// handshake, HTTP 5xx, "no leader") it tries the next ones in turn, at most once each, and stays
// on the first that answers.
//
// TLS (https://; TLS 1.2 or later, HTTP/1.1 as over http://): the members' server certificates
// are verified against `ca_file` only (not the system store), host name or IP included;
// verification is never turned off. With `cert_file`
// and `key_file` the client presents that certificate (etcd's --client-cert-auth). TLS failures
// are kUnavailable (like an unreachable member) with "TLS: " and what to check in the message.
// ConnectGateway checks that the files can be read; libcurl reads them for each new connection
// (connections are kept, so a renewed certificate takes effect on the next reconnect).
//
// Authentication (`user`, `password`): etcd's own users. The first call authenticates
// (`/v3/auth/authenticate`) and every call sends the token; an expired or unknown token is
// renewed once per call. A refused password or a permission denied is kFailedPrecondition. The
// gateway cannot use a client certificate's Common Name as the user (etcd 3.4 refuses such a
// certificate on the gateway once auth is enabled): that refusal is kFailedPrecondition too,
// saying so.
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
  // TLS, for https:// endpoints (PEM files). ca_file is required there; cert_file and key_file
  // go together (a client certificate for etcd's --client-cert-auth) or not at all. (The `{}`
  // initialisers let callers write {endpoints, timeout}.)
  std::string ca_file{};
  std::string cert_file{};
  std::string key_file{};
  // etcd authentication ("" = none): the user and its password. https:// only.
  std::string user{};
  std::string password{};
};

// Errors (kInvalidArgument, naming the cruxd config key): no endpoint, one that is not
// http(s)://host:port, a mix of http:// and https://, TLS files with http://, https:// without
// ca_file, a certificate without its key (or the reverse), a user without https:// or without a
// password, a TLS file that cannot be read.
core::Result<std::unique_ptr<Etcd>> ConnectGateway(const GatewayOptions& options);

// Base64 (RFC 4648, with padding), as the gateway encodes bytes fields.
std::string Base64Encode(const std::string& bytes);
core::Result<std::string> Base64Decode(const std::string& text);

}  // namespace crux::daemon::ha

#endif  // CRUX_DAEMON_HA_ETCD_GATEWAY_H_
