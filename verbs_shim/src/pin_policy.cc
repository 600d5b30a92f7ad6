#include "crux/verbs_shim/pin_policy.h"

#include "rdma/verbs.h"  // client_lib/src: FlowLabelForUdpSport.

namespace crux::verbs_shim {

core::Status PinPolicy::SetTable(const hostd::PinTable& table) {
  if (table.traffic_class < -1 || table.traffic_class > 255) {
    return core::InvalidArgumentError("pins.traffic_class: must be -1..255 (got " +
                                      std::to_string(table.traffic_class) + ")");
  }
  std::map<std::pair<std::string, hostd::Gid>, uint16_t> pins;
  for (size_t i = 0; i < table.pins.size(); ++i) {
    const hostd::Pin& p = table.pins[i];
    auto gid = hostd::ParseGid(p.remote_gid);
    if (!gid.ok()) {
      return core::InvalidArgumentError("pins[" + std::to_string(i) +
                                        "].remote_gid: " + gid.status().message());
    }
    if (p.sport < client::rdma::kRoceSportMin) {
      return core::InvalidArgumentError("pins[" + std::to_string(i) + "].sport: " +
                                        std::to_string(p.sport) + " is not in 49152-65535");
    }
    pins[{p.device, *gid}] = p.sport;
  }
  table_ = table;
  pins_ = std::move(pins);
  return core::Status::Ok();
}

uint16_t PinPolicy::SportFor(const std::string& device, const hostd::Gid& remote_gid) const {
  auto it = pins_.find({device, remote_gid});
  return it == pins_.end() ? 0 : it->second;
}

RtrPlan PinPolicy::PlanRtr(const std::string& device, const hostd::Gid& remote_gid,
                           uint8_t nccl_tc) const {
  RtrPlan plan;
  if (!table_) return plan;
  if (table_->traffic_class >= 0) {
    plan.traffic_class = (table_->traffic_class & ~3) | (nccl_tc & 3);
  }
  if (uint16_t sport = SportFor(device, remote_gid); sport != 0) {
    auto fl = client::rdma::FlowLabelForUdpSport(sport);
    if (fl.ok()) {
      plan.pinned = true;
      plan.sport = sport;
      plan.flow_label = *fl;
    }
  }
  return plan;
}

}  // namespace crux::verbs_shim
