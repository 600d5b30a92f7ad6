#include "file_util.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace crux::spec::internal {

namespace fs = std::filesystem;

core::Result<std::string> ReadTextFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return core::NotFoundError(path + ": no such file");
  if (!fs::is_regular_file(path, ec)) {
    return core::InvalidArgumentError(path + ": not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::InvalidArgumentError(path + ": cannot open for reading");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return core::InvalidArgumentError(path + ": read error");
  return buf.str();
}

std::string DirectoryOf(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  fs::path p(path);
  if (p.is_absolute() || base_dir.empty()) return p.lexically_normal().string();
  return (fs::path(base_dir) / p).lexically_normal().string();
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace crux::spec::internal
