#include "checkpoint/checkpoint_bound.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/dtype.h"
#include "engine/graph.h"
#include "engine/model_builder.h"

namespace lockstep {
namespace checkpoint {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t SaturatingAdd(int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; }
int64_t SaturatingMul(int64_t a, int64_t b) { return b != 0 && a > kMax / b ? kMax : a * b; }

// A NamedTensor's framing beyond its content: the name (a slot's is the variable's plus a
// suffix), the dtype, up to 11 bytes per dimension, and the fields' tags and lengths.
int64_t TensorFraming(const engine::VariableInfo& v) {
  return 128 + 2 * static_cast<int64_t>(v.name.size()) + 11 * v.shape.rank();
}

}  // namespace

absl::StatusOr<int64_t> CheckpointBytesBound(const v1::JobSpec& spec) {
  LS_ASSIGN_OR_RETURN(const engine::Graph graph, engine::BuildModel(spec.model()));
  const v1::OptimizerSpec& optimizer = spec.optimizer();
  const int64_t slots = optimizer.has_adam() ? 2 : optimizer.has_momentum() ? 1 : 0;
  int64_t bound = kCheckpointFixedAllowance;
  for (const engine::VariableInfo& v : graph.Variables()) {
    if (!v.shape.fully_known()) {
      return absl::InvalidArgumentError(absl::StrCat("model: variable \"", v.name, "\" has shape ",
                                                     v.shape.ToString(), ", not fully known"));
    }
    const int64_t copies = 1 + (v.trainable ? slots : 0);
    const int64_t content =
        SaturatingMul(v.shape.num_elements(), static_cast<int64_t>(DTypeSize(v.dtype)));
    bound = SaturatingAdd(bound, SaturatingMul(SaturatingAdd(content, TensorFraming(v)), copies));
  }
  return bound;
}

}  // namespace checkpoint
}  // namespace lockstep
