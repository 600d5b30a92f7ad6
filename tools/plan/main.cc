// crux-plan: offline Crux planner. See plan_cli.h for flags, output and exit codes.
#include <iostream>

#include "plan_cli.h"

int main(int argc, char** argv) { return crux::plan::RunPlanCli(argc, argv, std::cout, std::cerr); }
