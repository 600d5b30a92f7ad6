#include "crux/sim/workload/file_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace crux::sim::workload {

core::Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return core::InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return core::InvalidArgumentError(path + ": read error");
  return ss.str();
}

core::Status WriteTextFile(const std::string& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return core::InvalidArgumentError(path + ": cannot create: " + std::strerror(errno));
  }
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return core::InvalidArgumentError(path + ": write error");
  return core::Status::Ok();
}

}  // namespace crux::sim::workload
