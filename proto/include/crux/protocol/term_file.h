// TermFile: the highest cruxd leader term an agent has accepted, kept in a small file so that a
// restarted agent still refuses a deposed leader (issue #31; docs/daemon.md, "Fencing"). Used by
// crux-switch-agent (--term-file) and crux-hostd (term_file:).
//
// Format (text, at most 4 KiB; written whole):
//   crux-leader-term 1          <- the format's name and version
//   owner tor0                  <- whose term it is (the switch or host name)
//   term 5                      <- decimal, > 0
// The file is written atomically (a temp file beside it, fsync, rename, fsync of the directory),
// so a crash leaves the old or the new content whole, never a torn one.
//
// Failing closed: a file that exists but cannot be read, is not in this format, or names another
// owner is an error at Open (the agent does not start): starting from term 0 would accept the
// first push of a deposed leader, the very thing the file prevents. The error names the path and
// says how to recover (check the file; delete it only when the cluster's leader is known).
// A missing file is a first start: term 0.
//
// Thread-safety: not thread-safe (one owner thread: the agent's loop).
#ifndef CRUX_PROTOCOL_TERM_FILE_H_
#define CRUX_PROTOCOL_TERM_FILE_H_

#include <cstdint>
#include <string>

#include "crux/core/base/status.h"

namespace crux::protocol {

class TermFile {
 public:
  // Reads `path`; a missing file (or directory) is term 0. Errors (kFailedPrecondition, starting
  // with the path): unreadable, not a regular file, malformed, another owner.
  static core::Result<TermFile> Open(std::string path, std::string owner);

  uint64_t term() const { return term_; }
  const std::string& path() const { return path_; }

  // Records `term` durably before returning Ok (see the file comment), creating the directory
  // when missing; a term not above term() is a no-op. On error (kUnavailable, naming the path
  // and the call) term() is unchanged.
  core::Status Raise(uint64_t term);

 private:
  TermFile(std::string path, std::string owner, uint64_t term)
      : path_(std::move(path)), owner_(std::move(owner)), term_(term) {}

  std::string path_;
  std::string owner_;
  uint64_t term_ = 0;
};

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_TERM_FILE_H_
