// Helpers shared by the protocol tests.
#ifndef CRUX_TESTS_PROTO_TEST_UTIL_H_
#define CRUX_TESTS_PROTO_TEST_UTIL_H_

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

namespace crux::protocol::testing {

// A fresh directory under $TMPDIR (or /tmp), removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/crux_proto_XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    path_ = made != nullptr ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Polls `pred` until it holds or `timeout` passes; returns its last value. For conditions
// reached asynchronously by another thread (counters of a server's I/O thread).
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace crux::protocol::testing

#endif  // CRUX_TESTS_PROTO_TEST_UTIL_H_
