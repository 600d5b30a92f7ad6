// A fake libmlx5 for the verbs shim tests: mlx5dv_modify_qp_udp_sport at MLX5_1.17, which
// rdma-core documents for RC/UC QPs in RTS (else EOPNOTSUPP, like a NIC without the
// rts2rts_qp_udp_sport capability). Calls are logged (fake_ibverbs.h).
#include <infiniband/verbs.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "fake_ibverbs.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
std::mutex mu;
std::vector<fake_mlx5_sport> calls;
int unsupported = 0;
}  // namespace

FAKE_EXPORT int mlx5dv_modify_qp_udp_sport(ibv_qp* qp, uint16_t sport) {
  std::lock_guard<std::mutex> lock(mu);
  int rc = 0;
  if (unsupported != 0 || qp->state != IBV_QPS_RTS ||
      (qp->qp_type != IBV_QPT_RC && qp->qp_type != IBV_QPT_UC)) {
    rc = EOPNOTSUPP;
  }
  calls.push_back({qp->qp_num, sport, rc});
  return rc;
}
FAKE_EXPORT int fake_mlx5_sport_count(void) {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int>(calls.size());
}
FAKE_EXPORT int fake_mlx5_sport_entry(int i, fake_mlx5_sport* out) {
  std::lock_guard<std::mutex> lock(mu);
  if (i < 0 || i >= static_cast<int>(calls.size())) return -1;
  *out = calls[static_cast<size_t>(i)];
  return 0;
}
FAKE_EXPORT void fake_mlx5_set_unsupported(int u) {
  std::lock_guard<std::mutex> lock(mu);
  unsupported = u;
}
