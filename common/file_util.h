// File-system probes that change nothing. The coordinator uses them to refuse at submit a
// job whose output directory could not be written (checkpoint.dir, summaries.dir) without
// creating that directory on its own host: the directory belongs to the chief, which
// creates it when the job starts (worker/chief/file_util.h, CheckWritable). Free functions
// without state: safe from any thread.
#ifndef LOCKSTEP_COMMON_FILE_UTIL_H_
#define LOCKSTEP_COMMON_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// Whether this process could create `dir` (mkdir -p) and write files in it, judged without
// creating or writing anything: every component of the path that exists must be a
// directory (or a link to one), and the deepest one that exists (`dir` itself when it
// exists) must be writable and searchable by this process (access(W_OK | X_OK) with the
// effective ids) and its mode must let someone write to it (so that root, whom access()
// lets write anywhere on a read-write file system, is refused /proc and /sys, mode 0555).
// Relative paths resolve against the working directory.
// On failure: INVALID_ARGUMENT "<field>: directory '<dir>' is not writable: <why>; check
// that ...", naming the job spec field (e.g. "checkpoint.dir").
// Limitation: what the file system itself refuses (a full disk, a quota, a pseudo file
// system with write bits) passes, and the chief reports it when it creates the directory.
absl::Status CheckDirWritableWithoutCreating(const std::string& dir, absl::string_view field);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_FILE_UTIL_H_
