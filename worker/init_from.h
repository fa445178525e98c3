// A job's initFrom (JobSpec.init_from): the variables a first attempt starts from, read from
// a safetensors export (`lockstep export --format=safetensors`) instead of the model's
// initializers. Each worker reads the file itself (its path resolved like a data file), so
// every replica starts from the same bytes with nothing to broadcast. Every variable of the
// model must be in the file with its dtype and shape; the refusal names each one missing or
// mis-shaped. Tensors the model lacks (optimizer slots, an export's extras) are ignored: the
// optimizer starts afresh, at step 0.
//
// Thread model: stateless functions, called on the executor's thread.
#ifndef LOCKSTEP_WORKER_INIT_FROM_H_
#define LOCKSTEP_WORKER_INIT_FROM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/trainer.h"
#include "export/weights.h"
#include "lockstep/v1/checkpoint.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace worker {

// The step-0 checkpoint that gives `model_variables` (the trainer's, for their names, dtypes
// and shapes) the values of `exported`, and the optimizer its fresh `slots`.
// INVALID_ARGUMENT "init_from.path: <path> does not fit the model: ..." naming every
// variable missing from `exported` or of another dtype or shape.
absl::StatusOr<v1::Checkpoint> InitialCheckpoint(
    const exporting::Weights& exported, const std::string& path,
    const std::vector<v1::NamedTensor>& model_variables, std::vector<v1::NamedTensor> slots);

// Reads `from` (SAFETENSORS) and restores its variables into every copy of `trainer`'s.
// Errors: the file's (NOT_FOUND, INVALID_ARGUMENT naming what is malformed), or
// InitialCheckpoint's; all prefixed "init_from.path: ".
absl::Status ApplyInitFrom(const v1::InitFrom& from, distribute::Trainer& trainer);

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_INIT_FROM_H_
