// RunEvaluator: the work of TF_CONFIG's evaluator task for one attempt of a job
// (Partition.is_evaluator, JobSpec.evaluator), as tf.estimator's evaluator does it: outside
// the training group, it evaluates every checkpoint the chief writes, once, on the job's eval
// data (data.eval, or the data.eval_fraction held out of data.train, as the chief's own
// evaluation), and writes the eval loss and accuracy at the checkpoint's step to
// <summaries.dir>/eval (TensorBoard shows it as its own run, as TensorFlow's "eval"
// subdirectory). The checkpoints come from the chief over an EvalLink, so no shared directory
// is needed; it returns OK after the chief's end marker (the job's final checkpoint
// evaluated).
//
// Errors: FAILED_PRECONDITION when the job has no eval data; the link's errors (the chief
// went away: the collectives name the peer); DATA_LOSS for a checkpoint of another job or one
// that does not decode; INVALID_ARGUMENT when a checkpoint lacks one of the model's
// variables.
// Thread model: runs on the caller's thread; ends early when the link is aborted (through
// `publish`'s registration) or the store is.
#ifndef LOCKSTEP_WORKER_JOB_EVALUATOR_H_
#define LOCKSTEP_WORKER_JOB_EVALUATOR_H_

#include <functional>

#include "absl/status/status.h"
#include "collectives/store.h"
#include "common/clock.h"
#include "lockstep/v1/assignment.pb.h"
#include "worker/eval_link.h"

namespace lockstep {
namespace worker {

struct EvaluatorHooks {
  // Applies a change to the evaluator's JobReport (step, eval_accuracy, loss,
  // checkpoints_evaluated, summary_dir).
  std::function<void(const std::function<void(v1::JobReport&)>&)> update_report;
  // Registers the connected link so that an abort can end its waits, and marks the start of
  // the evaluations (nullptr: unregisters); ABORTED when the attempt was aborted already.
  std::function<absl::Status(EvalLink*)> publish;
};

absl::Status RunEvaluator(const v1::Partition& partition, collectives::Store* store,
                          const EvalLinkOptions& link_options, Clock* clock,
                          const EvaluatorHooks& hooks);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_EVALUATOR_H_
