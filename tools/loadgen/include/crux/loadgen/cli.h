// crux-loadgen command line (CLI11). main.cc only installs signal handlers and calls RunCli.
//
//   crux-loadgen --endpoint tcp://127.0.0.1:7450 (--insecure | --server-key S.pub
//                --client-key C.key) --topology T.yaml [--jobs N] [--duration-s S]
//                [--report-interval-ms MS] [--heartbeat-ms MS] [--lease-ms MS] [--seed S]
//                [--benchmark] [--inflight K] [--job-prefix P] [--gpus-per-host G]
//                [--jitter-pct P] [--workers W] [--end-jobs] [--json] [--quiet]
//                [--hostd N] [--arrivals K] [--arrival-interval-ms MS]
//
// --hostd N plays N crux-hostd agents (one connection per host, the parts of every job on it;
// runner.h "Host-agent mode") instead of one connection per job; the report interval then
// defaults to 60 s (the most crux-hostd sends) and the first report goes out at registration.
// --arrivals K holds K jobs back and registers them during the run (runner.h "Arrivals").
// --duration-s bounds the whole run, registration included (0: until SIGINT/SIGTERM).
//
// Output: progress lines on stderr; at the end a summary on stdout (JSON with --json or
// --benchmark, a short human table otherwise), including how many jobs could not register and
// why (counted by the daemon's error code, with an example message). Everything the daemon
// said is escaped (core::EscapeForTerminal) on the terminal and \u-escaped in JSON. Exit
// codes: 0 ok, 1 nothing registered (the reasons on stderr) or a runtime failure, 2 bad input
// (message naming the flag or file on stderr).
#ifndef CRUX_LOADGEN_CLI_H_
#define CRUX_LOADGEN_CLI_H_

#include <atomic>
#include <ostream>

namespace crux::loadgen {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const std::atomic<bool>* stop);

}  // namespace crux::loadgen

#endif  // CRUX_LOADGEN_CLI_H_
