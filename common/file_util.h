// Small POSIX file helpers shared by the chief's checkpoint and event writers: durable writes
// (write every byte, fsync the file and its directory) and errno -> absl::Status with the
// path in the message. Free functions without state: safe from any thread.
#ifndef LOCKSTEP_COMMON_FILE_UTIL_H_
#define LOCKSTEP_COMMON_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// "<what> '<path>': <strerror(err)>" with the code absl::ErrnoToStatusCode(err) gives.
absl::Status PathError(int err, absl::string_view what, absl::string_view path);

// Writes all of `data` to `fd`, retrying short writes and EINTR. `path` is for messages.
absl::Status WriteAll(int fd, absl::string_view data, absl::string_view path);

// fsync()s the directory `dir`, so that a rename or a new file in it survives a crash.
absl::Status FsyncDir(const std::string& dir);

// Reads the whole file at `path`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Creates `dir` and its missing parents (mode 0755). OK if it already exists as a directory.
absl::Status MakeDirs(const std::string& dir);

// Creates `dir` if needed, then creates, writes, fsyncs and removes a probe file in it.
// On failure: INVALID_ARGUMENT "<field>: directory '<dir>' is not writable: <why>; check
// that it is a directory this process may write to", so a job is refused at submit with a
// message naming the job spec field (e.g. "checkpoint.dir").
absl::Status CheckWritable(const std::string& dir, absl::string_view field);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_FILE_UTIL_H_
