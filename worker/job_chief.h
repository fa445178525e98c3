// JobChief: what a job's chief writes, per its JobSpec: checkpoints (variables, optimizer
// slots, step and data position) through chief::CheckpointManager, and TensorBoard scalars
// through chief::EventWriter. On other workers, or without a directory in the spec, the
// corresponding calls do nothing, so the training loop calls them unconditionally.
//
// Ownership: owns its manager and writer; borrows the clock. Thread model: one thread (the
// executor's Run()).
#ifndef LOCKSTEP_WORKER_JOB_CHIEF_H_
#define LOCKSTEP_WORKER_JOB_CHIEF_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "distribute/trainer.h"
#include "lockstep/v1/assignment.pb.h"
#include "worker/chief/checkpoint.h"
#include "worker/chief/event_writer.h"

namespace lockstep {
namespace worker {

class JobChief {
 public:
  // The directories' errors (INVALID_ARGUMENT naming checkpoint.dir / summaries.dir).
  static absl::StatusOr<std::unique_ptr<JobChief>> Create(const v1::Partition& partition,
                                                          Clock* clock);

  // Writes a checkpoint after `step` steps; returns its path ("" when none is written).
  // `examples_per_epoch` (-1: unknown) places the data position.
  absl::StatusOr<std::string> SaveCheckpoint(int64_t step, const distribute::Trainer& trainer,
                                             int64_t global_batch, int64_t examples_per_epoch);
  // One Event of scalars at `step` (tags from chief::summary_tags).
  absl::Status AddScalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  absl::Status Flush();

  // Where the event file is ("" when none is written).
  std::string summary_dir() const;

 private:
  JobChief(const v1::Partition& partition, Clock* clock)
      : job_id_(partition.job_id()), attempt_(partition.attempt()), clock_(clock) {}

  const std::string job_id_;
  const int attempt_;
  Clock* const clock_;
  std::unique_ptr<chief::CheckpointManager> checkpoints_;
  std::unique_ptr<chief::EventWriter> events_;
  std::string summary_dir_;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_CHIEF_H_
