// The verbs operations Crux enforcement needs, behind an interface: the real libibverbs /
// mlx5dv implementation (ibverbs.h, built when CRUX_WITH_IBVERBS) and fakes in unit tests.
//
// A QP is passed as an opaque handle (a `struct ibv_qp*` for the real implementation) so that
// this header needs no verbs headers.
//
// Contracts: every method returns a Status naming the verbs call, the QP number and errno's text
// ("ibv_modify_qp(qp 0x1a2, IBV_QP_AV): Invalid argument"). Thread-safety: as libibverbs (calls
// on distinct QPs may run concurrently); fakes are single-threaded.
#ifndef CRUX_CLIENT_SRC_RDMA_VERBS_H_
#define CRUX_CLIENT_SRC_RDMA_VERBS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "crux/client/export.h"
#include "crux/core/base/status.h"

namespace crux::client::rdma {

using QpHandle = void*;

// RoCEv2 UDP source ports are 0xC000-0xFFFF.
inline constexpr uint16_t kRoceSportMin = 0xC000;

// libibverbs' ibv_flow_label_to_udp_sport, re-stated so that fakes and tests need no verbs
// headers: ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000.
constexpr uint16_t FlowLabelToUdpSport(uint32_t flow_label) {
  return static_cast<uint16_t>(((flow_label & 0x3FFFu) ^ ((flow_label & 0xFC000u) >> 14)) |
                               0xC000u);
}
// A flow label whose derived RoCEv2 source port is `sport` (>= 0xC000), or kInvalidArgument.
CRUX_CLIENT_EXPORT core::Result<uint32_t> FlowLabelForUdpSport(uint16_t sport);

class CRUX_CLIENT_EXPORT VerbsOps {
 public:
  virtual ~VerbsOps() = default;

  // Names of the RDMA devices (ibv_get_device_list). Errors: kUnavailable when the kernel has no
  // RDMA support (ENOSYS) or the list cannot be read.
  virtual core::Result<std::vector<std::string>> ListDevices() = 0;

  // The QP number, for messages.
  virtual uint32_t QpNum(QpHandle qp) = 0;

  // Sets the GRH traffic class (and flow label) of the QP's primary address vector:
  // ibv_query_qp(IBV_QP_AV) then ibv_modify_qp(IBV_QP_AV). Valid while the QP moves to RTR
  // (most NICs refuse an AV change in RTS: then the error says so and the QP must be
  // re-created with FillRtrAttributes).
  virtual core::Status SetTrafficClass(QpHandle qp, uint8_t traffic_class, uint32_t flow_label) = 0;

  // mlx5dv_modify_qp_udp_sport (RC/UC QPs in RTS). kFailedPrecondition when the device/provider
  // does not support it (not mlx5, or built without mlx5dv): callers fall back to the flow label.
  virtual core::Status SetUdpSport(QpHandle qp, uint16_t sport) = 0;
};

}  // namespace crux::client::rdma

#endif  // CRUX_CLIENT_SRC_RDMA_VERBS_H_
