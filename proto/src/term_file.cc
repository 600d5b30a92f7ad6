#include "crux/protocol/term_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace crux::protocol {
namespace {

constexpr std::string_view kMagic = "crux-leader-term 1";
constexpr size_t kMaxBytes = 4096;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string DirOf(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? "." : dir.string();
}

core::Status Corrupt(const std::string& path, const std::string& why) {
  return core::FailedPreconditionError(
      path + ": " + why +
      " (the highest cruxd leader term this agent accepted; refusing to start rather than accept "
      "a deposed leader's push: check the file, and remove it only once the current leader is "
      "known)");
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

core::Status WriteAll(int fd, std::string_view text, const std::string& path) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return core::UnavailableError(Errno("write " + path));
    text.remove_prefix(static_cast<size_t>(n));
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<TermFile> TermFile::Open(std::string path, std::string owner) {
  if (path.empty()) return core::InvalidArgumentError("term file: empty path");
  if (owner.empty() || owner.find_first_of(" \n\r\t") != std::string::npos) {
    return core::InvalidArgumentError(path + ": owner '" + owner + "' must be one word");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return TermFile(std::move(path), std::move(owner), 0);
    }
    return Corrupt(path, Errno("cannot open"));
  }
  struct stat st {};
  std::string text;
  core::Status read = core::Status::Ok();
  if (::fstat(fd, &st) != 0) {
    read = Corrupt(path, Errno("cannot stat"));
  } else if (!S_ISREG(st.st_mode)) {
    read = Corrupt(path, "not a regular file");
  } else if (static_cast<uint64_t>(st.st_size) > kMaxBytes) {
    read = Corrupt(path, "too large (" + std::to_string(st.st_size) + " bytes)");
  } else {
    char buf[kMaxBytes];
    while (read.ok() && text.size() <= kMaxBytes) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) read = Corrupt(path, Errno("read error"));
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  CRUX_RETURN_IF_ERROR(read);
  std::vector<std::string_view> lines = Lines(text);
  if (lines.size() != 3 || lines[0] != kMagic) {
    return Corrupt(path, "not a term file (expected the lines '" + std::string(kMagic) +
                             "', 'owner <name>', 'term <n>')");
  }
  constexpr std::string_view kOwner = "owner ", kTerm = "term ";
  if (lines[1].substr(0, kOwner.size()) != kOwner || lines[2].substr(0, kTerm.size()) != kTerm) {
    return Corrupt(path, "not a term file (expected 'owner <name>' and 'term <n>' lines)");
  }
  const std::string_view file_owner = lines[1].substr(kOwner.size());
  if (file_owner != owner) {
    return Corrupt(path,
                   "holds the term of '" + std::string(file_owner) + "', not of '" + owner + "'");
  }
  const std::string_view digits = lines[2].substr(kTerm.size());
  uint64_t term = 0;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), term);
  if (digits.empty() || err != std::errc() || end != digits.data() + digits.size() || term == 0) {
    return Corrupt(path, "term '" + std::string(digits) + "' is not a positive integer");
  }
  return TermFile(std::move(path), std::move(owner), term);
}

core::Status TermFile::Raise(uint64_t term) {
  if (term <= term_) return core::Status::Ok();
  const std::string text =
      std::string(kMagic) + "\nowner " + owner_ + "\nterm " + std::to_string(term) + "\n";
  std::error_code ec;
  std::filesystem::create_directories(DirOf(path_), ec);
  if (ec) {
    return core::UnavailableError(path_ + ": cannot create its directory: " + ec.message());
  }
  std::string tmp = path_ + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return core::UnavailableError(Errno("create " + tmp));
  core::Status s = WriteAll(fd, text, tmp);
  if (s.ok() && ::fchmod(fd, 0644) != 0) s = core::UnavailableError(Errno("chmod " + tmp));
  if (s.ok() && ::fsync(fd) != 0) s = core::UnavailableError(Errno("fsync " + tmp));
  if (::close(fd) != 0 && s.ok()) s = core::UnavailableError(Errno("close " + tmp));
  if (s.ok() && ::rename(tmp.c_str(), path_.c_str()) != 0) {
    s = core::UnavailableError(Errno("rename " + tmp + " to " + path_));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable once the directory is: without this a power cut could bring the old
  // term back after the push was acknowledged.
  const int dfd = ::open(DirOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return core::UnavailableError(Errno("open the directory of " + path_));
  const bool synced = ::fsync(dfd) == 0;
  const std::string sync_error = synced ? "" : Errno("fsync the directory of " + path_);
  ::close(dfd);
  if (!synced) return core::UnavailableError(sync_error);
  term_ = term;
  return core::Status::Ok();
}

}  // namespace crux::protocol
