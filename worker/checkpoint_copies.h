// Retention of a worker's own checkpoint copies: <state_dir>/checkpoints/<job>, one folder
// per job (worker/job_chief.h, CheckpointCopyDir). Within a folder the CheckpointManager keeps
// the job's newest checkpoint.keep files; the folders themselves go here: when a job starts
// on this worker, the folders of all but the `retained_jobs` most recently written other
// jobs are deleted, so a worker's disk holds the copies of a bounded number of jobs however
// many come and go (`lockstepd --retained_checkpoint_copies`). A job between two attempts
// keeps its folder while it is among them; one deleted costs only this worker's copy (the
// restart restores from the newest checkpoint any worker holds, worker/job_restore.h).
//
// Free function without state; the caller runs one job's start at a time (the executor).
#ifndef LOCKSTEP_WORKER_CHECKPOINT_COPIES_H_
#define LOCKSTEP_WORKER_CHECKPOINT_COPIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {
namespace worker {

// Deletes the job folders under <state_dir>/checkpoints other than `current` (a folder name,
// the starting job's) and the `retained_jobs` most recently modified others; returns the
// paths deleted, oldest first. OK with nothing to do when the folder does not exist; the
// file system's error naming the path otherwise (what was deleted before it stays deleted).
absl::StatusOr<std::vector<std::string>> PruneCheckpointCopies(const std::string& state_dir,
                                                               const std::string& current,
                                                               int retained_jobs);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_CHECKPOINT_COPIES_H_
