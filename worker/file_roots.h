// FileRoots: the directories a worker may read job data from (`lockstepd --data_root`) and
// write job outputs under (`--output_root`: checkpoint.dir, summaries.dir). A job spec
// comes from a client; without roots, a job could make the worker read any file its user
// can (and show parts of it in errors) or write checkpoints over any directory.
//
// ResolveSpec rewrites every path of a spec to the real path the worker will use, or
// refuses the job naming the field and the roots:
//   - a relative path is taken under a root (data: the first root where it exists; outputs:
//     the first root); ".." components are refused outright;
//   - the path is resolved with realpath(3), symlinks included (an output directory that
//     does not exist yet: its nearest existing ancestor, then the rest, which cannot hold a
//     symlink since it does not exist), and must lie inside the real path of one root.
// The coordinator refuses ".." at submit (jobspec/rules.h); only the worker
// knows its roots and its file system.
// Limitation: the check and the later open are two steps; a user who can swap a symlink
// inside a root between them could still escape it. Roots should hold only files their
// operator controls.
//
// Ownership: holds the roots as given (absolute, checked by Create).
// Thread model: immutable after Create; safe from any thread.
#ifndef LOCKSTEP_WORKER_FILE_ROOTS_H_
#define LOCKSTEP_WORKER_FILE_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace worker {

class FileRoots {
 public:
  // `data` and `output`: absolute directories (they need not exist yet: a path is only ever
  // accepted inside a root that exists). INVALID_ARGUMENT naming --data_root or
  // --output_root for an empty list, a relative root or one with a ".." component.
  static absl::StatusOr<FileRoots> Create(std::vector<std::string> data,
                                          std::vector<std::string> output);

  // The real path of data file `path` (the job field `field`, e.g. "data.train.files[0]").
  // INVALID_ARGUMENT naming the field, the path and the roots, and the flag to set.
  absl::StatusOr<std::string> ResolveData(const std::string& path, const std::string& field) const;
  // The real path an output directory (checkpoint.dir, summaries.dir) will have.
  absl::StatusOr<std::string> ResolveOutput(const std::string& path,
                                            const std::string& field) const;
  // Every path of `spec` (data.train.files, data.eval.files, checkpoint.dir, summaries.dir)
  // replaced by its resolved path; the first refusal otherwise.
  absl::Status ResolveSpec(v1::JobSpec* spec) const;

  const std::vector<std::string>& data() const { return data_; }
  const std::vector<std::string>& output() const { return output_; }

 private:
  FileRoots(std::vector<std::string> data, std::vector<std::string> output)
      : data_(std::move(data)), output_(std::move(output)) {}

  const std::vector<std::string> data_;
  const std::vector<std::string> output_;
};

// "a,b" -> {"a", "b"} (empty parts dropped): the flags' list syntax.
std::vector<std::string> SplitRoots(const std::string& list);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_FILE_ROOTS_H_
