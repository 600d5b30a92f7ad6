// PinPolicy: what the verbs shim does to a queue pair, given the job's PinTable from crux-hostd
// (host_protocol.h). Pure logic, no verbs calls.
//
//  * INIT -> RTR of an RC QP (PlanRtr): when the table pins (local device, remote GID), the GRH
//    flow label becomes one whose RoCEv2 UDP source port is the pinned port (client_lib's
//    FlowLabelForUdpSport, the inverse of ibv_flow_label_to_udp_sport); when the table has a
//    traffic class, the GRH traffic class becomes it, keeping NCCL's two ECN bits. Without a
//    table, or for a pair the table does not name, NCCL's attributes pass unchanged (a job
//    without an assignment keeps NCCL's own behaviour).
//  * Live QPs (SportFor): the port a later table wants, for re-pinning through
//    mlx5dv_modify_qp_udp_sport; the traffic class of a live QP cannot change (the address vector
//    is fixed after RTR on mlx5), so a new class applies to new QPs only.
//
// Thread-safety: none (the shim guards it with its mutex).
#ifndef CRUX_VERBS_SHIM_PIN_POLICY_H_
#define CRUX_VERBS_SHIM_PIN_POLICY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "crux/core/base/status.h"
#include "crux/hostd/host_protocol.h"

namespace crux::verbs_shim {

struct RtrPlan {
  bool pinned = false;      // A flow label was set.
  uint16_t sport = 0;       // The source port it selects.
  uint32_t flow_label = 0;  // Valid when pinned.
  int traffic_class = -1;   // GRH traffic class to set, -1 = keep NCCL's.
  friend bool operator==(const RtrPlan&, const RtrPlan&) = default;
};

class PinPolicy {
 public:
  // Replaces the table. Errors (kInvalidArgument, the table is not taken): a pin with a
  // malformed GID or a port outside 49152-65535, a traffic class outside -1..255.
  core::Status SetTable(const hostd::PinTable& table);
  const std::optional<hostd::PinTable>& table() const { return table_; }

  RtrPlan PlanRtr(const std::string& device, const hostd::Gid& remote_gid, uint8_t nccl_tc) const;
  // The pinned port of (device, remote GID), 0 when none.
  uint16_t SportFor(const std::string& device, const hostd::Gid& remote_gid) const;

 private:
  std::optional<hostd::PinTable> table_;
  std::map<std::pair<std::string, hostd::Gid>, uint16_t> pins_;
};

}  // namespace crux::verbs_shim

#endif  // CRUX_VERBS_SHIM_PIN_POLICY_H_
