#include "crux/textio/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace crux::textio {
namespace {

namespace fs = std::filesystem;

// Closes a file descriptor at scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

core::Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) {
    const int err = errno;
    const std::string message = path + ": cannot open: " + Errno(err);
    if (err == ENOENT || err == ENOTDIR) return core::NotFoundError(message);
    return core::InvalidArgumentError(message);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return core::InvalidArgumentError(path + ": cannot open: " + Errno(errno));
  }
  if (S_ISDIR(st.st_mode))
    return core::InvalidArgumentError(path + ": not a regular file (a directory)");
  if (!S_ISREG(st.st_mode)) {
    return core::InvalidArgumentError(path + ": not a regular file (a FIFO, socket or device)");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return core::InvalidArgumentError(path + ": too large (" + std::to_string(st.st_size) +
                                      " bytes; at most " + std::to_string(max_bytes) + ")");
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return core::InvalidArgumentError(path + ": read error: " + Errno(errno));
    }
    if (n == 0) break;
    // The file may grow while it is read: the limit holds for what is read, too.
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return core::InvalidArgumentError(path + ": too large (more than " +
                                        std::to_string(max_bytes) + " bytes; at most " +
                                        std::to_string(max_bytes) + ")");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

core::Status WriteTextFile(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return core::InvalidArgumentError(path + ": cannot create: " + Errno(errno));
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return core::InvalidArgumentError(path + ": write error");
  return core::Status::Ok();
}

std::string DirectoryOf(const std::string& path) { return fs::path(path).parent_path().string(); }

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  const fs::path p(path);
  if (p.is_absolute() || base_dir.empty()) return p.lexically_normal().string();
  return (fs::path(base_dir) / p).lexically_normal().string();
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace crux::textio
