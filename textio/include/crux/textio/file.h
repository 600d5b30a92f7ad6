// Whole-file text I/O and path helpers for every Crux loader (planner specs, the daemon config,
// the simulator's scenarios, models, traces and link events).
//
// ReadTextFile errors (each message starts with the path):
//   kNotFound         "<path>: cannot open: No such file or directory"
//   kInvalidArgument  "<path>: cannot open: Permission denied" (any other open failure),
//                     "<path>: not a regular file (a directory)" / "(a FIFO, socket or device)",
//                     "<path>: too large (70000000 bytes; at most 67108864)",
//                     "<path>: read error: <reason>"
// The size is checked before reading, so a huge file is refused without being read. The bytes
// are returned as they are (no BOM or line-end handling: that is the CSV and YAML readers').
//
// Thread-safety: the functions touch only the named files; safe to call concurrently.
#ifndef CRUX_TEXTIO_FILE_H_
#define CRUX_TEXTIO_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "crux/core/base/status.h"

namespace crux::textio {

// Default ReadTextFile limit: 64 MiB (the largest shipped input, the Lingjun CSV, is 60 KB; a
// generated year-long trace is a few MB).
inline constexpr size_t kDefaultMaxFileBytes = size_t{64} << 20;

// The content of the regular file `path`, at most `max_bytes` long (see above).
core::Result<std::string> ReadTextFile(const std::string& path,
                                       size_t max_bytes = kDefaultMaxFileBytes);

// Creates or truncates `path` and writes `content`. Errors: kInvalidArgument
// "<path>: cannot create: <reason>" / "<path>: write error".
core::Status WriteTextFile(const std::string& path, std::string_view content);

// The directory part of `path`: "a/b.yaml" -> "a", "b.yaml" -> "" (the working directory).
std::string DirectoryOf(const std::string& path);

// `path` if it is absolute or `base_dir` is empty, else base_dir/path; lexically normalised
// ("a/../b" -> "b").
std::string ResolvePath(const std::string& base_dir, const std::string& path);

// True iff `path` names an existing regular file (following links).
bool IsRegularFile(const std::string& path);

}  // namespace crux::textio

#endif  // CRUX_TEXTIO_FILE_H_
