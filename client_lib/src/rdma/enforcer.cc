#include "rdma/enforcer.h"

#include <algorithm>
#include <utility>

namespace crux::client::rdma {

QpEnforcer::QpEnforcer(VerbsOps& ops, uint32_t ecn_bits) : ops_(ops), ecn_bits_(ecn_bits & 3u) {}

core::Status QpEnforcer::Bind(const QpBinding& binding) {
  if (binding.qp == nullptr) return core::InvalidArgumentError("binding.qp: null");
  MutexLock lock(&mu_);
  bindings_.push_back(binding);
  return core::Status::Ok();
}

void QpEnforcer::Unbind(QpHandle qp) {
  MutexLock lock(&mu_);
  bindings_.erase(std::remove_if(bindings_.begin(), bindings_.end(),
                                 [qp](const QpBinding& b) { return b.qp == qp; }),
                  bindings_.end());
}

core::Status QpEnforcer::Apply(const Assignment& a) {
  MutexLock lock(&mu_);
  last_.clear();
  const uint8_t tc = static_cast<uint8_t>(((a.dscp & 0x3Fu) << 2) | ecn_bits_);
  core::Status first;
  size_t failed = 0;
  for (const auto& b : bindings_) {
    QpResult r;
    r.qp_num = ops_.QpNum(b.qp);
    r.traffic_class = tc;
    r.udp_sport = a.UdpSportFor(b.local_nic, b.remote_nic);
    uint32_t flow_label = 0;
    if (r.udp_sport != 0) {
      core::Status s = ops_.SetUdpSport(b.qp, r.udp_sport);
      if (s.ok()) {
        r.method = QpResult::SportMethod::kMlx5dv;
      } else if (s.code() == core::StatusCode::kFailedPrecondition) {
        auto fl = FlowLabelForUdpSport(r.udp_sport);
        if (fl.ok()) {
          flow_label = *fl;
          r.method = QpResult::SportMethod::kFlowLabel;
        } else {
          r.status = fl.status();
        }
      } else {
        r.status = s;
      }
    }
    if (r.status.ok()) r.status = ops_.SetTrafficClass(b.qp, tc, flow_label);
    if (!r.status.ok()) {
      if (failed++ == 0) first = r.status;
    }
    last_.push_back(std::move(r));
  }
  if (failed == 0) return core::Status::Ok();
  return core::Status(first.code(), first.message() + " (" + std::to_string(failed) + " of " +
                                        std::to_string(bindings_.size()) + " QPs failed)");
}

std::vector<QpResult> QpEnforcer::last_results() const {
  MutexLock lock(&mu_);
  return last_;
}

}  // namespace crux::client::rdma
