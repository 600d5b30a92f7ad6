// Whole-file text I/O with Status errors ("<path>: cannot open: No such file or directory").
// Thread-safety: touches only the named file.
#ifndef CRUX_SIM_WORKLOAD_FILE_IO_H_
#define CRUX_SIM_WORKLOAD_FILE_IO_H_

#include <string>
#include <string_view>

#include "crux/core/status.h"

namespace crux::sim::workload {

core::Result<std::string> ReadTextFile(const std::string& path);
// Creates or truncates `path`.
core::Status WriteTextFile(const std::string& path, std::string_view content);

}  // namespace crux::sim::workload

#endif  // CRUX_SIM_WORKLOAD_FILE_IO_H_
