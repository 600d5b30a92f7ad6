#include "crux/switch_adapters/file_adapter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "crux/switch_adapters/state_json.h"

namespace crux::switch_adapters {
namespace {

using core::Result;
using core::Status;
using core::SwitchQosState;

Status Errno(const std::string& what) {
  return core::UnavailableError(what + ": " + std::strerror(errno));
}

bool ValidStem(const std::string& s) {
  if (s.empty() || s[0] == '.') return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Writes all of `data` to `fd`.
Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write " + path);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<FileAdapter>> FileAdapter::Create(FileOptions options) {
  if (options.directory.empty()) return core::InvalidArgumentError("file.directory: required");
  struct stat st {};
  if (::stat(options.directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return core::InvalidArgumentError("file.directory: '" + options.directory +
                                      "' is not an existing directory");
  }
  if (!ValidStem(options.switch_name)) {
    return core::InvalidArgumentError("file.switch_name: '" + options.switch_name +
                                      "' must match [A-Za-z0-9._-]+ and not start with '.'");
  }
  return std::unique_ptr<FileAdapter>(new FileAdapter(std::move(options)));
}

FileAdapter::FileAdapter(FileOptions options)
    : options_(std::move(options)),
      path_(options_.directory + "/" + options_.switch_name + ".json") {}

Capabilities FileAdapter::capabilities() const {
  Capabilities c;
  c.backend = "file";
  c.pfc = true;
  c.transactional = true;  // rename(2) replaces the file atomically.
  return c;
}

Result<ApplyResult> FileAdapter::Apply(const SwitchQosState& desired) {
  CRUX_RETURN_IF_ERROR(core::ValidateSwitchQosState(desired));
  if (desired.switch_name != options_.switch_name) {
    return core::InvalidArgumentError("switch_name: state is for '" + desired.switch_name +
                                      "', this adapter writes '" + options_.switch_name + "'");
  }
  ApplyResult result;
  Result<SwitchQosState> current = ReadBack();
  if (current.ok() && current->SameDeviceState(desired) && current->jobs == desired.jobs) {
    return result;  // Already there: no write.
  }
  const std::string text = StateToJson(desired);
  std::string tmp = options_.directory + "/." + options_.switch_name + ".json.tmp.XXXXXX";
  std::vector<char> buf(tmp.begin(), tmp.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0) return Errno("create temporary in " + options_.directory);
  tmp.assign(buf.data());
  Status s = WriteAll(fd, text, tmp);
  if (s.ok() && ::fchmod(fd, 0644) != 0) s = Errno("chmod " + tmp);
  if (s.ok() && ::fsync(fd) != 0) s = Errno("fsync " + tmp);
  if (::close(fd) != 0 && s.ok()) s = Errno("close " + tmp);
  if (s.ok() && ::rename(tmp.c_str(), path_.c_str()) != 0) s = Errno("rename to " + path_);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  int dfd = ::open(options_.directory.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // Best effort: makes the rename durable.
    ::close(dfd);
  }
  result.writes = 1;
  result.operations.push_back("write " + path_);
  return result;
}

Result<SwitchQosState> FileAdapter::ReadBack() {
  std::ifstream in(path_);
  if (!in) return core::NotFoundError(path_ + ": no state written yet");
  std::ostringstream ss;
  ss << in.rdbuf();
  Result<SwitchQosState> s = StateFromJson(ss.str(), path_);
  if (!s.ok()) return core::FailedPreconditionError(s.status().message());
  return s;
}

Status FileAdapter::Health() {
  if (::access(options_.directory.c_str(), W_OK | X_OK) != 0) {
    return Errno("directory " + options_.directory + " not writable");
  }
  return Status::Ok();
}

Backend FileBackend() {
  Backend b;
  b.name = "file";
  b.summary = "atomic JSON file <state-dir>/<switch>.json per switch (GitOps)";
  b.params = {{"state-dir", "Directory of the JSON state files; required", false, ""}};
  b.create = [](const BackendConfig& c) -> Result<std::unique_ptr<SwitchAdapter>> {
    FileOptions o;
    o.directory = ParamString(c, "state-dir");
    o.switch_name = c.switch_name;
    if (o.directory.empty()) {
      return core::InvalidArgumentError("--state-dir: required by the file backend");
    }
    CRUX_ASSIGN_OR_RETURN(auto adapter, FileAdapter::Create(std::move(o)));
    return std::unique_ptr<SwitchAdapter>(std::move(adapter));
  };
  return b;
}

}  // namespace crux::switch_adapters
