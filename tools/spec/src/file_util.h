// Internal: whole-file reads for the spec loaders. Thread-safe.
#ifndef CRUX_SPEC_SRC_FILE_UTIL_H_
#define CRUX_SPEC_SRC_FILE_UTIL_H_

#include <string>

#include "crux/core/status.h"

namespace crux::spec::internal {

// The file's bytes. kNotFound when it does not exist, kInvalidArgument when it is not a regular
// readable file; messages name the path.
core::Result<std::string> ReadTextFile(const std::string& path);

// The directory part of `path` ("" -> ".").
std::string DirectoryOf(const std::string& path);

// `path` if absolute, else base_dir/path.
std::string ResolvePath(const std::string& base_dir, const std::string& path);

bool FileExists(const std::string& path);

}  // namespace crux::spec::internal

#endif  // CRUX_SPEC_SRC_FILE_UTIL_H_
