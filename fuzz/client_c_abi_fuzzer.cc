// Fuzz target: the client library's C ABI (crux/client/crux_client.h) as a caller can misuse it
// without a daemon: crux_client_options with any struct_size, NULL or odd strings, host arrays
// with NULL entries, NaN/negative numbers, half-set CURVE keys; then, on a created client (the
// background thread runs; nothing answers), a sequence of calls with NULLs, unknown peer ids,
// odd byte counts and timestamps, and assignment structs of odd sizes; and every function with
// a NULL client ("a NULL client is a no-op").
//
// Network: the endpoint is never a fuzzed host name. It is one of a fixed list of malformed
// endpoints, inproc:// or abstract ipc:// with a fuzzed name, or tcp://127.0.0.1 with a fuzzed
// port - nothing leaves the machine and nothing is resolved by DNS.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "crux/client/crux_client.h"
#include "fuzz_util.h"

namespace {

std::string Endpoint(FuzzedDataProvider& fdp) {
  static const std::array<const char*, 10> kFixed = {"",
                                                     "tcp://",
                                                     "tcp://127.0.0.1",
                                                     "tcp://127.0.0.1:notaport",
                                                     "foo://x",
                                                     "inproc://",
                                                     "ipc://",
                                                     "tcp://127.0.0.1:99999",
                                                     "tcp://127.0.0.1:-1",
                                                     "inproc://crux-fuzz"};
  switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return kFixed[fdp.ConsumeIntegralInRange<size_t>(0, kFixed.size() - 1)];
    case 1:
      return "inproc://" + fdp.ConsumeRandomLengthString(64);
    case 2:
      return "ipc://@crux-fuzz-" + fdp.ConsumeRandomLengthString(32);
    default:
      return "tcp://127.0.0.1:" + std::to_string(fdp.ConsumeIntegral<uint16_t>());
  }
}

// A string argument: NULL, or fuzzed text (kept alive, at a fixed address, in `store`).
const char* Text(FuzzedDataProvider& fdp, std::deque<std::string>* store) {
  if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0) return nullptr;
  store->push_back(fdp.ConsumeRandomLengthString(160));
  return store->back().c_str();
}

double Number(FuzzedDataProvider& fdp) {
  static const std::array<double, 8> kOdd = {0.0,
                                             -1.0,
                                             1e15,
                                             std::numeric_limits<double>::quiet_NaN(),
                                             std::numeric_limits<double>::infinity(),
                                             -std::numeric_limits<double>::infinity(),
                                             std::numeric_limits<double>::max(),
                                             std::numeric_limits<double>::denorm_min()};
  if (fdp.ConsumeBool()) return kOdd[fdp.ConsumeIntegralInRange<size_t>(0, kOdd.size() - 1)];
  return fdp.ConsumeFloatingPoint<double>();
}

// An assignment struct of a fuzzed struct_size, in a buffer large enough for any of them.
struct InfoBuffer {
  alignas(crux_assignment_info) unsigned char bytes[2 * sizeof(crux_assignment_info)] = {};
  crux_assignment_info* info(FuzzedDataProvider& fdp) {
    auto* p = reinterpret_cast<crux_assignment_info*>(bytes);
    p->struct_size = fdp.ConsumeIntegralInRange<size_t>(0, sizeof(bytes));
    return p;
  }
};

