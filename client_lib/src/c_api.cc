// The C ABI (crux/client/crux_client.h) over the C++ client.
#include "crux/client/crux_client.h"

#include <cstring>
#include <memory>
#include <string>

#include "crux/client/client.h"
#include "crux/client/nccl.h"

struct crux_client {
  std::unique_ptr<crux::client::Client> impl;
};

namespace {

using crux::core::StatusCode;

int Code(const crux::core::Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return CRUX_OK;
    case StatusCode::kInvalidArgument:
      return CRUX_ERR_INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return CRUX_ERR_NOT_FOUND;
    case StatusCode::kOutOfRange:
      return CRUX_ERR_OUT_OF_RANGE;
    case StatusCode::kUnavailable:
      return CRUX_ERR_UNAVAILABLE;
    default:
      return CRUX_ERR_INTERNAL;
  }
}

int Fail(int code, const std::string& msg, char* err, size_t err_len) {
  if (err != nullptr && err_len > 0) {
    size_t n = std::min(err_len - 1, msg.size());
    std::memcpy(err, msg.data(), n);
    err[n] = '\0';
  }
  return code;
}

void Fill(const crux::client::Assignment& a, crux_assignment_info* info) {
  size_t size = info->struct_size;
  if (size != 0 && size < sizeof(size_t)) return;  // Not even struct_size fits.
  crux_assignment_info out{};
  out.struct_size = sizeof(crux_assignment_info);
  out.epoch = a.epoch;
  out.level = a.level;
  out.dscp = a.dscp;
  out.traffic_class = a.traffic_class;
  out.num_flows = static_cast<uint32_t>(a.flows.size());
  out.state_id = a.state_id;
  // Older callers with a smaller struct get the prefix they know.
  std::memcpy(info, &out, std::min(size == 0 ? sizeof(out) : size, sizeof(out)));
  info->struct_size = std::min(size == 0 ? sizeof(out) : size, sizeof(out));
}

std::string Str(const char* s) { return s == nullptr ? std::string() : std::string(s); }

}  // namespace

