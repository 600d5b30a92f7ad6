// NCCL settings for an assignment: what a job applies before it creates its communicators.
//
// NCCL reads NCCL_IB_TC once per process (it overrides ncclConfig_t.trafficClass), so a job
// either exports the variables before the first communicator (ApplyNcclEnvironment), or passes
// the traffic class per communicator (NCCL >= 2.26):
//
//   ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
//   config.trafficClass = crux::client::NcclTrafficClass(assignment);
//   ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
//
// The traffic class byte is DSCP << 2 (the two ECN bits are left to the NIC unless ecn_bits is
// given; many RoCE deployments use ECN-capable "| 2", e.g. DSCP 26 -> 106).
//
// Thread-safety: pure functions, except ApplyNcclEnvironment (setenv: call before threads that
// read the environment exist).
#ifndef CRUX_CLIENT_NCCL_H_
#define CRUX_CLIENT_NCCL_H_

#include <map>
#include <string>

#include "crux/client/client.h"
#include "crux/client/export.h"
#include "crux/core/base/status.h"

namespace crux::client {

struct NcclOptions {
  uint32_t ecn_bits = 0;     // 0-3, OR-ed into the traffic class byte.
  bool set_fifo_tc = false;  // Also set NCCL_IB_FIFO_TC (control QP) to the same class.
};

// The per-communicator traffic class (ncclConfig_t.trafficClass): (dscp << 2) | ecn_bits.
CRUX_CLIENT_EXPORT int NcclTrafficClass(const Assignment& a, const NcclOptions& o = {});

// The environment for the assignment: the daemon's nccl_env (e.g. NCCL_IB_TC) with NCCL_IB_TC
// recomputed when ecn_bits is set, plus NCCL_IB_FIFO_TC when asked for.
CRUX_CLIENT_EXPORT std::map<std::string, std::string> NcclEnvironment(const Assignment& a,
                                                                      const NcclOptions& o = {});

// setenv()s NcclEnvironment(a, o). With overwrite false, variables the user already set win
// (and are left alone). Errors: kInvalidArgument for ecn_bits > 3, kInternal if setenv fails.
CRUX_CLIENT_EXPORT core::Status ApplyNcclEnvironment(const Assignment& a, const NcclOptions& o = {},
                                                     bool overwrite = false);

}  // namespace crux::client

#endif  // CRUX_CLIENT_NCCL_H_