// Every function with a NULL client: documented as no-ops / "nothing" answers.
void NullClientCalls(FuzzedDataProvider& fdp) {
  char err[64];
  uint32_t peer = 0;
  InfoBuffer buffer;
  if (crux_client_add_peer(nullptr, "a", "b", &peer, err, sizeof(err)) == CRUX_OK) {
    crux::fuzz::Violated("add_peer on a NULL client succeeded");
  }
  crux_client_begin_iteration(nullptr);
  crux_client_end_iteration(nullptr);
  crux_client_compute_end(nullptr);
  crux_client_comm_start(nullptr, fdp.ConsumeIntegral<uint32_t>(), fdp.ConsumeIntegral<uint64_t>());
  crux_client_comm_end(nullptr, fdp.ConsumeIntegral<uint32_t>());
  crux_client_record_comm(nullptr, 0, 1, 0, 1);
  if (crux_client_assignment(nullptr, buffer.info(fdp)) != 0) crux::fuzz::Violated("assignment");
  if (crux_client_wait_assignment(nullptr, 0, 0, buffer.info(fdp)) != 0) {
    crux::fuzz::Violated("wait_assignment on a NULL client");
  }
  if (crux_client_wait_newer_assignment(nullptr, 0, 0, 0, buffer.info(fdp)) != 0) {
    crux::fuzz::Violated("wait_newer_assignment on a NULL client");
  }
  if (crux_client_udp_sport(nullptr, "a", "b") != 0) crux::fuzz::Violated("udp_sport");
  if (crux_client_nccl_traffic_class(nullptr, 0) != -1) crux::fuzz::Violated("traffic_class");
  crux_client_set_assignment_callback(nullptr, nullptr, nullptr);
  crux_client_destroy(nullptr);
  crux_client_options_init(nullptr);
}

void OnAssignment(void* /*user*/, const crux_assignment_info* /*info*/) {}

