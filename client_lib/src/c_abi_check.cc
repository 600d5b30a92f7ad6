// crux_client_c_abi_check: a program that uses libcrux_client.so only through the C ABI, the way
// a NCCL plugin or another language would (it links nothing else of Crux, so the library's
// private protobuf registrations are the only ones in the process). Run by
// tests/client_lib/c_abi_test.cc; prints one line per check and exits 0 when all pass.
//
//   crux_client_c_abi_check /path/to/libcrux_client.so
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "crux/client/crux_client.h"

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LIBCRUX_CLIENT_SO\n", argv[0]);
    return 2;
  }
  // Visibility: the C ABI and the C++ API are exported, internals and protocol code are not.
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
  Check(lib != nullptr, "library already loaded by the dynamic linker");
  if (lib != nullptr) {
    Check(dlsym(lib, "crux_client_create") != nullptr, "crux_client_create exported");
    Check(dlsym(lib, "crux_client_record_comm") != nullptr, "crux_client_record_comm exported");
    Check(dlsym(lib, "crux_client_wait_newer_assignment") != nullptr,
          "crux_client_wait_newer_assignment exported");
    Check(dlsym(lib, "_ZN4crux6client6Client5NowNsEv") != nullptr, "C++ Client::NowNs exported");
    Check(dlsym(lib, "_ZN4crux6client8internal8Profiler7ConsumeERKNS1_5EventE") == nullptr,
          "internal Profiler::Consume hidden");
    Check(dlsym(lib, "_ZN4crux8protocol6EncodeB5cxx11ERKNS_2v18EnvelopeE") == nullptr &&
              dlsym(lib, "_ZN4crux8protocol6EncodeERKNS_2v18EnvelopeE") == nullptr,
          "protocol::Encode hidden");
    dlclose(lib);
  }

  crux_client_options o;
  crux_client_options_init(&o);
  Check(o.struct_size == sizeof(o) && o.end_job_on_close == 1, "options_init defaults");
  const char* hosts[] = {"host0", "host1"};
  o.endpoint = "tcp://127.0.0.1:1";
  o.hosts = hosts;
  o.num_hosts = 2;
  char err[256] = {0};
  crux_client* c = nullptr;
  Check(crux_client_create(&o, &c, err, sizeof(err)) == CRUX_ERR_INVALID_ARGUMENT &&
            std::strstr(err, "options.job_id") != nullptr && c == nullptr,
        "missing job id refused, message names options.job_id");
  char tiny[8];
  Check(crux_client_create(&o, &c, tiny, sizeof(tiny)) == CRUX_ERR_INVALID_ARGUMENT &&
            std::strlen(tiny) == 7,
        "error message truncated and terminated");
  crux_client_options small = o;
  small.struct_size = 8;
  Check(crux_client_create(&small, &c, err, sizeof(err)) == CRUX_ERR_INVALID_ARGUMENT,
        "too small struct_size refused");

  o.job_id = "c-abi-job";
  o.end_job_on_close = 0;
  int rc = crux_client_create(&o, &c, err, sizeof(err));
  Check(rc == CRUX_OK && c != nullptr, "create with valid options (no daemon needed)");
  if (c == nullptr) return 1;
  uint32_t peer = 99;
  Check(crux_client_add_peer(c, "host0/nic0", "host1/nic0", &peer, err, sizeof(err)) == CRUX_OK &&
            peer == 0,
        "add_peer returns id 0");
  Check(crux_client_add_peer(c, "bad nic", "host1/nic0", &peer, err, sizeof(err)) ==
            CRUX_ERR_INVALID_ARGUMENT,
        "add_peer refuses a bad NIC name");
  // The hot path works without a daemon (it never waits for one: a ring push per call).
  int64_t t0 = crux_now_ns();
  for (int i = 0; i < 1000; ++i) {
    crux_client_begin_iteration(c);
    crux_client_comm_start(c, peer, 4096);
    crux_client_comm_end(c, peer);
    crux_client_record_comm(c, peer, 1, t0, t0 + 1);
    crux_client_end_iteration(c);
  }
  crux_assignment_info info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  Check(crux_client_assignment(c, &info) == 0, "no assignment without a daemon");
  Check(crux_client_wait_assignment(c, 0, 10, &info) == 0, "wait_assignment times out");
  Check(crux_client_wait_newer_assignment(c, 0, 0, 10, &info) == 0,
        "wait_newer_assignment times out");
  Check(crux_client_nccl_traffic_class(c, 0) == -1, "no traffic class yet");
  Check(crux_client_udp_sport(c, "host0/nic0", "host1/nic0") == 0, "no port yet");
  crux_client_destroy(c);
  crux_client_destroy(nullptr);
  std::printf("%s\n", failures == 0 ? "all checks passed" : "checks FAILED");
  return failures == 0 ? 0 : 1;
}
