// crux-sim: trace-driven flow-level simulator CLI (see sim_cli.h).
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "sim_cli.h"

int main(int argc, char** argv) {
  // RunSimCli turns every exception into an error message and exit code; this is the last
  // guard (e.g. memory running out while that message is written), and it does not allocate.
  try {
    return crux::simcli::RunSimCli(argc, argv, std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::fputs("crux-sim: error: out of memory\n", stderr);
  } catch (...) {
    std::fputs("crux-sim: error: internal error: unexpected exception\n", stderr);
  }
  return crux::simcli::kExitSimulation;
}
