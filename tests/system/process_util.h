// Helpers for the real-process system tests: temp dirs, free ports, spawning binaries with
// fork/exec (output to files), bounded waits, killing children.
//
// Everything waits with a deadline; nothing blocks forever. Children are killed with SIGKILL by
// ~ChildProcess, so a failing test never leaves a daemon behind.
//
// Thread-safety: test-thread only.
#ifndef CRUX_TESTS_SYSTEM_PROCESS_UTIL_H_
#define CRUX_TESTS_SYSTEM_PROCESS_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace crux::system_test {

namespace fs = std::filesystem;

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "crux_system_test") {
    std::string templ = (fs::temp_directory_path() / (prefix + "_XXXXXX")).string();
    if (mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back, close).
inline int FreeTcpPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
  }
  close(fd);
  return port;
}

// Polls `done` every `step` until it returns true or `timeout` passes. Returns its last value.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds step = std::chrono::milliseconds(50)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(step);
  }
}

// A child process whose stdout and stderr go to files. Killed (SIGKILL) and reaped on
// destruction unless it already exited.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Kill(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (a path) with `argv`, in `cwd` (empty: inherit), with `extra_env`
  // ("NAME=value") added to the environment. Returns false (and sets *error) when fork/exec
  // could not even start; an exec failure shows up as exit code 127.
  bool Start(const std::vector<std::string>& argv, const fs::path& stdout_path,
             const fs::path& stderr_path, const fs::path& cwd = {},
             const std::vector<std::string>& extra_env = {}, std::string* error = nullptr) {
    stdout_path_ = stdout_path;
    stderr_path_ = stderr_path;
    // Everything the child needs is prepared before fork (only async-signal-safe calls after).
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
    for (const std::string& e : extra_env) env_storage.push_back(e);
    std::vector<char*> envp;
    for (std::string& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string out = stdout_path.string();
    const std::string err = stderr_path.string();
    const std::string dir = cwd.string();

    const pid_t pid = fork();
    if (pid < 0) {
      if (error != nullptr) *error = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      const int out_fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      const int err_fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (out_fd < 0 || err_fd < 0 || null_fd < 0) _exit(126);
      dup2(null_fd, STDIN_FILENO);
      dup2(out_fd, STDOUT_FILENO);
      dup2(err_fd, STDERR_FILENO);
      if (!dir.empty() && chdir(dir.c_str()) != 0) _exit(126);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    pid_ = pid;
    exit_code_.reset();
    return true;
  }

  pid_t pid() const { return pid_; }
  bool running() {
    Poll();
    return pid_ > 0 && !exit_code_.has_value();
  }

  // Exit code (128 + signal for a signalled child) once it has exited.
  std::optional<int> exit_code() {
    Poll();
    return exit_code_;
  }

  // Waits up to `timeout` for the child to exit; returns its exit code, or nullopt (still
  // running).
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    WaitUntil([this] { return !running(); }, timeout, std::chrono::milliseconds(10));
    return exit_code_;
  }

  // Sends `sig` and, for SIGKILL, reaps the child.
  void Kill(int sig) {
    if (pid_ <= 0 || exit_code_.has_value()) return;
    ::kill(pid_, sig);
    if (sig == SIGKILL) {
      int status = 0;
      if (waitpid(pid_, &status, 0) == pid_) Record(status);
    }
  }

  std::string Stdout() const { return ReadFile(stdout_path_); }
  std::string Stderr() const { return ReadFile(stderr_path_); }

 private:
  void Poll() {
    if (pid_ <= 0 || exit_code_.has_value()) return;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) Record(status);
  }
  void Record(int status) {
    if (WIFEXITED(status)) {
      exit_code_ = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      exit_code_ = 128 + WTERMSIG(status);
    } else {
      exit_code_ = -1;
    }
  }

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  fs::path stdout_path_;
  fs::path stderr_path_;
};

struct CommandResult {
  int exit_code = -1;  // -1: timed out (the process was killed).
  std::string out;
  std::string err;
};

// Runs a command to completion (at most `timeout`, then SIGKILL) and captures its output.
inline CommandResult RunCommand(const std::vector<std::string>& argv, const fs::path& scratch_dir,
                                std::chrono::milliseconds timeout,
                                const std::vector<std::string>& extra_env = {},
                                const fs::path& cwd = {}) {
  static int counter = 0;
  const std::string tag = std::to_string(getpid()) + "_" + std::to_string(++counter);
  const fs::path out = scratch_dir / ("cmd_" + tag + ".out");
  const fs::path err = scratch_dir / ("cmd_" + tag + ".err");
  CommandResult result;
  ChildProcess child;
  std::string error;
  if (!child.Start(argv, out, err, cwd, extra_env, &error)) {
    result.err = error;
    return result;
  }
  const std::optional<int> code = child.Wait(timeout);
  if (!code.has_value()) child.Kill(SIGKILL);
  result.exit_code = code.value_or(-1);
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  return result;
}

// Peak resident set (VmHWM) of a live process in KiB, or -1.
inline long VmHwmKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

}  // namespace crux::system_test

#endif  // CRUX_TESTS_SYSTEM_PROCESS_UTIL_H_
