// cruxctl: the operator's command line for cruxd, over the daemon's local admin endpoint.
//
//   cruxctl [--socket PATH] [--timeout-ms MS] [--json] COMMAND ...
//     status                         daemon summary (epoch, jobs by state, re-plan time, ...)
//     jobs                           every job: I_j, k_j, P_j, rank, level, DSCP, epoch
//     job ID                         one job explained: placement, I_j = W_j / t_j, k_j, P_j,
//                                    rank, level and why, flows with paths and UDP source ports,
//                                    the jobs it contends with and on which links
//     links [--all]                  link health and committed load (default: only links that
//                                    carry load or are not up)
//     set-link LINK up|down|degraded [--capacity-gbps X]
//                                    LINK is "a->b" (one direction) or "a-b" (both); degraded
//                                    needs --capacity-gbps (> 0)
//     plan --dry-run                 re-plan now without applying: which jobs would change
//     switches                       switch agents: connected, desired/applied epoch, errors
//     keygen --out-dir DIR [--name N] [--force]
//                                    a CurveZMQ key pair: DIR/N.key (secret, 0600) and DIR/N.pub
//                                    (public, 0644); N defaults to "client"; no daemon needed
//
// Endpoint: --socket PATH, else $CRUX_ADMIN_SOCKET, else kDefaultAdminSocket (cruxd's default
// admin endpoint, ipc://state/admin.sock, relative to the working directory: what ./run.sh
// uses). PATH may be a plain file path or a full ZeroMQ endpoint ("ipc://...", "tcp://...").
//
// Output: human tables on `out` by default; --json prints one JSON document (keys documented in
// render.h) followed by a newline. Errors go to `err` as one line starting with "cruxctl: ";
// nothing is printed on `out` when a command fails. Nothing the daemon sends is trusted: human
// output and error lines are escaped with core::EscapeForTerminal, JSON is printed as ASCII
// (render.h), so no reply can drive the terminal or forge lines.
//
// Exit codes (stable, scripts may branch on them):
//   0 kExitOk           success
//   1 kExitDaemonError  the daemon answered with an error (unknown job/link -> NOT_FOUND,
//                       invalid argument, a quota -> RESOURCE_EXHAUSTED, UNAVAILABLE while it
//                       shuts down, ...; printed as the code name, DescribeErrorCode's words
//                       and the daemon's message) or an unexpected/malformed reply; also a
//                       failed keygen (file exists, directory not writable)
//   2 kExitUsage        bad command line (unknown command/flag, missing argument, bad number)
//   3 kExitUnreachable  no daemon at the endpoint, or no reply within --timeout-ms. For ipc://
//                       endpoints the socket file is checked first (ProbeAdminSocket), so a
//                       missing file, a stale socket left by a killed cruxd (ECONNREFUSED) and
//                       a permission problem are each reported at once, by name
//
// Never hangs: every request waits at most --timeout-ms (default 5000, range 1..600000).
//
// Thread-safety: RunCruxctl keeps no global state; concurrent calls with distinct transports
// are safe.
#ifndef CRUX_TOOLS_CRUXCTL_CRUXCTL_H_
#define CRUX_TOOLS_CRUXCTL_CRUXCTL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/v1/envelope.pb.h"

namespace crux::cruxctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDaemonError = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;

inline constexpr const char* kDefaultAdminSocket = "state/admin.sock";
inline constexpr const char* kAdminSocketEnv = "CRUX_ADMIN_SOCKET";
inline constexpr int64_t kDefaultTimeoutMs = 5000;

// One request/reply exchange with the daemon.
class AdminTransport {
 public:
  virtual ~AdminTransport() = default;
  // Sends `request` and returns the daemon's reply envelope (which may carry an Error body).
  // Must return within `timeout`. Errors (both surfaced as exit code 3): kUnavailable when the
  // daemon did not answer in time; kNotFound when it turned out while waiting that no daemon is
  // there (e.g. a stale socket; the message says why). Any other code for a broken reply
  // (surfaced as exit code 1).
  virtual core::Result<v1::Envelope> Call(const v1::Envelope& request, core::Duration timeout) = 0;
};

// Makes a transport for a ZeroMQ endpoint ("ipc:///run/cruxd/admin.sock"). Called at most once
// per run, only for commands that talk to the daemon.
using TransportFactory =
    std::function<core::Result<std::unique_ptr<AdminTransport>>(const std::string& endpoint)>;

// What RunCruxctl needs from its process environment.
struct CruxctlEnvironment {
  std::optional<std::string> admin_socket_env;  // $CRUX_ADMIN_SOCKET, if set.
  TransportFactory make_transport;              // Required for daemon commands.
};

// "state/admin.sock" -> "ipc://state/admin.sock"; endpoints with a scheme are returned as is.
std::string NormalizeEndpoint(const std::string& socket);

// The whole CLI (see the contract above). Returns the exit code.
int RunCruxctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
               const CruxctlEnvironment& env);

// The words cruxctl prints after an error code name ("a quota is reached" for
// ERROR_CODE_RESOURCE_EXHAUSTED); every code has some, unknown (newer) codes name their number.
std::string DescribeErrorCode(v1::ErrorCode code);

// Checks the unix socket at `path` (an ipc:// endpoint without the scheme; "@name" is an
// abstract socket) without speaking ZeroMQ: stat(2), then a non-blocking connect(2) that is
// closed at once. Ok when something accepts connections (or the accept queue is full: then the
// request's timeout decides). Otherwise kUnavailable with one of:
//   "no cruxd: PATH does not exist ..."                      (ENOENT / ENOTDIR)
//   "no cruxd: PATH is not a socket ..."
//   "cruxd is not running: PATH is a stale socket (ECONNREFUSED ...)"
//   "permission denied: user uid U (NAME) ... PATH ..."      (EACCES / EPERM; with the socket's
//                                                             owner and mode when known)
// Never blocks.
core::Status ProbeAdminSocket(const std::string& path);

// The production transport: a DEALER socket (crux::protocol::DealerClient) to `endpoint`.
// For ipc:// endpoints ProbeAdminSocket runs first (its error is returned as is), and a request
// that times out is probed again, so a daemon that died meanwhile is named as such.
core::Result<std::unique_ptr<AdminTransport>> MakeZmqAdminTransport(const std::string& endpoint);

}  // namespace crux::cruxctl

#endif  // CRUX_TOOLS_CRUXCTL_CRUXCTL_H_
