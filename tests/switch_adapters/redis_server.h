// A real redis-server for the switch-adapter tests: started in a private temporary directory on a
// unix socket (and optionally a loopback TCP port), with an append-only file fsync'ed on every
// write so that a SIGKILL + restart keeps exactly what Redis acknowledged. Waited for with PING,
// killed and the directory removed at destruction.
#ifndef CRUX_TESTS_SWITCH_ADAPTERS_REDIS_SERVER_H_
#define CRUX_TESTS_SWITCH_ADAPTERS_REDIS_SERVER_H_

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace crux::switch_adapters::testing {

class RedisServer {
 public:
  // tcp_port 0: unix socket only.
  explicit RedisServer(int tcp_port = 0) : tcp_port_(tcp_port) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "crux-redis-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    socket_ = dir_ + "/r.sock";
    Start();
  }
  ~RedisServer() {
    Kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& socket() const { return socket_; }
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }

  // Starts (or restarts after Kill) the server on the same socket and data directory.
  void Start() {
    std::vector<std::string> args = {REDIS_SERVER_BINARY,
                                     "--port",
                                     std::to_string(tcp_port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--unixsocket",
                                     socket_,
                                     "--unixsocketperm",
                                     "700",
                                     "--dir",
                                     dir_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "yes",
                                     "--appendfsync",
                                     "always",
                                     "--databases",
                                     "16",
                                     "--logfile",
                                     dir_ + "/redis.log"};
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Ping()) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("redis-server exited at start; see " + dir_ + "/redis.log");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("redis-server did not answer PING within 10 s");
  }

  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void Stop() { ::kill(pid_, SIGSTOP); }
  void Continue() { ::kill(pid_, SIGCONT); }

  // Runs one command in db 4 (CONFIG_DB) on a fresh connection; returns the reply flattened to
  // strings (arrays element by element; nil as "(nil)"). Throws on connection errors.
  std::vector<std::string> Cmd(const std::vector<std::string>& args, int db = 4) const {
    redisContext* c = redisConnectUnix(socket_.c_str());
    if (c == nullptr || c->err) {
      if (c) redisFree(c);
      throw std::runtime_error("test client: cannot connect to " + socket_);
    }
    std::unique_ptr<redisContext, void (*)(redisContext*)> guard(c, redisFree);
    Exec(c, {"SELECT", std::to_string(db)});
    return Exec(c, args);
  }

  std::map<std::string, std::string> HGetAll(const std::string& key) const {
    std::vector<std::string> v = Cmd({"HGETALL", key});
    std::map<std::string, std::string> out;
    for (size_t i = 0; i + 1 < v.size(); i += 2) out[v[i]] = v[i + 1];
    return out;
  }

  // ---- SONiC port state and counters (issue #14): what portsorch, the flex counters and the
  // minigraph write, so tests inject faults on a real server (failures-ha.md A6 keys).
  // APPL_DB (0) PORT_TABLE:<port> oper_status ("up" / "down").
  void SetPortOperStatus(const std::string& port, const std::string& status) const {
    Cmd({"HSET", "PORT_TABLE:" + port, "oper_status", status, "admin_status", "up"}, 0);
  }
  // COUNTERS_DB (2) COUNTERS_PORT_NAME_MAP <port> -> <oid>, COUNTERS_QUEUE_NAME_MAP
  // <port>:<queue> -> <oid>.
  void MapPortCounters(const std::string& port, const std::string& oid) const {
    Cmd({"HSET", "COUNTERS_PORT_NAME_MAP", port, oid}, 2);
  }
  void MapQueueCounters(const std::string& port, int queue, const std::string& oid) const {
    Cmd({"HSET", "COUNTERS_QUEUE_NAME_MAP", port + ":" + std::to_string(queue), oid}, 2);
  }
  // COUNTERS_DB (2) COUNTERS:<oid> fields (SAI_PORT_STAT_IF_IN_ERRORS, ...), as decimal strings.
  void SetCounters(const std::string& oid, const std::map<std::string, uint64_t>& fields) const {
    std::vector<std::string> args = {"HSET", "COUNTERS:" + oid};
    for (const auto& [k, v] : fields) {
      args.push_back(k);
      args.push_back(std::to_string(v));
    }
    Cmd(args, 2);
  }
  // CONFIG_DB (4) DEVICE_NEIGHBOR|<port> name.
  void SetNeighbor(const std::string& port, const std::string& name) const {
    Cmd({"HSET", "DEVICE_NEIGHBOR|" + port, "name", name, "port", "Ethernet0"}, 4);
  }

  // Calls of `command` since the last CONFIG RESETSTAT (INFO commandstats).
  long Calls(const std::string& command) const {
    std::vector<std::string> v = Cmd({"INFO", "commandstats"});
    const std::string needle = "cmdstat_" + command + ":calls=";
    size_t pos = v.empty() ? std::string::npos : v[0].find(needle);
    if (pos == std::string::npos) return 0;
    return std::strtol(v[0].c_str() + pos + needle.size(), nullptr, 10);
  }

 private:
  static std::vector<std::string> Exec(redisContext* c, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r == nullptr) throw std::runtime_error("test client: command failed");
    std::vector<std::string> out;
    auto one = [](const redisReply* e) -> std::string {
      if (e->type == REDIS_REPLY_NIL) return "(nil)";
      if (e->type == REDIS_REPLY_INTEGER) return std::to_string(e->integer);
      if (e->type == REDIS_REPLY_ERROR) return "ERR:" + std::string(e->str, e->len);
      return std::string(e->str, e->len);
    };
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; ++i) out.push_back(one(r->element[i]));
    } else {
      out.push_back(one(r));
    }
    freeReplyObject(r);
    return out;
  }

  bool Ping() const {
    timeval tv{0, 200000};
    redisContext* c = redisConnectUnixWithTimeout(socket_.c_str(), tv);
    if (c == nullptr) return false;
    bool ok = false;
    if (!c->err) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r) freeReplyObject(r);
    }
    redisFree(c);
    return ok;
  }

  int tcp_port_;
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace crux::switch_adapters::testing

#endif  // CRUX_TESTS_SWITCH_ADAPTERS_REDIS_SERVER_H_
