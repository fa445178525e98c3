// The rules of a JobSpec that need nothing but the spec (and the coordinator's size limits):
// the first half of lowering (lower.h runs them, then the rules that need the cluster's
// facts). Every error is INVALID_ARGUMENT and starts with the JobSpec field it is about, in
// the proto's field names ("global_batch_size: ...", "model.layers[2].dense.units: ...",
// "checkpoint.dir: ..."), so that `lockstep submit` can show the user exactly what to fix.
// Each rule is written once, here or in lower.cc; nothing downstream (workers, strategies,
// the input pipeline) checks the spec again. Stateless functions.
//
// Beyond well-formedness, a spec the workers cannot run is refused here rather than failing
// once scheduled: RECORDS data and SYNTHETIC evaluation data (the executor reads CSV and
// TFRECORD files), TFRECORD data whose `tfrecord` spec is incomplete or does not fill
// model.input_shape (named down to the feature, "data.train.tfrecord.features[0].shape[1]"),
// `epochs` when the worker cannot know the size of an epoch (streamed files: a data.eval
// source or data.eval_fraction 0), restart_policy.max_restarts > 0 without
// checkpoint.every_steps (a restart would redo every step), and the one-worker strategies
// (ONE_DEVICE, MIRRORED, CENTRAL_STORAGE) given several workers, encryption or BF16
// compression.
//
// Paths (data files, checkpoint.dir, summaries.dir) are judged here only as text: no ".."
// component and no NUL byte. A relative path is resolved under the worker's roots and an
// absolute one must lie inside them (`lockstepd --data_root/--output_root`); only the
// worker can judge that (worker/file_roots.h: a fact of its host), and it names the field too.
//
// Sizes (CheckModelSize, with the coordinator's JobLimits): the model's parameters, the
// bytes one replica holds for them (variables, gradients, optimizer slots) and the bytes of
// one replica's share of the global batch flowing through the model (every node's output,
// forward and backward). Over a limit: RESOURCE_EXHAUSTED naming the field, the figure, the
// limit and the coordinator flag that raises it.
//
// checkpoint.dir and summaries.dir are never probed here: an absolute one names a path on
// the workers that write it (inside their --output_root), not on the coordinator's host,
// and probing it there would tell a submitter what exists on the coordinator's file system.
// The chief (and every worker keeping a copy) checks and creates it when the job starts,
// and a job it cannot write fails naming the field.
#ifndef LOCKSTEP_JOBSPEC_RULES_H_
#define LOCKSTEP_JOBSPEC_RULES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace jobspec {

// The coordinator's limits on what one job may ask for (coordinator flags).
struct JobLimits {
  int64_t max_model_parameters = 1'000'000'000;  // --max_model_parameters
  int64_t max_model_bytes = int64_t{16} << 30;   // --max_model_bytes
  int64_t max_batch_bytes = int64_t{16} << 30;   // --max_batch_bytes
};

// Everything that can be checked without knowing the workers and without touching the
// file system: strategy, model (through engine's model builder), optimizer, data, batch
// size, steps/epochs, checkpoint and summary settings, communication, restart policy.
absl::Status CheckSpecRules(const v1::JobSpec& spec);

// The model's size and one replica's batch against `limits` (see above), the global batch
// split over `num_replicas` (at least 1: a job may run on one replica). Call after
// CheckSpecRules.
absl::Status CheckModelSize(const v1::JobSpec& spec, const JobLimits& limits, int64_t num_replicas);

// The global batch must split evenly over the replicas in sync.
absl::Status CheckBatchDivisible(const v1::JobSpec& spec, int64_t num_replicas);

// MULTI_WORKER_MIRRORED for STRATEGY_KIND_UNSPECIFIED.
v1::StrategyKind EffectiveStrategy(const v1::JobSpec& spec);

// Training workers the job runs on: num_workers, 1 for the one-worker strategies, 0 for
// MULTI_WORKER_MIRRORED without num_workers (every ALIVE training worker at scheduling).
int WorkersNeeded(const v1::JobSpec& spec);

}  // namespace jobspec
}  // namespace lockstep

#endif  // LOCKSTEP_JOBSPEC_RULES_H_
