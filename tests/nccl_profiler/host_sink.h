// HostSink: a stand-in crux-hostd for the plugin and shim tests: listens on a host-protocol
// socket and collects every decoded message with the sender's pid. Polled from the test thread
// (no thread of its own); every wait has a deadline.
#ifndef CRUX_TESTS_NCCL_PROFILER_HOST_SINK_H_
#define CRUX_TESTS_NCCL_PROFILER_HOST_SINK_H_

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crux/hostd/host_protocol.h"
#include "crux/hostd/local_socket.h"

namespace crux::testing_hostd {

struct Received {
  pid_t pid = -1;
  hostd::Message message;
};

class HostSink {
 public:
  explicit HostSink(const std::string& path) {
    auto l = hostd::LocalListener::Listen(path);
    if (l.ok()) listener_ = std::move(*l);
    status_ = l.status();
  }
  const core::Status& status() const { return status_; }

  // Accepts and reads whatever is there.
  void Poll() {
    for (;;) {
      auto c = listener_.Accept();
      if (!c.ok() || !c->has_value()) break;
      conns_.push_back(std::move(**c));
    }
    for (auto& c : conns_) {
      while (c.is_open()) {
        auto r = c.Receive();
        if (!r.ok() || !r->has_value()) break;
        auto m = hostd::Decode(**r);
        if (m.ok()) {
          received_.push_back({c.peer().pid, std::move(*m)});
        } else {
          errors_.push_back(m.status().message());
        }
      }
    }
  }

  // Sends `m` to every open connection of process `pid`.
  void SendTo(pid_t pid, const hostd::Message& m) {
    for (auto& c : conns_) {
      if (c.is_open() && c.peer().pid == pid) (void)c.Send(hostd::Encode(m));
    }
  }

  // Polls until `pred()` or the deadline.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      Poll();
      if (pred()) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  template <typename T>
  std::vector<std::pair<pid_t, T>> All() const {
    std::vector<std::pair<pid_t, T>> out;
    for (const auto& r : received_) {
      if (const T* m = std::get_if<T>(&r.message)) out.emplace_back(r.pid, *m);
    }
    return out;
  }

  const std::vector<std::string>& errors() const { return errors_; }

  // Whether process `pid` has an open connection.
  bool Connected(pid_t pid) const {
    for (const auto& c : conns_) {
      if (c.is_open() && c.peer().pid == pid) return true;
    }
    return false;
  }
  // Forgets the messages received so far (connections stay).
  void Clear() {
    received_.clear();
    errors_.clear();
  }

 private:
  hostd::LocalListener listener_;
  core::Status status_;
  std::vector<hostd::LocalConnection> conns_;
  std::vector<Received> received_;
  std::vector<std::string> errors_;
};

}  // namespace crux::testing_hostd

#endif  // CRUX_TESTS_NCCL_PROFILER_HOST_SINK_H_
