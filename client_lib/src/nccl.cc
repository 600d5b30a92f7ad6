#include "crux/client/nccl.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace crux::client {

int NcclTrafficClass(const Assignment& a, const NcclOptions& o) {
  return static_cast<int>(((a.dscp & 0x3Fu) << 2) | (o.ecn_bits & 0x3u));
}

std::map<std::string, std::string> NcclEnvironment(const Assignment& a, const NcclOptions& o) {
  std::map<std::string, std::string> env = a.nccl_env;
  const std::string tc = std::to_string(NcclTrafficClass(a, o));
  if (o.ecn_bits != 0 || env.find("NCCL_IB_TC") == env.end()) env["NCCL_IB_TC"] = tc;
  if (o.set_fifo_tc) env["NCCL_IB_FIFO_TC"] = tc;
  return env;
}

core::Status ApplyNcclEnvironment(const Assignment& a, const NcclOptions& o, bool overwrite) {
  if (o.ecn_bits > 3) return core::InvalidArgumentError("ecn_bits: must be 0-3");
  for (const auto& [k, v] : NcclEnvironment(a, o)) {
    if (setenv(k.c_str(), v.c_str(), overwrite ? 1 : 0) != 0) {
      return core::InternalError("setenv(" + k + "): " + std::strerror(errno));
    }
  }
  return core::Status::Ok();
}

}  // namespace crux::client
