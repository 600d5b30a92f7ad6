// The test hooks of the fake "real" libibverbs (libcrux-fake-ibverbs.so) and libmlx5
// (libcrux-fake-mlx5.so) the verbs shim tests load under the shim. The fakes implement the verbs
// entry points NCCL uses over one fake device ("mlx5_0", one port, GID ::ffff:10.0.0.1), and log
// every ibv_modify_qp and mlx5dv_modify_qp_udp_sport they receive.
#ifndef CRUX_TESTS_VERBS_SHIM_FAKE_IBVERBS_H_
#define CRUX_TESTS_VERBS_SHIM_FAKE_IBVERBS_H_

#include <stdint.h>

extern "C" {

struct fake_ibv_modify {
  uint32_t qpn;
  int mask;
  int state;  // enum ibv_qp_state, when IBV_QP_STATE is in the mask.
  uint32_t flow_label;
  uint8_t traffic_class;
  uint8_t is_global;
  uint8_t dgid[16];
  uint32_t dest_qpn;
};

struct fake_mlx5_sport {
  uint32_t qpn;
  uint16_t sport;
  int result;  // 0 or the errno returned.
};

// Number of ibv_modify_qp calls so far; entry i (0-based) into *out (returns 0, -1 if none).
int fake_ibv_modify_count(void);
int fake_ibv_modify_entry(int i, struct fake_ibv_modify* out);
int fake_ibv_live_qps(void);
// Number of mlx5dv_modify_qp_udp_sport calls; entry i into *out.
int fake_mlx5_sport_count(void);
int fake_mlx5_sport_entry(int i, struct fake_mlx5_sport* out);
// Non-zero: mlx5dv_modify_qp_udp_sport fails with EOPNOTSUPP (a NIC without the capability).
void fake_mlx5_set_unsupported(int unsupported);
}

#endif  // CRUX_TESTS_VERBS_SHIM_FAKE_IBVERBS_H_
