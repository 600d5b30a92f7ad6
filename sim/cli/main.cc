// crux-sim: trace-driven flow-level simulator CLI (see sim_cli.h).
#include <iostream>

#include "sim_cli.h"

int main(int argc, char** argv) {
  return crux::simcli::RunSimCli(argc, argv, std::cout, std::cerr);
}
