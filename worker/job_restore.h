// Restoring a restarted job: the newest checkpoint that some worker of the new attempt
// holds whole, with no shared file system and whether or not the chief's host survived.
// Every worker keeps its own copy of each checkpoint (JobChief, checkpoint.copies), so
// at the start of an attempt after the first (RestoreAttempt):
//   1. each worker finds its newest local checkpoint of the job that reads back whole
//      (NewestLocalCheckpoint: its copy directory under `lockstepd --state_dir` and the
//      spec's checkpoint.dir where that exists on its host; a corrupt, truncated or other
//      job's file is skipped with a warning, falling back to the one before);
//   2. the workers agree through the attempt's store (AgreeOnRestore): each publishes
//      "restore/<rank>" = its newest step (0: none), reads every rank's, and takes the
//      highest step, from the lowest rank that holds it (the source);
//   3. the source's checkpoint travels to every worker over the data plane
//      (StrategyExtended::BroadcastBytes: bounded by CheckpointBytesBound, authenticated with
//      the attempt's secret, RestoreBlobOptions), each one checks it (magic, CRCs, the job)
//      and restores it (Trainer::Restore); the input resumes at its data position.
// All workers compute the same plan from the same keys, so they restore the same step or
// all start afresh (step 0). Every wait is bounded by the caller's deadline, and the store
// and collectives are abortable.
//
// Thread model: stateless functions, called on the executor's thread.
#ifndef LOCKSTEP_WORKER_JOB_RESTORE_H_
#define LOCKSTEP_WORKER_JOB_RESTORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "collectives/blob_broadcast.h"
#include "collectives/store.h"
#include "distribute/strategy.h"
#include "distribute/trainer.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/checkpoint.pb.h"

namespace lockstep {
namespace worker {

// The directories a worker looks in for the job's checkpoints: its copy directory, and the
// spec's checkpoint.dir (the chief's), each when set.
std::vector<std::string> CheckpointDirs(const std::string& state_dir,
                                        const v1::Partition& partition);

// A checkpoint read back whole from this worker's disks.
struct LocalCheckpoint {
  v1::Checkpoint checkpoint;
  std::string path;
};

// The newest checkpoint of `job_uid` in `dirs` that reads back whole; nullopt when there
// is none. Files that do not read back whole, or belong to another job, are skipped and
// logged (path and reason).
std::optional<LocalCheckpoint> NewestLocalCheckpoint(const std::vector<std::string>& dirs,
                                                     absl::string_view job_uid);

// What the workers of an attempt agreed to restore: `step` 0 means start afresh.
struct RestorePlan {
  int64_t step = 0;
  int source = -1;  // the worker rank whose copy every worker receives
};

// Publishes "restore/<rank>" = `local_step` in `store` and reads every rank's (waiting up
// to `deadline`); the highest step wins, from the lowest rank that holds it. Errors of
// the store (DEADLINE_EXCEEDED naming the rank that never published, ABORTED).
absl::StatusOr<RestorePlan> AgreeOnRestore(collectives::Store& store, int rank, int num_workers,
                                           int64_t local_step, absl::Time deadline);

// How the checkpoint of `step` travels at a restart of `partition`'s attempt: keyed from its
// secret, labelled with the step and the attempt, bounded by CheckpointBytesBound(spec).
// INVALID_ARGUMENT when the spec's model does not build.
absl::StatusOr<collectives::BlobOptions> RestoreBlobOptions(const v1::Partition& partition,
                                                            int64_t step);

// What RestoreAttempt restored.
struct Restored {
  int64_t step = 0;            // 0: started afresh
  int64_t iterator_steps = 0;  // where the input resumes (DistributeOptions::start_step)
  std::string from;            // "worker rank 1's copy (<path>)"
};

// Steps 1-3 above for this worker of `partition`; a first attempt restores nothing. On
// return every local copy of the trainer holds the agreed checkpoint's state. Errors name
// the job, the step and the source rank.
absl::StatusOr<Restored> RestoreAttempt(const v1::Partition& partition,
                                        const std::string& state_dir, collectives::Store& store,
                                        distribute::Strategy& strategy,
                                        distribute::Trainer& trainer, absl::Time deadline);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_RESTORE_H_
