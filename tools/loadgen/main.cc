// crux-loadgen: wiring only (signals -> stop flag, then the CLI).
#include <csignal>
#include <iostream>

#include "crux/loadgen/cli.h"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void OnSignal(int /*sig*/) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  return crux::loadgen::RunCli(argc, argv, std::cout, std::cerr, &g_stop);
}
