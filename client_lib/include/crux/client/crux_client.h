/* Crux client library: the stable C ABI (for NCCL plugins, launchers and other languages).
 *
 * Same semantics as the C++ API in crux/client/client.h. Handles are opaque; every function is
 * thread-safe; the hot-path functions (crux_client_begin_iteration ... crux_client_record_comm)
 * never block and never allocate. Functions returning int return 0 on success and a negative
 * crux_error code on failure; a message naming the field is written to `err` (if non-NULL,
 * truncated to err_len, always NUL-terminated).
 *
 * ABI stability: structs start with `struct_size` (set it to sizeof(the struct)); fields are only
 * ever appended. */
#ifndef CRUX_CLIENT_CRUX_CLIENT_H_
#define CRUX_CLIENT_CRUX_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#include "crux/client/export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum crux_error {
  CRUX_OK = 0,
  CRUX_ERR_INVALID_ARGUMENT = -1,
  CRUX_ERR_NOT_FOUND = -2,
  CRUX_ERR_OUT_OF_RANGE = -3,
  CRUX_ERR_UNAVAILABLE = -4,
  CRUX_ERR_INTERNAL = -5,
};

typedef struct crux_client crux_client;

typedef struct crux_client_options {
  size_t struct_size;   /* sizeof(crux_client_options). */
  const char* endpoint; /* "tcp://10.0.0.1:7450". */
  const char* job_id;
  const char* const* hosts;      /* num_hosts topology host names. */
  const uint32_t* gpus_per_host; /* num_hosts entries, or NULL (1 GPU each). */
  size_t num_hosts;
  double flops_per_iteration;    /* 0 = unknown. */
  double gpu_peak_flops;         /* 0 = let the daemon estimate W_j. */
  uint32_t lease_ms;             /* 0 = daemon default. */
  const char* server_public_key; /* CURVE (Z85) or NULL. */
  const char* client_public_key;
  const char* client_secret_key;
  int end_job_on_close; /* Non-zero: send EndJob on destroy. */
} crux_client_options;

typedef struct crux_assignment_info {
  size_t struct_size;
  uint64_t epoch;
  uint32_t level;
  uint32_t dscp;
  uint32_t traffic_class; /* dscp << 2. */
  uint32_t num_flows;
  /* Appended: id of the daemon's state the epoch belongs to (0 from daemons without one). */
  uint64_t state_id;
} crux_assignment_info;

typedef void (*crux_assignment_cb)(void* user, const crux_assignment_info* info);

/* Fills `options` with defaults (struct_size set, end_job_on_close = 1). */
CRUX_CLIENT_EXPORT void crux_client_options_init(crux_client_options* options);

CRUX_CLIENT_EXPORT int crux_client_create(const crux_client_options* options, crux_client** out,
                                          char* err, size_t err_len);
/* Closes and frees; NULL is allowed. */
CRUX_CLIENT_EXPORT void crux_client_destroy(crux_client* client);

CRUX_CLIENT_EXPORT int crux_client_add_peer(crux_client* client, const char* local_nic,
                                            const char* remote_nic, uint32_t* peer_id, char* err,
                                            size_t err_len);

/* Hot path. A NULL client is a no-op, so call sites need no "is Crux on" check. */
CRUX_CLIENT_EXPORT void crux_client_begin_iteration(crux_client* client);
CRUX_CLIENT_EXPORT void crux_client_end_iteration(crux_client* client);
CRUX_CLIENT_EXPORT void crux_client_compute_end(crux_client* client);
CRUX_CLIENT_EXPORT void crux_client_comm_start(crux_client* client, uint32_t peer_id,
                                               uint64_t bytes);
CRUX_CLIENT_EXPORT void crux_client_comm_end(crux_client* client, uint32_t peer_id);
CRUX_CLIENT_EXPORT void crux_client_record_comm(crux_client* client, uint32_t peer_id,
                                                uint64_t bytes, int64_t start_ns, int64_t end_ns);
/* steady-clock nanoseconds (the clock of record_comm). */
CRUX_CLIENT_EXPORT int64_t crux_now_ns(void);

/* 1 and *info filled when an assignment is applied, 0 when none yet. */
CRUX_CLIENT_EXPORT int crux_client_assignment(crux_client* client, crux_assignment_info* info);
/* Waits up to timeout_ms for an assignment newer than after_epoch: 1 (filled) or 0. After a
 * daemon state reset (epochs restart at 1) it also returns the assignment applied across the
 * reset (see Client::WaitForAssignment in client.h); prefer crux_client_wait_newer_assignment. */
CRUX_CLIENT_EXPORT int crux_client_wait_assignment(crux_client* client, uint64_t after_epoch,
                                                   int64_t timeout_ms, crux_assignment_info* info);
/* Waits up to timeout_ms for an assignment newer than (after_epoch, after_state_id): another
 * state_id, or the same one with a greater epoch. 1 (filled) or 0. */
CRUX_CLIENT_EXPORT int crux_client_wait_newer_assignment(crux_client* client, uint64_t after_epoch,
                                                         uint64_t after_state_id,
                                                         int64_t timeout_ms,
                                                         crux_assignment_info* info);
/* Pinned UDP source port of src_nic -> dst_nic in the current assignment, 0 if none. */
CRUX_CLIENT_EXPORT uint16_t crux_client_udp_sport(crux_client* client, const char* src_nic,
                                                  const char* dst_nic);
/* ncclConfig_t.trafficClass for the current assignment ((dscp << 2) | ecn_bits), -1 if none. */
CRUX_CLIENT_EXPORT int crux_client_nccl_traffic_class(crux_client* client, uint32_t ecn_bits);
/* Called on the library's thread for every newly applied assignment; NULL removes it. */
CRUX_CLIENT_EXPORT void crux_client_set_assignment_callback(crux_client* client,
                                                            crux_assignment_cb cb, void* user);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_CLIENT_CRUX_CLIENT_H_ */
