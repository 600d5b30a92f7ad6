// RedisProcess: one real redis-server standing in for a switch's SONiC databases (CONFIG_DB,
// APPL_DB) in a system test: on a unix socket in its own directory, with no persistence, so a
// restart comes back empty as a rebooted switch's would; and redis-cli against it. Killed on
// destruction. The programs are found through CRUX_REDIS_SERVER_BINARY and CRUX_REDIS_CLI_BINARY
// (tests/CMakeLists.txt; defaults below).
#ifndef CRUX_TESTS_SYSTEM_REDIS_PROCESS_H_
#define CRUX_TESTS_SYSTEM_REDIS_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "process_util.h"

#ifndef CRUX_REDIS_SERVER_BINARY
#define CRUX_REDIS_SERVER_BINARY "/usr/bin/redis-server"
#endif
#ifndef CRUX_REDIS_CLI_BINARY
#define CRUX_REDIS_CLI_BINARY "/usr/bin/redis-cli"
#endif

namespace crux::system_test {

class RedisProcess {
 public:
  // The server's socket, files and output go in `dir` (created by Start).
  explicit RedisProcess(fs::path dir) : dir_(std::move(dir)), socket_(dir_ / "redis.sock") {}

  // Starts redis-server (again after Kill: empty) and waits until it answers PING; false, with
  // the reason in *why, when it exits or does not answer within 10 s.
  bool Start(std::string* why = nullptr) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    process_ = std::make_unique<ChildProcess>();
    if (!process_->Start({CRUX_REDIS_SERVER_BINARY, "--port", "0", "--unixsocket", socket_.string(),
                          "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir",
                          dir_.string(), "--daemonize", "no"},
                         dir_ / "redis.out", dir_ / "redis.err", {}, {}, why)) {
      return false;
    }
    const bool up = WaitUntil(
        [&] {
          if (!process_->running()) return true;
          const CommandResult r = Cli(0, {"PING"});
          return r.exit_code == 0 && r.out.find("PONG") != std::string::npos;
        },
        std::chrono::seconds(10), std::chrono::milliseconds(50));
    if (up && process_->running()) return true;
    if (why != nullptr) *why = "redis-server did not come up: " + ReadFile(dir_ / "redis.err");
    return false;
  }

  // redis-cli -s <socket> -n <db> <args>, given 5 s.
  CommandResult Cli(int db, const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {CRUX_REDIS_CLI_BINARY, "-s", socket_.string(), "-n",
                                     std::to_string(db)};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_, std::chrono::seconds(5));
  }

  // Sends `sig` (SIGKILL: and reaps the server; SIGSTOP / SIGCONT stall and resume it).
  void Kill(int sig = SIGKILL) {
    if (process_) process_->Kill(sig);
  }
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  const fs::path& socket() const { return socket_; }

 private:
  fs::path dir_;
  fs::path socket_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace crux::system_test

#endif  // CRUX_TESTS_SYSTEM_REDIS_PROCESS_H_
