// CheckpointBytesBound: the most bytes an encoded checkpoint of a job can take
// (CheckpointManager::Encode, checkpoint.h: the file header and a serialized v1::Checkpoint), from
// the job's spec alone, so that every rank of an attempt, and its evaluator, computes the same
// bound before any checkpoint travels. A receiver of a checkpoint broadcast refuses a longer
// announcement before allocating it (collectives/blob_broadcast.h): a peer cannot make it
// allocate what the job's model cannot fill.
//
// The bound: every variable's bytes, once for the variable and once per optimizer slot of a
// trainable one (momentum: 1, Adam: 2, as engine::Optimizer makes them), each tensor's name,
// shape and framing, and a fixed allowance for the rest (ids, the step, the input's position).
// Thread model: a stateless function.
#ifndef LOCKSTEP_CHECKPOINT_CHECKPOINT_BOUND_H_
#define LOCKSTEP_CHECKPOINT_CHECKPOINT_BOUND_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace checkpoint {

// What a checkpoint may hold beyond its tensors' contents: job ids, the data position, the
// file header (generous: they take well under a kilobyte).
constexpr int64_t kCheckpointFixedAllowance = int64_t{1} << 20;

// The bound for `spec`'s model and optimizer. INVALID_ARGUMENT (model.*) when the model does
// not build, or a variable's shape is not fully known.
absl::StatusOr<int64_t> CheckpointBytesBound(const v1::JobSpec& spec);

}  // namespace checkpoint
}  // namespace lockstep

#endif  // LOCKSTEP_CHECKPOINT_CHECKPOINT_BOUND_H_