// Calls on a live client with no daemon behind it.
void LiveClientCalls(crux_client* c, FuzzedDataProvider& fdp) {
  std::deque<std::string> store;
  std::vector<uint32_t> peers = {0, 1, 4096, std::numeric_limits<uint32_t>::max()};
  const int calls = fdp.ConsumeIntegralInRange<int>(0, 64);
  for (int i = 0; i < calls && fdp.remaining_bytes() > 0; ++i) {
    const uint32_t peer = fdp.ConsumeBool()
                              ? peers[fdp.ConsumeIntegralInRange<size_t>(0, peers.size() - 1)]
                              : fdp.ConsumeIntegral<uint32_t>();
    InfoBuffer buffer;
    switch (fdp.ConsumeIntegralInRange<int>(0, 12)) {
      case 0: {
        char err[48];
        uint32_t id = 0;
        const size_t err_len = fdp.ConsumeIntegralInRange<size_t>(0, sizeof(err));
        const bool null_id = fdp.ConsumeIntegralInRange<int>(0, 7) == 0;
        const char* local = Text(fdp, &store);
        const char* remote = Text(fdp, &store);
        const int rc = crux_client_add_peer(c, local, remote, null_id ? nullptr : &id,
                                            err_len == 0 ? nullptr : err, err_len);
        if (rc == CRUX_OK) peers.push_back(id);
        if (rc != CRUX_OK && err_len > 0 && std::memchr(err, '\0', err_len) == nullptr) {
          crux::fuzz::Violated("add_peer: err not NUL-terminated within err_len");
        }
        break;
      }
      case 1:
        crux_client_begin_iteration(c);
        break;
      case 2:
        crux_client_end_iteration(c);
        break;
      case 3:
        crux_client_compute_end(c);
        break;
      case 4:
        crux_client_comm_start(c, peer, fdp.ConsumeIntegral<uint64_t>());
        break;
      case 5:
        crux_client_comm_end(c, peer);
        break;
      case 6: {
        const int64_t now = crux_now_ns();
        const int64_t start = fdp.ConsumeBool() ? now - fdp.ConsumeIntegral<uint32_t>()
                                                : fdp.ConsumeIntegral<int64_t>();
        const int64_t end = fdp.ConsumeBool() ? start + fdp.ConsumeIntegral<int32_t>()
                                              : fdp.ConsumeIntegral<int64_t>();
        crux_client_record_comm(c, peer, fdp.ConsumeIntegral<uint64_t>(), start, end);
        break;
      }
      case 7:
        if (crux_client_assignment(c, fdp.ConsumeBool() ? nullptr : buffer.info(fdp)) != 0) {
          crux::fuzz::Violated("an assignment without a daemon");
        }
        break;
      case 8:
        (void)crux_client_wait_assignment(c, fdp.ConsumeIntegral<uint64_t>(),
                                          fdp.ConsumeIntegralInRange<int64_t>(-5, 0),
                                          fdp.ConsumeBool() ? nullptr : buffer.info(fdp));
        break;
      case 9:
        (void)crux_client_wait_newer_assignment(c, fdp.ConsumeIntegral<uint64_t>(),
                                                fdp.ConsumeIntegral<uint64_t>(),
                                                fdp.ConsumeIntegralInRange<int64_t>(-5, 0),
                                                fdp.ConsumeBool() ? nullptr : buffer.info(fdp));
        break;
      case 10: {
        const char* src = Text(fdp, &store);
        const char* dst = Text(fdp, &store);
        (void)crux_client_udp_sport(c, src, dst);
        break;
      }
      case 11:
        (void)crux_client_nccl_traffic_class(c, fdp.ConsumeIntegral<uint32_t>());
        break;
      default:
        crux_client_set_assignment_callback(c, fdp.ConsumeBool() ? OnAssignment : nullptr, nullptr);
        break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  NullClientCalls(fdp);

  std::deque<std::string> store;  // Text() hands out c_str() pointers: never moved.
  crux_client_options o;
  crux_client_options_init(&o);
  if (o.struct_size != sizeof(o) || o.end_job_on_close != 1) crux::fuzz::Violated("options_init");
  switch (fdp.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      o.struct_size = fdp.ConsumeIntegralInRange<size_t>(0, sizeof(o) - 1);  // Too small.
      break;
    case 1:
      o.struct_size = sizeof(o) + fdp.ConsumeIntegralInRange<size_t>(1, 64);  // A newer caller.
      break;
    default:
      break;
  }
  const std::string endpoint = Endpoint(fdp);
  o.endpoint = fdp.ConsumeIntegralInRange<int>(0, 15) == 0 ? nullptr : endpoint.c_str();
  o.job_id = fdp.ConsumeIntegralInRange<int>(0, 3) == 0 ? Text(fdp, &store) : "job-1";
  std::vector<const char*> hosts;
  std::vector<uint32_t> gpus;
  const size_t num_hosts = fdp.ConsumeIntegralInRange<size_t>(0, 6);
  for (size_t i = 0; i < num_hosts; ++i) {
    hosts.push_back(fdp.ConsumeBool() ? Text(fdp, &store) : (i % 2 == 0 ? "host0" : "host1"));
    gpus.push_back(fdp.ConsumeBool() ? 8 : fdp.ConsumeIntegral<uint32_t>());
  }
  o.num_hosts = num_hosts;
  switch (fdp.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      o.hosts = nullptr;  // With num_hosts > 0: refused.
      break;
    case 1:
      o.hosts = hosts.data();
      o.num_hosts = 0;  // Hosts given but not counted.
      break;
    default:
      o.hosts = hosts.data();
      break;
  }
  o.gpus_per_host = fdp.ConsumeBool() ? nullptr : gpus.data();
  if (fdp.ConsumeBool()) o.flops_per_iteration = Number(fdp);
  if (fdp.ConsumeBool()) o.gpu_peak_flops = Number(fdp);
  if (fdp.ConsumeBool()) o.lease_ms = fdp.ConsumeIntegral<uint32_t>();
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
    o.server_public_key = Text(fdp, &store);
    o.client_public_key = Text(fdp, &store);
    o.client_secret_key = Text(fdp, &store);
  }
  o.end_job_on_close = fdp.ConsumeIntegral<int>();

  char err[128];
  std::memset(err, 'x', sizeof(err));
  const size_t err_len = fdp.ConsumeIntegralInRange<size_t>(0, sizeof(err));
  crux_client* c = nullptr;
  const bool null_out = fdp.ConsumeIntegralInRange<int>(0, 15) == 0;
  const int rc =
      crux_client_create(&o, null_out ? nullptr : &c, err_len == 0 ? nullptr : err, err_len);
  if (rc == CRUX_OK) {
    if (c == nullptr) crux::fuzz::Violated("create succeeded without a client");
    LiveClientCalls(c, fdp);
    crux_client_destroy(c);
  } else {
    if (c != nullptr) crux::fuzz::Violated("create failed but set *out");
    if (rc > 0) crux::fuzz::Violated("create returned a positive error");
    if (err_len > 0 && std::memchr(err, '\0', err_len) == nullptr) {
      crux::fuzz::Violated("create: err not NUL-terminated within err_len");
    }
  }
  return 0;
}