extern "C" {

void crux_client_options_init(crux_client_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->end_job_on_close = 1;
}

int crux_client_create(const crux_client_options* options, crux_client** out, char* err,
                       size_t err_len) {
  if (options == nullptr || out == nullptr) {
    return Fail(CRUX_ERR_INVALID_ARGUMENT, "options/out: null", err, err_len);
  }
  if (options->struct_size < sizeof(crux_client_options)) {
    return Fail(CRUX_ERR_INVALID_ARGUMENT,
                "options.struct_size: too small (use "
                "crux_client_options_init)",
                err, err_len);
  }
  if (options->num_hosts > 0 && options->hosts == nullptr) {
    return Fail(CRUX_ERR_INVALID_ARGUMENT, "options.hosts: null with num_hosts > 0", err, err_len);
  }
  crux::client::ClientOptions o;
  o.endpoint = Str(options->endpoint);
  o.job_id = Str(options->job_id);
  for (size_t i = 0; i < options->num_hosts; ++i) {
    crux::client::HostPlacement h;
    h.host = Str(options->hosts[i]);
    h.gpus = options->gpus_per_host != nullptr ? options->gpus_per_host[i] : 1;
    o.placement.push_back(std::move(h));
  }
  o.flops_per_iteration = options->flops_per_iteration;
  o.gpu_peak_flops = options->gpu_peak_flops;
  o.lease_ms = options->lease_ms;
  o.server_public_key = Str(options->server_public_key);
  o.client_public_key = Str(options->client_public_key);
  o.client_secret_key = Str(options->client_secret_key);
  o.end_job_on_close = options->end_job_on_close != 0;
  auto client = crux::client::Client::Start(std::move(o));
  if (!client.ok()) return Fail(Code(client.status()), client.status().ToString(), err, err_len);
  *out = new crux_client{std::move(*client)};
  return CRUX_OK;
}

void crux_client_destroy(crux_client* client) { delete client; }

int crux_client_add_peer(crux_client* client, const char* local_nic, const char* remote_nic,
                         uint32_t* peer_id, char* err, size_t err_len) {
  if (client == nullptr || peer_id == nullptr) {
    return Fail(CRUX_ERR_INVALID_ARGUMENT, "client/peer_id: null", err, err_len);
  }
  auto id = client->impl->AddPeer(Str(local_nic), Str(remote_nic));
  if (!id.ok()) return Fail(Code(id.status()), id.status().ToString(), err, err_len);
  *peer_id = *id;
  return CRUX_OK;
}

// The hot path: a NULL client is a no-op (crux_client.h), so call sites need no "is Crux on" check.
void crux_client_begin_iteration(crux_client* client) {
  if (client != nullptr) client->impl->BeginIteration();
}
void crux_client_end_iteration(crux_client* client) {
  if (client != nullptr) client->impl->EndIteration();
}
void crux_client_compute_end(crux_client* client) {
  if (client != nullptr) client->impl->ComputeEnd();
}
void crux_client_comm_start(crux_client* client, uint32_t peer_id, uint64_t bytes) {
  if (client != nullptr) client->impl->CommStart(peer_id, bytes);
}
void crux_client_comm_end(crux_client* client, uint32_t peer_id) {
  if (client != nullptr) client->impl->CommEnd(peer_id);
}
void crux_client_record_comm(crux_client* client, uint32_t peer_id, uint64_t bytes,
                             int64_t start_ns, int64_t end_ns) {
  if (client != nullptr) client->impl->RecordComm(peer_id, bytes, start_ns, end_ns);
}
int64_t crux_now_ns(void) { return crux::client::Client::NowNs(); }

int crux_client_assignment(crux_client* client, crux_assignment_info* info) {
  if (client == nullptr || info == nullptr) return 0;
  auto a = client->impl->CurrentAssignment();
  if (!a) return 0;
  Fill(*a, info);
  return 1;
}

int crux_client_wait_assignment(crux_client* client, uint64_t after_epoch, int64_t timeout_ms,
                                crux_assignment_info* info) {
  if (client == nullptr || info == nullptr) return 0;
  auto a = client->impl->WaitForAssignment(after_epoch, timeout_ms);
  if (!a) return 0;
  Fill(*a, info);
  return 1;
}

int crux_client_wait_newer_assignment(crux_client* client, uint64_t after_epoch,
                                      uint64_t after_state_id, int64_t timeout_ms,
                                      crux_assignment_info* info) {
  if (client == nullptr || info == nullptr) return 0;
  auto a = client->impl->WaitForAssignment(after_epoch, after_state_id, timeout_ms);
  if (!a) return 0;
  Fill(*a, info);
  return 1;
}

uint16_t crux_client_udp_sport(crux_client* client, const char* src_nic, const char* dst_nic) {
  if (client == nullptr) return 0;
  auto a = client->impl->CurrentAssignment();
  return a ? a->UdpSportFor(Str(src_nic), Str(dst_nic)) : 0;
}

int crux_client_nccl_traffic_class(crux_client* client, uint32_t ecn_bits) {
  if (client == nullptr || ecn_bits > 3) return -1;
  auto a = client->impl->CurrentAssignment();
  if (!a) return -1;
  crux::client::NcclOptions o;
  o.ecn_bits = ecn_bits;
  return crux::client::NcclTrafficClass(*a, o);
}

void crux_client_set_assignment_callback(crux_client* client, crux_assignment_cb cb, void* user) {
  if (client == nullptr) return;
  if (cb == nullptr) {
    client->impl->SetAssignmentCallback(nullptr);
    return;
  }
  client->impl->SetAssignmentCallback([cb, user](const crux::client::Assignment& a) {
    crux_assignment_info info{};
    info.struct_size = sizeof(info);
    Fill(a, &info);
    cb(user, &info);
  });
}

}  // extern "C"
