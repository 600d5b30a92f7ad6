// Conversions between the client's public types and the crux.v1 wire messages, plus option
// validation. Pure functions.
#ifndef CRUX_CLIENT_SRC_WIRE_H_
#define CRUX_CLIENT_SRC_WIRE_H_

#include <string>
#include <utility>
#include <vector>

#include "crux/client/client.h"
#include "crux/core/base/status.h"
#include "crux/v1/envelope.pb.h"

namespace crux::client::internal {

// Checks every option; errors name the field ("options.placement[1].gpus: must be >= 1").
core::Status ValidateOptions(const ClientOptions& o);

// Total GPUs of the placement.
uint32_t TotalGpus(const ClientOptions& o);

v1::RegisterJob MakeRegisterJob(const ClientOptions& o);

// `peer_names[i]` names Profile::peers[i] (local NIC, remote NIC).
v1::ProfileReport MakeProfileReport(const std::string& job_id, const Profile& p);

Assignment FromWire(const v1::Assignment& a, int64_t received_unix_ns);

std::string JobStateName(int state);

}  // namespace crux::client::internal

#endif  // CRUX_CLIENT_SRC_WIRE_H_
