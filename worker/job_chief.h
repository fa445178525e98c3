// JobChief: what a job's workers write, per its JobSpec: checkpoints (variables, optimizer
// slots, step and data position) through checkpoint::CheckpointManager, and on the chief
// TensorBoard scalars through chief::EventWriter. The chief writes the checkpoints users
// see to checkpoint.dir; every other worker of ranks below checkpoint.copies (0: all) keeps
// its own copy under `lockstepd --state_dir` (CheckpointCopyDir), so that a restart can
// restore with no shared file system (job_restore.h); those copies follow checkpoint.keep,
// and the folders of ended jobs go as later jobs start (checkpoint_copies.h). Without a directory
// the corresponding calls do nothing, so the training loop calls them unconditionally.
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
#include "absl/strings/string_view.h"
#include "checkpoint/checkpoint.h"
#include "common/clock.h"
#include "distribute/trainer.h"
#include "lockstep/v1/assignment.pb.h"
#include "lockstep/v1/checkpoint.pb.h"
#include "worker/chief/event_writer.h"
#include "worker/eval_link.h"
#include "worker/job_input.h"

namespace lockstep {
namespace worker {

class JobChief {
 public:
  // The directories' errors (INVALID_ARGUMENT naming checkpoint.dir / summaries.dir). A
  // worker's copy directory under `state_dir` ("" for none) that cannot be written costs a
  // warning, not the job. With a `state_dir`, the copies of other jobs beyond the
  // `retained_copy_jobs` most recently written are deleted first (checkpoint_copies.h;
  // a failure costs a warning).
  static absl::StatusOr<std::unique_ptr<JobChief>> Create(const v1::Partition& partition,
                                                          Clock* clock,
                                                          const std::string& state_dir = "",
                                                          int retained_copy_jobs = 2);

  // Writes a checkpoint after `step` steps with the input's `position` (DataPositionAfter);
  // returns its path ("" when none is written).
  absl::StatusOr<std::string> SaveCheckpoint(int64_t step, const distribute::Trainer& trainer,
                                             const v1::DataPosition& position);
  // One Event of scalars at `step` (tags from chief::summary_tags), in the event file at
  // once (EventWriter flushes each event), so TensorBoard sees it while the job trains.
  absl::Status AddScalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  // Makes the event file durable (fsync), at the end of the job.
  absl::Status Flush();

  // Where the event file is ("" when none is written).
  std::string summary_dir() const;

  // The chief of a job with an evaluator: every checkpoint is also handed to `sender` (not
  // owned; outlives this), written to checkpoint.dir or not.
  void set_evaluator(CheckpointSender* sender) { evaluator_ = sender; }

 private:
  JobChief(const v1::Partition& partition, Clock* clock)
      : job_id_(partition.job_id()),
        job_uid_(partition.job_uid()),
        attempt_(partition.attempt()),
        clock_(clock) {}

  const std::string job_id_;
  const std::string job_uid_;
  const int attempt_;
  Clock* const clock_;
  std::unique_ptr<checkpoint::CheckpointManager> checkpoints_;
  std::unique_ptr<chief::EventWriter> events_;
  std::string summary_dir_;
  CheckpointSender* evaluator_ = nullptr;
};

// Where a worker keeps its copies of a job's checkpoints: <state_dir>/checkpoints/<job_uid>
// ("" without a state directory).
std::string CheckpointCopyDir(const std::string& state_dir, const v1::Partition& partition);

// Where the training input is after `batches` batches (steps times the micro-batches of a
// step), as a checkpoint records it:
// iterator_state is EncodeIteratorState(iterator_steps), the batches this worker's
// DistributedDataset handed out (DistributeOptions::start_step resumes there), always
// known; epoch (completed epochs) and element (examples of the current epoch consumed, of
// the data set's epoch as TrainEpochOf counts it) only when the epoch's length is known,
// else both 0.
v1::DataPosition DataPositionAfter(int64_t batches, const TrainEpoch& epoch,
                                   int64_t iterator_steps);

// iterator_state's format: "steps_returned=<n>" (text, so a checkpoint can be read by eye).
std::string EncodeIteratorState(int64_t steps_returned);
// INVALID_ARGUMENT naming data_position.iterator_state when `state` is not that format.
absl::StatusOr<int64_t> DecodeIteratorState(absl::string_view state);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_CHIEF_H_
