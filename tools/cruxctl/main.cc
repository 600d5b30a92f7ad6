// cruxctl: admin CLI for cruxd. See cruxctl.h for commands, output and exit codes.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "cruxctl.h"

int main(int argc, char** argv) {
  crux::cruxctl::CruxctlEnvironment env;
  if (const char* socket = std::getenv(crux::cruxctl::kAdminSocketEnv)) {
    env.admin_socket_env = std::string(socket);
  }
  env.make_transport = crux::cruxctl::MakeZmqAdminTransport;
  return crux::cruxctl::RunCruxctl(argc, argv, std::cout, std::cerr, env);
}
