// The real VerbsOps: libibverbs, plus mlx5dv_modify_qp_udp_sport when built with mlx5dv
// (CRUX_WITH_MLX5DV). Only compiled when CRUX_WITH_IBVERBS.
//
// FillRtrAttributes is the path for QPs being created: it writes the assignment's traffic class
// and flow label into the caller's INIT->RTR `ibv_qp_attr` (ah_attr.is_global = 1), exactly what
// NCCL's ncclIbRtrQp sets, so no later AV change is needed.
#ifndef CRUX_CLIENT_SRC_RDMA_IBVERBS_H_
#define CRUX_CLIENT_SRC_RDMA_IBVERBS_H_

#include <memory>

#include "crux/client/client.h"
#include "crux/client/export.h"
#include "rdma/verbs.h"

struct ibv_qp_attr;

namespace crux::client::rdma {

// Real libibverbs operations (stateless; one instance can serve every QP).
CRUX_CLIENT_EXPORT std::unique_ptr<VerbsOps> MakeIbverbsOps();

// Fails with kUnavailable "no RDMA device" when ibv_get_device_list finds none (or the kernel
// has no RDMA support), else returns the device count.
CRUX_CLIENT_EXPORT core::Result<size_t> ProbeRdmaDevices(VerbsOps& ops);

// Sets attr->ah_attr.is_global = 1, grh.traffic_class = (dscp << 2) | ecn_bits and, when the
// flow local_nic -> remote_nic is pinned, grh.flow_label so that the RoCEv2 source port is the
// pinned one. The caller adds IBV_QP_AV to its mask. Errors: kInvalidArgument (null attr, bad
// port).
CRUX_CLIENT_EXPORT core::Status FillRtrAttributes(const Assignment& a, const std::string& local_nic,
                                                  const std::string& remote_nic, ibv_qp_attr* attr,
                                                  uint32_t ecn_bits = 0);

}  // namespace crux::client::rdma

#endif  // CRUX_CLIENT_SRC_RDMA_IBVERBS_H_
