// JobInput: a job's input pipeline built from its DataSpec, for one worker of a partition.
//
//   CSV (plain or .gz):   read with the spec's label column / header, features multiplied
//                         by feature_scale. When the plan holds evaluation data out
//                         (InputPlan.HELD_OUT: eval_fraction > 0, no eval source), the
//                         whole file set is read into memory and split deterministically by
//                         the job seed (data::TrainTestSplit), so every worker holds out the
//                         same examples; otherwise the files are streamed (FILE sharding can
//                         then give each worker its own files).
//   TFRECORD:             TFRecord files of tf.train.Example, the features and label the
//                         spec's `tfrecord` names (data/example_reader.h), then as CSV:
//                         scaled, held out in memory or streamed (FILE sharding by file).
//   SYNTHETIC:            one batch of seeded random features and labels, yielded forever
//                         (benchmarks: no reading, no shuffling on the step's path).
// The training source is handed to Strategy::ExperimentalDistributeDataset, which resolves
// the auto-shard policy for this worker; this class adds shuffling by (seed, epoch)
// (tf.data's reshuffle_each_iteration, keyed by the Repeat epoch), batches that drop the
// remainder (every worker runs the same number of steps), and repetition without end: the
// executor stops after the job's step count. DATA sharding is done as rebatching: every
// worker shuffles the whole set the same way, batches it by the global batch and keeps its
// slice of rows, so every step's global batch, and so the trained weights, do not depend on
// the number of workers.
//
// Ownership: a value type; the sources hold shared in-memory tensors. Thread model: build
// on one thread; the DatasetSource's iterators are each used by one thread.
#ifndef LOCKSTEP_WORKER_JOB_INPUT_H_
#define LOCKSTEP_WORKER_JOB_INPUT_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "data/element.h"
#include "distribute/auto_shard.h"
#include "distribute/distributed_dataset.h"
#include "lockstep/v1/job_plan.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace worker {

struct JobInput {
  distribute::DatasetSource train;
  distribute::AutoShardPolicy policy = distribute::AutoShardPolicy::kAuto;
  // Examples in one epoch of the training set (all workers together); -1 when unknown
  // (streamed files): then the job must give `steps`.
  int64_t train_examples = -1;
  // The evaluation set, whole (every worker evaluates the same weights on it).
  std::optional<data::Element> eval;
};

// What one epoch of a worker's training pipeline, `train.make(shard, batch_size)`, is. The
// pipeline batches `examples_per_step` examples of the data set at a time (the global
// batch with DATA sharding, which is rebatching; the worker's batch otherwise) and drops
// each epoch's last partial batch, so an epoch is floor(examples / examples_per_step)
// steps and consumes fewer examples than the data set holds. steps_per_epoch is -1 when
// the pipeline's data set size is unknown (streamed files, FILE sharding).
struct TrainEpoch {
  int64_t steps_per_epoch = -1;
  int64_t examples_per_step = 0;
};
TrainEpoch TrainEpochOf(const JobInput& input, const distribute::ShardSpec& shard,
                        int64_t batch_size);

// Micro-batches per step: optimizer.gradient_accumulation_steps, at least 1.
int64_t BatchesPerStep(const v1::JobSpec& spec);

// The job's steps: `steps`, or `epochs` of the training set. INVALID_ARGUMENT naming
// `epochs` when the training set's size is unknown or smaller than one step's batch.
absl::StatusOr<int64_t> TotalSteps(const v1::JobSpec& spec, const JobInput& input);

// The input `plan` decided (JobPlan.input: evaluation data, sharding, shuffling) of the
// spec's sources, which the lowering checked (jobspec/rules.h): nothing of the spec is
// checked again. Read errors name the file and line (CSV) or record (TFRECORD).
absl::StatusOr<JobInput> BuildJobInput(const v1::JobSpec& spec, const v1::InputPlan& plan);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_INPUT_H_
