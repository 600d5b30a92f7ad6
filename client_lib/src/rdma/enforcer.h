// QpEnforcer: applies a Crux assignment to the job's queue pairs.
//
// For every bound QP (local NIC -> remote NIC): the traffic class (assignment.traffic_class,
// i.e. DSCP << 2, | ecn_bits) and the flow's pinned UDP source port. The port is set with
// mlx5dv_modify_qp_udp_sport when the device supports it, else through the GRH flow label whose
// derived RoCEv2 port is the pinned one (FlowLabelForUdpSport), set together with the traffic
// class. Flows the daemon did not pin (port 0) keep the NIC's own port.
//
// Every verbs call's failure is collected; Apply returns the first error with the number of
// failed QPs, after trying all of them (one broken QP does not stop the others).
//
// Use it as the client's enforcer: client->SetEnforcer([&](const Assignment& a) {
//   return enforcer.Apply(a); });
//
// Thread-safety: Bind/Apply under one internal mutex.
#ifndef CRUX_CLIENT_SRC_RDMA_ENFORCER_H_
#define CRUX_CLIENT_SRC_RDMA_ENFORCER_H_

#include <memory>
#include <string>
#include <vector>

#include "crux/client/client.h"
#include "crux/client/export.h"
#include "crux/sync/thread_annotations.h"
#include "rdma/verbs.h"

namespace crux::client::rdma {

struct QpBinding {
  QpHandle qp = nullptr;
  std::string local_nic;
  std::string remote_nic;
};

// What Apply did to one QP.
struct QpResult {
  uint32_t qp_num = 0;
  uint8_t traffic_class = 0;
  uint16_t udp_sport = 0;  // 0 = not pinned.
  enum class SportMethod { kNone, kMlx5dv, kFlowLabel } method = SportMethod::kNone;
  core::Status status;
};

class CRUX_CLIENT_EXPORT QpEnforcer {
 public:
  // `ops` must outlive the enforcer.
  explicit QpEnforcer(VerbsOps& ops, uint32_t ecn_bits = 0);

  // Adds QPs (later Apply calls include them). Errors: kInvalidArgument for a null QP.
  core::Status Bind(const QpBinding& binding) CRUX_EXCLUDES(mu_);
  void Unbind(QpHandle qp) CRUX_EXCLUDES(mu_);

  // Applies `a` to every bound QP; see the file comment.
  core::Status Apply(const Assignment& a) CRUX_EXCLUDES(mu_);

  // Per-QP results of the last Apply.
  std::vector<QpResult> last_results() const CRUX_EXCLUDES(mu_);

 private:
  VerbsOps& ops_;  // Called with mu_ held (one verbs sequence at a time).
  uint32_t ecn_bits_;
  mutable Mutex mu_;
  std::vector<QpBinding> bindings_ CRUX_GUARDED_BY(mu_);
  std::vector<QpResult> last_ CRUX_GUARDED_BY(mu_);
};

}  // namespace crux::client::rdma

#endif  // CRUX_CLIENT_SRC_RDMA_ENFORCER_H_
