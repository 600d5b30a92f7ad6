// Whole-file text I/O for the simulator: the one implementation in crux/textio/file.h
// (errors name the path: "<path>: cannot open: No such file or directory"; reads are limited
// to textio::kDefaultMaxFileBytes).
// Thread-safety: touches only the named file.
#ifndef CRUX_SIM_WORKLOAD_FILE_IO_H_
#define CRUX_SIM_WORKLOAD_FILE_IO_H_

#include "crux/textio/file.h"

namespace crux::sim::workload {

using textio::ReadTextFile;
using textio::WriteTextFile;  // Creates or truncates the file.

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_FILE_IO_H_
