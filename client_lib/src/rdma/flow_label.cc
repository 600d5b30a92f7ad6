#include <string>

#include "rdma/verbs.h"

namespace crux::client::rdma {

core::Result<uint32_t> FlowLabelForUdpSport(uint16_t sport) {
  if (sport < kRoceSportMin) {
    return core::InvalidArgumentError("udp_sport: " + std::to_string(sport) +
                                      " is below the RoCEv2 range (49152-65535)");
  }
  // With the top 6 bits of the 20-bit label zero, the port's low 14 bits are the label.
  uint32_t fl = sport & 0x3FFFu;
  // Label 0 means "no label": use (1 << 14) | 1, which folds to the same port (0xC000).
  if (fl == 0) fl = (1u << 14) | 1u;
  return fl;
}

}  // namespace crux::client::rdma
