// Uses the installed libcrux_client.so the way an application would: the C++ API (including
// crux::core::Status from the installed crux/core/base/status.h) and the C ABI. No daemon is
// needed: the client starts and retries in the background (fail-static). Prints "consumer ok".
#include <cstdio>
#include <string>

#include "crux/client/client.h"
#include "crux/client/crux_client.h"
#include "crux/client/nccl.h"

int main() {
  crux::client::ClientOptions bad;
  auto refused = crux::client::Client::Start(bad);
  if (refused.ok()) return 1;
  const std::string why = refused.status().ToString();  // Exported from the .so.
  if (why.find("INVALID_ARGUMENT") == std::string::npos) return 2;
  std::printf("refused as expected: %s\n", why.c_str());

  crux::client::ClientOptions o;
  o.endpoint = "tcp://127.0.0.1:1";
  o.job_id = "consumer";
  o.placement = {{"host0", 1, {}}};
  o.end_job_on_close = false;
  auto client = crux::client::Client::Start(o);
  if (!client.ok()) return 3;
  (*client)->BeginIteration();
  (*client)->EndIteration();
  crux::client::Assignment a;
  a.dscp = 26;
  if (crux::client::NcclTrafficClass(a) != 104) return 4;
  (*client)->Close();

  crux_client_options c;
  crux_client_options_init(&c);
  const char* hosts[] = {"host0"};
  c.endpoint = "tcp://127.0.0.1:1";
  c.job_id = "consumer-c";
  c.hosts = hosts;
  c.num_hosts = 1;
  c.end_job_on_close = 0;
  crux_client* cc = nullptr;
  char err[256];
  if (crux_client_create(&c, &cc, err, sizeof err) != CRUX_OK) return 5;
  crux_client_begin_iteration(cc);
  crux_client_end_iteration(cc);
  crux_client_destroy(cc);
  std::printf("consumer ok\n");
  return 0;
}
