// FileAdapter: writes a switch's desired QoS state as a JSON file (state_json.h format) for GitOps
// pipelines: `<directory>/<switch_name>.json`.
//
// Atomicity: the new content is written to a temporary file in the same directory, fsync'ed,
// renamed over the target, and the directory is fsync'ed; readers see the old file or the new
// one, never a torn one, even if the process dies mid-write (a stray temporary may remain; it is
// named `.<switch>.json.tmp.XXXXXX` and ignored). Idempotent: when the file already holds the
// same device state, nothing is written.
//
// Thread-safety: not thread-safe (see adapter.h). Two adapters must not share one file.
#ifndef CRUX_SWITCH_ADAPTERS_FILE_ADAPTER_H_
#define CRUX_SWITCH_ADAPTERS_FILE_ADAPTER_H_

#include <memory>
#include <string>

#include "crux/switch_adapters/adapter.h"
#include "crux/switch_adapters/registry.h"

namespace crux::switch_adapters {

struct FileOptions {
  std::string directory;    // Must exist. Required.
  std::string switch_name;  // File name stem; [A-Za-z0-9._-]+, not starting with '.'.
};

class FileAdapter final : public SwitchAdapter {
 public:
  // Errors: kInvalidArgument naming "file.directory" / "file.switch_name".
  static core::Result<std::unique_ptr<FileAdapter>> Create(FileOptions options);

  Capabilities capabilities() const override;
  // Rejects a state whose switch_name differs from the adapter's (kInvalidArgument).
  core::Result<ApplyResult> Apply(const core::SwitchQosState& desired) override;
  // kNotFound when the file does not exist; kFailedPrecondition when it does not parse.
  core::Result<core::SwitchQosState> ReadBack() override;
  // OK when the directory exists and is writable.
  core::Status Health() override;

  const std::string& path() const { return path_; }

 private:
  explicit FileAdapter(FileOptions options);
  FileOptions options_;
  std::string path_;
};

// The registry entry of this backend (registry.h): parameter --state-dir (required).
Backend FileBackend();

}  // namespace crux::switch_adapters

#endif  // CRUX_SWITCH_ADAPTERS_FILE_ADAPTER_H_
