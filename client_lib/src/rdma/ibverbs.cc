#include "rdma/ibverbs.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef CRUX_WITH_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace crux::client::rdma {
namespace {

std::string QpText(uint32_t qp_num) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "qp 0x%x", qp_num);
  return buf;
}

std::string ErrText(int err) { return std::strerror(err); }

class IbverbsOps final : public VerbsOps {
 public:
  core::Result<std::vector<std::string>> ListDevices() override {
    int n = 0;
    errno = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (list == nullptr) {
      int err = errno;
      return core::UnavailableError("ibv_get_device_list: " + ErrText(err) +
                                    (err == ENOSYS ? " (no kernel RDMA support)" : ""));
    }
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
    return names;
  }

  uint32_t QpNum(QpHandle qp) override {
    return qp == nullptr ? 0 : static_cast<ibv_qp*>(qp)->qp_num;
  }

  core::Status SetTrafficClass(QpHandle handle, uint8_t traffic_class,
                               uint32_t flow_label) override {
    auto* qp = static_cast<ibv_qp*>(handle);
    if (qp == nullptr) return core::InvalidArgumentError("SetTrafficClass: null qp");
    ibv_qp_attr attr;
    ibv_qp_init_attr init;
    std::memset(&attr, 0, sizeof(attr));
    std::memset(&init, 0, sizeof(init));
    int rc = ibv_query_qp(qp, &attr, IBV_QP_AV | IBV_QP_STATE, &init);
    if (rc != 0) {
      return core::UnavailableError("ibv_query_qp(" + QpText(qp->qp_num) +
                                    ", IBV_QP_AV): " + ErrText(rc));
    }
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.traffic_class = traffic_class;
    if (flow_label != 0) attr.ah_attr.grh.flow_label = flow_label;
    rc = ibv_modify_qp(qp, &attr, IBV_QP_AV);
    if (rc != 0) {
      std::string hint = attr.qp_state == IBV_QPS_RTS
                             ? " (the QP is in RTS: set the traffic class at INIT->RTR with "
                               "FillRtrAttributes, i.e. re-create the QP/communicator)"
                             : "";
      return core::FailedPreconditionError("ibv_modify_qp(" + QpText(qp->qp_num) +
                                           ", IBV_QP_AV): " + ErrText(rc) + hint);
    }
    return core::Status::Ok();
  }

  core::Status SetUdpSport(QpHandle handle, uint16_t sport) override {
    auto* qp = static_cast<ibv_qp*>(handle);
    if (qp == nullptr) return core::InvalidArgumentError("SetUdpSport: null qp");
#ifdef CRUX_WITH_MLX5DV
    int rc = mlx5dv_modify_qp_udp_sport(qp, sport);
    if (rc == 0) return core::Status::Ok();
    if (rc == EOPNOTSUPP || rc == ENOTSUP || rc == EPROTONOSUPPORT) {
      return core::FailedPreconditionError("mlx5dv_modify_qp_udp_sport(" + QpText(qp->qp_num) +
                                           "): not supported by this device");
    }
    return core::UnavailableError("mlx5dv_modify_qp_udp_sport(" + QpText(qp->qp_num) + ", " +
                                  std::to_string(sport) + "): " + ErrText(rc));
#else
    (void)sport;
    return core::FailedPreconditionError("mlx5dv_modify_qp_udp_sport(" + QpText(qp->qp_num) +
                                         "): built without mlx5dv");
#endif
  }
};

}  // namespace

std::unique_ptr<VerbsOps> MakeIbverbsOps() { return std::make_unique<IbverbsOps>(); }

core::Result<size_t> ProbeRdmaDevices(VerbsOps& ops) {
  auto devices = ops.ListDevices();
  if (!devices.ok()) return devices.status();
  if (devices->empty()) {
    return core::UnavailableError("no RDMA device (ibv_get_device_list found 0 devices)");
  }
  return devices->size();
}

core::Status FillRtrAttributes(const Assignment& a, const std::string& local_nic,
                               const std::string& remote_nic, ibv_qp_attr* attr,
                               uint32_t ecn_bits) {
  if (attr == nullptr) return core::InvalidArgumentError("attr: null");
  if (ecn_bits > 3) return core::InvalidArgumentError("ecn_bits: must be 0-3");
  attr->ah_attr.is_global = 1;
  attr->ah_attr.grh.traffic_class = static_cast<uint8_t>(((a.dscp & 0x3Fu) << 2) | ecn_bits);
  uint16_t sport = a.UdpSportFor(local_nic, remote_nic);
  if (sport != 0) {
    auto fl = FlowLabelForUdpSport(sport);
    if (!fl.ok()) return fl.status();
    attr->ah_attr.grh.flow_label = *fl;
  }
  return core::Status::Ok();
}

}  // namespace crux::client::rdma
